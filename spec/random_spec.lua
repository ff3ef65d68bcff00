-- SPDX-License-Identifier: MIT
-- Random numbers against torch 1.13's CPU generator: whole streams from
-- spec/fixtures/random.lua (made by scripts/fixtures/gen_random.py) must
-- match bit for bit, across seeds, sizes and sequences of calls.
local attn = require "attn"
local fixture = require "support.fixture"

local cases = fixture.load("random")

-- float32 bit patterns: exact comparison (the fixture's %.9g strings
-- round-trip float32; Lua numbers are doubles)
local function f32(x) return string.pack("<f", x) end

local function flat(t) return fixture.flat(t) end

-- args followed by the generator g (if any)
local function with_gen(args, g)
  local a = {table.unpack(args or {})}
  local n = #(args or {})
  if g then n = n + 1; a[n] = g end
  return a, n
end

local function empty(call)
  if call.view == "t" then
    local s = call.shape
    return attn.empty(s[2], s[1]):t()
  end
  return attn.empty(call.shape)
end

-- Runs one fixture call against attn; returns the result tensor.
local function run(call, g)
  local fn = call[1]
  if fn == "rand" or fn == "randn" or fn == "randint" or fn == "randperm" then
    local a, n = with_gen(call.args, g)
    return attn[fn](table.unpack(a, 1, n))
  elseif fn == "bernoulli" then
    return attn.bernoulli(call.probs, g)
  elseif fn == "multinomial" then
    return attn.multinomial(call.probs, call.args[1], call.args[2], g)
  elseif fn == "rand_like" or fn == "randn_like" then
    local r, c = call.like[1], call.like[2]
    local base = attn.empty(c, r):t()
    return attn[fn](base, g)
  else -- in-place: uniform_, normal_, random_, bernoulli_, exponential_
    local t = empty(call)
    local a, n = with_gen(call.args, g)
    local r = t[fn](t, table.unpack(a, 1, n))
    assert(rawequal(r, t), fn .. " must return its tensor")
    return t
  end
end

local function describe_call(case, k, call)
  return ("seed %d (%s) call %d %s"):format(case.seed, case.private and "Generator" or "default", k, call[1])
end

