-- SPDX-License-Identifier: MIT
-- attn.nn's loss modules (lua/attn/losses.lua) against torch 1.13
-- (fixtures from scripts/fixtures/gen_loss_modules.py): every option
-- combined (weight + ignore_index + label_smoothing + reduction, batchmean
-- and log_target, beta, pos_weight with weight), the loss and the
-- gradients of input and target, and the state_dict keys (weight and
-- pos_weight are buffers, as in torch).
local attn = require "attn"
local fx = require "support.fixture"
local nn = attn.nn

local fix = fx.load("loss_modules")

local function label(c, i)
  local parts = {}
  for k, v in pairs(c.opts) do parts[#parts + 1] = k .. "=" .. (attn.is_tensor(v) and "T" or tostring(v)) end
  table.sort(parts)
  return ("case %d %s(%s)"):format(i, c.cls, table.concat(parts, ","))
end

describe("nn loss modules against torch", function()
  it("match torch's loss and gradients for every option combination", function()
    local n = 0
    for i, c in ipairs(fix.cases) do
      local opts = {}
      for k, v in pairs(c.opts) do
        opts[k] = (type(v) == "table" and v.shape) and fx.tensor(v) or v
      end
      local what = label(c, i)
      local m = nn[c.cls](opts)
      local x = fx.tensor(c.input):requires_grad_(true)
      local t = fx.tensor(c.target)
      if c.grad_target then t:requires_grad_(true) end
      local out = m(x, t)
      fx.assert_close(out, c.out, 1e-5, 1e-5, what .. " out")
      if out:dim() == 0 then out:backward() else out:backward(fx.tensor(c.gout)) end
      fx.assert_close(x.grad, c.grad_input, 1e-5, 1e-4, what .. " input grad")
      if c.grad_target then
        -- torch 1.13's kl_div is xlogy(t, t) - t * x, whose target gradient
        -- is NaN where t = 0 (log 0 + 0/0); attn's is finite there: those
        -- elements are left out
        local g = {shape = c.grad_target.shape, data = {}}
        local got = fx.flat(t.grad)
        for k, v in ipairs(c.grad_target.data) do
          if v ~= v and c.cls == "KLDivLoss" then got[k] = 0 / 0 end
          g.data[k] = v
        end
        fx.assert_close(attn.tensor(got):reshape(t.grad:shape()), g, 1e-5, 1e-4, what .. " target grad")
      end
      assert.are.same(c.keys, nn.state_dict_keys(m:state_dict()), what .. " state_dict keys")
      n = n + 1
    end
    assert.is_true(n >= 100)
  end)

  it("take the weight as the first argument, as torch's positional form", function()
    local w = attn.tensor({1, 2, 3})
    local x, t = attn.randn(4, 3), attn.tensor({1, 2, 3, 2})
    local a = nn.CrossEntropyLoss(w)(x, t):item()
    local b = nn.CrossEntropyLoss({weight = w})(x, t):item()
    assert.are.equal(a, b)
    local c = nn.NLLLoss(w, {reduction = "sum"})(x:log_softmax(2), t):item()
    assert.are.equal(attn.F.nll_loss(x:log_softmax(2), t, {weight = w, reduction = "sum"}):item(), c)
  end)

  it("skip -100 targets by default, as torch does", function()
    local x = attn.randn(3, 4)
    local a = nn.CrossEntropyLoss()(x, attn.tensor({2, -100, 4})):item()
    local b = nn.CrossEntropyLoss()(x:narrow(1, 1, 1), attn.tensor({2})):item()
    local c = nn.CrossEntropyLoss()(x:narrow(1, 3, 1), attn.tensor({4})):item()
    assert.is_true(math.abs(a - (b + c) / 2) < 1e-6)
    -- an ignore_index that is a class number is 1-based like the targets
    local d = nn.CrossEntropyLoss({ignore_index = 1})(x, attn.tensor({2, 1, 4})):item()
    assert.is_true(math.abs(a - d) < 1e-6)
    assert.are.equal(-100, nn.NLLLoss().ignore_index)
  end)

  it("map torch's deprecated size_average and reduce to reduction", function()
    assert.are.equal("sum", nn.MSELoss({size_average = false}).reduction)
    assert.are.equal("none", nn.L1Loss({reduce = false}).reduction)
    assert.are.equal("mean", nn.KLDivLoss({size_average = true, reduce = true}).reduction)
  end)

  it("raise errors at the caller's line naming the option", function()
    local ok, err = pcall(function() local m = nn.CrossEntropyLoss({label_smothing = 0.1}); return m end)
    assert.is_false(ok)
    assert.matches("loss_modules_spec.lua:%d+: CrossEntropyLoss: unknown option 'label_smothing'", err)
    ok, err = pcall(function() local m = nn.KLDivLoss({reduction = "avg"}); return m end)
    assert.matches("loss_modules_spec.lua:%d+: KLDivLoss: reduction must be \"mean\", \"sum\", \"batchmean\" or \"none\"",
      err)
    ok, err = pcall(function() local m = nn.MSELoss({reduction = "batchmean"}); return m end)
    assert.matches("MSELoss: reduction must be \"mean\", \"sum\" or \"none\"", err)
    ok, err = pcall(function() local m = nn.SmoothL1Loss({beta = -1}); return m end)
    assert.matches("loss_modules_spec.lua:%d+: SmoothL1Loss: beta must be a non%-negative number", err)
    local loss = nn.CrossEntropyLoss()
    ok, err = pcall(function() local l = loss(attn.randn(2, 3), attn.tensor({1, 4})); return l end)
    assert.matches("loss_modules_spec.lua:%d+: cross_entropy: target 4 is not a class number in 1..3", err)
    ok, err = pcall(function() local l = nn.NLLLoss({ignore_index = 2})(attn.randn(2, 3), attn.tensor({0, 2})); return l end)
    assert.matches("loss_modules_spec.lua:%d+: nll_loss: target 0 is not a class number in 1..3 or the ignore_index 2", err)
  end)

  it("pass gradchecks", function()
    attn.manual_seed(3)
    local x = attn.randn(3, 4):requires_grad_(true)
    local t = attn.tensor({1, 3, 4})
    local w = attn.rand(4) + 0.5
    local ce = nn.CrossEntropyLoss({weight = w, ignore_index = 3, label_smoothing = 0.2})
    assert.is_true(attn.gradcheck(function(v) return ce(v, t) end, {x}))
    local kl = nn.KLDivLoss({reduction = "batchmean", log_target = true})
    local y = attn.randn(3, 4):log_softmax(2):requires_grad_(true)
    local lp = attn.randn(3, 4):log_softmax(2):detach():requires_grad_(true)
    assert.is_true(attn.gradcheck(function(a, b) return kl(a, b) end, {lp, y}))
    local bce = nn.BCEWithLogitsLoss({weight = w, pos_weight = attn.rand(4) + 0.5})
    local tt = attn.rand(3, 4)
    assert.is_true(attn.gradcheck(function(v) return bce(v, tt) end, {x}))
    local sl = nn.SmoothL1Loss({beta = 0.5, reduction = "sum"})
    local u = (attn.randn(3, 4) * 2):requires_grad_(true)
    assert.is_true(attn.gradcheck(function(v) return sl(v, attn.zeros(3, 4) + 0.1234) end, {u}))
  end)
end)
