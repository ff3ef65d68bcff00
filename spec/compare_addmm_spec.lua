-- SPDX-License-Identifier: MIT
-- isclose, allclose, equal, x:tolist() and the fused matmuls addmm,
-- baddbmm, addbmm against torch 1.13 (spec/fixtures/compare_addmm.lua,
-- written by scripts/fixtures/gen_compare_addmm.py): values, shapes,
-- dtypes, gradients, and torch's positional order beside the options form.
local attn = require "attn"
local fixture = require "support.fixture"

local FX = fixture.load("compare_addmm")

-- A fixture tensor in its own dtype (float32 unless the fixture says).
local function T(f)
  local t = fixture.tensor(f)
  if f.dtype == "int64" then return t:long() end
  if f.dtype == "bool" then return t:bool() end
  return t:float()
end

local function same(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= "table" then return a == b or (a ~= a and b ~= b) end
  if #a ~= #b then return false end
  for i = 1, #a do if not same(a[i], b[i]) then return false end end
  return true
end

describe("isclose / allclose", function()
  for i, c in ipairs(FX.close) do
    it("case " .. i .. " equals torch (positional and options form)", function()
      local a, b, kw = T(c.a), T(c.b), c.kw
      local got = attn.isclose(a, b, kw.rtol, kw.atol, kw.equal_nan)
      fixture.assert_close(got, c.isclose, 0, 0, "isclose")
      assert.equal(c.allclose, attn.allclose(a, b, kw.rtol, kw.atol, kw.equal_nan))
      if next(kw) then -- torch's keywords in an options table
        fixture.assert_close(attn.isclose(a, b, kw), c.isclose, 0, 0, "isclose{...}")
        fixture.assert_close(a:isclose(b, kw), c.isclose, 0, 0, "a:isclose")
        assert.equal(c.allclose, attn.allclose(a, b, kw))
      end
      assert.equal("boolean", type(attn.allclose(a, b)))
    end)
  end
  it("refuses mixed dtypes, negative tolerances and shapes that do not broadcast, as torch", function()
    assert.error_matches(function() attn.isclose(attn.ones(2):long(), attn.ones(2)) end, "isclose: input is attn.int64")
    assert.error_matches(function() attn.isclose(attn.ones(2), attn.ones(2), -1) end, "rtol must be greater")
    assert.error_matches(function() attn.allclose(attn.ones(2), attn.ones(2), nil, -1) end, "allclose: atol")
    assert.error_matches(function() attn.allclose(attn.ones(2), attn.ones(3)) end, "cannot broadcast")
    assert.error_matches(function() attn.isclose(attn.ones(2), {1, 1}) end, "other must be a tensor")
    assert.error_matches(function() attn.isclose(attn.ones(2), attn.ones(2), {rtl = 1}) end,
      "unknown option 'rtl'.*valid options: atol, equal_nan, other, rtol")
  end)
  it("is true on empty tensors and records no graph", function()
    assert.is_true(attn.allclose(attn.zeros(0), attn.zeros(0)))
    local x = attn.ones(2):requires_grad_()
    assert.is_false(attn.isclose(x, x).requires_grad)
  end)
end)

describe("equal", function()
  for i, c in ipairs(FX.equal) do
    it("case " .. i .. " equals torch", function()
      assert.equal(c.result, attn.equal(T(c.a), T(c.b)))
      assert.equal(c.result, T(c.a):equal(T(c.b)))
    end)
  end
end)

describe("tolist", function()
  it("gives torch's nested lists with Lua integers, booleans and numbers", function()
    local tl = FX.tolist
    local f = attn.tensor({{1.5, -2.0}, {0.25, 3.0}}):tolist()
    assert.is_true(same(tl.float2d, f))
    assert.equal("float", math.type(f[2][2]))
    local n = attn.tensor({3, -1, 7}):long():tolist()
    assert.is_true(same(tl.int1d, n))
    assert.equal("integer", math.type(n[1]))
    assert.is_true(same(tl.bool1d, attn.tensor({true, false}):tolist()))
    assert.equal(tl.scalar, attn.tensor(2.5):tolist())
    assert.is_true(same(tl.empty, attn.zeros(0, 2):tolist()))
  end)
end)

describe("addmm / baddbmm / addbmm", function()
  for i, c in ipairs(FX.fused) do
    it(("case %d (%s) equals torch in values, dtype and gradients"):format(i, c.op), function()
      local input, m1, m2 = T(c.input), T(c.m1), T(c.m2)
      local floating = input.dtype == attn.float32
      if floating then
        input:requires_grad_(); m1:requires_grad_(); m2:requires_grad_()
      end
      if not floating then -- attn's matmuls are floating only (torch also multiplies int64)
        assert.error_matches(function() attn[c.op](input, m1, m2, c.kw) end, "expected a floating tensor, got int64")
        return
      end
      local out = attn[c.op](input, m1, m2, c.kw.beta, c.kw.alpha)
      fixture.assert_close(out, c.out, 1e-5, 1e-5, c.op)
      if next(c.kw) then
        fixture.assert_close(attn[c.op](input, m1, m2, c.kw), c.out, 1e-5, 1e-5, c.op .. "{...}")
        fixture.assert_close(input[c.op](input, m1, m2, c.kw), c.out, 1e-5, 1e-5, "t:" .. c.op)
      end
      if floating then
        out:sum():backward()
        fixture.assert_close(input.grad, c.grads[1], 1e-5, 1e-5, "input.grad")
        fixture.assert_close(m1.grad, c.grads[2], 1e-5, 1e-5, "mat1.grad")
        fixture.assert_close(m2.grad, c.grads[3], 1e-5, 1e-5, "mat2.grad")
      end
    end)
  end
  it("refuses what torch refuses, naming the function and the shapes", function()
    local m = attn.ones(2, 4)
    assert.error_matches(function() attn.addmm(attn.ones(2, 3), m, attn.ones(3, 3)) end,
      "addmm: cannot multiply mat1 %[2,4%] by mat2 %[3,3%]")
    assert.error_matches(function() attn.addmm(attn.ones(4, 3), m, attn.ones(4, 3)) end,
      "addmm: input %[4,3%] does not broadcast")
    assert.error_matches(function() attn.addmm(attn.ones(2, 3), m:long(), attn.ones(4, 3):long()) end,
      "addmm: input is attn.float32 and mat1 is attn.int64")
    assert.error_matches(function() attn.baddbmm(attn.ones(3), attn.ones(2, 2, 4), attn.ones(3, 4, 3)) end,
      "baddbmm: cannot multiply batch1 %[2,2,4%]")
    assert.error_matches(function() attn.addbmm(attn.ones(3), attn.ones(2, 4), attn.ones(2, 4, 3)) end,
      "addbmm: batch1 must be a 3%-D tensor")
  end)
end)

describe("torch live", function()
  it("regenerates the same fixture", function()
    local ok = os.execute("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1")
    if not ok then return pending("torch is not installed: the committed fixture stands") end
    local dir = os.getenv("ATTN_SOURCE_DIR") or "."
    local tmp = os.tmpname()
    local gen = io.open(dir .. "/scripts/fixtures/gen_compare_addmm.py"):read("a")
    -- the generator writes next to itself; run a copy that writes to tmp
    gen = gen:gsub('path = os.path.join%(.-"compare_addmm.lua"%)', ("path = %q"):format(tmp))
    local py = tmp .. ".py"
    local f = assert(io.open(py, "w"))
    f:write((gen:gsub("sys.path.insert%(0, .-%)\n", ("sys.path.insert(0, %q)\n"):format(dir .. "/scripts/fixtures"))))
    f:close()
    assert.is_true(os.execute("/usr/bin/python3 " .. py) == true)
    local want = io.open(dir .. "/spec/fixtures/compare_addmm.lua"):read("a")
    local got = io.open(tmp):read("a")
    os.remove(tmp); os.remove(py)
    assert.equal(want, got)
  end)
end)
