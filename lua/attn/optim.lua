-- SPDX-License-Identifier: MIT

--- attn.optim: optimisers, learning-rate schedulers and gradient clipping
-- with torch 1.13's semantics.  Each optimiser runs torch's single-tensor
-- (foreach = False) algorithm in the same operation order, so one step on
-- the same parameters and gradients gives torch's result (to float32
-- rounding).
--
--   local opt = attn.optim.Adam(model:parameters(), {lr = 1e-3})
--   opt:zero_grad(); loss:backward(); opt:step()
--
-- params: a list of tensors, or a list of parameter groups
-- {{params = {...}, lr = ...}, ...} whose missing options come from the
-- optimiser's options table.  opt.param_groups holds the groups (tables
-- with params and the hyper-parameters; change group.lr to change the
-- rate), opt.state[param] the per-parameter state.  Parameters whose grad
-- is nil are skipped.
--
-- Schedulers: StepLR, LambdaLR, NoamLR (the Annotated Transformer's
-- warm-up schedule); clip_grad_norm_, clip_grad_value_.
local attn = require "attn.base"
local core = require "attn.core"
local error = core._error -- raises at the user's line (the first caller outside attn)

local optim = {}

local function fmt(x)
  if type(x) == "table" then
    local parts = {}
    for i, v in ipairs(x) do parts[i] = tostring(v) end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return tostring(x)
end

-- Copies plain tables (betas = {0.9, 0.999}); tensors and scalars as is.
local function copy_value(v)
  if type(v) == "table" then
    local c = {}
    for k, x in pairs(v) do c[k] = copy_value(x) end
    return c
  end
  return v
end

local function same_size(a, b)
  local sa, sb = a:shape(), b:shape()
  if #sa ~= #sb then return false end
  for i = 1, #sa do if sa[i] ~= sb[i] then return false end end
  return true
end

-- ------------------------------------------------------------------------
-- Optimizer base
-- ------------------------------------------------------------------------

local Optimizer = {}
Optimizer.__index = Optimizer
optim.Optimizer = Optimizer

local REQUIRED = setmetatable({}, {__tostring = function() return "<required>" end})
optim.required = REQUIRED

-- Raises (a plain message) unless every option has the type of its default
-- (numbers: not NaN; tables: betas-like lists checked by validate).
local function check_types(d, defaults)
  for k, def in pairs(defaults) do
    local v, want = d[k], def == REQUIRED and "number" or type(def)
    if v ~= REQUIRED and (type(v) ~= want or v ~= v) then
      error(("option '%s' must be a %s (got %s)"):format(k, want, tostring(v)))
    end
  end
end

-- A class derived from Optimizer: cls(params, opts) builds an instance.
local function class(name, defaults, validate)
  local cls = {}
  cls.__index = cls
  cls.__name = name
  cls._defaults = defaults
  cls._validate = function(d)
    check_types(d, defaults)
    validate(d)
  end
  setmetatable(cls, {
    __index = Optimizer,
    __call = function(c, params, opts) return c.new(params, opts) end,
  })
  --- Cls.new(params [, opts]) (also Cls(params, opts)): an optimizer of this
  -- class over params (a list of tensors, or of {params = ..., lr = ...}
  -- groups) with opts merged over the class defaults and checked.
  -- @function Optimizer.new
  function cls.new(params, opts)
    if opts ~= nil and (type(opts) ~= "table" or attn.is_tensor(opts)) then
      error(("%s: options must be a table such as {lr = 0.01} (got %s)"):format(name, type(opts)), 3)
    end
    opts = opts or {}
    local d = {}
    for k, v in pairs(defaults) do d[k] = v end
    for k, v in pairs(opts) do
      if defaults[k] == nil then
        error(attn._misuse.unknown_option(name, k, defaults), 3)
      end
      d[k] = copy_value(v)
    end
    local ok, err = pcall(cls._validate, d)
    if not ok then error(name .. ": " .. tostring(err):gsub("^.-:%d+: ", ""), 3) end
    local self = setmetatable({defaults = d, state = {}, param_groups = {}}, cls)
    if attn.is_tensor(params) then params = {params} end
    if type(params) ~= "table" or getmetatable(params) ~= nil or #params == 0 then
      error(name .. ": params must be a non-empty list of tensors or of parameter groups", 3)
    end
    local groups = attn.is_tensor(params[1]) and {{params = params}} or params
    for _, g in ipairs(groups) do
      local ok2, err2 = pcall(self.add_param_group, self, g)
      -- report at the caller's line rather than inside add_param_group
      if not ok2 then error((tostring(err2):gsub("^.-:%d+: ", "")), 3) end
    end
    return self
  end
  return cls
