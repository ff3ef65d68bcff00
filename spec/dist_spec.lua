-- SPDX-License-Identifier: MIT
-- attn.dist in one process: the 1-rank world a script sees when it was not
-- started by mpirun (or attn was built without MPI), so the same script runs
-- on a laptop; then, when mpirun is there (ATTN_MPIEXEC, set by ctest), the
-- failure behaviour of a real job: a rank that raises makes the job fail
-- fast, and a rank whose peer never joins times out instead of hanging.
-- The multi-rank specs are spec/mpi/*_spec.lua, run by ctest under
-- mpirun -np 2 and -np 4.
local attn = require "attn"
local dist = attn.dist

describe("attn.dist without a launcher", function()
  it("is a 1-rank world", function()
    assert.are.equal(0, dist.rank())
    assert.are.equal(1, dist.size())
    assert.are.equal(0, dist.local_rank())
    assert.is_true(dist.is_main())
    assert.is_false(dist.uses_mpi())
    dist.init()
    dist.init() -- idempotent
  end)

  it("collectives are the identity", function()
    local t = attn.tensor({1.0, -2.0, 3.0})
    for _, op in ipairs({"sum", "avg", "max", "min"}) do
      dist.allreduce(t, op)
      assert.are.same({1, -2, 3}, t:totable())
    end
    dist.broadcast(t, 0)
    assert.are.same({1, -2, 3}, t:totable())
    assert.are.same({{1, 2}}, dist.allgather(attn.tensor({{1.0, 2.0}})):totable())
    assert.are.same({{1, 2}}, dist.reduce_scatter(attn.tensor({{1.0, 2.0}}), "sum"):totable())
    dist.barrier()
    local h = dist.allreduce(t, "avg", {async = true})
    h:wait()
    assert.is_true(h:is_completed())
    assert.are.same({{5}}, dist.allgather(attn.tensor({{5.0}}), {async = true}):wait():totable())
  end)

  it("errors name the operation and the rank", function()
    local ok, err = pcall(dist.broadcast, attn.ones(2), 1)
    assert.is_false(ok)
    assert.matches("broadcast %(rank 0 of 1%): root must be a rank in 0%.%.0, got 1", err)
    ok, err = pcall(dist.allreduce, attn.ones(2), "mean")
    assert.matches("allreduce %(rank 0 of 1%): op must be", err)
    ok, err = pcall(dist.send, attn.ones(2), 0)
    assert.matches("send %(rank 0 of 1%): a 1%-rank world has no peer", err)
    ok, err = pcall(dist.set_timeout, -1)
    assert.matches("set_timeout", err)
  end)

  it("ring attention with one rank is full SDPA (both layouts), with gradients", function()
    local g = attn.Generator(2)
    for _, causal in ipairs({false, true}) do
      local q, k, v = attn.randn({2, 8, 4}, g), attn.randn({2, 8, 4}, g), attn.randn({2, 8, 3}, g)
      local q1, q2 = q:clone():requires_grad_(), q:clone():requires_grad_()
      local ref = attn.scaled_dot_product_attention(q1, k, v, {is_causal = causal})
      local sq = dist.ring_shard(q2, {causal = causal})
      local out = attn.F.ring_attention(sq, k, v, {causal = causal})
      assert.is_true((out - ref):abs():max():item() < 1e-5)
      ref:sum():backward(); out:sum():backward()
      assert.is_true((q1.grad - q2.grad):abs():max():item() < 1e-5)
      assert.is_true((dist.ring_unshard(out, {causal = causal}) - ref):abs():max():item() < 1e-5)
    end
  end)

  it("DistributedDataParallel and DistributedSampler work with one rank", function()
    local nn = attn.nn
    local m = nn.Linear(3, 2)
    local ddp = nn.DistributedDataParallel(m)
    assert.are.equal(m, ddp.module)
    local y = ddp(attn.ones(4, 3)):sum()
    y:backward()
    assert.is_not_nil(m.weight.grad)
    local s = attn.data.DistributedSampler(5, {shuffle = false})
    assert.are.same({1, 2, 3, 4, 5}, s:indices())
  end)
end)

describe("data.DistributedSampler", function()
  -- Expected lists from torch 1.13's torch.utils.data.DistributedSampler
  -- (0-based there, 1-based here), e.g.
  -- list(DistributedSampler(range(10), num_replicas=3, rank=1, shuffle=True, seed=5)) == [4, 3, 2, 1]
  local cases = {
    {n = 10, opts = {num_replicas = 3, rank = 1, shuffle = true, seed = 5}, want = {4, 3, 2, 1}},
    {n = 10, opts = {num_replicas = 4, rank = 3, shuffle = true, seed = 2, drop_last = true}, epoch = 3,
     want = {6, 2}},
    {n = 5, opts = {num_replicas = 4, rank = 2, shuffle = false}, want = {2, 1}},
    {n = 2, opts = {num_replicas = 5, rank = 4, shuffle = true, seed = 0}, want = {0}},
  }
  for i, c in ipairs(cases) do
    it("matches torch's shard, case " .. i, function()
      local s = attn.data.DistributedSampler(c.n, c.opts)
      if c.epoch then s:set_epoch(c.epoch) end
      local want = {}
      for j, v in ipairs(c.want) do want[j] = v + 1 end
      assert.are.same(want, s:indices())
      assert.are.equal(#want, #s)
    end)
  end

  it("rejects a rank outside 0..num_replicas-1", function()
    assert.has_error(function() attn.data.DistributedSampler(4, {num_replicas = 2, rank = 2}) end,
      "DistributedSampler: rank must be in 0..1 (0-based), got 2")
  end)
end)

local mpiexec = os.getenv("ATTN_MPIEXEC")
local flags = os.getenv("ATTN_MPIEXEC_FLAGS") or ""
local lua = os.getenv("ATTN_LUA") or "lua5.4"
local src = os.getenv("ATTN_SOURCE_DIR") or "."

local function run(script, np, prog, env)
  local t0 = attn.now()
  local cmd = ("%s%s %s -np %d %s %s 2>&1"):format(env and env .. " " or "", mpiexec, flags, np or 2, prog or lua,
    script:find("/") and script or src .. "/spec/mpi/" .. script)
  local p = io.popen(cmd)
  local out = p:read("a")
  local ok, _, code = p:close()
  return ok, code, out, attn.now() - t0
end

describe("attn.dist jobs under mpirun", function()
  if not mpiexec or mpiexec == "" then
    it("is skipped: attn was built without MPI or mpirun was not found", function()
      pending("MPI not found: the mpirun specs (spec/mpi) are skipped; install libopenmpi-dev openmpi-bin")
    end)
    return
  end

  it("a rank that raises an error makes the job fail fast", function()
    local ok, code, out, secs = run("fail_fast.lua")
    assert.is_falsy(ok, out)
    assert.are_not.equal(0, code)
    assert.matches("rank 1: deliberate failure", out)
    assert.is_nil(out:find("unreachable", 1, true))
    assert.is_true(secs < 30, ("took %.1f s"):format(secs))
  end)

  it("mpirun -np 4 attn scripts/ddp_train.lua matches the 1-rank run", function()
    local bin = os.getenv("ATTN_BIN")
    if not bin then return pending("ATTN_BIN not set") end
    local dir = os.getenv("ATTN_BUILD_DIR") or "/tmp"
    local one, four = dir .. "/ddp_train_np1.safetensors", dir .. "/ddp_train_np4.safetensors"
    local p = io.popen(("%s %s/scripts/ddp_train.lua --steps 8 --save %s 2>&1"):format(bin, src, one))
    local out1 = p:read("a")
    assert.is_truthy(p:close(), out1)
    local ok, _, out4 = run(src .. "/scripts/ddp_train.lua --steps 8 --save " .. four, 4, bin)
    assert.is_truthy(ok, out4)
    assert.matches("4 rank%(s%)", out4)
    local l1, l4 = out1:match("final loss (%S+)"), out4:match("final loss (%S+)")
    assert.are.equal(l1, l4)
    local a, b = attn.load(one), attn.load(four)
    local worst = 0
    for name, t in pairs(a) do worst = math.max(worst, (t - b[name]):abs():max():item()) end
    assert.is_true(worst < 1e-5, "weights differ by " .. worst)
    os.remove(one); os.remove(four)
  end)

  it("a rank whose peer never joins fails after the timeout", function()
    local ok, _, out, secs = run("timeout.lua")
    assert.is_falsy(ok, out)
    -- the watchdog of a blocking call says how long it measured
    local waited = tonumber(out:match("allreduce %(rank 0 of 2%): timed out after (%d+%.%d) s waiting for the other ranks"))
    assert.is_not_nil(waited, out)
    assert.is_true(waited >= 1 and waited < 2.5, out)
    assert.is_true(secs < 30, ("took %.1f s"):format(secs))
  end)

  -- One deadline per operation: the DDP backward's buckets share it, so a
  -- stopped peer fails the backward after the timeout, not after the
  -- timeout once per bucket (7 x 4 s before), and the message gives the
  -- time measured.
  it("a stopped rank fails a DDP backward after one timeout, not one per bucket", function()
    local T = 3
    local ok, _, out, secs = run("ddp_stall.lua", 2, nil, "ATTN_DIST_TIMEOUT=" .. T)
    assert.is_falsy(ok, out)
    local nb = tonumber(out:match("buckets (%d+)"))
    assert.is_true(nb and nb >= 4, out)
    local took, msg = out:match("backward failed after (%S+) s: ([^\n]*)")
    took = tonumber(took)
    assert.is_not_nil(took, out)
    assert.is_true(took >= T and took < T + 1, ("backward took %s s with %d buckets: %s"):format(took, nb, out))
    assert.matches("DistributedDataParallel: averaging the gradients %(bucket %d+ of " .. nb .. "%): allreduce "
      .. "%(rank 0 of 2%): timed out after %d+%.%d s waiting for the other ranks", msg)
    local waited = tonumber(msg:match("timed out after (%d+%.%d) s"))
    assert.is_true(waited >= T and waited <= took + 0.05, msg)
    local collected = tonumber(out:match("collected after (%S+) s"))
    assert.is_true(collected and collected < 1, out) -- pending handles are not waited for once more
    assert.is_true(secs < T + 12, ("the job took %.1f s"):format(secs))
  end)
end)
