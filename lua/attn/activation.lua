-- SPDX-License-Identifier: MIT

--- Activations after torch 1.13: the functions F.silu, F.mish,
-- F.leaky_relu, F.elu, F.softplus and the modules nn.SiLU, nn.Mish,
-- nn.LeakyReLU, nn.ELU, nn.Softplus (loaded on first use, see the ends of
-- nn.lua and functional.lua).
--
-- Each is composed of differentiable tensor ops, arranged so that the
-- gradient is torch's everywhere, at the switching points included:
--   leaky_relu  x > 0 ? x : slope x;           d/dx at 0 is slope
--   elu         x > 0 ? x : alpha (e^x - 1);   d/dx at 0 is alpha
--   softplus    beta x > threshold ? x : log(1 + e^(beta x)) / beta;
--               at beta x == threshold the log branch (and its gradient)
--   mish        x tanh(softplus(x)), softplus without threshold as torch's
--               kernel; the large-x branch gives x itself, so the gradient
--               stays finite where e^x overflows
-- The branch not taken never sees an input that would overflow, so no
-- 0 * inf reaches a gradient.
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
local nn = require "attn.nn.module"

local M = {}
local is_tensor = attn.is_tensor
local where = attn.where

local fail = error -- errors point at the first caller outside the attn package

local function check_tensor(x, fn)
  if not is_tensor(x) then fail(("%s: input must be a tensor (got %s)"):format(fn, type(x))) end
  if not x:is_floating_point() then -- torch refuses integers and bools too
    fail(("%s: expected a floating tensor, got %s (convert with :float() first)"):format(fn,
      tostring(x.dtype):gsub("^attn%.", "")))
  end
  return x
end

local function number_arg(v, def, fn, name)
  if v == nil then return def end
  if type(v) ~= "number" or v ~= v then fail(("%s: %s must be a number (got %s)"):format(fn, name, tostring(v))) end
  return v
end

local function bool_arg(v, def, fn, name)
  if v == nil then return def end
  if type(v) ~= "boolean" then fail(("%s: %s must be a boolean (got %s)"):format(fn, name, tostring(v))) end
  return v
end

-- In place: the result is computed from a copy of x (which the graph
-- saves, so overwriting x does not invalidate the backward) and copied into
-- x; the gradient flows through the copy to x's earlier value.
local function source(x, inplace)
  if inplace then return x:clone() end
  return x
end

local function finish(x, y, inplace)
  if inplace then return x:copy_(y) end
  return y
end

--- silu(x [, inplace = false]): x * sigmoid(x) elementwise.
-- torch.nn.functional.silu; also attn.F.silu.
-- @tparam Tensor x any shape
-- @tparam[opt=false] boolean inplace overwrite x and return it
-- @treturn Tensor of x's shape
-- @usage
-- local activation = require "attn.activation"
-- print(activation.silu(attn.tensor({-1.0, 1.0})))   -- tensor([-0.2689,  0.7311])
function M.silu(x, inplace)
  check_tensor(x, "silu")
  if bool_arg(inplace, false, "silu", "inplace") then return x:silu_() end
  return attn.silu(x)
end

--- leaky_relu(x [, negative_slope = 0.01 [, inplace = false]]):
-- x > 0 ? x : negative_slope * x elementwise; the gradient at 0 is
-- negative_slope, as torch.  torch.nn.functional.leaky_relu; also attn.F.
-- @tparam Tensor x any shape
-- @tparam[opt=0.01] number negative_slope
-- @tparam[opt=false] boolean inplace overwrite x and return it
-- @treturn Tensor of x's shape
-- @usage
-- local activation = require "attn.activation"
-- print(activation.leaky_relu(attn.tensor({-1.0, 1.0}), 0.1))   -- tensor([-0.1000,  1.0000])
function M.leaky_relu(x, negative_slope, inplace)
  check_tensor(x, "leaky_relu")
  local s = number_arg(negative_slope, 0.01, "leaky_relu", "negative_slope")
  inplace = bool_arg(inplace, false, "leaky_relu", "inplace")
  local v = source(x, inplace)
  return finish(x, where(v:gt(0), v, v * s), inplace)
end

