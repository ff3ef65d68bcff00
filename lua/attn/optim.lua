-- SPDX-License-Identifier: MIT

--- attn.optim: optimisers, learning-rate schedulers and gradient clipping
-- with torch 1.13's semantics.  Each optimiser runs torch's single-tensor
-- (foreach = False) algorithm in the same operation order, so one step on
-- the same parameters and gradients gives torch's result (to float32
-- rounding).
--
--   local opt = attn.optim.Adam(model:parameters(), 1e-3) -- or {lr = 1e-3}
--   opt:zero_grad(); loss:backward(); opt:step()
--
-- params: a list of tensors, or a list of parameter groups
-- {{params = {...}, lr = ...}, ...} whose missing options come from the
-- optimiser's options table.  opt.param_groups holds the groups (tables
-- with params and the hyper-parameters; change group.lr to change the
-- rate), opt.state[param] the per-parameter state.  Parameters whose grad
-- is nil are skipped.
--
-- Schedulers (torch 1.13's, giving its rates step by step): StepLR,
-- MultiStepLR, ConstantLR, LinearLR, ExponentialLR, PolynomialLR,
-- LambdaLR, MultiplicativeLR, CosineAnnealingLR,
-- CosineAnnealingWarmRestarts, OneCycleLR, SequentialLR, ChainedScheduler,
-- ReduceLROnPlateau, and NoamLR (the Annotated Transformer's warm-up
-- schedule); clip_grad_norm_, clip_grad_value_.  Optimizers, schedulers and
-- the clip functions take torch's positional order or a trailing options
-- table: SGD(params, 0.1, 0.9), StepLR(opt, {step_size = 2, gamma = 0.5}).
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

--- optim.Optimizer: the base class of the optimisers (torch.optim.Optimizer).
-- SGD, Adam, AdamW and RMSprop take their methods from it (zero_grad, step,
-- add_param_group, state_dict, load_state_dict); an instance has torch's
-- fields param_groups (a list of {params = {...}, lr = ..., ...}), defaults
-- and state.
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 0.1)
-- print(opt.zero_grad == optim.Optimizer.zero_grad)   -- true: the base class's method
-- print(#opt.param_groups, opt.param_groups[1].lr)    -- 1 0.1
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

-- torch's calling convention: the values given positionally (in the order
-- of names) and, when the last one given is an options table (a plain
-- table with no [1]; an empty one too, unless its slot takes a list), its
-- keys.  known: the keys the options table may hold (default: names);
-- lists: the names whose value may be a list (a table there is positional).
-- Returns a table name -> value; an unknown key, a key given twice or too
-- many positional values raise at the user's line.
local function torch_args(fn, names, known, lists, ...)
  local a = table.pack(...)
  local last = a.n
  while last > 0 and a[last] == nil do last = last - 1 end
  local t, opts = a[last], nil
  if last > 0 and type(t) == "table" and getmetatable(t) == nil and t[1] == nil
      and (next(t) ~= nil or not lists[names[last] or ""]) then
    opts, last = t, last - 1
  end
  if last > #names then
    error(("%s: takes at most %d positional arguments after the first (%s), got %d; pass the others in a "
      .. "trailing options table"):format(fn, #names, table.concat(names, ", "), last))
  end
  local o = {}
  for i = 1, last do o[names[i]] = a[i] end
  if opts then
    local set = {}
    for _, n in ipairs(known or names) do set[n] = true end
    for k, v in pairs(opts) do
      if not set[k] then error(attn._misuse.unknown_option(fn, k, known or names)) end
      if o[k] ~= nil then error(("%s: '%s' given both positionally and in the options table"):format(fn, k)) end
      o[k] = v
    end
  end
  return o
end
optim._torch_args = torch_args

local function keys_of(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

-- A class derived from Optimizer: cls(params, ...) builds an instance;
-- positional: torch's positional parameters after params, in order.
local function class(name, defaults, validate, positional)
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
    __call = function(c, params, ...) return c.new(params, ...) end,
  })
  local known = keys_of(defaults)
  --- Cls.new(params, ...) (also Cls(params, ...)): an optimizer of this
  -- class over params (a list of tensors, or of {params = ..., lr = ...}
  -- groups); the options in torch's positional order (SGD(params, 0.1,
  -- 0.9)) and/or a trailing options table (SGD(params, {lr = 0.1})),
  -- merged over the class defaults and checked.
  -- @function Optimizer.new
  -- @usage
  -- local model = nn.Linear(4, 1)
  -- local opt = optim.Adam(model:parameters(), {lr = 1e-3, betas = {0.9, 0.98}})
  -- local sgd = optim.SGD(model:parameters(), 0.1, 0.9)                  -- torch's positional order
  -- local adamw = optim.AdamW(model:parameters(), {lr = 3e-4, weight_decay = 0.1})
  -- local rms = optim.RMSprop(model:parameters(), {lr = 0.01, momentum = 0.9})
  -- local loss = model(attn.randn(8, 4)):pow(2):mean()
  -- opt:zero_grad(); loss:backward(); opt:step()
  function cls.new(params, ...)
    if select("#", ...) > 0 and attn.is_tensor((...)) then
      error(("%s: options must be numbers in torch's order (%s) or a table such as {lr = 0.01} (got a tensor)")
        :format(name, table.concat(positional, ", ")), 3)
    end
    local opts = torch_args(name, positional, known, {betas = true}, ...)
    local d = {}
    for k, v in pairs(defaults) do d[k] = v end
    for k, v in pairs(opts) do d[k] = copy_value(v) end
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
-- @usage
-- local body, head = nn.Linear(4, 4), nn.Linear(4, 1)
-- local opt = optim.SGD(body:parameters(), {lr = 0.01})
-- opt:add_param_group({params = head:parameters(), lr = 0.1})   -- its own rate
-- print(#opt.param_groups)                         -- 2
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
-- @usage
-- local w = nn.Parameter(attn.ones(2))
-- local opt = optim.SGD({w}, {lr = 0.1})
-- w:sum():backward()
-- opt:zero_grad()                                  -- .grad = nil (set_to_none, torch 2.x's default)
-- print(w.grad)                                    -- nil
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
-- @usage
-- local w = nn.Parameter(attn.tensor({2.0}))
-- local opt = optim.SGD({w}, {lr = 0.25})
-- w:pow(2):sum():backward()                         -- grad 4
-- opt:step()
-- print(w)                                         -- tensor([1.]): 2 - 0.25 * 4
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
-- @usage
-- local w = nn.Parameter(attn.ones(2))
-- local opt = optim.Adam({w})
-- w:pow(2):sum():backward(); opt:step()
-- local sd = opt:state_dict()                      -- {state =, param_groups =}, torch's layout
-- print(sd.param_groups[1].lr)                     -- 0.001
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
-- @usage
-- local w = nn.Parameter(attn.ones(2))
-- local opt = optim.Adam({w}, {lr = 0.1})
-- w:pow(2):sum():backward(); opt:step()
-- local opt2 = optim.Adam({w}, {lr = 0.1})
-- opt2:load_state_dict(opt:state_dict())           -- resume: moments and step counts
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

--- SGD(params, lr, momentum = 0, dampening = 0, weight_decay = 0,
-- nesterov = false [, opts]): torch's positional order, and any of them
-- plus maximize = false in a trailing options table: SGD(params, 0.1, 0.9)
-- or SGD(params, {lr = 0.1, momentum = 0.9}).
-- @usage
-- local model = nn.Linear(4, 1)
-- local opt = optim.SGD(model:parameters(), 0.1, 0.9)          -- lr 0.1, momentum 0.9
-- model(attn.randn(8, 4)):pow(2):mean():backward()
-- opt:step(); opt:zero_grad()
-- print(opt.param_groups[1].momentum)                         -- 0.9
optim.SGD = class("SGD", {lr = REQUIRED, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false,
  maximize = false}, function(d)
  if d.lr ~= REQUIRED and d.lr < 0 then error("Invalid learning rate: " .. fmt(d.lr)) end
  if d.momentum < 0 then error("Invalid momentum value: " .. fmt(d.momentum)) end
  if d.weight_decay < 0 then error("Invalid weight_decay value: " .. fmt(d.weight_decay)) end
  if d.nesterov and (d.momentum <= 0 or d.dampening ~= 0) then
    error("Nesterov momentum requires a momentum and zero dampening")
  end
end, {"lr", "momentum", "dampening", "weight_decay", "nesterov"})

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

--- Adam(params, lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8,
-- weight_decay = 0 (added to the gradient), amsgrad = false [, opts]):
-- positional as torch, or in a trailing options table (maximize = false
-- too): Adam(params, 1e-3, {0.9, 0.98}) or Adam(params, {lr = 1e-3}).
-- @usage
-- local model = nn.Linear(4, 1)
-- local opt = optim.Adam(model:parameters(), {lr = 1e-3, betas = {0.9, 0.98}, eps = 1e-9})
-- model(attn.randn(8, 4)):pow(2):mean():backward()
-- opt:step(); opt:zero_grad()
-- print(opt.param_groups[1].lr)                               -- 0.001
optim.Adam = class("Adam", {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, amsgrad = false,
  maximize = false}, check_adam, {"lr", "betas", "eps", "weight_decay", "amsgrad"})

function optim.Adam:_update(g, p, grad, st)
  adam_init(g, p, st)
  if g.maximize then grad = -grad end
  st.step = st.step + 1
  if g.weight_decay ~= 0 then grad = grad:add(p, g.weight_decay) end
  adam_update(g, p, grad, st)
end

--- AdamW(params, lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8,
-- weight_decay = 1e-2 (decoupled: p *= 1 - lr * weight_decay),
-- amsgrad = false [, opts]): positional as torch, or in a trailing
-- options table (maximize = false too).
-- @usage
-- local model = nn.Linear(4, 1)
-- local opt = optim.AdamW(model:parameters(), {lr = 3e-4, weight_decay = 0.1})   -- decoupled decay
-- model(attn.randn(8, 4)):pow(2):mean():backward()
-- opt:step(); opt:zero_grad()
optim.AdamW = class("AdamW", {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 1e-2,
  amsgrad = false, maximize = false}, check_adam, {"lr", "betas", "eps", "weight_decay", "amsgrad"})

function optim.AdamW:_update(g, p, grad, st)
  adam_init(g, p, st)
  if g.maximize then grad = -grad end
  st.step = st.step + 1
  adam_update(g, p, grad, st, 1 - g.lr * g.weight_decay)
end

-- ------------------------------------------------------------------------
-- RMSprop
-- ------------------------------------------------------------------------

--- RMSprop(params, lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0,
-- momentum = 0, centered = false [, opts]): positional as torch, or in a
-- trailing options table (maximize = false too).
-- @usage
-- local model = nn.Linear(4, 1)
-- local opt = optim.RMSprop(model:parameters(), 0.01, 0.99, {momentum = 0.9})
-- model(attn.randn(8, 4)):pow(2):mean():backward()
-- opt:step(); opt:zero_grad()
optim.RMSprop = class("RMSprop", {lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0,
  centered = false, maximize = false}, function(d)
  if d.lr < 0 then error("Invalid learning rate: " .. fmt(d.lr)) end
  if d.eps < 0 then error("Invalid epsilon value: " .. fmt(d.eps)) end
  if d.momentum < 0 then error("Invalid momentum value: " .. fmt(d.momentum)) end
  if d.weight_decay < 0 then error("Invalid weight_decay value: " .. fmt(d.weight_decay)) end
  if d.alpha < 0 then error("Invalid alpha value: " .. fmt(d.alpha)) end
end, {"lr", "alpha", "eps", "weight_decay", "momentum", "centered"})

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

--- optim.LRScheduler: the base class of the learning-rate schedulers
-- (torch.optim.lr_scheduler.LRScheduler): step, get_last_lr, state_dict and
-- load_state_dict.  An instance has optimizer, base_lrs (each group's
-- initial rate) and last_epoch (0 after construction, + 1 a step).
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 0.1)
-- local sched = optim.StepLR(opt, 10)
-- print(sched.step == optim.LRScheduler.step, sched.last_epoch)   -- true 0
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
-- @usage
-- local model = nn.Linear(2, 1)
-- local opt = optim.SGD(model:parameters(), {lr = 0.1})
-- local s = optim.StepLR(opt, 2, 0.1)              -- x0.1 every 2 epochs
-- for _ = 1, 4 do
--   opt:step()                                     -- after the optimiser, as torch warns
--   s:step()
-- end
-- print(s:get_last_lr()[1])                        -- 0.001
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
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 0.1})
-- local s = optim.StepLR(opt, 2, 0.1)
-- print(s:get_last_lr()[1])                        -- 0.1: one rate per parameter group
function Scheduler:get_last_lr()
  local c = {}
  for i, v in ipairs(self._last_lr) do c[i] = v end
  return c
