-- SPDX-License-Identifier: MIT
-- Dtypes (issue 15): int64 and bool tensors beside float32, against torch
-- 1.13 (spec/fixtures/dtype.lua, scripts/fixtures/gen_dtype.py): type
-- promotion, integer arithmetic, comparisons and logical ops giving bool,
-- reductions of integers and bools, conversions, masks, printing, and the
-- Lua API (dtype objects, :long()/:bool()/:float()/:to(), creation options).
local attn = require "attn"
local fixture = require "support.fixture"

local FIX = fixture.load("dtype")

local A_I = attn.tensor({{3, -7, 0}, {12, 5, -2}}, {dtype = "int64"})
local A_F = attn.tensor({{0.5, -1.25, 2.0}, {3.0, -0.75, 1.5}})
local A_B = attn.tensor({{true, false, true}, {false, false, true}})
local BIG = attn.tensor({(1 << 53) + 1, -(1 << 62), 7}, {dtype = "int64"})
local SPECIAL = attn.tensor({0.0, 0 / 0, math.huge, -math.huge, -2.5})
local function I(rows) return attn.tensor(rows, {dtype = "int64"}) end

-- The attn side of every fixture case, same names as gen_dtype.py.
local ops = {
  add_i_f = function() return A_I + A_F end,
  mul_i_int = function() return A_I * 3 end,
  mul_i_float = function() return A_I * 2.0 end,
  div_i_int = function() return A_I / 2 end,
  sub_i_i = function() return A_I - A_I:flip(2) end,
  add_b_b = function() return A_B + A_B:flip(2) end,
  mul_b_b = function() return A_B * A_B:flip(2) end,
  add_b_i = function() return A_B + A_I end,
  add_b_int = function() return A_B + 1 end,
  mul_b_f = function() return A_B * A_F end,
  exp_i = function() return A_I:exp() end,
  sigmoid_b = function() return A_B:sigmoid() end,
  floordiv_i_int = function() return A_I // 4 end,
  rem_i_int = function() return A_I % 4 end,
  rem_i_neg = function() return A_I % -4 end,
  floordiv_i_i = function() return A_I // I({5, -3, 2}) end,
  rem_f_float = function() return attn.remainder(A_F, 0.7) end,
  floordiv_f_float = function() return A_F // 0.7 end,
  neg_i = function() return -A_I end,
  abs_i = function() return A_I:abs() end,
  maximum_i_i = function() return attn.maximum(A_I, I({1, 1, 1})) end,
  minimum_i_f = function() return attn.minimum(A_I, A_F) end,
  pow_i_int = function() return A_I:abs() ^ 2 end,
  pow_int_i = function() return 2 ^ attn.arange(5) end,
  pow_i_float = function() return A_I ^ 0.5 end,
  big_add = function() return BIG + 1 end,
  big_mul = function() return BIG * 2 end,
  gt_i_int = function() return A_I:gt(2) end,
  le_f_i = function() return A_F:le(A_I) end,
  eq_big = function() return BIG:eq((1 << 53) + 1) end,
  ne_b_b = function() return A_B:ne(A_B:flip(2)) end,
  lt_f_float = function() return A_F:lt(0.75) end,
  logical_and = function() return attn.logical_and(A_B, A_I) end,
  logical_or = function() return attn.logical_or(A_B, A_F:gt(1)) end,
  logical_xor = function() return attn.logical_xor(A_B, A_I) end,
  logical_not = function() return attn.logical_not(A_I) end,
  isnan = function() return SPECIAL:isnan() end,
  isinf = function() return SPECIAL:isinf() end,
  isfinite = function() return SPECIAL:isfinite() end,
  isnan_i = function() return A_I:isnan() end,
  sum_b = function() return A_B:sum() end,
  sum_b_dim = function() return A_B:sum(2) end,
  sum_i = function() return A_I:sum() end,
  sum_i_dim0 = function() return A_I:sum(1) end,
  prod_i_dim1 = function() return A_I:prod(2) end,
  sum_big = function() return BIG:sum() end,
  max_i = function() return A_I:max() end,
  min_i_dim1 = function() return (A_I:min(2)) end,
  min_i_dim1_idx = function() return select(2, A_I:min(2)) end,
  max_f_dim1_idx = function() return select(2, A_F:max(2)) end,
  argmax_f = function() return A_F:argmax() end,
  argmax_f_dim1 = function() return A_F:argmax(2) end,
  argmin_i_dim0 = function() return A_I:argmin(1) end,
  any_b_dim1 = function() return A_B:any(2) end,
  all_b_dim0 = function() return A_B:all(1) end,
  any_f = function() return A_F:gt(2.5):any() end,
  all_i = function() return A_I:all() end,
  cumsum_i = function() return A_I:cumsum(2) end,
  cumsum_b = function() return A_B:cumsum(1) end,
  long_f = function() return A_F:long() end,
  bool_f = function() return A_F:bool() end,
  bool_i = function() return A_I:bool() end,
  float_b = function() return A_B:float() end,
  long_b = function() return A_B:long() end,
  where_b_i_int = function() return attn.where(A_B, A_I, -1) end,
  where_b_f_i = function() return attn.where(A_B, A_F, A_I) end,
  masked_fill_i = function() return A_I:masked_fill(A_B, 9) end,
  masked_fill_f = function() return A_F:masked_fill(A_B, -3.5) end,
  masked_fill_b = function() return A_B:masked_fill(A_I:gt(4), true) end,
  cat_i_f = function() return attn.cat({A_I, A_F}) end,
  cat_i_b = function() return attn.cat({A_I, A_B}, 2) end,
  stack_b = function() return attn.stack({A_B, A_B:flip(1)}) end,
  index_select_i = function() return A_I:index_select(2, {3, 1}) end,
  gather_i = function() return A_I:gather(2, {{3, 3}, {1, 2}}) end,
  tril_b = function() return attn.ones(3, 3, {dtype = "bool"}):tril() end,
  triu_i = function() return A_I:triu(1) end,
  transpose_i = function() return A_I:t():contiguous() end,
  repeat_b = function() return A_B["repeat"](A_B, 2, 1) end,
  flip_i = function() return A_I:flip(2) end,
  arange_int = function() return attn.arange(5) end,
  arange_step = function() return attn.arange(1, 10, 3) end,
  arange_neg = function() return attn.arange(5, -4, -2) end,
  arange_float = function() return attn.arange(0.0, 3) end,
  zeros_i = function() return attn.zeros(2, 2, {dtype = "int64"}) end,
  ones_b = function() return attn.ones(3, {dtype = attn.bool}) end,
  full_b = function() return attn.full({2}, true) end,
}

