-- SPDX-License-Identifier: MIT
-- Regression tests for what the libFuzzer targets found (spec/fuzz/,
-- scripts/fuzz.sh), each reduced to a Lua reproducer.  The inputs
-- themselves are committed too (spec/fuzz/corpus/<target>/regress-*) and
-- replayed by ctest (fuzz/<target>); spec/fuzz/regress.c holds the
-- reproducers that need the C API.  Every test here failed (or, for the
-- undefined behaviour, ran into it) before its fix.
local attn = require "attn"

local function shape_of(t) return "[" .. table.concat(t:shape(), ",") .. "]" end

local function counts()
  collectgarbage()
  collectgarbage()
  local c = attn.debug_counts()
  return c.tensors, c.storages, c.nodes
end

-- Runs f and asserts that every tensor, storage and graph node it made is
-- gone once its values are collected.
local function assert_no_leak(f)
  local t0, s0, n0 = counts()
  f()
  local t1, s1, n1 = counts()
  assert.are.same({ t0, s0, n0 }, { t1, s1, n1 }, "live tensors, storages, nodes before and after")
end

local function values(t) return t:contiguous():view(-1):totable() end

describe("fuzz findings", function()
  -- fuzz_views: expand of [3] to [6989586070195142655,3,5,0,3] was accepted
  -- (numel 0), and numel, strides and iteration then multiplied the other
  -- sizes past 2^63 (signed overflow).  Shapes now need the product of
  -- their non-zero sizes to fit, as torch requires.
  it("refuses empty shapes whose other sizes overflow", function()
    local ok, err = pcall(function() return attn.ones(3):expand(2 ^ 62, 3, 0, 3) end)
    assert.is_false(ok)
    assert.matches("expand: shape .* has too many elements", err)
    ok, err = pcall(function() return attn.zeros(0):view(0, 2 ^ 40, 2 ^ 40) end)
    assert.is_false(ok)
    assert.matches("view: shape .* has too many elements", err)
    ok = pcall(attn.zeros, 2 ^ 40, 2 ^ 40, 0)
    assert.is_false(ok)
    -- what fits still works, as in torch
    local e = attn.ones(3):expand(2 ^ 20, 0, 3)
    assert.are.equal("[1048576,0,3]", shape_of(e))
    assert.are.equal(0, e:numel())
    assert.are.equal("[0,1099511627776]", shape_of(attn.zeros(0, 2 ^ 40)))
  end)

  -- fuzz_views: backward of an expanded empty tensor reduced its gradient
  -- over a dim of 3543342365 one (empty) block at a time: a hang.
  it("reduces empty tensors with huge dims at once", function()
    local t0 = os.clock()
    local x = attn.zeros(3, 0):requires_grad_()
    x:expand(1, 3543342365, 3, 0):sum():backward()
    assert.are.equal("[3,0]", shape_of(x.grad))
    assert.are.equal("[1,0]", shape_of(attn.zeros(2 ^ 32, 1, 0):sum(1)))
    assert.are.equal("[0]", shape_of(attn.zeros(2 ^ 32, 0):max(1)))
    assert.is_true(os.clock() - t0 < 2, "took " .. (os.clock() - t0) .. " s")
  end)

  -- fuzz_views: fill_ of an expanded view wrote every repeat of every
  -- element: expand(2, 2^40, 3):fill_(v) ran for hours.  Each memory
  -- element is written once now (torch fills expanded views too).
  it("fills expanded views once per element", function()
    local t0 = os.clock()
    local base = attn.ones(3)
    local x = base:expand(2, 2 ^ 40, 3)
    x:fill_(2)
    assert.are.same({ 2, 2, 2 }, values(base))
    x:zero_()
    assert.are.same({ 0, 0, 0 }, values(base))
    local col = attn.arange(6):view(2, 1, 3):expand(2, 4, 3)
    col:fill_(-1)
    assert.are.same({ -1, -1, -1, -1, -1, -1 }, values(col:select(2, 1)))
    assert.is_true(os.clock() - t0 < 2, "took " .. (os.clock() - t0) .. " s")
  end)

  -- fuzz_broadcast: matmul folds a's batch dims into its rows when b has no
  -- batch; the fold skipped size-1 dims without keeping the stride chain,
  -- so an expanded batch read batch 0 for every batch (silently wrong).
  it("multiplies expanded batches by a vector or matrix", function()
    local a = attn.tensor({ -4.0, -1.0 }):view(2, 1, 1, 1):expand(2, 1, 2, 4)
    local v = attn.tensor({ -4.0, -4.0, -4.0, -4.0 })
    assert.are.same({ 64, 64, 16, 16 }, values(attn.matmul(a, v)))
    assert.are.same(values(attn.matmul(a:contiguous(), v)), values(attn.matmul(a, v)))
    local m = attn.ones(4, 2)
    assert.are.same(values(attn.matmul(a:contiguous(), m)), values(attn.matmul(a, m)))
    -- the same layout through a permute: batch strides that do not chain
    local p = attn.arange(24):float():view(3, 2, 4):permute(2, 1, 3):unsqueeze(2) -- [2,1,3,4]
    assert.are.same(values(attn.matmul(p:contiguous(), v)), values(attn.matmul(p, v)))
  end)

  -- fuzz_lua_tensor: a table whose shape has a 0 ({{}, 5, 5} gives [3, 0])
  -- was not checked at all, so attn.tensor accepted ragged input.
  it("checks the nesting of tables that make empty tensors", function()
    local ok, err = pcall(attn.tensor, { {}, -5, -5 })
    assert.is_false(ok)
    assert.matches("not rectangular", err)
    ok, err = pcall(attn.tensor, { {}, { 1 } })
    assert.is_false(ok)
    assert.matches("not rectangular", err)
    assert.are.equal("[2,0]", shape_of(attn.tensor({ {}, {} })))
    assert.are.equal("[0]", shape_of(attn.tensor({})))
  end)

  -- fuzz_lua_tensor: checking that nesting (the fix above) walked shared
  -- sub-tables once per use: 2000 entries sharing one table of 2000
  -- sharing one of 2000 empty tables is 8e9 visits for a [2000,2000,2000,0]
  -- tensor that allocates nothing.  Shared tables are now checked once.
  it("checks shared sub-tables of empty tables once", function()
    local t0 = os.clock()
    local leaf = {}
    local l2 = {}
    for i = 1, 2000 do l2[i] = leaf end
    local l1 = {}
    for i = 1, 2000 do l1[i] = l2 end
    local top = {}
    for i = 1, 2000 do top[i] = l1 end
    assert.are.equal("[2000,2000,2000,0]", shape_of(attn.tensor(top)))
    top[2000] = { 5 }
    assert.is_false(pcall(attn.tensor, top))
    assert.is_true(os.clock() - t0 < 2, "took " .. (os.clock() - t0) .. " s")
  end)

  -- fuzz_lua_api: t.grad = t made the tensor hold itself (a reference
  -- cycle in C that Lua's collector cannot see): never freed.  The same
  -- through another tensor's grad or through a graph back to t.
  it("frees tensors whose gradient refers back to them", function()
    assert_no_leak(function()
      local t = attn.randn(2, 3)
      t.grad = t
      assert.are.same(values(t), values(t.grad))
    end)
    assert_no_leak(function()
      local a, b = attn.randn(3), attn.randn(3)
      a.grad = b
      b.grad = a
    end)
    assert_no_leak(function()
      local a = attn.randn(3):requires_grad_()
      local b = a * 2
      a.grad = b
      b:sum():backward()
    end)
  end)

  it("keeps .grad sharing the assigned tensor's storage", function()
    local t = attn.zeros(3)
    local g = attn.ones(3)
    t.grad = g
    g:fill_(7)
    assert.are.same({ 7, 7, 7 }, values(t.grad))
    t.grad:mul_(2)
    assert.are.same({ 14, 14, 14 }, values(g))
    t.grad = nil
    assert.is_nil(t.grad)
  end)
end)
