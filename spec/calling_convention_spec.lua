-- SPDX-License-Identifier: MIT
-- One calling convention (issue 29): every optional argument that torch
-- takes by keyword can be given in a trailing options table, and torch's
-- positional order works too.  The signatures are declared once, in
-- lua/attn/signature.lua (M.SIGNATURES); this spec walks every public
-- function (the walk of spec/bad_input_spec.lua: attn.*, tensor methods,
-- attn.F, attn.nn, attn.optim, attn.data, attn.init, ... and the methods of
-- the objects they make) and
--   * for a declared function with optional arguments, calls it with the
--     SAMPLES arguments below in torch's positional order, then with the
--     arguments after the first in one options table, then with the
--     required ones positional and the optional ones in the table: all
--     three give the same result; an unknown key is an error that lists
--     the valid ones;
--   * a function declared false takes no optional arguments;
--   * a public function neither declared nor in the PENDING list
--     (spec/support/calling_convention_pending.lua, the functions still to
--     declare) fails, like the bad-input catalogue.
-- To add a function: a line in M.SIGNATURES and, if it has optional
-- arguments, a line in SAMPLES here.
local attn = require "attn"
local F = require "attn.functional"
local signature = require "attn.signature"
local PENDING = require "support.calling_convention_pending"

-- The public API, walked as the bad-input catalogue walks it (its spec
-- file, loaded with inert describe/it, returns the walk).
local function public_functions()
  local dir = os.getenv("ATTN_SOURCE_DIR") or "."
  local env = setmetatable({describe = function() end, it = function() end, pending = function() end,
    before_each = function() end, after_each = function() end, setup = function() end,
    teardown = function() end}, {__index = _G})
  local chunk = assert(loadfile(dir .. "/spec/bad_input_spec.lua", "t", env))
  return chunk().public_functions()
end

local function x23(salt) return attn.tensor({{0.5, -1.25, 2}, {-0.75, 1.5, 0.25}}):add(salt or 0) end

-- Arguments in torch's positional order, every optional one given.
local SAMPLES = {
  add = function() return {x23(), x23(1), 2} end,
  sub = function() return {x23(), x23(1), 2} end,
  gelu = function() return {x23(), "tanh"} end,
  softmax = function() return {x23(), 2} end,
  log_softmax = function() return {x23(), 1} end,
  cumsum = function() return {x23(), 2} end,
  argmax = function() return {x23(), 2, true} end,
  argmin = function() return {x23(), 1, true} end,
  all = function() return {x23():gt(0), 2, true} end,
  any = function() return {x23():gt(0), 1, true} end,
  prod = function() return {x23(), 2, true} end,
  multinomial = function() return {attn.tensor({0.2, 0.3, 0.5}), 6, true, attn.Generator(3)} end,
  cat = function() return {{x23(), x23(1)}, 2} end,
  stack = function() return {{x23(), x23(1)}, 3} end,
  isclose = function() return {x23(), x23(0.001), 1e-3, 1e-3, true} end,
  allclose = function() return {x23(), x23(0.001), 1e-3, 1e-2, true} end,
  addmm = function() return {attn.ones(2, 2), x23(), x23():t(), 0.5, 2} end,
  baddbmm = function() return {attn.ones(2, 2), x23():reshape(1, 2, 3), x23(1):reshape(1, 3, 2), 0.5, 2} end,
  addbmm = function() return {attn.ones(2, 2), x23():reshape(1, 2, 3), x23(1):reshape(1, 3, 2), -1, 0.5} end,
  max = function() return {x23(), 2, true} end,
  min = function() return {x23(), 1, true} end,
  logsumexp = function() return {x23(), 2, true} end,
  argsort = function() return {x23(), 1, true} end,
  flatten = function() return {x23():reshape(1, 2, 3), 2, 3} end,
  chunk = function() return {x23(), 3, 2} end,
  split = function() return {x23(), 2, 2} end,
  unbind = function() return {x23(), 2} end,
  clamp = function() return {x23(), -0.5, 1} end,
  tril = function() return {x23(), 1} end,
  triu = function() return {x23(), -1} end,
  roll = function() return {x23(), 1, 2} end,
  transpose = function() return {x23(), 1, 2} end,
  ["F.gelu"] = function() return {x23(), "tanh"} end,
  ["F.softmax"] = function() return {x23(), 1} end,
  ["F.log_softmax"] = function() return {x23(), 2} end,
  ["F.dropout"] = function() return {x23(), 0.25, false} end,
  ["F.leaky_relu"] = function() return {x23(), 0.2, false} end,
  ["F.elu"] = function() return {x23(), 0.5, false} end,
  ["F.softplus"] = function() return {x23(), 2, 1} end,
  ["F.layer_norm"] = function() return {x23(), {3}, attn.tensor({1.0, 2.0, 3.0}), attn.tensor({0.5, 0.0, -0.5}), 1e-3} end,
  ["F.one_hot"] = function() return {attn.tensor({1, 3, 2}):long(), 4} end,
  ["F.linear"] = function() return {x23(), x23(1), attn.tensor({1.0, -1.0})} end,
}

