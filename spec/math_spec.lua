-- SPDX-License-Identifier: MIT
-- Elementwise math, where/masked_fill/clamp and matmul against torch 1.13
-- fixtures (spec/fixtures/core.lua, made by scripts/fixtures/gen_core.py).
local attn = require "attn"
local fx = require "support.fixture"

local F = fx.load("core")

describe("creation functions", function()
  for i, c in ipairs(F.creation) do
    it(("%s #%d matches torch"):format(c.fn, i), function()
      fx.assert_close(attn[c.fn](table.unpack(c.args)), c.out, 1e-6, 0, c.fn)
    end)
  end
end)

describe("binary ops with broadcasting", function()
  for i, c in ipairs(F.binary) do
    local desc
    if c.scalar then desc = ("%s(tensor, %g)"):format(c.op, c.scalar)
    elseif c.scalar_first then desc = ("%s(%g, tensor)"):format(c.op, c.scalar_first)
    else desc = ("%s %s x %s"):format(c.op, table.concat(c.a.shape, "x"), table.concat(c.b.shape, "x")) end
    it(desc .. " #" .. i, function()
      local got
      if c.scalar then
        got = attn[c.op](fx.tensor(c.a), c.scalar)
      elseif c.scalar_first then
        got = attn[c.op](c.scalar_first, fx.tensor(c.b))
      else
        got = attn[c.op](fx.tensor(c.a), fx.tensor(c.b))
      end
      fx.assert_close(got, c.out, 1e-6, 1e-6, desc)
    end)
  end

  it("operators + - * / ^ and unary minus follow torch", function()
    local a = attn.tensor{{1.0, 2.0}, {3.0, 4.0}}
    assert.same({{2, 4}, {6, 8}}, (a + a):totable())
    assert.same({{0, 1}, {2, 3}}, (a - 1):totable())
    assert.same({{9, 8}, {7, 6}}, (10 - a):totable())
    assert.same({{1, 4}, {9, 16}}, (a * a):totable()) -- elementwise, like torch
    assert.same({{0.5, 1}, {1.5, 2}}, (a / 2):totable())
    assert.same({{1, 4}, {9, 16}}, (a ^ 2):totable())
    assert.same({{-1, -2}, {-3, -4}}, (-a):totable())
    assert.same({{2, 3}, {4, 5}}, (a + {1}):totable()) -- tables broadcast too
    assert.same({{11, 22}, {13, 24}}, (a + {10, 20}):totable())
  end)

  it("add and sub accept alpha", function()
    local a, b = attn.tensor{1.0, 2.0}, attn.tensor{10.0, 20.0}
    assert.same({21, 42}, attn.add(a, b, 2):totable())
    assert.same({-19, -38}, a:sub(b, 2):totable())
  end)

  for i, c in ipairs(F.binary_noncontig) do
    it(c.op .. " with a transposed operand #" .. i, function()
      local got = attn[c.op](fx.tensor(c.a), fx.tensor(c.b_t):t())
      fx.assert_close(got, c.out, 1e-6, 1e-6)
    end)
  end

  it("refuses shapes that do not broadcast, naming both", function()
    local ok, err = pcall(attn.add, attn.zeros(2, 3), attn.zeros(4))
    assert.is_false(ok)
    assert.matches("add: shapes [2,3] and [4] cannot be broadcast together", err, 1, true)
  end)

  it("in-place forms modify and return self", function()
    local a = attn.tensor{1.0, 2.0, 3.0}
    local r = a:add_(1)
    assert.equal(a, r)
    assert.same({2, 3, 4}, a:totable())
    a:mul_(attn.tensor{2.0, 2.0, 2.0})
    assert.same({4, 6, 8}, a:totable())
    a:exp_():log_()
    fx.assert_close(a, {shape = {3}, data = {4, 6, 8}}, 1e-5)
  end)

  it("in-place ops refuse results that do not fit and leave self unchanged", function()
    local a = attn.tensor{1.0, 2.0, 3.0}
    local ok, err = pcall(a.add_, a, attn.ones(2, 3))
    assert.is_false(ok)
    assert.matches("add_", err, 1, true)
    assert.same({1, 2, 3}, a:totable())
  end)

  it("in-place with an aliasing, differently laid out operand is correct", function()
    local a = attn.tensor{{1.0, 2.0}, {3.0, 4.0}}
    a:add_(a:t())
    assert.same({{2, 5}, {5, 8}}, a:totable())
  end)

  it("in-place into an expanded view is refused", function()
    local e = attn.tensor{1.0, 2.0}:expand(3, 2)
    assert.has_error(function() e:add_(1) end)
  end)

  it("comparisons give bool masks (torch)", function()
    local a = attn.tensor{1.0, 2.0, 3.0}
    assert.same({false, true, false}, a:eq(2):totable())
    assert.same({true, true, false}, a:le(2):totable())
    assert.equal(attn.bool, a:le(2).dtype)
    assert.same({0, 1, 0}, a:eq(2):float():totable())
    assert.same({false, false, true}, a:gt({2}):totable())
  end)
end)

