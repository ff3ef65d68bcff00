-- SPDX-License-Identifier: MIT

--- attn.nn: modules after torch.nn (PyTorch 1.13), written in plain Lua.
-- The Module class is in attn/nn/module.lua (its header says how classes,
-- registration and naming work); attn/nn/containers.lua, layers.lua and
-- parallel.lua add the containers, the basic layers, DDP and nn.utils to
-- the same table.  This file is the door on top: it returns that table
-- with all four loaded and makes the modules of the files above them
-- (attention, transformer, losses, rnn, conv, activation, copy, and the
-- application attn.app.seq2seq) load on their first lookup; attn.nn.init
-- is attn.init (torch's nn.init path: one table, two names).  No file of
-- the package requires this one.
local nn = require "attn.nn.module"
require "attn.nn.containers"
require "attn.nn.layers"
require "attn.nn.parallel"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
local Module = nn.Module

--------------------------------------------------------------------------
-- Names defined above attn.nn load their file on the first lookup
-- (attn.nn.LSTM loads attn.rnn, ...); any other missing name is looked up
-- in attn.attention (attn.nn.MultiheadAttention, attn.nn.KVCache, ...).
-- attention.lua uses nn's classes while it loads, so that lookup must not
-- recurse.
-- @section lazy_modules

local lazy = {LuongAttention = "attn.app.seq2seq", BahdanauAttention = "attn.app.seq2seq",
  AttnDecoderStep = "attn.app.seq2seq",
  TransformerEncoderLayer = "attn.transformer", TransformerDecoderLayer = "attn.transformer",
  TransformerEncoder = "attn.transformer", TransformerDecoder = "attn.transformer",
  Transformer = "attn.transformer", clones = "attn.copy",
  RNN = "attn.rnn", GRU = "attn.rnn", LSTM = "attn.rnn", RNNBase = "attn.rnn",
  Conv1d = "attn.conv", SiLU = "attn.activation", Mish = "attn.activation",
  LeakyReLU = "attn.activation", ELU = "attn.activation", Softplus = "attn.activation"}
for _, name in ipairs({"CrossEntropyLoss", "NLLLoss", "KLDivLoss", "MSELoss", "L1Loss", "SmoothL1Loss",
                       "HuberLoss", "BCELoss", "BCEWithLogitsLoss"}) do
  lazy[name] = "attn.losses"
end

local attention_loading = false
setmetatable(nn, {
  __index = function(t, key)
    if type(key) ~= "string" then return nil end
    if key == "init" then -- torch's nn.init path: the same table as attn.init
      local v = require "attn.nn_init"
      rawset(t, key, v)
      return v
    end
    local file = lazy[key]
    if file then
      local v = require(file)[key]
      rawset(t, key, v)
      return v
    end
    if attention_loading then return nil end
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
setmetatable(nn.utils, {__index = function(t, key)
  if key == "rnn" then
    local v = require("attn.rnn").utils
    rawset(t, key, v)
    return v
  end
  return nil
end})

--- module:clone() -> a deep copy (attn.deepcopy): fresh parameters and
-- buffers with equal values, copied children and attributes.
-- @usage
-- local a = nn.Linear(3, 3)
-- local b = a:clone()                               -- a deep copy with its own parameters
-- b.weight.data:zero_()
-- print(a.weight:abs():sum():item() > 0)            -- true: a is untouched
function Module:clone()
  return require("attn.copy").deepcopy(self)
end
require("attn.signature").declare(Module, "nn.Module.", {clone = false})

return nn
