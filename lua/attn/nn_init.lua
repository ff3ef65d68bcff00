-- SPDX-License-Identifier: MIT

--- attn.init: parameter initialisers after torch.nn.init (PyTorch 1.13).
--
-- Every function fills its tensor in place under attn.no_grad, returns it,
-- and draws from the random stream exactly as torch does, so that
-- `attn.manual_seed(s)` followed by the same calls gives torch's values bit
-- for bit.  The arithmetic on the bounds is done in Lua numbers (doubles),
-- like Python floats, before the sampler rounds them to float32 as torch's
-- kernels do.
--
-- The random initialisers take an optional trailing attn.Generator (torch
-- 1.13 has none; later torch added `generator=`); without it they use the
-- default generator.
--
--   calculate_gain(nonlinearity [, param])
--   uniform_(t [, a = 0, b = 1 [, gen]])     normal_(t [, mean = 0, std = 1 [, gen]])
--   constant_(t, val)   zeros_(t)   ones_(t)   eye_(t)
--   xavier_uniform_(t [, gain = 1 [, gen]])  xavier_normal_(t [, gain = 1 [, gen]])
--   kaiming_uniform_(t [, a = 0, mode = "fan_in", nonlinearity = "leaky_relu" [, gen]])
--   kaiming_normal_(t [, a = 0, mode = "fan_in", nonlinearity = "leaky_relu" [, gen]])
--   sparse_(t, sparsity [, std = 0.01 [, gen]])
--   calculate_fan_in_and_fan_out(t) -> fan_in, fan_out
-- kaiming_*_ also take an options table as second argument:
--   kaiming_uniform_(t, {a = 0, mode = "fan_in", nonlinearity = "leaky_relu", generator = g}).
-- Not provided: trunc_normal_ (needs erfinv), orthogonal_ (needs QR), dirac_.
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)

local M = {}

local function check_tensor(t, fn)
  if not attn.is_tensor(t) then
    error(("init.%s: expected a tensor (got %s)"):format(fn, type(t)), 3)
  end
end

local function check_number(v, fn, name)
  if type(v) ~= "number" then
    error(("init.%s: %s must be a number (got %s)"):format(fn, name, type(v)), 3)
  end
end

-- An optional number (nil gives def; false and other types raise).
local function opt_number(v, def, fn, name)
  if v == nil then return def end
  check_number(v, fn, name)
  return v
end

-- Runs fill(t) with autograd off, restoring the previous mode.
local function no_grad(fill, t, ...)
  local guard <close> = attn.no_grad()
  fill(t, ...)
  return t
end

--- The recommended gain for a nonlinearity (torch.nn.init.calculate_gain).
-- @usage
-- print(nn.init.calculate_gain("relu"), nn.init.calculate_gain("leaky_relu", 0.2))
function M.calculate_gain(nonlinearity, param)
  local linear = {
    linear = true, conv1d = true, conv2d = true, conv3d = true,
    conv_transpose1d = true, conv_transpose2d = true, conv_transpose3d = true,
  }
  if linear[nonlinearity] or nonlinearity == "sigmoid" then
    return 1
  elseif nonlinearity == "tanh" then
    return 5.0 / 3
  elseif nonlinearity == "relu" then
    return math.sqrt(2.0)
  elseif nonlinearity == "leaky_relu" then
    local slope
    if param == nil then
      slope = 0.01
    elseif type(param) == "number" then
      slope = param
    else
      error(("init.calculate_gain: negative_slope %s is not a valid number"):format(tostring(param)), 2)
    end
    return math.sqrt(2.0 / (1 + slope ^ 2))
  elseif nonlinearity == "selu" then
    return 3.0 / 4
  end
  error(("init.calculate_gain: unsupported nonlinearity %s"):format(tostring(nonlinearity)), 2)
end

