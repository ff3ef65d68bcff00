-- SPDX-License-Identifier: MIT
-- The ops of src/lua/ops.c and lua/attn/ops.lua against torch 1.13
-- (fixtures from scripts/fixtures/gen_ops.py: outputs to 1e-5, gradients
-- to 1e-4; indices 1-based), gradchecks of every backward, and the errors.
local attn = require "attn"
local fx = require "support.fixture"
local F = attn.F

-- The attn side of each fixture case: inputs in the fixture's order
-- (index inputs already 1-based) -> the outputs, in torch's order.
local OPS = {
  sort_last = function(x) return x:sort() end,
  sort_dim1_desc = function(x) return x:sort(1, true) end,
  sort_kw = function(x) return x:sort{dim = 2, stable = true} end,
  sort_ties_nan = function(x) return attn.sort(x) end,
  sort_ties_nan_desc = function(x) return x:sort{descending = true} end,
  argsort = function(x) return x:argsort(2, true) end,
  argsort_default = function(x) return attn.argsort(x) end,
  topk = function(x) return x:topk(3) end,
  topk_dim1_smallest = function(x) return x:topk(2, 1, false) end,
  topk_kw = function(x) return x:topk(2, {dim = 2, largest = false}) end,
  topk_1d = function(x) return attn.topk(x, 4) end,
  kthvalue = function(x) return x:kthvalue(2) end,
  kthvalue_keepdim = function(x) return x:kthvalue(3, {dim = 1, keepdim = true}) end,
  scatter_src = function(s, i, b) return s:scatter(1, i, b) end,
  scatter_value = function(s, i) return s:scatter(2, i, 2.5) end,
  scatter_add = function(s, i, b) return attn.scatter_add(s, 1, i, b) end,
  scatter_reduce_prod = function(s, i, b) return s:scatter_reduce(2, i, b, "prod") end,
  index_add = function(s, i, b) return s:index_add(1, i, b, {alpha = 2}) end,
  index_copy = function(s, i, b) return s:index_copy(2, i, b) end,
  index_fill = function(s, i) return s:index_fill(2, i, -1.5) end,
  nonzero = function(z) return z:nonzero() end,
  nonzero_3d = function(z) return attn.nonzero(z) end,
  where_one_arg = function(z) return attn.where(z) end,
  masked_select = function(x, m) return x:masked_select(m) end,
  bucketize = function(v, b) return attn.bucketize(v, b) end,
  bucketize_right = function(v, b) return attn.bucketize(v, b, {right = true}) end,
  pad_const = function(x) return F.pad(x, {2, 1}) end,
  pad_const_value_2d = function(x) return F.pad(x, {1, 0, 2, 3}, "constant", -2.5) end,
  pad_const_negative = function(x) return F.pad(x, {-1, 2, 0, -1}) end,
  pad_const_3dims = function(x) return F.pad(x, {1, 1, 0, 2, 1, 0}) end,
  pad_reflect_1d = function(x) return F.pad(x, {3, 2}, "reflect") end,
  pad_reflect_2d = function(x) return F.pad(x, {1, 2, 3, 1}, {mode = "reflect"}) end,
  pad_replicate_1d = function(x) return F.pad(x, {2, 3}, "replicate") end,
  pad_replicate_2d = function(x) return F.pad(x, {2, 0, 1, 3}, "replicate") end,
  pad_replicate_3d = function(x) return F.pad(x, {1, 2, 0, 1, 2, 1}, "replicate") end,
  pad_circular_1d = function(x) return F.pad(x, {2, 1}, "circular") end,
  sum_dims = function(x) return x:sum({1, 3}) end,
  sum_dims_keepdim = function(x) return attn.sum(x, {3, 1}, true) end,
  mean_dims = function(x) return x:mean({2, -1}) end,
  mean_dims_keepdim = function(x) return x:mean({1, 2}, true) end,
  amax_dims = function(x) return x:amax({2, 3}) end,
  amax_dim = function(x) return x:amax(1, true) end,
  amin_dims = function(x) return attn.amin(x, {1, 3}) end,
  amax_ties = function(x) return x:amax(2) end,
  amax_all = function(x) return x:amax() end,
  std_dims = function(x) return x:std({1, 3}) end,
  var_dims_keepdim_biased = function(x) return x:var({1, 3}, false, true) end,
  var_correction0_keepdim = function(x) return x:var(2, {correction = 0, keepdim = true}) end,
  std_correction2_all = function(x) return x:std({correction = 2}) end,
  var_positional = function(x) return x:var(3, false) end,
  std_dims_opts = function(x) return attn.std(x, {2, 3}, {correction = 0, keepdim = true}) end,
  var_unbiased_kw = function(x) return x:var(1, {unbiased = false}) end,
  flip = function(x) return x:flip({1, 3}) end,
  roll_flat = function(x) return x:roll(2) end,
  roll_dims = function(x) return x:roll({1, -2}, {1, 2}) end,
  roll_neg_dim = function(x) return attn.roll(x, 7, -1) end,
  diag_vec = function(x) return x:diag() end,
  diag_vec_up = function(x) return attn.diag(x, 1) end,
  diag_vec_down = function(x) return x:diag(-2) end,
  diag_mat = function(x) return attn.diag(x) end,
  diag_mat_up = function(x) return x:diag(1) end,
  diag_mat_down = function(x) return x:diag(-1) end,
  cdist = function(a, b) return attn.cdist(a, b) end,
  cdist_p1 = function(a, b) return attn.cdist(a, b, 1) end,
  cdist_pinf = function(a, b) return a:cdist(b, math.huge) end,
  cdist_batched = function(a, b) return attn.cdist(a, b) end,
  cdist_p3 = function(a, b) return attn.cdist(a, b, {p = 3}) end,
  clamp_tensors = function(x, lo, hi) return x:clamp(lo, hi) end,
  clamp_min_tensor = function(x, lo) return attn.clamp(x, lo) end,
  clamp_max_tensor = function(x, hi) return x:clamp(nil, hi) end,
  normalize = function(x) return F.normalize(x) end,
  normalize_p1_dim0 = function(x) return F.normalize(x, 1, 1) end,
  normalize_pinf_neg = function(x) return F.normalize(x, {p = math.huge, dim = -1}) end,
  normalize_eps = function(x) return F.normalize(x, 2, 2, 0.5) end,
  normalize_3d = function(x) return F.normalize(x, {dim = 3}) end,
  cosine_similarity = function(a, b) return F.cosine_similarity(a, b) end,
  cosine_similarity_bcast = function(a, b) return F.cosine_similarity(a, b, -1) end,
  cosine_similarity_eps = function(a, b) return F.cosine_similarity(a, b, {dim = 2, eps = 1e-3}) end,
  repeat_interleave_flat = function(x) return x:repeat_interleave(2) end,
  repeat_interleave_dim = function(x, r) return x:repeat_interleave(r, 2) end,
  repeat_interleave_counts = function(r) return attn.repeat_interleave(r) end,
}
for _, red in ipairs({"sum", "mean", "amax", "amin"}) do
  OPS["scatter_reduce_" .. red .. "_self"] = function(s, i, b) return s:scatter_reduce(2, i, b, red) end
  OPS["scatter_reduce_" .. red .. "_noself"] = function(s, i, b)
    return s:scatter_reduce(2, i, b, red, {include_self = false})
  end