end

--- scheduler:state_dict() / load_state_dict(sd): the counters and
-- settings (not the optimizer, not lr functions).
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 0.1})
-- local s = optim.StepLR(opt, 1, 0.5)
-- print(s:state_dict().last_epoch)                 -- 0
function Scheduler:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if k ~= "optimizer" and k ~= "lr_lambdas" then sd[k] = copy_value(v) end
  end
  return sd
end

--- scheduler:load_state_dict(sd): restores what state_dict gave; unknown
-- keys or values of another type raise.
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 0.1})
-- local s = optim.StepLR(opt, 1, 0.5)
-- local saved = s:state_dict()
-- opt:step(); s:step()
-- s:load_state_dict(saved)
-- print(s.last_epoch)                              -- 0 again
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

-- Checks of scheduler arguments (plain messages: raised at the user's line).
local function check_num(fn, k, v, lo, hi)
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
    error(("%s: %s must be a finite number (got %s)"):format(fn, k, tostring(v)))
  end
  if (lo and v < lo) or (hi and v > hi) then
    error(("%s: %s must be in [%s, %s] (got %s)"):format(fn, k, tostring(lo or "-inf"), tostring(hi or "inf"),
      tostring(v)))
  end
  return v
end
local function check_int(fn, k, v, lo)
  local i = type(v) == "number" and math.tointeger(v) or nil
  if i == nil then error(("%s: %s must be an integer (got %s)"):format(fn, k, tostring(v))) end
  if lo and i < lo then error(("%s: %s must be an integer >= %d (got %d)"):format(fn, k, lo, i)) end
  return i
end
local function default(v, d) if v == nil then return d end return v end
local function check_optimizer(fn, o)
  if type(o) ~= "table" or type(o.param_groups) ~= "table" then error(fn .. ": expected an optimizer") end
end

-- A scheduler class whose constructor takes torch's positional order
-- (names, after the optimizer) or a trailing options table; build(cls, a,
-- optimizer) makes the instance from the named arguments a.
local function sched_ctor(cls, names, lists, build)
  setmetatable(cls, {__index = Scheduler, __call = function(c, optimizer, ...)
    return build(c, torch_args(c.__name, names, nil, lists or {}, ...), optimizer)
  end})
  return cls
end

--- StepLR(optimizer, step_size, gamma = 0.1, last_epoch = -1): multiplies
-- the rate by gamma every step_size epochs.  Like every scheduler, the
-- arguments after the optimizer go in torch's order or in a trailing
-- options table: StepLR(opt, 2, 0.5) or StepLR(opt, {step_size = 2,
-- gamma = 0.5}).
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 0.1)
-- local sched = optim.StepLR(opt, 2, 0.5)                    -- halve the rate every 2 epochs
-- for _ = 1, 4 do opt:step(); sched:step() end
-- print(sched:get_last_lr()[1])                              -- 0.025
optim.StepLR = scheduler_class("StepLR")
sched_ctor(optim.StepLR, {"step_size", "gamma", "last_epoch"}, nil, function(cls, a, optimizer)
  local step_size, gamma, last_epoch = a.step_size, a.gamma, a.last_epoch
  step_size = type(step_size) == "number" and math.tointeger(step_size) or step_size
  if math.type(step_size) ~= "integer" or step_size < 1 then
    error("StepLR: step_size must be a positive integer", 2)
  end
  if gamma ~= nil and (type(gamma) ~= "number" or gamma ~= gamma) then
    error(("StepLR: gamma must be a number (got %s)"):format(tostring(gamma)), 2)
  end
  local self = setmetatable({step_size = step_size, gamma = gamma or 0.1}, cls)
  return scheduler_init(self, optimizer, last_epoch, "StepLR")
end)

