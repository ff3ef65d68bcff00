-- SPDX-License-Identifier: MIT
-- attn.deepcopy, module:clone() and nn.clones (lua/attn/copy.lua): the
-- Annotated Transformer's clones(module, N) = nn.ModuleList of deep copies,
-- with fresh parameters of equal values and no shared storage.
local attn = require "attn"
local nn = attn.nn

local function max_diff(a, b) return (a - b):abs():max():item() end

describe("attn.deepcopy and module:clone()", function()
  it("give fresh parameters with equal values and no shared storage", function()
    attn.manual_seed(1)
    local m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.LayerNorm(4))
    m[1].bias.requires_grad = false
    local c = m:clone()
    assert.are.equal("Sequential", c:_get_name())
    assert.is_true(nn.isinstance(c[1], nn.Linear))
    local theirs = {}
    for name, p in c:named_parameters() do theirs[name] = p end
    local n = 0
    for name, p in m:named_parameters() do
      local q = theirs[name]
      assert.is_truthy(q, name)
      assert.is_false(rawequal(p, q))
      assert.is_true(nn.is_parameter(q))
      assert.are.equal(p.requires_grad, q.requires_grad, name)
      assert.are.equal(0, max_diff(p, q))
      n = n + 1
    end
    assert.are.equal(4, n)
    -- writing the original leaves the copy as it was (no shared storage)
    local before = c[1].weight:clone()
    attn.no_grad(function() m[1].weight:fill_(7) end)
    assert.are.equal(0, max_diff(c[1].weight, before))
    -- the copy trains on its own
    local x = attn.randn(2, 3)
    c(x):sum():backward()
    assert.is_nil(m[1].weight.grad)
    assert.is_truthy(c[1].weight.grad)
  end)

  it("copy buffers, attributes and the training mode; not gradients", function()
    local M = nn.Module:extend("WithBuffers")
    function M:init()
      self.lin = nn.Linear(2, 2)
      self:register_buffer("running", attn.ones(2))
      self:register_buffer("scratch", attn.zeros(3), false)
      self.scale = 2.5
      self.names = {"a", "b"}
    end
    function M:forward(x) return self.lin(x) * self.scale + self.running end
    local m = M()
    m:eval()
    m.lin(attn.ones(1, 2)):sum():backward()
    local c = attn.deepcopy(m)
    assert.is_false(c.training)
    assert.is_false(c.lin.training)
    assert.are.equal(2.5, c.scale)
    assert.are.same({"a", "b"}, c.names)
    assert.is_false(rawequal(m.names, c.names))
    assert.is_false(rawequal(m.running, c.running))
    assert.are.same({"running", "lin.weight", "lin.bias"}, nn.state_dict_keys(c:state_dict()))
    assert.is_true(rawget(c, "_non_persistent").scratch)
    assert.is_nil(c.lin.weight.grad)
    assert.are.equal(0, max_diff(m(attn.ones(1, 2)), c(attn.ones(1, 2))))
  end)

  it("keep ties: a parameter or module used twice is copied once", function()
    local shared = nn.Linear(3, 3)
    local m = nn.ModuleDict({{"a", shared}, {"b", shared}})
    local e = nn.Embedding(5, 3)
    local tied = nn.Module()
    tied.emb = e
    tied.out = nn.Linear(3, 5, false)
    tied.out.weight = e.weight
    local c = attn.deepcopy(m)
    assert.is_true(rawequal(c.a, c.b))
    assert.is_false(rawequal(c.a, shared))
    local t = tied:clone()
    assert.is_true(rawequal(t.emb.weight, t.out.weight))
    assert.is_false(rawequal(t.emb.weight, e.weight))
    assert.are.equal(1, #t:parameters())
  end)

  it("copy tensors and tables", function()
    local x = attn.randn(2, 2):requires_grad_(true)
    local y = attn.deepcopy(x)
    assert.is_true(y.requires_grad)
    assert.is_nil(y.grad_fn)
    assert.are.equal(0, max_diff(x, y))
    local t = {x = x, list = {1, 2}}
    t.self = t
    local u = attn.deepcopy(t)
    assert.is_true(rawequal(u.self, u))
    assert.is_false(rawequal(u.x, x))
    assert.are.equal(3, attn.deepcopy(3))
    assert.are.equal("s", attn.deepcopy("s"))
  end)
end)

describe("clones (nn.ModuleList of deep copies)", function()
  it("builds the Annotated Transformer's clones with torch's names", function()
    local layer = nn.TransformerEncoderLayer(4, 2, 6, 0)
    local list = nn.clones(layer, 3)
    assert.is_true(nn.isinstance(list, nn.ModuleList))
    assert.are.equal(3, #list)
    local keys = nn.state_dict_keys(list:state_dict())
    assert.are.equal("0.self_attn.in_proj_weight", keys[1])
    assert.are.equal("2.norm2.bias", keys[#keys])
    assert.is_false(rawequal(list[1].linear1.weight, list[2].linear1.weight))
    local x = attn.randn(3, 2, 4)
    assert.are.equal(0, max_diff(list[1](x), layer(x)))
    -- the same, written as the Annotated Transformer does
    local mods = {}
    for i = 1, 3 do mods[i] = attn.deepcopy(layer) end
    local list2 = nn.ModuleList(mods)
    assert.are.same(keys, nn.state_dict_keys(list2:state_dict()))
  end)

  it("refuses what it cannot clone", function()
    local ok, err = pcall(function() local l = nn.clones(attn.ones(2), 2); return l end)
    assert.is_false(ok)
    assert.matches("clone_spec.lua:%d+: clones: module must be a module", err)
    ok, err = pcall(function() local l = nn.clones(nn.Linear(2, 2), -1); return l end)
    assert.matches("clones: n must be an integer in 0..65536", err)
    assert.has_error(function() attn.deepcopy(nn.Linear(2, 2), 5) end, "deepcopy: memo must be a table (got number)")
  end)
end)
