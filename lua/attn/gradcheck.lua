-- SPDX-License-Identifier: MIT

--- attn.gradcheck: compares the gradients autograd computes with central
-- finite differences, like torch.autograd.gradcheck.
--
--   attn.gradcheck(fn, inputs [, opts]) -> true
--   attn.gradcheck(fn, inputs, {raise = false}) -> true | false, message
--
-- inputs is a list of values passed to fn in order; the tensors among them
-- that require grad (they must be leaves) are checked.  fn returns a
-- tensor, several tensors, or a list of tensors.  Outputs that do not
-- require grad (indices, comparisons) count as constants: their analytic
-- gradient is zero, so the finite differences must be zero too.
--
-- What is compared: when the outputs hold at most opts.full_max elements
-- (default 32) every output element is checked in turn (the whole
-- Jacobian, one backward call per output element); larger outputs are
-- checked through the scalar sum(output * R), with R a fixed pseudo-random
-- projection (entries of magnitude 0.5..1.5 and random sign, from a private
-- generator, so attn's RNG stream is not touched).  Analytic: the gradient
-- that backward gives each input.  Numerical: for every element x_i of
-- every checked input, (f(x + h e_i) - f(x - h e_i)) / (2h), with h the
-- step actually taken in float32 (fl(x_i + eps) - x_i, not eps itself).
-- An element passes when |analytic - numerical| <= atol + rtol * |numerical|.
--
-- Tolerances: attn computes in float32 only, where torch's gradcheck works
-- in float64 with eps = 1e-6, atol = 1e-5, rtol = 1e-3.  In float32 an
-- output f carries a rounding error of about 6e-8 |f|, which the central
-- difference divides by 2 eps: with eps = 1e-3 that is ~3e-5 |f| per output
-- element (growing like sqrt(n) over n projected elements), while the
-- truncation error is ~eps^2 |f'''| / 6 ~ 2e-7 |f'''|.  So the defaults
-- eps = 1e-3, atol = 1e-2, rtol = 1e-2 leave a wide margin for inputs and
-- outputs of order 1, yet any real gradient bug (a wrong factor or sign, a
-- missing term, a gradient routed to the wrong element) shows as an O(1)
-- error.  Keep inputs away from kinks (relu, abs, clamp, max: at least a
-- few eps from the switching point) and in the domain (log, sqrt: > 0).
--
-- Inputs are perturbed in place under attn.no_grad and restored bit for bit
-- afterwards (even when fn raises).  The writes bump the inputs' version
-- counters, so a graph built earlier that saved one of them cannot be
-- backpropagated after a gradcheck.  The inputs' .grad is saved before the
-- check and put back after it.
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)

local M = {}

local defaults = {eps = 1e-3, atol = 1e-2, rtol = 1e-2, raise = true, full_max = 32, seed = 12345}

local function fmt_shape(s) return "[" .. table.concat(s, ",") .. "]" end

--- Flat row-major list of a tensor's values (any strides).
local function flat(t)
  if t:dim() == 0 then return {t:item()} end
  return attn.no_grad(function()
    local v = t:reshape(t:numel()):totable()
    return v
  end)
end

--- 1-based multi-index (a table usable as t[idx]) of flat element i (1-based).
local function unflatten(shape, i)
  local idx, r = {}, i - 1
  for d = #shape, 1, -1 do
    idx[d] = r % shape[d] + 1
    r = r // shape[d]
  end
  return idx
end

