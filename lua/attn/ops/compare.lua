-- SPDX-License-Identifier: MIT

--- attn.ops.compare: whole-tensor comparisons and the fused matmuls, on top
-- of the differentiable core ops (torch 1.13 semantics):
--
--   isclose(a, b, rtol, atol, equal_nan)   a bool tensor, broadcasting
--   allclose(a, b, rtol, atol, equal_nan)  a Lua boolean
--   equal(a, b)                            a Lua boolean: same shape, values
--   addmm / baddbmm / addbmm               beta * input + alpha * (products)
--
-- Installed by attn/ops.lua as attn.NAME and the method t:NAME.
local core = require "attn.core"
local error = core._error -- raises at the user's line (the first caller outside attn)
local M = {}

local function attn() return M.attn end

local function check_tensor(x, fn, name)
  if not attn().is_tensor(x) then
    error(("%s: %s must be a tensor (got %s)"):format(fn, name, type(x)), 3)
  end
  return x
end

local function check_number(v, fn, name, nonneg)
  if type(v) ~= "number" or v ~= v then
    error(("%s: %s must be a number (got %s)"):format(fn, name, type(v) == "number" and "NaN" or type(v)), 3)
  end
  if nonneg and v < 0 then
    error(("%s: %s must be greater than or equal to zero, but got %s"):format(fn, name, tostring(v)), 3)
  end
  return v
end

local function shape_str(x) return "[" .. table.concat(x:shape(), ",") .. "]" end

-- isclose's body (arguments checked): a bool tensor.
local function isclose(a, b, rtol, atol, equal_nan)
  local A = attn()
  local close = A.eq(a, b) -- exact equality, infinities included
  if a.dtype == A.bool then return close end
  if equal_nan then close = A.logical_or(close, A.logical_and(A.isnan(a), A.isnan(b))) end
  -- torch: |a - b| finite and <= atol + |rtol * b|
  local err = A.sub(b, a):abs()
  local allowed = A.mul(b, rtol):abs():add(atol)
  return A.logical_or(close, A.logical_and(A.isfinite(err), A.le(err, allowed)))
end

