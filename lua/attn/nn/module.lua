-- SPDX-License-Identifier: MIT

--- attn.nn.module: the Module class of attn.nn (parameters, buffers,
-- children, hooks, state dicts, printing).  It makes the table of attn.nn;
-- nn/containers.lua, nn/layers.lua and nn/parallel.lua add to that same
-- table, files that build modules (rnn, transformer, ...) require the
-- pieces they use, and attn.nn (nn.lua) returns the table with every name.
-- Its entries belong to attn.nn in the reference.
-- @submodule attn.nn
--
-- attn.nn: modules after torch.nn (PyTorch 1.13), written in plain Lua.
--
-- Classes.  `nn.Module:extend("Name")` makes a class; a class is called to
-- build an instance, which runs `init(self, ...)`; calling an instance runs
-- `forward(self, ...)`.  A subclass calls its parent's constructor code as
-- `Parent.init(self, ...)` (also reachable as `Class.super`):
--
--   local Net = nn.Module:extend("Net")
--   function Net:init(n) self.fc = nn.Linear(n, 2); self.act = nn.ReLU() end
--   function Net:forward(x) return self.act(self.fc(x)) end
--   local net = Net(3); local y = net(attn.randn(4, 3))
--
-- Registration follows torch's __setattr__: assigning an nn.Parameter to a
-- field registers a parameter, assigning a module registers a child, and
-- anything else (numbers, strings, plain tensors, plain Lua tables -- even
-- tables of modules: use ModuleList / ModuleDict) is a plain attribute.
-- Buffers are registered with self:register_buffer(name, tensor).  A
-- parameter, buffer or child may not take the name of a method.
--
-- Names: named_parameters(), state_dict() etc. use torch's dotted names, so
-- a torch state_dict loads as is; Sequential/ModuleList children are named
-- "0", "1", ... (0-based, like torch) while Lua indexing stays 1-based:
-- seq[1] is the child named "0".
--
-- Enumeration: parameters(), buffers(), children(), modules() give lists in
-- torch's order (shared tensors/modules once); named_parameters(),
-- named_buffers(), named_children(), named_modules() give iterators for a
-- generic for: `for name, p in m:named_parameters() do ... end`.
--
-- Numbering seen from Lua is 1-based, as everywhere in attn: Embedding ids
-- and padding_idx, Softmax/LogSoftmax dims (also in the printed module
-- tree, which otherwise reads like torch's repr).
--
-- zero_grad(set_to_none = true) sets every .grad to nil, like torch 2.x's
-- default (torch 1.13 zeroed them in place by default; pass false for that).
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)

local nn = {}

local is_tensor = attn.is_tensor

local function fmt_shape(s)
  return "[" .. table.concat(s, ", ") .. "]"
end

-- Python's repr of a number: integers as such, floats with the shortest
-- digits that round-trip, "1e-05", "0.5", "1.0", "1e+16".
local function pyrepr(x)
  if math.type(x) == "integer" then return tostring(x) end
  if x ~= x then return "nan" end
  if x == math.huge then return "inf" end
  if x == -math.huge then return "-inf" end
  local s
  for p = 0, 16 do
    s = ("%." .. p .. "e"):format(x)
    if tonumber(s) == x then break end
  end
  local sign, mant, exp = s:match("^(-?)([%d%.]+)e([-+]%d+)$")
  exp = tonumber(exp)
  local digits = mant:gsub("%.", ""):gsub("0+$", "")
  if digits == "" then digits = "0" end
  if exp < -4 or exp >= 16 then
    local m = digits:sub(1, 1)
    if #digits > 1 then m = m .. "." .. digits:sub(2) end
    return ("%s%se%s%02d"):format(sign, m, exp < 0 and "-" or "+", math.abs(exp))
  end
  if exp < 0 then return sign .. "0." .. ("0"):rep(-exp - 1) .. digits end
  if #digits <= exp + 1 then return sign .. digits .. ("0"):rep(exp + 1 - #digits) .. ".0" end
  return sign .. digits:sub(1, exp + 1) .. "." .. digits:sub(exp + 2)
end
nn._pyrepr = pyrepr

--------------------------------------------------------------------------
-- Parameters
-- @section parameters

-- Tensors made by nn.Parameter, weakly keyed so they are not kept alive.
local parameters = setmetatable({}, {__mode = "k"})

