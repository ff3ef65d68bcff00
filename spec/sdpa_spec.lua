-- SPDX-License-Identifier: MIT
-- attn.scaled_dot_product_attention against torch (spec/fixtures/sdpa.lua
-- and sdpa_blocks.lua, made by scripts/fixtures/gen_sdpa.py from the torch
-- 1.13 composition of torch 2.x's semantics): outputs and the gradients of
-- q, k, v (and of an additive mask), with masks, causal alignments, GQA,
-- weights and dropout; then the options, the mask helpers and the errors.
local attn = require "attn"
local fixture = require "support.fixture"

local sdpa = attn.scaled_dot_product_attention

-- Forward at 1e-5, gradients at 1e-4 (absolute), as the fused kernel's
-- block-wise sums differ from torch's in rounding only.
local FWD, BWD = 1e-5, 1e-4

local function input(e)
  local t = fixture.tensor(e)
  if e.perm then
    t = t:permute(table.unpack(e.perm))
    assert.is_false(t:is_contiguous())
  end
  return t
end

local function run_case(c)
  local q, k, v = input(c.q), input(c.k), input(c.v)
  q:requires_grad_(true); k:requires_grad_(true); v:requires_grad_(true)
  local opts = {}
  for key, val in pairs(c.opts) do opts[key] = val end
  local mask
  if c.mask then
    mask = fixture.tensor(c.mask)
    if c.mask_requires_grad then mask:requires_grad_(true) end
    opts.attn_mask = mask
  end
  if c.seed then opts.generator = attn.Generator(c.seed) end
  local out, w = sdpa(q, k, v, opts)
  fixture.assert_close(out, c.out, FWD, 0, c.name .. ": out")
  if c.weights then
    fixture.assert_close(w, c.weights, FWD, 0, c.name .. ": weights")
  else
    assert.is_nil(w)
  end
  local fused = not (c.weights or c.seed or c.mask_requires_grad)
  if fused then
    assert.are.equal("ScaledDotProductFlashAttentionForCpuBackward0", out.grad_fn)
  end
  out:backward(fixture.tensor(c.dout))
  fixture.assert_close(q.grad, c.dq, BWD, 0, c.name .. ": dq")
  fixture.assert_close(k.grad, c.dk, BWD, 0, c.name .. ": dk")
  fixture.assert_close(v.grad, c.dv, BWD, 0, c.name .. ": dv")
  if c.mask_grad then fixture.assert_close(mask.grad, c.mask_grad, BWD, 0, c.name .. ": mask grad") end
end

for _, file in ipairs({"sdpa", "sdpa_blocks"}) do
  describe("scaled_dot_product_attention vs torch (" .. file .. ")", function()
    for _, c in ipairs(fixture.load(file).cases) do
      it(c.name, function() run_case(c) end)
    end
  end)
end

local function randn(...) return attn.randn(...) end

local function max_abs_diff(a, b)
  return (a - b):abs():max():item()
end

describe("scaled_dot_product_attention options", function()
  it("returns only out unless need_weights, then out and weights summing to 1", function()
    local q, k, v = randn(3, 4), randn(5, 4), randn(5, 2)
    assert.are.equal(1, select("#", sdpa(q, k, v)))
    local out, w = sdpa(q, k, v, {need_weights = true})
    assert.are.same({3, 5}, w:shape())
    assert.is_true(max_abs_diff(w:sum(-1), attn.ones(3)) < 1e-6)
    assert.is_true(max_abs_diff(out, w:matmul(v)) < 1e-6)
    assert.is_true(max_abs_diff(out, sdpa(q, k, v)) < 1e-6)
  end)

  it("never guesses how to read a mask: attn_mask_kind is required", function()
    local q, k, v = randn(3, 4), randn(5, 4), randn(5, 2)
    local m = attn.causal_mask(3, 5)
    local ok, err = pcall(sdpa, q, k, v, {attn_mask = m})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("attn_mask_kind", 1, true))
    -- the same 0/1 tensor means different things as bool and as additive
    local as_bool = sdpa(q, k, v, {attn_mask = m, attn_mask_kind = "bool"})
    local as_add = sdpa(q, k, v, {attn_mask = m, attn_mask_kind = "additive"})
    assert.is_true(max_abs_diff(as_bool, as_add) > 1e-3)
    assert.is_true(max_abs_diff(as_bool, sdpa(q, k, v, {is_causal = true})) < 1e-6)
    ok, err = pcall(sdpa, q, k, v, {attn_mask = m, attn_mask_kind = "boolean"})
    assert.is_false(ok)
    assert.truthy(tostring(err):find('"bool" or "additive"', 1, true))
    ok, err = pcall(sdpa, q, k, v, {attn_mask_kind = "bool"})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("without attn_mask", 1, true))
  end)

  it("accepts a mask given as a Lua table", function()
    local q, k, v = randn(2, 3), randn(3, 3), randn(3, 2)
    local mt = {{1, 0, 1}, {0, 1, 1}}
    local a = sdpa(q, k, v, {attn_mask = mt, attn_mask_kind = "bool"})
    local b = sdpa(q, k, v, {attn_mask = attn.tensor(mt, {dtype = attn.float32}), attn_mask_kind = "bool"})
    assert.is_true(max_abs_diff(a, b) == 0)
  end)

  it("raises on unknown options and wrong option types", function()
    local q, k, v = randn(2, 3), randn(3, 3), randn(3, 2)
    local ok, err = pcall(sdpa, q, k, v, {causal = true})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("unknown option 'causal'", 1, true))
    ok, err = pcall(sdpa, q, k, v, {is_causal = 1})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("'is_causal' must be a boolean", 1, true))
    ok, err = pcall(sdpa, q, k, v, {scale = "x"})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("'scale' must be a number", 1, true))
    ok, err = pcall(sdpa, q, k, v, {dropout_p = 0.5, generator = 3})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("attn.Generator", 1, true))
    ok, err = pcall(sdpa, q, k, v, {causal_alignment = "bottom_left", is_causal = true})
    assert.is_false(ok)
    assert.truthy(tostring(err):find('"top_left" or "bottom_right"', 1, true))
  end)

  it("takes the default scale 1/sqrt(E) and an explicit one", function()
    local q, k, v = randn(2, 3, 16), randn(2, 5, 16), randn(2, 5, 4)
    assert.is_true(max_abs_diff(sdpa(q, k, v), sdpa(q, k, v, {scale = 0.25})) < 1e-7)
    assert.is_true(max_abs_diff(sdpa(q, k, v), sdpa(q, k, v, {scale = 0.5})) > 1e-4)
  end)

  it("gives the reference path's gradients for any scale, mask and length (query rows read in place or copied)",
    function()
    -- the fused backward reads whole blocks of unit-stride query rows in
    -- place, unscaled, and puts the scale into the exponent and into dK;
    -- partial blocks, strided queries, additive masks and scales <= 0 take
    -- the copied, scaled rows
    local function grads(q, k, v, o)
      local qg, kg, vg = q:clone():requires_grad_(), k:clone():requires_grad_(), v:clone():requires_grad_()
      local out = sdpa(qg, kg, vg, o)
      out:mul(attn.arange(1, out:numel() + 1):reshape(out:size()):cos()):sum():backward()
      return out, qg.grad, kg.grad, vg.grad
    end
    for _, L in ipairs({64, 66, 130}) do
      for _, scale in ipairs({0.125, 0, -0.3}) do
        for _, mask in ipairs({"none", "causal", "bool", "add"}) do
          local q, k, v = randn(2, 2, L, 16), randn(2, 2, L, 16), randn(2, 2, L, 8)
          local o = {scale = scale}
          if mask == "causal" then o.is_causal = true end
          if mask == "bool" then o.attn_mask = attn.rand(L, L):lt(0.8) end
          if mask == "add" then o.attn_mask, o.attn_mask_kind = attn.randn(L, L), "additive" end
          local fused = {grads(q, k, v, o)}
          o.need_weights = true -- the composed reference path
          local ref = {grads(q, k, v, o)}
          for i = 1, 4 do
            local d = max_abs_diff(fused[i], ref[i])
            assert(d < 2e-4, ("L=%d scale %g mask %s: tensor %d differs by %g"):format(L, scale, mask, i, d))
          end
        end
      end
    end
    -- strided (transposed) queries
    local q, k, v = randn(2, 64, 2, 16):transpose(2, 3), randn(2, 2, 64, 16), randn(2, 2, 64, 8)
    local f, r = {grads(q, k, v, {})}, {grads(q, k, v, {need_weights = true})}
    for i = 1, 4 do assert.is_true(max_abs_diff(f[i], r[i]) < 2e-4) end
  end)

  it("aligns causal masks top-left like torch, or bottom-right for decoding", function()
    local q, k, v = randn(2, 8), randn(5, 8), randn(5, 3)
    -- bottom-right: the 2 queries are the last 2 of 5 positions
    local br = sdpa(q, k, v, {is_causal = true, causal_alignment = "bottom_right"})
    local bm = attn.causal_mask(2, 5, {bottom_right = true})
    assert.are.same({{1, 1, 1, 1, 0}, {1, 1, 1, 1, 1}}, bm:totable())
    assert.is_true(max_abs_diff(br, sdpa(q, k, v, {attn_mask = bm, attn_mask_kind = "bool"})) < 1e-6)
    local tl = sdpa(q, k, v, {is_causal = true, causal_alignment = "top_left"})
    assert.are.same({{1, 0, 0, 0, 0}, {1, 1, 0, 0, 0}}, attn.causal_mask(2, 5):totable())
    assert.is_true(max_abs_diff(tl, sdpa(q, k, v, {is_causal = true})) == 0)
    assert.is_true(max_abs_diff(tl, br) > 1e-3)
    local ok, err = pcall(sdpa, q, k, v, {causal_alignment = "bottom_right"})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("needs is_causal", 1, true))
  end)

  it("makes padding masks from lengths that broadcast over heads and queries", function()
    local pm = attn.padding_mask({2, 0, 3}, 3)
    assert.are.same({3, 1, 1, 3}, pm:shape())
    assert.are.same({{{{1, 1, 0}}}, {{{0, 0, 0}}}, {{{1, 1, 1}}}}, pm:totable())
    local q, k, v = randn(3, 2, 4, 5), randn(3, 2, 3, 5), randn(3, 2, 3, 2)
    local out = sdpa(q, k, v, {attn_mask = pm, attn_mask_kind = "bool"})
    -- the empty sequence gives zeros, not NaN
    assert.are.equal(0, out:select(1, 2):abs():sum():item())
    -- a padded key does not matter: dropping it gives the same result
    local first = sdpa(q:select(1, 1), k:select(1, 1):narrow(2, 1, 2), v:select(1, 1):narrow(2, 1, 2))
    assert.is_true(max_abs_diff(out:select(1, 1), first) < 1e-6)
    local ok, err = pcall(attn.padding_mask, {4}, 3)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("found 4", 1, true))
  end)

  it("draws dropout from the generator: same seed, same result", function()
    local q, k, v = randn(4, 3), randn(6, 3), randn(6, 2)
    local a = sdpa(q, k, v, {dropout_p = 0.5, generator = attn.Generator(5)})
    local b = sdpa(q, k, v, {dropout_p = 0.5, generator = attn.Generator(5)})
    local c = sdpa(q, k, v, {dropout_p = 0.5, generator = attn.Generator(6)})
    assert.are.equal(0, max_abs_diff(a, b))
    assert.is_true(max_abs_diff(a, c) > 0)
    assert.are.equal(0, max_abs_diff(sdpa(q, k, v, {dropout_p = 0}), sdpa(q, k, v)))
    assert.are.equal(0, sdpa(q, k, v, {dropout_p = 1}):abs():sum():item())
  end)

  it("records nothing under no_grad", function()
    local q = randn(3, 4):requires_grad_(true)
    local out = attn.no_grad(function() return sdpa(q, randn(5, 4), randn(5, 2)) end)
    assert.is_false(out.requires_grad)
  end)
