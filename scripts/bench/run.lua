-- attn vs PyTorch 1.13 benchmark suite (issue 7).
--
--   attn scripts/bench/run.lua [--quick] [--cases 1,2,3,4,5,6,7] [--threads 1,2] [--out FILE.csv]
--
-- Cases: 1 SDPA forward and forward+backward (B = 1, H = 8, E = 64, L = S,
-- causal and not); 2 nn.MultiheadAttention(512, 8, batch_first) self-
-- attention; 3 tiny ops (microseconds per call from a Lua loop vs a Python
-- loop); 4 a training step of a 1-layer causal self-attention char model;
-- 5 whole seed scripts (process wall time) vs the notebooks' code as Python
-- scripts; 6 sgemm 2048^3 and an AVX-512 FMA peak loop (C, compiled with cc);
-- 7 start-up time of `attn -e ''` vs `python3 -c 'import torch'`.
-- The torch side runs in scripts/bench/torch_bench.py under /usr/bin/python3,
-- one process per thread count, with torch.set_num_threads(n),
-- OPENBLAS_NUM_THREADS=n and OPENBLAS_CORETYPE = attn.info().blas_core.
-- Timing: one warm-up call, then the best of repeated calls (about 0.5 s of
-- them, at most 20; a first call over 5 s is the only one).  Memory: peak
-- RSS growth, VmHWM after minus VmRSS before, with VmHWM reset through
-- /proc/self/clear_refs (same in the Python process).
local attn = require "attn"
local nn = require "attn.nn"
local F = require "attn.functional"
local optim = require "attn.optim"

local quick, out_csv = false, nil
local cases = {[1] = true, [2] = true, [3] = true, [4] = true, [5] = true, [6] = true, [7] = true}
local thread_list = {1, 2}
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
    elseif a == "--out" and args[i + 1] then
      out_csv, i = args[i + 1], i + 2
    else
      io.stderr:write("usage: attn scripts/bench/run.lua [--quick] [--cases 1,2,...] [--threads 1,2] [--out FILE]\n")
      os.exit(2)
    end
  end
end

local info = attn.info()
local core = info.blas_core or "SkylakeX"
local here = "scripts/bench/"
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
local function bench(fn, budget, max_reps)
  budget, max_reps = budget or 0.5, max_reps or 20
  collectgarbage()
  collectgarbage()
  reset_hwm()
  local rss0 = status_kb("VmRSS")
  local t0 = attn.now()
  fn()
  local first = attn.now() - t0
  local best, note = math.huge, ""
  if first > 5 then
    best, note = first, "1 run"
  else
    local reps = math.max(1, math.min(max_reps, math.floor(budget / math.max(first, 1e-9))))
    for _ = 1, reps do
      t0 = attn.now()
      fn()
      best = math.min(best, attn.now() - t0)
    end
  end
  return best, (status_kb("VmHWM") - rss0) * 1024, note
end

-- seconds per call of a Lua loop, best of 3 loops of >= 0.1 s
local function per_call(fn)
  local n, dt = 1, 0
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

