-- SPDX-License-Identifier: MIT

--- attn.nn_base: the body of attn.nn: the Module class, containers and
-- the layers that need no other attn file.  Files that build modules
-- (rnn, transformer, seq2seq, ...) require this one; attn.nn (nn.lua)
-- returns this same table and adds those files' names to it on first
-- lookup.  Its entries belong to attn.nn in the reference.
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
local init = require "attn.nn_init"

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

local function pybool(b) return b and "True" or "False" end

--------------------------------------------------------------------------
-- Parameters
-- @section parameters

-- Tensors made by nn.Parameter, weakly keyed so they are not kept alive.
local parameters = setmetatable({}, {__mode = "k"})

--- nn.Parameter(t [, requires_grad = true]): a leaf tensor sharing t's
-- storage, requiring grad, that modules register when it is assigned to a
-- field.  Without t: an empty tensor.
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

--- `m(...)`: runs m:forward(...) (an instance's own forward field first)
-- and returns its results.  torch: module(...), without hooks.
function Instance.__call(self, ...)
  -- forward is a class method unless the instance set its own: two lookups
  -- instead of the full member search of self:forward
  local f = self._attrs.forward
  if f == nil then f = self._class.forward end
  return f(self, ...)
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
function Module:named_parameters(prefix, recurse)
  opt_prefix(prefix, "named_parameters")
  recurse = opt_bool(recurse, true, "named_parameters", "recurse")
  return iterate(collect_members(self, "_parameters", prefix, recurse))
end

--- List of parameters in registration order (children after self's own).
function Module:parameters(recurse)
  recurse = opt_bool(recurse, true, "parameters", "recurse")
  return values(collect_members(self, "_parameters", "", recurse))
end

--- Iterator over (dotted name, buffer), torch's order, for a generic for.
-- torch.nn.Module.named_buffers.
-- @tparam[opt=""] string prefix prepended with a dot to every name
-- @tparam[opt=true] boolean recurse include the descendants' buffers
function Module:named_buffers(prefix, recurse)
  opt_prefix(prefix, "named_buffers")
  recurse = opt_bool(recurse, true, "named_buffers", "recurse")
  return iterate(collect_members(self, "_buffers", prefix, recurse))
end

--- List of buffers (tensors registered with register_buffer), each once,
-- in torch's order.  torch.nn.Module.buffers (a list, not a generator).
-- @tparam[opt=true] boolean recurse include the descendants' buffers
-- @treturn {Tensor,...}
function Module:buffers(recurse)
  recurse = opt_bool(recurse, true, "buffers", "recurse")
  return values(collect_members(self, "_buffers", "", recurse))
end

--- Iterator over (name, child) for the direct children, each module once.
-- torch.nn.Module.named_children.
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
function Module:children()
  local out = {}
  for _, m in self:named_children() do out[#out + 1] = m end
  return out
end

--- Iterator over (name, module) for self (name "" or prefix) and every
-- descendant, pre-order.
function Module:named_modules(prefix)
  opt_prefix(prefix, "named_modules")
  return iterate(collect_modules(self, prefix or "", {}, {}))
end

--- List of self and every descendant, pre-order, each once.
-- torch.nn.Module.modules.
-- @treturn {Module,...}
function Module:modules()
  return values(collect_modules(self, "", {}, {}))
end

--- Submodule by dotted path ("encoder.layers.0"); "" is self.
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
function Module:train(mode)
  if mode == nil then mode = true end
  if type(mode) ~= "boolean" then error("train: training mode is expected to be boolean", 2) end
  for _, m in ipairs(self:modules()) do rawget(m, "_attrs").training = mode end
  return self
end

--- eval(): self:train(false), for inference (Dropout off); returns self.
-- torch.nn.Module.eval.
function Module:eval()
  return self:train(false)
end

--- requires_grad_([flag = true]) on every parameter.
function Module:requires_grad_(flag)
  if flag == nil then flag = true end
  for _, p in ipairs(self:parameters()) do p:requires_grad_(flag) end
  return self
end

--- zero_grad([set_to_none = true]): drops every parameter's .grad (the
-- default, torch 2.x's), or zeroes it in place when set_to_none is false.
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
function Module:save(path, metadata)
  local sd = {}
  for k, v in pairs(self:state_dict()) do sd[k] = v end
  attn.save(sd, path, metadata)
  return self
end

--- load(path [, strict = true]): load_state_dict of attn.load(path);
-- returns self and load_state_dict's result.
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
-- Helpers for the layers
-- @section helpers_for_the

local function check_size(v, fn, name)
  -- math.tointeger refuses inf, NaN and floats past 2^63 as well as fractions
  local i = type(v) == "number" and math.tointeger(v)
  if not i then error(("%s: %s must be an integer (got %s)"):format(fn, name, tostring(v)), 3) end
  if i < 0 then error(("%s: %s must be non-negative (got %s)"):format(fn, name, tostring(v)), 3) end
  -- no tensor holds more than 2^56 elements; refusing larger sizes here
  -- also keeps products such as 4 * hidden_size from wrapping around
  if i > (1 << 56) then error(("%s: %s = %d is too large"):format(fn, name, i), 3) end
  return i
end

-- A tensor input of a layer's forward.
local function check_input(x, fn)
  if not is_tensor(x) then error(("%s: input must be a tensor (got %s)"):format(fn, type_name(x)), 3) end
  return x
end

local function check_options(opts, fn, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(("%s: options must be a table (got %s)"):format(fn, type(opts)), 3) end
  for k in pairs(opts) do
    if not known[k] then
      error(attn._misuse.unknown_option(fn, k, known), 3)
    end
  end
  return opts
end

-- x [..., in] @ w[out, in]^T + b[out] (b may be nil): one C op, one node.
local linear = attn.linear

--------------------------------------------------------------------------
-- Linear
-- @section linear

local Linear = Module:extend("Linear")
nn.Linear = Linear

--- Linear(in_features, out_features [, bias = true]): y = x W^T + b with
-- W [out, in] and b [out]; torch's init (kaiming_uniform_(a = sqrt(5)) on
-- W, then b ~ U(-1/sqrt(in), 1/sqrt(in))).
function Linear:init(in_features, out_features, bias)
  self.in_features = check_size(in_features, "Linear", "in_features")
  self.out_features = check_size(out_features, "Linear", "out_features")
  bias = opt_bool(bias, true, "Linear", "bias")
  self.weight = nn.Parameter(attn.empty(self.out_features, self.in_features))
  if bias then
    self.bias = nn.Parameter(attn.empty(self.out_features))
  else
    self:register_parameter("bias", nil)
  end
  self:reset_parameters()
end

--- reset_parameters(): redraws weight ~ kaiming_uniform_(a = sqrt(5)) and
-- bias ~ U(-1/sqrt(in), 1/sqrt(in)) in place, as torch.nn.Linear does.
function Linear:reset_parameters()
  init.kaiming_uniform_(self.weight, math.sqrt(5))
  if self.bias ~= nil then
    local fan_in = init.calculate_fan_in_and_fan_out(self.weight)
    local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
    init.uniform_(self.bias, -bound, bound)
  end
end

--- forward(x): x [..., in_features] -> [..., out_features], x W^T + b
-- (attn.linear: one op).  torch.nn.Linear.forward.
-- @tparam Tensor x float32 [..., in_features]
-- @treturn Tensor [..., out_features]
function Linear:forward(x)
  return linear(x, self.weight, self.bias)
end

--- extra_repr(): "in_features=I, out_features=O, bias=True|False".
function Linear:extra_repr()
  return ("in_features=%d, out_features=%d, bias=%s"):format(self.in_features, self.out_features,
    pybool(self.bias ~= nil))
end

--------------------------------------------------------------------------
-- Embedding
-- @section embedding

local Embedding = Module:extend("Embedding")
nn.Embedding = Embedding

local embedding_options = {padding_idx = true, max_norm = true, norm_type = true, _weight = true}

--- Embedding(num_embeddings, embedding_dim [, {padding_idx=, max_norm=,
-- norm_type = 2}]): a lookup table, weight ~ N(0, 1) with the padding row
-- zeroed.  Ids and padding_idx are 1-based (a negative padding_idx counts
-- from the end).  With max_norm, the rows looked up are rescaled in place
-- to norm at most max_norm before the lookup (torch's embedding_renorm_).
function Embedding:init(num_embeddings, embedding_dim, opts)
  opts = check_options(opts, "Embedding", embedding_options)
  self.num_embeddings = check_size(num_embeddings, "Embedding", "num_embeddings")
  self.embedding_dim = check_size(embedding_dim, "Embedding", "embedding_dim")
  local pad = opts.padding_idx
  if pad ~= nil then
    pad = type(pad) == "number" and math.tointeger(pad) or pad
    if math.type(pad) ~= "integer" or pad == 0 or pad > self.num_embeddings or pad < -self.num_embeddings then
      error(("Embedding: padding_idx must be within 1..%d or -%d..-1 (got %s)%s")
        :format(self.num_embeddings, self.num_embeddings, tostring(pad),
          pad == 0 and " (ids are 1-based: torch's padding_idx=0 is padding_idx=1 here)" or ""), 2)
    end
    if pad < 0 then pad = self.num_embeddings + 1 + pad end
  end
  self.padding_idx = pad
  if opts.max_norm ~= nil and type(opts.max_norm) ~= "number" then
    error("Embedding: max_norm must be a number", 2)
  end
  if opts.norm_type ~= nil and type(opts.norm_type) ~= "number" then
    error("Embedding: norm_type must be a number", 2)
  end
  if opts._weight ~= nil and not is_tensor(opts._weight) then
    error(("Embedding: _weight must be a tensor (got %s)"):format(type_name(opts._weight)), 2)
  end
  self.max_norm = opts.max_norm
  self.norm_type = opts.norm_type or 2.0
  if opts._weight ~= nil then
    local s = opts._weight:shape()
    if #s ~= 2 or s[1] ~= self.num_embeddings or s[2] ~= self.embedding_dim then
      error(("Embedding: _weight has shape %s, expected [%d, %d]")
        :format(fmt_shape(s), self.num_embeddings, self.embedding_dim), 2)
    end
    self.weight = nn.is_parameter(opts._weight) and opts._weight or nn.Parameter(opts._weight)
  else
    self.weight = nn.Parameter(attn.empty(self.num_embeddings, self.embedding_dim))
    self:reset_parameters()
  end
end

--- reset_parameters(): weight ~ N(0, 1), then the padding_idx row (if
-- any) zeroed, as torch.nn.Embedding.
function Embedding:reset_parameters()
  init.normal_(self.weight)
  if self.padding_idx ~= nil then
    local guard <close> = attn.no_grad()
    self.weight:select(1, self.padding_idx):fill_(0)
  end
end

--- Embedding.from_pretrained(weight [, {freeze = true, padding_idx=,
-- max_norm=, norm_type=}]): an Embedding using weight's storage.
function Embedding.from_pretrained(weight, opts)
  opts = check_options(opts, "Embedding.from_pretrained",
    {freeze = true, padding_idx = true, max_norm = true, norm_type = true})
  if not is_tensor(weight) or weight:dim() ~= 2 then
    error("Embedding.from_pretrained: embeddings parameter is expected to be 2-dimensional", 2)
  end
  opt_bool(opts.freeze, true, "Embedding.from_pretrained", "freeze")
  local s = weight:shape()
  local m = Embedding(s[1], s[2], {padding_idx = opts.padding_idx, max_norm = opts.max_norm,
    norm_type = opts.norm_type, _weight = weight})
  m.weight.requires_grad = opts.freeze == false
  return m
end

-- Flat list of the 1-based ids in a tensor or nested table.
local function flat_ids(ids)
  local t = is_tensor(ids) and ids or attn.tensor(ids)
  local v = t:reshape(t:numel()):totable()
  if type(v) == "number" then v = {v} end
  return v
end

-- torch's embedding_renorm_: each distinct row looked up whose norm
-- exceeds max_norm is scaled by max_norm / (norm + 1e-7), in place.
local function embedding_renorm_(weight, ids, max_norm, norm_type)
  local guard <close> = attn.no_grad()
  local n = weight:shape()[1]
  local seen = {}
  for _, id in ipairs(flat_ids(ids)) do
    if math.type(id) ~= "integer" and id ~= math.floor(id) then
      error(("Embedding: ids must be integers (got %s)"):format(tostring(id)), 3)
    end
    if id < 1 or id > n then
      error(("Embedding: id %s out of range 1..%d"):format(tostring(id), n), 3)
    end
    if not seen[id] then
      seen[id] = true
      local row = weight:select(1, math.tointeger(id))
      local norm = row:norm(norm_type):item()
      if norm > max_norm then row:mul_(max_norm / (norm + 1e-7)) end
    end
  end
end

--- forward(ids): the weight rows of 1-based ids, shape ids' shape followed
-- by embedding_dim (attn.embedding).  With max_norm, the rows looked up are
-- first renormalised in place as torch does.  torch: ids + 1.
-- @param ids int64 (or float32 integer) tensor or Lua list of ids in
--   1..num_embeddings
-- @treturn Tensor [..., embedding_dim]
function Embedding:forward(ids)
  -- options are plain attributes; reading _attrs directly skips the class
  -- lookup that an unset (nil) option would otherwise walk
  local a = self._attrs
  if a.max_norm ~= nil then embedding_renorm_(self.weight, ids, a.max_norm, a.norm_type) end
  return attn.embedding(self.weight, ids, a.padding_idx)
end

--- extra_repr(): "num_embeddings, embedding_dim" then padding_idx (1-based),
-- max_norm and norm_type where set, as torch prints them.
function Embedding:extra_repr()
  local s = ("%d, %d"):format(self.num_embeddings, self.embedding_dim)
  if self.padding_idx ~= nil then s = s .. ", padding_idx=" .. self.padding_idx end
  if self.max_norm ~= nil then s = s .. ", max_norm=" .. pyrepr(self.max_norm) end
  if self.norm_type ~= 2 then s = s .. ", norm_type=" .. pyrepr(self.norm_type) end
  return s
end

--------------------------------------------------------------------------
-- LayerNorm
-- @section layernorm

local LayerNorm = Module:extend("LayerNorm")
nn.LayerNorm = LayerNorm

--- LayerNorm(normalized_shape [, eps = 1e-5 [, elementwise_affine = true]])
-- or LayerNorm(shape, {eps=, elementwise_affine=}): normalises over the
-- last #normalized_shape dims with the biased variance, then scales by
-- weight (ones) and shifts by bias (zeros).
function LayerNorm:init(normalized_shape, eps, elementwise_affine)
  if type(eps) == "table" then
    local o = check_options(eps, "LayerNorm", {eps = true, elementwise_affine = true})
    eps, elementwise_affine = o.eps, o.elementwise_affine
  end
  local shape = type(normalized_shape) == "table" and normalized_shape or {normalized_shape}
  if type(shape) ~= "table" or #shape == 0 then
    error("LayerNorm: normalized_shape must be a size or a non-empty list of sizes", 2)
  end
  local norm_shape = {}
  for i, v in ipairs(shape) do norm_shape[i] = check_size(v, "LayerNorm", "normalized_shape") end
  self.normalized_shape = norm_shape
  if eps ~= nil and (type(eps) ~= "number" or not (eps >= 0)) then -- luacheck: ignore 581 (NaN must fail)
    error(("LayerNorm: eps must be a non-negative number (got %s)"):format(tostring(eps)), 2)
  end
  self.eps = eps or 1e-5
  self.elementwise_affine = opt_bool(elementwise_affine, true, "LayerNorm", "elementwise_affine")
  if self.elementwise_affine then
    self.weight = nn.Parameter(attn.empty(norm_shape))
    self.bias = nn.Parameter(attn.empty(norm_shape))
    self:reset_parameters()
  else
    self:register_parameter("weight", nil)
    self:register_parameter("bias", nil)
  end
end

--- reset_parameters(): weight = 1 and bias = 0 (with elementwise_affine).
function LayerNorm:reset_parameters()
  if self.elementwise_affine then
    init.ones_(self.weight)
    init.zeros_(self.bias)
  end
end

--- forward(x): normalises over the trailing dims named by normalized_shape
-- (biased variance, eps added), then y * weight + bias.  x [..., *normalized_shape].
-- torch.nn.LayerNorm.forward.
-- @tparam Tensor x
-- @treturn Tensor of x's shape
function LayerNorm:forward(x)
  check_input(x, "LayerNorm")
  local ns = self.normalized_shape
  local shape = x:shape()
  local k = #ns
  local ok = #shape >= k
  for i = 1, k do ok = ok and shape[#shape - k + i] == ns[i] end
  if not ok then
    error(("LayerNorm: normalized_shape %s does not match the trailing dims of the input %s")
      :format(fmt_shape(ns), fmt_shape(shape)), 2)
  end
  -- one fused op forward and backward (src/core/norm.c)
  return require("attn.core")._layer_norm(x, k, self.weight, self.bias, self.eps)
end

local function pytuple(t)
  local parts = {}
  for i, v in ipairs(t) do parts[i] = pyrepr(v) end
  if #parts == 1 then return "(" .. parts[1] .. ",)" end
  return "(" .. table.concat(parts, ", ") .. ")"
end

--- extra_repr(): "(normalized_shape,), eps=1e-05, elementwise_affine=True".
function LayerNorm:extra_repr()
  return ("%s, eps=%s, elementwise_affine=%s"):format(pytuple(self.normalized_shape), pyrepr(self.eps),
    pybool(self.elementwise_affine))
end

--------------------------------------------------------------------------
-- Dropout
-- @section dropout

local Dropout = Module:extend("Dropout")
nn.Dropout = Dropout

--- Dropout([p = 0.5 [, inplace = false]]): in training, zeroes each
-- element with probability p and scales the rest by 1 / (1 - p); the
-- identity in eval mode.  The mask is drawn as torch 1.13 does on the CPU
-- (noise = empty_like(x):bernoulli_(1 - p) / (1 - p); x * noise), so the
-- same seed gives torch's output.
function Dropout:init(p, inplace)
  if p == nil then p = 0.5 end
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    error(("Dropout: dropout probability has to be between 0 and 1, but got %s"):format(tostring(p)), 2)
  end
  self.p = p
  self.inplace = opt_bool(inplace, false, "Dropout", "inplace")
end

local function dropout(x, p, training, inplace)
  if p == 0 or not training or x:numel() == 0 then return x end
  if p == 1 then
    if inplace then return x:mul_(0) end
    return x * 0
  end
  local noise = attn.empty_like(x):bernoulli_(1 - p)
  noise:div_(1 - p)
  if inplace then return x:mul_(noise) end
  return x * noise
end
nn._dropout = dropout

--- forward(x): in training mode zeroes elements with probability p and
-- scales the rest by 1 / (1 - p) (torch's draws); in eval mode returns x.
-- With inplace, x itself is changed and returned.
-- @tparam Tensor x any shape
-- @treturn Tensor
function Dropout:forward(x)
  check_input(x, "Dropout")
  return dropout(x, self.p, self.training, self.inplace)
end

--- extra_repr(): "p=0.5, inplace=False".
function Dropout:extra_repr()
  return ("p=%s, inplace=%s"):format(pyrepr(self.p), pybool(self.inplace))
end

--------------------------------------------------------------------------
-- Activations
-- @section activations

local function activation(name, fn, extra)
  local cls = Module:extend(name)
  cls.forward = function(self, x) return fn(self, check_input(x, name)) end
  if extra then cls.extra_repr = extra end
  nn[name] = cls
  return cls
end

--- nn.ReLU([inplace = false]): max(x, 0) elementwise.  torch.nn.ReLU.
-- @table ReLU
activation("ReLU", function(self, x)
  if self.inplace then return x:relu_() end
  return x:relu()
end, function(self) return self.inplace and "inplace=True" or "" end)
--- ReLU:init([inplace = false]): stores inplace (a boolean).
function nn.ReLU:init(inplace) self.inplace = opt_bool(inplace, false, "ReLU", "inplace") end

--- nn.GELU([approximate = "none"]): x * Phi(x) elementwise, with Phi the
-- exact normal CDF ("none", erf) or its "tanh" approximation.  torch.nn.GELU.
-- @table GELU
activation("GELU", function(self, x) return attn.gelu(x, self.approximate) end,
  function(self) return ("approximate='%s'"):format(self.approximate) end)
--- GELU:init([approximate = "none"]): stores approximate ("none" or "tanh";
-- anything else raises).
function nn.GELU:init(approximate)
  if approximate == nil then approximate = "none" end
  if approximate ~= "none" and approximate ~= "tanh" then
    error(("GELU: approximate must be 'none' or 'tanh' (got %s)"):format(tostring(approximate)), 2)
  end
  self.approximate = approximate
end

activation("Tanh", function(_, x) return x:tanh() end)
activation("Sigmoid", function(_, x) return x:sigmoid() end)

local function dim_init(name)
  return function(self, dim)
    dim = type(dim) == "number" and math.tointeger(dim) or dim
    if math.type(dim) ~= "integer" then
      error(("%s: dim must be an integer (1-based, negative from the end; got %s)"):format(name, tostring(dim)), 3)
    end
    self.dim = dim
  end
end
local function dim_repr(self) return "dim=" .. self.dim end

--- nn.Softmax(dim), nn.LogSoftmax(dim): softmax / log_softmax along dim,
-- 1-based (negative from the end).  torch.nn.Softmax(dim + 1) for dim >= 0.
-- @table Softmax
activation("Softmax", function(self, x) return x:softmax(self.dim) end, dim_repr)
nn.Softmax.init = dim_init("Softmax")
activation("LogSoftmax", function(self, x) return x:log_softmax(self.dim) end, dim_repr)
nn.LogSoftmax.init = dim_init("LogSoftmax")

--- ReLU:forward(x): x:relu(), or x:relu_() (x changed and returned) with
-- inplace.
-- @tparam Tensor x any shape
-- @treturn Tensor of x's shape
-- @function ReLU:forward

--- ReLU:extra_repr(): "inplace=True" or "".
-- @function ReLU:extra_repr

--- GELU:forward(x): attn.gelu(x, self.approximate).
-- @tparam Tensor x any shape
-- @treturn Tensor of x's shape
-- @function GELU:forward

--- GELU:extra_repr(): "approximate='none'" (or 'tanh').
-- @function GELU:extra_repr

--- nn.Tanh(): x:tanh() as a module; Tanh:forward(x) computes it.
-- torch.nn.Tanh.
-- @tparam Tensor x any shape
-- @treturn Tensor of x's shape
-- @function Tanh:forward

--- nn.Sigmoid(): x:sigmoid() as a module; Sigmoid:forward(x) computes it.
-- torch.nn.Sigmoid.
-- @tparam Tensor x any shape
-- @treturn Tensor of x's shape
-- @function Sigmoid:forward

--- Softmax:init(dim): stores dim, an integer (1-based, negative from the
-- end); anything else raises.
-- @function Softmax:init

--- Softmax:forward(x): x:softmax(self.dim).
-- @tparam Tensor x
-- @treturn Tensor of x's shape, summing to 1 along dim
-- @function Softmax:forward

--- Softmax:extra_repr(): "dim=D" with the 1-based dim as given.
-- @function Softmax:extra_repr

--- LogSoftmax:init(dim): stores dim, as Softmax:init.
-- @function LogSoftmax:init

--- LogSoftmax:forward(x): x:log_softmax(self.dim).
-- @tparam Tensor x
-- @treturn Tensor of x's shape
-- @function LogSoftmax:forward

--- LogSoftmax:extra_repr(): "dim=D" with the 1-based dim as given.
-- @function LogSoftmax:extra_repr

--- Identity(...): returns its input (whatever it is); arguments are
-- ignored like torch's.
nn.Identity = Module:extend("Identity")
--- Identity:forward(x): returns x itself (any value).
function nn.Identity.forward(_, x) return x end

--------------------------------------------------------------------------
-- Recurrent cells
-- @section recurrent_cells

local function cell_init(self, name, input_size, hidden_size, bias, gates)
  self.input_size = check_size(input_size, name, "input_size")
  self.hidden_size = check_size(hidden_size, name, "hidden_size")
  self.bias = opt_bool(bias, true, name, "bias")
  self.weight_ih = nn.Parameter(attn.empty(gates * self.hidden_size, self.input_size))
  self.weight_hh = nn.Parameter(attn.empty(gates * self.hidden_size, self.hidden_size))
  if self.bias then
    self.bias_ih = nn.Parameter(attn.empty(gates * self.hidden_size))
    self.bias_hh = nn.Parameter(attn.empty(gates * self.hidden_size))
  else
    self:register_parameter("bias_ih", nil)
    self:register_parameter("bias_hh", nil)
  end
  self:reset_parameters()
end

-- Every parameter ~ U(-1/sqrt(hidden), 1/sqrt(hidden)), in registration order.
local function cell_reset(self)
  local stdv = self.hidden_size > 0 and 1.0 / math.sqrt(self.hidden_size) or 0
  for _, p in ipairs(self:parameters()) do init.uniform_(p, -stdv, stdv) end
end

--- GRUCell:reset_parameters(): every parameter ~ U(-1/sqrt(hidden_size),
-- 1/sqrt(hidden_size)) in registration order, as torch.nn.GRUCell.
-- @function GRUCell:reset_parameters

--- LSTMCell:reset_parameters(): every parameter ~ U(-1/sqrt(hidden_size),
-- 1/sqrt(hidden_size)) in registration order, as torch.nn.LSTMCell.
-- @function LSTMCell:reset_parameters

--- GRUCell:extra_repr(): "input_size, hidden_size" and ", bias=False"
-- without biases.
-- @function GRUCell:extra_repr

--- LSTMCell:extra_repr(): "input_size, hidden_size" and ", bias=False"
-- without biases.
-- @function LSTMCell:extra_repr

local function cell_repr(self)
  local s = ("%d, %d"):format(self.input_size, self.hidden_size)
  if not self.bias then s = s .. ", bias=False" end
  return s
end

-- Checks input [B, in] or [in] and a state [B, hidden] or [hidden];
-- returns the batched input, whether it was batched, and a checker for
-- states (nil gives zeros).
local function cell_inputs(self, name, x)
  if not is_tensor(x) then error(("%s: input must be a tensor"):format(name), 3) end
  local d = x:dim()
  if d ~= 1 and d ~= 2 then
    error(("%s: Expected input to be 1-D or 2-D but received %d-D tensor"):format(name, d), 3)
  end
  local shape = x:shape()
  if shape[d] ~= self.input_size then
    error(("%s: input has inconsistent input_size: got %d expected %d"):format(name, shape[d], self.input_size), 3)
  end
  local batched = d == 2
  if not batched then x = x:unsqueeze(1) end
  local batch = x:shape()[1]
  local function state(h, what)
    if h == nil then return attn.zeros(batch, self.hidden_size) end
    if not is_tensor(h) then error(("%s: %s must be a tensor"):format(name, what), 4) end
    if h:dim() ~= d then
      error(("%s: Expected %s to be %d-D for a %d-D input but received %d-D tensor")
        :format(name, what, d, d, h:dim()), 4)
    end
    if not batched then h = h:unsqueeze(1) end
    local hs = h:shape()
    if hs[1] ~= batch or hs[2] ~= self.hidden_size then
      error(("%s: %s has shape %s, expected %s"):format(name, what, fmt_shape(hs),
        fmt_shape({batch, self.hidden_size})), 4)
    end
    return h
  end
  return x, batched, state
end

local GRUCell = Module:extend("GRUCell")
nn.GRUCell = GRUCell

--- GRUCell(input_size, hidden_size [, bias = true]); cell(x [, h]) -> h'
-- with x [B, in] or [in], h [B, hidden] or [hidden] (zeros if nil):
--   r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)
--   z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
--   n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
--   h' = (1 - z) * n + z * h          (gates stacked r, z, n like torch)
function GRUCell:init(input_size, hidden_size, bias)
  cell_init(self, "GRUCell", input_size, hidden_size, bias, 3)
end
GRUCell.reset_parameters = cell_reset
GRUCell.extra_repr = cell_repr

--- forward(x [, h]): one GRU step (the formulas above).  torch.nn.GRUCell.
-- @tparam Tensor x [B, input_size] or [input_size]
-- @tparam[opt] Tensor hx h, [B, hidden_size] or [hidden_size]; zeros if nil
-- @treturn Tensor h' of h's shape
function GRUCell:forward(x, hx)
  local batched, state
  x, batched, state = cell_inputs(self, "GRUCell", x)
  local h = state(hx, "hx")
  local gi = linear(x, self.weight_ih, self.bias_ih):chunk(3, 2)
  local gh = linear(h, self.weight_hh, self.bias_hh):chunk(3, 2)
  local r = (gh[1] + gi[1]):sigmoid()
  local z = (gh[2] + gi[2]):sigmoid()
  local n = (gi[3] + gh[3] * r):tanh()
  local hy = (h - n) * z + n -- torch's form of (1 - z) * n + z * h
  if not batched then hy = hy:squeeze(1) end
  return hy
end

local LSTMCell = Module:extend("LSTMCell")
nn.LSTMCell = LSTMCell

--- LSTMCell(input_size, hidden_size [, bias = true]);
-- cell(x [, {h, c}]) -> h', c' (zeros for a nil state), gates stacked
-- i, f, g, o like torch:
--   c' = sigmoid(f) * c + sigmoid(i) * tanh(g);  h' = sigmoid(o) * tanh(c')
function LSTMCell:init(input_size, hidden_size, bias)
  cell_init(self, "LSTMCell", input_size, hidden_size, bias, 4)
end
LSTMCell.reset_parameters = cell_reset
LSTMCell.extra_repr = cell_repr

--- forward(x [, {h, c}]): one LSTM step (the formulas above).
-- torch.nn.LSTMCell (which takes and returns the tuple (h, c)).
-- @tparam Tensor x [B, input_size] or [input_size]
-- @tparam[opt] table hx {h, c}, each [B, hidden_size] or [hidden_size]; zeros if nil
-- @treturn Tensor h'
-- @treturn Tensor c'
function LSTMCell:forward(x, hx)
  local batched, state
  x, batched, state = cell_inputs(self, "LSTMCell", x)
  if hx ~= nil and (type(hx) ~= "table" or is_module(hx)) then
    error("LSTMCell: the state must be a table {h, c} or nil", 2)
  end
  local h = state(hx and hx[1], "hx[1] (h)")
  local c = state(hx and hx[2], "hx[2] (c)")
  local gates = (linear(x, self.weight_ih, self.bias_ih) + linear(h, self.weight_hh, self.bias_hh)):chunk(4, 2)
  local i = gates[1]:sigmoid()
  local f = gates[2]:sigmoid()
  local g = gates[3]:tanh()
  local o = gates[4]:sigmoid()
  local cy = f * c + i * g
  local hy = o * cy:tanh()
  if not batched then
    hy, cy = hy:squeeze(1), cy:squeeze(1)
  end
  return hy, cy
end

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

local function add_all(self, fn, ...)
  local list, n = table.pack(...), select("#", ...)
  if n == 1 and type(list[1]) == "table" and not is_module(list[1]) then
    list = list[1]
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
function ModuleList:append(m)
  if not is_module(m) then error(("ModuleList.append: expected a module (got %s)"):format(type_name(m)), 2) end
  self:add_module(tostring(#self), m)
  return self
end

--- extend(modules): appends each module of the Lua list modules, in
-- order; returns self.
function ModuleList:extend(modules)
  if type(modules) ~= "table" or is_module(modules) then
    error(("ModuleList.extend: expected a list of modules (got %s)"):format(type_name(modules)), 2)
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

--- ModuleDict([modules]): children under string keys, md[key] / md.key.
-- modules is {key = m, ...} (added in sorted key order, since Lua tables
-- have none) or a list of {key, m} pairs (added in list order).
function ModuleDict:init(modules)
  if modules ~= nil then self:update(modules) end
end

--- update(modules): adds or replaces children from {key = m, ...} (in
-- sorted key order) or a list of {key, m} pairs (in list order); returns self.
function ModuleDict:update(modules)
  if type(modules) ~= "table" or is_module(modules) then
    error("ModuleDict.update: expected a table of modules", 2)
  end
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
  table.sort(keys)
  for _, k in ipairs(keys) do
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
function ModuleDict:keys()
  local out = {}
  for i, k in ipairs(rawget(self, "_modules").keys) do out[i] = k end
  return out
end

--- items(): iterator over (key, module) in order.
function ModuleDict:items()
  return iterate(child_pairs(self))
end

--- contains(key): whether a child is registered under key (torch: `key in md`).
-- @treturn boolean
function ModuleDict:contains(key)
  return rawget(self, "_modules").has[key] == true
end

--- forward(): raises, as torch: a ModuleDict is not callable.
function ModuleDict:forward()
  error("ModuleDict is not callable: use its modules in the parent's forward", 2)
end

--------------------------------------------------------------------------
-- Data parallelism
-- @section data_parallelism

--- nn.DistributedDataParallel(module [, opts]): torch's DDP over attn.dist.
-- Every rank builds the same model and wraps it; the wrapper
--  - at construction broadcasts rank 0's parameters and buffers, so a
--    different initialisation on the other ranks does not matter;
--  - forward (ddp(...)) broadcasts rank 0's buffers first when
--    opts.broadcast_buffers (default true), then calls module;
--  - during backward, averages the gradients over the ranks: parameters go
--    into buckets of about opts.bucket_mb (default 25) MiB in reverse
--    order, and each parameter's gradient hook (C, attn.dist's reducer; no
--    Lua runs inside backward) starts the non-blocking allreduce of its
--    bucket as soon as the bucket's last gradient is in, while backward
--    goes on with the earlier layers; the last hook waits for every bucket
--    and writes the averages into .grad, so after loss:backward() each
--    rank holds the average gradient and optimizer:step() needs no call.
--    A parameter that got no gradient in a pass (unused in the forward)
--    leaves its bucket waiting: call ddp:sync_gradients() before the step
--    then (the missing gradients count as zeros); otherwise the next
--    forward raises an error, as torch's DDP does;
--  - ddp:no_sync(fn, ...) runs fn with the averaging off (gradient
--    accumulation: the next synchronised backward averages the sum), or
--    `local g <close> = ddp:no_sync()` for a block;
--  - ddp.module is the wrapped model (save its state_dict from rank 0).
-- With one rank (no mpirun) it is a thin wrapper that does nothing extra.
local DDP = Module:extend("DistributedDataParallel")
nn.DistributedDataParallel = DDP

--- init(module [, opts]): wraps module (see above); opts: bucket_mb (a
-- positive number, default 25), broadcast_buffers (default true).  Calls
-- attn.dist.init() and, with more than one rank, broadcasts rank 0's
-- parameters and buffers.
function DDP:init(module, opts)
  if not is_module(module) then
    error("DistributedDataParallel: expected a module, got " .. type_name(module), 3)
  end
  if opts == nil then opts = {} end
  if type(opts) ~= "table" or is_tensor(opts) then
    error("DistributedDataParallel: opts must be a table, got " .. type_name(opts), 3)
  end
  for k, v in pairs(opts) do
    if k == "bucket_mb" then
      if type(v) ~= "number" or not (v > 0) or v == math.huge then -- luacheck: ignore 581 (NaN must fail)
        error("DistributedDataParallel: bucket_mb must be a positive finite number, got " .. tostring(v), 3)
      end
    elseif k == "broadcast_buffers" then
      if type(v) ~= "boolean" then
        error("DistributedDataParallel: broadcast_buffers must be a boolean, got " .. type_name(v), 3)
      end
    else
      error(attn._misuse.unknown_option("DistributedDataParallel", k, {"broadcast_buffers", "bucket_mb"}), 3)
    end
  end
  local dist = require "attn.dist"
  local bucket_mb = opts.bucket_mb or 25
  self.module = module
  self.broadcast_buffers = opts.broadcast_buffers ~= false
  self.bucket_mb = bucket_mb
  dist.init()
  local params = {}
  for _, p in ipairs(module:parameters()) do
    if p.requires_grad then params[#params + 1] = p end
  end
  if dist.size() > 1 then
    attn.no_grad(function()
      for _, p in ipairs(module:parameters()) do dist.broadcast(p, 0) end
      for _, b in ipairs(module:buffers()) do dist.broadcast(b, 0) end
    end)
  end
  self._reducer = dist._reducer(params, math.max(1, math.floor(math.min(bucket_mb, 2 ^ 40) * 1024 * 1024)))
end

--- forward(...): broadcasts rank 0's buffers (with broadcast_buffers and
-- more than one rank), then returns self.module(...).  Raises when the last
-- backward left a bucket open (call ddp:sync_gradients() in such steps).
function DDP:forward(...)
  local dist = require "attn.dist"
  if self._reducer:pending() then
    error("DistributedDataParallel: the previous backward did not give every parameter a gradient (parameters "
      .. "unused in the forward?), so its averaging is still open; call ddp:sync_gradients() after backward "
      .. "in such steps", 2)
  end
  if self.broadcast_buffers and dist.size() > 1 then
    local bufs = self.module:buffers()
    if #bufs > 0 then
      attn.no_grad(function()
        for _, b in ipairs(bufs) do dist.broadcast(b, 0) end
      end)
    end
  end
  return self.module(...)
end

--- ddp:sync_gradients(): completes the gradient averaging of the last
-- backward (only needed when some parameter got no gradient).
function DDP:sync_gradients()
  self._reducer:finish()
end

--- ddp:bucket_count(): how many gradient buckets the reducer made.
function DDP:bucket_count() return self._reducer:buckets() end

--- ddp:no_sync([fn, ...]): see nn.DistributedDataParallel.
function DDP:no_sync(fn, ...)
  local r = self._reducer
  if fn ~= nil and type(fn) ~= "function" then
    error("DistributedDataParallel:no_sync: expected a function or nothing, got " .. type_name(fn), 2)
  end
  if fn == nil then
    r:enable(false)
    return setmetatable({}, {__close = function() r:enable(true) end})
  end
  r:enable(false)
  local res = table.pack(pcall(fn, ...))
  r:enable(true)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

--- extra_repr(): "bucket_mb=25, broadcast_buffers=true".
function DDP:extra_repr()
  return ("bucket_mb=%g, broadcast_buffers=%s"):format(self.bucket_mb, tostring(self.broadcast_buffers))
end

--- nn.utils: torch.nn.utils' gradient clipping (implemented in attn.optim).
nn.utils = {
  clip_grad_norm_ = function(...) return require("attn.optim").clip_grad_norm_(...) end,
  clip_grad_value_ = function(...) return require("attn.optim").clip_grad_value_(...) end,
}

--- utils.clip_grad_norm_(parameters, max_norm [, norm_type = 2 [,
-- error_if_nonfinite = false]]): attn.optim.clip_grad_norm_, scales every
-- .grad in place so that their total norm is at most max_norm; returns the
-- total norm (0-d tensor).  torch.nn.utils.clip_grad_norm_.
-- @function utils.clip_grad_norm_

--- utils.clip_grad_value_(parameters, clip_value): attn.optim.clip_grad_value_,
-- clamps every .grad in place to [-clip_value, clip_value].
-- torch.nn.utils.clip_grad_value_.
-- @function utils.clip_grad_value_

return nn