--- scheduler:get_lr(): the rates for the current epoch, one per group
-- (StepLR: multiplied by gamma every step_size epochs).
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 1})
-- local s = optim.StepLR(opt, 1, 0.5)
-- opt:step(); s:step()
-- print(s:get_lr()[1])                             -- the chained form torch's step uses
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
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 0.1)
-- local sched = optim.LambdaLR(opt, function(epoch) return 0.5 ^ epoch end)
-- opt:step(); sched:step()
-- print(sched:get_last_lr()[1])                              -- 0.05
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
sched_ctor(optim.LambdaLR, {"lr_lambda", "last_epoch"}, {lr_lambda = true}, function(cls, a, optimizer)
  return lambda_new(cls, optimizer, a.lr_lambda, a.last_epoch, "LambdaLR")
end)

--- scheduler:get_lr(): initial_lr * fn(epoch) for each group.
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 1})
-- local warmup = optim.LambdaLR(opt, function(step) return math.min(1, (step + 1) / 10) end)
-- print(warmup:get_last_lr()[1])                   -- 0.1 at step 0
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
-- @usage
-- -- the Annotated Transformer's rate: factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
-- print(optim.noam_rate(1, 512, 1, 4000), optim.noam_rate(4000, 512, 1, 4000))
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
-- @usage
-- local opt = optim.Adam(nn.Linear(8, 8):parameters(), {lr = 1, betas = {0.9, 0.98}, eps = 1e-9})
-- local sched = optim.NoamLR(opt, {d_model = 512, warmup = 4000})
-- opt:step(); sched:step()
-- print(sched:get_last_lr()[1] == optim.noam_rate(1, 512, 1, 4000))   -- true
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

--- MultiStepLR(optimizer, milestones, gamma = 0.1, last_epoch = -1):
-- multiplies the rate by gamma at each epoch listed in milestones (an
-- epoch listed twice: by gamma^2).
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 0.1)
-- local sched = optim.MultiStepLR(opt, {2, 4}, 0.1)            -- 0.1 until epoch 2, 0.01 until 4, then 0.001
-- for _ = 1, 4 do opt:step(); sched:step() end
-- print(sched:get_last_lr()[1])                              -- about 0.001
optim.MultiStepLR = scheduler_class("MultiStepLR")
sched_ctor(optim.MultiStepLR, {"milestones", "gamma", "last_epoch"}, {milestones = true}, function(cls, a, optimizer)
  local fn = "MultiStepLR"
  if type(a.milestones) ~= "table" or getmetatable(a.milestones) ~= nil then
    error(("%s: milestones must be a list of epochs (got %s)"):format(fn, type(a.milestones)))
  end
  local counts, sorted = {}, {}
  for i, m in ipairs(a.milestones) do
    m = check_int(fn, ("milestones[%d]"):format(i), m)
    counts[m] = (counts[m] or 0) + 1
    sorted[#sorted + 1] = m
  end
  table.sort(sorted)
  local self = setmetatable({milestones = counts, _sorted = sorted,
    gamma = check_num(fn, "gamma", default(a.gamma, 0.1))}, cls)
  return scheduler_init(self, optimizer, a.last_epoch, fn)
end)

--- scheduler:get_lr() of MultiStepLR: the groups' rates times gamma^k at
-- an epoch listed k times in milestones.
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 1})
-- local s = optim.MultiStepLR(opt, {2, 4}, 0.1)    -- x0.1 at epochs 2 and 4
-- for _ = 1, 4 do opt:step(); s:step() end
-- print(s:get_last_lr()[1])                        -- 0.01
function optim.MultiStepLR:get_lr()
  local out, k = {}, self.milestones[self.last_epoch]
  for i, g in ipairs(self.optimizer.param_groups) do out[i] = k and g.lr * self.gamma ^ k or g.lr end
  return out
end

function optim.MultiStepLR:_closed_form_lr()
  local n = 0
  for _, m in ipairs(self._sorted) do if m <= self.last_epoch then n = n + 1 end end
  local out = {}
  for i, b in ipairs(self.base_lrs) do out[i] = b * self.gamma ^ n end
  return out
end

--- ConstantLR(optimizer, factor = 1/3, total_iters = 5, last_epoch = -1):
-- the rate times factor until epoch total_iters, then the rate.
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 0.1)
-- local sched = optim.ConstantLR(opt, 0.5, 2)                -- 0.05 for 2 epochs, then 0.1
-- print(sched:get_last_lr()[1])                              -- 0.05
-- for _ = 1, 2 do opt:step(); sched:step() end
-- print(sched:get_last_lr()[1])                              -- 0.1
optim.ConstantLR = scheduler_class("ConstantLR")
sched_ctor(optim.ConstantLR, {"factor", "total_iters", "last_epoch"}, nil, function(cls, a, optimizer)
  local fn = "ConstantLR"
  local self = setmetatable({factor = check_num(fn, "factor", default(a.factor, 1.0 / 3), 0, 1),
    total_iters = check_int(fn, "total_iters", default(a.total_iters, 5))}, cls)
  return scheduler_init(self, optimizer, a.last_epoch, fn)
end)

--- scheduler:get_lr() of ConstantLR: torch's chainable form.
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 1})
-- local s = optim.ConstantLR(opt, 0.5, 2)         -- lr * 0.5 for 2 steps
-- print(s:get_lr()[1], s:get_last_lr()[1])        -- get_lr: the closed form torch's step uses
function optim.ConstantLR:get_lr()
  local out, e = {}, self.last_epoch
  for i, g in ipairs(self.optimizer.param_groups) do
    if e == 0 then out[i] = g.lr * self.factor
    elseif e ~= self.total_iters then out[i] = g.lr
    else out[i] = g.lr * (1.0 / self.factor) end
  end
  return out
end

function optim.ConstantLR:_closed_form_lr()
  local out = {}
  local on = self.last_epoch >= self.total_iters and 1 or 0
  for i, b in ipairs(self.base_lrs) do out[i] = b * (self.factor + on * (1 - self.factor)) end
  return out
end

--- LinearLR(optimizer, start_factor = 1/3, end_factor = 1, total_iters = 5,
-- last_epoch = -1): the factor goes linearly from start_factor to
-- end_factor over total_iters epochs (torch's chainable form, step by step).
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 0.1)
-- local warmup = optim.LinearLR(opt, {start_factor = 0.25, total_iters = 3})   -- 0.025 up to 0.1 in 3 steps
-- for _ = 1, 3 do opt:step(); warmup:step() end
-- print(warmup:get_last_lr()[1])                             -- 0.1
optim.LinearLR = scheduler_class("LinearLR")
sched_ctor(optim.LinearLR, {"start_factor", "end_factor", "total_iters", "last_epoch"}, nil,
  function(cls, a, optimizer)
    local fn = "LinearLR"
    local sf = default(a.start_factor, 1.0 / 3)
    if type(sf) == "number" and sf == 0 then
      error(fn .. ": start_factor must be in (0, 1] (got 0): torch divides by it")
    end
    local self = setmetatable({start_factor = check_num(fn, "start_factor", sf, 0, 1),
      end_factor = check_num(fn, "end_factor", default(a.end_factor, 1.0), 0, 1),
      total_iters = check_int(fn, "total_iters", default(a.total_iters, 5), 1)}, cls)
    return scheduler_init(self, optimizer, a.last_epoch, fn)
  end)

