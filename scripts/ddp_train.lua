-- SPDX-License-Identifier: MIT
-- Data-parallel training of a small causal-attention character model with
-- attn.dist and nn.DistributedDataParallel.
--
--   attn scripts/ddp_train.lua                          -- 1 rank (no mpirun)
--   mpirun -np 4 attn scripts/ddp_train.lua             -- 4 ranks, same result
--   mpirun -np 4 attn scripts/ddp_train.lua --steps 50 --save /tmp/ddp.safetensors
--
-- Each rank builds the model (deliberately from a different seed: DDP
-- broadcasts rank 0's weights), draws the same shuffled order of the
-- training sequences (DistributedSampler) and takes its shard of every
-- global batch; DDP averages the gradients during backward, so every step
-- equals a 1-rank step on the whole global batch.  Rank 0 logs and saves.
-- One BLAS thread per rank (--threads to change).
--
-- Options: --steps N (20), --batch B (global batch, 32; divisible by the
-- number of ranks), --seq T (32), --dim D (64), --save PATH (rank 0 writes
-- the final weights), --quiet, --bench (print steps/s only).
local attn = require "attn"
local S = require "attn.script"
local nn, F, optim, data = attn.nn, attn.F, attn.optim, attn.data
local dist = attn.dist

local opts = S.args(arg, {steps = 20, batch = 32, seq = 32, dim = 64, threads = 1, save = S.str(), quiet = false,
                          bench = false},
  "usage: [mpirun -np N] attn scripts/ddp_train.lua [--steps N] [--batch B] [--seq T] [--dim D] [--threads N] "
  .. "[--save PATH] [--quiet] [--bench]")

attn.set_num_threads(opts.threads) -- never nest threading: ranks use the cores
dist.init()
local R, P = dist.rank(), dist.size()
local B, T, D, V = opts.batch, opts.seq, opts.dim, 32
if B % P ~= 0 then
  if R == 0 then io.stderr:write(("--batch %d must be divisible by the %d ranks\n"):format(B, P)) end
  os.exit(2)
end
local b = B // P -- this rank's share of each global batch

-- Data: N sequences of a learnable rule (next = 3 * prev + 1 mod V, with
-- noise), the same on every rank (seeded generator).
local N = B * 8
local g = attn.Generator(42)
local starts = attn.randint(0, V, {N}, g)
local noise = attn.rand({N, T + 1}, g)
local seqs = attn.zeros(N, T + 1)
for n = 1, N do
  local c = math.tointeger(starts[n])
  for t = 1, T + 1 do
    seqs[n][t] = c + 1 -- 1-based ids
    c = noise[n][t] < 0.1 and (c + 7) % V or (3 * c + 1) % V
  end
end

-- The model: token + position embeddings, one causal self-attention block
-- (fused SDPA), an MLP, a LayerNorm and the output layer.
local CharGPT = nn.Module:extend("CharGPT")
function CharGPT:init()
  self.tok = nn.Embedding(V, D)
  self.pos = nn.Embedding(T, D)
  self.qkv = nn.Linear(D, 3 * D)
  self.proj = nn.Linear(D, D)
  self.ln = nn.LayerNorm(D)
  self.fc1 = nn.Linear(D, 4 * D)
  self.fc2 = nn.Linear(4 * D, D)
  self.head = nn.Linear(D, V)
  self:register_buffer("positions", attn.arange(1, T + 1))
end
function CharGPT:forward(ids)
  local x = self.tok(ids) + self.pos(self.positions)
  local qkv = self.qkv(x)
  local q, k, v = qkv:narrow(-1, 1, D), qkv:narrow(-1, D + 1, D), qkv:narrow(-1, 2 * D + 1, D)
  x = x + self.proj(attn.scaled_dot_product_attention(q, k, v, {is_causal = true}))
  x = x + self.fc2(F.gelu(self.fc1(self.ln(x))))
  return self.head(x)
end

attn.manual_seed(1234 + R) -- rank 0 = the 1-rank run's seed; the others differ on purpose
local model = CharGPT()
local ddp = nn.DistributedDataParallel(model, {bucket_mb = 0.05})
local opt = optim.SGD(ddp:parameters(), {lr = 0.3, momentum = 0.9})

local sampler = data.DistributedSampler(N, {shuffle = true, seed = 0})
local function log(...) if R == 0 and not opts.quiet and not opts.bench then print(...) end end
log(("ddp_train: %d rank(s) (%s), global batch %d (%d per rank), %d params in %d gradient bucket(s)")
  :format(P, dist.backend(), B, b, (function()
    local n = 0
    for _, p in ipairs(model:parameters()) do n = n + p:numel() end
    return n
  end)(), ddp:bucket_count()))

local step, epoch = 0, 0
local t0, tstart, cstart = attn.now(), nil, nil
local last_loss
while step < opts.steps do
  sampler:set_epoch(epoch)
  local idx = sampler:indices()
  for first = 1, #idx - b + 1, b do
    if step >= opts.steps then break end
    if step == 1 then tstart, cstart = attn.now(), os.clock() end -- step 0 is warm-up
    local rows = {}
    for i = 1, b do rows[i] = idx[first + i - 1] end
    local batch = seqs:index_select(1, attn.tensor(rows))
    local x, y = batch:narrow(2, 1, T), batch:narrow(2, 2, T)
    opt:zero_grad()
    local logits = ddp(x)
    local loss = F.cross_entropy(logits:reshape(b * T, V), y:reshape(b * T))
    loss:backward() -- gradients are averaged over the ranks during this call
    opt:step()
    step = step + 1
    local l = attn.tensor({loss:item()})
    dist.allreduce(l, "avg") -- the global batch's loss, for the log
    last_loss = l[1]
    if step == 1 or step % 5 == 0 or step == opts.steps then
      log(("step %3d  loss %.6f"):format(step, last_loss))
    end
  end
  epoch = epoch + 1
end
local elapsed = attn.now() - (tstart or t0)

if opts.bench then
  -- CPU seconds of all ranks together (os.clock: this process's CPU time),
  -- a measure that does not depend on how many free cores there were
  local cpu = attn.tensor({os.clock() - (cstart or 0)})
  dist.allreduce(cpu, "sum")
  if R == 0 then
    print(("ddp_train bench: ranks %d steps/s %.3f samples/s %.1f samples/cpu-s %.1f"):format(P,
      (opts.steps - 1) / elapsed, (opts.steps - 1) * B / elapsed, (opts.steps - 1) * B / cpu[1]))
  end
end
log(("final loss %.6f after %d steps"):format(last_loss, step))

-- Checkpoint: rank 0 saves, every rank loads (here: checks it matches).
if opts.save then
  if R == 0 then attn.save(model:state_dict(), opts.save) end
  dist.barrier()
  local sd = attn.load(opts.save)
  local worst = 0
  for name, p in pairs(model:state_dict()) do
    worst = math.max(worst, (sd[name] - p):abs():max():item())
  end
  assert(worst == 0, ("rank %d: loaded checkpoint differs from the trained weights by %g"):format(R, worst))
  log("saved " .. opts.save)
end
