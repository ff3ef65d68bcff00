-- SPDX-License-Identifier: MIT

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
-- ATTN_DIST_TIMEOUT=s): h:wait() on an async operation raises an error at
-- the deadline; a blocking call (which MPI cannot cancel) prints the same
-- message and aborts the job.  The message gives the time measured; the
-- waits of one operation (a DDP backward's gradient buckets, a ring
-- attention pass) share one deadline.
-- A rank whose script raises an error ends with a non-zero status, and attn
-- then aborts the whole MPI job (MPI_Abort), so the other ranks stop at
-- once.
--
-- Launch detection: MPI is initialised when one of OMPI_COMM_WORLD_SIZE,
-- PMI_SIZE, PMI_RANK, PMIX_RANK, MPI_LOCALNRANKS (set by mpirun / mpiexec /
-- srun) or ATTN_DIST_FORCE_MPI (MPI's singleton start without a launcher)
-- is in the environment, or when the host program initialised MPI itself.
local core = require "attn.core"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)

-- In a sandbox (attn_lua.h) attn.core has no _dist: MPI and its timeout
-- belong to the whole process, and a script there must neither start MPI
-- nor talk to other processes.  It gets the 1-rank world a script sees
-- when not started by mpirun, written here in Lua so that nothing
-- process-wide is touched: rank 0 of 1, collectives are the identity (with
-- the C side's checks), send/recv have no peer, ring_attention is the
-- fused SDPA, DDP's reducer has nothing to average, and set_timeout only
-- sets this state's (unused) value.  backend() says "none (sandbox)".
local function sandbox_world()
  local W = {}
  local timeout = 300
  local function shape(t) return "[" .. table.concat(core.shape(t), ",") .. "]" end
  local function fail(fn, msg) error(("%s (rank 0 of 1): %s"):format(fn, msg), 4) end
  local function count(fn, t)
    if t:numel() > 0x7fffffff then
      fail(fn, ("tensor %s has %d elements; MPI counts stop at 2^31-1 (split it)"):format(shape(t), t:numel()))
    end
  end
  local function writable(fn, t)
    local sz, st = core.shape(t), t:stride()
    for d = 1, #sz do
      if st[d] == 0 and sz[d] > 1 then
        fail(fn, ("the tensor %s is an expanded view whose elements share memory; clone it before writing in place")
          :format(shape(t)))
      end
    end
  end
  local Handle = {}
  Handle.__index = Handle
  Handle.__name = "attn.DistWork"
  function Handle:wait() return self.result end
  function Handle:is_completed() return true end
  Handle.__close = function() end
  local function done(async, result)
    if async then return setmetatable({result = result}, Handle) end
    return result
  end
  local function fresh(t) -- a new contiguous tensor holding t's values, outside autograd
    return core.no_grad(function() return t:detach():contiguous():clone() end)
  end
  function W.init() end
  function W.rank() return 0 end
  function W.size() return 1 end
  function W.local_rank() return 0 end
  function W.compiled() return false end
  function W.uses_mpi() return false end
  function W.backend() return "none (sandbox)" end
  function W.set_timeout(s) timeout = s end
  function W.timeout() return timeout end
  function W.barrier(async) return done(async) end
  function W.allreduce(t, op, async)
    count("allreduce", t)
    if t.dtype == core.bool then error("allreduce: bool tensors cannot be reduced (convert with :long())", 3) end
    if op == "avg" and t.dtype ~= core.float32 then
      error(("allreduce: avg needs a floating tensor, got %s"):format(t.dtype.name), 3)
    end
    writable("allreduce", t)
    return done(async)
  end
  function W.broadcast(t, _, async)
    count("broadcast", t)
    writable("broadcast", t)
    return done(async)
  end
  function W.allgather(t, async)
    if t:dim() < 1 then
      fail("allgather", ("needs a tensor of at least 1 dim (gathered along dim 1), got %s"):format(shape(t)))
    end
    count("allgather", t)
    return done(async, fresh(t))
  end
  function W.reduce_scatter(t, _, async)
    if t:dim() < 1 then
      fail("reduce_scatter", ("dim 1 of the tensor %s must be divisible by the world size 1 (each rank gets one "
        .. "slice)"):format(shape(t)))
    end
    count("reduce_scatter", t)
    return done(async, fresh(t))
  end
  function W.send() fail("send", "a 1-rank world has no peer to send to (a sandbox has no MPI)") end
  function W.recv() fail("recv", "a 1-rank world has no peer to receive from (a sandbox has no MPI)") end
  function W.ring_attention(q, k, v, causal, scale)
    local nd = q:dim()
    local same = nd >= 2 and k:dim() == nd and v:dim() == nd
    if not same then
      fail("ring_attention", ("query %s, key %s and value %s must have the same number of dims, at least 2")
        :format(shape(q), shape(k), shape(v)))
    end
    for d = 1, nd - 1 do
      same = same and k:size(d) == q:size(d) and v:size(d) == q:size(d)
    end
    if not same then
      fail("ring_attention", ("query %s, key %s and value %s must have the same leading dims and local sequence "
        .. "length (dim -2)"):format(shape(q), shape(k), shape(v)))
    end
    if causal and q:size(-2) % 2 ~= 0 then
      fail("ring_attention", ("causal ring attention needs an even local length (two zigzag chunks per rank), "
        .. "got %d in query %s"):format(q:size(-2), shape(q)))
    end
    if scale == 0 or scale ~= scale then scale = nil end
    return core.scaled_dot_product_attention(q, k, v, {is_causal = causal, scale = scale})
  end
  -- DDP's reducer: the same buckets as the C one (reverse order, about
  -- bytes each), nothing to average with one rank
  local Reducer = {}
  Reducer.__index = Reducer
  Reducer.__name = "attn.DistReducer"
  function Reducer:enable() end
  function Reducer:finish() end
  function Reducer:pending() return false end
  function Reducer:buckets() return self.nb end
  function Reducer:overlapped() return 0 end
  function W.reducer(params, bytes)
    if bytes <= 0 then error("DistributedDataParallel: bucket size must be > 0", 3) end
    local cap, fill, nb = bytes // 4, 0, 0
    for i = #params, 1, -1 do
      local p = params[i]
      if not core.is_tensor(p) then
        error(("DistributedDataParallel: parameter %d is not a tensor"):format(i), 3)
      end
      local n = p:numel()
      if nb == 0 or (fill > 0 and fill + n > cap) then nb, fill = nb + 1, 0 end
      fill = fill + n
    end
    return setmetatable({nb = nb}, Reducer)
  end
  return W
