-- SPDX-License-Identifier: MIT
-- The generic op test (in the spirit of PyTorch's OpInfo): every op the op
-- table src/attn_ops.h declares, as the binding lists it in
-- require("attn.core")._ops, is run through the same checks against torch
-- 1.13's answers in spec/fixtures/op_table.lua (written by
-- scripts/fixtures/gen_op_table.py, which reads the op list from
-- src/attn_ops.h): values and result dtype for float32, int64 and bool
-- inputs (or torch's refusal), NaN/inf/zero inputs, 70-element inputs
-- (the vectorised loops), the gradient of sum(out * w) and torch's grad_fn
-- name, a finite-difference gradcheck, the in-place form (values, the
-- same tensor back, its gradient, int64/bool, and torch's refusals: a leaf
-- that requires grad, an expanded self, a self smaller than the result), a
-- non-contiguous and an expanded input, empty and 0-d tensors, the method
-- form and the operator the doc line names; for binary ops also
-- broadcasting, a number on either side (values, gradients, grad_fn),
-- mixed dtypes and add/sub's alpha.  A record whose kind has no driver
-- here fails, so no declared op goes untested; so does a declared op the
-- fixture lacks.  Disagreements with torch that the op cannot fix yet are
-- listed in KNOWN and reported pending.  Needs no torch: it reads the
-- committed fixture only.
--
-- A new op of a known kind: declare it in src/attn_ops.h, then run
--   /usr/bin/python3 scripts/fixtures/gen_op_table.py
-- and commit spec/fixtures/op_table.lua; nothing here changes.
local attn = require "attn"
local core = require "attn.core"
local fx = require "support.fixture"

local OUT_ATOL, GRAD_ATOL = 1e-5, 1e-4
-- The same op on the same values laid out differently (strided, expanded,
-- 0-d): the vectorised and the strided kernels may round differently (tanh,
-- erf and gelu_tanh differ by up to 2 ulp), so a few ulp, not bit equality.
local LAYOUT_ATOL, LAYOUT_RTOL = 1e-7, 2 ^ -20
local NUM, ALPHA = 1.25, 0.5 -- as in the generator
local INT_X, INT_B = {-2, -1, 0, 1, 2, 3}, {1, 2, 3, 1, 2, 3}
local BOOL_X, BOOL_B = {false, true, true, false}, {false, false, true, true}
local MIX_I64_A, MIX_I64_B = {-2, -1, 0, 3}, {1, 2, 3, 1}
local NAN, INF = 0 / 0, math.huge
local SPECIAL_X = {NAN, INF, -INF, 0.0, -0.0, 1e-20, -1e-20, 1e20, -1e20}
local SPECIAL_A = {NAN, 1.0, INF, -INF, 0.0, INF, -1.0, 2.0, -0.0}
local SPECIAL_B = {1.0, NAN, INF, INF, 0.0, 0.0, 0.0, -INF, -1.0}
local SPECIAL_RTOL = 1e-6
-- 81 elements, enough for the vectorised loops: X 9 times; every pair
-- (A, B), B rotated by r in the r-th repeat (as the generator does)
do
  local x, a, b = {}, {}, {}
  for r = 0, 8 do
    for i = 1, 9 do
      x[#x + 1], a[#a + 1], b[#b + 1] = SPECIAL_X[i], SPECIAL_A[i], SPECIAL_B[(i - 1 + r) % 9 + 1]
    end
  end
  SPECIAL_X, SPECIAL_A, SPECIAL_B = x, a, b
end
local LONG = 70 -- the long inputs: past the kernels' unrolled vector loops
local REGEN = "run /usr/bin/python3 scripts/fixtures/gen_op_table.py"

local fixture = fx.load("op_table").ops

-- Known disagreements with torch, each one check of one op: the check runs
-- and, failing, is reported pending with the reason; passing, it fails so
-- that the entry is removed.  Fix the op, not the test.
local KNOWN = {
  ["div num_l grad_fn"] = "1.25 / a records DivBackward0 in attn; torch 1.13 computes it as a.reciprocal() * 1.25 "
    .. "and names MulBackward0 (the gradients agree)",
}

--- Runs check(); a failure of a KNOWN check becomes pending().
local function known(key, check)
  local reason = KNOWN[key]
  if not reason then return check() end
  local ok = pcall(check)
  assert(not ok, ("%s now agrees with torch: remove it from KNOWN in spec/op_table_spec.lua"):format(key))
  pending("disagrees with torch: " .. reason)
end

-- ------------------------------------------------------------------ inputs
-- Sample i (0-based) of n over [lo, hi]: lo + (hi - lo) * frac((i + 1) *
-- 0.6180339887) in float64, rounded to float32 -- the generator's formula.
local function frac(x) return x - math.floor(x) end

local function samples(n, lo, hi, start)
  local v = {}
  for i = 1, n do v[i] = lo + (hi - lo) * frac((i + (start or 0)) * 0.6180339887) end
  return v
end

local function weights(n)
  local v = {}
  for i = 1, n do v[i] = (i % 2 == 1 and 1.0 or -1.0) * (0.5 + frac(i * 0.7548776662)) end
  return v
end

local function f32(values, shape) return attn.tensor(values):reshape(shape) end
local function ints(values) return attn.tensor(values, {dtype = "int64"}) end
local function bools(values) return attn.tensor(values, {dtype = "bool"}) end

local function dtype_name(t) return (tostring(t.dtype):gsub("^attn%.", "")) end

--- Asserts that attn tensor got equals attn tensor want: shape, dtype, and
-- values within atol + rtol * |want| (NaN matches NaN); exactly by default.
local function assert_same(got, want, what, atol, rtol)
  assert(attn.is_tensor(got), what .. ": not a tensor")
  fx.assert_close(got, {shape = want:shape(), data = fx.flat(want), dtype = dtype_name(want)}, atol or 0, rtol or 0,
    what)
end

--- Checks a fixture outcome {out = T} | {error = msg}: fn() must raise
-- where torch raised, with a message that names the function op, else give
-- torch's dtype and values.
local function assert_outcome(fn, expect, what, op)
  local ok, got = pcall(fn)
  if expect.error then
    assert(not ok, ("%s: torch raises (%s) but attn gave a %s tensor"):format(what, expect.error,
      ok and attn.is_tensor(got) and dtype_name(got) or type(got)))
    assert(tostring(got):find(op, 1, true), ("%s: the message should name %s: %s"):format(what, op, tostring(got)))
  else
    assert(ok, ("%s: torch gives a %s tensor but attn raised: %s"):format(what, expect.out.dtype, tostring(got)))
    fx.assert_close(got, expect.out, OUT_ATOL, 0, what)
  end
end

--- Asserts that fn() raises, for the reason the message's keyword names.
local function assert_refuses(fn, keyword, what)
  local ok, err = pcall(fn)
  assert(not ok, what .. ": torch refuses it, attn did not")
  assert(tostring(err):find(keyword, 1, true), ("%s: the message should say '%s': %s"):format(what, keyword,
    tostring(err)))
end

--- Whether backward raises after the tensor `which` (an input's index or
-- "out") changed in place between forward and backward: fn(...) runs on
-- clones of fresh leaves made by make().
local function backward_refuses(fn, make, which)
  local ins = {}
  for i, t in ipairs({make()}) do ins[i] = t:requires_grad_(true):clone() end
  local y = fn(table.unpack(ins))
  local changed = which == "out" and y or ins[which]
  changed:mul_(1.0)
  return not pcall(y.backward, y, attn.ones(y:shape()))
end

--- The entry of op rec in the fixture, checked against the inputs this
-- spec builds (the generator and the spec must agree on them).
local function entry(rec)
  local e = fixture[rec.name]
  assert(e, ("op %s is declared in src/attn_ops.h but has no entry in spec/fixtures/op_table.lua: %s")
    :format(rec.name, REGEN))
  assert(e.kind == rec.kind, ("op %s: the fixture says kind %s, attn.core._ops %s: %s"):format(rec.name,
    tostring(e.kind), rec.kind, REGEN))
  assert(e.torch == rec.torch, ("op %s: the fixture was made with %s, the op table says %s: %s"):format(rec.name,
    tostring(e.torch), rec.torch, REGEN))
  return e
end

-- ------------------------------------------------------------------ calling an op
--- fn(t, ...) and method name for op rec: a non-callable op NAME = BASE_OPT
-- is BASE with "OPT" as its option (gelu_tanh is t:gelu("tanh")), found
-- through BASE's sig, which lists "OPT".
local function call_form(rec)
  if rec.callable then return rec.name, {} end
  for _, base in ipairs(core._ops) do
    if base.callable and base.sig and rec.name:sub(1, #base.name + 1) == base.name .. "_" then
      local opt = rec.name:sub(#base.name + 2)
      if base.sig:find('"' .. opt .. '"', 1, true) then return base.name, {opt} end
    end
  end
  error(("op %s is not callable and no op's sig offers \"%s\" as an option"):format(rec.name, rec.name), 0)
end

--- The Lua operator an op's doc line names (`t + b`, `-t`) as a function,
-- or nil: the operator form must equal the op.
local function operator_form(rec)
  local op = rec.doc:match("`t (%p+) b`")
  if op then return assert(load("local t, b = ... return t " .. op .. " b", "=" .. rec.name .. " operator")) end
  op = rec.doc:match("`(%p+)t`")
  if op then return assert(load("local t = ... return " .. op .. " t", "=" .. rec.name .. " operator")) end
end

-- ------------------------------------------------------------------ unary driver
local function unary(rec)
  local name = rec.name
  local base, opts = call_form(rec)
  local function f(t) return attn[base](t, table.unpack(opts)) end
  local function x() return f32(samples(12, rec.lo, rec.hi), {3, 4}) end
  local differentiable = rec.node ~= nil

  it(name .. ": fixture entry matches the declaration and the inputs", function()
    local ent = entry(rec)
    fx.assert_equal(x(), ent.x, name .. " x")
    if differentiable then assert.are.equal(ent.node, rec.node, name .. ": node (torch's grad_fn name)") end
  end)
  local e = fixture[name]
  if not e then return end -- the test above fails and says how to make it

  it(name .. ": float32 values and dtype", function()
    fx.assert_close(f(x()), e.out, OUT_ATOL, 0, name)
  end)
  it(name .. ": NaN, infinities, zeros, 1e-20 and 1e20", function()
    known(name .. " special", function()
      fx.assert_close(f(attn.tensor(SPECIAL_X)), e.special, OUT_ATOL, SPECIAL_RTOL, name .. " of special values")
    end)
  end)
  for _, dt in ipairs({"int64", "bool"}) do
    local mk = dt == "int64" and function() return ints(INT_X) end or function() return bools(BOOL_X) end
    it(("%s: %s input (torch: %s)"):format(name, dt, e[dt].error and "raises" or e[dt].out.dtype), function()
      assert_outcome(function() return f(mk()) end, e[dt], name .. " of " .. dt, base)
    end)
    it(("%s_: in place on %s (torch: %s)"):format(name, dt, e[dt .. "_"].error and "raises" or "ok"), function()
      assert_outcome(function()
        local t = mk()
        local r = t[base .. "_"](t, table.unpack(opts))
        assert(rawequal(r, t), name .. "_ returns its tensor")
        return t
      end, e[dt .. "_"], name .. "_ of " .. dt, base)
    end)
  end
  it(name .. ": ints = " .. rec.ints .. " agrees with torch", function()
    local i, b = e.int64.out and e.int64.out.dtype or "error", e.bool.out and e.bool.out.dtype or "error"
    local class = ({["float32 float32"] = "FLOAT", ["int64 error"] = "KEEP", ["int64 bool"] = "KEEP_BOOL",
      ["int64 int64"] = "BOOL_TO_INT", ["error error"] = "REFUSE"})[i .. " " .. b]
    assert.are.equal(class, rec.ints, ("%s: torch gives %s for int64 and %s for bool"):format(name, i, b))
  end)

  it(name .. ": 70 elements (the vectorised loops)" .. (differentiable and ", values and gradient" or ""), function()
    local t = f32(samples(LONG, rec.lo, rec.hi), {LONG})
    if differentiable then t:requires_grad_(true) end
    local out = f(t)
    fx.assert_close(out, e.long.out, OUT_ATOL, 0, name .. " of 70")
    if not differentiable then return end
    out:backward(f32(weights(LONG), {LONG}))
    fx.assert_close(t.grad, e.long.grads[1], GRAD_ATOL, 0, name .. " grad of 70")
  end)
  if differentiable then
    it(name .. ": gradient and grad_fn against torch", function()
      local t = x():requires_grad_(true)
      local out = f(t)
      assert.are.equal(e.node, out.grad_fn, name .. " grad_fn")
      out:backward(f32(weights(12), {3, 4}))
      fx.assert_close(t.grad, e.grads[1], GRAD_ATOL, 0, name .. " grad")
    end)
    it(name .. ": gradcheck (finite differences)", function()
      assert(attn.gradcheck(f, {x():requires_grad_(true)}))
    end)
    it(("%s: reads = %s, and backward refuses a changed saved tensor as torch"):format(name, rec.reads), function()
      local declared = ({IN = {x = true, out = false}, OUT = {x = false, out = true},
        NONE = {x = false, out = false}})[rec.reads]
      assert(declared, name .. ": unknown reads value " .. tostring(rec.reads))
      assert.are.same(declared, e.saved, name .. ": what torch's backward reads (x: the input, out: the output)")
      assert.are.equal(e.saved.x, backward_refuses(f, x, 1), name .. ": backward after x changed in place")
      assert.are.equal(e.saved.out, backward_refuses(f, x, "out"), name .. ": backward after out changed in place")
    end)
  end

  it(name .. "_: in place equals out of place, same tensor", function()
    local t = x()
    local r = t[base .. "_"](t, table.unpack(opts))
    assert(rawequal(r, t), name .. "_ must return the tensor it changed")
    assert_same(t, f(x()), name .. "_", 0)
  end)
  it(name .. "_: in place on a transposed view writes through to its base", function()
    local t = x()
    local v = t:t()
    assert(rawequal(v[base .. "_"](v, table.unpack(opts)), v))
    assert_same(t, f(x()), name .. "_ through a transposed view", LAYOUT_ATOL, LAYOUT_RTOL)
  end)
  if differentiable then
    it(name .. "_: in place on a non-leaf, gradient and grad_fn as out of place", function()
      local t = x():requires_grad_(true)
      local y = t:clone()
      y[base .. "_"](y, table.unpack(opts))
      assert.are.equal(e.node, y.grad_fn, name .. "_ grad_fn") -- torch names NAME_'s node as NAME's
      y:backward(f32(weights(12), {3, 4}))
      fx.assert_close(t.grad, e.grads[1], GRAD_ATOL, 0, name .. "_ grad")
    end)
  end
  it(name .. "_: refuses a leaf that requires grad and an expanded tensor, as torch", function()
    local leaf = x():requires_grad_(true)
    assert_refuses(function() leaf[base .. "_"](leaf, table.unpack(opts)) end, "leaf", name .. "_ of a leaf")
    local v = x():narrow(1, 1, 1):expand(3, 4)
    assert_refuses(function() v[base .. "_"](v, table.unpack(opts)) end, "expanded", name .. "_ of an expanded row")
  end)
  local operator = operator_form(rec)
  if operator then
    it(name .. ": the operator its doc names equals attn." .. base, function()
      local t = x():requires_grad_(true)
      local out = operator(t)
      assert_same(out, f(x()), name .. " operator", 0)
      assert.are.equal(e.node, out.grad_fn, name .. " operator grad_fn")
    end)
  end
  it(name .. ": method form equals attn." .. base, function()
    local t = x()
    assert_same(t[base](t, table.unpack(opts)), f(t), name .. " method", 0)
  end)
  it(name .. ": non-contiguous input (a transposed view)", function()
    local v = x():t():contiguous():t()
    assert.is_false(v:is_contiguous())
    assert_same(f(v), f(x()), name .. " of a transposed view", LAYOUT_ATOL, LAYOUT_RTOL)
  end)
  it(name .. ": expanded input ([1,4] expanded to [3,4])", function()
    local row = x():narrow(1, 1, 1)
    local v = row:expand(3, 4)
    assert.are.same({0, 1}, v:stride()) -- one row, read three times
    assert_same(f(v), f(v:contiguous()), name .. " of an expanded row", LAYOUT_ATOL, LAYOUT_RTOL)
  end)
  it(name .. ": empty [0,4] gives [0,4]", function()
    local out = f(attn.zeros({0, 4}))
    assert.are.same({0, 4}, out:shape())
    assert.are.equal(e.out.dtype, dtype_name(out))
  end)
  it(name .. ": 0-d gives 0-d", function()
    local out = f(f32({e.x.data[1]}, {}))
    assert.are.same({}, out:shape())
    fx.assert_close(out, {shape = {}, data = {e.out.data[1]}, dtype = e.out.dtype}, OUT_ATOL, 0, name .. " 0-d")
  end)
end

-- ------------------------------------------------------------------ binary driver
local function binary(rec)
  local name = rec.name
  local f = attn[name]
  local differentiable = rec.node ~= nil and rec.kind ~= "COMPARE"
  local function inputs()
    local av, bv = samples(12, rec.lo, rec.hi), samples(4, rec.lo, rec.hi, 12)
    if rec.kind == "COMPARE" then bv[1], bv[3] = av[5], av[7] end -- ties
    return f32(av, {3, 4}), f32(bv, {4})
  end

  it(name .. ": fixture entry matches the declaration and the inputs", function()
    local ent = entry(rec)
    local a, b = inputs()
    fx.assert_equal(a, ent.a, name .. " a")
    fx.assert_equal(b, ent.b, name .. " b")
    if differentiable then assert.are.equal(ent.node, rec.node, name .. ": node (torch's grad_fn name)") end
  end)
  local e = fixture[name]
  if not e then return end -- the test above fails and says how to make it

  it(name .. ": float32 values and dtype (" .. e.dtype .. ")", function()
    local a, b = inputs()
    local out = f(a, b)
    assert.are.equal(e.dtype, dtype_name(out), name .. " dtype")
    fx.assert_close(out, e.out, OUT_ATOL, 0, name)
  end)
  it(name .. ": a number on either side", function()
    local a = inputs()
    fx.assert_close(f(a, NUM), e.num_r, OUT_ATOL, 0, name .. "(a, 1.25)")
    fx.assert_close(f(NUM, a), e.num_l, OUT_ATOL, 0, name .. "(1.25, a)")
  end)
  it(name .. ": broadcasting [3,1] with [1,4] gives [3,4]", function()
    local a, b = inputs()
    local out = f(a:reshape(12):narrow(1, 1, 3):reshape({3, 1}), b:reshape({1, 4}))
    fx.assert_close(out, e.bcast, OUT_ATOL, 0, name .. " broadcast")
  end)
  it(name .. ": NaN, infinities and zeros on either side", function()
    known(name .. " special", function()
      fx.assert_close(f(attn.tensor(SPECIAL_A), attn.tensor(SPECIAL_B)), e.special, OUT_ATOL, SPECIAL_RTOL,
        name .. " of special values")
    end)
  end)
  local cases = {
    {"int64", function() return ints(INT_X), ints(INT_B) end},
    {"bool", function() return bools(BOOL_X), bools(BOOL_B) end},
  }
  for _, c in ipairs(cases) do
    local dt, mk = c[1], c[2]
    it(("%s: %s inputs (torch: %s)"):format(name, dt, e[dt].error and "raises" or e[dt].out.dtype), function()
      assert_outcome(function() return f(mk()) end, e[dt], name .. " of " .. dt, name)
    end)
    it(("%s_: in place on %s (torch: %s)"):format(name, dt, e[dt .. "_"].error and "raises" or "ok"), function()
      assert_outcome(function()
        local a, b = mk()
        local r = a[name .. "_"](a, b)
        assert(rawequal(r, a), name .. "_ returns its tensor")
        return a
      end, e[dt .. "_"], name .. "_ of " .. dt, name)
    end)
  end
  -- mixed dtypes and numbers beside int64 and bool tensors (l, r: "f32",
  -- "i64", "bool" or a number; 4 elements, as the generator builds them)
  local function operand(d, left)
    if d == "f32" then return f32(samples(4, rec.lo, rec.hi), {4}) end
    if d == "i64" then return ints(left and MIX_I64_A or MIX_I64_B) end
    if d == "bool" then return bools(left and BOOL_X or BOOL_B) end
    return d
  end
  for _, m in ipairs(e.mixed) do
    local desc = ("%s(%s, %s)"):format(name, tostring(m.l), tostring(m.r))
    it(("%s: mixed %s (torch: %s)"):format(name, desc, m.error and "raises" or m.out.dtype), function()
      assert_outcome(function() return f(operand(m.l, true), operand(m.r, false)) end, m, desc, name)
    end)
  end
  it(name .. ": ints = " .. rec.ints .. " agrees with torch", function()
    local i = e.int64.out and e.int64.out.dtype or "error"
    local want = rec.kind == "COMPARE" and "bool" or rec.ints == "FLOAT" and "float32" or "int64"
    assert.are.equal(want, i, name .. ": the dtype torch gives int64 inputs")
  end)

  it(name .. ": 70 elements each (the vectorised loops)" .. (differentiable and ", values and gradients" or ""),
    function()
      local a = f32(samples(LONG, rec.lo, rec.hi), {LONG})
      local b = f32(samples(LONG, rec.lo, rec.hi, LONG), {LONG})
      if differentiable then
        a:requires_grad_(true)
        b:requires_grad_(true)
      end
      local out = f(a, b)
      fx.assert_close(out, e.long.out, OUT_ATOL, 0, name .. " of 70")
      if not differentiable then return end
      out:backward(f32(weights(LONG), {LONG}))
      fx.assert_close(a.grad, e.long.grads[1], GRAD_ATOL, 0, name .. " grad of a of 70")
      fx.assert_close(b.grad, e.long.grads[2], GRAD_ATOL, 0, name .. " grad of b of 70")
    end)
  if rec.kind == "COMPARE" then
    it(name .. ": records no backward (a bool result)", function()
      local a, b = inputs()
      local out = f(a:requires_grad_(true), b:requires_grad_(true))
      assert.is_false(out.requires_grad)
      assert.is_nil(out.grad_fn)
    end)
  end
  if differentiable then
    it(name .. ": gradients and grad_fn against torch", function()
      local a, b = inputs()
      a:requires_grad_(true)
      b:requires_grad_(true)
      local out = f(a, b)
      assert.are.equal(e.node, out.grad_fn, name .. " grad_fn")
      out:backward(f32(weights(12), {3, 4}))
      fx.assert_close(a.grad, e.grads[1], GRAD_ATOL, 0, name .. " grad of a")
      fx.assert_close(b.grad, e.grads[2], GRAD_ATOL, 0, name .. " grad of b (broadcast)")
    end)
    it(name .. ": gradients with a number on either side", function()
      for _, side in ipairs({{"num_r", function(t) return f(t, NUM) end}, {"num_l", function(t) return f(NUM, t) end}}) do
        local a = inputs()
        a:requires_grad_(true)
        local out = side[2](a)
        fx.assert_close(out, e[side[1]], OUT_ATOL, 0, name .. " " .. side[1])
        out:backward(f32(weights(12), {3, 4}))
        fx.assert_close(a.grad, e[side[1] .. "_grad"], GRAD_ATOL, 0, name .. " " .. side[1] .. " grad")
      end
    end)
    for _, side in ipairs({{"num_r", "(a, 1.25)", function(t) return f(t, NUM) end},
      {"num_l", "(1.25, a)", function(t) return f(NUM, t) end}}) do
      it(("%s%s: grad_fn %s as torch"):format(name, side[2], e[side[1] .. "_node"]), function()
        local out = side[3](inputs():requires_grad_(true))
        known(name .. " " .. side[1] .. " grad_fn", function()
          assert.are.equal(e[side[1] .. "_node"], out.grad_fn, name .. side[2] .. " grad_fn")
        end)
      end)
    end
    it(name .. ": backward refuses a changed saved tensor as torch", function()
      assert.are.equal(e.saved.a, backward_refuses(f, inputs, 1), name .. ": backward after a changed in place")
      assert.are.equal(e.saved.b, backward_refuses(f, inputs, 2), name .. ": backward after b changed in place")
      assert.are.equal(e.saved.out, backward_refuses(f, inputs, "out"), name .. ": backward after out changed")
    end)
    it(name .. ": gradcheck (finite differences)", function()
      local a, b = inputs()
      assert(attn.gradcheck(f, {a:requires_grad_(true), b:requires_grad_(true)}))
    end)
    if e.alpha then
      it(name .. ": alpha = 0.5, values, gradients, grad_fn and in place", function()
        local a, b = inputs()
        a:requires_grad_(true)
        b:requires_grad_(true)
        local out = f(a, b, ALPHA)
        assert.are.equal(e.alpha.node, out.grad_fn, name .. " alpha grad_fn")
        fx.assert_close(out, e.alpha.out, OUT_ATOL, 0, name .. " alpha")
        out:backward(f32(weights(12), {3, 4}))
        fx.assert_close(a.grad, e.alpha.grads[1], GRAD_ATOL, 0, name .. " alpha grad of a")
        fx.assert_close(b.grad, e.alpha.grads[2], GRAD_ATOL, 0, name .. " alpha grad of b")
        local a2, b2 = inputs()
        assert(rawequal(a2[name .. "_"](a2, b2, ALPHA), a2))
        fx.assert_close(a2, e.alpha.out, OUT_ATOL, 0, name .. "_ alpha")
      end)
    end
  end

  it(name .. "_: in place equals torch's, same tensor; and with a number", function()
    local a, b = inputs()
    assert(rawequal(a[name .. "_"](a, b), a), name .. "_ must return the tensor it changed")
    fx.assert_close(a, e.inplace, OUT_ATOL, 0, name .. "_")
    local a2 = inputs()
    assert(rawequal(a2[name .. "_"](a2, NUM), a2))
    local want = f(inputs(), NUM)
    assert_same(a2, want.dtype == a2.dtype and want or want:float(), name .. "_(1.25)", 0)
  end)
  it(name .. "_: in place on a transposed view writes through to its base", function()
    local a, b = inputs()
    local v = a:t()
    assert(rawequal(v[name .. "_"](v, b:reshape({1, 4}):expand(3, 4):t()), v))
    -- a keeps its dtype: a comparison's true/false become 1/0
    assert_same(a, f(inputs()):float(), name .. "_ through a transposed view", LAYOUT_ATOL, LAYOUT_RTOL)
  end)
  if differentiable then
    it(name .. "_: in place on a non-leaf, gradients and grad_fn as out of place", function()
      local a, b = inputs()
      a:requires_grad_(true)
      b:requires_grad_(true)
      local y = a:clone()
      y[name .. "_"](y, b)
      assert.are.equal(e.node, y.grad_fn, name .. "_ grad_fn") -- torch names NAME_'s node as NAME's
      y:backward(f32(weights(12), {3, 4}))
      fx.assert_close(a.grad, e.grads[1], GRAD_ATOL, 0, name .. "_ grad of a")
      fx.assert_close(b.grad, e.grads[2], GRAD_ATOL, 0, name .. "_ grad of b")
    end)
  end
  it(name .. "_: refuses a leaf that requires grad, an expanded self and a self smaller than b, as torch",
    function()
      local a = inputs()
      local leaf = inputs():requires_grad_(true)
      assert_refuses(function() leaf[name .. "_"](leaf, a) end, "leaf", name .. "_ of a leaf")
      local v = inputs():narrow(1, 1, 1):expand(3, 4)
      assert_refuses(function() v[name .. "_"](v, a) end, "expanded", name .. "_ of an expanded row")
      local row = inputs():select(1, 1):clone()
      assert_refuses(function() row[name .. "_"](row, a) end, "does not fit", name .. "_ of [4] by [3,4]")
    end)
  local operator = operator_form(rec)
  if operator then
    it(name .. ": the operator its doc names equals attn." .. name .. ", numbers on either side too", function()
      local a, b = inputs()
      a:requires_grad_(true)
      b:requires_grad_(true)
      local out = operator(a, b)
      assert_same(out, f(a, b), name .. " operator", 0)
      assert.are.equal(e.node, out.grad_fn, name .. " operator grad_fn")
      assert_same(operator(a, NUM), f(a, NUM), name .. " operator with a number on the right", 0)
      assert_same(operator(NUM, a), f(NUM, a), name .. " operator with a number on the left", 0)
    end)
  end
  it(name .. ": method form equals attn." .. name, function()
    local a, b = inputs()
    assert_same(a[name](a, b), f(a, b), name .. " method", 0)
  end)
  it(name .. ": non-contiguous a (transposed view), expanded b", function()
    local a, b = inputs()
    local av = a:t():contiguous():t()
    local bv = b:reshape({1, 4}):expand(3, 4)
    assert.is_false(av:is_contiguous())
    assert.is_false(bv:is_contiguous())
    assert_same(f(av, bv), f(a, b), name .. " of strided inputs", LAYOUT_ATOL, LAYOUT_RTOL)
    local row = a:narrow(1, 1, 1):expand(3, 4)
    assert.are.same({0, 1}, row:stride())
    assert_same(f(row, b), f(row:contiguous(), b), name .. " of an expanded row", LAYOUT_ATOL, LAYOUT_RTOL)
  end)
  it(name .. ": empty [0,4] with [4] gives [0,4]", function()
    local _, b = inputs()
    local out = f(attn.zeros({0, 4}), b)
    assert.are.same({0, 4}, out:shape())
    assert.are.equal(e.dtype, dtype_name(out))
  end)
  it(name .. ": 0-d with 0-d gives 0-d", function()
    local out = f(f32({e.a.data[1]}, {}), f32({e.b.data[1]}, {}))
    assert.are.same({}, out:shape())
    fx.assert_close(out, {shape = {}, data = {e.out.data[1]}, dtype = e.out.dtype}, OUT_ATOL, 0, name .. " 0-d")
  end)
end

-- ------------------------------------------------------------------ every declared op
local drivers = {unary = unary, ARITH = binary, COMPARE = binary}

describe("the op table", function()
  it("lists ops (attn.core._ops)", function()
    assert.is_true(#core._ops > 0)
  end)
  it("has a fixture entry for every op and none for an undeclared one", function()
    local declared = {}
    for _, rec in ipairs(core._ops) do
      declared[rec.name] = true
      assert(fixture[rec.name], ("op %s has no entry in spec/fixtures/op_table.lua: %s"):format(rec.name, REGEN))
    end
    for name in pairs(fixture) do
      assert(declared[name], ("spec/fixtures/op_table.lua has op %s, which src/attn_ops.h does not declare: %s")
        :format(name, REGEN))
    end
  end)
  it("names only declared ops among its known disagreements", function()
    local declared = {}
    for _, rec in ipairs(core._ops) do declared[rec.name] = true end
    for key in pairs(KNOWN) do
      assert(declared[key:match("^%S+")], "KNOWN names an undeclared op: " .. key)
    end
  end)
end)

for _, rec in ipairs(core._ops) do
  describe("op " .. rec.name .. " (" .. rec.kind .. ")", function()
    local driver = drivers[rec.kind]
    if not driver then
      it(rec.name .. ": has a generic driver", function()
        error(("op %s has kind %s, which has no generic driver in spec/op_table_spec.lua (nor in "
          .. "scripts/fixtures/gen_op_table.py): add one"):format(rec.name, rec.kind), 0)
      end)
      return
    end
    driver(rec)
  end)
end