--- elu(x [, alpha = 1.0 [, inplace = false]]): x > 0 ? x : alpha (e^x - 1)
-- elementwise.  torch.nn.functional.elu; also attn.F.elu.
-- @tparam Tensor x any shape
-- @tparam[opt=1.0] number alpha
-- @tparam[opt=false] boolean inplace overwrite x and return it
-- @treturn Tensor of x's shape
-- @usage
-- local activation = require "attn.activation"
-- print(activation.elu(attn.tensor({-1.0, 1.0})))   -- tensor([-0.6321,  1.0000]); also attn.F.elu
function M.elu(x, alpha, inplace)
  check_tensor(x, "elu")
  local a = number_arg(alpha, 1.0, "elu", "alpha")
  inplace = bool_arg(inplace, false, "elu", "inplace")
  local v = source(x, inplace)
  local pos = v:gt(0)
  local neg = where(pos, 0, v):expm1() * a
  return finish(x, where(pos, v, neg), inplace)
end

--- softplus(x [, beta = 1 [, threshold = 20]]): log(1 + e^(beta x)) / beta
-- elementwise, and x itself where beta x > threshold.
-- torch.nn.functional.softplus; also attn.F.softplus.
-- @tparam Tensor x any shape
-- @tparam[opt=1] number beta
-- @tparam[opt=20] number threshold
-- @treturn Tensor of x's shape
-- @usage
-- local activation = require "attn.activation"
-- print(activation.softplus(attn.tensor({-1.0, 1.0}), 2))   -- beta 2: tensor([0.0635, 1.0635])
function M.softplus(x, beta, threshold)
  check_tensor(x, "softplus")
  local b = number_arg(beta, 1, "softplus", "beta")
  local th = number_arg(threshold, 20, "softplus", "threshold")
  local xb = b == 1 and x or x * b
  local big = xb:gt(th)
  local soft = where(big, 0, xb):exp():log1p()
  if b ~= 1 then soft = soft / b end
  return where(big, x, soft)
end

--- mish(x [, inplace = false]): x * tanh(softplus(x)) elementwise.
-- torch.nn.functional.mish; also attn.F.mish.
-- @tparam Tensor x any shape
-- @tparam[opt=false] boolean inplace overwrite x and return it
-- @treturn Tensor of x's shape
-- @usage
-- local activation = require "attn.activation"
-- print(activation.mish(attn.tensor({-1.0, 1.0})))   -- tensor([-0.3034,  0.8651])
function M.mish(x, inplace)
  check_tensor(x, "mish")
  inplace = bool_arg(inplace, false, "mish", "inplace")
  -- above 20, log1p(e^x) equals x in float32 and tanh of it is 1
  local v = source(x, inplace)
  local big = v:gt(20)
  local sp = where(big, v, where(big, 0, v):exp():log1p())
  return finish(x, v * sp:tanh(), inplace)
end

---------------------------------------------------------------------------
-- Modules

local pyrepr = nn._pyrepr

local function inplace_repr(self, sep)
  return self.inplace and (sep .. "inplace=True") or ""
end

