-- SPDX-License-Identifier: MIT
-- Dtype rules over every tensor op (issue 27, "no silent change"): each op
-- of attn runs on float32, int64 and bool inputs (and pairs of them, and
-- Lua integer/float scalars) and must give torch 1.13's result dtype, or
-- raise where torch raises (spec/fixtures/dtype_rules.lua, written by
-- scripts/fixtures/gen_dtype_rules.py; spec/dtype_spec.lua checks the
-- values of the common cases).  attn has no float64, float16 or bfloat16:
-- they are refused by name (last block).
--
-- The public tensor ops are walked (tensor methods, attn.* and attn.F.*):
-- an op that is neither in OPS nor in EXCLUDED (with its reason) fails,
-- so a new op must say what it does with each dtype.  Where attn differs
-- from torch, the case is listed in GAPS with the reason; a gap that is
-- closed fails too (remove it from GAPS).
local attn = require "attn"
local F = require "attn.functional"
local fixture = require "support.fixture"

local FIX = fixture.load("dtype_rules")

local function I(rows) return attn.tensor(rows, {dtype = "int64"}) end
local X = {
  f = attn.tensor({{0.5, 1.5, 2.0}, {3.0, 1.25, 0.75}}),
  i = I({{1, 5, 2}, {3, 1, 4}}),
  b = attn.tensor({{true, false, true}, {false, true, true}}),
}
local Y = {
  f = attn.tensor({{1.5, 0.25, 2.5}, {0.5, 2.0, 1.0}}),
  i = I({{2, 1, 3}, {1, 2, 2}}),
  b = attn.tensor({{true, true, false}, {false, true, false}}),
  int = 2,
  float = 2.5,
}
local MASK = attn.tensor({{true, false, true}, {false, true, false}})
local IDX = I({{3, 1, 2}, {2, 2, 1}}) -- gen_dtype_rules.py's IDX + 1
local function sq(x) return attn.cat({x, x:narrow(1, 1, 1)}) end
local function row1(x) return x:select(1, 1) end

