-- SPDX-License-Identifier: MIT

--- attn.base: the flat attn table without its submodules: the C engine's
-- functions (attn.core), the tensor methods written in Lua and the ops of
-- attn/ops.lua.  Submodules (attn.nn, attn.F, ...) require this file, not
-- "attn", so no file requires the package back; attn/init.lua returns this
-- same table with the submodules added on top.
local core = require "attn.core"

local attn = {}

for name, fn in pairs(core) do
  if name:sub(1, 1) ~= "_" then attn[name] = fn end
end

attn._VERSION = "attn " .. core.info().version

-- attn.load / attn.save: torch's own files (.pt, .pth, .bin, or a zip with
-- <name>/data.pkl) go through attn/ptfile.lua; the rest to the C loaders.
-- A sandboxed attn.core has no _pt_open: there load and save stay the
-- core's functions, which refuse (files are not available).
if core._pt_open then
  local ptfile = require "attn.ptfile"
  local c_load, c_save = core.load, core.save
  attn.load = function(path, format, ...)
    if ptfile._is_pt(path, format) then return ptfile.load(path) end
    return c_load(path, format, ...)
  end
  attn.save = function(x, path, ...)
    if type(path) == "string" and ptfile._ext_pt(path) then return ptfile.save(x, path) end
    return c_save(x, path, ...)
  end
end

--- Tensor methods defined in Lua, shared with the C ones (t:name(...)).
attn._methods = core._methods
local methods = core._methods

