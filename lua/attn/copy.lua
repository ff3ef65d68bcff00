-- SPDX-License-Identifier: MIT

--- attn.copy: deep copies of modules, tensors and tables (Python's
-- copy.deepcopy as torch modules use it).
--
--   attn.deepcopy(x)    x a module, tensor or table (anything else is
--                       returned as is)
--   module:clone()      the same as attn.deepcopy(module)
--   nn.clones(module, n) -> nn.ModuleList of n deep copies (the Annotated
--                       Transformer's clones; n at most 65536)
--
-- A copied module is an instance of the same class with fresh parameters
-- and buffers holding equal values (no storage shared with the original),
-- the same requires_grad flags and training mode, copied children and
-- copied plain attributes.  As in Python, whatever appears several times
-- in the original (a parameter tied between two layers, a module used
-- twice) appears once in the copy, tied the same way.  Gradients (.grad)
-- are not copied (torch's Parameter.__deepcopy__ drops them too); functions
-- and other non-table values are shared.
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)

local M = {}

local is_tensor = attn.is_tensor

local function is_module(x)
  local nn = require "attn.nn.module"
  return nn.is_module(x)
end

local copy_value

-- A tensor: a detached copy with its own storage; nn.Parameters stay
-- parameters with the same requires_grad.
local function copy_tensor(t, memo)
  local nn = require "attn.nn.module"
  local guard <close> = attn.no_grad()
  local c = t:detach():clone()
  if nn.is_parameter(t) then
    c = nn.Parameter(c, t.requires_grad)
  elseif t.requires_grad then
    c:requires_grad_(true)
  end
  memo[t] = c
  return c
end

-- An odict of the module internals ({keys, vals, has}).
local function copy_odict(d, memo)
  local out = {keys = {}, vals = {}, has = {}}
  for i, k in ipairs(d.keys) do
    out.keys[i] = k
    out.has[k] = true
    local v = d.vals[k]
    if v ~= nil then out.vals[k] = copy_value(v, memo) end
  end
  return out
end

local function copy_module(m, memo)
  -- the same raw layout as nn's instances: each private table copied
  local c = setmetatable({}, getmetatable(m))
  memo[m] = c
  for k, v in next, m do
    if k == "_class" then
      rawset(c, k, v)
    elseif k == "_parameters" or k == "_buffers" or k == "_modules" then
      rawset(c, k, copy_odict(v, memo))
    else
      rawset(c, k, copy_value(v, memo))
    end
  end
  return c
end

local function copy_table(t, memo)
  local c = {}
  memo[t] = c
  for k, v in next, t do
    c[copy_value(k, memo)] = copy_value(v, memo)
  end
  local mt = getmetatable(t)
  if mt ~= nil then setmetatable(c, mt) end
  return c
end

copy_value = function(v, memo)
  if memo[v] ~= nil then return memo[v] end
  if is_tensor(v) then return copy_tensor(v, memo) end
  if type(v) ~= "table" then return v end
  if is_module(v) then return copy_module(v, memo) end
  return copy_table(v, memo)
end

--- deepcopy(x [, memo]) -> a deep copy of x (see the file's comment).
-- @usage
-- local copy = require "attn.copy"
-- local a = nn.Linear(2, 2)
-- local b = copy.deepcopy(a)                    -- fresh parameters with equal values
-- print(attn.equal(a.weight, b.weight), a.weight == b.weight)   -- true false
function M.deepcopy(x, memo)
  if memo ~= nil and type(memo) ~= "table" then
    error(("deepcopy: memo must be a table (got %s)"):format(type(memo)), 2)
  end
  return copy_value(x, memo or {})
end

--- clones(module, n) -> nn.ModuleList of n deep copies of module.
-- @usage
-- local layers = nn.clones(nn.Linear(4, 4), 3)                    -- a ModuleList of 3 deep copies
-- print(#layers, layers[1].weight == layers[2].weight)            -- 3 false
function M.clones(module, n)
  local nn = require "attn.nn.containers"
  if not nn.is_module(module) then
    error(("clones: module must be a module (got %s)"):format(is_tensor(module) and "attn.Tensor" or type(module)), 2)
  end
  local k = type(n) == "number" and math.tointeger(n)
  if not k or k < 0 or k > (1 << 16) then
    error(("clones: n must be an integer in 0..65536 (got %s)"):format(tostring(n)), 2)
  end
  local list = {}
  for i = 1, k do list[i] = copy_value(module, {}) end
  return nn.ModuleList(list)
end

-- Python's copy.deepcopy(x, memo=None) (attn/signature.lua)
require("attn.signature").declare(M, "copy.", {deepcopy = "x, memo=nil", clones = false})
return M
