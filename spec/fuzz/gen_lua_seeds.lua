-- SPDX-License-Identifier: MIT

--- Writes the seed programs of the fuzz_lua_api target
-- (spec/fuzz/corpus/fuzz_lua_api/seed-*): short programs in the byte code
-- of spec/fuzz/lua_api.lua that build modules, run attention, losses,
-- optimizers and autograd, so the fuzzer starts from deep calls rather
-- than from argument errors.  Names are turned into indices with the
-- driver's own catalogs, so regenerate the seeds when the API grows:
--
--   LUA_PATH_5_4="lua/?.lua;lua/?/init.lua;;" LUA_CPATH_5_4="build/?.so;;" \
--     lua5.4 spec/fuzz/gen_lua_seeds.lua
--
-- (from the repository root, with attn/core.so built in build/).
local D = assert(loadfile("spec/fuzz/lua_api.lua"))()

local function index_of(list, v)
  for i, x in ipairs(list) do
    if x == v then return i end
  end
  error("not in the driver's lists: " .. tostring(v), 2)
end

-- ---------------------------------------------------------------- encoder
-- Each function appends the bytes the driver reads for one step or one
-- argument (see arg() and the *_step functions in lua_api.lua).

local out
local function b(...)
  for _, x in ipairs({ ... }) do out[#out + 1] = string.char(x % 256) end
end

local A = {}
function A.int(v) -- number(): -1..7
  assert(v >= -1 and v <= 7)
  b(1, v + 1)
end
function A.pool(k) b(4, k - 1) end
function A.bool(v) b(7, v and 0 or 1) end
function A.str(s) b(8, index_of(D.strings, s) - 1) end
function A.shape(t)
  b(10, #t)
  for _, v in ipairs(t) do b(v) end
  b(0)
end
function A.nested(t) -- a list of -1..7 (one level)
  b(11, #t)
  for _, v in ipairs(t) do b(0, v + 1) end
end
function A.opts(t) -- {{key, encoder, value}, ...}
  b(12, #t)
  for _, kv in ipairs(t) do
    b(index_of(D.option_keys, kv[1]) - 1)
    kv[2](kv[3])
  end
end
function A.randn(t)
  b(13, #t)
  for _, v in ipairs(t) do b(v) end
  b(0)
end
function A.list(ks)
  b(15, #ks)
  for _, k in ipairs(ks) do b(k - 1) end
end

local function args(a)
  b(#a)
  for _, x in ipairs(a) do x() end
end

local function arg(f, v) return function() f(v) end end

local S = {}
-- steps[1] = call: namespace, name, args, slot
function S.call(ns, name, a, slot)
  local i = index_of(D.namespaces, ns)
  b(0, i - 1, index_of(D.namespace(i).names, name) - 1)
  args(a)
  b(slot - 1)
end
-- steps[4] = method: object slot, method, args, result slot
function S.method(obj, name, a, slot, tensor)
  local list = tensor and D.tensor_methods or D.object_methods
  b(3, obj - 1, index_of(list, name) - 1)
  args(a)
  b(slot - 1)
end
function S.tmethod(obj, name, a, slot) S.method(obj, name, a, slot, true) end
-- steps[9] = backward of the sum of a slot
function S.backward(k) b(8, k - 1, 0, 0, 1) end
-- steps[7] = meta: op index, x slot, y, z, result slot
function S.meta(op, x, y, slot)
  b(6, op - 1, x - 1)
  y()
  b(0) -- z = nil
  b(slot - 1)
end
function S.gc() b(11) end

local I, P, O, B, N, L, T = A.int, A.pool, A.opts, A.bool, A.nested, A.list, A.shape

local seeds = {
  mha = function()
    S.call("attention", "MultiheadAttention", { arg(I, 4), arg(I, 2) }, 5)
    S.call("attn", "randn", { arg(I, 2), arg(I, 3), arg(I, 4) }, 6)
    S.method(5, "__call", { arg(P, 6), arg(P, 6), arg(P, 6) }, 7)
    S.backward(7)
  end,
  sdpa_causal = function()
    S.call("attn", "scaled_dot_product_attention",
      { arg(P, 4), arg(P, 4), arg(P, 4), arg(O, { { "is_causal", B, true } }) }, 1)
    S.backward(1)
  end,
  sdpa_functional = function()
    S.call("F", "scaled_dot_product_attention", { arg(P, 4), arg(P, 4), arg(P, 4) }, 2)
    S.backward(2)
  end,
  linear_adam = function()
    S.call("nn", "Linear", { arg(I, 3), arg(I, 4) }, 5)
    S.method(5, "parameters", {}, 6)
    S.call("optim", "Adam", { arg(P, 6), arg(O, { { "lr", I, 1 } }) }, 7)
    S.method(5, "__call", { arg(P, 1) }, 2)
    S.backward(2)
    S.method(7, "step", {}, 3)
    S.method(7, "zero_grad", {}, 3)
  end,
  cross_entropy = function()
    S.tmethod(1, "requires_grad_", {}, 1)
    S.call("attn", "tensor", { arg(N, { 1, 2 }) }, 6)
    S.call("F", "cross_entropy", { arg(P, 1), arg(P, 6) }, 2)
    S.backward(2)
  end,
  embedding = function()
    S.call("nn", "Embedding", { arg(I, 5), arg(I, 3) }, 5)
    S.call("attn", "tensor", { arg(N, { 1, 2, 4 }) }, 6)
    S.method(5, "__call", { arg(P, 6) }, 7)
    S.backward(7)
  end,
  layer_norm = function()
    S.call("nn", "LayerNorm", { arg(I, 3) }, 5)
    S.method(5, "__call", { arg(P, 1) }, 6)
    S.backward(6)
  end,
  gru = function()
    S.call("nn", "GRUCell", { arg(I, 3), arg(I, 4) }, 5)
    S.method(5, "__call", { arg(P, 1) }, 6)
    S.backward(6)
  end,
  views = function()
    S.tmethod(1, "view", { arg(T, { 3, 2 }) }, 5)
    S.tmethod(5, "t", {}, 6)
    S.tmethod(6, "matmul", { arg(P, 5) }, 7)
    S.tmethod(7, "softmax", { arg(I, -1) }, 2)
    S.tmethod(4, "permute", { arg(I, 3), arg(I, 1), arg(I, 2) }, 3)
    S.tmethod(3, "reshape", { arg(I, -1) }, 3)
    S.backward(3)
  end,
  cat_stack = function()
    S.call("attn", "cat", { arg(L, { 1, 1, 5 }), arg(I, 1) }, 6)
    S.call("attn", "stack", { arg(L, { 7, 7 }), arg(I, 2) }, 6)
    S.tmethod(6, "split", { arg(I, 1), arg(I, 1) }, 2)
  end,
  random = function()
    S.call("attn", "multinomial", { arg(P, 7), arg(I, 3), arg(B, true) }, 2)
    S.call("attn", "randperm", { arg(I, 5) }, 3)
    S.call("attn", "get_rng_state", {}, 6)
    S.call("attn", "bernoulli", { arg(P, 7) }, 5)
    S.call("attn", "set_rng_state", { arg(P, 6) }, 1)
  end,
  reductions = function()
    S.tmethod(4, "max", { arg(I, 2) }, 5)
    S.tmethod(4, "var", { arg(I, -1) }, 6)
    S.tmethod(4, "logsumexp", { arg(I, 1) }, 7)
    S.tmethod(7, "cumsum", { arg(I, 1) }, 2)
    S.backward(2)
  end,
  print_meta = function()
    S.meta(11, 4, arg(A.int, 0), 1) -- tostring
    S.meta(1, 4, arg(P, 4), 2) -- +
    S.meta(13, 7, arg(I, 1), 3) -- index
    S.meta(14, 7, arg(I, 2), 3) -- assignment
  end,
  seq2seq = function()
    S.tmethod(1, "requires_grad_", {}, 1)
    S.call("seq2seq", "BahdanauAttention", { arg(I, 4), arg(I, 3), arg(I, 3) }, 5)
    S.method(5, "__call", { arg(P, 1), arg(P, 4) }, 6)
    S.backward(6)
    S.gc()
  end,
  rotary = function()
    S.call("attention", "RotaryEmbedding", { arg(I, 4) }, 5)
    S.method(5, "__call", { arg(P, 4), arg(P, 4) }, 6)
    S.call("attention", "GroupedQueryAttention", { arg(I, 4), arg(I, 2), arg(I, 1) }, 7)
    S.method(7, "__call", { arg(P, 4) }, 2)
    S.backward(2)
  end,
  rnn_packed = function()
    S.call("rnn", "GRU", { arg(I, 4), arg(I, 3), arg(O, { { "num_layers", I, 2 }, { "bidirectional", B, true } }) }, 5)
    S.method(5, "__call", { arg(P, 4) }, 6)
    S.backward(6)
    S.call("rnn", "pack_padded_sequence", { arg(P, 4), arg(N, { 2, 1, 1 }) }, 7)
    S.method(5, "__call", { arg(P, 7) }, 6)
    S.call("rnn", "pad_packed_sequence", { arg(P, 6) }, 2)
    S.backward(2)
  end,
  conv_act = function()
    S.call("conv", "Conv1d", { arg(I, 3), arg(I, 2), arg(I, 2), arg(O, { { "padding", I, 1 } }) }, 5)
    S.method(5, "__call", { arg(P, 4) }, 6)
    S.call("activation", "mish", { arg(P, 6) }, 7)
    S.call("F", "leaky_relu", { arg(P, 7), arg(I, 1) }, 2)
    S.call("F", "softplus", { arg(P, 2), arg(I, 2), arg(I, 1) }, 3)
    S.backward(3)
  end,
  init = function()
    S.call("init", "kaiming_uniform_", { arg(P, 7) }, 1)
    S.call("init", "xavier_normal_", { arg(P, 5) }, 2)
    S.call("optim", "clip_grad_norm_", { arg(L, { 4 }), arg(I, 1) }, 3)
  end,
  -- issue 15's ops: one seed per family, each op reached with valid arguments
  sort_topk = function()
    S.tmethod(4, "topk", { arg(I, 2), arg(I, -1) }, 5) -- values -> 5, int64 indices -> 6
    S.backward(5)
    S.tmethod(1, "sort", { arg(I, 2), arg(B, true) }, 5)
    S.tmethod(1, "argsort", { arg(I, 1) }, 7)
    S.tmethod(4, "kthvalue", { arg(I, 2), arg(I, 2) }, 2)
    S.backward(2)
    S.tmethod(4, "sort", { arg(O, { { "dim", I, 1 }, { "descending", B, true }, { "stable", B, true } }) }, 3)
  end,
  scatter = function()
    S.call("attn", "randint", { arg(I, 1), arg(I, 3), arg(T, { 2, 3, 4 }) }, 6) -- ids 1..2 of [2,3,4]
    S.tmethod(4, "scatter", { arg(I, 1), arg(P, 6), arg(P, 4) }, 5)
    S.tmethod(4, "scatter_add", { arg(I, 3), arg(P, 6), arg(P, 4) }, 7)
    S.tmethod(4, "scatter_reduce", { arg(I, 2), arg(P, 6), arg(P, 4), arg(A.str, "amax") }, 2)
    S.backward(2)
    S.tmethod(4, "scatter_reduce", { arg(I, 1), arg(P, 6), arg(P, 4), arg(A.str, "mean"),
      arg(O, { { "include_self", B, false } }) }, 3)
    S.backward(3)
    S.backward(7)
  end,
  index_ops = function()
    S.call("attn", "tensor", { arg(N, { 1, 3 }) }, 6)
    S.tmethod(6, "long", {}, 6)
    S.tmethod(5, "index_add", { arg(I, 1), arg(P, 6), arg(P, 1) }, 7)
    S.tmethod(5, "index_copy", { arg(I, 1), arg(P, 6), arg(P, 1) }, 3)
    S.tmethod(5, "index_fill_", { arg(I, 2), arg(P, 6), arg(I, 0) }, 3)
    S.tmethod(7, "nonzero", {}, 3)
    S.tmethod(5, "gt", { arg(I, 0) }, 2)
    S.tmethod(5, "masked_select", { arg(P, 2) }, 3)
    S.call("attn", "where", { arg(P, 2) }, 3) -- one-argument where
    S.tmethod(2, "nonzero", { arg(O, { { "as_tuple", B, true } }) }, 7)
  end,
  einsum = function()
    S.tmethod(4, "transpose", { arg(I, 2), arg(I, 3) }, 5) -- [2,4,3]
    S.call("attn", "einsum", { arg(A.str, "bij,bjk->bik"), arg(P, 4), arg(P, 5) }, 6)
    S.backward(6)
    S.call("attn", "einsum", { arg(A.str, "ii->i"), arg(P, 7) }, 2)
    S.call("attn", "einsum", { arg(A.str, "...ij->...ji"), arg(P, 8) }, 3)
  end,
  pad_shift = function()
    S.call("F", "pad", { arg(P, 4), arg(N, { 1, 2 }), arg(A.str, "reflect") }, 5)
    S.backward(5)
    S.call("F", "pad", { arg(P, 4), arg(T, { 1, 1, 2, 0 }), arg(A.str, "replicate") }, 6)
    S.call("F", "pad", { arg(P, 4), arg(N, { 1, -1 }), arg(A.str, "constant"), arg(I, 3) }, 6)
    S.call("attn", "repeat_interleave", { arg(P, 1), arg(I, 2), arg(I, 2) }, 7)
    S.call("attn", "roll", { arg(P, 4), arg(I, 1), arg(I, 2) }, 2)
    S.tmethod(4, "flip", { arg(I, 3) }, 3)
    S.backward(3)
    S.call("attn", "diag", { arg(P, 7) }, 2)
    S.call("attn", "cdist", { arg(P, 5), arg(P, 5) }, 3)
    S.backward(3)
    S.tmethod(1, "tile", { arg(I, 2) }, 3)
  end,
  reductions_dims = function()
    S.call("attn", "sum", { arg(P, 4), arg(N, { 1, 3 }) }, 5)
    S.call("attn", "amax", { arg(P, 4), arg(N, { 2, 3 }), arg(B, true) }, 6)
    S.backward(6)
    S.tmethod(4, "std", { arg(N, { 1, 2 }), arg(O, { { "correction", I, 0 }, { "keepdim", B, true } }) }, 7)
    S.tmethod(4, "var", { arg(N, { -1 }), arg(O, { { "correction", I, 2 } }) }, 2)
    S.backward(7)
    S.call("attn", "clamp", { arg(P, 1), arg(P, 3), arg(P, 1) }, 3) -- tensor bounds
    S.call("F", "normalize", { arg(P, 4), arg(O, { { "dim", I, -1 } }) }, 3)
    S.call("F", "cosine_similarity", { arg(P, 4), arg(P, 4), arg(I, 3) }, 2)
    S.backward(2)
    S.call("attn", "arange", { arg(I, 5) }, 6)
    S.call("attn", "bucketize", { arg(P, 1), arg(P, 6), arg(O, { { "right", B, true } }) }, 3)
  end,
  dtypes = function()
    S.tmethod(1, "gt", { arg(I, 0) }, 5)
    S.tmethod(5, "logical_and", { arg(P, 5) }, 6)
    S.tmethod(6, "any", {}, 7)
    S.tmethod(6, "all", { arg(I, 1) }, 7)
    S.tmethod(2, "to", { arg(A.str, "bool") }, 3)
    S.tmethod(1, "to", { arg(A.str, "int64") }, 3)
    S.tmethod(3, "type_as", { arg(P, 1) }, 3)
    S.tmethod(1, "long", {}, 3)
    S.meta(1, 3, arg(P, 1), 3) -- int64 + float32
    S.tmethod(1, "isnan", {}, 7)
    S.tmethod(7, "logical_not", {}, 7)
  end,
}

local dir = "spec/fuzz/corpus/fuzz_lua_api"
local names = {}
for name in pairs(seeds) do names[#names + 1] = name end
table.sort(names)
for _, name in ipairs(names) do
  out = {}
  seeds[name]()
  local f = assert(io.open(dir .. "/seed-" .. name, "wb"))
  f:write(table.concat(out))
  f:close()
  print(("%-16s %3d bytes"):format(name, #out))
end
