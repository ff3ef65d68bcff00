-- SPDX-License-Identifier: MIT
-- Indexing as torch users write it (issue 15), against torch 1.13
-- (spec/fixtures/indexing.lua from scripts/fixtures/gen_dtype.py): reads,
-- writes with broadcasting, and the gradients through both.  Keys are
-- 1-based, ranges inclusive: torch's X[1:3, ::2] is X[{{2, 3}, {1, -1, 2}}].
local attn = require "attn"
local fixture = require "support.fixture"

local FIX = fixture.load("indexing")
local function X() return attn.arange(24):reshape(4, 6):float() * 0.5 - 3 end
local function ids(list) return attn.tensor(list, {dtype = "int64"}) end

local reads = {
  row = function(x) return x[2] end,
  elem = function(x) return x[{2, 3}] end,
  col_last = function(x) return x[{{}, -1}] end,
  rows_2_4 = function(x) return x[{{2, 4}, {}}] end,
  step = function(x) return x[{{}, {1, -1, 2}}] end,
  keep = function(x) return x[{{2}}] end,
  neg_range_step = function(x) return x[{{-3, -1}, {2, -1, 3}}] end,
  ids = function(x) return x[ids({3, 1, 3})] end,
  ids_2d = function(x) return x[ids({{1, 2}, {4, 4}})] end,
  col_ids = function(x) return x[{{}, ids({6, 1})}] end,
  sel_then_ids = function(x) return x[{3, ids({2, 5})}] end,
  mask = function(x) return x[x:gt(1)] end,
  mask_rows = function(x) return x[attn.tensor({true, false, true, false})] end,
  mask_none = function(x) return x[x:gt(100)] end,
}

local writes = {
  w_row = function(x) x[2] = attn.arange(6):float() end,
  w_row_scalar = function(x) x[3] = 0 end,
  w_elem = function(x) x[{2, 3}] = 7 end,
  w_col = function(x) x[{{}, 1}] = attn.tensor({1, 2, 3, 4}) end,
  w_range_bcast = function(x) x[{{2, 3}, {}}] = attn.tensor({9, 8, 7, 6, 5, 4}) end,
  w_step = function(x) x[{{}, {1, -1, 2}}] = -1 end,
  w_mask_scalar = function(x) x[x:gt(1)] = 0 end,
  w_mask_rows = function(x) x[attn.tensor({true, false, true, false})] = attn.tensor({{1, 1, 1, 1, 1, 1}, {2, 2, 2, 2, 2, 2}}) end,
  w_mask_values = function(x)
    local m = x:lt(-2)
    x[m] = attn.arange(m:sum():item()):float()
  end,
  w_ids = function(x) x[ids({4, 2})] = attn.tensor({{10, 10, 10, 10, 10, 10}, {20, 20, 20, 20, 20, 20}}) end,
  w_col_ids = function(x) x[{{}, ids({6, 1})}] = attn.tensor({1.5, 2.5}) end,
}

describe("indexing reads match torch", function()
  for _, c in ipairs(FIX.reads) do
    it(c.name, function()
      local got = reads[c.name](X())
      if type(got) == "number" then got = attn.tensor(got) end -- x[{i, j}] is a Lua number
      fixture.assert_equal(got, c.out, c.name)
    end)
  end
end)

describe("indexing writes match torch", function()
  for _, c in ipairs(FIX.writes) do
    it(c.name, function()
      local x = X()
      writes[c.name](x)
      fixture.assert_equal(x, c.out, c.name)
    end)
  end
  it("writes through a view reach the base tensor", function()
    local x = X()
    local v = x[{{2, 3}}]
    v[{{}, 1}] = 100
    assert.are.equal(100, x[{2, 1}])
    assert.are.equal(100, x[{3, 1}])
  end)
end)

