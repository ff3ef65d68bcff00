-- SPDX-License-Identifier: MIT
-- attn.nn.Module: classes, registration, names, state_dict (keys exactly
-- torch's), load_state_dict, the module tree string, modes, containers,
-- save/load.  Torch values come from spec/fixtures/nn.lua (model), written
-- by scripts/fixtures/gen_nn.py from an equivalent torch.nn.Module.
local attn = require "attn"
local nn = require "attn.nn"
local fx = require "support.fixture"

local F = fx.load("nn")
local M = F.model

-- The fixture's model in Lua: the same modules registered in the same order.
local Encoder = nn.Module:extend("Encoder")
function Encoder:init()
  self.layers = nn.ModuleList({nn.Linear(4, 4), nn.Linear(4, 4)})
  self.norm = nn.LayerNorm(4)
end

local Net = nn.Module:extend("Net")
function Net:init()
  self.embed = nn.Embedding(7, 4, {padding_idx = 1})
  self.encoder = Encoder()
  self.heads = nn.ModuleDict({{"cls", nn.Linear(4, 3)}, {"aux", nn.Sequential(nn.Linear(4, 2), nn.Tanh())}})
  self:register_buffer("scale", attn.tensor({0.5, 1.0, 2.0, 1.5}))
  self:register_buffer("tmp", attn.zeros(2), false)
end
function Net:forward(ids)
  local x = self.embed(ids) * self.scale
  for _, layer in ipairs(self.encoder.layers) do x = layer(x):relu() end
  x = self.encoder.norm(x)
  return self.heads.cls(x), self.heads.aux(x)
end

local function names(iter_fn, ...)
  local out = {}
  for name in iter_fn(...) do out[#out + 1] = name end
  return out
end

local function torch_state()
  local sd = {}
  for i, k in ipairs(M.keys) do sd[k] = fx.tensor(M.values[i]) end
  return sd
end

describe("require 'attn.nn'", function()
  it("adds no globals", function()
    local before = {}
    for k in pairs(_G) do before[k] = true end
    local old_nn, old_init = package.loaded["attn.nn"], package.loaded["attn.nn_init"]
    package.loaded["attn.nn"] = nil
    package.loaded["attn.nn_init"] = nil
    local ok, err = pcall(function()
      local fresh = require "attn.nn"
      assert.is_table(fresh.Module)
      assert.is_function(require("attn.nn_init").kaiming_uniform_)
    end)
    -- later specs (one process under the attn binary) keep the first copy
    package.loaded["attn.nn"], package.loaded["attn.nn_init"] = old_nn, old_init
    assert(ok, err)
    for k in pairs(_G) do assert.is_true(before[k], "new global " .. tostring(k)) end
  end)

  it("is attn.nn, and attn.init is attn.nn_init", function()
    assert.is_table(attn.nn.Linear)
    assert.is_function(attn.init.xavier_uniform_)
  end)
end)

describe("Module classes", function()
  it("extend, init, forward and __call", function()
    local Scale = nn.Module:extend("Scale")
    function Scale:init(k) self.k = k end
    function Scale:forward(x) return x * self.k end
    local s = Scale(3)
    assert.are.same({3, 6}, s(attn.tensor({1, 2})):totable())
    assert.are.equal("Scale()", tostring(s))
    assert.is_true(nn.isinstance(s, Scale))
    assert.is_true(nn.isinstance(s, nn.Module))
    assert.is_false(nn.isinstance(s, nn.Linear))
    assert.is_true(s.training)
  end)

  it("subclasses reuse the parent's init and methods", function()
    local Scaled = nn.Linear:extend("ScaledLinear")
    function Scaled:init(i, o, k)
      nn.Linear.init(self, i, o)
      self.k = k
    end
    function Scaled:forward(x) return Scaled.super.forward(self, x) * self.k end
    attn.manual_seed(123)
    local m = Scaled(3, 2, 2)
    attn.manual_seed(123)
    local l = nn.Linear(3, 2)
    local x = attn.randn(4, 3)
    fx.assert_close(m(x), {shape = {4, 2}, data = fx.flat(l(x) * 2)}, 0, 0, "subclass forward")
    assert.are.equal("ScaledLinear(in_features=3, out_features=2, bias=True)", tostring(m))
    assert.is_true(nn.isinstance(m, nn.Linear))
  end)

  it("extend must be called with a colon", function()
    assert.has_error(function() nn.Module.extend("Oops") end)
  end)

  it("a module without forward says so", function()
    local Empty = nn.Module:extend("Empty")
    assert.has_error(function() Empty()(1) end, 'Module [Empty] is missing the required "forward" function')
  end)
end)

describe("registration", function()
  it("parameters and children by assignment, plain values as attributes", function()
    local m = nn.Module:extend("Holder")()
    m.w = nn.Parameter(attn.ones(2))
    m.child = nn.Linear(2, 2)
    m.plain = attn.ones(3) -- a tensor that is not a Parameter: attribute
    m.list = {nn.Linear(1, 1)} -- plain Lua tables are not registered
    m.n = 5
    assert.are.same({"w", "child.weight", "child.bias"}, names(m.named_parameters, m))
    assert.are.same({"child"}, names(m.named_children, m))
    assert.is_true(m.w.requires_grad)
    assert.is_true(nn.is_parameter(m.w))
    assert.is_false(nn.is_parameter(m.plain))
    assert.are.equal(5, m.n)
    -- a Parameter replacing a plain attribute is registered
    m.n = nn.Parameter(attn.zeros(1))
    assert.are.same({"w", "n", "child.weight", "child.bias"}, names(m.named_parameters, m))
  end)

  it("refuses a plain tensor in a parameter slot; nil empties it", function()
    local l = nn.Linear(2, 3)
    assert.has_error(function() l.weight = attn.zeros(3, 2) end,
      "Linear: cannot assign attn.Tensor as parameter 'weight' (nn.Parameter or nil expected)")
    l.bias = nil
    assert.is_nil(l.bias)
    assert.are.same({"weight"}, names(l.named_parameters, l))
    assert.are.same({"weight"}, nn.state_dict_keys(l:state_dict()))
    assert.are.equal("Linear(in_features=2, out_features=3, bias=False)", tostring(l))
  end)

  it("checks member names", function()
    local m = nn.Module:extend("Holder")()
    assert.has_error(function() m:register_parameter("a.b", nn.Parameter(attn.ones(1))) end)
    assert.has_error(function() m:register_buffer("", attn.ones(1)) end)
    assert.has_error(function() m.forward = nn.Linear(1, 1) end) -- a method's name
    assert.has_error(function() m:register_buffer("b", 3) end)
    m:register_buffer("b", attn.ones(1))
    assert.has_error(function() m:register_parameter("b", nn.Parameter(attn.ones(1))) end)
    m.b = attn.zeros(2) -- a buffer takes any tensor
    assert.are.same({2}, m.b:shape())
    assert.has_error(function() m.b = 1 end)
  end)

  it("Parameter shares storage with its tensor and is a leaf", function()
    local t = attn.zeros(2)
    local p = nn.Parameter(t)
    assert.is_true(p.is_leaf)
    attn.no_grad(function() p:fill_(7) end)
    assert.are.same({7, 7}, t:totable())
    assert.is_false(nn.Parameter(t, false).requires_grad)
  end)
end)

describe("names and enumeration", function()
  it("named_parameters, named_buffers and named_modules give torch's names", function()
    local net = Net()
    assert.are.same(M.param_names, names(net.named_parameters, net))
    assert.are.same(M.buffer_names, names(net.named_buffers, net))
    assert.are.same(M.module_names, names(net.named_modules, net))
    assert.are.equal(#M.param_names, #net:parameters())
    assert.are.equal(#M.module_names, #net:modules())
    assert.are.same({"embed", "encoder", "heads"}, names(net.named_children, net))
    assert.are.equal(net.encoder, net:children()[2])
    assert.are.equal(net.heads.aux[1], net:get_submodule("heads.aux.0"))
    assert.has_error(function() net:get_submodule("heads.nope") end)
  end)

  it("shared parameters and modules are listed once", function()
    local Tied = nn.Module:extend("Tied")
    function Tied:init()
      self.a = nn.Linear(2, 2)
      self.b = self.a
      self.w = self.a.weight
    end
    local t = Tied()
    assert.are.same({"w", "a.bias"}, names(t.named_parameters, t))
    assert.are.same({"", "a"}, names(t.named_modules, t))
    assert.are.same({"a"}, names(t.named_children, t))
    -- torch's state_dict lists every name (shared tensors under each)
    assert.are.same({"w", "a.weight", "a.bias", "b.weight", "b.bias"}, nn.state_dict_keys(t:state_dict()))
  end)

  it("parameters(false) lists only the module's own", function()
    local net = Net()
    assert.are.equal(0, #net:parameters(false))
    assert.are.equal(1, #net:buffers(false) - 1) -- scale and tmp
  end)
end)

describe("state_dict", function()
  it("has exactly torch's keys in torch's order (no non-persistent buffers)", function()
    local sd = Net():state_dict()
    assert.are.same(M.keys, nn.state_dict_keys(sd))
    local n = 0
    for _ in next, sd do n = n + 1 end
    assert.are.equal(#M.keys, n)
    assert.is_nil(sd.tmp)
  end)

  it("matches torch's construction bit for bit under the same seed", function()
    attn.manual_seed(51)
    local sd = Net():state_dict()
    for i, k in ipairs(M.keys) do fx.assert_equal(sd[k], M.init[i], k) end
  end)

  it("holds detached tensors sharing the parameters' storage", function()
    local l = nn.Linear(2, 2)
    local sd = l:state_dict()
    assert.is_false(sd.weight.requires_grad)
    attn.no_grad(function() l.weight:fill_(3) end)
    assert.are.same({{3, 3}, {3, 3}}, sd.weight:totable())
    assert.is_true(l:state_dict({keep_vars = true}).weight.requires_grad)
    assert.are.same({"p.weight", "p.bias"}, nn.state_dict_keys(l:state_dict({prefix = "p."})))
  end)
end)

describe("load_state_dict", function()
  it("loads torch's values and reproduces torch's outputs", function()
    local net = Net()
    local res = net:load_state_dict(torch_state())
    assert.are.same({}, res.missing_keys)
    assert.are.same({}, res.unexpected_keys)
    local cls, aux = net(M.ids)
    fx.assert_close(cls, M.cls, 1e-5, 0, "cls head")
    fx.assert_close(aux, M.aux, 1e-5, 0, "aux head")
    assert.is_true(net.embed.weight.is_leaf and net.embed.weight.requires_grad)
  end)

  it("reports missing and unexpected keys under strict, returns them otherwise", function()
    local sd = torch_state()
    sd["encoder.norm.bias"] = nil
    sd["heads.cls.extra"] = attn.ones(1)
    sd["nothing"] = attn.ones(1)
    local net = Net()
    local ok, err = pcall(net.load_state_dict, net, sd)
    assert.is_false(ok)
    assert.truthy(err:find('Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: '
      .. '"encoder.norm.bias". \n\tUnexpected key(s) in state_dict: "nothing", "heads.cls.extra". ', 1, true), err)
    local res = net:load_state_dict(sd, false)
    assert.are.same({"encoder.norm.bias"}, res.missing_keys)
    assert.are.same({"nothing", "heads.cls.extra"}, res.unexpected_keys)
    fx.assert_close(net.encoder.norm.weight, M.values[7], 0, 0, "loaded despite missing keys")
  end)

  it("refuses shape mismatches even when not strict, changing nothing wrongly shaped", function()
    local l = nn.Linear(3, 2)
    local before = l.weight:clone()
    local bad = {weight = attn.zeros(3, 3), bias = attn.zeros(2)}
    local msg = "size mismatch for weight: copying a param with shape [3, 3] from checkpoint, "
      .. "the shape in current model is [2, 3]."
    for _, strict in ipairs({true, false}) do
      local ok, err = pcall(l.load_state_dict, l, bad, strict)
      assert.is_false(ok)
      assert.truthy(err:find(msg, 1, true), err)
    end
    fx.assert_equal(l.weight, {shape = {2, 3}, data = fx.flat(before)}, "weight untouched")
    assert.has_error(function() l:load_state_dict({weight = 3, bias = attn.zeros(2)}) end)
    assert.has_error(function() l:load_state_dict("weights") end)
  end)

  it("loads buffers too", function()
    local net = Net()
    local sd = torch_state()
    sd.scale = attn.tensor({1, 2, 3, 4})
    net:load_state_dict(sd)
    assert.are.same({1, 2, 3, 4}, net.scale:totable())
  end)
end)

describe("the module tree string", function()
  it("is torch's repr (with Lua's 1-based padding_idx)", function()
    local expected = M.repr:gsub("padding_idx=0", "padding_idx=1")
    assert.are.equal(expected, tostring(Net()))
    assert.are.equal(expected, Net():to_string())
  end)

  it("prints the layers like torch", function()
    assert.are.equal("Linear(in_features=3, out_features=2, bias=True)", tostring(nn.Linear(3, 2)))
    assert.are.equal("Embedding(10, 3, padding_idx=3, max_norm=1.0)",
      tostring(nn.Embedding(10, 3, {padding_idx = 3, max_norm = 1.0})))
    assert.are.equal("Embedding(10, 3, max_norm=2, norm_type=1.0)",
      tostring(nn.Embedding(10, 3, {max_norm = 2, norm_type = 1.0})))
    assert.are.equal("LayerNorm((2, 3), eps=1e-06, elementwise_affine=False)",
      tostring(nn.LayerNorm({2, 3}, 1e-6, false)))
    assert.are.equal("Dropout(p=0.25, inplace=False)", tostring(nn.Dropout(0.25)))
    assert.are.equal("Dropout(p=0.5, inplace=False)", tostring(nn.Dropout()))
    assert.are.equal("GELU(approximate='none')", tostring(nn.GELU()))
    assert.are.equal("ReLU(inplace=True)", tostring(nn.ReLU(true)))
    assert.are.equal("Sequential()", tostring(nn.Sequential()))
    assert.are.equal("ModuleList(\n  (0): Identity()\n  (1): Sequential(\n    (0): Tanh()\n  )\n)",
      tostring(nn.ModuleList({nn.Identity(), nn.Sequential(nn.Tanh())})))
  end)
end)

describe("train and eval", function()
  it("switch every descendant", function()
    local net = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5), nn.Sequential(nn.Dropout(0.1)))
    assert.are.equal(net, net:eval())
    for _, m in ipairs(net:modules()) do assert.is_false(m.training) end
    local x = attn.ones(3, 2)
    local y = net(x)
    fx.assert_close(net(x), {shape = {3, 2}, data = fx.flat(y)}, 0, 0, "eval is deterministic")
    net:train()
    for _, m in ipairs(net:modules()) do assert.is_true(m.training) end
    net:train(false)
    assert.is_false(net[3][1].training)
  end)
end)

describe("zero_grad, requires_grad_ and apply", function()
  it("zero_grad drops grads (set_to_none) or zeroes them", function()
    local l = nn.Linear(3, 2)
    local function step() (l(attn.ones(1, 3)) * 2):sum():backward() end
    step()
    assert.is_not_nil(l.weight.grad)
    l:zero_grad()
    assert.is_nil(l.weight.grad)
    assert.is_nil(l.bias.grad)
    step()
    l:zero_grad(false)
    assert.are.same({0, 0}, l.bias.grad:totable())
  end)

  it("requires_grad_ switches every parameter", function()
    local net = Net()
    net:requires_grad_(false)
    for _, p in ipairs(net:parameters()) do assert.is_false(p.requires_grad) end
    net:requires_grad_()
    for _, p in ipairs(net:parameters()) do assert.is_true(p.requires_grad) end
  end)

  it("apply visits children first, then the module", function()
    local net = Net()
    local seen = {}
    net:apply(function(m) seen[#seen + 1] = m:_get_name() end)
    assert.are.same({"Embedding", "Linear", "Linear", "ModuleList", "LayerNorm", "Encoder", "Linear", "Linear",
      "Tanh", "Sequential", "ModuleDict", "Net"}, seen)
    net:apply(function(m)
      if nn.isinstance(m, nn.Linear) then attn.init.zeros_(m.weight) end
    end)
    assert.are.same({{0, 0}, {0, 0}, {0, 0}, {0, 0}}, net.heads.aux[1].weight:t():totable())
  end)
end)

describe("containers", function()
  it("Sequential chains its children", function()
    local s = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert.are.equal(3, #s)
    assert.are.equal("ReLU()", tostring(s[2]))
    assert.are.equal("Linear(in_features=3, out_features=1, bias=True)", tostring(s[-1]))
    assert.is_nil(s[4])
    local x = attn.randn(4, 2)
    local y = s[3](s[2](s[1](x)))
    fx.assert_close(s(x), {shape = {4, 1}, data = fx.flat(y)}, 0, 0, "Sequential forward")
    assert.are.same({"0.weight", "0.bias", "2.weight", "2.bias"}, nn.state_dict_keys(s:state_dict()))
    s:append(nn.Tanh())
    assert.are.equal("Tanh()", tostring(s[4]))
    local t = nn.Sequential({nn.Tanh(), nn.Sigmoid()})
    assert.are.same({"0", "1"}, names(t.named_children, t))
    local named = nn.Sequential({{"fc", nn.Linear(1, 1)}, {"act", nn.ReLU()}})
    assert.are.same({"fc.weight", "fc.bias"}, names(named.named_parameters, named))
    assert.are.equal("ReLU()", tostring(named[2]))
    assert.has_error(function() nn.Sequential(nn.ReLU(), 3) end)
  end)

  it("ModuleList: 1-based indexing, 0-based names, append/insert/extend", function()
    local l = nn.ModuleList()
    assert.are.equal(0, #l)
    l:append(nn.Linear(1, 2)):append(nn.Linear(2, 3))
    l:extend({nn.Tanh()})
    assert.are.equal(3, #l)
    assert.are.same({"0.weight", "0.bias", "1.weight", "1.bias"}, nn.state_dict_keys(l:state_dict()))
    assert.are.equal(2, l[1].out_features)
    assert.are.equal(3, l[2].out_features)
    assert.are.equal("Tanh()", tostring(l[-1]))
    local n = 0
    for i, m in ipairs(l) do n = n + 1; assert.are.equal(l[i], m) end
    assert.are.equal(3, n)
    l:insert(1, nn.ReLU())
    assert.are.same({"0", "1", "2", "3"}, names(l.named_children, l))
    assert.are.equal("ReLU()", tostring(l[1]))
    assert.are.equal(2, l[2].out_features)
    l[1] = nn.Sigmoid()
    assert.are.equal("Sigmoid()", tostring(l[1]))
    assert.has_error(function() l[9] = nn.ReLU() end)
    assert.has_error(function() l:append(3) end)
    assert.has_error(function() l(1) end)
  end)

  it("ModuleDict: string keys in the order of a list of pairs", function()
    local d = nn.ModuleDict({{"relu", nn.ReLU()}, {"act", nn.Tanh()}})
    assert.are.same({"relu", "act"}, d:keys())
    assert.are.equal("ReLU()", tostring(d.relu))
    assert.are.equal("Tanh()", tostring(d["act"]))
    assert.are.equal(2, #d)
    assert.is_true(d:contains("act"))
    assert.is_false(d:contains("gelu"))
    d.gelu = nn.GELU()
    local o = nn.ModuleDict({{"z", nn.Linear(1, 1)}, {"a", nn.Linear(1, 1)}})
    assert.are.same({"z.weight", "z.bias", "a.weight", "a.bias"}, nn.state_dict_keys(o:state_dict()))
    local ks = {}
    for k in o:items() do ks[#ks + 1] = k end
    assert.are.same({"z", "a"}, ks)
    assert.has_error(function() nn.ModuleDict({keys = nn.ReLU()}) end) -- a method's name
  end)

  it("ModuleDict, Sequential and ModuleList refuse a table whose order Lua cannot know", function()
    -- one key is unambiguous
    assert.are.same({"act"}, nn.ModuleDict({act = nn.Tanh()}):keys())
    local ok, err = pcall(function() return nn.ModuleDict({wte = nn.ReLU(), wpe = nn.Tanh()}) end)
    assert.is_false(ok)
    assert.matches("nn_module_spec.lua:%d+: ModuleDict: a Lua table with string keys has no order", err)
    assert.truthy(err:find('pass a list of {name, module} pairs: nn.ModuleDict({{"wpe", ...}, {"wte", ...}, ...})', 1,
      true), err)
    local d = nn.ModuleDict({{"a", nn.Tanh()}})
    ok, err = pcall(function() return d:update({b = nn.ReLU(), c = nn.Tanh()}) end)
    assert.is_false(ok)
    assert.truthy(err:find("ModuleDict.update: a Lua table with string keys has no order", 1, true), err)
    assert.are.same({"a"}, d:keys()) -- nothing added
    ok, err = pcall(function() return nn.ModuleDict({{"a", nn.Tanh()}, b = nn.ReLU()}) end)
    assert.is_false(ok)
    assert.truthy(err:find("ModuleDict: the table mixes a list with a string key (b)", 1, true), err)
    -- Sequential(OrderedDict(...)) is a list of pairs; a dict gave an empty Sequential
    ok, err = pcall(function() return nn.Sequential({fc = nn.Linear(2, 2), act = nn.Tanh()}) end)
    assert.is_false(ok)
    assert.truthy(err:find("Sequential: a Lua table with string keys has no order", 1, true), err)
    assert.are.same({"fc.weight", "fc.bias"},
      nn.state_dict_keys(nn.Sequential({{"fc", nn.Linear(2, 2)}, {"act", nn.Tanh()}}):state_dict()))
    ok, err = pcall(function() return nn.ModuleList({a = nn.Tanh()}) end)
    assert.is_false(ok)
    assert.truthy(err:find('ModuleList: expected a list of modules {m1, m2, ...}, got a table with the key "a"', 1,
      true), err)
  end)

  it("registers attributes assigned in init in assignment order, like torch", function()
    local OrderNet = nn.Module:extend("OrderNet")
    function OrderNet:init()
      self.wte = nn.Embedding(5, 2)
      self.wpe = nn.Embedding(3, 2)
      self.h = nn.ModuleList({nn.Linear(2, 2)})
      self.ln_f = nn.LayerNorm(2)
      self.bias = nn.Parameter(attn.zeros(2))
    end
    -- torch's state_dict: the module's own parameters first, then each child
    assert.are.same({"bias", "wte.weight", "wpe.weight", "h.0.weight", "h.0.bias", "ln_f.weight", "ln_f.bias"},
      nn.state_dict_keys(OrderNet():state_dict()))
  end)
end)

describe("save and load", function()
  it("round-trips the state_dict through a safetensors file", function()
    if not attn.save or not attn.load then
      pending("attn.save/attn.load are not available yet")
      return
    end
    local path = os.tmpname() .. ".safetensors"
    local net = Net()
    net:load_state_dict(torch_state())
    net:save(path)
    local raw = attn.load(path)
    local keys = {}
    for k in pairs(raw) do keys[#keys + 1] = k end
    table.sort(keys)
    local expected = {table.unpack(M.keys)}
    table.sort(expected)
    assert.are.same(expected, keys)
    local fresh = Net()
    local same, res = fresh:load(path)
    assert.are.equal(fresh, same)
    assert.are.same({}, res.missing_keys)
    local cls = fresh(M.ids)
    fx.assert_close(cls, M.cls, 1e-5, 0, "cls head after load")
    os.remove(path)
    assert.has_error(function() fresh:load(path) end)
  end)
end)