describe("dtypes against torch", function()
  for _, c in ipairs(FIX.cases) do
    it(c.name, function()
      local op = ops[c.name]
      assert(op, "no attn side for fixture case " .. c.name)
      fixture.assert_equal(op(), c.out, c.name)
    end)
  end
  it("covers every attn case with a fixture", function()
    local seen = {}
    for _, c in ipairs(FIX.cases) do seen[c.name] = true end
    for name in pairs(ops) do assert(seen[name], "no fixture for " .. name) end
  end)
end)

describe("dtype printing follows torch", function()
  local values = {
    a_i = A_I, a_b = A_B, big = BIG, big_neg = I({-1, 100000}),
    scalar_i = attn.tensor(5, {dtype = "int64"}), scalar_b = attn.tensor(true),
    scalar_neg = attn.tensor(-12, {dtype = "int64"}),
    empty_i = attn.zeros(0, {dtype = "int64"}), empty_b = attn.zeros(0, {dtype = "bool"}),
    empty_2d_i = attn.zeros(2, 0, {dtype = "int64"}),
    arange_2000 = attn.arange(2000), bool_2000 = (attn.arange(2000) % 3):eq(0),
    wrap = attn.arange(40) * 1000, wrap_b = (attn.arange(30) % 2):eq(0),
    three_d = attn.arange(24):reshape(2, 3, 4) - 10,
    bool_3d = (attn.arange(12) % 5):eq(0):reshape(2, 3, 2),
    summarised_2d = attn.arange(3000):reshape(50, 60),
  }
  for _, p in ipairs(FIX.prints) do
    it(p.name, function()
      local want = p.repr:gsub("dtype=torch%.", "dtype=attn.")
      assert.are.equal(want, tostring(values[p.name]))
    end)
  end
end)

