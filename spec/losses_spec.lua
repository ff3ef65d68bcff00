-- SPDX-License-Identifier: MIT
-- attn.F losses and functional helpers against torch 1.13
-- (fixtures from scripts/fixtures/gen_losses.py): the loss value and the
-- input gradient for every option combination.
local attn = require "attn"
local fx = require "support.fixture"
local F = attn.F

-- out and d out / d x for fn(x), with gout upstream for non-scalar outputs
local function run(fn, x, gout)
  x = x:detach():clone():requires_grad_(true)
  local out = fn(x)
  if out:dim() == 0 then out:backward() else out:backward(gout) end
  return out, x.grad
end

local function opts_of(c, L)
  local o = {reduction = c.reduction}
  if c.weight then o.weight = fx.tensor(L.w) end
  if c.ignore then o.ignore_index = L.ignore end
  if c.ls and c.ls > 0 then o.label_smoothing = c.ls end
  return o
end

local function label(c)
  return ("%s %s/%s w=%s ignore=%s %s ls=%s"):format(c.fn, c.layout, c.target, tostring(c.weight),
    tostring(c.ignore), c.reduction, tostring(c.ls))
end

describe("attn.F class losses", function()
  local fix = fx.load("losses_class")

  it("match torch for cross_entropy and nll_loss in every option combination", function()
    local n = 0
    for _, c in ipairs(fix.cases) do
      local L = fix.layouts[c.layout]
      local x = fx.tensor(L.x)
      local target = fx.tensor(c.target == "prob" and L.p or L.t)
      local gout = fx.tensor(L.gout)
      local opts = opts_of(c, L)
      local out, grad
      if c.fn == "nll_loss" then
        local lp = x:log_softmax(x:dim() == 1 and 1 or 2)
        out, grad = run(function(v) return F.nll_loss(v, target, opts) end, lp, gout)
      else
        out, grad = run(function(v) return F.cross_entropy(v, target, opts) end, x, gout)
      end
      fx.assert_close(out, c.out, 1e-5, 1e-5, label(c) .. " out")
      -- the all-ignored "mean" gradients are nan in torch and here alike
      fx.assert_close(grad, c.grad, 1e-5, 1e-4, label(c) .. " grad")
      n = n + 1
    end
    assert.is_true(n >= 150)
  end)

  it("takes tables and numbers as targets", function()
    local L = fix.layouts.nc
    local x, t = fx.tensor(L.x), fx.tensor(L.t)
    local a = F.cross_entropy(x, t):item()
    assert.are.equal(a, F.cross_entropy(x, t:totable()):item())
    local c = fix.layouts.c
    local xc, tc = fx.tensor(c.x), fx.tensor(c.t)
    assert.are.equal(F.cross_entropy(xc, tc):item(), F.cross_entropy(xc, tc:item()):item())
  end)

  it("rejects bad targets and options with Lua numbering", function()
    local x = attn.randn({3, 4})
    assert.has_error(function() F.cross_entropy(x, {1, 2, 5}) end,
      "cross_entropy: target 5 is not a class number in 1..4")
    assert.has_error(function() F.cross_entropy(x, {1, 0, 2}) end,
      "cross_entropy: target 0 is not a class number in 1..4 (ids are 1-based; torch's 0-based ids need +1)")
    assert.has_error(function() F.nll_loss(x, {1, 2.5, 2}) end,
      "nll_loss: target 2.5 is not a class number in 1..4")
    assert.has_no_error(function() F.nll_loss(x, {1, 9, 2}, {ignore_index = 9}) end)
    -- strided int64 targets; the first bad one in row-major order is named
    local cols = attn.tensor({{1.0, 2.0}, {7.0, 3.0}, {2.0, 8.0}}):select(2, 1)
    assert.is_false(cols:is_contiguous())
    assert.has_error(function() F.cross_entropy(x, cols) end, "cross_entropy: target 7 is not a class number in 1..4")
    assert.has_error(function() F.cross_entropy(x, {1, 4, 5}, {ignore_index = 4}) end,
      "cross_entropy: target 5 is not a class number in 1..4 or the ignore_index 4")
    assert.has_error(function() F.cross_entropy(x, {1, 2}) end,
      "cross_entropy: target of shape [2] does not fit input [3,4] (expected [3])")
    assert.has_error(function() F.cross_entropy(x, {1, 2, 3}, {weight = attn.ones(3)}) end,
      "cross_entropy: weight must be 1-d with one entry per class (4), got [3]")
    assert.has_error(function() F.cross_entropy(x, {1, 2, 3}, {reduction = "avg"}) end,
      "cross_entropy: reduction must be \"mean\", \"sum\" or \"none\" (got avg)")
    assert.has_error(function() F.cross_entropy(x, {1, 2, 3}, {label_smoothing = 1.5}) end,
      "cross_entropy: label_smoothing must be between 0.0 and 1.0 (got 1.5)")
    assert.has_error(function() F.cross_entropy(x, x:softmax(2), {ignore_index = 1}) end,
      "cross_entropy: ignore_index is not supported for probability targets")
  end)
end)

