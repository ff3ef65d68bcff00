-- SPDX-License-Identifier: MIT
-- F.ring_attention under mpirun -np 2 and -np 4: the output and the
-- gradients of q, k and v equal attn's full scaled_dot_product_attention
-- (itself checked against torch in spec/sdpa_spec.lua) on the whole
-- sequence, to 1e-4, causal (zigzag layout) and not.
local attn = require "attn"
local dist, F = attn.dist, attn.F
attn.set_num_threads(1)
dist.init({timeout = 120})
local R, P = dist.rank(), dist.size()
local TOL = 1e-4

local function maxdiff(a, b) return (a - b):abs():max():item() end

local function check(case)
  local g = attn.Generator(11)
  local B, H, L, E, Ev = case.B, case.H, case.Lper * P, case.E, case.Ev
  local q, k, v = attn.randn({B, H, L, E}, g), attn.randn({B, H, L, E}, g), attn.randn({B, H, L, Ev}, g)
  local dout = attn.randn({B, H, L, Ev}, g)
  local qf, kf, vf = q:clone():requires_grad_(), k:clone():requires_grad_(), v:clone():requires_grad_()
  local ref = attn.scaled_dot_product_attention(qf, kf, vf, {is_causal = case.causal, scale = case.scale})
  ref:backward(dout)
  local o = {causal = case.causal}
  local ql, kl, vl = dist.ring_shard(q, o), dist.ring_shard(k, o), dist.ring_shard(v, o)
  local k_before = kl:clone()
  if case.noncontiguous then -- the same values through transposed views
    ql = ql:transpose(-1, -2):contiguous():transpose(-1, -2)
    assert.is_false(ql:is_contiguous())
  end
  ql:requires_grad_(); kl:requires_grad_(); vl:requires_grad_()
  local out = F.ring_attention(ql, kl, vl, {causal = case.causal, scale = case.scale})
  assert.are.equal("RingAttentionBackward0", out.grad_fn)
  assert.are.same({B, H, case.Lper, Ev}, {out:size()})
  out:backward(dist.ring_shard(dout, o))
  assert.are.equal(0, maxdiff(kl, k_before)) -- inputs untouched
  local d = {
    out = maxdiff(dist.ring_unshard(out, o), ref),
    dq = maxdiff(dist.ring_unshard(ql.grad, o), qf.grad),
    dk = maxdiff(dist.ring_unshard(kl.grad, o), kf.grad),
    dv = maxdiff(dist.ring_unshard(vl.grad, o), vf.grad),
  }
  for name, x in pairs(d) do
    assert.is_true(x < TOL, ("rank %d of %d: %s differs from full SDPA by %g"):format(R, P, name, x))
  end
end

describe("F.ring_attention", function()
  local cases = {
    {name = "not causal", causal = false, B = 2, H = 3, Lper = 24, E = 16, Ev = 8},
    {name = "causal (zigzag)", causal = true, B = 2, H = 3, Lper = 24, E = 16, Ev = 8},
    {name = "causal, long blocks past the kernel tiles", causal = true, B = 1, H = 2, Lper = 160, E = 32, Ev = 32},
    {name = "not causal, explicit scale, non-contiguous q", causal = false, B = 1, H = 2, Lper = 10, E = 8, Ev = 8,
     scale = 0.3, noncontiguous = true},
    {name = "causal, 2-d inputs", causal = true, B = nil, Lper = 6, E = 4, Ev = 4},
  }
  for _, c in ipairs(cases) do
    it("output and gradients equal full SDPA: " .. c.name, function()
      if not c.B then
        -- [L, E] inputs: no batch dims
        local g = attn.Generator(5)
        local L = c.Lper * P
        local q, k, v = attn.randn({L, c.E}, g), attn.randn({L, c.E}, g), attn.randn({L, c.Ev}, g)
        local ref = attn.scaled_dot_product_attention(q, k, v, {is_causal = true})
        local o = {causal = true}
        local out = F.ring_attention(dist.ring_shard(q, o), dist.ring_shard(k, o), dist.ring_shard(v, o), o)
        assert.is_true(maxdiff(dist.ring_unshard(out, o), ref) < TOL)
        return
      end
      check(c)
    end)
  end

  it("refuses an odd local length when causal, naming the rank", function()
    local x = attn.randn(1, 5, 4)
    local ok, err = pcall(F.ring_attention, x, x, x, {causal = true})
    assert.is_false(ok)
    assert.matches("ring_attention %(rank " .. R .. " of " .. P .. "%): causal ring attention needs an even", err)
  end)

  it("backward refuses inputs modified in place after the forward", function()
    local q = attn.randn(1, 4, 4):requires_grad_()
    local k = attn.randn(1, 4, 4)
    local out = F.ring_attention(q, k, k, {causal = true})
    k:add_(1)
    local ok, err = pcall(function() out:sum():backward() end)
    assert.is_false(ok)
    assert.matches("modified in place", err)
  end)
end)
