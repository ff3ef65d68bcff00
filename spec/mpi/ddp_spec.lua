-- SPDX-License-Identifier: MIT
-- nn.DistributedDataParallel and data.DistributedSampler under mpirun -np 2
-- and -np 4: DDP on shards must equal single-process training on the full
-- batch (1e-5), starting from a deliberately different initialisation on
-- the ranks other than 0 (overwritten by DDP's broadcast).  The reference
-- is computed on every rank by a plain model on the whole batch.
local attn = require "attn"
local nn, F, optim, data = attn.nn, attn.F, attn.optim, attn.data
local dist = attn.dist
attn.set_num_threads(1)
dist.init({timeout = 120})
local R, P = dist.rank(), dist.size()

local TOL = 1e-5

local Net = nn.Module:extend("Net")
function Net:init()
  self.emb = nn.Linear(6, 16)
  self.mha = attn.attention.MultiheadAttention(16, 4, {batch_first = true})
  self.ln = nn.LayerNorm(16)
  self.out = nn.Linear(16, 3)
  self.unused = nn.Linear(2, 2) -- gets no gradient when opts.use_extra is not set
  self:register_buffer("offset", attn.randn(16))
end
function Net:forward(x, use_extra)
  local h = self.emb(x) + self.offset
  h = h + self.mha(h, h, h, {need_weights = false})
  h = self.out(self.ln(h))
  if use_extra then h = h + self.unused(attn.ones(2)):sum() end
  return h
end

local function build(seed)
  attn.manual_seed(seed)
  return Net()
end

local function max_diff(a, b)
  local w = 0
  local pa, pb = a:parameters(), b:parameters()
  assert.are.equal(#pa, #pb)
  for i = 1, #pa do w = math.max(w, (pa[i] - pb[i]):abs():max():item()) end
  local ba, bb = a:buffers(), b:buffers()
  for i = 1, #ba do w = math.max(w, (ba[i] - bb[i]):abs():max():item()) end
  return w
end

-- Global batch: 4P examples of [5, 6]; rank r takes rows r+1, r+1+P, ...
local NB = 4 * P
local gen = attn.Generator(7)
local X = attn.randn({NB, 5, 6}, gen)
local Y = attn.randn({NB, 5, 3}, gen)

local function shard(t, idx) return t:index_select(1, attn.tensor(idx)) end
local my_rows = {}
for i = R + 1, NB, P do my_rows[#my_rows + 1] = i end

local function loss_of(model, x, y, skip_extra) return F.mse_loss(model(x, not skip_extra), y) end

-- Every gradient of the reference model equals the DDP model's (TOL).
local function assert_same_grads(ref, m)
  local pr, pm = ref:parameters(), m:parameters()
  for i = 1, #pr do
    if pr[i].grad then
      local d = (pr[i].grad - pm[i].grad):abs():max():item()
      assert.is_true(d < TOL, ("rank %d: parameter %d gradient differs by %g"):format(R, i, d))
    end
  end
end

describe("nn.DistributedDataParallel", function()
  it("broadcasts rank 0's parameters and buffers at construction", function()
    local ref = build(1)
    local m = build(1 + 100 * R) -- a different initialisation on every other rank
    if R ~= 0 then assert.is_true(max_diff(ref, m) > 1e-3) end
    local ddp = nn.DistributedDataParallel(m)
    assert.are.equal(m, ddp.module)
    assert.are.equal(0, max_diff(ref, m))
  end)

  for _, cfg in ipairs({{name = "one bucket", bucket_mb = 25}, {name = "many small buckets", bucket_mb = 0.0005}}) do
    it("on shards equals single-process training on the full batch (" .. cfg.name .. ")", function()
      local ref = build(2)
      local m = build(2 + R)
      local ddp = nn.DistributedDataParallel(m, {bucket_mb = cfg.bucket_mb})
      if cfg.bucket_mb < 1 then assert.is_true(ddp:bucket_count() > 3) else assert.are.equal(1, ddp:bucket_count()) end
      local opt_ref = optim.SGD(ref:parameters(), {lr = 0.1, momentum = 0.9})
      local opt = optim.SGD(ddp:parameters(), {lr = 0.1, momentum = 0.9})
      local xs, ys = shard(X, my_rows), shard(Y, my_rows)
      for _ = 1, 4 do
        opt_ref:zero_grad()
        loss_of(ref, X, Y):backward()
        opt_ref:step()
        opt:zero_grad()
        loss_of(ddp, xs, ys):backward() -- averaged during backward; no extra call
        opt:step()
      end
      local d = max_diff(ref, m)
      assert.is_true(d < TOL, ("rank %d: DDP differs from full-batch training by %g"):format(R, d))
      assert.is_true(ddp._reducer:overlapped() >= 4) -- every pass completed from the gradient hooks
    end)
  end

  it("no_sync accumulates locally; the next backward averages the sum", function()
    local ref = build(3)
    local m = build(3 + R)
    local ddp = nn.DistributedDataParallel(m, {bucket_mb = 0.0005})
    -- reference: gradient of (loss(first half) + loss(second half)) on the full batch
    local half = NB // 2
    local A = {}
    for i = 1, half do A[i] = i end
    local Bi = {}
    for i = half + 1, NB do Bi[#Bi + 1] = i end
    ref:zero_grad()
    loss_of(ref, shard(X, A), shard(Y, A)):backward()
    loss_of(ref, shard(X, Bi), shard(Y, Bi)):backward()
    -- DDP: rank r takes its rows of each half
    local function mine(list)
      local out = {}
      for j = R + 1, #list, P do out[#out + 1] = list[j] end
      return out
    end
    ddp:zero_grad()
    ddp:no_sync(function()
      loss_of(ddp, shard(X, mine(A)), shard(Y, mine(A))):backward()
    end)
    -- after no_sync the gradients are local (differ between ranks in general)
    do
      local guard <close> = ddp:no_sync()
      assert.is_false(ddp._reducer:overlapped() > 0)
    end
    loss_of(ddp, shard(X, mine(Bi)), shard(Y, mine(Bi))):backward()
    assert_same_grads(ref, m)
  end)

  it("a parameter unused in the forward: sync_gradients completes the pass", function()
    local ref = build(4)
    local m = build(4 + R)
    local ddp = nn.DistributedDataParallel(m, {bucket_mb = 0.0005})
    ref:zero_grad()
    loss_of(ref, X, Y, true):backward()
    ddp:zero_grad()
    loss_of(ddp, shard(X, my_rows), shard(Y, my_rows), true):backward()
    -- the pass is still open: a forward now refuses, as torch's DDP does
    local ok, err = pcall(ddp, shard(X, my_rows), true)
    assert.is_false(ok)
    assert.matches("sync_gradients", err)
    ddp:sync_gradients()
    assert_same_grads(ref, m)
    -- and the next pass works normally
    ddp:zero_grad()
    loss_of(ddp, shard(X, my_rows), shard(Y, my_rows), true):backward()
    ddp:sync_gradients()
  end)

  it("checkpoints: save from rank 0, load everywhere", function()
    local m = build(5 + R)
    local ddp = nn.DistributedDataParallel(m)
    local path = os.getenv("ATTN_BUILD_DIR") and (os.getenv("ATTN_BUILD_DIR") .. "/ddp_spec_ckpt_np" .. P .. ".safetensors")
      or "/tmp/attn_ddp_spec_np" .. P .. ".safetensors"
    if dist.is_main() then attn.save(ddp.module:state_dict(), path) end
    dist.barrier()
    local fresh = build(99 + R)
    fresh:load_state_dict(attn.load(path))
    assert.are.equal(0, max_diff(fresh, m))
    dist.barrier()
    if dist.is_main() then os.remove(path) end
  end)
end)

describe("data.DistributedSampler", function()
  it("gives each rank a disjoint shard covering every index (drop_last = false pads)", function()
    for _, n in ipairs({4 * P, 4 * P + 1, 3}) do
      local s = data.DistributedSampler(n, {shuffle = true, seed = 5})
      local mine = s:indices()
      assert.are.equal(math.ceil(n / P), #mine)
      local counts = attn.zeros(n)
      for _, i in ipairs(mine) do counts[i] = counts[i] + 1 end
      dist.allreduce(counts, "sum")
      for i = 1, n do assert.is_true(counts[i] >= 1) end
      assert.are.equal(math.ceil(n / P) * P, counts:sum():item())
    end
  end)

  it("drop_last and set_epoch", function()
    local n = 4 * P + 1
    local s = data.DistributedSampler(n, {shuffle = true, seed = 1, drop_last = true})
    assert.are.equal(4, #s:indices())
    local e0 = s:indices()
    s:set_epoch(1)
    local e1 = s:indices()
    assert.are_not.same(e0, e1)
  end)
end)