end

local C = core._dist or sandbox_world()

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
  if not pcall(core.dim, t) then error(("%s (%s): the tensor is closed"):format(fn, where()), 3) end
end

-- Checks an options table against allowed = {name = kind}; kinds:
-- "boolean", "number" (finite), "tag" (integer >= 0).  Unknown names and
-- wrong types are errors.  Returns the table ({} for nil).
local function check_opts(fn, opts, allowed, level)
  level = (level or 2) + 1
  if opts == nil then return {} end
  if type(opts) ~= "table" or core.is_tensor(opts) then
    error(("%s (%s): opts must be a table, got %s"):format(fn, where(), core.is_tensor(opts) and "a tensor"
      or type(opts)), level)
  end
  for k, v in pairs(opts) do
    local kind = allowed[k]
    if not kind then
      error(("%s (%s): unknown option '%s'"):format(fn, where(), tostring(k)), level)
    end
    local ok
    if kind == "boolean" then
      ok = type(v) == "boolean"
    elseif kind == "number" then
      ok = type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge
    elseif kind == "tag" then
      ok = math.type(v) == "integer" and v >= 0 and v <= 0x7fffffff
        or (math.type(v) == "float" and v == math.floor(v) and v >= 0 and v <= 0x7fffffff)
    end
    if not ok then
      local want = kind == "boolean" and "a boolean" or kind == "number" and "a finite number"
        or "an integer in 0..2^31-1"
      error(("%s (%s): option %s must be %s, got %s"):format(fn, where(), k, want, tostring(v)), level)
    end
  end
  return opts