local rows = {} -- {case, name, threads, attn_s, torch_s, gflop, attn_mem, torch_mem, note}
local function add(case, name, threads, attn_s, torch_s, flop, attn_mem, torch_mem, note)
  rows[#rows + 1] = {case = case, name = name, threads = threads, attn_s = attn_s, torch_s = torch_s, flop = flop,
    attn_mem = attn_mem, torch_mem = torch_mem, note = note or ""}
  local r = rows[#rows]
  io.stderr:write(("  [%d] %-26s %dT attn %s torch %s\n"):format(case, name, threads, tostring(attn_s),
    tostring(torch_s)))
end

local function torch_results(threads)
  local list = {}
  for _, c in ipairs({1, 2, 3, 4, 6}) do if cases[c] then list[#list + 1] = c end end
  if #list == 0 then return {} end
  local cmd = ("OPENBLAS_CORETYPE=%s OPENBLAS_NUM_THREADS=%d OMP_NUM_THREADS=%d %s %storch_bench.py --threads %d%s --cases %s")
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
-- Cases 1-4 and 6 (sgemm), per thread count

for _, th in ipairs(thread_list) do
  local tr = torch_results(th)
  attn.set_num_threads(th)
  attn.manual_seed(0)

  if cases[1] then
    for _, L in ipairs(lengths) do
      for _, causal in ipairs({false, true}) do
        local c = causal and 1 or 0
        local q, k, v = attn.randn(1, H, L, E), attn.randn(1, H, L, E), attn.randn(1, H, L, E)
        local fl = 4.0 * L * L * E * H * (causal and 0.5 or 1)
        local opts = {is_causal = causal}
        local t, m, note = attn.no_grad(function()
          return bench(function() return attn.scaled_dot_product_attention(q, k, v, opts) end)
        end)
        local key = ("sdpa_fwd_L%d_c%d"):format(L, c)
        local tt, tm, tn = tget(tr, key)
        add(1, ("sdpa fwd%s L=%d"):format(causal and " causal" or "", L), th, t, tt, fl, m, tm, join(note, tn))
        local qg, kg, vg = q:clone():requires_grad_(), k:clone():requires_grad_(), v:clone():requires_grad_()
        t, m, note = bench(function()
          attn.scaled_dot_product_attention(qg, kg, vg, opts):sum():backward()
        end)
        key = ("sdpa_fwdbwd_L%d_c%d"):format(L, c)
        tt, tm, tn = tget(tr, key)
        add(1, ("sdpa fwd+bwd%s L=%d"):format(causal and " causal" or "", L), th, t, tt, fl * 3.5, m, tm,
          join(note, tn))
        q, k, v, qg, kg, vg = nil, nil, nil, nil, nil, nil
      end
    end
  end

  if cases[2] then
    local mha = attn.nn.MultiheadAttention(512, 8, {batch_first = true})
    for _, L in ipairs(lengths) do
      local x = attn.randn(1, L, 512)
      local t, m, note = attn.no_grad(function()
        return bench(function() return mha(x, x, x, {need_weights = false}) end)
      end)
      local tt, tm, tn = tget(tr, "mha_fwd_L" .. L)
      add(2, "mha fwd L=" .. L, th, t, tt, nil, m, tm, join(note, tn))
      local xg = x:clone():requires_grad_()
      t, m, note = bench(function()
        local o = mha(xg, xg, xg, {need_weights = false})
        o:sum():backward()
      end)
      tt, tm, tn = tget(tr, "mha_fwdbwd_L" .. L)
      add(2, "mha fwd+bwd L=" .. L, th, t, tt, nil, m, tm, join(note, tn))
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

  if cases[6] then
    local n = 2048
    local a, b = attn.rand(n, n), attn.rand(n, n)
    local t, m, note = bench(function() return a:matmul(b) end, 0.5, 5)
    local tt, tm, tn = tget(tr, "sgemm_2048")
    add(6, "sgemm 2048^3", th, t, tt, 2.0 * n * n * n, m, tm, join(note, tn))
  end
end

---------------------------------------------------------------------------
-- Case 6: FMA peak, a C loop of independent AVX-512 FMAs (cc -O2 -mavx512f, 12 independent accumulators)

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

if cases[6] then
  local dir = os.tmpname()
  os.remove(dir)
  os.execute("mkdir -p " .. dir)
  local src = dir .. "/fma.c"
  local f = assert(io.open(src, "w"))
  f:write([[
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <time.h>
/* 12 independent accumulators hide the 4-cycle FMA latency on 2 ports. */
static long iters;
static void *run(void *p) {
  __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  __m512 a0 = _mm512_set1_ps(0), a1 = _mm512_set1_ps(1), a2 = _mm512_set1_ps(2), a3 = _mm512_set1_ps(3);
  __m512 a4 = _mm512_set1_ps(4), a5 = _mm512_set1_ps(5), a6 = _mm512_set1_ps(6), a7 = _mm512_set1_ps(7);
  __m512 a8 = _mm512_set1_ps(8), a9 = _mm512_set1_ps(9), a10 = _mm512_set1_ps(10), a11 = _mm512_set1_ps(11);
#define F(x) x = _mm512_fmadd_ps(x, m, c)
  for (long n = 0; n < iters; n++) {
    F(a0); F(a1); F(a2); F(a3); F(a4); F(a5); F(a6); F(a7); F(a8); F(a9); F(a10); F(a11);
  }
  __m512 s0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                            _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  float s = _mm512_reduce_add_ps(_mm512_add_ps(s0, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11))));
  *(float *)p = s; return NULL;
}
int main(int argc, char **argv) {
  int t = atoi(argv[1]); iters = atol(argv[2]);
  pthread_t th[64]; float out[64]; struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 0; i < t; i++) pthread_create(&th[i], NULL, run, &out[i]);
  for (int i = 0; i < t; i++) pthread_join(th[i], NULL);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9;
  printf("%.6f %g\n", s, (double)out[0]);
  return 0;
}
]])
  f:close()
  local ok = os.execute(("cc -O2 -mavx512f -mfma -pthread -o %s/fma %s 2>/dev/null"):format(dir, src))
  for _, th in ipairs(thread_list) do
    if ok then
      local iters = 100000000
      local best = math.huge
      for _ = 1, 3 do
        local p = io.popen(("%s/fma %d %d"):format(dir, th, iters))
        local s = tonumber(p:read("l"):match("^(%S+)"))
        p:close()
        best = math.min(best, s)
      end
      add(6, "AVX-512 FMA loop (peak)", th, best, nil, 2.0 * 16 * 12 * iters * th, nil, nil, "C loop via cc")
    else
      add(6, "AVX-512 FMA loop (peak)", th, nil, nil, nil, nil, nil, "cc -mavx512f failed")
    end
  end
  os.execute("rm -rf " .. dir)
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