end)

describe("scaled_dot_product_attention errors", function()
  local function fails(pattern, ...)
    local ok, err = pcall(sdpa, ...)
    assert.is_false(ok)
    assert.truthy(tostring(err):find(pattern, 1, true), tostring(err))
  end

  it("names the shapes that do not fit", function()
    local q, k, v = randn(2, 5, 8), randn(2, 7, 8), randn(2, 7, 3)
    fails("query [2,5,8] and key [2,7,6] must have the same embedding size", q, randn(2, 7, 6), v)
    fails("key [2,7,8] and value [2,6,3] must have the same sequence length", q, k, randn(2, 6, 3))
    fails("query [2,5,8], key [3,7,8] and value [3,7,3] must have the same leading dims", q, randn(3, 7, 8),
      randn(3, 7, 3))
    fails("must have the same number of dims", randn(5, 8), k, v)
    fails("attn_mask [4,7] cannot be broadcast to the attention shape [2,5,7]", q, k, v,
      {attn_mask = attn.ones(4, 7), attn_mask_kind = "bool"})
  end)

  it("explains grouped-query head counts", function()
    local q, k, v = randn(1, 4, 5, 8), randn(1, 2, 7, 8), randn(1, 2, 7, 3)
    fails("set enable_gqa", q, k, v)
    assert.are.same({1, 4, 5, 3}, sdpa(q, k, v, {enable_gqa = true}):shape())
    fails("must be a multiple of the number of key/value heads", q, randn(1, 3, 7, 8), randn(1, 3, 7, 3),
      {enable_gqa = true})
  end)

  it("refuses an explicit mask together with is_causal, like torch", function()
    local q, k, v = randn(3, 4), randn(3, 4), randn(3, 2)
    fails("cannot be combined with is_causal", q, k, v,
      {attn_mask = attn.causal_mask(3), attn_mask_kind = "bool", is_causal = true})
  end)

  it("checks dropout_p", function()
    local q, k, v = randn(3, 4), randn(3, 4), randn(3, 2)
    fails("dropout_p must be in [0, 1]", q, k, v, {dropout_p = 1.5})
  end)
end)
