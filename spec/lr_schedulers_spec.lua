-- SPDX-License-Identifier: MIT
-- attn.optim's learning-rate schedulers against torch 1.13 step by step
-- (fixtures from scripts/fixtures/gen_lr_schedulers.py): every scheduler is
-- built twice, in torch's positional order and with a trailing options
-- table, and both must give torch's whole lr sequence (and OneCycleLR's
-- momentum).  Also the optimizers' and clip_grad_norm_'s calling forms.
local attn = require "attn"
local fx = require "support.fixture"
local optim = attn.optim
local nn = attn.nn

local F = fx.load("lr_schedulers")
-- Measured: 0 (bit for bit) on every case.  Schedulers whose formulas use
-- only + - * / are compared exactly (the chainable form differs from the
-- closed form by ~1e-16, so this catches a closed form); those calling
-- cos or pow get 1e-12 relative, room for another libm.
local RTOL = tonumber(os.getenv("H3_RTOL") or "") or 1e-12
local EXACT = {StepLR = true, ConstantLR = true, LinearLR = true, ExponentialLR = true, MultiplicativeLR = true,
  ChainedScheduler = true, ReduceLROnPlateau = true}
local rtol = RTOL

local LAMBDAS = {
  mult = function(e) return 0.9 + 0.01 * (e % 3) end,
  inv = function(e) return 1 / (e + 1) end,
}

local function make_opt(c)
  local groups = {}
  for i, lr in ipairs(c.lrs) do groups[i] = {params = {attn.zeros(2):requires_grad_(true)}, lr = lr} end
  if c.opt == "SGD" then return optim.SGD(groups, c.lrs[1], 0.9) end
  return optim.Adam(groups, c.lrs[1])
end

-- kw with the fixture's names resolved (lr_lambda, child schedulers)
local build
local function resolve(kw, opt, form)
  local r = {}
  for k, v in pairs(kw) do r[k] = v end
  if type(r.lr_lambda) == "string" then r.lr_lambda = LAMBDAS[r.lr_lambda] end
  if r.schedulers then
    local list = {}
    for i, ch in ipairs(r.schedulers) do list[i] = build(ch.sched, ch.order, ch.kw, opt, form) end
    r.schedulers = list
  end
  return r
end

