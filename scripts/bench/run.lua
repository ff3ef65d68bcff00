-- SPDX-License-Identifier: MIT
-- attn vs PyTorch 1.13 benchmark suite (issue 7).
--
--   attn scripts/bench/run.lua [--quick] [--cases 1,2,...,12] [--threads 1,2] [--isa avx2,portable]
--                              [--out FILE.csv]
--
-- Cases: 1 SDPA forward and forward+backward (B = 1, H = 8, E = 64, L = S,
-- causal and not; and forward+backward at B = 4 for L <= 512, issue 16's
-- shape); 2 nn.MultiheadAttention(512, 8, batch_first) self-attention
-- (B = 1, and forward+backward at B = 4 for L <= 512); 3 tiny ops
-- (microseconds per call from a Lua loop vs a Python loop); 4 a training
-- step of a 1-layer causal self-attention char model; 5 whole seed scripts
-- (process wall time) vs the notebooks' code as Python scripts; 6 sgemm
-- 2048^3 and the FMA peak of each kernel family the CPU has (a C loop
-- compiled with cc for that family: AVX-512, AVX2 + FMA, portable);
-- 7 start-up time of `attn -e ''` vs `python3 -c 'import torch'`; 8 a
-- training step of the character GPT of Karpathy's lecture
-- (scripts/bench/models/char_gpt.lua and .py, same seed, weights and batch);
-- 9 the Annotated Transformer's copy task (N=2, d_model 128, h 4, d_ff 512,
-- batch 80): a training step, and the whole 3 epochs in a fresh process per
-- side for the peak RSS; 10 elementwise and row ops forward + backward on
-- [720, 512] (activations, LayerNorm(512), softmax, log_softmax, a bias
-- add, cross_entropy over 512 classes), issue 16's relu/gelu/LayerNorm
-- target; 11 a training iteration of nanoGPT at its README's CPU recipe
-- (scripts/bench/models/nanogpt.lua and .py), with GFLOP/s and % of the
-- FMA peak from nanoGPT's model-FLOPs estimate; 12 fresh allocations:
-- relu, gelu and LayerNorm forward + backward with x.grad = nil before
-- each step, and the mean of a new loop's first 10 steps (issue 31).
-- The torch side runs in scripts/bench/torch_bench.py under /usr/bin/python3,
-- one process per thread count, with torch.set_num_threads(n),
-- OPENBLAS_NUM_THREADS=n and OPENBLAS_CORETYPE = attn.info().blas_core.
-- Timing: one warm-up call, then the best of repeated calls (about 1 s of
-- them, at most 1000 for cases 1, 2 and 10 and 100-200 for the whole
-- programs; the same rule on both sides; a first call over 5 s is the only
-- one).  Calls of a few ms need the whole budget: this machine's slow spells
-- last longer than 40 of them.  Memory: peak
-- RSS growth, VmHWM after minus VmRSS before, with VmHWM reset through
-- /proc/self/clear_refs (same in the Python process).
-- Kernel families: case 1 runs once per family in --isa (default: every
-- family this CPU supports, attn.info().isa_available), the other cases
-- with the family attn chose (ATTN_ISA forces it).  Each case-1 row shows
-- its GFLOP/s as a share of its family's FMA peak measured in this run,
-- and the end of the report checks issue 19's targets.
local attn = require "attn"
local nn = require "attn.nn"
local F = require "attn.functional"
local optim = require "attn.optim"

local quick, out_csv = false, nil
local cases = {[1] = true, [2] = true, [3] = true, [4] = true, [5] = true, [6] = true, [7] = true, [8] = true,
  [9] = true, [10] = true, [11] = true, [12] = true}
