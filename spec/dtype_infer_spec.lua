-- SPDX-License-Identifier: MIT
-- Issue 29, "Dtype inference and dict order": the factories infer torch
-- 1.13's dtype from Lua numbers (Lua 5.4 tells 3 from 3.0 as Python does),
-- one_hot is int64, and a GPT-like ModuleDict built from a list of
-- {name, module} pairs registers its parameters in torch's order, so that
-- after attn.manual_seed they equal torch's, name by name.  Fixture:
-- spec/fixtures/dtype_infer.lua (scripts/fixtures/gen_dtype_infer.py); the
-- live part regenerates it with torch where torch is installed.
local attn = require "attn"
local nn = attn.nn
local F = attn.F
local fx = require "support.fixture"
local sh = require "support.sh"

local FIX = fx.load("dtype_infer")

local function eval(src)
  local chunk = assert(load("return " .. src, "=" .. src, "t", {attn = attn, F = F}))
  return chunk()
end

describe("dtype inference against torch 1.13", function()
  for _, c in ipairs(FIX.cases) do
    it(c.torch .. " == " .. c.attn, function()
      fx.assert_equal(eval(c.attn), c.expect, c.attn)
    end)
  end

  it("covers ints, floats, bools, nested, mixed, 0-d, empty, full, arange and one_hot", function()
    assert.is_true(#FIX.cases >= 35)
  end)

  it("an explicit dtype still wins, and requires_grad needs a float tensor as in torch", function()
    assert.are.equal(attn.float32, attn.tensor({1, 2}, {dtype = "float32", requires_grad = true}).dtype)
    local ok, err = pcall(function() return attn.tensor({1, 2}, {requires_grad = true}) end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("only floating point tensors can require gradients (got int64)", 1, true), err)
  end)

  it("one_hot feeds a matmul only after :float(), as in torch", function()
    local ok, err = pcall(function() return F.one_hot(attn.tensor({1, 2}), 2):matmul(attn.ones(2, 2)) end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("matmul: expected a floating tensor, got int64", 1, true), err)
    assert.are.equal(attn.int64, attn.data.one_hot({2, 1}, 3).dtype)
  end)

  it("int64 keeps every Lua integer exact (no float32 rounding past 2^24)", function()
    local t = attn.tensor({16777217, math.maxinteger, math.mininteger})
    assert.are.same({16777217, math.maxinteger, math.mininteger}, t:totable())
  end)
end)

-- nanoGPT's transformer dict: {name, module} pairs in torch's dict order
local function gpt()
  return nn.ModuleDict({
    {"wte", nn.Embedding(7, 4)},
    {"wpe", nn.Embedding(5, 4)},
    {"h", nn.ModuleList({nn.Linear(4, 4), nn.Linear(4, 4)})},
    {"ln_f", nn.LayerNorm(4)},
  })
end

describe("a GPT-like ModuleDict against torch 1.13", function()
  for _, g in ipairs(FIX.gpt) do
    it("seed " .. g.seed .. ": the parameters' names in order, values and checksum", function()
      attn.manual_seed(g.seed)
      local d = gpt()
      local total, i = 0, 0
      for name, p in d:named_parameters() do
        i = i + 1
        assert.are.equal(g.params[i].name, name)
        fx.assert_equal(p, g.params[i].value, name)
        for _, v in ipairs(fx.flat(p)) do total = total + v end -- in Lua doubles, like torch's .double().sum()
      end
      assert.are.equal(#g.params, i)
      assert.is_true(math.abs(total - g.sum) < 1e-5, ("checksum %.9g, torch %.9g"):format(total, g.sum))
    end)
  end

  it("refuses the dict form, whose order Lua cannot know", function()
    local ok, err = pcall(function()
      return nn.ModuleDict({wte = nn.Embedding(7, 4), wpe = nn.Embedding(5, 4), ln_f = nn.LayerNorm(4)})
    end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find(
      'pass a list of {name, module} pairs: nn.ModuleDict({{"ln_f", ...}, {"wpe", ...}, ...})', 1, true), err)
  end)
end)

describe("live torch oracle for the fixture", function()
  if not sh.python_has("torch") then
    it("is skipped", function() pending("torch is not installed: fixture regeneration skipped") end)
    return
  end
  it("regenerates spec/fixtures/dtype_infer.lua unchanged", function()
    local py = os.getenv("ATTN_PYTHON") or "/usr/bin/python3"
    local root = os.getenv("ATTN_SOURCE_DIR") or "."
    local out = os.tmpname()
    local ok = os.execute(("%s %s %s"):format(sh.q(py), sh.q(root .. "/scripts/fixtures/gen_dtype_infer.py"), sh.q(out)))
    local fresh = sh.readfile(out)
    os.remove(out)
    assert.is_true(ok == true, "the generator failed")
    assert.are.equal(sh.readfile(root .. "/spec/fixtures/dtype_infer.lua"), fresh)
  end)
end)