describe("dtype objects", function()
  it("print as attn.<name>, compare by identity and are callable", function()
    assert.are.equal("attn.int64", tostring(attn.int64))
    assert.are.equal("attn.bool", tostring(attn.bool))
    assert.are.equal("attn.float32", tostring(attn.float32))
    assert.are.equal(attn.int64, attn.long)
    assert.are.equal(attn.float32, attn.float)
    assert.are.equal(attn.int64, A_I.dtype)
    assert.are.equal(attn.int64, A_I:dtype()) -- x:dtype() calls the dtype object
    assert.are_not.equal(attn.int64, A_F.dtype)
    assert.is_false(attn.int64.is_floating_point)
    assert.is_true(attn.float32.is_floating_point)
    assert.are.equal(8, attn.int64.itemsize)
    assert.are.equal(1, A_B:element_size())
  end)
  it("convert with long/bool/float/to/type_as", function()
    assert.are.equal(A_I, A_I:long()) -- same dtype: the tensor itself, like torch
    assert.are.equal(attn.float32, A_I:to("float32").dtype)
    assert.are.equal(attn.bool, A_I:to(attn.bool).dtype)
    assert.are.equal(attn.int64, A_F:to(A_I).dtype)
    assert.are.equal(attn.int64, A_F:type_as(A_I).dtype)
    assert.are.equal(attn.float32, A_B:to("float").dtype)
    assert.are_not.equal(A_I, A_I:to("int64", {copy = true}))
    assert.has_error(function() A_I:to("int32") end,
      "to: unknown dtype 'int32' (expected \"float32\", \"int64\", \"bool\", or the storage dtypes "
        .. "\"float16\", \"bfloat16\", \"float64\")")
    assert.is_true(A_F:is_floating_point())
    assert.is_false(A_I:is_floating_point())
  end)
end)

