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
  w_col = function(x) x[{{}, 1}] = attn.tensor({1.0, 2.0, 3.0, 4.0}) end,
  w_range_bcast = function(x) x[{{2, 3}, {}}] = attn.tensor({9.0, 8.0, 7.0, 6.0, 5.0, 4.0}) end,
  w_step = function(x) x[{{}, {1, -1, 2}}] = -1 end,
  w_mask_scalar = function(x) x[x:gt(1)] = 0 end,
  w_mask_rows = function(x) x[attn.tensor({true, false, true, false})] = attn.tensor({{1.0, 1.0, 1.0, 1.0, 1.0, 1.0}, {2.0, 2.0, 2.0, 2.0, 2.0, 2.0}}) end,
  w_mask_values = function(x)
    local m = x:lt(-2)
    x[m] = attn.arange(m:sum():item()):float()
  end,
  w_ids = function(x) x[ids({4, 2})] = attn.tensor({{10.0, 10.0, 10.0, 10.0, 10.0, 10.0}, {20.0, 20.0, 20.0, 20.0, 20.0, 20.0}}) end,
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
    local v = attn.tensor({{1.0, -2.0, 3.0, -4.0, 5.0, -6.0}, {0.5, 0.25, 2.0, 4.0, 8.0, 16.0}}):requires_grad_()
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
  it("writes numbers into int64 and bool tensors by torch's rules (issue 27)", function()
    local function I() return attn.tensor({1, 2, 3}, {dtype = "int64"}) end
    local m = attn.tensor({true, false, true})
    local fits = "value .* does not fit in int64 %(an int64 tensor holds the integers from math.mininteger"
    local bad_writes = {
      function(a) a[1] = 2 ^ 63 end, function(a) a[1] = 0 / 0 end, function(a) a[{2}] = -math.huge end,
      function(a) a[{{1, 2}}] = 1e300 end, function(a) a[m] = 0 / 0 end, function(a) a[ids({2})] = 2 ^ 64 end,
      function(a) a:fill_(2 ^ 63) end, function(a) a:masked_fill_(m, math.huge) end,
      function(a) return a:masked_fill(m, 0 / 0) end,
    }
    for i, w in ipairs(bad_writes) do
      local a = I()
      local ok, err = pcall(w, a)
      assert.is_false(ok, "write " .. i)
      assert.matches(fits, err)
      assert.matches("indexing_spec.lua:%d+:", err) -- at the caller's line
      assert.same({1, 2, 3}, a:totable(), "write " .. i .. " changed nothing")
    end
    assert.matches("value nan does", select(2, pcall(function() I()[1] = 0 / 0 end)))
    local a = I()
    a[1] = -2.7 -- truncates toward zero like torch
    a[m] = 9.5
    a[{{2, 2}}] = math.maxinteger
    assert.same({9, math.maxinteger, 9}, a:totable())
    a[m] = (1 << 53) + 1 -- Lua integers stay exact
    assert.same({(1 << 53) + 1, math.maxinteger, (1 << 53) + 1}, a:totable())
    assert.same({(1 << 53) + 1, 2, (1 << 53) + 1}, I():masked_fill(m, (1 << 53) + 1):totable())
    assert.same({(1 << 40) + 1, 2, (1 << 40) + 1}, I():masked_fill_(m, (1 << 40) + 1):totable())
    a:copy_(attn.tensor({1.7, -2.7, 3.2})) -- copy_ converts (torch truncates)
    assert.same({1, -2, 3}, a:totable())
    local b = attn.zeros(4, {dtype = "bool"})
    b[1] = 5
    b[{2}] = 0.5
    b[ids({3})] = 0 / 0
    assert.same({true, true, true, false}, b:totable()) -- nonzero is true
    assert.same({true, false, true}, attn.zeros(3, {dtype = "bool"}):masked_fill(m, 0.5):totable())
  end)
  it("index puts take the tensor's dtype like torch's index_put", function()
    local a = attn.tensor({1, 2, 3}, {dtype = "int64"})
    local m = attn.tensor({true, false, true})
    assert.has_error(function() a[m] = attn.tensor({1.5, 2.5}) end,
      "newindex: index put requires the value's dtype to match the tensor's: got a float32 value for a int64 tensor "
        .. "(convert it with value:to(\"int64\"))")
    a[m] = {4, 5} -- a Lua table takes the tensor's dtype
    a[ids({2})] = attn.tensor(7.9) -- a 0-d value is cast (torch)
    assert.same({4, 7, 5}, a:totable())
    local big = attn.tensor({(1 << 53) + 1, 0, 0}, {dtype = "int64"})
    big[attn.tensor({false, true, true})] = 3 -- the other entries keep their exact values
    assert.same({(1 << 53) + 1, 3, 3}, big:totable())
  end)
  it("a value that does not fit the masked elements is told in torch's words", function()
    local y = attn.zeros(2, 3)
    local mask = attn.tensor({{true, false, true}, {false, true, false}})
    local ok, err = pcall(function() y[mask] = attn.tensor({1.0, 2.0}) end)
    assert.is_false(ok)
    assert.matches("indexing_spec.lua:%d+: newindex: shape mismatch: value tensor of shape %[2%] cannot be "
      .. "broadcast to indexing result of shape %[3%] %(give one value per selected element, or a single value "
      .. "for all%)", err)
    -- torch's rules: rows per true entry, one value for all, or values per element
    y[mask] = attn.tensor({1.0, 2.0, 3.0})
    assert.same({{1, 0, 2}, {0, 3, 0}}, y:totable())
    y[attn.tensor({false, true})] = attn.tensor({7.0, 8.0, 9.0})
    assert.same({{1, 0, 2}, {7, 8, 9}}, y:totable())
    assert.has_error(function() y[attn.tensor({true, false})] = attn.tensor({1.0, 2.0}) end,
      "newindex: shape mismatch: value tensor of shape [2] cannot be broadcast to indexing result of shape [1,3] "
        .. "(give one value per selected element, or a single value for all)")
    assert.has_error(function() y[ids({1, 2, 1})] = attn.ones(2) end)
  end)
  it("a 0/1 float or int64 tensor used as an index says masks must be bool", function()
    local x = attn.arange(3.0)
    for _, m in ipairs({attn.tensor({1.0, 0.0, 1.0}), attn.tensor({1, 0, 1}, {dtype = "int64"})}) do
      local ok, err = pcall(function() return x[m] end)
      assert.is_false(ok)
      assert.matches("indexing_spec.lua:%d+: index: the %a+%d* index tensor holds 0s and 1s and is read as 1%-based "
        .. "ids %(0 is out of range%): a mask must be a bool tensor, write t%[mask:bool%(%)%]", err)
      ok, err = pcall(function() x[m] = 0 end)
      assert.matches("newindex: the .* a mask must be a bool tensor", err)
      assert.same({0, 2}, x[m:bool()]:totable())
    end
    assert.same({0, 0}, x[attn.tensor({1.0, 1.0})]:totable()) -- 1s alone are ids
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
