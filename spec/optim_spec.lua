-- SPDX-License-Identifier: MIT
-- attn.optim against torch 1.13 (fixtures from scripts/fixtures/gen_optim.py):
-- optimiser steps for every option combination, multi-step runs with
-- changing grads, parameter groups, state_dict round trips, lr schedules
-- and clip_grad_norm_.
local attn = require "attn"
local fx = require "support.fixture"
local optim = attn.optim

local steps = fx.load("optim_steps")
local sched = fx.load("optim_sched")

-- Fresh leaf parameters from the fixture, plus one that never gets a grad.
local function params()
  local ps = {}
  for i, f in ipairs(steps.params) do ps[i] = fx.tensor(f):requires_grad_(true) end
  return ps, attn.tensor({0.5, -0.25}):requires_grad_(true)
end

local function set_grads(ps, gs)
  for i, p in ipairs(ps) do p.grad = fx.tensor(gs[i]) end
end

local function describe_opts(o)
  local keys = {}
  for k in pairs(o) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    local v = o[k]
    if type(v) == "table" then v = "{" .. table.concat(v, ",") .. "}" end
    parts[#parts + 1] = k .. "=" .. tostring(v)
  end
  return table.concat(parts, " ")
end

describe("attn.optim optimisers", function()
  it("take torch's steps for every option combination", function()
    local counts = {}
    for _, c in ipairs(steps.cases) do
      local ps, idle = params()
      local opt = optim[c.opt]({ps[1], ps[2], idle}, c.opts)
      for k = 1, 3 do
        set_grads(ps, steps.grads[k])
        opt:step()
        for i = 1, 2 do
          fx.assert_close(ps[i], c.after[k][i], 1e-6, 0,
            ("%s %s step %d param %d"):format(c.opt, describe_opts(c.opts), k, i))
        end
      end
      fx.assert_equal(idle, {shape = {2}, data = {0.5, -0.25}}, "grad-less parameter")
      assert.is_nil(opt.state[idle])
      counts[c.opt] = (counts[c.opt] or 0) + 1
    end
    assert.are.same({SGD = 16, Adam = 9, AdamW = 9, RMSprop = 32}, counts)
  end)

  it("follow torch over 20 Adam/AdamW steps with changing grads", function()
    for _, c in ipairs(steps.multistep) do
      local ps = params()
      local opt = optim[c.opt](ps, c.opts)
      local j = 1
      for k = 1, 20 do
        set_grads(ps, steps.steps20[k])
        opt:step()
        if k == c.at[j] then
          for i = 1, 2 do
            fx.assert_close(ps[i], c.after[j][i], 1e-6, 1e-6,
              ("%s %s step %d param %d"):format(c.opt, describe_opts(c.opts), k, i))
          end
          j = j + 1
        end
      end
      assert.are.equal(4, j)
      assert.are.equal(20, opt.state[ps[1]].step)
    end
  end)

  it("Adam and AdamW take the same steps bit for bit fused (contiguous) and composed (strided)", function()
    -- contiguous float32 parameters take core._adam_update's single pass; a
    -- transposed one falls back to the composed tensor ops
    for ci, cfg in ipairs({{optim.Adam, {}}, {optim.AdamW, {}}, {optim.Adam, {amsgrad = true, weight_decay = 0.1}},
      {optim.AdamW, {amsgrad = true, maximize = true, lr = 0.01, betas = {0.8, 0.99}, eps = 1e-6}}}) do
      attn.manual_seed(7)
      local w0 = attn.randn(5, 7)
      local a = w0:clone():requires_grad_()
      local b = w0:t():contiguous():t():requires_grad_() -- same values, strided
      assert.is_false(b:is_contiguous())
      local oa, ob = cfg[1]({a}, cfg[2]), cfg[1]({b}, cfg[2])
      for step = 1, 5 do
        local g = attn.randn(5, 7) * step
        if step == 3 then g[1][1] = 0 / 0 end -- a NaN travels the same way
        a.grad, b.grad = g:clone(), g:t():contiguous():t()
        oa:step()
        ob:step()
        local sa, sb = oa.state[a], ob.state[b]
        local pairs_ = {{a, b}, {sa.exp_avg, sb.exp_avg}, {sa.exp_avg_sq, sb.exp_avg_sq},
          {sa.max_exp_avg_sq, sb.max_exp_avg_sq}}
        for i, pair in ipairs(pairs_) do
          local x, y = pair[1], pair[2]
          if x ~= nil then
            local same = attn.eq(x, y):logical_or(attn.isnan(x):logical_and(attn.isnan(y))):all():item()
            assert(same, ("config %d, step %d: %s differs"):format(ci, step,
              ({"p", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"})[i]))
          end
        end
      end
    end
  end)

  it("apply per-group options", function()
    local ps = params()
    local opt = optim.Adam({{params = {ps[1]}}, {params = {ps[2]}, lr = 0.1, weight_decay = 0.2}}, {lr = 0.01})
    assert.are.equal(0.01, opt.param_groups[1].lr)
    assert.are.equal(0.1, opt.param_groups[2].lr)
    assert.are.equal(0, opt.param_groups[1].weight_decay)
    assert.are.same({0.9, 0.999}, opt.param_groups[2].betas)
    for k = 1, 3 do
      set_grads(ps, steps.grads[k])
      opt:step()
    end
    fx.assert_close(ps[1], steps.groups.after[1], 1e-6, 0, "group 1")
    fx.assert_close(ps[2], steps.groups.after[2], 1e-6, 0, "group 2")
  end)

  it("resume from state_dict exactly where they left off", function()
    for _, name in ipairs({"SGD", "Adam", "AdamW", "RMSprop"}) do
      -- the case with the most state of each optimiser
      local case
      for _, c in ipairs(steps.cases) do
        if c.opt == name and (c.opts.momentum or 0) > 0 or c.opt == name and c.opts.amsgrad then case = c end
      end
      if name == "RMSprop" then
        for _, c in ipairs(steps.cases) do
          if c.opt == name and c.opts.centered and c.opts.momentum > 0 then case = c end
        end
      end
      local ps = params()
      local a = optim[name](ps, case.opts)
      set_grads(ps, steps.grads[1])
      a:step()
      local sd = a:state_dict()
      assert.are.same({1, 2}, sd.param_groups[1].params)
      assert.are.equal(case.opts.lr, sd.param_groups[1].lr)
      -- a new optimiser over copies of the parameters, other settings
      local qs = {ps[1]:detach():clone():requires_grad_(true), ps[2]:detach():clone():requires_grad_(true)}
      local b = optim[name](qs, {lr = 0.5})
      b:load_state_dict(sd)
      assert.are.equal(case.opts.lr, b.param_groups[1].lr)
      -- loading copies: stepping a does not move b's state
      for k = 2, 3 do
        set_grads(ps, steps.grads[k])
        a:step()
      end
      for k = 2, 3 do
        set_grads(qs, steps.grads[k])
        b:step()
        for i = 1, 2 do
          fx.assert_close(qs[i], case.after[k][i], 1e-6, 0, ("%s resumed step %d param %d"):format(name, k, i))
        end
      end
    end
  end)

  it("check state_dict against the optimiser", function()
    local ps = params()
    local a = optim.Adam(ps)
    local b = optim.Adam({ps[1]})
    assert.has_error(function() b:load_state_dict(a:state_dict()) end,
      "Adam: loaded parameter group 1 has 2 parameters, the optimizer's has 1")
  end)

  it("zero_grad drops grads, or zeroes them in place", function()
    local ps = params()
    local opt = optim.SGD(ps, {lr = 0.1})
    set_grads(ps, steps.grads[1])
    opt:zero_grad(false)
    fx.assert_equal(ps[2].grad, {shape = {5}, data = {0, 0, 0, 0, 0}})
    opt:zero_grad()
    assert.is_nil(ps[1].grad)
    assert.is_nil(ps[2].grad)
    opt:step() -- nothing to do
    fx.assert_equal(ps[1], steps.params[1])
  end)

  it("run a closure with grad enabled and return its loss", function()
    local w = attn.tensor({1.0, -2.0}):requires_grad_(true)
    local opt = optim.SGD({w}, {lr = 0.25})
    local loss = attn.no_grad(function()
      return opt:step(function()
        opt:zero_grad()
        local l = (w * w):sum()
        l:backward()
        return l
      end)
    end)
    assert.are.equal(5, loss:item())
    -- w - 0.25 * 2w = 0.5 w
    fx.assert_equal(w, {shape = {2}, data = {0.5, -1.0}})
  end)

  it("validate their options like torch", function()
    local ps = params()
    assert.has_error(function() optim.SGD(ps) end,
      "SGD: parameter group didn't specify a value of required option lr")
    assert.has_error(function() optim.SGD(ps, {lr = -1}) end, "SGD: Invalid learning rate: -1")
    assert.has_error(function() optim.SGD(ps, {lr = 0.1, nesterov = true}) end,
      "SGD: Nesterov momentum requires a momentum and zero dampening")
    assert.has_error(function() optim.Adam(ps, {betas = {1.0, 0.9}}) end,
      "Adam: Invalid beta parameter at index 1: 1.0")
    assert.has_error(function() optim.Adam(ps, {lrr = 1}) end,
      "Adam: unknown option 'lrr' (did you mean 'lr'?); valid options: amsgrad, betas, eps, lr, maximize, weight_decay")
    assert.has_error(function() optim.RMSprop(ps, {alpha = -0.5}) end, "RMSprop: Invalid alpha value: -0.5")
    assert.has_error(function() optim.Adam({ps[1] * 2}) end,
      "Adam: params[1] is not a leaf tensor; cannot optimize it")
    assert.has_error(function() optim.Adam({{params = {ps[1]}}, {params = {ps[1]}}}) end,
      "Adam: params[1] appears in more than one parameter group")
    assert.has_error(function() optim.Adam({}) end,
      "Adam: params must be a non-empty list of tensors or of parameter groups")
  end)
end)

describe("attn.optim schedulers", function()
  local function check(seq, expected, what)
    assert.are.equal(#expected, #seq, what)
    for k, lrs in ipairs(expected) do
      assert.are.equal(#lrs, #seq[k], what)
      for g, e in ipairs(lrs) do
        local got = seq[k][g]
        assert(math.abs(got - e) <= 1e-8 * math.abs(e) + 1e-15,
          ("%s: step %d group %d lr %.17g, expected %.9g"):format(what, k - 1, g, got, e))
      end
    end
  end

  -- get_last_lr after construction and after each of n steps
  local function sequence(make, lrs, n)
    local groups = {}
    for i, lr in ipairs(lrs) do groups[i] = {params = {attn.zeros(2):requires_grad_(true)}, lr = lr} end
    local opt = optim.SGD(groups, {lr = lrs[1]})
    local s = make(opt)
    local seq = {s:get_last_lr()}
    for _ = 1, n or 20 do
      opt:step()
      s:step()
      seq[#seq + 1] = s:get_last_lr()
    end
    return seq, opt, s
  end

  it("StepLR matches torch", function()
    check(sequence(function(o) return optim.StepLR(o, 3, 0.5) end, {0.1}), sched.sched.step, "StepLR")
    check(sequence(function(o) return optim.StepLR(o, 4, 0.3) end, {0.1, 0.02}), sched.sched.step_groups,
      "StepLR groups")
  end)

  it("LambdaLR matches torch with one function or one per group", function()
    check(sequence(function(o) return optim.LambdaLR(o, function(e) return 0.95 ^ e end) end, {0.05}),
      sched.sched.lambda, "LambdaLR")
    check(sequence(function(o)
      return optim.LambdaLR(o, {function(e) return 1 / (e + 1) end, function(e) return 0.5 + e % 3 end})
    end, {0.1, 0.2}), sched.sched.lambda_list, "LambdaLR list")
    assert.has_error(function()
      sequence(function(o) return optim.LambdaLR(o, {function() return 1 end}) end, {0.1, 0.2})
    end, "LambdaLR: expected 2 lr functions, but got 1")
  end)

  it("NoamLR is the Annotated Transformer's warm-up schedule", function()
    check(sequence(function(o) return optim.NoamLR(o, {d_model = 16, warmup = 5, factor = 2}) end, {1.0}),
      sched.sched.noam, "NoamLR")
    assert.are.equal(optim.noam_rate(1, 512, 1, 4000), optim.noam_rate(0, 512, 1, 4000))
  end)

  it("record initial_lr and resume from last_epoch like torch", function()
    local _, opt, s = sequence(function(o) return optim.StepLR(o, 2, 0.1) end, {1.0}, 5)
    assert.are.equal(1.0, opt.param_groups[1].initial_lr)
    assert.are.same({1.0}, s.base_lrs)
    assert.are.equal(5, s.last_epoch)
    -- a new scheduler resuming at epoch 5 keeps the base rate
    local s2 = optim.StepLR(opt, 2, 0.1, 5)
    assert.are.equal(6, s2.last_epoch)
    -- an epoch jump uses the closed form: 1.0 * 0.1 ^ (9 // 2)
    s2:step(9)
    assert(math.abs(s2:get_last_lr()[1] - 1e-4) < 1e-18)
    local fresh = optim.SGD({attn.zeros(1):requires_grad_(true)}, {lr = 0.1})
    assert.has_error(function() optim.StepLR(fresh, 2, 0.1, 3) end,
      "StepLR: param 'initial_lr' is not specified in param_groups[1] when resuming an optimizer")
    -- state_dict round trip
    local s3 = optim.StepLR(fresh, 2, 0.5)
    s3:load_state_dict(s2:state_dict())
    assert.are.equal(s2.last_epoch, s3.last_epoch)
    assert.are.same(s2:get_last_lr(), s3:get_last_lr())
  end)
end)

describe("attn.optim.clip_grad_norm_", function()
  it("matches torch for 2-, 1-, 3- and inf-norms", function()
    for i, c in ipairs(sched.clip) do
      local ps = {attn.zeros({3, 4}):requires_grad_(true), attn.zeros(5):requires_grad_(true),
        attn.zeros(2):requires_grad_(true)}
      ps[1].grad = fx.tensor(sched.clip_grads[1])
      ps[2].grad = fx.tensor(sched.clip_grads[2])
      local norm_type = c.norm_type == "inf" and math.huge or c.norm_type
      local total = optim.clip_grad_norm_(ps, c.max_norm, norm_type)
      assert.are.equal(0, total:dim())
      fx.assert_close(total, c.total, 1e-5, 1e-6, "total " .. i)
      fx.assert_close(ps[1].grad, c.grads[1], 1e-6, 1e-6, "grad 1 case " .. i)
      fx.assert_close(ps[2].grad, c.grads[2], 1e-6, 1e-6, "grad 2 case " .. i)
      assert.is_nil(ps[3].grad)
    end
  end)

  it("returns 0 without grads and takes a single tensor", function()
    local p = attn.ones(3):requires_grad_(true)
    assert.are.equal(0, optim.clip_grad_norm_({p}, 1.0):item())
    p.grad = attn.tensor({3.0, 4.0, 0.0})
    local total = optim.clip_grad_norm_(p, 1.0, "inf")
    assert.are.equal(4, total:item())
    fx.assert_close(p.grad, {shape = {3}, data = {0.75, 1, 0}}, 1e-6)
    p.grad = attn.tensor({0.0 / 0.0, 1.0, 0.0})
    assert.has_error(function() optim.clip_grad_norm_(p, 1.0, 2, true) end)
  end)

  it("clip_grad_value_ clamps in place", function()
    local p = attn.ones(3):requires_grad_(true)
    p.grad = attn.tensor({-3.0, 0.5, 2.0})
    optim.clip_grad_value_({p}, 1)
    fx.assert_equal(p.grad, {shape = {3}, data = {-1, 0.5, 1}})
  end)
end)
