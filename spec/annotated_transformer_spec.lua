-- SPDX-License-Identifier: MIT
-- The Annotated Transformer (Harvard NLP) ported line by line to attn:
-- make_model with clones (nn.ModuleList of attn.deepcopy copies), masks,
-- LabelSmoothing over nn.KLDivLoss(reduction = "sum"), Adam with the
-- warm-up rate through LambdaLR, dropout 0.1; four training steps against
-- torch 1.13
-- (fixture from scripts/fixtures/gen_transformer.py: the same model at
-- small sizes, torch's state_dict loaded as is).  The model code is
-- scripts/bench/models/annotated_transformer.lua's.  Token ids are 1-based
-- here (torch's + 1), so the padding id 0 is 1.
local attn = require "attn"
local fx = require "support.fixture"

local fix = fx.load("transformer_annotated")

-- The model (make_model and its modules, subsequent_mask, rate) is the
-- benchmark's port, loaded from its file so that one copy is tested here.
local at = dofile((os.getenv("ATTN_SOURCE_DIR") or ".") .. "/scripts/bench/models/annotated_transformer.lua")
local make_model, subsequent_mask, rate = at.make_model, at.subsequent_mask, at.rate

-- LabelSmoothing's forward as the article writes it (fill_, scatter_,
-- index_fill_ on the rows whose target is padding); the benchmark's is the
-- same loss written with one_hot and where, its init is the article's.
local LabelSmoothing = at.LabelSmoothing:extend("LabelSmoothing")
function LabelSmoothing:forward(x, target)
  assert(x:size(2) == self.size)
  local true_dist = x.data:clone()
  true_dist:fill_(self.smoothing / (self.size - 2))
  true_dist:scatter_(2, target.data:unsqueeze(2), self.confidence)
  true_dist[{{}, self.padding_idx}] = 0
  local mask = attn.nonzero(target.data:eq(self.padding_idx))
  if mask:dim() > 0 then
    true_dist:index_fill_(1, mask:squeeze(), 0.0)
  end
  self.true_dist = true_dist
  return self.criterion(x, true_dist:clone():detach())
end

describe("the Annotated Transformer ported to attn", function()
  it("loads torch's state_dict and matches four training steps", function()
    local s = fix.sizes
    local model = make_model(s.V, s.V, s.N, s.d_model, s.d_ff, s.h, 0.1, s.max_len)
    local sd = {}
    for _, p in ipairs(fix.state_before) do sd[p[1]] = fx.tensor(p[2]) end
    model:load_state_dict(sd) -- strict: torch's names, every one
    model:train()
    -- the clones are independent copies: distinct tensors, no shared storage
    local l1, l2 = model.encoder.layers[1], model.encoder.layers[2]
    assert.is_false(rawequal(l1.self_attn.linears[1].weight, l2.self_attn.linears[1].weight))

    local pad = s.pad
    local function ids(rows) return attn.tensor(rows, {dtype = "int64"}) end -- LongTensors, as in torch
    local src, tgt, tgt_y = ids(fix.src), ids(fix.tgt), ids(fix.tgt_y)
    local src_mask = src:ne(pad):unsqueeze(-2)
    local tgt_mask = tgt:ne(pad):unsqueeze(-2) * subsequent_mask(tgt:size(-1))
    local ntokens = tgt_y:ne(pad):sum():item()
    assert.are.equal(fix.ntokens, ntokens)

    local criterion = LabelSmoothing(s.V, pad, 0.1)
    local optimizer = attn.optim.Adam(model:parameters(), {lr = 0.5, betas = {0.9, 0.98}, eps = 1e-9})
    local scheduler = attn.optim.LambdaLR(optimizer, function(step) return rate(step, s.d_model, 1.0, 400) end)
    assert.is_true(math.abs(optimizer.param_groups[1].lr - fix.lr_used) <= 1e-12)

    -- dropout 0.1 as in the original: attn draws torch's masks after the same seed
    attn.manual_seed(fix.dropout_seed)
    local out = model(src, tgt, src_mask, tgt_mask)
    local logp = model.generator(out)
    fx.assert_close(logp, fix.logp, 1e-5, 1e-5, "log-probabilities")
    local sloss = criterion(logp:contiguous():view(-1, logp:size(-1)), tgt_y:contiguous():view(-1))
    local loss = sloss / ntokens
    fx.assert_close(loss, fix.loss, 1e-5, 1e-5, "loss")
    loss:backward()
    local params = {}
    for name, p in model:named_parameters() do params[name] = p end
    for _, g in ipairs(fix.grads) do
      fx.assert_close(params[g[1]].grad, g[2], 1e-4, 1e-4, "grad " .. g[1])
    end
    optimizer:step()
    optimizer:zero_grad()
    scheduler:step()
    assert.is_true(math.abs(optimizer.param_groups[1].lr - fix.lr_next) <= 1e-12)
    local after = model:state_dict()
    for _, p in ipairs(fix.state_after) do
      -- The key projections' biases (linears.1.bias, Lua's linears[2]) have
      -- a zero gradient in exact arithmetic (softmax ignores a shift shared
      -- by a query's scores), so both sides hold rounding noise of ~1e-9
      -- there, which Adam's first step (eps = 1e-9) turns into +-lr.
      local atol = p[1]:find("linears%.1%.bias$") and 2.5 * fix.lr_used or 1e-5
      fx.assert_close(after[p[1]], p[2], atol, 1e-4, "after the step: " .. p[1])
    end
    model:eval()
    local loss2 = attn.no_grad(function()
      local o2 = model.generator(model(src, tgt, src_mask, tgt_mask))
      return criterion(o2:contiguous():view(-1, s.V), tgt_y:contiguous():view(-1)) / ntokens
    end)
    fx.assert_close(loss2, fix.loss_after, 1e-5, 1e-5, "loss after the step")
    -- three more training steps (dropout masks after the same seeds as torch)
    model:train()
    for k, want in ipairs(fix.more_losses) do
      attn.manual_seed(fix.dropout_seed + k)
      local o = model.generator(model(src, tgt, src_mask, tgt_mask))
      local l = criterion(o:contiguous():view(-1, s.V), tgt_y:contiguous():view(-1)) / ntokens
      l:backward()
      optimizer:step()
      optimizer:zero_grad()
      scheduler:step()
      assert(math.abs(l:item() - want) <= 1e-5 + 1e-5 * math.abs(want),
        ("training step %d: loss %.9g, torch %.9g"):format(k + 1, l:item(), want))
    end
  end)
end)
