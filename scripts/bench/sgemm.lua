-- SPDX-License-Identifier: MIT
-- sgemm 2048^3 through attn.matmul: the machine's reference GEMM speed.
-- Usage: attn scripts/bench/sgemm.lua [n] [repeats]
-- Prints the BLAS core attn activated and GFLOP/s on 1 and 2 threads; with
-- --torch it also times torch.matmul (same OpenBLAS, OPENBLAS_CORETYPE set
-- to the same core) for a side-by-side ratio.
local attn = require "attn"

local n, reps, with_torch = 2048, 5, false
local pos = {}
for _, a in ipairs(arg or {}) do
  if a == "--torch" then with_torch = true else pos[#pos + 1] = tonumber(a) end
end
n = pos[1] or n
reps = pos[2] or reps

local info = attn.info()
print(("attn %s, %s, BLAS core %s (chosen by %s)"):format(info.version, info.lua, info.blas_core,
  info.blas_coretype_source))

local a = attn.rand(n, n)
local b = attn.rand(n, n)
local flops = 2.0 * n * n * n

local function best_time(threads)
  attn.set_num_threads(threads)
  a:matmul(b) -- warm-up
  local best = math.huge
  for _ = 1, reps do
    local t0 = attn.now()
    a:matmul(b)
    best = math.min(best, attn.now() - t0)
  end
  return best
end

local function torch_time(threads)
  local py = ([[
import time, torch
torch.set_num_threads(%d)
a = torch.rand(%d, %d); b = torch.rand(%d, %d)
c = a @ b
best = 1e9
for _ in range(%d):
    t0 = time.perf_counter(); c = a @ b; best = min(best, time.perf_counter() - t0)
print(best)
]]):format(threads, n, n, n, n, reps)
  -- torch.set_num_threads does not reach the pthread OpenBLAS: pin it too
  local env = ("OPENBLAS_CORETYPE=%s OPENBLAS_NUM_THREADS=%d OMP_NUM_THREADS=%d "):format(info.blas_core, threads,
    threads)
  local f = io.popen(env .. "/usr/bin/python3 -c '" .. py .. "' 2>/dev/null")
  local out = f and f:read("a")
  if f then f:close() end
  return tonumber(out and out:match("[%d%.e%-]+"))
end

print(("%-8s %10s %10s %12s %10s %8s"):format("threads", "n", "attn ms", "attn GF/s", "torch ms", "ratio"))
local max_threads = math.max(2, info.num_threads)
for _, th in ipairs({1, 2}) do
  if th <= max_threads then
    local t = best_time(th)
    local tt = with_torch and torch_time(th) or nil
    print(("%-8d %10d %10.1f %12.1f %10s %8s"):format(th, n, t * 1e3, flops / t / 1e9,
      tt and ("%.1f"):format(tt * 1e3) or "-", tt and ("%.2fx"):format(tt / t) or "-"))
  end
end
attn.set_num_threads(info.num_threads)