end

local ASYNC = {async = "boolean", async_op = "boolean"}
local P2P = {async = "boolean", async_op = "boolean", tag = "tag"}

local function opt_async(fn, opts, allowed)
  opts = check_opts(fn, opts, allowed or ASYNC, 3)
  return opts.async == true or opts.async_op == true, opts
end

local function check_rank(fn, what, v)
  if math.type(v) == "float" and v == math.floor(v) then v = math.tointeger(v) end
  if math.type(v) ~= "integer" or v < 0 or v >= C.size() then
    error(("%s (%s): %s must be a rank in 0..%d, got %s"):format(fn, where(), what, C.size() - 1, tostring(v)), 3)
  end
  return v
end

--- init([opts]): initialises MPI once (later calls do nothing).
-- opts.timeout: seconds any wait may take (default 300 or ATTN_DIST_TIMEOUT).
-- @usage
-- local dist = require "attn.dist"
-- dist.init()                                          -- MPI under mpirun; a 1-rank world otherwise
-- print(dist.rank(), dist.size())
function dist.init(...)
  local opts = require("attn.base")._misuse.merge_options("init", {"timeout"}, ...)
  opts = check_opts("init", opts, {timeout = "number"})
  if opts.timeout ~= nil and not (opts.timeout > 0) then -- luacheck: ignore 581 (NaN must fail)
    error(("init (%s): option timeout must be > 0 seconds, got %s"):format(where(), tostring(opts.timeout)), 2)
  end
  C.init()
  if opts.timeout then C.set_timeout(opts.timeout) end
end

--- This process's rank, 0-based as in MPI and torch.distributed
-- (torch.distributed.get_rank); 0 in a 1-rank world.
-- @treturn int
-- @usage
-- local dist = require "attn.dist"
-- print(dist.rank(), dist.size())   -- 0 1 without mpirun
-- @function rank
dist.rank = C.rank
--- The number of ranks (torch.distributed.get_world_size); also
-- attn.dist.world_size.
-- @treturn int
-- @usage
-- local dist = require "attn.dist"
-- local world = dist.size()         -- the number of ranks
-- print(world)
-- @function size
dist.size = C.size
dist.world_size = C.size
--- The rank among the ranks on this machine, 0-based (torchrun's
-- LOCAL_RANK).
-- @treturn int
-- @usage
-- local dist = require "attn.dist"
-- print(dist.local_rank())          -- 0-based rank on this node
-- @function local_rank
dist.local_rank = C.local_rank
--- is_main(): rank 0, the one that logs and saves.
-- @usage
-- local dist = require "attn.dist"
-- if dist.is_main() then print("rank 0 writes the checkpoint") end
function dist.is_main() return C.rank() == 0 end
--- is_available(): attn was built with MPI (torch.distributed.is_available).
-- @treturn boolean
-- @usage
-- local dist = require "attn.dist"
-- print(dist.is_available())        -- whether attn was built with MPI
-- @function is_available
dist.is_available = C.compiled
--- uses_mpi(): this process runs MPI (false in a 1-rank fallback world).
-- @treturn boolean
-- @usage
-- local dist = require "attn.dist"
-- print(dist.uses_mpi())            -- true only when started by mpirun
-- @function uses_mpi
dist.uses_mpi = C.uses_mpi
--- backend(): the MPI library's version line, or "none".
-- @treturn string
-- @usage
-- local dist = require "attn.dist"
-- print(dist.backend())             -- "mpi" under mpirun, "none" otherwise
-- @function backend
dist.backend = C.backend
--- set_timeout(seconds): how long any later wait may take before it raises
-- (a positive finite number; the default is 300 s or ATTN_DIST_TIMEOUT).
-- An operation made of several waits (a DDP backward's gradient buckets,
-- a ring attention pass) waits at most that long in all.
-- @usage
-- local dist = require "attn.dist"
-- dist.set_timeout(300)                                  -- a collective waits at most 300 s
-- print(dist.timeout())
function dist.set_timeout(seconds)
  if type(seconds) ~= "number" or not (seconds > 0) or seconds == math.huge then -- luacheck: ignore 581 (NaN must fail)
    error(("set_timeout (%s): seconds must be a positive finite number, got %s"):format(where(), tostring(seconds)), 2)
  end
  C.set_timeout(seconds)
