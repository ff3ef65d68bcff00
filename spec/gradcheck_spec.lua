-- SPDX-License-Identifier: MIT
-- attn.gradcheck itself, then a gradient check (analytic vs central finite
-- differences) of every differentiable op of the core on random,
-- well-conditioned inputs: positive where the op needs it (log, sqrt, pow
-- bases), and a safe distance (>= 0.1, many eps) from kinks and
-- discontinuities (relu, abs, clamp, max/min ties, fmod, floor).
local attn = require "attn"

local function leaf(t) return t:detach():requires_grad_(true) end
local function randn(...) return leaf(attn.randn(...)) end
-- uniform in [lo, hi]
local function uniform(lo, hi, ...) return leaf(attn.rand(...) * (hi - lo) + lo) end
local function pos(...) return uniform(0.5, 2, ...) end
-- random sign, magnitude in [lo, hi]
local function signs(...) return attn.rand(...):lt(0.5) * 2 - 1 end
local function away_raw(lo, hi, ...) return signs(...) * (attn.rand(...) * (hi - lo) + lo) end
local function away(...) return leaf(away_raw(0.2, 1.5, ...)) end
-- b + something at least 0.2 away, broadcast to the given shape
local function separated(b, ...) return leaf(away_raw(0.2, 1.5, ...) + b:detach()) end
-- distinct values 0.25 apart (no ties for max/min/inf-norm)
local distinct = require("support.fixture").distinct
-- k + f with f in [0.1, 0.4]: away from integers and halves
local function fractional(...) return leaf((attn.rand(...) * 6 - 3):floor() + attn.rand(...) * 0.3 + 0.1) end