--- scheduler:get_lr() of LinearLR: torch's chainable form.
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 1})
-- local s = optim.LinearLR(opt, 0.25, 1.0, 4)      -- from lr/4 to lr over 4 steps
-- print(s:get_last_lr()[1])                        -- 0.25
function optim.LinearLR:get_lr()
  local out, e = {}, self.last_epoch
  local sf, ef, n = self.start_factor, self.end_factor, self.total_iters
  for i, g in ipairs(self.optimizer.param_groups) do
    if e == 0 then out[i] = g.lr * sf
    elseif e > n then out[i] = g.lr
    else out[i] = g.lr * (1. + (ef - sf) / (n * sf + (e - 1) * (ef - sf))) end
  end
  return out
end

function optim.LinearLR:_closed_form_lr()
  local out = {}
  local sf, ef, n = self.start_factor, self.end_factor, self.total_iters
  for i, b in ipairs(self.base_lrs) do out[i] = b * (sf + (ef - sf) * math.min(n, self.last_epoch) / n) end
  return out
end

--- ExponentialLR(optimizer, gamma, last_epoch = -1): the rate times gamma
-- every epoch.
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 0.1)
-- local sched = optim.ExponentialLR(opt, 0.9)
-- for _ = 1, 2 do opt:step(); sched:step() end
-- print(sched:get_last_lr()[1])                              -- 0.1 * 0.9^2 = 0.081
optim.ExponentialLR = scheduler_class("ExponentialLR")
sched_ctor(optim.ExponentialLR, {"gamma", "last_epoch"}, nil, function(cls, a, optimizer)
  local self = setmetatable({gamma = check_num("ExponentialLR", "gamma", a.gamma)}, cls)
  return scheduler_init(self, optimizer, a.last_epoch, "ExponentialLR")
end)

--- scheduler:get_lr() of ExponentialLR: the groups' rates times gamma.
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 1})
-- local s = optim.ExponentialLR(opt, 0.5)
-- opt:step(); s:step()
-- print(s:get_last_lr()[1])                        -- 0.5
function optim.ExponentialLR:get_lr()
  local out = {}
  for i, g in ipairs(self.optimizer.param_groups) do out[i] = self.last_epoch == 0 and g.lr or g.lr * self.gamma end
  return out
end

function optim.ExponentialLR:_closed_form_lr()
  local out = {}
  for i, b in ipairs(self.base_lrs) do out[i] = b * self.gamma ^ self.last_epoch end
  return out
end

--- PolynomialLR(optimizer, total_iters = 5, power = 1, last_epoch = -1):
-- the rate decays as (1 - epoch / total_iters)^power until total_iters.
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 0.1)
-- local sched = optim.PolynomialLR(opt, 4, 2)               -- total_iters 4, power 2
-- for _ = 1, 2 do opt:step(); sched:step() end
-- print(sched:get_last_lr()[1])                              -- 0.1 * (1 - 2/4)^2 = 0.025
optim.PolynomialLR = scheduler_class("PolynomialLR")
sched_ctor(optim.PolynomialLR, {"total_iters", "power", "last_epoch"}, nil, function(cls, a, optimizer)
  local fn = "PolynomialLR"
  local self = setmetatable({total_iters = check_int(fn, "total_iters", default(a.total_iters, 5), 1),
    power = check_num(fn, "power", default(a.power, 1.0))}, cls)
  return scheduler_init(self, optimizer, a.last_epoch, fn)
end)

--- scheduler:get_lr() of PolynomialLR: torch's chainable form.
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 1})
-- local s = optim.PolynomialLR(opt, 4, 2.0)        -- total_iters 4, power 2
-- opt:step(); s:step()
-- print(s:get_last_lr()[1])                        -- 0.5625
function optim.PolynomialLR:get_lr()
  local out, e, n = {}, self.last_epoch, self.total_iters
  local f = (e == 0 or e > n) and 1 or ((1.0 - e / n) / (1.0 - (e - 1) / n)) ^ self.power
  for i, g in ipairs(self.optimizer.param_groups) do out[i] = (e == 0 or e > n) and g.lr or g.lr * f end
  return out
end

function optim.PolynomialLR:_closed_form_lr()
  local out, n = {}, self.total_iters
  for i, b in ipairs(self.base_lrs) do out[i] = b * (1.0 - math.min(n, self.last_epoch) / n) ^ self.power end
  return out
end

--- MultiplicativeLR(optimizer, lr_lambda, last_epoch = -1): the rate times
-- lr_lambda(epoch) every epoch after the first (one function, or a list
-- with one per parameter group).
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 0.1)
-- local sched = optim.MultiplicativeLR(opt, function(epoch) return 0.95 end)
-- for _ = 1, 2 do opt:step(); sched:step() end
-- print(sched:get_last_lr()[1])                              -- 0.1 * 0.95^2 = 0.09025
optim.MultiplicativeLR = scheduler_class("MultiplicativeLR")
sched_ctor(optim.MultiplicativeLR, {"lr_lambda", "last_epoch"}, {lr_lambda = true}, function(cls, a, optimizer)
  return lambda_new(cls, optimizer, a.lr_lambda, a.last_epoch, "MultiplicativeLR")
end)

--- scheduler:get_lr() of MultiplicativeLR: each group's rate times its
-- lr_lambda(epoch).
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 1})
-- local s = optim.MultiplicativeLR(opt, function() return 0.9 end)
-- opt:step(); s:step()
-- print(s:get_last_lr()[1])                        -- 0.9
function optim.MultiplicativeLR:get_lr()
  local out = {}
  for i, g in ipairs(self.optimizer.param_groups) do
    if self.last_epoch > 0 then
      local f = self.lr_lambdas[i](self.last_epoch)
      if type(f) ~= "number" then
        error(("MultiplicativeLR: lr_lambda returned a %s for epoch %s, expected a number"):format(type(f),
          tostring(self.last_epoch)))
      end
      out[i] = g.lr * f
    else
      out[i] = g.lr
    end
  end
  return out
end

--- CosineAnnealingLR(optimizer, T_max, eta_min = 0, last_epoch = -1):
-- cosine annealing from the initial rate to eta_min over T_max epochs
-- (and back up over the next T_max, as torch), computed with torch's
-- recursive (chainable) formula so the rates equal torch's bit for bit.
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 0.1)
-- local sched = optim.CosineAnnealingLR(opt, 10, 0.001)      -- T_max 10, eta_min 0.001
-- for _ = 1, 10 do opt:step(); sched:step() end
-- print(sched:get_last_lr()[1])                              -- 0.001 at epoch T_max
optim.CosineAnnealingLR = scheduler_class("CosineAnnealingLR")
sched_ctor(optim.CosineAnnealingLR, {"T_max", "eta_min", "last_epoch"}, nil, function(cls, a, optimizer)
  local fn = "CosineAnnealingLR"
  local T_max = check_num(fn, "T_max", a.T_max)
  if T_max == 0 then error(fn .. ": T_max must not be 0") end
  local self = setmetatable({T_max = T_max, eta_min = check_num(fn, "eta_min", default(a.eta_min, 0))}, cls)
  return scheduler_init(self, optimizer, a.last_epoch, fn)
end)

