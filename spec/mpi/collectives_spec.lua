-- SPDX-License-Identifier: MIT
-- attn.dist collectives, run by ctest under
--   mpirun --oversubscribe [--allow-run-as-root] -np 2 | -np 4 lua5.4 busted spec/mpi/collectives_spec.lua
-- (one BLAS thread per rank).  Every rank runs every `it` in the same
-- order, so the collectives inside match up.  Each result is compared with
-- a value computed by hand from the ranks' inputs.
local attn = require "attn"
local dist = attn.dist
attn.set_num_threads(1)
dist.init({timeout = 60})

local R, P = dist.rank(), dist.size()

local function list(t)
  local out = {}
  local flat = t:contiguous():view(-1)
  for i = 1, flat:numel() do out[i] = flat[i] end
  return out
end

local function same(t, expected, what)
  local got = list(t)
  assert.are.equal(#expected, #got, what .. ": element count")
  for i = 1, #expected do
    if math.abs(got[i] - expected[i]) > 1e-6 then
      error(("%s (rank %d): element %d is %g, expected %g"):format(what, R, i, got[i], expected[i]))
    end
  end
end

describe("attn.dist world", function()
  it("runs under mpirun with 0-based ranks", function()
    assert.is_true(dist.uses_mpi())
    assert.is_true(P >= 2)
    assert.is_true(R >= 0 and R < P)
    assert.are.equal(R == 0, dist.is_main())
    assert.is_true(dist.local_rank() >= 0 and dist.local_rank() < P)
    assert.matches("MPI", dist.backend())
  end)

  it("every rank sees the same size and distinct ranks", function()
    local g = dist.allgather(attn.tensor({R, P}))
    local seen = {}
    for r = 0, P - 1 do
      assert.are.equal(P, g[2 * r + 2])
      seen[g[2 * r + 1]] = true
    end
    for r = 0, P - 1 do assert.is_true(seen[r]) end
  end)

  it("barrier, blocking and async", function()
    dist.barrier()
    local h = dist.barrier({async = true})
    h:wait()
  end)
end)

describe("attn.dist.allreduce", function()
  local function input(r) return attn.tensor({r + 1, -(r + 1), r * r, 0.5}) end
  local function expected(op)
    local acc
    for r = 0, P - 1 do
      local v = list(input(r))
      if not acc then
        acc = v
      else
        for i = 1, #v do
          if op == "sum" or op == "avg" then acc[i] = acc[i] + v[i]
          elseif op == "max" then acc[i] = math.max(acc[i], v[i])
          else acc[i] = math.min(acc[i], v[i]) end
        end
      end
    end
    if op == "avg" then for i = 1, #acc do acc[i] = acc[i] / P end end
    return acc
  end

  for _, op in ipairs({"sum", "avg", "max", "min"}) do
    it(op .. " in place", function()
      local t = input(R)
      local res = dist.allreduce(t, op)
      assert.are.equal(t, res)
      same(t, expected(op), "allreduce " .. op)
    end)
  end

  it("defaults to sum", function()
    local t = input(R)
    dist.allreduce(t)
    same(t, expected("sum"), "allreduce default")
  end)

  it("async: a handle with wait", function()
    local t = input(R)
    local h = dist.allreduce(t, "avg", {async = true})
    assert.are.equal("userdata", type(h))
    h:wait()
    same(t, expected("avg"), "async allreduce")
    assert.is_true(h:is_completed())
    h:wait() -- a second wait is fine
    local h2 = dist.iallreduce(input(R), "max")
    h2:wait()
  end)

  it("non-contiguous tensors are written back through the view", function()
    local base = attn.arange(6):view(2, 3):add(R)
    local view = base:t() -- [3, 2], not contiguous
    assert.is_false(view:is_contiguous())
    dist.allreduce(view, "sum")
    local want = {}
    local s = 0
    for r = 0, P - 1 do s = s + r end
    for i = 0, 5 do want[i + 1] = P * i + s end
    same(base, want, "allreduce through a transposed view")
  end)

  it("many async operations in flight at once", function()
    local ts, hs = {}, {}
    for i = 1, 8 do
      ts[i] = attn.full({1000}, R + i)
      hs[i] = dist.allreduce(ts[i], "sum", {async = true})
    end
    for i = 8, 1, -1 do hs[i]:wait() end
    local s = 0
    for r = 0, P - 1 do s = s + r end
    for i = 1, 8 do
      assert.are.equal(s + P * i, ts[i][1000])
    end
  end)

  it("a large buffer", function()
    local n = 1 << 20
    local t = attn.full({n}, R + 1)
    dist.allreduce(t, "sum")
    assert.are.equal(P * (P + 1) / 2, t:sum():item() / n)
  end)
end)

describe("attn.dist.broadcast", function()
  it("copies the root's tensor to every rank", function()
    for root = 0, P - 1 do
      local t = attn.full({2, 3}, R * 10 + 1)
      dist.broadcast(t, root)
      same(t, {root * 10 + 1, root * 10 + 1, root * 10 + 1, root * 10 + 1, root * 10 + 1, root * 10 + 1},
        "broadcast from " .. root)
    end
  end)

  it("async and into a non-contiguous view", function()
    local base = attn.zeros(3, 2)
    if R == 0 then base = attn.tensor({{1.0, 2}, {3, 4}, {5, 6}}) end
    local h = dist.broadcast(base:t(), 0, {async = true})
    h:wait()
    same(base, {1, 2, 3, 4, 5, 6}, "broadcast into a view")
  end)
end)

describe("attn.dist.allgather", function()
  it("concatenates along dim 1 in rank order", function()
    local t = attn.tensor({{R, R + 0.5}})
    local g = dist.allgather(t)
    assert.are.same({P, 2}, {g:size()})
    local want = {}
    for r = 0, P - 1 do want[#want + 1] = r; want[#want + 1] = r + 0.5 end
    same(g, want, "allgather")
  end)

  it("async gives the result from wait", function()
    local h = dist.allgather(attn.full({2}, R), {async = true})
    local g = h:wait()
    assert.are.same({2 * P}, {g:size()})
    assert.are.equal(P - 1, g[2 * P])
  end)
end)

describe("attn.dist.reduce_scatter", function()
  it("reduces then hands rank r slice r+1 of dim 1", function()
    -- rank r holds x[i][j] = (i - 1) * 10 + j + r, i = 1..2P, j = 1..3
    local x = attn.zeros(2 * P, 3)
    for i = 1, 2 * P do for j = 1, 3 do x[i][j] = (i - 1) * 10 + j + R end end
    local s = 0
    for r = 0, P - 1 do s = s + r end
    for _, op in ipairs({"sum", "avg", "max"}) do
      local out = dist.reduce_scatter(x, op)
      assert.are.same({2, 3}, {out:size()})
      local want = {}
      for i = 2 * R + 1, 2 * R + 2 do
        for j = 1, 3 do
          local base = (i - 1) * 10 + j
          if op == "sum" then want[#want + 1] = P * base + s
          elseif op == "avg" then want[#want + 1] = base + s / P
          else want[#want + 1] = base + P - 1 end
        end
      end
      same(out, want, "reduce_scatter " .. op)
    end
  end)

  it("refuses a dim 1 that the world size does not divide, naming the rank", function()
    local ok, err = pcall(dist.reduce_scatter, attn.zeros(P + 1, 2), "sum")
    assert.is_false(ok)
    assert.matches("reduce_scatter %(rank " .. R .. " of " .. P .. "%)", err)
  end)
end)

describe("attn.dist send / recv", function()
  it("passes tensors around the ring", function()
    local nxt, prv = (R + 1) % P, (R - 1) % P
    local out = attn.full({2, 2}, R + 0.0)
    local inb = attn.zeros(2, 2)
    local hr = dist.recv(inb, prv, {async = true, tag = 7})
    local hs = dist.send(out, nxt, {async = true, tag = 7})
    hs:wait(); hr:wait()
    same(inb, {prv, prv, prv, prv}, "ring recv")
  end)

  it("blocking pairs, with tags", function()
    if R == 0 then
      dist.send(attn.tensor({1.0, 2, 3}), 1, {tag = 3})
      local back = attn.zeros(3)
      dist.recv(back, 1, {tag = 4})
      same(back, {2, 4, 6}, "echo")
    elseif R == 1 then
      local t = attn.zeros(3)
      dist.recv(t, 0, {tag = 3})
      dist.send(t * 2, 0, {tag = 4})
    end
    dist.barrier()
  end)
end)

describe("attn.dist errors", function()
  it("name the operation and the rank", function()
    local ok, err = pcall(dist.allreduce, attn.ones(2), "mean")
    assert.is_false(ok)
    assert.matches("allreduce %(rank " .. R .. " of " .. P .. "%)", err)
    ok, err = pcall(dist.broadcast, attn.ones(2), P)
    assert.is_false(ok)
    assert.matches("broadcast %(rank " .. R .. " of " .. P .. "%): root must be a rank in 0%.%." .. (P - 1), err)
    ok, err = pcall(dist.send, attn.ones(2), -1)
    assert.is_false(ok)
    assert.matches("rank", err)
  end)
end)
