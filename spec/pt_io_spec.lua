-- SPDX-License-Identifier: MIT
-- torch's checkpoint format (torch.save's zip, torch >= 1.6): attn.load of
-- the fixtures torch 1.13 wrote (scripts/fixtures/gen_pt.py), the files the
-- restricted unpickler refuses, and attn.save -> attn.load / torch.load.
-- The torch.load part runs /usr/bin/python3 (pending without torch).
local attn = require "attn"
local sh = require "support.sh"
local fixture = require "support.fixture"

local SRC = os.getenv("ATTN_SOURCE_DIR") or "."
local FIX = SRC .. "/spec/fixtures/pt/"
local expected = fixture.load("pt/expected")
local PY = os.getenv("ATTN_PYTHON") or "/usr/bin/python3"

local function flat(t)
  local out = {}
  local function walk(v)
    if type(v) == "table" then
      for _, x in ipairs(v) do walk(x) end
    else
      out[#out + 1] = v
    end
  end
  walk(t:totable())
  return out
end

local function check_tensor(name, t, e)
  assert.is_true(attn.is_tensor(t), name .. " is a tensor")
  assert.are.equal("attn." .. e.dtype, tostring(t.dtype), name .. " dtype")
  local shape = {}
  for d = 1, t:dim() do shape[d] = t:size(d) end
  assert.are.same(e.shape, shape, name .. " shape")
  local got = t:dim() == 0 and {t:item()} or flat(t)
  assert.are.equal(#e.values, #got, name .. " numel")
  for i, v in ipairs(e.values) do
    if e.dtype == "float32" then
      assert.is_true(math.abs(got[i] - v) <= 1e-6 * math.max(1, math.abs(v)),
        ("%s[%d]: %s vs %s"):format(name, i, got[i], v))
    else
      assert.are.equal(v, got[i], ("%s[%d]"):format(name, i))
    end
  end
end

local function check_dict(got, exp)
  local n = 0
  for k, e in pairs(exp) do
    check_tensor(k, got[k], e)
    n = n + 1
  end
  local m = 0
  for _ in pairs(got) do m = m + 1 end
  assert.are.equal(n, m, "number of entries")
end

local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok)
  return tostring(e)
end

local tmpdir
setup(function() tmpdir = sh.tmpdir(true) end)
teardown(function() sh.rmtree(tmpdir) end)

describe("attn.load of torch.save files", function()
  it("reads a state_dict of every storage dtype (half/bf16/double -> float32, ints -> int64)", function()
    check_dict(attn.load(FIX .. "state_dict.pt"), expected.state_dict)
  end)

  it("reads views with offsets and strides, sharing their storage", function()
    local v = attn.load(FIX .. "views.pt")
    check_dict(v, expected.views)
    assert.is_false(v.t:is_contiguous())
    assert.are.same({1, 4}, {v.t:stride(1), v.t:stride(2)})
    -- one storage: writing through base shows in the views, as in torch
    v.base:fill_(7)
    assert.are.equal(7, v.row:totable()[1])
    assert.are.equal(7, v.t:totable()[1][2])
  end)

  it("reads a nested checkpoint with numbers, strings, bools, None, lists and a Parameter", function()
    local c = attn.load(FIX .. "checkpoint.pt")
    check_dict(c.model, expected.checkpoint_model)
    check_tensor("param", c.param, expected.checkpoint_param)
    assert.are.equal(3, c.epoch)
    assert.are.equal("integer", math.type(c.epoch))
    assert.are.equal(0.001, c.lr)
    assert.are.equal("gpt", c.name)
    assert.are.same({true, false}, c.flags)
    assert.is_nil(c.none)
    assert.are.equal(1099511627776, c.big)
    assert.are.equal(-5, c.neg)
    assert.are.same({4, "x"}, c.pair)
    assert.are.equal(1, c.nested.a[1])
    assert.are.equal(2.5, c.nested.a[2])
    assert.are.same({1, 1}, c.nested.a[3].b:totable())
    assert.are.equal("attn.int64", tostring(c.nested.a[3].b.dtype))
  end)

  it("recognises a torch zip by its bytes (no extension, pytorch_model.bin), and format = 'pt'", function()
    local p = tmpdir .. "/noext"
    os.execute("cp '" .. FIX .. "views.pt' '" .. p .. "'")
    check_dict(attn.load(p), expected.views)
    check_dict(attn.load(p, "pt"), expected.views)
    local bin = tmpdir .. "/pytorch_model.bin"
    os.execute("cp '" .. FIX .. "state_dict.pt' '" .. bin .. "'")
    check_dict(attn.load(bin), expected.state_dict)
  end)

  describe("refuses", function()
    it("a pickle that calls builtins.eval (never running it)", function()
      local e = err_of(attn.load, FIX .. "evil.pt")
      assert.matches("load: '[^']*evil.pt': data.pkl refers to __builtin__.eval, which a restricted loader", e)
    end)
    it("a numpy array inside", function()
      local e = err_of(attn.load, FIX .. "numpy.pt")
      assert.matches("numpy.pt': data.pkl refers to numpy.core.multiarray._reconstruct", e, 1, true)
    end)
    it("the legacy pre-1.6 format", function()
      assert.matches("legacy.pt': a legacy (pre-1.6, non-zip) torch file", err_of(attn.load, FIX .. "legacy.pt"), 1,
        true)
    end)
    it("a compressed record", function()
      assert.matches("deflated.pt': record 'archive/data.pkl' is compressed (zip method 8)",
        err_of(attn.load, FIX .. "deflated.pt"), 1, true)
    end)
    it("a truncated file", function()
      assert.matches("truncated.pt': truncated or not a torch zip file", err_of(attn.load, FIX .. "truncated.pt"), 1,
        true)
    end)
    it("a missing file, naming it", function()
      assert.matches("load: cannot open '[^']*nothere.pt'", err_of(attn.load, tmpdir .. "/nothere.pt"))
    end)
  end)
end)

describe("attn.save to .pt", function()
  local function sample()
    return {
      w = attn.tensor({{1.5, -2}, {0.25, 3}}),
      idx = attn.tensor({3, -1, 1099511627776}, {dtype = "int64"}),
      mask = attn.tensor({true, false}),
      view = attn.arange(6):reshape(2, 3):t(),
      meta = {epoch = 3, lr = 0.5, name = "run", ok = true, list = {1, 2, 3}},
    }
  end

  it("round-trips through attn.load (values, dtypes, nesting)", function()
    local p = tmpdir .. "/rt.pt"
    local s = sample()
    attn.save(s, p)
    local back = attn.load(p)
    assert.are.same(s.w:totable(), back.w:totable())
    assert.are.same(s.idx:totable(), back.idx:totable())
    assert.are.equal("attn.int64", tostring(back.idx.dtype))
    assert.are.same({true, false}, back.mask:totable())
    assert.are.same(s.view:totable(), back.view:totable())
    assert.are.same(s.meta, back.meta)
  end)

  it("refuses what torch files cannot hold", function()
    assert.matches("save: '[^']*bad.pt': cannot save a function to .pt", err_of(attn.save, {f = print},
      tmpdir .. "/bad.pt"))
  end)

  it("writes a file torch.load (1.13) reads back", function()
    if not os.execute(PY .. " -c 'import torch' >/dev/null 2>&1") then
      pending("no torch at " .. PY .. ": the torch.load check is skipped")
      return
    end
    local p = tmpdir .. "/for_torch.pt"
    attn.save(sample(), p)
    local script = tmpdir .. "/check.py"
    local f = assert(io.open(script, "w"))
    f:write(([==[
import sys, torch
d = torch.load(%q)
assert torch.equal(d["w"], torch.tensor([[1.5, -2.0], [0.25, 3.0]])), d["w"]
assert d["idx"].dtype == torch.int64 and d["idx"].tolist() == [3, -1, 1099511627776]
assert d["mask"].dtype == torch.bool and d["mask"].tolist() == [True, False]
assert d["view"].tolist() == [[0, 3], [1, 4], [2, 5]], d["view"]
assert d["meta"] == {"epoch": 3, "lr": 0.5, "name": "run", "ok": True, "list": [1, 2, 3]}, d["meta"]
print("torch-ok")
]==]):format(p))
    f:close()
    local h = io.popen(PY .. " '" .. script .. "' 2>&1")
    local out = h:read("a")
    h:close()
    assert.matches("torch-ok", out, 1, true)
  end)
end)
