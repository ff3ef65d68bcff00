-- SPDX-License-Identifier: MIT
-- Worker of scripts/bench/dist.lua, run by mpirun (or alone for 1 rank):
--   attn scripts/bench/dist_worker.lua ring L H E causal reps    ring attention fwd+bwd (or full SDPA when 1 rank)
--   attn scripts/bench/dist_worker.lua allreduce BYTES reps      attn.dist.allreduce on a float buffer
-- Prints one line "RESULT key=value ..." from rank 0 (per-rank values are
-- gathered: max time, max peak RSS growth).  One BLAS/attention thread per rank.
local attn = require "attn"
local dist = attn.dist
attn.set_num_threads(1)
dist.init()
local R, P = dist.rank(), dist.size()
local mode = ...
local args = {select(2, ...)}

-- Peak RSS growth in kB: VmHWM is reset through /proc/self/clear_refs.
local proc = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "procstat.lua")
local status, reset_hwm = proc.kb, proc.reset_peak

local function gather_max(x)
  local t = attn.tensor({x})
  dist.allreduce(t, "max")
  return t[1]
end

if mode == "ring" then
  local L, H, E, causal, reps = tonumber(args[1]), tonumber(args[2]), tonumber(args[3]), args[4] == "causal",
    tonumber(args[5] or 3)
  local Lc = L // P
  local o = {causal = causal}
  local g = attn.Generator(1 + R)
  collectgarbage()
  reset_hwm()
  local rss0 = status("VmRSS")
  local q = attn.randn({1, H, Lc, E}, g):requires_grad_()
  local k = attn.randn({1, H, Lc, E}, g):requires_grad_()
  local v = attn.randn({1, H, Lc, E}, g):requires_grad_()
  local dout = attn.randn({1, H, Lc, E}, g)
  local function step()
    q.grad, k.grad, v.grad = nil, nil, nil
    local out
    if P == 1 then
      out = attn.scaled_dot_product_attention(q, k, v, {is_causal = causal})
    else
      out = attn.F.ring_attention(q, k, v, o)
    end
    out:backward(dout)
  end
  step() -- warm-up
  local best = math.huge
  for _ = 1, reps do
    dist.barrier()
    local t0 = attn.now()
    step()
    local dt = attn.now() - t0
    best = math.min(best, gather_max(dt))
  end
  local peak = (status("VmHWM") or 0) - (rss0 or 0)
  local peak_max = gather_max(peak)
  if R == 0 then
    print(("RESULT mode=ring ranks=%d L=%d time=%.6f peak_kb=%d"):format(P, L, best, math.floor(peak_max)))
  end
elseif mode == "allreduce" then
  local bytes, reps = tonumber(args[1]), tonumber(args[2] or 20)
  local n = bytes // 4
  local t = attn.ones(n)
  dist.allreduce(t, "sum") -- warm-up
  local best = math.huge
  for _ = 1, 3 do
    dist.barrier()
    local t0 = attn.now()
    for _ = 1, reps do dist.allreduce(t, "sum") end
    best = math.min(best, gather_max((attn.now() - t0) / reps))
  end
  if R == 0 then print(("RESULT mode=allreduce ranks=%d bytes=%d time=%.9f"):format(P, bytes, best)) end
else
  io.stderr:write("dist_worker: unknown mode " .. tostring(mode) .. "\n")
  os.exit(2)
end
