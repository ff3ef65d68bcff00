--- attn.dist: data and sequence parallelism over MPI.
--
--   mpirun -np 4 attn train.lua          -- 4 ranks on this machine
--   mpirun -np 8 --hostfile hosts attn train.lua
--
--   local dist = require "attn".dist
--   dist.init()                          -- optional: every call initialises lazily
--   print(dist.rank(), dist.size())      -- 0-based ranks, as in MPI and torch.distributed
--   dist.allreduce(t, "avg")             -- in place on every rank
--   local h = dist.allreduce(t, "sum", {async = true}); ...; h:wait()
--
-- attn.dist runs on a real MPI library (Open MPI by default, MPICH works
-- too); `mpirun` starts the ranks.  A script that was not launched by an
-- MPI launcher, or an attn built without MPI, sees a world of one rank in
-- which every collective is the identity, so the same script runs on a
-- laptop.  Give each rank one BLAS thread (attn.set_num_threads(1) or
-- OPENBLAS_NUM_THREADS=1): ranks already use every core.
--
-- Collectives (every rank must call them in the same order):
--   barrier([opts])
--   allreduce(t, op [, opts])       t op= all ranks' t, in place; op "sum" (default), "avg", "max", "min"
--   broadcast(t, root [, opts])     t = rank root's t, in place
--   allgather(t [, opts])           every rank's t concatenated along dim 1 (new tensor)
--   reduce_scatter(t, op [, opts])  reduce, then rank r gets slice r+1 of dim 1 (dim 1 divisible by size())
--   send(t, dst [, opts]) / recv(t, src [, opts])   point to point; opts.tag (default 0)
-- opts.async = true returns a handle h instead: h:wait() completes it (and
-- returns the result of allgather / reduce_scatter), h:is_completed()
-- polls.  A handle keeps its tensors alive until it is waited for or
-- collected; collecting a running handle waits for it.
--
-- Tensors: float32 (attn's only dtype today); non-contiguous tensors go
-- through a contiguous copy that is written back.
--
-- Failures: errors name the operation and the rank ("allreduce (rank 1 of
-- 4): ...").  MPI's error handler returns errors instead of aborting, and
-- every wait is bounded by a timeout (default 300 s; set_timeout(s) or
-- ATTN_DIST_TIMEOUT=s): a rank whose peer died fails instead of hanging.
-- A rank whose script raises an error ends with a non-zero status, and attn
-- then aborts the whole MPI job (MPI_Abort), so the other ranks stop at
-- once.
local core = require "attn.core"
local C = core._dist

local dist = {}

local ops = {sum = true, avg = true, max = true, min = true}

local function where() return ("rank %d of %d"):format(C.rank(), C.size()) end

local function check_op(fn, op)
  op = op == nil and "sum" or op
  if not ops[op] then
    error(("%s (%s): op must be \"sum\", \"avg\", \"max\" or \"min\", got %s"):format(fn, where(), tostring(op)), 3)
  end
  return op
end

local function check_tensor(fn, t)
  if not core.is_tensor(t) then
    error(("%s (%s): expected a tensor, got %s"):format(fn, where(), type(t)), 3)
  end
end

local function opt_async(fn, opts)
  if opts == nil then return false end
  if type(opts) ~= "table" then error(("%s: opts must be a table, got %s"):format(fn, type(opts)), 3) end
  return opts.async == true or opts.async_op == true
end

--- init([opts]): initialises MPI once (later calls do nothing).
-- opts.timeout: seconds any wait may take (default 300 or ATTN_DIST_TIMEOUT).
function dist.init(opts)
  C.init()
  if opts and opts.timeout then C.set_timeout(opts.timeout) end
end

dist.rank = C.rank
dist.size = C.size
dist.world_size = C.size
dist.local_rank = C.local_rank
--- is_main(): rank 0, the one that logs and saves.
function dist.is_main() return C.rank() == 0 end
--- is_available(): attn was built with MPI.
dist.is_available = C.compiled
--- uses_mpi(): this process runs MPI (false in a 1-rank fallback world).
dist.uses_mpi = C.uses_mpi
--- backend(): the MPI library's version line, or "none".
dist.backend = C.backend
dist.set_timeout = C.set_timeout
dist.timeout = C.timeout

function dist.barrier(opts)
  return C.barrier(opt_async("barrier", opts))
end

function dist.allreduce(t, op, opts)
  check_tensor("allreduce", t)
  op = check_op("allreduce", op)
  local h = C.allreduce(t, op, opt_async("allreduce", opts))
  return h or t
end

function dist.broadcast(t, root, opts)
  check_tensor("broadcast", t)
  local h = C.broadcast(t, root or 0, opt_async("broadcast", opts))
  return h or t
end

function dist.allgather(t, opts)
  check_tensor("allgather", t)
  return C.allgather(t, opt_async("allgather", opts))
end

function dist.reduce_scatter(t, op, opts)
  check_tensor("reduce_scatter", t)
  op = check_op("reduce_scatter", op)
  return C.reduce_scatter(t, op, opt_async("reduce_scatter", opts))
end

function dist.send(t, dst, opts)
  check_tensor("send", t)
  return C.send(t, dst, opts and opts.tag or 0, opt_async("send", opts))
end

function dist.recv(t, src, opts)
  check_tensor("recv", t)
  local h = C.recv(t, src, opts and opts.tag or 0, opt_async("recv", opts))
  return h or t
end

--- Async shorthands: dist.iallreduce(t, op) == dist.allreduce(t, op, {async = true}), etc.
function dist.iallreduce(t, op) return dist.allreduce(t, op, {async = true}) end
function dist.ibroadcast(t, root) return dist.broadcast(t, root, {async = true}) end
function dist.iallgather(t) return dist.allgather(t, {async = true}) end
function dist.ireduce_scatter(t, op) return dist.reduce_scatter(t, op, {async = true}) end
function dist.isend(t, dst, tag) return dist.send(t, dst, {async = true, tag = tag}) end
function dist.irecv(t, src, tag) return dist.recv(t, src, {async = true, tag = tag}) end

--- print0(...): print on rank 0 only.
function dist.print0(...)
  if C.rank() == 0 then print(...) end
end

--------------------------------------------------------------------------
-- Sequence parallelism

--- ring_attention(q, k, v [, {causal = false, scale = 1/sqrt(E)}]) -> out:
-- scaled dot-product attention of a sequence split over the ranks along
-- dim -2 (also attn.F.ring_attention).  Each rank passes its part of q, k
-- and v ([..., Lc, E], the same shapes on every rank) and gets the output
-- for the same positions.  K/V blocks circulate around the ring with
-- non-blocking send/recv while the fused SDPA kernel works on the block in
-- hand; partial results combine with the log-sum-exp rule; backward
-- circulates dK/dV the same way.  Memory per rank is O(L/P).
-- Which positions a rank holds: use ring_shard / ring_unshard.  Not
-- causal: rank r holds positions r*Lc+1 .. (r+1)*Lc.  Causal: the
-- sequence is cut into 2P chunks and rank r holds chunks r+1 and 2P-r
-- (1-based), so that every rank does the same causal work ("zigzag"); Lc
-- must then be even.
function dist.ring_attention(q, k, v, opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("ring_attention: opts must be a table", 2) end
  check_tensor("ring_attention", q); check_tensor("ring_attention", k); check_tensor("ring_attention", v)
  if opts.scale ~= nil and type(opts.scale) ~= "number" then
    error(("ring_attention (%s): scale must be a number"):format(where()), 2)
  end
  return C.ring_attention(q, k, v, opts.causal == true or opts.is_causal == true, opts.scale)
end

local function chunk_ids(causal, r, P)
  if causal then return {r + 1, 2 * P - r} end
  return {r + 1}
end

--- ring_shard(x [, {causal = false, rank, size}]) -> this rank's part of a
-- full sequence x [..., L, X] in ring_attention's layout (a contiguous copy).
function dist.ring_shard(x, opts)
  opts = opts or {}
  check_tensor("ring_shard", x)
  local P, r = opts.size or C.size(), opts.rank or C.rank()
  local causal = opts.causal == true or opts.is_causal == true
  local nchunks = causal and 2 * P or P
  local L = x:size(-2)
  if L % nchunks ~= 0 then
    error(("ring_shard (%s): sequence length %d must be divisible by %d (%s)"):format(where(), L, nchunks,
      causal and "2 chunks per rank when causal" or "one chunk per rank"), 2)
  end
  local c = L // nchunks
  local parts = {}
  for i, id in ipairs(chunk_ids(causal, r, P)) do parts[i] = x:narrow(-2, (id - 1) * c + 1, c) end
  return core.cat(parts, x:dim() - 1):contiguous()
end

--- ring_unshard(y [, {causal = false}]) -> the full sequence from every
-- rank's part (allgather, then the chunks put back in order).
function dist.ring_unshard(y, opts)
  opts = opts or {}
  check_tensor("ring_unshard", y)
  local P = C.size()
  local causal = opts.causal == true or opts.is_causal == true
  local nd = y:dim()
  -- gather along dim 1: move dim -2 to the front
  local perm = {nd - 1}
  for d = 1, nd do if d ~= nd - 1 then perm[#perm + 1] = d end end
  local front = y:permute(table.unpack(perm)):contiguous()
  local all = C.allgather(front, false) -- [P * Lc, ...]
  local Lc = y:size(-2)
  local nper = causal and 2 or 1
  local c = Lc // nper
  local chunks = {}
  for r = 0, P - 1 do
    for j, id in ipairs(chunk_ids(causal, r, P)) do
      chunks[id] = all:narrow(1, r * Lc + (j - 1) * c + 1, c)
    end
  end
  local full = core.cat(chunks, 1)
  local inv = {}
  for i, d in ipairs(perm) do inv[d] = i end
  return full:permute(table.unpack(inv)):contiguous()
end

dist._reducer = C.reducer

return dist
