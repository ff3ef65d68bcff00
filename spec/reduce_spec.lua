-- SPDX-License-Identifier: MIT
-- Reductions, cumsum, softmax and log_softmax against torch 1.13
-- (spec/fixtures/reduce.lua, made by scripts/fixtures/gen_reduce.py), and
-- the binding's argument handling: 1-based and negative dims, keepdim,
-- two results from max/min along a dim, 1-based indices, errors.
local attn = require "attn"
local fixture = require "support.fixture"

local fx = fixture.load("reduce")

local function fmt_shape(s) return "[" .. table.concat(s, ",") .. "]" end

-- A fixture input, rebuilt as the same (possibly non-contiguous) view.
local function input(i)
  local e = fx.inputs[i]
  local t = fixture.tensor(e)
  local v = e.view
  if v and v[1] == "transpose" then
    t = t:transpose(v[2], v[3])
  elseif v and v[1] == "expand" then
    t = t:expand(table.unpack(v, 2))
  end
  if v then assert.is_false(t:is_contiguous()) end
  return t
end

-- Tolerances: sums of a few values, double accumulators here and a float
-- cascade in torch; softmax compares at 1e-6 like the task asks.
local function tolerance(op)
  if op == "argmax" or op == "argmin" or op == "max" or op == "min" or op == "all" or op == "any" then
    return 0, 0
  elseif op == "softmax" or op == "log_softmax" then
    return 1e-6, 1e-6
  end
  return 1e-5, 1e-5
end

-- The call t:op(...) a case stands for, as a method and as attn.op(t, ...).
local function call(fn, t, c, keepdim)
  local op = c.op
  if op == "var" or op == "std" then
    return fn(t, c.dim, c.unbiased, keepdim)
  elseif op == "norm" then
    return fn(t, c.p, c.dim, keepdim)
  elseif op == "cumsum" or op == "softmax" or op == "log_softmax" then
    return fn(t, c.dim)
  end
  return fn(t, c.dim, keepdim)
end