--- scheduler:get_lr() of CosineAnnealingLR: torch's chainable form.
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 0.1})
-- local s = optim.CosineAnnealingLR(opt, 10, 0.001)   -- T_max 10, eta_min 0.001
-- for _ = 1, 5 do opt:step(); s:step() end
-- print(s:get_last_lr()[1])                        -- 0.0505: half way down the cosine
function optim.CosineAnnealingLR:get_lr()
  local out, e, T, eta = {}, self.last_epoch, self.T_max, self.eta_min
  for i, g in ipairs(self.optimizer.param_groups) do
    local b = self.base_lrs[i]
    if e == 0 then
      out[i] = g.lr
    elseif self._step_count == 1 and e > 0 then
      out[i] = eta + (b - eta) * (1 + math.cos(e * math.pi / T)) / 2
    elseif (e - 1 - T) % (2 * T) == 0 then
      out[i] = g.lr + (b - eta) * (1 - math.cos(math.pi / T)) / 2
    else
      out[i] = (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T)) * (g.lr - eta) + eta
    end
  end
  return out
end

function optim.CosineAnnealingLR:_closed_form_lr()
  local out, eta = {}, self.eta_min
  for i, b in ipairs(self.base_lrs) do
    out[i] = eta + (b - eta) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
  end
  return out
end

--- CosineAnnealingWarmRestarts(optimizer, T_0, T_mult = 1, eta_min = 0,
-- last_epoch = -1): cosine annealing restarted after T_0 epochs, then
-- T_0 * T_mult, ...; step(epoch) takes fractional epochs (epoch + i /
-- iters within an epoch) as torch.
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 0.1)
-- local sched = optim.CosineAnnealingWarmRestarts(opt, 5, 2)  -- restarts after 5, then 10 epochs
-- for _ = 1, 5 do opt:step(); sched:step() end
-- print(sched:get_last_lr()[1])                              -- 0.1: the first restart
optim.CosineAnnealingWarmRestarts = scheduler_class("CosineAnnealingWarmRestarts")
sched_ctor(optim.CosineAnnealingWarmRestarts, {"T_0", "T_mult", "eta_min", "last_epoch"}, nil,
  function(cls, a, optimizer)
    local fn = "CosineAnnealingWarmRestarts"
    local last_epoch = check_int(fn, "last_epoch", default(a.last_epoch, -1), -1)
    local self = setmetatable({T_0 = check_int(fn, "T_0", a.T_0, 1), T_mult = check_int(fn, "T_mult",
      default(a.T_mult, 1), 1), eta_min = check_num(fn, "eta_min", default(a.eta_min, 0)), T_cur = last_epoch}, cls)
    self.T_i = self.T_0
    return scheduler_init(self, optimizer, last_epoch, fn)
  end)

--- scheduler:get_lr() of CosineAnnealingWarmRestarts: eta_min + (base -
-- eta_min) * (1 + cos(pi * T_cur / T_i)) / 2.
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 0.1})
-- local s = optim.CosineAnnealingWarmRestarts(opt, 4, 2)   -- T_0 4, T_mult 2
-- print(s:get_lr()[1])                           -- 0.1 at epoch 0
function optim.CosineAnnealingWarmRestarts:get_lr()
  local out, eta = {}, self.eta_min
  for i, b in ipairs(self.base_lrs) do
    out[i] = eta + (b - eta) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
  end
  return out
end

--- scheduler:step([epoch]) of CosineAnnealingWarmRestarts: one epoch on,
-- or to epoch (a number >= 0, fractional allowed).
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 0.1})
-- local s = optim.CosineAnnealingWarmRestarts(opt, 4)
-- for epoch = 1, 8 do opt:step(); s:step(epoch - 1 + 0.5) end   -- fractional epochs, as torch
-- print(s:get_last_lr()[1])                        -- 0.0038060233744357, as torch
function optim.CosineAnnealingWarmRestarts:step(epoch)
  local fn = "CosineAnnealingWarmRestarts:step"
  if epoch == nil and self.last_epoch < 0 then epoch = 0 end
  if epoch == nil then
    epoch = self.last_epoch + 1
    self.T_cur = self.T_cur + 1
    if self.T_cur >= self.T_i then
      self.T_cur = self.T_cur - self.T_i
      self.T_i = self.T_i * self.T_mult
    end
  else
    check_num(fn, "epoch", epoch)
    if epoch < 0 then error(("%s: expected a non-negative epoch, but got %s"):format(fn, tostring(epoch))) end
    local T_0, m = self.T_0, self.T_mult
    if epoch >= T_0 then
      if m == 1 then
        self.T_cur = epoch % T_0
      else
        -- Python's math.log(x, base) is log(x) / log(base) (Lua's uses log2 for base 2)
        local n = math.floor(math.log(epoch / T_0 * (m - 1) + 1) / math.log(m))
        self.T_cur = epoch - T_0 * (m ^ n - 1) / (m - 1)
        self.T_i = T_0 * (math.tointeger(m ^ n) or m ^ n)
      end
    else
      self.T_i = T_0
      self.T_cur = epoch
    end
  end
  self._step_count = self._step_count + 1
  self.last_epoch = math.floor(epoch)
  local values = self:get_lr()
  self._last_lr = {}
  for i, g in ipairs(self.optimizer.param_groups) do
    g.lr = values[i]
    self._last_lr[i] = g.lr
  end
end

-- A per-group list from a number or a list of one value per group.
local function per_group(fn, k, v, optimizer)
  local n = #optimizer.param_groups
  local out = {}
  if type(v) == "table" and getmetatable(v) == nil then
    if #v ~= n then error(("%s: expected %d values for %s, got %d"):format(fn, n, k, #v)) end
    for i = 1, n do out[i] = check_num(fn, ("%s[%d]"):format(k, i), v[i]) end
  else
    check_num(fn, k, v)
    for i = 1, n do out[i] = v end
  end
  return out
end

