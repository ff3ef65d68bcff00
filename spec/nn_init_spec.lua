-- SPDX-License-Identifier: MIT
-- attn.init against torch.nn.init 1.13 (spec/fixtures/nn_init.lua, written
-- by scripts/fixtures/gen_nn.py): the same calls after the same seed give
-- torch's values bit for bit, drawing the stream in the same order.
local attn = require "attn"
local init = require "attn.nn_init"
local fx = require "support.fixture"

local F = fx.load("nn_init")

describe("attn.init", function()
  it("reproduces torch's sequence of initialisations bit for bit", function()
    attn.manual_seed(F.seed)
    for i, c in ipairs(F.calls) do
      local t = attn.empty(c.shape)
      local ret = init[c.fn](t, table.unpack(c.args))
      assert.are.equal(t, ret)
      fx.assert_equal(t, c.value, ("call %d: %s"):format(i, c.fn))
    end
  end)

  it("works on parameters that require grad, leaving them leaves", function()
    local nn = require "attn.nn"
    local p = nn.Parameter(attn.empty(4, 3))
    init.kaiming_uniform_(p, {a = math.sqrt(5)})
    init.xavier_normal_(p)
    init.zeros_(p)
    init.ones_(p)
    init.constant_(p, 2)
    assert.is_true(p.is_leaf)
    assert.is_true(p.requires_grad)
    assert.is_nil(p.grad_fn)
    assert.are.same({2, 2, 2}, p:select(1, 1):totable())
    assert.is_true(attn.is_grad_enabled())
  end)

  it("calculate_gain matches torch", function()
    for _, c in ipairs(F.gains) do
      local g = init.calculate_gain(table.unpack(c.args))
      -- the fixture holds 9 significant digits
      assert.is_true(math.abs(c.gain - g) <= 1e-8 * c.gain, table.concat(c.args, ","))
    end
    assert.has_error(function() init.calculate_gain("swish") end)
    assert.has_error(function() init.calculate_gain("leaky_relu", "x") end)
  end)

  it("computes fans like torch's _calculate_fan_in_and_fan_out", function()
    for _, c in ipairs(F.fans) do
      local fi, fo = init.calculate_fan_in_and_fan_out(attn.empty(c.shape))
      assert.are.equal(c.fan_in, fi)
      assert.are.equal(c.fan_out, fo)
    end
    assert.has_error(function() init.xavier_uniform_(attn.empty(5)) end)
    assert.has_error(function() init.kaiming_normal_(attn.empty(3, 3), 0, "fan_mid") end)
  end)

  it("draws from a given generator instead of the default stream", function()
    local g = attn.Generator(F.generator.seed)
    attn.manual_seed(1)
    local t = init.kaiming_uniform_(attn.empty(3, 4), {a = math.sqrt(5), generator = g})
    fx.assert_equal(t, F.generator.kaiming_uniform, "kaiming_uniform_ with a generator")
    fx.assert_equal(init.normal_(attn.empty(2, 5), 0, 0.5, g), F.generator.normal, "normal_ with a generator")
    -- the default stream was not touched
    local a = attn.rand(3):totable()
    attn.manual_seed(1)
    assert.are.same(attn.rand(3):totable(), a)
  end)

  it("leaves zero-element tensors alone and checks its arguments", function()
    attn.manual_seed(3)
    init.kaiming_uniform_(attn.empty(0, 3))
    local a = attn.rand(2):totable()
    attn.manual_seed(3)
    assert.are.same(attn.rand(2):totable(), a)
    assert.has_error(function() init.uniform_({1, 2}) end)
    assert.has_error(function() init.eye_(attn.empty(2, 2, 2)) end)
    assert.has_error(function() init.kaiming_uniform_(attn.empty(2, 2), {slope = 1}) end)
  end)
end)
