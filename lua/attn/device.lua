-- SPDX-License-Identifier: MIT

--- attn.device and attn.cuda: torch's device idioms, for code ported from
-- PyTorch.  attn runs on the CPU only, so the CPU device is the one device:
-- `attn.device("cpu")` gives a device object that prints and compares like
-- torch's, and moving a module or tensor to it changes nothing.  Any other
-- device ("cuda", "cuda:0", "mps", ...) is an error that says so, rather
-- than a silent no-op that would hide a missing GPU.  `attn.cuda` answers
-- the usual questions (is_available() is false, device_count() is 0).
-- @module attn.device
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)

local M = {}

local Device = {__name = "attn.device"}
Device.__index = Device

--- `tostring(d)`: torch's repr, "device(type='cpu')" (with ", index=0"
-- when an index was given).
-- @usage
-- print(attn.device("cpu"), attn.device("cpu", 0))   -- device(type='cpu')  device(type='cpu', index=0)
function Device.__tostring(d)
  if d.index ~= nil then return ("device(type='%s', index=%d)"):format(d.type, d.index) end
  return ("device(type='%s')"):format(d.type)
end

--- `d1 == d2`: by value (type and index), like torch.device.
-- @usage
-- print(attn.device("cpu") == attn.device("cpu"))    -- true
-- print(attn.device("cpu") == attn.device("cpu", 0)) -- false: the index differs
function Device.__eq(a, b)
  return a.type == b.type and a.index == b.index
end

-- device types torch knows (a string naming one is a device, not a dtype)
local known = {cpu = true, cuda = true, mps = true, xla = true, meta = true, hip = true, xpu = true,
               ipu = true, mkldnn = true, opengl = true, opencl = true, ideep = true, vulkan = true,
               ort = true, mlc = true, hpu = true, ve = true, lazy = true, fpga = true}

local function cpu_only(fn, what)
  error(("%s: attn runs on the CPU only; there is no %s device. Write attn.device(\"cpu\") or leave "
    .. "the device out (tensors and modules are always on the CPU)"):format(fn, what), 3)
end

--- Whether x is a device object made by attn.device.
-- @param x any value
-- @treturn boolean
-- @usage
-- print(require("attn.device").is_device(attn.device("cpu")))   -- true
function M.is_device(x)
  return getmetatable(x) == Device
end

--- Whether the string s names a device ("cpu", "cuda:0", "mps", ...),
-- as opposed to a dtype.  Used by module:to and tensor:to.
-- @tparam string s
-- @treturn boolean
-- @usage
-- local device = require "attn.device"
-- print(device.is_device_string("cpu"), device.is_device_string("float32"))   -- true false
function M.is_device_string(s)
  if type(s) ~= "string" then return false end
  local ty = s:match("^(%a+)$") or s:match("^(%a+):%d+$")
  return ty ~= nil and known[ty] == true
end

--- attn.device(type [, index]) -> a device object.  type is "cpu" (or
-- "cpu:N", or a device object, returned as is); d.type is "cpu" and
-- d.index the index when one was given.  Any other device raises: attn
-- runs on the CPU only.  torch.device.
-- @param spec "cpu", "cpu:0" or a device object
-- @tparam[opt] integer index the device index (torch's; kept for printing)
-- @return device
-- @usage
-- local dev = attn.device("cpu")                          -- torch.device("cpu")
-- print(dev, attn.ones(2):to(dev).dtype)
function M.device(spec, index)
  if getmetatable(spec) == Device then
    if index ~= nil then error("attn.device: an index goes with a type string, not with a device object", 2) end
    return spec
  end
  if type(spec) ~= "string" then
    error(("attn.device: expected a device string such as \"cpu\" (got %s)"):format(type(spec)), 2)
  end
  local ty, idx = spec:match("^(%a+):(%d+)$")
  if ty then
    if index ~= nil then
      error(("attn.device: type (string) must not include an index because index was passed explicitly: %s")
        :format(spec), 2)
    end
    index = tonumber(idx)
  else
    ty = spec:match("^(%a+)$")
  end
  if ty == nil or not known[ty] then
    error(("attn.device: expected one of cpu, cuda, mps, ... device type at start of device string: %s")
      :format(spec), 2)
  end
  if ty ~= "cpu" then cpu_only("attn.device", ("'%s'"):format(spec)) end
  if type(index) == "number" then index = math.tointeger(index) or index end
  if index ~= nil and (math.type(index) ~= "integer" or index < 0) then
    error(("attn.device: device index must be a non-negative integer (got %s)"):format(tostring(index)), 2)
  end
  return setmetatable({type = "cpu", index = index}, Device)
end

--- attn.cuda: torch.cuda's questions, answered for a CPU-only library.
-- @section cuda
M.cuda = {}

--- attn.cuda.is_available() -> false: attn runs on the CPU only.
-- torch.cuda.is_available.
-- @treturn boolean
-- @usage
-- local device = attn.cuda.is_available() and "cuda" or "cpu"   -- torch's idiom: "cpu" here
-- print(device)
function M.cuda.is_available()
  return false
end

--- attn.cuda.device_count() -> 0.  torch.cuda.device_count.
-- @treturn integer
-- @usage
-- print(attn.cuda.device_count())                         -- 0: attn runs on the CPU
function M.cuda.device_count()
  return 0
end

M._cpu_only = cpu_only

-- torch.device(type, index=None) and torch.cuda's questions (attn/signature.lua)
require("attn.signature").declare(M, "device.", {
  device = "type, index=nil", is_device = false, is_device_string = false,
})
require("attn.signature").declare(M.cuda, "device.cuda.", {is_available = false, device_count = false})

return M