--- OneCycleLR(optimizer, max_lr, total_steps, epochs, steps_per_epoch,
-- pct_start = 0.3, anneal_strategy = "cos", cycle_momentum = true,
-- base_momentum = 0.85, max_momentum = 0.95, div_factor = 25,
-- final_div_factor = 1e4, three_phase = false, last_epoch = -1): the
-- 1cycle policy, stepped once per batch: the rate rises from max_lr /
-- div_factor to max_lr and anneals to initial / final_div_factor over
-- total_steps (or epochs * steps_per_epoch) steps, while the momentum
-- (SGD's momentum, Adam's betas[1]) cycles the other way.  Stepping past
-- total_steps raises, as torch.
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 0.1, 0.9)
-- local sched = optim.OneCycleLR(opt, 0.1, {epochs = 2, steps_per_epoch = 50})   -- step once per batch
-- for _ = 1, 29 do opt:step(); sched:step() end
-- print(sched:get_last_lr()[1])                              -- 0.1: the peak, 30% into the 100 steps
optim.OneCycleLR = scheduler_class("OneCycleLR")
sched_ctor(optim.OneCycleLR, {"max_lr", "total_steps", "epochs", "steps_per_epoch", "pct_start", "anneal_strategy",
  "cycle_momentum", "base_momentum", "max_momentum", "div_factor", "final_div_factor", "three_phase", "last_epoch"},
  {max_lr = true, base_momentum = true, max_momentum = true}, function(cls, a, optimizer)
    local fn = "OneCycleLR"
    check_optimizer(fn, optimizer)
    local total
    -- epochs and steps_per_epoch are checked even when total_steps wins (torch ignores them)
    if a.epochs ~= nil then check_int(fn, "epochs", a.epochs, 1) end
    if a.steps_per_epoch ~= nil then check_int(fn, "steps_per_epoch", a.steps_per_epoch, 1) end
    if a.total_steps == nil and a.epochs == nil and a.steps_per_epoch == nil then
      error(fn .. ": you must define either total_steps OR (epochs AND steps_per_epoch)")
    elseif a.total_steps ~= nil then
      total = check_int(fn, "total_steps", a.total_steps, 1)
    else
      total = check_int(fn, "epochs", a.epochs, 1) * check_int(fn, "steps_per_epoch", a.steps_per_epoch, 1)
    end
    local pct = check_num(fn, "pct_start", default(a.pct_start, 0.3), 0, 1)
    local strategy = default(a.anneal_strategy, "cos")
    if strategy ~= "cos" and strategy ~= "linear" then
      error(("%s: anneal_strategy must be \"cos\" or \"linear\" (got %s)"):format(fn, tostring(strategy)))
    end
    local three = default(a.three_phase, false)
    local cycle = default(a.cycle_momentum, true)
    if type(three) ~= "boolean" then error(fn .. ": three_phase must be a boolean") end
    if type(cycle) ~= "boolean" then error(fn .. ": cycle_momentum must be a boolean") end
    local div = check_num(fn, "div_factor", default(a.div_factor, 25.))
    local final_div = check_num(fn, "final_div_factor", default(a.final_div_factor, 1e4))
    local last_epoch = check_int(fn, "last_epoch", default(a.last_epoch, -1), -1)
    local phases
    if three then
      phases = {
        {end_step = pct * total - 1, start_lr = "initial_lr", end_lr = "max_lr", start_momentum = "max_momentum",
         end_momentum = "base_momentum"},
        {end_step = 2 * pct * total - 2, start_lr = "max_lr", end_lr = "initial_lr", start_momentum = "base_momentum",
         end_momentum = "max_momentum"},
        {end_step = total - 1, start_lr = "initial_lr", end_lr = "min_lr", start_momentum = "max_momentum",
         end_momentum = "max_momentum"},
      }
    else
      phases = {
        {end_step = pct * total - 1, start_lr = "initial_lr", end_lr = "max_lr", start_momentum = "max_momentum",
         end_momentum = "base_momentum"},
        {end_step = total - 1, start_lr = "max_lr", end_lr = "min_lr", start_momentum = "base_momentum",
         end_momentum = "max_momentum"},
      }
    end
    local max_lrs = per_group(fn, "max_lr", a.max_lr, optimizer)
    if last_epoch == -1 then
      for i, g in ipairs(optimizer.param_groups) do
        g.initial_lr = max_lrs[i] / div
        g.max_lr = max_lrs[i]
        g.min_lr = g.initial_lr / final_div
      end
    end
    local self = setmetatable({total_steps = total, _schedule_phases = phases, anneal_strategy = strategy,
      cycle_momentum = cycle}, cls)
    if cycle then
      local d = optimizer.defaults or {}
      if d.momentum == nil and d.betas == nil then
        error(fn .. ": optimizer must support momentum with the cycle_momentum option enabled")
      end
      self.use_beta1 = d.betas ~= nil
      local maxm = per_group(fn, "max_momentum", default(a.max_momentum, 0.95), optimizer)
      local basem = per_group(fn, "base_momentum", default(a.base_momentum, 0.85), optimizer)
      if last_epoch == -1 then
        for i, g in ipairs(optimizer.param_groups) do
          if self.use_beta1 then g.betas = {maxm[i], g.betas[2]} else g.momentum = maxm[i] end
          g.max_momentum, g.base_momentum = maxm[i], basem[i]
        end
      end
    end
    return scheduler_init(self, optimizer, last_epoch, fn)
  end)

local function anneal(strategy, start, stop, pct)
  if strategy == "cos" then return stop + (start - stop) / 2.0 * (math.cos(math.pi * pct) + 1) end
  return (stop - start) * pct + start
end

--- scheduler:get_lr() of OneCycleLR: the rates for the current step (and
-- sets each group's momentum or betas[1] when cycle_momentum).
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 0.1, momentum = 0.9})
-- local s = optim.OneCycleLR(opt, 1.0, {total_steps = 100})   -- max_lr 1.0
-- for _ = 1, 30 do opt:step(); s:step() end
-- print(s:get_last_lr()[1])                        -- at the top of the cycle
function optim.OneCycleLR:get_lr()
  local step = self.last_epoch
  if step > self.total_steps then
    error(("OneCycleLR: tried to step %s times. The specified number of total steps is %d"):format(
      tostring(math.tointeger(step + 1) or step + 1), self.total_steps))
  end
  local out, phases = {}, self._schedule_phases
  for gi, g in ipairs(self.optimizer.param_groups) do
    local start, lr, mom = 0, nil, nil
    for i, ph in ipairs(phases) do
      local stop = ph.end_step
      if step <= stop or i == #phases then
        local pct = (step - start) / (stop - start)
        lr = anneal(self.anneal_strategy, g[ph.start_lr], g[ph.end_lr], pct)
        if self.cycle_momentum then
          mom = anneal(self.anneal_strategy, g[ph.start_momentum], g[ph.end_momentum], pct)
        end
        break
      end
      start = stop
    end
    out[gi] = lr
    if self.cycle_momentum then
      if self.use_beta1 then g.betas = {mom, g.betas[2]} else g.momentum = mom end
    end
  end
  return out
end

-- Whether v is a scheduler of optimizer (any, when optimizer is nil).
local function check_schedulers(fn, list, optimizer)
  if type(list) ~= "table" or getmetatable(list) ~= nil or #list == 0 then
    error(fn .. ": schedulers must be a non-empty list of schedulers")
  end
  for i, s in ipairs(list) do
    if type(s) ~= "table" or rawget(s, "optimizer") == nil or type(s.step) ~= "function" then
      error(("%s: schedulers[%d] is not a scheduler"):format(fn, i))
    end
    if s.optimizer ~= (optimizer or list[1].optimizer) then
      error(("%s: all schedulers must belong to the same optimizer, but schedulers[%d] has another"):format(fn, i))
    end
  end
end

-- state_dict / load_state_dict of a scheduler holding others (_schedulers).
local function nested_state_dict(self)
  local sd = {}
  for k, v in pairs(self) do
    if k ~= "optimizer" and k ~= "_schedulers" then sd[k] = copy_value(v) end
  end
  sd._schedulers = {}
  for i, s in ipairs(self._schedulers) do sd._schedulers[i] = s:state_dict() end
  return sd