local function module(name, names, init, forward, repr)
  local cls = nn.Module:extend(name)
  cls.init = function(self, ...)
    local o = attn._misuse.named_args(name, {...}, names) -- positionally (torch's order) or as one table
    init(self, o, name)
  end
  cls.forward = function(self, x)
    check_tensor(x, name)
    return forward(self, x)
  end
  cls.extra_repr = repr
  M[name] = cls
  return cls
end

--- nn.SiLU([inplace = false]): the module form of F.silu, x * sigmoid(x)
-- elementwise on any shape.  torch.nn.SiLU.  Arguments positionally or as
-- one table (`nn.SiLU{inplace = true}`).
-- @table SiLU
module("SiLU", {"inplace"}, function(self, o, name)
  self.inplace = bool_arg(o.inplace, false, name, "inplace")
end, function(self, x) return M.silu(x, self.inplace) end,
function(self) return inplace_repr(self, "") end)

--- nn.Mish([inplace = false]): the module form of F.mish,
-- x * tanh(softplus(x)).  torch.nn.Mish.  Arguments positionally or as one
-- table.
-- @table Mish
module("Mish", {"inplace"}, function(self, o, name)
  self.inplace = bool_arg(o.inplace, false, name, "inplace")
end, function(self, x) return M.mish(x, self.inplace) end,
function(self) return inplace_repr(self, "") end)

--- nn.LeakyReLU([negative_slope = 0.01 [, inplace = false]]): the module
-- form of F.leaky_relu, x > 0 ? x : negative_slope * x.  torch.nn.LeakyReLU.
-- Arguments positionally or as one table
-- (`nn.LeakyReLU{negative_slope = 0.2}`).
-- @table LeakyReLU
module("LeakyReLU", {"negative_slope", "inplace"}, function(self, o, name)
  self.negative_slope = number_arg(o.negative_slope, 0.01, name, "negative_slope")
  self.inplace = bool_arg(o.inplace, false, name, "inplace")
end, function(self, x) return M.leaky_relu(x, self.negative_slope, self.inplace) end,
function(self) return "negative_slope=" .. pyrepr(self.negative_slope) .. inplace_repr(self, ", ") end)

--- nn.ELU([alpha = 1.0 [, inplace = false]]): the module form of F.elu,
-- x > 0 ? x : alpha * (e^x - 1).  torch.nn.ELU.  Arguments positionally or
-- as one table.
-- @table ELU
module("ELU", {"alpha", "inplace"}, function(self, o, name)
  self.alpha = number_arg(o.alpha, 1.0, name, "alpha")
  self.inplace = bool_arg(o.inplace, false, name, "inplace")
end, function(self, x) return M.elu(x, self.alpha, self.inplace) end,
function(self) return "alpha=" .. pyrepr(self.alpha) .. inplace_repr(self, ", ") end)

--- nn.Softplus([beta = 1 [, threshold = 20]]): the module form of
-- F.softplus, log(1 + e^(beta x)) / beta, and x itself where
-- beta x > threshold.  torch.nn.Softplus.  Arguments positionally or as one
-- table.
-- @table Softplus
module("Softplus", {"beta", "threshold"}, function(self, o, name)
  self.beta = number_arg(o.beta, 1, name, "beta")
  self.threshold = number_arg(o.threshold, 20, name, "threshold")
end, function(self, x) return M.softplus(x, self.beta, self.threshold) end,
function(self) return ("beta=%s, threshold=%s"):format(pyrepr(self.beta), pyrepr(self.threshold)) end)

--- SiLU:init([inplace = false]), called by `nn.SiLU(...)`: the SiLU (swish)
-- activation as a module, x * sigmoid(x) elementwise on any shape, output
-- of the input's shape (F.silu); inplace overwrites the input and returns
-- it.  torch.nn.SiLU.  The argument comes positionally or in one table
-- (`nn.SiLU{inplace = true}`); its type is checked and an unknown option
-- raises.
-- @usage
-- local act = nn.SiLU()                                -- or nn.SiLU(true) to work in place
-- print(act(attn.tensor({-1.0, 1.0})))                  -- tensor([-0.2689,  0.7311])
-- @function SiLU:init

--- SiLU:forward(x): silu(x, self.inplace); calling the module (`m(x)`) runs it.
-- @tparam Tensor x the input, any shape; with inplace it is overwritten and returned
-- @treturn Tensor of x's shape
-- @function SiLU:forward

--- SiLU:extra_repr(): the arguments shown in the module tree: "inplace=True" or "".
-- @treturn string
-- @function SiLU:extra_repr

--- Mish:init([inplace = false]), called by `nn.Mish(...)`: the Mish
-- activation as a module, x * tanh(softplus(x)) elementwise on any shape,
-- output of the input's shape (F.mish); inplace overwrites the input and
-- returns it.  torch.nn.Mish.  The argument comes positionally or in one
-- table; its type is checked and an unknown option raises.
-- @usage
-- local act = nn.Mish()
-- print(act(attn.tensor({-1.0, 1.0})))                  -- tensor([-0.3034,  0.8651])
-- @function Mish:init

--- Mish:forward(x): mish(x, self.inplace); calling the module (`m(x)`) runs it.
-- @tparam Tensor x the input, any shape; with inplace it is overwritten and returned
-- @treturn Tensor of x's shape
-- @function Mish:forward

--- Mish:extra_repr(): the arguments shown in the module tree: "inplace=True" or "".
-- @treturn string
-- @function Mish:extra_repr

--- LeakyReLU:init([negative_slope = 0.01 [, inplace = false]]), called by
-- `nn.LeakyReLU(...)`: the leaky ReLU as a module, x where x > 0 and
-- negative_slope * x elsewhere, elementwise on any shape (F.leaky_relu);
-- inplace overwrites the input and returns it.  torch.nn.LeakyReLU.  The
-- arguments come positionally or in one table
-- (`nn.LeakyReLU{negative_slope = 0.2}`); their types are checked
-- (numbers must not be NaN) and an unknown option raises.
-- @usage
-- local act = nn.LeakyReLU(0.2)
-- print(act(attn.tensor({-1.0, 1.0})))                  -- tensor([-0.2000,  1.0000])
-- @function LeakyReLU:init

--- LeakyReLU:forward(x): leaky_relu(x, self.negative_slope, self.inplace); calling the module (`m(x)`) runs it.
-- @tparam Tensor x the input, any shape; with inplace it is overwritten and returned
-- @treturn Tensor of x's shape
-- @function LeakyReLU:forward

--- LeakyReLU:extra_repr(): the arguments shown in the module tree:
-- "negative_slope=0.01" (then ", inplace=True" when set), as torch prints it.
-- @treturn string
-- @function LeakyReLU:extra_repr

--- ELU:init([alpha = 1.0 [, inplace = false]]), called by `nn.ELU(...)`:
-- the exponential linear unit as a module, x where x > 0 and
-- alpha * (e^x - 1) elsewhere, elementwise on any shape (F.elu); inplace
-- overwrites the input and returns it.  torch.nn.ELU.  The arguments come
-- positionally or in one table (`nn.ELU{alpha = 0.5}`); their types are
-- checked (numbers must not be NaN) and an unknown option raises.
-- @usage
-- local act = nn.ELU(0.5)                         -- or nn.ELU({alpha = 0.5})
-- print(act(attn.tensor({-1.0, 1.0})), act)            -- tensor([-0.3161,  1.0000])  ELU(alpha=0.5)
-- @function ELU:init

--- ELU:forward(x): elu(x, self.alpha, self.inplace); calling the module (`m(x)`) runs it.
-- @tparam Tensor x the input, any shape; with inplace it is overwritten and returned
-- @treturn Tensor of x's shape
-- @function ELU:forward

--- ELU:extra_repr(): the arguments shown in the module tree:
-- "alpha=1.0" (then ", inplace=True" when set), as torch prints it.
-- @treturn string
-- @function ELU:extra_repr

--- Softplus:init([beta = 1 [, threshold = 20]]), called by
-- `nn.Softplus(...)`: the softplus activation as a module,
-- log(1 + e^(beta x)) / beta elementwise on any shape, and x itself where
-- beta x > threshold (F.softplus).  torch.nn.Softplus.  The arguments come
-- positionally or in one table (`nn.Softplus{beta = 2}`); their types are
-- checked (numbers must not be NaN) and an unknown option raises.
-- @usage
-- local act = nn.Softplus(2, 20)                       -- beta, threshold; or nn.Softplus({beta = 2})
-- print(act(attn.tensor({-1.0, 1.0})))                  -- tensor([0.0635, 1.0635])
-- @function Softplus:init

--- Softplus:forward(x): softplus(x, self.beta, self.threshold); calling the module (`m(x)`) runs it.
-- @tparam Tensor x the input, any shape
-- @treturn Tensor of x's shape
-- @function Softplus:forward

--- Softplus:extra_repr(): the arguments shown in the module tree: "beta=1, threshold=20", as torch prints it.
-- @treturn string
-- @function Softplus:extra_repr

-- torch's signatures (attn/signature.lua: a trailing options table)
require("attn.signature").declare(M, "activation.", {
  silu = "input, inplace=false", mish = "input, inplace=false",
  leaky_relu = "input, negative_slope=0.01, inplace=false", elu = "input, alpha=1.0, inplace=false",
  softplus = "input, beta=1, threshold=20",
})
for name, sig in pairs({SiLU = "inplace=false", Mish = "inplace=false",
                        LeakyReLU = "negative_slope=0.01, inplace=false", ELU = "alpha=1.0, inplace=false",
                        Softplus = "beta=1, threshold=20"}) do
  require("attn.signature").declare(M[name], "nn." .. name .. ".", {init = "self, " .. sig, forward = false,
    extra_repr = false})
end
return M
