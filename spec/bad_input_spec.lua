-- SPDX-License-Identifier: MIT
-- The bad-input catalogue (issue 8): every public Lua function of attn is
-- called with wrong types, nil, NaN/Inf/-0, non-integers, zero, negative and
-- huge sizes (2^53, 2^62, products that overflow int64), empty tensors and
-- zero-size dims, non-contiguous views (transposed, strided, offset,
-- stride-0 expanded), aliasing (the same tensor twice, in-place ops whose
-- other operand is the target), mismatched shapes and tables that are
-- ragged, too deep or hold non-numbers.  Each case must either
--   * raise a Lua error whose message is a string naming the function (or,
--     for functions written in Lua on top of the core, naming the attn
--     operation that refused, with its "name:" prefix), and that is not a
--     raw Lua/C message ("attempt to index a nil value", "bad argument #1
--     to '?'", ...), leaving every tensor argument unchanged (values, shape,
--     strides, requires_grad, grad), or
--   * succeed with sane results (well-formed tensors) and leave every
--     argument that the function does not document as written unchanged;
--     variants that only change the layout (non-contiguous views, tables
--     instead of tensors, aliasing) must give the same answer as the plain
--     call.
-- Gradient mode and the thread count must survive every case.
--
-- The public API is walked programmatically (attn, tensor methods, every
-- submodule, class and instance method table): a function that is neither
-- in the catalogue nor in the commented EXCLUDED list fails the coverage
-- test, so new functions must be catalogued.  The last test prints the
-- number of cases tried.
--
-- Empty-tensor semantics that torch allows are checked against torch
-- 1.13's answers (written next to each case; verified with /usr/bin/python3
-- and torch 1.13 when the catalogue was written).
local attn = require "attn"
local nn = require "attn.nn"
require "attn.functional"
local optim = require "attn.optim"
require "attn.nn_init"
local attention = require "attn.attention"
local seq2seq = require "attn.seq2seq"
local data = require "attn.data"
require "attn.plot"
require "attn.gradcheck"

---------------------------------------------------------------------------
-- 1. Tensors, snapshots, comparison
---------------------------------------------------------------------------

