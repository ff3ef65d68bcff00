-- A user script for attn_viz (src/examples/attn_viz.c): scaled dot-product
-- self-attention over the host's token embeddings.
-- The chunk returns a function the host calls as f(x, weights, tokens):
--   x        [L, D] the host's embeddings (its own buffer, not copied)
--   weights  [L, L] the host's output buffer, to be filled in place
--   tokens   the L words, for messages
-- and whose result (the context vectors) the host prints.
local attn = require "attn"

return function(x, weights, tokens)
  local L, D = x:size(1), x:size(2)
  assert(#tokens == L, "one embedding per token")
  attn.manual_seed(123)
  local d = 8
  local s = 1 / math.sqrt(D)
  local W_q, W_k, W_v = attn.randn(D, d) * s, attn.randn(D, d) * s, attn.randn(D, d) * s
  local q, k, v = x:matmul(W_q), x:matmul(W_k), x:matmul(W_v)
  local w = (q:matmul(k:t()) / math.sqrt(d)):softmax(-1)
  weights:copy_(w) -- written straight into the host's memory
  return w:matmul(v)
end