end
--- The current wait limit in seconds (see set_timeout).
-- @treturn number
-- @usage
-- local dist = require "attn.dist"
-- print(dist.timeout())             -- seconds a collective may wait
-- @function timeout
dist.timeout = C.timeout

-- The optional arguments in attn's positional order (names) and/or a
-- trailing options table (attn._misuse.merge_options): the merged values
-- and the options for the helpers below (async, async_op, tag).
local function merged(fn, names, ...)
  local o = require("attn.base")._misuse.merge_options(fn, names, ...)
  return o, {async = o.async, async_op = o.async_op, tag = o.tag}
end

--- barrier([opts]): waits until every rank has called it
-- (torch.distributed.barrier).  opts.async = true returns a handle whose
-- h:wait() completes it.
-- @usage
-- local dist = require "attn.dist"
-- dist.barrier()                                       -- every rank waits for the others
function dist.barrier(...)
  local _, opts = merged("barrier", {"async_op", "async"}, ...)
  return C.barrier(opt_async("barrier", opts))
end

-- Calls the C function f; an i-form (fn "iallreduce" for f's "allreduce")
-- names itself in front of the C message.
local function cc(fn, base, f, ...)
  if fn == base then return f(...) end
  local res = table.pack(pcall(f, ...))
  if not res[1] then error(fn .. ": " .. tostring(res[2]):gsub("^[^:]*%.lua:%d+: ", ""), 4) end
  return table.unpack(res, 2, res.n)
end

local function allreduce(fn, t, op, opts)
  check_tensor(fn, t)
  op = check_op(fn, op)
  local h = cc(fn, "allreduce", C.allreduce, t, op, opt_async(fn, opts))
  return h or t
end

local function broadcast(fn, t, root, opts)
  check_tensor(fn, t)
  root = check_rank(fn, "root", root == nil and 0 or root)
  local h = cc(fn, "broadcast", C.broadcast, t, root, opt_async(fn, opts))
  return h or t
end

local function allgather(fn, t, opts)
  check_tensor(fn, t)
  return cc(fn, "allgather", C.allgather, t, opt_async(fn, opts))
end

local function reduce_scatter(fn, t, op, opts)
  check_tensor(fn, t)
  op = check_op(fn, op)
  return cc(fn, "reduce_scatter", C.reduce_scatter, t, op, opt_async(fn, opts))
end

local function send(fn, t, dst, opts)
  check_tensor(fn, t)
  dst = check_rank(fn, "dst", dst)
  local async, o = opt_async(fn, opts, P2P)
  return cc(fn, "send", C.send, t, dst, math.tointeger(o.tag or 0), async)
end

local function recv(fn, t, src, opts)
  check_tensor(fn, t)
  src = check_rank(fn, "src", src)
  local async, o = opt_async(fn, opts, P2P)
  local h = cc(fn, "recv", C.recv, t, src, math.tointeger(o.tag or 0), async)
  return h or t
end

--- allreduce(t, op [, opts]) -> t: t = op over every rank's t, in place;
-- op "sum" (default), "avg", "max" or "min".  torch.distributed.all_reduce.
-- With opts.async = true returns a handle h (h:wait(), h:is_completed()).
-- @usage
-- local dist = require "attn.dist"
-- local g = attn.ones(3)
-- dist.allreduce(g, "avg")                             -- in place: the mean over the ranks
-- print(g)
function dist.allreduce(t, ...)
  local o, opts = merged("allreduce", {"op", "async_op", "async"}, ...)
  return allreduce("allreduce", t, o.op, opts)
end
--- broadcast(t, root [, opts]) -> t: t = rank root's t (root 0-based,
-- default 0), in place.  torch.distributed.broadcast.  opts.async as allreduce.
-- @usage
-- local dist = require "attn.dist"
-- local w = attn.randn(4)
-- dist.broadcast(w, 0)                                 -- every rank gets rank 0's values
-- print(w.shape)                                       -- attn.Size([4]), in place
function dist.broadcast(t, ...)
  local o, opts = merged("broadcast", {"root", "async_op", "async"}, ...)
  return broadcast("broadcast", t, o.root, opts)
