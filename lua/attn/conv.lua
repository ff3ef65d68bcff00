-- SPDX-License-Identifier: MIT

--- nn.Conv1d and F.conv1d after torch 1.13 (loaded on first use, see the
-- ends of nn.lua and functional.lua).
--
-- The convolution is unfold + matmul over differentiable tensor ops:
--   x [B, C, L] is padded to [B, C, Lp]; for each kernel tap k a strided
--   slice [B, C, Lout] (positions k*dilation + 1, + stride, ...) is taken;
--   the K slices are stacked to columns [B, g, C/g * K, Lout] and one
--   batched matmul with the weight [g, O/g, C/g * K] gives [B, O, Lout].
-- Autograd differentiates the slices, the stack and the matmul, so the
-- gradients of input, weight and bias are torch's.
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
local nn = require "attn.nn.module"
local init = require "attn.nn_init"

local M = {}
local is_tensor = attn.is_tensor

local fail = error -- errors point at the first caller outside the attn package

local function fmt_shape(s) return "[" .. table.concat(s, ", ") .. "]" end

-- An int or, unless strict, a one-element list (torch's _single), at
-- least min.
local function single(v, def, fn, name, min, strict)
  if v == nil then return def end
  if type(v) == "table" and not is_tensor(v) and not strict then
    if #v ~= 1 then
      fail(("%s: %s must be an integer or a list of one integer (got %d values)"):format(fn, name, #v))
    end
    v = v[1]
  end
  local i = type(v) == "number" and math.tointeger(v)
  if not i then fail(("%s: %s must be an integer (got %s)"):format(fn, name, tostring(v))) end
  if i < min then fail(("%s: %s must be at least %d (got %d)"):format(fn, name, min, i)) end
  if i > (1 << 40) then fail(("%s: %s = %d is too large"):format(fn, name, i)) end
  return i
end

-- padding: an int / one-int list, "same" or "valid" -> left, right.
local function padding_of(padding, fn, K, stride, dilation)
  if padding == "valid" then return 0, 0 end
  if padding == "same" then
    if stride ~= 1 then fail(fn .. ": padding='same' is not supported for strided convolutions") end
    local total = dilation * (K - 1)
    local left = total // 2
    return left, total - left -- torch puts the odd one on the right
  end
  if type(padding) == "string" then
    fail(("%s: padding must be an integer, 'same' or 'valid' (got '%s')"):format(fn, padding))
  end
  local p = single(padding, 0, fn, "padding", 0)
  return p, p
end

local padding_modes = {zeros = true, reflect = true, replicate = true, circular = true}

-- x [B, C, L] padded by left / right columns in the given mode.
local function pad_input(x, left, right, mode, fn)
  if left == 0 and right == 0 then return x end
  local B, C, L = x:size(1), x:size(2), x:size(3)
  if mode == "zeros" then
    local parts = {}
    if left > 0 then parts[#parts + 1] = attn.zeros(B, C, left) end
    parts[#parts + 1] = x
    if right > 0 then parts[#parts + 1] = attn.zeros(B, C, right) end
    return attn.cat(parts, 3)
  end
  if mode == "reflect" and (left >= L or right >= L) then
    fail(("%s: padding (%d, %d) in reflect mode must be smaller than the input length %d"):format(fn, left, right, L))
  end
  if mode == "circular" and (left > L or right > L) then
    fail(("%s: padding (%d, %d) in circular mode may not exceed the input length %d"):format(fn, left, right, L))
  end
  if L == 0 then fail(("%s: cannot pad an empty input in %s mode"):format(fn, mode)) end
  local idx = {}
  for i = 1 - left, L + right do
    local j
    if i >= 1 and i <= L then j = i
    elseif mode == "replicate" then j = i < 1 and 1 or L
    elseif mode == "reflect" then j = i < 1 and (2 - i) or (2 * L - i)
    else j = (i - 1) % L + 1 end
    idx[#idx + 1] = j
  end
  return x:index_select(3, idx)
end

-- The convolution itself on checked arguments; x [B, C, L].
local function conv(x, weight, bias, stride, left, right, dilation, groups, mode, fn)
  local B, C, L = x:size(1), x:size(2), x:size(3)
  local O, Cg, K = weight:size(1), weight:size(2), weight:size(3)
  x = pad_input(x, left, right, mode, fn)
  local Lp = L + left + right
  local span = dilation * (K - 1) + 1
  if Lp < span then
    fail(("%s: the padded input has %d steps, fewer than the kernel's span %d (kernel_size %d, dilation %d); input %s")
      :format(fn, Lp, span, K, dilation, fmt_shape({B, C, L})))
  end
  local Lout = (Lp - span) // stride + 1
  local cols
  if K == 1 then
    cols = x:slice(3, 1, (Lout - 1) * stride + 1, stride):unsqueeze(3)
  else
    local taps = {}
    for k = 0, K - 1 do
      local first = k * dilation + 1
      taps[k + 1] = x:slice(3, first, first + (Lout - 1) * stride, stride)
    end
    cols = attn.stack(taps, 3) -- [B, C, K, Lout]
  end
  local y
  if groups == 1 then
    y = weight:reshape(O, Cg * K):matmul(cols:reshape(B, C * K, Lout))
  else
    local w = weight:reshape(groups, O // groups, Cg * K)
    y = w:matmul(cols:reshape(B, groups, Cg * K, Lout)):reshape(B, O, Lout)
  end
  if bias ~= nil then y = y + bias:reshape(O, 1) end
  return y
end

local function check_args(fn, x, weight, bias, groups)
  if not is_tensor(x) then fail(("%s: input must be a tensor (got %s)"):format(fn, type(x))) end
  if not is_tensor(weight) then fail(("%s: weight must be a tensor (got %s)"):format(fn, type(weight))) end
  if bias ~= nil and not is_tensor(bias) then
    fail(("%s: bias must be a tensor or nil (got %s)"):format(fn, type(bias)))
  end
  if weight:dim() ~= 3 then
    fail(("%s: weight must be 3-d [out_channels, in_channels / groups, kernel_size], got %s"):format(fn,
      fmt_shape(weight:shape())))
  end
  local d = x:dim()
  if d ~= 2 and d ~= 3 then
    fail(("%s: Expected 2D (unbatched) or 3D (batched) input, but got input of size: %s"):format(fn,
      fmt_shape(x:shape())))
  end
  local C = x:size(d - 1)
  local O, Cg, K = weight:size(1), weight:size(2), weight:size(3)
  if K == 0 then fail(("%s: weight %s has a kernel size of 0"):format(fn, fmt_shape(weight:shape()))) end
  if O % groups ~= 0 then
    fail(("%s: out_channels %d (weight %s) is not divisible by groups %d")
      :format(fn, O, fmt_shape(weight:shape()), groups))
  end
  if Cg * groups ~= C then
    fail(("%s: weight of size %s, expected input %s to have %d channels, but got %d channels instead"):format(fn,
      fmt_shape(weight:shape()), fmt_shape(x:shape()), Cg * groups, C))
  end
  if bias ~= nil and (bias:dim() ~= 1 or bias:size(1) ~= O) then
    fail(("%s: bias must be 1-d with %d entries (one per output channel), got %s"):format(fn, O,
      fmt_shape(bias:shape())))
  end
end

--- conv1d(input, weight [, bias [, stride = 1 [, padding = 0 [, dilation = 1
-- [, groups = 1]]]]]) or conv1d(input, weight, bias, {stride=, padding=,
-- dilation=, groups=}): input [B, C, L] or [C, L], weight
-- [O, C / groups, K], bias [O] or nil -> [B, O, Lout] (or [O, Lout]) with
-- Lout = (L + pad_left + pad_right - dilation (K - 1) - 1) // stride + 1.
-- padding: an integer (both sides), "valid" (0) or "same" (stride 1; an odd
-- total puts the extra column on the right, as torch does).
-- @usage
-- local conv = require "attn.conv"
-- print(conv.conv1d(attn.randn(1, 1, 5), attn.ones(1, 1, 3)).shape)   -- also attn.F.conv1d: [1, 1, 3]
function M.conv1d(input, weight, bias, stride, padding, dilation, groups)
  local fn = "conv1d"
  if type(stride) == "table" and not is_tensor(stride) and #stride == 0 then
    local o = stride
    for k in pairs(o) do
      if k ~= "stride" and k ~= "padding" and k ~= "dilation" and k ~= "groups" then
        fail(attn._misuse.unknown_option(fn, k, {"dilation", "groups", "padding", "stride"}))
      end
    end
    stride, padding, dilation, groups = o.stride, o.padding, o.dilation, o.groups
  end
  stride = single(stride, 1, fn, "stride", 1)
  dilation = single(dilation, 1, fn, "dilation", 1)
  groups = single(groups, 1, fn, "groups", 1, true)
  check_args(fn, input, weight, bias, groups)
  local left, right = padding_of(padding, fn, weight:size(3), stride, dilation)
  local batched = input:dim() == 3
  local x = batched and input or input:unsqueeze(1)
  local y = conv(x, weight, bias, stride, left, right, dilation, groups, "zeros", fn)
  if not batched then y = y:squeeze(1) end
  return y
end

---------------------------------------------------------------------------
-- nn.Conv1d

local Conv1d = nn.Module:extend("Conv1d")
M.Conv1d = Conv1d

local conv_options = {"stride", "padding", "dilation", "groups", "bias", "padding_mode"}

--- nn.Conv1d(in_channels, out_channels, kernel_size [, stride [, padding
-- [, dilation [, groups [, bias [, padding_mode]]]]]]) or
-- nn.Conv1d(in_channels, out_channels, kernel_size, {stride=, padding=,
-- dilation=, groups=, bias = true, padding_mode = "zeros"}).  weight
-- [out, in / groups, kernel_size] and bias [out] with torch's names and
-- init (kaiming_uniform_(a = sqrt(5)); bias ~ U(-1/sqrt(fan_in),
-- 1/sqrt(fan_in)), fan_in = in / groups * kernel_size).  padding_mode
-- "zeros", "reflect", "replicate" or "circular".
-- @usage
-- local conv = nn.Conv1d(2, 4, 3, {padding = 1})  -- in 2 channels, out 4, kernel 3
-- print(conv(attn.randn(8, 2, 16)).shape)         -- attn.Size([8, 4, 16])
function Conv1d:init(in_channels, out_channels, kernel_size, ...)
  local fn = "Conv1d"
  local args = {...}
  local o
  if type(args[1]) == "table" and #args[1] == 0 and not is_tensor(args[1]) then
    o = args[1]
    for k in pairs(o) do
      local ok = false
      for _, n in ipairs(conv_options) do if n == k then ok = true end end
      if not ok then
        fail(attn._misuse.unknown_option(fn, k, conv_options))
      end
    end
  else
    o = {}
    for i, n in ipairs(conv_options) do o[n] = args[i] end
  end
  self.in_channels = single(in_channels, nil, fn, "in_channels", 1, true)
  self.out_channels = single(out_channels, nil, fn, "out_channels", 1, true)
  if self.in_channels == nil or self.out_channels == nil then
    fail(fn .. ": in_channels and out_channels are required")
  end
  local K = single(kernel_size, nil, fn, "kernel_size", 1)
  if K == nil then fail(fn .. ": kernel_size is required") end
  self.kernel_size = {K}
  self.stride = {single(o.stride, 1, fn, "stride", 1)}
  self.dilation = {single(o.dilation, 1, fn, "dilation", 1)}
  self.groups = single(o.groups, 1, fn, "groups", 1, true)
  if self.in_channels % self.groups ~= 0 then fail(fn .. ": in_channels must be divisible by groups") end
  if self.out_channels % self.groups ~= 0 then fail(fn .. ": out_channels must be divisible by groups") end
  local padding = o.padding
  if padding == nil then padding = 0 end
  if type(padding) == "string" then
    if padding ~= "same" and padding ~= "valid" then
      fail(("%s: Invalid padding string '%s', should be one of {'valid', 'same'}"):format(fn, padding))
    end
    if padding == "same" and self.stride[1] ~= 1 then
      fail(fn .. ": padding='same' is not supported for strided convolutions")
    end
    self.padding = padding
  else
    self.padding = {single(padding, 0, fn, "padding", 0)}
  end
  local mode = o.padding_mode
  if mode == nil then mode = "zeros" end
  if not padding_modes[mode] then
    fail(("%s: padding_mode must be one of 'zeros', 'reflect', 'replicate' or 'circular', but got padding_mode='%s'")
      :format(fn, tostring(mode)))
  end
  self.padding_mode = mode
  local bias = o.bias
  if bias == nil then bias = true end
  if type(bias) ~= "boolean" then fail(("%s: bias must be a boolean (got %s)"):format(fn, tostring(bias))) end
  self.weight = nn.Parameter(attn.empty(self.out_channels, self.in_channels // self.groups, K))
  if bias then
    self.bias = nn.Parameter(attn.empty(self.out_channels))
  else
    self:register_parameter("bias", nil)
  end
  self:reset_parameters()
end

--- reset_parameters(): weight ~ kaiming_uniform_(a = sqrt(5)), bias ~
-- U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = C / groups * K, in
-- place, as torch.nn.Conv1d.
function Conv1d:reset_parameters()
  init.kaiming_uniform_(self.weight, math.sqrt(5))
  if self.bias ~= nil then
    local fan_in = init.calculate_fan_in_and_fan_out(self.weight)
    if fan_in ~= 0 then
      local bound = 1 / math.sqrt(fan_in)
      init.uniform_(self.bias, -bound, bound)
    end
  end
end

--- forward(input): the convolution with the module's weight, bias, stride,
-- padding (and padding_mode), dilation and groups (see conv1d).
-- @tparam Tensor input [B, in_channels, L] or [in_channels, L]
-- @treturn Tensor [B, out_channels, Lout] or [out_channels, Lout]
function Conv1d:forward(input)
  local fn = "Conv1d"
  check_args(fn, input, self.weight, self.bias, self.groups)
  local K, stride, dilation = self.kernel_size[1], self.stride[1], self.dilation[1]
  local left, right = padding_of(type(self.padding) == "string" and self.padding or self.padding[1], fn, K, stride,
    dilation)
  local batched = input:dim() == 3
  local x = batched and input or input:unsqueeze(1)
  local y = conv(x, self.weight, self.bias, stride, left, right, dilation, self.groups, self.padding_mode, fn)
  if not batched then y = y:squeeze(1) end
  return y
end

local function tuple1(t) return "(" .. t[1] .. ",)" end

--- extra_repr(): "in, out, kernel_size=(K,), stride=(S,)" then padding,
-- dilation, groups, bias and padding_mode where they differ from the
-- defaults, as torch prints them.
function Conv1d:extra_repr()
  local s = ("%d, %d, kernel_size=%s, stride=%s"):format(self.in_channels, self.out_channels,
    tuple1(self.kernel_size), tuple1(self.stride))
  if type(self.padding) == "string" then
    s = s .. ", padding=" .. self.padding
  elseif self.padding[1] ~= 0 then
    s = s .. ", padding=" .. tuple1(self.padding)
  end
  if self.dilation[1] ~= 1 then s = s .. ", dilation=" .. tuple1(self.dilation) end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if self.bias == nil then s = s .. ", bias=False" end
  if self.padding_mode ~= "zeros" then s = s .. ", padding_mode=" .. self.padding_mode end
  return s
end

-- torch's signature (attn/signature.lua: a trailing options table)
require("attn.signature").declare(M, "conv.", {
  conv1d = "input, weight, bias=nil, stride=1, padding=0, dilation=1, groups=1",
})
require("attn.signature").declare(Conv1d, "nn.Conv1d.", {
  init = "self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=true, "
    .. "padding_mode='zeros'",
  forward = false, reset_parameters = false, extra_repr = false,
})
return M
