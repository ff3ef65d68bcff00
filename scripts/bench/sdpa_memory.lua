-- SPDX-License-Identifier: MIT
-- Memory and speed of the fused scaled-dot-product attention.
-- Usage: attn scripts/bench/sdpa_memory.lua [--speed] [L]
--
-- Memory: forward + backward at L = S = 16384 (or L), E = 64, one head.
-- The L x S matrix alone would be 1 GiB; the fused kernel keeps O(L)
-- besides its inputs and results, so the peak RSS growth (VmHWM after
-- minus VmRSS before, read from /proc/self/status; the kernel's peak is
-- reset through /proc/self/clear_refs where allowed) must stay under 64 MB.
-- It counts q, k, v, dO, out, dq, dk, dv (8 x 4 MiB at 16384 x 64) too.
-- Exits 1 when over.
--
-- --speed also times the forward at L = S = 2048, E = 64, 8 heads on 1 and
-- 2 threads and prints GFLOP/s counting 4 L S E H flops (QK^T and PV).
local attn = require "attn"

local speed, L = false, 16384
for _, a in ipairs(arg or {}) do
  if a == "--speed" then speed = true else L = tonumber(a) or L end
end
local E, LIMIT_MB = 64, 64

local P = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "procstat.lua")
local status_kb, reset_peak = P.kb, P.reset_peak

-- warm up: OpenBLAS, the thread pool and the allocator on a small problem
do
  local q = attn.randn(1, 256, E):requires_grad_(true)
  local o = attn.scaled_dot_product_attention(q, q, q)
  o:backward(attn.ones(1, 256, E))
end
collectgarbage()
collectgarbage()

local info = attn.info()
print(("attn %s, %d threads, BLAS core %s"):format(info.version, attn.get_num_threads(), info.blas_core))

local reset = reset_peak()
local rss0 = status_kb("VmRSS")
local q = attn.randn(1, L, E):requires_grad_(true)
local k = attn.randn(1, L, E):requires_grad_(true)
local v = attn.randn(1, L, E):requires_grad_(true)
local dout = attn.randn(1, L, E)
local rss_inputs = status_kb("VmRSS")

local t0 = attn.now()
local out = attn.scaled_dot_product_attention(q, k, v)
local t1 = attn.now()
out:backward(dout)
local t2 = attn.now()
local hwm = status_kb("VmHWM")
assert(q.grad and k.grad and v.grad, "no gradients")

local flops = 4.0 * L * L * E
local growth = rss0 and hwm and (hwm - rss0) / 1024
print(("L = S = %d, E = %d, 1 head: forward %.3f s (%.1f GFLOP/s), backward %.3f s"):format(L, E, t1 - t0,
  flops / (t1 - t0) / 1e9, t2 - t1))
if not growth then
  print("no /proc/self/status: memory not measured")
  return
end
print(("peak RSS growth %.1f MB (inputs and dO %.1f MB; the %d x %d matrix would be %.0f MB)%s"):format(growth,
  (rss_inputs - rss0) / 1024, L, L, L * L * 4 / 2 ^ 20, reset and "" or " [VmHWM not reset: upper bound]"))
if growth >= LIMIT_MB then
  print(("FAIL: over %d MB"):format(LIMIT_MB))
  os.exit(1)
end
print(("ok: under %d MB"):format(LIMIT_MB))

if speed then
  -- dropped for the collector
  q, k, v, out, dout = nil, nil, nil, nil, nil -- luacheck: ignore 311
  collectgarbage()
  local n, H, reps = 2048, 8, 5
  local qs, ks, vs = attn.randn(1, H, n, E), attn.randn(1, H, n, E), attn.randn(1, H, n, E)
  local saved = attn.get_num_threads()
  local f = 4.0 * n * n * E * H
  for _, th in ipairs({1, 2}) do
    attn.set_num_threads(th)
    attn.scaled_dot_product_attention(qs, ks, vs)
    local best = math.huge
    for _ = 1, reps do
      local s = attn.now()
      attn.scaled_dot_product_attention(qs, ks, vs)
      best = math.min(best, attn.now() - s)
    end
    print(("forward L = S = %d, E = %d, %d heads, %d thread%s: %.1f ms, %.1f GFLOP/s"):format(n, E, H, th,
      th > 1 and "s" or "", best * 1e3, f / best / 1e9))
  end
  attn.set_num_threads(saved)
end
