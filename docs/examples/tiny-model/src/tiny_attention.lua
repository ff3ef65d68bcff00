-- A user's model: one head of causal self-attention with an output
-- projection (the kind of module a seed notebook builds), batch-first.
local attn = require "attn"
local nn = attn.nn

local TinyAttention = nn.Module:extend("TinyAttention")

function TinyAttention:init(d_model)
  self.d_model = d_model
  self.q = nn.Linear(d_model, d_model, false)
  self.k = nn.Linear(d_model, d_model, false)
  self.v = nn.Linear(d_model, d_model, false)
  self.out = nn.Linear(d_model, d_model)
end

-- x [B, T, d] -> y [B, T, d], weights [B, T, T] (row t attends to 1..t)
function TinyAttention:forward(x)
  local T = x:size(2)
  local scores = self.q(x):matmul(self.k(x):transpose(2, 3)) / math.sqrt(self.d_model)
  local future = attn.ones(T, T):triu(1):bool() -- true above the diagonal: masked
  local weights = scores:masked_fill(future, -math.huge):softmax(-1)
  return self.out(weights:matmul(self.v(x))), weights
end

return TinyAttention
