-- SPDX-License-Identifier: MIT
-- nn.Conv1d / F.conv1d and the activations F.silu / mish / leaky_relu / elu
-- / softplus with their modules, against torch 1.13 (fixtures from
-- scripts/fixtures/gen_conv.py): outputs, gradients of input, weight and
-- bias, gradients at the kinks, init, printing.
local attn = require "attn"
local nn = attn.nn
local F = attn.F
local fx = require "support.fixture"

local FWD, GRAD = 1e-5, 1e-4
local fix = fx.load("conv")

describe("nn.Conv1d and F.conv1d", function()
  for _, c in ipairs(fix.convs) do
    it("match torch: " .. c.name, function()
      local m = nn.Conv1d(c.cin, c.cout, c.k, c.opts)
      local sd = {weight = fx.tensor(c.weight)}
      if c.bias then sd.bias = fx.tensor(c.bias) end
      m:load_state_dict(sd)
      assert.are.equal(c.repr, tostring(m))
      local x = fx.tensor(c.x):requires_grad_(true)
      local y = m(x)
      fx.assert_close(y, c.y, FWD, 0, c.name .. " output")
      ;(y * fx.tensor(c.gout)):sum():backward()
      fx.assert_close(x.grad, c.dx, GRAD, 0, c.name .. " dx")
      fx.assert_close(m.weight.grad, c.dw, GRAD, 0, c.name .. " dweight")
      if c.bias then fx.assert_close(m.bias.grad, c.db, GRAD, 0, c.name .. " dbias") end
      -- F.conv1d with the same arguments (zero padding only)
      if c.opts.padding_mode == nil then
        local y2 = F.conv1d(fx.tensor(c.x), m.weight, m.bias, {stride = c.opts.stride, padding = c.opts.padding,
          dilation = c.opts.dilation, groups = c.opts.groups})
        fx.assert_close(y2, c.y, FWD, 0, c.name .. " F.conv1d")
      end
    end)
  end

  it("initialise like torch", function()
    for _, c in ipairs(fix.inits) do
      attn.manual_seed(c.seed)
      local m = nn.Conv1d(c.cin, c.cout, c.k, c.opts)
      fx.assert_close(m.weight, c.weight, 0, 0, "Conv1d init weight")
      if c.bias then fx.assert_close(m.bias, c.bias, 0, 0, "Conv1d init bias") else assert.is_nil(m.bias) end
      local names = {}
      for n in m:named_parameters() do names[#names + 1] = n end
      assert.are.same(c.bias and {"weight", "bias"} or {"weight"}, names)
    end
  end)

  it("take torch's positional arguments", function()
    local w, b = attn.randn(4, 3, 3), attn.randn(4)
    local x = attn.randn(2, 3, 9)
    local a = F.conv1d(x, w, b, 2, 1, 2, 1)
    local o = F.conv1d(x, w, b, {stride = 2, padding = 1, dilation = 2})
    assert.are.same(o:totable(), a:totable())
    local m = nn.Conv1d(3, 4, 3, 2, 1, 2)
    assert.are.equal("Conv1d(3, 4, kernel_size=(3,), stride=(2,), padding=(1,), dilation=(2,))", tostring(m))
    assert.are.same({2, 4, 4}, m(x):shape())
  end)

  it("pass gradcheck", function()
    attn.manual_seed(4)
    local x = attn.randn(2, 4, 7):requires_grad_(true)
    local w = (attn.randn(6, 2, 3) * 0.5):requires_grad_(true)
    local b = attn.randn(6):requires_grad_(true)
    assert.is_true(attn.gradcheck(function(xx, ww, bb)
      return F.conv1d(xx, ww, bb, {stride = 2, padding = 2, dilation = 2, groups = 2})
    end, {x, w, b}))
    local m = nn.Conv1d(4, 3, 2, {padding = "same", padding_mode = "reflect"})
    assert.is_true(attn.gradcheck(function(xx) return m(xx) end, {x}))
  end)

  it("check their arguments and point at the caller", function()
    local x = attn.randn(2, 3, 5)
    local ok, err = pcall(function() local y = F.conv1d(x, attn.randn(4, 2, 3)) return y end)
    assert.is_false(ok)
    assert.matches("conv_spec.lua:%d+: conv1d: weight of size %[4, 2, 3%], expected input %[2, 3, 5%] to have 2 "
      .. "channels, but got 3 channels instead", err)
    ok, err = pcall(function() local y = F.conv1d(x, attn.randn(4, 3, 7)) return y end)
    assert.matches("conv1d: the padded input has 5 steps, fewer than the kernel's span 7", err)
    ok, err = pcall(function() local y = F.conv1d(x, attn.randn(4, 3, 3), nil, {stride = 2, padding = "same"}) return y end)
    assert.matches("conv1d: padding='same' is not supported for strided convolutions", err)
    ok, err = pcall(function() local y = F.conv1d(x, attn.randn(4, 3, 3), attn.randn(3)) return y end)
    assert.matches("conv1d: bias must be 1%-d with 4 entries", err)
    ok, err = pcall(function() local y = F.conv1d(attn.randn(5), attn.randn(4, 3, 3)) return y end)
    assert.matches("conv1d: Expected 2D %(unbatched%) or 3D %(batched%) input, but got input of size: %[5%]", err)
    ok, err = pcall(function() local y = nn.Conv1d(3, 4, 3, {groups = 2}) return y end)
    assert.matches("conv_spec.lua:%d+: Conv1d: in_channels must be divisible by groups", err)
    ok, err = pcall(function() local y = nn.Conv1d(3, 4, 3, {padding = "full"}) return y end)
    assert.matches("Conv1d: Invalid padding string 'full'", err)
    ok, err = pcall(function() local y = nn.Conv1d(3, 4, 3, {padding_mode = "mirror"}) return y end)
    assert.matches("Conv1d: padding_mode must be one of", err)
    ok, err = pcall(function() local y = nn.Conv1d(3, 4, 0) return y end)
    assert.matches("Conv1d: kernel_size must be at least 1", err)
    ok, err = pcall(function() local y = nn.Conv1d(3, 4, 3, {stide = 2}) return y end)
    assert.matches("Conv1d: unknown option 'stide'", err)
    local m = nn.Conv1d(3, 4, 3, {padding = 3, padding_mode = "reflect"})
    ok, err = pcall(function() local y = m(x:narrow(3, 1, 3)) return y end)
    assert.matches("Conv1d: padding %(3, 3%) in reflect mode must be smaller than the input length 3", err)
  end)
end)

describe("activations", function()
  local mods = {silu = "SiLU", mish = "Mish", leaky_relu = "LeakyReLU", elu = "ELU", softplus = "Softplus"}
  for i, c in ipairs(fix.acts) do
    it(("%s(%s) matches torch at and around the kinks (case %d)"):format(c.fn, table.concat(c.args, ", "), i),
      function()
        local x = fx.tensor(c.x):requires_grad_(true)
        local y = F[c.fn](x, table.unpack(c.args))
        fx.assert_close(y, c.y, FWD, 1e-6, c.fn .. " output")
        ;(y * fx.tensor(c.g)):sum():backward()
        fx.assert_close(x.grad, c.dx, GRAD, 1e-6, c.fn .. " grad")
        -- the module with the same arguments
        local m = nn[mods[c.fn]](table.unpack(c.args))
        fx.assert_close(m(fx.tensor(c.x)), c.y, FWD, 1e-6, mods[c.fn] .. " output")
      end)
  end

  it("print like torch", function()
    local R = fix.reprs
    assert.are.equal(R.LeakyReLU, tostring(nn.LeakyReLU()))
    assert.are.equal(R.LeakyReLU2, tostring(nn.LeakyReLU(0.2, true)))
    assert.are.equal(R.ELU, tostring(nn.ELU()))
    assert.are.equal(R.ELU2, tostring(nn.ELU({alpha = 0.5})))
    assert.are.equal(R.Softplus, tostring(nn.Softplus()))
    assert.are.equal(R.Softplus2, tostring(nn.Softplus(2.0, 10)))
    assert.are.equal(R.SiLU, tostring(nn.SiLU()))
    assert.are.equal(R.Mish, tostring(nn.Mish(true)))
  end)

  it("work in place", function()
    for _, name in ipairs({"leaky_relu", "elu", "mish", "silu"}) do
      local a = attn.tensor({-2, -0.5, 0, 1.5}):requires_grad_(true)
      local x = a * 1
      local want = F[name](a:detach())
      local y = F[name](x, nil, true)
      if name == "mish" or name == "silu" then
        x = a * 1
        y = F[name](x, true)
      end
      assert.are.equal(x, y)
      assert.are.same(want:totable(), x:totable())
      y:sum():backward()
      assert.is_not_nil(a.grad)
    end
  end)

  it("pass gradcheck away from the kinks", function()
    local x = attn.tensor({-3, -1.2, -0.4, 0.3, 0.9, 2.5}):requires_grad_(true)
    for _, f in ipairs({F.mish, F.elu, F.softplus, F.leaky_relu, F.silu,
      function(v) return F.softplus(v, 2, 1) end, function(v) return F.elu(v, 0.3) end}) do
      assert.is_true(attn.gradcheck(f, {x}))
    end
  end)

  it("check their arguments", function()
    local _, err = pcall(function() local y = F.elu(attn.zeros(2), "1") return y end)
    assert.matches("conv_spec.lua:%d+: elu: alpha must be a number %(got 1%)", err)
    _, err = pcall(function() local y = F.leaky_relu({1, 2}) return y end)
    assert.matches("conv_spec.lua:%d+: leaky_relu: input must be a tensor %(got table%)", err)
    _, err = pcall(function() local y = nn.Softplus({beta = 2, treshold = 3}) return y end)
    assert.matches("Softplus: unknown option 'treshold'", err)
    _, err = pcall(function() local y = nn.ELU()({1}) return y end)
    assert.matches("ELU: input must be a tensor", err)
  end)
end)
