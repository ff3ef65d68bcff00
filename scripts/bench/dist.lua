-- SPDX-License-Identifier: MIT
-- attn.dist benchmarks (issue 17), run as a plain 1-process driver that
-- launches the MPI jobs itself:
--
--   attn scripts/bench/dist.lua [--quick] [--mpirun "mpirun --oversubscribe --allow-run-as-root"]
--
-- 1. DDP scaling: scripts/ddp_train.lua --bench (the char-GPT training
--    step, global batch 32) with 1 rank and with 2 ranks under mpirun, one
--    thread each; throughput in samples/s and the ratio (target >= 1.8x on
--    2 free cores).
-- 2. Ring attention with 4 ranks vs single-process SDPA at the same
--    sequence length L (forward + backward, H = 4, E = 64, causal): time of
--    a step (best of 3, slowest rank) and peak RSS growth per rank; then
--    4 ranks on a 4x longer sequence.  --parts 2 runs only this part.
-- 3. Allreduce bandwidth: attn.dist.allreduce vs raw MPI_Allreduce (a C
--    program built here with mpicc) on the same float buffers, 2 ranks;
--    bus bandwidth = 2 (P-1)/P * bytes / time; ratio attn / raw (target >= 90%).
-- Every ratio compares numbers measured in this run.  One BLAS thread per
-- rank everywhere (OPENBLAS_NUM_THREADS=1 and attn.set_num_threads(1)).

local quick = false
local parts = {true, true, true}
local mpirun = os.getenv("ATTN_MPIRUN") or "mpirun --oversubscribe --allow-run-as-root"
do
  local a, i = {...}, 1
  while i <= #a do
    if a[i] == "--quick" then quick, i = true, i + 1
    elseif a[i] == "--mpirun" and a[i + 1] then mpirun, i = a[i + 1], i + 2
    elseif a[i] == "--parts" and a[i + 1] then
      parts = {}
      for p in a[i + 1]:gmatch("%d") do parts[tonumber(p)] = true end
      i = i + 2
    else io.stderr:write("usage: attn scripts/bench/dist.lua [--quick] [--parts 123] [--mpirun CMD]\n"); os.exit(2) end
  end
end

local src = os.getenv("ATTN_SOURCE_DIR") or "."
local bin = os.getenv("ATTN_BIN") or arg[-1] or "attn"
local env = "OPENBLAS_NUM_THREADS=1 "

