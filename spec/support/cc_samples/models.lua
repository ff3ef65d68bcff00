-- SPDX-License-Identifier: MIT
-- Samples for spec/calling_convention_spec.lua (its header says the form).
local attn = require "attn"
local M = {}

local function x(...) attn.manual_seed(7); return attn.randn(...) end
local A = "attention."
M[A .. "SelfAttention.init"] = function() return {false, 4, 3, 2, "rand"} end
M[A .. "SelfAttention.forward"] = function() return {attn.attention.SelfAttention(4, 3, 2), x(5, 4), true} end
M[A .. "MultiHeadAttentionWrapper.init"] = function() return {false, 4, 3, 2, 2, "rand"} end
M[A .. "CausalSelfAttention.init"] = function() return {false, 4, 3, 2, 6, 0.25, "rand", "fused"} end
M[A .. "CausalSelfAttention.forward"] = function()
  return {attn.attention.CausalSelfAttention(4, 3, 2, 6), x(5, 4), true, "renormalise"}
end
M[A .. "CrossAttention.init"] = function() return {false, 4, 3, 2, 5, "rand"} end
M[A .. "CrossAttention.forward"] = function()
  return {attn.attention.CrossAttention(4, 3, 2, 5), x(3, 4), x(6, 5), true}
end
M[A .. "MultiheadAttention.init"] = function() return {false, 4, 2, 0.25, false, true, true, 3, 5, true} end
M[A .. "MultiheadAttention.forward"] = function()
  local m = attn.attention.MultiheadAttention(4, 2, 0.0, true, false, false, nil, nil, true)
  local kpm = attn.tensor({{false, false, false, true}, {false, false, false, false}})
  local am = attn.zeros(3, 4)
  return {m, x(2, 3, 4), x(2, 4, 4), x(2, 4, 4), kpm, true, am, false, false, "bool", "additive"}
end
M[A .. "GroupedQueryAttention.init"] = function() return {false, 8, 4, 2, false, true, 0.25, true, 500.0} end
M[A .. "GroupedQueryAttention.forward"] = function()
  local m = attn.attention.GroupedQueryAttention(8, 4, 2)
  return {m, x(2, 3, 8), attn.tensor({{true, true, false}, {true, true, true}, {false, true, true}}), true,
    attn.attention.KVCache(), "bool"}
end
M[A .. "MultiQueryAttention.init"] = function() return {false, 8, 4, false, true, 0.25, true, 500.0} end
M[A .. "rope_inv_freq"] = function() return {6, 100.0} end
M[A .. "rope_cos_sin"] = function() return {6, {0, 1, 2}, 100.0} end
M[A .. "apply_rotary"] = function() return {x(2, 3, 4), x(2, 3, 4), {2, 3, 4}, 100.0} end
M[A .. "alibi_bias"] = function() return {4, 3, 5, true} end
M[A .. "PositionalEncoding.init"] = function() return {false, 6, 0.25, 20} end
M[A .. "PositionalEncoding.forward"] = function() return {attn.attention.PositionalEncoding(6, 0.0, 20), x(2, 3, 6), 4} end
M[A .. "LearnedPositionalEncoding.init"] = function() return {false, 20, 6, 0.25} end
M[A .. "LearnedPositionalEncoding.forward"] = function()
  return {attn.attention.LearnedPositionalEncoding(20, 6), x(2, 3, 6), 4}
end
M[A .. "RotaryEmbedding.init"] = function() return {false, 6, 100.0} end
M[A .. "RotaryEmbedding.forward"] = function() return {attn.attention.RotaryEmbedding(4, 100.0), x(2, 3, 4), x(2, 3, 4), {2, 3, 4}} end
M[A .. "ALiBi.init"] = function() return {false, 4, true} end
M[A .. "ALiBi.forward"] = function() return {attn.attention.ALiBi(4, true), 3, 5} end

return M
