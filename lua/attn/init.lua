-- SPDX-License-Identifier: MIT

--- attn: a Lua-scriptable attention toolkit.
-- `local attn = require "attn"` gives this table; nothing is made global.
-- The tensor engine is the C module attn.core; this file adds what is
-- easier to write in Lua and hands back one flat namespace.  Submodules
-- (attn.nn, attn.F, attn.optim, ...) load on first use.
-- The table itself is built by attn/base.lua (which the submodules
-- require); this file is the aggregator on top of it.
local attn = require "attn.base"
-- Submodules may `require "attn"` while this file is still running.
package.loaded["attn"] = attn

local submodules = {
  nn = "attn.nn",
  F = "attn.functional",
  functional = "attn.functional",
  optim = "attn.optim",
  init = "attn.nn_init",
  gradcheck = "attn.gradcheck",
  attention = "attn.attention",
  transformer = "attn.transformer",
  losses = "attn.losses",
  copy = "attn.copy",
  seq2seq = "attn.app.seq2seq",
  plot = "attn.app.plot",
  viz = "attn.app.viz",
  data = "attn.data",
  text = "attn.app.text",
  bert = "attn.app.bert",
  dist = "attn.dist",
  rnn = "attn.rnn",
  conv = "attn.conv",
  activation = "attn.activation",
  utils = "attn.utils",
}

--- attn.deepcopy(x): a deep copy of a module, tensor or table (Python's
-- copy.deepcopy; see lua/attn/copy.lua).
-- @usage
-- local model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
-- local target = attn.deepcopy(model)            -- copy.deepcopy(model), e.g. an EMA or target network
-- print(target)
function attn.deepcopy(x, memo) return require("attn.copy").deepcopy(x, memo) end

-- Names that are fields of a submodule: attn.device (a function) and
-- attn.cuda (a table) come from attn.device, loaded on first use.
local fields = {device = "attn.device", cuda = "attn.device"}

return setmetatable(attn, {
  __index = function(t, key)
    local mod = submodules[key]
    if mod then
      local m = require(mod)
      rawset(t, key, m)
      return m
    end
    mod = fields[key]
    if mod then
      local v = require(mod)[key]
      rawset(t, key, v)
      return v
    end
    return nil
  end,
})