describe("dtype creation", function()
  it("infers torch's dtype from Lua numbers and takes {dtype = }", function()
    assert.are.equal(attn.int64, attn.tensor({1, 2}).dtype) -- Lua integers, like torch.tensor([1, 2])
    assert.are.equal(attn.float32, attn.tensor({1.0, 2}).dtype)
    assert.are.equal(attn.float32, attn.tensor({1, 2}, {dtype = "float32"}).dtype)
    assert.are.equal(attn.float32, attn.zeros(2).dtype)
    assert.are.equal(attn.int64, attn.zeros(2, {dtype = "int64"}).dtype)
    assert.are.equal(attn.int64, attn.ones({2, 2}, {dtype = "long"}).dtype)
    assert.are.equal(attn.bool, attn.empty(3, {dtype = "bool"}).dtype)
    assert.are.equal(attn.int64, attn.full({2}, 7, {dtype = "int64"}).dtype)
    assert.are.equal(attn.int64, attn.zeros_like(A_I).dtype) -- *_like keep the dtype (torch)
    assert.are.equal(attn.float32, attn.ones_like(A_I, {dtype = "float32"}).dtype)
    assert.are.equal(attn.bool, attn.tensor({{true}, {false}}).dtype)
    assert.are.equal(attn.bool, attn.tensor(true).dtype)
    assert.are.equal(attn.int64, attn.tensor({true, 2}).dtype) -- mixed: torch.tensor([True, 2]) is int64
    assert.are.equal(attn.float32, attn.tensor({true, 2.5}).dtype)
  end)
  it("gives int64 for integer arange, randint, randperm, multinomial and argmax", function()
    assert.are.equal(attn.int64, attn.arange(3).dtype)
    assert.are.equal(attn.float32, attn.arange(3.0).dtype)
    assert.are.equal(attn.float32, attn.arange(0, 1, 0.25).dtype)
    assert.are.equal(attn.float32, attn.arange(3, {dtype = "float32"}).dtype)
    assert.are.equal(attn.int64, attn.randint(0, 10, {4}).dtype)
    assert.are.equal(attn.int64, attn.randperm(4).dtype)
    assert.are.equal(attn.int64, attn.multinomial(attn.ones(4), 2).dtype)
    assert.are.equal(attn.int64, attn.randn(3, 4):argmax(2).dtype)
  end)
  it("keeps int64 ids exact beyond 2^24 and 2^53", function()
    local ids = attn.tensor({(1 << 24) + 1, (1 << 53) + 1, 9007199254740993}, {dtype = "int64"})
    local t = ids:totable()
    assert.are.equal(16777217, t[1])
    assert.are.equal(9007199254740993, t[2])
    assert.are.equal(math.type(t[3]), "integer")
    assert.are.equal(9007199254740994, (ids + 1):totable()[2])
    assert.are.equal(16777217, ids[1])
  end)
end)

describe("dtype rules", function()
  it("only float tensors can require grad", function()
    assert.has_error(function() A_I:clone():requires_grad_() end,
      "requires_grad_: only floating point tensors can require gradients (got int64)")
    assert.has_error(function() attn.zeros(2, {dtype = "bool"}).requires_grad = true end)
  end)
  it("float-only kernels name the function and the dtype", function()
    assert.has_error(function() A_I:softmax(2) end, "softmax: expected a floating tensor, got int64")
    assert.has_error(function() attn.matmul(A_I, A_I:t()) end, "matmul: expected a floating tensor, got int64")
    assert.has_error(function() attn.randn(2, 3):matmul(A_B:t()) end, "matmul: expected a floating tensor, got bool")
  end)
  it("int and bool inputs of differentiable ops carry no gradient", function()
    local w = attn.randn(2, 3):requires_grad_()
    local y = (w * A_I + A_B):sum()
    y:backward()
    assert.same(A_I:float():totable(), w.grad:totable())
  end)
  it("refuses in-place writes that torch cannot cast", function()
    assert.has_error(function() A_I:clone():add_(0.5) end)
    local x = A_I:clone()
    x:add_(2)
    assert.same({{5, -5, 2}, {14, 7, 0}}, x:totable())
    local b = A_B:clone()
    b:fill_(true)
    assert.same({{true, true, true}, {true, true, true}}, b:totable())
  end)
  it("item and totable give Lua integers and booleans", function()
    assert.are.equal("integer", math.type(A_I:sum():item()))
    assert.are.equal(true, A_B:any():item())
    assert.are.equal(false, A_B:all():item())
    assert.same({{3, -7, 0}, {12, 5, -2}}, A_I:totable())
  end)
  it("integer division by zero raises", function()
    assert.has_error(function() return A_I // 0 end, "floor_divide: integer division by zero")
    assert.has_error(function() return A_I % 0 end, "remainder: integer division by zero")
  end)
  it("'<' and '<=' on tensors raise and say what to write", function()
    assert.has_error(function() return A_F < 0 end)
    local ok, err = pcall(function() return A_F <= A_F end)
    assert.is_false(ok)
    assert.matches("x:le%(y%)", err)
    ok, err = pcall(function() return 0 < A_F end)
    assert.matches("x:gt%(0%)", err)
  end)
end)