--- fan_in, fan_out of a weight of at least 2 dims: [out, in, k...] gives
-- in * prod(k) and out * prod(k) (torch's _calculate_fan_in_and_fan_out).
-- @usage
-- local fan_in, fan_out = nn.init.calculate_fan_in_and_fan_out(attn.empty(8, 4))
-- print(fan_in, fan_out)                                          -- 4 8
function M.calculate_fan_in_and_fan_out(t)
  check_tensor(t, "calculate_fan_in_and_fan_out")
  local shape = t:shape()
  if #shape < 2 then
    error("init: fan in and fan out can not be computed for a tensor with fewer than 2 dimensions", 2)
  end
  local receptive = 1
  for i = 3, #shape do receptive = receptive * shape[i] end
  return shape[2] * receptive, shape[1] * receptive
end

local function correct_fan(t, mode, fn)
  if type(mode) ~= "string" or (mode:lower() ~= "fan_in" and mode:lower() ~= "fan_out") then
    error(("init.%s: mode %s not supported, please use one of fan_in, fan_out"):format(fn, tostring(mode)), 3)
  end
  local fan_in, fan_out = M.calculate_fan_in_and_fan_out(t)
  return mode:lower() == "fan_in" and fan_in or fan_out
end

local function uniform(t, a, b, gen) t:uniform_(a, b, gen) end
local function normal(t, mean, std, gen) t:normal_(mean, std, gen) end

--- uniform_(t [, a = 0] [, b = 1] [, gen]) -> t: fills t with uniform samples
-- in [a, b) without recording a graph.  torch.nn.init.uniform_.
-- @usage
-- local w = attn.empty(2, 3)
-- nn.init.uniform_(w, -0.1, 0.1)
-- print(w:min():item() >= -0.1, w:max():item() < 0.1)            -- true true
function M.uniform_(t, a, b, gen)
  check_tensor(t, "uniform_")
  a, b = opt_number(a, 0.0, "uniform_", "a"), opt_number(b, 1.0, "uniform_", "b")
  return no_grad(uniform, t, a, b, gen)
end

--- normal_(t [, mean = 0] [, std = 1] [, gen]) -> t: fills t with normal
-- samples without recording a graph.  torch.nn.init.normal_.
-- @usage
-- local w = attn.empty(256, 256)
-- nn.init.normal_(w, 0, 0.02)                                     -- GPT-2's init of its weights
-- print(w:std())                                                  -- tensor(0.0200)
function M.normal_(t, mean, std, gen)
  check_tensor(t, "normal_")
  mean, std = opt_number(mean, 0.0, "normal_", "mean"), opt_number(std, 1.0, "normal_", "std")
  return no_grad(normal, t, mean, std, gen)
end

--- constant_(t, val) -> t: fills t with val.  torch.nn.init.constant_.
-- @usage
-- local b = attn.empty(3)
-- nn.init.constant_(b, 0.1)
-- print(b)
function M.constant_(t, val)
  check_tensor(t, "constant_")
  check_number(val, "constant_", "val")
  return no_grad(function(x) x:fill_(val) end, t)
end

--- zeros_(t) -> t: fills t with 0.  torch.nn.init.zeros_.
-- @usage
-- local lin = nn.Linear(4, 4)
-- nn.init.zeros_(lin.bias)
-- print(lin.bias)                                                 -- tensor([0., 0., 0., 0.], requires_grad=True)
function M.zeros_(t)
  check_tensor(t, "zeros_")
  return no_grad(function(x) x:zero_() end, t)
end

--- ones_(t) -> t: fills t with 1.  torch.nn.init.ones_.
-- @usage
-- local g = attn.empty(4)
-- nn.init.ones_(g)
-- print(g)                                                        -- tensor([1., 1., 1., 1.])
function M.ones_(t)
  check_tensor(t, "ones_")
  return no_grad(function(x) x:fill_(1) end, t)
end

--- Fills a 2-d tensor with the identity (ones on the main diagonal).
-- @usage
-- local w = attn.empty(3, 3)
-- nn.init.eye_(w)
-- print(w)
function M.eye_(t)
  check_tensor(t, "eye_")
  local shape = t:shape()
  if #shape ~= 2 then error("init.eye_: only tensors with 2 dimensions are supported", 2) end
  return no_grad(function(x) x:copy_(attn.eye(shape[1], shape[2])) end, t)
end

-- the Xavier (Glorot) standard deviation gain * sqrt(2 / (fan_in + fan_out))
-- of t; the callers check t and gain themselves (errors name their caller)
local function xavier_std(t, gain)
  local fan_in, fan_out = M.calculate_fan_in_and_fan_out(t)
  return gain * math.sqrt(2.0 / (fan_in + fan_out))
end

--- xavier_uniform_(t [, gain = 1] [, gen]) -> t: uniform in [-a, a] with
-- a = gain * sqrt(6 / (fan_in + fan_out)).  torch.nn.init.xavier_uniform_.
-- @usage
-- local lin = nn.Linear(16, 16)
-- nn.init.xavier_uniform_(lin.weight, nn.init.calculate_gain("tanh"))   -- in [-a, a], a = 5/3 * sqrt(6 / 32)
-- print(lin.weight:abs():max():item() <= 5 / 3 * math.sqrt(6 / 32))         -- true
function M.xavier_uniform_(t, gain, gen)
  check_tensor(t, "xavier_uniform_")
  gain = opt_number(gain, 1.0, "xavier_uniform_", "gain")
  local a = math.sqrt(3.0) * xavier_std(t, gain) -- uniform bound with that std
  return no_grad(uniform, t, -a, a, gen)
end

--- xavier_normal_(t [, gain = 1] [, gen]) -> t: normal with std
-- gain * sqrt(2 / (fan_in + fan_out)).  torch.nn.init.xavier_normal_.
-- @usage
-- local w = attn.empty(256, 256)
-- nn.init.xavier_normal_(w)                                       -- std sqrt(2 / (256 + 256)) = 0.0625
-- print(w:std())                                                  -- tensor(0.0624)
function M.xavier_normal_(t, gain, gen)
  check_tensor(t, "xavier_normal_")
  gain = opt_number(gain, 1.0, "xavier_normal_", "gain")
  return no_grad(normal, t, 0.0, xavier_std(t, gain), gen)
end

-- kaiming_*_(t, a, mode, nonlinearity, gen) or kaiming_*_(t, {a=, mode=, nonlinearity=, generator=})
local function kaiming_args(fn, a, mode, nonlinearity, gen)
  if type(a) == "table" then
    local o = a
    for k in pairs(o) do
      if k ~= "a" and k ~= "mode" and k ~= "nonlinearity" and k ~= "generator" then
        error(attn._misuse.unknown_option("init." .. fn, k, {"a", "mode", "nonlinearity", "generator"}), 3)
      end
    end
    a, mode, nonlinearity, gen = o.a, o.mode, o.nonlinearity, o.generator
  end
  a = opt_number(a, 0, fn, "a")
  if nonlinearity ~= nil and type(nonlinearity) ~= "string" then
    error(("init.%s: nonlinearity must be a name such as \"relu\" (got %s)"):format(fn, type(nonlinearity)), 3)
  end
  if mode == nil then mode = "fan_in" end
  if nonlinearity == nil then nonlinearity = "leaky_relu" end
  return a, mode, nonlinearity, gen
end

local function kaiming_std(t, fn, a, mode, nonlinearity)
  local fan = correct_fan(t, mode, fn)
  local gain = M.calculate_gain(nonlinearity, a)
  return gain / math.sqrt(fan)
end

--- kaiming_uniform_(t [, a = 0] [, mode = "fan_in"] [, nonlinearity =
-- "leaky_relu"] [, gen]) -> t, or kaiming_uniform_(t, {a =, mode =,
-- nonlinearity =, generator =}): uniform in [-b, b] with
-- b = calculate_gain(nonlinearity, a) * sqrt(3 / fan); mode "fan_in" or
-- "fan_out".  torch.nn.init.kaiming_uniform_.
-- @usage
-- local w = attn.empty(16, 8)
-- nn.init.kaiming_uniform_(w, math.sqrt(5))                       -- how nn.Linear initialises its weight
-- print(w:abs():max():item() <= 1 / math.sqrt(8))                  -- true: bound 1 / sqrt(fan_in)
function M.kaiming_uniform_(t, a, mode, nonlinearity, gen)
  check_tensor(t, "kaiming_uniform_")
  a, mode, nonlinearity, gen = kaiming_args("kaiming_uniform_", a, mode, nonlinearity, gen)
  if t:numel() == 0 then return t end -- torch warns and does nothing
  local std = kaiming_std(t, "kaiming_uniform_", a, mode, nonlinearity)
  local bound = math.sqrt(3.0) * std
  return no_grad(uniform, t, -bound, bound, gen)
end

--- kaiming_normal_(t [, a] [, mode] [, nonlinearity] [, gen]) -> t (or an
-- options table, as kaiming_uniform_): normal with std
-- calculate_gain(nonlinearity, a) / sqrt(fan).  torch.nn.init.kaiming_normal_.
-- @usage
-- local w = attn.empty(256, 128)
-- nn.init.kaiming_normal_(w, {mode = "fan_out", nonlinearity = "relu"})   -- std sqrt(2 / 256) = 0.0884
-- print(w:std())                                                  -- tensor(0.0885)
function M.kaiming_normal_(t, a, mode, nonlinearity, gen)
  check_tensor(t, "kaiming_normal_")
  a, mode, nonlinearity, gen = kaiming_args("kaiming_normal_", a, mode, nonlinearity, gen)
  if t:numel() == 0 then return t end
  local std = kaiming_std(t, "kaiming_normal_", a, mode, nonlinearity)
  return no_grad(normal, t, 0.0, std, gen)
end

--- 2-d sparse init: normal(0, std), then in each column ceil(sparsity * rows)
-- entries, picked by a random permutation of the rows, set to zero.
-- @usage
-- local w = attn.empty(10, 5)
-- nn.init.sparse_(w, 0.3)                                        -- 30% of each column zero
-- print(w:eq(0):sum(1))                                           -- tensor([3, 3, 3, 3, 3])
function M.sparse_(t, sparsity, std, gen)
  check_tensor(t, "sparse_")
  check_number(sparsity, "sparse_", "sparsity")
  if sparsity ~= sparsity then error("init.sparse_: sparsity must be a number, got nan", 2) end
  std = opt_number(std, 0.01, "sparse_", "std")
  local shape = t:shape()
  if #shape ~= 2 then error("init.sparse_: only tensors with 2 dimensions are supported", 2) end
  local rows, cols = shape[1], shape[2]
  -- torch zeroes the first ceil(sparsity * rows) of a permutation: at most
  -- every row, none for sparsity <= 0
  local num_zeros = math.max(0, math.min(rows, math.ceil(sparsity * rows)))
  return no_grad(function(x)
    x:normal_(0, std, gen)
    for col = 1, cols do
      local perm = attn.randperm(rows, gen):totable()
      for i = 1, num_zeros do x[{perm[i], col}] = 0 end
    end
  end, t)
end

-- torch's signatures (attn/signature.lua: a trailing options table);
-- generator, torch 2.x's, comes last
require("attn.signature").declare(M, "init.", {
  calculate_gain = "nonlinearity, param=nil", calculate_fan_in_and_fan_out = false,
  uniform_ = "tensor, a=0.0, b=1.0, generator=nil", normal_ = "tensor, mean=0.0, std=1.0, generator=nil",
  constant_ = false, zeros_ = false, ones_ = false, eye_ = false,
  xavier_uniform_ = "tensor, gain=1.0, generator=nil", xavier_normal_ = "tensor, gain=1.0, generator=nil",
  kaiming_uniform_ = "tensor, a=0, mode='fan_in', nonlinearity='leaky_relu', generator=nil",
  kaiming_normal_ = "tensor, a=0, mode='fan_in', nonlinearity='leaky_relu', generator=nil",
  sparse_ = "tensor, sparsity, std=0.01, generator=nil",
})
return M
