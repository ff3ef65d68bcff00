-- SPDX-License-Identifier: MIT
--- The character GPT of Karpathy's "Let's build GPT" lecture (gpt.py), at
-- its small size (4 blocks, n_embd 64, 4 heads, block 32, batch 16, AdamW,
-- dropout 0), ported line by line from scripts/bench/models/char_gpt.py.
-- Built after the same seed, both hold the same weights and data.
local attn = require "attn"
local nn, F, optim = attn.nn, attn.F, attn.optim

local M = {}
local vocab_size, n_embd, n_head, n_layer, block_size, batch_size = 65, 64, 4, 4, 32, 16
local learning_rate = 1e-3
M.vocab_size, M.block_size, M.batch_size = vocab_size, block_size, batch_size

local Head = nn.Module:extend("Head")
function Head:init(head_size)
  self.key = nn.Linear(n_embd, head_size, false)
  self.query = nn.Linear(n_embd, head_size, false)
  self.value = nn.Linear(n_embd, head_size, false)
  self:register_buffer("tril", attn.tril(attn.ones(block_size, block_size)))
end
function Head:forward(x)
  local _, T, C = x:size(1), x:size(2), x:size(3)
  local k = self.key(x)
  local q = self.query(x)
  local wei = q:matmul(k:transpose(-2, -1)) * C ^ -0.5
  wei = wei:masked_fill(self.tril:narrow(1, 1, T):narrow(2, 1, T):eq(0), -math.huge)
  wei = F.softmax(wei, -1)
  local v = self.value(x)
  return wei:matmul(v)
end

local MultiHeadAttention = nn.Module:extend("MultiHeadAttention")
function MultiHeadAttention:init(num_heads, head_size)
  local heads = {}
  for i = 1, num_heads do heads[i] = Head(head_size) end
  self.heads = nn.ModuleList(heads)
  self.proj = nn.Linear(n_embd, n_embd)
end
function MultiHeadAttention:forward(x)
  local outs = {}
  for i = 1, #self.heads do outs[i] = self.heads[i](x) end
  return self.proj(attn.cat(outs, -1))
end

local FeedFoward = nn.Module:extend("FeedFoward")
function FeedFoward:init(n)
  self.net = nn.Sequential(nn.Linear(n, 4 * n), nn.ReLU(), nn.Linear(4 * n, n))
end
function FeedFoward:forward(x) return self.net(x) end

local Block = nn.Module:extend("Block")
function Block:init(n, heads)
  local head_size = n // heads
  self.sa = MultiHeadAttention(heads, head_size)
  self.ffwd = FeedFoward(n)
  self.ln1 = nn.LayerNorm(n)
  self.ln2 = nn.LayerNorm(n)
end
function Block:forward(x)
  x = x + self.sa(self.ln1(x))
  x = x + self.ffwd(self.ln2(x))
  return x
end

local BigramLanguageModel = nn.Module:extend("BigramLanguageModel")
function BigramLanguageModel:init()
  self.token_embedding_table = nn.Embedding(vocab_size, n_embd)
  self.position_embedding_table = nn.Embedding(block_size, n_embd)
  local blocks = {}
  for i = 1, n_layer do blocks[i] = Block(n_embd, n_head) end
  self.blocks = nn.Sequential(table.unpack(blocks))
  self.ln_f = nn.LayerNorm(n_embd)
  self.lm_head = nn.Linear(n_embd, vocab_size)
end
function BigramLanguageModel:forward(idx, targets)
  local T = idx:size(2)
  local tok_emb = self.token_embedding_table(idx)
  local pos_emb = self.position_embedding_table(attn.arange(1, T + 1))
  local x = tok_emb + pos_emb
  x = self.blocks(x)
  x = self.ln_f(x)
  local logits = self.lm_head(x)
  local B, C = logits:size(1), logits:size(3)
  return F.cross_entropy(logits:view(B * T, C), targets:reshape(B * T))
end

--- model, optimizer and one batch (xb, yb), all from the seed
function M.setup(seed)
  attn.manual_seed(seed or 0)
  local model = BigramLanguageModel()
  local opt = optim.AdamW(model:parameters(), {lr = learning_rate})
  local data = attn.randint(1, vocab_size + 1, batch_size, block_size + 1) -- 1-based ids
  return model, opt, data:narrow(2, 1, block_size), data:narrow(2, 2, block_size)
end

function M.step(model, opt, xb, yb)
  local loss = model(xb, yb)
  opt:zero_grad(true)
  loss:backward()
  opt:step()
  return loss
end

return M