end
--- allgather(t [, opts]) -> every rank's t concatenated along dim 1, a new
-- tensor (torch.distributed.all_gather_into_tensor).  With opts.async,
-- h:wait() returns it.
-- @usage
-- local dist = require "attn.dist"
-- local all = dist.allgather(attn.tensor({{dist.rank(), 1}}))   -- every rank's row, in rank order
-- print(all.shape)                                     -- [size(), 2]: attn.Size([1, 2]) in a 1-rank world
function dist.allgather(t, ...)
  local _, opts = merged("allgather", {"async_op", "async"}, ...)
  return allgather("allgather", t, opts)
end
--- reduce_scatter(t, op [, opts]) -> reduce with op (as allreduce), then
-- rank r gets slice r+1 of dim 1 (dim 1 divisible by size()), a new tensor.
-- torch.distributed.reduce_scatter_tensor.  With opts.async, h:wait() returns it.
-- @usage
-- local dist = require "attn.dist"
-- local t = attn.ones(2 * dist.size())
-- local mine = dist.reduce_scatter(t, "sum")            -- [2]: this rank's part of the sum
-- print(mine.shape)
function dist.reduce_scatter(t, ...)
  local o, opts = merged("reduce_scatter", {"op", "async_op", "async"}, ...)
  return reduce_scatter("reduce_scatter", t, o.op, opts)
end
--- send(t, dst [, opts]): sends t to rank dst (0-based); opts.tag (default
-- 0), opts.async.  torch.distributed.send.
-- @usage
-- local dist = require "attn.dist"
-- if dist.size() > 1 and dist.rank() == 0 then          -- run under mpirun -n 2
--   dist.send(attn.ones(3), 1)
-- end
function dist.send(t, ...)
  local o, opts = merged("send", {"dst", "tag", "async_op", "async"}, ...)
  return send("send", t, o.dst, opts)
end
--- recv(t, src [, opts]) -> t: receives into t from rank src; opts.tag
-- (default 0), opts.async.  torch.distributed.recv.
-- @usage
-- local dist = require "attn.dist"
-- if dist.size() > 1 and dist.rank() == 1 then          -- run under mpirun -n 2
--   local buf = attn.empty(3)
--   dist.recv(buf, 0)
-- end
function dist.recv(t, ...)
  local o, opts = merged("recv", {"src", "tag", "async_op", "async"}, ...)
  return recv("recv", t, o.src, opts)
end