local thread_list = {1, 2}
local isa_list
do
  local args = {...}
  local function list(s)
    local r = {}
    for x in s:gmatch("[^,]+") do r[#r + 1] = assert(math.tointeger(tonumber(x)), "bad number " .. x) end
    return r
  end
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--quick" then
      quick, i = true, i + 1
    elseif a == "--cases" and args[i + 1] then
      cases = {}
      for _, c in ipairs(list(args[i + 1])) do cases[c] = true end
      i = i + 2
    elseif a == "--threads" and args[i + 1] then
      thread_list, i = list(args[i + 1]), i + 2
    elseif a == "--isa" and args[i + 1] then
      isa_list = {}
      for x in args[i + 1]:gmatch("[^,]+") do isa_list[#isa_list + 1] = x end
      i = i + 2
    elseif a == "--out" and args[i + 1] then
      out_csv, i = args[i + 1], i + 2
    else
      io.stderr:write("usage: attn scripts/bench/run.lua [--quick] [--cases 1,2,...] [--threads 1,2] [--isa LIST] " ..
        "[--out FILE]\n")
      os.exit(2)
    end
  end
end

local function loadavg()
  local la = io.open("/proc/loadavg")
  local l = la and la:read("l") or "?"
  if la then la:close() end
  return l
end
local load_at_start = loadavg()

local info = attn.info()
local core = info.blas_core or "SkylakeX"
local isa_default = info.isa or "portable"
local isa_available = {}
for x in (info.isa_available or "portable"):gmatch("[^,]+") do isa_available[#isa_available + 1] = x end
if isa_list then
  for _, x in ipairs(isa_list) do
    local ok = false
    for _, y in ipairs(isa_available) do ok = ok or x == y end
    if not ok then
      io.stderr:write(("run.lua: --isa %s: this CPU supports %s only\n"):format(x, info.isa_available or "portable"))
      os.exit(2)
    end
  end
else
  isa_list = isa_available
end
-- CPU model: attn's cpuid brand string, else /proc/cpuinfo (aarch64 has no "model name")
local cpu_model = info.cpu ~= "" and info.cpu or nil
if not cpu_model then
  local f = io.open("/proc/cpuinfo")
  local s = f and f:read("a") or ""
  if f then f:close() end
  cpu_model = s:match("model name%s*:%s*([^\n]+)") or s:match("CPU part%s*:%s*([^\n]+)") or "unknown CPU"
end
local here = "scripts/bench/"
local attn_bin = (arg and arg[-1]) or "build/bin/attn" -- the interpreter running this script
local PY = "/usr/bin/python3"
local lengths = quick and {128, 512, 1024} or {128, 512, 1024, 2048, 4096, 8192}
local H, E = 8, 64

local function status_kb(field)
  local f = io.open("/proc/self/status")
  if not f then return 0 end
  local s = f:read("a")
  f:close()
  return tonumber(s:match(field .. ":%s*(%d+)")) or 0
end

local function reset_hwm()
  local f = io.open("/proc/self/clear_refs", "w")
  if f then
    f:write("5")
    f:close()
  end
end

-- best seconds, peak RSS growth (bytes), note
-- best wall seconds, peak RSS growth (bytes), note, best CPU seconds
-- (os.clock: the process's CPU time, which other jobs on a shared machine
-- inflate far less than wall time; meaningful per call at 1 thread)
local function bench(fn, budget, max_reps)
  budget, max_reps = budget or 1.0, max_reps or 40
  collectgarbage()
  collectgarbage()
  reset_hwm()
  local rss0 = status_kb("VmRSS")
  local t0, c0 = attn.now(), os.clock()
  fn()
  local first, first_cpu = attn.now() - t0, os.clock() - c0
  local best, best_cpu, note = math.huge, math.huge, ""
  if first > 5 then
    best, best_cpu, note = first, first_cpu, "1 run"
  else
    local reps = math.max(1, math.min(max_reps, math.floor(budget / math.max(first, 1e-9))))
    for _ = 1, reps do
      t0, c0 = attn.now(), os.clock()
      fn()
      best, best_cpu = math.min(best, attn.now() - t0), math.min(best_cpu, os.clock() - c0)
    end
  end
  return best, (status_kb("VmHWM") - rss0) * 1024, note, best_cpu
end

-- seconds per call of a Lua loop, best of 3 loops of >= 0.1 s
local function per_call(fn)
  local n, dt = 1
  while true do
    local t0 = attn.now()
    for _ = 1, n do fn() end
    dt = attn.now() - t0
    if dt > 0.1 then break end
    n = n * 4
  end
  local best = dt / n
  for _ = 1, 2 do
    local t0 = attn.now()
    for _ = 1, n do fn() end
    best = math.min(best, (attn.now() - t0) / n)
  end
  return best
end

local rows = {} -- {case, name, threads, attn_s, torch_s, gflop, attn_mem, torch_mem, note, isa}
local cur_isa = isa_default -- the family the attn side runs with
local function add(case, name, threads, attn_s, torch_s, flop, attn_mem, torch_mem, note, isa)
  rows[#rows + 1] = {case = case, name = name, threads = threads, attn_s = attn_s, torch_s = torch_s, flop = flop,
    attn_mem = attn_mem, torch_mem = torch_mem, note = note or "", isa = isa or cur_isa}
  local r = rows[#rows]
  io.stderr:write(("  [%d] %-26s %dT %-8s attn %s torch %s\n"):format(case, name, threads, r.isa, tostring(attn_s),
    tostring(torch_s)))
end

local function torch_results(threads)
  local list = {}
  for _, c in ipairs({1, 2, 3, 4, 6, 8, 9, 10, 11, 12}) do if cases[c] then list[#list + 1] = c end end
  if #list == 0 then return {} end
  local cmd = ("OPENBLAS_CORETYPE=%s OPENBLAS_NUM_THREADS=%d OMP_NUM_THREADS=%d %s %storch_bench.py " ..
    "--threads %d%s --cases %s")
    :format(core, threads, threads, PY, here, threads, quick and " --quick" or "", table.concat(list, ","))
  io.stderr:write("torch: " .. cmd .. "\n")
  local p = assert(io.popen(cmd))
  local res = {}
  for line in p:lines() do
    local key, t, m, note = line:match("^(%S+)\t(%S+)\t(%S+)\t(.*)$")
    if key then res[key] = {t = tonumber(t), mem = tonumber(m), note = note} end
  end
  p:close()
  return res
end

local function tsec(tr, key)
  local r = tr[key]
  return r and r.t == r.t and r.t or nil
end

local function tget(tr, key)
  local r = tr[key]
  if not r or r.t ~= r.t then return nil, nil, r and r.note or "torch: no result" end
  return r.t, r.mem, r.note
end

local function join(a, b)
  if a == "" then return b end
  if b == "" then return a end
  return a .. "; " .. b
end

---------------------------------------------------------------------------
-- FMA peak of each kernel family the CPU has (needed by case 1's "% of
-- peak" and by case 6): a C loop of 12 independent FMA chains per thread,
-- compiled with cc for the family (AVX-512: -mavx512f; AVX2: -mavx2 -mfma;
-- portable: 4-float GCC vectors at the build's baseline, multiply + add
-- where the baseline has no FMA).  Only families in attn.info().isa_available
-- (attn's cpuid check) are compiled and run, so the probe never executes an
-- instruction this CPU lacks, and runs on aarch64 too (portable only).

local function wall(cmd, reps)
  local best = math.huge
  for _ = 1, reps or 3 do
    local t0 = attn.now()
    local ok = os.execute(cmd .. " >/dev/null 2>&1")
    local dt = attn.now() - t0
    if not ok then return nil end
    best = math.min(best, dt)
  end
  return best
end

local peaks = {} -- peaks[family][threads] = flop/s
local peak_src = [[
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <time.h>
#if defined(FAM_AVX512)
#include <immintrin.h>
typedef __m512 V; enum { W = 16 };
#define SET(x) _mm512_set1_ps(x)
#define FMA(x, m, c) _mm512_fmadd_ps(x, m, c)
static float first(V v) { return _mm512_cvtss_f32(v); }
#elif defined(FAM_AVX2)
#include <immintrin.h>
typedef __m256 V; enum { W = 8 };
#define SET(x) _mm256_set1_ps(x)
#define FMA(x, m, c) _mm256_fmadd_ps(x, m, c)
static float first(V v) { return _mm256_cvtss_f32(v); }
#else
typedef float V __attribute__((vector_size(16))); enum { W = 4 };
#define SET(x) ((V){x, x, x, x})
#define FMA(x, m, c) ((x) * (m) + (c))
static float first(V v) { return v[0]; }
#endif
/* 12 independent accumulators hide the FMA latency on 2 ports. */
static long iters;
static void *run(void *p) {
  V m = SET(0.999999f), c = SET(1e-7f);
  V a0 = SET(0), a1 = SET(1), a2 = SET(2), a3 = SET(3), a4 = SET(4), a5 = SET(5);
  V a6 = SET(6), a7 = SET(7), a8 = SET(8), a9 = SET(9), a10 = SET(10), a11 = SET(11);
#define F(x) x = FMA(x, m, c)
  for (long n = 0; n < iters; n++) {
    F(a0); F(a1); F(a2); F(a3); F(a4); F(a5); F(a6); F(a7); F(a8); F(a9); F(a10); F(a11);
  }
  *(float *)p = first(a0) + first(a1) + first(a2) + first(a3) + first(a4) + first(a5) + first(a6) + first(a7) +
                first(a8) + first(a9) + first(a10) + first(a11);
  return NULL;
}
int main(int argc, char **argv) {
  int t = atoi(argv[1]); iters = atol(argv[2]);
  pthread_t th[64]; float out[64]; struct timespec a, b;
  struct timespec ca, cb;
  clock_gettime(CLOCK_MONOTONIC, &a);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ca);
  for (int i = 0; i < t; i++) pthread_create(&th[i], NULL, run, &out[i]);
  for (int i = 0; i < t; i++) pthread_join(th[i], NULL);
  clock_gettime(CLOCK_MONOTONIC, &b);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cb);
  double s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9;
  double c = (cb.tv_sec - ca.tv_sec) + (cb.tv_nsec - ca.tv_nsec) * 1e-9;
  printf("%.6f %d %g %.6f\n", s, (int)W, (double)out[0], c);
  return 0;
}
]]
local peak_exe, peak_w, peak_t, peak_c, peaks_cpu = {}, {}, {}, {}, {}
local peak_iters = 50000000
local peak_dir
if cases[1] or cases[6] or cases[11] then
  peak_dir = os.tmpname()
  os.remove(peak_dir)
  os.execute("mkdir -p " .. peak_dir)
  local src = peak_dir .. "/fma.c"
  local f = assert(io.open(src, "w"))
  f:write(peak_src)
  f:close()
  local flags = {avx512 = "-DFAM_AVX512 -mavx512f", avx2 = "-DFAM_AVX2 -mavx2 -mfma", portable = "-ffp-contract=fast"}
  for _, fam in ipairs(isa_available) do
    local exe_f = ("%s/fma_%s"):format(peak_dir, fam)
    local ok = flags[fam] and os.execute(("cc -O2 %s -pthread -o %s %s 2>/dev/null"):format(flags[fam], exe_f, src))
    peak_exe[fam] = ok and exe_f or false
    peaks[fam], peak_t[fam], peak_c[fam], peaks_cpu[fam] = {}, {}, {}, {}
  end
end

-- Runs fam's probe reps times on th threads; peaks keep the best run of
-- the whole benchmark (like the cases' best of repeated calls, so a busy
-- moment lowers neither side's figure alone).  Case 1 calls it before and
-- after each family's rows.
local function measure_peak(fam, th, reps)
  local exe_f = peak_exe[fam]
  if not exe_f then return end
  for _ = 1, reps do
    local p = io.popen(("%s %d %d 2>/dev/null"):format(exe_f, th, peak_iters))
    local line = p and p:read("l")
    if p then p:close() end
    local t, w, c = (line or ""):match("^(%S+) (%d+) %S+ (%S+)")
    if t then
      peak_t[fam][th] = math.min(peak_t[fam][th] or math.huge, tonumber(t))
      peak_c[fam][th] = math.min(peak_c[fam][th] or math.huge, tonumber(c))
      peak_w[fam] = tonumber(w)
      peaks[fam][th] = 2.0 * peak_w[fam] * 12 * peak_iters * th / peak_t[fam][th]
      peaks_cpu[fam][th] = 2.0 * peak_w[fam] * 12 * peak_iters * th / peak_c[fam][th]
    end
  end
end

---------------------------------------------------------------------------
-- Cases 1-4 and 6 (sgemm), per thread count

for _, th in ipairs(thread_list) do
  local tr = torch_results(th)
  attn.set_num_threads(th)
  attn.manual_seed(0)

  if cases[1] then
    for _, fam in ipairs(isa_list) do
    attn.set_isa(fam)
    cur_isa = fam
    measure_peak(fam, th, 3)
    for _, L in ipairs(lengths) do
      for _, causal in ipairs({false, true}) do
        local c = causal and 1 or 0
        local q, k, v = attn.randn(1, H, L, E), attn.randn(1, H, L, E), attn.randn(1, H, L, E)
        local fl = 4.0 * L * L * E * H * (causal and 0.5 or 1)
        local opts = {is_causal = causal}
        local t, m, note, cpu = attn.no_grad(function()
          return bench(function() return attn.scaled_dot_product_attention(q, k, v, opts) end, 1.5, 1000)
        end)
        local key = ("sdpa_fwd_L%d_c%d"):format(L, c)
        local tt, tm, tn = tget(tr, key)
        add(1, ("sdpa fwd%s L=%d"):format(causal and " causal" or "", L), th, t, tt, fl, m, tm, join(note, tn))
        rows[#rows].cpu_s = cpu
        local qg, kg, vg = q:clone():requires_grad_(), k:clone():requires_grad_(), v:clone():requires_grad_()
        t, m, note, cpu = bench(function()
          attn.scaled_dot_product_attention(qg, kg, vg, opts):sum():backward()
        end, 1.5, 1000)
        key = ("sdpa_fwdbwd_L%d_c%d"):format(L, c)
        tt, tm, tn = tget(tr, key)
        add(1, ("sdpa fwd+bwd%s L=%d"):format(causal and " causal" or "", L), th, t, tt, fl * 3.5, m, tm,
          join(note, tn))
        rows[#rows].cpu_s = cpu
        q, k, v, qg, kg, vg = nil, nil, nil, nil, nil, nil
      end
    end
    measure_peak(fam, th, 3)
    end
    attn.set_isa(isa_default)
    cur_isa = isa_default
    -- issue 16's small-sequence shape: B = 4, forward + backward
    for _, L in ipairs(lengths) do
      if L <= 512 then
        local qg, kg, vg = attn.randn(4, H, L, E):requires_grad_(), attn.randn(4, H, L, E):requires_grad_(),
          attn.randn(4, H, L, E):requires_grad_()
        local t, m, note, cpu = bench(function()
          attn.scaled_dot_product_attention(qg, kg, vg):sum():backward()
        end, 3.0, 1000)
        local tt, tm, tn = tget(tr, ("sdpa_fwdbwd_B4_L%d"):format(L))
        add(1, ("sdpa fwd+bwd B=4 L=%d"):format(L), th, t, tt, 4.0 * L * L * E * H * 4 * 3.5, m, tm, join(note, tn))
        rows[#rows].cpu_s = cpu
      end
    end
  end

  if cases[2] then
    local mha = attn.nn.MultiheadAttention(512, 8, {batch_first = true})
    for _, L in ipairs(lengths) do
      local x = attn.randn(1, L, 512)
      local t, m, note = attn.no_grad(function()
        return bench(function() return mha(x, x, x, {need_weights = false}) end, 1.0, 1000)
      end)
      local tt, tm, tn = tget(tr, "mha_fwd_L" .. L)
      add(2, "mha fwd L=" .. L, th, t, tt, nil, m, tm, join(note, tn))
      local xg = x:clone():requires_grad_()
      t, m, note = bench(function()
        local o = mha(xg, xg, xg, {need_weights = false})
        o:sum():backward()
      end, 1.0, 1000)
      tt, tm, tn = tget(tr, "mha_fwdbwd_L" .. L)
      add(2, "mha fwd+bwd L=" .. L, th, t, tt, nil, m, tm, join(note, tn))
    end
    for _, L in ipairs(lengths) do -- issue 16's shape: B = 4
      if L <= 512 then
        local xg = attn.randn(4, L, 512):requires_grad_()
        local t, m, note = bench(function()
          local o = mha(xg, xg, xg, {need_weights = false})
          o:sum():backward()
        end, 3.0, 1000)
        local tt, tm, tn = tget(tr, "mha_fwdbwd_B4_L" .. L)
        add(2, "mha fwd+bwd B=4 L=" .. L, th, t, tt, nil, m, tm, join(note, tn))
      end
    end
  end

  if cases[3] then
    local a, b = attn.randn(6, 3), attn.randn(3, 2)
    add(3, "tiny (6x3)@(3x2)", th, per_call(function() return a:matmul(b) end), tsec(tr, "tiny_matmul"))
    local s = attn.randn(1, 6)
    add(3, "tiny softmax 1x6", th, per_call(function() return s:softmax(-1) end), tsec(tr, "tiny_softmax"))
    local lin, x = nn.Linear(8, 4), attn.randn(10, 8)
    add(3, "tiny Linear(8,4) 10x8", th, per_call(function() return lin(x) end), tsec(tr, "tiny_linear"))
    local emb, ids = nn.Embedding(50000, 3), attn.tensor({1, 2, 3, 4, 5, 6})
    add(3, "tiny Embedding 6 ids", th, per_call(function() return emb(ids) end), tsec(tr, "tiny_embedding"))
    local ag, bg = a:clone():requires_grad_(), b:clone():requires_grad_()
    add(3, "tiny matmul+backward", th, per_call(function() ag:matmul(bg):sum():backward() end),
      tsec(tr, "tiny_matmul_backward"))
  end

  if cases[4] then
    local V, D, T, B = 28, 32, 16, 32
    local CharAttn = nn.Module:extend("CharAttn")
    function CharAttn:init()
      self.tok = nn.Embedding(V, D)
      self.pos = nn.Embedding(T, D)
      self.q = nn.Linear(D, D, false)
      self.k = nn.Linear(D, D, false)
      self.v = nn.Linear(D, D, false)
      self.out = nn.Linear(D, V)
      self.positions = attn.arange(1, T + 1)
    end
    function CharAttn:forward(ids)
      local x = self.tok(ids) + self.pos(self.positions)
      local a = attn.scaled_dot_product_attention(self.q(x), self.k(x), self.v(x), {is_causal = true})
      return self.out(a + x)
    end
    local model = CharAttn()
    local opt = optim.Adam(model:parameters(), {lr = 1e-3})
    local ids = attn.randint(1, V + 1, B, T)
    local tgt = attn.randint(1, V + 1, B * T)
    local function step()
      opt:zero_grad()
      local loss = F.cross_entropy(model(ids):reshape(B * T, V), tgt)
      loss:backward()
      opt:step()
    end
    local t, m, note = bench(step, 1.0, 200)
    local tt, tm, tn = tget(tr, "train_step")
    add(4, "train step (B32 T16 D32)", th, t, tt, nil, m, tm, join(note, tn))
  end

  if cases[8] then
    -- the character GPT of scripts/bench/models/char_gpt.{lua,py}: same seed,
    -- weights and batch on both sides (the first losses must agree)
    package.path = here .. "models/?.lua;" .. package.path
    local gpt = require "char_gpt"
    local model, opt, xb, yb = gpt.setup(0)
    local loss0 = gpt.step(model, opt, xb, yb):item()
    local t, m, note = bench(function() gpt.step(model, opt, xb, yb) end, 2.0, 200)
    local tt, tm, tn = tget(tr, "char_gpt_step")
    local tl = tsec(tr, "char_gpt_loss0")
    local same = tl and ("first loss %.6f, torch %.6f"):format(loss0, tl) or ("first loss %.6f"):format(loss0)
    add(8, "char GPT step (4x64, T32 B16)", th, t, tt, nil, m, tm, join(join(note, tn), same))
  end

  if cases[9] then
    -- the Annotated Transformer's copy task (scripts/bench/models/
    -- annotated_transformer.{lua,py}): one training step on a fixed batch
    package.path = here .. "models/?.lua;" .. package.path
    local at = require "annotated_transformer"
    local model, crit, opt, sched = at.setup(0)
    local batch = at.data_gen(at.BATCH, 1)()
    local loss0 = at.step(model, crit, opt, sched, batch):item()
    local t, m, note = bench(function() at.step(model, crit, opt, sched, batch) end, 2.0, 100)
    local tt, tm, tn = tget(tr, "annotated_step")
    local tl = tsec(tr, "annotated_loss0")
    local same = tl and ("first loss %.6f, torch %.6f"):format(loss0, tl) or ("first loss %.6f"):format(loss0)
    add(9, "Annotated Transformer step (copy task)", th, t, tt, nil, m, tm, join(join(note, tn), same))
    -- the whole task (3 epochs of 20 batches) in a fresh process per side:
    -- wall time and the process's peak RSS (VmHWM), no collectgarbage call
    local function run_proc(cmd)
      local p = io.popen(cmd .. " 2>&1")
      local out = p and p:read("a") or ""
      if p then p:close() end
      local secs, hwm, loss = out:match("time (%S+) hwm_kb (%d+) loss (%S+)")
      return tonumber(secs), hwm and tonumber(hwm) * 1024, tonumber(loss)
    end
    local hwm_code = "local f = io.open('/proc/self/status') local s = f:read('a') f:close() " ..
      "return s:match('VmHWM:%s*(%d+)')"
    local a_s, a_m, a_loss = run_proc(("%s -e %q"):format(attn_bin,
      ("attn = require 'attn' attn.set_num_threads(%d) " ..
      "package.path = '%smodels/?.lua;' .. package.path local t0 = attn.now() " ..
      "local loss = require('annotated_transformer').train(3, 0) local function hwm() %s end " ..
      "print(('time %%.6f hwm_kb %%s loss %%.6f'):format(attn.now() - t0, hwm(), loss))"):format(th, here, hwm_code)))
    local t_s, t_m, t_loss = run_proc(("OPENBLAS_CORETYPE=%s OPENBLAS_NUM_THREADS=%d %s -c %q"):format(core, th, PY,
      ("import sys, time, torch; torch.set_num_threads(%d); sys.path.insert(0, '%smodels'); " ..
      "import annotated_transformer as at; t0 = time.time(); loss = at.train(3, 0); " ..
      "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0]; " ..
      "print('time %%.6f hwm_kb %%s loss %%.6f' %% (time.time() - t0, hwm, loss))"):format(th, here)))
    add(9, "Annotated Transformer copy task, 3 epochs (process peak RSS)", th, a_s, t_s, nil, a_m, t_m,
      ("last loss %s, torch %s"):format(a_loss and ("%.4f"):format(a_loss) or "?",
        t_loss and ("%.4f"):format(t_loss) or "?"))
  end

  if cases[10] then
    local x0, g = attn.randn(720, 512), attn.randn(720, 512)
    local ln = nn.LayerNorm(512)
    local tgt = attn.randint(1, 513, 720)
    local bias = attn.randn(512):requires_grad_()
    local ops = {
      {"relu", function(t) return t:relu() end}, {"gelu", function(t) return F.gelu(t) end},
      {"gelu_tanh", function(t) return F.gelu(t, "tanh") end}, {"silu", function(t) return F.silu(t) end},
      {"tanh", function(t) return t:tanh() end}, {"sigmoid", function(t) return t:sigmoid() end},
      {"layer_norm", function(t) return ln(t) end}, {"softmax", function(t) return t:softmax(-1) end},
      {"log_softmax", function(t) return t:log_softmax(-1) end}, {"add_bias", function(t) return t + bias end},
      {"mul", function(t) return t * t end},
    }
    for _, o in ipairs(ops) do
      local xg = x0:clone():requires_grad_()
      local t, m, note = bench(function() o[2](xg):backward(g) end, 1.0, 1000)
      local tt, tm, tn = tget(tr, "ew_" .. o[1])
      add(10, o[1] .. " fwd+bwd [720,512]", th, t, tt, nil, m, tm, join(note, tn))
    end
    local xg = x0:clone():requires_grad_()
    local t, m, note = bench(function() F.cross_entropy(xg, tgt):backward() end, 1.0, 1000)
    local tt, tm, tn = tget(tr, "ew_cross_entropy")
    add(10, "cross_entropy fwd+bwd [720,512]", th, t, tt, nil, m, tm, join(note, tn))
  end

  if cases[11] then
    -- nanoGPT's README CPU recipe (scripts/bench/models/nanogpt.{lua,py}):
    -- one train.py iteration on a fixed batch; GFLOP/s and % of the FMA
    -- peak from nanoGPT's own model-FLOPs estimate (its estimate_mfu)
    package.path = here .. "models/?.lua;" .. package.path
    local ng = require "nanogpt"
    local model, opt, xb, yb = ng.setup(0)
    local loss0 = ng.step(model, opt, xb, yb):item()
    measure_peak(isa_default, th, 3)
    local t, m, note, cpu = bench(function() ng.step(model, opt, xb, yb) end, 3.0, 200)
    measure_peak(isa_default, th, 2)
    local tt, tm, tn = tget(tr, "nanogpt_step")
    local tl = tsec(tr, "nanogpt_loss0")
    local same = tl and ("first loss %.6f, torch %.6f"):format(loss0, tl) or ("first loss %.6f"):format(loss0)
    add(11, "nanoGPT CPU recipe step (4x4x128, T64 B12)", th, t, tt, ng.flops_per_step(), m, tm,
      join(join(note, tn), same))
    rows[#rows].cpu_s = cpu
  end

  if cases[12] then
    -- fresh allocations: x.grad = nil before each step (torch 2.x's
    -- zero_grad(set_to_none=True)), so every step allocates its gradient
    -- and temporaries anew; then the first 10 steps of a new loop against
    -- its steady state
    local x0, g = attn.randn(720, 512), attn.randn(720, 512)
    local ln = nn.LayerNorm(512)
    local ops = {{"relu", function(t) return t:relu() end}, {"gelu", function(t) return F.gelu(t) end},
      {"layer_norm", function(t) return ln(t) end}}
    for _, o in ipairs(ops) do
      local xg = x0:clone():requires_grad_()
      local t, m, note = bench(function()
        xg.grad = nil
        o[2](xg):backward(g)
      end, 1.0, 1000)
      local tt, tm, tn = tget(tr, "fresh_" .. o[1])
      add(12, o[1] .. " fwd+bwd, .grad = nil", th, t, tt, nil, m, tm, join(note, tn))
      -- a new loop on a new leaf: each of its first 10 steps timed alone
      collectgarbage()
      local xn = x0:clone():requires_grad_()
      local times = {}
      for i = 1, 200 do
        local t0 = attn.now()
        xn.grad = nil
        o[2](xn):backward(g)
        times[i] = attn.now() - t0
      end
      local first = 0
      for i = 1, 10 do first = first + times[i] / 10 end
      local steady = {}
      for i = 101, 200 do steady[#steady + 1] = times[i] end
      table.sort(steady)
      local med = steady[50]
      local ft, fnote = tsec(tr, "first10_" .. o[1]), (tr["first10_" .. o[1]] or {}).note
      add(12, o[1] .. " first 10 steps (mean)", th, first, ft, nil, nil, nil,
        join(("%.2fx attn's steady state (median of steps 101-200, %.1f us)"):format(first / med, med * 1e6),
          fnote or ""))
      rows[#rows].first_ratio = first / med
    end
  end

  if cases[6] then
    local n = 2048
    local a, b = attn.rand(n, n), attn.rand(n, n)
    local t, m, note = bench(function() return a:matmul(b) end, 0.5, 5)
    local tt, tm, tn = tget(tr, "sgemm_2048")
    add(6, "sgemm 2048^3", th, t, tt, 2.0 * n * n * n, m, tm, join(note, tn))
  end
end

if cases[1] or cases[6] or cases[11] then
  for _, fam in ipairs(isa_available) do
    for _, th in ipairs((cases[1] or cases[6] or fam == isa_default) and thread_list or {}) do
      if cases[6] then measure_peak(fam, th, 3) end
      local name = ("FMA peak (%s)"):format(fam)
      local t = peak_t[fam] and peak_t[fam][th]
      if t then
        add(6, name, th, t, nil, 2.0 * peak_w[fam] * 12 * peak_iters * th, nil, nil,
          ("C loop via cc, best run; from CPU time %.1f GFLOP/s"):format(peaks_cpu[fam][th] / 1e9), fam)
        rows[#rows].cpu_s = peak_c[fam][th] / th
      elseif cases[6] or peak_exe[fam] == false then
        add(6, name, th, nil, nil, nil, nil, nil, peak_exe[fam] == false and "cc failed" or "probe did not run", fam)
      end
    end
  end
  os.execute("rm -rf " .. peak_dir)
end

---------------------------------------------------------------------------
-- Case 5: whole scripts, process wall time (start-up included)

local exe = (arg and arg[-1]) or "build/bin/attn"
if cases[5] then
  local data = io.open("/work/shared/data/names-indian.txt") and " --data /work/shared/data/names-indian.txt" or ""
  local scripts = {
    {"one_hot_attention.lua", "", "one_hot_attention.py"},
    {"self_attention_from_scratch.lua", "", "self_attention_from_scratch.py"},
    {"multi_head_split.lua", "", "multi_head_split.py"},
    {"luong_bahdanau.lua", " --quick", nil},
    -- its PNGs (written, as by default) go to a scratch dir, not the checkout
    {"char_attention_names.lua", " --quick" .. data .. " --out /tmp/attn-bench-names-out", nil},
  }
  for _, s in ipairs(scripts) do
    local ta = wall(("%s scripts/%s%s"):format(exe, s[1], s[2]), 3)
    local tt, note
    if s[3] then
      tt = wall(("OPENBLAS_CORETYPE=%s %s %snotebooks/%s"):format(core, PY, here, s[3]), 3)
      note = "python: notebook cells as a script"
    else
      tt = wall(("OPENBLAS_CORETYPE=%s %s -c 'import torch'"):format(core, PY), 3)
      note = "torch side: import torch only (no Python port of the training; attn runs the whole --quick script)"
    end
    add(5, "script " .. s[1] .. s[2]:gsub(" %-%-data %S+", ""):gsub(" %-%-out %S+", ""), 0, ta, tt, nil, nil, nil,
      note)
  end
  os.execute("rm -rf /tmp/attn-bench-names-out")
end

if cases[7] then
  local ta = wall(exe .. " -e ''", 10)
  local tt = wall(("OPENBLAS_CORETYPE=%s %s -c 'import torch'"):format(core, PY), 5)
  add(7, "start-up (attn -e '' / import torch)", 0, ta, tt, nil, nil, nil, "best of 10 / 5")
end

---------------------------------------------------------------------------
-- Report

local function fmt_time(s, case)
  if not s then return "-" end
  if case == 3 then return ("%.2f us"):format(s * 1e6) end
  if s < 1 then return ("%.3f ms"):format(s * 1e3) end
  return ("%.3f s"):format(s)
end
local function fmt_mem(b)
  if not b then return "-" end
  return ("%.1f MB"):format(b / 2 ^ 20)
end

-- % of the family's FMA peak: at 1 thread from CPU times on both sides
-- (robust to other jobs time-sharing the cores), else from wall times.
local function pct_peak(r)
  if (r.case ~= 1 and r.case ~= 11) or not (r.flop and r.attn_s) then return nil end
  local pc = peaks_cpu[r.isa] and peaks_cpu[r.isa][r.threads]
  if r.threads == 1 and r.cpu_s and pc then return 100 * r.flop / r.cpu_s / pc end
  local pk = peaks[r.isa] and peaks[r.isa][r.threads]
  return pk and 100 * r.flop / r.attn_s / pk or nil
end

print(("CPU: %s; kernel family: %s (available: %s%s); BLAS core: %s\n"):format(cpu_model, isa_default,
  info.isa_available or "portable", info.isa_note and ("; " .. info.isa_note) or "", core))
local header = {"case", "name", "threads", "isa", "attn", "attn CPU", "torch", "torch/attn", "attn GFLOP/s",
  "% of peak", "torch GFLOP/s", "attn peak RSS", "torch peak RSS", "note"}
print(("| %s |"):format(table.concat(header, " | ")))
print(("|%s"):format(("---|"):rep(#header)))
for _, r in ipairs(rows) do
  local ratio = (r.attn_s and r.torch_s) and ("%.2fx"):format(r.torch_s / r.attn_s) or "-"
  local ga = (r.flop and r.attn_s) and ("%.1f"):format(r.flop / r.attn_s / 1e9) or "-"
  local gt = (r.flop and r.torch_s) and ("%.1f"):format(r.flop / r.torch_s / 1e9) or "-"
  local pp = pct_peak(r)
  print(("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |"):format(r.case, r.name,
    r.threads > 0 and tostring(r.threads) or "-", r.isa, fmt_time(r.attn_s, r.case),
    r.cpu_s and r.threads == 1 and fmt_time(r.cpu_s, r.case) or "-", fmt_time(r.torch_s, r.case),
    ratio, ga, pp and ("%.0f%%"):format(pp) or "-", gt, fmt_mem(r.attn_mem), fmt_mem(r.torch_mem), r.note))
end

-- Issue 19's targets for the SDPA rows at L >= 1024, 1 thread (non-causal):
-- AVX2 forward >= 75% of the AVX2 peak and >= 3x torch, forward+backward >=
-- 60% and >= 3x; the portable family within 4x of the AVX2 one.
local function find(isa, name, th)
  for _, r in ipairs(rows) do
    if r.case == 1 and r.isa == isa and r.name == name and r.threads == th then return r end
  end
end
local checks = {}
for _, L in ipairs(lengths) do
  if L >= 1024 then
    for _, what in ipairs({{"fwd", 75}, {"fwd+bwd", 60}}) do
      local name = ("sdpa %s L=%d"):format(what[1], L)
      local a2, pt = find("avx2", name, 1), find("portable", name, 1)
      local pp = a2 and pct_peak(a2)
      if pp then
        checks[#checks + 1] = ("%s avx2 1T: %.0f%% of the AVX2 peak (target >= %d%%): %s"):format(name, pp, what[2],
          pp >= what[2] and "met" or "NOT met")
      end
      if a2 and a2.attn_s and a2.torch_s then
        local x = a2.torch_s / a2.attn_s
        checks[#checks + 1] = ("%s avx2 1T: %.2fx torch (target >= 3x): %s"):format(name, x, x >= 3 and "met" or
          "NOT met")
      end
      if a2 and pt and a2.attn_s and pt.attn_s then
        local x = (pt.cpu_s and a2.cpu_s) and pt.cpu_s / a2.cpu_s or pt.attn_s / a2.attn_s
        checks[#checks + 1] = ("%s portable 1T: %.2fx the avx2 time (target <= 4x): %s"):format(name, x, x <= 4 and
          "met" or "NOT met")
      end
    end
  end
end
-- Issue 16's small-sequence target: SDPA and MHA forward+backward at B = 4,
-- L = 128 and 512, 1 thread >= 1.5x torch.
for _, r in ipairs(rows) do
  if (r.case == 1 or r.case == 2) and r.threads == 1 and r.name:match(" B=4 ") and r.attn_s and r.torch_s then
    local x = r.torch_s / r.attn_s
    checks[#checks + 1] = ("%s 1T: %.2fx torch (target >= 1.5x, issue 16): %s"):format(r.name, x, x >= 1.5 and "met"
      or "NOT met")
  end
end
-- Issue 16's elementwise target: relu, gelu and LayerNorm forward+backward
-- on [720, 512] at 1 thread >= 1.5x torch.
for _, r in ipairs(rows) do
  if r.case == 10 and r.threads == 1 and r.attn_s and r.torch_s and
    (r.name:match("^relu ") or r.name:match("^gelu ") or r.name:match("^layer_norm ")) then
    local x = r.torch_s / r.attn_s
    checks[#checks + 1] = ("%s 1T: %.2fx torch (target >= 1.5x, issue 16): %s"):format(r.name, x, x >= 1.5 and "met"
      or "NOT met")
  end
end
-- Issue 31: whole programs scale (2 threads >= 1.5x their 1-thread time);
-- nanoGPT's recipe at 1 thread >= 2x torch and >= 70% of the FMA peak;
-- fresh allocations >= 1.5x torch with the first 10 steps within 1.5x of
-- the steady state; case 10's ops at 2 threads >= torch.
local function row(case, name, th)
  for _, r in ipairs(rows) do
    if r.case == case and r.name == name and r.threads == th then return r end
  end
end
for _, r in ipairs(rows) do
  if (r.case == 8 or r.case == 9 or r.case == 11) and r.threads == 1 and r.attn_s and not r.name:match("epochs") then
    local r2 = row(r.case, r.name, 2)
    if r2 and r2.attn_s then
      local x = r.attn_s / r2.attn_s
      checks[#checks + 1] = ("%s: 2 threads %.2fx 1 thread (target >= 1.5x, issue 31): %s"):format(r.name, x,
        x >= 1.5 and "met" or "NOT met")
    end
  end
  if r.case == 11 and r.threads == 1 and r.attn_s and r.torch_s then
    local x, pp = r.torch_s / r.attn_s, pct_peak(r)
    checks[#checks + 1] = ("%s 1T: %.2fx torch (target >= 2x, issue 31): %s"):format(r.name, x, x >= 2 and "met" or
      "NOT met")
    if pp then
      checks[#checks + 1] = ("%s 1T: %.0f%% of the FMA peak (target >= 70%%, issue 31): %s"):format(r.name, pp,
        pp >= 70 and "met" or "NOT met")
    end
  end
  if r.case == 12 and r.attn_s and r.torch_s and r.name:match("grad = nil") then
    local x = r.torch_s / r.attn_s
    checks[#checks + 1] = ("%s %dT: %.2fx torch (target >= 1.5x, issue 31): %s"):format(r.name, r.threads, x,
      x >= 1.5 and "met" or "NOT met")
  end
  if r.case == 12 and r.first_ratio then
    checks[#checks + 1] = ("%s %dT: %.2fx the steady state (target <= 1.5x, issue 31): %s"):format(r.name, r.threads,
      r.first_ratio, r.first_ratio <= 1.5 and "met" or "NOT met")
  end
  if r.case == 10 and r.threads == 2 and r.attn_s and r.torch_s then
    local x = r.torch_s / r.attn_s
    checks[#checks + 1] = ("%s 2T: %.2fx torch (target >= 1x, issue 31): %s"):format(r.name, x, x >= 1 and "met" or
      "NOT met")
  end
end
if #checks > 0 then
  print("\nTargets (issues 16, 19 and 31):")
  for _, c in ipairs(checks) do print("- " .. c) end
end

out_csv = out_csv or (here .. "results/" .. os.date("!%Y%m%dT%H%M%SZ") .. (quick and "-quick" or "") .. ".csv")
local f = io.open(out_csv, "w")
if f then
  f:write("case,name,threads,isa,attn_s,attn_cpu_s,torch_s,ratio,attn_gflops,pct_of_peak,torch_gflops," ..
    "attn_peak_bytes," ..
    "torch_peak_bytes,note\n")
  local function n(x) return x and ("%.9g"):format(x) or "" end
  for _, r in ipairs(rows) do
    f:write(('%d,"%s",%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,"%s"\n'):format(r.case, r.name, r.threads, r.isa, n(r.attn_s),
      n(r.cpu_s), n(r.torch_s), n(r.attn_s and r.torch_s and r.torch_s / r.attn_s),
      n(r.flop and r.attn_s and r.flop / r.attn_s / 1e9), n(pct_peak(r)),
      n(r.flop and r.torch_s and r.flop / r.torch_s / 1e9), n(r.attn_mem), n(r.torch_mem), r.note))
  end
  f:close()
  local la = io.open("/proc/loadavg")
  local load = la and la:read("l") or "?"
  if la then la:close() end
  -- what docs/benchmarks.md says of the run (scripts/bench/report.lua)
  local function sh(cmd)
    local p = io.popen(cmd .. " 2>/dev/null")
    local r = p and p:read("l") or ""
    if p then p:close() end
    return r
  end
  local m = io.open(out_csv .. ".meta", "w")
  if m then
    local threads = {}
    for _, t in ipairs(thread_list) do threads[#threads + 1] = tostring(t) end
    local fields = {
      {"date", os.date("!%Y-%m-%d %H:%M UTC")}, {"cpu", cpu_model}, {"cores", sh("nproc")},
      {"isa", isa_default}, {"isa_available", info.isa_available or ""}, {"blas_core", core},
      {"blas_config", info.blas_config or ""}, {"threads", table.concat(threads, ",")},
      {"quick", tostring(quick)}, {"attn_version", info.version or ""}, {"commit", sh("git rev-parse --short HEAD")},
      {"torch", sh(PY .. " -c 'import torch; print(torch.__version__)'")}, {"load_at_start", load_at_start},
      {"load_at_end", load},
    }
    for _, kv in ipairs(fields) do m:write(kv[1], ": ", (tostring(kv[2]):gsub("\n", " ")), "\n") end
    m:close()
  end
  print(("\n%s, %s, kernel family %s, BLAS core %s, %s; load average at the end %s; CSV: %s"):format(
    os.date("!%Y-%m-%d %H:%M UTC"), cpu_model, isa_default, core, info.blas_config or "", load, out_csv))
end
