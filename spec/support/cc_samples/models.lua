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

-- transformer (torch's classes; the inputs before "/" stay positional)
local T = "transformer."
local xf = attn.transformer
local function layer_args() return {false, 4, 2, 6, 0.0, "gelu", 1e-3, true, true, "cpu", "float32"} end
M[T .. "TransformerEncoderLayer.init"] = layer_args
M[T .. "TransformerDecoderLayer.init"] = layer_args
local function enc_layer() attn.manual_seed(3); return xf.TransformerEncoderLayer(4, 2, 6, 0.0, "relu", 1e-5, true) end
local function dec_layer() attn.manual_seed(4); return xf.TransformerDecoderLayer(4, 2, 6, 0.0, "relu", 1e-5, true) end
local function causal(n) return xf.Transformer.generate_square_subsequent_mask(n) end
local function kpm(B, L) -- true = padding (torch's key_padding_mask)
  local t = attn.zeros(B, L):bool()
  t[{2, L}] = true
  return t
end
M[T .. "TransformerEncoderLayer.forward"] = function()
  return {enc_layer(), x(2, 3, 4), causal(3), kpm(2, 3), "additive", "bool"}
end
M[T .. "TransformerDecoderLayer.forward"] = function()
  return {dec_layer(), x(2, 3, 4), x(2, 5, 4), causal(3), nil, kpm(2, 3), kpm(2, 5), "additive", nil, "bool", "bool",
    n = 11}
end
M[T .. "TransformerEncoder.init"] = function() return {false, enc_layer(), 2, attn.nn.LayerNorm(4), false, false} end
M[T .. "TransformerDecoder.init"] = function() return {false, dec_layer(), 2, attn.nn.LayerNorm(4)} end
M[T .. "TransformerEncoder.forward"] = function()
  return {xf.TransformerEncoder(enc_layer(), 2), x(2, 3, 4), causal(3), kpm(2, 3), "additive", "bool"}
end
M[T .. "TransformerDecoder.forward"] = function()
  return {xf.TransformerDecoder(dec_layer(), 2), x(2, 3, 4), x(2, 5, 4), causal(3), nil, kpm(2, 3), kpm(2, 5),
    "additive", nil, "bool", "bool", n = 11}
end
M[T .. "Transformer.init"] = function()
  return {false, 4, 2, 1, 1, 6, 0.0, "gelu", nil, nil, 1e-3, true, true, "cpu", "float32", n = 15}
end
M[T .. "Transformer.forward"] = function()
  attn.manual_seed(5)
  local m = xf.Transformer(4, 2, 1, 1, 6, 0.0, "relu", nil, nil, 1e-5, true)
  return {m, x(2, 5, 4), x(2, 3, 4), nil, causal(3), nil, kpm(2, 5), kpm(2, 3), kpm(2, 5), nil, "additive", nil,
    "bool", "bool", "bool", n = 15}
end

return M