-- The attn side of every fixture op (same keys as gen_dtype_rules.py's OPS).
local OPS = {
  abs = function(x) return x:abs() end, ceil = function(x) return x:ceil() end,
  cos = function(x) return x:cos() end, erf = function(x) return x:erf() end,
  exp = function(x) return x:exp() end, expm1 = function(x) return x:expm1() end,
  floor = function(x) return x:floor() end, log = function(x) return x:log() end,
  log1p = function(x) return x:log1p() end, neg = function(x) return x:neg() end,
  reciprocal = function(x) return x:reciprocal() end, relu = function(x) return x:relu() end,
  round = function(x) return x:round() end, rsqrt = function(x) return x:rsqrt() end,
  sigmoid = function(x) return x:sigmoid() end, sign = function(x) return x:sign() end,
  silu = function(x) return x:silu() end, sin = function(x) return x:sin() end,
  sqrt = function(x) return x:sqrt() end, square = function(x) return x:square() end,
  tanh = function(x) return x:tanh() end, gelu = function(x) return x:gelu() end,
  isfinite = function(x) return x:isfinite() end, isinf = function(x) return x:isinf() end,
  isnan = function(x) return x:isnan() end, logical_not = function(x) return x:logical_not() end,
  clamp = function(x) return x:clamp(1, 2) end,
  abs_ = function(x) return x:clone():abs_() end, ceil_ = function(x) return x:clone():ceil_() end,
  cos_ = function(x) return x:clone():cos_() end, erf_ = function(x) return x:clone():erf_() end,
  exp_ = function(x) return x:clone():exp_() end, expm1_ = function(x) return x:clone():expm1_() end,
  floor_ = function(x) return x:clone():floor_() end, log_ = function(x) return x:clone():log_() end,
  log1p_ = function(x) return x:clone():log1p_() end, neg_ = function(x) return x:clone():neg_() end,
  reciprocal_ = function(x) return x:clone():reciprocal_() end, relu_ = function(x) return x:clone():relu_() end,
  round_ = function(x) return x:clone():round_() end, rsqrt_ = function(x) return x:clone():rsqrt_() end,
  sigmoid_ = function(x) return x:clone():sigmoid_() end, sign_ = function(x) return x:clone():sign_() end,
  silu_ = function(x) return x:clone():silu_() end, sin_ = function(x) return x:clone():sin_() end,
  sqrt_ = function(x) return x:clone():sqrt_() end, square_ = function(x) return x:clone():square_() end,
  tanh_ = function(x) return x:clone():tanh_() end, gelu_ = function(x) return x:clone():gelu_() end,
  clamp_ = function(x) return x:clone():clamp_(1, 2) end, zero_ = function(x) return x:clone():zero_() end,
  fill_ = function(x) return x:clone():fill_(1) end,
  add = function(x, y) return x:add(y) end, sub = function(x, y) return x:sub(y) end,
  mul = function(x, y) return x:mul(y) end, div = function(x, y) return x:div(y) end,
  pow = function(x, y) return x:pow(y) end, atan2 = function(x, y) return x:atan2(y) end,
  remainder = function(x, y) return x:remainder(y) end, fmod = function(x, y) return x:fmod(y) end,
  floor_divide = function(x, y) return x:floor_divide(y) end,
  maximum = function(x, y) return x:maximum(y) end, minimum = function(x, y) return x:minimum(y) end,
  eq = function(x, y) return x:eq(y) end, ne = function(x, y) return x:ne(y) end,
  lt = function(x, y) return x:lt(y) end, le = function(x, y) return x:le(y) end,
  gt = function(x, y) return x:gt(y) end, ge = function(x, y) return x:ge(y) end,
  logical_and = function(x, y) return x:logical_and(y) end, logical_or = function(x, y) return x:logical_or(y) end,
  logical_xor = function(x, y) return x:logical_xor(y) end,
  add_ = function(x, y) return x:clone():add_(y) end, sub_ = function(x, y) return x:clone():sub_(y) end,
  mul_ = function(x, y) return x:clone():mul_(y) end, div_ = function(x, y) return x:clone():div_(y) end,
  pow_ = function(x, y) return x:clone():pow_(y) end, atan2_ = function(x, y) return x:clone():atan2_(y) end,
  fmod_ = function(x, y) return x:clone():fmod_(y) end,
  maximum_ = function(x, y) return x:clone():maximum_(y) end, minimum_ = function(x, y) return x:clone():minimum_(y) end,
  eq_ = function(x, y) return x:clone():eq_(y) end, ne_ = function(x, y) return x:clone():ne_(y) end,
  lt_ = function(x, y) return x:clone():lt_(y) end, le_ = function(x, y) return x:clone():le_(y) end,
  gt_ = function(x, y) return x:clone():gt_(y) end, ge_ = function(x, y) return x:clone():ge_(y) end,
  copy_ = function(x, y) return x:clone():copy_(y) end,
  where = function(x, y) return attn.where(MASK, x, y) end,
  cat = function(x, y) return attn.cat({x, y}) end, stack = function(x, y) return attn.stack({x, y}) end,
  hstack = function(x, y) return attn.hstack({x, y}) end, vstack = function(x, y) return attn.vstack({x, y}) end,
  matmul = function(x, y) return x:matmul(y:t()) end, mm = function(x, y) return x:mm(y:t()) end,
  bmm = function(x, y) return x:unsqueeze(1):bmm(y:t():unsqueeze(1)) end,
  dot = function(x, y) return row1(x):dot(row1(y)) end, outer = function(x, y) return row1(x):outer(row1(y)) end,
  linear = function(x, y) return x:linear(y) end, cdist = function(x, y) return x:cdist(y) end,
  einsum = function(x, y) return attn.einsum("ij,kj->ik", x, y) end,
  index_add = function(x, y) return x:index_add(1, I({2, 1}), y) end,
  index_add_ = function(x, y) return x:clone():index_add_(1, I({2, 1}), y) end,
  index_copy = function(x, y) return x:index_copy(1, I({2, 1}), y) end,
  index_copy_ = function(x, y) return x:clone():index_copy_(1, I({2, 1}), y) end,
  scatter = function(x, y) return x:scatter(2, IDX, y) end,
  scatter_ = function(x, y) return x:clone():scatter_(2, IDX, y) end,
  scatter_add = function(x, y) return x:scatter_add(2, IDX, y) end,
  scatter_add_ = function(x, y) return x:clone():scatter_add_(2, IDX, y) end,
  scatter_reduce = function(x, y) return x:scatter_reduce(2, IDX, y, "sum") end,
  scatter_reduce_ = function(x, y) return x:clone():scatter_reduce_(2, IDX, y, "sum") end,
  expand_as = function(x, y) return x:narrow(1, 1, 1):expand_as(y) end,
  reshape_as = function(x, y) return x:reshape_as(y) end, view_as = function(x, y) return x:view_as(y) end,
  type_as = function(x, y) return x:type_as(y) end,
  sum = function(x) return x:sum() end, sum_dim = function(x) return x:sum(2) end,
  mean = function(x) return x:mean() end, prod = function(x) return x:prod() end,
  amax = function(x) return x:amax(2) end, amin = function(x) return x:amin(2) end,
  max = function(x) return x:max() end, max_dim = function(x) return x:max(2) end,
  min = function(x) return x:min() end, min_dim = function(x) return x:min(2) end,
  argmax = function(x) return x:argmax() end, argmin = function(x) return x:argmin(2) end,
  any = function(x) return x:any() end, all = function(x) return x:all(2) end,
  std = function(x) return x:std() end, var = function(x) return x:var(2) end,
  norm = function(x) return x:norm() end, logsumexp = function(x) return x:logsumexp(2) end,
  softmax = function(x) return x:softmax(2) end, log_softmax = function(x) return x:log_softmax(2) end,
  cumsum = function(x) return x:cumsum(2) end, sort = function(x) return x:sort(2) end,
  argsort = function(x) return x:argsort(2) end, topk = function(x) return x:topk(2, 2) end,
  kthvalue = function(x) return x:kthvalue(2, 2) end, nonzero = function(x) return x:nonzero() end,
  clone = function(x) return x:clone() end, contiguous = function(x) return x:t():contiguous() end,
  detach = function(x) return x:detach() end, detach_ = function(x) return x:clone():detach_() end,
  flatten = function(x) return x:flatten() end, flip = function(x) return x:flip(2) end,
  t = function(x) return x:t() end, transpose = function(x) return x:transpose(1, 2) end,
  permute = function(x) return x:permute(2, 1) end, reshape = function(x) return x:reshape(3, 2) end,
  view = function(x) return x:view(3, 2) end, expand = function(x) return x:narrow(1, 1, 1):expand(4, 3) end,
  squeeze = function(x) return x:narrow(1, 1, 1):squeeze() end, unsqueeze = function(x) return x:unsqueeze(1) end,
  narrow = function(x) return x:narrow(2, 2, 2) end, select = function(x) return x:select(2, 2) end,
  slice = function(x) return x:slice(2, 2, 3) end, chunk = function(x) return (x:chunk(3, 2)) end,
  split = function(x) return (x:split(1, 2)) end, ["repeat"] = function(x) return x["repeat"](x, 2, 1) end,
  rep = function(x) return x:rep(2, 1) end, tile = function(x) return x:tile(2) end,
  roll = function(x) return x:roll(1, 2) end, tril = function(x) return sq(x):tril() end,
  triu = function(x) return sq(x):triu() end, diag = function(x) return row1(x):diag() end,
  repeat_interleave = function(x) return x:repeat_interleave(2, 2) end,
  index_select = function(x) return x:index_select(2, I({3, 1})) end,
  gather = function(x) return x:gather(2, IDX) end, masked_select = function(x) return x:masked_select(MASK) end,
  masked_fill = function(x) return x:masked_fill(MASK, 1) end,
  masked_fill_ = function(x) return x:clone():masked_fill_(MASK, 1) end,
  index_fill = function(x) return x:index_fill(2, I({1}), 1) end,
  index_fill_ = function(x) return x:clone():index_fill_(2, I({1}), 1) end,
  bucketize = function(x) return attn.bucketize(x, I({1, 2})) end,
  bool = function(x) return x:bool() end, float = function(x) return x:float() end,
  long = function(x) return x:long() end, to = function(x) return x:to("int64") end,
  requires_grad_ = function(x) return x:clone():requires_grad_() end,
  uniform_ = function(x) return x:clone():uniform_() end, normal_ = function(x) return x:clone():normal_() end,
  exponential_ = function(x) return x:clone():exponential_() end,
  random_ = function(x) return x:clone():random_(0, 2) end,
  bernoulli = function(x) return (x:is_floating_point() and x / 4 or x):bernoulli() end,
  bernoulli_ = function(x) return x:clone():bernoulli_(0.5) end,
  multinomial = function(x) return row1(x):multinomial(2) end,
  zeros_like = function(x) return attn.zeros_like(x) end, ones_like = function(x) return attn.ones_like(x) end,
  full_like = function(x) return attn.full_like(x, 1) end, empty_like = function(x) return attn.empty_like(x) end,
  rand_like = function(x) return attn.rand_like(x) end, randn_like = function(x) return attn.randn_like(x) end,
  embedding = function(x) return attn.embedding(x, I({2, 1})) end,
  one_hot = function(x) return attn.one_hot(row1(x), 6) end,
  ["F.pad"] = function(x) return F.pad(x, {1, 1}) end,
  ["F.relu"] = function(x) return F.relu(x) end, ["F.gelu"] = function(x) return F.gelu(x) end,
  ["F.sigmoid"] = function(x) return F.sigmoid(x) end, ["F.tanh"] = function(x) return F.tanh(x) end,
  ["F.silu"] = function(x) return F.silu(x) end, ["F.elu"] = function(x) return F.elu(x) end,
  ["F.leaky_relu"] = function(x) return F.leaky_relu(x) end, ["F.mish"] = function(x) return F.mish(x) end,
  ["F.softplus"] = function(x) return F.softplus(x) end, ["F.softmax"] = function(x) return F.softmax(x, 2) end,
  ["F.log_softmax"] = function(x) return F.log_softmax(x, 2) end,
  ["F.dropout"] = function(x) return F.dropout(x, 0.5, false) end,
  ["F.normalize"] = function(x) return F.normalize(x) end,
  ["F.layer_norm"] = function(x) return F.layer_norm(x, {3}) end,
  ["F.one_hot"] = function(x) return F.one_hot(row1(x), 6) end,
  ["F.linear"] = function(x, y) return F.linear(x, y) end,
  ["F.cosine_similarity"] = function(x, y) return F.cosine_similarity(x, y) end,
  ["F.mse_loss"] = function(x, y) return F.mse_loss(x, y) end, ["F.l1_loss"] = function(x, y) return F.l1_loss(x, y) end,
  ["F.huber_loss"] = function(x, y) return F.huber_loss(x, y) end,
  ["F.smooth_l1_loss"] = function(x, y) return F.smooth_l1_loss(x, y) end,
  ["F.binary_cross_entropy"] = function(x, y)
    return F.binary_cross_entropy(x:is_floating_point() and x / 4 or x, y:is_floating_point() and y / 4 or y)
  end,
  ["F.binary_cross_entropy_with_logits"] = function(x, y) return F.binary_cross_entropy_with_logits(x, y) end,
  ["F.kl_div"] = function(x, y) return F.kl_div(x, y, {reduction = "batchmean"}) end,
  ["F.cross_entropy"] = function(x, y) return F.cross_entropy(x, y:select(2, 1)) end,
  ["F.nll_loss"] = function(x, y) return F.nll_loss(x, y:select(2, 1)) end,
}

-- Where attn's answer is not torch's: [op] = {[args] = reason} ("*": every
-- args of the op).  Each listed case must still differ (a closed gap fails).
local INT_MATMUL = "no integer matrix product: the products run on float32 BLAS/SIMD kernels only (torch's CPU "
  .. "int64 matmul is rare in attention code); attn refuses by name, write x:float()"
local INT_SCATTER = "the scatter/index kernels of src/core/ops/scatter.c are float32 only (attn__float_only): attn "
  .. "refuses int64 and bool by name, torch keeps the dtype"
local GAPS = {
  matmul = {["i,i"] = INT_MATMUL}, mm = {["i,i"] = INT_MATMUL}, bmm = {["i,i"] = INT_MATMUL},
  dot = {["i,i"] = INT_MATMUL}, linear = {["i,i"] = INT_MATMUL}, ["F.linear"] = {["i,i"] = INT_MATMUL},
  einsum = {["i,i"] = INT_MATMUL},
  index_add = {["i,i"] = INT_SCATTER, ["b,b"] = INT_SCATTER}, index_add_ = {["i,i"] = INT_SCATTER, ["b,b"] = INT_SCATTER},
  index_copy = {["i,i"] = INT_SCATTER, ["b,b"] = INT_SCATTER},
  index_copy_ = {["i,i"] = INT_SCATTER, ["b,b"] = INT_SCATTER},
  index_fill = {i = INT_SCATTER, b = INT_SCATTER}, index_fill_ = {i = INT_SCATTER, b = INT_SCATTER},
  scatter = {["i,i"] = INT_SCATTER, ["b,b"] = INT_SCATTER}, scatter_ = {["i,i"] = INT_SCATTER, ["b,b"] = INT_SCATTER},
  scatter_add = {["i,i"] = INT_SCATTER, ["b,b"] = INT_SCATTER},
  scatter_add_ = {["i,i"] = INT_SCATTER, ["b,b"] = INT_SCATTER},
  scatter_reduce = {["i,i"] = INT_SCATTER, ["b,b"] = INT_SCATTER},
  scatter_reduce_ = {["i,i"] = INT_SCATTER, ["b,b"] = INT_SCATTER},
  diag = {i = "diag writes its result with index_copy: " .. INT_SCATTER, b = "diag: " .. INT_SCATTER},
  embedding = {i = "embedding's gather kernel (src/core/ops/embedding.c) is float32 only; an int64 or bool weight "
    .. "table is refused by name", b = "embedding: float32 weights only"},
  bernoulli_ = {i = "bernoulli_ draws into float32 only (src/core/ops/random.c); refused by name",
    b = "bernoulli_ draws into float32 only; refused by name"},
  random_ = {b = "random_ draws into float32 and int64; a bool target is refused by name"},
  ["F.l1_loss"] = {["b,f"] = "attn computes a mixed pair in float32 (loss helper `pair`); torch's l1 subtracts "
    .. "the bool operand first and refuses", ["f,b"] = "as b,f"},
}

-- Public functions of the walked tables that are no dtype-carrying op.
local EXCLUDED = {
  -- tensor methods and attn.* functions that return no tensor, or only move autograd state
  backward = "runs backward; returns nothing", dim = "returns a Lua integer", numel = "returns a Lua integer",
  size = "returns Lua integers", stride = "returns Lua integers", item = "returns a Lua value",
  totable = "returns a Lua table", tostring = "returns a string", type = "returns a type name",
  tolist = "returns a Lua table", allclose = "returns a Lua boolean", equal = "returns a Lua boolean",
  isclose = "bool result per input dtype: spec/compare_addmm_spec.lua checks it against torch",
  addmm = "float only as attn's mm: spec/compare_addmm_spec.lua checks values, dtypes and the int64 refusal",
  baddbmm = "float only as attn's bmm: spec/compare_addmm_spec.lua checks it against torch",
  addbmm = "float only as attn's bmm: spec/compare_addmm_spec.lua checks it against torch",
  half = "storage dtype conversion: spec/storage_dtype_spec.lua checks it against torch",
  bfloat16 = "storage dtype conversion: spec/storage_dtype_spec.lua checks it against torch",
  double = "storage dtype conversion: spec/storage_dtype_spec.lua checks it against torch",
  cpu = "device no-op (returns the tensor itself): spec/storage_dtype_spec.lua",
  cuda = "always an error (attn runs on the CPU only): spec/storage_dtype_spec.lua",
  element_size = "returns a Lua integer", is_contiguous = "returns a Lua boolean",
  is_floating_point = "returns a Lua boolean", retain_grad = "autograd state only (a float tensor that requires grad)",
  shape = "returns an attn.Size (Lua integers)", Size = "makes an attn.Size from Lua integers",
  unbind = "one select per slice (keeps the dtype: see select)",
  -- creation without a tensor input: their dtypes are checked in spec/dtype_spec.lua ("dtype creation")
  tensor = "dtype_spec.lua", zeros = "dtype_spec.lua", ones = "dtype_spec.lua", empty = "dtype_spec.lua",
  full = "dtype_spec.lua", arange = "dtype_spec.lua", linspace = "float32 only, like torch's default",
  eye = "float32 (torch's default dtype)", rand = "float32", randn = "float32", randint = "dtype_spec.lua",
  randperm = "dtype_spec.lua", causal_mask = "a bool mask from sizes", padding_mask = "a bool mask from lengths",
  -- not tensor ops
  Generator = "an RNG object", debug_counts = "diagnostics", deepcopy = "copies Lua values",
  enable_grad = "grad mode", no_grad = "grad mode", set_grad_enabled = "grad mode", is_grad_enabled = "grad mode",
  get_num_threads = "threads", set_num_threads = "threads", set_isa = "kernels", info = "build information",
  get_rng_state = "RNG", set_rng_state = "RNG", manual_seed = "RNG", seed = "RNG", initial_seed = "RNG",
  is_tensor = "a predicate", now = "a clock", load = "file I/O (io_spec.lua keeps dtypes)",
  save = "file I/O (io_spec.lua keeps dtypes)", safetensors_info = "file I/O",
  scaled_dot_product_attention = "float32 attention (sdpa_spec.lua); refuses other dtypes by name",
  ["F.scaled_dot_product_attention"] = "float32 attention (sdpa_spec.lua)",
  ["F.ring_attention"] = "float32 attention over MPI (dist_spec.lua)",
  ["F.split_heads"] = "a reshape (keeps the dtype: see reshape)", ["F.combine_heads"] = "a reshape (see reshape)",
  ["F.conv1d"] = "float32 convolution (conv_spec.lua)",
}

-- The dtype name of a result (several results joined with ","), or "error".
local function result_dtypes(op, x, y)
  local r = table.pack(pcall(op, x, y))
  if not r[1] then return "error", r[2] end
  local names = {}
  for i = 2, r.n do
    if attn.is_tensor(r[i]) then names[#names + 1] = tostring(r[i].dtype):gsub("^attn%.", "") end
  end
  return table.concat(names, ",")
end

local function args_of(key)
  local a, b = key:match("^(%w+),?(%w*)$")
  return X[a], b ~= "" and Y[b] or nil
end

describe("dtype rules against torch (every op x dtype)", function()
  local ops = {}
  for op in pairs(FIX) do ops[#ops + 1] = op end
  table.sort(ops)
  for _, op in ipairs(ops) do
    it(op, function()
      local fn = OPS[op]
      assert(fn, "no attn side for fixture op " .. op)
      local keys = {}
      for k in pairs(FIX[op]) do keys[#keys + 1] = k end
      table.sort(keys)
      local bad = {}
      for _, k in ipairs(keys) do
        local want = FIX[op][k]
        local got, err = result_dtypes(fn, args_of(k))
        local gap = GAPS[op] and (GAPS[op][k] or GAPS[op]["*"])
        if gap and got == want then
          bad[#bad + 1] = ("%s(%s): the gap '%s' is closed (attn gives torch's %s): remove it from GAPS"):format(op,
            k, gap, want)
        elseif not gap and got ~= want then
          bad[#bad + 1] = ("%s(%s): torch gives %s, attn %s%s"):format(op, k, want, got,
            err and (" (" .. tostring(err) .. ")") or "")
        end
      end
      assert(#bad == 0, table.concat(bad, "\n"))
    end)
  end
  it("has a fixture for every attn op of the table", function()
    for name in pairs(OPS) do assert(FIX[name], "no fixture for " .. name .. ": run gen_dtype_rules.py") end
  end)
  it("covers every public tensor op (or says why not)", function()
    local missing, seen = {}, {}
    -- the op table's ops (and their in-place forms) are checked per dtype by
    -- spec/op_table_spec.lua, against torch's answers in its own fixture
    for _, op in ipairs(require("attn.core")._ops) do
      if not OPS[op.name] then seen[op.name], seen[op.name .. "_"] = true, true end
    end
    local function check(name, key)
      if not OPS[key] and not EXCLUDED[key] and not (OPS[name] or EXCLUDED[name]) and not seen[key] then
        seen[key] = true
        missing[#missing + 1] = key
      end
    end
    for k, v in pairs(attn._methods) do
      if type(v) == "function" and k:sub(1, 1) ~= "_" then check(k, k) end
    end
    for k, v in pairs(attn) do
      if type(v) == "function" and k:sub(1, 1) ~= "_" then check(k, k) end
    end
    for k, v in pairs(F) do
      if type(v) == "function" and k:sub(1, 1) ~= "_" then check("F." .. k, "F." .. k) end
    end
    table.sort(missing)
    assert(#missing == 0, "ops without a dtype rule (add them to gen_dtype_rules.py and OPS, or to EXCLUDED "
      .. "with the reason): " .. table.concat(missing, " "))
  end)
end)

describe("dtypes attn does not have", function()
  it("are refused by name, not read as float32", function()
    for _, name in ipairs({"int32", "complex64", "uint8", "float8"}) do
      local ok, err = pcall(attn.zeros, 2, {dtype = name})
      assert.is_false(ok, name)
      assert.matches(name, err, 1, true)
    end
  end)
  it("float16, bfloat16, float64 are storage dtypes: compute ops refuse them by name", function()
    for _, name in ipairs({"float64", "double", "float16", "half", "bfloat16"}) do
      local z = attn.zeros(2, {dtype = name})
      local ok, err = pcall(function() return z + z end)
      assert.is_false(ok, name)
      assert.matches("a storage dtype (attn computes in float32): convert it with x:float()", err, 1, true)
    end
  end)
end)

describe("x.grad = g (issue 27)", function()
  it("refuses a gradient of another dtype or shape in torch's words", function()
    local w = attn.zeros(3):requires_grad_()
    for _, g in ipairs({I({1, 2, 3}), attn.tensor({true, false, true})}) do
      local ok, err = pcall(function() w.grad = g end)
      assert.is_false(ok)
      assert.matches("dtype_rules_spec.lua:%d+: set_grad: assigned grad has data of a different type: %a+%d* for a "
        .. "float32 tensor %(assign g:to%(x.dtype%), e.g. g:float%(%)%)", err)
      assert.is_nil(w.grad)
    end
    local ok, err = pcall(function() w.grad = attn.zeros(4) end)
    assert.is_false(ok)
    assert.matches("set_grad: assigned grad has data of a different size: gradient of shape %[4%] for a tensor of "
      .. "shape %[3%]", err)
    w.grad = attn.ones(3) -- the right dtype and shape
    assert.same({1, 1, 1}, w.grad:totable())
  end)
  it("leaves no path to an int64 .grad: backward and SGD keep float32", function()
    local optim = require "attn.optim"
    local w = attn.ones(3):requires_grad_()
    assert.has_error(function() w.grad = I({1, 1, 1}) end)
    local opt = optim.SGD({w}, {lr = 0.5})
    local y = (w * I({1, 2, 3})):sum() -- an int64 operand carries no gradient of its own
    y:backward()
    assert.are.equal(attn.float32, w.grad.dtype)
    opt:step()
    assert.same({0.5, 0, -0.5}, w:detach():totable())
    -- an int64 or bool seed is cast to the output's dtype, as torch does
    local v = attn.ones(2):requires_grad_()
    local z = v * 2
    z:backward(I({1, 2}), true)
    z:backward(attn.tensor({true, false}))
    assert.are.equal(attn.float32, v.grad.dtype)
    assert.same({4, 4}, v.grad:totable())
  end)
end)

describe("size arithmetic at the ends of int64 (issue 27)", function()
  it("arange counts without signed overflow and names its arguments", function()
    local mi, ma = math.mininteger, math.maxinteger
    -- torch 1.13 overflows itself here and gives an empty tensor; these are the true elements
    assert.same({mi, -1, ma - 1}, attn.arange(mi, ma, ma):totable())
    assert.same({ma, -1}, attn.arange(ma, mi, mi):totable())
    local ok, err = pcall(attn.arange, mi, ma)
    assert.is_false(ok)
    assert.matches("arange: start %-9223372036854775808, end 9223372036854775807 and step 1 give "
      .. "18446744073709551615 elements, more than a tensor holds %(at most 2%^56%): narrow the range", err)
  end)
  it("F.pad names the pad amount it cannot take", function()
    local ok, err = pcall(F.pad, attn.zeros(3), {math.mininteger, 0})
    assert.is_false(ok)
    assert.matches("pad: pad%[1%] = %-9223372036854775808 crops more than size 3 of dim 1 %(a negative count crops "
      .. "at most the dim's size: %-3..%-1%)", err)
    ok, err = pcall(F.pad, attn.zeros(3), {0, math.maxinteger})
    assert.matches("pad: pad%[2%] = 9223372036854775807 is more than a dim can hold", err)
    assert.same({2, 1, 5, 2, 2}, F.pad(I({1, 5}), {1, 2}, "constant", 2):totable())
    assert.same({false, true, false}, F.pad(attn.tensor({true}), {1, 1}):totable())
    assert.has_error(function() F.pad(I({1}), {1, 1}, "constant", 0 / 0) end,
      "pad: value nan does not fit in the input's dtype int64 (pad it as a float tensor: x:float())")
  end)
end)