describe("unary ops", function()
  for i, c in ipairs(F.unary) do
    it(c.op .. (c.approximate and (" " .. c.approximate) or "") .. " #" .. i, function()
      local x = fx.tensor(c.x)
      local got = c.approximate and attn[c.op](x, c.approximate) or attn[c.op](x)
      fx.assert_close(got, c.out, 1e-6, 2e-6, c.op)
      local y = x:clone()
      if c.approximate then y[c.op .. "_"](y, c.approximate) else y[c.op .. "_"](y) end
      fx.assert_close(y, c.out, 1e-6, 2e-6, c.op .. "_")
    end)
  end

  it("relu keeps NaN and exp of 1e4 is inf, not an error", function()
    local r = attn.tensor{0.0 / 0.0, -1.0, 2.0}:relu():totable()
    assert.is_true(r[1] ~= r[1])
    assert.same({0, 2}, {r[2], r[3]})
    assert.equal(math.huge, attn.tensor{1e4}:exp()[1])
  end)
end)

describe("clamp, where, masked_fill", function()
  for i, c in ipairs(F.clamp) do
    it("clamp #" .. i, function()
      fx.assert_close(fx.tensor(c.x):clamp(c.min, c.max), c.out, 0)
    end)
  end
  it("clamp needs a bound", function()
    assert.has_error(function() attn.ones(2):clamp() end)
  end)
  it("where broadcasts its three arguments", function()
    local c = F.where[1]
    fx.assert_close(attn.where(fx.tensor(c.cond), fx.tensor(c.a), fx.tensor(c.b)), c.out, 0)
    assert.same({1, 0}, attn.where(attn.tensor{1.0, 0.0}, 1, 0):totable())
  end)
  for i, c in ipairs(F.masked_fill) do
    it("masked_fill #" .. i, function()
      local x = fx.tensor(c.x)
      fx.assert_close(x:masked_fill(fx.tensor(c.mask), c.value), c.out, 0)
      x:masked_fill_(fx.tensor(c.mask), c.value)
      fx.assert_close(x, c.out, 0)
    end)
  end
  it("masked_fill refuses a mask larger than the tensor", function()
    local ok, err = pcall(attn.masked_fill, attn.zeros(3), attn.zeros(2, 3), 1)
    assert.is_false(ok)
    assert.matches("masked_fill: mask of shape [2,3] cannot be broadcast to the tensor's shape [3]", err, 1, true)
  end)
end)

describe("matmul", function()
  for i, c in ipairs(F.matmul) do
    local a_shape = c.a and c.a.shape or {c.a_t.shape[2], c.a_t.shape[1]}
    local b_shape = c.b and c.b.shape or {c.b_t.shape[2], c.b_t.shape[1]}
    it(("[%s] @ [%s] #%d"):format(table.concat(a_shape, ","), table.concat(b_shape, ","), i), function()
      local a = c.a and fx.tensor(c.a) or fx.tensor(c.a_t):t()
      local b = c.b and fx.tensor(c.b) or fx.tensor(c.b_t):t()
      fx.assert_close(attn.matmul(a, b), c.out, 1e-5, 1e-5)
      fx.assert_close(a:matmul(b), c.out, 1e-5, 1e-5)
    end)
  end
  it("bmm, outer and dot", function()
    fx.assert_close(attn.bmm(fx.tensor(F.bmm.a), fx.tensor(F.bmm.b)), F.bmm.out, 1e-5, 1e-5)
    fx.assert_close(attn.outer(fx.tensor(F.outer.a), fx.tensor(F.outer.b)), F.outer.out, 1e-6)
    fx.assert_close(attn.dot(fx.tensor(F.dot.a), fx.tensor(F.dot.b)), F.dot.out, 1e-6)
  end)
  it("names both shapes when they do not fit", function()
    local ok, err = pcall(attn.matmul, attn.zeros(6, 3), attn.zeros(2, 4))
    assert.is_false(ok)
    assert.matches("matmul: cannot multiply [6,3] by [2,4]", err, 1, true)
    ok, err = pcall(attn.mm, attn.zeros(2, 3, 4), attn.zeros(4, 2))
    assert.matches("mm: expects two matrices", err, 1, true)
    ok, err = pcall(attn.matmul, attn.tensor(1.0), attn.zeros(2))
    assert.matches("at least 1 dimension", err, 1, true)
  end)
  it("a big product goes through BLAS and agrees with a slow sum", function()
    local a, b = attn.arange(0, 1, 1 / 256):reshape(16, 16), attn.ones(16, 300)
    local c = a:matmul(b)
    local row_sum = 0
    for j = 1, 16 do row_sum = row_sum + a[3][j] end
    assert.near(row_sum, c[3][299], 1e-5)
  end)
end)