-- Async shorthands: dist.iallreduce(t, op) == dist.allreduce(t, op, {async = true}), etc.
local ASYNC_TRUE = {async = true}
--- iallreduce(t, op) -> handle: allreduce(t, op, {async = true}).
-- @usage
-- local dist = require "attn.dist"
-- local g = attn.ones(3)
-- local work = dist.iallreduce(g, "sum")               -- overlaps with other work
-- work:wait()
function dist.iallreduce(t, op) return allreduce("iallreduce", t, op, ASYNC_TRUE) end
--- ibroadcast(t, root) -> handle: broadcast(t, root, {async = true}).
-- @usage
-- local dist = require "attn.dist"
-- local w = attn.ones(2)
-- dist.ibroadcast(w, 0):wait()
function dist.ibroadcast(t, root) return broadcast("ibroadcast", t, root, ASYNC_TRUE) end
--- iallgather(t) -> handle: allgather(t, {async = true}); h:wait() gives the result.
-- @usage
-- local dist = require "attn.dist"
-- local work = dist.iallgather(attn.ones(2))
-- local all = work:wait()                              -- the gathered tensor, [2 * size()]
-- print(all)                                           -- tensor([1., 1.]) in a 1-rank world
function dist.iallgather(t) return allgather("iallgather", t, ASYNC_TRUE) end
--- ireduce_scatter(t, op) -> handle: reduce_scatter(t, op, {async = true}).
-- @usage
-- local dist = require "attn.dist"
-- local t = attn.ones(4 * dist.size())
-- local work = dist.ireduce_scatter(t, "sum")
-- print(work:wait().shape)                             -- this rank's [4] slice of the sum
function dist.ireduce_scatter(t, op) return reduce_scatter("ireduce_scatter", t, op, ASYNC_TRUE) end
--- isend(t, dst [, tag]) -> handle: send(t, dst, {async = true, tag = tag})
-- (torch.distributed.isend).
-- @usage
-- local dist = require "attn.dist"
-- if dist.size() > 1 and dist.rank() == 0 then          -- needs a peer: run under mpirun -n 2
--   dist.isend(attn.ones(3), 1):wait()
-- end
function dist.isend(t, dst, tag) return send("isend", t, dst, {async = true, tag = tag}) end
--- irecv(t, src [, tag]) -> handle: recv(t, src, {async = true, tag = tag})
-- (torch.distributed.irecv).
-- @usage
-- local dist = require "attn.dist"
-- if dist.size() > 1 and dist.rank() == 1 then          -- needs a peer: run under mpirun -n 2
--   local buf = attn.empty(3)
--   dist.irecv(buf, 0):wait()
-- end
function dist.irecv(t, src, tag) return recv("irecv", t, src, {async = true, tag = tag}) end

--- print0(...): print on rank 0 only.
-- @usage
-- local dist = require "attn.dist"
-- dist.print0("step", 10, "loss", 0.5)                  -- printed by rank 0 only
function dist.print0(...)
  if C.rank() == 0 then print(...) end
end

-- -----------------------------------------------------------------------
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
-- @usage
-- local dist = require "attn.dist"
-- local x = attn.randn(1, 2, 16, 8)                     -- the whole sequence, [B, H, L, D]
-- local q = dist.ring_shard(x, {causal = true})         -- this rank's part
-- local y = dist.ring_attention(q, q, q, {causal = true})
-- print(dist.ring_unshard(y, {causal = true}).shape)    -- attn.Size([1, 2, 16, 8])
function dist.ring_attention(q, ...)
  local opts = merged("ring_attention", {"k", "v", "causal", "scale", "is_causal"}, ...)
  local k, v = opts.k, opts.v
  opts.k, opts.v = nil, nil
  check_tensor("ring_attention", q); check_tensor("ring_attention", k); check_tensor("ring_attention", v)
  opts = check_opts("ring_attention", opts, {causal = "boolean", is_causal = "boolean", scale = "number"})
  return C.ring_attention(q, k, v, opts.causal == true or opts.is_causal == true, opts.scale)
end

local function chunk_ids(causal, r, P)
  if causal then return {r + 1, 2 * P - r} end
  return {r + 1}
end