local function close_args(fn, a, b, rtol, atol, equal_nan)
  check_tensor(a, fn, "input")
  check_tensor(b, fn, "other")
  if a.dtype ~= b.dtype then
    error(("%s: input is %s and other is %s; torch requires one dtype (convert one with :to(...))"):format(fn,
      tostring(a.dtype), tostring(b.dtype)), 3)
  end
  rtol = check_number(rtol == nil and 1e-5 or rtol, fn, "rtol", true)
  atol = check_number(atol == nil and 1e-8 or atol, fn, "atol", true)
  if equal_nan ~= nil and type(equal_nan) ~= "boolean" then
    error(("%s: equal_nan must be a boolean (got %s)"):format(fn, type(equal_nan)), 3)
  end
  local sa, sb = a:shape(), b:shape()
  for i = 1, math.min(#sa, #sb) do
    local x, y = sa[#sa + 1 - i], sb[#sb + 1 - i]
    if x ~= y and x ~= 1 and y ~= 1 then
      error(("%s: cannot broadcast input %s with other %s"):format(fn, shape_str(a), shape_str(b)), 3)
    end
  end
  return rtol, atol, equal_nan == true
end

--- isclose(a, b, rtol = 1e-05, atol = 1e-08, equal_nan = false): a bool
-- tensor, elementwise |a - b| <= atol + rtol * |b| (or a == b; NaN == NaN
-- only with equal_nan), broadcasting a and b.  Both must have one dtype
-- (torch's rule); for bool tensors it is a == b.  torch.isclose.
-- @usage
-- print(attn.isclose(attn.tensor({1.0, 0 / 0}), attn.tensor({1.0 + 1e-9, 0 / 0}), {equal_nan = true}))
function M.isclose(a, b, rtol, atol, equal_nan)
  local r, t, e = close_args("isclose", a, b, rtol, atol, equal_nan)
  return attn().no_grad(function() return isclose(a, b, r, t, e) end)
end

--- allclose(a, b, rtol = 1e-05, atol = 1e-08, equal_nan = false): whether
-- isclose holds everywhere, a Lua boolean (true for empty tensors).
-- torch.allclose.
-- @usage
-- local a = attn.tensor({1.0, 2.0})
-- print(attn.allclose(a, a + 1e-7), attn.allclose(a, a + 1e-3, {rtol = 0, atol = 1e-4}))   -- true false
function M.allclose(a, b, rtol, atol, equal_nan)
  local r, t, e = close_args("allclose", a, b, rtol, atol, equal_nan)
  return attn().no_grad(function() return isclose(a, b, r, t, e):all():item() end)
end

--- equal(a, b): whether a and b have the same shape and the same values
-- (NaN is never equal; dtypes may differ, compared after promotion as
-- torch 1.13 does), a Lua boolean.  torch.equal.
-- @usage
-- print(attn.equal(attn.ones(2), attn.ones(2)), attn.equal(attn.ones(2), attn.ones(3)))   -- true false
function M.equal(a, b)
  check_tensor(a, "equal", "input")
  check_tensor(b, "equal", "other")
  local sa, sb = a:shape(), b:shape()
  if #sa ~= #sb then return false end
  for i = 1, #sa do
    if sa[i] ~= sb[i] then return false end
  end
  return attn().no_grad(function() return attn().eq(a, b):all():item() end)
end

-- The fused matmuls: beta * input + alpha * product, input broadcast to
-- the product's shape; beta == 0 ignores input's values (NaN included) but
-- keeps its gradient (zeros), as torch does.
local function fused(fn, input, product, beta, alpha)
  local A = attn()
  beta = check_number(beta == nil and 1 or beta, fn, "beta")
  alpha = check_number(alpha == nil and 1 or alpha, fn, "alpha")
  if input.dtype ~= A.float32 then -- integer scalars, as torch casts them
    beta = beta >= 0 and math.floor(beta) or math.ceil(beta)
    alpha = alpha >= 0 and math.floor(alpha) or math.ceil(alpha)
  end
  local ps, is = product:shape(), input:shape()
  local fits = #is <= #ps
  for i = 1, #is do
    local s, p = is[#is + 1 - i], ps[#ps + 1 - i]
    if fits and s ~= p and s ~= 1 then fits = false end
  end
  if not fits then
    error(("%s: input %s does not broadcast to the product's shape %s"):format(fn, shape_str(input),
      shape_str(product)), 3)
  end
  local out = alpha == 1 and product or A.mul(product, alpha)
  if beta == 0 then
    if input.requires_grad and A.is_grad_enabled() then -- a zero gradient, NaN-free
      out = A.add(out, A.where(A.isfinite(input), input, 0):mul(0))
    elseif #is ~= #ps or table.concat(is, ",") ~= table.concat(ps, ",") then
      out = out:contiguous()
    end
    return out
  end
  return A.add(beta == 1 and input or A.mul(input, beta), out)
end

local function check_dims(fn, x, name, nd)
  check_tensor(x, fn, name)
  if x:dim() ~= nd then
    error(("%s: %s must be a %d-D tensor (got %s)"):format(fn, name, nd, shape_str(x)), 3)
  end
end

local function same_dtype(fn, a, an, b, bn)
  if a.dtype ~= b.dtype then
    error(("%s: %s is %s and %s is %s; torch requires one dtype (convert one with :to(...))"):format(fn, an,
      tostring(a.dtype), bn, tostring(b.dtype)), 3)
  end
end

--- addmm(input, mat1, mat2, beta = 1, alpha = 1): beta * input + alpha *
-- (mat1 @ mat2), mat1 [n,m], mat2 [m,p], input broadcast to [n,p]; beta = 0
-- ignores input's values (NaN included).  Differentiable.  torch.addmm.
-- @usage
-- local bias = attn.tensor({1.0, -1.0})
-- local x, w = attn.ones(3, 4), attn.ones(4, 2)
-- print(attn.addmm(bias, x, w, {beta = 1, alpha = 0.5}))   -- bias + 0.5 * x @ w
function M.addmm(input, mat1, mat2, beta, alpha)
  check_tensor(input, "addmm", "input")
  check_dims("addmm", mat1, "mat1", 2)
  check_dims("addmm", mat2, "mat2", 2)
  same_dtype("addmm", mat1, "mat1", mat2, "mat2")
  same_dtype("addmm", input, "input", mat1, "mat1")
  if mat1:shape()[2] ~= mat2:shape()[1] then
    error(("addmm: cannot multiply mat1 %s by mat2 %s"):format(shape_str(mat1), shape_str(mat2)), 2)
  end
  return fused("addmm", input, mat1:mm(mat2), beta, alpha)
end

local function batches(fn, input, b1, b2)
  check_dims(fn, b1, "batch1", 3)
  check_dims(fn, b2, "batch2", 3)
  same_dtype(fn, b1, "batch1", b2, "batch2")
  same_dtype(fn, input, "input", b1, "batch1")
  local s1, s2 = b1:shape(), b2:shape()
  if s1[1] ~= s2[1] or s1[3] ~= s2[2] then
    error(("%s: cannot multiply batch1 %s by batch2 %s (expected [b,n,m] and [b,m,p])"):format(fn, shape_str(b1),
      shape_str(b2)), 3)
  end
end

--- baddbmm(input, batch1, batch2, beta = 1, alpha = 1): beta * input +
-- alpha * (batch1 @ batch2) per batch, batch1 [b,n,m], batch2 [b,m,p],
-- input broadcast to [b,n,p].  Differentiable.  torch.baddbmm.
-- @usage
-- local scores = attn.zeros(2, 3, 3)
-- local q, k = attn.randn(2, 3, 4), attn.randn(2, 4, 3)
-- print(attn.baddbmm(scores, q, k, {alpha = 0.5}).shape)   -- scores + 0.5 * q @ k per batch
function M.baddbmm(input, batch1, batch2, beta, alpha)
  check_tensor(input, "baddbmm", "input")
  batches("baddbmm", input, batch1, batch2)
  return fused("baddbmm", input, batch1:bmm(batch2), beta, alpha)
end

--- addbmm(input, batch1, batch2, beta = 1, alpha = 1): beta * input +
-- alpha * (the sum over the batch of batch1[i] @ batch2[i]), input
-- broadcast to [n,p].  Differentiable.  torch.addbmm.
-- @usage
-- local M = attn.zeros(2, 2)
-- local a, b = attn.ones(3, 2, 4), attn.ones(3, 4, 2)
-- print(attn.addbmm(M, a, b))                    -- M + sum over the batch of a_i b_i: 12s
function M.addbmm(input, batch1, batch2, beta, alpha)
  check_tensor(input, "addbmm", "input")
  batches("addbmm", input, batch1, batch2)
  local s1, s2 = batch1:shape(), batch2:shape()
  -- the batch sum as one matmul: [n, b*m] @ [b*m, p]
  local left = batch1:permute(2, 1, 3):reshape(s1[2], s1[1] * s1[3])
  local right = batch2:reshape(s2[1] * s2[2], s2[3])
  return fused("addbmm", input, left:mm(right), beta, alpha)
end

return M