end

--- opt:add_param_group({params = {...}, lr = ..., ...}): options the group
-- lacks come from the optimiser's defaults.
function Optimizer:add_param_group(group)
  local name = getmetatable(self).__name
  if type(group) ~= "table" or attn.is_tensor(group) then
    error(name .. ": a parameter group must be a table {params = {...}, ...}", 2)
  end
  local params = group.params
  if attn.is_tensor(params) then params = {params} end
  if type(params) ~= "table" then error(name .. ": a parameter group needs a list of tensors in params", 2) end
  local seen = {}
  for _, g in ipairs(self.param_groups) do
    for _, p in ipairs(g.params) do seen[p] = true end
  end
  local g = {params = {}}
  for i, p in ipairs(params) do
    if not attn.is_tensor(p) then
      error(("%s: params[%d] is a %s, expected a tensor"):format(name, i, type(p)), 2)
    end
    if not p.is_leaf then error(("%s: params[%d] is not a leaf tensor; cannot optimize it"):format(name, i), 2) end
    if seen[p] then
      error(("%s: params[%d] appears in more than one parameter group"):format(name, i), 2)
    end
    seen[p] = true
    g.params[i] = p
  end
  for k, v in pairs(group) do
    if k ~= "params" then g[k] = copy_value(v) end
  end
  for k, v in pairs(self.defaults) do
    if g[k] == nil then
      if v == REQUIRED then
        error(("%s: parameter group didn't specify a value of required option %s"):format(name, k), 2)
      end
      g[k] = copy_value(v)
    end
  end
  -- the group's own options get the checks the constructor's got
  local ok, err = pcall(getmetatable(self)._validate, g)
  if not ok then error(name .. ": " .. tostring(err):gsub("^.-:%d+: ", ""), 2) end
  self.param_groups[#self.param_groups + 1] = g
end

--- opt:zero_grad([set_to_none = true]): drops every parameter's grad (or
-- zeroes it in place with set_to_none = false).
function Optimizer:zero_grad(set_to_none)
  if set_to_none == nil then set_to_none = true end
  if type(set_to_none) ~= "boolean" then
    error(("zero_grad: set_to_none must be a boolean (got %s)"):format(type(set_to_none)), 2)
  end
  for _, g in ipairs(self.param_groups) do
    for _, p in ipairs(g.params) do
      if set_to_none then
        p.grad = nil
      else
        local gr = p.grad
        if gr then attn.no_grad(gr.zero_, gr) end
      end
    end
  end
end

--- opt:step([closure]): one update of every parameter that has a grad.
-- closure (optional) re-evaluates the model with grad enabled and returns
-- the loss, which step returns.
function Optimizer:step(closure)
  local loss
  if closure ~= nil then
    if type(closure) ~= "function" and not (getmetatable(closure) or {}).__call then
      error(("step: closure must be a function (got %s)"):format(type(closure)), 2)
    end
    loss = attn.enable_grad(closure)
  end
  local _ <close> = attn.no_grad()
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      local grad = p.grad
      if grad ~= nil then
        local st = self.state[p]
        if st == nil then
          st = {}
          self.state[p] = st
        end
        self:_update(group, p, grad, st)
      end
    end
  end
  return loss
end