-- The samples of the other rooms, one file each (spec/support/cc_samples/):
-- a key maps to a function giving the arguments in torch's positional
-- order, or to a table {args = that function, call = the function to call
-- (default: the declared one; a constructor "Cls.init" calls the class
-- with the arguments after self), view = results -> what is compared}.
-- args may set n when some of them are nil.
for _, room in ipairs({"tensor_a", "tensor_b", "functional", "nn", "models", "misc"}) do
  for key, sample in pairs(require("support.cc_samples." .. room)) do
    assert(SAMPLES[key] == nil, "two samples for " .. key)
    SAMPLES[key] = sample
  end
end

-- A public function's key in the declarations: attn.name and the method
-- t:name are "name", attn.F.name (attn.functional.name) is "F.name", the
-- others their path under attn (a class's __index table left out).
local function key_of(qname)
  qname = qname:gsub("%.__index%.", ".")
  local rest = qname:match("^attn%.Tensor%.(.+)$") or qname:match("^attn%.([^%.]+)$")
  if rest then return rest, qname:match("^attn%.Tensor%.") ~= nil end
  rest = qname:match("^attn%.F%.(.+)$") or qname:match("^attn%.functional%.(.+)$")
  if rest then return "F." .. rest, false end
  return qname:match("^attn%.(.+)$"), false
end

-- Metamethods (operators, __gc, __index, ...) take fixed operands, as
-- torch's __add__ does: nothing to declare.
local function is_metamethod(qname) return qname:match("%.__[%a_]+$") ~= nil end

local function same(a, b, seen)
  seen = seen or {}
  if attn.is_tensor(a) and attn.is_tensor(b) then
    return a.dtype == b.dtype and attn.equal(a, b)
  end
  if type(a) == "table" and type(b) == "table" then
    if seen[a] then return true end
    seen[a] = true
    if attn.nn.is_module(a) and attn.nn.is_module(b) then
      return tostring(a) == tostring(b) and same(a:state_dict(), b:state_dict(), seen)
    end
    if #a ~= #b then return false end
    for k, v in pairs(a) do if not same(v, b[k], seen) then return false end end
    for k in pairs(b) do if a[k] == nil then return false end end
    return true
  end
  if type(a) == "function" or type(a) == "userdata" or type(a) == "thread" then return type(a) == type(b) end
  return a == b
end

local function resolve_path(key)
  if key:match("^F%.") then return F[key:sub(3)] end
  local t = attn
  for part in key:gmatch("[^%.]+") do
    if type(t) ~= "table" then return nil end
    t = t[part]
  end
  return t
end

local function caller(key, method, sample)
  if sample.call then return sample.call end
  if method then
    local name = key
    return function(self, ...) return self[name](self, ...) end
  end
  if key:match("%.init$") then
    local class = resolve_path(key:sub(1, -6))
    return function(_, ...) return class(...) end
  end
  local f = assert(resolve_path(key), "no function at attn." .. key)
  return function(...) return f(...) end
end

describe("calling convention", function()
  local api = public_functions()
  local stats = {walked = #api, checked = 0, none = 0, pending = 0, operators = 0}

  it("every public function is declared (lua/attn/signature.lua) or pending", function()
    local declared = {} -- functions declared under one of their names (attn.cdist, attn.ops.cdist)
    for _, f in ipairs(api) do
      if signature.SIGNATURES[key_of(f[1])] ~= nil then declared[f[2]] = true end
    end
    local missing = {}
    for _, f in ipairs(api) do
      if not declared[f[2]] and not PENDING[f[1]] and not is_metamethod(f[1]) then
        missing[#missing + 1] = f[1]
      end
    end
    assert(#missing == 0, "not declared (signature.SIGNATURES or signature.declare next to the function: a "
      .. "signature, or false for a function without optional arguments): " .. table.concat(missing, ", "))
  end)

  it("every declared function with optional arguments has a sample", function()
    for key, sig in pairs(signature.SIGNATURES) do
      if sig then
        local names, nreq, _, info = signature.parse(sig)
        if #names > nreq or info.kwonly then assert(SAMPLES[key], "no SAMPLES line for " .. key) end
      end
    end
  end)

  for _, f in ipairs(api) do
    local key, method = key_of(f[1])
    local sig = signature.SIGNATURES[key]
    if is_metamethod(f[1]) then
      stats.operators = stats.operators + 1
    elseif sig == false then
      stats.none = stats.none + 1
    elseif sig and SAMPLES[key] and not (method and key:match("^cat$") or key:match("^stack$") and method) then
      stats.checked = stats.checked + 1
      it(f[1] .. ": positional and options forms agree", function()
        local names, nreq, lead, info = signature.parse(sig)
        local sample = SAMPLES[key]
        if type(sample) == "function" then sample = {args = sample} end
        local call = caller(key, method, sample)
        local view = sample.view or function(...) return {...} end
        local n = #names
        lead = math.max(lead, info.varargs or 0)
        local positional = info.kwonly and info.kwonly - 1 or n -- the parameters torch takes by position
        -- the first split arguments positional, the others (not nil) in one options table
        local function form(split, extra)
          local args = sample.args() -- fresh: a generator among them restarts
          assert((args.n or #args) == n, key .. ": the sample gives every argument (set n when some are nil)")
          local a, k, opts, any = {}, 0, {}, false
          for i = 1, n do
            if i <= split then
              if i == info.varargs then
                for _, v in ipairs(args[i]) do k = k + 1; a[k] = v end
              else
                k = k + 1; a[k] = args[i]
              end
            elseif args[i] ~= nil then
              opts[names[i]] = args[i]; any = true
            end
          end
          for ek, ev in pairs(extra or {}) do opts[ek] = ev; any = true end
          if any then k = k + 1; a[k] = opts end
          attn.manual_seed(0)
          return a, k
        end
        local function run(split)
          local a, k = form(split)
          return view(call(table.unpack(a, 1, k)))
        end
        local want = run(positional)
        if positional > lead then
          assert.is_true(same(want, run(lead)), key .. ": all but the first argument in an options table")
        end
        if nreq > lead and nreq < positional then
          assert.is_true(same(want, run(nreq)), key .. ": the optional arguments in an options table")
        end
        local a, k = form(math.max(nreq, lead), {__not_an_option = 1})
        local ok, err = pcall(call, table.unpack(a, 1, k))
        assert.is_false(ok, key .. ": an unknown option is an error")
        assert.matches("unknown option '__not_an_option'.*valid options: .*" .. names[n], tostring(err))
      end)
    elseif PENDING[f[1]] then
      stats.pending = stats.pending + 1
    end
  end

  it("reports the count", function()
    print(("calling convention: %d public functions walked, %d checked in both forms, %d without options, "
      .. "%d operators, %d pending"):format(stats.walked, stats.checked, stats.none, stats.operators, stats.pending))
    assert(stats.checked > 0)
  end)
end)
