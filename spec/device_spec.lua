-- SPDX-License-Identifier: MIT
-- torch's device idioms on a CPU-only library (lua/attn/device.lua and
-- module:to / cpu / half / ... in lua/attn/nn/module.lua), and the
-- attn.nn.init path (the same table as attn.init).
local attn = require "attn"
local nn = attn.nn

-- the same values (compared in float32)
local function same(a, b)
  return (a:float() - b:float()):abs():max():item() == 0
end

describe("attn.device", function()
  it("makes cpu devices that print and compare like torch's", function()
    local d = attn.device("cpu")
    assert.equal("device(type='cpu')", tostring(d))
    assert.equal("cpu", d.type)
    assert.is_nil(d.index)
    assert.equal(attn.device("cpu"), d)
    assert.is_true(attn.device("cpu") == attn.device("cpu"))
    assert.equal("device(type='cpu', index=0)", tostring(attn.device("cpu:0")))
    assert.equal(attn.device("cpu", 0), attn.device("cpu:0"))
    assert.is_false(attn.device("cpu", 0) == attn.device("cpu"))
    assert.equal(d, attn.device(d))
  end)

  it("refuses other devices, saying attn runs on the CPU only and what to write", function()
    for _, s in ipairs({"cuda", "cuda:0", "mps", "cuda:1"}) do
      local ok, err = pcall(attn.device, s)
      assert.is_false(ok)
      assert.matches("attn.device: attn runs on the CPU only; there is no '" .. s:gsub("%p", "%%%0")
        .. "' device. Write attn.device%(\"cpu\"%)", err)
    end
    assert.has_error(function() attn.device("gpu") end,
      "attn.device: expected one of cpu, cuda, mps, ... device type at start of device string: gpu")
    assert.has_error(function() attn.device(3) end,
      "attn.device: expected a device string such as \"cpu\" (got number)")
  end)

  it("is every tensor's x.device", function()
    local x = attn.randn(2, 3)
    assert.equal(attn.device("cpu"), x.device)
    assert.equal("device(type='cpu')", tostring(x.device))
    assert.equal(x.device, (x * 2):t().device)
  end)

  it("answers attn.cuda's questions", function()
    assert.is_false(attn.cuda.is_available())
    assert.equal(0, attn.cuda.device_count())
  end)
end)

describe("module:to and the dtype methods", function()
  local function net()
    local m = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))
    m:register_buffer("steps", attn.tensor({1, 2}, {dtype = "int64"}))
    return m
  end

  it("return the module for the cpu device, unchanged", function()
    local m = net()
    local w = m[1].weight
    assert.equal(m, m:to("cpu"))
    assert.equal(m, m:to(attn.device("cpu")))
    assert.equal(m, m:to({device = "cpu"}))
    assert.equal(m, m:cpu())
    assert.equal(w, m[1].weight)
  end)

  it("raise for cuda", function()
    local m = net()
    assert.has_error(function() m:to("cuda") end)
    local ok, err = pcall(m.to, m, "cuda:0")
    assert.is_false(ok)
    assert.matches("attn runs on the CPU only", err)
    ok, err = pcall(m.cuda, m)
    assert.is_false(ok)
    assert.matches("cuda: attn runs on the CPU only", err)
  end)

  it("convert floating-point parameters and buffers, keep integer buffers and tied weights", function()
    local m = net()
    local before = m[1].weight:clone()
    assert.equal(m, m:to("float32"))
    assert.equal(m, m:to(attn.float32))
    assert.equal(m, m:float())
    assert.is_true(same(m[1].weight, before))
    assert.equal("int64", m.steps.dtype.name)
    assert.has_error(function() m:to("int64") end,
      "to: nn.Module.to only accepts floating point dtypes, but got desired dtype=int64")
    assert.has_error(function() m:to("banana") end)
    local has16 = pcall(function() return attn.zeros(1):to("float16") end)
    if not has16 then
      pending("float16 tensors are not in this build: half() is checked with float32 only")
      return
    end
    local tied = nn.Module()
    tied.a = nn.Linear(2, 2)
    tied.b = nn.Linear(2, 2)
    tied.b.weight = tied.a.weight
    tied:register_buffer("ids", attn.tensor({1, 2}, {dtype = "int64"}))
    local w32 = tied.a.weight:clone()
    assert.equal(tied, tied:half())
    assert.equal("float16", tied.a.weight.dtype.name)
    assert.equal(tied.a.weight, tied.b.weight)
    assert.is_true(nn.is_parameter(tied.a.weight))
    -- attn computes gradients in float32: a float16 parameter cannot require
    -- grad (torch's can), and float() makes it trainable again
    assert.equal(tied.a.weight.requires_grad, attn.zeros(1):to("float16"):detach().requires_grad)
    assert.equal("int64", tied.ids.dtype.name)
    assert.is_true(same(tied.a.weight, w32:detach():to("float16")))
    tied:float()
    assert.equal("float32", tied.a.weight.dtype.name)
    assert.is_true(tied.a.weight.requires_grad)
    assert.is_true(nn.is_parameter(tied.b.weight) and tied.a.weight == tied.b.weight)
    assert.is_true(same(tied.a.weight, w32:detach():to("float16"):to("float32")))
    tied:bfloat16()
    assert.equal("bfloat16", tied.b.bias.dtype.name)
    tied:double()
    assert.equal("float64", tied.b.bias.dtype.name)
  end)
end)

describe("attn.nn.init", function()
  it("is attn.init: one implementation, two names", function()
    assert.equal(attn.init, nn.init)
    assert.equal(attn.init.xavier_uniform_, nn.init.xavier_uniform_)
    attn.manual_seed(5)
    local a = nn.init.kaiming_normal_(attn.empty(4, 3))
    attn.manual_seed(5)
    local b = attn.init.kaiming_normal_(attn.empty(4, 3))
    assert.is_true(same(a, b))
    assert.is_true(same(nn.init.zeros_(attn.ones(2)), attn.zeros(2)))
  end)
end)
