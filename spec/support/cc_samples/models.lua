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
  return {m, x(2, 3, 4), x(2, 4, 4), x(2, 4, 4), kpm, true, am, false, false, "bool", "additive",
    attn.tensor({1, 0.5})}
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

-- bert (a tiny config; the fixture checkpoint of spec/fixtures/bert)
local bert = require "attn.bert"
local FX = (os.getenv("ATTN_SOURCE_DIR") or ".") .. "/spec/fixtures/bert"
local function tiny()
  return {vocab_size = 30, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 16,
    max_position_embeddings = 12, type_vocab_size = 2}
end
local function ids() return attn.tensor({{3, 7, 9, 4}, {3, 5, 4, 1}}):long() end
M["bert.config"] = function() return {tiny(), "cfg"} end
M["bert.json_decode"] = function() return {'{"a": [1, 2.5, "x", true, null]}', "f.json"} end
M["bert.from_pretrained"] = function() return {FX, false, true} end
M["bert.BertModel.from_pretrained"] = function() return {FX, true, false} end
M["bert.BertModel.init"] = function() return {false, tiny(), false} end
M["bert.BertModel.forward"] = function()
  attn.manual_seed(8)
  return {bert.BertModel(tiny()), ids(), attn.tensor({{1, 1, 1, 1}, {1, 1, 1, 0}}), attn.ones(2, 4):long(),
    attn.tensor({{1, 2, 3, 4}}):long(), true, true, attn.tensor({1, 0.5})}
end
local function block(name) attn.manual_seed(9); return bert[name](bert.config(tiny()), nil, "x.") end
for _, name in ipairs({"BertSelfAttention", "BertAttention", "BertLayer"}) do
  M["bert." .. name .. ".forward"] = function() return {block(name), x(2, 4, 8), nil, true, attn.tensor({1, 0.5}), n = 5} end
end
M["bert.BertEncoder.forward"] = function()
  return {block("BertEncoder"), x(2, 4, 8), nil, true, true, attn.tensor({1, 0.5}), n = 6}
end

-- attn.viz.head_importance (lua/attn/app/viz_heads.lua)
local viz_heads = require "attn.app.viz_heads"
M["viz.head_importance"] = {call = viz_heads.head_importance, args = function()
  local gates = attn.tensor({{1, -2, 0.5}, {0.25, 3, -1}})
  return {function(mask, item) return (mask * gates * item):sum() * mask:sum() end, 2, 3, {1, 2}, false, true}
end}

-- attn.viz.rollout, flow, relevance (lua/attn/app/viz_explain.lua)
local viz_explain = require "attn.app.viz_explain"
local function viz_maps(salt)
  local g = attn.Generator(salt)
  return {attn.randn({2, 2, 3, 3}, {generator = g}):softmax(-1), attn.randn({2, 2, 3, 3}, {generator = g}):softmax(-1)}
end
M["viz.rollout"] = {call = viz_explain.rollout, args = function() return {viz_maps(1), "max", false, 2} end}
M["viz.flow"] = {call = viz_explain.flow, args = function() return {viz_maps(2), "min", true, 2, true} end}
M["viz.relevance"] = {call = viz_explain.relevance, args = function() return {viz_maps(3), viz_maps(4), 2} end}
M["viz.relevance_cross"] = {call = viz_explain.relevance_cross, view = function(...) return {...} end, args = function()
  local function pair(salt) return {maps = viz_maps(salt), grads = viz_maps(salt + 1)} end
  return {pair(5), pair(7), pair(9), false, true}
end}

-- attn.viz.head_view, model_view, neuron_view (lua/attn/app/viz_html.lua;
-- the page lands in the build directory, the same path each form)
local viz_html = require "attn.app.viz_html"
local function html_path(name) return (os.getenv("ATTN_BUILD_DIR") or "/tmp") .. "/cc_" .. name .. ".html" end
for _, view in ipairs({"head_view", "model_view"}) do
  M["viz." .. view] = {call = viz_html[view], args = function()
    return {viz_maps(5), html_path(view), {"a", "b", "c"}, {"x", "y", "z"}, 2, 2, {2}, "view", {"one", "two"}}
  end}
end
M["viz.neuron_view"] = {call = viz_html.neuron_view, args = function()
  local g = attn.Generator(6)
  local qk = {q = {attn.randn({1, 2, 3, 4}, {generator = g})}, k = {attn.randn({1, 2, 2, 4}, {generator = g})}}
  return {qk, html_path("neuron_view"), {"a", "b", "c"}, {"x", "y"}, 1, 1, 2, 3, "neuron"}
end}

-- seq2seq (attn's Luong and Bahdanau attention)
local s2s = require "attn.seq2seq"
local S = "seq2seq."
local function enc_mask()
  local m = attn.ones(2, 5)
  m[{1, 5}] = 0
  return m
end
M[S .. "LuongAttention.init"] = function() return {false, 4, "dot", nil, "local-m", 1, nil, n = 7} end
M[S .. "LuongAttention.forward"] = function()
  attn.manual_seed(10)
  return {s2s.LuongAttention(4, {score = "general"}), x(2, 4), x(2, 5, 4), enc_mask(), nil, nil, n = 6}
end
M[S .. "BahdanauAttention.init"] = function() return {false, 4, 3, 5, false} end
M[S .. "BahdanauAttention.forward"] = function()
  attn.manual_seed(11)
  return {s2s.BahdanauAttention(4, 3, 5), x(2, 3), x(2, 5, 4), enc_mask(), nil, n = 5}
end
local function step()
  attn.manual_seed(12)
  return s2s.AttnDecoderStep(attn.nn.GRUCell(3, 4), s2s.LuongAttention(4, {score = "general"}))
end
M[S .. "AttnDecoderStep.init"] = function()
  attn.manual_seed(13)
  return {false, attn.nn.GRUCell(3, 4), s2s.LuongAttention(4, {score = "general"}), "luong", true, false}
end
M[S .. "AttnDecoderStep.forward"] = function() return {step(), x(2, 3), {h = x(2, 4)}, x(2, 5, 4), enc_mask(), nil, n = 6} end
M[S .. "AttnDecoderStep.decode"] = function() return {step(), x(2, 3, 3), nil, x(2, 5, 4), enc_mask(), nil, n = 6} end

return M