-- t:type() (torch's "torch.FloatTensor", or t:type(dtype) converting) is a C method.

--------------------------------------------------------------------------
-- Misuse checks shared by the package's classes and options tables.

local error = core._error -- positioned at the user's line
--- Internal: the misuse checks (guards against m.f() for m:f(), options).
attn._misuse = {}
local getlocal, getinfo = debug and debug.getlocal, debug and debug.getinfo
local guards = setmetatable({}, {__mode = "k"}) -- wrapper -> the method it guards

-- The message for obj.name(...) where obj:name(...) was meant.
local function dot_message(name, recv, f)
  local args = "..."
  if getinfo and getinfo(f, "u").nparams <= 1 and not getinfo(f, "u").isvararg then args = "" end
  return ("%s: call it as %s:%s(%s) (with ':'); %s.%s(...) with '.' passes no %s"):format(name, recv, name,
    args, recv, name, recv)
end

--- Internal: f(self, ...) guarded against a call without self (the
-- PyTorch habit m.parameters() for m:parameters()): is_self(v) tells
-- whether v can be self; otherwise the call raises at the caller's line,
-- saying to write recv:name(...).  A tail call, so that f's own error
-- levels still reach its caller.  f is returned as is when it already is
-- a guard.
-- is_self may instead be a string: the name of a field every instance
-- holds as a raw field (a module's "_parameters"): the check is then one
-- table read and no function call (a C call such as getmetatable costs
-- more than the rest of the guard).  A number as self still raises Lua's
-- "attempt to index a number value" there: where a number is a likely
-- mistake, give a function.
function attn._misuse.guard_method(name, f, recv, is_self)
  if guards[f] then return f end
  local msg = dot_message(name, recv, f)
  local g
  if type(is_self) == "string" then
    local field = is_self
    g = function(self, ...)
      if not self or self[field] == nil then error(msg, 2) end
      return f(self, ...)
    end
  else
    g = function(self, ...)
      if not is_self(self) then error(msg, 2) end
      return f(self, ...)
    end
  end
  guards[g] = f
  return g
end

--- Internal: whether f is a method guarded by attn._misuse.guard_method.
function attn._misuse.is_guarded(f) return guards[f] ~= nil end

--- Internal: the function a method guard (or a C tensor method's closure)
-- stands for, else f: for tools that name functions by identity (the docs
-- and bad-input checks).
function attn._misuse.unwrap_method(f)
  local wrapped = require("attn.signature").wrapped -- options-table wrappers (attn/signature.lua)
  for _ = 1, 4 do
    local g = guards[f] or wrapped[f]
    if g == nil then break end
    f = g
  end
  return core._unwrap_method(f)
end

--- Internal: whether a Lua function (stored under name) is a method: its
-- first parameter is named self (what `function Cls:name()` gives) or _,
-- not a static function.
-- Without the debug library (a sandbox loads the package without it),
-- every function of a class is a method but the private ones (_name) and
-- these static functions and constructors.
local STATIC = {extend = true, new = true, from_pretrained = true, generate_square_subsequent_mask = true}
function attn._misuse.takes_self(f, name)
  if type(f) ~= "function" then return false end
  if getlocal == nil then
    return type(name) == "string" and not STATIC[name] and name:sub(1, 1) ~= "_"
  end
  local first = getlocal(f, 1)
  return first == "self" or first == "_" -- `_`: a method that ignores self (Identity.forward)
end

-- Whether v is an instance of cls: cls is v's metatable or lies on the
-- chain of __index tables above it.
local function instance_of(cls)
  return function(v)
    if type(v) ~= "table" then return false end
    local mt = getmetatable(v)
    for _ = 1, 16 do
      if type(mt) ~= "table" then return false end
      if mt == cls or rawget(mt, "__index") == cls then return true end
      local up = getmetatable(mt)
      mt = up and rawget(up, "__index")
    end
    return false
  end
end
attn._misuse.instance_of = instance_of

--- Internal: raises "fn: " .. fmt:format(...) at the user's line (the
-- first caller outside the attn package: core._error), however deep in
-- the package it is called.  The error helper of the modules that check
-- their arguments (attn.data, attn.text, ...).
function attn._misuse.fail(fn, fmt, ...)
  error(fn .. ": " .. fmt:format(...), 2)
end

--- Internal: guards every method of class table cls (the functions whose
-- first parameter is self, metamethods aside) with attn._misuse.guard_method;
-- recv names an instance in the message ("opt", "cache").  is_self
-- (a function, or a raw field's name: see guard_method) defaults to being
-- an instance of cls.  Returns cls.
function attn._misuse.guard_class(cls, recv, is_self)
  is_self = is_self or instance_of(cls)
  local names = {}
  for k, f in pairs(cls) do
    if type(k) == "string" and k:sub(1, 2) ~= "__" and attn._misuse.takes_self(f, k) then names[#names + 1] = k end
  end
  for _, k in ipairs(names) do rawset(cls, k, attn._misuse.guard_method(k, rawget(cls, k), recv, is_self)) end
  return cls
end

-- Levenshtein distance of two short strings (for "did you mean").
local function distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = {[0] = i}
    for j = 1, #b do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

--- Internal: the message for an unknown option key of function fn whose
-- valid keys are the list (or set) known: names them all, sorted, and the
-- closest one when it is near ("did you mean 'lr'?").
-- @usage
-- local signature = require "attn.signature"
-- print(pcall(signature.unknown_option, "sum", "keepdims", {"dim", "keepdim"}))   -- false, the valid keys
function attn._misuse.unknown_option(fn, key, known)
  local names = {}
  for k, v in pairs(known) do names[#names + 1] = tostring(type(k) == "number" and v or k) end
  table.sort(names)
  local hint = ""
  if type(key) == "string" then
    local best, bd = nil, math.huge
    for _, n in ipairs(names) do
      local d = distance(key:lower(), n:lower())
      if d < bd then best, bd = n, d end
    end
    if best and (bd <= math.max(1, #key // 3) or best:find(key, 1, true) or key:find(best, 1, true)) then
      hint = (" (did you mean '%s'?)"):format(best)
    end
  end
  return ("%s: unknown option '%s'%s; valid options: %s"):format(fn, tostring(key), hint,
    #names > 0 and table.concat(names, ", ") or "none")
end

--- Internal: the options table opts of fn ({} for nil), checked: a plain
-- table (no tensor, module or other object) whose keys known (a set
-- {name = true} or a list of names) holds; else raises at the user's line.
-- The one options check of the package's modules.
function attn._misuse.check_options(fn, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" or getmetatable(opts) ~= nil then
    error(("%s: options must be a table (got %s)"):format(fn, type(opts)), 2)
  end
  local set = known
  if known[1] ~= nil then
    set = {}
    for _, n in ipairs(known) do set[n] = true end
  end
  for k in pairs(opts) do
    if not set[k] then error(attn._misuse.unknown_option(fn, k, known), 2) end
  end
  return opts
end

--- Internal: the optional arguments of a function declared "native" in
-- attn/signature.lua (it reads them itself): values in torch's positional
-- order (names) and/or a trailing options table (plain, empty or with
-- string keys), merged into one table name -> value.  A name given both
-- ways, an unknown key or too many arguments raise.
function attn._misuse.merge_options(fn, names, ...)
  local n = select("#", ...)
  local args = {...}
  while n > 0 and args[n] == nil do n = n - 1 end
  local opts = {}
  local last = args[n]
  if n > 0 and type(last) == "table" and getmetatable(last) == nil and
    (next(last) == nil or type(next(last)) == "string") then
    attn._misuse.check_options(fn, last, names)
    for k, v in pairs(last) do opts[k] = v end
    n = n - 1
  end
  if n > #names then
    error(("%s: expected at most %d arguments here (%s), got %d"):format(fn, #names, table.concat(names, ", "), n),
      2)
  end
  for i = 1, n do
    local v = args[i]
    if v ~= nil then
      if opts[names[i]] ~= nil then
        error(("%s: %s given twice (as argument and in the options table)"):format(fn, names[i]), 2)
      end
      opts[names[i]] = v
    end
  end
  return opts
end

--- Internal: arguments given positionally (args, in the order of names)
-- or as one options table (args[1], a plain table, checked as by
-- check_options): a table name -> value.
function attn._misuse.named_args(fn, args, names)
  local first = args[1]
  if type(first) == "table" and getmetatable(first) == nil then return attn._misuse.check_options(fn, first, names) end
  local o = {}
  for i, n in ipairs(names) do o[n] = args[i] end
  return o
end

-- einsum, multi-dim reductions, roll, diag, cdist, ... (attn/ops.lua)
require("attn.ops")._install(attn, methods)

-- x.sum() for x:sum(): the tensor methods written in Lua say to write ':'
-- like the C ones (whose closures know they are methods; binding.c).
do
  local names = {}
  for name, f in pairs(methods) do
    if core._unwrap_method(f) == f then names[#names + 1] = name end -- a Lua function (C ones are method closures)
  end
  for _, name in ipairs(names) do
    methods[name] = attn._misuse.guard_method(name, methods[name], "x", attn.is_tensor)
  end
end

-- torch's keywords in a trailing options table (attn/signature.lua)
require("attn.signature").unknown_option = attn._misuse.unknown_option
require("attn.signature").install(attn, "")
require("attn.signature").install(methods, "")

-- The factories whose torch signature has positional parameters before
-- the keyword-only ones (attn.full(size, fill_value, *, dtype=...)): the
-- binding reads the keyword-only ones from its trailing table itself (a
-- "native:" line), and this expander first moves the positional ones
-- named in the table to their places (attn.full({2}, {fill_value = 3,
-- dtype = "int64"}) is attn.full({2}, 3, {dtype = "int64"})).  It runs
-- only when a call ends with an options table (core._declare).
do
  local signature = require "attn.signature"
  local function declare_spread(name)
    local names, _, lead, info = signature.parse(signature.SIGNATURES[name])
    core._declare(attn[name], lead, signature.expander(name, names, lead, (info.kwonly or #names + 1) - 1))
  end
  for _, name in ipairs({"full", "full_like", "eye", "arange", "linspace", "randint"}) do declare_spread(name) end
end

-- attn.scaled_dot_product_attention runs through one Lua frame so that
-- attn.viz.capture can watch its calls (the modules keep the function in
-- a local when they load, so the table field cannot be swapped later).
-- Without an observer the frame only passes the arguments on.
do
  local c_sdpa = attn.scaled_dot_product_attention
  local observer
  attn.scaled_dot_product_attention = function(...)
    if observer == nil then return c_sdpa(...) end
    return observer(c_sdpa, ...)
  end
  -- attn._sdpa_observer(f) -> the previous one: f(c_sdpa, q, k, v, ...)
  -- then runs in place of every call (nil: none)
  function attn._sdpa_observer(f)
    local old = observer
    observer = f
    return old
  end
end

-- x.device: every tensor is on the CPU (torch's x.device; a field, not a
-- method, so it is set after the methods are guarded)
methods.device = require("attn.device").device("cpu")

return attn