-- fn(...) run on `threads` pool threads; the count is restored even if fn fails
local function on(threads, fn, ...)
  local before = attn.get_num_threads()
  attn.set_num_threads(threads)
  local ok, r = pcall(fn, ...)
  attn.set_num_threads(before)
  assert(ok, r)
  return r
end

describe("products on the thread pool", function()
  -- {m, k, n}: sgemm cut into row parts, into k parts (few rows, long
  -- sums), odd sizes; then attn's own medium kernel (row parts of whole
  -- register tiles) and batches of small products
  local blas_shapes = {{300, 200, 700}, {70, 300, 1000}, {513, 129, 257}, {768, 128, 384}, {128, 768, 128}}
  local own_shapes = {{512, 64, 16}, {720, 64, 64}, {130, 48, 40}}
  local function run(shapes)
    attn.manual_seed(5)
    local out = {}
    for _, s in ipairs(shapes) do
      local a, b = attn.randn(s[1], s[2]), attn.randn(s[2], s[3])
      out[#out + 1] = a:matmul(b)
      out[#out + 1] = a:t():contiguous():t():matmul(b:t():contiguous():t()) -- transposed layouts
      local ag, bg = a:clone():requires_grad_(), b:clone():requires_grad_()
      ag:matmul(bg):sum():backward()
      ag:matmul(bg):backward(attn.randn(s[1], s[3])) -- added into the existing .grad
      out[#out + 1], out[#out + 2] = ag.grad, bg.grad
    end
    return out
  end

  it("agree on 1 and 2 threads when OpenBLAS computes them (row parts, k parts)", function()
    local a, b = on(1, run, blas_shapes), on(2, run, blas_shapes)
    for i = 1, #a do
      local scale = a[i]:abs():max():item()
      local diff = (a[i] - b[i]):abs():max():item()
      assert(diff <= 1e-6 * scale, ("result %d differs by %g (scale %g)"):format(i, diff, scale))
    end
  end)

  it("give the same bits on 1 and 2 threads in attn's own kernels (medium products, batches)", function()
    local function own()
      local out = run(own_shapes)
      attn.manual_seed(6)
      out[#out + 1] = attn.randn(16, 32, 16):matmul(attn.randn(16, 16, 32))
      out[#out + 1] = attn.randn(4, 8, 64, 32):matmul(attn.randn(4, 8, 32, 64))
      return out
    end
    local a, b = on(1, own), on(2, own)
    for i = 1, #a do assert(attn.eq(a[i], b[i]):all():item(), "result " .. i .. " differs") end
  end)
end)

describe("elementwise jobs on the thread pool", function()
  it("give the same bits on 1 and 2 threads (2^18 elements and more run in pieces of rows; softmax and "
    .. "LayerNorm rows too, LayerNorm's backward with its dw, db partials)", function()
    local function run()
      attn.manual_seed(3)
      local x, b = attn.randn(720, 512), attn.randn(512)
      local xs = attn.randn(512, 1440):t():narrow(1, 1, 720) -- strided
      local out = {x:relu(), attn.F.gelu(x), x + b, x * xs, x:clamp(-0.5, 0.5), attn.where(x:gt(0), x, b),
        x:masked_fill(x:lt(-1), 7), x:sigmoid(), attn.randn(3, 1, 300000):exp(), x:softmax(-1),
        x:log_softmax(2), attn.F.layer_norm(x, 512, b, b)}
      local y = x:clone()
      y:add_(xs, 0.5)
      out[#out + 1] = y
      local xg = x:clone():requires_grad_()
      attn.F.gelu(xg):backward(x)
      out[#out + 1] = xg.grad
      -- LayerNorm backward: row tasks with their own dw, db partials
      local xl, wl, bl = x:clone():requires_grad_(), b:clone():requires_grad_(), b:clone():requires_grad_()
      attn.F.layer_norm(xl, 512, wl, bl):backward(xs)
      out[#out + 1], out[#out + 2], out[#out + 3] = xl.grad, wl.grad, bl.grad
      return out
    end
    local a, b = on(1, run), on(2, run)
    for i = 1, #a do assert(attn.eq(a[i], b[i]):all():item(), "result " .. i .. " differs") end
  end)
end)
