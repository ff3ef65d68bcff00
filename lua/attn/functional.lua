-- SPDX-License-Identifier: MIT

--- attn.F (also attn.functional): stateless building blocks with torch 1.13
-- semantics (torch.nn.functional), written on top of the tensor ops so that
-- autograd differentiates them.
--
-- Everything lives in the one table F returned at the end.  The file is cut
-- into sections; to add a function, put it in the section it belongs to (or
-- a new section before "Losses") as `function F.name(...)`, using the local
-- helpers defined right below.
--
--   1. Helpers (local): argument checking, reductions
--   2. Activations: relu, gelu, tanh, sigmoid, silu, softmax, log_softmax
--   3. Layers: linear, dropout, layer_norm, normalize, pad, cosine_similarity,
--      one_hot
--   4. Losses: cross_entropy, nll_loss, mse_loss, l1_loss, smooth_l1_loss,
--      huber_loss, binary_cross_entropy, binary_cross_entropy_with_logits,
--      kl_div
--
-- Conventions (the whole package's): dims and class numbers are 1-based;
-- options come in a trailing table ({reduction = "sum", weight = w, ...}).
-- Class targets are float tensors (or tables, or a number for a single
-- sample) holding 1-based class numbers.
local attn = require "attn.base"
local core = require "attn.core"
local error = core._error -- raises at the user's line (the first caller outside attn)

local F = {}

---------------------------------------------------------------------------
-- 1) Helpers
-- @section helpers
---------------------------------------------------------------------------

local function fmt_shape(s) return "[" .. table.concat(s, ",") .. "]" end

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- A tensor argument; tables and numbers are converted (numbers give 0-d).
local function as_tensor(x, fn, name)
  if attn.is_tensor(x) then return x end
  local tx = type(x)
  if tx == "table" or tx == "number" then return attn.tensor(x) end
  error(("%s: %s must be a tensor, a table or a number (got %s)"):format(fn, name, tx), 3)
end

local function opt_tensor(x, fn, name)
  if x == nil then return nil end
  return as_tensor(x, fn, name)
end

-- The losses take torch's positional order; a trailing options table is
-- expanded into it by their declarations (attn/signature.lua).  torch's
-- deprecated size_average/reduce, when given, decide the reduction as in
-- torch (legacy_get_string): o.reduction, from the options o.
local function legacy_reduction(o, fn, size_average, reduce_)
  if size_average == nil and reduce_ == nil then return o end
  for k, v in pairs({size_average = size_average, reduce = reduce_}) do
    if type(v) ~= "boolean" then error(("%s: %s must be a boolean (got %s)"):format(fn, k, type(v)), 3) end
  end
  if reduce_ == false then
    o.reduction = "none"
  else
    o.reduction = size_average == false and "sum" or "mean"
  end
  return o
end

-- A number argument or option (nil gives def); NaN is refused.
local function check_number(v, def, fn, name)
  if v == nil then return def end
  if type(v) ~= "number" or v ~= v then
    error(("%s: %s must be a number (got %s)"):format(fn, name, tostring(v)), 3)
  end
  return v
end

local function check_bool(v, def, fn, name)
  if v == nil then return def end
  if type(v) ~= "boolean" then error(("%s: %s must be a boolean (got %s)"):format(fn, name, tostring(v)), 3) end
  return v
end

local reductions = {mean = true, sum = true, none = true}

local function check_reduction(r, fn, extra)
  if r == nil then r = "mean" end
  if not (reductions[r] or (extra and r == extra)) then
    error(("%s: reduction must be \"mean\", \"sum\"%s or \"none\" (got %s)"):format(
      fn, extra and (", \"" .. extra .. "\"") or "", tostring(r)), 3)
  end
  return r
end

-- torch's apply_loss_reduction
local function reduce(loss, reduction)
  if reduction == "mean" then return loss:mean() end
  if reduction == "sum" then return loss:sum() end
  return loss
end

-- Element-wise losses take input and target of the same shape after
-- broadcasting (torch warns and broadcasts; we broadcast).
local function pair(input, target, fn, need)
  input = as_tensor(input, fn, "input")
  target = as_tensor(target, fn, "target")
  -- a loss needs a floating operand (torch refuses two integer or bool
  -- tensors); a mixed pair is computed in float32, as torch's mse_loss does.
  -- need = "both" or "input": torch's kernels that want those floating.
  local fi, ft = input:is_floating_point(), target:is_floating_point()
  if not (fi or ft) or (need == "both" and not (fi and ft)) or (need == "input" and not fi) then
    error(("%s: expected floating tensors, got input %s and target %s (convert with :float())"):format(fn,
      tostring(input.dtype):gsub("^attn%.", ""), (tostring(target.dtype):gsub("^attn%.", ""))), 3)
  end
  if not fi then input = input:float() end
  if not ft then target = target:float() end
  return input, target
