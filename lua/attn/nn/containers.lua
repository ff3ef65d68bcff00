-- SPDX-License-Identifier: MIT

--- attn.nn.containers: Sequential, ModuleList and ModuleDict.  They add to
-- the table of attn.nn.module.
-- @submodule attn.nn
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
local nn = require "attn.nn.module"

local Module = nn.Module
local U = nn._util
local is_module, type_name, child_pairs, iterate, od_set = U.is_module, U.type_name, U.child_pairs, U.iterate,
  U.od_set

--------------------------------------------------------------------------
-- Containers
-- @section containers

-- Position (1-based, negative from the end) -> 1-based or nil.
local function abs_index(i, n)
  if math.type(i) ~= "integer" then
    if type(i) == "number" and i == math.floor(i) then i = math.tointeger(i) else return nil end
  end
  if i < 0 then i = n + 1 + i end
  if i < 1 or i > n then return nil end
  return i
end

-- A Lua table with string keys has no order, and torch registers children
-- in its dict's order (parameters(), state_dict(), the optimizer's steps):
-- refuse a table that mixes a list with other keys, or (when one_key_ok)
-- holds 2+ string keys, rather than guess an order.
local function check_ordered(fn, t, one_key_ok, level)
  local n, extra, first, names = #t, 0, nil, {}
  for k in pairs(t) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then
      extra = extra + 1
      first = first or k
      if type(k) == "string" then names[#names + 1] = k end
    end
  end
  if extra == 0 or (one_key_ok and n == 0 and extra == 1) then return end
  table.sort(names) -- only for a message that does not change from run to run
  local example = {}
  for i = 1, math.min(#names, 2) do example[i] = ("{%q, ...}"):format(names[i]) end
  if #example == 0 then example[1] = '{"name", ...}' end
  example = ("nn.%s({%s, ...})"):format(fn:match("^[%w]+"), table.concat(example, ", "))
  if n > 0 then
    error(("%s: the table mixes a list with a %s key (%s); pass a list of {name, module} pairs: %s")
      :format(fn, type(first), tostring(first), example), level + 1)
  end
  error(("%s: a Lua table with string keys has no order (torch registers in the dict's order); "
    .. "pass a list of {name, module} pairs: %s"):format(fn, example), level + 1)
end

local function add_all(self, fn, ...)
  local list, n = table.pack(...), select("#", ...)
  if n == 1 and type(list[1]) == "table" and not is_module(list[1]) then
    list = list[1]
    check_ordered(fn, list, false, 3)
    n = #list
  end
  for i = 1, n do
    local v = list[i]
    if is_module(v) then
      self:add_module(tostring(i - 1), v)
    elseif type(v) == "table" and type(v[1]) == "string" and is_module(v[2]) then
      self:add_module(v[1], v[2]) -- a {name, module} pair
    else
      error(("%s: argument %d is not a module (got %s)"):format(fn, i, type_name(v)), 3)
    end
  end
end

local Sequential = Module:extend("Sequential")
nn.Sequential = Sequential

--- Sequential(m1, m2, ...) or Sequential({m1, m2, ...}) with children named
-- "0", "1", ...; Sequential({{"name", m}, ...}) names them.  seq(x) runs
-- them in order; seq[i] (1-based) is the i-th, #seq their count.
-- @usage
-- local model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
-- print(model(attn.randn(3, 4)).shape)                            -- attn.Size([3, 1])
-- print(model[1])                                                 -- layers by 1-based position
function Sequential:init(...)
  add_all(self, "Sequential", ...)
end

function Sequential:_len()
  return #child_pairs(self)
end

function Sequential:_getitem(i)
  local c = child_pairs(self)
  local j = abs_index(i, #c)
  return j and c[j][2] or nil
end

function Sequential:_setitem(i, m)
  local c = child_pairs(self)
  local j = abs_index(i, #c)
  if not j then error(("Sequential: index %s is out of range"):format(tostring(i)), 3) end
  if not is_module(m) then error("Sequential: only modules can be stored", 3) end
  od_set(rawget(self, "_modules"), c[j][1], m)
end

--- append(m): adds module m as the next child (named by its 0-based
-- position, as torch); returns self.
-- @usage
-- local model = nn.Sequential(nn.Linear(4, 4))
-- model:append(nn.ReLU())
-- print(#model)                                                   -- 2
function Sequential:append(m)
  if not is_module(m) then error("Sequential.append: expected a module", 2) end
  self:add_module(tostring(#self), m)
  return self
end

--- forward(x): each child applied in order to the previous one's output.
function Sequential:forward(x)
  for _, c in ipairs(child_pairs(self)) do x = c[2](x) end
  return x
end

local ModuleList = Module:extend("ModuleList")
nn.ModuleList = ModuleList

--- ModuleList([{m1, m2, ...}]): children named "0", "1", ... (torch's
-- names); list[i] is 1-based (negative from the end), #list the count,
-- ipairs(list) iterates; append, extend, insert.
-- @usage
-- local layers = nn.ModuleList({nn.Linear(4, 4), nn.Linear(4, 4)})
-- local x = attn.randn(2, 4)
-- for _, layer in ipairs(layers) do x = layer(x):relu() end
-- print(#layers, x.shape)                                        -- 2 attn.Size([2, 4])
function ModuleList:init(modules)
  if modules ~= nil then self:extend(modules) end
end

function ModuleList:_len()
  return #rawget(self, "_modules").keys
end

function ModuleList:_getitem(i)
  local d = rawget(self, "_modules")
  local j = abs_index(i, #d.keys)
  return j and d.vals[d.keys[j]] or nil
end

function ModuleList:_setitem(i, m)
  local d = rawget(self, "_modules")
  local j = abs_index(i, #d.keys)
  if not j then error(("ModuleList: index %s is out of range 1..%d"):format(tostring(i), #d.keys), 3) end
  if not is_module(m) then error("ModuleList: only modules can be stored", 3) end
  d.vals[d.keys[j]] = m
end

--- append(m): adds module m at the end (child named "n", 0-based, as
-- torch); returns self.
-- @usage
-- local layers = nn.ModuleList()
-- layers:append(nn.Linear(2, 2))
-- print(#layers)                                                  -- 1
function ModuleList:append(m)
  if not is_module(m) then error(("ModuleList.append: expected a module (got %s)"):format(type_name(m)), 2) end
  self:add_module(tostring(#self), m)
  return self
end

--- extend(modules): appends each module of the Lua list modules, in
-- order; returns self.
-- @usage
-- local layers = nn.ModuleList({nn.ReLU()})
-- layers:extend({nn.Linear(2, 2), nn.Tanh()})
-- print(#layers)                                                  -- 3
function ModuleList:extend(modules)
  if type(modules) ~= "table" or is_module(modules) then
    error(("ModuleList.extend: expected a list of modules (got %s)"):format(type_name(modules)), 2)
  end
  for k in pairs(modules) do -- keys past the list would be dropped without a sign
    if not (math.type(k) == "integer" and k >= 1 and k <= #modules) then
      error(("ModuleList: expected a list of modules {m1, m2, ...}, got a table with the key %s"):format(
        type(k) == "string" and ("%q"):format(k) or tostring(k)), 2)
    end
  end
  for i = 1, #modules do
    local m = modules[i]
    if not is_module(m) then
      error(("ModuleList: element %d is not a module (got %s)"):format(i, type_name(m)), 2)
    end
    self:append(m)
  end
  return self
end

--- insert(i, m): m becomes list[i] (1-based), later ones move up.
-- @usage
-- local layers = nn.ModuleList({nn.ReLU()})
-- layers:insert(1, nn.Linear(2, 2))                               -- at the front (1-based)
-- print(layers[1])
function ModuleList:insert(i, m)
  local n = #self
  if not is_module(m) then error("ModuleList.insert: expected a module", 2) end
  i = type(i) == "number" and math.tointeger(i) or i
  if math.type(i) ~= "integer" then error("ModuleList.insert: index must be an integer", 2) end
  if i < 0 then i = n + 1 + i end
  i = math.max(1, math.min(i, n + 1))
  local d = rawget(self, "_modules")
  local mods = {}
  for k = 1, n do mods[k] = d.vals[d.keys[k]] end
  table.insert(mods, i, m)
  d.keys, d.vals, d.has = {}, {}, {}
  for k, v in ipairs(mods) do od_set(d, tostring(k - 1), v) end
end

--- forward(): raises, as torch: a ModuleList is not callable; use its
-- modules in the parent's forward.
function ModuleList:forward()
  error("ModuleList is not callable: iterate over it in the parent's forward", 2)
end

local ModuleDict = Module:extend("ModuleDict")
nn.ModuleDict = ModuleDict
local update_from

--- ModuleDict([modules]): children under string keys, md[key] / md.key.
-- modules is a list of {key, m} pairs, added in list order (torch's
-- dict order): nn.ModuleDict({{"wte", emb}, {"wpe", pos}}).  A table
-- {key = m} with one key is taken too; one with 2+ string keys raises,
-- since a Lua table has no order and the registration order (parameters(),
-- state_dict(), optimizer) would differ from torch's without a sign.
-- @usage
-- -- a list of {name, module} pairs: torch registers in the dict's order
-- local heads = nn.ModuleDict({{"cls", nn.Linear(8, 2)}, {"reg", nn.Linear(8, 1)}})
-- local x = attn.randn(4, 8)
-- print(heads.cls(x).shape, heads.reg(x).shape)                 -- attn.Size([4, 2]) attn.Size([4, 1])
function ModuleDict:init(modules)
  if modules ~= nil then update_from(self, modules, "ModuleDict") end
end

--- update(modules): adds or replaces children from a list of {key, m}
-- pairs (in list order) or a one-key table {key = m}; returns self.
-- @usage
-- local d = nn.ModuleDict()
-- d:update({proj = nn.Linear(2, 2)})
-- print(d.proj)
function ModuleDict:update(modules)
  return update_from(self, modules, "ModuleDict.update")
end

function update_from(self, modules, fn)
  if type(modules) ~= "table" or is_module(modules) then
    error(fn .. ": expected a list of {key, module} pairs", 2)
  end
  check_ordered(fn, modules, true, 2)
  if #modules > 0 then
    for i, e in ipairs(modules) do
      if type(e) ~= "table" or type(e[1]) ~= "string" or not is_module(e[2]) then
        error(("ModuleDict.update: element %d is not a {key, module} pair"):format(i), 2)
      end
      self:add_module(e[1], e[2])
    end
    return self
  end
  local keys = {}
  for k in pairs(modules) do
    if type(k) ~= "string" then error("ModuleDict: keys must be strings", 2) end
    keys[#keys + 1] = k
  end
  for _, k in ipairs(keys) do -- at most one
    if not is_module(modules[k]) then
      error(("ModuleDict: value for '%s' is not a module (got %s)"):format(k, type_name(modules[k])), 2)
    end
    self:add_module(k, modules[k])
  end
  return self
end

function ModuleDict:_len()
  return #rawget(self, "_modules").keys
end

--- keys(): the keys in order.
-- @usage
-- local d = nn.ModuleDict({{"b", nn.ReLU()}, {"a", nn.Tanh()}})
-- print(table.concat(d:keys(), " "))               -- b a
function ModuleDict:keys()
  local out = {}
  for i, k in ipairs(rawget(self, "_modules").keys) do out[i] = k end
  return out
end

--- items(): iterator over (key, module) in order.
-- @usage
-- local d = nn.ModuleDict({{"a", nn.ReLU()}, {"b", nn.Tanh()}})
-- for name, m in d:items() do print(name, m) end   -- in insertion order
function ModuleDict:items()
  return iterate(child_pairs(self))
end

--- contains(key): whether a child is registered under key (torch: `key in md`).
-- @treturn boolean
-- @usage
-- local d = nn.ModuleDict({a = nn.ReLU()})
-- print(d:contains("a"), d:contains("b"))                         -- true false; torch: "a" in d
function ModuleDict:contains(key)
  return rawget(self, "_modules").has[key] == true
end

--- forward(): raises, as torch: a ModuleDict is not callable.
function ModuleDict:forward()
  error("ModuleDict is not callable: use its modules in the parent's forward", 2)
end

-- torch's signatures (attn/signature.lua); Sequential(*args),
-- ModuleList(modules) and ModuleDict(modules) take no options table (their
-- argument is a table of modules itself: an options table could not be
-- told from a misplaced dict, which they refuse with their own message)
local signature = require "attn.signature"
signature.declare(Sequential, "nn.Sequential.", {init = false, append = false, forward = false})
signature.declare(ModuleList, "nn.ModuleList.", {init = false, append = false, extend = false,
  insert = false, forward = false})
signature.declare(ModuleDict, "nn.ModuleDict.", {init = false, update = false, keys = false, items = false,
  contains = false, forward = false})

return nn
