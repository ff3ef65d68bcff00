-- SPDX-License-Identifier: MIT
-- Module hooks (register_forward_pre_hook, register_forward_hook,
-- register_full_backward_hook) against torch 1.13 (fixtures from
-- scripts/fixtures/gen_hooks.py), their order, removal and replacement,
-- and the usual idiom of capturing attention weights from inside a model.
local attn = require "attn"
local nn = attn.nn
local fx = require "support.fixture"

local fix = fx.load("hooks")

local function close(a, b)
  return (a - b):abs():max():item() < 1e-5
end

local function linear_from(f)
  local lin = nn.Linear(3, 4)
  lin:load_state_dict({weight = fx.tensor(f.weight), bias = fx.tensor(f.bias)})
  return lin
end

local function load_state(m, state)
  local sd = {}
  for k, v in pairs(state) do sd[k] = fx.tensor(v) end
  m:load_state_dict(sd)
end

describe("forward hooks", function()
  it("run in registration order around forward, pre hooks first", function()
    local log = {}
    local lin = nn.Linear(3, 2)
    lin:register_forward_pre_hook(function(_, inputs) log[#log + 1] = "pre1 n=" .. inputs.n end)
    lin:register_forward_hook(function() log[#log + 1] = "fwd1" end)
    lin:register_forward_pre_hook(function() log[#log + 1] = "pre2" end)
    lin:register_forward_hook(function(m, inputs, out)
      assert.equal(lin, m)
      assert.same({2, 3}, {inputs[1]:size(1), inputs[1]:size(2)})
      assert.same({2, 2}, {out:size(1), out:size(2)})
      log[#log + 1] = "fwd2"
    end)
    lin(attn.randn(2, 3))
    assert.same({"pre1 n=1", "pre2", "fwd1", "fwd2"}, log)
  end)

  it("replace inputs and outputs with what they return", function()
    local lin = nn.Linear(3, 2)
    local x = attn.randn(4, 3)
    local plain = lin(x)
    local want = lin(x * 2) + 1
    local h1 = lin:register_forward_pre_hook(function(_, inputs) return inputs[1] * 2 end) -- a single value
    local h2 = lin:register_forward_hook(function(_, _, out) return out + 1 end)
    assert.is_true(close(lin(x), want))
    h1:remove()
    local h3 = lin:register_forward_pre_hook(function(_, inputs) return {inputs[1] * 2} end) -- a list
    assert.is_true(close(lin(x), want))
    h2:remove(); h3:remove()
    assert.is_true(close(lin(x), plain))
  end)

  it("are removed by their handle, also as a <close> variable, and twice is harmless", function()
    local n = 0
    local lin = nn.Linear(3, 2)
    local x = attn.randn(1, 3)
    local h = lin:register_forward_hook(function() n = n + 1 end)
    lin(x)
    h:remove()
    h:remove()
    lin(x)
    assert.equal(1, n)
    do
      local h2 <close> = lin:register_forward_hook(function() n = n + 10 end)
      assert.is_table(h2)
      lin(x)
    end
    lin(x)
    assert.equal(11, n)
  end)

  it("see every result of a module returning several values", function()
    local mha = nn.MultiheadAttention(4, 2)
    local got
    mha:register_forward_hook(function(_, _, out, weights) got = {out, weights} end)
    local x = attn.randn(3, 4)
    local out, w = mha(x, x, x)
    assert.equal(out, got[1])
    assert.equal(w, got[2])
  end)

  it("run when the module is a child called by its parent", function()
    local seq = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))
    local seen = {}
    for i = 1, 3 do seq[i]:register_forward_hook(function() seen[#seen + 1] = i end) end
    seq(attn.randn(2, 3))
    assert.same({1, 2, 3}, seen)
  end)

  it("refuse a hook that is not a function", function()
    local lin = nn.Linear(3, 2)
    assert.has_error(function() lin:register_forward_hook(3) end,
      "register_forward_hook: hook must be a function (got number)")
  end)
end)

describe("capturing attention weights with a forward hook (the usual idiom)", function()
  it("from nn.MultiheadAttention, as torch", function()
    local f = fix.mha
    local mha = nn.MultiheadAttention(4, 2)
    load_state(mha, f.state)
    mha:eval()
    local captured
    local h <close> = mha:register_forward_hook(function(_, _, _, weights) captured = weights end) -- luacheck: ignore 211
    local x = fx.tensor(f.x)
    attn.no_grad(function() mha(x, x, x, {average_attn_weights = false}) end)
    fx.assert_close(captured, f.weights, 1e-6, 1e-5, "weights")
  end)

  it("from the self-attention inside a TransformerEncoderLayer and a TransformerEncoder", function()
    local f = fix.enc
    local layer = nn.TransformerEncoderLayer(4, 2, 8, {dropout = 0})
    load_state(layer, f.state)
    layer:eval()
    local captured = {}
    -- the layer calls self_attn with need_weights = false: a pre hook turns them on
    local sa = layer.self_attn
    local hp <close> = sa:register_forward_pre_hook(function(_, inputs) -- luacheck: ignore 211
      local opts = {}
      for k, v in pairs(inputs[4] or {}) do opts[k] = v end
      opts.need_weights, opts.average_attn_weights = true, false
      return {inputs[1], inputs[2], inputs[3], opts}
    end)
    local hf <close> = sa:register_forward_hook(function(_, _, _, weights) -- luacheck: ignore 211
      captured[#captured + 1] = weights
    end)
    local x = fx.tensor(f.x)
    local y = attn.no_grad(function() return layer(x) end)
    fx.assert_close(y, f.y, 1e-5, 1e-5, "layer output")
    fx.assert_close(captured[1], f.weights, 1e-6, 1e-5, "weights")
    -- inside a stack: every layer's self_attn runs its hooks
    local enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8, {dropout = 0}), 2):eval()
    local log = {}
    for i = 1, 2 do
      enc.layers[i].self_attn:register_forward_hook(function(_, _, out) log[#log + 1] = "attn" .. i .. " " .. out:dim() end)
      enc.layers[i]:register_forward_hook(function() log[#log + 1] = "layer" .. i end)
    end
    attn.no_grad(function() enc(x) end)
    assert.same({"attn1 3", "layer1", "attn2 3", "layer2"}, log)
  end)
end)

describe("full backward hooks", function()
  it("see torch's grad_input and grad_output once per backward (Linear)", function()
    local f = fix.linear
    local lin = linear_from(f)
    local x = fx.tensor(f.x):requires_grad_()
    local calls, gi, go = 0, nil, nil
    local h = lin:register_full_backward_hook(function(m, grad_input, grad_output)
      assert.equal(lin, m)
      calls = calls + 1
      gi, go = grad_input, grad_output
    end)
    local y = lin(x)
    assert.is_nil(gi) -- not before backward
    local loss = (y * fx.tensor(f.gout)):sum()
    loss:backward()
    assert.equal(1, calls)
    assert.equal(1, gi.n)
    assert.equal(1, go.n)
    fx.assert_close(gi[1], f.grad_input[1], 1e-6, 1e-5, "grad_input")
    fx.assert_close(go[1], f.grad_output[1], 1e-6, 1e-5, "grad_output")
    fx.assert_close(x.grad, f.x_grad, 1e-6, 1e-5, "x.grad")
    fx.assert_close(lin.weight.grad, f.w_grad, 1e-6, 1e-5, "weight.grad")
    h:remove()
    x.grad = nil
    lin(x):sum():backward()
    assert.equal(1, calls)
  end)

  it("replace grad_input with what they return", function()
    local f = fix.linear
    local lin = linear_from(f)
    local x = fx.tensor(f.x):requires_grad_()
    lin:register_full_backward_hook(function(_, grad_input) return {grad_input[1] * 2} end)
    local loss = (lin(x) * fx.tensor(f.gout)):sum()
    loss:backward()
    fx.assert_close(x.grad, f.x_grad_doubled, 1e-6, 1e-5, "x.grad")
  end)

  it("run with grad_input nil when no input requires grad (first layer)", function()
    local f = fix.linear
    local lin = linear_from(f)
    local gi, go
    lin:register_full_backward_hook(function(_, grad_input, grad_output) gi, go = grad_input, grad_output end)
    local loss = (lin(fx.tensor(f.x)) * fx.tensor(f.gout)):sum()
    loss:backward()
    assert.equal(fix.nograd.grad_input.n, gi.n)
    assert.is_nil(gi[1])
    fx.assert_close(go[1], fix.nograd.grad_output[1], 1e-6, 1e-5, "grad_output")
    fx.assert_close(lin.weight.grad, fix.nograd.w_grad, 1e-6, 1e-5, "weight.grad")
  end)

  it("align the gradients with several inputs and outputs, zeros for an input needing none", function()
    local f = fix.two
    local Two = nn.Module:extend("Two")
    function Two.forward(_, a, b) return a * b, a + b * 2 end
    local two = Two()
    local a, b = fx.tensor(f.a):requires_grad_(), fx.tensor(f.b)
    local gi, go, calls = nil, nil, 0
    two:register_full_backward_hook(function(_, grad_input, grad_output)
      calls = calls + 1
      gi, go = grad_input, grad_output
    end)
    local o1, o2 = two(a, b)
    local loss = (o1 * fx.tensor(f.g1)):sum() + (o2 * fx.tensor(f.g2)):sum()
    loss:backward()
    assert.equal(1, calls)
    assert.equal(2, gi.n)
    assert.equal(2, go.n)
    fx.assert_close(gi[1], f.grad_input[1], 1e-6, 1e-5, "grad_input[1]")
    -- b needs no grad: torch materialises zeros (nil only for a non-tensor)
    fx.assert_close(gi[2], f.grad_input[2], 0, 0, "grad_input[2]")
    fx.assert_close(go[1], f.grad_output[1], 1e-6, 1e-5, "grad_output[1]")
    fx.assert_close(go[2], f.grad_output[2], 1e-6, 1e-5, "grad_output[2]")
    fx.assert_close(a.grad, f.a_grad, 1e-6, 1e-5, "a.grad")
  end)

  it("run in backward order through nested modules, and pass errors through unchanged", function()
    local seq = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))
    local order = {}
    for i = 1, 3 do seq[i]:register_full_backward_hook(function() order[#order + 1] = i end) end
    seq(attn.randn(2, 3)):sum():backward()
    assert.same({3, 2, 1}, order)
    local lin = nn.Linear(2, 2)
    lin:register_full_backward_hook(function() error("boom from the hook") end)
    local ok, err = pcall(function() lin(attn.randn(1, 2)):sum():backward() end)
    assert.is_false(ok)
    assert.matches("boom from the hook", tostring(err))
  end)

  it("refuse a replacement of the wrong shape and a backward inside the hook", function()
    local lin = nn.Linear(3, 2)
    local x = attn.randn(2, 3):requires_grad_()
    local h = lin:register_full_backward_hook(function() return {attn.zeros(5)} end)
    assert.has_error(function() lin(x):sum():backward() end,
      "register_full_backward_hook: the hook of Linear returned a gradient of shape [5] for grad_input[1] of shape [2, 3]")
    h:remove()
    lin:register_full_backward_hook(function() attn.ones(1):requires_grad_():sum():backward() end)
    local ok, err = pcall(function() lin(x):sum():backward() end)
    assert.is_false(ok)
    assert.matches("cannot run backward inside a backward hook", tostring(err))
  end)

  it("match torch's call order on a nested model (live torch)", function()
    local py = "/usr/bin/python3"
    local probe = io.popen(py .. " -c 'import torch' 2>/dev/null; echo $?")
    local rc = probe and probe:read("l")
    if probe then probe:close() end
    if rc ~= "0" then
      pending("torch is not installed: the live comparison is skipped (the fixtures above still ran)")
      return
    end
    local script = [[
import torch, torch.nn as nn
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Sequential(nn.Linear(3, 2), nn.ReLU()), nn.Linear(2, 1))
log = []
for name, mod in m.named_modules():
    mod.register_forward_pre_hook(lambda mm, i, n=name: log.append("pre:" + n))
    mod.register_forward_hook(lambda mm, i, o, n=name: log.append("fwd:" + n))
    mod.register_full_backward_hook(lambda mm, gi, go, n=name: log.append("bwd:" + n))
m(torch.randn(2, 3, requires_grad=True)).sum().backward()
print(" ".join(log))
]]
    local p = io.popen(py .. " -c '" .. script .. "'")
    local want = p:read("l")
    p:close()
    local m = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Sequential(nn.Linear(3, 2), nn.ReLU()), nn.Linear(2, 1))
    local log = {}
    for name, mod in m:named_modules() do
      local n = name
      mod:register_forward_pre_hook(function() log[#log + 1] = "pre:" .. n end)
      mod:register_forward_hook(function() log[#log + 1] = "fwd:" .. n end)
      mod:register_full_backward_hook(function() log[#log + 1] = "bwd:" .. n end)
    end
    m(attn.randn(2, 3):requires_grad_()):sum():backward()
    assert.equal(want, table.concat(log, " "))
  end)
end)