end
local function nested_load_state_dict(self, sd)
  local name = getmetatable(self).__name
  if type(sd) ~= "table" or type(sd._schedulers) ~= "table" or #sd._schedulers ~= #self._schedulers then
    error(("%s:load_state_dict: expected a table from state_dict() with %d schedulers"):format(name,
      #self._schedulers))
  end
  for k, v in pairs(sd) do
    if k ~= "_schedulers" then
      if rawget(self, k) == nil or k == "optimizer" then
        error(("%s:load_state_dict: unknown key '%s'"):format(name, tostring(k)))
      end
      if type(v) ~= type(rawget(self, k)) then
        error(("%s:load_state_dict: '%s' must be a %s (got %s)"):format(name, k, type(rawget(self, k)), type(v)))
      end
    end
  end
  for i, s in ipairs(self._schedulers) do s:load_state_dict(sd._schedulers[i]) end
  for k, v in pairs(sd) do if k ~= "_schedulers" then self[k] = copy_value(v) end end
end

--- SequentialLR(optimizer, schedulers, milestones, last_epoch = -1): runs
-- schedulers[1] until epoch milestones[1], then schedulers[2] (started
-- afresh with step(0)), and so on.  scheduler:step() takes no epoch.
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 0.1)
-- local warmup = optim.LinearLR(opt, {start_factor = 0.1, total_iters = 5})
-- local decay = optim.ExponentialLR(opt, 0.9)
-- local sched = optim.SequentialLR(opt, {warmup, decay}, {5})   -- warm up for 5 epochs, then decay
-- for _ = 1, 6 do opt:step(); sched:step() end
-- print(sched:get_last_lr()[1])                              -- 0.09
optim.SequentialLR = scheduler_class("SequentialLR")
sched_ctor(optim.SequentialLR, {"schedulers", "milestones", "last_epoch"}, {schedulers = true, milestones = true},
  function(cls, a, optimizer)
    local fn = "SequentialLR"
    check_optimizer(fn, optimizer)
    check_schedulers(fn, a.schedulers, optimizer)
    local ms = a.milestones
    if type(ms) ~= "table" or getmetatable(ms) ~= nil then error(fn .. ": milestones must be a list of epochs") end
    if #ms ~= #a.schedulers - 1 then
      error(("%s: expects one milestone fewer than schedulers, but got %d schedulers and %d milestones"):format(fn,
        #a.schedulers, #ms))
    end
    local milestones = {}
    for i, m in ipairs(ms) do milestones[i] = check_int(fn, ("milestones[%d]"):format(i), m) end
    local last_epoch = check_int(fn, "last_epoch", default(a.last_epoch, -1), -1)
    local self = setmetatable({optimizer = optimizer, _schedulers = {}, _milestones = milestones,
      last_epoch = last_epoch + 1}, cls)
    for i, s in ipairs(a.schedulers) do self._schedulers[i] = s end
    for _, g in ipairs(optimizer.param_groups) do g.lr = g.initial_lr end
    for _, s in ipairs(self._schedulers) do s.last_epoch = s.last_epoch - 1 end
    local first = self._schedulers[1]
    first._step_count = 0
    first:step()
    self._last_lr = first:get_last_lr()
    return self
  end)

--- scheduler:step() of SequentialLR: one epoch on, in the scheduler whose
-- span holds it.
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 1})
-- -- warm up at lr/10 for 2 steps, then decay by 0.9 a step
-- local s = optim.SequentialLR(opt, {optim.ConstantLR(opt, 0.1, 2), optim.ExponentialLR(opt, 0.9)}, {2})
-- for _ = 1, 4 do opt:step(); s:step() end
-- print(s:get_last_lr()[1])                        -- 0.81: 0.9^2 after the warm-up
function optim.SequentialLR:step(...)
  if select("#", ...) > 0 then error("SequentialLR:step: takes no epoch (torch's neither)") end
  self.last_epoch = self.last_epoch + 1
  local idx = 0
  for _, m in ipairs(self._milestones) do if m <= self.last_epoch then idx = idx + 1 end end
  local s = self._schedulers[idx + 1]
  if idx > 0 and self._milestones[idx] == self.last_epoch then s:step(0) else s:step() end
  self._last_lr = s:get_last_lr()
end

--- scheduler:state_dict() of SequentialLR: its counters and one state_dict per
-- scheduler it holds (in _schedulers).
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 1})
-- local s = optim.SequentialLR(opt, {optim.ConstantLR(opt, 0.1, 2), optim.ExponentialLR(opt, 0.9)}, {2})
-- local sd = s:state_dict()
function optim.SequentialLR:state_dict() return nested_state_dict(self) end

--- scheduler:load_state_dict(sd) of SequentialLR: restores what state_dict
-- gave, each held scheduler from its own entry.
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 1})
-- local s = optim.SequentialLR(opt, {optim.ConstantLR(opt, 0.1, 2), optim.ExponentialLR(opt, 0.9)}, {2})
-- local saved = s:state_dict()
-- opt:step(); s:step()
-- s:load_state_dict(saved)
function optim.SequentialLR:load_state_dict(sd) return nested_load_state_dict(self, sd) end

--- ChainedScheduler(schedulers): steps every scheduler of the list (all of
-- one optimizer) at each step, so their factors multiply.
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 1)
-- local sched = optim.ChainedScheduler({optim.ConstantLR(opt, 0.1, 2), optim.ExponentialLR(opt, 0.9)})
-- opt:step(); sched:step()
-- print(sched:get_last_lr()[1])                              -- 1 * 0.1 * 0.9 = 0.09
optim.ChainedScheduler = scheduler_class("ChainedScheduler")
setmetatable(optim.ChainedScheduler, {__index = Scheduler, __call = function(cls, ...)
  local a = torch_args("ChainedScheduler", {"schedulers"}, nil, {schedulers = true}, ...)
  check_schedulers("ChainedScheduler", a.schedulers)
  local self = setmetatable({_schedulers = {}, optimizer = a.schedulers[1].optimizer}, cls)
  for i, s in ipairs(a.schedulers) do self._schedulers[i] = s end
  self._last_lr = {}
  for i, g in ipairs(self.optimizer.param_groups) do self._last_lr[i] = g.lr end
  return self
end})

--- scheduler:step() of ChainedScheduler: steps each scheduler in order.
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 1})
-- local s = optim.ChainedScheduler({optim.ConstantLR(opt, 0.5, 2), optim.ExponentialLR(opt, 0.9)})
-- for _ = 1, 3 do opt:step(); s:step() end      -- each scheduler steps in turn
-- print(s:get_last_lr()[1])                        -- 0.729: 0.9^3, the 0.5 over after 2 steps
function optim.ChainedScheduler:step(...)
  if select("#", ...) > 0 then error("ChainedScheduler:step: takes no epoch (torch's neither)") end
  for _, s in ipairs(self._schedulers) do s:step() end
  self._last_lr = {}
  for i, g in ipairs(self.optimizer.param_groups) do self._last_lr[i] = g.lr end
end

--- scheduler:state_dict() of ChainedScheduler: its counters and one state_dict per
-- scheduler it holds (in _schedulers).
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 1})
-- local s = optim.ChainedScheduler({optim.ExponentialLR(opt, 0.9)})
-- local sd = s:state_dict()                      -- every scheduler's state
function optim.ChainedScheduler:state_dict() return nested_state_dict(self) end

--- scheduler:load_state_dict(sd) of ChainedScheduler: restores what state_dict
-- gave, each held scheduler from its own entry.
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 1})
-- local s = optim.ChainedScheduler({optim.ConstantLR(opt, 0.5, 2), optim.ExponentialLR(opt, 0.9)})
-- s:step()
-- local saved = s:state_dict()
-- s:step()
-- s:load_state_dict(saved)                        -- back to the saved step
function optim.ChainedScheduler:load_state_dict(sd) return nested_load_state_dict(self, sd) end

--- ReduceLROnPlateau(optimizer, mode = "min", factor = 0.1, patience = 10,
-- threshold = 1e-4, threshold_mode = "rel", cooldown = 0, min_lr = 0,
-- eps = 1e-8): scheduler:step(metric) multiplies the rates by factor
-- (not below min_lr, a number or one per group) once the metric (a
-- number or a 0-d tensor) has not improved for more than patience steps.
-- @usage
-- local opt = optim.SGD(nn.Linear(4, 2):parameters(), 0.1)
-- local sched = optim.ReduceLROnPlateau(opt, "min", 0.5, 2)  -- halve after 2 epochs without progress
-- for _, val_loss in ipairs({1.0, 0.9, 0.9, 0.9, 0.9}) do sched:step(val_loss) end
-- print(opt.param_groups[1].lr)                              -- 0.05
optim.ReduceLROnPlateau = scheduler_class("ReduceLROnPlateau")
sched_ctor(optim.ReduceLROnPlateau, {"mode", "factor", "patience", "threshold", "threshold_mode", "cooldown",
  "min_lr", "eps"}, {min_lr = true}, function(cls, a, optimizer)
  local fn = "ReduceLROnPlateau"
  local factor = check_num(fn, "factor", default(a.factor, 0.1))
  if factor >= 1.0 then error(fn .. ": factor should be < 1.0 (got " .. tostring(factor) .. ")") end
  check_optimizer(fn, optimizer)
  local mode, tmode = default(a.mode, "min"), default(a.threshold_mode, "rel")
  if mode ~= "min" and mode ~= "max" then error(("%s: mode must be \"min\" or \"max\" (got %s)"):format(fn,
    tostring(mode))) end
  if tmode ~= "rel" and tmode ~= "abs" then error(("%s: threshold_mode must be \"rel\" or \"abs\" (got %s)"):format(fn,
    tostring(tmode))) end
  local self = setmetatable({optimizer = optimizer, factor = factor,
    min_lrs = per_group(fn, "min_lr", default(a.min_lr, 0), optimizer),
    patience = check_int(fn, "patience", default(a.patience, 10), 0),
    cooldown = check_int(fn, "cooldown", default(a.cooldown, 0), 0),
    threshold = check_num(fn, "threshold", default(a.threshold, 1e-4)), mode = mode, threshold_mode = tmode,
    eps = check_num(fn, "eps", default(a.eps, 1e-8)), last_epoch = 0, cooldown_counter = 0, num_bad_epochs = 0,
    mode_worse = mode == "min" and math.huge or -math.huge}, cls)
  self.best = self.mode_worse
  self._last_lr = {}
  for i, g in ipairs(optimizer.param_groups) do self._last_lr[i] = g.lr end
  return self
end)