--- A small LCG (Numerical Recipes' constants) for the projections: it
-- never touches attn's own generator.
local function lcg(seed)
  local state = seed & 0xffffffff
  return function()
    state = (1664525 * state + 1013904223) & 0xffffffff
    return state / 4294967296.0
  end
end

--- The outputs of one call of fn, as a list of tensors.
local function collect(...)
  local r = table.pack(...)
  local outs = {}
  if r.n == 1 and type(r[1]) == "table" then r = r[1] end
  for i = 1, (r.n or #r) do
    if attn.is_tensor(r[i]) then outs[#outs + 1] = r[i] end
  end
  return outs
end

local function call(fn, inputs)
  return collect(fn(table.unpack(inputs, 1, inputs.n or #inputs)))
end

--- All outputs' values as one flat list (numerical pass).
local function flat_outputs(outs)
  local v = {}
  for _, o in ipairs(outs) do
    for _, x in ipairs(flat(o)) do v[#v + 1] = x end
  end
  return v
end

local function check(fn, inputs, o)
  -- the inputs to check
  local checked = {}
  for i = 1, (inputs.n or #inputs) do
    local x = inputs[i]
    if attn.is_tensor(x) and x.requires_grad then
      if not x.is_leaf then
        error(("gradcheck: input %d requires grad but is not a leaf (grad_fn %s); pass a leaf such as "
          .. "x:detach():requires_grad_(true)"):format(i, x.grad_fn), 0)
      end
      checked[#checked + 1] = {pos = i, t = x, shape = x:shape(), n = x:numel()}
    end
  end
  if #checked == 0 then error("gradcheck: no input requires grad", 0) end

  -- analytic pass: one forward with gradients on, then backward calls
  local outs, nout, diff = nil, 0, false
  local offsets = {}
  local function grads_now()
    local g = {}
    for k, c in ipairs(checked) do
      local gr = c.t.grad
      if gr == nil then
        local z = {}
        for i = 1, c.n do z[i] = 0 end
        g[k] = z
      else
        local gs = gr:shape()
        if fmt_shape(gs) ~= fmt_shape(c.shape) then
          error(("gradcheck: the gradient of input %d has shape %s, the input %s"):format(
            c.pos, fmt_shape(gs), fmt_shape(c.shape)), 0)
        end
        g[k] = flat(gr)
      end
    end
    -- cleared after reading all: one tensor may be passed twice
    for _, c in ipairs(checked) do c.t.grad = nil end
    return g
  end
  for _, c in ipairs(checked) do c.t.grad = nil end
  local analytic -- full: analytic[j][k][i]; projected: analytic[k][i]
  local full, R = false, nil
  attn.enable_grad(function()
    outs = call(fn, inputs)
    if #outs == 0 then error("gradcheck: fn returned no tensor", 0) end
    for k, out in ipairs(outs) do
      offsets[k] = nout
      nout = nout + out:numel()
      if out.requires_grad then diff = true end
    end
    if not diff then
      error("gradcheck: no output requires grad (does the op record a backward?)", 0)
    end
    full = nout <= o.full_max
    if full then
      analytic = {}
      for k, out in ipairs(outs) do
        local shape, n = out:shape(), out:numel()
        for j = 1, n do
          if out.requires_grad then
            local e = attn.zeros(shape)
            e[unflatten(shape, j)] = 1
            out:backward(e, true)
          end
          analytic[offsets[k] + j] = grads_now()
        end
      end
    else
      local rand = lcg(o.seed)
      R = {}
      for _, out in ipairs(outs) do
        local vals = {}
        for j = 1, out:numel() do
          vals[j] = (rand() < 0.5 and -1 or 1) * (0.5 + rand())
        end
        local r = attn.tensor(vals):reshape(out:shape())
        if out.requires_grad then out:backward(r, true) end
        for _, x in ipairs(flat(r)) do R[#R + 1] = x end -- the float32 values used
      end
      analytic = grads_now()
    end
  end)
  outs = nil

  -- numerical pass: central differences, one input element at a time
  local eps, atol, rtol = o.eps, o.atol, o.rtol
  local function compare(a, num, c, i, j)
    if math.abs(a - num) <= atol + rtol * math.abs(num) then return nil end
    local where = full and ("output element %d"):format(j) or "sum(output * R)"
    return ("gradcheck: gradient mismatch for input %d (shape %s) at element %d (index {%s}) of %s: "
      .. "analytic %.9g, numerical %.9g (|difference| %.3g > atol %g + rtol %g * |numerical|)"):format(
      c.pos, fmt_shape(c.shape), i, table.concat(unflatten(c.shape, i), ","), where, a, num,
      math.abs(a - num), atol, rtol)
  end
  for k, c in ipairs(checked) do
    for i = 1, c.n do
      local idx = unflatten(c.shape, i)
      local x = c.t
      local plus, minus, hp, hm
      local orig = attn.no_grad(function() return x[idx] end)
      local ok, err = pcall(attn.no_grad, function()
        x[idx] = orig + eps
        hp = x[idx]
        plus = flat_outputs(call(fn, inputs))
        x[idx] = orig - eps
        hm = x[idx]
        minus = flat_outputs(call(fn, inputs))
      end)
      attn.no_grad(function() x[idx] = orig end)
      if not ok then error(err, 0) end
      local h = hp - hm
      if #plus ~= nout or #minus ~= nout then
        error(("gradcheck: fn gave %d output elements after perturbing input %d, %d before"):format(
          #plus, c.pos, nout), 0)
      end
      if full then
        for j = 1, nout do
          local msg = compare(analytic[j][k][i], (plus[j] - minus[j]) / h, c, i, j)
          if msg then return false, msg end
        end
      else
        local s = 0.0
        for j = 1, nout do s = s + R[j] * (plus[j] - minus[j]) end
        local msg = compare(analytic[k][i], s / h, c, i)
        if msg then return false, msg end
      end
    end
  end
  return true
end

--- See the top of this file.
-- @usage
-- local gradcheck = require "attn.gradcheck"
-- local x = attn.randn(3, 4):requires_grad_()
-- print(gradcheck.gradcheck(function(t) return t:softmax(-1):pow(2) end, {x}))   -- true
function M.gradcheck(fn, inputs, opts)
  assert(type(fn) == "function" or (getmetatable(fn) or {}).__call,
    "gradcheck: fn must be callable")
  if opts == nil and type(inputs) == "table" and getmetatable(inputs) == nil and inputs.inputs ~= nil then
    opts = {} -- gradcheck(fn, {inputs = ..., eps = ...}): torch's keywords, inputs among them
    for k, v in pairs(inputs) do if k ~= "inputs" then opts[k] = v end end
    inputs = inputs.inputs
  end
  assert(type(inputs) == "table", "gradcheck: inputs must be a list")
  local o = {}
  for k, v in pairs(defaults) do o[k] = v end
  if opts ~= nil and type(opts) ~= "table" then
    error(("gradcheck: options must be a table (got %s)"):format(type(opts)), 2)
  end
  for k, v in pairs(opts or {}) do
    if defaults[k] == nil then error(attn._misuse.unknown_option("gradcheck", k, defaults), 2) end
    if type(v) ~= type(defaults[k]) or v ~= v then
      error(("gradcheck: option '%s' must be a %s (got %s)"):format(k, type(defaults[k]), tostring(v)), 2)
    end
    o[k] = v
  end
  -- keep the callers' gradients out of the way (and untouched)
  local saved = {}
  for i = 1, (inputs.n or #inputs) do
    local x = inputs[i]
    if attn.is_tensor(x) then saved[i] = {grad = x.grad} end
  end
  local ok, res, msg = pcall(check, fn, inputs, o)
  for i, s in pairs(saved) do inputs[i].grad = s.grad end
  if not ok then error(res, 2) end
  if res then return true end
  if o.raise then error(msg, 2) end
  return false, msg
end

-- torch's gradcheck(func, inputs, *, eps=, atol=, rtol=, raise_exception=, ...)
-- with attn's option names; it reads its options itself (attn/signature.lua)
require("attn.signature").declare(M, "gradcheck.", {
  gradcheck = "native: func, inputs, *, eps=0.001, atol=0.01, rtol=0.01, raise=true, full_max=32, seed=12345",
})

return setmetatable(M, {__call = function(_, ...) return M.gradcheck(...) end})