--- opt:state_dict(): {state = {[i] = {...}}, param_groups = {{..., params =
-- {i, ...}}}} with parameters numbered 1, 2, ... across the groups in
-- order, like torch.  State tensors are shared (clone them to snapshot).
function Optimizer:state_dict()
  local index, n = {}, 0
  local groups = {}
  for gi, g in ipairs(self.param_groups) do
    local packed = {}
    for k, v in pairs(g) do
      if k ~= "params" then packed[k] = copy_value(v) end
    end
    packed.params = {}
    for i, p in ipairs(g.params) do
      if index[p] == nil then
        n = n + 1
        index[p] = n
      end
      packed.params[i] = index[p]
    end
    groups[gi] = packed
  end
  local state = {}
  for p, s in pairs(self.state) do
    if index[p] then
      local c = {}
      for k, v in pairs(s) do c[k] = v end
      state[index[p]] = c
    end
  end
  return {state = state, param_groups = groups}
end

--- opt:load_state_dict(sd): restores hyper-parameters and state saved by
-- state_dict (of an optimiser over parameters of the same shapes, in the
-- same groups).  Tensors are copied.
function Optimizer:load_state_dict(sd)
  local name = getmetatable(self).__name
  if type(sd) ~= "table" or type(sd.param_groups) ~= "table" or (sd.state ~= nil and type(sd.state) ~= "table") then
    error(name .. ": load_state_dict expects a table from state_dict()", 2)
  end
  local saved = sd.param_groups
  if #saved ~= #self.param_groups then
    error(("%s: loaded state dict has %d parameter groups, the optimizer %d"):format(name, #saved,
      #self.param_groups), 2)
  end
  local by_index = {}
  for gi, g in ipairs(self.param_groups) do
    local sg = saved[gi]
    if type(sg) ~= "table" then error(("%s: loaded parameter group %d is not a table"):format(name, gi), 2) end
    local merged = {}
    for k, v in pairs(g) do merged[k] = v end
    for k, v in pairs(sg) do merged[k] = v end
    local ok, err = pcall(getmetatable(self)._validate, merged)
    if not ok then
      error(("%s: loaded parameter group %d: %s"):format(name, gi, tostring(err):gsub("^.-:%d+: ", "")), 2)
    end
    if type(sg.params) ~= "table" or #sg.params ~= #g.params then
      error(("%s: loaded parameter group %d has %d parameters, the optimizer's has %d"):format(name, gi,
        type(sg.params) == "table" and #sg.params or 0, #g.params), 2)
    end
    for i, idx in ipairs(sg.params) do by_index[idx] = g.params[i] end
  end
  local state = {}
  for idx, s in pairs(sd.state or {}) do
    local p = by_index[idx]
    if p then
      local c = {}
      for k, v in pairs(s) do
        if attn.is_tensor(v) then
          if k ~= "step" and not same_size(v, p) then
            error(("%s: state '%s' of parameter %d has shape %s, the parameter %s"):format(name, k, idx,
              fmt(v:shape()), fmt(p:shape())), 2)
          end
          c[k] = v:detach():clone()
        else
          c[k] = copy_value(v)
        end
      end
      state[p] = c
    end
  end
  for gi, g in ipairs(self.param_groups) do
    for k, v in pairs(saved[gi]) do
      if k ~= "params" then g[k] = copy_value(v) end
    end
  end
  self.state = state
end

-- ------------------------------------------------------------------------
-- SGD
-- ------------------------------------------------------------------------

--- SGD(params, {lr (required), momentum = 0, dampening = 0,
-- weight_decay = 0, nesterov = false, maximize = false})
optim.SGD = class("SGD", {lr = REQUIRED, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false,
  maximize = false}, function(d)
  if d.lr ~= REQUIRED and d.lr < 0 then error("Invalid learning rate: " .. fmt(d.lr)) end
  if d.momentum < 0 then error("Invalid momentum value: " .. fmt(d.momentum)) end
  if d.weight_decay < 0 then error("Invalid weight_decay value: " .. fmt(d.weight_decay)) end
  if d.nesterov and (d.momentum <= 0 or d.dampening ~= 0) then
    error("Nesterov momentum requires a momentum and zero dampening")
  end
end)

function optim.SGD:_update(g, p, d_p, st)
  if g.maximize then d_p = -d_p end
  if g.weight_decay ~= 0 then d_p = d_p:add(p, g.weight_decay) end
  if g.momentum ~= 0 then
    local buf = st.momentum_buffer
    if buf == nil then
      buf = d_p:clone()
      st.momentum_buffer = buf
    else
      buf:mul_(g.momentum):add_(d_p, 1 - g.dampening)
    end
    if g.nesterov then
      d_p = d_p:add(buf, g.momentum)
    else
      d_p = buf
    end
  end
  p:add_(d_p, -g.lr)
end

-- ------------------------------------------------------------------------
-- Adam / AdamW
-- ------------------------------------------------------------------------

local function check_adam(d)
  if d.lr < 0 then error("Invalid learning rate: " .. fmt(d.lr)) end
  if d.eps < 0 then error("Invalid epsilon value: " .. fmt(d.eps)) end
  local b = d.betas
  if type(b) ~= "table" or type(b[1]) ~= "number" or type(b[2]) ~= "number" then
    error("betas must be a pair of numbers {beta1, beta2}")
  end
  if not (b[1] >= 0 and b[1] < 1) then error("Invalid beta parameter at index 1: " .. fmt(b[1])) end
  if not (b[2] >= 0 and b[2] < 1) then error("Invalid beta parameter at index 2: " .. fmt(b[2])) end
  if d.weight_decay < 0 then error("Invalid weight_decay value: " .. fmt(d.weight_decay)) end
end

local function adam_init(g, p, st)
  if st.step == nil then
    st.step = 0
    st.exp_avg = attn.zeros_like(p)
    st.exp_avg_sq = attn.zeros_like(p)
  end
  if g.amsgrad and st.max_exp_avg_sq == nil then st.max_exp_avg_sq = attn.zeros_like(p) end
end

-- The moment updates and the parameter step shared by Adam and AdamW, after
-- the step count (and Adam's weight decay, added to grad); decay: AdamW's
-- factor 1 - lr * weight_decay, or nil.  Contiguous float32 tensors take
-- one fused pass (core._adam_update: the same float operations in the same
-- order as the composed version below, so the same results bit for bit).
local function adam_update(g, p, grad, st, decay)
  local beta1, beta2 = g.betas[1], g.betas[2]
  local exp_avg, exp_avg_sq = st.exp_avg, st.exp_avg_sq
  local step = st.step
  local bias_correction1 = 1 - beta1 ^ step
  local bias_correction2 = 1 - beta2 ^ step
  local step_size = g.lr / bias_correction1
  local bias_correction2_sqrt = math.sqrt(bias_correction2)
  if core._adam_update(p, grad, exp_avg, exp_avg_sq, g.amsgrad and st.max_exp_avg_sq or nil, decay ~= nil,
      decay or 1, beta1, 1 - beta1, beta2, 1 - beta2, -step_size, bias_correction2_sqrt, g.eps) then
    return
  end
  if decay then p:mul_(decay) end
  exp_avg:mul_(beta1):add_(grad, 1 - beta1)
  -- addcmul_(grad, grad, value = 1 - beta2): (value * grad) * grad
  exp_avg_sq:mul_(beta2):add_(grad * (1 - beta2) * grad)
  local denom
  if g.amsgrad then
    local m = st.max_exp_avg_sq
    m:maximum_(exp_avg_sq)
    denom = (m:sqrt() / bias_correction2_sqrt):add_(g.eps)
  else
    denom = (exp_avg_sq:sqrt() / bias_correction2_sqrt):add_(g.eps)
  end
  -- addcdiv_(exp_avg, denom, value = -step_size): (value * exp_avg) / denom
  p:add_(exp_avg * -step_size / denom)
end

--- Adam(params, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8,
-- weight_decay = 0 (added to the gradient), amsgrad = false,
-- maximize = false})
optim.Adam = class("Adam", {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, amsgrad = false,
  maximize = false}, check_adam)

function optim.Adam:_update(g, p, grad, st)
  adam_init(g, p, st)
  if g.maximize then grad = -grad end
  st.step = st.step + 1
  if g.weight_decay ~= 0 then grad = grad:add(p, g.weight_decay) end
  adam_update(g, p, grad, st)
end

--- AdamW(params, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8,
-- weight_decay = 1e-2 (decoupled: p *= 1 - lr * weight_decay),
-- amsgrad = false, maximize = false})
optim.AdamW = class("AdamW", {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 1e-2,
  amsgrad = false, maximize = false}, check_adam)

function optim.AdamW:_update(g, p, grad, st)
  adam_init(g, p, st)
  if g.maximize then grad = -grad end
  st.step = st.step + 1
  adam_update(g, p, grad, st, 1 - g.lr * g.weight_decay)
end

-- ------------------------------------------------------------------------
-- RMSprop
-- ------------------------------------------------------------------------

--- RMSprop(params, {lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0,
-- momentum = 0, centered = false, maximize = false})
optim.RMSprop = class("RMSprop", {lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0,
  centered = false, maximize = false}, function(d)
  if d.lr < 0 then error("Invalid learning rate: " .. fmt(d.lr)) end
  if d.eps < 0 then error("Invalid epsilon value: " .. fmt(d.eps)) end
  if d.momentum < 0 then error("Invalid momentum value: " .. fmt(d.momentum)) end
  if d.weight_decay < 0 then error("Invalid weight_decay value: " .. fmt(d.weight_decay)) end
  if d.alpha < 0 then error("Invalid alpha value: " .. fmt(d.alpha)) end
end)

function optim.RMSprop:_update(g, p, grad, st)
  if st.step == nil then
    st.step = 0
    st.square_avg = attn.zeros_like(p)
  end
  if g.momentum > 0 and st.momentum_buffer == nil then st.momentum_buffer = attn.zeros_like(p) end
  if g.centered and st.grad_avg == nil then st.grad_avg = attn.zeros_like(p) end
  st.step = st.step + 1
  if g.maximize then grad = -grad end
  if g.weight_decay ~= 0 then grad = grad:add(p, g.weight_decay) end
  local alpha = g.alpha
  local square_avg = st.square_avg
  square_avg:mul_(alpha):add_(grad * (1 - alpha) * grad)
  local avg
  if g.centered then
    local grad_avg = st.grad_avg
    grad_avg:mul_(alpha):add_(grad, 1 - alpha)
    -- square_avg.addcmul(grad_avg, grad_avg, value = -1).sqrt_()
    avg = (square_avg + grad_avg * -1 * grad_avg):sqrt_()
  else
    avg = square_avg:sqrt()
  end
  avg:add_(g.eps)
  if g.momentum > 0 then
    local buf = st.momentum_buffer
    buf:mul_(g.momentum):add_(grad / avg)
    p:add_(buf, -g.lr)
  else
    p:add_(grad * -g.lr / avg)
  end
end

-- ------------------------------------------------------------------------
-- Learning-rate schedulers
-- ------------------------------------------------------------------------

local Scheduler = {}
Scheduler.__index = Scheduler
optim.LRScheduler = Scheduler

local function scheduler_class(name)
  local cls = setmetatable({}, {__index = Scheduler})
  cls.__index = cls
  cls.__name = name
  return cls
end

-- torch's _LRScheduler.__init__: records initial_lr in every group (or
-- requires it when resuming with last_epoch >= 0), then takes step 0.
local function scheduler_init(self, optimizer, last_epoch, name)
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    error(name .. ": expected an optimizer", 3)
  end
  if last_epoch == nil then last_epoch = -1 end
  if math.type(last_epoch) ~= "integer" and not (type(last_epoch) == "number" and math.tointeger(last_epoch)) then
    error(("%s: last_epoch must be an integer (got %s)"):format(name, tostring(last_epoch)), 3)
  end
  last_epoch = math.tointeger(last_epoch)
  self.optimizer = optimizer
  if last_epoch == -1 then
    for _, g in ipairs(optimizer.param_groups) do
      if g.initial_lr == nil then g.initial_lr = g.lr end
    end
  else
    for i, g in ipairs(optimizer.param_groups) do
      if g.initial_lr == nil then
        error(("%s: param 'initial_lr' is not specified in param_groups[%d] when resuming an optimizer"):format(
          name, i), 3)
      end
    end
  end
  self.base_lrs = {}
  for i, g in ipairs(optimizer.param_groups) do self.base_lrs[i] = g.initial_lr end
  self.last_epoch = last_epoch
  self._step_count = 0
  self:step()
  return self
end

--- scheduler:step([epoch]): advances one epoch (or jumps to epoch, using
-- the closed form where the scheduler has one) and sets every group's lr.
function Scheduler:step(epoch)
  if epoch ~= nil and (type(epoch) ~= "number" or epoch ~= epoch) then
    error(("%s:step: epoch must be a number (got %s)"):format(getmetatable(self).__name, tostring(epoch)), 2)
  end
  self._step_count = self._step_count + 1
  local values
  if epoch == nil then
    self.last_epoch = self.last_epoch + 1
    values = self:get_lr()
  else
    self.last_epoch = epoch
    values = self._closed_form_lr and self:_closed_form_lr() or self:get_lr()
  end
  self._last_lr = {}
  for i, g in ipairs(self.optimizer.param_groups) do
    g.lr = values[i]
    self._last_lr[i] = g.lr
  end
end

--- scheduler:get_last_lr(): the list of the groups' rates set by the
-- last step.
function Scheduler:get_last_lr()
  local c = {}
  for i, v in ipairs(self._last_lr) do c[i] = v end
  return c
end

--- scheduler:state_dict() / load_state_dict(sd): the counters and
-- settings (not the optimizer, not lr functions).
function Scheduler:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if k ~= "optimizer" and k ~= "lr_lambdas" then sd[k] = copy_value(v) end
  end
  return sd
end

--- scheduler:load_state_dict(sd): restores what state_dict gave; unknown
-- keys or values of another type raise.
function Scheduler:load_state_dict(sd)
  local name = getmetatable(self).__name
  if type(sd) ~= "table" then error(("%s:load_state_dict: expected a table from state_dict() (got %s)"):format(
    name, type(sd)), 2) end
  -- every key must be one of ours, with a value of the same type
  for k, v in pairs(sd) do
    local cur = rawget(self, k)
    if cur == nil or k == "optimizer" or k == "lr_lambdas" then
      error(("%s:load_state_dict: unknown key '%s'"):format(name, tostring(k)), 2)
    end
    if type(v) ~= type(cur) then
      error(("%s:load_state_dict: '%s' must be a %s (got %s)"):format(name, k, type(cur), type(v)), 2)
    end
  end
  for k, v in pairs(sd) do
    if k ~= "optimizer" and k ~= "lr_lambdas" then self[k] = copy_value(v) end
  end
end

--- StepLR(optimizer, step_size, gamma = 0.1, last_epoch = -1): multiplies
-- the rate by gamma every step_size epochs.
optim.StepLR = scheduler_class("StepLR")
setmetatable(optim.StepLR, {__index = Scheduler, __call = function(cls, optimizer, step_size, gamma, last_epoch)
  step_size = type(step_size) == "number" and math.tointeger(step_size) or step_size
  if math.type(step_size) ~= "integer" or step_size < 1 then
    error("StepLR: step_size must be a positive integer", 2)
  end
  if gamma ~= nil and (type(gamma) ~= "number" or gamma ~= gamma) then
    error(("StepLR: gamma must be a number (got %s)"):format(tostring(gamma)), 2)
  end
  local self = setmetatable({step_size = step_size, gamma = gamma or 0.1}, cls)
  return scheduler_init(self, optimizer, last_epoch, "StepLR")
end})

--- scheduler:get_lr(): the rates for the current epoch, one per group
-- (StepLR: multiplied by gamma every step_size epochs).
function optim.StepLR:get_lr()
  local out = {}
  local e = self.last_epoch
  for i, g in ipairs(self.optimizer.param_groups) do
    if e == 0 or e % self.step_size ~= 0 then out[i] = g.lr else out[i] = g.lr * self.gamma end
  end
  return out
end

function optim.StepLR:_closed_form_lr()
  local out = {}
  for i, b in ipairs(self.base_lrs) do out[i] = b * self.gamma ^ (self.last_epoch // self.step_size) end
  return out
end

--- LambdaLR(optimizer, fn, last_epoch = -1): lr = initial_lr * fn(epoch);
-- fn may be a list with one function per parameter group.
optim.LambdaLR = scheduler_class("LambdaLR")
local function lambda_new(cls, optimizer, fn, last_epoch, name)
  local n = type(optimizer) == "table" and type(optimizer.param_groups) == "table" and #optimizer.param_groups or 0
  local fns = {}
  if type(fn) == "table" and getmetatable(fn) == nil then
    if #fn ~= n then error(("%s: expected %d lr functions, but got %d"):format(name, n, #fn), 3) end
    for i = 1, n do fns[i] = fn[i] end
  else
    for i = 1, n do fns[i] = fn end
  end
  for i = 1, n do
    if type(fns[i]) ~= "function" and not (getmetatable(fns[i]) or {}).__call then
      error(name .. ": lr_lambda must be a function (epoch -> factor) or a list of them", 3)
    end
  end
  local self = setmetatable({lr_lambdas = fns}, cls)
  return scheduler_init(self, optimizer, last_epoch, name)
end
setmetatable(optim.LambdaLR, {__index = Scheduler, __call = function(cls, optimizer, fn, last_epoch)
  return lambda_new(cls, optimizer, fn, last_epoch, "LambdaLR")
end})

--- scheduler:get_lr(): initial_lr * fn(epoch) for each group.
function optim.LambdaLR:get_lr()
  local out = {}
  for i, b in ipairs(self.base_lrs) do
    local f = self.lr_lambdas[i](self.last_epoch)
    if type(f) ~= "number" then
      error(("%s: lr_lambda returned a %s for epoch %s, expected a number"):format(getmetatable(self).__name,
        type(f), tostring(self.last_epoch)), 2)
    end
    out[i] = b * f
  end
  return out
end

--- noam_rate(step, d_model, factor, warmup): the Annotated Transformer's
-- rate(): factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5),
-- step 0 counted as 1.
function optim.noam_rate(step, d_model, factor, warmup)
  local args = {step, d_model, factor, warmup}
  for i = 1, 4 do
    local v = args[i]
    if type(v) ~= "number" then
      error(("noam_rate: %s must be a number (got %s)")
        :format(({"step", "d_model", "factor", "warmup"})[i], type(v)), 2)
    end
  end
  if step == 0 then step = 1 end
  return factor * (d_model ^ -0.5 * math.min(step ^ -0.5, step * warmup ^ -1.5))
end

--- NoamLR(optimizer, {d_model =, warmup =, factor = 1}, last_epoch = -1):
-- LambdaLR with noam_rate, so lr = initial_lr * noam_rate(epoch, ...).
-- Give the optimiser lr = 1 for the Annotated Transformer's schedule.
optim.NoamLR = scheduler_class("NoamLR")
setmetatable(optim.NoamLR, {__index = optim.LambdaLR, __call = function(cls, optimizer, opts, last_epoch)
  if type(opts) ~= "table" or type(opts.d_model) ~= "number" or type(opts.warmup) ~= "number" then
    error("NoamLR: expected options {d_model = ..., warmup = ..., factor = 1}", 2)
  end
  for k in pairs(opts) do
    if k ~= "d_model" and k ~= "warmup" and k ~= "factor" then
      error(attn._misuse.unknown_option("NoamLR", k, {"d_model", "factor", "warmup"}), 2)
    end
  end
  if opts.factor ~= nil and type(opts.factor) ~= "number" then
    error(("NoamLR: factor must be a number (got %s)"):format(type(opts.factor)), 2)
  end
  if not (opts.d_model > 0 and opts.warmup > 0) then error("NoamLR: d_model and warmup must be positive", 2) end
  local d_model, warmup, factor = opts.d_model, opts.warmup, opts.factor or 1
  local self = lambda_new(cls, optimizer, function(step)
    return optim.noam_rate(step, d_model, factor, warmup)
  end, last_epoch, "NoamLR")
  self.d_model, self.warmup, self.factor = d_model, warmup, factor
  return self
end})

-- ------------------------------------------------------------------------
-- Gradient clipping (torch.nn.utils)
-- ------------------------------------------------------------------------

local function grads_of(parameters, fn)
  if attn.is_tensor(parameters) then parameters = {parameters} end
  if type(parameters) ~= "table" or getmetatable(parameters) ~= nil then
    error(fn .. ": expected a tensor or a list of tensors", 3)
  end
  local grads = {}
  for i, p in ipairs(parameters) do
    if not attn.is_tensor(p) then error(("%s: parameters[%d] is not a tensor"):format(fn, i), 3) end
    local g = p.grad
    if g ~= nil then grads[#grads + 1] = g end
  end
  return grads
end

--- clip_grad_norm_(parameters, max_norm, norm_type = 2,
-- error_if_nonfinite = false): scales every grad in place by
-- min(1, max_norm / (total + 1e-6)), total being the norm of all grads
-- together (norm_type math.huge or "inf": the largest |g|).  Returns the
-- total norm as a 0-d tensor (0 when no parameter has a grad).
function optim.clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite)
  local fn = "clip_grad_norm_"
  if type(max_norm) ~= "number" then error(fn .. ": max_norm must be a number", 2) end
  if norm_type == nil then norm_type = 2 end
  if error_if_nonfinite ~= nil and type(error_if_nonfinite) ~= "boolean" then
    error(fn .. ": error_if_nonfinite must be a boolean", 2)
  end
  if norm_type == "inf" then norm_type = math.huge end
  if type(norm_type) ~= "number" then error(fn .. ": norm_type must be a number or \"inf\"", 2) end
  local grads = grads_of(parameters, fn)
  local _ <close> = attn.no_grad()
  if #grads == 0 then return attn.tensor(0) end
  local total
  if norm_type == math.huge then
    local norms = {}
    for i, g in ipairs(grads) do norms[i] = g:abs():max() end
    total = #norms == 1 and norms[1] or attn.stack(norms):max()
  else
    local norms = {}
    for i, g in ipairs(grads) do norms[i] = g:norm(norm_type) end
    total = attn.stack(norms):norm(norm_type)
  end
  if error_if_nonfinite then
    local v = total:item()
    if v ~= v or v == math.huge or v == -math.huge then
      error(("%s: the total norm of order %s for gradients from parameters is non-finite, so it cannot be "
        .. "clipped (pass error_if_nonfinite = false to scale by it anyway)"):format(fn, tostring(norm_type)), 2)
    end
  end
  local coef = (max_norm / (total + 1e-6)):clamp(nil, 1.0)
  for _, g in ipairs(grads) do g:mul_(coef) end
  return total
end

--- clip_grad_value_(parameters, clip_value): clamps every grad in place
-- to [-clip_value, clip_value].
function optim.clip_grad_value_(parameters, clip_value)
  if type(clip_value) ~= "number" then error("clip_grad_value_: clip_value must be a number", 2) end
  local grads = grads_of(parameters, "clip_grad_value_")
  local _ <close> = attn.no_grad()
  for _, g in ipairs(grads) do g:clamp_(-clip_value, clip_value) end
end

-- opt.step() for opt:step() (and every other method) says to write ':'.
-- The check reads a raw field every instance holds (param_groups,
-- optimizer); a number as self (sched.step(3)) is told too.
local function is_optimizer(v) return type(v) == "table" and rawget(v, "param_groups") ~= nil end
local function is_scheduler(v) return type(v) == "table" and rawget(v, "optimizer") ~= nil end
attn._misuse.guard_class(Optimizer, "opt", is_optimizer)
attn._misuse.guard_class(Scheduler, "sched", is_scheduler)
for _, cls in pairs(optim) do
  local mt = type(cls) == "table" and getmetatable(cls)
  if mt and mt.__index == Optimizer then attn._misuse.guard_class(cls, "opt", is_optimizer)
  elseif mt and cls ~= Scheduler and rawget(cls, "__index") == cls then
    attn._misuse.guard_class(cls, "sched", is_scheduler)
  end
end

return optim