end

-- `value` (computed without a graph) whose gradient with respect to x is
-- dx: value + (x - x.detach()) * dx.  The second term is exactly 0 in the
-- forward pass and carries dx backward.  Used where torch's backward is
-- not the derivative of the composed forward (clamped logs in
-- binary_cross_entropy) so that gradients match torch's exactly.
local function with_grad(value, x, dx)
  if not (x.requires_grad and attn.is_grad_enabled()) then return value end
  return value + (x - x:detach()) * dx
end

---------------------------------------------------------------------------
-- 2) Activations
-- @section activations
---------------------------------------------------------------------------

--- relu(x): max(x, 0) elementwise (attn.relu).  torch.nn.functional.relu.
-- @usage
-- print(F.relu(attn.tensor({-1.0, 2.0})))        -- tensor([0., 2.])
function F.relu(x) return attn.relu(x) end
--- gelu(x, approximate): approximate = "none" (default, erf) or "tanh".
-- @usage
-- local x = attn.linspace(-3, 3, 7)
-- print(F.gelu(x), F.gelu(x, "tanh"))            -- exact, and GPT-2's tanh approximation
function F.gelu(x, approximate) return attn.gelu(x, approximate) end
--- tanh(x): attn.tanh, elementwise.  torch.nn.functional.tanh.
-- @usage
-- print(F.tanh(attn.tensor({0.0, 1.0})))
function F.tanh(x) return attn.tanh(x) end
--- sigmoid(x): 1 / (1 + e^-x) elementwise (attn.sigmoid).
-- torch.nn.functional.sigmoid.
-- @usage
-- print(F.sigmoid(attn.tensor({0.0, 2.0})))
function F.sigmoid(x) return attn.sigmoid(x) end
--- silu(x [, inplace = false]): x * sigmoid(x).
-- @usage
-- print(F.silu(attn.tensor({-1.0, 1.0})))
function F.silu(x, inplace) return require("attn.activation").silu(x, inplace) end

--- softmax(x, dim) / log_softmax(x, dim): dim is required (1-based or
-- negative), unlike torch's deprecated implicit choice.
-- @usage
-- local scores = attn.randn(2, 3, 3)
-- print(F.softmax(scores, -1):sum(-1))           -- ones
function F.softmax(x, dim)
  if dim == nil then error("softmax: dim is required", 2) end
  return attn.softmax(x, dim)
end

--- log_softmax(x, dim): log(softmax(x, dim)) computed stably; dim required
-- (1-based or negative).  torch.nn.functional.log_softmax.
-- @usage
-- local logits = attn.randn(2, 5)
-- local logp = F.log_softmax(logits, -1)
-- print(logp:exp():sum(-1))                      -- tensor([1., 1.])
function F.log_softmax(x, dim)
  if dim == nil then error("log_softmax: dim is required", 2) end
  return attn.log_softmax(x, dim)
end

---------------------------------------------------------------------------
-- 3) Layers
-- @section layers
---------------------------------------------------------------------------

local core_linear = attn.linear

--- linear(x, w [, b]): x [..., in] @ w[out, in]^T + b[out] -> [..., out].
-- w may be 1-d [in] (result [...]); b is optional.
-- torch.nn.functional.linear.
-- @usage
-- local x, w, b = attn.randn(3, 4), attn.randn(2, 4), attn.zeros(2)
-- print(F.linear(x, w, b).shape)                 -- attn.Size([3, 2])
function F.linear(x, w, b)
  -- the common case (2-d weight, 1-d bias or none) is one C op with one
  -- graph node; it checks the shapes with the messages below
  if attn.is_tensor(w) and w:dim() == 2 and (b == nil or (attn.is_tensor(b) and b:dim() == 1)) then
    return core_linear(x, w, b)
  end
  x = as_tensor(x, "linear", "input")
  w = as_tensor(w, "linear", "weight")
  b = opt_tensor(b, "linear", "bias")
  local wd = w:dim()
  if wd ~= 1 and wd ~= 2 then
    error(("linear: weight must be 1-d or 2-d [out, in], got %s"):format(fmt_shape(w:shape())), 2)
  end
  local in_features = w:size(wd)
  if x:dim() == 0 or x:size(-1) ~= in_features then
    error(("linear: input %s does not end in weight's in_features %d (weight %s)"):format(
      fmt_shape(x:shape()), in_features, fmt_shape(w:shape())), 2)
  end
  local y = x:matmul(wd == 2 and w:t() or w)
  if b ~= nil then y = y + b end
  return y