local header = {"case", "name", "threads", "attn", "torch", "torch/attn", "attn GFLOP/s", "torch GFLOP/s",
  "attn peak RSS", "torch peak RSS", "note"}
print(("| %s |"):format(table.concat(header, " | ")))
print(("|%s"):format(("---|"):rep(#header)))
for _, r in ipairs(rows) do
  local ratio = (r.attn_s and r.torch_s) and ("%.2fx"):format(r.torch_s / r.attn_s) or "-"
  local ga = (r.flop and r.attn_s) and ("%.1f"):format(r.flop / r.attn_s / 1e9) or "-"
  local gt = (r.flop and r.torch_s) and ("%.1f"):format(r.flop / r.torch_s / 1e9) or "-"
  print(("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |"):format(r.case, r.name,
    r.threads > 0 and tostring(r.threads) or "-", fmt_time(r.attn_s, r.case), fmt_time(r.torch_s, r.case), ratio, ga,
    gt, fmt_mem(r.attn_mem), fmt_mem(r.torch_mem), r.note))
end

out_csv = out_csv or (here .. "results/" .. os.date("!%Y%m%dT%H%M%SZ") .. (quick and "-quick" or "") .. ".csv")
local f = io.open(out_csv, "w")
if f then
  f:write("case,name,threads,attn_s,torch_s,ratio,attn_gflops,torch_gflops,attn_peak_bytes,torch_peak_bytes,note\n")
  local function n(x) return x and ("%.9g"):format(x) or "" end
  for _, r in ipairs(rows) do
    f:write(('%d,"%s",%d,%s,%s,%s,%s,%s,%s,%s,"%s"\n'):format(r.case, r.name, r.threads, n(r.attn_s), n(r.torch_s),
      n(r.attn_s and r.torch_s and r.torch_s / r.attn_s), n(r.flop and r.attn_s and r.flop / r.attn_s / 1e9),
      n(r.flop and r.torch_s and r.flop / r.torch_s / 1e9), n(r.attn_mem), n(r.torch_mem), r.note))
  end
  f:close()
  local la = io.open("/proc/loadavg")
  local load = la and la:read("l") or "?"
  if la then la:close() end
  print(("\n%s, BLAS core %s, %s; load average at the end %s; CSV: %s"):format(os.date("!%Y-%m-%d %H:%M UTC"),
    core, info.blas_config or "", load, out_csv))
end