end
local EINSUM = {
  mm = "ij,jk->ik", bmm = "bij,bjk->bik", diag = "ii->i", trace = "ii", sum_all = "ij->", dot = "i,i->",
  outer = "i,j->ij", transpose = "ij->ji", ellipsis_bcast = "...ij,...jk->...ik", attn_scores = "bhqd,bhkd->bhqk",
  mixed = "ijk,jil->kl", three = "abc,cd,de->abe", hadamard = "ij,ij->ij", implicit = "ij,jk",
  implicit_upper = "Bj,jA", diag_batch = "iij->j", ellipsis_sum = "a...,a->...", bilinear = "bn,anm,bm->ba",
  size1_bcast = "ij,ij->i", implicit_dot = "i,i", sum_one_side = "ij,k->k",
}
for name, eq in pairs(EINSUM) do
  OPS["einsum_" .. name] = function(...) return attn.einsum(eq, ...) end
end

describe("ops against torch 1.13", function()
  local fix = fx.load("ops")

  it("has an attn side for every fixture case and a case for every attn side", function()
    for name in pairs(fix.cases) do assert(OPS[name], "no attn side for fixture case " .. name) end
    for name in pairs(OPS) do assert(fix.cases[name], "no fixture case for " .. name) end
  end)

  local names = {}
  for name in pairs(fix.cases) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    it(name, function()
      local c = fix.cases[name]
      local inputs = {}
      for i, f in ipairs(c.inputs) do
        inputs[i] = fx.tensor(f)
        if c.grads and c.grads[i] then inputs[i]:requires_grad_(true) end
      end
      local outs = table.pack(OPS[name](table.unpack(inputs, 1, #c.inputs)))
      assert.are.equal(#c.outs, outs.n, name .. ": number of results")
      for k = 1, #c.outs do fx.assert_close(outs[k], c.outs[k], 1e-5, 1e-5, name .. " out " .. k) end
      if c.grads then
        (outs[1] * fx.tensor(c.gout)):sum():backward()
        for i = 1, #c.inputs do
          if c.grads[i] then
            assert(inputs[i].grad, name .. ": input " .. i .. " got no gradient")
            fx.assert_close(inputs[i].grad, c.grads[i], 1e-4, 1e-4, name .. " grad " .. i)
          end
        end
      end
    end)
  end
end)

describe("ops gradcheck", function()
  local gradcheck = attn.gradcheck
  local function leaf(t) return t:detach():requires_grad_(true) end
  -- distinct values 0.25 apart: no ties within eps
  local distinct = require("support.fixture").distinct
  before_each(function() attn.manual_seed(7) end)

  it("sort, topk, kthvalue", function()
    assert.is_true(gradcheck(function(x) return (x:sort(2, true)) end, {distinct(3, 4)}))
    assert.is_true(gradcheck(function(x) return (x:topk(2, 1)) end, {distinct(3, 4)}))
    assert.is_true(gradcheck(function(x) return (x:kthvalue(2, 2)) end, {distinct(3, 4)}))
  end)

  it("scatter family", function()
    local idx = attn.tensor{{1.0, 3.0}, {2.0, 1.0}, {3.0, 2.0}}
    assert.is_true(gradcheck(function(s, b) return s:scatter(2, idx, b) end,
      {leaf(attn.randn(3, 4)), leaf(attn.randn(3, 2))}))
    local dup = attn.tensor{{1.0, 1.0, 3.0}, {2.0, 2.0, 2.0}}
    assert.is_true(gradcheck(function(s, b) return s:scatter_add(2, dup, b) end,
      {leaf(attn.randn(2, 4)), leaf(attn.randn(2, 3))}))
    for _, red in ipairs({"sum", "mean", "amax", "amin"}) do
      for _, inc in ipairs({true, false}) do
        assert.is_true(gradcheck(function(s, b) return s:scatter_reduce(2, dup, b, red, inc) end,
          {distinct(2, 4), distinct(2, 3)}))
      end
    end
  end)

  it("index_add, index_copy, index_fill, masked_select", function()
    local i = attn.tensor{3.0, 1.0}
    assert.is_true(gradcheck(function(s, b) return s:index_add(1, i, b, 0.5) end,
      {leaf(attn.randn(3, 2)), leaf(attn.randn(2, 2))}))
    assert.is_true(gradcheck(function(s, b) return s:index_copy(1, i, b) end,
      {leaf(attn.randn(3, 2)), leaf(attn.randn(2, 2))}))
    assert.is_true(gradcheck(function(s) return s:index_fill(2, {2}, 3) end, {leaf(attn.randn(3, 2))}))
    local m = attn.tensor{{1.0, 0.0, 1.0}}
    assert.is_true(gradcheck(function(x) return x:masked_select(m) end, {leaf(attn.randn(2, 3))}))
  end)

  it("einsum, pad, roll, diag, cdist, repeat_interleave", function()
    assert.is_true(gradcheck(function(a, b, c) return attn.einsum("bij,jk,bk->bi", a, b, c) end,
      {leaf(attn.randn(2, 3, 4)), leaf(attn.randn(4, 2)), leaf(attn.randn(2, 2))}))
    assert.is_true(gradcheck(function(a) return attn.einsum("iij->ji", a) end, {leaf(attn.randn(3, 3, 2))}))
    for _, mode in ipairs({"constant", "reflect", "replicate", "circular"}) do
      assert.is_true(gradcheck(function(x) return F.pad(x, {2, 1, 1, 2}, mode) end, {leaf(attn.randn(1, 3, 4))}))
    end
    assert.is_true(gradcheck(function(x) return x:roll({1, 2}, {1, 2}) end, {leaf(attn.randn(3, 4))}))
    assert.is_true(gradcheck(function(x) return x:diag(1) end, {leaf(attn.randn(3))}))
    assert.is_true(gradcheck(function(x) return x:diag(-1) end, {leaf(attn.randn(3, 4))}))
    assert.is_true(gradcheck(function(a, b) return attn.cdist(a, b) end,
      {leaf(attn.randn(3, 2)), leaf(attn.randn(2, 2) + 3)}))
    assert.is_true(gradcheck(function(x) return x:repeat_interleave({2, 1, 3}, 1) end, {leaf(attn.randn(3, 2))}))
  end)

  it("multi-dim reductions, std/var options, amax, clamp with tensors, normalize, cosine_similarity", function()
    assert.is_true(gradcheck(function(x) return x:sum({1, 3}) end, {leaf(attn.randn(2, 3, 2))}))
    assert.is_true(gradcheck(function(x) return x:mean({1, 3}, true) end, {leaf(attn.randn(2, 3, 2))}))
    assert.is_true(gradcheck(function(x) return x:var({1, 3}, {correction = 0}) end, {leaf(attn.randn(2, 3, 2))}))
    assert.is_true(gradcheck(function(x) return x:std({2, 3}, {keepdim = true}) end, {leaf(attn.randn(2, 3, 2))}))
    assert.is_true(gradcheck(function(x) return x:amax({1, 2}) end, {distinct(2, 3, 2)}))
    assert.is_true(gradcheck(function(x) return x:amin(3, true) end, {distinct(2, 3, 2)}))
    local lo, hi = attn.tensor{-0.5, 0.35}, attn.tensor{{0.6}, {1.05}, {0.15}}
    assert.is_true(gradcheck(function(x, a, b) return x:clamp(a, b) end,
      {leaf(attn.tensor{{-1.0, 0.1}, {0.7, 2.0}, {0.05, -0.3}}), leaf(lo), leaf(hi)}))
    assert.is_true(gradcheck(function(x) return F.normalize(x, {dim = 1}) end, {leaf(attn.randn(3, 2))}))
    assert.is_true(gradcheck(function(a, b) return F.cosine_similarity(a, b) end,
      {leaf(attn.randn(3, 4)), leaf(attn.randn(3, 4))}))
  end)
end)

describe("ops behaviour", function()
  it("returns 1-based indices that index the input", function()
    local x = attn.tensor{{3.0, 1.0, 2.0}, {0.0, 9.0, -1.0}}
    local v, i = x:topk(1)
    assert.are.same({{3}, {9}}, v:totable())
    assert.are.same({{1}, {2}}, i:totable())
    assert.are.same(v:totable(), x:gather(2, i):totable())
    local sv, si = x:sort(2)
    assert.are.same(sv:totable(), x:gather(2, si):totable())
    assert.are.same(x:argsort(2):totable(), si:totable())
  end)

  it("gives int64 indices, takes int64 or float indices and bool masks, and refuses non-float data to scatter", function()
    local x = attn.tensor{{3.5, 1.0, 2.0}, {0.0, 9.0, -1.0}}
    local _, i = x:topk(2)
    assert.are.equal("int64", i:dtype().name)
    assert.are.equal("int64", x:argsort():dtype().name)
    assert.are.equal("int64", x:nonzero():dtype().name)
    assert.are.equal("int64", attn.bucketize(x, attn.tensor{0.5, 2.5}):dtype().name)
    local m = x:gt(1.5)
    assert.are.equal("bool", m:dtype().name)
    assert.are.same({3.5, 2, 9}, x:masked_select(m):totable())
    local r, c = attn.where(m)
    assert.are.same({1, 1, 2}, r:totable())
    assert.are.same({1, 3, 2}, c:totable())
    local idx64, idxf = attn.tensor({{2}, {1}}, {dtype = "int64"}), attn.tensor{{2.0}, {1.0}}
    assert.are.equal("int64", idx64:dtype().name)
    assert.are.equal("float32", idxf:dtype().name)
    assert.are.same(x:scatter(2, idx64, 7):totable(), x:scatter(2, idxf, 7):totable())
    assert.has_error(function() attn.tensor({{1, 2}}, {dtype = "int64"}):scatter(2, attn.tensor{{1.0}}, 5) end,
      "scatter: self must be a float32 tensor, got int64 (convert it with :float())")
    local v = attn.tensor({3, 1, 2}, {dtype = "int64"}):sort() -- int64 values stay int64
    assert.are.equal("int64", v:dtype().name)
    assert.are.same({1, 2, 3}, v:totable())
  end)

  it("keeps saved indices private: rewriting the returned indices does not change the gradient", function()
    local x = attn.tensor{5.0, 1.0, 3.0}:requires_grad_(true)
    local v, i = x:topk(2)
    i:fill_(1)
    v:sum():backward()
    assert.are.same({1, 0, 1}, x.grad:totable())
  end)

  it("writes in place with the _ forms and returns self", function()
    local t = attn.zeros(2, 3)
    assert.are.equal(t, t:index_fill_(2, {1, 3}, 7))
    assert.are.same({{7, 0, 7}, {7, 0, 7}}, t:totable())
    t:scatter_(2, attn.tensor{{2.0}, {2.0}}, 5)
    assert.are.same({{7, 5, 7}, {7, 5, 7}}, t:totable())
    t:scatter_add_(1, attn.tensor{{1.0, 1.0, 1.0}}, attn.ones(1, 3))
    assert.are.same({{8, 6, 8}, {7, 5, 7}}, t:totable())
    t:index_add_(1, {2}, attn.ones(1, 3), 2)
    assert.are.same({{8, 6, 8}, {9, 7, 9}}, t:totable())
    t:index_copy_(2, {2}, attn.zeros(2, 1))
    assert.are.same({{8, 0, 8}, {9, 0, 9}}, t:totable())
    t:scatter_reduce_(2, attn.tensor{{1.0}, {1.0}}, attn.tensor{{10.0}, {1.0}}, "amax")
    assert.are.same({{10, 0, 8}, {9, 0, 9}}, t:totable())
  end)

  it("follows autograd through the in-place forms and refuses leaves that require grad", function()
    local w = attn.ones(3):requires_grad_(true)
    local y = w * 2
    y:index_fill_(1, {2}, 0)
    y:sum():backward()
    assert.are.same({2, 0, 2}, w.grad:totable())
    assert.has_error(function() w:index_fill_(1, {1}, 0) end)
  end)

  it("takes torch's positional and keyword forms", function()
    local x = attn.tensor{{1.0, 4.0, 2.0}, {3.0, 0.0, 5.0}}
    assert.are.same(x:sort(2, true):totable(), x:sort{dim = 2, descending = true}:totable())
    assert.are.same(x:topk(1, 1, false):totable(), x:topk(1, {dim = 1, largest = false}):totable())
    assert.are.same(x:var(2, false, true):totable(), x:var(2, {correction = 0, keepdim = true}):totable())
    assert.are.same(x:var(2, 0):totable(), x:var(2, {unbiased = false}):totable())
    assert.are.same(x:sum():totable(), x:sum({}):totable())
    assert.are.same({{1, 2}}, attn.nonzero(attn.tensor{{0.0, 1.0}}):totable())
    -- a 0-d input: one [n] tensor of 1-based positions, int64 like every index (torch: (tensor([0]),))
    local col = attn.nonzero(attn.tensor(5.0), {as_tuple = true})
    assert.are.equal("int64", col:dtype().name)
    assert.are.same({1}, col:totable())
    assert.are.same({}, attn.nonzero(attn.tensor(0.0), {as_tuple = true}):totable())
  end)

  it("returns new tensors from pad and roll even when nothing moves (writing them leaves x alone)", function()
    local x = attn.ones(2, 3)
    for _, y in ipairs({F.pad(x, {0, 0}), F.pad(x, {-1, 0}), x:roll(0, 1), x:roll(3, 2)}) do
      y:fill_(5)
      assert.are.same({{1, 1, 1}, {1, 1, 1}}, x:totable())
    end
  end)

  it("einsum takes a list of operands and spaces", function()
    local a, b = attn.randn(2, 3), attn.randn(3, 2)
    local r1 = attn.einsum("ij, jk -> ik", {a, b})
    local r2 = a:matmul(b)
    assert.is_true((r1 - r2):abs():max():item() < 1e-6)
  end)

  it("raises errors that name the function, the argument and the problem", function()
    local x = attn.randn(2, 3)
    -- (each f keeps its call out of tail position, so that the error's
    -- level names this file's line)
    local function msg(f)
      local ok, e = pcall(f)
      assert.is_false(ok)
      return tostring(e)
    end
    assert.matches("topk: k = 4 out of range", msg(function() local r = x:topk(4); return r end))
    assert.matches("kthvalue: k = 0 out of range", msg(function() local r = x:kthvalue(0); return r end))
    assert.matches("sort: unknown option 'dimm'", msg(function() local r = x:sort{dimm = 1}; return r end))
    assert.matches("scatter: index 4 in 'index' out of range %(expected 1..3%)",
      msg(function() local r = x:scatter(2, attn.tensor{{4.0}}, 1); return r end))
    assert.matches("scatter_reduce: reduce must be", msg(function()
      local r = x:scatter_reduce(2, attn.tensor{{1.0}}, attn.ones(1, 1), "max"); return r end))
    assert.matches("index_copy: source %[2,2%] must be self %[2,3%]", msg(function()
      local r = x:index_copy(2, {1}, attn.ones(2, 2)); return r end))
    assert.matches("ops_spec.lua:%d+: einsum: operand 1 has 2 dims but its subscripts name 3",
      msg(function() local r = attn.einsum("ijk->i", x); return r end))
    assert.matches("ops_spec.lua:%d+: einsum: subscript 'j' has size 3 in one operand and 2",
      msg(function() local r = attn.einsum("ij,jk->ik", x, attn.randn(2, 2)); return r end))
    assert.matches("ops_spec.lua:%d+: pad: reflect padding %(3, 0%) must be less than size 3",
      msg(function() local r = F.pad(x, {3, 0}, "reflect"); return r end))
    assert.matches("ops_spec.lua:%d+: pad: mode must be", msg(function() local r = F.pad(x, {1, 1}, "wrap"); return r end))
    assert.matches("ops_spec.lua:%d+: var: unknown option 'ddof'", msg(function() local r = x:var({ddof = 1}); return r end))
    assert.matches("ops_spec.lua:%d+: sum: dim 3 out of range", msg(function() local r = x:sum({1, 3}); return r end))
    assert.matches("ops_spec.lua:%d+: amax: dim 1 appears more than once", msg(function() local r = x:amax({1, -2}); return r end))
    assert.matches("ops_spec.lua:%d+: roll: shifts has 2 entries but dims has 1",
      msg(function() local r = x:roll({1, 2}, {1}); return r end))
    assert.matches("ops_spec.lua:%d+: diag: input must be 1%-d or 2%-d", msg(function() local r = attn.diag(attn.zeros(2, 2, 2)); return r end))
    assert.matches("ops_spec.lua:%d+: cdist: x1 %[2,3%] and x2 %[2,2%] must have the same size",
      msg(function() local r = attn.cdist(x, attn.zeros(2, 2)); return r end))
    assert.matches("bucketize: boundaries must be 1%-d", msg(function() local r = attn.bucketize(x, x); return r end))
  end)
end)
