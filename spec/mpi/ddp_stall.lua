-- SPDX-License-Identifier: MIT
-- Run by spec/dist_spec.lua under mpirun -np 2 with ATTN_DIST_TIMEOUT set
-- (a few seconds): both ranks wrap a model of several gradient buckets in
-- DistributedDataParallel, then rank 1 stops itself (SIGSTOP: alive, never
-- in the allreduce) before the backward.  Rank 0's backward must fail once
-- the timeout has passed in all, not once per bucket, and say how long it
-- waited; pending async handles collected after that must not wait again.
-- Rank 0 prints "buckets N", "backward failed after S s: <message>" and
-- "collected after S s", then exits with status 3 (which aborts the job).
local attn = require "attn"
local dist, nn = attn.dist, attn.nn
dist.init()
local layers = {}
for i = 1, 4 do layers[i] = nn.Linear(16, 16) end
local model = nn.Sequential(table.unpack(layers))
-- about 1 KiB per bucket: one bucket per weight and bias or so
local ddp = nn.DistributedDataParallel(model, {bucket_mb = 1 / 1024})
dist.barrier()
if dist.rank() == 1 then
  os.execute("kill -STOP $PPID") -- the shell's parent: this Lua process
  os.exit(0)                      -- not reached: mpirun kills it when rank 0 aborts the job
end
io.stderr:write(("buckets %d\n"):format(ddp:bucket_count()))
local handles = {}
for i = 1, 3 do handles[i] = dist.iallreduce(attn.ones(8), "sum") end
assert(#handles == 3)
local loss = ddp(attn.ones(2, 16)):sum()
local t0 = attn.now()
local ok, err = pcall(loss.backward, loss)
io.stderr:write(("backward failed after %.2f s: %s\n"):format(attn.now() - t0, ok and "no error" or tostring(err)))
t0 = attn.now()
handles = nil -- luacheck: ignore 311 (dropped on purpose: collecting them must not wait)
collectgarbage()
collectgarbage()
io.stderr:write(("collected after %.2f s\n"):format(attn.now() - t0))
io.stderr:flush()
os.exit(3)