local function numel_of(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

-- Deterministic values without ties: (i * golden) mod 1 mapped to a range.
local RANGES = {
  sym = function(u) return 2 * u - 1 end,         -- (-1, 1)
  pos = function(u) return 0.1 + u end,           -- (0.1, 1.1)
  prob = function(u) return 0.05 + 0.9 * u end,   -- (0.05, 0.95)
  bin = function(u) return u < 0.5 and 0 or 1 end, -- 0/1 masks
}

local function values(n, range, salt)
  local f = RANGES[range or "sym"]
  local out = {}
  for i = 1, n do out[i] = f(((i + (salt or 0)) * 0.6180339887498949) % 1) end
  return out
end

-- A fresh tensor of shape with deterministic values.
local function T(shape, range, salt)
  local n = numel_of(shape)
  local t = attn.tensor(values(math.max(n, 1), range, salt), {dtype = attn.float32}) -- "bin" gives Lua integers
  if n == 0 then t = attn.zeros(0) end
  return t:reshape(shape)
end

-- A tensor of 1-based class/index numbers in 1..hi.
local function IDX(shape, hi)
  local n = numel_of(shape)
  local v = {}
  for i = 1, n do v[i] = (i * 7) % hi + 1 end
  if n == 0 then return attn.zeros(0):reshape(shape) end
  return attn.tensor(v, {dtype = attn.float32}):reshape(shape) -- float ids, so 1.5 and NaN can be stored
end

local function flat(t)
  local v = attn.no_grad(function() return t:reshape(-1):totable() end)
  return v
end

local function same_number(a, b, tol)
  if a == b then return true end
  if a ~= a and b ~= b then return true end
  if tol and math.abs(a - b) <= tol * (1 + math.abs(b)) then return true end
  return false
end

local function same_list(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- Every tensor reachable from the arguments (tables to depth 4, modules
-- through their parameters and buffers).
local function collect_tensors(args, n)
  local out, seen = {}, {}
  local function walk(v, depth)
    if seen[v] then return end
    if attn.is_tensor(v) then
      seen[v] = true
      out[#out + 1] = v
    elseif type(v) == "table" and depth <= 4 then
      seen[v] = true
      if nn.is_module(v) then
        for _, p in ipairs(v:parameters()) do walk(p, depth + 1) end
        for _, b in ipairs(v:buffers()) do walk(b, depth + 1) end
      else
        local count = 0
        for k, x in next, v do
          walk(k, depth + 1)
          walk(x, depth + 1)
          count = count + 1
          if count > 64 then break end
        end
      end
    end
  end
  for i = 1, n do walk(args[i], 1) end
  return out
end

local function snap_one(t)
  local ok, s = pcall(function()
    local g = t.grad
    return {shape = t:shape(), stride = t:stride(), vals = flat(t), rg = t.requires_grad,
            grad = g and flat(g) or false}
  end)
  return ok and s or {closed = true}
end

local function snapshot(args, n)
  local ts = collect_tensors(args, n)
  local s = {}
  for i, t in ipairs(ts) do s[i] = {t = t, s = snap_one(t)} end
  return s
end

-- nil when every snapshotted tensor (except those in skip) is unchanged,
-- else a description.
local function changed(snap, skip)
  for _, e in ipairs(snap) do
    if not (skip and skip[e.t]) and not e.s.closed then
      local now = snap_one(e.t)
      if now.closed then return "an argument tensor was closed" end
      if not same_list(now.shape, e.s.shape) then return "an argument's shape changed" end
      if not same_list(now.stride, e.s.stride) then return "an argument's strides changed" end
      if now.rg ~= e.s.rg then return "an argument's requires_grad changed" end
      for i = 1, #e.s.vals do
        if not same_number(now.vals[i], e.s.vals[i]) then
          return ("an argument's value %d changed (%s -> %s)"):format(i, e.s.vals[i], now.vals[i])
        end
      end
      if (now.grad and 1 or 0) ~= (e.s.grad and 1 or 0) then return "an argument's grad appeared or vanished" end
      if now.grad then
        for i = 1, #now.grad do
          if not same_number(now.grad[i], e.s.grad[i]) then return "an argument's grad changed" end
        end
      end
    end
  end
  return nil
end

-- Deep comparison of results: tensors by shape and values (relative
-- tolerance tol), numbers, strings, booleans, tables recursively; modules,
-- functions and other userdata are not compared.
local function same_value(a, b, tol, depth)
  depth = depth or 0
  if attn.is_tensor(a) or attn.is_tensor(b) then
    if not (attn.is_tensor(a) and attn.is_tensor(b)) then return false, "tensor vs " .. type(b) end
    local oka, sa = pcall(a.shape, a)
    local okb, sb = pcall(b.shape, b)
    if not (oka and okb) then return oka == okb, "closed tensor" end
    if not same_list(sa, sb) then
      return false, ("shapes [%s] vs [%s]"):format(table.concat(sa, ","), table.concat(sb, ","))
    end
    local va, vb = flat(a), flat(b)
    for i = 1, #va do
      if not same_number(va[i], vb[i], tol) then return false, ("value %d: %s vs %s"):format(i, va[i], vb[i]) end
    end
    return true
  end
  if type(a) ~= type(b) then return false, type(a) .. " vs " .. type(b) end
  if type(a) == "number" then return same_number(a, b, tol), ("%s vs %s"):format(a, b) end
  if type(a) == "table" then
    if nn.is_module(a) or depth > 3 then return true end
    for k, v in pairs(a) do
      local ok, why = same_value(v, b[k], tol, depth + 1)
      if not ok then return false, tostring(k) .. ": " .. tostring(why) end
    end
    for k in pairs(b) do if a[k] == nil then return false, "extra key " .. tostring(k) end end
    return true
  end
  if type(a) == "string" or type(a) == "boolean" then return a == b, tostring(a) .. " vs " .. tostring(b) end
  return true
end

-- Results must be well-formed: tensors with non-negative integral sizes
-- whose product is numel, printable.
local function sane(v, depth)
  depth = depth or 0
  if attn.is_tensor(v) then
    local ok, why = pcall(function()
      local shape = v:shape()
      local n = 1
      for _, s in ipairs(shape) do
        if math.type(s) ~= "integer" or s < 0 then error("bad size " .. tostring(s)) end
        n = n * s
      end
      if v:numel() ~= n then error("numel does not match the shape") end
      if n <= 4096 then tostring(v) end
    end)
    return ok, why
  end
  if type(v) == "table" and depth < 3 and not nn.is_module(v) then
    for _, x in next, v do
      local ok, why = sane(x, depth + 1)
      if not ok then return false, why end
    end
  end
  return true
end

---------------------------------------------------------------------------
-- 2. Messages
---------------------------------------------------------------------------

-- Raw messages that mean our code did not validate its arguments.
local RAW = {
  "attempt to index", "attempt to call", "attempt to perform arithmetic", "attempt to compare",
  "attempt to concatenate", "attempt to get length", "attempt to ", "bad argument #%d+ to '%?'",
  "stack overflow", "has no integer representation", "invalid conversion", "table index is nil",
  "table index is NaN", "invalid value %(at index", "integer overflow",
  "'for' initial value", "'for' limit", "'for' step",
  "invalid option '%%", "string slice too long", "unable to dump",
}

-- Every name that prefixes one of attn's own messages ("matmul: ...",
-- "Linear: ...", "Vocab:index: ..."): the public names, gathered below.
local KNOWN_PREFIX = {}

local function message_problem(err, names, lenient)
  if type(err) ~= "string" then return "error value is a " .. type(err) .. ", not a message" end
  for _, p in ipairs(RAW) do
    if err:find(p) then return "raw Lua message" end
  end
  -- a closed tensor passed on: Lua's own argument error says so plainly
  if err:find("(tensor is closed)", 1, true) then return nil end
  local low = err:lower()
  for _, n in ipairs(names) do
    if low:find(n:lower(), 1, true) then return nil end
  end
  if lenient then
    -- strip "file:line: " positions, then look at the "name:" prefix
    local body = err:gsub("^[^\n]-:%d+: ", "")
    local prefix = body:match("^([%w_%.]+):") or body:match("^([%w_%.]+:[%w_]+):")
    if prefix and KNOWN_PREFIX[prefix] then return nil end
    prefix = body:match("^([%w_%.]+):[%w_]+:")
    if prefix and KNOWN_PREFIX[prefix] then return nil end
    -- "init.calculate_gain: ..." and luaL_argerror's "bad argument #2 to 'uniform_' (...)"
    prefix = body:match("^[%w_]+%.([%w_]+):") or body:match("^bad argument #%d+ to '([%w_]+)'")
    if prefix and KNOWN_PREFIX[prefix] then return nil end
  end
  return "message does not name the function (" .. table.concat(names, "/") .. ")"
end


---------------------------------------------------------------------------
-- 3. Argument kinds
---------------------------------------------------------------------------
-- A kind describes one argument: good() makes a fresh valid value; bads is a
-- list of {label, make, expect} where make() returns the value to pass (and,
-- for expect "same", the reference value whose call must give the same
-- answer).  expect is
--   "error"  must raise a good message with every tensor unchanged;
--   "any"    may raise (good message, tensors unchanged) or succeed (sane
--            results, unwritten arguments unchanged);
--   "same"   must do what the call with the reference value does: both
--            fail, or both succeed with equal results and equal writes.

local closed_tensor = function()
  local t = attn.ones(2)
  getmetatable(t).__close(t)
  return t
end

-- Values of the wrong type for any argument (a kind drops those it takes).
local WRONG = {
  {"a string", function() return "abc" end},
  {"true", function() return true end},
  {"false", function() return false end},
  {"a function", function() return function() return 1 end end},
  {"a coroutine", function() return coroutine.create(function() end) end},
  {"a file handle", function() return io.stdout end},
  {"a generator", function() return attn.Generator(3) end},
}

-- opt: the argument is optional, where Lua's `x or default` idiom reads
-- false as absent (the default): allowed, not required to raise.
local function wrong_except(skip, opt)
  local out = {}
  for _, w in ipairs(WRONG) do
    if not (skip and skip[w[1]]) then
      out[#out + 1] = {w[1], w[2], (opt and w[1] == "false") and "any" or "error"}
    end
  end
  return out
end

local function append(list, more)
  for _, x in ipairs(more) do list[#list + 1] = x end
  return list
end

local function deep_table(depth)
  local t = {1}
  for _ = 1, depth - 1 do t = {t} end
  return t
end

-- Layout variants of a tensor value: (view, contiguous copy) pairs.
local function layout_variants(shape, make)
  local out, nd = {}, #shape
  if nd >= 2 then
    out[#out + 1] = {"a transposed view", function()
      local s = {}
      for i = 1, nd do s[i] = shape[i] end
      s[nd - 1], s[nd] = shape[nd], shape[nd - 1]
      local v = make(s):transpose(nd - 1, nd)
      local base = make(shape)
      v:copy_(base)
      return v, base
    end}
  end
  if nd >= 1 then
    out[#out + 1] = {"a strided view", function()
      local s = {}
      for i = 1, nd do s[i] = shape[i] end
      s[nd] = 2 * shape[nd] + 1
      local v = make(s):fill_(-7):slice(nd, 2, nil, 2)
      if shape[nd] == 0 then v = make(s):narrow(nd, 1, 0) end
      local base = make(shape)
      v:copy_(base)
      return v, base
    end}
    out[#out + 1] = {"an offset view", function()
      local s = {}
      for i = 1, nd do s[i] = shape[i] end
      s[1] = shape[1] + 3
      local v = make(s):fill_(-9):narrow(1, 3, shape[1])
      local base = make(shape)
      v:copy_(base)
      return v, base
    end}
    out[#out + 1] = {"a stride-0 expanded view", function()
      local s = {}
      for i = 1, nd do s[i] = shape[i] end
      s[1] = 1
      local v = make(s):expand(shape)
      return v, v:clone()
    end}
  end
  return out
end

local kind = {}

-- A tensor argument of shape.  opts: range (values), salt, grad (a leaf
-- requiring grad), opt (nil allowed), strict (numbers/tables are refused:
-- methods such as t:fill_ take a tensor only), written (the function writes
-- it: an expanded view must be refused), noview (skip layout variants:
-- e.g. random fills, whose draws follow memory order like torch's),
-- noedge (skip empty/NaN/0-d variants), make (custom maker).
function kind.tensor(shape, opts)
  opts = opts or {}
  local make = opts.make or function(s)
    local t = T(s, opts.range, opts.salt)
    if opts.grad then t:requires_grad_() end
    return t
  end
  local k = {shape = shape, tensor = true, opt = opts.opt, written = opts.written, grad = opts.grad}
  k.good = function() return make(shape) end
  local b = wrong_except(opts.opt and {} or nil)
  append(b, {
    {"a closed tensor", closed_tensor, "error"},
    {"a ragged table", function() return {{1, 2}, {3}} end, "error"},
    {"a table of strings", function() return {{"a", "b"}} end, "error"},
    {"a table holding a function", function() return {1, print} end, "error"},
    {"a table nested 9 deep", function() return deep_table(9) end, "error"},
    {"a module", function() return nn.Identity() end, "error"},
    {"a table with holes", function() return {1, nil, 3} end, "any"},
    {"a number", function() return 2.5 end, "any"},
    {"an empty table", function() return {} end, "any"},
  })
  if not opts.strict and #shape <= 3 and not opts.grad then
    b[#b + 1] = {"the same values as a table", function()
      local t = make(shape)
      local v = t:totable()
      return v, t
    end, "same_or_error"}
  end
  if not opts.noedge then
    b[#b + 1] = {"a 0-d tensor", function() return make({}) end, "any"}
    b[#b + 1] = {"a tensor with one extra leading dim", function()
      local s = {2}
      for i, x in ipairs(shape) do s[i + 1] = x end
      return make(s)
    end, "any"}
    if #shape >= 1 then
      b[#b + 1] = {"a tensor with one dim fewer", function()
        local s = {}
        for i = 2, #shape do s[i - 1] = shape[i] end
        return make(s)
      end, "any"}
    end
    for d = 1, #shape do
      b[#b + 1] = {"a tensor with dim " .. d .. " of size 0", function()
        local s = {}
        for i, x in ipairs(shape) do s[i] = x end
        s[d] = 0
        return make(s)
      end, "any"}
      b[#b + 1] = {"a tensor with dim " .. d .. " one larger", function()
        local s = {}
        for i, x in ipairs(shape) do s[i] = x end
        s[d] = s[d] + 1
        return make(s)
      end, "any"}
    end
    for _, v in ipairs({0 / 0, math.huge, -math.huge}) do
      b[#b + 1] = {"a tensor holding " .. tostring(v), function()
        local t = make(shape)
        attn.no_grad(function()
          if t:numel() > 0 then t:reshape(-1)[1] = v end
        end)
        return t
      end, "any"}
    end
  end
  if not opts.noview then
    for _, lv in ipairs(layout_variants(shape, make)) do
      local expect = "same"
      if opts.written and lv[1]:find("expanded") then expect = "error" end
      b[#b + 1] = {lv[1], lv[2], expect, layout = true}
    end
  end
  if not opts.opt then b[#b + 1] = {"nil", function() return nil end, "error"} end
  if opts.self then
    -- the operand of a metamethod or method call: always a tensor (Lua
    -- itself reports `true[1]`), so only tensor values are tried
    local only = {}
    for _, x in ipairs(b) do
      if x[1]:find("tensor") or x[1]:find("view") then only[#only + 1] = x end
    end
    b = only
  end
  k.bads = b
  return k
end

-- Index tensors (1-based values in 1..hi).
function kind.index(shape, hi, opts)
  opts = opts or {}
  local k = kind.tensor(shape, {opt = opts.opt, make = function(s) return IDX(s, hi) end, noedge = true})
  append(k.bads, {
    {"index 0", function() local t = IDX(shape, hi); t:reshape(-1)[1] = 0; return t end, "error"},
    {"index hi + 1", function() local t = IDX(shape, hi); t:reshape(-1)[1] = hi + 1; return t end, "error"},
    {"index 1.5", function() local t = IDX(shape, hi); t:reshape(-1)[1] = 1.5; return t end, "error"},
    {"index NaN", function() local t = IDX(shape, hi); t:reshape(-1)[1] = 0 / 0; return t end, "error"},
    {"index -inf", function() local t = IDX(shape, hi); t:reshape(-1)[1] = -math.huge; return t end, "error"},
    {"index 1e30", function() local t = IDX(shape, hi); t:reshape(-1)[1] = 1e30; return t end, "error"},
    {"index 2^40", function() local t = IDX(shape, hi); t:reshape(-1)[1] = 2 ^ 40; return t end, "error"},
    {"an empty index", function()
      local s = {}
      for i, x in ipairs(shape) do s[i] = x end
      if #s > 0 then s[#s] = 0 end
      return IDX(s, hi)
    end, "any"},
  })
  return k
end

local INT_EDGES = {
  {"0", 0}, {"-1", -1}, {"-2^62", -(1 << 62)}, {"2^53", 1 << 53}, {"2^62", 1 << 62},
  {"maxinteger", math.maxinteger}, {"mininteger", math.mininteger}, {"2^31", 1 << 31}, {"-2^31", -(1 << 31)},
}

-- An integer argument.  opts: min (smaller values must be refused), max
-- (larger ones too), opt.
function kind.int(good, opts)
  opts = opts or {}
  local k = {opt = opts.opt}
  k.good = function() return good end
  local b = wrong_except(nil, opts.opt)
  append(b, {
    {"1.5", function() return good + 0.5 end, "error"},
    {"NaN", function() return 0 / 0 end, "error"},
    {"inf", function() return math.huge end, "error"},
    {"-inf", function() return -math.huge end, "error"},
    {"2^63 (a float)", function() return 2.0 ^ 63 end, "error"},
    {"-2^64 (a float)", function() return -(2.0 ^ 64) end, "error"},
    {"a table", function() return {good} end, "error"},
    {"a tensor", function() return attn.tensor(good) end, opts.tensor_ok and "any" or "error"},
    {"the same value as a float", function() return good + 0.0, good end, "same"},
  })
  for _, e in ipairs(INT_EDGES) do
    local expect = "any"
    if (opts.min and e[2] < opts.min) or (opts.max and e[2] > opts.max) then expect = "error" end
    b[#b + 1] = {e[1], function() return e[2] end, expect}
  end
  if not opts.opt then b[#b + 1] = {"nil", function() return nil end, "error"} end
  k.bads = b
  return k
end

-- A size (an element count): like an integer, but the huge edges stay
-- where an allocation must fail (2^40 floats and up), never a few GB.
function kind.size(good, opts)
  opts = opts or {}
  local k = kind.int(good, {opt = opts.opt, min = opts.min or 0, max = opts.max, tensor_ok = opts.tensor_ok})
  local b = {}
  for _, x in ipairs(k.bads) do
    if not (x[1] == "2^31" or x[1] == "-2^31" or x[1] == "2^53") then b[#b + 1] = x end
  end
  b[#b + 1] = {"2^40", function() return 1 << 40 end, opts.huge or "any"}
  b[#b + 1] = {"2^53", function() return 1 << 53 end, opts.huge or "any"}
  for _, x in ipairs(b) do
    if x[1] == "2^62" or x[1] == "maxinteger" then x[3] = opts.huge or "any" end
  end
  k.bads = b
  return k
end

-- A 1-based dim of a tensor with nd dims (negative from the end).
function kind.dim(good, nd, opts)
  opts = opts or {}
  local extra = opts.extra or 0
  local k = {opt = opts.opt}
  k.good = function() return good end
  local b = wrong_except()
  append(b, {
    {"1.5", function() return 1.5 end, "error"},
    {"NaN", function() return 0 / 0 end, "error"},
    {"inf", function() return math.huge end, "error"},
    {"dim 0", function() return 0 end, "error"},
    {"dim ndim + 1", function() return nd + extra + 1 end, "error"},
    {"dim -(ndim + 1)", function() return -(nd + extra) - 1 end, "error"},
    {"dim 2^53", function() return 1 << 53 end, "error"},
    {"dim 2^32 + 1", function() return (1 << 32) + 1 end, "error"},
    {"dim maxinteger", function() return math.maxinteger end, "error"},
    {"dim mininteger", function() return math.mininteger end, "error"},
    {"a table", function() return {good} end, opts.table_ok and "any" or "error"},
    {"the same dim counted from the end", function()
      local neg = good > 0 and good - nd - extra - 1 or good
      return neg, good
    end, "same"},
  })
  if not opts.opt then b[#b + 1] = {"nil", function() return nil end, "error"} end
  k.bads = b
  return k
end

-- A number argument.  opts: opt, finite (NaN/inf must be refused), min/max
-- (outside must be refused).
function kind.num(good, opts)
  opts = opts or {}
  local k = {opt = opts.opt}
  k.good = function() return good end
  local b = wrong_except(nil, opts.opt)
  b[#b + 1] = {"a table", function() return {good} end, "error"}
  b[#b + 1] = {"a tensor", function() return attn.tensor(good) end, opts.tensor_ok and "any" or "error"}
  for _, v in ipairs({0 / 0, math.huge, -math.huge}) do
    b[#b + 1] = {tostring(v), function() return v end, opts.finite and "error" or "any"}
  end
  for _, v in ipairs({-0.0, 0, 1e300, -1e300, 1e-300, -1, 2, 0.5}) do
    local expect = "any"
    if (opts.min and v < opts.min) or (opts.max and v > opts.max) then expect = "error" end
    b[#b + 1] = {("%.17g"):format(v), function() return v end, expect}
  end
  if not opts.opt then b[#b + 1] = {"nil", function() return nil end, "error"} end
  k.bads = b
  return k
end

-- A boolean argument (optional unless opts.required).
function kind.bool(good, opts)
  opts = opts or {}
  local k = {opt = not opts.required}
  k.good = function() return good end
  local b = wrong_except({["true"] = true, ["false"] = true})
  append(b, {
    {"a table", function() return {} end, "error"},
    {"1", function() return 1 end, opts.lax and "any" or "error"},
    {"0", function() return 0 end, opts.lax and "any" or "error"},
    {"the other boolean", function() return not good end, "any"},
  })
  b[#b + 1] = {"nil", function() return nil end, opts.required and "error" or "any"}
  k.bads = b
  return k
end

-- One of a set of strings.
function kind.choice(good, opts)
  opts = opts or {}
  local k = {opt = opts.opt}
  k.good = function() return good end
  local b = wrong_except({["a string"] = true}, opts.opt)
  append(b, {
    {"an unknown name", function() return "bogus" end, "error"},
    -- luaL_checkoption (the C functions) compares C strings: "tanh\0" reads as "tanh"
    {"a name with a NUL", function() return good .. "\0" end, "any"},
    {"1", function() return 1 end, "error"},
    {"a table", function() return {good} end, "error"},
  })
  b[#b + 1] = {"nil", function() return nil end, opts.opt and "any" or "error"}
  k.bads = b
  return k
end

-- A string argument (any string is fine unless opts say otherwise).
function kind.str(good, opts)
  opts = opts or {}
  local k = {opt = opts.opt}
  k.good = function() return good end
  local b = wrong_except({["a string"] = true}, opts.opt)
  append(b, {
    {"a table", function() return {good} end, "error"},
    {"an empty string", function() return "" end, opts.empty or "any"},
    {"a string with a NUL", function() return "a\0b" end, opts.nul or "any"},
    {"a number", function() return 12 end, opts.number or "any"},
  })
  b[#b + 1] = {"nil", function() return nil end, opts.opt and "any" or "error"}
  k.bads = b
  return k
end

-- A value with hand-made bad values: good is a maker, bads a list as above.
function kind.custom(good, bads, opts)
  opts = opts or {}
  local k = {opt = opts.opt}
  k.good = good
  k.bads = append({}, bads)
  if opts.wrong ~= false then append(k.bads, wrong_except(opts.skip)) end
  if not opts.opt then k.bads[#k.bads + 1] = {"nil", function() return nil end, "error"} end
  return k
end

-- A fixed value that is not mutated (the self of a method, a module).
function kind.fixed(make)
  return {good = make, bads = {}, fixed = true}
end

-- An options table: fields maps option names to kinds (each optional).
-- opts: strict (unknown names must be refused; default true), opt (the
-- table itself may be nil; default true).
function kind.opts(fields, opts)
  opts = opts or {}
  local k = {opt = opts.opt ~= false}
  local names = {}
  for name in pairs(fields) do names[#names + 1] = name end
  table.sort(names)
  k.good = function()
    local t = {}
    for _, name in ipairs(names) do
      if not fields[name].skip_good then t[name] = fields[name].good() end
    end
    return t
  end
  local b = wrong_except({["false"] = true})
  b[#b + 1] = {"false", function() return false end, "error"}
  b[#b + 1] = {"a number", function() return 5 end, "error"}
  b[#b + 1] = {"a tensor", function() return attn.ones(1) end, "error"}
  if opts.strict ~= false then
    b[#b + 1] = {"an unknown option", function()
      local t = k.good()
      t.bogus_option = 1
      return t
    end, "error"}
  end
  b[#b + 1] = {"an empty table", function() return {} end, "any"}
  for _, name in ipairs(names) do
    for _, fb in ipairs(fields[name].bads) do
      b[#b + 1] = {"option " .. name .. " = " .. fb[1], function()
        local t = k.good()
        local v, ref = fb[2]()
        if fb[1] == "nil" and not fields[name].required then v = nil end
        t[name] = v
        if fb[3] == "same" or fb[3] == "same_or_error" then
          local r = k.good()
          r[name] = ref
          return t, r
        end
        return t
      end, (fb[1] == "nil" and not fields[name].required) and "any" or fb[3]}
    end
  end
  b[#b + 1] = {"nil", function() return nil end, opts.opt == false and "error" or "any"}
  k.bads = b
  return k
end

---------------------------------------------------------------------------
-- 4. The engine
---------------------------------------------------------------------------

local function pack(...) return {n = select("#", ...), ...} end

local stats = {cases = 0, functions = 0}

-- The tensors reachable from the arguments a function may write.
local function written_set(entry, args)
  local skip = {}
  for _, w in ipairs(entry.writes or {}) do
    for _, t in ipairs(collect_tensors({args[w]}, 1)) do skip[t] = true end
  end
  return skip
end

local function invoke(entry, args, n)
  attn.manual_seed(1234)
  return pack(pcall(entry.call, table.unpack(args, 1, n)))
end

-- Runs one case; returns nil or a failure description.
local function run_case(entry, _label, args, n, expect, ref, check)
  stats.cases = stats.cases + 1
  local mode, threads = attn.is_grad_enabled(), attn.get_num_threads()
  local snap = snapshot(args, n)
  local r = invoke(entry, args, n)
  if attn.is_grad_enabled() ~= mode then
    attn.set_grad_enabled(mode)
    if not entry.mode_ok then return "gradient mode was left " .. (mode and "off" or "on") end
  end
  if attn.get_num_threads() ~= threads then
    attn.set_num_threads(threads)
    return "the thread count changed"
  end
  if not r[1] then
    local err = r[2]
    local prob = message_problem(err, entry.names, entry.lenient)
    if prob then return prob .. ": " .. tostring(err) end
    local ch = changed(snap)
    if ch then return "failed (" .. tostring(err) .. ") but " .. ch end
    if expect == "ok" then return "the plain call failed: " .. tostring(err) end
    if expect == "same" and ref then
      local rr = invoke(entry, ref, n)
      if rr[1] then return "failed (" .. tostring(err) .. ") where the plain layout succeeds" end
    end
    return nil
  end
  if expect == "error" then return "succeeded where an error was expected" end
  for i = 2, r.n do
    local ok, why = sane(r[i])
    if not ok then return "result " .. (i - 1) .. " is malformed: " .. tostring(why) end
  end
  if not entry.writes_all then
    local ch = changed(snap, written_set(entry, args))
    if ch then return "succeeded but " .. ch end
  end
  if check then
    local ok, why = pcall(check, table.unpack(r, 2, r.n))
    if not ok then return "wrong result: " .. tostring(why) end
  end
  if (expect == "same" or expect == "same_or_error") and ref then
    local rr = invoke(entry, ref, n)
    if not rr[1] then return "succeeded where the plain layout fails: " .. tostring(rr[2]) end
    if not entry.nocompare then
      for i = 2, math.max(r.n, rr.n) do
        local ok, why = same_value(r[i], rr[i], 1e-5)
        if not ok then return "result " .. (i - 1) .. " differs from the plain layout's: " .. tostring(why) end
      end
      for _, w in ipairs(entry.writes or {}) do
        local ok, why = same_value(args[w], ref[w], 1e-5)
        if not ok then return "argument " .. w .. " was written differently: " .. tostring(why) end
      end
    end
  end
  return nil
end

local function fresh(entry)
  local args = {}
  for i, k in ipairs(entry.sig) do args[i] = k.good() end
  return args
end

-- Runs every case of an entry; returns the list of failures.
local function run_entry(entry)
  local fails = {}
  local n = #entry.sig
  local function note(label, why)
    if why then fails[#fails + 1] = label .. ": " .. why end
  end
  if not entry.nobase then
    note("valid arguments", run_case(entry, "valid", fresh(entry), n, entry.base_expect or "ok", nil, entry.check))
  end
  for i, k in ipairs(entry.sig) do
    for _, bad in ipairs(k.bads) do
      local skip = entry.skip and entry.skip[i] and entry.skip[i][bad[1]]
      if not skip then
        local args = fresh(entry)
        local v, r = bad[2]()
        args[i] = v
        local ref
        if bad[3] == "same" or bad[3] == "same_or_error" then
          ref = fresh(entry)
          ref[i] = r
        end
        local expect = (entry.override and entry.override[i] and entry.override[i][bad[1]]) or bad[3]
        if entry.layout and bad.layout and expect == "same" then expect = entry.layout end
        note(("argument %d as %s"):format(i, bad[1]), run_case(entry, bad[1], args, n, expect, ref))
      end
    end
  end
  -- aliasing: one tensor passed twice, or an in-place op reading a view
  -- of its own target
  if not entry.noalias then
    for i, ki in ipairs(entry.sig) do
      for j, kj in ipairs(entry.sig) do
        if i ~= j and ki.tensor and kj.tensor and not ki.fixed and not kj.fixed and same_list(ki.shape, kj.shape)
          and not ki.grad and not kj.grad and (i < j or ki.written) then
          local args, ref = fresh(entry), fresh(entry)
          args[j] = args[i]
          ref[j] = ref[i]:clone()
          note(("argument %d passed again as argument %d"):format(i, j), run_case(entry, "alias", args, n, "same", ref))
          if ki.written and #ki.shape == 2 and ki.shape[1] == ki.shape[2] then
            args, ref = fresh(entry), fresh(entry)
            args[j] = args[i]:t()
            ref[j] = ref[i]:t():clone()
            -- the view of the target is written through the target
            local e2 = setmetatable({writes = append({j}, entry.writes or {})}, {__index = entry})
            note(("argument %d's transpose as argument %d"):format(i, j),
              run_case(e2, "alias-t", args, n, "same", ref))
          end
        end
      end
    end
  end
  for _, c in ipairs(entry.cases or {}) do
    local args, cn = c[2]()
    note(c[1], run_case(entry, c[1], args, cn or #args, c[3], nil, c[4]))
  end
  return fails
end

---------------------------------------------------------------------------
-- 5. The public API, walked
---------------------------------------------------------------------------

-- Example instances whose method tables are not reachable otherwise.
local function instance_tables()
  local sgd = optim.SGD({nn.Parameter(attn.ones(2))}, {lr = 0.1})
  return {
    {"attn.Tensor", getmetatable(attn.ones(1))},
    {"attn.Generator", getmetatable(attn.Generator(1))},
    {"attn.Generator", getmetatable(attn.Generator(1)).__index},
    {"attn.data.Vocab", getmetatable(data.Vocab({"a"}))},
    {"attn.data.CharTable", getmetatable(data.CharTable({"a"}))},
    {"attn.data.Progress", getmetatable(data.progress(1, {out = io.stderr, interactive = false}))},
    {"attn.attention.KVCache", getmetatable(attention.KVCache())},
    {"attn.nn.Instance", getmetatable(nn.Identity())},
    {"attn.nn.Class", getmetatable(nn.Linear)},
    {"attn.optim.Optimizer", getmetatable(sgd)},
    {"attn.optim.LRScheduler", getmetatable(optim.StepLR(sgd, 2))},
    {"attn.text.WordPiece", getmetatable(require("attn.text").WordPiece.new({"[UNK]", "a"}))},
  }
end

-- Qualified name -> function for every public function: fields of attn
-- and its submodules (classes included), the tensor methods, and the
-- method tables and metamethods of the objects they make.  Names starting
-- with one underscore are private by the package's convention (_update,
-- _len, _getitem, ...: reached through public methods and metamethods,
-- which are catalogued); attn._methods is the public tensor method table.
-- The package's module files (lua/attn/*.lua), so that a new module is
-- walked even before it is catalogued: from the source tree ctest names,
-- else next to the attn.nn that was loaded.
local function module_files()
  local dir = os.getenv("ATTN_SOURCE_DIR")
  dir = dir and (dir .. "/lua/attn") or (package.searchpath("attn.nn", package.path) or ""):match("^(.*)/[^/]+$")
  local out = {}
  local p = dir and io.popen('ls "' .. dir .. '" 2>/dev/null')
  if p then
    for f in p:lines() do
      local name = f:match("^([%w_]+)%.lua$")
      if name and name ~= "init" then out[#out + 1] = name end
    end
    p:close()
  end
  return out
end

local function public_functions()
  for _, m in ipairs({"nn", "F", "functional", "optim", "init", "gradcheck", "attention", "seq2seq", "plot", "data",
                      "text", "bert"}) do
    local _ = attn[m]
  end
  local found, seen = {}, {}
  local function walk(prefix, t, depth)
    if seen[t] or depth > 4 then return end
    seen[t] = true
    local keys = {}
    for k in next, t do
      if type(k) == "string" then keys[#keys + 1] = k end
    end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v = rawget(t, k)
      local private = k:sub(1, 1) == "_" and k:sub(2, 2) ~= "_"
      if k == "_methods" then
        walk("attn.Tensor", v, depth + 1)
      elseif not private and k ~= "super" then
        local name = prefix .. "." .. k
        if type(v) == "function" then
          found[#found + 1] = {name, attn._misuse.unwrap_method(v)} -- a method's guard stands for the method
        elseif type(v) == "table" then
          walk(name, v, depth + 1)
        end
      end
    end
  end
  walk("attn", attn, 0)
  -- module files that attn does not load by name (attn.unicode_data, ...)
  for _, name in ipairs(module_files()) do
    local ok, m = pcall(require, "attn." .. name)
    if ok and type(m) == "table" then walk("attn." .. name, m, 1) end
  end
  for _, it in ipairs(instance_tables()) do
    seen[it[2]] = nil
    walk(it[1], it[2], 1)
  end
  return found
end

---------------------------------------------------------------------------
-- 6. Entries
---------------------------------------------------------------------------

local CATALOGUE = {}

local function resolve(path)
  local t = {attn = attn}
  for part in path:gmatch("[^%.]+") do
    if type(t) ~= "table" then return nil end
    t = t[part]
  end
  return t
end

local function is_ident(s) return s:match("^[%a_][%w_]*$") and s ~= "repeat" end

-- E(path, sig [, opts]): the function at path ("attn.add", "attn.nn.Linear"
-- for a constructor) called as path(...) with arguments of the kinds in sig.
-- E(path, sig, {method = "name"}): sig[1] makes the object; called as
-- obj:name(...).
-- opts: writes (argument positions the function writes), writes_all, names
-- (more names a message may give), covers (other functions this entry
-- exercises), cases ({label, function() return args, n end, expect
-- [, check]} lists), skip/override ([position][label] = true / expect),
-- noalias, nocompare, check (for the valid call).
local function E(path, sig, opts)
  opts = opts or {}
  local entry = {path = path, sig = sig}
  for k, v in pairs(opts) do entry[k] = v end
  local fn
  local head, key = path:match("^(.*)%.([^%.]+)$")
  local holder = resolve(head)
  local target = type(holder) == "table" and holder[key] or nil
  local names = {key}
  if opts.call then
    entry.call = opts.call
    fn = opts.fn or target
  elseif opts.method then
    local m = opts.method
    local src = is_ident(m) and ("return function(self, ...) return self:" .. m .. "(...) end")
      or ("return function(self, ...) return self[\"" .. m .. "\"](self, ...) end")
    entry.call = load(src)()
    fn = opts.fn or (type(target) == "table" and rawget(target, m)) or target
    names[#names + 1] = m
  else
    local src = is_ident(key) and ("local h = ...; return function(...) return h." .. key .. "(...) end")
      or ("local h = ...; return function(...) return h[\"" .. key .. "\"](...) end")
    entry.call = load(src)(holder)
    fn = target
    if type(target) == "table" then fn = rawget(target, "init") or target end -- a class: its constructor
  end
  local class = head:match("([%w_]+)$")
  if class and class:match("^%u") then names[#names + 1] = class end
  for _, n in ipairs(opts.names or {}) do names[#names + 1] = n end
  entry.names = names
  entry.fn = fn
  if entry.lenient == nil then
    entry.lenient = type(fn) == "function" and debug.getinfo(fn, "S").what == "Lua"
  end
  CATALOGUE[#CATALOGUE + 1] = entry
  return entry
end

---------------------------------------------------------------------------
-- 7. The catalogue: the core (attn.*, tensor methods and metamethods)
---------------------------------------------------------------------------

local K = kind
local function t23(o) return K.tensor({2, 3}, o) end
local function W(shape, o)  -- a tensor the function writes in place (method form only)
  o = o or {}
  o.strict, o.written = true, true
  return K.tensor(shape, o)
end
-- an optional trailing attn.Generator; with opts, torch's keywords
-- {generator =, requires_grad =} may stand there instead (an empty table is
-- then no options)
local function gen_opt(opts)
  local k = K.custom(function() return attn.Generator(7) end, {
    {"a closed generator", function()
      local g = attn.Generator(1)
      getmetatable(g).__gc(g)
      return g
    end, "error"},
    {"a tensor", function() return attn.ones(1) end, "error"},
    {"a table", function() return {} end, opts and "ok" or "error"},
    {"an unknown option", function() return {seed = 1} end, "error"},
    {"options with a generator", function() return {generator = attn.Generator(3)} end, opts and "ok" or "error"},
    {"a number", function() return 3 end, "error"},
  }, {opt = true, skip = {["a generator"] = true}})
  k.generator_slot = true
  return k
end

-- creation
for _, name in ipairs({"zeros", "ones", "empty"}) do
  E("attn." .. name, {K.size(2, {huge = "error"}), K.size(3, {huge = "error", opt = true})}, {
    override = {[2] = {["a table"] = "any"}}, -- zeros(2, {dtype = ...}): an options table ends the sizes
    cases = {
      {"a dtype option", function() return {2, {dtype = "int64"}} end, "ok",
        function(t) assert(t.dtype == attn.int64) end},
      {"an unknown dtype", function() return {2, {dtype = "int32"}} end, "error"},
      {"a shape table", function() return {{2, 3}} end, "ok", function(t) assert(t:dim() == 2) end},
      {"a shape table with -1", function() return {{2, -1}} end, "error"},
      {"a shape table with 2.5", function() return {{2, 2.5}} end, "error"},
      {"a shape table with a string", function() return {{2, "x"}} end, "error"},
      {"a shape table of 9 dims", function() return {{1, 1, 1, 1, 1, 1, 1, 1, 1}} end, "error"},
      {"9 size arguments", function() return {1, 1, 1, 1, 1, 1, 1, 1, 1} end, "error"},
      {"sizes whose product overflows int64", function() return {{1 << 32, 1 << 32, 1 << 32}} end, "error"},
      {"sizes whose product passes 2^56", function() return {{1 << 30, 1 << 30}} end, "error"},
      {"an empty shape table (0-d)", function() return {{}} end, "ok", function(t) assert(t:dim() == 0) end},
      {"a zero size", function() return {0, 3} end, "ok", function(t) assert(t:numel() == 0) end},
    },
  })
end
E("attn.full", {K.size(2, {huge = "error"}), K.size(3, {huge = "error"}), K.num(1.5)}, {
  override = {[1] = {["a table"] = "any"}, -- full({2}, 3, 1.5): a shape table, then the value
              [3] = {["true"] = "any", ["false"] = "any"}}, -- a boolean fill value gives a bool tensor
  cases = {
    {"a shape table", function() return {{2, 3}, 1.5} end, "ok"},
    {"a shape table without a value", function() return {{2, 3}} end, "error"},
    {"no arguments", function() return {}, 0 end, "error"},
    {"a NaN fill", function() return {{2}, 0 / 0} end, "ok", function(t) assert(t[1] ~= t[1]) end},
    {"9 sizes", function() return {1, 1, 1, 1, 1, 1, 1, 1, 1, 0} end, "error"},
  },
})
for _, name in ipairs({"zeros_like", "ones_like", "empty_like"}) do
  E("attn." .. name, {t23()})
end
E("attn.full_like", {t23(), K.num(2)}, {override = {[2] = {["true"] = "any", ["false"] = "any"}}})
E("attn.tensor", {K.custom(function() return {{1, 2}, {3, 4}} end, {
  {"a ragged table", function() return {{1, 2}, {3}} end, "error"},
  {"a ragged table (deeper)", function() return {{{1}, {2}}, {3, 4}} end, "error"},
  {"strings", function() return {"1", "2"} end, "error"},
  {"a table nested 9 deep", function() return deep_table(9) end, "error"},
  {"a table nested 8 deep", function() return deep_table(8) end, "ok"},
  {"a table holding a tensor", function() return {attn.ones(2), attn.ones(2)} end, "error"},
  {"a self-referencing table", function() local t = {}; t[1] = t; return t end, "error"},
  {"an empty table", function() return {} end, "ok"},
  {"a table of empty tables", function() return {{}, {}} end, "ok"},
  {"booleans", function() return {true, false} end, "any"},
  {"a Lua boolean (a 0-d bool tensor)", function() return true end, "ok"},
  {"NaN and inf", function() return {0 / 0, math.huge, -math.huge} end, "ok"},
  {"a number", function() return 3 end, "ok"},
  {"a tensor", function() return attn.ones(2, 2) end, "ok"},
  {"a closed tensor", closed_tensor, "error"},
  {"a 1e39 (float overflow)", function() return {1e39} end, "any"},
}, {skip = {["a table"] = true}})}, {override = {[1] = {["true"] = "any", ["false"] = "any"}}}) -- a 0-d bool tensor
E("attn.arange", {K.num(0, {finite = true}), K.num(5, {finite = true}), K.num(1, {finite = true, opt = true})}, {
  cases = {
    {"a dtype option", function() return {0, 5, {dtype = "float32"}} end, "ok",
      function(t) assert(t.dtype == attn.float32) end},
    {"a step of 0", function() return {0, 5, 0} end, "error"},
    {"a range too large", function() return {0, 1e300} end, "error"},
    {"a range of 2^62 elements", function() return {0, 2.0 ^ 62} end, "error"},
    {"a backward range with a positive step", function() return {5, 0, 1} end, "error"},
    {"an empty range", function() return {3, 3} end, "ok", function(t) assert(t:numel() == 0) end},
    {"one argument", function() return {4} end, "ok", function(t) assert(t:numel() == 4) end},
    -- issue 27: integer bounds at the ends of int64 (UBSan ran on signed overflow); torch 1.13 overflows
    -- itself here (arange(-2^63, 2^63-1, 2^63-1) gives an empty tensor): attn gives the true elements
    {"mininteger to maxinteger by maxinteger", function() return {math.mininteger, math.maxinteger, math.maxinteger} end,
      "ok", function(t)
        assert(t.dtype == attn.int64)
        local v = t:totable()
        assert(#v == 3 and v[1] == math.mininteger and v[2] == -1 and v[3] == math.maxinteger - 1)
      end},
    {"maxinteger to mininteger by mininteger", function() return {math.maxinteger, math.mininteger, math.mininteger} end,
      "ok", function(t)
        local v = t:totable()
        assert(#v == 2 and v[1] == math.maxinteger and v[2] == -1)
      end},
    {"mininteger to maxinteger by 2^62", function() return {math.mininteger, math.maxinteger, 1 << 62} end, "ok",
      function(t) assert(t:numel() == 4 and t:totable()[4] == 1 << 62) end},
    {"the last two int64 values", function() return {math.maxinteger - 2, math.maxinteger} end, "ok",
      function(t) assert(t:totable()[2] == math.maxinteger - 1) end},
    {"the first two int64 values", function() return {math.mininteger, math.mininteger + 2} end, "ok",
      function(t) assert(t:totable()[1] == math.mininteger) end},
    {"all of int64 (2^64 - 1 elements)", function() return {math.mininteger, math.maxinteger} end, "error"},
    {"all of int64 backwards", function() return {math.maxinteger, math.mininteger, -1} end, "error"},
    {"0 to maxinteger", function() return {math.maxinteger} end, "error"},
    {"a step of mininteger upwards", function() return {0, math.maxinteger, math.mininteger} end, "error"},
  },
  -- arange(start, end, -0.0): zero step; 0.5 steps are fine
  override = {[3] = {["-0"] = "error", ["0"] = "error", ["-1"] = "error", ["1e-300"] = "error",
                     ["a table"] = "any"}, -- arange(0, 5, {dtype = ...})
              -- arange(0, nil) is arange(0): an empty range
              [1] = {["1e+300"] = "error", ["-1e+300"] = "error"},
              [2] = {["1e+300"] = "error", ["-1e+300"] = "error", ["-1"] = "error", ["nil"] = "any"}},
})
-- torch.linspace(nan, 1, 3) and linspace(0, inf, 3) give NaNs, no error
E("attn.linspace", {K.num(0), K.num(1), K.size(5, {huge = "error"})})
E("attn.eye", {K.size(3, {huge = "error"}), K.size(2, {opt = true, huge = "error"})})
E("attn.one_hot", {K.index({4}, 5), K.size(5, {opt = true, min = 1, huge = "error"})}, {
  override = {[2] = {["0"] = "error", ["-1"] = "any"}}, -- -1: infer the count, like torch
  cases = {
    {"ids larger than num_classes", function() return {attn.tensor({1, 6}), 5} end, "error"},
    {"implicit num_classes with id 1e30", function() return {attn.tensor({1e30})} end, "error"},
    {"implicit num_classes with id 2^40", function() return {attn.tensor({2 ^ 40})} end, "error"},
    {"empty ids with num_classes", function() return {attn.zeros(0), 3} end, "ok",
      function(t) assert(same_list(t:shape(), {0, 3})) end},
    -- torch: one_hot of an empty tensor without num_classes raises
    {"empty ids without num_classes", function() return {attn.zeros(0)} end, "error"},
  },
})

-- metadata
E("attn.shape", {t23()})
-- attn.Size(2, 3): a shape by hand (no allocation: huge sizes are fine)
E("attn.Size", {K.size(2), K.size(3, {opt = true})}, {
  override = {[1] = {["a table"] = "any"}}, -- Size({2}): the table form
  cases = {{"a shape table", function() return {{2, 3}} end, "ok", function(s) assert(s == attn.Size(2, 3)) end}},
})
E("attn.size", {t23(), K.dim(2, 2, {opt = true})})
E("attn.stride", {t23(), K.dim(2, 2, {opt = true})}, {layout = "any"})
E("attn.dim", {t23()})
E("attn.numel", {t23()})
E("attn.is_contiguous", {t23()}, {layout = "any"})
E("attn.item", {K.tensor({1})}, {cases = {
  {"two elements", function() return {attn.ones(2)} end, "error"},
  {"no element", function() return {attn.ones(0)} end, "error"},
}})
E("attn.totable", {t23()})
E("attn.tostring", {t23(), K.str("suffix", {opt = true})}, {
  override = {[1] = {["a closed tensor"] = "any"}}}) -- prints tensor(<closed>)
E("attn.is_tensor", {K.custom(function() return attn.ones(1) end, {}, {wrong = false, opt = true})})

-- copies
E("attn.contiguous", {t23()})
E("attn.clone", {t23()})
E("attn.copy_", {W({2, 3}), t23()}, {writes = {1}})
-- torch fills expanded views (every element gets the value)
E("attn.fill_", {W({2, 3}), K.num(2)}, {writes = {1}, override = {[1] = {["a stride-0 expanded view"] = "any"}}})
E("attn.zero_", {W({2, 3})}, {writes = {1}, override = {[1] = {["a stride-0 expanded view"] = "any"}}})

-- views
E("attn.transpose", {K.tensor({2, 3, 4}), K.dim(1, 3), K.dim(3, 3)})
E("attn.t", {t23()}, {cases = {{"a 3-d tensor", function() return {attn.ones(2, 2, 2)} end, "error"}}})
E("attn.permute", {K.tensor({2, 3, 4}), K.dim(3, 3), K.dim(1, 3), K.dim(2, 3)}, {
  cases = {
    {"a repeated dim", function() return {attn.ones(2, 3), 1, 1} end, "error"},
    {"too few dims", function() return {attn.ones(2, 3), 1} end, "error"},
    {"too many dims", function() return {attn.ones(2, 3), 1, 2, 3} end, "error"},
    {"a dims table", function() return {attn.ones(2, 3), {2, 1}} end, "ok"},
    {"a dims table holding a string", function() return {attn.ones(2, 3), {2, "x"}} end, "error"},
  },
})
for _, name in ipairs({"view", "reshape"}) do
  E("attn." .. name, {t23(), K.int(3, {min = -1}), K.int(2, {min = -1})}, {
    layout = name == "view" and "any" or nil, -- view refuses strides it cannot keep
    cases = {
      {"a shape table", function() return {attn.ones(2, 3), {3, 2}} end, "ok"},
      {"two -1", function() return {attn.ones(2, 3), -1, -1} end, "error"},
      {"-1 with a 0 size", function() return {attn.ones(0, 3), -1, 0} end, "error"},
      {"-2", function() return {attn.ones(2, 3), -2, 3} end, "error"},
      {"a product that overflows", function() return {attn.ones(2, 3), 1 << 62, 1 << 62} end, "error"},
      {"a shape table with NaN", function() return {attn.ones(2, 3), {0 / 0, 6}} end, "error"},
      {"9 sizes", function() return {attn.ones(1), 1, 1, 1, 1, 1, 1, 1, 1, 1} end, "error"},
    },
  })
end
E("attn.expand", {K.tensor({3, 1}), K.int(3, {min = -1}), K.int(4, {min = -1})}, {cases = {
  {"fewer sizes than dims", function() return {attn.ones(3, 1), 4} end, "error"},
  {"-1 in a new leading dim", function() return {attn.ones(3), -1, 3} end, "error"},
  {"a non-1 dim changed", function() return {attn.ones(3, 1), 2, 4} end, "error"},
}})
E("attn.view_as", {t23(), K.tensor({3, 2})}, {names = {"view"}, layout = "any"})
E("attn.reshape_as", {t23(), K.tensor({3, 2})}, {names = {"reshape"}})
E("attn.expand_as", {K.tensor({1, 3}), t23()}, {names = {"expand"}})
E("attn.narrow", {K.tensor({4, 3}), K.dim(1, 2), K.int(2), K.int(2, {min = 0})}, {cases = {
  {"start past the end", function() return {attn.ones(4), 1, 5, 1} end, "error"},
  {"length past the end", function() return {attn.ones(4), 1, 2, 4} end, "error"},
  {"start at the end, length 0", function() return {attn.ones(4), 1, 5, 0} end, "ok"},
  {"a 0-d tensor", function() return {attn.tensor(1), 1, 1, 1} end, "error"},
}})
E("attn.slice", {K.tensor({5, 3}), K.dim(1, 2), K.int(2, {opt = true}), K.int(4, {opt = true}),
                 K.int(2, {opt = true, min = 1})})
E("attn.select", {K.tensor({3, 2}), K.dim(1, 2), K.int(2)})
E("attn.unsqueeze", {t23(), K.dim(1, 2, {extra = 1})})
E("attn.squeeze", {K.tensor({2, 1, 3}), K.dim(2, 3, {opt = true})})
E("attn.flatten", {K.tensor({2, 3, 4}), K.dim(1, 3, {opt = true}), K.dim(2, 3, {opt = true})}, {cases = {
  {"start after end", function() return {attn.ones(2, 3, 4), 3, 1} end, "error"},
}})

-- elementwise math
-- the op table's unary ops that take only t (gelu's option below), and its
-- binary ops but add and sub (alpha: below)
local UNARY, BINARY = {}, {}
for _, op in ipairs(require("attn.core")._ops) do
  if op.kind == "unary" and op.callable and op.name ~= "gelu" then UNARY[#UNARY + 1] = op.name end
  if op.kind ~= "unary" and op.name ~= "add" and op.name ~= "sub" then BINARY[#BINARY + 1] = op.name end
end
for _, name in ipairs(UNARY) do
  E("attn." .. name, {t23()})
  E("attn." .. name .. "_", {W({2, 3})}, {writes = {1}})
end
E("attn.gelu", {t23(), K.choice("tanh", {opt = true})})
E("attn.gelu_", {W({2, 3}), K.choice("tanh", {opt = true})}, {writes = {1}})
for _, name in ipairs(BINARY) do
  E("attn." .. name, {t23(), t23({salt = 3})}, {cases = {
    {"shapes that do not broadcast", function() return {attn.ones(2, 3), attn.ones(4)} end, "error"},
    {"a number first", function() return {2, attn.ones(2)} end, "ok"},
    {"two numbers", function() return {2, 3} end, "any"},
  }})
  E("attn." .. name .. "_", {W({2, 3}), t23({salt = 3})}, {writes = {1}, cases = {
    {"an operand that would grow the target", function() return {attn.ones(3), attn.ones(2, 3)} end, "error"},
    {"a number", function() return {attn.ones(2), 2} end, "ok"},
  }})
end
for _, name in ipairs({"add", "sub"}) do
  E("attn." .. name, {t23(), t23({salt = 3}), K.num(2, {opt = true})}, {cases = {
    {"shapes that do not broadcast", function() return {attn.ones(2, 3), attn.ones(4)} end, "error"},
  }})
  E("attn." .. name .. "_", {W({2, 3}), t23({salt = 3}), K.num(2, {opt = true})}, {writes = {1}})
end
E("attn.clamp", {t23(), K.num(-0.5, {opt = true, tensor_ok = true}), K.num(0.5, {opt = true, tensor_ok = true})}, {cases = {
  {"no bounds", function() return {attn.ones(2)} end, "error"},
  {"min > max (torch: every value becomes max)", function() return {attn.tensor({-1, 0, 3}), 2, 1} end, "ok",
    function(t) assert(same_list(t:totable(), {1, 1, 1})) end},
}})
E("attn.clamp_", {W({2, 3}), K.num(-0.5, {opt = true}), K.num(0.5, {opt = true})}, {writes = {1}})
E("attn.where", {K.tensor({2, 3}, {range = "bin"}), t23(), t23({salt = 5})})
E("attn.masked_fill", {t23(), K.tensor({2, 3}, {range = "bin"}), K.num(-1)}, {
  override = {[3] = {["true"] = "any", ["false"] = "any"}}, -- bool fill values (for bool tensors)
  cases = {
  {"a mask that does not broadcast", function() return {attn.ones(2, 3), attn.ones(3, 2), 0} end, "error"},
  {"a mask that would grow the input", function() return {attn.ones(3), attn.ones(2, 3), 0} end, "any"},
}})
E("attn.masked_fill_", {W({2, 3}), K.tensor({2, 3}, {range = "bin"}), K.num(-1)}, {writes = {1},
  override = {[3] = {["true"] = "any", ["false"] = "any"}}, cases = {
  {"a mask that would grow the target", function() return {attn.ones(3), attn.ones(2, 3), 0} end, "error"},
}})
E("attn.matmul", {t23(), K.tensor({3, 4})}, {cases = {
  {"inner sizes that differ", function() return {attn.ones(2, 3), attn.ones(2, 4)} end, "error"},
  {"0-d operands", function() return {attn.tensor(2), attn.tensor(3)} end, "error"},
  {"batch dims that do not broadcast", function() return {attn.ones(2, 2, 3), attn.ones(3, 3, 4)} end, "error"},
  -- torch: [2,0] @ [0,3] is zeros [2,3]; [0,2] @ [2,3] is [0,3]
  {"an empty inner dim", function() return {attn.ones(2, 0), attn.ones(0, 3)} end, "ok",
    function(t) assert(same_list(t:shape(), {2, 3}) and t:sum():item() == 0) end},
  {"an empty outer dim", function() return {attn.ones(0, 2), attn.ones(2, 3)} end, "ok",
    function(t) assert(same_list(t:shape(), {0, 3})) end},
  {"1-d by 1-d", function() return {attn.ones(3), attn.ones(3)} end, "ok", function(t) assert(t:item() == 3) end},
}})
-- attn.linear(x, w [, b]): x [..., in] @ w[out, in]^T + b
if attn.linear then
  E("attn.linear", {t23(), K.tensor({4, 3}, {salt = 2}), K.tensor({4}, {opt = true, salt = 3})}, {cases = {
    {"in_features that differ", function() return {T({2, 3}), T({4, 5})} end, "error"},
    {"a bias of the wrong size", function() return {T({2, 3}), T({4, 3}), T({5})} end, "error"},
  }})
end
E("attn.mm", {t23(), K.tensor({3, 4})})
E("attn.bmm", {K.tensor({2, 2, 3}), K.tensor({2, 3, 4})}, {cases = {
  {"batch sizes that differ", function() return {attn.ones(2, 2, 3), attn.ones(3, 3, 4)} end, "error"},
}})
-- issue 29: beta * input + alpha * products; isclose, allclose, equal
E("attn.addmm", {t23(), t23({salt = 2}), K.tensor({3, 3}, {salt = 3}), K.num(0.5, {opt = true}),
  K.num(2, {opt = true})}, {cases = {
  {"beta 0 ignores a NaN input", function() return {attn.full({2, 3}, 0 / 0), T({2, 3}), T({3, 3}), 0} end, "ok",
    function(t) assert(not t:isnan():any():item()) end},
  {"an input that does not broadcast", function() return {T({3, 3}), T({2, 3}), T({3, 3})} end, "error"},
}})
E("attn.baddbmm", {K.tensor({2, 2, 4}), K.tensor({2, 2, 3}), K.tensor({2, 3, 4}, {salt = 2}), K.num(0.5, {opt = true}),
  K.num(2, {opt = true})})
E("attn.addbmm", {K.tensor({2, 4}), K.tensor({2, 2, 3}), K.tensor({2, 3, 4}, {salt = 2}), K.num(0.5, {opt = true}),
  K.num(2, {opt = true})})
for _, name in ipairs({"isclose", "allclose"}) do
  E("attn." .. name, {t23(), t23({salt = 2}), K.num(1e-5, {opt = true, min = 0}), K.num(1e-8, {opt = true, min = 0}),
    K.bool(false)})
end
E("attn.equal", {t23(), t23({salt = 2})})
E("attn.tolist", {t23()}, {names = {"totable"}})
E("attn.outer", {K.tensor({3}), K.tensor({4})})
E("attn.dot", {K.tensor({3}), K.tensor({3}, {salt = 2})}, {cases = {
  {"lengths that differ", function() return {attn.ones(3), attn.ones(4)} end, "error"},
  -- torch.dot of two empty vectors is 0
  {"empty vectors", function() return {attn.ones(0), attn.ones(0)} end, "ok", function(t) assert(t:item() == 0) end},
}})

-- reductions
for _, name in ipairs({"sum", "mean", "prod", "all", "any", "argmax", "argmin", "max", "min"}) do
  -- sum and mean also take a list of dims (lua/attn/ops.lua)
  E("attn." .. name, {t23(), K.dim(2, 2, {opt = true, table_ok = name == "sum" or name == "mean"}), K.bool(false)})
end
for _, name in ipairs({"var", "std"}) do
  E("attn." .. name, {t23(), K.dim(2, 2, {opt = true, table_ok = true}), K.custom(function() return true end, {
    {"a string", function() return "yes" end, "error"},
    {"a correction of 0", function() return 0, false end, "same"},
    {"a correction of -1", function() return -1 end, "any"},
    {"a correction of NaN", function() return 0 / 0 end, "any"},
  }, {opt = true, skip = {["true"] = true, ["false"] = true, ["a string"] = true}}), K.bool(false)})
end
E("attn.norm", {t23(), K.num(2, {opt = true}), K.dim(2, 2, {opt = true}), K.bool(false)}, {cases = {
  {"p = 'fro'", function() return {attn.ones(2, 2), "fro"} end, "ok"},
  {"p = 'nuc'", function() return {attn.ones(2, 2), "nuc"} end, "error"},
}})
E("attn.logsumexp", {t23(), K.dim(2, 2), K.bool(false)})
for _, name in ipairs({"cumsum", "softmax", "log_softmax"}) do
  E("attn." .. name, {t23(), K.dim(2, 2)})
end
E("attn.max", {t23(), K.dim(2, 2, {opt = true}), K.bool(false)}, {cases = {
  {"max with another tensor", function() return {attn.ones(2), attn.zeros(2)} end, "ok"},
  -- torch: max over an empty dim raises; over a non-empty dim of an empty tensor gives empties
  {"an empty dim", function() return {attn.zeros(0, 3), 1} end, "error"},
  {"a non-empty dim of an empty tensor", function() return {attn.zeros(0, 3), 2} end, "ok",
    function(v, i) assert(v:numel() == 0 and i:numel() == 0) end},
  {"all of an empty tensor", function() return {attn.zeros(0)} end, "error"},
}})

-- shape operations
E("attn.tril", {K.tensor({3, 4}), K.int(1, {opt = true})}, {covers = {}})
E("attn.triu", {K.tensor({3, 4}), K.int(1, {opt = true})})
local function tensor_list(shapes, opts)
  opts = opts or {}
  return K.custom(function()
    local l = {}
    for i, s in ipairs(shapes) do l[i] = T(s, nil, i) end
    return l
  end, {
    {"an empty list", function() return {} end, "error"},
    {"a list holding a string", function() return {attn.ones(2, 3), "x"} end, "error"},
    {"a list holding nil in the middle", function() return {attn.ones(2, 3), nil, attn.ones(2, 3)} end, "any"},
    {"a list holding a closed tensor", function() return {attn.ones(2, 3), closed_tensor()} end, "error"},
    {"a list holding a 0-d tensor", function() return {attn.ones(2, 3), attn.tensor(1)} end, opts.scalar or "error"},
    {"a list holding a module", function() return {attn.ones(2, 3), nn.Identity()} end, "error"},
    {"a list of ragged tables", function() return {{{1, 2}, {3}}} end, "error"},
    {"a list whose shapes differ in two dims", function() return {attn.ones(2, 3), attn.ones(3, 4)} end, "error"},
    {"a list whose ranks differ", function() return {attn.ones(2, 3), attn.ones(2, 3, 1)} end, opts.ranks or "error"},
    {"a list of one tensor", function() return {T({2, 3})} end, "ok"},
    {"a list of empty tensors", function() return {attn.ones(0, 3), attn.ones(0, 3)} end, "ok"},
    {"a list with the same tensor twice", function() local t = T({2, 3}); return {t, t} end, "ok"},
    {"a list with views", function()
      local b = T({3, 2})
      return {b:t(), T({4, 3}):narrow(1, 2, 2)}
    end, "ok"},
    {"a tensor instead of a list", function() return attn.ones(2, 3) end, "error"},
  }, {skip = {["a table"] = true}})
end
E("attn.cat", {tensor_list({{2, 3}, {2, 3}}), K.dim(1, 2, {opt = true})}, {cases = {
  -- torch.cat skips 1-d empty tensors (legacy rule): [0] with [2] gives [2]
  {"a [0] tensor and a [2] tensor", function() return {{attn.ones(0), attn.ones(2)}} end, "ok",
    function(t) assert(same_list(t:shape(), {2})) end},
  {"sizes that differ along the cat dim", function() return {{attn.ones(2, 3), attn.ones(1, 3)}, 1} end, "ok",
    function(t) assert(same_list(t:shape(), {3, 3})) end},
  {"sizes that differ off the cat dim", function() return {{attn.ones(2, 3), attn.ones(2, 4)}, 1} end, "error"},
}})
E("attn.stack", {tensor_list({{2, 3}, {2, 3}}), K.dim(1, 2, {opt = true, extra = 1})}, {cases = {
  -- torch.stack of two [0] tensors is [2, 0]
  {"two [0] tensors", function() return {{attn.ones(0), attn.ones(0)}} end, "ok",
    function(t) assert(same_list(t:shape(), {2, 0})) end},
  {"0-d tensors", function() return {{attn.tensor(1), attn.tensor(2)}} end, "ok",
    function(t) assert(same_list(t:shape(), {2})) end},
}, override = {[1] = {["a list holding a 0-d tensor"] = "error"}}})
E("attn.vstack", {tensor_list({{2, 3}, {2, 3}}, {ranks = "any", scalar = "any"})})
E("attn.hstack", {tensor_list({{2, 3}, {2, 3}}, {ranks = "any", scalar = "any"})})
E("attn.index_select", {K.tensor({3, 4}), K.dim(1, 2), K.index({2}, 3)}, {cases = {
  {"a 2-d index", function() return {attn.ones(3, 4), 1, attn.ones(2, 2)} end, "error"},
  -- torch: an empty index gives [0, 4]
  {"an empty index", function() return {attn.ones(3, 4), 1, attn.zeros(0)} end, "ok",
    function(t) assert(same_list(t:shape(), {0, 4})) end},
}})
E("attn.gather", {K.tensor({3, 4}), K.dim(2, 2), K.index({3, 2}, 4)}, {cases = {
  {"an index of another rank", function() return {attn.ones(3, 4), 2, attn.ones(3)} end, "error"},
  {"an index larger off the gather dim", function() return {attn.ones(3, 4), 2, attn.ones(4, 2)} end, "error"},
  -- torch: a [2, 0] index gives [2, 0]
  {"an empty index", function() return {attn.ones(2, 3), 2, attn.zeros(2, 0)} end, "ok",
    function(t) assert(same_list(t:shape(), {2, 0})) end},
}})
E("attn.split", {K.tensor({5, 2}), K.int(2, {min = 0}), K.dim(1, 2, {opt = true})}, {
  override = {[2] = {["0"] = "error"}}, -- torch: split size 0 only for an empty dim
  cases = {
    {"a sizes table", function() return {attn.ones(5, 2), {2, 3}} end, "ok"},
    {"sizes that do not add up", function() return {attn.ones(5, 2), {2, 2}} end, "error"},
    {"a negative size in the table", function() return {attn.ones(5, 2), {6, -1}} end, "error"},
    {"a huge size in the table", function() return {attn.ones(5, 2), {math.maxinteger, 5}} end, "error"},
    {"sizes that overflow when added", function() return {attn.ones(5, 2), {math.maxinteger, math.maxinteger, 7}} end,
      "error"},
    {"a string in the sizes table", function() return {attn.ones(5, 2), {2, "x"}} end, "error"},
    -- torch: split(0) of an empty dim gives one empty piece
    {"size 0 of an empty dim", function() return {attn.ones(0, 3), 0} end, "ok",
      function(p, q) assert(attn.is_tensor(p) and p:size(1) == 0 and q == nil) end},
  },
})
E("attn.chunk", {K.tensor({5, 2}), K.int(2, {min = 1}), K.dim(1, 2, {opt = true})})
E("attn.unbind", {K.tensor({3, 2}), K.dim(1, 2, {opt = true})})
local REPEAT = {K.tensor({2, 3}), K.size(2, {huge = "error"}), K.size(1, {huge = "error"})}
E("attn.repeat", REPEAT, {cases = {
  {"fewer counts than dims", function() return {attn.ones(2, 3), 2} end, "error"},
  {"a counts table", function() return {attn.ones(2, 3), {2, 2}} end, "ok"},
  {"a zero count (torch: [0, 6])", function() return {attn.ones(2, 3), 0, 2} end, "ok",
    function(t) assert(same_list(t:shape(), {0, 6})) end},
  {"counts whose product overflows", function() return {attn.ones(2, 3), 1 << 40, 1 << 40} end, "error"},
  {"9 counts", function() return {attn.ones(1), 1, 1, 1, 1, 1, 1, 1, 1, 1} end, "error"},
}})
E("attn.rep", REPEAT, {names = {"repeat"}})
-- tile pads missing counts with leading 1s: the second count is optional
E("attn.tile", {K.tensor({2, 3}), K.size(2, {huge = "error"}), K.size(1, {huge = "error", opt = true})}, {cases = {
  {"fewer counts than dims (leading 1s, torch.tile)", function() return {attn.ones(2, 3), 2} end, "ok",
    function(t) assert(same_list(t:shape(), {2, 6})) end},
  {"a counts table", function() return {attn.ones(2, 3), {2, 2}} end, "ok"},
  {"more counts than dims", function() return {attn.ones(2, 3), 2, 1, 1} end, "ok",
    function(t) assert(same_list(t:shape(), {2, 2, 3})) end},
  {"a fractional count", function() return {attn.ones(2, 3), 1.5, 1} end, "error"},
}})
E("attn.flip", {K.tensor({2, 3}), K.dim(1, 2)}, {cases = {
  {"a repeated dim", function() return {attn.ones(2, 3), 1, 1} end, "error"},
  {"a dims table", function() return {attn.ones(2, 3), {1, 2}} end, "ok"},
  {"no dims", function() return {attn.ones(2, 3)} end, "any"},
}, override = {[2] = {["a table"] = "any"}}}) -- flip(t, {1}): a dims table

-- random numbers
E("attn.manual_seed", {K.int(5)})
E("attn.seed", {})
E("attn.initial_seed", {})
E("attn.Generator", {K.int(5, {opt = true})})
E("attn.get_rng_state", {})
E("attn.set_rng_state", {K.custom(function() return attn.get_rng_state() end, {
  {"a short string", function() return "abc" end, "error"},
  {"a state with a byte changed", function()
    local s = attn.get_rng_state()
    return s:sub(1, 10) .. string.char((s:byte(11) + 1) % 256) .. s:sub(12)
  end, "any"},
  {"a state one byte longer", function() return attn.get_rng_state() .. "x" end, "error"},
  {"a number", function() return 5 end, "error"},
  {"a state of zeros", function() return string.rep("\0", #attn.get_rng_state()) end, "any"},
  {"a state of 0xff bytes", function() return string.rep("\255", #attn.get_rng_state()) end, "any"},
}, {skip = {["a string"] = true}})}, {names = {"set_state"}})
for _, name in ipairs({"rand", "randn"}) do
  E("attn." .. name, {K.size(2, {huge = "error"}), K.size(3, {huge = "error"}), gen_opt(true)}, {cases = {
    {"a shape table and a generator", function() return {{2, 3}, attn.Generator(1)}, 2 end, "ok"},
    {"a shape table and an extra number", function() return {{2, 3}, 4} end, "error"},
    {"no shape (0-d)", function() return {}, 0 end, "ok", function(t) assert(t:dim() == 0) end},
  }, override = {[3] = {["a number"] = "any"}}}) -- a third size
end
for _, name in ipairs({"rand_like", "randn_like"}) do
  E("attn." .. name, {K.tensor({2, 3}, {noview = true}), gen_opt(true)})
end
E("attn.randint", {K.int(0), K.int(5), K.custom(function() return {3} end, {
  {"a negative size", function() return {-1} end, "error"},
  {"a huge size", function() return {1 << 62} end, "error"},
  {"a shape with a string", function() return {"x"} end, "error"},
}, {skip = {["a table"] = true}}), gen_opt(true)}, {cases = {
  {"low == high", function() return {3, 3, {2}} end, "error"},
  {"low > high", function() return {5, 2, {2}} end, "error"},
  {"high and a shape table", function() return {5, {2}} end, "ok"},
  {"a range beyond 2^63", function() return {math.mininteger, math.maxinteger, {2}} end, "any"},
}})
E("attn.randperm", {K.size(5, {max = (1 << 24) + 1, huge = "error"}), gen_opt(true)}, {cases = {
  {"n = 0 (torch: empty)", function() return {0} end, "ok", function(t) assert(t:numel() == 0) end},
}})
E("attn.multinomial", {K.tensor({2, 4}, {range = "prob", noview = true}), K.int(2, {min = 1}),
                       K.bool(false), gen_opt()}, {cases = {
  -- torch: all-zero rows, more samples than categories without replacement,
  -- and 0 samples raise
  {"a row of zeros", function() return {attn.zeros(3), 1} end, "error"},
  {"a negative weight", function() return {attn.tensor({1, -1}), 1} end, "error"},
  {"a NaN weight", function() return {attn.tensor({1, 0 / 0}), 1} end, "error"},
  {"an inf weight", function() return {attn.tensor({1, math.huge}), 1} end, "error"},
  {"too many samples", function() return {attn.ones(3), 4} end, "error"},
  {"too many samples with replacement", function() return {attn.ones(3), 4, true} end, "ok"},
  {"0 samples", function() return {attn.ones(3), 0} end, "error"},
  {"a 3-d tensor", function() return {attn.ones(2, 2, 2), 1} end, "error"},
  {"no category", function() return {attn.ones(0), 1} end, "error"},
}, override = {[1] = {["a tensor with dim 1 of size 0"] = "any"},
               [4] = {["options with a generator"] = "ok"}}}) -- torch's keywords (attn/signature.lua)
E("attn.bernoulli", {K.tensor({2, 3}, {range = "prob", noview = true}), gen_opt()}, {cases = {
  {"a probability above 1", function() return {attn.tensor({1.5})} end, "error"},
  {"a negative probability", function() return {attn.tensor({-0.5})} end, "error"},
  {"a NaN probability", function() return {attn.tensor({0 / 0})} end, "error"},
}, override = {[2] = {["options with a generator"] = "ok"}}}) -- torch's keywords (attn/signature.lua)
local function fill_entry(name, extra)
  local sig = {W({2, 3}, {noview = true})}
  for _, k in ipairs(extra) do sig[#sig + 1] = k end
  sig[#sig + 1] = gen_opt()
  return E("attn." .. name, sig, {writes = {1}, override = {[#sig] = {["options with a generator"] = "ok"}}})
end
fill_entry("uniform_", {K.num(-1, {opt = true}), K.num(1, {opt = true})}).cases = {
  {"from > to", function() return {attn.zeros(2), 1, 0} end, "error"},
  {"an infinite range", function() return {attn.zeros(2), -math.huge, math.huge} end, "error"},
}
fill_entry("normal_", {K.num(0, {opt = true}), K.num(1, {opt = true})}).cases = {
  {"a negative std", function() return {attn.zeros(2), 0, -1} end, "error"},
  {"a NaN std", function() return {attn.zeros(2), 0, 0 / 0} end, "error"},
}
fill_entry("bernoulli_", {K.num(0.5, {opt = true, min = 0, max = 1})}).cases = {
  {"p = NaN", function() return {attn.zeros(2), 0 / 0} end, "error"},
}
fill_entry("exponential_", {K.num(1, {opt = true})}).cases = {
  {"lambda = 0 (torch: inf)", function() return {attn.zeros(2), 0} end, "ok"},
  {"lambda < 0", function() return {attn.zeros(2), -1} end, "error"},
  {"lambda = NaN", function() return {attn.zeros(2), 0 / 0} end, "error"},
}
fill_entry("random_", {K.int(0, {opt = true}), K.int(5, {opt = true})}).cases = {
  {"low == high", function() return {attn.zeros(2), 3, 3} end, "error"},
  {"high only", function() return {attn.zeros(2), 4} end, "ok"},
  {"no range", function() return {attn.zeros(2)} end, "ok"},
  {"a range wider than float integers", function() return {attn.zeros(2), 0, 1 << 40} end, "any"},
}

local function gen_method(name, sig)
  sig = sig or {}
  table.insert(sig, 1, K.fixed(function() return attn.Generator(11) end))
  local mt = getmetatable(attn.Generator(1)).__index
  return E("attn.Generator." .. name, sig, {method = name, fn = mt[name], names = {name, "Generator"}})
end
gen_method("manual_seed", {K.int(3)})
gen_method("seed")
gen_method("initial_seed")
gen_method("get_state")
gen_method("set_state", {K.custom(function() return attn.Generator(2):get_state() end, {
  {"a short string", function() return "abc" end, "error"},
  {"a state one byte longer", function() return attn.Generator(2):get_state() .. "x" end, "error"},
  {"a number", function() return 5 end, "error"},
  {"a state of 0xff bytes", function() return string.rep("\255", #attn.Generator(2):get_state()) end, "any"},
}, {skip = {["a string"] = true}})})

-- autograd
E("attn.requires_grad_", {t23(), K.bool(true)}, {writes = {1}, cases = {
  {"turning off a non-leaf", function()
    local x = attn.ones(2):requires_grad_()
    return {x * 2, false}
  end, "error"},
}})
local function graph_out() -- a 0-d result of a small graph
  local x = T({2, 3}, nil, 1):requires_grad_()
  return (x * x):sum()
end
E("attn.backward", {K.fixed(graph_out), K.tensor({}, {opt = true, noedge = true, noview = true}), K.bool(false)}, {
  writes_all = true, noalias = true, cases = {
    {"a tensor that needs no grad", function() return {attn.ones(2):sum()} end, "error"},
    {"a non-scalar output without a gradient", function()
      local x = attn.ones(2):requires_grad_()
      return {x * 2}
    end, "error"},
    {"a gradient of the wrong shape", function()
      local x = attn.ones(2):requires_grad_()
      return {x * 2, attn.ones(3)}
    end, "error"},
    {"a second backward through freed buffers", function()
      local x = attn.ones(2):requires_grad_()
      local y = (x * x):sum()
      y:backward()
      return {y}
    end, "error"},
    {"a graph whose saved tensor was modified in place", function()
      local x = attn.ones(2):requires_grad_()
      local h = x * 2
      local y = (h * h):sum()
      h:add_(1)
      return {y}
    end, "error"},
  }})
E("attn.detach", {t23()})
E("attn.detach_", {K.tensor({2, 3}, {strict = true})}, {writes = {1}})
E("attn.retain_grad", {K.fixed(graph_out)}, {cases = {
  {"a leaf that needs no grad", function() return {attn.ones(2)} end, "error"},
}})
for _, name in ipairs({"no_grad", "enable_grad"}) do
  E("attn." .. name, {K.custom(function() return function(a) return a end end, {
    {"a function that raises", function() return function() error("inner failure") end end, "error"},
    {"a callable table", function() return setmetatable({}, {__call = function() return 1 end}) end, "any"},
  }, {opt = true, skip = {["a function"] = true}})}, {names = {"inner failure"}})
end
E("attn.is_grad_enabled", {})
E("attn.set_grad_enabled", {K.bool(true, {required = true})}, {mode_ok = true})
E("attn.embedding", {K.tensor({5, 3}), K.index({2, 2}, 5), K.int(2, {opt = true})}, {cases = {
  {"a 1-d weight", function() return {attn.ones(5), attn.tensor({1})} end, "error"},
  {"padding_idx 0", function() return {attn.ones(5, 3), attn.tensor({1}), 0} end, "error"},
  {"padding_idx past the end", function() return {attn.ones(5, 3), attn.tensor({1}), 6} end, "error"},
  {"padding_idx -1 (the last row)", function() return {attn.ones(5, 3), attn.tensor({1}), -1} end, "ok"},
}})

-- attention
local function qkv(o)
  return {K.tensor({2, 4, 3}, o), K.tensor({2, 5, 3}, {salt = 2}), K.tensor({2, 5, 2}, {salt = 3})}
end
local sdpa_sig = qkv()
sdpa_sig[4] = K.opts({
  attn_mask = K.tensor({4, 5}, {range = "bin", opt = true}),
  attn_mask_kind = K.choice("bool", {opt = true}),
  scale = K.num(0.5, {opt = true}),
  dropout_p = K.num(0, {opt = true, min = 0, max = 1}),
  enable_gqa = K.bool(false),
  need_weights = K.bool(false),
})
E("attn.scaled_dot_product_attention", sdpa_sig, {names = {"sdpa"}, cases = {
  {"is_causal with a mask", function()
    return {T({2, 4, 3}), T({2, 5, 3}), T({2, 5, 2}), {is_causal = true, attn_mask = attn.ones(4, 5),
            attn_mask_kind = "bool"}}
  end, "error"},
  {"a mask without its kind", function()
    return {T({2, 4, 3}), T({2, 5, 3}), T({2, 5, 2}), {attn_mask = attn.ones(4, 5)}}
  end, "error"},
  {"a kind without a mask", function()
    return {T({2, 4, 3}), T({2, 5, 3}), T({2, 5, 2}), {attn_mask_kind = "bool"}}
  end, "error"},
  {"bottom_right alignment without is_causal", function()
    return {T({2, 4, 3}), T({2, 5, 3}), T({2, 5, 2}), {causal_alignment = "bottom_right"}}
  end, "any"},
  {"a generator of the wrong type", function()
    return {T({2, 4, 3}), T({2, 5, 3}), T({2, 5, 2}), {dropout_p = 0.5, generator = "g"}}
  end, "error"},
  {"key and value lengths that differ", function() return {T({2, 4, 3}), T({2, 5, 3}), T({2, 6, 2})} end, "error"},
  {"query and key widths that differ", function() return {T({2, 4, 3}), T({2, 5, 4}), T({2, 5, 2})} end, "error"},
  {"1-d inputs", function() return {T({3}), T({3}), T({3})} end, "error"},
  {"enable_gqa with heads that do not divide", function()
    return {T({1, 3, 4, 2}), T({1, 2, 5, 2}), T({1, 2, 5, 2}), {enable_gqa = true}}
  end, "error"},
  -- torch's math path: S = 0 gives zeros [.., L, Ev]; L = 0 gives [.., 0, Ev]
  {"no keys", function() return {T({1, 4, 3}), attn.zeros(1, 0, 3), attn.zeros(1, 0, 2)} end, "ok",
    function(o) assert(same_list(o:shape(), {1, 4, 2}) and o:abs():sum():item() == 0) end},
  {"no queries", function() return {attn.zeros(1, 0, 3), T({1, 5, 3}), T({1, 5, 2})} end, "ok",
    function(o) assert(same_list(o:shape(), {1, 0, 2})) end},
  {"an all-masked row gives zeros", function()
    local m = attn.ones(4, 5)
    m[1] = 0
    return {T({1, 4, 3}), T({1, 5, 3}), T({1, 5, 2}), {attn_mask = m, attn_mask_kind = "bool"}}
  end, "ok", function(o) assert(o[1][1]:abs():sum():item() == 0) end},
}})
E("attn.causal_mask", {K.size(3, {huge = "error"}), K.size(4, {opt = true, huge = "error"}),
                       K.opts({bottom_right = K.bool(true)})},
  {override = {[2] = {["a table"] = "any"}, [3] = {["true"] = "any", ["false"] = "any"}}}) -- bottom_right positional
E("attn.padding_mask", {K.tensor({2}, {make = function(s) return IDX(s, 4) end, noedge = true}),
                        K.size(4, {huge = "error"})}, {cases = {
  {"a length above S", function() return {attn.tensor({5}), 4} end, "error"},
  {"a negative length", function() return {attn.tensor({-1}), 4} end, "error"},
  {"a fractional length", function() return {attn.tensor({1.5}), 4} end, "error"},
  {"a NaN length", function() return {attn.tensor({0 / 0}), 4} end, "error"},
  {"2-d lengths", function() return {attn.ones(2, 2), 4} end, "error"},
}})

-- weight files
local TMP = os.tmpname()
os.remove(TMP)
local function tmp(ext) return TMP .. ext end
local function save_good() return {w = T({2, 3}), b = T({3})} end
local SAVE_PATHS = {
  {"a directory", function() return "/tmp" end, "error"},
  {"a path in a missing directory", function() return "/nonexistent-dir/x.safetensors" end, "error"},
  {"a path without an extension", function() return tmp("") end, "error"},
  {"a path with a NUL", function() return tmp("\0.safetensors") end, "error"},
  {"an empty path", function() return "" end, "error"},
  {"a number", function() return 12 end, "error"},
}
E("attn.save", {K.custom(save_good, {
  {"a single tensor", function() return T({2}) end, "error"},
  {"a table with a non-tensor value", function() return {w = "x"} end, "error"},
  {"a table with a closed tensor", function() return {w = closed_tensor()} end, "error"},
  {"a table with a number key", function() return {T({2})} end, "error"},
  {"a name with a NUL", function() return {["a\0b"] = T({2})} end, "error"},
  {"an empty table", function() return {} end, "any"},
  {"non-contiguous tensors", function() return {w = T({3, 2}):t()} end, "ok"},
  {"an empty tensor", function() return {w = attn.zeros(0, 3)} end, "ok"},
  {"a 0-d tensor", function() return {w = attn.tensor(2)} end, "ok"},
  {"the same tensor twice", function() local t = T({2}); return {a = t, b = t} end, "ok"},
}), K.custom(function() return tmp(".safetensors") end, SAVE_PATHS, {skip = {["a string"] = true}}),
  K.custom(function() return {note = "x"} end, {
    {"a metadata value that is a table", function() return {note = {}} end, "error"},
    {"a metadata key that is a number", function() return {[1] = "x"} end, "error"},
    {"metadata with a NUL", function() return {note = "a\0b"} end, "error"},
  }, {opt = true})})
local function saved(ext)
  return function()
    local p = tmp(ext)
    if ext == ".npy" then attn.save(T({2, 3}), p) else attn.save(save_good(), p) end
    return p
  end
end
local LOAD_PATHS = {
  {"a missing file", function() return "/nonexistent-dir/x.safetensors" end, "error"},
  {"a directory", function() return "/tmp" end, "error"},
  {"a path with a NUL", function() return tmp("\0.npy") end, "error"},
  {"an empty path", function() return "" end, "error"},
  {"a number", function() return 12 end, "error"},
  {"a text file", function()
    local p = tmp(".txt")
    local f = assert(io.open(p, "w"))
    f:write("hello\n")
    f:close()
    return p
  end, "error"},
  {"an empty file", function()
    local p = tmp(".safetensors")
    assert(io.open(p, "w")):close()
    return p
  end, "error"},
  {"a truncated file", function()
    local p = saved(".safetensors")()
    local f = assert(io.open(p, "rb"))
    local s = f:read("a")
    f:close()
    f = assert(io.open(p, "wb"))
    f:write(s:sub(1, #s - 5))
    f:close()
    return p
  end, "error"},
}
E("attn.load", {K.custom(saved(".safetensors"), LOAD_PATHS, {skip = {["a string"] = true}}),
                K.choice("safetensors", {opt = true})}, {override = {[2] = {["a name with a NUL"] = "any"}}})
E("attn.load", {K.custom(saved(".npy"), LOAD_PATHS, {skip = {["a string"] = true}})})
E("attn.safetensors_info", {K.custom(saved(".safetensors"), LOAD_PATHS, {skip = {["a string"] = true}})})

-- library information and threads
E("attn.info", {})
E("attn.now", {})
E("attn.debug_counts", {})
E("attn.get_num_threads", {})
E("attn.set_isa", {K.choice("auto", {opt = true})})
E("attn.set_num_threads", {K.int(attn.get_num_threads(), {min = 1, max = 64})}, {
  override = {[1] = {["2^31"] = "error", ["2^53"] = "error", ["2^62"] = "error", ["maxinteger"] = "error"}}})

-- metamethods (called the way Lua calls them)
local TMT = getmetatable(attn.ones(1))
local KEY_BADS = {
  {"index 0", function() return 0 end, "error"},
  {"index 3 (past the end)", function() return 3 end, "error"},
  {"index -3", function() return -3 end, "error"},
  {"index -1", function() return -1, 2 end, "same"},
  {"index 1.5", function() return 1.5 end, "error"},
  {"index NaN", function() return 0 / 0 end, "error"},
  {"index 2^40", function() return 1 << 40 end, "error"},
  {"index 2^32 + 1", function() return (1 << 32) + 1 end, "error"},
  {"index mininteger", function() return math.mininteger end, "error"},
  {"index maxinteger", function() return math.maxinteger end, "error"},
  {"index 2^63 (a float)", function() return 2.0 ^ 63 end, "error"},
  {"an empty index table", function() return {} end, "any"},
  {"an index table", function() return {2, 1} end, "ok"},
  {"an index table with a string", function() return {1, "a"} end, "error"},
  {"an index table with 0", function() return {1, 0} end, "error"},
  {"an index table too long", function() return {1, 1, 1} end, "error"},
  {"true", function() return true end, "error"},
  {"a function", function() return print end, "error"},
  {"a tensor", function() return attn.ones(1) end, "error"},
  {"an unknown field", function() return "no_such_field" end, "any"},
}
local function SELF(shape, o)
  o = o or {}
  o.self = true
  return K.tensor(shape, o)
end
E("attn.Tensor.__index", {SELF({2, 3}), K.custom(function() return 2 end, KEY_BADS, {wrong = false})}, {
  fn = TMT.__index, names = {"index"}, call = function(t, k) return t[k] end,
  override = {[2] = {["a tensor"] = "any"}}, -- an index tensor (torch's advanced indexing)
  cases = {
    {"a range table", function() return {attn.ones(2, 3), {{}, {2, 3}}} end, "ok"},
    {"a range with step 0", function() return {attn.ones(2, 3), {{}, {1, 3, 0}}} end, "error"},
    {"a range of 4 entries", function() return {attn.ones(2, 3), {{1, 2, 1, 1}}} end, "error"},
    {"an index tensor out of range", function() return {attn.ones(2, 3), attn.tensor({1, 3})} end, "error"},
    {"an index tensor of 0", function() return {attn.ones(2, 3), attn.tensor({0})} end, "error"},
    {"two index tensors", function() return {attn.ones(2, 3), {attn.tensor({1}), attn.tensor({1})}} end, "error"},
    {"a bool mask of the wrong shape", function() return {attn.ones(2, 3), attn.tensor({true, false, true})} end,
      "error"},
    {"a bool mask", function() return {attn.ones(2, 3), attn.tensor({true, false})} end, "ok"},
  }})
E("attn.Tensor.__newindex", {SELF({2, 3}, {written = true}), K.custom(function() return 2 end, KEY_BADS, {wrong = false}),
  K.tensor({3}, {salt = 4})}, {fn = TMT.__newindex, names = {"newindex"}, writes = {1},
  call = function(t, k, v) t[k] = v end, override = {[2] = {["an unknown field"] = "error", ["index -1"] = "any",
    ["an index table"] = "error", -- t[{2, 1}] is one element: a [3] value does not fit
    ["a tensor"] = "any"}, -- an index tensor
    [3] = {["true"] = "any", ["false"] = "any"}, -- booleans convert like torch's x[i] = True
    -- writing row k of an expanded view writes the shared row, as in torch
    [1] = {["a stride-0 expanded view"] = "any"}}, cases = {
    {"a property: requires_grad = 'yes'", function() return {attn.ones(2), "requires_grad", "yes"} end, "error"},
    {"a property: grad of the wrong shape", function() return {attn.ones(2), "grad", attn.ones(3)} end, "error"},
    {"a property: grad = a string", function() return {attn.ones(2), "grad", "x"} end, "error"},
    {"a property: grad = a matching tensor", function() return {attn.ones(2), "grad", attn.ones(2)} end, "ok"},
    {"a method name", function() return {attn.ones(2), "add", 1} end, "error"},
  }})
E("attn.Tensor.__len", {SELF({2, 3})}, {fn = TMT.__len, names = {"len"}, call = function(t) return #t end, cases = {
  {"a 0-d tensor", function() return {attn.tensor(1)} end, "error"},
}})
E("attn.Tensor.__concat", {t23(), t23()}, {fn = TMT.__concat, names = {"'..'"}, base_expect = "error",
  call = function(a, b) return a .. b end})
E("attn.Tensor.__add", {t23(), t23({salt = 2})}, {fn = TMT.__add, names = {"add"}, call = function(a, b) return a + b end})
E("attn.Tensor.__sub", {t23(), t23({salt = 2})}, {fn = TMT.__sub, names = {"sub"}, call = function(a, b) return a - b end})
E("attn.Tensor.__mul", {t23(), t23({salt = 2})}, {fn = TMT.__mul, names = {"mul"}, call = function(a, b) return a * b end})
E("attn.Tensor.__div", {t23(), t23({salt = 2})}, {fn = TMT.__div, names = {"div"}, call = function(a, b) return a / b end})
E("attn.Tensor.__pow", {t23({range = "pos"}), t23({salt = 2})}, {fn = TMT.__pow, names = {"pow"},
  call = function(a, b) return a ^ b end})
E("attn.Tensor.__unm", {SELF({2, 3})}, {fn = TMT.__unm, names = {"neg", "unm"}, call = function(a) return -a end})
E("attn.Tensor.__tostring", {SELF({2, 3})}, {fn = TMT.__tostring, call = function(a) return tostring(a) end,
  override = {[1] = {["a closed tensor"] = "any"}}})
E("attn.Tensor.__close", {SELF({2, 3}, {written = true})}, {fn = TMT.__close, names = {"close"}, writes_all = true, noalias = true,
  call = function(a) TMT.__close(a) end, skip = {[1] = {["a closed tensor"] = true}}, nocompare = true,
  override = {[1] = {["a stride-0 expanded view"] = "any"}}})
E("attn.Tensor.type", {SELF({2, 3})}, {method = "type", fn = attn._methods.type,
  override = {[1] = {["a closed tensor"] = "any"}}})
local GMT = getmetatable(attn.Generator(1))
E("attn.Generator.__tostring", {K.custom(function() return attn.Generator(4) end, {
  {"a closed generator", function()
    local g = attn.Generator(1)
    GMT.__gc(g)
    return g
  end, "ok"},
}, {wrong = false, opt = true})}, {fn = GMT.__tostring, call = function(g) return tostring(g) end})

---------------------------------------------------------------------------
-- 8. The catalogue: the Lua modules
---------------------------------------------------------------------------

-- attn.F
for _, name in ipairs({"relu", "tanh", "sigmoid", "silu"}) do E("attn.F." .. name, {t23()}) end
E("attn.F.gelu", {t23(), K.choice("tanh", {opt = true})})
E("attn.F.softmax", {t23(), K.dim(2, 2)})
E("attn.F.log_softmax", {t23(), K.dim(2, 2)})
E("attn.F.linear", {t23(), K.tensor({4, 3}, {salt = 2}), K.tensor({4}, {opt = true, salt = 3})}, {cases = {
  {"a 1-d weight", function() return {T({2, 3}), T({3})} end, "ok"},
  {"a 3-d weight", function() return {T({2, 3}), T({1, 4, 3})} end, "error"},
  {"a bias of the wrong size", function() return {T({2, 3}), T({4, 3}), T({5})} end, "error"},
}})
E("attn.F.dropout", {K.tensor({2, 3}, {noview = true}), K.num(0.5, {opt = true, min = 0, max = 1, finite = true}),
                     K.bool(true)})
E("attn.F.layer_norm", {t23(), K.custom(function() return {3} end, {
  {"a shape that does not end the input's", function() return {2} end, "error"},
  {"an empty shape", function() return {} end, "error"},
  {"a negative size", function() return {-3} end, "error"},
  {"a string size", function() return {"3"} end, "error"},
  {"a number", function() return 3, {3} end, "same"},
  -- (with the entry's weight and bias of shape [3], which torch refuses
  -- for normalized_shape [2, 3] too: they must have its shape)
  {"the full shape", function() return {2, 3} end, "error"},
  {"too long a shape", function() return {1, 2, 3} end, "error"},
}, {skip = {["a table"] = true}}), K.tensor({3}, {opt = true, salt = 2}), K.tensor({3}, {opt = true, salt = 3}),
  K.num(1e-5, {opt = true})})
E("attn.F.normalize", {t23(), K.num(2, {opt = true}), K.dim(2, 2, {opt = true}), K.num(1e-12, {opt = true})})
E("attn.F.one_hot", {K.index({4}, 5), K.size(5, {opt = true, min = 1, huge = "error"})}, {
  override = {[2] = {["0"] = "error", ["-1"] = "any"}}})
E("attn.F.scaled_dot_product_attention", sdpa_sig, {names = {"sdpa"}})
E("attn.F.split_heads", {K.tensor({2, 3, 4}), K.size(2, {min = 1})}, {override = {[2] = {["2^62"] = "error",
  ["maxinteger"] = "error", ["2^40"] = "error", ["2^53"] = "error"}}})
E("attn.F.combine_heads", {K.tensor({2, 2, 3, 2})})

local RED = K.choice("mean", {opt = true})
-- the losses take torch's positional order (issue 29): a boolean third
-- argument is torch's deprecated size_average, a tensor or number the weight
local SIZE_AVERAGE = {[3] = {["true"] = "ok", ["false"] = "ok"}}
local WEIGHT3 = {[3] = {["a number"] = "ok", ["a tensor"] = "ok"}}
local function loss_opts(extra)
  local f = {reduction = RED}
  for k, v in pairs(extra or {}) do f[k] = v end
  return K.opts(f)
end
local class_opts = {
  weight = K.tensor({4}, {opt = true, range = "pos"}),
  ignore_index = K.int(2, {opt = true}),
}
E("attn.F.nll_loss", {K.tensor({3, 4}), K.index({3}, 4), loss_opts(class_opts)}, {cases = {
  {"a target of the wrong shape", function() return {T({3, 4}), attn.tensor({1, 2})} end, "error"},
  {"a class number 0", function() return {T({3, 4}), attn.tensor({1, 0, 2})} end, "error"},
  {"a class number past C", function() return {T({3, 4}), attn.tensor({1, 5, 2})} end, "error"},
  {"a fractional class", function() return {T({3, 4}), attn.tensor({1, 1.5, 2})} end, "error"},
  {"a NaN class", function() return {T({3, 4}), attn.tensor({1, 0 / 0, 2})} end, "error"},
  {"a 0-d input", function() return {attn.tensor(1), attn.tensor(1)} end, "error"},
  -- torch: a batch of 0 gives nan with "mean", 0 with "sum"
  {"an empty batch (mean)", function() return {attn.zeros(0, 4), attn.zeros(0)} end, "ok",
    function(l) assert(l:item() ~= l:item()) end},
  {"an empty batch (sum)", function() return {attn.zeros(0, 4), attn.zeros(0), {reduction = "sum"}} end, "ok",
    function(l) assert(l:item() == 0) end},
  {"an ignore_index of 1.5", function() return {T({3, 4}), attn.tensor({1, 2, 3}), {ignore_index = 1.5}} end, "error"},
}})
local ce_opts = {weight = class_opts.weight, ignore_index = class_opts.ignore_index,
                 label_smoothing = K.num(0.1, {opt = true, min = 0, max = 1, finite = true})}
E("attn.F.cross_entropy", {K.tensor({3, 4}), K.index({3}, 4), loss_opts(ce_opts)}, {cases = {
  {"probability targets", function() return {T({3, 4}), T({3, 4}, "prob")} end, "ok"},
  {"probability targets with ignore_index", function() return {T({3, 4}), T({3, 4}, "prob"), {ignore_index = 1}} end,
    "error"},
  {"a class number past C", function() return {T({3, 4}), attn.tensor({1, 5, 2})} end, "error"},
  {"an empty batch (mean)", function() return {attn.zeros(0, 4), attn.zeros(0)} end, "ok",
    function(l) assert(l:item() ~= l:item()) end},
}})
for _, name in ipairs({"mse_loss", "l1_loss"}) do
  E("attn.F." .. name, {t23(), t23({salt = 4}), loss_opts()}, {override = SIZE_AVERAGE, cases = {
    -- torch: the mean over no element is nan, the sum 0
    {"empty tensors (mean)", function() return {attn.zeros(0), attn.zeros(0)} end, "ok",
      function(l) assert(l:item() ~= l:item()) end},
    {"shapes that do not broadcast", function() return {T({2, 3}), T({4})} end, "error"},
  }})
end
E("attn.F.smooth_l1_loss", {t23(), t23({salt = 4}), loss_opts({beta = K.num(1, {opt = true, min = 0})})},
  {override = SIZE_AVERAGE})
E("attn.F.huber_loss", {t23(), t23({salt = 4}), loss_opts({delta = K.num(1, {opt = true, min = 1e-300})})}, {
  override = {[3] = {["option delta = -0"] = "error", ["option delta = 0"] = "error"}}})
E("attn.F.binary_cross_entropy", {t23({range = "prob"}), t23({range = "prob", salt = 4}),
  loss_opts({weight = K.tensor({2, 3}, {opt = true, range = "pos"})})}, {override = WEIGHT3, cases = {
  {"an input above 1", function() return {attn.tensor({1.5}), attn.tensor({1})} end, "error"},
  {"a NaN input", function() return {attn.tensor({0 / 0}), attn.tensor({1})} end, "error"},
  {"a target below 0", function() return {attn.tensor({0.5}), attn.tensor({-1})} end, "error"},
}})
E("attn.F.binary_cross_entropy_with_logits", {t23(), t23({range = "prob", salt = 4}),
  loss_opts({weight = K.tensor({2, 3}, {opt = true, range = "pos"}), pos_weight = K.tensor({3}, {opt = true, range = "pos"})})},
  {override = WEIGHT3})
E("attn.F.kl_div", {t23(), t23({range = "prob", salt = 4}), K.opts({reduction = K.choice("batchmean", {opt = true}),
  log_target = K.bool(false)})}, {override = SIZE_AVERAGE})

-- attn.nn
local function seeded(f) return function() attn.manual_seed(42); return f() end end
local function mod(f) return K.fixed(seeded(f)) end
local function forward(path, make, sig, opts)
  opts = opts or {}
  table.insert(sig, 1, mod(make))
  opts.method = opts.method or "forward"
  return E(path, sig, opts)
end
local BOOL = function(good) return K.bool(good) end

E("attn.nn.Parameter", {K.tensor({2, 3}, {opt = true}), BOOL(true)}, {noalias = true})
E("attn.nn.is_parameter", {K.custom(function() return nn.Parameter(attn.ones(2)) end, {}, {wrong = false, opt = true})})
E("attn.nn.is_module", {K.custom(function() return nn.Identity() end, {}, {wrong = false, opt = true})})
-- attn.device (lua/attn/device.lua; attn.device and attn.cuda are its fields)
do
  local dev = require "attn.device"
  E("attn.device.device", {K.choice("cpu"), K.int(0, {opt = true, min = 0})}, {fn = dev.device, call = dev.device,
    names = {"attn.device"}, cases = {
      {"cuda", function() return {"cuda"} end, "error"},
      {"cuda:0", function() return {"cuda:0"} end, "error"},
      {"mps", function() return {"mps"} end, "error"},
      {"an index twice", function() return {"cpu:0", 1} end, "error"},
      {"a device object", function() return {dev.device("cpu")} end, "ok"},
    }})
  E("attn.device.is_device", {K.custom(function() return dev.device("cpu") end, {}, {wrong = false, opt = true})},
    {fn = dev.is_device, call = dev.is_device})
  E("attn.device.is_device_string", {K.custom(function() return "cuda:0" end, {}, {wrong = false, opt = true})},
    {fn = dev.is_device_string, call = dev.is_device_string})
  E("attn.device.cuda.is_available", {}, {fn = dev.cuda.is_available, call = dev.cuda.is_available})
  E("attn.device.cuda.device_count", {}, {fn = dev.cuda.device_count, call = dev.cuda.device_count})
end
E("attn.nn.isinstance", {K.custom(function() return nn.Linear(2, 2) end, {}, {wrong = false, opt = true}),
                         K.custom(function() return nn.Linear end, {
  {"a non-class table", function() return {} end, "any"},
}, {opt = true})}, {override = {[2] = {["a string"] = "any", ["true"] = "any", ["false"] = "any",
  ["a function"] = "any", ["a coroutine"] = "any", ["a file handle"] = "any", ["a generator"] = "any"}}})
E("attn.nn.state_dict_keys", {K.custom(function() return nn.Linear(2, 2):state_dict() end, {
  {"a plain table", function() return {a = 1} end, "any"},
})})

-- layers: constructors, forward, extra_repr, reset_parameters
E("attn.nn.Linear", {K.size(3, {huge = "error"}), K.size(4, {huge = "error"}), BOOL(true)})
forward("attn.nn.Linear.forward", function() return nn.Linear(3, 4) end, {K.tensor({2, 3})})
for _, m in ipairs({"extra_repr", "reset_parameters"}) do
  E("attn.nn.Linear." .. m, {mod(function() return nn.Linear(3, 4) end)}, {method = m, writes_all = true})
end
-- torch does not check max_norm's sign either
local EMB_OPTS = K.opts({padding_idx = K.int(2, {opt = true}), max_norm = K.num(1, {opt = true}),
                         norm_type = K.num(2, {opt = true})})
E("attn.nn.Embedding", {K.size(5, {huge = "error"}), K.size(3, {huge = "error"}), EMB_OPTS}, {cases = {
  {"padding_idx 0", function() return {5, 3, {padding_idx = 0}} end, "error"},
  {"padding_idx past the end", function() return {5, 3, {padding_idx = 6}} end, "error"},
  {"padding_idx -5", function() return {5, 3, {padding_idx = -5}} end, "ok"},
  {"a _weight of the wrong shape", function() return {5, 3, {_weight = attn.ones(2, 2)}} end, "error"},
  {"a _weight that is not a tensor", function() return {5, 3, {_weight = "w"}} end, "error"},
}, override = {[3] = {["option padding_idx = 0"] = "error", ["option padding_idx = 2^62"] = "error",
  ["option padding_idx = maxinteger"] = "error", ["option padding_idx = mininteger"] = "error",
  ["option padding_idx = -2^62"] = "error", ["option padding_idx = 2^31"] = "error",
  ["option padding_idx = -2^31"] = "error", ["option padding_idx = 2^53"] = "error",
  ["a number"] = "ok"}}}) -- a number third is padding_idx, torch's order (issue 29)
forward("attn.nn.Embedding.forward", function() return nn.Embedding(5, 3) end, {K.index({2, 2}, 5)})
forward("attn.nn.Embedding.forward", function() return nn.Embedding(5, 3, {max_norm = 0.5}) end,
  {K.index({2, 2}, 5)}, {writes_all = true})
for _, m in ipairs({"extra_repr", "reset_parameters"}) do
  E("attn.nn.Embedding." .. m, {mod(function() return nn.Embedding(5, 3, {padding_idx = 2}) end)},
    {method = m, writes_all = true})
end
E("attn.nn.Embedding.from_pretrained", {K.tensor({5, 3}), K.opts({freeze = BOOL(true),
  padding_idx = K.int(2, {opt = true}), max_norm = K.num(1, {opt = true}),
  norm_type = K.num(2, {opt = true})})}, {override = {[2] = {["option padding_idx = 0"] = "error",
  ["option padding_idx = 2^62"] = "error", ["option padding_idx = maxinteger"] = "error",
  ["option padding_idx = mininteger"] = "error", ["option padding_idx = -2^62"] = "error",
  ["option padding_idx = 2^31"] = "error", ["option padding_idx = -2^31"] = "error",
  ["option padding_idx = 2^53"] = "error", ["true"] = "ok", ["false"] = "ok"}}, noalias = true}) -- freeze
E("attn.nn.LayerNorm", {K.custom(function() return {3} end, {
  {"a number", function() return 3, {3} end, "same"},
  {"an empty shape", function() return {} end, "error"},
  {"a negative size", function() return {-3} end, "error"},
  {"a size of 2^62", function() return {1 << 62} end, "error"},
  {"a string size", function() return {"3"} end, "error"},
  {"a shape of 2^40", function() return {1 << 40} end, "error"},
}, {skip = {["a table"] = true}}), K.num(1e-5, {opt = true, min = 0}), BOOL(true)}, {cases = {
  {"options as a table", function() return {{3}, {eps = 1e-3, elementwise_affine = false}} end, "ok"},
  {"unknown options", function() return {{3}, {epsilon = 1e-3}} end, "error"},
}, override = {[2] = {["a table"] = "any"}}})
forward("attn.nn.LayerNorm.forward", function() return nn.LayerNorm(3) end, {K.tensor({2, 3})})
for _, m in ipairs({"extra_repr", "reset_parameters"}) do
  E("attn.nn.LayerNorm." .. m, {mod(function() return nn.LayerNorm(3) end)}, {method = m, writes_all = true})
end
E("attn.nn.Dropout", {K.num(0.5, {opt = true, min = 0, max = 1, finite = true}), BOOL(false)})
forward("attn.nn.Dropout.forward", function() return nn.Dropout(0.5) end, {K.tensor({2, 3}, {noview = true})})
forward("attn.nn.Dropout.forward", function() return nn.Dropout(0.5, true) end,
  {K.tensor({2, 3}, {noview = true, strict = true, written = true})}, {writes = {2}, noalias = true})
E("attn.nn.Dropout.extra_repr", {mod(function() return nn.Dropout(0.3) end)}, {method = "extra_repr"})
E("attn.nn.ReLU", {BOOL(false)})
forward("attn.nn.ReLU.forward", function() return nn.ReLU() end, {K.tensor({2, 3})})
forward("attn.nn.ReLU.forward", function() return nn.ReLU(true) end, {K.tensor({2, 3}, {strict = true, written = true})},
  {writes = {2}})
E("attn.nn.ReLU.extra_repr", {mod(function() return nn.ReLU(true) end)}, {method = "extra_repr"})
E("attn.nn.GELU", {K.choice("tanh", {opt = true})})
forward("attn.nn.GELU.forward", function() return nn.GELU("tanh") end, {K.tensor({2, 3})})
E("attn.nn.GELU.extra_repr", {mod(function() return nn.GELU() end)}, {method = "extra_repr"})
forward("attn.nn.Tanh.forward", function() return nn.Tanh() end, {K.tensor({2, 3})})
forward("attn.nn.Sigmoid.forward", function() return nn.Sigmoid() end, {K.tensor({2, 3})})
-- Identity returns whatever it is given, like torch's
forward("attn.nn.Identity.forward", function() return nn.Identity() end, {K.custom(function() return T({2, 3}) end, {
  {"a string", function() return "x" end, "ok"},
  {"nil", function() return nil end, "ok"},
}, {wrong = false, opt = true})})
for _, name in ipairs({"Softmax", "LogSoftmax"}) do
  E("attn.nn." .. name, {K.dim(2, 2)}, {override = {[1] = {["dim 0"] = "any", ["dim ndim + 1"] = "any",
    ["dim -(ndim + 1)"] = "any", ["dim 2^53"] = "any", ["dim 2^32 + 1"] = "any", ["dim maxinteger"] = "any",
    ["dim mininteger"] = "any"}}, nocompare = true}) -- the dim is checked against the input at forward
  forward("attn.nn." .. name .. ".forward", function() return nn[name](2) end, {K.tensor({2, 3})})
  E("attn.nn." .. name .. ".extra_repr", {mod(function() return nn[name](2) end)}, {method = "extra_repr"})
end
for _, name in ipairs({"GRUCell", "LSTMCell"}) do
  E("attn.nn." .. name, {K.size(3, {huge = "error"}), K.size(4, {huge = "error"}), BOOL(true)})
  for _, m in ipairs({"extra_repr", "reset_parameters"}) do
    E("attn.nn." .. name .. "." .. m, {mod(function() return nn[name](3, 4, false) end)}, {method = m, writes_all = true})
  end
end
forward("attn.nn.GRUCell.forward", function() return nn.GRUCell(3, 4) end, {K.tensor({2, 3}),
  K.tensor({2, 4}, {opt = true, salt = 2})})
forward("attn.nn.LSTMCell.forward", function() return nn.LSTMCell(3, 4) end, {K.tensor({2, 3}),
  K.custom(function() return {T({2, 4}, nil, 2), T({2, 4}, nil, 3)} end, {
    {"a state with one tensor", function() return {T({2, 4})} end, "any"},
    {"a state of the wrong shape", function() return {T({2, 5}), T({2, 4})} end, "error"},
    {"a tensor instead of a pair", function() return T({2, 4}) end, "error"},
    {"a state holding strings", function() return {"h", "c"} end, "error"},
  }, {opt = true, skip = {["a table"] = true}})})

-- containers
local function seq() return nn.Sequential(nn.Linear(3, 4), nn.ReLU()) end
local MOD_BADS = {
  {"a table", function() return {} end, "error"},
  {"a module class (not an instance)", function() return nn.Linear end, "error"},
  {"a tensor", function() return attn.ones(2) end, "error"},
}
E("attn.nn.Sequential", {K.custom(function() return nn.Linear(3, 4) end, MOD_BADS), K.custom(function()
  return nn.ReLU() end, MOD_BADS, {opt = true})}, {override = {[1] = {["a table"] = "any"}}})
forward("attn.nn.Sequential.forward", seq, {K.tensor({2, 3})})
E("attn.nn.Sequential.append", {mod(seq), K.custom(function() return nn.Tanh() end, MOD_BADS)},
  {method = "append", writes_all = true})
local function mlist() return nn.ModuleList({nn.Linear(2, 2), nn.Tanh()}) end
E("attn.nn.ModuleList", {K.custom(function() return {nn.Linear(2, 2)} end, {
  {"a list holding a string", function() return {nn.Linear(2, 2), "x"} end, "error"},
  {"a module instead of a list", function() return nn.Linear(2, 2) end, "error"},
}, {opt = true, skip = {["a table"] = true}})})
E("attn.nn.ModuleList.forward", {mod(mlist), K.tensor({2})}, {method = "forward", base_expect = "error"})
E("attn.nn.ModuleList.append", {mod(mlist), K.custom(function() return nn.Tanh() end, MOD_BADS)},
  {method = "append", writes_all = true})
E("attn.nn.ModuleList.extend", {mod(mlist), K.custom(function() return {nn.Tanh()} end, {
  {"a list holding a string", function() return {nn.Tanh(), "x"} end, "error"},
  {"a module instead of a list", function() return nn.Tanh() end, "error"},
}, {skip = {["a table"] = true}})}, {method = "extend", writes_all = true})
E("attn.nn.ModuleList.insert", {mod(mlist), K.int(1), K.custom(function() return nn.Tanh() end, MOD_BADS)},
  {method = "insert", writes_all = true})
local function mdict() return nn.ModuleDict({{"a", nn.Linear(2, 2)}, {"b", nn.Tanh()}}) end
local DICT_BADS = {
  {"a table with two string keys (no order)", function() return {c = nn.Tanh(), d = nn.ReLU()} end, "error"},
  {"a list mixed with a string key", function() return {{"c", nn.Tanh()}, d = nn.ReLU()} end, "error"},
  {"a table with a non-module value", function() return {a = "x"} end, "error"},
  {"a table with a number key", function() return {[5] = nn.Tanh()} end, "error"},
  {"a list with a bad pair", function() return {{"a", "x"}} end, "error"},
  {"a module", function() return nn.Tanh() end, "error"},
  {"a key with a dot", function() return {["a.b"] = nn.Tanh()} end, "error"},
  {"an empty key", function() return {[""] = nn.Tanh()} end, "error"},
  {"a key that names a method", function() return {forward = nn.Tanh()} end, "error"},
}
E("attn.nn.ModuleDict", {K.custom(function() return {c = nn.Tanh()} end, DICT_BADS,
  {opt = true, skip = {["a table"] = true}})})
E("attn.nn.ModuleDict.update", {mod(mdict), K.custom(function() return {c = nn.Tanh()} end, DICT_BADS,
  {skip = {["a table"] = true}})}, {method = "update", writes_all = true})
E("attn.nn.ModuleDict.keys", {mod(mdict)}, {method = "keys"})
E("attn.nn.ModuleDict.items", {mod(mdict)}, {method = "items"})
E("attn.nn.ModuleDict.contains", {mod(mdict), K.custom(function() return "a" end, {}, {wrong = false, opt = true})},
  {method = "contains"})
E("attn.nn.ModuleDict.forward", {mod(mdict)}, {method = "forward", base_expect = "error"})

-- nn.Module's own methods, on a small model
local Net = nn.Module:extend("CatalogueNet")
function Net:init()
  self.fc = nn.Linear(3, 2)
  self.norm = nn.LayerNorm(2)
  self:register_buffer("scale", attn.tensor({1, 2}))
end
function Net:forward(x) return self.norm(self.fc(x)) * self.scale end
local function net() return Net() end
local NAME = function(good) return K.str(good, {empty = "error", number = "error", nul = "any"}) end
local function mmeth(name, sig, opts)
  opts = opts or {}
  table.insert(sig, 1, mod(net))
  opts.method = name
  return E("attn.nn.Module." .. name, sig, opts)
end
mmeth("register_parameter", {NAME("p"), K.custom(function() return nn.Parameter(attn.ones(2)) end, {
  {"a plain tensor", function() return attn.ones(2) end, "error"},
  {"a number", function() return 3 end, "error"},
}, {opt = true})}, {writes_all = true, cases = {
  {"a name with a dot", function() return {net(), "a.b", nn.Parameter(attn.ones(1))} end, "error"},
  {"a taken name", function() return {net(), "fc", nn.Parameter(attn.ones(1))} end, "error"},
  {"a method's name", function() return {net(), "forward", nn.Parameter(attn.ones(1))} end, "error"},
}})
mmeth("register_buffer", {NAME("buf"), K.tensor({2}, {opt = true}), BOOL(true)}, {writes_all = true, noalias = true,
  override = {[3] = {["a closed tensor"] = "any"}}})
for _, name in ipairs({"add_module", "register_module"}) do
  mmeth(name, {NAME("child"), K.custom(function() return nn.Tanh() end, MOD_BADS, {opt = true})}, {writes_all = true})
end
for _, name in ipairs({"named_parameters", "named_buffers"}) do
  mmeth(name, {K.str("pre", {opt = true, number = "error"}), BOOL(true)}, {nocompare = true})
end
for _, name in ipairs({"parameters", "buffers"}) do mmeth(name, {BOOL(true)}) end
for _, name in ipairs({"named_children", "children", "modules", "eval", "to_string", "extra_repr"}) do
  mmeth(name, {}, {nocompare = true, writes_all = true})
end
mmeth("named_modules", {K.str("pre", {opt = true, number = "error"})}, {nocompare = true})
mmeth("get_submodule", {K.str("fc", {number = "error"})}, {cases = {
  {"a missing name", function() return {net(), "nope"} end, "error"},
  {"a dotted path past a leaf", function() return {net(), "fc.weight.x"} end, "error"},
  {"a path with empty parts", function() return {net(), "fc..x"} end, "error"},
}, override = {[2] = {["an empty string"] = "ok"}}})
mmeth("train", {BOOL(true)}, {writes_all = true})
mmeth("requires_grad_", {BOOL(false)}, {writes_all = true})
mmeth("zero_grad", {BOOL(true)}, {writes_all = true})
mmeth("apply", {K.custom(function() return function() end end, {
  {"a function that raises", function() return function() error("inner failure") end end, "error"},
}, {skip = {["a function"] = true}})}, {writes_all = true, names = {"inner failure"}})
-- hooks (issue 29): the hook must be callable
for _, name in ipairs({"register_forward_pre_hook", "register_forward_hook", "register_full_backward_hook"}) do
  mmeth(name, {K.custom(function() return function() end end, {}, {skip = {["a function"] = true}})},
    {writes_all = true, nocompare = true})
end
-- devices and dtypes (issue 29): attn runs on the CPU only
mmeth("to", {K.custom(function() return "cpu" end, {
  {"cuda", function() return "cuda:0" end, "error"},
  {"an unknown name", function() return "bogus" end, "error"},
  {"an integer dtype", function() return "int64" end, "error"},
  {"a number", function() return 1 end, "error"},
  {"an options table with an unknown key", function() return {devic = "cpu"} end, "error"},
  {"a float32 dtype", function() return attn.float32 end, "ok"},
  {"a tensor (its dtype)", function() return attn.ones(1) end, "ok"},
  {"a cpu device", function() return attn.device("cpu") end, "ok"},
})}, {writes_all = true, nocompare = true})
for _, name in ipairs({"cpu", "float", "half", "bfloat16", "double"}) do
  mmeth(name, {}, {writes_all = true, nocompare = true})
end
mmeth("cuda", {}, {base_expect = "error", nocompare = true})
mmeth("state_dict", {K.opts({prefix = K.str("p.", {opt = true, number = "error"}), keep_vars = BOOL(false)})})
mmeth("load_state_dict", {K.custom(function() return net():state_dict() end, {
  {"a state with a missing key", function() local sd = net():state_dict(); sd["fc.bias"] = nil; return sd end, "error"},
  {"a state with an extra key", function() local sd = net():state_dict(); sd.extra = attn.ones(1); return sd end, "error"},
  {"a state with a wrong shape", function() local sd = net():state_dict(); sd["fc.bias"] = attn.ones(3); return sd end,
    "error"},
  {"a state with a string value", function() local sd = net():state_dict(); sd["fc.bias"] = "x"; return sd end, "error"},
  {"a state with a number key", function() local sd = net():state_dict(); sd[1] = attn.ones(1); return sd end, "any"},
  {"a state with a non-contiguous tensor", function()
    local sd = net():state_dict()
    sd["fc.weight"] = T({3, 2}):t()
    return sd
  end, "ok"},
  {"a state with NaN values", function()
    local sd = net():state_dict()
    sd["fc.bias"] = attn.tensor({0 / 0, 1})
    return sd
  end, "ok"},
  {"a module", function() return nn.Linear(3, 2) end, "error"},
}, {skip = {["a table"] = true}}), BOOL(true)}, {writes_all = true, names = {"state_dict"}, cases = {
  {"a missing key without strict", function()
    local sd = net():state_dict()
    sd["fc.bias"] = nil
    return {net(), sd, false}
  end, "ok"},
  {"a wrong shape without strict", function()
    local sd = net():state_dict()
    sd["fc.bias"] = attn.ones(3)
    return {net(), sd, false}
  end, "error"},
}})
mmeth("save", {K.custom(function() return tmp(".safetensors") end, SAVE_PATHS, {skip = {["a string"] = true}}),
  K.custom(function() return {note = "x"} end, {
    {"a metadata value that is a table", function() return {note = {}} end, "error"},
  }, {opt = true})})
mmeth("load", {K.custom(function()
  local p = tmp(".safetensors")
  seeded(net)():save(p)
  return p
end, LOAD_PATHS, {skip = {["a string"] = true}}), BOOL(true)}, {writes_all = true, cases = {
  {"a file of another model", function()
    local p = tmp("_other.safetensors")
    nn.Linear(5, 5):save(p)
    return {net(), p}
  end, "error"},
}})
mmeth("forward", {K.tensor({2, 3})}, {fn = nn.Module.forward, cases = {
  {"the base class's forward", function() return {nn.Module()} end, "error"},
}})
E("attn.nn.Module", {}, {names = {"Module"}, cases = {
  {"an argument the base init ignores", function() return {5} end, "ok"},
}})
E("attn.nn.Module.extend", {K.fixed(function() return nn.Module end), K.str("Cls", {empty = "any", number = "error",
  opt = true})}, {method = "extend", cases = {
  {"a subclass of a subclass", function() return {nn.Linear, "MyLinear"} end, "ok"},
}})

-- attn.optim
local function params_with_grads()
  local a, b = nn.Parameter(T({2, 3})), nn.Parameter(T({3}, nil, 2))
  a.grad, b.grad = T({2, 3}, nil, 5), T({3}, nil, 6)
  return {a, b}
end
local PARAMS_BADS = {
  {"an empty list", function() return {} end, "error"},
  {"a list holding a string", function() return {nn.Parameter(attn.ones(2)), "x"} end, "error"},
  {"a list holding a non-leaf", function()
    local p = nn.Parameter(attn.ones(2))
    return {p * 2}
  end, "error"},
  {"a parameter listed twice", function() local p = nn.Parameter(attn.ones(2)); return {p, p} end, "any"},
  {"a single tensor", function() return nn.Parameter(attn.ones(2)) end, "any"},
  {"groups", function() return {{params = params_with_grads(), lr = 0.5}} end, "ok"},
  {"a group without params", function() return {{lr = 0.5}} end, "error"},
  {"a group with params = a string", function() return {{params = "x"}} end, "error"},
  {"a module", function() return nn.Linear(2, 2) end, "error"},
}
local LR = function(good) return K.num(good, {opt = true, min = 0}) end
local OPTIMS = {
  SGD = {lr = K.num(0.1, {min = 0}), momentum = K.num(0.9, {opt = true, min = 0}), dampening = K.num(0.1, {opt = true}),
         weight_decay = K.num(0.01, {opt = true, min = 0}), nesterov = BOOL(false), maximize = BOOL(false)},
  Adam = {lr = LR(1e-3), betas = K.custom(function() return {0.9, 0.99} end, {
            {"a beta of 1", function() return {1, 0.99} end, "error"},
            {"a negative beta", function() return {-0.1, 0.99} end, "error"},
            {"one beta", function() return {0.9} end, "error"},
            {"betas holding strings", function() return {"a", "b"} end, "error"},
          }, {opt = true, skip = {["a table"] = true}}),
          eps = K.num(1e-8, {opt = true, min = 0}), weight_decay = K.num(0, {opt = true, min = 0}),
          amsgrad = BOOL(false), maximize = BOOL(false)},
  RMSprop = {lr = LR(1e-2), alpha = K.num(0.9, {opt = true, min = 0}), eps = K.num(1e-8, {opt = true, min = 0}),
             weight_decay = K.num(0, {opt = true, min = 0}), momentum = K.num(0.1, {opt = true, min = 0}),
             centered = BOOL(true), maximize = BOOL(false)},
}
OPTIMS.AdamW = OPTIMS.Adam
for _, name in ipairs({"SGD", "Adam", "AdamW", "RMSprop"}) do
  local fields = OPTIMS[name]
  if name == "SGD" then fields.lr.opt = true end
  E("attn.optim." .. name, {K.custom(params_with_grads, PARAMS_BADS), K.opts(fields, {opt = name ~= "SGD"})},
    -- a number there is torch's positional lr: optim.SGD(params, 0.1)
    {covers = {optim[name].new}, noalias = true, names = {name}, override = {[2] = {["a number"] = "any"}}, cases = {
      {"torch's positional order", function() return {params_with_grads(), 0.1, name == "SGD" and 0.9 or nil} end,
        "ok"},
      {"a positional lr and an options table", function() return {params_with_grads(), 0.1, {weight_decay = 0.01}} end,
        "ok"},
      {"lr given twice", function() return {params_with_grads(), 0.1, {lr = 0.2}} end, "error"},
      {"steps after construction", function() return {params_with_grads(), {lr = 0.1}} end, "ok",
        function(o) o:step() end},
    }})
end
local function sgd() return optim.SGD(params_with_grads(), {lr = 0.1, momentum = 0.9}) end
local function ometh(name, sig, opts)
  opts = opts or {}
  table.insert(sig, 1, K.fixed(sgd))
  opts.method = name
  opts.writes_all = true
  return E("attn.optim.Optimizer." .. name, sig, opts)
end
ometh("step", {K.custom(function() return function() return attn.tensor(1) end end, {
  {"a closure that raises", function() return function() error("inner failure") end end, "error"},
}, {opt = true, skip = {["a function"] = true}})}, {names = {"inner failure"}})
ometh("zero_grad", {BOOL(true)})
ometh("state_dict", {})
ometh("load_state_dict", {K.custom(function()
  local o = sgd()
  o:step()
  return o:state_dict()
end, {
  {"a state with too many groups", function()
    local sd = sgd():state_dict()
    sd.param_groups[2] = sd.param_groups[1]
    return sd
  end, "error"},
  {"a state whose group has another size", function()
    local sd = sgd():state_dict()
    sd.param_groups[1].params = {1}
    return sd
  end, "error"},
  {"a state with a buffer of the wrong shape", function()
    local o = sgd()
    o:step()
    local sd = o:state_dict()
    sd.state[1].momentum_buffer = attn.ones(7)
    return sd
  end, "error"},
  {"a state whose params are strings", function()
    local sd = sgd():state_dict()
    sd.param_groups[1].params = "x"
    return sd
  end, "error"},
  {"a state whose group is a string", function()
    local sd = sgd():state_dict()
    sd.param_groups[1] = "x"
    return sd
  end, "error"},
  {"a state with state = a string", function()
    local sd = sgd():state_dict()
    sd.state = "x"
    return sd
  end, "error"},
  {"a state with a string lr", function()
    local sd = sgd():state_dict()
    sd.param_groups[1].lr = "x"
    return sd
  end, "error"},
  {"an empty table", function() return {} end, "error"},
}, {skip = {["a table"] = true}})})
ometh("add_param_group", {K.custom(function() return {params = {nn.Parameter(attn.ones(2))}, lr = 0.5} end, {
  {"a group with a parameter already present", function() return {params = {}} end, "any"},
  {"a group with params = a number", function() return {params = 5} end, "error"},
  {"a group with a string lr", function() return {params = {nn.Parameter(attn.ones(2))}, lr = "x"} end, "error"},
  {"a group with a negative lr", function() return {params = {nn.Parameter(attn.ones(2))}, lr = -1} end, "error"},
  -- torch keeps a group's extra keys (users store their own fields there)
  {"a group with an unknown option", function() return {params = {nn.Parameter(attn.ones(2))}, lrr = 1} end, "any"},
}, {skip = {["a table"] = true}})})

local function adam() return optim.Adam(params_with_grads(), 1e-3) end
local SCHEDS = {
  multistep = function(o) return optim.MultiStepLR(o, {2, 4}, 0.5) end,
  constant = function(o) return optim.ConstantLR(o, 0.5, 3) end,
  linear = function(o) return optim.LinearLR(o, 0.1, 1, 4) end,
  exponential = function(o) return optim.ExponentialLR(o, 0.9) end,
  polynomial = function(o) return optim.PolynomialLR(o, 4, 2) end,
  multiplicative = function(o) return optim.MultiplicativeLR(o, function() return 0.9 end) end,
  cosine = function(o) return optim.CosineAnnealingLR(o, 5, 0.001) end,
  warm = function(o) return optim.CosineAnnealingWarmRestarts(o, 3, 2) end,
  onecycle = function(o) return optim.OneCycleLR(o, 0.1, 50) end,
  sequential = function(o)
    return optim.SequentialLR(o, {optim.LinearLR(o, 0.1, 1, 2), optim.ExponentialLR(o, 0.9)}, {2})
  end,
  chained = function(o) return optim.ChainedScheduler({optim.ConstantLR(o, 0.5, 2), optim.ExponentialLR(o, 0.9)}) end,
  plateau = function(o) return optim.ReduceLROnPlateau(o, "min", 0.5, 1) end,
}
local function sched(kind_)
  return function()
    local o = sgd()
    if kind_ == "step" then return optim.StepLR(o, 2, 0.5) end
    if kind_ == "noam" then return optim.NoamLR(o, {d_model = 8, warmup = 4}) end
    if SCHEDS[kind_] then return SCHEDS[kind_](o) end
    return optim.LambdaLR(o, function(e) return 1 / (e + 1) end)
  end
end
local function sentry(path, name, sig, extra)
  local o = {names = {name}, writes_all = true}
  for k, v in pairs(extra or {}) do o[k] = v end
  table.insert(sig, 1, K.fixed(sgd))
  return E(path, sig, o)
end
local LAST_EPOCH = K.int(-1, {opt = true, min = -1})
sentry("attn.optim.MultiStepLR", "MultiStepLR", {K.custom(function() return {2, 4, 4} end, {
  {"a list holding a string", function() return {2, "x"} end, "error"},
  {"a list holding 1.5", function() return {1.5} end, "error"},
  {"an empty list", function() return {} end, "any"},
}, {skip = {["a table"] = true}}), K.num(0.5, {opt = true, finite = true}), LAST_EPOCH},
  {cases = {{"options table", function() return {sgd(), {milestones = {2}, gamma = 0.5}} end, "ok"}}})
sentry("attn.optim.ConstantLR", "ConstantLR", {K.num(0.5, {opt = true, min = 0, max = 1, finite = true}),
  K.int(3, {opt = true}), LAST_EPOCH})
sentry("attn.optim.LinearLR", "LinearLR", {K.num(0.5, {opt = true, min = 1e-300, max = 1, finite = true}),
  K.num(1, {opt = true, min = 0, max = 1, finite = true}), K.int(4, {opt = true, min = 1}), LAST_EPOCH},
  {override = {[2] = {["-0"] = "error", ["0"] = "error"}},
   cases = {{"options table", function() return {sgd(), {start_factor = 0.1, total_iters = 3}} end, "ok"}}})
sentry("attn.optim.ExponentialLR", "ExponentialLR", {K.num(0.9, {finite = true}), LAST_EPOCH})
sentry("attn.optim.PolynomialLR", "PolynomialLR", {K.int(4, {opt = true, min = 1}), K.num(2, {opt = true, finite = true}),
  LAST_EPOCH})
sentry("attn.optim.MultiplicativeLR", "MultiplicativeLR", {K.custom(function() return function() return 0.9 end end, {
  {"a function returning a string", function() return function() return "x" end end, "any"},
}, {skip = {["a function"] = true}}), LAST_EPOCH})
sentry("attn.optim.CosineAnnealingLR", "CosineAnnealingLR", {K.num(5, {finite = true}),
  K.num(0, {opt = true, finite = true}), LAST_EPOCH}, {override = {[2] = {["-0"] = "error", ["0"] = "error"}},
  cases = {{"options table", function() return {sgd(), {T_max = 5, eta_min = 0.001}} end, "ok"},
           {"an unknown option", function() return {sgd(), {T_max = 5, eta_mn = 0}} end, "error"}}})
sentry("attn.optim.CosineAnnealingWarmRestarts", "CosineAnnealingWarmRestarts", {K.int(3, {min = 1}),
  K.int(2, {opt = true, min = 1}), K.num(0, {opt = true, finite = true}), LAST_EPOCH})
sentry("attn.optim.OneCycleLR", "OneCycleLR", {K.num(0.1, {finite = true}), K.int(10, {min = 1}),
  K.opts({pct_start = K.num(0.3, {opt = true, min = 0, max = 1, finite = true}),
    anneal_strategy = K.choice("cos", {opt = true}), cycle_momentum = BOOL(true), three_phase = BOOL(false),
    base_momentum = K.num(0.85, {opt = true, finite = true}), max_momentum = K.num(0.95, {opt = true, finite = true}),
    div_factor = K.num(25, {opt = true, finite = true}), final_div_factor = K.num(1e4, {opt = true, finite = true}),
  })}, {override = {[2] = {["a table"] = "any"}, [4] = {["a number"] = "any", ["option base_momentum = a table"] = "any",
    ["option max_momentum = a table"] = "any"}}, cases = {
    {"epochs and steps_per_epoch", function() return {sgd(), {max_lr = 0.1, epochs = 2, steps_per_epoch = 3}} end, "ok"},
    {"neither total_steps nor epochs", function() return {sgd(), {max_lr = 0.1}} end, "error"},
    {"Adam (cycles betas[1])", function() return {adam(), 0.1, 10} end, "ok"},
    {"max_lr per group of the wrong length", function() return {sgd(), {0.1, 0.2}, 10} end, "error"},
  }})
local function seq_children() local o = sgd() return {optim.LinearLR(o, 0.1, 1, 2), optim.ExponentialLR(o, 0.9)} end
E("attn.optim.SequentialLR", {K.custom(seq_children, {
  {"schedulers of two optimizers", function() return {optim.StepLR(sgd(), 2), optim.StepLR(sgd(), 2)} end, "error"},
  {"a list holding a number", function() return {1, 2} end, "error"},
  {"an empty list", function() return {} end, "error"},
}, {skip = {["a table"] = true}}), K.custom(function() return {2} end, {
  {"two milestones for two schedulers", function() return {2, 3} end, "error"},
  {"a milestone 1.5", function() return {1.5} end, "error"},
}, {skip = {["a table"] = true}}), LAST_EPOCH}, {names = {"SequentialLR"}, writes_all = true, fn = optim.SequentialLR,
  call = function(list, ms, le)
    local o = type(list) == "table" and type(list[1]) == "table" and list[1].optimizer or sgd()
    return optim.SequentialLR(o, list, ms, le)
  end})
E("attn.optim.ChainedScheduler", {K.custom(seq_children, {
  {"schedulers of two optimizers", function() return {optim.StepLR(sgd(), 2), optim.StepLR(sgd(), 2)} end, "error"},
  {"a list holding a number", function() return {1, 2} end, "error"},
}, {skip = {["a table"] = true}})}, {names = {"ChainedScheduler"}, writes_all = true})
sentry("attn.optim.ReduceLROnPlateau", "ReduceLROnPlateau", {K.opts({mode = K.choice("min", {opt = true}),
  factor = K.num(0.5, {opt = true, max = 0.99, finite = true}), patience = K.int(2, {opt = true, min = 0}),
  threshold = K.num(1e-4, {opt = true, finite = true}), threshold_mode = K.choice("rel", {opt = true}),
  cooldown = K.int(0, {opt = true, min = 0}), min_lr = K.num(0, {opt = true, finite = true}),
  eps = K.num(1e-8, {opt = true, finite = true})})}, {override = {[2] = {["option min_lr = a table"] = "any"}},
  cases = {{"torch's positional order", function() return {sgd(), "max", 0.5, 3} end, "ok"}}})
E("attn.optim.StepLR", {K.fixed(sgd), K.int(2, {min = 1}), K.num(0.5, {opt = true}), K.int(-1, {opt = true, min = -1})},
  {names = {"StepLR"}, writes_all = true, cases = {
    {"last_epoch 0 without initial_lr", function() return {sgd(), 2, 0.5, 0} end, "error"},
  }})
E("attn.optim.LambdaLR", {K.fixed(sgd), K.custom(function() return function(e) return 0.9 ^ e end end, {
  {"a list of two functions for one group", function() return {function() return 1 end, function() return 1 end} end,
    "error"},
  {"a function returning a string", function() return function() return "x" end end, "error"},
  {"a function that raises", function() return function() error("inner failure") end end, "error"},
}, {skip = {["a function"] = true}}), K.int(-1, {opt = true, min = -1})}, {names = {"LambdaLR", "inner failure"},
  writes_all = true})
E("attn.optim.NoamLR", {K.fixed(sgd), K.opts({d_model = K.num(8, {min = 1e-300}), warmup = K.num(4, {min = 1e-300}),
  factor = K.num(1, {opt = true})}, {opt = false}), K.int(-1, {opt = true, min = -1})}, {names = {"NoamLR"}, writes_all = true,
  override = {[2] = {["option d_model = -0"] = "error", ["option d_model = 0"] = "error",
    ["option warmup = -0"] = "error", ["option warmup = 0"] = "error", ["option d_model = nil"] = "error",
    ["option warmup = nil"] = "error", ["an empty table"] = "error"}}})
for _, k in ipairs({"step", "lambda", "noam", "multistep", "constant", "linear", "exponential", "polynomial",
  "multiplicative",
  "cosine", "warm", "onecycle", "sequential", "chained", "plateau"}) do
  local function smeth(name, sig, opts)
    opts = opts or {}
    table.insert(sig, 1, K.fixed(sched(k)))
    opts.method = name
    opts.writes_all = true
    return E("attn.optim.LRScheduler." .. name, sig, opts)
  end
  if k == "plateau" then
    -- a NaN or infinite metric is a metric (torch compares it, never improving on NaN)
    smeth("step", {K.num(0.5, {tensor_ok = true}), K.num(3, {opt = true})}, {fn = optim.ReduceLROnPlateau.step,
      override = {[3] = {["-nan"] = "error", ["nan"] = "error"}}})
  elseif k == "sequential" or k == "chained" then
    smeth("step", {}, {fn = k == "chained" and optim.ChainedScheduler.step or optim.SequentialLR.step, cases = {
      {"an epoch", function() return {sched(k)(), 3} end, "error"}}})
  elseif k == "warm" then
    smeth("step", {K.num(3.5, {opt = true, min = 0})}, {fn = optim.CosineAnnealingWarmRestarts.step,
      override = {[2] = {["-nan"] = "error", ["nan"] = "error", ["inf"] = "any"}}})
  elseif k == "onecycle" then
    smeth("step", {K.num(3, {opt = true, max = 50})}, {override = {[2] = {["-nan"] = "error", ["nan"] = "error"}}})
  else
    smeth("step", {K.num(3, {opt = true})}, {override = {[2] = {["-nan"] = "error", ["nan"] = "error"}}})
  end
  smeth("get_last_lr", {})
  local nested = (k == "sequential" and optim.SequentialLR) or (k == "chained" and optim.ChainedScheduler) or nil
  smeth("state_dict", {}, {fn = nested and nested.state_dict})
  smeth("load_state_dict", {K.custom(function() return sched(k)():state_dict() end, {
    {"a state with a string last_epoch", function() local sd = sched(k)():state_dict(); sd.last_epoch = "x"; return sd end,
      "error"},
    {"a state with an unknown key", function() local sd = sched(k)():state_dict(); sd.bogus = 1; return sd end, "error"},
    {"an empty table", function() return {} end, "any"},
  }, {skip = {["a table"] = true}})}, {fn = nested and nested.load_state_dict})
  local GET_LR = {step = "StepLR", multistep = "MultiStepLR", constant = "ConstantLR", linear = "LinearLR",
    exponential = "ExponentialLR", polynomial = "PolynomialLR", multiplicative = "MultiplicativeLR", cosine = "CosineAnnealingLR",
    warm = "CosineAnnealingWarmRestarts", onecycle = "OneCycleLR"}
  if k ~= "sequential" and k ~= "chained" and k ~= "plateau" then
    smeth("get_lr", {}, {fn = optim[GET_LR[k] or "LambdaLR"].get_lr})
  end
end
local function clip_params()
  local ps = params_with_grads()
  local q = nn.Parameter(attn.ones(2)) -- no grad: skipped
  ps[#ps + 1] = q
  return ps
end
local CLIP_BADS = {
  {"a list holding a string", function() return {nn.Parameter(attn.ones(2)), "x"} end, "error"},
  {"an empty list", function() return {} end, "ok"},
  {"a single tensor", function() return params_with_grads()[1] end, "ok"},
}
for _, path in ipairs({"attn.optim.clip_grad_norm_", "attn.nn.utils.clip_grad_norm_"}) do
  E(path, {K.custom(clip_params, CLIP_BADS), K.num(0.5), K.custom(function() return 2 end, {
    {"inf as a string", function() return "inf", math.huge end, "same"},
    {"-inf", function() return -math.huge end, "any"},
    {"NaN", function() return 0 / 0 end, "any"},
    {"0", function() return 0 end, "any"},
    {"a string", function() return "two" end, "error"},
  }, {opt = true, skip = {["a string"] = true}}), BOOL(false)}, {writes_all = true, noalias = true,
    names = {"clip_grad_norm_"}, override = {[4] = {["a table"] = "any"}}, -- {}: an empty trailing options table
    cases = {
      {"options table", function() return {clip_params(), 0.5, {norm_type = math.huge, error_if_nonfinite = true}} end,
        "ok"},
      {"an unknown option", function() return {clip_params(), 0.5, {norm = 2}} end, "error"},
      {"norm_type given twice", function() return {clip_params(), 0.5, 2, {norm_type = 1}} end, "error"},
    }})
end
for _, path in ipairs({"attn.optim.clip_grad_value_", "attn.nn.utils.clip_grad_value_"}) do
  E(path, {K.custom(clip_params, CLIP_BADS), K.num(0.5)}, {writes_all = true, noalias = true,
    names = {"clip_grad_value_"}})
end
E("attn.optim.noam_rate", {K.num(3), K.num(8), K.num(1), K.num(4)})

-- attn.init
local function init_entry(name, extra, opts)
  local sig = {K.tensor({3, 4}, {written = true, noview = true, strict = true})}
  for _, k in ipairs(extra or {}) do sig[#sig + 1] = k end
  opts = opts or {}
  opts.writes = {1}
  opts.names = {"init." .. name, name}
  if sig[#sig].generator_slot then -- the samplers take torch's {generator = g} (attn/signature.lua)
    opts.override = opts.override or {}
    opts.override[#sig] = opts.override[#sig] or {}
    opts.override[#sig]["options with a generator"] = "ok"
  end
  return E("attn.init." .. name, sig, opts)
end
init_entry("uniform_", {K.num(-1, {opt = true}), K.num(1, {opt = true}), gen_opt()})
init_entry("normal_", {K.num(0, {opt = true}), K.num(1, {opt = true}), gen_opt()})
init_entry("constant_", {K.num(0.5)})
init_entry("zeros_")
init_entry("ones_")
init_entry("eye_")
init_entry("xavier_uniform_", {K.num(1, {opt = true}), gen_opt()})
init_entry("xavier_normal_", {K.num(1, {opt = true}), gen_opt()})
for _, name in ipairs({"kaiming_uniform_", "kaiming_normal_"}) do
  init_entry(name, {K.num(0, {opt = true}), K.choice("fan_in", {opt = true}), K.choice("leaky_relu", {opt = true}),
    gen_opt()}, {cases = {
      {"an options table", function() return {attn.zeros(3, 4), {a = 1, mode = "fan_out"}} end, "ok"},
      {"an options table with a typo", function() return {attn.zeros(3, 4), {mdoe = "fan_out"}} end, "error"},
      {"a 1-d tensor", function() return {attn.zeros(4)} end, "error"},
      {"a tensor with a zero dim", function() return {attn.zeros(0, 4)} end, "any"},
    }, override = {[2] = {["a table"] = "any"}}})
end
-- torch takes any sparsity: at most every row, none below 0; NaN raises
init_entry("sparse_", {K.num(0.5), K.num(0.01, {opt = true}), gen_opt()}, {override = {[2] = {["-nan"] = "error",
  ["nan"] = "error"}}})
E("attn.init.calculate_gain", {K.choice("leaky_relu"), K.num(0.2, {opt = true})}, {names = {"calculate_gain"},
  cases = {
    {"tanh", function() return {"tanh"} end, "ok"},
    {"a gain parameter that is a string", function() return {"leaky_relu", "x"} end, "error"},
  }})
E("attn.init.calculate_fan_in_and_fan_out", {K.tensor({3, 4, 2})})

-- attn.attention
local function A(name) return "attn.attention." .. name end
E(A("split_heads"), {K.tensor({2, 3, 4}), K.size(2, {min = 1})}, {override = {[2] = {["2^62"] = "error",
  ["maxinteger"] = "error", ["2^40"] = "error", ["2^53"] = "error"}}})
E(A("combine_heads"), {K.tensor({2, 2, 3, 2})})
E(A("causal_mask"), {K.size(3, {huge = "error"}), K.size(4, {opt = true, huge = "error"})})
E(A("padding_mask"), {K.tensor({2}, {make = function(s) return IDX(s, 4) end, noedge = true}), K.size(4, {huge = "error"})})
E(A("sinusoidal_table"), {K.size(6, {huge = "error"}), K.size(4, {min = 1, huge = "error"})}, {cases = {
  {"an odd d_model", function() return {6, 3} end, "error"},
}, override = {[2] = {["0"] = "error"}}})
E(A("rope_inv_freq"), {K.size(4, {min = 1, huge = "error"}), K.num(10000, {opt = true})}, {cases = {
  {"an odd dim", function() return {3} end, "error"},
}, override = {[1] = {["0"] = "error"}}})
E(A("rope_cos_sin"), {K.size(4, {min = 1, huge = "error"}), K.tensor({5}, {make = function(s) return IDX(s, 9) end}),
  K.num(10000, {opt = true})}, {override = {[1] = {["0"] = "error"}}, cases = {
  {"an offset instead of positions", function() return {4, 3} end, "any"},
}})
E(A("rotate_half"), {K.tensor({2, 4})}, {cases = {{"an odd last dim", function() return {T({2, 3})} end, "error"}}})
E(A("apply_rotary"), {K.tensor({2, 5, 4}), K.tensor({2, 5, 4}, {salt = 2, opt = true}),
  K.tensor({5}, {make = function(s) return IDX(s, 9) end, opt = true}), K.num(10000, {opt = true})}, {cases = {
  {"an offset", function() return {T({2, 5, 4}), T({2, 5, 4}), 3} end, "ok"},
  {"positions of the wrong length", function() return {T({2, 5, 4}), T({2, 5, 4}), attn.arange(4)} end, "error"},
}})
E(A("alibi_slopes"), {K.size(8, {min = 1, huge = "error"})}, {override = {[1] = {["0"] = "error"}}})
-- the attention modules take their options positionally too (issue 29): a
-- boolean (need_weights, symmetric, bias) or a number (d_in_kv, base) in
-- an option's slot is that option
local BOOLS = {["true"] = "ok", ["false"] = "ok"}
E(A("alibi_bias"), {K.size(4, {min = 1, huge = "error"}), K.size(3, {huge = "error"}), K.size(5, {opt = true, huge = "error"}),
  K.opts({symmetric = BOOL(false)})}, {override = {[1] = {["0"] = "error"}, [3] = {["a table"] = "any"}, [4] = BOOLS}})
E(A("KVCache"), {})
local function kv() return attention.KVCache() end
local function kv_filled()
  local c = attention.KVCache()
  c:update(T({1, 2, 3, 4}), T({1, 2, 3, 4}, nil, 2))
  return c
end
E(A("KVCacheClass.update"), {K.fixed(kv_filled), K.tensor({1, 2, 2, 4}, {salt = 3}), K.tensor({1, 2, 2, 4}, {salt = 4})},
  {method = "update", writes_all = true, names = {"KVCache"}, cases = {
    {"a k whose heads differ from the cache's", function() return {kv_filled(), T({1, 3, 2, 4}), T({1, 3, 2, 4})} end,
      "error"},
    {"k and v of different lengths", function() return {kv(), T({1, 2, 2, 4}), T({1, 2, 3, 4})} end, "error"},
  }})
E(A("KVCacheClass.length"), {K.fixed(kv_filled)}, {method = "length"})
E(A("KVCacheClass.reset"), {K.fixed(kv_filled)}, {method = "reset", writes_all = true})

local INIT_OPTS = K.opts({init = K.choice("rand", {opt = true})})
E(A("SelfAttention"), {K.size(3, {min = 1, huge = "error"}), K.size(2, {min = 1, huge = "error"}),
  K.size(4, {min = 1, huge = "error"}), INIT_OPTS}, {override = {[1] = {["0"] = "error"}, [2] = {["0"] = "error"},
  [3] = {["0"] = "error"}}})
forward(A("SelfAttention.forward"), function() return attention.SelfAttention(3, 2, 4) end, {K.tensor({2, 4, 3}),
  K.opts({need_weights = BOOL(false)})}, {override = {[3] = BOOLS}})
E(A("SelfAttention.extra_repr"), {mod(function() return attention.SelfAttention(3, 2, 4) end)}, {method = "extra_repr"})
E(A("MultiHeadAttentionWrapper"), {K.size(3, {min = 1, huge = "error"}), K.size(2, {min = 1, huge = "error"}),
  K.size(4, {min = 1, huge = "error"}), K.size(2, {min = 1, huge = "error"}), INIT_OPTS},
  {override = {[1] = {["0"] = "error"}, [2] = {["0"] = "error"}, [3] = {["0"] = "error"}, [4] = {["0"] = "error"}}})
forward(A("MultiHeadAttentionWrapper.forward"), function() return attention.MultiHeadAttentionWrapper(3, 2, 4, 2) end,
  {K.tensor({2, 4, 3})})
E(A("CausalSelfAttention"), {K.size(3, {min = 1, huge = "error"}), K.size(2, {min = 1, huge = "error"}),
  K.size(4, {min = 1, huge = "error"}), K.size(6, {min = 1, huge = "error"}), K.opts({init = K.choice("rand", {opt = true}),
  variant = K.choice("fused", {opt = true}), dropout = K.num(0, {opt = true, min = 0, max = 1, finite = true})})},
  {override = {[1] = {["0"] = "error"}, [2] = {["0"] = "error"}, [3] = {["0"] = "error"}, [4] = {["0"] = "error"}}})
for _, variant in ipairs({"neg_inf", "renormalise", "fused"}) do
  forward(A("CausalSelfAttention.forward"), function() return attention.CausalSelfAttention(3, 2, 4, 6, {variant = variant}) end,
    {K.tensor({2, 4, 3}), K.opts({variant = K.choice(variant, {opt = true}), need_weights = BOOL(false)})},
    {override = {[3] = BOOLS}, cases = {
      {"a sequence past context_length", function()
        return {seeded(function() return attention.CausalSelfAttention(3, 2, 4, 6) end)(), T({2, 7, 3})}
      end, "error"},
    }})
end
E(A("CausalSelfAttention.extra_repr"), {mod(function() return attention.CausalSelfAttention(3, 2, 4, 6) end)},
  {method = "extra_repr"})
E(A("CrossAttention"), {K.size(3, {min = 1, huge = "error"}), K.size(2, {min = 1, huge = "error"}),
  K.size(4, {min = 1, huge = "error"}), K.opts({init = K.choice("rand", {opt = true}),
  d_in_kv = K.size(5, {opt = true, min = 1, huge = "error"})})}, {override = {[1] = {["0"] = "error"},
  [2] = {["0"] = "error"}, [3] = {["0"] = "error"}, [4] = {["option d_in_kv = 0"] = "error", ["a number"] = "ok"}}})
forward(A("CrossAttention.forward"), function() return attention.CrossAttention(3, 2, 4, {d_in_kv = 5}) end,
  {K.tensor({2, 4, 3}), K.tensor({2, 6, 5}, {salt = 2}), K.opts({need_weights = BOOL(false)})}, {override = {[4] = BOOLS}})
E(A("CrossAttention.extra_repr"), {mod(function() return attention.CrossAttention(3, 2, 4, {d_in_kv = 5}) end)},
  {method = "extra_repr"})
E(A("MultiheadAttention"), {K.size(4, {min = 1, huge = "error"}), K.size(2, {min = 1, huge = "error"}),
  K.opts({dropout = K.num(0, {opt = true, min = 0, max = 1, finite = true}), bias = BOOL(true), add_bias_kv = BOOL(false),
  add_zero_attn = BOOL(false), kdim = K.size(4, {opt = true, min = 1, huge = "error"}),
  vdim = K.size(4, {opt = true, min = 1, huge = "error"}), batch_first = BOOL(false)})},
  {override = {[1] = {["0"] = "error"}, [2] = {["0"] = "error"}, [3] = {["option kdim = 0"] = "error",
    ["option vdim = 0"] = "error", ["false"] = "any"}}, cases = { -- false: torch's positional dropout, read as 0
    {"num_heads that does not divide embed_dim", function() return {4, 3} end, "error"},
    {"torch's positional order", function() return {4, 2, 0.0, true, false, false, 4, 4, true} end, "ok"},
  }})
local function mha() return attention.MultiheadAttention(4, 2) end
forward(A("MultiheadAttention.forward"), mha, {K.tensor({3, 2, 4}), K.tensor({5, 2, 4}, {salt = 2, opt = true}),
  K.tensor({5, 2, 4}, {salt = 3, opt = true}), K.opts({
    key_padding_mask = K.tensor({2, 5}, {range = "bin", opt = true}), key_padding_mask_kind = K.choice("bool", {opt = true}),
    attn_mask = K.tensor({3, 5}, {range = "bin", opt = true, salt = 7}), attn_mask_kind = K.choice("additive", {opt = true}),
    need_weights = BOOL(true), average_attn_weights = BOOL(false), is_causal = BOOL(false),
    head_mask = K.tensor({2}, {opt = true, range = "prob", salt = 5})})}, {nocompare = false})
E(A("MultiheadAttention._reset_parameters"), {mod(mha)}, {method = "_reset_parameters", writes_all = true})
-- a list of 1-based original head numbers
local function head_list(good, n)
  return K.custom(function() return good end, {
    {"an empty list", function() return {} end, "ok"},
    {"every head", function() local t = {}; for i = 1, n do t[i] = i end; return t end, "error"},
    {"head 0", function() return {0} end, "error"},
    {"a head past the last", function() return {n + 1} end, "error"},
    {"head 1.5", function() return {1.5} end, "error"},
    {"head NaN", function() return {0 / 0} end, "error"},
    {"head 2^62", function() return {1 << 62} end, "error"},
    {"a head twice", function() return {2, 2} end, "ok"},
    {"a map", function() return {a = 1} end, "error"},
    {"a list holding a string", function() return {"1"} end, "error"},
    {"a tensor of heads", function() return attn.tensor({2}) end, "error"},
  }, {skip = {["a table"] = true}})
end
E(A("MultiheadAttention.prune_heads"), {mod(function() return attention.MultiheadAttention(8, 4, {add_bias_kv = true}) end),
  head_list({2, 4}, 4)}, {method = "prune_heads", writes_all = true})
local GQA_OPTS = K.opts({bias = BOOL(true), causal = BOOL(true), dropout = K.num(0, {opt = true, min = 0, max = 1, finite = true}),
  rope = BOOL(true), rope_base = K.num(10000, {opt = true})})
E(A("GroupedQueryAttention"), {K.size(8, {min = 1, huge = "error"}), K.size(4, {min = 1, huge = "error"}),
  K.size(2, {min = 1, huge = "error"}), GQA_OPTS}, {override = {[1] = {["0"] = "error"}, [2] = {["0"] = "error"},
  [3] = {["0"] = "error"}, [4] = BOOLS}, cases = {
    {"heads that do not divide", function() return {8, 4, 3} end, "error"},
    {"rope with an odd head_dim", function() return {6, 2, 1, {rope = true}} end, "error"},
  }})
E(A("MultiQueryAttention"), {K.size(8, {min = 1, huge = "error"}), K.size(4, {min = 1, huge = "error"}), GQA_OPTS},
  {override = {[1] = {["0"] = "error"}, [2] = {["0"] = "error"}, [3] = BOOLS}})
local function gqa() return attention.GroupedQueryAttention(8, 4, 2, {causal = true, rope = true}) end
forward(A("GroupedQueryAttention.forward"), gqa, {K.tensor({2, 3, 8}), K.opts({
  attn_mask = K.tensor({3, 3}, {range = "bin", opt = true}), attn_mask_kind = K.choice("bool", {opt = true}),
  need_weights = BOOL(false),
  cache = K.custom(kv, {{"a table", function() return {} end, "error"}}, {opt = true, skip = {["a table"] = true}})})})
E(A("GroupedQueryAttention.extra_repr"), {mod(gqa)}, {method = "extra_repr"})
E(A("PositionalEncoding"), {K.size(4, {min = 1, huge = "error"}), K.num(0.1, {opt = true, min = 0, max = 1, finite = true}),
  K.size(10, {opt = true, huge = "error"})}, {override = {[1] = {["0"] = "error"}}})
forward(A("PositionalEncoding.forward"), function() return attention.PositionalEncoding(4, 0.0, 10) end,
  {K.tensor({2, 3, 4}), K.size(2, {opt = true, huge = "error"})}, {cases = {
    {"positions past max_len", function() return {attention.PositionalEncoding(4, 0, 10), T({1, 3, 4}), 8} end, "error"},
  }})
E(A("LearnedPositionalEncoding"), {K.size(10, {min = 1, huge = "error"}), K.size(4, {min = 1, huge = "error"}),
  K.opts({dropout = K.num(0, {opt = true, min = 0, max = 1, finite = true})})}, {override = {[1] = {["0"] = "error"},
  [2] = {["0"] = "error"}}})
forward(A("LearnedPositionalEncoding.forward"), function() return attention.LearnedPositionalEncoding(10, 4) end,
  {K.tensor({2, 3, 4}), K.size(2, {opt = true, huge = "error"})})
E(A("RotaryEmbedding"), {K.size(4, {min = 1, huge = "error"}), K.opts({base = K.num(10000, {opt = true})})},
  {override = {[1] = {["0"] = "error"}, [2] = {["a number"] = "ok"}}})
forward(A("RotaryEmbedding.forward"), function() return attention.RotaryEmbedding(4) end, {K.tensor({2, 5, 4}),
  K.tensor({2, 5, 4}, {salt = 2, opt = true}), K.tensor({5}, {make = function(s) return IDX(s, 9) end, opt = true})})
E(A("RotaryEmbedding.extra_repr"), {mod(function() return attention.RotaryEmbedding(4) end)}, {method = "extra_repr"})
E(A("ALiBi"), {K.size(4, {min = 1, huge = "error"}), K.opts({symmetric = BOOL(false)})},
  {override = {[1] = {["0"] = "error"}, [2] = BOOLS}})
forward(A("ALiBi.forward"), function() return attention.ALiBi(4) end, {K.size(3, {huge = "error"}),
  K.size(5, {opt = true, huge = "error"})})
E(A("ALiBi.extra_repr"), {mod(function() return attention.ALiBi(4) end)}, {method = "extra_repr"})

-- attn.transformer, attn.losses, attn.copy (behaviour: transformer_spec,
-- loss_modules_spec, annotated_transformer_spec)
do
  local XF = "attn.transformer."
  local xfmr = attn.transformer
  local ACTIVATION = K.custom(function() return "gelu" end, {
    {"an unknown name", function() return "swish" end, "error"},
    {"a number", function() return 1 end, "error"},
    {"a plain table", function() return {"gelu"} end, "error"},
  }, {opt = true, skip = {["a function"] = true, ["false"] = true}})
  local XF_LAYER_OPTS = K.opts({dim_feedforward = K.size(6, {opt = true, min = 1, huge = "error"}),
    dropout = K.num(0, {opt = true, min = 0, max = 1, finite = true}), activation = ACTIVATION,
    layer_norm_eps = K.num(1e-5, {opt = true, min = 0}), batch_first = BOOL(false), norm_first = BOOL(false)})
  for _, cls in ipairs({"TransformerEncoderLayer", "TransformerDecoderLayer"}) do
    E(XF .. cls, {K.size(4, {min = 1, huge = "error"}), K.size(2, {min = 1, huge = "error"}), XF_LAYER_OPTS},
      {override = {[1] = {["0"] = "error"}, [2] = {["0"] = "error"}, [3] = {["a number"] = "any"}}, cases = {
        {"nhead that does not divide d_model", function() return {4, 3} end, "error"},
        {"torch's positional order", function() return {4, 2, 6, 0.0, "relu", 1e-5, true, true} end, "ok"},
        {"an activation function", function() return {4, 2, {activation = function(x) return x:tanh() end}} end, "ok"},
        {"too many arguments", function() return {4, 2, 6, 0.0, "relu", 1e-5, true, true, "cpu", "float32", 1} end,
          "error"},
      }})
  end
  local function xf_enc_layer() return xfmr.TransformerEncoderLayer(4, 2, 6, 0) end
  local function xf_dec_layer() return xfmr.TransformerDecoderLayer(4, 2, 6, 0) end
  local function kpm(shape, salt) return K.tensor(shape, {range = "bin", opt = true, salt = salt}) end
  local function amask(shape, salt) return K.tensor(shape, {opt = true, salt = salt}) end
  local KIND = K.choice("bool", {opt = true})
  local AKIND = K.choice("additive", {opt = true})
  forward(XF .. "TransformerEncoderLayer.forward", xf_enc_layer, {K.tensor({3, 2, 4}), K.opts({
    src_mask = amask({3, 3}, 5), src_mask_kind = AKIND, src_key_padding_mask = kpm({2, 3}),
    src_key_padding_mask_kind = KIND})})
  local DEC_MASKS = {tgt_mask = amask({3, 3}, 5), tgt_mask_kind = AKIND, memory_mask = amask({3, 5}, 6),
    memory_mask_kind = AKIND, tgt_key_padding_mask = kpm({2, 3}), tgt_key_padding_mask_kind = KIND,
    memory_key_padding_mask = kpm({2, 5}, 3), memory_key_padding_mask_kind = KIND}
  forward(XF .. "TransformerDecoderLayer.forward", xf_dec_layer, {K.tensor({3, 2, 4}), K.tensor({5, 2, 4}, {salt = 2}),
    K.opts(DEC_MASKS)})
  local NORM = K.custom(function() return nn.LayerNorm(4) end, {
    {"a tensor", function() return attn.ones(4) end, "error"},
  }, {opt = true, skip = {["false"] = true}})
  local LAYERS = K.size(2, {huge = "error"})
  E(XF .. "TransformerEncoder", {mod(xf_enc_layer), LAYERS, NORM})
  E(XF .. "TransformerDecoder", {mod(xf_dec_layer), LAYERS, NORM})
  forward(XF .. "TransformerEncoder.forward", function() return xfmr.TransformerEncoder(xf_enc_layer(), 2, nn.LayerNorm(4)) end,
    {K.tensor({3, 2, 4}), K.opts({mask = amask({3, 3}, 5), mask_kind = AKIND, src_key_padding_mask = kpm({2, 3}),
    src_key_padding_mask_kind = KIND})})
  forward(XF .. "TransformerDecoder.forward", function() return xfmr.TransformerDecoder(xf_dec_layer(), 2) end,
    {K.tensor({3, 2, 4}), K.tensor({5, 2, 4}, {salt = 2}), K.opts(DEC_MASKS)})
  E(XF .. "Transformer", {K.opts({d_model = K.size(4, {opt = true, min = 1, huge = "error"}),
    nhead = K.size(2, {opt = true, min = 1, huge = "error"}), num_encoder_layers = K.size(1, {opt = true, huge = "error"}),
    num_decoder_layers = K.size(1, {opt = true, huge = "error"}), dim_feedforward = K.size(6, {opt = true, min = 1,
    huge = "error"}), dropout = K.num(0, {opt = true, min = 0, max = 1, finite = true}), activation = ACTIVATION,
    layer_norm_eps = K.num(1e-5, {opt = true, min = 0}), batch_first = BOOL(false), norm_first = BOOL(false)})},
    {override = {[1] = {["option d_model = 0"] = "error", ["option nhead = 0"] = "error",
      ["an empty table"] = "ok"}}})
  local function xf_model() return xfmr.Transformer({d_model = 4, nhead = 2, num_encoder_layers = 1,
    num_decoder_layers = 1, dim_feedforward = 6, dropout = 0}) end
  local XF_MASKS = {src_mask = amask({5, 5}, 4), src_mask_kind = AKIND, src_key_padding_mask = kpm({2, 5}, 3),
    src_key_padding_mask_kind = KIND}
  for k, v in pairs(DEC_MASKS) do XF_MASKS[k] = v end
  forward(XF .. "Transformer.forward", xf_model, {K.tensor({5, 2, 4}, {salt = 2}), K.tensor({3, 2, 4}), K.opts(XF_MASKS)})
  E(XF .. "Transformer.generate_square_subsequent_mask", {K.size(4, {huge = "error"})})

  local function loss_mod(cls, fields, extra)
    E("attn.losses." .. cls, {K.opts(fields)}, extra)
  end
  local LEGACY = {size_average = BOOL(true), reduce = BOOL(true)}
  local function with_legacy(t)
    for k, v in pairs(LEGACY) do t[k] = v end
    return t
  end
  local WEIGHT_FIRST = {override = {[1] = {["a tensor"] = "any"}}}
  -- torch's positional order (issue 29): a boolean first argument is size_average
  local LEGACY_FIRST = {override = {[1] = {["true"] = "ok", ["false"] = "ok"}}}
  loss_mod("CrossEntropyLoss", with_legacy({weight = class_opts.weight, ignore_index = class_opts.ignore_index,
    reduction = RED, label_smoothing = K.num(0.1, {opt = true, min = 0, max = 1, finite = true})}), WEIGHT_FIRST)
  loss_mod("NLLLoss", with_legacy({weight = class_opts.weight, ignore_index = class_opts.ignore_index, reduction = RED}),
    WEIGHT_FIRST)
  loss_mod("KLDivLoss", with_legacy({reduction = K.choice("batchmean", {opt = true}), log_target = K.bool(false)}),
    LEGACY_FIRST)
  loss_mod("MSELoss", with_legacy({reduction = RED}), LEGACY_FIRST)
  loss_mod("L1Loss", with_legacy({reduction = RED}), LEGACY_FIRST)
  loss_mod("SmoothL1Loss", with_legacy({reduction = RED, beta = K.num(0.5, {opt = true, min = 0})}), LEGACY_FIRST)
  -- torch's HuberLoss has no size_average/reduce
  loss_mod("HuberLoss", {reduction = RED, delta = K.num(0.5, {opt = true, min = 1e-300})},
    {override = {[1] = {["option delta = 1.0000000000000001e-300"] = "any"}}})
  loss_mod("BCELoss", with_legacy({weight = K.tensor({2, 3}, {opt = true, range = "pos"}), reduction = RED}),
    WEIGHT_FIRST)
  loss_mod("BCEWithLogitsLoss", with_legacy({weight = K.tensor({2, 3}, {opt = true, range = "pos"}),
    pos_weight = K.tensor({3}, {opt = true, range = "pos"}), reduction = RED}), WEIGHT_FIRST)
  local losses = attn.losses
  forward("attn.losses.CrossEntropyLoss.forward", function() return losses.CrossEntropyLoss({label_smoothing = 0.1}) end,
    {K.tensor({3, 4}), K.index({3}, 4)})
  forward("attn.losses.NLLLoss.forward", function() return losses.NLLLoss() end, {K.tensor({3, 4}), K.index({3}, 4)})
  forward("attn.losses.KLDivLoss.forward", function() return losses.KLDivLoss({reduction = "batchmean"}) end,
    {t23(), t23({range = "prob", salt = 4})})
  for _, cls in ipairs({"MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCEWithLogitsLoss"}) do
    forward("attn.losses." .. cls .. ".forward", function() return losses[cls]() end,
      {t23(), t23({range = "prob", salt = 4})})
  end
  forward("attn.losses.BCELoss.forward", function() return losses.BCELoss() end,
    {t23({range = "prob"}), t23({range = "prob", salt = 4})}, {cases = {
      {"an input above 1", function() return {losses.BCELoss(), attn.tensor({1.5}), attn.tensor({1})} end, "error"},
    }})

  local ANY_VALUE = K.custom(function() return nn.Linear(2, 3) end, {
    {"a tensor", function() return attn.ones(2, 2) end, "any"},
    {"a table", function() return {1, {2}, x = attn.ones(1)} end, "any"},
    {"a number", function() return 3 end, "any"},
  }, {wrong = false, opt = true})
  local MEMO = K.custom(function() return {} end, {{"a number", function() return 3 end, "error"}},
    {opt = true, wrong = false})
  E("attn.deepcopy", {ANY_VALUE, MEMO})
  E("attn.copy.deepcopy", {ANY_VALUE, MEMO})
  E("attn.copy.clones", {mod(function() return nn.Linear(2, 3) end), K.size(2, {huge = "error"})}, {cases = {
    {"a tensor to clone", function() return {attn.ones(2), 2} end, "error"},
  }})
  E("attn.nn.Module.clone", {mod(function() return nn.Linear(2, 3) end)}, {method = "clone"})
end

-- attn.seq2seq
local function S(name) return "attn.seq2seq." .. name end
E(S("LuongAttention"), {K.size(4, {huge = "error"}), K.opts({score = K.choice("general", {opt = true}),
  mode = K.choice("global", {opt = true})})}, {cases = {
    {"location without max_length", function() return {4, {score = "location"}} end, "error"},
    {"local-m without D", function() return {4, {mode = "local-m"}} end, "error"},
    {"local-p with D", function() return {4, {mode = "local-p", D = 2}} end, "ok"},
    {"D for global attention", function() return {4, {D = 2}} end, "error"},
    {"a fractional D", function() return {4, {mode = "local-m", D = 1.5}} end, "error"},
  }})
local function luong(score, mode)
  return function() return seq2seq.LuongAttention(4, {score = score, mode = mode, D = mode and 1 or nil,
    max_length = score == "location" and 6 or nil}) end
end
local ATT_OPTS = K.opts({mask = K.tensor({2, 5}, {range = "bin", opt = true, make = function(s)
  local m = attn.ones(s)
  if #s == 2 and s[1] > 0 and s[2] > 0 then m[{1, s[2]}] = 0 end
  return m
end})})
for _, v in ipairs({{"dot"}, {"general"}, {"concat"}, {"location"}, {"dot", "local-m"}, {"general", "local-p"}}) do
  forward(S("LuongAttention.forward"), luong(v[1], v[2]), {K.tensor({2, 4}), K.tensor({2, 5, 4}, {salt = 2}),
    v[2] == "local-m" and K.opts({t = K.int(2, {opt = true, min = 1})}) or ATT_OPTS})
end
forward(S("LuongAttention.precompute"), luong("concat"), {K.tensor({2, 5, 4})}, {method = "precompute"})
E(S("LuongAttention._scores"), {mod(luong("dot"))}, {method = "_scores", nobase = true,
  fn = seq2seq.LuongAttention._scores}) -- private helper of forward: covered by it
E(S("LuongAttention.extra_repr"), {mod(luong("dot", "local-m"))}, {method = "extra_repr"})
E(S("BahdanauAttention"), {K.size(4, {huge = "error"}), K.size(3, {huge = "error"}), K.size(5, {huge = "error"}),
  K.opts({tutorial = BOOL(true)})}, {cases = {
    {"the tutorial's one size", function() return {4, {tutorial = true}} end, "ok"},
    {"the tutorial's one size, a bad option", function() return {4, {tutorial = "yes"}} end, "error"},
  }})
local function bahdanau() return seq2seq.BahdanauAttention(4, 3, 5) end
forward(S("BahdanauAttention.forward"), bahdanau, {K.tensor({2, 3}), K.tensor({2, 5, 4}, {salt = 2}), ATT_OPTS})
forward(S("BahdanauAttention.precompute"), bahdanau, {K.tensor({2, 5, 4})}, {method = "precompute"})
E(S("BahdanauAttention.extra_repr"), {mod(bahdanau)}, {method = "extra_repr"})
local function step_luong() return seq2seq.AttnDecoderStep(nn.GRUCell(3, 4), seq2seq.LuongAttention(4, {score = "general"})) end
E(S("AttnDecoderStep"), {K.custom(function() return nn.GRUCell(3, 4) end, MOD_BADS),
  K.custom(function() return seq2seq.LuongAttention(4) end, MOD_BADS),
  K.opts({order = K.choice("luong", {opt = true}), attentional = BOOL(true), input_feeding = BOOL(false)})}, {cases = {
    {"sizes that do not fit", function() return {nn.GRUCell(3, 4), seq2seq.BahdanauAttention(4, 5, 2)} end, "error"},
    {"an LSTM cell", function() return {nn.LSTMCell(3, 4), seq2seq.LuongAttention(4)} end, "ok"},
  }})
forward(S("AttnDecoderStep.forward"), step_luong, {K.tensor({2, 3}), K.custom(function()
  return {h = T({2, 4}, nil, 3)} end, {
    {"a state with h of the wrong shape", function() return {h = T({2, 5})} end, "error"},
    {"a state with h a string", function() return {h = "x"} end, "error"},
    {"a tensor as the state", function() return T({2, 4}) end, "error"},
  }, {opt = true, skip = {["a table"] = true}}), K.tensor({2, 5, 4}, {salt = 2}), ATT_OPTS})
forward(S("AttnDecoderStep.decode"), step_luong, {K.tensor({2, 3, 3}), K.custom(function() return nil end, {
  {"a state with h of the wrong shape", function() return {h = T({2, 5})} end, "error"},
}, {opt = true}), K.tensor({2, 5, 4}, {salt = 2}), ATT_OPTS}, {method = "decode"})
forward(S("AttnDecoderStep.precompute"), step_luong, {K.tensor({2, 5, 4})}, {method = "precompute"})
E(S("AttnDecoderStep.extra_repr"), {mod(step_luong)}, {method = "extra_repr"})
E(S("luong_dot"), {K.tensor({3, 5}), K.tensor({3, 1}, {salt = 2})})
E(S("bahdanau_additive"), {K.tensor({3, 5}), K.tensor({3, 1}, {salt = 2}), K.tensor({1, 2}, {salt = 3}),
  K.tensor({2, 3}, {salt = 4}), K.tensor({2, 3}, {salt = 5})})

-- attn.data
local WORDS = tmp("_words.txt")
do
  local f = assert(io.open(WORDS, "w"))
  f:write("alpha beta\ngamma\n\ndelta  \n")
  f:close()
end
local PATH_BADS = {
  {"a missing file", function() return "/nonexistent-dir/words.txt" end, "error"},
  {"a directory", function() return "/tmp" end, "error"},
  {"a path with a NUL", function() return WORDS .. "\0x" end, "any"},
  {"an empty path", function() return "" end, "error"},
}
E("attn.data.read_lines", {K.custom(function() return WORDS end, PATH_BADS, {skip = {["a string"] = true}})})
E("attn.data.read_words", {K.custom(function() return WORDS end, PATH_BADS, {skip = {["a string"] = true}})})
E("attn.data.default_words_path", {}, {base_expect = "any"})

-- attn.script (the scripts' command lines and output folders).  S.args and
-- S.fail end the process by design (EXCLUDED below); S.parse is what they
-- run, without the exit.
local SCRIPT = require "attn.script"
local function script_entry(name, sig, o)
  o = o or {}
  o.fn, o.call = SCRIPT[name], function(...) return SCRIPT[name](...) end
  return E("attn.script." .. name, sig, o)
end
script_entry("int", {K.int(42, {opt = true}), K.int(0, {opt = true})}, {nocompare = true})
script_entry("str", {})
script_entry("parse", {K.custom(function() return {"--steps", "3", "--quick", "pos"} end, {
  {"an empty list", function() return {} end, "any"},
  {"a list holding a table", function() return {{}} end, "error"},
  {"a list holding a number", function() return {7} end, "error"},
}), K.custom(function() return {"name", steps = 2, quick = false, out = "out/x", seed = SCRIPT.int(1, 0)} end, {
  {"an empty spec", function() return {} end, "any"},
  {"a default that is a table", function() return {x = {}} end, "error"},
  {"a default that is 0", function() return {x = 0} end, "error"},
  {"a positional entry that is not a name", function() return {3} end, "error"},
})})
script_entry("outdir", {K.custom(function() return tmp("_script_out/a/b") end, {
  {"an empty string", function() return "" end, "error"},
  {"a path under a file", function() return WORDS .. "/x" end, "error"},
}, {skip = {["a string"] = true}})})
local WORD_LIST = K.custom(function() return {"b", "a", "c", "a"} end, {
  {"a list holding a number", function() return {"a", 5} end, "error"},
  {"a list holding a table", function() return {"a", {}} end, "error"},
  {"an empty list", function() return {} end, "any"},
  {"a list with holes", function() return {"a", nil, "b"} end, "any"},
  {"a list holding invalid UTF-8", function() return {"a\255"} end, "any"},
}, {skip = {["a table"] = true}})
E("attn.data.Vocab", {WORD_LIST, K.opts({unk = K.str("<unk>", {opt = true, number = "error"})})}, {names = {"Vocab"},
  -- torch-style positional options (issue 29): argument 2 may be unk itself
  override = {[2] = {["option unk = false"] = "ok", ["a string"] = "ok", ["false"] = "ok"}}})
local function vocab() return data.Vocab({"b", "a", "c"}) end
local function vmeth(name, sig, opts)
  opts = opts or {}
  table.insert(sig, 1, K.fixed(vocab))
  opts.method = name
  opts.fn = getmetatable(vocab())[name]
  opts.names = {"Vocab"}
  return E("attn.data.Vocab." .. name, sig, opts)
end
vmeth("index", {K.str("a", {number = "error"})})
vmeth("encode", {K.custom(function() return {"a", "zzz"} end, {
  {"a list holding a number", function() return {"a", 5} end, "error"},
  {"one string", function() return "a b", {"a", "b"} end, "same"},
}, {skip = {["a table"] = true, ["a string"] = true}})})
vmeth("decode", {K.custom(function() return attn.tensor({1, 3}) end, {
  {"id 0", function() return {0} end, "error"},
  {"id past the end", function() return {99} end, "error"},
  {"id 1.5", function() return {1.5} end, "error"},
  {"id NaN", function() return {0 / 0} end, "error"},
  {"a 2-d tensor", function() return attn.ones(2, 2) end, "error"},
  {"a list of strings", function() return {"a"} end, "error"},
  {"the same ids as a list", function() return {1, 3}, attn.tensor({1, 3}) end, "same"},
}, {skip = {["a table"] = true}})})
E("attn.data.Vocab.__len", {K.fixed(vocab)}, {fn = getmetatable(vocab()).__len, call = function(v) return #v end})
E("attn.data.Vocab.__tostring", {K.fixed(vocab)}, {fn = getmetatable(vocab()).__tostring,
  call = function(v) return tostring(v) end})
E("attn.data.CharTable", {WORD_LIST, K.opts({start = K.str("^", {opt = true, number = "error", empty = "error"}),
  stop = K.str("$", {opt = true, number = "error", empty = "error"})})}, {names = {"CharTable"}, cases = {
    {"start == stop", function() return {{"a"}, {start = "#", stop = "#"}} end, "error"},
    {"a two-character start", function() return {{"a"}, {start = "ab"}} end, "error"},
  }, override = {[2] = {["option start = false"] = "ok", ["option stop = false"] = "ok", ["false"] = "ok",
    ["option start = a string with a NUL"] = "error", ["option stop = a string with a NUL"] = "error"}}})
local function chartable() return data.CharTable({"abc", "bd"}) end
local function cmeth(name, sig, opts)
  opts = opts or {}
  table.insert(sig, 1, K.fixed(chartable))
  opts.method = name
  opts.fn = getmetatable(chartable())[name]
  opts.names = {"CharTable"}
  return E("attn.data.CharTable." .. name, sig, opts)
end
cmeth("wrap", {K.str("ab", {number = "error"})})
cmeth("index", {K.str("a", {number = "error", empty = "error", nul = "error"})})
cmeth("encode", {K.str("abd", {number = "error", empty = "error", nul = "error"})}, {cases = {
  {"invalid UTF-8", function() return {chartable(), "a\255"} end, "error"},
  {"an unknown character", function() return {chartable(), "az"} end, "error"},
}})
cmeth("decode", {K.custom(function() return attn.tensor({1, 2}) end, {
  {"id 0", function() return {0} end, "error"},
  {"id past the end", function() return {99} end, "error"},
  {"id 1.5", function() return {1.5} end, "error"},
  {"a 2-d tensor", function() return attn.ones(2, 2) end, "error"},
}, {skip = {["a table"] = true}})})
E("attn.data.CharTable.__len", {K.fixed(chartable)}, {fn = getmetatable(chartable()).__len,
  call = function(v) return #v end})
E("attn.data.CharTable.__tostring", {K.fixed(chartable)}, {fn = getmetatable(chartable()).__tostring,
  call = function(v) return tostring(v) end})
E("attn.data.one_hot", {K.index({3}, 4), K.size(4, {min = 1, huge = "error"})}, {override = {[2] = {["0"] = "error"}}})
E("attn.data.pad", {K.custom(function() return {{1, 2, 3}, attn.tensor({4})} end, {
  {"an empty list", function() return {} end, "error"},
  {"a list holding a string", function() return {{1}, "x"} end, "error"},
  {"a sequence holding a string", function() return {{1, "x"}} end, "error"},
  {"a 2-d tensor sequence", function() return {attn.ones(2, 2)} end, "error"},
  {"empty sequences", function() return {{}, {}} end, "any"},
}, {skip = {["a table"] = true}}), K.opts({value = K.num(0, {opt = true}), length = K.size(4, {opt = true, min = 1,
  huge = "error"})})}, {override = {[2] = {["option length = 0"] = "error", ["a number"] = "ok"}}})
local ITEMS = K.custom(function() return {"a", "b", "c", "d", "e"} end, {
  {"an empty list", function() return {} end, "any"},
  {"a tensor", function() return attn.ones(3) end, "error"},
}, {skip = {["a table"] = true}})
E("attn.data.shuffle", {ITEMS, gen_opt()}, {override = {[2] = {["options with a generator"] = "ok"}}})
E("attn.data.split", {ITEMS, K.num(0.4, {min = 0, max = 1, finite = true}), K.custom(function() return attn.Generator(3) end, {
  {"false (keep the order)", function() return false end, "ok"},
  {"a number", function() return 3 end, "error"},
}, {opt = true, skip = {["a generator"] = true, ["false"] = true}})}, {override = {[1] = {["an empty list"] = "error"}}})
E("attn.data.batches", {ITEMS, K.size(2, {min = 1}), K.opts({shuffle = BOOL(true), drop_last = BOOL(false),
  generator = K.custom(function() return attn.Generator(3) end, {{"a number", function() return 3 end, "error"}},
    {opt = true, skip = {["a generator"] = true}})})}, {override = {[1] = {["an empty list"] = "error"},
  [2] = {["0"] = "error"}, [3] = {["true"] = "ok", ["false"] = "ok"}}, check = function(it) assert(type(it) == "function") end})
-- torch.utils.data's datasets and loader (lua/attn/dataset.lua)
local function tds() return data.TensorDataset(attn.arange(6):float():reshape(6, 1), attn.arange(6)) end
local DATASET = K.custom(tds, {
  {"a Lua list of items", function() return {1, 2, 3, 4, 5, 6} end, "ok"},
  {"an empty list", function() return {} end, "any"},
  {"a tensor", function() return attn.ones(3) end, "error"},
  {"a table of strings", function() return {"a", "b"} end, "any"},
  {"an object with :len() and :get(i)", function()
    return {len = function() return 2 end, get = function(_, i) return attn.full({2}, i) end}
  end, "ok"},
}, {skip = {["a table"] = true}})
local function is_loader(l) assert(getmetatable(l).__name == "attn.data.DataLoader") end
E("attn.data.TensorDataset", {K.tensor({4, 2}), K.tensor({4}, {salt = 2, opt = true})}, {nocompare = true,
  override = {[1] = {["the same values as a table"] = "error", ["a number"] = "error", ["an empty table"] = "error",
    ["a table with holes"] = "error", ["a 0-d tensor"] = "error"},
    [2] = {["the same values as a table"] = "error", ["a number"] = "error", ["an empty table"] = "error",
    ["a table with holes"] = "error", ["a 0-d tensor"] = "error", ["a tensor with one extra leading dim"] = "error",
    ["a tensor with dim 1 of size 0"] = "error", ["a tensor with dim 1 one larger"] = "error"}}})
E("attn.data.Subset", {DATASET, K.custom(function() return {2, 1} end, {
  {"an index past the end", function() return {9} end, "error"},
  {"index 0", function() return {0} end, "error"},
  {"a fractional index", function() return {1.5} end, "error"},
  {"an empty list", function() return {} end, "ok"},
}, {skip = {["a table"] = true}})}, {override = {[1] = {["an empty list"] = "error", ["a table of strings"] = "any",
  ["an object with :len() and :get(i)"] = "any"}}})
E("attn.data.DataLoader", {DATASET, K.size(2, {min = 1, opt = true}), BOOL(false), K.opts({drop_last = BOOL(false),
  generator = gen_opt(), num_workers = K.int(0, {opt = true, min = 0, max = 0}),
  collate_fn = K.custom(function() return data.default_collate end, {}, {opt = true, skip = {["a function"] = true}})})},
  {nocompare = true, check = is_loader, override = {[2] = {["0"] = "error", ["false"] = "ok"},
    [4] = {["option generator = a table"] = "error", ["option generator = options with a generator"] = "error"}}})
E("attn.data.random_split", {DATASET, K.custom(function() return {0.5, 0.5} end, {
  {"integer lengths", function() return {4, 2} end, "ok"},
  {"lengths that do not sum to the size", function() return {4, 4} end, "error"},
  {"a negative length", function() return {7, -1} end, "error"},
  {"a NaN fraction", function() return {0 / 0, 1} end, "error"},
  {"an empty list", function() return {} end, "error"},
}, {skip = {["a table"] = true}}), gen_opt({})}, {nocompare = true})
E("attn.data.default_collate", {K.custom(function() return {{attn.ones(2), 1, "a"}, {attn.zeros(2), 2, "b"}} end, {
  {"a ragged batch", function() return {{attn.ones(2)}, {attn.ones(2), 1}} end, "error"},
  {"tensors of two shapes", function() return {attn.ones(2), attn.ones(3)} end, "error"},
  {"a batch of functions", function() return {print} end, "error"},
  {"an empty batch", function() return {} end, "error"},
  {"dicts", function() return {{a = 1.5}, {a = 2}} end, "ok"},
}, {skip = {["a table"] = true}})})
E("attn.data.progress", {K.size(10, {min = 1}), K.opts({label = K.str("train", {opt = true}),
  width = K.size(20, {opt = true, min = 1}), interactive = BOOL(false), min_interval = K.num(0.1, {opt = true, min = 0}),
  log_interval = K.num(10, {opt = true, min = 0}),
  out = K.custom(function() return io.stderr end, {
    {"a closed file", function() local f = io.tmpfile(); f:close(); return f end, "error"},
  }, {opt = true, skip = {["a file handle"] = true}})})}, {names = {"progress"},
  override = {[1] = {["0"] = "error"}, [2] = {["option width = 0"] = "error", ["option interactive = nil"] = "any",
    ["an empty table"] = "any", ["option out = nil"] = "any", ["nil"] = "any", ["a string"] = "ok"}}})
local function bar()
  -- a fixed clock: the drawn line (rate, ETA) must not depend on timing
  local t = 0
  local b = data.progress(10, {out = io.open("/dev/null", "w"), interactive = true, label = "t",
    clock = function() t = t + 1 return t end})
  return b
end
local PMT = getmetatable(bar())
E("attn.data.Progress.update", {K.fixed(bar), K.int(3, {opt = true, min = 0, max = 10}),
  K.custom(function() return {loss = 1.5} end, {}, {opt = true, skip = {["a table"] = true}})},
  {method = "update", fn = PMT.update, names = {"Progress"}, writes_all = true, cases = {
    {"after finish", function() local b = bar(); b:finish(); return {b, 2} end, "error"},
  }})
E("attn.data.Progress.write", {K.fixed(bar), K.str("step=1 loss=0.5", {number = "ok"}),
  K.custom(function() return io.open("/dev/null", "w") end, {
    {"a closed file", function() local f = io.tmpfile(); f:close(); return f end, "error"},
  }, {opt = true, skip = {["a file handle"] = true}})}, {method = "write", fn = PMT.write, writes_all = true})
for _, m in ipairs({"finish", "close"}) do
  E("attn.data.Progress." .. m, {K.fixed(bar)}, {method = m, fn = PMT[m], writes_all = true})
end
E("attn.data.Progress.__close", {K.fixed(bar)}, {fn = PMT.__close, call = function(b)
  do local guard <close> = b end
end, writes_all = true})

-- attn.plot
local PNG = function() return tmp(".png") end
local PLOT_COMMON = {path = K.custom(PNG, {
  {"an unknown extension", function() return tmp(".bmp") end, "error"},
  {"a missing directory", function() return "/nonexistent-dir/p.png" end, "error"},
  {"a path with a NUL", function() return tmp("\0.png") end, "error"},
}, {skip = {["a string"] = true}}),
  title = K.str("t", {opt = true}), xlabel = K.str("x", {opt = true}), ylabel = K.str("y", {opt = true}),
  width = K.size(200, {opt = true, min = 1, huge = "error"}), height = K.size(150, {opt = true, min = 1, huge = "error"})}
local function plot_opts(extra)
  local f = {}
  for k, v in pairs(PLOT_COMMON) do f[k] = v end
  for k, v in pairs(extra) do f[k] = v end
  return K.opts(f, {opt = false})
end
local PLOT_OVERRIDE = {["option width = 0"] = "error", ["option height = 0"] = "error", ["an empty table"] = "error",
  ["option width = 1.5"] = "any", ["option height = 1.5"] = "any", -- a pixel count, truncated
  ["option path = nil"] = "error", ["option width = 2^31"] = "error", ["option height = 2^31"] = "error"}
E("attn.plot.heatmap", {K.tensor({3, 4}), plot_opts({row_labels = K.str("abc", {opt = true}),
  col_labels = K.custom(function() return {"w", "x", "y", "z"} end, {
    {"too few labels", function() return {"w"} end, "any"},
  }, {opt = true, skip = {["a table"] = true, ["a string"] = true}}),
  cmap = K.choice("magma", {opt = true}), colorbar = BOOL(true), annotate = BOOL(false),
  vmin = K.num(-1, {opt = true}), vmax = K.num(1, {opt = true})})}, {override = {[2] = PLOT_OVERRIDE},
  names = {"heatmap"}, writes_all = true, cases = {
    {"vmin > vmax", function() return {T({2, 2}), {path = PNG(), vmin = 1, vmax = -1}} end, "any"},
    {"a 3-d tensor", function() return {T({2, 2, 2}), {path = PNG()}} end, "error"},
    {"an empty tensor", function() return {attn.zeros(0, 3), {path = PNG()}} end, "error"},
    {"all NaN", function() return {attn.full({2, 2}, 0 / 0), {path = PNG()}} end, "any"},
    {"a path string for options", function() return {T({2, 2}), PNG()} end, "ok"},
  }})
E("attn.plot.histogram", {K.tensor({20}), plot_opts({bins = K.size(5, {opt = true, min = 1, huge = "error"}),
  range = K.custom(function() return {-1, 1} end, {
    {"lo > hi", function() return {1, -1} end, "error"},
    {"NaN bounds", function() return {0 / 0, 1} end, "error"},
    {"one bound", function() return {1} end, "error"},
  }, {opt = true, skip = {["a table"] = true}}), density = BOOL(false)})}, {override = {[2] = PLOT_OVERRIDE},
  names = {"histogram"}, writes_all = true, cases = {
    {"decreasing edges", function() return {T({20}), {path = PNG(), bins = {1, 0, 2}}} end, "error"},
    {"NaN edges", function() return {T({20}), {path = PNG(), bins = {0, 0 / 0, 2}}} end, "error"},
    {"no value", function() return {attn.zeros(0), {path = PNG()}} end, "any"},
  }})
E("attn.plot.lines", {K.custom(function() return {{y = {1, 3, 2}, label = "a"}, {y = T({3}), x = {1, 2, 4}}} end, {
  {"a series with x and y of different lengths", function() return {{y = {1, 2}, x = {1}}} end, "error"},
  {"a series with y holding a string", function() return {{y = {1, "x"}}} end, "error"},
  {"a series with a label that is a table", function() return {{y = {1, 2}, label = {}}} end, "error"},
  {"a bare list", function() return {1, 2, 3} end, "ok"},
  {"a tensor", function() return T({4}) end, "ok"},
  {"an empty list", function() return {} end, "error"},
}, {skip = {["a table"] = true}}), plot_opts({logy = BOOL(false)})}, {override = {[2] = PLOT_OVERRIDE},
  names = {"lines"}, writes_all = true})
-- attention_grid: a [layers, H, L, S] tensor (or a list of layers); no width
-- or height (the size follows from cell)
local GRID_OPTS = {}
for k, v in pairs(PLOT_COMMON) do
  if k ~= "width" and k ~= "height" then GRID_OPTS[k] = v end
end
local function grid_labels(n)
  local out = {}
  for i = 1, n do out[i] = "t" .. i end
  return out
end
local function grid_index(good, n)
  return K.custom(function() return {good} end, {
    {"index 0", function() return {0} end, "error"},
    {"an index past the end", function() return {n + 1} end, "error"},
    {"index 1.5", function() return {1.5} end, "error"},
    {"an index as a string", function() return {"1"} end, "error"},
    {"an empty list", function() return {} end, "error"},
    {"a tensor of indices", function() return attn.tensor({good}) end, "ok"},
  }, {opt = true})
end
GRID_OPTS.tokens = K.custom(function() return grid_labels(4) end, {
  {"too few tokens", function() return grid_labels(3) end, "error"},
}, {opt = true})
GRID_OPTS.source_tokens = K.custom(function() return grid_labels(4) end, {
  {"too many tokens", function() return grid_labels(5) end, "error"},
}, {opt = true})
GRID_OPTS.layer_names = K.custom(function() return {"enc", "dec"} end, {
  {"one name for two layers", function() return {"enc"} end, "error"},
}, {opt = true})
GRID_OPTS.layers = grid_index(2, 2)
GRID_OPTS.heads = grid_index(3, 3)
GRID_OPTS.batch = K.int(1, {opt = true, min = 1, max = 1}) -- a single tensor is one sample
GRID_OPTS.cmap = K.choice("magma", {opt = true})
GRID_OPTS.colorbar = BOOL(true)
GRID_OPTS.vmin = K.num(0, {opt = true})
GRID_OPTS.vmax = K.num(1, {opt = true})
GRID_OPTS.cell = K.num(4, {opt = true, finite = true, min = 0.1, max = 64})
E("attn.plot.attention_grid", {K.tensor({2, 3, 4, 4}), K.opts(GRID_OPTS, {opt = false})}, {
  override = {[2] = {["an empty table"] = "error", ["option path = nil"] = "error"}},
  names = {"attention_grid"}, writes_all = true, cases = {
    {"a list of [H, L, S] layers", function() return {{T({3, 4, 4}), T({3, 4, 4})}, {path = PNG()}} end, "ok"},
    {"layers of different shapes", function() return {{T({3, 4, 4}), T({2, 4, 4})}, {path = PNG()}} end, "error"},
    {"a list of [B, H, L, S] layers, batch 2", function()
      return {{T({2, 3, 4, 4}), T({2, 3, 4, 4})}, {path = PNG(), batch = 2}}
    end, "ok"},
    {"batch past B", function() return {{T({2, 3, 4, 4})}, {path = PNG(), batch = 3}} end, "error"},
    {"a list holding a number", function() return {{T({3, 4, 4}), 1}, {path = PNG()}} end, "error"},
    {"cross-attention maps with both tokens", function()
      return {T({1, 2, 3, 5}), {path = PNG(), tokens = grid_labels(3), source_tokens = grid_labels(5)}}
    end, "ok"},
    {"a grid too large for a figure", function() return {T({1, 12, 64, 64}), {path = PNG(), cell = 64}} end,
      "error"},
    {"option width", function() return {T({1, 2, 4, 4}), {path = PNG(), width = 300}} end, "error"},
    {"a path string for options", function() return {T({1, 2, 4, 4}), PNG()} end, "ok"},
  }})
E("attn.plot.colormap", {K.choice("viridis"), K.num(0.5)}, {names = {"colormap"}})
E("attn.plot.colormaps", {})

-- attn.viz (capture; the capture is taken off after each call)
local viz = require "attn.viz"
local function viz_model() return nn.MultiheadAttention(4, 1) end
E("attn.viz.capture", {K.custom(viz_model, {
  {"a plain table", function() return {} end, "error"},
  {"a tensor", function() return attn.ones(2) end, "error"},
}, {skip = {["a table"] = true}}), K.opts({grads = K.bool(false), qk = K.bool(false)})}, {
  call = function(m, o)
    local c = viz.capture(m, o)
    c:remove()
    return c
  end, nocompare = true})
local function viz_cap(grads)
  return function()
    local m = nn.MultiheadAttention(4, 1)
    local c = viz.capture(m, {grads = grads})
    local x = attn.ones(2, 1, 4):requires_grad_()
    local y = m(x, x, x, {need_weights = false})
    if grads then y:sum():backward() end
    c:remove()
    return c
  end
end
local CAPMT = viz.Capture
local function capmeth(name, sig, opts)
  opts = opts or {}
  table.insert(sig, 1, K.fixed(viz_cap(name == "grads")))
  opts.method = name
  opts.fn = CAPMT[name]
  opts.names = {"Capture"}
  return E("attn.viz.Capture." .. name, sig, opts)
end
capmeth("maps", {K.str("", {opt = true, number = "error"})})
capmeth("grads", {K.str("", {opt = true, number = "error"})})
capmeth("map", {K.str("", {number = "error", nul = "error"})})
capmeth("paths", {})
capmeth("clear", {}, {writes_all = true})
capmeth("remove", {}, {writes_all = true})
E("attn.viz.Capture.__len", {K.fixed(viz_cap(false))}, {fn = CAPMT.__len, call = function(c) return #c end})
E("attn.viz.Capture.__tostring", {K.fixed(viz_cap(false))}, {fn = CAPMT.__tostring,
  call = function(c) return tostring(c) end})
E("attn.viz.Capture.__close", {K.fixed(viz_cap(false))}, {fn = CAPMT.__close, call = function(c)
  do local guard <close> = c end
end, writes_all = true})

-- attn.viz's HTML views (lua/attn/app/viz_html.lua; attn.viz re-exports
-- them): called through the module itself so that the entries run before
-- and after the re-export
do -- (a block: the main chunk is at Lua's limit of 200 locals)
  local viz_html = require "attn.app.viz_html"
  local HTML = function() return tmp(".html") end
  local HTML_PATH = K.custom(HTML, {
    {"a missing directory", function() return "/nonexistent-dir/v.html" end, "error"},
    {"a path with a NUL", function() return tmp("\0.html") end, "error"},
    {"an empty string", function() return "" end, "error"},
  }, {skip = {["a string"] = true}})
  local function viz_list(good, bads)
    return K.custom(good, bads, {opt = true, skip = {["a table"] = true}})
  end
  local VIZ_MAPS = K.custom(function() return {T({2, 2, 3, 3}, "prob"), T({2, 2, 3, 3}, "prob", 5)} end, {
    {"a bare tensor", function() return T({1, 2, 3, 3}, "prob") end, "error"},
    {"an empty list", function() return {} end, "error"},
    {"layers of different shapes", function() return {T({1, 2, 3, 3}), T({1, 2, 3, 2})} end, "error"},
    {"a 2-d layer", function() return {T({3, 3})} end, "error"},
    {"a layer with a zero-size dim", function() return {attn.zeros(1, 2, 0, 3)} end, "error"},
    {"a list holding a number", function() return {1} end, "error"},
    {"an int64 layer", function() return {IDX({1, 2, 3, 3}, 2)} end, "error"},
    {"NaN and out-of-range weights", function() return {attn.full({2, 2, 3, 3}, 0 / 0), T({2, 2, 3, 3}, "sym")} end,
     "ok"},
    {"3-d layers", function() return {T({2, 3, 3}, "prob"), T({2, 3, 3}, "prob", 2)} end, "ok"},
    {"transposed layers", function()
      return {T({2, 2, 3, 3}, "prob"):transpose(3, 4), T({2, 2, 3, 3}, "prob", 3):transpose(3, 4)}
    end, "ok"},
  }, {skip = {["a table"] = true}})
  local VIZ_TOKENS = {
    {"too few tokens", function() return {"a"} end, "error"},
    {"a token that is a table", function() return {"a", {}, "c"} end, "error"},
    {"numbers", function() return {1, 2, 3} end, "ok"},
    {"markup and quotes", function() return {"</script>", '"q"', "\255"} end, "ok"},
  }
  local function viz_opts(extra)
    local f = {path = HTML_PATH, title = K.str("t", {opt = true}),
               tokens = viz_list(function() return {"a", "b", "c"} end, VIZ_TOKENS),
               source_tokens = viz_list(function() return {"x", "y", "z"} end, VIZ_TOKENS),
               batch = K.int(1, {opt = true, min = 1, max = 2}), layer = K.int(1, {opt = true, min = 1, max = 2})}
    for k, v in pairs(extra) do f[k] = v end
    return K.opts(f, {opt = false})
  end
  local VIZ_OVERRIDE = {["an empty table"] = "error", ["option path = nil"] = "error",
                        ["option path = an empty string"] = "error"}
  for _, view in ipairs({"head_view", "model_view"}) do
    E("attn.viz." .. view, {VIZ_MAPS, viz_opts({
      heads = viz_list(function() return {2, 1} end, {
        {"head 0", function() return {0} end, "error"},
        {"head 3 of 2", function() return {1, 3} end, "error"},
        {"head 1.5", function() return {1.5} end, "error"},
        {"an empty list", function() return {} end, "ok"},
      }),
      layer_names = viz_list(function() return {"one", "two"} end, {
        {"one name for two layers", function() return {"one"} end, "error"},
      })})}, {fn = viz_html[view], call = viz_html[view], override = {[2] = VIZ_OVERRIDE}, writes_all = true,
      names = {view}})
  end
  local function viz_qk()
    return {q = {T({1, 2, 3, 4}), T({1, 2, 3, 4}, "sym", 3)}, k = {T({1, 2, 3, 4}, "sym", 7), T({1, 2, 3, 4}, "sym", 9)}}
  end
  E("attn.viz.neuron_view", {K.custom(viz_qk, {
    {"no k", function() return {q = {T({1, 2, 3, 4})}} end, "error"},
    {"q as a bare tensor", function() return {q = T({1, 2, 3, 4}), k = {T({1, 2, 3, 4})}} end, "error"},
    {"different layer counts", function() local d = viz_qk(); d.k[2] = nil; return d end, "error"},
    {"different D", function() return {q = {T({1, 2, 3, 4})}, k = {T({1, 2, 3, 5})}} end, "error"},
    {"q holding a number", function() return {q = {1}, k = {T({1, 2, 3, 4})}} end, "error"},
    {"maps of the wrong shape", function() local d = viz_qk(); d.maps = {T({1, 2, 3, 3})}; return d end, "error"},
    {"maps that fit", function() local d = viz_qk(); d.maps = {T({1, 2, 3, 3}), T({1, 2, 3, 3})}; return d end, "ok"},
    {"3-d q and k", function() return {q = {T({2, 3, 4})}, k = {T({2, 3, 4}, "sym", 4)}} end, "ok"},
  }, {skip = {["a table"] = true}}), viz_opts({batch = K.int(1, {opt = true, min = 1, max = 1}),
    head = K.int(2, {opt = true, min = 1, max = 2}), token = K.int(3, {opt = true, min = 1, max = 3})})},
    {fn = viz_html.neuron_view, call = viz_html.neuron_view, override = {[2] = VIZ_OVERRIDE}, writes_all = true,
     names = {"neuron_view"}})
end

-- attn.gradcheck
E("attn.gradcheck.gradcheck", {K.custom(function() return function(x) return (x * x):sum() end end, {
  {"a function that raises", function() return function() error("inner failure") end end, "error"},
  {"a function returning a string", function() return function() return "x" end end, "error"},
  {"a function returning nothing", function() return function() end end, "error"},
}, {skip = {["a function"] = true}}), K.custom(function() return {T({3}, nil, 1):requires_grad_()} end, {
  {"a list holding a string", function() return {"x"} end, "error"},
  {"an empty list", function() return {} end, "any"},
  {"a tensor that needs no grad", function() return {T({3})} end, "any"},
  {"a single tensor", function() return T({3}, nil, 1):requires_grad_() end, "any"},
}, {skip = {["a table"] = true}}), K.opts({eps = K.num(1e-3, {opt = true}), atol = K.num(1e-3, {opt = true}),
  rtol = K.num(1e-2, {opt = true})}, {strict = true})}, {names = {"gradcheck", "inner failure"}, writes_all = true,
  base_expect = "any"})

-- nn's instance and class metamethods (m.k, m.k = v, m(x), #m, tostring)
local IMT, CMT = getmetatable(nn.Identity()), getmetatable(nn.Linear)
E("attn.nn.Instance.__index", {mod(seq), K.custom(function() return 1 end, {
  {"an index past the end", function() return 5 end, "ok"},
  {"index 0", function() return 0 end, "ok"},
  {"index 1.5", function() return 1.5 end, "ok"},
  {"index NaN", function() return 0 / 0 end, "ok"},
  {"index -1", function() return -1 end, "ok"},
  {"a table key", function() return {} end, "ok"},
  {"an unknown name", function() return "nope" end, "ok"},
  {"a method name", function() return "forward" end, "ok"},
}, {wrong = false, opt = true})}, {fn = IMT.__index, call = function(m, k) return m[k] end, names = {"Sequential"}})
E("attn.nn.Instance.__newindex", {mod(net), K.custom(function() return "extra" end, {
  {"index 1", function() return 1 end, "error"},
  {"a table key", function() return {} end, "error"},
  {"a boolean key", function() return true end, "error"},
}, {wrong = false}), K.custom(function() return nn.Parameter(attn.ones(2)) end, {
  {"a plain value", function() return 5 end, "ok"},
}, {wrong = false, opt = true})}, {fn = IMT.__newindex, call = function(m, k, v) m[k] = v end, writes_all = true,
  names = {"CatalogueNet"}, cases = {
    {"a tensor into a parameter slot", function() return {net(), "fc", attn.ones(2)} end, "error"},
    {"a string into a child slot", function() local n = net(); return {n.fc, "weight", "x"} end, "error"},
    {"a string into a buffer slot", function() return {net(), "scale", "x"} end, "error"},
    {"a tensor into a buffer slot", function() return {net(), "scale", attn.ones(2)} end, "ok"},
    {"a module into a Sequential index", function() return {seq(), 1, nn.Tanh()} end, "ok"},
    {"a string into a Sequential index", function() return {seq(), 1, "x"} end, "error"},
    {"a module past a Sequential's end", function() return {seq(), 9, nn.Tanh()} end, "error"},
    {"a module into a ModuleList index", function() return {mlist(), 2, nn.Tanh()} end, "ok"},
    {"a module past a ModuleList's end", function() return {mlist(), 9, nn.Tanh()} end, "error"},
  }})
E("attn.nn.Instance.__call", {mod(net), K.tensor({2, 3})}, {fn = IMT.__call, call = function(m, ...) return m(...) end,
  names = {"Linear"}})
E("attn.nn.Instance.__len", {mod(seq)}, {fn = IMT.__len, call = function(m) return #m end, names = {"length"}, cases = {
  {"a module without a length", function() return {nn.Linear(2, 2)} end, "error"},
}})
E("attn.nn.Instance.__tostring", {mod(net)}, {fn = IMT.__tostring, call = function(m) return tostring(m) end})
E("attn.nn.Class.__call", {K.fixed(function() return nn.Linear end), K.size(3, {huge = "error"}), K.size(2, {huge = "error"})},
  {fn = CMT.__call, call = function(cls, ...) return cls(...) end, names = {"Linear"}})
E("attn.nn.Class.__index", {K.fixed(function() return nn.Linear end), K.custom(function() return "forward" end, {
  {"an unknown name", function() return "nope" end, "ok"},
  {"a number", function() return 1 end, "ok"},
  {"a table key", function() return {} end, "ok"},
}, {wrong = false, opt = true})}, {fn = CMT.__index, call = function(cls, k) return cls[k] end})
E("attn.nn.Class.__tostring", {K.fixed(function() return nn.Linear end)}, {fn = CMT.__tostring,
  call = function(cls) return tostring(cls) end})

-- attn.text (WordPiece)
local text = require "attn.text"
local bert = require "attn.bert"
local FX = (os.getenv("ATTN_SOURCE_DIR") or ".") .. "/spec/fixtures/bert"
local TOKENS = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", "un", "##aff", "##able", ",", "!"}
local function wp() return text.WordPiece.new(TOKENS) end
local WP_OPTS = {lower = BOOL(true), strip_accents = BOOL(true), tokenize_chinese_chars = BOOL(true),
  max_length = K.size(16, {opt = true, min = 1}), max_input_chars_per_word = K.size(100, {opt = true, min = 1}),
  unk_token = K.str("[UNK]", {opt = true, number = "error", empty = "error", nul = "error"})}
E("attn.text.WordPiece.new", {K.custom(function() return TOKENS end, {
  {"a list holding a number", function() return {"[UNK]", 5} end, "error"},
  {"an empty list", function() return {} end, "error"},
  {"a map with a gap", function() return {["[UNK]"] = 1, a = 3} end, "error"},
  {"a map with a repeated id", function() return {["[UNK]"] = 1, a = 1} end, "error"},
  {"a map with id 0", function() return {["[UNK]"] = 0} end, "error"},
  {"a map with a fractional id", function() return {["[UNK]"] = 1.5} end, "error"},
  {"a list without [UNK]", function() return {"a", "b"} end, "error"},
  {"invalid UTF-8", function() return {"[UNK]", "\255"} end, "error"},
}, {skip = {["a table"] = true}}), K.opts(WP_OPTS)}, {names = {"WordPiece"}, override = {[2] = {
  ["option unk_token = an unknown name"] = "error", ["option max_length = 0"] = "error",
  ["option max_input_chars_per_word = 0"] = "error"}}})
local VOCAB_FILE = FX .. "/vocab.txt"
E("attn.text.read_vocab", {K.custom(function() return VOCAB_FILE end, LOAD_PATHS, {skip = {["a string"] = true}})},
  {names = {"read_vocab"}, override = {[1] = {["a text file"] = "any", ["an empty file"] = "any",
    ["a truncated file"] = "any"}}})
E("attn.text.WordPiece.from_file", {K.custom(function() return VOCAB_FILE end, LOAD_PATHS, {skip = {["a string"] = true}}),
  K.opts(WP_OPTS)}, {names = {"WordPiece"}, override = {[1] = {["a text file"] = "any", ["an empty file"] = "any",
  ["a truncated file"] = "any"}, [2] = {["option max_length = 0"] = "error",
  ["option max_input_chars_per_word = 0"] = "error"}}})
E("attn.text.WordPiece.from_pretrained", {K.custom(function() return FX end, {
  {"a missing directory", function() return "/nonexistent-dir" end, "error"},
  {"a directory without vocab.txt", function() return "/tmp" end, "error"},
  {"a file", function() return VOCAB_FILE end, "error"},
  {"an empty path", function() return "" end, "error"},
}, {skip = {["a string"] = true}}), K.opts(WP_OPTS)}, {names = {"WordPiece"}, override = {[2] = {
  ["option max_length = 0"] = "error", ["option max_input_chars_per_word = 0"] = "error"}}})
E("attn.text.unicode_version", {})
local function wmeth(name, sig, opts)
  opts = opts or {}
  table.insert(sig, 1, K.fixed(wp))
  opts.method = name
  opts.names = {"WordPiece"}
  return E("attn.text.WordPiece." .. name, sig, opts)
end
local TEXT = K.str("Hello, unaffable worlds!", {number = "error"})
wmeth("basic_tokenize", {TEXT}, {cases = {{"invalid UTF-8", function() return {wp(), "a\255b"} end, "any"}}})
wmeth("wordpiece", {K.str("unaffable", {number = "error"})})
wmeth("tokenize", {TEXT})
local TOKEN_LIST = K.custom(function() return {"hello", "##s", "zzz"} end, {
  {"a list holding a number", function() return {"hello", 5} end, "error"},
  {"an empty list", function() return {} end, "ok"},
}, {skip = {["a table"] = true}})
wmeth("convert_tokens_to_ids", {TOKEN_LIST}, {override = {[2] = {["a string"] = "any"}}})
wmeth("convert_tokens_to_string", {TOKEN_LIST})
local ID_LIST = K.custom(function() return attn.tensor({3, 6, 8, 4}) end, {
  {"id 0", function() return {0} end, "error"},
  {"id past the end", function() return {99} end, "error"},
  {"id 1.5", function() return {1.5} end, "error"},
  {"id NaN", function() return {0 / 0} end, "error"},
  {"a 2-d tensor", function() return attn.ones(2, 2) end, "any"},
  {"a list holding a string", function() return {"a"} end, "error"},
  {"the same ids as a list", function() return {3, 6, 8, 4}, attn.tensor({3, 6, 8, 4}) end, "same"},
}, {skip = {["a table"] = true}})
local SKIP_OPTS = K.opts({skip_special_tokens = BOOL(false)})
wmeth("convert_ids_to_tokens", {ID_LIST, SKIP_OPTS})
wmeth("decode", {ID_LIST, K.opts({skip_special_tokens = BOOL(false), clean_up_tokenization_spaces = BOOL(true)})})
wmeth("decode_batch", {K.custom(function() return attn.tensor({{3, 6, 4}, {3, 7, 4}}) end, {
  {"a 1-d tensor", function() return attn.tensor({3, 6}) end, "any"},
  {"a ragged list", function() return {{3, 6, 4}, {3}} end, "any"},
  {"id 0", function() return {{0}} end, "error"},
}, {skip = {["a table"] = true}}), K.opts({skip_special_tokens = BOOL(false), clean_up_tokenization_spaces = BOOL(true)})})
local ENC_OPTS = {add_special_tokens = BOOL(true), max_length = K.size(12, {opt = true, min = 1}),
  truncation = K.custom(function() return true end, {
    {"a strategy name", function() return "only_first" end, "any"},
    {"an unknown strategy", function() return "bogus" end, "error"},
  }, {opt = true, skip = {["true"] = true, ["false"] = true, ["a string"] = true}}),
  padding = K.custom(function() return "max_length" end, {
    {"true", function() return true end, "ok"},
    {"an unknown strategy", function() return "bogus" end, "error"},
  }, {opt = true, skip = {["true"] = true, ["false"] = true, ["a string"] = true}}),
  pad_to_multiple_of = K.size(4, {opt = true, min = 1})}
wmeth("encode", {TEXT, K.str("hello world", {opt = true, number = "error"}), K.opts(ENC_OPTS)}, {cases = {
  {"a max_length too small for the special tokens", function() return {wp(), "hello", "world", {max_length = 2,
    truncation = true}} end, "error"},
}, override = {[4] = {["option max_length = 0"] = "error", ["option pad_to_multiple_of = 0"] = "error"},
  [3] = {["a table"] = "any"}}})
wmeth("encode_batch", {K.custom(function() return {"hello world", {"hello", "worlds"}} end, {
  {"an empty list", function() return {} end, "error"},
  {"a list holding a number", function() return {"a", 5} end, "error"},
  {"a pair of three", function() return {{"a", "b", "c"}} end, "error"},
}, {skip = {["a table"] = true}}), K.opts(ENC_OPTS)}, {override = {[3] = {["option max_length = 0"] = "error",
  ["option pad_to_multiple_of = 0"] = "error"}}})
local WMT = getmetatable(wp())
E("attn.text.WordPiece.__len", {K.fixed(wp)}, {fn = WMT.__len, call = function(t) return #t end})
E("attn.text.WordPiece.__tostring", {K.fixed(wp)}, {fn = WMT.__tostring, call = function(t) return tostring(t) end})

-- attn.bert
local TINY = {vocab_size = 30, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 16,
              max_position_embeddings = 12, type_vocab_size = 2}
local function tiny(extra)
  local c = {}
  for k, v in pairs(TINY) do c[k] = v end
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end
E("attn.bert.json_decode", {K.str('{"a": [1, 2.5, "x", true, null]}', {number = "any"}), K.str("f.json", {opt = true})},
  {names = {"json"}, cases = {
    {"truncated JSON", function() return {'{"a": [1, 2'} end, "error"},
    {"trailing garbage", function() return {'{"a": 1} x'} end, "error"},
    {"a bad escape", function() return {'"\\q"'} end, "error"},
    {"deep nesting", function() return {string.rep("[", 100000) .. string.rep("]", 100000)} end, "any"},
    {"a huge number", function() return {"1e999"} end, "any"},
  }, override = {[1] = {["an empty string"] = "error", ["a string with a NUL"] = "error"}}})
E("attn.bert.config", {K.custom(function() return tiny() end, {
  {"hidden_size not a multiple of the heads", function() return tiny({hidden_size = 9}) end, "error"},
  {"a fractional vocab_size", function() return tiny({vocab_size = 2.5}) end, "error"},
  {"an infinite vocab_size", function() return tiny({vocab_size = math.huge}) end, "error"},
  {"a string hidden_size", function() return tiny({hidden_size = "8"}) end, "error"},
  {"a NaN dropout", function() return tiny({hidden_dropout_prob = 0 / 0}) end, "error"},
  {"an unknown activation", function() return tiny({hidden_act = "bogus"}) end, "error"},
  {"a pad_token_id past the vocabulary", function() return tiny({pad_token_id = 30}) end, "error"},
  {"a relative position type", function() return tiny({position_embedding_type = "relative_key"}) end, "error"},
  {"no layers", function() return tiny({num_hidden_layers = 0}) end, "ok"},
  {"Hugging Face's pruned_heads", function() return tiny({pruned_heads = {["0"] = {1}}}) end, "ok"},
  {"pruned_heads of a missing layer", function() return tiny({pruned_heads = {[2] = {1}}}) end, "error"},
  {"pruned_heads of every head", function() return tiny({pruned_heads = {[1] = {1, 2}}}) end, "error"},
  {"pruned_heads with head 0", function() return tiny({pruned_heads = {[1] = {0}}}) end, "error"},
  {"pruned_heads as a number", function() return tiny({pruned_heads = 1}) end, "error"},
}, {skip = {["a table"] = true}}), K.str("cfg", {opt = true})}, {names = {"bert.config", "config"}})
E("attn.bert.read_config", {K.custom(function() return FX .. "/config.json" end, LOAD_PATHS,
  {skip = {["a string"] = true}})}, {names = {"read_config"}})
E("attn.bert.from_pretrained", {K.custom(function() return FX end, {
  {"a missing directory", function() return "/nonexistent-dir" end, "error"},
  {"a directory without config.json", function() return "/tmp" end, "error"},
  {"a file", function() return FX .. "/config.json" end, "error"},
}, {skip = {["a string"] = true}}), K.opts({add_pooling_layer = BOOL(true), requires_grad = BOOL(false)})},
  {names = {"from_pretrained"}, covers = {bert.BertModel.from_pretrained}})
local BERT_CFG = K.custom(function() return bert.config(tiny()) end, {
  {"an unchecked config with a string size", function() return tiny({hidden_size = "8"}) end, "error"},
  {"an empty table", function() return {} end, "any"},
}, {skip = {["a table"] = true}})
E("attn.bert.BertModel", {BERT_CFG, K.opts({add_pooling_layer = BOOL(true)})})
local function bmodel() return bert.BertModel(tiny()) end
forward("attn.bert.BertModel.forward", bmodel, {K.custom(function() return attn.tensor({{3, 7, 9, 4}, {3, 5, 4, 1}}) end, {
  {"id 0", function() return attn.tensor({{0, 1}}) end, "error"},
  {"an id past the vocabulary", function() return attn.tensor({{31}}) end, "error"},
  {"a fractional id", function() return attn.tensor({{1.5}}) end, "error"},
  {"a sequence past max_position_embeddings", function() return attn.ones(1, 13) end, "error"},
  {"a 3-d tensor", function() return attn.ones(1, 2, 2) end, "error"},
  {"a list (a batch of one, which the [2, 4] options do not fit)", function() return {3, 7, 4} end, "error"},
  {"an empty batch", function() return attn.zeros(0, 4) end, "any"},
}), K.opts({token_type_ids = K.custom(function() return attn.ones(2, 4) end, {
    {"type 0", function() return attn.zeros(2, 4) end, "error"},
    {"a wrong shape", function() return attn.ones(2, 3) end, "error"},
  }, {opt = true}),
  attention_mask = K.custom(function() return attn.tensor({{1, 1, 1, 1}, {1, 1, 1, 0}}) end, {
    {"a wrong shape", function() return attn.ones(3, 4) end, "error"},
  }, {opt = true}),
  position_ids = K.custom(function() return attn.tensor({{1, 2, 3, 4}}) end, {
    {"position 0", function() return attn.zeros(1, 4) end, "error"},
    {"a position past the table", function() return attn.full({1, 4}, 13) end, "error"},
  }, {opt = true}),
  output_attentions = BOOL(true), output_hidden_states = BOOL(true),
  head_mask = K.custom(function() return attn.tensor({1, 0.5}) end, {
    {"a wrong shape", function() return attn.ones(3) end, "error"},
    {"one row per layer", function() return attn.tensor({{1, 0.5}}) end, "ok"},
    {"too many rows", function() return attn.ones(2, 2) end, "error"},
    {"a list with one tensor per layer", function() return {attn.ones(2)} end, "ok"},
    {"a list with a tensor of the wrong size", function() return {attn.ones(3)} end, "error"},
    {"a list with a string", function() return {"a"} end, "error"},
    {"a table of numbers", function() return {1, 0} end, "ok"},
    {"a 3-d tensor", function() return attn.ones(1, 1, 2) end, "error"},
    {"a NaN gate", function() return attn.tensor({0 / 0, 1}) end, "any"},
    {"an int64 mask", function() return attn.tensor({1, 0}):long() end, "ok"},
  }, {opt = true, skip = {["a table"] = true}})})})
E("attn.bert.BertModel.extra_repr", {mod(bmodel)}, {method = "extra_repr"})
E("attn.bert.BertModel.prune_heads", {mod(function() return bert.BertModel(tiny({num_attention_heads = 4})) end),
  K.custom(function() return {[1] = {2, 4}} end, {
    {"an empty table", function() return {} end, "ok"},
    {"layer 0", function() return {[0] = {1}} end, "error"},
    {"a layer past the last", function() return {[2] = {1}} end, "error"},
    {"layer 1.5", function() return {[1.5] = {1}} end, "error"},
    {"a string key", function() return {layer = {1}} end, "error"},
    {"a list of heads", function() return {1, 2} end, "error"},
    {"every head", function() return {[1] = {1, 2, 3, 4}} end, "error"},
    {"head 5", function() return {[1] = {5}} end, "error"},
    {"head 1.5", function() return {[1] = {1.5}} end, "error"},
    {"a tensor of heads", function() return {[1] = attn.tensor({2})} end, "error"},
  }, {skip = {["a table"] = true}})}, {method = "prune_heads", writes_all = true})
E("attn.bert.BertAttention.prune_heads", {mod(function()
  return bert.BertAttention(bert.config(tiny({num_attention_heads = 4})), nil, "x.")
end), head_list({1, 3}, 4)}, {method = "prune_heads", writes_all = true})
-- the building blocks take a checked config (bert.config) and a name prefix
local BLOCKS = {
  {"BertEmbeddings", function(m) return {m, IDX({2, 4}, 30), attn.ones(2, 4), IDX({1, 4}, 12)} end},
  {"BertSelfAttention", function(m) return {m, T({2, 4, 8}), nil, true} end},
  {"BertSelfOutput", function(m) return {m, T({2, 4, 8}), T({2, 4, 8}, nil, 2)} end},
  {"BertAttention", function(m) return {m, T({2, 4, 8}), nil, false} end},
  {"BertIntermediate", function(m) return {m, T({2, 4, 8})} end},
  {"BertOutput", function(m) return {m, T({2, 4, 16}), T({2, 4, 8}, nil, 2)} end},
  {"BertLayer", function(m) return {m, T({2, 4, 8})} end},
  {"BertEncoder", function(m) return {m, T({2, 4, 8}), nil, true, true} end},
  {"BertPooler", function(m) return {m, T({2, 4, 8})} end},
}
for _, b in ipairs(BLOCKS) do
  local cls = bert[b[1]]
  local function block() return cls(bert.config(tiny()), nil, "x.") end
  E("attn.bert." .. b[1], {BERT_CFG, K.custom(function() return nil end, {}, {opt = true, wrong = false}),
    K.str("x.", {opt = true, number = "error"})})
  local args_of = b[2]
  local base = args_of(seeded(block)())
  local sig = {mod(block)}
  for i = 2, #base do
    local v = base[i]
    if attn.is_tensor(v) then
      local shape = v:shape()
      if b[1] == "BertEmbeddings" then
        local hi = ({30, 2, 12})[i - 1]
        sig[i] = K.index(shape, hi)
      else
        sig[i] = K.tensor(shape, {salt = i})
      end
    elseif type(v) == "boolean" then
      sig[i] = BOOL(v)
    else
      sig[i] = K.tensor({2, 1, 1, 4}, {opt = true, range = "bin"})
    end
  end
  -- the flags of the blocks' forward are read as Lua truth values (internal
  -- plumbing of BertModel, whose own options are checked); the encoder hands
  -- its input back as hidden_states[1], whatever it was
  local over = {}
  for i = 2, #sig do
    if base[i] == true or base[i] == false then
      over[i] = {}
      for _, x in ipairs(sig[i].bads) do over[i][x[1]] = "any" end
    end
  end
  over[2] = over[2] or {}
  over[2]["the same values as a table"] = "any"
  E("attn.bert." .. b[1] .. ".forward", sig, {method = "forward", fn = cls.forward, override = over})
end

-- attn.viz.head_importance (lua/attn/app/viz_heads.lua, re-exported by attn.viz)
do
  local viz_heads = require "attn.app.viz_heads"
  local gates = attn.tensor({{1, -2}, {0.5, 3}})
  local function loss_fn() return function(mask) return (mask * gates):sum() * mask:sum() end end
  E("attn.viz.head_importance", {K.custom(loss_fn, {
      {"a function returning a number", function() return function() return 1 end end, "error"},
      {"a function returning a vector", function() return function(m) return m * 2 end end, "error"},
      {"a function ignoring the mask", function()
        return function() return attn.ones(1):requires_grad_():sum() end
      end, "error"},
      {"a function returning nothing", function() return function() end end, "error"},
    }, {skip = {["a function"] = true}}),
    K.size(2, {min = 1, huge = "error"}), K.size(2, {min = 1, huge = "error"}),
    K.opts({batches = K.custom(function() return 2 end, {
        {"a list", function() return {"a", "b"} end, "ok"},
        {"an empty list", function() return {} end, "error"},
        {"0", function() return 0 end, "error"},
        {"1.5", function() return 1.5 end, "error"},
        {"NaN", function() return 0 / 0 end, "error"},
        {"a tensor", function() return attn.ones(2) end, "error"},
      }, {opt = true, skip = {["a table"] = true}}),
      normalize = BOOL(true), minmax = BOOL(true)})},
    {fn = viz_heads.head_importance, call = viz_heads.head_importance, names = {"head_importance"},
     override = {[4] = {["a number"] = "ok"}}}) -- batches positionally: a count
end

-- attn.viz.rollout, flow, relevance (lua/attn/app/viz_explain.lua, re-exported by attn.viz)
do
  local viz_explain = require "attn.app.viz_explain"
  local function maps_kind(salt)
    local function map(shape, s) return T(shape, "prob", salt + (s or 0)) end
    return K.custom(function() return {map({2, 2, 4, 4}), map({2, 2, 4, 4}, 1)} end, {
      {"a tensor", function() return map({2, 2, 4, 4}) end, "error"},
      {"an empty list", function() return {} end, "error"},
      {"a list holding a number", function() return {map({2, 2, 4, 4}), 3} end, "error"},
      {"a list with a string key", function() return {map({2, 2, 4, 4}), x = 1} end, "error"},
      {"maps of two shapes", function() return {map({2, 2, 4, 4}), map({2, 2, 3, 3})} end, "error"},
      {"3-d and 4-d maps", function() return {map({2, 4, 4}), map({1, 2, 4, 4})} end, "error"},
      {"cross-attention maps (L ~= S)", function() return {map({2, 2, 4, 5})} end, "error"},
      {"a 2-d map", function() return {map({4, 4})} end, "error"},
      {"a 5-d map", function() return {map({1, 2, 2, 4, 4})} end, "error"},
      {"3-d maps", function() return {map({2, 4, 4}), map({2, 4, 4}, 1)} end, "ok"},
      {"int64 maps", function() return {attn.ones(1, 1, 2, 2):long()} end, "error"},
      {"a map without heads", function() return {attn.zeros(2, 0, 4, 4)} end, "error"},
      {"a map of 0 tokens", function() return {attn.zeros(2, 2, 0, 0)} end, "error"},
      {"a map holding NaN", function()
        local t = map({2, 2, 4, 4})
        t[{1, 1, 1, 1}] = 0 / 0
        return {t}
      end, "any"},
      {"a closed tensor in the list", function() return {closed_tensor()} end, "error"},
      {"a transposed map", function()
        local t = map({2, 4, 2, 4})
        return {t:transpose(2, 3)}, {t:transpose(2, 3):contiguous()}
      end, "same"},
    }, {skip = {}})
  end
  local LAYER = K.int(2, {opt = true, min = 1, max = 2})
  local FUSION = K.choice("max", {opt = true})
  E("attn.viz.rollout", {maps_kind(0), K.opts({head_fusion = FUSION, residual = BOOL(true), start_layer = LAYER})},
    {fn = viz_explain.rollout, call = viz_explain.rollout, names = {"rollout"}})
  E("attn.viz.flow", {maps_kind(0), K.opts({head_fusion = FUSION, residual = BOOL(false), start_layer = LAYER,
    normalize = BOOL(true)})}, {fn = viz_explain.flow, call = viz_explain.flow, names = {"flow"}, cases = {
      {"a negative weight", function()
        local t = T({1, 2, 3, 3}, "prob")
        t[{1, 2, 3, 1}] = -1
        return {{t}}
      end, "error"},
    }})
  E("attn.viz.relevance", {maps_kind(0), maps_kind(5), K.opts({start_layer = LAYER})},
    {fn = viz_explain.relevance, call = viz_explain.relevance, names = {"relevance"},
     override = {[1] = {["3-d maps"] = "error"}, [2] = {["3-d maps"] = "error"}}, -- against 4-d grads / maps
     cases = {
      {"one grad for two maps", function()
        return {{T({2, 2, 4, 4}, "prob"), T({2, 2, 4, 4}, "prob", 1)}, {T({2, 2, 4, 4}, "sym")}}
      end, "error"},
      {"3-d grads for 4-d maps", function()
        return {{T({1, 2, 4, 4}, "prob")}, {T({2, 4, 4}, "sym")}}
      end, "error"},
    }})
  -- relevance_cross(source, target, cross [, opts]): {maps =, grads =} pairs
  local function pair_kind(L, Sk, salt, empty_ok)
    local function pair(shape, n)
      local p = {maps = {}, grads = {}}
      for l = 1, n or 1 do
        p.maps[l] = T(shape, "prob", salt + l)
        p.grads[l] = T(shape, "sym", salt + 10 + l)
      end
      return p
    end
    return K.custom(function() return pair({2, 2, L, Sk}) end, {
      {"a tensor", function() return T({2, 2, L, Sk}, "prob") end, "error"},
      {"a list of maps", function() return {T({2, 2, L, Sk}, "prob")} end, "error"},
      {"empty lists", function() return {maps = {}, grads = {}} end, empty_ok and "ok" or "error"},
      {"maps without grads", function() return {maps = pair({2, 2, L, Sk}).maps} end, "error"},
      {"an unknown key", function()
        local p = pair({2, 2, L, Sk})
        p.weights = 1
        return p
      end, "error"},
      {"two layers", function() return pair({2, 2, L, Sk}, 2) end, "error"}, -- the others have one
      {"3-d maps", function() return pair({2, L, Sk}) end, "error"},
      {"another length", function() return pair({2, 2, L + 1, Sk + 1}) end, "error"},
      {"another batch", function() return pair({3, 2, L, Sk}) end, "error"},
      {"another head count", function() return pair({2, 3, L, Sk}) end, "ok"},
      {"grads of another shape", function()
        local p = pair({2, 2, L, Sk})
        p.grads[1] = T({2, 2, L, Sk + 1})
        return p
      end, "error"},
      {"int64 grads", function()
        local p = pair({2, 2, L, Sk})
        p.grads[1] = attn.ones(2, 2, L, Sk):long()
        return p
      end, "error"},
      {"a map of zero heads", function() return pair({2, 0, L, Sk}) end, "error"},
      {"a map holding NaN", function()
        local p = pair({2, 2, L, Sk})
        p.maps[1][{1, 1, 1, 1}] = 0 / 0
        return p
      end, "any"},
      {"a closed tensor", function()
        local p = pair({2, 2, L, Sk})
        p.grads[1] = closed_tensor()
        return p
      end, "error"},
    }, {skip = {}})
  end
  E("attn.viz.relevance_cross", {pair_kind(5, 5, 0, true), pair_kind(3, 3, 20), pair_kind(3, 5, 40),
    K.opts({normalize = BOOL(true), self_in_rule_10 = BOOL(true)})},
    {fn = viz_explain.relevance_cross, call = viz_explain.relevance_cross, names = {"relevance_cross"},
     override = {[1] = {["two layers"] = "ok"}, -- the encoder's layers are its own
                 [3] = {["another length"] = "error"}}})
end

-- attn.dist (spec/dist_spec.lua and spec/mpi/ cover the behaviour; here the
-- 1-rank world a spec process is, with bad arguments)
local _ = attn.dist -- loads the submodule
for _, name in ipairs({"rank", "size", "world_size", "local_rank", "is_main", "is_available", "uses_mpi", "backend",
                       "timeout"}) do
  E("attn.dist." .. name, {})
end
E("attn.dist.init", {K.opts({timeout = K.num(300, {opt = true, min = 1e-300, finite = true})})},
  {override = {[1] = {["option timeout = 1e-300"] = "any", ["a number"] = "ok"}}}) -- timeout positionally (issue 29)
E("attn.dist.set_timeout", {K.num(300, {min = 1e-300, finite = true})}, {override = {[1] = {["1e-300"] = "any"}}})
E("attn.dist.print0", {}) -- print's arguments: anything goes
local ASYNC_OPTS = K.opts({async = BOOL(false), async_op = BOOL(false)})
-- async_op positionally too (issue 29): a boolean is legal
E("attn.dist.barrier", {ASYNC_OPTS}, {override = {[1] = {["true"] = "ok", ["false"] = "ok"}}})
local OP = K.choice("sum", {opt = true})
-- written in place: an expanded (stride-0) target is refused, as copy_ does
local EXPANDED = {[1] = {["a stride-0 expanded view"] = "error"}}
-- the collectives take async_op positionally too (issue 29): a boolean there is legal
local ASYNC_POS = {["true"] = "ok", ["false"] = "ok"}
E("attn.dist.allreduce", {K.tensor({2, 3}), OP, ASYNC_OPTS}, {writes = {1},
  override = {[1] = EXPANDED[1], [3] = ASYNC_POS}})
E("attn.dist.iallreduce", {K.tensor({2, 3}), OP}, {writes = {1}, override = EXPANDED})
E("attn.dist.broadcast", {K.tensor({2, 3}), K.int(0, {opt = true, min = 0, max = 0}), ASYNC_OPTS},
  {writes = {1}, override = {[1] = EXPANDED[1], [3] = ASYNC_POS}})
E("attn.dist.ibroadcast", {K.tensor({2, 3}), K.int(0, {opt = true, min = 0, max = 0})},
  {writes = {1}, override = EXPANDED})
E("attn.dist.allgather", {K.tensor({2, 3}), ASYNC_OPTS}, {override = {[2] = ASYNC_POS}})
E("attn.dist.iallgather", {K.tensor({2, 3})})
E("attn.dist.reduce_scatter", {K.tensor({2, 3}), OP, ASYNC_OPTS}, {override = {[3] = ASYNC_POS}})
E("attn.dist.ireduce_scatter", {K.tensor({2, 3}), OP})
-- a 1-rank world has no peer: every well-formed call is refused with the
-- rank in the message (the valid calls run under mpirun in spec/mpi)
local function no_peer(path, write)
  E(path, {K.tensor({2, 3}), K.int(0, {min = 0, max = 0}), K.opts({async = BOOL(false), async_op = BOOL(false),
    tag = K.int(0, {opt = true, min = 0, max = 2 ^ 31 - 1})})}, {writes = write and {1} or nil,
    base_expect = "error"})
end
no_peer("attn.dist.send")
no_peer("attn.dist.recv", true)
E("attn.dist.isend", {K.tensor({2, 3}), K.int(0, {min = 0, max = 0}), K.int(0, {opt = true, min = 0, max = 2 ^ 31 - 1})},
  {base_expect = "error"})
E("attn.dist.irecv", {K.tensor({2, 3}), K.int(0, {min = 0, max = 0}), K.int(0, {opt = true, min = 0, max = 2 ^ 31 - 1})},
  {writes = {1}, base_expect = "error", override = EXPANDED})
local RING_OPTS = K.opts({causal = BOOL(true), is_causal = BOOL(true), scale = K.num(0.5, {opt = true, finite = true})})
E("attn.dist.ring_attention", {K.tensor({2, 4, 3}), K.tensor({2, 4, 3}, {salt = 2}), K.tensor({2, 4, 3}, {salt = 3}),
  RING_OPTS}, {override = {[4] = {["true"] = "ok", ["false"] = "ok"}}}) -- causal positionally (issue 29)
E("attn.F.ring_attention", {K.tensor({2, 4, 3}), K.tensor({2, 4, 3}, {salt = 2}), K.tensor({2, 4, 3}, {salt = 3}),
  RING_OPTS}, {names = {"ring_attention"}, override = {[4] = {["true"] = "ok", ["false"] = "ok"}}}) -- causal
E("attn.dist.ring_shard", {K.tensor({2, 4, 3}), K.opts({causal = BOOL(true), is_causal = BOOL(true),
  rank = K.int(0, {opt = true, min = 0, max = 0}), size = K.int(1, {opt = true, min = 1, max = 1})})},
  {override = {[2] = {["true"] = "ok", ["false"] = "ok"}}}) -- causal positionally (issue 29)
E("attn.dist.ring_unshard", {K.tensor({2, 4, 3}), K.opts({causal = BOOL(true), is_causal = BOOL(true)})},
  {override = {[2] = {["true"] = "ok", ["false"] = "ok"}}}) -- causal positionally (issue 29)
E("attn.data.DistributedSampler", {K.size(5, {huge = "any"}), K.opts({shuffle = BOOL(true), drop_last = BOOL(false),
  seed = K.int(0, {opt = true, min = 0}), num_replicas = K.int(1, {opt = true, min = 1}),
  rank = K.int(0, {opt = true, min = 0, max = 0})})},
  -- torch's positional order (issue 29): argument 2 may be num_replicas itself
  {override = {[2] = {["a number"] = "ok"}}})
local function ddp() return nn.DistributedDataParallel(nn.Linear(3, 4)) end
E("attn.nn.DistributedDataParallel", {mod(function() return nn.Linear(3, 4) end), K.opts({
  bucket_mb = K.num(25, {opt = true, min = 1e-300, finite = true}), broadcast_buffers = BOOL(true)})},
  {override = {[2] = {["option bucket_mb = 1e-300"] = "any"}}})
forward("attn.nn.DistributedDataParallel.forward", ddp, {K.tensor({2, 3})})
for _, m in ipairs({"bucket_count", "extra_repr", "sync_gradients"}) do
  E("attn.nn.DistributedDataParallel." .. m, {mod(ddp)}, {method = m})
end
E("attn.nn.DistributedDataParallel.no_sync", {mod(ddp), K.custom(function() return function() return 1 end end, {
  {"a number", function() return 3 end, "error"},
}, {opt = true, skip = {["a function"] = true}})}, {method = "no_sync"})

-- >>> recurrent layers, nn.utils.rnn, conv1d, activations (lua/attn/rnn.lua,
-- conv.lua, activation.lua)
do
  local rnn = require "attn.rnn"
  local conv = require "attn.conv"
  local act = require "attn.activation"
  local U = nn.utils.rnn
  local function rnn_opts(extra)
    local f = {num_layers = K.int(1, {opt = true, min = 1, max = 65536}), bias = BOOL(true),
      batch_first = BOOL(false), dropout = K.num(0, {opt = true, min = 0, max = 1}), bidirectional = BOOL(false)}
    for k, v in pairs(extra or {}) do f[k] = v end
    return K.opts(f)
  end
  -- argument 3 may be num_layers itself (torch's positional form)
  local NUM_LAYERS_POS = {[3] = {["a number"] = "any"}}
  E("attn.nn.RNN", {K.size(3, {huge = "error"}), K.size(4, {huge = "error", min = 1}),
    rnn_opts({nonlinearity = K.choice("relu", {opt = true})})}, {override = NUM_LAYERS_POS})
  E("attn.nn.GRU", {K.size(3, {huge = "error"}), K.size(4, {huge = "error", min = 1}), rnn_opts()},
    {override = NUM_LAYERS_POS})
  E("attn.nn.LSTM", {K.size(3, {huge = "error"}), K.size(4, {huge = "error", min = 1}),
    rnn_opts({proj_size = K.int(2, {opt = true, min = 0, max = 3})})}, {override = NUM_LAYERS_POS})
  local function gru() return nn.GRU(3, 4, {num_layers = 2, bidirectional = true}) end
  forward("attn.nn.GRU.forward", gru, {K.tensor({5, 2, 3}), K.tensor({4, 2, 4}, {opt = true, salt = 2})},
    {fn = rnn.RNNBase.forward})
  forward("attn.nn.RNN.forward", function() return nn.RNN(3, 4, {batch_first = true, nonlinearity = "relu"}) end,
    {K.tensor({2, 5, 3}), K.tensor({1, 2, 4}, {opt = true, salt = 2})}, {fn = rnn.RNNBase.forward})
  forward("attn.nn.LSTM.forward", function() return nn.LSTM(3, 4, {proj_size = 2}) end, {K.tensor({5, 2, 3}),
    K.custom(function() return {T({1, 2, 2}, nil, 2), T({1, 2, 4}, nil, 3)} end, {
      {"a state with one tensor", function() return {T({1, 2, 2})} end, "error"},
      {"a state of the wrong shape", function() return {T({1, 2, 4}), T({1, 2, 4})} end, "error"},
      {"a tensor instead of a pair", function() return T({1, 2, 2}) end, "error"},
      {"a state holding strings", function() return {"h", "c"} end, "error"},
    }, {opt = true, skip = {["a table"] = true}})}, {fn = rnn.RNNBase.forward})
  local function packed() return U.pack_padded_sequence(T({4, 3, 3}), {2, 4, 1}, false, false) end
  forward("attn.nn.GRU.forward", gru, {K.custom(packed, {}, {wrong = false}), K.tensor({4, 3, 4},
    {opt = true, salt = 2})}, {fn = rnn.RNNBase.forward})
  for _, m in ipairs({"extra_repr", "reset_parameters", "flatten_parameters"}) do
    E("attn.nn.GRU." .. m, {mod(gru)}, {method = m, writes_all = true, fn = rnn.RNNBase[m]})
  end
  local SEQS = {
    {"a list holding a string", function() return {T({3, 2}), "x"} end, "error"},
    {"a list with trailing dims that differ", function() return {T({3, 2}), T({2, 3})} end, "error"},
    {"a list holding a 0-d tensor", function() return {T({3, 2}), T({})} end, "error"},
    {"an empty list", function() return {} end, "error"},
    {"a tensor (its rows are the sequences)", function() return T({2, 3}) end, "any"},
  }
  E("attn.nn.utils.rnn.pad_sequence", {K.custom(function() return {T({3, 2}), T({4, 2}, nil, 2)} end, SEQS,
    {skip = {["a table"] = true}}), BOOL(false), K.num(0, {opt = true})}, {override = {[2] = {["a table"] = "any"}},
    cases = {{"options as a table", function() return {{T({3, 2}), T({1, 2})}, {batch_first = true,
      padding_value = -1}} end, "ok"}}})
  local LENGTHS = {
    {"a length 0", function() return {4, 0, 1} end, "error"},
    {"a length longer than the input", function() return {5, 3, 1} end, "error"},
    {"a fractional length", function() return {4, 2.5, 1} end, "error"},
    {"too few lengths", function() return {4, 3} end, "error"},
    {"lengths as a tensor", function() return attn.tensor({4, 3, 1}), {4, 3, 1} end, "same"},
    {"a 2-d tensor", function() return attn.ones(3, 1) end, "error"},
    {"unsorted lengths", function() return {3, 4, 1} end, "error"},
  }
  E("attn.nn.utils.rnn.pack_padded_sequence", {K.tensor({4, 3, 2}), K.custom(function() return {4, 3, 1} end,
    LENGTHS, {skip = {["a table"] = true}}), BOOL(false), BOOL(true)},
    {override = {[3] = {["a table"] = "any"}}, nocompare = true})
  local PACKED_BADS = {
    {"a tensor", function() return T({4, 3}) end, "error"},
    {"a plain table", function() return {data = T({4, 3})} end, "error"},
  }
  E("attn.nn.utils.rnn.pad_packed_sequence", {K.custom(packed, PACKED_BADS), BOOL(false), K.num(0, {opt = true}),
    K.int(5, {opt = true, min = 4, max = 1 << 24})}, {override = {[2] = {["a table"] = "any"}}, nocompare = true})
  E("attn.nn.utils.rnn.pack_sequence", {K.custom(function() return {T({3, 2}), T({2, 2}, nil, 2)} end, SEQS,
    {skip = {["a table"] = true}}), BOOL(true)}, {nocompare = true, cases = {
      {"unsorted sequences", function() return {{T({1, 2}), T({3, 2})}} end, "error"},
      {"unsorted sequences without enforce_sorted", function() return {{T({1, 2}), T({3, 2})}, false} end, "ok"},
    }})
  E("attn.nn.utils.rnn.is_packed", {K.custom(packed, {}, {wrong = false, opt = true})}, {covers = {rnn.is_packed}})
  E("attn.nn.utils.rnn.PackedSequence.lengths", {K.fixed(packed)}, {method = "lengths"})
  E("attn.nn.utils.rnn.PackedSequence.__tostring", {K.fixed(packed)}, {method = "__tostring"})

  local CONV_OPTS = K.opts({stride = K.int(1, {opt = true, min = 1}), dilation = K.int(1, {opt = true, min = 1}),
    groups = K.int(1, {opt = true, min = 1, max = 1}), bias = BOOL(true),
    padding_mode = K.choice("reflect", {opt = true}), padding = K.custom(function() return 1 end, {
      {"same", function() return "same" end, "any"},
      {"valid", function() return "valid" end, "ok"},
      {"an unknown string", function() return "full" end, "error"},
      {"-1", function() return -1 end, "error"},
      {"1.5", function() return 1.5 end, "error"},
      {"a list of one", function() return {1}, 1 end, "same"},
      {"a list of two", function() return {1, 1} end, "error"},
    }, {opt = true, skip = {["a string"] = true}})})
  E("attn.nn.Conv1d", {K.size(3, {huge = "error", min = 1}), K.size(4, {huge = "error", min = 1}),
    K.size(3, {huge = "error", min = 1}), CONV_OPTS}, {override = {[3] = {["a table"] = "any"}, [4] = {["a number"] = "any",
    ["option dilation = a table"] = "any", ["option stride = a table"] = "any"}}, nocompare = true}) -- (3,) lists too
  local function conv1d() return nn.Conv1d(3, 4, 3, {padding = 1, stride = 2}) end
  forward("attn.nn.Conv1d.forward", conv1d, {K.tensor({2, 3, 5})}, {fn = conv.Conv1d.forward})
  forward("attn.nn.Conv1d.forward", function() return nn.Conv1d(2, 4, 2, {padding = "same", groups = 2,
    padding_mode = "circular"}) end, {K.tensor({2, 2, 5})}, {fn = conv.Conv1d.forward})
  for _, m in ipairs({"extra_repr", "reset_parameters"}) do
    E("attn.nn.Conv1d." .. m, {mod(conv1d)}, {method = m, writes_all = true, fn = conv.Conv1d[m]})
  end
  E("attn.F.conv1d", {K.tensor({2, 3, 7}), K.tensor({4, 3, 3}, {salt = 2}), K.tensor({4}, {opt = true, salt = 3}),
    K.int(2, {opt = true, min = 1}), K.int(1, {opt = true, min = 0}), K.int(2, {opt = true, min = 1}),
    K.int(1, {opt = true, min = 1, max = 1})}, {names = {"conv1d"}, covers = {conv.conv1d},
    override = {[4] = {["a table"] = "any"}, [5] = {["a table"] = "any"}, [6] = {["a table"] = "any"}}, cases = {
      {"options as a table", function() return {T({2, 3, 7}), T({4, 3, 3}), nil, {stride = 2, padding = "same"}} end,
        "error"},
      {"padding same", function() return {T({2, 3, 7}), T({4, 3, 3}), nil, 1, "same"} end, "ok"},
      {"groups", function() return {T({2, 4, 7}), T({6, 2, 3}), T({6}), 1, 0, 1, 2} end, "ok"},
    }})

  -- activations: F functions (out of place), modules (in place too)
  local NOT_INPLACE = K.custom(function() return false end, {{"nil", function() return nil end, "any"}},
    {opt = true, skip = {["true"] = true, ["false"] = true}})
  E("attn.F.leaky_relu", {t23(), K.num(0.2, {opt = true}), NOT_INPLACE}, {covers = {act.leaky_relu}})
  E("attn.F.elu", {t23(), K.num(0.5, {opt = true}), NOT_INPLACE}, {covers = {act.elu}})
  E("attn.F.softplus", {t23(), K.num(2, {opt = true}), K.num(3, {opt = true})}, {covers = {act.softplus}})
  E("attn.F.mish", {t23(), NOT_INPLACE}, {covers = {act.mish, act.silu}})
  local acts = {
    {"SiLU", {BOOL(false)}, {}}, {"Mish", {BOOL(false)}, {}},
    {"LeakyReLU", {K.num(0.2, {opt = true}), BOOL(false)}, {0.2}},
    {"ELU", {K.num(0.5, {opt = true}), BOOL(false)}, {0.5}},
    {"Softplus", {K.num(2, {opt = true}), K.num(3, {opt = true})}, {2, 3}},
  }
  for _, a in ipairs(acts) do
    local name, args = a[1], a[3]
    E("attn.nn." .. name, a[2], {override = {[1] = {["a table"] = "any"}}, nocompare = true})
    forward("attn.nn." .. name .. ".forward", function() return nn[name](table.unpack(args)) end, {K.tensor({2, 3})})
    E("attn.nn." .. name .. ".extra_repr", {mod(function() return nn[name](table.unpack(args)) end)},
      {method = "extra_repr"})
    if name ~= "Softplus" then
      local inplace = {table.unpack(args)}
      inplace[#inplace + 1] = true
      forward("attn.nn." .. name .. ".forward", function() return nn[name](table.unpack(inplace)) end,
        {K.tensor({2, 3}, {strict = true, written = true})}, {writes = {2}})
    end
  end
end
-- <<< recurrent layers, nn.utils.rnn, conv1d, activations

---------------------------------------------------------------------------
-- 8b. More tensor ops (src/lua/ops.c, lua/attn/ops.lua)
---------------------------------------------------------------------------

local OPT_BOOL = {["true"] = "any", ["false"] = "any"} -- a boolean where an options table may stand
E("attn.sort", {t23(), K.dim(2, 2, {opt = true}), K.bool(false)}, {cases = {
  {"options", function() return {attn.ones(2, 3), {dim = 1, descending = true, stable = true}} end, "ok"},
  {"an unknown option", function() return {attn.ones(2, 3), {dimm = 1}} end, "error"},
  {"a 0-d tensor", function() return {attn.tensor(3)} end, "ok"},
}})
E("attn.argsort", {t23(), K.dim(2, 2, {opt = true}), K.bool(false)})
E("attn.topk", {t23(), K.int(2, {min = 0, max = 3}), K.dim(2, 2, {opt = true}), K.bool(true), K.bool(true)}, {cases = {
  {"options", function() return {attn.ones(2, 3), 1, {dim = 1, largest = false}} end, "ok"},
  {"k = 0", function() return {attn.ones(2, 3), 0} end, "ok", function(v, i) assert(v:numel() == 0 and i:numel() == 0) end},
}})
E("attn.kthvalue", {t23(), K.int(2, {min = 1, max = 3}), K.dim(2, 2, {opt = true}), K.bool(false)})
local SCATTER = {K.tensor({3, 4}), K.dim(2, 2), K.index({3, 2}, 4), K.tensor({3, 3}, {salt = 2})}
local SCATTER_ = {W({3, 4}), K.dim(2, 2), K.index({3, 2}, 4), K.tensor({3, 3}, {salt = 2})}
local function index_cases(fn)
  return {
    {"an index of another rank", function() return {attn.ones(3, 4), 2, attn.ones(3), attn.ones(3, 3)} end, "error"},
    {"an index larger than src", function() return {attn.ones(3, 4), 2, attn.ones(3, 4), attn.ones(3, 3)} end,
      "error"},
    {"an index larger than self off dim", function() return {attn.ones(3, 4), 2, attn.ones(4, 2), attn.ones(4, 3)} end,
      "error"},
    {"an empty index", function() return {attn.ones(3, 4), 2, attn.zeros(3, 0), attn.ones(3, 3)} end, "ok"},
    fn,
  }
end
E("attn.scatter", SCATTER, {cases = index_cases({"a number", function()
  return {attn.ones(3, 4), 2, attn.ones(3, 2), 2.5} end, "ok"}),
  override = {[4] = {["a number"] = "any"}}})
E("attn.scatter_", SCATTER_, {writes = {1}, override = {[4] = {["a number"] = "any"}}})
E("attn.scatter_add", SCATTER, {cases = index_cases()})
E("attn.scatter_add_", SCATTER_, {writes = {1}})
local SCATTER_RED = {K.choice("mean"), K.opts({include_self = K.bool(true)})}
local red_sig, red_sig_ = {}, {}
for i, k in ipairs(SCATTER) do red_sig[i] = k end
for i, k in ipairs(SCATTER_) do red_sig_[i] = k end
for _, k in ipairs(SCATTER_RED) do red_sig[#red_sig + 1] = k; red_sig_[#red_sig_ + 1] = k end
E("attn.scatter_reduce", red_sig, {override = {[6] = OPT_BOOL}, cases = {
  {"reduce prod", function() return {attn.ones(3, 4), 2, attn.ones(3, 2), attn.ones(3, 3), "prod"} end, "ok"},
  {"reduce prod with a gradient", function()
    return {attn.ones(3, 4):requires_grad_(), 2, attn.ones(3, 2), attn.ones(3, 3), "prod"} end, "error"},
}})
E("attn.scatter_reduce_", red_sig_, {writes = {1}, override = {[6] = OPT_BOOL}})
local INDEX = {K.tensor({3, 4}), K.dim(1, 2), K.index({2}, 3), K.tensor({2, 4}, {salt = 2})}
local INDEX_ = {W({3, 4}), K.dim(1, 2), K.index({2}, 3), K.tensor({2, 4}, {salt = 2})}
local index_more = {
  {"a 2-d index", function() return {attn.ones(3, 4), 1, attn.ones(2, 1), attn.ones(2, 4)} end, "error"},
  {"a source of the wrong size", function() return {attn.ones(3, 4), 1, attn.ones(2), attn.ones(3, 4)} end, "error"},
}
E("attn.index_add", {INDEX[1], INDEX[2], INDEX[3], INDEX[4], K.num(2, {opt = true})}, {cases = index_more})
E("attn.index_add_", {INDEX_[1], INDEX_[2], INDEX_[3], INDEX_[4], K.num(2, {opt = true})}, {writes = {1}})
E("attn.index_copy", INDEX, {cases = index_more})
E("attn.index_copy_", INDEX_, {writes = {1}})
E("attn.index_fill", {INDEX[1], INDEX[2], INDEX[3], K.num(-1)})
E("attn.index_fill_", {INDEX_[1], INDEX_[2], INDEX_[3], K.num(-1)}, {writes = {1}})
E("attn.nonzero", {t23(), K.opts({as_tuple = K.bool(false)})}, {cases = {
  {"as_tuple", function() return {attn.tensor({{0, 1}, {2, 0}}), {as_tuple = true}} end, "ok",
    function(r, c) assert(r:numel() == 2 and c:numel() == 2) end},
}})
E("attn.masked_select", {t23(), K.tensor({2, 3}, {range = "bin"})}, {cases = {
  {"a mask that does not broadcast", function() return {attn.ones(2, 3), attn.ones(3, 2)} end, "error"},
}})
E("attn.bucketize", {t23(), K.tensor({4}, {salt = 3}), K.opts({right = K.bool(false), out_int32 = K.bool(false)})},
  {override = {[3] = OPT_BOOL}, cases = {
    {"2-d boundaries", function() return {attn.ones(2, 3), attn.ones(2, 2)} end, "error"},
  }})
E("attn.einsum", {K.str("ij,jk->ik", {empty = "error", number = "error", nul = "error"}), t23(), K.tensor({3, 4})},
  {cases = {
    {"a list of operands", function() return {"ij,jk->ik", {attn.ones(2, 3), attn.ones(3, 4)}} end, "ok"},
    {"too few operands", function() return {"ij,jk->ik", attn.ones(2, 3)} end, "error"},
    {"a bad letter", function() return {"i1,jk", attn.ones(2, 3), attn.ones(3, 4)} end, "error"},
    {"two ellipses", function() return {"......", attn.ones(2, 3)} end, "error"},
    {"an unknown output letter", function() return {"ij->q", attn.ones(2, 3)} end, "error"},
    {"sizes that differ", function() return {"ij,jk", attn.ones(2, 3), attn.ones(2, 4)} end, "error"},
  }})
E("attn.roll", {t23(), K.int(1), K.dim(2, 2, {opt = true, table_ok = true})},
  {override = {[2] = {["a table"] = "any", ["a tensor"] = "any"}}, cases = {
    {"lists of shifts and dims", function() return {attn.ones(2, 3), {1, -1}, {1, 2}} end, "ok"},
    {"lists that differ in length", function() return {attn.ones(2, 3), {1, -1}, {1}} end, "error"},
  }})
E("attn.diag", {t23(), K.int(1, {opt = true})}, {cases = {
  {"a 1-d input", function() return {attn.ones(3), -1} end, "ok", function(t) assert(t:size(1) == 4) end},
  {"a 3-d input", function() return {attn.ones(2, 2, 2)} end, "error"},
}})
E("attn.cdist", {K.tensor({3, 2}), K.tensor({4, 2}, {salt = 2}), K.num(2, {opt = true, min = 0})}, {cases = {
  {"last sizes that differ", function() return {attn.ones(3, 2), attn.ones(4, 3)} end, "error"},
}})
E("attn.repeat_interleave", {t23(), K.int(2, {min = 0, max = 1 << 24}), K.dim(2, 2, {opt = true})},
  {override = {[2] = {["a table"] = "any", ["a tensor"] = "any"}}, cases = {
    {"counts per slice", function() return {attn.ones(2, 3), {1, 0, 2}, 2} end, "ok",
      function(t) assert(t:size(2) == 3) end},
    {"counts alone", function() return {attn.tensor({2, 1})} end, "ok"},
    {"counts of the wrong length", function() return {attn.ones(2, 3), {1, 2}, 2} end, "error"},
  }})
for _, name in ipairs({"amax", "amin"}) do
  E("attn." .. name, {t23(), K.dim(2, 2, {opt = true, table_ok = true}), K.bool(false)}, {cases = {
    {"an empty tensor", function() return {attn.zeros(0, 3)} end, "error"},
  }})
end
E("attn.F.pad", {t23(), K.custom(function() return {1, 2} end, {
  {"an odd count", function() return {1} end, "error"},
  {"too many pairs", function() return {1, 1, 1, 1, 1, 1} end, "error"},
  {"a non-integer", function() return {1.5, 1} end, "error"},
  {"a crop larger than the dim", function() return {-4, 0} end, "error"},
}), K.choice("constant", {opt = true}), K.num(0, {opt = true})}, {
  override = {[3] = {["a table"] = "any"}}, -- pad(x, p, {mode = ...}): an options table
  cases = {
    {"reflect", function() return {attn.ones(2, 3), {2, 2}, "reflect"} end, "ok"},
    {"reflect too wide", function() return {attn.ones(2, 3), {3, 0}, "reflect"} end, "error"},
    {"replicate", function() return {attn.ones(2, 3), {1, 4, 2, 0}, "replicate"} end, "ok"},
    {"circular", function() return {attn.ones(2, 3), {1, 2}, {mode = "circular"}} end, "ok"},
    {"a value with reflect", function() return {attn.ones(2, 3), {1, 1}, "reflect", 2} end, "error"},
  }})
E("attn.F.cosine_similarity", {t23(), t23({salt = 2}), K.dim(2, 2, {opt = true}), K.num(1e-8, {opt = true})})

---------------------------------------------------------------------------
-- 9. The tests
---------------------------------------------------------------------------

-- Functions deliberately left out of the catalogue, each with its reason.
-- dtypes (issue 15)
for _, name in ipairs({"long", "bool", "float", "half", "bfloat16", "double"}) do
  E("attn.Tensor." .. name, {SELF({2, 3})}, {fn = attn._methods[name], names = {name, "to"},
    call = load("return function(t) return t:" .. name .. "() end")()})
end
E("attn.to", {t23(), K.custom(function() return "int64" end, {
  {"an unknown dtype name", function() return "int32" end, "error"},
  {"a number", function() return 3 end, "error"},
  {"a dtype object", function() return attn.bool end, "ok"},
  {"a tensor (its dtype)", function() return attn.ones(2, {dtype = "int64"}) end, "ok"},
}, {wrong = false})}, {override = {[2] = {["nil"] = "ok"}}}) -- torch's x.to(None) is x
E("attn.type_as", {t23(), K.tensor({2})})
-- devices (issue 29): x:cpu() is x itself; x:cuda() always raises (attn runs on the CPU only)
E("attn.Tensor.cpu", {SELF({2, 3})}, {fn = attn._methods.cpu, call = function(t) return t:cpu() end,
  override = {[1] = {["a closed tensor"] = "any"}}})
E("attn.is_floating_point", {t23()})
E("attn.element_size", {t23()})
for _, name in ipairs({"logical_and", "logical_or", "logical_xor", "floor_divide", "remainder"}) do
  E("attn." .. name, {t23({range = "pos"}), t23({salt = 3, range = "pos"})}, {cases = {
    {"shapes that do not broadcast", function() return {attn.ones(2, 3), attn.ones(4)} end, "error"},
  }})
end
for _, name in ipairs({"logical_not", "isnan", "isinf", "isfinite"}) do
  E("attn." .. name, {t23()})
end
E("attn.Tensor.__idiv", {t23({range = "pos"}), t23({salt = 2, range = "pos"})}, {fn = TMT.__idiv,
  names = {"floor_divide"}, call = function(a, b) return a // b end})
E("attn.Tensor.__mod", {t23({range = "pos"}), t23({salt = 2, range = "pos"})}, {fn = TMT.__mod,
  names = {"remainder"}, call = function(a, b) return a % b end})
E("attn.Tensor.__lt", {t23(), t23({salt = 2})}, {fn = TMT.__lt, names = {"'<'"}, base_expect = "error",
  call = function(a, b) return a < b end})
E("attn.Tensor.__le", {t23(), t23({salt = 2})}, {fn = TMT.__le, names = {"'<='"}, base_expect = "error",
  call = function(a, b) return a <= b end})

local EXCLUDED = {
  -- always raises "device 'cuda' is not available" (spec/storage_dtype_spec.lua)
  ["attn.Tensor.cuda"] = true,
  -- finalisers: run by the garbage collector only (closing is exercised
  -- through __close and closed tensors/generators passed everywhere)
  ["attn.Tensor.__gc"] = true,
  ["attn.Generator.__gc"] = true,
  -- the scripts' command line: they print and end the process (os.exit);
  -- attn.script.parse, which they call, is catalogued
  ["attn.script.args"] = true,
  ["attn.script.fail"] = true,
  -- `function Cls:name() ... end` on a module class: stores the method
  -- guarded against a call with '.' (spec/misuse_spec.lua checks it)
  ["attn.nn.Class.__newindex"] = true,
  -- the calling-convention machinery (issue 29): called by the package at
  -- load time on its own declarations; spec/calling_convention_spec.lua
  ["attn.signature.parse"] = true,
  ["attn.signature.expander"] = true,
  ["attn.signature.wrap"] = true,
  ["attn.signature.install"] = true,
  ["attn.signature.is_options"] = true,
  ["attn.signature.unknown_option"] = true,
  ["attn.signature.declare"] = true,
  ["attn.signature.display_name"] = true,
  -- torch .pt files: the code behind attn.load / attn.save for .pt paths
  -- (both catalogued); spec/pt_io_spec.lua checks them and their errors
  ["attn.ptfile.load"] = true,
  ["attn.ptfile.save"] = true,
}

describe("bad-input catalogue", function()
  local api = public_functions()
  for _, f in ipairs(api) do
    local short = f[1]:match("([^%.]+)$")
    KNOWN_PREFIX[short] = true
    local class = f[1]:match("([%w_]+)%.[^%.]+$")
    if class and class:match("^%u") then
      KNOWN_PREFIX[class] = true
      KNOWN_PREFIX[class .. ":" .. short] = true
    end
  end

  it("catalogues every public function", function()
    local covered = {}
    for _, e in ipairs(CATALOGUE) do
      if e.fn then covered[attn._misuse.unwrap_method(e.fn)] = true end
      for _, c in ipairs(e.covers or {}) do covered[attn._misuse.unwrap_method(c)] = true end
    end
    local missing = {}
    for _, f in ipairs(api) do
      if not covered[f[2]] and not EXCLUDED[f[1]] then missing[#missing + 1] = f[1] end
    end
    assert(#missing == 0, "not in the catalogue (add an entry or an EXCLUDED line with the reason): "
      .. table.concat(missing, ", "))
  end)

  local only = os.getenv("ATTN_CATALOGUE_ONLY")
  for _, entry in ipairs(CATALOGUE) do
    if not only or entry.path:find(only, 1, true) then
      it(entry.path .. (entry.method and (":" .. entry.method) or ""), function()
        stats.functions = stats.functions + 1
        local fails = run_entry(entry)
        assert(#fails == 0, #fails .. " failing cases:\n  " .. table.concat(fails, "\n  "))
      end)
    end
  end

  it("reports the count", function()
    for _, ext in ipairs({".safetensors", ".npy", ".npz", ".png", ".txt", "_other.safetensors", "_words.txt"}) do
      os.remove(tmp(ext))
    end
    print(("bad-input catalogue: %d cases, %d functions"):format(stats.cases, stats.functions))
    assert(stats.cases > 0)
  end)
end)

-- the walk of the public API, for spec/calling_convention_spec.lua (busted
-- ignores a spec file's result)
return {public_functions = public_functions}