--- nn.Parameter(t [, requires_grad = true]): a leaf tensor sharing t's
-- storage, requiring grad, that modules register when it is assigned to a
-- field.  Without t: an empty tensor.
-- @usage
-- local scale = nn.Parameter(attn.ones(4))                        -- a leaf that requires grad
-- local m = nn.Module()
-- m.scale = scale                                                 -- registered by assignment
-- print(nn.is_parameter(scale), #m:parameters())                  -- true 1
function nn.Parameter(t, requires_grad)
  if t == nil then t = attn.empty(0) end
  if not is_tensor(t) then
    error(("nn.Parameter: expected a tensor (got %s)"):format(type(t)), 2)
  end
  if requires_grad ~= nil and type(requires_grad) ~= "boolean" then
    error(("nn.Parameter: requires_grad must be a boolean (got %s)"):format(type(requires_grad)), 2)
  end
  local p = t:detach()
  p:requires_grad_(requires_grad ~= false)
  parameters[p] = true
  return p
end

--- True for tensors made by nn.Parameter.
-- @usage
-- local lin = nn.Linear(2, 2)
-- print(nn.is_parameter(lin.weight), nn.is_parameter(attn.ones(2)))   -- true false
function nn.is_parameter(x)
  return parameters[x] == true
end

--------------------------------------------------------------------------
-- Ordered name -> value maps (a name may map to nil: torch's None entry)
-- @section ordered_name_value

local function odict()
  return {keys = {}, vals = {}, has = {}}
end

local function od_set(d, k, v)
  if not d.has[k] then
    d.has[k] = true
    d.keys[#d.keys + 1] = k
  end
  d.vals[k] = v
end

local function od_remove(d, k)
  if not d.has[k] then return end
  d.has[k] = nil
  d.vals[k] = nil
  for i, key in ipairs(d.keys) do
    if key == k then table.remove(d.keys, i) break end
  end
end

--------------------------------------------------------------------------
-- Classes and instances
-- @section classes_and_instances

-- The metatable shared by every module instance; members live in private
-- tables so that every assignment reaches __newindex.
local Instance = {}

local function is_module(x)
  return type(x) == "table" and getmetatable(x) == Instance
end
nn.is_module = is_module

--- Whether x is a module instance (of nn.Module or any subclass).
-- torch: isinstance(x, nn.Module).
-- @param x any value
-- @treturn boolean
-- @usage
-- print(nn.is_module(nn.ReLU()), nn.is_module(attn.ones(1)))     -- true false
-- @function is_module

local Module = {__name = "Module"}
nn.Module = Module

local ClassMeta = {}
--- `Cls.name` on a class: what the class lacks is looked up in its parent
-- (Cls.super), so subclasses inherit methods.
ClassMeta.__index = function(cls, k)
  local super = rawget(cls, "super")
  if super then return super[k] end
  return nil
end
--- `Cls(...)`: a new instance (training mode, no members yet) on which
-- Cls.init(self, ...) runs; returns it.  torch: calling the class.
ClassMeta.__call = function(cls, ...)
  local self = setmetatable({
    _class = cls,
    _parameters = odict(),
    _buffers = odict(),
    _non_persistent = {},
    _modules = odict(),
    _attrs = {training = true},
    _hooks = false, -- {pre =, fwd =, bwd =} once a hook is registered
  }, Instance)
  cls.init(self, ...)
  return self
end
--- `tostring(Cls)`: "attn.nn.Name (class)".
ClassMeta.__tostring = function(cls)
  return "attn.nn." .. cls.__name .. " (class)"
end
--- `function Cls:name() ... end` on a class: every method (a function whose
-- first parameter is self) is guarded, so that m.name() (torch's habit)
-- says to write m:name() instead of failing inside it.  The guard is one
-- metatable comparison and a tail call (see attn._misuse.guard_method).
ClassMeta.__newindex = function(cls, k, v)
  if type(k) == "string" and k:sub(1, 2) ~= "__" and attn._misuse.takes_self(v, k) then
    v = attn._misuse.guard_method(k, v, "m", "_parameters") -- a raw field of every instance
  end
  rawset(cls, k, v)
end
setmetatable(Module, ClassMeta)

--- Cls:extend(name) -> a subclass of Cls named name (shown by tostring).
-- @usage
-- local MLP = nn.Module:extend("MLP")
-- function MLP:init(d, hidden)
--   self.fc1 = nn.Linear(d, hidden)
--   self.fc2 = nn.Linear(hidden, d)
-- end
-- function MLP:forward(x) return self.fc2(attn.F.gelu(self.fc1(x))) end
-- print(MLP(4, 16)(attn.randn(2, 4)).shape)          -- attn.Size([2, 4])
function Module.extend(cls, name)
  if type(cls) ~= "table" or getmetatable(cls) ~= ClassMeta then
    error("Module.extend: call it with a colon, as Class:extend(\"Name\")", 2)
  end
  if name ~= nil and type(name) ~= "string" then
    error("Module.extend: the class name must be a string", 2)
  end
  return setmetatable({__name = name or cls.__name, super = cls}, ClassMeta)
end

--- True when module m is an instance of class cls or of a subclass.
-- @usage
-- local lin = nn.Linear(2, 2)
-- print(nn.isinstance(lin, nn.Linear), nn.isinstance(lin, nn.Module), nn.isinstance(lin, nn.ReLU))
function nn.isinstance(m, cls)
  if not is_module(m) then return false end
  local c = rawget(m, "_class")
  while c do
    if c == cls then return true end
    c = rawget(c, "super")
  end
  return false
end

--- `m.name` on a module: its parameter, buffer or child of that name, else
-- a plain attribute, else the class's method; `m[i]` (a number) is the
-- container's item where the class has one (Sequential, ModuleList).
-- Hot: every self.weight or self:forward() of a module comes here. The
-- private tables are raw fields of the instance (plain indexing finds them
-- without metamethods); names map to nil only through 'has'.
function Instance.__index(self, k)
  local d = self._parameters
  local v = d.vals[k]
  if v ~= nil or d.has[k] then return v end
  d = self._buffers
  v = d.vals[k]
  if v ~= nil or d.has[k] then return v end
  d = self._modules
  v = d.vals[k]
  if v ~= nil or d.has[k] then return v end
  v = self._attrs[k]
  if v ~= nil then return v end
  local cls = self._class
  if type(k) == "string" then return cls[k] end
  local get = cls._getitem
  if get then return get(self, k) end
  return nil
end

local function type_name(v)
  if is_tensor(v) then return nn.is_parameter(v) and "nn.Parameter" or "attn.Tensor" end
  if is_module(v) then return v:_get_name() end
  return type(v)
end

--- `m.name = v` on a module, torch's __setattr__: an nn.Parameter registers
-- a parameter, a module a child, a tensor assigned to an existing buffer
-- replaces it, nil empties a parameter/child/buffer slot, and anything else
-- is a plain attribute.  Assigning a non-parameter to a parameter's name (or
-- a non-module to a child's) raises.  `m[i] = v` sets a container's item.
function Instance.__newindex(self, k, v)
  if type(k) ~= "string" then
    local set = rawget(self, "_class")._setitem
    if set then return set(self, k, v) end
    error(("%s: cannot assign to index %s"):format(self:_get_name(), tostring(k)), 2)
  end
  local params, buffers, modules = rawget(self, "_parameters"), rawget(self, "_buffers"), rawget(self, "_modules")
  local attrs = rawget(self, "_attrs")
  if nn.is_parameter(v) then
    attrs[k] = nil
    od_remove(buffers, k); od_remove(modules, k)
    rawget(self, "_non_persistent")[k] = nil
    self:register_parameter(k, v)
  elseif params.has[k] then
    if v ~= nil then
      error(("%s: cannot assign %s as parameter '%s' (nn.Parameter or nil expected)")
        :format(self:_get_name(), type_name(v), k), 2)
    end
    params.vals[k] = nil
  elseif is_module(v) then
    attrs[k] = nil
    od_remove(params, k); od_remove(buffers, k)
    rawget(self, "_non_persistent")[k] = nil
    self:add_module(k, v)
  elseif modules.has[k] then
    if v ~= nil then
      error(("%s: cannot assign %s as child module '%s' (a module or nil expected)")
        :format(self:_get_name(), type_name(v), k), 2)
    end
    modules.vals[k] = nil
  elseif buffers.has[k] then
    if v ~= nil and not is_tensor(v) then
      error(("%s: cannot assign %s as buffer '%s' (a tensor or nil expected)")
        :format(self:_get_name(), type_name(v), k), 2)
    end
    buffers.vals[k] = v
  else
    attrs[k] = v
  end
end

-- A hooked module's hooks are in its raw field _hooks (false without):
-- {pre = {...}, fwd = {...}, bwd = {...}}, lists of {fn =, id =} in
-- registration order, replaced (never edited) when a hook is added or
-- removed, so that a hook removing hooks does not disturb the running call.
-- A raw field, so that a call without hooks pays one plain field read;
-- deepcopy copies it, as torch's deepcopy copies the hook dicts.

local run_hooked -- below, with the hook methods
local custom_record = require("attn.core")._custom_record -- identity nodes of the backward hooks

--- `m(...)`: runs m:forward(...) (an instance's own forward field first)
-- and returns its results, with the module's hooks around it when it has
-- any (register_forward_pre_hook, register_forward_hook,
-- register_full_backward_hook).  torch: module(...).
function Instance.__call(self, ...)
  -- forward is a class method unless the instance set its own: two lookups
  -- instead of the full member search of self:forward
  local f = self._attrs.forward
  if f == nil then f = self._class.forward end
  local h = self._hooks
  if not h then return f(self, ...) end
  return run_hooked(self, f, h, ...)
end

--- `tostring(m)` and print: m:to_string(), the module tree like torch's repr.
function Instance.__tostring(self)
  return self:to_string()
end

--- `#m`: the number of items of a container (Sequential, ModuleList,
-- ModuleDict); raises for other modules.  torch: len(m).
function Instance.__len(self)
  local len = rawget(self, "_class")._len
  if len then return len(self) end
  error(("%s has no length"):format(self:_get_name()), 2)
end

Instance.__name = "attn.nn.Module"

--------------------------------------------------------------------------
-- Module methods
-- @section module_methods

--- init(...): the constructor body a class defines (runs when the class is
-- called); nn.Module's own does nothing.  torch: __init__.
-- @usage
-- local Head = nn.Module:extend("Head")
-- function Head:init(d_in, d_out)                    -- torch: __init__
--   self.key = nn.Linear(d_in, d_out, false)
--   self.query = nn.Linear(d_in, d_out, false)
-- end
-- function Head:forward(x) return self.query(x):matmul(self.key(x):transpose(-2, -1)):softmax(-1) end
-- local head = Head(8, 4)
-- print(head(attn.randn(1, 5, 8)).shape)             -- attn.Size([1, 5, 5])
function Module:init() end

--- forward(...): the computation a class defines, run by calling the
-- module; nn.Module's own raises "missing the required forward", as torch.
function Module:forward()
  error(("Module [%s] is missing the required \"forward\" function"):format(self:_get_name()), 2)
end

function Module:_get_name()
  return rawget(self, "_class").__name
end

--- extra_repr(): a class's one-line summary of its settings, printed in
-- the module tree after its name (torch's extra_repr); "" by default.
-- @treturn string
function Module:extra_repr()
  return ""
end

-- An optional boolean argument (nil gives def).
local function opt_bool(v, def, fn, name)
  if v == nil then return def end
  if type(v) ~= "boolean" then error(("%s: %s must be a boolean (got %s)"):format(fn, name, type(v)), 3) end
  return v
end

local function opt_prefix(prefix, fn)
  if prefix ~= nil and type(prefix) ~= "string" then
    error(("%s: prefix must be a string (got %s)"):format(fn, type(prefix)), 3)
  end
  return prefix
end

local function check_member_name(self, name, what, fn)
  if type(name) ~= "string" then
    error(("%s: %s name should be a string (got %s)"):format(fn, what, type(name)), 3)
  end
  if name == "" then error(("%s: %s name can't be empty string \"\""):format(fn, what), 3) end
  if name:find(".", 1, true) then
    error(("%s: %s name can't contain \".\" (got \"%s\")"):format(fn, what, name), 3)
  end
  if rawget(self, "_class")[name] ~= nil or rawget(self, name) ~= nil then
    error(("%s: attribute '%s' already exists (a method of %s)"):format(fn, name, self:_get_name()), 3)
  end
end

-- Whether name is taken by a member of another kind or a plain attribute.
local function taken_elsewhere(self, name, kind)
  if kind ~= "parameter" and rawget(self, "_parameters").has[name] then return true end
  if kind ~= "buffer" and rawget(self, "_buffers").has[name] then return true end
  if kind ~= "module" and rawget(self, "_modules").has[name] then return true end
  return rawget(self, "_attrs")[name] ~= nil
end

--- register_parameter(name, p): p an nn.Parameter or nil (an empty slot,
-- like torch's None: not listed, not in the state_dict).
-- @usage
-- local m = nn.Module()
-- m:register_parameter("scale", nn.Parameter(attn.ones(1)))     -- the same as m.scale = nn.Parameter(...)
-- print(#m:parameters())                                         -- 1
function Module:register_parameter(name, p)
  check_member_name(self, name, "parameter", "register_parameter")
  if taken_elsewhere(self, name, "parameter") then
    error(("register_parameter: attribute '%s' already exists"):format(name), 2)
  end
  if p ~= nil and not nn.is_parameter(p) then
    error(("register_parameter: cannot assign %s object to parameter '%s' (nn.Parameter or nil required)")
      :format(type_name(p), name), 2)
  end
  od_set(rawget(self, "_parameters"), name, p)
end

--- register_buffer(name, t [, persistent = true]): a tensor that is part
-- of the module's state but not a parameter; persistent buffers are saved
-- in the state_dict.
-- @usage
-- local Attn = nn.Module:extend("Attn")
-- function Attn:init(T)
--   self:register_buffer("mask", attn.causal_mask(T):bool())   -- saved, not trained
-- end
-- print(Attn(4):state_dict().mask.shape)                         -- attn.Size([4, 4])
function Module:register_buffer(name, t, persistent)
  check_member_name(self, name, "buffer", "register_buffer")
  if taken_elsewhere(self, name, "buffer") then
    error(("register_buffer: attribute '%s' already exists"):format(name), 2)
  end
  if t ~= nil and not is_tensor(t) then
    error(("register_buffer: cannot assign %s object to buffer '%s' (a tensor or nil required)")
      :format(type_name(t), name), 2)
  end
  persistent = opt_bool(persistent, true, "register_buffer", "persistent")
  od_set(rawget(self, "_buffers"), name, t)
  rawget(self, "_non_persistent")[name] = (persistent == false) or nil
end

--- add_module(name, m): registers child m (or an empty slot for nil).
-- @usage
-- local m = nn.Module()
-- m:add_module("proj", nn.Linear(4, 2))            -- the same as m.proj = nn.Linear(4, 2)
-- print(m.proj)
function Module:add_module(name, m)
  check_member_name(self, name, "module", "add_module")
  if taken_elsewhere(self, name, "module") then
    error(("add_module: attribute '%s' already exists"):format(name), 2)
  end
  if m ~= nil and not is_module(m) then
    error(("add_module: %s is not a Module subclass"):format(type_name(m)), 2)
  end
  od_set(rawget(self, "_modules"), name, m)
end
Module.register_module = Module.add_module

-- Children as {name, module} pairs, skipping empty slots.
local function child_pairs(self)
  local d = rawget(self, "_modules")
  local out = {}
  for _, k in ipairs(d.keys) do
    local m = d.vals[k]
    if m ~= nil then out[#out + 1] = {k, m} end
  end
  return out
end

-- Pre-order list of {name, module}, each module once (torch's
-- named_modules); memo = false lists shared modules under every name (what
-- state_dict and load_state_dict walk).
local function collect_modules(self, prefix, memo, out)
  if memo then
    if memo[self] then return out end
    memo[self] = true
  end
  out[#out + 1] = {prefix, self}
  for _, c in ipairs(child_pairs(self)) do
    collect_modules(c[2], prefix == "" and c[1] or (prefix .. "." .. c[1]), memo, out)
  end
  return out
end

local function iterate(list)
  local i = 0
  return function()
    i = i + 1
    local e = list[i]
    if e then return e[1], e[2] end
  end
end

local function values(list)
  local out = {}
  for i, e in ipairs(list) do out[i] = e[2] end
  return out
end

-- {name, tensor} pairs of the members in field ("_parameters"/"_buffers")
-- of every module (or only self when recurse is false), each tensor once.
local function collect_members(self, field, prefix, recurse)
  prefix = prefix or ""
  local mods = recurse == false and {{prefix, self}} or collect_modules(self, prefix, {}, {})
  local seen, out = {}, {}
  for _, e in ipairs(mods) do
    local d = rawget(e[2], field)
    for _, k in ipairs(d.keys) do
      local v = d.vals[k]
      if v ~= nil and not seen[v] then
        seen[v] = true
        out[#out + 1] = {e[1] == "" and k or (e[1] .. "." .. k), v}
      end
    end
  end
  return out
end

--- Iterator over (dotted name, parameter), torch's order.
-- @usage
-- local model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
-- for name, p in model:named_parameters() do   -- an iterator, as torch's generator
--   print(name, p.shape)                       -- 0.weight [3, 4], 0.bias [3], 2.weight [1, 3], 2.bias [1]
-- end
function Module:named_parameters(prefix, recurse)
  opt_prefix(prefix, "named_parameters")
  recurse = opt_bool(recurse, true, "named_parameters", "recurse")
  return iterate(collect_members(self, "_parameters", prefix, recurse))
end

--- List of parameters in registration order (children after self's own).
-- @usage
-- local model = nn.Linear(4, 2)
-- local opt = attn.optim.SGD(model:parameters(), {lr = 0.1})   -- a list, ready for an optimiser
-- print(#model:parameters())                                     -- 2
function Module:parameters(recurse)
  recurse = opt_bool(recurse, true, "parameters", "recurse")
  return values(collect_members(self, "_parameters", "", recurse))
end

--- Iterator over (dotted name, buffer), torch's order, for a generic for.
-- torch.nn.Module.named_buffers.
-- @tparam[opt=""] string prefix prepended with a dot to every name
-- @tparam[opt=true] boolean recurse include the descendants' buffers
-- @usage
-- local m = nn.Module()
-- m:register_buffer("mask", attn.causal_mask(4))
-- for name, buf in m:named_buffers() do print(name, buf.shape) end
function Module:named_buffers(prefix, recurse)
  opt_prefix(prefix, "named_buffers")
  recurse = opt_bool(recurse, true, "named_buffers", "recurse")
  return iterate(collect_members(self, "_buffers", prefix, recurse))
end

--- List of buffers (tensors registered with register_buffer), each once,
-- in torch's order.  torch.nn.Module.buffers (a list, not a generator).
-- @tparam[opt=true] boolean recurse include the descendants' buffers
-- @treturn {Tensor,...}
-- @usage
-- local bn = nn.Module()
-- bn:register_buffer("running_mean", attn.zeros(3))
-- print(#bn:buffers())                              -- 1
function Module:buffers(recurse)
  recurse = opt_bool(recurse, true, "buffers", "recurse")
  return values(collect_members(self, "_buffers", "", recurse))
end

--- Iterator over (name, child) for the direct children, each module once.
-- torch.nn.Module.named_children.
-- @usage
-- local model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
-- for name, child in model:named_children() do print(name, child) end   -- "0" Linear..., "1" ReLU()
function Module:named_children()
  local seen, out = {}, {}
  for _, c in ipairs(child_pairs(self)) do
    if not seen[c[2]] then
      seen[c[2]] = true
      out[#out + 1] = c
    end
  end
  return iterate(out)
end

--- List of the direct children, each once.  torch.nn.Module.children.
-- @treturn {Module,...}
-- @usage
-- local model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
-- for _, child in ipairs(model:children()) do print(child) end
function Module:children()
  local out = {}
  for _, m in self:named_children() do out[#out + 1] = m end
  return out
end

--- Iterator over (name, module) for self (name "" or prefix) and every
-- descendant, pre-order.
-- @usage
-- local model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
-- for name, m in model:named_modules() do print(name == "" and "(root)" or name, m) end
function Module:named_modules(prefix)
  opt_prefix(prefix, "named_modules")
  return iterate(collect_modules(self, prefix or "", {}, {}))
end

--- List of self and every descendant, pre-order, each once.
-- torch.nn.Module.modules.
-- @treturn {Module,...}
-- @usage
-- local model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
-- print(#model:modules())                              -- 3: the Sequential and its two children
function Module:modules()
  return values(collect_modules(self, "", {}, {}))
end

--- Submodule by dotted path ("encoder.layers.0"); "" is self.
-- @usage
-- local model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU(), nn.Linear(4, 2)))
-- print(model:get_submodule("1.1"))                   -- the inner Linear(4, 2); names as torch's
function Module:get_submodule(target)
  if type(target) ~= "string" then
    error(("get_submodule: target must be a dotted path string (got %s)"):format(type_name(target)), 2)
  end
  if target == "" then return self end
  local m = self
  for part in target:gmatch("[^.]+") do
    local d = rawget(m, "_modules")
    if not d.has[part] or d.vals[part] == nil then
      error(("get_submodule: %s has no attribute `%s`"):format(m:_get_name(), part), 2)
    end
    m = d.vals[part]
  end
  return m
end

--- train([mode = true]): sets training mode on self and every descendant.
-- @usage
-- local model = nn.Dropout(0.1)
-- model:eval()
-- model:train()                                                   -- back to training mode
-- print(model.training)                                           -- true
function Module:train(mode)
  if mode == nil then mode = true end
  if type(mode) ~= "boolean" then error("train: training mode is expected to be boolean", 2) end
  for _, m in ipairs(self:modules()) do rawget(m, "_attrs").training = mode end
  return self
end

--- eval(): self:train(false), for inference (Dropout off); returns self.
-- torch.nn.Module.eval.
-- @usage
-- local model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
-- model:eval()                                       -- dropout off for inference
-- print(model.training)                              -- false
function Module:eval()
  return self:train(false)
end

--- requires_grad_([flag = true]) on every parameter.
-- @usage
-- local encoder = nn.Linear(8, 8)
-- encoder:requires_grad_(false)                                  -- freeze it
-- print(encoder.weight.requires_grad)                            -- false
function Module:requires_grad_(flag)
  if flag == nil then flag = true end
  for _, p in ipairs(self:parameters()) do p:requires_grad_(flag) end
  return self
end

--- zero_grad([set_to_none = true]): drops every parameter's .grad (the
-- default, torch 2.x's), or zeroes it in place when set_to_none is false.
-- @usage
-- local lin = nn.Linear(2, 1)
-- lin(attn.ones(1, 2)):sum():backward()
-- lin:zero_grad()                                                 -- .grad = nil (torch 2.x's default)
-- print(lin.weight.grad)                                          -- nil
function Module:zero_grad(set_to_none)
  set_to_none = opt_bool(set_to_none, true, "zero_grad", "set_to_none")
  for _, p in ipairs(self:parameters()) do
    local g = p.grad
    if g ~= nil then
      if set_to_none == false then
        attn.no_grad(function() g:zero_() end)
      else
        p.grad = nil
      end
    end
  end
end

--- apply(fn): fn(m) for every descendant (children first), then fn(self).
-- @usage
-- local model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
-- model:apply(function(m)                               -- each submodule, then the model itself
--   if nn.isinstance(m, nn.Linear) then nn.init.zeros_(m.bias) end
-- end)
-- print(model[3].bias)                                  -- tensor([0.], requires_grad=True)
function Module:apply(fn)
  local mt = getmetatable(fn)
  if type(fn) ~= "function" and not (mt and mt.__call) then
    error(("apply: fn must be a function (got %s)"):format(type_name(fn)), 2)
  end
  for _, m in ipairs(self:children()) do m:apply(fn) end
  fn(self)
  return self
end

-- State dicts are plain tables name -> tensor whose pairs() follows torch's
-- order (keys added later come after those, in next() order).
local OrderedState = {}
OrderedState.__pairs = function(sd)
  local keys = getmetatable(sd).keys
  local i, done = 0, {}
  local k = nil
  return function()
    while true do
      if i < #keys then
        i = i + 1
        local key = keys[i]
        local v = rawget(sd, key)
        if v ~= nil then done[key] = true return key, v end
      else
        local v
        k, v = next(sd, k)
        if k == nil then return nil end
        if not done[k] then return k, v end
      end
    end
  end
end
OrderedState.__name = "attn.nn.StateDict"

--- state_dict([opts]) -> {name = tensor}: every parameter and persistent
-- buffer under torch's dotted names, detached (sharing storage) unless
-- opts.keep_vars; opts.prefix prefixes the names.  pairs() gives torch's
-- order; nn.state_dict_keys(sd) lists it.
-- @usage
-- local sd = nn.Linear(3, 2):state_dict()
-- for _, k in ipairs(nn.state_dict_keys(sd)) do print(k, sd[k].shape) end   -- weight, bias
function Module:state_dict(opts)
  if opts == nil then opts = {} end
  if type(opts) ~= "table" or is_tensor(opts) or is_module(opts) then
    error(("state_dict: options must be a table {prefix =, keep_vars =} (got %s)"):format(type_name(opts)), 2)
  end
  for k in pairs(opts) do
    if k ~= "prefix" and k ~= "keep_vars" then
      error(attn._misuse.unknown_option("state_dict", k, {"keep_vars", "prefix"}), 2)
    end
  end
  opt_prefix(opts.prefix, "state_dict")
  opt_bool(opts.keep_vars, false, "state_dict", "keep_vars")
  local keys = {}
  local sd = setmetatable({}, {__pairs = OrderedState.__pairs, __name = OrderedState.__name, keys = keys})
  for _, e in ipairs(collect_modules(self, "", false, {})) do
    local m = e[2]
    local pre = (opts.prefix or "") .. (e[1] == "" and "" or (e[1] .. "."))
    local params, buffers = rawget(m, "_parameters"), rawget(m, "_buffers")
    local np = rawget(m, "_non_persistent")
    for _, k in ipairs(params.keys) do
      local v = params.vals[k]
      if v ~= nil then
        keys[#keys + 1] = pre .. k
        rawset(sd, pre .. k, opts.keep_vars and v or v:detach())
      end
    end
    for _, k in ipairs(buffers.keys) do
      local v = buffers.vals[k]
      if v ~= nil and not np[k] then
        keys[#keys + 1] = pre .. k
        rawset(sd, pre .. k, opts.keep_vars and v or v:detach())
      end
    end
  end
  return sd
end

--- The keys of a state dict in its order (torch's for module:state_dict()).
-- @usage
-- local sd = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1)):state_dict()
-- print(table.concat(nn.state_dict_keys(sd), " "))               -- 0.weight 0.bias 1.weight 1.bias
function nn.state_dict_keys(sd)
  if type(sd) ~= "table" then error(("state_dict_keys: expected a state dict (got %s)"):format(type_name(sd)), 2) end
  local out = {}
  for k in pairs(sd) do out[#out + 1] = k end
  return out
end

--- load_state_dict(sd [, strict = true]) -> {missing_keys=, unexpected_keys=}
-- Copies sd's tensors into the parameters and persistent buffers under
-- no_grad.  Shape mismatches always raise; with strict, missing and
-- unexpected keys raise too (torch's message, unexpected keys sorted).
-- @usage
-- local a, b = nn.Linear(3, 2), nn.Linear(3, 2)
-- local result = b:load_state_dict(a:state_dict())
-- print(#result.missing_keys, attn.equal(a.bias, b.bias))   -- 0 true
function Module:load_state_dict(sd, strict)
  if type(sd) ~= "table" or is_module(sd) then
    error(("load_state_dict: expected a table name -> tensor (got %s)"):format(type_name(sd)), 2)
  end
  strict = opt_bool(strict, true, "load_state_dict", "strict")
  local all_keys = {}
  for k in pairs(sd) do
    if type(k) == "string" then all_keys[#all_keys + 1] = k end
  end
  table.sort(all_keys)
  -- copies wait until every key has been checked, so that a failed load
  -- leaves the module as it was (torch copies the good keys before raising)
  local missing, unexpected, errors, copies = {}, {}, {}, {}
  local guard <close> = attn.no_grad()
  for _, e in ipairs(collect_modules(self, "", false, {})) do
    local m = e[2]
    local pre = e[1] == "" and "" or (e[1] .. ".")
    local local_state = {}
    local function load_one(k, v)
      local_state[k] = true
      local key = pre .. k
      local input = sd[key]
      if input == nil then
        missing[#missing + 1] = key
      elseif not is_tensor(input) then
        errors[#errors + 1] = ('While copying the parameter named "%s", '
          .. 'expected a tensor from checkpoint but received %s'):format(key, type(input))
      else
        local a, b = input:shape(), v:shape()
        local same = #a == #b
        for i = 1, #a do same = same and a[i] == b[i] end
        if not same then
          errors[#errors + 1] = ("size mismatch for %s: copying a param with shape %s from checkpoint, "
            .. "the shape in current model is %s."):format(key, fmt_shape(a), fmt_shape(b))
        else
          copies[#copies + 1] = {v, input}
        end
      end
    end
    local params, buffers = rawget(m, "_parameters"), rawget(m, "_buffers")
    local np = rawget(m, "_non_persistent")
    for _, k in ipairs(params.keys) do
      if params.vals[k] ~= nil then load_one(k, params.vals[k]) end
    end
    for _, k in ipairs(buffers.keys) do
      if buffers.vals[k] ~= nil and not np[k] then load_one(k, buffers.vals[k]) end
    end
    local mods = rawget(m, "_modules")
    for _, key in ipairs(all_keys) do
      if key:sub(1, #pre) == pre then
        local name = key:sub(#pre + 1):match("^[^.]*")
        if not mods.has[name] and not local_state[name] then unexpected[#unexpected + 1] = key end
      end
    end
  end
  if strict then
    local function quoted(list)
      local q = {}
      for i, k in ipairs(list) do q[i] = '"' .. k .. '"' end
      return table.concat(q, ", ")
    end
    if #unexpected > 0 then
      table.insert(errors, 1, ("Unexpected key(s) in state_dict: %s. "):format(quoted(unexpected)))
    end
    if #missing > 0 then
      table.insert(errors, 1, ("Missing key(s) in state_dict: %s. "):format(quoted(missing)))
    end
  end
  if #errors > 0 then
    error(("Error(s) in loading state_dict for %s:\n\t%s"):format(self:_get_name(), table.concat(errors, "\n\t")), 2)
  end
  for _, c in ipairs(copies) do c[1]:copy_(c[2]) end
  return {missing_keys = missing, unexpected_keys = unexpected}
end

--- save(path [, metadata]): the state_dict written with attn.save (the
-- format from the extension: .safetensors, .npz).
-- @usage
-- local path = os.tmpname() .. ".safetensors"
-- nn.Linear(4, 2):save(path)                                     -- the state_dict, format from the extension
-- print(attn.safetensors_info(path).weight.shape[1])             -- 2
-- os.remove(path)
function Module:save(path, metadata)
  local sd = {}
  for k, v in pairs(self:state_dict()) do sd[k] = v end
  attn.save(sd, path, metadata)
  return self
end

--- load(path [, strict = true]): load_state_dict of attn.load(path);
-- returns self and load_state_dict's result.
-- @usage
-- local path = os.tmpname() .. ".safetensors"
-- local a = nn.Linear(3, 2)
-- a:save(path)
-- local b = nn.Linear(3, 2):load(path)                -- load_state_dict of the file
-- print(attn.equal(a.weight, b.weight))                -- true
-- os.remove(path)
function Module:load(path, strict)
  opt_bool(strict, true, "load", "strict")
  local sd = attn.load(path)
  local res = self:load_state_dict(sd, strict)
  return self, res
end

local function addindent(s, n)
  if not s:find("\n", 1, true) then return s end
  local pad = (" "):rep(n)
  return (s:gsub("\n", "\n" .. pad))
end

--- The module tree, like torch's repr.
-- @usage
-- print(nn.Sequential(nn.Linear(4, 2), nn.ReLU()):to_string())    -- the tree, as torch prints it
function Module:to_string()
  local extra = self:extra_repr()
  local extra_lines = {}
  if extra ~= "" then
    for line in (extra .. "\n"):gmatch("(.-)\n") do extra_lines[#extra_lines + 1] = line end
  end
  local child_lines = {}
  local mods = rawget(self, "_modules")
  for _, k in ipairs(mods.keys) do
    local m = mods.vals[k]
    local s = m == nil and "None" or addindent(m:to_string(), 2)
    child_lines[#child_lines + 1] = "(" .. k .. "): " .. s
  end
  local s = self:_get_name() .. "("
  if #extra_lines == 1 and #child_lines == 0 then
    s = s .. extra_lines[1]
  elseif #extra_lines + #child_lines > 0 then
    local lines = {}
    for _, l in ipairs(extra_lines) do lines[#lines + 1] = l end
    for _, l in ipairs(child_lines) do lines[#lines + 1] = l end
    s = s .. "\n  " .. table.concat(lines, "\n  ") .. "\n"
  end
  return s .. ")"
end

--------------------------------------------------------------------------
-- Devices and dtypes
-- @section devices_and_dtypes

-- A dtype object (attn.float32, ...) from a dtype or its name, else nil.
local function as_dtype(v)
  local mt = getmetatable(attn.float32)
  if type(v) == "table" and getmetatable(v) == mt then return v end
  if type(v) == "string" then
    local d = attn[v]
    if type(d) == "table" and getmetatable(d) == mt then return d end
  end
  return nil
end

local grad_wanted = setmetatable({}, {__mode = "k"})

-- Replaces every floating-point parameter and buffer of self and its
-- descendants by convert(t) (a tensor shared by several modules stays
-- shared; a parameter stays a parameter with its requires_grad and its
-- .grad converted).  torch's Module._apply for .to(dtype), .half(), ...
local function convert_floats(self, dt)
  local guard <close> = attn.no_grad()
  local memo = {}
  local function conv(t, param)
    if memo[t] ~= nil then return memo[t] end
    local new = t
    if tostring(t.dtype.name):find("float", 1, true) then -- float16, bfloat16, float32, float64
      local c = t:to(dt)
      if c ~= t then
        if param then
          -- attn computes gradients in float32 only: a float16, bfloat16 or
          -- float64 parameter cannot require grad; it remembers that it
          -- did, so that float() makes it trainable again
          local rg = t.requires_grad or grad_wanted[t] == true
          local ok, p = pcall(nn.Parameter, c, rg)
          if not ok then
            p = nn.Parameter(c, false)
            grad_wanted[p] = rg or nil
          end
          new = p
          local g = t.grad
          if g ~= nil and p.requires_grad then p.grad = g:to(dt) end
        else
          new = c
        end
      end
    end
    memo[t] = new
    return new
  end
  for _, e in ipairs(collect_modules(self, "", {}, {})) do
    for _, field in ipairs({"_parameters", "_buffers"}) do
      local d = rawget(e[2], field)
      for _, k in ipairs(d.keys) do
        local v = d.vals[k]
        if v ~= nil then d.vals[k] = conv(v, field == "_parameters") end
      end
    end
  end
  return self
end

local device_lib -- attn.device, loaded by the first device argument
local function devices()
  device_lib = device_lib or require "attn.device"
  return device_lib
end

--- to(...) -> self: torch's module.to.  Each argument is a device ("cpu",
-- "cpu:0" or attn.device("cpu"): nothing to move, attn runs on the CPU;
-- any other device raises), a floating-point dtype (attn.float32 or its
-- name: every floating-point parameter and buffer is converted, integer
-- and bool buffers stay), a tensor (its dtype) or an options table
-- {device =, dtype =, non_blocking =}.
-- @return self
-- @usage
-- local m = nn.Linear(2, 2):to(attn.float64)                      -- or :to("cpu"), :to({dtype = ...})
-- print(m.weight.dtype)                                            -- attn.float64
function Module:to(...)
  local args = table.pack(...)
  if args.n == 0 then error("to: expected a device, a dtype, a tensor or {device =, dtype =}", 2) end
  local dtype
  local function take(v, what)
    if is_tensor(v) then
      dtype = v.dtype
    elseif devices().is_device(v) then
      return
    elseif devices().is_device_string(v) then
      if not pcall(devices().device, v) then devices()._cpu_only("to", ("'%s'"):format(v)) end
    else
      local d = as_dtype(v)
      if d == nil then
        error(("to: expected a device (\"cpu\"), a dtype (attn.float32, \"float32\"), a tensor or "
          .. "{device =, dtype =} as %s (got %s)"):format(what, type(v) == "string" and ('"' .. v .. '"')
          or type_name(v)), 3)
      end
      if not d.is_floating_point and not (d.name or ""):find("float") then
        error(("to: nn.Module.to only accepts floating point dtypes, but got desired dtype=%s"):format(d.name), 3)
      end
      dtype = d
    end
  end
  for i = 1, args.n do
    local v = args[i]
    if type(v) == "table" and getmetatable(v) == nil then
      for k in pairs(v) do
        if k ~= "device" and k ~= "dtype" and k ~= "non_blocking" and k ~= "copy" then
          error(attn._misuse.unknown_option("to", k, {"device", "dtype", "non_blocking"}), 2)
        end
      end
      if v.device ~= nil then take(v.device, "device") end
      if v.dtype ~= nil then take(v.dtype, "dtype") end
    elseif v == nil then
      error(("to: argument %d is nil"):format(i), 2)
    else
      take(v, ("argument %d"):format(i))
    end
  end
  if dtype ~= nil then convert_floats(self, dtype) end
  return self
end

--- cpu() -> self: every module is on the CPU already.  torch's module.cpu.
-- @return self
-- @usage
-- local m = nn.Linear(2, 2)
-- print(m:cpu() == m)                               -- true: returns the module itself
function Module:cpu()
  return self
end

--- cuda() raises: attn runs on the CPU only (torch without CUDA raises
-- too); write module:to("cpu") or leave it out.
-- @usage
-- print(pcall(function() return nn.Linear(2, 2):cuda() end))   -- false: no CUDA in attn
function Module:cuda()
  devices()._cpu_only("cuda", "'cuda'")
end

--- half() -> self: every floating-point parameter and buffer converted to
-- float16.  torch's module.half.
-- @return self
-- @usage
-- local m = nn.Linear(2, 2):half()
-- print(m.weight.dtype)                               -- attn.float16
function Module:half()
  return convert_floats(self, as_dtype("float16") or error("half: this build of attn has no float16 dtype", 2))
end

--- bfloat16() -> self: every floating-point parameter and buffer converted
-- to bfloat16.  torch's module.bfloat16.
-- @return self
-- @usage
-- local m = nn.Linear(4, 4):bfloat16()             -- parameters stored as bfloat16
-- print(m.weight.dtype)                             -- attn.bfloat16
function Module:bfloat16()
  return convert_floats(self, as_dtype("bfloat16") or error("bfloat16: this build of attn has no bfloat16 dtype", 2))
end

--- double() -> self: every floating-point parameter and buffer converted
-- to float64.  torch's module.double.
-- @return self
-- @usage
-- local m = nn.Linear(2, 2):double()                -- float64 storage of the parameters
-- print(m.weight.dtype)                             -- attn.float64
function Module:double()
  return convert_floats(self, as_dtype("float64") or error("double: this build of attn has no float64 dtype", 2))
end

--- float() -> self: every floating-point parameter and buffer converted
-- to float32.  torch's module.float.
-- @return self
-- @usage
-- local m = nn.Linear(2, 2):double():float()         -- back to float32
-- print(m.weight.dtype)                              -- attn.float32
function Module:float()
  return convert_floats(self, attn.float32)
end

--------------------------------------------------------------------------
-- Hooks
-- @section hooks

local hook_ids = 0

-- What register_*_hook returns: handle:remove() (or a `<close>` variable)
-- takes the hook off; removing twice does nothing.
local Handle = {__name = "attn.nn.RemovableHandle"}
Handle.__index = Handle

--- handle:remove(): takes the hook off its module (torch's
-- RemovableHandle.remove); a second call does nothing.  A handle also
-- works as a to-be-closed variable: `local h <close> = m:register_forward_hook(fn)`.
-- @usage
-- local lin = nn.Linear(2, 2)
-- local handle = lin:register_forward_hook(function() print("hook ran") end)
-- lin(attn.ones(1, 2))                                 -- hook ran
-- handle:remove()
-- lin(attn.ones(1, 2))                                 -- prints nothing: the hook is off
function Handle:remove()
  local m = self._module[1]
  local h = m and rawget(m, "_hooks")
  local list = h and h[self._kind]
  if not list then return end
  local kept = {}
  for _, e in ipairs(list) do
    if e.id ~= self.id then kept[#kept + 1] = e end
  end
  h[self._kind] = #kept > 0 and kept or nil
  if not (h.pre or h.fwd or h.bwd) then rawset(m, "_hooks", false) end
end
Handle.__close = Handle.remove

local function add_hook(self, kind, fn, fname)
  if not is_module(self) then
    error(("%s: call it on a module, as m:%s(fn)"):format(fname, fname), 3)
  end
  local mt = getmetatable(fn)
  if type(fn) ~= "function" and not (mt and mt.__call) then
    error(("%s: hook must be a function (got %s)"):format(fname, type_name(fn)), 3)
  end
  hook_ids = hook_ids + 1
  local h = rawget(self, "_hooks")
  if not h then
    h = {}
    rawset(self, "_hooks", h)
  end
  local list = h[kind] or {}
  local new = table.move(list, 1, #list, 1, {})
  new[#new + 1] = {fn = fn, id = hook_ids}
  h[kind] = new
  return setmetatable({id = hook_ids, _kind = kind, _module = setmetatable({self}, {__mode = "v"})}, Handle)
end

--- register_forward_pre_hook(hook) -> handle.  Before every call of the
-- module, hook(module, inputs) runs with inputs the list of the positional
-- arguments (inputs.n of them; options tables included); a non-nil return
-- replaces them: a plain Lua table is the new list, any other value (a
-- tensor) the single input.  Hooks run in registration order.
-- torch.nn.Module.register_forward_pre_hook.
-- @tparam function hook hook(module, inputs) -> nil or new inputs
-- @treturn RemovableHandle handle:remove() takes it off
-- @usage
-- local lin = nn.Linear(3, 3)
-- lin:register_forward_pre_hook(function(_, inputs) print("input", inputs[1].shape) end)
-- lin(attn.randn(2, 3))
function Module:register_forward_pre_hook(hook)
  return add_hook(self, "pre", hook, "register_forward_pre_hook")
end

--- register_forward_hook(hook) -> handle.  After every call of the module,
-- hook(module, inputs, output, ...) runs with the inputs list (as the pre
-- hooks left it) and forward's results (one argument each:
-- MultiheadAttention's hook gets output, weights); a non-nil first return
-- value replaces the results with what the hook returned.  The usual way to
-- capture values from inside a model.  torch.nn.Module.register_forward_hook.
-- @tparam function hook hook(module, inputs, output, ...) -> nil or new results
-- @treturn RemovableHandle handle:remove() takes it off
-- @usage
-- local model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
-- local seen
-- local handle = model[1]:register_forward_hook(function(_, _, output) seen = output end)
-- model(attn.randn(2, 4))
-- handle:remove()
-- print(seen.shape)                                              -- what the first layer gave
function Module:register_forward_hook(hook)
  return add_hook(self, "fwd", hook, "register_forward_hook")
end

--- register_full_backward_hook(hook) -> handle.  Once per backward pass
-- through a call of the module, hook(module, grad_input, grad_output) runs
-- with the gradients with respect to the module's positional inputs and its
-- results (lists aligned with them; nil for a non-tensor or a tensor that
-- needs no grad); a non-nil return (a list aligned the same way) replaces
-- grad_input, a nil entry giving that input no gradient.  Hooks run in
-- registration order, with grad recording off, and may not start another
-- backward.  Built, like torch's BackwardHook, on identity nodes around the
-- inputs and the results.  torch.nn.Module.register_full_backward_hook.
-- @tparam function hook hook(module, grad_input, grad_output) -> nil or new grad_input
-- @treturn RemovableHandle handle:remove() takes it off
-- @usage
-- local lin = nn.Linear(3, 2)
-- lin:register_full_backward_hook(function(_, grad_input, grad_output)
--   print(grad_output[1].shape)                                  -- [4, 2]
-- end)
-- lin(attn.randn(4, 3):requires_grad_()):sum():backward()
function Module:register_full_backward_hook(hook)
  return add_hook(self, "bwd", hook, "register_full_backward_hook")
end

-- Positions of the tensors of list (1..n) that require grad, and a
-- function that fills a list of gradients by position with zeros for the
-- tensors that got none (torch materialises them: only a non-tensor's
-- entry is nil).
local function grad_positions(list, n)
  local pos, zero = {}, {}
  for i = 1, n do
    local v = list[i]
    if is_tensor(v) then
      if v.requires_grad then pos[#pos + 1] = i end
      zero[#zero + 1] = {i, v:shape(), v.dtype}
    end
  end
  local function fill(grads)
    for _, z in ipairs(zero) do
      if grads[z[1]] == nil then grads[z[1]] = attn.zeros(z[2], {dtype = z[3]}) end
    end
    return grads
  end
  return pos, fill
end

-- Replaces list[p] (p in pos) by aliases whose gradients reach
-- on_grads(grads) once per backward, all together (grads[p] nil where none
-- came); on_grads returns the gradients to pass on (same positions, nil:
-- none).  One node over all of them (a scalar token) and one per alias
-- into it, so the engine runs on_grads after every alias's gradient.
local function group_identity(list, pos, on_grads)
  local shapes = {}
  local ins = {}
  for k, p in ipairs(pos) do
    shapes[k] = list[p]:shape()
    ins[k] = list[p]
  end
  local grads = {}
  local token = custom_record(attn.zeros({}), ins, function()
    local given = grads
    grads = {}
    local res = on_grads(given)
    local out = {}
    for k, p in ipairs(pos) do
      local g = res[p]
      out[k] = g ~= nil and g or attn.zeros(shapes[k])
    end
    return out
  end)
  for _, p in ipairs(pos) do
    list[p] = custom_record(list[p], {token}, function(g)
      grads[p] = g
      return {attn.zeros({})}
    end)
  end
end

-- Checks a backward hook's replacement grad_input against the gradients
-- it replaces.
local function check_grad_input(m, r, given, n)
  if type(r) ~= "table" or getmetatable(r) ~= nil then
    error(("register_full_backward_hook: the hook of %s returned %s; return nil or a list of gradients "
      .. "aligned with grad_input"):format(m:_get_name(), type_name(r)), 0)
  end
  for i = 1, math.max(n, #r) do
    local g = r[i]
    if i > n and g ~= nil then
      error(("register_full_backward_hook: the hook of %s returned %d gradients for %d inputs")
        :format(m:_get_name(), #r, n), 0)
    end
    if g ~= nil then
      if not is_tensor(g) then
        error(("register_full_backward_hook: the hook of %s returned %s as grad_input[%d] (a tensor or nil expected)")
          :format(m:_get_name(), type_name(g), i), 0)
      end
      local old = given[i]
      if old ~= nil and fmt_shape(old:shape()) ~= fmt_shape(g:shape()) then
        error(("register_full_backward_hook: the hook of %s returned a gradient of shape %s for grad_input[%d] "
          .. "of shape %s"):format(m:_get_name(), fmt_shape(g:shape()), i, fmt_shape(old:shape())), 0)
      end
    end
  end
end

-- The wrapping of one call for the backward hooks of h (torch's
-- BackwardHook): the input aliases call the hooks with the gradients the
-- output aliases saw.
local function backward_hook_inputs(self, hooks, args)
  local state = {grad_output = nil, n_out = 0, inputs_wrapped = false}
  local n = args.n
  local function call_hooks(grad_input)
    for _, e in ipairs(hooks) do
      local go = state.grad_output or {}
      go.n = state.n_out
      grad_input.n = n
      local r = e.fn(self, grad_input, go)
      if r ~= nil then
        check_grad_input(self, r, grad_input, n)
        local new = {n = n}
        for i = 1, n do new[i] = r[i] end
        grad_input = new
      end
    end
    return grad_input
  end
  if attn.is_grad_enabled() then
    local pos, fill = grad_positions(args, n)
    if #pos > 0 then
      state.inputs_wrapped = true
      group_identity(args, pos, function(grads) return call_hooks(fill(grads)) end)
    end
  end
  return state, call_hooks
end

local function backward_hook_outputs(self, state, call_hooks, outs)
  if not attn.is_grad_enabled() then return end
  local pos, fill = grad_positions(outs, outs.n)
  if #pos == 0 then return end
  state.n_out = outs.n
  group_identity(outs, pos, function(grads)
    state.grad_output = fill(grads)
    if not state.inputs_wrapped then
      -- no input needs grad: the hooks run here, with grad_input all nil
      -- (torch's BackwardHook does the same)
      local r = call_hooks({})
      for i = 1, r.n do
        if r[i] ~= nil then
          error(("register_full_backward_hook: the hook of %s returned a gradient for input %d, "
            .. "which requires no grad"):format(self:_get_name(), i), 0)
        end
      end
    end
    return grads
  end)
end

-- A plain Lua table (no metatable): a list of inputs a pre hook returned.
local function is_plain_table(v)
  return type(v) == "table" and getmetatable(v) == nil
end

run_hooked = function(self, f, h, ...)
  local args = table.pack(...)
  local pre, fwd, bwd = h.pre, h.fwd, h.bwd
  if pre then
    for i = 1, #pre do
      local r = pre[i].fn(self, args)
      if r ~= nil then
        if is_plain_table(r) then
          args = table.move(r, 1, r.n or #r, 1, {n = r.n or #r})
        else
          args = {r, n = 1}
        end
      end
    end
  end
  local state, call_hooks
  if bwd then state, call_hooks = backward_hook_inputs(self, bwd, args) end
  local outs = table.pack(f(self, table.unpack(args, 1, args.n)))
  if fwd then
    for i = 1, #fwd do
      local r = table.pack(fwd[i].fn(self, args, table.unpack(outs, 1, outs.n)))
      if r[1] ~= nil then outs = r end
    end
  end
  if bwd then backward_hook_outputs(self, state, call_hooks, outs) end
  return table.unpack(outs, 1, outs.n)
end

-- has_hooks(m): whether module m has a hook of any kind (or its own forward):
-- the containers that run a child without calling it (the transformer stacks)
-- call it instead when it has hooks.
local function has_hooks(m)
  return rawget(m, "_hooks") or rawget(m, "_attrs").forward ~= nil
end

-- The helpers the other files of attn.nn (nn/containers.lua, nn/layers.lua,
-- nn/parallel.lua) share with this one.
-- torch's signatures (attn/signature.lua: a trailing options table is
-- expanded into torch's positional order)
local signature = require "attn.signature"
signature.declare(Module, "nn.Module.", {
  init = false, forward = false, extra_repr = false, extend = false, to_string = false,
  register_parameter = false, add_module = false, register_buffer = "self, name, tensor, persistent=true",
  named_parameters = "self, prefix='', recurse=true", parameters = "self, recurse=true",
  named_buffers = "self, prefix='', recurse=true", buffers = "self, recurse=true",
  named_children = false, children = false, modules = false, get_submodule = false, apply = false,
  named_modules = "self, prefix=''", -- torch's memo= (first) left out
  train = "self, mode=true", eval = false, requires_grad_ = "self, requires_grad=true",
  zero_grad = "self, set_to_none=true",
  state_dict = "native: self, *, prefix='', keep_vars=false", -- torch's destination= left out
  -- a state dict and save's metadata are string-keyed tables themselves:
  -- an options table could not be told from them
  load_state_dict = false, save = false,
  load = "self, path, strict=true",
  to = "native: self, *, device=nil, dtype=nil, non_blocking=false",
  cpu = false, cuda = false, half = false, bfloat16 = false, double = false, float = false,
  register_forward_pre_hook = false, register_forward_hook = false, register_full_backward_hook = false,
})
signature.declare(nn, "nn.", {Parameter = "data=nil, requires_grad=true", is_parameter = false, isinstance = false,
  state_dict_keys = false, is_module = false})

nn._util = {is_module = is_module, type_name = type_name, opt_bool = opt_bool, fmt_shape = fmt_shape,
            child_pairs = child_pairs, iterate = iterate, od_set = od_set, has_hooks = has_hooks}

return nn