-- Runs fn once and says whether its outputs record a backward: true,
-- false (none does: the op is not wired yet) or raises when only some do.
local function recording(fn, inputs, nondiff)
  local r = table.pack(fn(table.unpack(inputs)))
  if r.n == 1 and type(r[1]) == "table" then r = r[1] end
  local yes, no = 0, 0
  for i = 1, (r.n or #r) do
    if attn.is_tensor(r[i]) and not (nondiff and nondiff[i]) then
      if r[i].requires_grad then yes = yes + 1 else no = no + 1 end
    end
  end
  assert(yes == 0 or no == 0, "only some of the outputs require grad")
  return yes > 0
end

-- case(name, fn, make_inputs [, opts]); opts.nondiff: output positions
-- that are not differentiable (indices); other opts go to gradcheck.
local cases = {}
local function case(name, fn, make, opts)
  cases[#cases + 1] = {name = name, fn = fn, make = make, opts = opts or {}}
end

---------------------------------------------------------------------------
-- Elementwise binary ops with broadcasting, scalar forms on both sides
local function binary_cases(op, f, domain)
  case(op .. " [3,4] with [4]", f, function() return {domain.a(3, 4), domain.b(4)} end)
  case(op .. " [2,1,3] with [4,1]", f, function() return {domain.a(2, 1, 3), domain.b(4, 1)} end)
  case(op .. " [3,1] with [1,4]", f, function() return {domain.a(3, 1), domain.b(1, 4)} end)
  case(op .. " 0-d with [3]", f, function() return {domain.a(1):reshape({}):detach():requires_grad_(true), domain.b(3)} end)
end

binary_cases("add", function(a, b) return a + b end, {a = randn, b = randn})
binary_cases("sub", function(a, b) return a - b end, {a = randn, b = randn})
binary_cases("mul", function(a, b) return a * b end, {a = randn, b = randn})
binary_cases("div", function(a, b) return a / b end, {a = randn, b = function(...) return away(...) end})
binary_cases("pow", function(a, b) return a ^ b end,
  {a = pos, b = function(...) return uniform(-1.5, 1.5, ...) end})
binary_cases("atan2", function(a, b) return attn.atan2(a, b) end, {a = randn, b = away})
-- maximum/minimum: the first operand kept >= 0.2 away from the second
for _, op in ipairs({"maximum", "minimum"}) do
  local f = function(a, b) return attn[op](a, b) end
  case(op .. " [3,4] with [4]", f, function()
    local b = randn(4)
    return {separated(b, 3, 4), b}
  end)
  case(op .. " [2,3] with [2,1]", f, function()
    local b = randn(2, 1)
    return {separated(b, 2, 3), b}
  end)
  case(op .. " with a scalar on the right", function(a) return attn[op](a, 0.3) end,
    function() return {separated(attn.tensor(0.3), 3, 4)} end)
  case(op .. " with a scalar on the left", function(a) return attn[op](0.3, a) end,
    function() return {separated(attn.tensor(0.3), 3, 4)} end)
end
-- fmod: a = b * (k + f) with f in [0.2, 0.8] keeps a / b off the integers
case("fmod [3,4] with [4]", function(a, b) return attn.fmod(a, b) end, function()
  local b = away_raw(0.5, 1.5, 4)
  local k = (attn.rand(3, 4) * 5 - 2):floor()
  return {leaf(b * (k + attn.rand(3, 4) * 0.6 + 0.2)), leaf(b)}
end)
case("fmod with a scalar on the right", function(a) return attn.fmod(a, 1.5) end, function()
  local k = (attn.rand(3, 4) * 5 - 2):floor()
  return {leaf((k + attn.rand(3, 4) * 0.6 + 0.2) * 1.5)}
end)
case("fmod with a scalar on the left", function(b) return attn.fmod(1.7, b) end, function()
  -- 1.7 / b = k + f, k in {1, 2}, f in [0.2, 0.8]
  local k = (attn.rand(3, 4) * 2):floor() + 1
  return {leaf(signs(3, 4) * 1.7 / (k + attn.rand(3, 4) * 0.6 + 0.2))}
end)

local scalar_forms = {
  {"add", function(a) return a + 1.7 end, function(a) return 1.7 + a end, randn, randn},
  {"sub", function(a) return a - 1.7 end, function(a) return 1.7 - a end, randn, randn},
  {"mul", function(a) return a * 1.7 end, function(a) return 1.7 * a end, randn, randn},
  {"div", function(a) return a / 1.7 end, function(a) return 1.7 / a end, randn, away},
  {"pow", function(a) return a ^ 2.5 end, function(a) return 1.7 ^ a end, pos, randn},
  {"atan2", function(a) return attn.atan2(a, 1.7) end, function(a) return attn.atan2(1.7, a) end, randn, randn},
}
for _, s in ipairs(scalar_forms) do
  case(s[1] .. " with a scalar on the right", s[2], function() return {s[4](3, 4)} end)
  case(s[1] .. " with a scalar on the left", s[3], function() return {s[5](3, 4)} end)
end
case("pow with an integer exponent on negative bases", function(a) return a ^ 3 end, function() return {randn(3, 4)} end)
case("add with alpha", function(a, b) return attn.add(a, b, 0.5) end, function() return {randn(3, 4), randn(4)} end)
case("sub with alpha", function(a, b) return attn.sub(a, b, 2) end, function() return {randn(3, 4), randn(3, 1)} end)
case("method forms a:add(b), a:mul(b)", function(a, b) return a:add(b):mul(b) end,
  function() return {randn(3, 4), randn(4)} end)

---------------------------------------------------------------------------
-- Unary ops
local unary = {
  {"neg", randn}, {"exp", randn}, {"log", pos}, {"sqrt", pos}, {"rsqrt", pos}, {"tanh", randn},
  {"sigmoid", randn}, {"relu", away}, {"abs", away}, {"sin", randn}, {"cos", randn},
  {"reciprocal", function(...) return leaf(away_raw(0.5, 2, ...)) end}, {"square", randn},
  {"log1p", function(...) return uniform(-0.5, 2, ...) end}, {"expm1", randn}, {"silu", randn},
  {"erf", randn}, {"gelu", randn},
  -- flat almost everywhere: the gradient is zero
  {"sign", away}, {"floor", fractional}, {"ceil", fractional}, {"round", fractional},
}
for _, u in ipairs(unary) do
  case(u[1], function(a) return a[u[1]](a) end, function() return {u[2](3, 4)} end)
end
case("gelu tanh", function(a) return a:gelu("tanh") end, function() return {randn(3, 4)} end)
case("unary on a non-contiguous leaf", function(a) return a:exp() end,
  function() return {leaf(attn.randn(4, 3):t())} end)

-- clamp: magnitudes in [0.1, 0.4] or [0.6, 1.3] keep 0.1 from the bounds +-0.5
local function clamp_input()
  local u = attn.rand(3, 4)
  local m = attn.where(attn.rand(3, 4):lt(0.5), u * 0.3 + 0.1, u * 0.7 + 0.6)
  return leaf(signs(3, 4) * m)
end
case("clamp(min, max)", function(a) return a:clamp(-0.5, 0.5) end, function() return {clamp_input()} end)
case("clamp(min)", function(a) return a:clamp(-0.3) end, function() return {separated(attn.tensor(-0.3), 3, 4)} end)
case("clamp(nil, max)", function(a) return a:clamp(nil, 0.4) end, function() return {separated(attn.tensor(0.4), 3, 4)} end)
case("where with broadcasting", function(c, a, b) return attn.where(c, a, b) end,
  function() return {attn.rand(3, 4):lt(0.5), randn(3, 4), randn(4)} end)
case("where with a broadcast condition", function(c, a, b) return attn.where(c, a, b) end,
  function() return {attn.tensor({{1.0}, {0.0}, {1.0}}), randn(1, 4), randn(3, 4)} end)
case("masked_fill with a broadcast mask", function(x, m) return x:masked_fill(m, -1.5) end,
  function() return {randn(3, 4), attn.tensor({{1.0, 0.0, 0.0, 1.0}})} end)
case("masked_fill with a full mask", function(x, m) return x:masked_fill(m, 2) end,
  function() return {randn(3, 4), attn.rand(3, 4):lt(0.5)} end)

---------------------------------------------------------------------------
-- Products
local mm_shapes = {
  {"1-d x 1-d", {4}, {4}}, {"2-d x 1-d", {3, 4}, {4}}, {"1-d x 2-d", {4}, {4, 2}},
  {"2-d x 2-d", {3, 4}, {4, 2}}, {"batched 3-d x 3-d", {2, 3, 4}, {2, 4, 2}},
  {"3-d x 2-d", {2, 3, 4}, {4, 2}}, {"2-d x 3-d", {3, 4}, {2, 4, 2}}, {"3-d x 1-d", {2, 3, 4}, {4}},
  {"1-d x 3-d", {4}, {2, 4, 3}}, {"broadcast 4-d x 3-d", {2, 1, 3, 4}, {3, 4, 2}},
}
for _, s in ipairs(mm_shapes) do
  case("matmul " .. s[1], attn.matmul, function() return {randn(s[2]), randn(s[3])} end)
end
case("matmul with transposed operands", function(a, b) return a:t():matmul(b:t()) end,
  function() return {randn(4, 3), randn(2, 4)} end)
case("matmul of non-contiguous leaves", attn.matmul,
  function() return {leaf(attn.randn(4, 3):t()), leaf(attn.randn(2, 4):t())} end)
case("matmul with a transposed batch operand", function(a, b) return a:matmul(b:transpose(2, 3)) end,
  function() return {randn(2, 3, 4), randn(2, 2, 4)} end)
case("mm", attn.mm, function() return {randn(3, 4), randn(4, 2)} end)
case("mm with a transposed right operand", function(a, b) return attn.mm(a, b:t()) end,
  function() return {randn(3, 4), randn(2, 4)} end)
case("bmm", attn.bmm, function() return {randn(2, 3, 4), randn(2, 4, 2)} end)
case("dot", attn.dot, function() return {randn(5), randn(5)} end)
case("outer", attn.outer, function() return {randn(3), randn(4)} end)

---------------------------------------------------------------------------
-- softmax, reductions
for _, d in ipairs({1, 2, -1}) do
  case("softmax dim " .. d, function(x) return x:softmax(d) end, function() return {randn(3, 4)} end)
  case("log_softmax dim " .. d, function(x) return x:log_softmax(d) end, function() return {randn(3, 4)} end)
end
case("softmax 3-d middle dim", function(x) return x:softmax(2) end, function() return {randn(2, 3, 4)} end)
case("log_softmax 3-d middle dim", function(x) return x:log_softmax(2) end, function() return {randn(2, 3, 4)} end)
-- LayerNorm's fused op (src/core/ops/norm.c): input, weight and bias; over
-- one and over two trailing dims; without affine parameters
case("layer_norm weight and bias", function(x, w, b) return attn.F.layer_norm(x, 5, w, b) end,
  function() return {randn(3, 5), randn(5), randn(5)} end)
case("layer_norm over [2,3] of a 3-d input", function(x, w, b) return attn.F.layer_norm(x, {2, 3}, w, b, 1e-3) end,
  function() return {randn(2, 2, 3), randn(2, 3), randn(2, 3)} end)
case("layer_norm no affine", function(x) return attn.F.layer_norm(x, 4) end, function() return {randn(3, 4)} end)
case("layer_norm weight only", function(x, w) return attn.F.layer_norm(x, 4, w) end,
  function() return {randn(3, 4), randn(4)} end)
case("softmax after masked_fill with -inf", function(x, m) return x:masked_fill(m, -math.huge):softmax(2) end,
  function() return {randn(3, 4), attn.tensor({{0.0, 1.0, 1.0, 1.0}, {0.0, 0.0, 1.0, 1.0}, {0.0, 0.0, 0.0, 1.0}})} end)
case("attention: softmax(q k^T / sqrt(d)) v, causal mask", function(q, k, v, m)
  local s = q:matmul(k:transpose(-2, -1)) / math.sqrt(4)
  return s:masked_fill(m, -math.huge):softmax(-1):matmul(v)
end, function()
  return {randn(2, 3, 4), randn(2, 3, 4), randn(2, 3, 4), attn.ones(3, 3):triu(1)}
end)

case("sum", function(x) return x:sum() end, function() return {randn(3, 4)} end)
case("sum dim", function(x) return x:sum(2) end, function() return {randn(3, 4)} end)
case("sum dim keepdim", function(x) return x:sum(1, true) end, function() return {randn(3, 4)} end)
case("sum negative dim of 3-d", function(x) return x:sum(-2) end, function() return {randn(2, 3, 4)} end)
case("mean", function(x) return x:mean() end, function() return {randn(3, 4)} end)
case("mean dim", function(x) return x:mean(1) end, function() return {randn(3, 4)} end)
case("mean dim keepdim", function(x) return x:mean(2, true) end, function() return {randn(3, 4)} end)
case("prod", function(x) return x:prod() end, function() return {leaf(away_raw(0.5, 1.5, 3, 4))} end)
case("prod dim", function(x) return x:prod(2) end, function() return {randn(3, 4)} end)
local function with_zeros(...)
  local zeros = {...}
  return function()
    local x = attn.randn(3, 4)
    for _, z in ipairs(zeros) do x[z] = 0 end
    return {leaf(x)}
  end
end
case("prod with a zero", function(x) return x:prod() end, with_zeros({2, 3}))
case("prod dim with a zero", function(x) return x:prod(2) end, with_zeros({2, 3}))
case("prod with two zeros", function(x) return x:prod() end, with_zeros({1, 2}, {1, 4}))
case("prod dim with two zeros in a row", function(x) return x:prod(2) end, with_zeros({1, 2}, {1, 4}))
case("prod dim 1 with zeros", function(x) return x:prod(1) end, with_zeros({1, 2}, {3, 2}, {2, 4}))
case("max", function(x) return x:max() end, function() return {distinct(3, 4)} end)
case("min", function(x) return x:min() end, function() return {distinct(3, 4)} end)
case("max dim (values, indices)", function(x) return x:max(2) end, function() return {distinct(3, 4)} end,
  {nondiff = {[2] = true}})
case("min dim keepdim (values, indices)", function(x) return x:min(1, true) end,
  function() return {distinct(3, 4)} end, {nondiff = {[2] = true}})
case("var", function(x) return x:var() end, function() return {randn(3, 4)} end)
case("var dim", function(x) return x:var(2) end, function() return {randn(3, 4)} end)
case("var dim biased keepdim", function(x) return x:var(1, false, true) end, function() return {randn(3, 4)} end)
case("var correction 2", function(x) return x:var(2, 2) end, function() return {randn(3, 5)} end)
case("std", function(x) return x:std() end, function() return {randn(3, 4)} end)
case("std dim", function(x) return x:std(2) end, function() return {randn(3, 4)} end)
case("std dim biased", function(x) return x:std(1, false) end, function() return {randn(3, 4)} end)
case("norm", function(x) return x:norm() end, function() return {randn(3, 4)} end)
case("norm dim", function(x) return x:norm(2, 2) end, function() return {randn(3, 4)} end)
case("norm p=1 dim", function(x) return x:norm(1, 1) end, function() return {away(3, 4)} end)
case("norm p=3", function(x) return x:norm(3) end, function() return {away(3, 4)} end)
case("norm p=inf dim", function(x) return x:norm(math.huge, 2) end, function() return {distinct(3, 4)} end)
case("logsumexp dim", function(x) return x:logsumexp(2) end, function() return {randn(3, 4)} end)
case("logsumexp dim keepdim", function(x) return x:logsumexp(1, true) end, function() return {randn(3, 4)} end)
case("cumsum dim 1", function(x) return x:cumsum(1) end, function() return {randn(3, 4)} end)
case("cumsum dim 2", function(x) return x:cumsum(2) end, function() return {randn(3, 4)} end)
case("cumsum 3-d", function(x) return x:cumsum(-1) end, function() return {randn(2, 3, 4)} end)

---------------------------------------------------------------------------
-- Views
case("transpose", function(x) return x:transpose(1, 2) end, function() return {randn(3, 4)} end)
case("transpose 3-d", function(x) return x:transpose(1, 3) end, function() return {randn(2, 3, 4)} end)
case("t", function(x) return x:t() end, function() return {randn(3, 4)} end)
case("t of 1-d", function(x) return x:t() end, function() return {randn(4)} end)
case("permute", function(x) return x:permute(3, 1, 2) end, function() return {randn(2, 3, 4)} end)
case("view", function(x) return x:view(4, 3) end, function() return {randn(3, 4)} end)
case("view -1", function(x) return x:view(-1) end, function() return {randn(3, 4)} end)
case("reshape", function(x) return x:reshape(2, 6) end, function() return {randn(3, 4)} end)
case("reshape of a transposed view (copies)", function(x) return x:t():reshape(12) end,
  function() return {randn(3, 4)} end)
case("narrow", function(x) return x:narrow(2, 2, 2) end, function() return {randn(3, 4)} end)
case("slice with a step", function(x) return x:slice(2, 1, 4, 2) end, function() return {randn(3, 4)} end)
case("select", function(x) return x:select(1, 2) end, function() return {randn(3, 4)} end)
case("select last of dim 2", function(x) return x:select(2, -1) end, function() return {randn(3, 4)} end)
case("unsqueeze", function(x) return x:unsqueeze(2) end, function() return {randn(3, 4)} end)
case("squeeze", function(x) return x:squeeze() end, function() return {randn(3, 1, 4)} end)
case("squeeze dim", function(x) return x:squeeze(2) end, function() return {randn(3, 1, 4)} end)
case("expand", function(x) return x:expand(3, 4) end, function() return {randn(3, 1)} end)
case("expand with a new leading dim", function(x) return x:expand(2, 3, 4) end, function() return {randn(3, 4)} end)
case("flatten", function(x) return x:flatten() end, function() return {randn(2, 3, 4)} end)
case("flatten range", function(x) return x:flatten(2, 3) end, function() return {randn(2, 3, 4)} end)
case("contiguous of a transpose", function(x) return x:t():contiguous() end, function() return {randn(3, 4)} end)
case("clone", function(x) return x:clone() end, function() return {randn(3, 4)} end)
case("indexing t[i]", function(x) return x[2] end, function() return {randn(3, 4)} end)
case("indexing t[-1]", function(x) return x[-1] end, function() return {randn(3, 4)} end)
case("indexing t[{i, j}]", function(x) return x[{1, 3}] end, function() return {randn(2, 3, 4)} end)
case("a chain of views", function(x) return x:transpose(1, 2):unsqueeze(1):expand(2, 4, 3):narrow(3, 2, 2) end,
  function() return {randn(3, 4)} end)

---------------------------------------------------------------------------
-- Shape ops
case("cat dim 1", function(a, b, c) return attn.cat({a, b, c}, 1) end,
  function() return {randn(2, 3), randn(1, 3), randn(3, 3)} end)
case("cat dim 2", function(a, b) return attn.cat({a, b}, 2) end, function() return {randn(3, 2), randn(3, 4)} end)
case("cat with a constant", function(a, b) return attn.cat({a, b}, 1) end,
  function() return {randn(2, 3), attn.randn(2, 3)} end)
case("stack dim 1", function(a, b) return attn.stack({a, b}, 1) end, function() return {randn(3, 4), randn(3, 4)} end)
case("stack dim 3", function(a, b) return attn.stack({a, b}, 3) end, function() return {randn(3, 4), randn(3, 4)} end)
case("index_select with repeats", function(x, i) return x:index_select(1, i) end,
  function() return {randn(3, 4), attn.tensor({3.0, 1.0, 3.0, 2.0})} end)
case("index_select dim 2", function(x, i) return x:index_select(2, i) end,
  function() return {randn(3, 4), attn.tensor({2.0, 2.0, 4.0})} end)
case("gather dim 2", function(x, i) return x:gather(2, i) end,
  function() return {randn(3, 4), attn.tensor({{1.0, 1.0, 4.0, 2.0, 1.0}, {3.0, 3.0, 3.0, 2.0, 4.0}, {4.0, 1.0, 2.0, 2.0, 3.0}})} end)
case("gather dim 1", function(x, i) return x:gather(1, i) end,
  function() return {randn(3, 4), attn.tensor({{1, 3, 3, 2}, {3, 3, 1, 1}})} end)
case("split", function(x) return {x:split(3, 2)} end, function() return {randn(3, 4)} end)
case("split sizes", function(x) return {x:split({1, 2}, 1)} end, function() return {randn(3, 4)} end)
case("chunk", function(x) return {x:chunk(2, 2)} end, function() return {randn(3, 4)} end)
case("repeat", function(x) return x:rep(2, 1, 2) end, function() return {randn(3, 2)} end)
case("flip", function(x) return x:flip(1) end, function() return {randn(3, 4)} end)
case("flip two dims", function(x) return x:flip(1, 2) end, function() return {randn(3, 4)} end)
case("tril", function(x) return x:tril() end, function() return {randn(4, 4)} end)
case("triu 1", function(x) return x:triu(1) end, function() return {randn(3, 4)} end)
case("tril -1", function(x) return x:tril(-1) end, function() return {randn(3, 4)} end)
case("embedding with repeated ids", function(w, i) return attn.embedding(w, i) end,
  function() return {randn(5, 3), attn.tensor({{2.0, 5.0, 2.0}, {1.0, 2.0, 4.0}})} end)
case("embedding with padding_idx (not looked up)", function(w, i) return attn.embedding(w, i, 3) end,
  function() return {randn(5, 3), attn.tensor({{2.0, 5.0, 2.0}, {1.0, 2.0, 4.0}})} end)

---------------------------------------------------------------------------
-- Strided layouts: non-contiguous leaves, gradients that arrive transposed
-- (an op's output transposed afterwards) or expanded (a sum afterwards)
local function tleaf(r, c) return leaf(attn.randn(c, r):t()) end -- [r, c], column-major
local strided = {
  {"softmax", function(x) return x:softmax(2) end},
  {"log_softmax", function(x) return x:log_softmax(1) end},
  {"sum dim", function(x) return x:sum(2) end},
  {"mean dim", function(x) return x:mean(1, true) end},
  {"prod dim", function(x) return x:prod(2) end},
  {"var dim", function(x) return x:var(2) end},
  {"std", function(x) return x:std() end},
  {"norm dim", function(x) return x:norm(2, 1) end},
  {"logsumexp", function(x) return x:logsumexp(2) end},
  {"cumsum", function(x) return x:cumsum(2) end},
  {"max dim", function(x) return (x:max(2)) end},
  {"tril", function(x) return x:tril() end},
  {"flip", function(x) return x:flip(2) end},
  {"repeat", function(x) return x:rep(2, 1) end},
  {"index_select", function(x) return x:index_select(2, {3, 1, 3}) end},
  {"gather", function(x) return x:gather(2, attn.tensor({{1.0, 4.0}, {2.0, 2.0}, {4.0, 3.0}})) end},
  {"cat", function(x) return attn.cat({x, x * 2}, 2) end},
  {"stack", function(x) return attn.stack({x, x:exp()}, 2) end},
  {"split", function(x) return {x:split(1, 1)} end},
  {"matmul", function(x) return x:matmul(x:t()) end},
  {"exp", function(x) return x:exp() end},
  {"view after contiguous", function(x) return x:contiguous():view(12) end},
}
for _, s in ipairs(strided) do
  local f = s[2]
  case(s[1] .. " of a non-contiguous leaf", f, function() return {tleaf(3, 4)} end)
  case(s[1] .. ", gradient arriving transposed", function(x)
    local r = f(x)
    if type(r) == "table" then r = r[1] end
    local d = r:dim()
    if d == 0 then return r:expand(2, 3):t() end
    if d == 1 then return r:unsqueeze(2):expand(r:size(1), 2):t() end
    return r:transpose(1, d)
  end, function() return {randn(3, 4)} end)
  case(s[1] .. ", gradient arriving expanded (then sum)", function(x)
    local r = f(x)
    if type(r) == "table" then r = r[1] end
    return r:sum()
  end, function() return {randn(3, 4)} end)
end
case("reductions of an expanded (stride 0) input", function(x)
  local e = x:expand(3, 4)
  return {e:softmax(1), e:var(1), e:cumsum(1), e:prod(1), e:logsumexp(1)}
end, function() return {randn(1, 4)} end)

---------------------------------------------------------------------------

describe("attn.gradcheck", function()
  local function bits(t) return t:reshape(t:numel()):totable() end

  it("passes correct gradients and returns true", function()
    attn.manual_seed(1)
    local x, y = randn(3, 4), randn(4)
    assert.is_true(attn.gradcheck(function(a, b) return a * b + a:exp() end, {x, y}))
    assert.is_true(attn.gradcheck.gradcheck(function(a) return a:tanh() end, {x}))
  end)

  it("reports a wrong gradient naming the input, the element and both values", function()
    attn.manual_seed(2)
    local x = randn(2, 3)
    -- analytic gradient x, true gradient 2x
    local f = function(a) return a * a:detach() end
    local ok, msg = attn.gradcheck(f, {x}, {raise = false})
    assert.is_false(ok)
    assert.matches("input 1", msg, 1, true)
    assert.matches("at element 1 %(index {1,1}%)", msg)
    local v = x:detach()[{1, 1}]
    assert.matches(("analytic %.9g"):format(v), msg, 1, true)
    local num = tonumber(msg:match("numerical (%S+)"))
    assert.is_true(math.abs(num - 2 * v) < 1e-2)
    local ok2, err = pcall(attn.gradcheck, f, {x})
    assert.is_false(ok2)
    assert.matches("gradcheck: gradient mismatch for input 1", err, 1, true)
  end)

  it("finds the wrong element of the wrong input", function()
    attn.manual_seed(3)
    local a, b = randn(4), randn(2, 3)
    -- only b[2][3] gets a wrong (missing) gradient
    local mask = attn.zeros(2, 3)
    mask[{2, 3}] = 1
    local f = function(p, q) return p:sum() + (q * attn.where(mask, q:detach(), q)):sum() end
    local ok, msg = attn.gradcheck(f, {a, b}, {raise = false})
    assert.is_false(ok)
    assert.matches("input 2 (shape [2,3]) at element 6 (index {2,3})", msg, 1, true)
  end)

  it("checks large outputs through a random projection", function()
    attn.manual_seed(4)
    local x = randn(8, 8) -- 64 outputs > full_max
    assert.is_true(attn.gradcheck(function(a) return a:sin() * a end, {x}))
    local ok, msg = attn.gradcheck(function(a) return a * a:detach() end, {x}, {raise = false})
    assert.is_false(ok)
    assert.matches("sum(output * R)", msg, 1, true)
    -- and element by element when asked to
    ok, msg = attn.gradcheck(function(a) return a * a:detach() end, {x}, {raise = false, full_max = 100})
    assert.is_false(ok)
    assert.matches("output element 1", msg, 1, true)
  end)

  it("restores the inputs bit for bit, on success, failure and error", function()
    attn.manual_seed(5)
    local x, y = randn(3, 4), leaf(attn.randn(4, 3):t())
    local bx, by = bits(x), bits(y)
    attn.gradcheck(function(a, b) return a * b end, {x, y})
    assert.are.same(bx, bits(x))
    assert.are.same(by, bits(y))
    attn.gradcheck(function(a, b) return a * b:detach() * b end, {x, y}, {raise = false})
    assert.are.same(bx, bits(x))
    assert.are.same(by, bits(y))
    local calls = 0
    local ok, err = pcall(attn.gradcheck, function(a, b)
      calls = calls + 1
      if calls > 1 then error("boom") end
      return a * b
    end, {x, y})
    assert.is_false(ok)
    assert.matches("boom", err)
    assert.are.same(bx, bits(x))
    assert.is_true(attn.is_grad_enabled())
  end)

  it("leaves the inputs' .grad as it found them", function()
    attn.manual_seed(6)
    local x, y = randn(3), randn(3)
    x.grad = attn.full({3}, 7.0)
    attn.gradcheck(function(a, b) return a * b end, {x, y})
    assert.are.same({7, 7, 7}, x.grad:totable())
    assert.is_nil(y.grad)
  end)

  it("checks only the inputs that require grad", function()
    attn.manual_seed(7)
    local x, c = randn(3), attn.randn(3)
    -- c has a non-zero derivative but no gradient: it is a constant here
    assert.is_true(attn.gradcheck(function(a, b) return a * b end, {x, c}))
  end)

  it("treats outputs that need no grad as constants", function()
    attn.manual_seed(8)
    local x = distinct(3, 4)
    assert.is_true(attn.gradcheck(function(a) return a:argmax(2), a * 2 end, {x}))
  end)

  it("takes one tensor passed twice", function()
    attn.manual_seed(12)
    local x = randn(3)
    assert.is_true(attn.gradcheck(function(a, b) return a * b:exp() end, {x, x}))
  end)

  it("takes 0-d inputs, numbers among the inputs and list outputs", function()
    local x = leaf(attn.tensor(1.3):reshape({}))
    assert.is_true(attn.gradcheck(function(a, k) return {a * a * k, a:exp()} end, {x, 3}))
  end)

  it("works when called under no_grad", function()
    attn.manual_seed(9)
    local x = randn(3)
    attn.no_grad(function()
      assert.is_true(attn.gradcheck(function(a) return a:exp() end, {x}))
      assert.is_false(attn.is_grad_enabled())
    end)
  end)

  it("does not touch attn's random stream", function()
    attn.manual_seed(10)
    local r1 = attn.rand(4):totable()
    attn.manual_seed(10)
    attn.gradcheck(function(a) return a * 2 end, {leaf(attn.ones(40))})
    assert.are.same(r1, attn.rand(4):totable())
  end)

  it("refuses bad calls with clear messages", function()
    local x = randn(3)
    assert.has_error(function() attn.gradcheck(function(a) return a end, {attn.ones(3)}) end,
      "gradcheck: no input requires grad")
    assert.error_matches(function() attn.gradcheck(function(a) return a:detach() end, {x}) end,
      "no output requires grad")
    assert.error_matches(function() attn.gradcheck(function(a) return a end, {x * 2}) end,
      "input 1 requires grad but is not a leaf")
    assert.error_matches(function() attn.gradcheck(function(a) return a end, {x}, {tol = 1}) end,
      "unknown option 'tol'")
  end)

  it("catches embedding's padding row: it gets no gradient although it is read", function()
    attn.manual_seed(11)
    local w, ids = randn(5, 3), attn.tensor({{2.0, 5.0, 2.0}, {1.0, 3.0, 4.0}})
    local ok, msg = attn.gradcheck(function(a, i) return attn.embedding(a, i, 3) end, {w, ids}, {raise = false})
    assert.is_false(ok)
    assert.matches("input 1 (shape [5,3]) at element 7 (index {3,1})", msg, 1, true)
    assert.matches("analytic 0,", msg, 1, true)
  end)
end)

describe("gradcheck of every differentiable op", function()
  for n, c in ipairs(cases) do
    it(c.name, function()
      attn.manual_seed(1000 + n)
      local inputs = c.make()
      if not recording(c.fn, inputs, c.opts.nondiff) then
        pending("backward not recorded yet: " .. c.name)
      end
      local opts = {}
      for k, v in pairs(c.opts) do if k ~= "nondiff" then opts[k] = v end end
      assert.is_true(attn.gradcheck(c.fn, inputs, opts))
    end)
  end
end)