describe("attn.F pointwise losses", function()
  local fix = fx.load("losses_pointwise")
  local fns = {
    mse_loss = F.mse_loss, l1_loss = F.l1_loss, smooth_l1_loss = F.smooth_l1_loss, huber_loss = F.huber_loss,
    binary_cross_entropy = F.binary_cross_entropy,
    binary_cross_entropy_with_logits = F.binary_cross_entropy_with_logits, kl_div = F.kl_div,
  }

  it("match torch in value and input gradient", function()
    local seen = {}
    for i, c in ipairs(fix.cases) do
      local opts = {}
      for k, v in pairs(c.opts) do opts[k] = v end
      if c.weight then opts.weight = fx.tensor(c.weight) end
      if c.pos_weight then opts.pos_weight = fx.tensor(c.pos_weight) end
      local t = fx.tensor(c.t)
      local fn = fns[c.fn]
      local out, grad = run(function(v) return fn(v, t, opts) end, fx.tensor(c.x), fx.tensor(c.gout))
      local what = ("case %d %s %s %s"):format(i, c.fn, opts.reduction, c.tag or "")
      fx.assert_close(out, c.out, 1e-5, 1e-5, what .. " out")
      -- saturated binary_cross_entropy has gradients ~1e12 (torch's eps)
      fx.assert_close(grad, c.grad, 1e-5, 1e-4, what .. " grad")
      seen[c.fn] = (seen[c.fn] or 0) + 1
    end
    for name in pairs(fns) do assert.is_true((seen[name] or 0) >= 3, name) end
  end)

  it("binary_cross_entropy checks its ranges", function()
    assert.has_error(function() F.binary_cross_entropy(attn.tensor({0.5, 1.5}), attn.tensor({0.0, 1.0})) end,
      "binary_cross_entropy: all elements of input should be between 0 and 1")
    assert.has_error(function() F.binary_cross_entropy(attn.tensor({0.5, 0.5}), attn.tensor({0.0, 2.0})) end,
      "binary_cross_entropy: all elements of target should be between 0 and 1")
    assert.has_error(function() F.binary_cross_entropy(attn.tensor({0.5, 0.5}), attn.tensor({0.0})) end,
      "binary_cross_entropy: target size [1] differs from input size [2]")
  end)

  it("kl_div accepts batchmean only there", function()
    assert.has_error(function() F.mse_loss(attn.ones(2), attn.ones(2), {reduction = "batchmean"}) end,
      "mse_loss: reduction must be \"mean\", \"sum\" or \"none\" (got batchmean)")
  end)
end)

describe("attn.F helpers", function()
  local fix = fx.load("losses_functional")

  local function leaf(f) return fx.tensor(f):requires_grad_(true) end

  it("linear matches torch with gradients of x, w and b", function()
    for i, c in ipairs(fix.linear) do
      local x, w = leaf(c.x), leaf(c.w)
      local b = c.b and leaf(c.b)
      local y = F.linear(x, w, b)
      fx.assert_close(y, c.out, 1e-5, 1e-5, "linear " .. i)
      y:backward(fx.tensor(c.gout))
      fx.assert_close(x.grad, c.gx, 1e-5, 1e-5, "linear gx " .. i)
      fx.assert_close(w.grad, c.gw, 1e-5, 1e-5, "linear gw " .. i)
      if b then fx.assert_close(b.grad, c.gb, 1e-5, 1e-5, "linear gb " .. i) end
    end
    assert.has_error(function() F.linear(attn.ones({2, 3}), attn.ones({4, 2})) end,
      "linear: input [2,3] does not end in weight's in_features 2 (weight [4,2])")
  end)

  it("layer_norm matches torch with gradients of x, w and b", function()
    for i, c in ipairs(fix.layer_norm) do
      local x = leaf(c.x)
      local w, b = c.w and leaf(c.w), c.b and leaf(c.b)
      local y = F.layer_norm(x, c.ns, w, b, 1e-5)
      fx.assert_close(y, c.out, 1e-5, 1e-5, "layer_norm " .. i)
      y:backward(fx.tensor(c.gout))
      fx.assert_close(x.grad, c.gx, 1e-4, 1e-4, "layer_norm gx " .. i)
      if w then
        fx.assert_close(w.grad, c.gw, 1e-4, 1e-4, "layer_norm gw " .. i)
        fx.assert_close(b.grad, c.gb, 1e-4, 1e-4, "layer_norm gb " .. i)
      end
    end
    assert.has_error(function() F.layer_norm(attn.ones({2, 3}), {2}) end,
      "layer_norm: input [2,3] does not end in normalized_shape [2]")
  end)

  it("normalize matches torch, zero rows included", function()
    for i, c in ipairs(fix.normalize) do
      local x = leaf(c.x)
      local y = F.normalize(x, c.p, c.dim)
      fx.assert_close(y, c.out, 1e-5, 1e-5, "normalize " .. i)
      y:backward(fx.tensor(c.gout))
      fx.assert_close(x.grad, c.gx, 1e-4, 1e-4, "normalize gx " .. i)
    end
  end)

  it("dropout draws torch's mask from the seeded stream", function()
    for i, c in ipairs(fix.dropout) do
      attn.manual_seed(c.seed)
      local y = F.dropout(fx.tensor(c.x), c.p, true)
      fx.assert_close(y, c.out, 0, 1e-6, "dropout " .. i)
      fx.assert_equal(attn.rand(3), c.after, "dropout stream " .. i)
    end
    local x = attn.randn({3})
    assert.are.equal(x, F.dropout(x, 0.5, false))
    assert.are.equal(x, F.dropout(x, 0))
    fx.assert_equal(F.dropout(x, 1), {shape = {3}, data = {0, 0, 0}})
    assert.has_error(function() F.dropout(x, 1.5) end, "dropout: probability has to be between 0 and 1, but got 1.5")
  end)

  it("dropout's gradient is the mask", function()
    attn.manual_seed(5)
    local x = attn.ones({4, 6}):requires_grad_(true)
    local y = F.dropout(x, 0.25)
    y:sum():backward()
    fx.assert_equal(x.grad, {shape = {4, 6}, data = fx.flat(y)})
  end)

  it("wraps activations, softmax and one_hot", function()
    local x = attn.tensor({-1.0, 0.0, 2.0})
    fx.assert_equal(F.relu(x), {shape = {3}, data = {0, 0, 2}})
    fx.assert_equal(F.sigmoid(x), {shape = {3}, data = fx.flat(x:sigmoid())})
    fx.assert_equal(F.tanh(x), {shape = {3}, data = fx.flat(x:tanh())})
    fx.assert_equal(F.silu(x), {shape = {3}, data = fx.flat(x:silu())})
    fx.assert_equal(F.gelu(x, "tanh"), {shape = {3}, data = fx.flat(x:gelu("tanh"))})
    fx.assert_equal(F.softmax(x, 1), {shape = {3}, data = fx.flat(x:softmax(1))})
    fx.assert_equal(F.log_softmax(x, -1), {shape = {3}, data = fx.flat(x:log_softmax(1))})
    assert.has_error(function() F.softmax(x) end, "softmax: dim is required")
    fx.assert_equal(F.one_hot(attn.tensor({2.0, 1.0}), 3), {shape = {2, 3}, data = {0, 1, 0, 1, 0, 0}})
  end)
end)