describe("random streams match torch 1.13 bit for bit", function()
  for _, case in ipairs(cases) do
    it(("seed %d, %s generator, %d calls"):format(case.seed, case.private and "a private" or "the default",
      #case.calls), function()
      local g
      if case.private then
        g = attn.Generator(case.seed)
      else
        attn.manual_seed(case.seed)
      end
      for k, call in ipairs(case.calls) do
        local what = describe_call(case, k, call)
        local got = flat(run(call, g))
        assert(#got == #call.data, ("%s: %d values, expected %d"):format(what, #got, #call.data))
        for i, e in ipairs(call.data) do
          if f32(got[i]) ~= f32(e) then
            error(("%s: element %d is %.9g, expected %.9g"):format(what, i, got[i], e))
          end
        end
      end
    end)
  end

  it("covers every sampler and both generator kinds", function()
    local seen, kinds = {}, {}
    for _, case in ipairs(cases) do
      kinds[case.private] = true
      for _, call in ipairs(case.calls) do seen[call[1]] = true end
    end
    for _, fn in ipairs {"rand", "randn", "uniform_", "normal_", "randint", "random_", "bernoulli_", "bernoulli",
                         "exponential_", "randperm", "multinomial", "rand_like", "randn_like"} do
      assert(seen[fn], "no fixture for " .. fn)
    end
    assert(kinds[true] and kinds[false])
  end)
end)

describe("acceptance values", function()
  it("manual_seed(123) gives torch's rand(3), randn(16) and randn(6)", function()
    local function close(t, expected)
      local v = flat(t)
      for i, e in ipairs(expected) do assert(math.abs(v[i] - e) < 5e-5, ("element %d: %.6f vs %.4f"):format(i, v[i], e)) end
    end
    attn.manual_seed(123)
    close(attn.rand(3), {0.2961, 0.5166, 0.2517})
    attn.manual_seed(123)
    close(attn.randn(16), {0.3374, -0.1778, -0.3035})
    attn.manual_seed(123)
    close(attn.randn(6), {-0.1115, 0.1204, -0.3696})
  end)

  it("manual_seed(123); Embedding(50000, 3) rows like /work/shared/seeds/001", function()
    attn.manual_seed(123)
    local w = attn.empty(50000, 3):normal_()
    local rows = {{0.3374, -0.1778, -0.3035}, {-0.5880, 0.3486, 0.6603}, {-0.2196, -0.3792, 0.7671},
                  {-1.1925, 0.6984, -1.4097}, {0.1794, 1.8951, 0.4954}, {0.2692, -0.0770, -1.0205}}
    local got = w:narrow(1, 1, 6):totable()
    for i = 1, 6 do
      for j = 1, 3 do assert(math.abs(got[i][j] - rows[i][j]) < 5e-5) end
    end
  end)
end)

describe("shapes and indices", function()
  it("takes shapes as varargs or a table", function()
    local g = attn.Generator(3)
    local a = attn.rand(2, 3, g)
    g:manual_seed(3)
    local b = attn.rand({2, 3}, g)
    assert.same({2, 3}, a:shape())
    assert.same(flat(a), flat(b))
    assert.same({}, attn.randn():shape())
    assert.same({0}, attn.rand(0):shape())
  end)

  it("randperm is a 1-based permutation", function()
    local p = flat(attn.randperm(50))
    table.sort(p)
    for i = 1, 50 do assert.equal(i, p[i]) end
    assert.same({0}, attn.randperm(0):shape())
    assert.same({1}, flat(attn.randperm(1)))
  end)

  it("multinomial gives 1-based categories and never a zero weight", function()
    local m = attn.multinomial({{0, 1, 0, 3}, {2, 0, 0, 0}}, 30, true)
    assert.same({2, 30}, m:shape())
    local rows = m:totable()
    for _, v in ipairs(rows[1]) do assert(v == 2 or v == 4) end
    for _, v in ipairs(rows[2]) do assert.equal(1, v) end
    local nr = flat(attn.multinomial({0, 5, 1, 0, 2}, 3))
    table.sort(nr)
    assert.same({2, 3, 5}, nr)
    -- the method form
    local probs = attn.tensor({0.2, 0.8})
    assert.same({4}, probs:multinomial(4, true):shape())
  end)

  it("randint gives values in [low, high), not indices", function()
    local v = flat(attn.randint(-2, 3, {200}))
    local seen = {}
    for _, x in ipairs(v) do
      assert(x >= -2 and x < 3 and x == math.floor(x))
      seen[x] = true
    end
    for x = -2, 2 do assert(seen[x], "never drew " .. x) end
    assert.same({4}, attn.randint(5, {4}):shape()) -- randint(high, shape)
    local r = flat(attn.zeros(100):random_(1, 4))
    for _, x in ipairs(r) do assert(x >= 1 and x <= 3) end
  end)

  it("bernoulli keeps the shape of probs", function()
    local b = attn.bernoulli({{0, 1}, {1, 0}})
    assert.same({{0, 1}, {1, 0}}, b:totable())
    assert.same({{0, 1}, {1, 0}}, attn.tensor({{0.0, 1.0}, {1.0, 0.0}}):bernoulli():totable())
  end)

  it("rand_like keeps the layout of a transposed tensor, like torch's empty_like", function()
    local t = attn.zeros(3, 4):t()
    local r = attn.rand_like(t)
    assert.same({4, 3}, r:shape())
    assert.is_false(r:is_contiguous())
    assert.is_true(attn.randn_like(attn.zeros(2, 5)):is_contiguous())
  end)

  it("in-place samplers are tensor methods and module functions", function()
    local t = attn.zeros(5)
    assert.equal(t, t:uniform_(2, 3))
    for _, v in ipairs(flat(t)) do assert(v >= 2 and v < 3) end
    attn.uniform_(t, -1, 0)
    for _, v in ipairs(flat(t)) do assert(v >= -1 and v < 0) end
    assert.same({1, 1, 1, 1, 1}, flat(t:bernoulli_(1)))
    assert.same({0, 0, 0, 0, 0}, flat(t:bernoulli_(0)))
    assert.same({4, 4, 4, 4, 4}, flat(t:normal_(4, 0)))
    for _, v in ipairs(flat(t:exponential_(3))) do assert(v >= 0) end
  end)
end)

describe("generators", function()
  it("a private generator leaves the default stream alone", function()
    attn.manual_seed(99)
    local a = flat(attn.rand(8))
    attn.manual_seed(99)
    local g = attn.Generator(1)
    attn.randn(40, g)
    attn.zeros(3):normal_(0, 1, g)
    attn.randperm(10, g)
    local b = flat(attn.rand(8))
    assert.same(a, b)
  end)

  it("equal seeds give equal streams; the default seed is torch's", function()
    local g1, g2 = attn.Generator(2 ^ 40 // 1), attn.Generator(2 ^ 40 // 1)
    assert.same(flat(attn.randn(20, g1)), flat(attn.randn(20, g2)))
    assert.equal(67280421310721, attn.Generator():initial_seed())
    assert.equal(1099511627776, g1:initial_seed())
    assert.equal(g1, g1:manual_seed(5))
    assert.equal(5, g1:initial_seed())
    assert.matches("attn.Generator", tostring(g1))
  end)

  it("manual_seed, initial_seed and seed", function()
    attn.manual_seed(31)
    assert.equal(31, attn.initial_seed())
    attn.manual_seed(-1) -- wraps to 2^64 - 1 like torch; read back as -1
    assert.equal(-1, attn.initial_seed())
    local s = attn.seed()
    assert.equal(math.type(s), "integer")
    assert.equal(s, attn.initial_seed())
    assert(s >= 0 and s < 2 ^ 53)
    local g = attn.Generator(1)
    local gs = g:seed()
    assert.equal(gs, g:initial_seed())
  end)

  it("get_state/set_state round trip, including the cached normal sample", function()
    local g = attn.Generator(42)
    attn.zeros(1):normal_(0, 1, g) -- leaves the second Box-Muller value cached
    local st = g:get_state()
    assert.equal("string", type(st))
    local a = flat(attn.zeros(1):normal_(0, 1, g))
    local a2 = flat(attn.rand(700, g))
    assert.equal(g, g:set_state(st))
    assert.same(a, flat(attn.zeros(1):normal_(0, 1, g)))
    assert.same(a2, flat(attn.rand(700, g)))
    -- into another generator
    local h = attn.Generator(0)
    h:set_state(st)
    assert.equal(42, h:initial_seed())
    assert.same(a, flat(attn.zeros(1):normal_(0, 1, h)))
  end)

  it("get_rng_state/set_rng_state on the default generator", function()
    attn.manual_seed(7)
    attn.randn(3)
    local st = attn.get_rng_state()
    local a = flat(attn.randn(5))
    attn.rand(10)
    attn.set_rng_state(st)
    assert.same(a, flat(attn.randn(5)))
  end)
end)

describe("errors", function()
  local function err(f, ...)
    local ok, msg = pcall(f, ...)
    assert(not ok, "expected an error")
    return tostring(msg)
  end

  it("rejects bad parameters with clear messages", function()
    assert.matches("std >= 0", err(attn.randn(3).normal_, attn.randn(3), 0, -1))
    assert.matches("from <= to", err(attn.zeros(3).uniform_, attn.zeros(3), 2, 1))
    assert.matches("p in %[0, 1%]", err(attn.zeros(3).bernoulli_, attn.zeros(3), 1.5))
    assert.matches("lambda >= 0", err(attn.zeros(3).exponential_, attn.zeros(3), -1))
    assert.matches("low < high", err(attn.randint, 5, 5, {2}))
    assert.matches("non%-negative", err(attn.randperm, -1))
    assert.matches("%[0, 1%]", err(attn.bernoulli, {0.5, 1.5}))
    assert.matches("invalid size %-2", err(attn.rand, 2, -2))
    assert.matches("invalid size", err(attn.randn, {3, -1}))
  end)

  it("rejects bad multinomial inputs", function()
    assert.matches("finite and >= 0", err(attn.multinomial, {0.5, -0.5}, 1, true))
    assert.matches("finite and >= 0", err(attn.multinomial, {1, 1 / 0}, 1))
    assert.matches("finite and >= 0", err(attn.multinomial, {0 / 0, 1}, 1, true))
    assert.matches("sums to 0", err(attn.multinomial, {{1, 0}, {0, 0}}, 1, true))
    assert.matches("at least 1", err(attn.multinomial, {1, 2}, 0))
    assert.matches("without replacement", err(attn.multinomial, {1, 2}, 3))
    assert.matches("only 1 non%-zero", err(attn.multinomial, {0, 2, 0}, 2))
    assert.matches("1%-d or 2%-d", err(attn.multinomial, 1, 1))
  end)

  it("rejects wrong argument types", function()
    assert.matches("integer", err(attn.manual_seed, 1.5))
    assert.matches("integer", err(attn.manual_seed, "x"))
    assert.matches("integer", err(attn.randperm, "x"))
    assert.matches("unexpected argument #2 %(string%)", err(attn.rand, 3, "x"))
    assert.matches("unknown option 'seed'; valid options: generator, requires_grad", err(attn.rand, {3}, {seed = 1}))
    assert.matches("attn.Generator", err(attn.Generator(1).manual_seed, attn.zeros(1), 3))
    assert.matches("boolean expected", err(attn.multinomial, {1, 2}, 1, "yes"))
    assert.matches("attn.Tensor", err(attn.rand_like, {1, 2}))
    assert.matches("must be a tensor", err(attn.bernoulli, "x"))
    assert.matches("string expected", err(attn.set_rng_state, 5))
    assert.matches("set_state", err(attn.set_rng_state, "not a state"))
    assert.matches("bad magic", err(attn.set_rng_state, string.rep("x", #attn.get_rng_state())))
    assert.matches("expanded", err(attn.zeros(1):expand(3).uniform_, attn.zeros(1):expand(3)))
  end)

  it("leaves the stream untouched after an error", function()
    attn.manual_seed(5)
    local st = attn.get_rng_state()
    pcall(attn.multinomial, {1, -1}, 1)
    pcall(attn.randperm, -3)
    pcall(attn.bernoulli, {2})
    assert.equal(st, attn.get_rng_state())
  end)
end)
