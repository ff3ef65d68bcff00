-- SPDX-License-Identifier: MIT

--- attn.losses: torch.nn's loss modules (PyTorch 1.13) over attn.F's
-- losses.  Reachable as attn.nn.<Name> (attn.nn loads this file on the
-- first lookup) and as attn.losses.<Name>.
--
--   CrossEntropyLoss([weight] [, {weight=, ignore_index = -100,
--                    reduction = "mean", label_smoothing = 0}])
--   NLLLoss([weight] [, {weight=, ignore_index = -100, reduction=}])
--   KLDivLoss([{reduction = "mean", log_target = false}])  reduction may
--                    also be "batchmean" (sum / batch size: the KL
--                    divergence; "mean" divides by every element, as torch)
--   MSELoss, L1Loss, BCELoss([weight] [, {reduction=}])
--   SmoothL1Loss([{reduction=, beta = 1.0}]), HuberLoss([{reduction=,
--                    delta = 1.0}])
--   BCEWithLogitsLoss([weight] [, {weight=, reduction=, pos_weight=}])
--
-- loss(input, target) -> the loss (a 0-d tensor unless reduction = "none").
-- Options are torch's keyword arguments in a table; a tensor as the first
-- argument is the weight (torch's first positional argument).  torch's
-- deprecated size_average and reduce are accepted and mapped to reduction
-- as torch does.  weight and pos_weight are buffers (torch's
-- register_buffer), so they appear in the state_dict when given.
--
-- Class targets are 1-based class numbers (torch's 0-based ids + 1).
-- ignore_index is compared with the target values as given: the default
-- -100 is no class number, so -100 padding targets written by a torch
-- program are skipped unchanged; a real class given as ignore_index is
-- 1-based like the targets (torch's ignore_index = 0 for pad id 0 becomes
-- ignore_index = 1).
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
local nn = require "attn.nn.module"
local F = require "attn.functional"

local M = {}

local is_tensor = attn.is_tensor

local reductions = {mean = true, sum = true, none = true}

-- torch's legacy_get_string(size_average, reduce)
local function legacy_reduction(size_average, reduce, fn)
  for name, v in pairs({size_average = size_average, reduce = reduce}) do
    if v ~= nil and type(v) ~= "boolean" then
      error(("%s: %s must be a boolean (got %s)"):format(fn, name, type(v)), 5)
    end
  end
  if size_average == nil then size_average = true end
  if reduce == nil then reduce = true end
  if not reduce then return "none" end
  return size_average and "mean" or "sum"
end

-- The constructor's arguments in torch's order (order: their names)
-- and/or a trailing options table -> one options table, checked (the
-- classes are declared "native" in attn/signature.lua).
local function parse(fn, order, ...)
  local opts = attn._misuse.merge_options(fn, order, ...)
  local known = {}
  for _, k in ipairs(order) do known[k] = true end
  local r = opts.reduction
  if r == nil then r = "mean" end
  if not (reductions[r] or (known.log_target and r == "batchmean")) then
    error(("%s: reduction must be \"mean\", \"sum\"%s or \"none\" (got %s)"):format(fn,
      known.log_target and ", \"batchmean\"" or "", tostring(r)), 4)
  end
  -- as in torch, the deprecated arguments replace reduction when given
  if opts.size_average ~= nil or opts.reduce ~= nil then
    r = legacy_reduction(opts.size_average, opts.reduce, fn)
  end
  opts.reduction = r
  return opts
end

local function buffer(self, fn, name, v)
  if v ~= nil then
    if type(v) == "table" and not is_tensor(v) and getmetatable(v) == nil then
      local ok, t = pcall(attn.tensor, v)
      if not ok then error(("%s: %s: %s"):format(fn, name, tostring(t):gsub("^[^:]*:%d+: ", "")), 4) end
      v = t
    elseif not is_tensor(v) then
      error(("%s: %s must be a tensor (got %s)"):format(fn, name, type(v)), 4)
    end
    -- a closed tensor raises here, at construction, not at the first loss
    local ok, err = pcall(v.dim, v)
    if not ok then error(("%s: %s: %s"):format(fn, name, tostring(err):gsub("^[^:]*:%d+: ", "")), 4) end
  end
  self:register_buffer(name, v)
end

--------------------------------------------------------------------------
-- Class losses

local CrossEntropyLoss = nn.Module:extend("CrossEntropyLoss")
M.CrossEntropyLoss = CrossEntropyLoss

--- CrossEntropyLoss([weight] [, opts]): the cross entropy of logits
-- against class numbers or class probabilities, log_softmax over the class
-- dim then the negative log-likelihood (F.cross_entropy); forward takes
-- input [N, C], [C] or [N, C, d...] and target (see forward).
-- torch.nn.CrossEntropyLoss.  opts: weight (a [C] tensor of class weights,
-- also accepted as the first argument; a buffer), ignore_index (default
-- -100; compared with the targets as given, so a real class is 1-based),
-- reduction ("mean", "sum" or "none"), label_smoothing (0..1), and torch's
-- deprecated size_average/reduce.  Unknown options raise.
-- @usage
-- local loss_fn = nn.CrossEntropyLoss({ignore_index = 1, label_smoothing = 0.1})   -- class 1: padding
-- local logits = attn.tensor({{0.0, 2.0, 0.0}, {1.0, 0.0, 0.0}, {0.0, 0.0, 3.0}})
-- print(loss_fn(logits, attn.tensor({2, 1, 3})))      -- tensor(0.3339): the mean over the 2 rows kept
function CrossEntropyLoss:init(...)
  local fn = "CrossEntropyLoss"
  local o = parse(fn, {"weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing"}, ...)
  local ig = o.ignore_index
  if ig == nil then ig = -100 end
  if not (type(ig) == "number" and math.tointeger(ig)) then
    error(("%s: ignore_index must be an integer (got %s)"):format(fn, tostring(ig)), 3)
  end
  local ls = o.label_smoothing
  if ls == nil then ls = 0.0 end
  if type(ls) ~= "number" or not (ls >= 0 and ls <= 1) then
    error(("%s: label_smoothing must be between 0.0 and 1.0 (got %s)"):format(fn, tostring(ls)), 3)
  end
  buffer(self, fn, "weight", o.weight)
  self.ignore_index = math.tointeger(ig)
  self.reduction = o.reduction
  self.label_smoothing = ls
end


--- loss(input [N, C] | [C] | [N, C, d...] logits, target class numbers
-- (1-based) or class probabilities of input's shape)
-- @usage
-- local loss_fn = nn.CrossEntropyLoss()
-- local loss = loss_fn(attn.randn(4, 5), attn.tensor({1, 2, 5, 3}))   -- logits, 1-based classes
-- print(loss)
function CrossEntropyLoss:forward(input, target)
  return F.cross_entropy(input, target, {weight = self.weight, ignore_index = self.ignore_index,
                                         reduction = self.reduction, label_smoothing = self.label_smoothing})
end

local NLLLoss = nn.Module:extend("NLLLoss")
M.NLLLoss = NLLLoss

--- NLLLoss([weight] [, opts]): the negative log-likelihood loss,
-- -input[n][target[n]] (times the class weight) reduced, for
-- log-probabilities input [N, C], [C] or [N, C, d...] and 1-based class
-- numbers target (F.nll_loss).
-- torch.nn.NLLLoss.  opts: weight ([C], or the first argument; a buffer),
-- ignore_index (default -100; 1-based for a real class), reduction
-- ("mean", "sum", "none"), size_average/reduce (deprecated, as torch).
-- @usage
-- local loss_fn = nn.NLLLoss({weight = attn.tensor({1.0, 2.0, 1.0})})   -- class weights
-- local logp = F.log_softmax(attn.randn(4, 3), -1)
-- print(loss_fn(logp, attn.tensor({1, 2, 3, 2})))
function NLLLoss:init(...)
  local fn = "NLLLoss"
  local o = parse(fn, {"weight", "size_average", "ignore_index", "reduce", "reduction"}, ...)
  local ig = o.ignore_index
  if ig == nil then ig = -100 end
  if not (type(ig) == "number" and math.tointeger(ig)) then
    error(("%s: ignore_index must be an integer (got %s)"):format(fn, tostring(ig)), 3)
  end
  buffer(self, fn, "weight", o.weight)
  self.ignore_index = math.tointeger(ig)
  self.reduction = o.reduction
end


--- loss(input log-probabilities [N, C] | [C] | [N, C, d...], target class
-- numbers (1-based))
function NLLLoss:forward(input, target)
  return F.nll_loss(input, target, {weight = self.weight, ignore_index = self.ignore_index,
                                    reduction = self.reduction})
end

--------------------------------------------------------------------------
-- Distribution and regression losses

local KLDivLoss = nn.Module:extend("KLDivLoss")
M.KLDivLoss = KLDivLoss

--- KLDivLoss([opts]): the Kullback-Leibler divergence loss(input, target)
-- with input log-probabilities, elementwise target * (log target - input),
-- reduced (F.kl_div).  torch.nn.KLDivLoss.
-- opts: reduction ("mean" over every element as torch, "batchmean" for
-- the KL divergence per batch item, "sum", "none"), log_target (false:
-- target holds probabilities; true: log-probabilities), size_average/reduce.
-- @usage
-- local loss_fn = nn.KLDivLoss({reduction = "batchmean", log_target = true})
-- local log_p = attn.tensor({{0.3, 0.7}}):log()
-- print(loss_fn(log_p, attn.tensor({{0.5, 0.5}}):log()))   -- tensor(0.0872)
function KLDivLoss:init(...)
  local fn = "KLDivLoss"
  local o = parse(fn, {"size_average", "reduce", "reduction", "log_target"}, ...)
  if o.log_target ~= nil and type(o.log_target) ~= "boolean" then
    error(("%s: log_target must be a boolean (got %s)"):format(fn, type(o.log_target)), 3)
  end
  self.reduction = o.reduction
  self.log_target = o.log_target == true
end


--- loss(input log-probabilities, target probabilities (log-probabilities
-- with log_target))
function KLDivLoss:forward(input, target)
  return F.kl_div(input, target, {reduction = self.reduction, log_target = self.log_target})
end

local function simple(name, fname, order, extra)
  local cls = nn.Module:extend(name)
  M[name] = cls
  function cls:init(...)
    local o = parse(name, order, ...)
    self.reduction = o.reduction
    if extra then
      local v = o[extra[1]]
      if v == nil then v = extra[2] end
      if type(v) ~= "number" or v ~= v or v < 0 or (extra[3] and v == 0) then
        error(("%s: %s must be a %s number (got %s)"):format(name, extra[1],
          extra[3] and "positive" or "non-negative", tostring(v)), 3)
      end
      self[extra[1]] = v
    end
  end
  local f = F[fname]
  if extra then
    local key = extra[1]
    function cls:forward(input, target)
      return f(input, target, {reduction = self.reduction, [key] = self[key]})
    end
  else
    function cls:forward(input, target)
      return f(input, target, {reduction = self.reduction})
    end
  end
  return cls
end

--- MSELoss([opts]): the mean (or sum, or none) of (input - target)^2 over
-- attn.F.mse_loss.  torch.nn.MSELoss.
-- @table MSELoss
simple("MSELoss", "mse_loss", {"size_average", "reduce", "reduction"})

--- L1Loss([opts]): |input - target| reduced, over attn.F.l1_loss.
-- torch.nn.L1Loss.
-- @table L1Loss
simple("L1Loss", "l1_loss", {"size_average", "reduce", "reduction"})

--- SmoothL1Loss([opts]): attn.F.smooth_l1_loss, quadratic below beta and
-- linear above.  torch.nn.SmoothL1Loss.  opts adds beta (default 1.0, >= 0).
-- @table SmoothL1Loss
simple("SmoothL1Loss", "smooth_l1_loss", {"size_average", "reduce", "reduction", "beta"}, {"beta", 1.0})

--- HuberLoss([opts]): attn.F.huber_loss (SmoothL1 scaled by delta).
-- torch.nn.HuberLoss.  opts adds delta (default 1.0, > 0).
-- @table HuberLoss
simple("HuberLoss", "huber_loss", {"reduction", "delta"}, {"delta", 1.0, true})

--- MSELoss:init([size_average [, reduce [, reduction = "mean"]]]), called by
-- `nn.MSELoss(...)`: the mean squared error loss(input, target), the
-- elementwise (input - target)^2 averaged ("mean"), summed ("sum") or
-- kept ("none") (F.mse_loss).  torch.nn.MSELoss.  The arguments come in
-- torch's order or in one table (`nn.MSELoss{reduction = "sum"}`); torch's
-- deprecated size_average/reduce map to reduction; unknown options raise.
-- @usage
-- local loss_fn = nn.MSELoss()
-- print(loss_fn(attn.tensor({1.0, 2.0}), attn.tensor({0.0, 4.0})))   -- tensor(2.5000)
-- @function MSELoss:init

--- MSELoss:forward(input, target): F.mse_loss(input, target, {reduction =
-- self.reduction}); input and target of one shape (they broadcast).
-- @treturn Tensor 0-d, or the broadcast shape with reduction "none"
-- @function MSELoss:forward

--- L1Loss:init([size_average [, reduce [, reduction = "mean"]]]), called by
-- `nn.L1Loss(...)`: the mean absolute error loss(input, target), the
-- elementwise |input - target| averaged ("mean"), summed ("sum") or kept
-- ("none") (F.l1_loss).  torch.nn.L1Loss.  The arguments come in torch's
-- order or in one table (`nn.L1Loss{reduction = "sum"}`); torch's
-- deprecated size_average/reduce map to reduction; unknown options raise.
-- @usage
-- local loss_fn = nn.L1Loss({reduction = "sum"})
-- print(loss_fn(attn.tensor({1.0, 2.0}), attn.tensor({0.0, 0.0})))   -- tensor(3.)
-- @function L1Loss:init

--- L1Loss:forward(input, target): F.l1_loss(input, target, {reduction =
-- self.reduction}).
-- @treturn Tensor 0-d, or the broadcast shape with reduction "none"
-- @function L1Loss:forward

--- SmoothL1Loss:init([size_average [, reduce [, reduction = "mean"
-- [, beta = 1.0]]]]), called by `nn.SmoothL1Loss(...)`: with
-- z = |input - target| elementwise, 0.5 z^2 / beta where z < beta and
-- z - 0.5 beta elsewhere (beta = 0 is the L1 loss), then reduced as
-- reduction says (F.smooth_l1_loss).  torch.nn.SmoothL1Loss.  The
-- arguments come in torch's order or in one table
-- (`nn.SmoothL1Loss{beta = 0.5}`); beta must be a non-negative number,
-- else an error; unknown options raise.
-- @usage
-- local loss_fn = nn.SmoothL1Loss({beta = 0.5})
-- print(loss_fn(attn.tensor({0.0, 2.0}), attn.tensor({0.1, 0.0})))   -- tensor(0.8800)
-- @function SmoothL1Loss:init

--- SmoothL1Loss:forward(input, target): F.smooth_l1_loss(input, target,
-- {reduction =, beta =}) with the stored options.
-- @treturn Tensor 0-d, or the broadcast shape with reduction "none"
-- @function SmoothL1Loss:forward

--- HuberLoss:init([reduction = "mean" [, delta = 1.0]]), called by
-- `nn.HuberLoss(...)`: with z = |input - target| elementwise, 0.5 z^2
-- where z < delta and delta * (z - 0.5 delta) elsewhere (SmoothL1Loss with
-- beta = delta, times delta), then reduced as reduction says
-- (F.huber_loss).  torch.nn.HuberLoss.  The arguments come in torch's
-- order or in one table (`nn.HuberLoss{delta = 0.5}`); delta must be a
-- positive number, else an error; unknown options raise.
-- @usage
-- local loss_fn = nn.HuberLoss({delta = 0.5})
-- print(loss_fn(attn.tensor({0.0, 2.0}), attn.tensor({0.1, 0.0})))   -- tensor(0.4400)
-- @function HuberLoss:init

--- HuberLoss:forward(input, target): F.huber_loss(input, target,
-- {reduction =, delta =}) with the stored options.
-- @treturn Tensor 0-d, or the broadcast shape with reduction "none"
-- @function HuberLoss:forward

--------------------------------------------------------------------------
-- Binary losses

local BCELoss = nn.Module:extend("BCELoss")
M.BCELoss = BCELoss

--- BCELoss([weight] [, opts]): the binary cross entropy of probabilities
-- input against targets in [0, 1] of the same shape,
-- -(t log p + (1 - t) log(1 - p)) elementwise, reduced
-- (F.binary_cross_entropy).
-- torch.nn.BCELoss.  opts: weight (a tensor broadcast with the input,
-- weighing each element; also the first argument; a buffer), reduction,
-- size_average/reduce.
-- @usage
-- local loss_fn = nn.BCELoss()
-- local probs = attn.tensor({0.9, 0.2})
-- print(loss_fn(probs, attn.tensor({1.0, 0.0})))   -- tensor(0.1643)
function BCELoss:init(...)
  local o = parse("BCELoss", {"weight", "size_average", "reduce", "reduction"}, ...)
  buffer(self, "BCELoss", "weight", o.weight)
  self.reduction = o.reduction
end


--- loss(input probabilities, target of the same shape)
function BCELoss:forward(input, target)
  return F.binary_cross_entropy(input, target, {weight = self.weight, reduction = self.reduction})
end

local BCEWithLogitsLoss = nn.Module:extend("BCEWithLogitsLoss")
M.BCEWithLogitsLoss = BCEWithLogitsLoss

--- BCEWithLogitsLoss([weight] [, opts]): the binary cross entropy of
-- logits (a sigmoid then BCELoss, computed stably in one step) against
-- targets of the same shape (F.binary_cross_entropy_with_logits).
-- torch.nn.BCEWithLogitsLoss.  opts: weight (per element, broadcast; also
-- the first argument), pos_weight (per class, along the last dim), both
-- buffers; reduction, size_average/reduce.
-- @usage
-- local loss_fn = nn.BCEWithLogitsLoss({pos_weight = attn.tensor({3.0})})   -- positives weigh 3x
-- print(loss_fn(attn.tensor({0.5, -1.0}), attn.tensor({1.0, 0.0})))   -- tensor(0.8677)
function BCEWithLogitsLoss:init(...)
  local fn = "BCEWithLogitsLoss"
  local o = parse(fn, {"weight", "size_average", "reduce", "reduction", "pos_weight"}, ...)
  buffer(self, fn, "weight", o.weight)
  buffer(self, fn, "pos_weight", o.pos_weight)
  self.reduction = o.reduction
end


--- loss(input logits, target of the same shape): pos_weight weighs the
-- positive term per class (broadcast along the last dim), weight every
-- element.
function BCEWithLogitsLoss:forward(input, target)
  return F.binary_cross_entropy_with_logits(input, target, {weight = self.weight, pos_weight = self.pos_weight,
                                                            reduction = self.reduction})
end

-- torch's signatures (attn/signature.lua); the constructors read their
-- options themselves (parse above)
local signature = require "attn.signature"
local LOSS_SIGNATURES = {
  CrossEntropyLoss = "weight=nil, size_average=nil, ignore_index=-100, reduce=nil, reduction='mean', "
    .. "label_smoothing=0.0",
  NLLLoss = "weight=nil, size_average=nil, ignore_index=-100, reduce=nil, reduction='mean'",
  KLDivLoss = "size_average=nil, reduce=nil, reduction='mean', log_target=false",
  MSELoss = "size_average=nil, reduce=nil, reduction='mean'",
  L1Loss = "size_average=nil, reduce=nil, reduction='mean'",
  SmoothL1Loss = "size_average=nil, reduce=nil, reduction='mean', beta=1.0",
  HuberLoss = "reduction='mean', delta=1.0",
  BCELoss = "weight=nil, size_average=nil, reduce=nil, reduction='mean'",
  BCEWithLogitsLoss = "weight=nil, size_average=nil, reduce=nil, reduction='mean', pos_weight=nil",
}
for name, sig in pairs(LOSS_SIGNATURES) do
  signature.declare(M[name], "losses." .. name .. ".", {init = "native: self, " .. sig, forward = false})
end

return M