--- ring_shard(x [, {causal = false, rank, size}]) -> this rank's part of a
-- full sequence x [..., L, X] in ring_attention's layout (a contiguous copy).
-- @usage
-- local dist = require "attn.dist"
-- local part = dist.ring_shard(attn.randn(1, 1, 8, 4), {causal = true})   -- balanced for causal masks
-- print(part.shape)                                     -- 8 / size positions on each rank
function dist.ring_shard(x, ...)
  local opts = merged("ring_shard", {"causal", "is_causal", "rank", "size"}, ...)
  check_tensor("ring_shard", x)
  opts = check_opts("ring_shard", opts, {causal = "boolean", is_causal = "boolean", rank = "tag", size = "tag"})
  local P, r = math.tointeger(opts.size or C.size()), math.tointeger(opts.rank or C.rank())
  if P < 1 or r >= P then
    error(("ring_shard (%s): rank %d and size %d do not fit (0 <= rank < size)"):format(where(), r, P), 2)
  end
  if x:dim() < 2 then
    error(("ring_shard (%s): x must have at least 2 dims ([..., L, X]), got %d"):format(where(), x:dim()), 2)
  end
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
-- @usage
-- local dist = require "attn.dist"
-- local x = attn.randn(1, 1, 8, 4)
-- local back = dist.ring_unshard(dist.ring_shard(x), {})
-- print(attn.equal(back, x))                            -- true
function dist.ring_unshard(y, ...)
  local opts = merged("ring_unshard", {"causal", "is_causal"}, ...)
  check_tensor("ring_unshard", y)
  opts = check_opts("ring_unshard", opts, {causal = "boolean", is_causal = "boolean"})
  local P = C.size()
  local causal = opts.causal == true or opts.is_causal == true
  local nd = y:dim()
  if nd < 2 then
    error(("ring_unshard (%s): y must have at least 2 dims ([..., Lc, X]), got %d"):format(where(), nd), 2)
  end
  if causal and y:size(-2) % 2 ~= 0 then
    error(("ring_unshard (%s): a causal part has two chunks: its length %d must be even"):format(where(),
      y:size(-2)), 2)
  end
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

-- torch.distributed's questions: no optional arguments (attn/signature.lua)
require("attn.signature").declare(dist, "dist.", {
  rank = false, size = false, world_size = false, local_rank = false, is_main = false, is_available = false,
  uses_mpi = false, backend = false, set_timeout = false, timeout = false, print0 = false,
})

-- the i-forms: torch.distributed's all_reduce(tensor, op=ReduceOp.SUM),
-- broadcast(tensor, src) (attn's root, default 0), reduce_scatter,
-- isend/irecv(tensor, dst/src, tag=0), async_op implied (attn/signature.lua)
require("attn.signature").declare(dist, "dist.", {
  -- torch's group= (before async_op) is not taken; attn's async is an alias of async_op
  allreduce = "native: tensor, op='sum', async_op=false, async=false",
  broadcast = "native: tensor, root=0, async_op=false, async=false",
  allgather = "native: tensor, async_op=false, async=false",
  reduce_scatter = "native: tensor, op='sum', async_op=false, async=false",
  barrier = "native: async_op=false, async=false",
  init = "native: timeout=nil", -- torch's init_process_group(backend, ...): MPI needs none of the others
  ring_attention = "native: q, k, v, causal=false, scale=nil, is_causal=false",
  ring_shard = "native: x, causal=false, is_causal=false, rank=nil, size=nil",
  ring_unshard = "native: y, causal=false, is_causal=false",
  send = "native: tensor, dst, tag=0, async_op=false, async=false",
  recv = "native: tensor, src, tag=0, async_op=false, async=false",
  iallreduce = "tensor, op='sum'", ibroadcast = "tensor, root=0", iallgather = false,
  ireduce_scatter = "tensor, op='sum'", isend = "tensor, dst, tag=0", irecv = "tensor, src, tag=0",
})

return dist