local function describe_case(c)
  local inp = fx.inputs[c.input]
  local parts = {c.op, "of", fmt_shape(inp.shape)}
  if inp.view then parts[#parts + 1] = "(" .. table.concat(inp.view, " ") .. ")" end
  for _, k in ipairs({"dim", "unbiased", "p"}) do
    if c[k] ~= nil then parts[#parts + 1] = k .. "=" .. tostring(c[k]) end
  end
  return table.concat(parts, " ")
end

local function check_case(c)
  local t = input(c.input)
  local what = describe_case(c)
  local atol, rtol = tolerance(c.op)
  for _, fn in ipairs({t[c.op], attn[c.op]}) do
    if c.error then
      local ok, msg = pcall(call, fn, t, c, false)
      assert(not ok, what .. ": expected an error")
      assert(tostring(msg):find(c.error, 1, true), what .. ": message " .. tostring(msg))
    else
      local r, idx = call(fn, t, c, false)
      fixture.assert_close(r, c.expected, atol, rtol, what)
      if c.indices then fixture.assert_equal(idx, c.indices, what .. " indices")
      else assert(idx == nil, what .. ": one result expected") end
      if c.keep_shape then
        local rk, ik = call(fn, t, c, true)
        local keep = {shape = c.keep_shape, data = c.expected.data}
        fixture.assert_close(rk, keep, atol, rtol, what .. " keepdim")
        if c.indices then
          fixture.assert_equal(ik, {shape = c.keep_shape, data = c.indices.data}, what .. " keepdim indices")
        end
      end
    end
  end
end

-- err: the message of the error f raises; assert_msg: f raises one that
-- holds needle.
local E = require "support.errors"
local err, assert_msg = E.message, E.raises

describe("reductions against torch", function()
  it("has fixture cases", function()
    assert.is_true(#fx.cases > 500)
  end)
  -- one test per op keeps failures readable without thousands of tests
  local by_op, order = {}, {}
  for _, c in ipairs(fx.cases) do
    if not by_op[c.op] then
      by_op[c.op] = {}
      order[#order + 1] = c.op
    end
    table.insert(by_op[c.op], c)
  end
  for _, op in ipairs(order) do
    it(op .. " (" .. #by_op[op] .. " cases)", function()
      for _, c in ipairs(by_op[op]) do check_case(c) end
    end)
  end
end)

describe("reduction arguments", function()
  local t = attn.tensor({{1.0, 5.0, 3.0}, {4.0, 2.0, 6.0}})

  it("reduces over everything without a dim, to a 0-d tensor", function()
    for _, op in ipairs({"sum", "mean", "prod", "max", "min", "argmax", "argmin", "var", "std", "norm", "all", "any"}) do
      local r = t[op](t)
      assert.equal(0, r:dim(), op)
    end
    assert.equal(21, t:sum():item())
    assert.equal(6, t:argmax():item()) -- flat 1-based index
    assert.equal(1, t:argmin():item())
  end)

  it("keeps every dim as size 1 with keepdim and no dim", function()
    local r = t:sum(nil, true)
    assert.same({1, 1}, r:shape())
    assert.equal(21, r:reshape(1):totable()[1])
    assert.same({1, 1}, t:argmax(nil, true):shape())
  end)

  it("accepts 1-based and negative dims", function()
    assert.same({5, 7, 9}, t:sum(1):totable())
    assert.same({5, 7, 9}, t:sum(-2):totable())
    assert.same({9, 12}, t:sum(2):totable())
    assert.same({9, 12}, t:sum(-1):totable())
    assert.same({{9}, {12}}, t:sum(-1, true):totable())
  end)

  it("gives values and 1-based indices from max/min along a dim", function()
    local v, i = t:max(2)
    assert.same({5, 6}, v:totable())
    assert.same({2, 3}, i:totable())
    v, i = attn.min(t, 1, true)
    assert.same({{1, 2, 3}}, v:totable())
    assert.same({{1, 2, 1}}, i:totable())
    assert.same({2, 1, 2}, t:argmax(1):totable())
  end)

  it("treats max/min with a tensor as the elementwise maximum/minimum", function()
    assert.same({{3, 5, 3}, {4, 3, 6}}, t:max(attn.tensor({3.0, 3.0, 3.0})):totable())
    assert.same({{1, 3, 3}, {3, 2, 3}}, attn.min(t, attn.full({2, 3}, 3)):totable())
  end)

  it("takes var/std as (dim, unbiased, keepdim) with unbiased or a correction", function()
    local x = attn.tensor({1.0, 2.0, 4.0})
    assert.near(7 / 3, x:var():item(), 1e-6)
    assert.near(14 / 9, x:var(nil, false):item(), 1e-6)
    assert.near(14 / 3, x:var(1, 2):item(), 1e-5) -- correction 2
    assert.near(math.sqrt(14 / 9), x:std(1, false, true):totable()[1], 1e-6)
    assert.same({1}, x:std(1, true, true):shape())
  end)

  it("takes norm as (p, dim, keepdim)", function()
    local x = attn.tensor({{3.0, -4.0}, {0.0, 1.0}})
    assert.near(math.sqrt(26), x:norm():item(), 1e-5)
    assert.near(math.sqrt(26), x:norm("fro"):item(), 1e-5)
    assert.same({7, 1}, x:norm(1, 2):totable())
    assert.same({4, 1}, x:norm(math.huge, -1):totable())
    assert.same({3, 0}, x:norm(-math.huge, 2):totable())
    assert.same({{2}, {1}}, x:norm(0, 2, true):totable())
  end)

  it("works on 0-d tensors with dim 1 / -1", function()
    local s = attn.tensor(2.5)
    assert.equal(2.5, s:sum(1):item())
    assert.equal(0, s:sum(-1, true):dim())
    local v, i = s:max(1)
    assert.equal(2.5, v:item())
    assert.equal(1, i:item())
    assert.equal(1, s:softmax(1):item())
    assert.equal(2.5, s:cumsum(-1):item())
    assert_msg("expected 1..1 or -1..-1", s.sum, s, 2)
  end)

  it("leaves the input alone", function()
    local x = attn.tensor({{1.0, 2.0}, {3.0, 4.0}})
    x:softmax(2)
    x:cumsum(1)
    x:var(1)
    assert.same({{1, 2}, {3, 4}}, x:totable())
  end)

  it("accepts numbers and tables as the module functions' input", function()
    assert.equal(6, attn.sum({1, 2, 3}):item())
    assert.equal(4, attn.max(4):item())
    local p = attn.softmax({0, 0}, 1):totable()
    assert.near(0.5, p[1], 1e-7)
  end)

  it("keeps softmax finite for large logits", function()
    local x = attn.tensor({{1e4, 0.0}, {-1e4, -1e4}})
    local p = x:softmax(2):totable()
    assert.same({{1, 0}, {0.5, 0.5}}, p)
    local lp = x:log_softmax(2):totable()
    assert.equal(0, lp[1][1])
    assert.equal(-1e4, lp[1][2])
  end)
end)

describe("reduction errors", function()
  local t = attn.ones(2, 3)

  it("names the function and the 1-based dim range", function()
    for _, op in ipairs({"sum", "mean", "prod", "max", "min", "argmax", "argmin", "all", "any", "logsumexp",
                         "cumsum", "softmax", "log_softmax"}) do
      for _, d in ipairs({3, -3, 0}) do
        local msg = err(t[op], t, d)
        assert(msg:find(op .. ": dim " .. d .. " out of range", 1, true), msg)
        assert(msg:find("expected 1..2 or -2..-1", 1, true), msg)
      end
    end
    assert_msg("var: dim 5 out of range", t.var, t, 5)
    assert_msg("std: dim -3 out of range", t.std, t, -3, true)
    assert_msg("norm: dim 3 out of range", t.norm, t, 2, 3)
  end)

  it("requires a dim where torch does", function()
    for _, op in ipairs({"cumsum", "softmax", "log_softmax", "logsumexp"}) do
      assert_msg(op .. ": argument 'dim' must be an integer", t[op], t)
    end
  end)

  it("raises for wrong argument types", function()
    assert_msg("sum: argument 'dim' must be an integer", t.sum, t, "x")
    assert_msg("sum: argument 'dim' must be an integer", t.sum, t, 1.5)
    assert_msg("boolean expected", t.sum, t, 1, 1)
    assert_msg("boolean expected", t.max, t, 1, "yes")
    assert_msg("boolean expected", t.var, t, 1, "yes")
    assert_msg("sum: argument 'input' must be a tensor", attn.sum, "x")
    assert_msg("softmax: argument 'input' must be a tensor", attn.softmax, true, 1)
    assert_msg("norm: p must be a number or \"fro\"", t.norm, t, "nuc")
    err(t.norm, t, {})
    assert_msg("norm: p must be a number", t.norm, t, 0 / 0)
  end)

  it("refuses max/min/argmax over an empty dim", function()
    local e = attn.zeros(0, 3)
    for _, op in ipairs({"max", "min", "argmax", "argmin"}) do
      assert_msg(op .. ": cannot reduce over a dim of size 0", e[op], e, 1)
      assert_msg(op .. ": cannot reduce an empty tensor", e[op], e)
    end
    local v, i = e:max(2) -- the other dim is fine: an empty result
    assert.same({0}, v:shape())
    assert.same({0}, i:shape())
  end)
end)
