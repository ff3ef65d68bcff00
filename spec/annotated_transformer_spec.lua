-- SPDX-License-Identifier: MIT
-- The Annotated Transformer (Harvard NLP) ported line by line to attn:
-- make_model with clones (nn.ModuleList of attn.deepcopy copies), masks,
-- LabelSmoothing over nn.KLDivLoss(reduction = "sum"), Adam with the
-- warm-up rate through LambdaLR, dropout 0.1; four training steps against
-- torch 1.13
-- (fixture from scripts/fixtures/gen_transformer.py: the same model at
-- small sizes, torch's state_dict loaded as is).  Token ids are 1-based
-- here (torch's + 1), so the padding id 0 is 1.
local attn = require "attn"
local fx = require "support.fixture"
local nn = attn.nn

local fix = fx.load("transformer_annotated")

-- the Annotated Transformer's helper, written as its users would
local function clones(module, N)
  local list = {}
  for i = 1, N do list[i] = attn.deepcopy(module) end
  return nn.ModuleList(list)
end

local EncoderDecoder = nn.Module:extend("EncoderDecoder")
function EncoderDecoder:init(encoder, decoder, src_embed, tgt_embed, generator)
  self.encoder, self.decoder = encoder, decoder
  self.src_embed, self.tgt_embed = src_embed, tgt_embed
  self.generator = generator
end
function EncoderDecoder:forward(src, tgt, src_mask, tgt_mask)
  return self:decode(self:encode(src, src_mask), src_mask, tgt, tgt_mask)
end
function EncoderDecoder:encode(src, src_mask) return self.encoder(self.src_embed(src), src_mask) end
function EncoderDecoder:decode(memory, src_mask, tgt, tgt_mask)
  return self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)
end

local Generator = nn.Module:extend("Generator")
function Generator:init(d_model, vocab) self.proj = nn.Linear(d_model, vocab) end
function Generator:forward(x) return attn.F.log_softmax(self.proj(x), -1) end

local LayerNorm = nn.Module:extend("LayerNorm")
function LayerNorm:init(features, eps)
  self.a_2 = nn.Parameter(attn.ones(features))
  self.b_2 = nn.Parameter(attn.zeros(features))
  self.eps = eps or 1e-6
end
function LayerNorm:forward(x)
  local mean = x:mean(-1, true)
  local std = x:std(-1, true, true) -- (dim, unbiased, keepdim) as torch's positional form
  return self.a_2 * (x - mean) / (std + self.eps) + self.b_2
end

local Encoder = nn.Module:extend("Encoder")
function Encoder:init(layer, N)
  self.layers = clones(layer, N)
  self.norm = LayerNorm(layer.size)
end
function Encoder:forward(x, mask)
  for _, layer in ipairs(self.layers) do x = layer(x, mask) end
  return self.norm(x)
end

local SublayerConnection = nn.Module:extend("SublayerConnection")
function SublayerConnection:init(size, dropout)
  self.norm = LayerNorm(size)
  self.dropout = nn.Dropout(dropout)
end
function SublayerConnection:forward(x, sublayer) return x + self.dropout(sublayer(self.norm(x))) end

local EncoderLayer = nn.Module:extend("EncoderLayer")
function EncoderLayer:init(size, self_attn, feed_forward, dropout)
  self.self_attn, self.feed_forward = self_attn, feed_forward
  self.sublayer = clones(SublayerConnection(size, dropout), 2)
  self.size = size
end
function EncoderLayer:forward(x, mask)
  x = self.sublayer[1](x, function(v) return self.self_attn(v, v, v, mask) end)
  return self.sublayer[2](x, self.feed_forward)
end

local Decoder = nn.Module:extend("Decoder")
function Decoder:init(layer, N)
  self.layers = clones(layer, N)
  self.norm = LayerNorm(layer.size)
end
function Decoder:forward(x, memory, src_mask, tgt_mask)
  for _, layer in ipairs(self.layers) do x = layer(x, memory, src_mask, tgt_mask) end
  return self.norm(x)
end

local DecoderLayer = nn.Module:extend("DecoderLayer")
function DecoderLayer:init(size, self_attn, src_attn, feed_forward, dropout)
  self.size = size
  self.self_attn, self.src_attn, self.feed_forward = self_attn, src_attn, feed_forward
  self.sublayer = clones(SublayerConnection(size, dropout), 3)
end
function DecoderLayer:forward(x, memory, src_mask, tgt_mask)
  local m = memory
  x = self.sublayer[1](x, function(v) return self.self_attn(v, v, v, tgt_mask) end)
  x = self.sublayer[2](x, function(v) return self.src_attn(v, m, m, src_mask) end)
  return self.sublayer[3](x, self.feed_forward)
end

local function subsequent_mask(size)
  return attn.ones(1, size, size):triu(1):eq(0)
end

local function attention(query, key, value, mask, dropout)
  local d_k = query:size(-1)
  local scores = attn.matmul(query, key:transpose(-2, -1)) / math.sqrt(d_k)
  if mask ~= nil then scores = scores:masked_fill(mask:eq(0), -1e9) end
  local p_attn = scores:softmax(-1)
  if dropout ~= nil then p_attn = dropout(p_attn) end
  return attn.matmul(p_attn, value), p_attn
end

local MultiHeadedAttention = nn.Module:extend("MultiHeadedAttention")
function MultiHeadedAttention:init(h, d_model, dropout)
  assert(d_model % h == 0)
  self.d_k = d_model // h
  self.h = h
  self.linears = clones(nn.Linear(d_model, d_model), 4)
  self.dropout = nn.Dropout(dropout or 0.1)
end
function MultiHeadedAttention:forward(query, key, value, mask)
  if mask ~= nil then mask = mask:unsqueeze(2) end
  local nbatches = query:size(1)
  local proj = {}
  for i, x in ipairs({query, key, value}) do
    proj[i] = self.linears[i](x):view(nbatches, -1, self.h, self.d_k):transpose(2, 3)
  end
  local x
  x, self.attn = attention(proj[1], proj[2], proj[3], mask, self.dropout)
  x = x:transpose(2, 3):contiguous():view(nbatches, -1, self.h * self.d_k)
  return self.linears[-1](x)
end

local PositionwiseFeedForward = nn.Module:extend("PositionwiseFeedForward")
function PositionwiseFeedForward:init(d_model, d_ff, dropout)
  self.w_1 = nn.Linear(d_model, d_ff)
  self.w_2 = nn.Linear(d_ff, d_model)
  self.dropout = nn.Dropout(dropout)
end
function PositionwiseFeedForward:forward(x) return self.w_2(self.dropout(self.w_1(x):relu())) end

local Embeddings = nn.Module:extend("Embeddings")
function Embeddings:init(d_model, vocab)
  self.lut = nn.Embedding(vocab, d_model)
  self.d_model = d_model
end
function Embeddings:forward(x) return self.lut(x) * math.sqrt(self.d_model) end

local PositionalEncoding = nn.Module:extend("PositionalEncoding")
function PositionalEncoding:init(d_model, dropout, max_len)
  self.dropout = nn.Dropout(dropout)
  local position = attn.arange(0, max_len):unsqueeze(2)
  local div_term = (attn.arange(0, d_model, 2) * -(math.log(10000.0) / d_model)):exp()
  local angles = position * div_term -- [max_len, d_model / 2]
  -- pe[:, 0::2] = sin, pe[:, 1::2] = cos: interleave along a new last dim
  local pe = attn.stack({angles:sin(), angles:cos()}, 3):reshape(max_len, d_model)
  self:register_buffer("pe", pe:unsqueeze(1))
end
function PositionalEncoding:forward(x)
  x = x + self.pe:narrow(2, 1, x:size(2))
  return self.dropout(x)
end

local function make_model(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout, max_len)
  local c = attn.deepcopy
  local attn_ = MultiHeadedAttention(h, d_model)
  local ff = PositionwiseFeedForward(d_model, d_ff, dropout)
  local position = PositionalEncoding(d_model, dropout, max_len)
  local model = EncoderDecoder(
    Encoder(EncoderLayer(d_model, c(attn_), c(ff), dropout), N),
    Decoder(DecoderLayer(d_model, c(attn_), c(attn_), c(ff), dropout), N),
    nn.Sequential(Embeddings(d_model, src_vocab), c(position)),
    nn.Sequential(Embeddings(d_model, tgt_vocab), c(position)),
    Generator(d_model, tgt_vocab))
  for _, p in ipairs(model:parameters()) do
    if p:dim() > 1 then attn.init.xavier_uniform_(p) end
  end
  return model
end

local LabelSmoothing = nn.Module:extend("LabelSmoothing")
function LabelSmoothing:init(size, padding_idx, smoothing)
  self.criterion = nn.KLDivLoss({reduction = "sum"})
  self.padding_idx = padding_idx
  self.confidence = 1.0 - smoothing
  self.smoothing = smoothing
  self.size = size
end
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

local function rate(step, model_size, factor, warmup)
  if step == 0 then step = 1 end
  return factor * (model_size ^ -0.5 * math.min(step ^ -0.5, step * warmup ^ -1.5))
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