end

--- dropout(x, p = 0.5, training = true): torch 1.13's CPU algorithm, so a
-- seeded run draws the same mask: noise = bernoulli(1 - p), scaled by
-- 1 / (1 - p), times x.  p = 0 or training = false returns x itself;
-- p = 1 gives zeros (no random numbers drawn).
-- @usage
-- local x = attn.ones(2, 4)
-- print(F.dropout(x, 0.5))                       -- zeros and 2s while training
-- print(F.dropout(x, 0.5, false))                -- x itself when not training
function F.dropout(x, p, training)
  x = as_tensor(x, "dropout", "input")
  if p == nil then p = 0.5 end
  training = check_bool(training, true, "dropout", "training")
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    error(("dropout: probability has to be between 0 and 1, but got %s"):format(tostring(p)), 2)
  end
  if p == 0 or not training or x:numel() == 0 then return x end
  if p == 1 then return x * 0 end
  local noise = attn.empty_like(x):bernoulli_(1 - p):div_(1 - p)
  return x * noise
end

--- layer_norm(x, normalized_shape, weight, bias, eps = 1e-5): normalizes
-- over the trailing dims given by normalized_shape (a number or a list that
-- must match x's last dims), biased variance, then * weight + bias.
-- @usage
-- local x = attn.randn(2, 5, 8)
-- local y = F.layer_norm(x, {8})                 -- over the last dim
-- print(y:mean(-1):abs():max():item() < 1e-5)    -- true
function F.layer_norm(x, normalized_shape, weight, bias, eps)
  x = as_tensor(x, "layer_norm", "input")
  weight = opt_tensor(weight, "layer_norm", "weight")
  bias = opt_tensor(bias, "layer_norm", "bias")
  if eps ~= nil and type(eps) ~= "number" then -- NaN is torch's business: NaN rows
    error(("layer_norm: eps must be a number (got %s)"):format(type(eps)), 2)
  end
  eps = eps or 1e-5
  local ns = type(normalized_shape) == "number" and {normalized_shape} or normalized_shape
  if type(ns) ~= "table" or attn.is_tensor(ns) or #ns == 0 then
    error("layer_norm: normalized_shape must be a number or a non-empty list of sizes", 2)
  end
  for i = 1, #ns do
    if not (type(ns[i]) == "number" and math.tointeger(ns[i])) then
      error(("layer_norm: normalized_shape[%d] must be an integer (got %s)"):format(i, tostring(ns[i])), 2)
    end
  end
  local shape = x:shape()
  local k, nd = #ns, #shape
  local ok = k <= nd
  for i = 1, k do ok = ok and shape[nd - k + i] == ns[i] end
  if not ok then
    error(("layer_norm: input %s does not end in normalized_shape %s"):format(fmt_shape(shape),
      fmt_shape(ns)), 2)
  end
  -- one fused op forward and backward (src/core/norm.c): the same numbers
  -- as the composed ops, including NaN where torch's float32 moments
  -- overflow
  return core._layer_norm(x, k, weight, bias, eps)
end

--- normalize(x, p = 2, dim = 2, eps = 1e-12) or normalize(x, {p =, dim =, eps =}):
-- x / max(||x||_p along dim, eps), torch's F.normalize (whose default dim 1
-- is our 2).  pad(x, pad, mode, value) and cosine_similarity(x1, x2, dim,
-- eps): see attn/ops.lua.
F.normalize = require("attn.ops").normalize
F.pad = require("attn.ops").pad
F.cosine_similarity = require("attn.ops").cosine_similarity

--- one_hot(ids, num_classes): ids hold 1-based class numbers; the result
-- has a trailing dim of num_classes (default: the largest id) with 1 at
-- each id (an int64 tensor, as torch's; :float() for a float matrix).
-- @usage
-- print(F.one_hot(attn.tensor({1, 3}), 4))       -- [[1, 0, 0, 0], [0, 0, 1, 0]]: ids 1-based
function F.one_hot(ids, num_classes) return attn.one_hot(ids, num_classes) end

---------------------------------------------------------------------------
-- 4) Losses
-- @section losses
---------------------------------------------------------------------------
-- Common options: reduction = "mean" (default) | "sum" | "none".
-- Gradients flow to `input` (and, where the formula allows, to target).