local function run(cmd)
  local p = io.popen(env .. cmd .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  if not ok then error("failed: " .. cmd .. "\n" .. out) end
  return out
end

local function result(out)
  local line = out:match("RESULT[^\n]*")
  if not line then error("no RESULT line in:\n" .. out) end
  local r = {}
  for k, v in line:gmatch("([%w_]+)=(%S+)") do r[k] = tonumber(v) or v end
  return r
end

local function mpi(np, rest) return ("%s -np %d %s %s"):format(mpirun, np, bin, rest) end

print(("attn.dist benchmarks, %s, %d CPU(s) online"):format(os.date("!%Y-%m-%d %H:%M UTC"),
  tonumber(io.popen("nproc"):read("l")) or 0))
print(run(mpirun .. " --version"):match("[^\n]+"))
print()

-- 1. DDP scaling ---------------------------------------------------------
if parts[1] then
  local steps = quick and 15 or 40
  local function tput(np)
    local cmd = ("%s/scripts/ddp_train.lua --bench --steps %d --dim 128 --seq 64"):format(src, steps)
    local best, cpu = 0, 0
    for _ = 1, quick and 1 or 3 do
      local out = np == 1 and run(bin .. " " .. cmd) or run(mpi(np, cmd))
      best = math.max(best, tonumber(out:match("samples/s ([%d%.]+)")))
      cpu = math.max(cpu, tonumber(out:match("samples/cpu%-s ([%d%.]+)")))
    end
    return best, cpu
  end
  local t1, c1 = tput(1)
  local t2, c2 = tput(2)
  print("1. DDP training step (scripts/ddp_train.lua: char-GPT D = 128, T = 64, global batch 32, 1 thread per rank)")
  print("   (samples per CPU-second of all ranks together: the work per sample, whatever the free cores)")
  print(("   %-10s %14s %8s %16s %10s"):format("ranks", "samples/s", "speedup", "samples/cpu-s", "cpu eff."))
  print(("   %-10d %14.1f %8s %16.1f %10s"):format(1, t1, "1.00x", c1, "100%"))
  print(("   %-10d %14.1f %7.2fx %16.1f %9.0f%%"):format(2, t2, t2 / t1, c2, 100 * c2 / c1))
  print()
end

-- 2. Ring attention ------------------------------------------------------
if parts[2] then
  local H, E = 4, 64
  local Ls = quick and {2048} or {4096, 8192}
  print(("2. Causal attention forward+backward, H = %d, E = %d: 4-rank ring vs 1-process SDPA at the same L")
  :format(H, E))
  print(("   %-7s %-16s %10s %18s %8s"):format("L", "how", "time (s)", "peak RSS/rank MB", "time x"))
  for _, L in ipairs(Ls) do
    local one = result(run(("%s %s/scripts/bench/dist_worker.lua ring %d %d %d causal 3"):format(bin, src, L, H, E)))
    local four = result(run(mpi(4, ("%s/scripts/bench/dist_worker.lua ring %d %d %d causal 3"):format(src, L, H, E))))
    print(("   %-7d %-16s %10.3f %18.1f %8s"):format(L, "SDPA, 1 process", one.time, one.peak_kb / 1024, "1.00x"))
    print(("   %-7d %-16s %10.3f %18.1f %7.2fx"):format(L, "ring, 4 ranks", four.time, four.peak_kb / 1024,
      four.time / one.time))
  end
  -- a 4x longer sequence on 4 ranks: peak RSS per rank beside one process at L
  local L = Ls[1]
  local long = result(run(mpi(4, ("%s/scripts/bench/dist_worker.lua ring %d %d %d causal 1"):format(src, 4 * L, H, E))))
  print(("   %-7d %-16s %10.3f %18.1f   (4x the L above)"):format(4 * L, "ring, 4 ranks", long.time,
    long.peak_kb / 1024))
  print()
end

-- 3. Allreduce bandwidth -------------------------------------------------
if parts[3] then
  local dir = os.tmpname()
  os.remove(dir)
  os.execute("mkdir -p " .. dir)
  local exe = dir .. "/mpi_allreduce_raw"
  run(("mpicc -O2 -o %s %s/scripts/bench/mpi_allreduce_raw.c"):format(exe, src))
  local sizes = quick and {1 << 20, 16 << 20} or {64 << 10, 1 << 20, 16 << 20, 64 << 20}
  local P = 2
  print(("3. Allreduce (sum, float32) bus bandwidth, %d ranks: attn.dist.allreduce vs raw MPI_Allreduce"):format(P))
  print(("   %-10s %14s %14s %8s"):format("bytes", "raw GB/s", "attn GB/s", "attn/raw"))
  for _, bytes in ipairs(sizes) do
    local reps = bytes >= (16 << 20) and 10 or 50
    -- alternate the two programs 3 times and keep the best of each, so a
    -- burst of load on a shared machine does not decide the ratio
    local raw, at = {time = math.huge}, {time = math.huge}
    for _ = 1, quick and 1 or 3 do
      local r1 = result(run(("%s -np %d %s %d %d"):format(mpirun, P, exe, bytes, reps)))
      local a1 = result(run(mpi(P, ("%s/scripts/bench/dist_worker.lua allreduce %d %d"):format(src, bytes, reps))))
      if r1.time < raw.time then raw = r1 end
      if a1.time < at.time then at = a1 end
    end
    local bus = function(t) return 2 * (P - 1) / P * bytes / t / 1e9 end
    print(("   %-10d %14.2f %14.2f %7.0f%%"):format(bytes, bus(raw.time), bus(at.time), 100 * raw.time / at.time))
  end
  os.remove(exe)
  os.remove(dir)
end
