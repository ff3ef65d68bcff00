-- SPDX-License-Identifier: MIT
-- The main job for now: a tour of the attn core.  It rebuilds the opening
-- of the "self-attention from scratch" notebook (manual_seed(123),
-- Embedding(50000, 3), d_q = d_k = 2, d_v = 4) with plain tensor ops, so
-- every printed number can be checked against the notebook's.
--   attn scripts/demo.lua
local attn = require "attn"

local function section(title) print(("\n== %s =="):format(title)) end

local info = attn.info()
print(("attn %s on %s, OpenBLAS core %s (chosen by %s), %d threads"):format(info.version, info.lua,
  info.blas_core, info.blas_coretype_source, info.num_threads))

section("PyTorch's random streams, bit for bit")
attn.manual_seed(123)
print("rand(3)   ", attn.rand(3))
attn.manual_seed(123)
print("randn(6)  ", attn.randn(6))

section("Embedding a sentence")
local sentence = "Life is short, eat dessert first"
local words = {}
for w in sentence:gsub(",", ""):gmatch("%S+") do words[#words + 1] = w end
local sorted = {table.unpack(words)}
table.sort(sorted)
local word_to_id = {}
for i, w in ipairs(sorted) do word_to_id[w] = i end -- 1-based ids
local ids = {}
for i, w in ipairs(words) do ids[i] = word_to_id[w] end
print("token ids (1-based):", table.concat(ids, " "))

attn.manual_seed(123)
local embedding = attn.randn(50000, 3) -- what nn.Embedding(50000, 3) draws
local x = embedding:index_select(1, ids)
print(x)

section("Queries, keys, values")
local d_q, d_k, d_v = 2, 2, 4
local d = x:size(2)
local w_query = attn.randn(d, d_q)
local w_key = attn.randn(d, d_k)
local w_value = attn.randn(d, d_v)
local keys = x:matmul(w_key)
local values = x:matmul(w_value)
print("keys", keys:shape()[1], "x", keys:shape()[2], "values", values:shape()[1], "x", values:shape()[2])

local query_2 = x[2]:unsqueeze(1):matmul(w_query) -- the second word, "is"
local omega_2 = query_2:matmul(keys:t())
print("omega_2 =", omega_2)
local weights_2 = (omega_2 / math.sqrt(d_k)):softmax(-1)
print("attention weights =", weights_2)
print("context vector =", weights_2:matmul(values))

section("All queries at once, and a causal mask")
local scores = x:matmul(w_query):matmul(keys:t()) / math.sqrt(d_k)
local weights = scores:softmax(-1)
print(weights)
print("rows sum to", weights:sum(-1))
local n = #words
local future = attn.triu(attn.ones(n, n), 1)
local causal = scores:masked_fill(future, -math.huge):softmax(-1)
print(causal)
print("context =", causal:matmul(values))

section("Errors name the function and the shapes")
print(select(2, pcall(attn.matmul, attn.zeros(6, 3), attn.zeros(2, 4))))
print(select(2, pcall(function() return x[7] end)))

section("GEMM speed")
local size = 1024
local a, b = attn.rand(size, size), attn.rand(size, size)
a:matmul(b) -- warm-up
local t0 = attn.now()
for _ = 1, 5 do a:matmul(b) end
local dt = (attn.now() - t0) / 5
print(("sgemm %d^3: %.1f ms, %.0f GFLOP/s (%s kernels)"):format(size, dt * 1e3, 2 * size ^ 3 / dt / 1e9,
  info.blas_core))