-- form "positional": torch's order (nil in the gaps); "options": one table
function build(name, order, kw, opt, form)
  local r = resolve(kw, opt, form)
  local cls = optim[name]
  if form == "options" then
    if name == "ChainedScheduler" then return cls(r) end
    return cls(opt, r)
  end
  local args = {}
  for i, k in ipairs(order) do args[i] = r[k] end
  if name == "ChainedScheduler" then return cls(table.unpack(args, 1, #order)) end
  return cls(opt, table.unpack(args, 1, #order))
end

local function momenta(opt)
  local m = {}
  for i, g in ipairs(opt.param_groups) do m[i] = g.betas and g.betas[1] or g.momentum end
  return m
end

local maxrel = 0
local function close(got, want, what)
  local d = math.abs(got - want)
  local rel = d / math.max(math.abs(want), 1e-300)
  if want == 0 then rel = d end
  if rel > maxrel then maxrel = rel end
  assert(rel <= rtol, ("%s: got %.17g, torch %.17g"):format(what, got, want))
end

local function check_row(got, want, what)
  assert.are.equal(#want, #got, what .. ": number of groups")
  for g = 1, #want do close(got[g], want[g], ("%s group %d"):format(what, g)) end
end

local function run(c, form)
  rtol = EXACT[c.sched] and 0 or RTOL
  local opt = make_opt(c)
  local s = build(c.sched, c.order, c.kw, opt, form)
  local what = ("%s (%s form)"):format(c.name, form)
  check_row(s:get_last_lr(), c.seq[1], what .. " after construction")
  if c.momentum then check_row(momenta(opt), c.momentum[1], what .. " momentum after construction") end
  for i = 1, c.steps do
    opt:step()
    if c.metrics then s:step(c.metrics[i])
    elseif c.epochs then s:step(c.epochs[i])
    else s:step() end
    local lrs = {}
    for g, grp in ipairs(opt.param_groups) do lrs[g] = grp.lr end
    check_row(lrs, c.seq[i + 1], ("%s step %d"):format(what, i))
    check_row(s:get_last_lr(), c.seq[i + 1], ("%s get_last_lr step %d"):format(what, i))
    if c.momentum then check_row(momenta(opt), c.momentum[i + 1], ("%s momentum step %d"):format(what, i)) end
  end
  return s, opt
end

describe("attn.optim lr schedulers against torch 1.13", function()
  it("give torch's lr sequences step by step, positionally and with an options table", function()
    local n, steps, seen = 0, 0, {}
    for _, c in ipairs(F.cases) do
      for _, form in ipairs({"positional", "options"}) do
        run(c, form)
        n = n + 1
        steps = steps + c.steps
      end
      seen[c.sched] = true
    end
    for _, name in ipairs({"StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR", "MultiplicativeLR",
      "PolynomialLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "OneCycleLR", "SequentialLR", "ChainedScheduler",
      "ReduceLROnPlateau"}) do
      assert.is_true(seen[name], name .. " has fixture cases")
    end
    assert.are.equal(2 * 28, n)
    print(("\n  %d scheduler runs, %d steps, max relative difference from torch %.3g"):format(n, steps, maxrel))
  end)

  it("OneCycleLR raises past total_steps with torch's message", function()
    local opt = optim.SGD({attn.zeros(2):requires_grad_(true)}, 0.1, 0.9)
    local s = optim.OneCycleLR(opt, 0.1, 3)
    local msg
    for _ = 1, 5 do
      local ok, err = pcall(s.step, s)
      if not ok then msg = tostring(err) break end
    end
    assert.is_truthy(msg and msg:lower():find(F.onecycle_error:lower(), 1, true), msg)
  end)

  it("OneCycleLR needs total_steps or epochs and steps_per_epoch, and a momentum to cycle", function()
    local opt = optim.SGD({attn.zeros(2):requires_grad_(true)}, 0.1)
    assert.has_error(function() optim.OneCycleLR(opt, 0.1) end)
    assert.has_error(function() optim.OneCycleLR(opt, {max_lr = 0.1, epochs = 2}) end)
    assert.has_error(function() optim.OneCycleLR(opt, {max_lr = 0.1, total_steps = 0}) end)
    assert.has_error(function() optim.OneCycleLR(opt, {max_lr = 0.1, total_steps = 5, anneal_strategy = "x"}) end)
    local s = optim.OneCycleLR(opt, {max_lr = 0.1, epochs = 2, steps_per_epoch = 3})
    assert.are.equal(6, s.total_steps)
  end)

  it("state_dict / load_state_dict resume a schedule where it was", function()
    rtol = RTOL
    for _, c in ipairs(F.cases) do
      if c.sched ~= "ReduceLROnPlateau" and not c.epochs and c.steps >= 10 then
        local opt = make_opt(c)
        local s = build(c.sched, c.order, c.kw, opt, "options")
        for _ = 1, 6 do opt:step(); s:step() end
        local sd = s:state_dict()
        local opt2 = make_opt(c)
        local s2 = build(c.sched, c.order, c.kw, opt2, "options")
        s2:load_state_dict(sd)
        for i, g in ipairs(opt2.param_groups) do g.lr = opt.param_groups[i].lr end
        for i = 7, c.steps do
          opt2:step(); s2:step()
          check_row(s2:get_last_lr(), c.seq[i + 1], ("%s resumed step %d"):format(c.name, i))
        end
      end
    end
  end)

  it("ReduceLROnPlateau takes a 0-d tensor metric and refuses a string", function()
    local opt = optim.SGD({attn.zeros(2):requires_grad_(true)}, 0.1)
    local s = optim.ReduceLROnPlateau(opt, {patience = 0})
    s:step(attn.tensor(1.0))
    s:step(attn.tensor(2.0))
    assert.are.equal(0.1 * 0.1, s:get_last_lr()[1])
    assert.has_error(function() s:step("x") end)
  end)

  it("raise on unknown options, listing the valid ones", function()
    local opt = optim.SGD({attn.zeros(2):requires_grad_(true)}, 0.1)
    local ok, err = pcall(optim.CosineAnnealingLR, opt, {T_max = 3, eta_mn = 0})
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("unknown option 'eta_mn'", 1, true), tostring(err))
    assert.is_truthy(tostring(err):find("eta_min", 1, true))
    assert.has_error(function() optim.StepLR(opt, 2, {step_size = 2}) end)
    assert.has_error(function() optim.StepLR(opt, 2, 0.5, -1, 7) end)
    assert.has_error(function() optim.SequentialLR(opt, {optim.StepLR(opt, 2)}, {3}) end)
  end)
end)

describe("attn.optim calling convention", function()
  local function params()
    local p = nn.Parameter(attn.tensor({1.0, -2.0, 3.0}))
    p.grad = attn.tensor({0.5, 0.25, -1.0})
    return {p}
  end

  it("optimizers take torch's positional order and a trailing options table alike", function()
    local pairs_ = {
      {function(ps) return optim.SGD(ps, 0.1) end, function(ps) return optim.SGD(ps, {lr = 0.1}) end},
      {function(ps) return optim.SGD(ps, 0.1, 0.9, 0, 0.01, true) end,
       function(ps) return optim.SGD(ps, {lr = 0.1, momentum = 0.9, weight_decay = 0.01, nesterov = true}) end},
      {function(ps) return optim.SGD(ps, 0.1, 0.9, {maximize = true}) end,
       function(ps) return optim.SGD(ps, {lr = 0.1, momentum = 0.9, maximize = true}) end},
      {function(ps) return optim.Adam(ps, 1e-2, {0.8, 0.99}) end,
       function(ps) return optim.Adam(ps, {lr = 1e-2, betas = {0.8, 0.99}}) end},
      {function(ps) return optim.AdamW(ps, 1e-2, {0.8, 0.99}, 1e-6, 0.1, true) end,
       function(ps) return optim.AdamW(ps, {lr = 1e-2, betas = {0.8, 0.99}, eps = 1e-6, weight_decay = 0.1,
         amsgrad = true}) end},
      {function(ps) return optim.RMSprop(ps, 1e-2, 0.9, 1e-8, 0, 0.5, true) end,
       function(ps) return optim.RMSprop(ps, {lr = 1e-2, alpha = 0.9, momentum = 0.5, centered = true}) end},
    }
    for i, pr in ipairs(pairs_) do
      local a, b = params(), params()
      local oa, ob = pr[1](a), pr[2](b)
      for k, v in pairs(oa.param_groups[1]) do
        if k ~= "params" then assert.are.same(v, ob.param_groups[1][k], ("case %d option %s"):format(i, k)) end
      end
      oa:step(); ob:step()
      assert.are.same(a[1]:totable(), b[1]:totable())
    end
  end)

  it("optimizers take torch's parameter groups", function()
    local p1, p2 = nn.Parameter(attn.ones(2)), nn.Parameter(attn.ones(3))
    local o = optim.AdamW({{params = {p1}, weight_decay = 0}, {params = {p2}, lr = 0.5}}, 0.01, {weight_decay = 0.2})
    assert.are.equal(0.01, o.param_groups[1].lr)
    assert.are.equal(0, o.param_groups[1].weight_decay)
    assert.are.equal(0.5, o.param_groups[2].lr)
    assert.are.equal(0.2, o.param_groups[2].weight_decay)
  end)

  it("optimizers refuse unknown keys (listing the valid ones), duplicates and extra positionals", function()
    local ok, err = pcall(optim.SGD, params(), 0.1, {momentun = 0.9})
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("did you mean 'momentum'", 1, true), tostring(err))
    assert.is_truthy(tostring(err):find("nesterov", 1, true), tostring(err))
    assert.has_error(function() optim.SGD(params(), 0.1, {lr = 0.2}) end)
    assert.has_error(function() optim.SGD(params(), 0.1, 0, 0, 0, false, true) end)
    assert.has_error(function() optim.SGD(params(), "x") end)
    assert.has_error(function() optim.SGD(params()) end)
  end)

  it("StepLR and friends take an options table", function()
    local o = optim.SGD(params(), 0.1)
    local s = optim.StepLR(o, {step_size = 2, gamma = 0.5})
    for _ = 1, 4 do o:step(); s:step() end
    assert.are.equal(0.1 * 0.25, s:get_last_lr()[1])
    local o2 = optim.SGD(params(), 1.0)
    local l = optim.LambdaLR(o2, {lr_lambda = function(e) return 0.5 ^ e end})
    o2:step(); l:step()
    assert.are.equal(0.5, l:get_last_lr()[1])
  end)

  it("clip_grad_norm_ takes norm_type positionally, in options, and as \"inf\"", function()
    for i, c in ipairs(F.clip) do
      for _, form in ipairs({"positional", "options", "string"}) do
        local ps = {attn.zeros({3, 4}):requires_grad_(true), attn.zeros(5):requires_grad_(true),
          attn.zeros(2):requires_grad_(true)}
        ps[1].grad = fx.tensor(F.clip_grads[1])
        ps[2].grad = fx.tensor(F.clip_grads[2])
        local total
        if form == "positional" then total = optim.clip_grad_norm_(ps, c.max_norm, c.norm_type)
        elseif form == "options" then total = optim.clip_grad_norm_(ps, c.max_norm, {norm_type = c.norm_type})
        else
          local nt = c.norm_type == math.huge and "inf" or c.norm_type
          total = attn.nn.utils.clip_grad_norm_(ps, {max_norm = c.max_norm, norm_type = nt,
            error_if_nonfinite = true})
        end
        local what = ("clip case %d (%s)"):format(i, form)
        assert.are.equal(0, total:dim())
        fx.assert_close(total, c.total, 0, 1e-6, what .. " total")
        fx.assert_close(ps[1].grad, c.grads[1], 1e-7, 1e-6, what .. " grad 1")
        fx.assert_close(ps[2].grad, c.grads[2], 1e-7, 1e-6, what .. " grad 2")
        assert.is_nil(ps[3].grad)
      end
    end
  end)

  it("clip_grad_norm_ and clip_grad_value_ refuse unknown option keys", function()
    local ok, err = pcall(optim.clip_grad_norm_, params(), 0.6, {norm = 2})
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("valid options: error_if_nonfinite, max_norm, norm_type", 1, true),
      tostring(err))
    local ps = params()
    optim.clip_grad_value_(ps, {clip_value = 0.3})
    assert.are.same({0.30000001192092896, 0.25, -0.30000001192092896}, ps[1].grad:totable())
    assert.has_error(function() optim.clip_grad_value_(ps, {clip = 0.3}) end)
  end)
end)
