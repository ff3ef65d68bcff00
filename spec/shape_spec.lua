-- SPDX-License-Identifier: MIT
-- Shape operations against torch 1.13 (spec/fixtures/shape.lua, made by
-- scripts/fixtures/gen_shape.py).  These ops only move values, so every
-- comparison is bit-exact: NaN for NaN, infinities and the sign of zero.
local attn = require "attn"
local fixture = require "support.fixture"

local cases = fixture.load("shape")

local function fmt_shape(s) return "[" .. table.concat(s, ",") .. "]" end

-- Asserts t holds exactly the fixture result f = {shape, data}.
local function assert_exact(t, f, what)
  local shape = t:shape()
  assert(fmt_shape(shape) == fmt_shape(f.shape),
    ("%s: shape %s, expected %s"):format(what, fmt_shape(shape), fmt_shape(f.shape)))
  local got = fixture.flat(t)
  assert(#got == #f.data, what .. ": wrong number of values")
  -- '%.9g' reads back as a double; round it to the float32 it came from
  local expected = #f.data > 0 and fixture.flat(attn.tensor(f.data)) or {}
  for i, e in ipairs(expected) do
    local g = got[i]
    local ok
    if e ~= e then ok = g ~= g
    elseif e == 0 then ok = g == 0 and 1 / g == 1 / e -- same sign of zero
    else ok = g == e end
    if not ok then
      error(("%s: element %d is %.9g, expected %.9g"):format(what, i, g, e), 2)
    end
  end
end

-- A fixture input, rebuilt as the same (possibly non-contiguous) view.
local function input(e)
  local t = fixture.tensor(e)
  local v = e.view
  if v and v[1] == "transpose" then
    t = t:transpose(v[2], v[3])
  elseif v and v[1] == "slice" then
    t = t:slice(v[2], v[3], v[4], v[5])
  end
  if v then assert.is_false(t:is_contiguous()) end
  return t
end

local function inputs(c)
  local list = {}
  for i, e in ipairs(c.inputs) do list[i] = input(e) end
  return list
end

local function assert_pieces(pieces, expected, what)
  assert.equal(#expected, #pieces, what .. ": number of pieces")
  for i, f in ipairs(expected) do assert_exact(pieces[i], f, what .. " piece " .. i) end
end

-- err: the message of the error f raises; assert_msg: f raises one that
-- holds needle.
local E = require "support.errors"
local err, assert_msg = E.message, E.raises

-- Runs one fixture case in every way the binding offers it.
local run = {
  cat = function(c) assert_exact(attn.cat(inputs(c), c.dim), c.expected, "cat") end,
  stack = function(c) assert_exact(attn.stack(inputs(c), c.dim), c.expected, "stack") end,
  vstack = function(c) assert_exact(attn.vstack(inputs(c)), c.expected, "vstack") end,
  hstack = function(c) assert_exact(attn.hstack(inputs(c)), c.expected, "hstack") end,
  index_select = function(c)
    local t = input(c.inputs[1])
    assert_exact(t:index_select(c.dim, c.index), c.expected, "index_select (table)")
    local idx = #c.index > 0 and attn.tensor(c.index) or attn.zeros(0)
    assert_exact(attn.index_select(t, c.dim, idx), c.expected, "index_select (tensor)")
  end,
  gather = function(c)
    local t = input(c.inputs[1])
    local idx = fixture.tensor {shape = c.index_shape, data = (function()
      local flat = {}
      local function walk(x) if type(x) == "table" then for _, y in ipairs(x) do walk(y) end else flat[#flat + 1] = x end end
      walk(c.index)
      return flat
    end)()}
    assert_exact(t:gather(c.dim, idx), c.expected, "gather (tensor)")
    if #c.index > 0 and (type(c.index[1]) ~= "table" or #c.index[1] > 0) then
      assert_exact(attn.gather(t, c.dim, c.index), c.expected, "gather (table)")
    end
  end,
  split = function(c)
    local t = input(c.inputs[1])
    assert_pieces({t:split(c.size, c.dim)}, c.expected, "split")
  end,
  chunk = function(c)
    local t = input(c.inputs[1])
    assert_pieces({t:chunk(c.chunks, c.dim)}, c.expected, "chunk")
  end,
  ["repeat"] = function(c)
    local t = input(c.inputs[1])
    assert_exact(t:rep(table.unpack(c.reps)), c.expected, "t:rep(...)")
    assert_exact(t:rep(c.reps), c.expected, "t:rep{...}")
    assert_exact(attn["repeat"](t, table.unpack(c.reps)), c.expected, 'attn["repeat"]')
    assert_exact(t["repeat"](t, c.reps), c.expected, 't["repeat"]')
  end,
  flip = function(c)
    local t = input(c.inputs[1])
    assert_exact(t:flip(table.unpack(c.dims)), c.expected, "t:flip(...)")
    assert_exact(t:flip(c.dims), c.expected, "t:flip{...}")
  end,
}

-- tril and triu: as a method and, with k, as attn.tril/attn.triu
for _, op in ipairs({ "tril", "triu" }) do
  run[op] = function(c)
    local t = input(c.inputs[1])
    if c.k then
      assert_exact(t[op](t, c.k), c.expected, "t:" .. op)
      assert_exact(attn[op](t, c.k), c.expected, "attn." .. op)
    else
      assert_exact(t[op](t), c.expected, "t:" .. op .. "()")
    end
  end
end

describe("shape ops match torch", function()
  local count = {}
  for i, c in ipairs(cases) do
    count[c.op] = (count[c.op] or 0) + 1
    it(("%s case %d (#%d)"):format(c.op, count[c.op], i), function()
      assert(run[c.op], "no runner for " .. c.op)(c)
    end)
  end
  it("covers every op", function()
    for op in pairs(run) do assert.is_true((count[op] or 0) >= 5, op) end
  end)
end)

describe("results", function()
  it("are fresh contiguous tensors, not views", function()
    local a = attn.arange(12):reshape(3, 4)
    local outs = {
      a:tril(), a:triu(), attn.cat({a}), attn.stack({a}), attn.vstack({a}), attn.hstack({a}),
      a:index_select(1, {1, 2, 3}), a:gather(1, {{1, 2, 3, 1}}), a:rep(1, 1), a:flip(),
    }
    for i, o in ipairs(outs) do
      assert.is_true(o:is_contiguous(), "result " .. i)
      o:fill_(-1)
      assert.equal(0, a[1][1], "result " .. i .. " shares storage with its input")
      assert.equal(11, a[3][4], "result " .. i .. " shares storage with its input")
    end
  end)

  it("accept numbers and nested tables in lists and for inputs", function()
    assert.same({1, 2, 3}, attn.cat({{1, 2}, attn.tensor {3.0}}):totable())
    assert.same({{1, 2}, {3, 4}}, attn.stack({{1, 2}, {3, 4}}):totable())
    assert.same({5, 6, 7}, attn.stack({5, 6, 7}):totable())
    assert.same({{1, 2}, {3, 4}}, attn.vstack({{1, 2}, {3, 4}}):totable())
    assert.same({1, 2, 3}, attn.hstack({1, {2, 3}}):totable())
    assert.same({{1, 0}, {3, 4}}, attn.tril({{1, 2}, {3, 4}}):totable())
    assert.same({3, 1}, attn.index_select({1, 2, 3}, 1, {3, 1}):totable())
  end)

  it("use 1-based dims and indices with negative dims from the end", function()
    local a = attn.tensor {{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}
    assert.same({{3, 1}, {6, 4}}, a:index_select(2, {3, 1}):totable())
    assert.same({{3, 1}, {6, 4}}, a:index_select(-1, {3, 1}):totable())
    assert.same({{4, 5, 6}}, a:index_select(-2, {2}):totable())
    assert.same({{2, 2}, {6, 4}}, a:gather(2, {{2, 2}, {3, 1}}):totable())
    assert.same({{1, 2, 3, 1, 2, 3}, {4, 5, 6, 4, 5, 6}}, attn.cat({a, a}, -1):totable())
    assert.same({2, 3, 2}, attn.stack({a, a}, -1):shape())
    assert.same({{6, 5, 4}, {3, 2, 1}}, a:flip(1, -1):totable())
  end)
end)

describe("split and chunk", function()
  it("return views that share storage with the input", function()
    local base = attn.arange(14):reshape(7, 2)
    local pieces = {base:split(3)}
    assert.equal(3, #pieces)
    pieces[3][1][2] = -1 -- row 7 of base
    assert.equal(-1, base[7][2])
    pieces[1]:fill_(100)
    assert.same({{100, 100}, {100, 100}, {100, 100}}, base:narrow(1, 1, 3):totable())

    local t = attn.arange(10):reshape(2, 5):t() -- non-contiguous [5,2]
    local chunks = {t:chunk(2, 2)}
    assert.equal(2, #chunks)
    chunks[2]:fill_(-7)
    assert.same({-7, -7, -7, -7, -7}, t:select(2, 2):totable())

    local _, second = t:split({1, 4})
    second[4][1] = 42 -- row 5 of t
    assert.equal(42, t[5][1])
  end)

  it("default to dim 1 and return the pieces as multiple values", function()
    assert.equal(2, select("#", attn.arange(5):chunk(2)))
    local a, b = attn.arange(5):chunk(2)
    assert.same({0, 1, 2}, a:totable())
    assert.same({3, 4}, b:totable())
    assert.is_true(attn.is_tensor(b))
  end)

  it("keep the input alive through their views", function()
    local pieces = {attn.arange(6):split(2)}
    collectgarbage()
    collectgarbage()
    assert.same({4, 5}, pieces[3]:totable())
  end)
end)

describe("repeat", function()
  it("is reachable as attn['repeat'], t['repeat'] and t:rep", function()
    local t = attn.tensor {1.0, 2.0}
    assert.same({{1, 2, 1, 2}}, attn["repeat"](t, 1, 2):totable())
    assert.same({{1, 2, 1, 2}}, t["repeat"](t, {1, 2}):totable())
    assert.same({1, 2, 1, 2, 1, 2}, t:rep(3):totable())
  end)
end)

describe("errors", function()
  local a = attn.ones(2, 3)

  it("cat names the offending tensor and shapes in 1-based terms", function()
    local msg = err(attn.cat, {a, a, attn.ones(2, 4)})
    assert.truthy(msg:find("cat: tensors[3] has shape [2,4] but tensors[1] has shape [2,3]", 1, true), msg)
    assert.truthy(msg:find("except in dim 1", 1, true), msg)
    msg = err(attn.cat, {a, attn.ones(3, 3)}, 2)
    assert.truthy(msg:find("tensors[2] has shape [3,3]", 1, true), msg)
    assert.truthy(msg:find("except in dim 2", 1, true), msg)
    assert_msg("tensors[2] has shape [3] but tensors[1] has shape [2,3]; tensors must have the same number of dims",
      attn.cat, {a, attn.ones(3)})
    -- position counts the skipped [0] tensors too
    assert_msg("tensors[3] has shape [2,4] but tensors[2] has shape [2,3]", attn.cat, {attn.zeros(0), a, attn.ones(2, 4)})
    assert_msg("cat: tensors[2] is 0-d", attn.cat, {a, 1})
    assert_msg("cat: dim 3 out of range", attn.cat, {a, a}, 3)
    assert_msg("cat: dim 0 out of range", attn.cat, {a, a}, 0)
  end)

  it("empty lists are rejected", function()
    for _, f in ipairs {attn.cat, attn.stack, attn.vstack, attn.hstack} do
      assert_msg("expected a non-empty list of tensors", f, {})
    end
    assert_msg("table expected", attn.cat, a)
  end)

  it("stack, vstack and hstack name the mismatching shapes", function()
    assert_msg("stack: tensors[2] has shape [3,2] but tensors[1] has shape [2,3]; all must be equal",
      attn.stack, {a, attn.ones(3, 2)})
    assert_msg("stack: dim 4 out of range", attn.stack, {a, a}, 4)
    assert_msg("vstack: tensors[2] has shape [1,2] but tensors[1] has shape [2,3]", attn.vstack, {a, {1, 2}})
    assert_msg("hstack: tensors[2] has shape [3,3] but tensors[1] has shape [2,3]", attn.hstack, {a, attn.ones(3, 3)})
  end)

  it("out-of-range indices are reported 1-based", function()
    assert_msg("index_select: index 4 in 'index' out of range (expected 1..3)", a.index_select, a, 2, {1, 4})
    assert_msg("index_select: index 0 in 'index' out of range (expected 1..2)", a.index_select, a, 1, {0})
    assert_msg("index_select: index 3 in 'index' out of range (expected 1..2)", a.index_select, a, 1, attn.tensor {3.0})
    assert_msg("integer indices", a.index_select, a, 1, {1.5})
    assert_msg("index must be 1-d, got shape [1,1]", a.index_select, a, 1, {{1}})
    assert_msg("index_select: dim 3 out of range", a.index_select, a, 3, {1})
    assert_msg("gather: index 4 in 'index' out of range (expected 1..3)", a.gather, a, 2, {{4}})
    assert_msg("gather: index 3 in 'index' out of range (expected 1..2)", a.gather, a, 1, {{3}})
  end)

  it("gather shape mismatches name shapes and 1-based dims", function()
    assert_msg("gather: index [3,1] does not fit the input [2,3]: size 3 > 2 at dim 1 (only dim 2 may be larger)",
      a.gather, a, 2, {{1}, {1}, {1}})
    assert_msg("gather: index [2] must have as many dims as the input [2,3]", a.gather, a, 2, {1, 1})
  end)

  it("split and chunk check sizes and dims in 1-based terms", function()
    assert_msg("split: sizes {1,1} must add up to 3, the size of dim 2", a.split, a, {1, 1}, 2)
    assert_msg("split: sizes {2,2} must add up to 2, the size of dim 1", a.split, a, {2, 2})
    assert_msg("split: size -1 at position 2 is negative", a.split, a, {3, -1}, 2)
    assert_msg("split: split size can only be 0 if dim 2 is empty (it has size 3)", a.split, a, 0, 2)
    assert_msg("split: split size must be non-negative", a.split, a, -2)
    assert_msg("split: dim 3 out of range", a.split, a, 1, 3)
    assert_msg("chunk: number of chunks must be positive (got 0)", a.chunk, a, 0)
    assert_msg("cannot split a 0-d tensor", attn.tensor(1.0).split, attn.tensor(1.0), 1)
  end)

  it("repeat, flip and tril reject bad arguments", function()
    assert_msg("repeat: 1 repeat counts given for a 2-d tensor [2,3] (need at least 2)", a.rep, a, 2)
    assert_msg("repeat: repeat count -1 at position 2 is negative", a.rep, a, 1, -1)
    assert_msg("flip: dim 2 appears more than once", a.flip, a, 2, -1)
    assert_msg("flip: dim 3 out of range", a.flip, a, {3})
    assert_msg("tril: expects a tensor with at least 2 dims, got [3]", attn.tril, attn.ones(3))
    assert_msg("triu: argument 'diagonal' must be an integer", a.triu, a, 0.5)
  end)

  it("leave no result behind", function()
    -- a failing call returns nothing and the inputs are untouched
    local t = attn.arange(6):reshape(2, 3)
    local before = t:totable()
    for _, f in ipairs {
      function() return attn.cat({t, attn.ones(3, 2)}) end,
      function() return t:index_select(1, {3}) end,
      function() return t:split({1, 1}, 2) end,
      function() return t:gather(2, {{1}, {1}, {1}}) end,
    } do
      local ok = pcall(f)
      assert.is_false(ok)
    end
    assert.same(before, t:totable())
  end)
end)
