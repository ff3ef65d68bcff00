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
    local t = attn.tensor({1, -2, 3})
    for _, op in ipairs({"sum", "avg", "max", "min"}) do
      dist.allreduce(t, op)
      assert.are.same({1, -2, 3}, t:totable())
    end
    dist.broadcast(t, 0)
    assert.are.same({1, -2, 3}, t:totable())
    assert.are.same({{1, 2}}, dist.allgather(attn.tensor({{1, 2}})):totable())
    assert.are.same({{1, 2}}, dist.reduce_scatter(attn.tensor({{1, 2}}), "sum"):totable())
    dist.barrier()
    local h = dist.allreduce(t, "avg", {async = true})
    h:wait()
    assert.is_true(h:is_completed())
    assert.are.same({{5}}, dist.allgather(attn.tensor({{5}}), {async = true}):wait():totable())
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

local mpiexec = os.getenv("ATTN_MPIEXEC")
local flags = os.getenv("ATTN_MPIEXEC_FLAGS") or ""
local lua = os.getenv("ATTN_LUA") or "lua5.4"
local src = os.getenv("ATTN_SOURCE_DIR") or "."

local function run(script)
  local t0 = attn.now()
  local cmd = ("%s %s -np 2 %s %s/spec/mpi/%s 2>&1"):format(mpiexec, flags, lua, src, script)
  local p = io.popen(cmd)
  local out = p:read("a")
  local ok, how, code = p:close()
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

  it("a rank whose peer never joins fails after the timeout", function()
    local ok, code, out, secs = run("timeout.lua")
    assert.is_falsy(ok, out)
    assert.matches("allreduce %(rank 0 of 2%): timed out after 1 s", out)
    assert.is_true(secs < 30, ("took %.1f s"):format(secs))
  end)
end)
