-- SPDX-License-Identifier: MIT
--- nanoGPT (Karpathy) at its README's CPU recipe (block 64, batch 12, 4
-- layers, 4 heads, n_embd 128, dropout 0, bias false, vocab 65, AdamW lr
-- 1e-3, betas (0.9, 0.99), weight decay 0.1 on matrices, grad clip 1.0):
-- model.py and train.py's inner loop, ported from
-- scripts/bench/models/nanogpt.py.  Attention takes model.py's flash path
-- (the fused scaled_dot_product_attention with is_causal), which torch 1.13
-- lacks; its side runs the explicit masked softmax.  Built after the same
-- seed, both hold the same weights and batch.
local attn = require "attn"
local nn, F, optim = attn.nn, attn.F, attn.optim

local M = {}
local vocab_size, block_size, batch_size = 65, 64, 12
local n_layer, n_head, n_embd = 4, 4, 128
local learning_rate, weight_decay, betas, grad_clip = 1e-3, 1e-1, {0.9, 0.99}, 1.0
M.vocab_size, M.block_size, M.batch_size = vocab_size, block_size, batch_size

--- LayerNorm without a bias, as model.py's.
local LayerNorm = nn.Module:extend("LayerNorm")
function LayerNorm:init(ndim) self.weight = nn.Parameter(attn.ones(ndim)) end
function LayerNorm:forward(x) return F.layer_norm(x, {n_embd}, self.weight, nil, 1e-5) end

local CausalSelfAttention = nn.Module:extend("CausalSelfAttention")
function CausalSelfAttention:init()
  self.c_attn = nn.Linear(n_embd, 3 * n_embd, false)
  self.c_proj = nn.Linear(n_embd, n_embd, false)
end
function CausalSelfAttention:forward(x)
  local B, T, C = x:size(1), x:size(2), x:size(3)
  local q, k, v = self.c_attn(x):split(n_embd, 3)
  k = k:view(B, T, n_head, C // n_head):transpose(2, 3)
  q = q:view(B, T, n_head, C // n_head):transpose(2, 3)
  v = v:view(B, T, n_head, C // n_head):transpose(2, 3)
  local y = F.scaled_dot_product_attention(q, k, v, {is_causal = true})
  y = y:transpose(2, 3):contiguous():view(B, T, C)
  return self.c_proj(y)
end

local MLP = nn.Module:extend("MLP")
function MLP:init()
  self.c_fc = nn.Linear(n_embd, 4 * n_embd, false)
  self.gelu = nn.GELU()
  self.c_proj = nn.Linear(4 * n_embd, n_embd, false)
end
function MLP:forward(x) return self.c_proj(self.gelu(self.c_fc(x))) end

local Block = nn.Module:extend("Block")
function Block:init()
  self.ln_1 = LayerNorm(n_embd)
  self.attn = CausalSelfAttention()
  self.ln_2 = LayerNorm(n_embd)
  self.mlp = MLP()
end
function Block:forward(x)
  x = x + self.attn(self.ln_1(x))
  return x + self.mlp(self.ln_2(x))
end

local GPT = nn.Module:extend("GPT")
function GPT:init()
  local h = {}
  local wte, wpe = nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd)
  for i = 1, n_layer do h[i] = Block() end
  self.transformer = nn.ModuleDict({{"wte", wte}, {"wpe", wpe}, {"h", nn.ModuleList(h)}, {"ln_f", LayerNorm(n_embd)}})
  self.lm_head = nn.Linear(n_embd, vocab_size, false)
  self.transformer.wte.weight = self.lm_head.weight -- weight tying
  self:apply(function(m)
    if nn.isinstance(m, nn.Linear) or nn.isinstance(m, nn.Embedding) then nn.init.normal_(m.weight, 0, 0.02) end
  end)
  for name, p in self:named_parameters() do
    if name:match("c_proj%.weight$") then nn.init.normal_(p, 0, 0.02 / math.sqrt(2 * n_layer)) end
  end
end
function GPT:forward(idx, targets)
  local t = idx:size(2)
  local x = self.transformer.wte(idx) + self.transformer.wpe(attn.arange(1, t + 1))
  for _, block in ipairs(self.transformer.h) do x = block(x) end
  x = self.transformer.ln_f(x)
  local logits = self.lm_head(x)
  return F.cross_entropy(logits:view(-1, logits:size(-1)), targets:reshape(-1))
end

--- nanoGPT's estimate_mfu: 6 N + 12 L H Q T per token, N without wpe.
function M.flops_per_step()
  local n = 4 * n_layer * 3 * n_embd * n_embd + (2 * n_layer + 1) * n_embd + vocab_size * n_embd
  return (6 * n + 12 * n_layer * n_head * (n_embd // n_head) * block_size) * block_size * batch_size
end

--- model, optimizer and one batch (x, y), all from the seed
function M.setup(seed)
  attn.manual_seed(seed or 0)
  local model = GPT()
  local decay, nodecay = {}, {}
  for _, p in ipairs(model:parameters()) do
    local list = p:dim() >= 2 and decay or nodecay
    list[#list + 1] = p
  end
  local opt = optim.AdamW({{params = decay, weight_decay = weight_decay}, {params = nodecay, weight_decay = 0.0}},
    {lr = learning_rate, betas = betas})
  local data = attn.randint(1, vocab_size + 1, batch_size, block_size + 1) -- 1-based ids
  return model, opt, data:narrow(2, 1, block_size):contiguous(), data:narrow(2, 2, block_size):contiguous()
end

--- one iteration of train.py's loop (gradient_accumulation_steps 1)
function M.step(model, opt, x, y)
  for _, group in ipairs(opt.param_groups) do group.lr = learning_rate end
  local loss = model(x, y) / 1
  loss:backward()
  nn.utils.clip_grad_norm_(model:parameters(), grad_clip)
  opt:step()
  opt:zero_grad(true)
  return loss
end

return M