function optim.ReduceLROnPlateau:_is_better(x, best)
  local t = self.threshold
  if self.mode == "min" then
    if self.threshold_mode == "rel" then return x < best * (1. - t) end
    return x < best - t
  end
  if self.threshold_mode == "rel" then return x > best * (t + 1.) end
  return x > best + t
end

--- scheduler:step(metric [, epoch]) of ReduceLROnPlateau: records the
-- metric (a number or a one-element tensor) and reduces the rates after
-- more than patience steps without improvement.
-- @usage
-- local opt = optim.SGD({nn.Parameter(attn.ones(1))}, {lr = 1})
-- local s = optim.ReduceLROnPlateau(opt, {patience = 1, factor = 0.5})
-- for _, val_loss in ipairs({1.0, 1.0, 1.0}) do s:step(val_loss) end   -- no improvement
-- print(opt.param_groups[1].lr)                    -- 0.5
function optim.ReduceLROnPlateau:step(metric, epoch)
  local fn = "ReduceLROnPlateau:step"
  if attn.is_tensor(metric) then metric = metric:item() end
  if type(metric) ~= "number" then
    error(("%s: expected the metric (a number or a one-element tensor), got %s"):format(fn, type(metric)))
  end
  if epoch == nil then epoch = self.last_epoch + 1 else check_num(fn, "epoch", epoch) end
  self.last_epoch = epoch
  if self:_is_better(metric, self.best) then
    self.best = metric
    self.num_bad_epochs = 0
  else
    self.num_bad_epochs = self.num_bad_epochs + 1
  end
  if self.cooldown_counter > 0 then
    self.cooldown_counter = self.cooldown_counter - 1
    self.num_bad_epochs = 0
  end
  if self.num_bad_epochs > self.patience then
    for i, g in ipairs(self.optimizer.param_groups) do
      local old = g.lr
      local new = math.max(old * self.factor, self.min_lrs[i])
      if old - new > self.eps then g.lr = new end
    end
    self.cooldown_counter = self.cooldown
    self.num_bad_epochs = 0
  end
  self._last_lr = {}
  for i, g in ipairs(self.optimizer.param_groups) do self._last_lr[i] = g.lr end
end

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
-- total norm as a 0-d tensor (0 when no parameter has a grad).  The
-- arguments after parameters go in torch's order or in a trailing options
-- table: clip_grad_norm_(ps, 0.6, {norm_type = math.huge}).
-- @usage
-- local model = nn.Linear(4, 1)
-- model(attn.randn(8, 4)):sum():backward()
-- local total = optim.clip_grad_norm_(model:parameters(), 1.0)   -- the norm before clipping
-- print(total)                                   -- tensor(10.3219); the grads now have norm 1
function optim.clip_grad_norm_(parameters, ...)
  local fn = "clip_grad_norm_"
  local a = torch_args(fn, {"max_norm", "norm_type", "error_if_nonfinite"}, nil, {}, ...)
  local max_norm, norm_type, error_if_nonfinite = a.max_norm, a.norm_type, a.error_if_nonfinite
  if type(max_norm) ~= "number" then error(("%s: max_norm must be a number (got %s)"):format(fn, type(max_norm)), 2) end
  if norm_type == nil then norm_type = 2 end
  if error_if_nonfinite ~= nil and type(error_if_nonfinite) ~= "boolean" then
    error(fn .. ": error_if_nonfinite must be a boolean", 2)
  end
  if norm_type == "inf" then norm_type = math.huge end
  if type(norm_type) ~= "number" then
    error(("%s: norm_type must be a number, math.huge or \"inf\" (got %s)"):format(fn, type(norm_type)), 2)
  end
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
-- to [-clip_value, clip_value] (clip_value positional or {clip_value = }).
-- @usage
-- local w = nn.Parameter(attn.ones(3))
-- w:mul(10):sum():backward()
-- optim.clip_grad_value_({w}, 0.5)
-- print(w.grad)                                    -- tensor([0.5000, 0.5000, 0.5000])
function optim.clip_grad_value_(parameters, ...)
  local clip_value = torch_args("clip_grad_value_", {"clip_value"}, nil, {}, ...).clip_value
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

-- torch's signatures (attn/signature.lua), after the guards: the wrappers of
-- step/zero_grad call the guarded methods
do
  local signature = require("attn.signature")
  signature.declare(Optimizer, "optim.Optimizer.", {state_dict = false, load_state_dict = false,
    add_param_group = false})
  signature.declare(Scheduler, "optim.LRScheduler.", {get_lr = false, get_last_lr = false, state_dict = false,
    load_state_dict = false})
  for _, name in ipairs({"ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "ExponentialLR",
    "LambdaLR", "LinearLR", "MultiStepLR", "MultiplicativeLR", "OneCycleLR", "PolynomialLR", "StepLR"}) do
    signature.declare(optim[name], "optim." .. name .. ".", {get_lr = false})
  end
  -- torch's SequentialLR.step(self) and ChainedScheduler.step(self)
  for _, name in ipairs({"SequentialLR", "ChainedScheduler"}) do
    signature.declare(optim[name], "optim." .. name .. ".", {state_dict = false, load_state_dict = false,
      step = false})
  end
  signature.declare(optim, "optim.", {clip_grad_value_ = false, noam_rate = false,
    -- torch's foreach= is not taken; the function reads both forms itself
    clip_grad_norm_ = "native: parameters, max_norm, norm_type=2.0, error_if_nonfinite=false"})
  -- attn's default set_to_none is torch 2's (true)
  signature.declare(Optimizer, "optim.Optimizer.", {zero_grad = "self, set_to_none=true", step = "self, closure=nil"})
  signature.declare(Scheduler, "optim.LRScheduler.", {step = "self, epoch=nil"})
  signature.declare(optim.CosineAnnealingWarmRestarts, "optim.CosineAnnealingWarmRestarts.", {step = "self, epoch=nil"})
  signature.declare(optim.ReduceLROnPlateau, "optim.ReduceLROnPlateau.", {step = "self, metrics, epoch=nil"})
  -- the optimizers read torch's positional order and an options table themselves (torch_args);
  -- torch's foreach/capturable/differentiable/fused are not taken
  signature.declare(optim.SGD, "optim.SGD.", {new = "native: params, lr, momentum=0, dampening=0, weight_decay=0, "
    .. "nesterov=false, *, maximize=false"})
  signature.declare(optim.Adam, "optim.Adam.", {new = "native: params, lr=0.001, betas=(0.9;0.999), eps=1e-08, "
    .. "weight_decay=0, amsgrad=false, *, maximize=false"})
  signature.declare(optim.AdamW, "optim.AdamW.", {new = "native: params, lr=0.001, betas=(0.9;0.999), eps=1e-08, "
    .. "weight_decay=0.01, amsgrad=false, *, maximize=false"})
  signature.declare(optim.RMSprop, "optim.RMSprop.", {new = "native: params, lr=0.01, alpha=0.99, eps=1e-08, "
    .. "weight_decay=0, momentum=0, centered=false, *, maximize=false"})
end

return optim