-- Checks that target holds class numbers 1..C (or the ignore class; the
-- message names it when the caller gave it).  Returns whether some target
-- is the ignore class.
local function check_classes(target, C, ignore, fn, explicit)
  if target:dtype() == attn.bool then
    error(("%s: a class target must hold class numbers, got a bool tensor (torch: expected scalar type Long but " ..
      "found Bool); write target:long() + 1 for classes 1 (false) and 2 (true), or use " ..
      "F.binary_cross_entropy_with_logits(input, target:float()) for a 0/1 target")
      :format(fn), 4)
  end
  if target:numel() == 0 then return false end
  -- one pass in C: whole numbers in 1..C, or the ignore_index
  local ignored, bad = core._check_class_targets(target, 1, C, ignore)
  if bad then
    local t = target:reshape(-1):totable()[bad]
    error(("%s: target %g is not a class number in 1..%d%s%s"):format(fn, t, C,
      explicit and (" or the ignore_index " .. tostring(ignore)) or "",
      t == 0 and " (ids are 1-based; torch's 0-based ids need +1)" or ""), 4) -- the caller of the loss
  end
  return ignored
end

-- The class dim of an input [C] or [N, C, d1, ...] and the shape a class
-- target must have (input's shape without the class dim).
local function class_layout(input, fn)
  local nd = input:dim()
  if nd == 0 then error(fn .. ": input must have a class dim ([C] or [N, C, ...]), got a 0-d tensor", 3) end
  local cdim = nd == 1 and 1 or 2
  local shape = input:shape()
  local tshape = {}
  for i = 1, nd do if i ~= cdim then tshape[#tshape + 1] = shape[i] end end
  return cdim, shape[cdim], tshape
end

local function check_weight(weight, C, fn)
  if weight == nil then return nil end
  weight = as_tensor(weight, fn, "weight")
  if weight:dim() ~= 1 or weight:size(1) ~= C then
    error(("%s: weight must be 1-d with one entry per class (%d), got %s"):format(fn, C,
      fmt_shape(weight:shape())), 3)
  end
  return weight
end

-- weight [C] viewed so that it broadcasts along the class dim of input.
local function weight_along(weight, nd, cdim)
  if nd == 1 then return weight end
  local s = {}
  for i = 1, nd do s[i] = 1 end
  s[cdim] = weight:size(1)
  return weight:reshape(s)
end

-- nll on checked arguments: lp [N, C, ...] log-probabilities, t the class
-- numbers [N, ...].  Returns the reduced loss and the per-element weights
-- w_t (nil when every element weighs 1) and the kept mask (nil without
-- ignore_index), which the label smoothing term reuses.
local function nll(lp, t, cdim, weight, ignore, reduction)
  local mask, safe = nil, t
  if ignore ~= nil then
    mask = t:ne(ignore)
    safe = attn.where(mask, t, 1) -- any valid class; masked out below
  end
  local picked = lp:gather(cdim, safe:unsqueeze(cdim)):squeeze(cdim)
  local w = mask
  if weight ~= nil then
    w = weight:index_select(1, safe:reshape(-1)):reshape(t:shape())
    if mask then w = w * mask end
  end
  local loss = w and -(picked * w) or -picked
  -- ignored elements are exactly 0 even where lp is -inf (-inf * 0 = nan)
  if mask then loss = attn.where(mask, loss, 0) end
  if reduction == "none" then return loss, w, mask end
  if reduction == "sum" then return loss:sum(), w, mask end
  if w then return loss:sum() / w:sum(), w, mask end
  return loss:mean(), w, mask
end

-- Shared front end of nll_loss and cross_entropy's class-number path.
local function class_args(input, target, opts, fn)
  local cdim, C, tshape = class_layout(input, fn)
  if not same_shape(target:shape(), tshape) then
    error(("%s: target of shape %s does not fit input %s (expected %s)"):format(fn,
      fmt_shape(target:shape()), fmt_shape(input:shape()), fmt_shape(tshape)), 3)
  end
  local ignore = opts.ignore_index
  if ignore ~= nil and not (type(ignore) == "number" and math.tointeger(ignore)) then
    error(fn .. ": ignore_index must be a class number (an integer)", 3)
  end
  local explicit = ignore ~= nil and ignore ~= -100
  if ignore == nil then ignore = -100 end
  -- without an ignored target the plain path gives the same result
  if not check_classes(target, C, ignore, fn, explicit) then ignore = nil end
  return cdim, C, check_weight(opts.weight, C, fn), ignore
end

--- nll_loss(input, target, weight, size_average, ignore_index, reduce,
-- reduction), torch's order, or with an options table (opts): input [C] | [N, C] | [N, C, d1, ...] holds
-- log-probabilities, target [] | [N] | [N, d1, ...] class numbers (1-based).
-- opts: weight ([C] per-class weights), ignore_index (targets equal to it
-- are skipped: they add nothing to the loss nor to the weight sum; default
-- -100 like torch's, a value that is no class number, so a torch program's
-- -100 padding targets work unchanged; a class given as ignore_index is a
-- 1-based class number like the targets: torch's ignore_index = 0 is 1
-- here), reduction.
-- "mean" divides by the sum of the targets' weights (their count without
-- weight), like torch.
-- @usage
-- local logp = F.log_softmax(attn.randn(3, 4), -1)
-- print(F.nll_loss(logp, attn.tensor({1, 4, 2}), {ignore_index = 2}))   -- the 3rd row is ignored
function F.nll_loss(input, target, weight_, size_average, ignore_index, reduce_, reduction_)
  local opts = legacy_reduction({weight = weight_, ignore_index = ignore_index, reduction = reduction_}, "nll_loss",
    size_average, reduce_)
  input = as_tensor(input, "nll_loss", "input")
  target = as_tensor(target, "nll_loss", "target")
  local reduction = check_reduction(opts.reduction, "nll_loss")
  local cdim, _, weight, ignore = class_args(input, target, opts, "nll_loss")
  return (nll(input, target, cdim, weight, ignore, reduction))
end

--- cross_entropy(input, target, weight, size_average, ignore_index,
-- reduce, reduction, label_smoothing) or with an options table (opts): log_softmax over the class dim, then
-- either
--  * class numbers: target [] | [N] | [N, d1, ...] (1-based), as nll_loss,
--    with opts weight, ignore_index, reduction, label_smoothing (in [0, 1]:
--    (1 - ls) * nll + ls / C * the smoothing term, weighted and reduced as
--    torch 1.13 does); or
--  * class probabilities: target of input's shape; opts weight, reduction,
--    label_smoothing (target * (1 - ls) + ls / C); "mean" divides by the
--    number of samples (numel / C).  An ignore_index that is a class
--    number (>= 1) is an error here, as in torch.
-- @usage
-- local logits = attn.randn(4, 10)               -- [N, classes]
-- local target = attn.tensor({1, 3, 10, 2})      -- 1-based class ids
-- print(F.cross_entropy(logits, target, {label_smoothing = 0.1}))
function F.cross_entropy(input, target, weight_, size_average, ignore_index, reduce_, reduction_, label_smoothing)
  local fn = "cross_entropy"
  local opts = legacy_reduction({weight = weight_, ignore_index = ignore_index, reduction = reduction_,
    label_smoothing = label_smoothing}, fn, size_average, reduce_)
  input = as_tensor(input, fn, "input")
  target = as_tensor(target, fn, "target")
  local reduction = check_reduction(opts.reduction, fn)
  local ls = opts.label_smoothing
  if ls == nil then ls = 0 end
  if type(ls) ~= "number" or not (ls >= 0 and ls <= 1) then
    error(("%s: label_smoothing must be between 0.0 and 1.0 (got %s)"):format(fn, tostring(ls)), 2)
  end
  local cdim, C = class_layout(input, fn)
  local nd = input:dim()
  local lp = input:log_softmax(cdim)

  if same_shape(target:shape(), input:shape()) then
    -- class probabilities (torch accepts an ignore_index that is no class
    -- number, such as the default -100, and ignores it)
    local ig = opts.ignore_index
    if ig ~= nil and not (type(ig) == "number" and ig < 1) then
      error(fn .. ": ignore_index is not supported for probability targets", 2)
    end
    local weight = check_weight(opts.weight, C, fn)
    if ls > 0 then target = target * (1 - ls) + ls / C end
    local prod = lp * target
    if weight then prod = prod * weight_along(weight, nd, cdim) end
    if reduction == "none" then return -prod:sum(cdim) end
    if reduction == "sum" then return -prod:sum() end
    return -prod:sum() / (input:numel() // C)
  end

  local _, _, weight, ignore = class_args(input, target, opts, fn)
  local loss, w, mask = nll(lp, target, cdim, weight, ignore, reduction)
  if ls == 0 then return loss end
  local smooth
  if weight then
    smooth = -(lp * weight_along(weight, nd, cdim)):sum(cdim)
  else
    smooth = -lp:sum(cdim)
  end
  if mask then smooth = attn.where(mask, smooth, 0) end
  local ret
  if reduction == "none" then
    ret = smooth
  elseif reduction == "sum" then
    ret = smooth:sum()
  elseif w then
    ret = smooth:sum() / w:sum() -- the kept targets' weights (or count)
  else
    ret = smooth:mean()
  end
  return loss * (1 - ls) + ret * (ls / C)
end

--- mse_loss(input, target, opts): (input - target)^2, reduced.
-- @usage
-- print(F.mse_loss(attn.tensor({1.0, 2.0}), attn.tensor({0.0, 4.0})))  -- tensor(2.5000)
function F.mse_loss(input, target, size_average, reduce_, reduction_)
  local opts = legacy_reduction({reduction = reduction_}, "mse_loss", size_average, reduce_)
  input, target = pair(input, target, "mse_loss")
  local d = input - target
  return reduce(d * d, check_reduction(opts.reduction, "mse_loss"))
end

--- l1_loss(input, target, opts): |input - target|, reduced.
-- @usage
-- print(F.l1_loss(attn.tensor({1.0, 2.0}), attn.tensor({0.0, 4.0})))   -- tensor(1.5000)
function F.l1_loss(input, target, size_average, reduce_, reduction_)
  local opts = legacy_reduction({reduction = reduction_}, "l1_loss", size_average, reduce_)
  input, target = pair(input, target, "l1_loss")
  return reduce((input - target):abs(), check_reduction(opts.reduction, "l1_loss"))
end

--- smooth_l1_loss(input, target, opts): z = |input - target|;
-- 0.5 z^2 / beta where z < beta, else z - 0.5 beta (opts.beta = 1; beta = 0
-- is l1_loss).
-- @usage
-- print(F.smooth_l1_loss(attn.tensor({0.0, 3.0}), attn.tensor({0.5, 0.0}), {beta = 1.0}))
function F.smooth_l1_loss(input, target, size_average, reduce_, reduction_, beta_)
  local opts = legacy_reduction({reduction = reduction_, beta = beta_}, "smooth_l1_loss", size_average, reduce_)
  local reduction = check_reduction(opts.reduction, "smooth_l1_loss")
  local beta = check_number(opts.beta, 1.0, "smooth_l1_loss", "beta")
  if beta < 0 then error("smooth_l1_loss: beta must be non-negative", 2) end
  input, target = pair(input, target, "smooth_l1_loss")
  local z = (input - target):abs()
  if beta == 0 then return reduce(z, reduction) end
  return reduce(attn.where(z:lt(beta), z * z * 0.5 / beta, z - 0.5 * beta), reduction)
end

--- huber_loss(input, target, opts): z = |input - target|; 0.5 z^2 where
-- z < delta, else delta * (z - 0.5 delta) (opts.delta = 1, > 0).
-- @usage
-- print(F.huber_loss(attn.tensor({0.0, 3.0}), attn.tensor({0.5, 0.0}), {delta = 1.0}))
function F.huber_loss(input, target, reduction_, delta_)
  local opts = {reduction = reduction_, delta = delta_}
  local reduction = check_reduction(opts.reduction, "huber_loss")
  local delta = check_number(opts.delta, 1.0, "huber_loss", "delta")
  if delta <= 0 then error("huber_loss: delta must be positive", 2) end
  input, target = pair(input, target, "huber_loss", "input")
  local z = (input - target):abs()
  return reduce(attn.where(z:lt(delta), z * z * 0.5, (z - 0.5 * delta) * delta), reduction)
end

-- The binary cross entropies' arguments: input and target of one shape,
-- the options (known), the reduction and the optional weight.
local function bce_args(fn, input, target, opts)
  local reduction = check_reduction(opts.reduction, fn)
  input, target = pair(input, target, fn, "both")
  if not same_shape(input:shape(), target:shape()) then
    error(("%s: target size %s differs from input size %s"):format(fn, fmt_shape(target:shape()),
      fmt_shape(input:shape())), 2)
  end
  return input, target, opts, reduction, opt_tensor(opts.weight, fn, "weight")
end

--- binary_cross_entropy(input, target, opts): input probabilities in
-- [0, 1], target of the same shape;
-- -w (t max(log x, -100) + (1 - t) max(log(1 - x), -100)).  opts: weight
-- (broadcast to target's shape), reduction.  The gradient is torch's:
-- w (x - t) / max(x (1 - x), 1e-12), finite even at x = 0 or 1; no
-- gradient flows to target or weight.
-- @usage
-- local probs = attn.tensor({0.9, 0.2, 0.6})
-- local target = attn.tensor({1.0, 0.0, 1.0})
-- print(F.binary_cross_entropy(probs, target))
function F.binary_cross_entropy(input, target, weight_, size_average, reduce_, reduction_)
  local fn = "binary_cross_entropy"
  local opts = legacy_reduction({weight = weight_, reduction = reduction_}, fn, size_average, reduce_)
  local _, reduction, weight
  input, target, _, reduction, weight = bce_args(fn, input, target, opts)
  local loss, dx
  do
    local _ <close> = attn.no_grad()
    if input:numel() > 0 then
      if input:min():item() < 0 or input:max():item() > 1 or input:ne(input):any():item() then
        error(fn .. ": all elements of input should be between 0 and 1", 2)
      end
      if target:min():item() < 0 or target:max():item() > 1 or target:ne(target):any():item() then
        error(fn .. ": all elements of target should be between 0 and 1", 2)
      end
    end
    loss = (target - 1) * (-input):log1p():clamp(-100, nil) - target * input:log():clamp(-100, nil)
    dx = (input - target) / ((1 - input) * input):clamp(1e-12, nil)
    if weight then
      loss = loss * weight
      dx = dx * weight
    end
  end
  return reduce(with_grad(loss, input, dx), reduction)
end

--- binary_cross_entropy_with_logits(input, target, opts): the stable
-- sigmoid + binary cross entropy on logits, torch 1.13's formula
-- (1 - t) x + lw (log(e^-m + e^(-x-m)) + m), m = max(-x, 0),
-- lw = 1 + (pos_weight - 1) t.  opts: weight, pos_weight (broadcast along
-- the last dim: one per class), reduction.
-- @usage
-- local logits = attn.tensor({2.0, -1.0, 0.5})
-- local target = attn.tensor({1.0, 0.0, 1.0})
-- print(F.binary_cross_entropy_with_logits(logits, target, {pos_weight = attn.tensor({2.0})}))
function F.binary_cross_entropy_with_logits(input, target, weight_, size_average, reduce_, reduction_, pos_weight_)
  local fn = "binary_cross_entropy_with_logits"
  local opts = legacy_reduction({weight = weight_, reduction = reduction_, pos_weight = pos_weight_}, fn, size_average,
    reduce_)
  local reduction, weight
  input, target, opts, reduction, weight = bce_args(fn, input, target, opts)
  local pos_weight = opt_tensor(opts.pos_weight, fn, "pos_weight")
  local m = (-input):clamp(0, nil)
  -- -x - m written as -relu(x): the same value for finite x (and the same
  -- gradient, 0 at x = 0), but finite at x = -inf, where -x - m is
  -- inf - inf; so the gradient there is torch's sigmoid(x) - t (= -t, or
  -- -pos_weight t), not NaN.  At x = -inf the loss is NaN as in torch.
  local lse = ((-m):exp() + (-input:relu()):exp()):log()
  local loss
  if pos_weight then
    local lw = (pos_weight - 1) * target + 1
    loss = (1 - target) * input + lw * (lse + m)
  else
    loss = (1 - target) * input + m + lse
  end
  if weight then loss = loss * weight end
  return reduce(loss, reduction)
end

--- kl_div(input, target, opts): input log-probabilities; target
-- probabilities, or log-probabilities with opts.log_target = true.
-- Pointwise t (log t - x) (0 where t = 0), or e^t (t - x) for log targets.
-- reduction: "mean" (over all elements, as torch: usually not what you
-- want), "batchmean" (sum / input's first size), "sum", "none".
-- @usage
-- local log_p = attn.tensor({{0.2, 0.8}}):log()
-- local q = attn.tensor({{0.5, 0.5}})
-- print(F.kl_div(log_p, q, {reduction = "batchmean"}))
function F.kl_div(input, target, size_average, reduce_, reduction_, log_target)
  local fn = "kl_div"
  local opts = legacy_reduction({reduction = reduction_, log_target = log_target}, fn, size_average, reduce_)
  local reduction = check_reduction(opts.reduction, fn, "batchmean")
  input, target = pair(input, target, fn, "both")
  local out
  if check_bool(opts.log_target, false, fn, "log_target") then
    out = target:exp() * (target - input)
  else
    -- xlogy(t, t): log(t + (t == 0)) is log 1 = 0 where t = 0, so
    -- t * log(...) is 0 there without a 0 * -inf
    out = target * (target + target:eq(0)):log() - target * input
  end
  if reduction == "batchmean" then
    local s = out:sum()
    if input:dim() ~= 0 then s = s / input:size(1) end
    return s
  end
  return reduce(out, reduction)
end

---------------------------------------------------------------------------
-- 5. Attention (aliases; the code lives in attn.attention) -- BEGIN
--    owned by the attention-modules work; keep other edits outside it
-- @section attention_begin
---------------------------------------------------------------------------

--- scaled_dot_product_attention(q, k, v [, opts]): attn's fused SDPA (torch
-- 2.x semantics: a "bool" attn_mask value 1 means TAKE PART).
F.scaled_dot_product_attention = attn.scaled_dot_product_attention

--- split_heads(x [..., L, H*D], H) -> [..., H, L, D]; combine_heads inverts it.
--- F.ring_attention(q, k, v [, causal [, scale [, is_causal]]]) or with {causal =, scale =}:
-- attention over a sequence split across MPI ranks (attn.dist.ring_attention).
-- @usage
-- local q = attn.randn(1, 2, 8, 4)               -- [B, H, L_local, D]: this rank's part
-- local y = F.ring_attention(q, q, q, {causal = true})   -- one rank without mpirun: plain SDPA
-- print(y.shape)
function F.ring_attention(q, k, v, causal, scale, is_causal)
  return require("attn.dist").ring_attention(q, k, v, {causal = causal, scale = scale, is_causal = is_causal})
end
--- split_heads(x, H): x [..., L, H*D] -> [..., H, L, D]
-- (attn.attention.split_heads).
-- @usage
-- local x = attn.randn(2, 5, 32)                 -- [B, L, H*D]
-- print(F.split_heads(x, 4).shape)               -- attn.Size([2, 4, 5, 8])
function F.split_heads(x, H) return require("attn.attention").split_heads(x, H) end
--- combine_heads(x): x [..., H, L, D] -> [..., L, H*D], the inverse of
-- split_heads (attn.attention.combine_heads).
-- @usage
-- local x = attn.randn(2, 4, 5, 8)               -- [B, H, L, D]
-- print(F.combine_heads(x).shape)                -- attn.Size([2, 5, 32])
function F.combine_heads(x) return require("attn.attention").combine_heads(x) end

---------------------------------------------------------------------------
-- 5. Attention -- END
-- @section attention_end
---------------------------------------------------------------------------

-- >>> activations and conv1d (lua/attn/activation.lua, lua/attn/conv.lua),
-- loaded on first call; tail calls, so their errors point at the caller.

--- mish(x [, inplace = false]): x * tanh(softplus(x)) elementwise, with
-- torch's gradient (attn.activation.mish).  torch.nn.functional.mish.
-- @usage
-- print(F.mish(attn.tensor({-1.0, 0.0, 1.0})))
function F.mish(x, inplace) return require("attn.activation").mish(x, inplace) end
--- leaky_relu(x [, negative_slope = 0.01 [, inplace = false]]):
-- x > 0 ? x : negative_slope * x (attn.activation.leaky_relu).
-- torch.nn.functional.leaky_relu.
-- @usage
-- print(F.leaky_relu(attn.tensor({-1.0, 2.0}), 0.2))   -- tensor([-0.2000,  2.0000])
function F.leaky_relu(x, negative_slope, inplace)
  return require("attn.activation").leaky_relu(x, negative_slope, inplace)
end
--- elu(x [, alpha = 1.0 [, inplace = false]]): x > 0 ? x : alpha (e^x - 1)
-- (attn.activation.elu).  torch.nn.functional.elu.
-- @usage
-- print(F.elu(attn.tensor({-2.0, 0.0, 2.0}), 1.0))
function F.elu(x, alpha, inplace) return require("attn.activation").elu(x, alpha, inplace) end
--- softplus(x [, beta = 1 [, threshold = 20]]): log(1 + e^(beta x)) / beta,
-- and x where beta x > threshold (attn.activation.softplus).
-- torch.nn.functional.softplus.
-- @usage
-- print(F.softplus(attn.tensor({-2.0, 0.0, 30.0}), 1, 20))
function F.softplus(x, beta, threshold) return require("attn.activation").softplus(x, beta, threshold) end
--- conv1d(input, weight [, bias [, stride [, padding [, dilation [, groups]]]]])
-- or conv1d(input, weight, bias, {stride=, padding=, dilation=, groups=}):
-- input [B, C, L] or [C, L], weight [O, C / groups, K] -> [B, O, Lout]
-- (attn.conv.conv1d, which states Lout and the padding forms).
-- torch.nn.functional.conv1d.
-- @usage
-- local x = attn.randn(1, 2, 10)                 -- [B, C_in, L]
-- local w = attn.randn(4, 2, 3)                  -- [C_out, C_in, kernel]
-- print(F.conv1d(x, w, nil, 1, 1).shape)         -- attn.Size([1, 4, 10]): padding 1
function F.conv1d(input, weight, bias, stride, padding, dilation, groups)
  return require("attn.conv").conv1d(input, weight, bias, stride, padding, dilation, groups)
end
-- <<< activations and conv1d

-- torch's keywords in a trailing options table (attn/signature.lua)
require("attn.signature").install(F, "F.")

return F