describe("indexing gradients match torch", function()
  local g = {}
  for _, c in ipairs(FIX.grads) do g[c.name] = c end
  it("through reads (ranges with a step, index tensors, masks, elements)", function()
    local w = X():requires_grad_()
    local c1 = attn.arange(6):float():reshape(2, 3)
    local c2 = attn.arange(18):float():reshape(3, 6) - 5
    local npos = w:detach():gt(0):sum():item()
    local c3 = attn.arange(npos):float()
    local y = (w[{{2, 3}, {1, -1, 2}}] * c1):sum() + (w[ids({3, 1, 3})] * c2):sum() + (w[w:gt(0)] * c3):sum()
      + w[{2, {3}}]:sum() * 3 -- torch's w[1, 2] * 3 (an element read is a Lua number)
    y:backward()
    fixture.assert_close(w.grad, g.read.grad, 1e-5, 0, "read grad")
  end)
  it("through writes (index tensor rows, a column, a mask)", function()
    local w = X():requires_grad_()
    local v = attn.tensor({{1, -2, 3, -4, 5, -6}, {0.5, 0.25, 2, 4, 8, 16}}):requires_grad_()
    local a = w * 1
    a[ids({4, 2})] = v
    a[{{}, 1}] = 0
    a[a:gt(5)] = -1
    local coef = attn.arange(24):float():reshape(4, 6) - 11
    ;(a * coef):sum():backward()
    fixture.assert_equal(a:detach(), g.write.out, "written values")
    fixture.assert_close(w.grad, g.write.grad, 1e-5, 0, "grad of the base")
    fixture.assert_close(v.grad, g.write.grad_v, 1e-5, 0, "grad of the written rows")
  end)
end)

describe("indexing keys", function()
  it("gives Lua values for elements of every dtype", function()
    local i = attn.tensor({{1, 2}, {3, 4}}, {dtype = "int64"})
    assert.are.equal(3, i[{2, 1}])
    assert.are.equal("integer", math.type(i[{2, 1}]))
    assert.are.equal(true, attn.tensor({true, false})[1])
    assert.are.equal(2.5, attn.tensor({1.5, 2.5})[-1])
  end)
  it("refuses bad keys with the rules in the message", function()
    local x = X()
    assert.has_error(function() return x[{{1, 2, 1, 1}}] end)
    assert.has_error(function() return x[{{}, {1, 6, 0}}] end, "index: range step must be positive (got 0)")
    assert.has_error(function() return x[ids({5})] end, "index: index 5 in 'index' out of range (expected 1..4)")
    assert.has_error(function() return x[attn.tensor({true, false})] end,
      "index: mask of shape [2] does not match the leading dims of the tensor's shape [4,6]")
    assert.has_error(function() return x[{1, 2, 3}] end, "index: 3 indices for a 2-d tensor")
    assert.has_error(function() x[ids({1})] = attn.ones(3) end)
  end)
  it("exposes shape, ndim, dtype, T and mT as properties", function()
    local x = attn.randn(2, 3, 4)
    assert.are.equal(2, x.shape[1])
    assert.same({2, 3, 4}, x:shape())
    assert.same({2, 3, 4}, x.shape)
    assert.are.equal(3, x.ndim)
    assert.are.equal(attn.float32, x.dtype)
    assert.same({4, 3, 2}, x.T:shape())
    assert.same({2, 4, 3}, x.mT:shape())
    local m = attn.randn(2, 5)
    assert.same({5, 2}, m.T:shape())
  end)
  it("x.data is torch's: the same storage, out of the graph", function()
    local w = attn.ones(2, 3):requires_grad_()
    local d = w.data
    assert.is_false(d.requires_grad)
    assert.same({2, 3}, d:shape())
    d:fill_(5) -- writes reach w, as torch's w.data.fill_(5)
    assert.are.equal(5, w[{1, 1}])
    assert.is_true(w.requires_grad)
    local y = (w * 2):sum()
    assert.is_nil(y.data.grad_fn)
  end)
end)
