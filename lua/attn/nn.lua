-- SPDX-License-Identifier: MIT

--- attn.nn: modules after torch.nn (PyTorch 1.13), written in plain Lua.
-- The classes, containers and basic layers are in attn/nn_base.lua (its
-- header says how classes, registration and naming work); this file is
-- the aggregator on top: it returns that same table and makes the
-- modules of the files above it (attention, seq2seq, transformer, losses,
-- rnn, conv, activation) load on their first lookup.
local nn = require "attn.nn_base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
local Module = nn.Module

--------------------------------------------------------------------------
-- Attention modules (lua/attn/attention.lua) load on the first lookup of a
-- name nn does not have: attn.nn.MultiheadAttention, attn.nn.KVCache, ...
-- attention.lua requires attn.nn itself, so the lookup must not recurse
-- while it is still loading.
-- @section attention_modules_load

local attention_loading = false
setmetatable(nn, {
  __index = function(t, key)
    if attention_loading or type(key) ~= "string" then return nil end
    local attention = package.loaded["attn.attention"]
    if attention == nil then
      attention_loading = true
      local ok, res = pcall(require, "attn.attention")
      attention_loading = false
      if not ok then error(res, 2) end
      attention = res
    end
    local v = attention[key]
    if v ~= nil then rawset(t, key, v) end
    return v
  end,
})

-- >>> seq2seq (lua/attn/seq2seq.lua): attn.nn.LuongAttention,
-- attn.nn.BahdanauAttention and attn.nn.AttnDecoderStep load that file on
-- first lookup; other missing names go to any lookup set up before this.
do
  local seq2seq_names = {LuongAttention = true, BahdanauAttention = true, AttnDecoderStep = true}
  local mt = getmetatable(nn) or {}
  local fallback = mt.__index
  mt.__index = function(t, key)
    if seq2seq_names[key] then
      local v = require("attn.seq2seq")[key]
      rawset(t, key, v)
      return v
    end
    if type(fallback) == "function" then return fallback(t, key) end
    if type(fallback) == "table" then return fallback[key] end
    return nil
  end
  setmetatable(nn, mt)
end
-- <<< seq2seq

-- >>> transformer, loss modules, cloning (lua/attn/transformer.lua,
-- lua/attn/losses.lua, lua/attn/copy.lua): these names load their file on
-- first lookup; module:clone() is attn.deepcopy(module).
do
  local lazy = {TransformerEncoderLayer = "attn.transformer", TransformerDecoderLayer = "attn.transformer",
                TransformerEncoder = "attn.transformer", TransformerDecoder = "attn.transformer",
                Transformer = "attn.transformer", clones = "attn.copy"}
  for _, name in ipairs({"CrossEntropyLoss", "NLLLoss", "KLDivLoss", "MSELoss", "L1Loss", "SmoothL1Loss",
                         "HuberLoss", "BCELoss", "BCEWithLogitsLoss"}) do
    lazy[name] = "attn.losses"
  end
  local mt = getmetatable(nn)
  local fallback = mt.__index
  mt.__index = function(t, key)
    if lazy[key] then
      local v = require(lazy[key])[key]
      rawset(t, key, v)
      return v
    end
    return fallback(t, key)
  end
end

--- module:clone() -> a deep copy (attn.deepcopy): fresh parameters and
-- buffers with equal values, copied children and attributes.
function Module:clone()
  return require("attn.copy").deepcopy(self)
end
-- <<< transformer

-- >>> rnn, conv, activations (lua/attn/rnn.lua, conv.lua, activation.lua):
-- attn.nn.RNN / GRU / LSTM, Conv1d, SiLU / Mish / LeakyReLU / ELU /
-- Softplus and attn.nn.utils.rnn load those files on first lookup.
do
  local lazy_names = {RNN = "attn.rnn", GRU = "attn.rnn", LSTM = "attn.rnn", RNNBase = "attn.rnn",
    Conv1d = "attn.conv", SiLU = "attn.activation", Mish = "attn.activation",
    LeakyReLU = "attn.activation", ELU = "attn.activation", Softplus = "attn.activation"}
  local mt = getmetatable(nn) or {}
  local fallback = mt.__index
  mt.__index = function(t, key)
    local file = lazy_names[key]
    if file then
      local v = require(file)[key]
      rawset(t, key, v)
      return v
    end
    if type(fallback) == "function" then return fallback(t, key) end
    if type(fallback) == "table" then return fallback[key] end
    return nil
  end
  setmetatable(nn, mt)
  setmetatable(nn.utils, {__index = function(t, key)
    if key == "rnn" then
      local v = require("attn.rnn").utils
      rawset(t, key, v)
      return v
    end
    return nil
  end})
end
-- <<< rnn, conv, activations

return nn
