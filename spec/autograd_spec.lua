-- SPDX-License-Identifier: MIT
-- The autograd engine's semantics, following torch 1.13: accumulation,
-- explicit gradients, retain_graph, grad mode, detach, leaves and
-- retain_grad, in-place ops and version counters, graph shapes (diamonds,
-- 100,000-deep chains) and memory.  Numbers come from torch through
-- spec/fixtures/grads_autograd.lua (scripts/fixtures/gen_grads.py) or from
-- closed forms.
local attn = require "attn"
local fx = require "support.fixture"

local scenarios = {}
for _, s in ipairs(fx.load("grads_autograd")) do scenarios[s.name] = s end

local function input(s, i, requires)
  local t = fx.tensor(s.inputs[i])
  if requires then t:requires_grad_(true) end
  return t
end

-- float32 against torch's float64: 1e-5 absolute, 1e-5 relative (the
-- scenarios go through sin/exp of values up to ~20)
local function close(t, expected)
  fx.assert_close(t, expected, 1e-5, 1e-5)
end

describe("backward", function()
  it("accumulates into .grad over two backward calls (torch's values)", function()
    local s = scenarios.accumulate
    local x = input(s, 1, true)
    ;(x * x):backward(fx.tensor(s.w[1]))
    fx.assert_close(x.grad, s.expected.first, 1e-5)
    x:exp():backward(fx.tensor(s.w[2]))
    fx.assert_close(x.grad, s.expected.x_grad, 1e-5)
  end)

  it("does not alias the first gradient it stores", function()
    local x = attn.ones(3):requires_grad_(true)
    local g = attn.full({3}, 2.0)
    x:backward(g) -- a leaf's own gradient is the seed itself
    g:fill_(5)
    assert.are.same({2, 2, 2}, x.grad:totable())
    x:backward(g)
    assert.are.same({7, 7, 7}, x.grad:totable())
  end)

  it("takes an explicit gradient for a non-scalar output", function()
    local x = attn.tensor({0.5, -1.0, 2.0}):requires_grad_(true)
    local g = attn.tensor({1.0, 2.0, 3.0})
    x:sin():backward(g)
    local expected = {}
    for i, v in ipairs({0.5, -1, 2}) do expected[i] = math.cos(v) * i end
    for i, v in ipairs(x.grad:totable()) do assert.is_true(math.abs(v - expected[i]) < 1e-6) end
  end)

  it("implies a gradient of 1 only for one-element outputs", function()
    local x = attn.tensor({1.0, 2.0}):requires_grad_(true)
    local y = x * x
    assert.error_matches(function() y:backward() end, "gradient can be implied only for a tensor with one element")
    assert.error_matches(function() y:backward(attn.ones(3)) end, "gradient of shape %[3%] for a tensor of shape %[2%]")
    local z = (x * x):sum()
    z:backward()
    assert.are.same({2, 4}, x.grad:totable())
    local w = attn.tensor({3.0}):requires_grad_(true)
    ;(w * w):backward() -- shape [1] counts too
    assert.are.same({6}, w.grad:totable())
  end)

  it("refuses tensors that do not require grad", function()
    assert.error_matches(function() attn.ones(2):sum():backward() end, "does not require grad")
  end)

  it("raises a clear error on a second backward without retain_graph", function()
    local x = attn.tensor({1.0, 2.0, 3.0}):requires_grad_(true)
    local y = x * x -- MulBackward0 saves x
    y:backward(attn.ones(3))
    assert.are.same({2, 4, 6}, x.grad:totable())
    assert.error_matches(function() y:backward(attn.ones(3)) end, "second time.*retain_graph")
    assert.are.same({2, 4, 6}, x.grad:totable()) -- untouched by the failed call
  end)

  it("runs a second time with retain_graph, doubling the gradients", function()
    local x = attn.tensor({1.0, 2.0, 3.0}):requires_grad_(true)
    local y = (x * x):exp()
    y:backward(attn.ones(3), true)
    local once = x.grad:totable()
    y:backward(attn.ones(3), true)
    for i, v in ipairs(x.grad:totable()) do assert.is_true(math.abs(v - 2 * once[i]) <= 1e-6 * math.abs(v)) end
    y:backward(attn.ones(3)) -- the last pass may free the graph
    for i, v in ipairs(x.grad:totable()) do assert.is_true(math.abs(v - 3 * once[i]) <= 1e-6 * math.abs(v)) end
  end)

  it("walks a graph that saved nothing again without retain_graph (like torch)", function()
    local x = attn.tensor({1.0, 2.0}):requires_grad_(true)
    local y = (x + x):view(2, 1)
    y:backward(attn.ones(2, 1))
    y:backward(attn.ones(2, 1))
    assert.are.same({4, 4}, x.grad:totable())
  end)

  it("accumulates a shared sub-expression used twice (diamond graph)", function()
    local s = scenarios.diamond
    local x = input(s, 1, true)
    local a = x:tanh()
    local b = a * a:exp() + a:sin()
    close(b, s.expected.b)
    b:backward(fx.tensor(s.w[1]))
    close(x.grad, s.expected.x_grad)
  end)

  it("adds the gradients of a tensor used twice by one op", function()
    local x = attn.tensor({1.5, -2.0}):requires_grad_(true)
    ;(x * x + x):backward(attn.ones(2))
    assert.are.same({4, -3}, x.grad:totable())
  end)
end)

describe("gradients added straight into a leaf's .grad", function()
  -- When a node gives a leaf its only gradient of the pass and the leaf
  -- already has a .grad, unary ops and layer_norm add into that .grad in
  -- their own kernel (no temporary, no separate add): the same bits as the
  -- separate add, since each element is .grad + the gradient.
  local function check(name, f, rows, cols)
    attn.manual_seed(11)
    local x = attn.randn(rows, cols):requires_grad_()
    local g1, g2 = attn.randn(rows, cols), attn.randn(rows, cols)
    f(x):backward(g1)
    local first = x.grad:clone()
    local held = x.grad -- a reference held across the second pass sees the sum, as in torch
    local x2 = x:detach():clone():requires_grad_()
    f(x2):backward(g2)
    local want = attn.no_grad(function() return first + x2.grad end)
    f(x):backward(g2)
    assert(attn.eq(x.grad, want):all():item(), name .. " [" .. rows .. "," .. cols .. "]: not the bits of a separate add")
    assert(attn.eq(held, want):all():item(), name .. ": the held .grad was replaced, not added into")
  end

  it("give the bits of a separate add (unary ops and layer_norm, small and thread-pool sizes)", function()
    local w, b = attn.randn(37):requires_grad_(), attn.randn(37):requires_grad_()
    local w2, b2 = attn.randn(512):requires_grad_(), attn.randn(512):requires_grad_()
    local ops = {
      relu = function(t) return t:relu() end,
      gelu = function(t) return attn.F.gelu(t) end,
      gelu_tanh = function(t) return attn.F.gelu(t, "tanh") end,
      tanh = function(t) return t:tanh() end,
      silu = function(t) return attn.F.silu(t) end,
      exp = function(t) return (t * 0.1):exp() end, -- through a mul: the exp's input is not the leaf
      softmax = function(t) return t:softmax(-1) end,
      log_softmax = function(t) return t:log_softmax(-1) end,
      softmax_dim1 = function(t) return t:softmax(1) end, -- not the last dim: the strided loop
      log_softmax_dim1 = function(t) return t:log_softmax(1) end,
    }
    for name, f in pairs(ops) do
      check(name, f, 3, 37)
      check(name, f, 720, 512)
    end
    check("layer_norm", function(t) return attn.F.layer_norm(t, 37, w, b) end, 3, 37)
    check("layer_norm", function(t) return attn.F.layer_norm(t, 512, w2, b2) end, 720, 512)
    check("layer_norm without affine", function(t) return attn.F.layer_norm(t, 37) end, 3, 37)
  end)

  it("give the bits of a separate add for attention's q, k and v (each backward path)", function()
    -- [B, H, L, E] shapes: 8 kv batches and S <= 512 (the forward keeps its
    -- scores), 8 kv batches and S > 512 (one pass, recomputed), 2 kv batches
    -- (two passes); causal and not; grouped-query
    local cases = {
      {q = {2, 4, 40, 16}, kv = {2, 4, 33, 16}}, {q = {2, 4, 40, 16}, kv = {2, 4, 33, 16}, causal = true},
      {q = {1, 8, 5, 8}, kv = {1, 8, 520, 8}}, {q = {1, 2, 70, 16}, kv = {1, 2, 70, 16}, causal = true},
      {q = {2, 8, 9, 16}, kv = {2, 4, 12, 16}, gqa = true},
    }
    for n, c in ipairs(cases) do
      attn.manual_seed(n)
      local opts = {is_causal = c.causal, enable_gqa = c.gqa}
      local q, k, v = attn.randn(table.unpack(c.q)), attn.randn(table.unpack(c.kv)), attn.randn(table.unpack(c.kv))
      local g1, g2 = attn.randn(table.unpack(c.q)), attn.randn(table.unpack(c.q))
      local function leaves() return q:clone():requires_grad_(), k:clone():requires_grad_(), v:clone():requires_grad_() end
      local a = {leaves()}
      attn.scaled_dot_product_attention(a[1], a[2], a[3], opts):backward(g1)
      local first = {a[1].grad:clone(), a[2].grad:clone(), a[3].grad:clone()}
      local held = a[1].grad
      local b = {leaves()}
      attn.scaled_dot_product_attention(b[1], b[2], b[3], opts):backward(g2)
      attn.scaled_dot_product_attention(a[1], a[2], a[3], opts):backward(g2)
      for i, name in ipairs({"q", "k", "v"}) do
        local want = attn.no_grad(function() return first[i] + b[i].grad end)
        assert(attn.eq(a[i].grad, want):all():item(), ("case %d: d%s is not the bits of a separate add"):format(n, name))
      end
      assert(attn.eq(held, a[1].grad):all():item(), ("case %d: the held q.grad was replaced"):format(n))
    end
  end)

  it("add linear and matmul gradients into a held .grad (weights and inputs, each product size)", function()
    -- small and medium products are computed apart and added: the bits of
    -- the separate add; those that go to sgemm add through its beta = 1,
    -- which sums each of its blocks of the reduction (the batch rows) into
    -- .grad in turn: the same bits while the rows fit one block, else the
    -- separate add's value up to summation order
    local cases = {{nin = 5, nout = 3, rows = 4, bits = true}, {nin = 64, nout = 64, rows = 512, bits = true},
      {nin = 512, nout = 384, rows = 96}, {nin = 256, nout = 256, rows = 1500}}
    for _, c in ipairs(cases) do
      local what = ("[%d,%d] weight, %d rows"):format(c.nout, c.nin, c.rows)
      attn.manual_seed(c.rows)
      local w, bias = attn.randn(c.nout, c.nin), attn.randn(c.nout)
      local x1, x2 = attn.randn(c.rows, c.nin), attn.randn(c.rows, c.nin)
      local g1, g2 = attn.randn(c.rows, c.nout), attn.randn(c.rows, c.nout)
      local ops = {
        linear = function(x, wt, b) return attn.linear(x, wt, b) end,
        ["x @ w^T"] = function(x, wt) return x:matmul(wt:t()) end,
        ["x @ w (w [in, out])"] = function(x, wt) return x:matmul(wt) end,
      }
      for name, f in pairs(ops) do
        local wl = name == "x @ w (w [in, out])" and w:t():contiguous() or w
        local function close_to(got, want, which)
          if c.bits then
            assert(attn.eq(got, want):all():item(), ("%s %s, %s: not the bits of a separate add"):format(name, what, which))
          else
            local err = (got - want):abs():max():item() / want:abs():max():item()
            assert(err < 1e-6, ("%s %s, %s: off the separate add by %g"):format(name, what, which, err))
          end
        end
        -- the weight: a second pass adds into the .grad of the first
        local a, fresh = wl:clone():requires_grad_(), wl:clone():requires_grad_()
        f(x1, a, bias):backward(g1)
        local first, held = a.grad:clone(), a.grad
        f(x2, a, bias):backward(g2)
        f(x2, fresh, bias):backward(g2)
        local want = attn.no_grad(function() return first + fresh.grad end)
        close_to(a.grad, want, "weight")
        assert(attn.eq(held, a.grad):all():item(), ("%s %s: the held weight .grad was replaced"):format(name, what))
        -- the input: a leaf with a .grad set beforehand
        local xa, xf = x2:clone():requires_grad_(), x2:clone():requires_grad_()
        local r = attn.randn(c.rows, c.nin)
        xa.grad = r:clone()
        local xheld = xa.grad
        f(xa, wl, bias):backward(g2)
        f(xf, wl, bias):backward(g2)
        close_to(xa.grad, attn.no_grad(function() return r + xf.grad end), "input")
        assert(attn.eq(xheld, xa.grad):all():item(), ("%s %s: the held input .grad was replaced"):format(name, what))
      end
    end
  end)

  it("add into a non-leaf's running sum: split pieces, and no sum shared by two inputs of one op", function()
    attn.manual_seed(5)
    local x = attn.randn(4, 3, 12):requires_grad_()
    local a, b, c = attn.randn(4, 3, 4), attn.randn(4, 3, 4), attn.randn(4, 3, 4)
    local d = attn.randn(4, 3, 12)
    local y = x * 1.5
    local parts = {y:chunk(3, -1)}
    -- y * d first gives y's node a sum, which the pieces then add into
    ;((parts[1] * a + parts[2] * b + parts[3]:tanh() * c):sum() + (y * d):sum()):backward()
    local want = attn.no_grad(function()
      local t3 = parts[3]:detach():tanh()
      return (d + attn.cat({a, b, (1 - t3 * t3) * c}, -1)) * 1.5
    end)
    local err = (x.grad - want):abs():max():item()
    assert(err < 1e-6, "the chunks' gradients were not added to the sum: off by " .. err)
    -- q = k = v = y, whose sum already holds another consumer's gradient:
    -- no input of the attention gets that sum to write into (with threads,
    -- dQ and dK/dV are written at once)
    local function run(shared)
      local x2 = x:detach():clone():requires_grad_()
      local y2 = (x2 * 1.0):reshape(1, 4, 3, 12)
      local q, k, v = y2, y2, y2
      if not shared then q, k, v = y2 * 1.0, y2 * 1.0, y2 * 1.0 end
      local loss = attn.scaled_dot_product_attention(q, k, v):sum() + (y2 * y2):sum()
      loss:backward()
      return x2.grad
    end
    local g1, g2 = run(true), run(false)
    local err2 = (g1 - g2):abs():max():item()
    assert(err2 < 1e-5, "q = k = v with a running sum: off by " .. err2)
  end)

  it("leave a leaf used twice, or a .grad of another shape, to the separate add", function()
    -- the two gradients are summed first, then added (torch's order)
    check("relu + tanh of one leaf", function(t) return t:relu() + t:tanh() end, 40, 100)
    -- an expanded .grad (stride 0) is replaced by the sum, never written through
    local y = attn.tensor({1.0, -2.0, 3.0}):requires_grad_()
    y.grad = attn.tensor({10.0}):expand(3)
    y:relu():backward(attn.ones(3))
    assert.are.same({11, 10, 11}, y.grad:totable())
  end)

  it("never alias the first gradient a leaf stores with anything the caller holds", function()
    local x, z = attn.ones(3):requires_grad_(), attn.ones(3):requires_grad_()
    local g = attn.full({3}, 2.0)
    ;(x + z):backward(g) -- both leaves get g itself from AddBackward
    g:fill_(5)
    assert.are.same({2, 2, 2}, x.grad:totable())
    assert.are.same({2, 2, 2}, z.grad:totable())
    x.grad:fill_(9)
    assert.are.same({2, 2, 2}, z.grad:totable())
    local w = attn.tensor({1.0, -1.0}):requires_grad_()
    local h = w:exp()
    h:retain_grad()
    h:relu():backward(attn.ones(2))
    h.grad:fill_(3) -- the retained grad is its own buffer too
    assert.near(math.exp(1), w.grad:totable()[1], 1e-6)
  end)
end)

describe("grad mode", function()
  local x
  before_each(function() x = attn.ones(2):requires_grad_(true) end)

  it("no_grad(fn, ...) runs fn without recording and returns its results", function()
    local y, n = attn.no_grad(function(a, k) return a * k, 42 end, x, 3)
    assert.are.equal(42, n)
    assert.is_false(y.requires_grad)
    assert.is_nil(y.grad_fn)
    assert.is_true(y.is_leaf)
    assert.is_true(attn.is_grad_enabled())
    assert.is_true((x * 3).requires_grad)
  end)

  it("no_grad() as a <close> guard", function()
    do
      local guard <close> = attn.no_grad()
      assert.is_false(attn.is_grad_enabled())
      assert.is_false((x * 2).requires_grad)
    end
    assert.is_true(attn.is_grad_enabled())
    assert.is_true((x * 2).requires_grad)
  end)

  it("nests, and enable_grad turns recording back on inside", function()
    attn.no_grad(function()
      assert.is_false(attn.is_grad_enabled())
      attn.no_grad(function() assert.is_false(attn.is_grad_enabled()) end)
      assert.is_false(attn.is_grad_enabled())
      local y = attn.enable_grad(function() return x * 2 end)
      assert.is_true(y.requires_grad)
      do
        local guard <close> = attn.enable_grad()
        assert.is_true((x * 2).requires_grad)
        do
          local inner_guard <close> = attn.no_grad()
          assert.is_false((x * 2).requires_grad)
        end
        assert.is_true(attn.is_grad_enabled())
      end
      assert.is_false(attn.is_grad_enabled())
    end)
    assert.is_true(attn.is_grad_enabled())
  end)

  it("is restored when fn raises, and the error goes through", function()
    local ok, err = pcall(attn.no_grad, function() error("inside") end)
    assert.is_false(ok)
    assert.matches("inside", err)
    assert.is_true(attn.is_grad_enabled())
    ok = pcall(function()
      local guard <close> = attn.no_grad()
      error("inside too")
    end)
    assert.is_false(ok)
    assert.is_true(attn.is_grad_enabled())
    attn.no_grad(function()
      pcall(attn.enable_grad, function() error("x") end)
      assert.is_false(attn.is_grad_enabled())
    end)
  end)

  it("set_grad_enabled returns the previous mode", function()
    assert.is_true(attn.set_grad_enabled(false))
    assert.is_false((x * 2).requires_grad)
    assert.is_false(attn.set_grad_enabled(true))
    assert.is_true(attn.is_grad_enabled())
  end)
end)

describe("leaves, detach, requires_grad, retain_grad", function()
  it("is_leaf: created tensors, detach results and no_grad results are leaves", function()
    local x = attn.randn(3)
    assert.is_true(x.is_leaf)
    x:requires_grad_(true)
    assert.is_true(x.is_leaf)
    local y = x * 2
    assert.is_false(y.is_leaf)
    assert.are.equal("MulBackward0", y.grad_fn)
    assert.is_true(y:detach().is_leaf)
    assert.is_true(attn.no_grad(function() return x * 2 end).is_leaf)
    assert.is_true((attn.randn(3) * 2).is_leaf)
  end)

  it("detach cuts the graph but shares the storage", function()
    local x = attn.tensor({1.0, 2.0, 3.0}):requires_grad_(true)
    local y = x * 2
    local d = y:detach()
    assert.is_false(d.requires_grad)
    assert.is_nil(d.grad_fn)
    assert.is_true(d.is_leaf)
    d:fill_(7) -- like torch, writes through to y
    assert.are.same({7, 7, 7}, y:totable())
    assert.is_false((d * x:detach()).requires_grad)
  end)

  it("requires_grad_ on a non-leaf: true is a no-op, false is refused", function()
    local x = attn.ones(2):requires_grad_(true)
    local y = x * 2
    assert.is_true(rawequal(y, y:requires_grad_(true)))
    assert.is_true(y.requires_grad)
    assert.error_matches(function() y:requires_grad_(false) end, "only leaf tensors")
    assert.error_matches(function() y.requires_grad = false end, "only leaf tensors")
    assert.is_true(y.requires_grad)
    x.requires_grad = false -- a leaf may
    assert.is_false(x.requires_grad)
    assert.is_false((x * 2).requires_grad)
  end)

  it("retain_grad keeps a non-leaf's gradient (torch's values)", function()
    local s = scenarios.retain_grad
    local x = input(s, 1, true)
    local h = x * 3 + 1
    h:retain_grad()
    local k = x * 3 + 1 -- the same without retain_grad
    local out = (h * h):sin()
    out:backward(fx.tensor(s.w[1]))
    close(h.grad, s.expected.h_grad)
    close(x.grad, s.expected.x_grad)
    ;(k * 1):backward(attn.ones(3))
    assert.is_nil(k.grad)
    assert.has_no_error(function() x:retain_grad() end) -- leaves keep theirs anyway
    assert.error_matches(function() attn.ones(2):retain_grad() end, "does not require grad")
  end)

  it("retain_grad accumulates over backward calls, like torch", function()
    local x = attn.ones(2):requires_grad_(true)
    local h = x * 2
    h:retain_grad()
    local y = h * h
    y:backward(attn.ones(2), true)
    assert.are.same({4, 4}, h.grad:totable())
    y:backward(attn.ones(2))
    assert.are.same({8, 8}, h.grad:totable()) -- torch: tensor([8., 8.])
    assert.are.same({16, 16}, x.grad:totable())
    h.grad = nil
    assert.is_nil(h.grad)
  end)

  it("t.grad = nil clears the gradient, t.grad = g sets it", function()
    local x = attn.ones(3):requires_grad_(true)
    ;(x * 2):backward(attn.ones(3))
    assert.are.same({2, 2, 2}, x.grad:totable())
    x.grad = nil
    assert.is_nil(x.grad)
    ;(x * 2):backward(attn.ones(3))
    assert.are.same({2, 2, 2}, x.grad:totable()) -- starts from zero again
    x.grad = attn.full({3}, 5.0)
    ;(x * 2):backward(attn.ones(3))
    assert.are.same({7, 7, 7}, x.grad:totable())
    assert.error_matches(function() x.grad = attn.ones(4) end, "shape")
  end)
end)

describe("non-differentiable outputs", function()
  it("comparisons, argmax/argmin, max indices, all/any need no grad", function()
    local x = attn.tensor({{0.5, -1.0, 2.0}, {3.0, 0.1, -0.2}}):requires_grad_(true)
    local outs = {
      gt = x:gt(0), lt = x:lt(0), eq = x:eq(x), ne = attn.ne(x, 1), ge = x:ge(0), le = x:le(0),
      argmax = x:argmax(), argmin = x:argmin(2), all = x:all(), any = x:any(1),
      max_indices = select(2, x:max(2)), min_indices = select(2, x:min(1)),
    }
    for name, o in pairs(outs) do
      assert.is_false(o.requires_grad, name)
      assert.is_nil(o.grad_fn, name)
      assert.error_matches(function() o:sum():backward() end, "does not require grad")
    end
    -- the values of max(dim) do
    assert.is_true(x:max(2).requires_grad)
  end)
end)

describe("in-place operations", function()
  it("are allowed on non-leaf results: masked_fill_ with -inf then softmax (torch's gradient)", function()
    local s = scenarios.masked_softmax
    local x = input(s, 1, true)
    local scores = x * 2
    scores:masked_fill_(input(s, 2), -math.huge)
    assert.are.equal("MaskedFillBackward0", scores.grad_fn)
    local p = scores:softmax(-1)
    close(p, s.expected.p)
    p:backward(fx.tensor(s.w[1]))
    close(x.grad, s.expected.x_grad)
  end)

  it("chain on a non-leaf: add_, mul_, tanh_ (torch's gradient)", function()
    local s = scenarios.inplace_chain
    local x, b, c = input(s, 1, true), input(s, 2, true), input(s, 3)
    local z = x * 1.5
    z:add_(b)
    z:mul_(c)
    z:tanh_()
    close(z, s.expected.z)
    z:backward(fx.tensor(s.w[1]))
    close(x.grad, s.expected.x_grad)
    close(b.grad, s.expected.b_grad)
  end)

  it("are refused on a leaf that requires grad, which keeps its values", function()
    local x = attn.tensor({1.0, 2.0, 3.0}):requires_grad_(true)
    for _, f in ipairs({
      function() x:mul_(2) end, function() x:add_(1) end, function() x:exp_() end,
      function() x:fill_(0) end, function() x:zero_() end, function() x:copy_(attn.zeros(3)) end,
      function() x:masked_fill_(attn.ones(3), 0) end, function() x:clamp_(0, 1) end,
    }) do
      assert.error_matches(f, "leaf tensor that requires grad")
    end
    assert.are.same({1, 2, 3}, x:totable())
    attn.no_grad(function() x:mul_(2) end) -- allowed under no_grad (optimizer steps)
    assert.are.same({2, 4, 6}, x:totable())
    assert.is_true(x.requires_grad)
    assert.is_true(x.is_leaf)
  end)

  it("are refused on views of tensors in a graph", function()
    local x = attn.tensor({{1.0, 2.0}, {3.0, 4.0}}):requires_grad_(true)
    assert.error_matches(function() x:narrow(1, 1, 1):mul_(2) end, "view")
    assert.error_matches(function() x[1]:add_(1) end, "view")
    local y = x * 2
    assert.error_matches(function() y:t():mul_(2) end, "view")
    assert.error_matches(function() y:select(2, 1):zero_() end, "view")
    assert.are.same({{2, 4}, {6, 8}}, y:totable())
    assert.are.same({{1, 2}, {3, 4}}, x:totable())
  end)

  it("raise the version error when a saved tensor was modified before backward", function()
    local x = attn.tensor({1.0, 2.0, 3.0}):requires_grad_(true)
    local w = attn.tensor({4.0, 5.0, 6.0})
    local y = x * w -- saves w
    w:mul_(2)       -- w is in no graph: the write itself is allowed
    assert.error_matches(function() y:backward(attn.ones(3)) end, "modified in place")
    -- a leaf changed under no_grad after being saved
    local z = x * x
    attn.no_grad(function() x:add_(1) end)
    assert.error_matches(function() z:backward(attn.ones(3)) end, "modified in place")
    assert.is_nil(x.grad)
  end)

  it("are allowed on a result a backward node saved, and backward then refuses", function()
    -- like torch: y:mul_(2) goes through; ExpBackward0 saved y, so the
    -- version check stops the backward with a clear message
    local x = attn.tensor({0.0, 1.0}):requires_grad_(true)
    local y = x:exp() -- ExpBackward0 saves its output
    y:mul_(2)
    assert.are.same("MulBackward0", y.grad_fn)
    assert.error_matches(function() y:backward(attn.ones(2)) end, "modified in place")
    -- a result nobody saved backpropagates through its in-place history
    local z = x * 3
    z:mul_(2)
    z:backward(attn.ones(2))
    assert.are.same({6, 6}, x.grad:totable())
  end)

  it("are refused on views of tensors that take part in autograd", function()
    local x = attn.tensor({{1.0, 2.0}, {3.0, 4.0}}):requires_grad_(true)
    local y = x * 1
    local row = y[1]
    assert.error_matches(function() row:mul_(2) end, "view")
    assert.error_matches(function() y:mul_(2) end, "view") -- y has a live view
  end)
end)

---------------------------------------------------------------------------

local rss_kb = require("support.sh").rss_kb

local function full_gc()
  collectgarbage()
  collectgarbage()
end

describe("deep graphs and memory", function()
  it("backpropagates a 100,000-op chain without a stack overflow, and frees it", function()
    local function chain()
      local x = attn.ones(4):requires_grad_(true)
      local y = x
      for _ = 1, 100000 do y = y * 1.0001 end
      return x, y
    end
    full_gc()
    local base = rss_kb()
    local x, y = chain()
    full_gc()
    local built = rss_kb()
    y:backward(attn.ones(4))
    -- each step multiplies the gradient by float32(1.0001)
    local f = attn.tensor(1.0001):item()
    local expected = f ^ 100000
    for _, v in ipairs(x.grad:totable()) do assert.is_true(math.abs(v - expected) < 1e-2 * expected) end
    -- Values dropped (nil) or never read are there for the collector
    -- (luacheck: ignore 311 on those lines).
    x, y = nil, nil -- luacheck: ignore 311
    full_gc()
    -- attn's own live-object counters, exact where RSS depends on malloc
    local c0 = attn.debug_counts()
    x, y = chain() -- luacheck: ignore 311
    local c1 = attn.debug_counts()
    assert.is_true(c1.nodes - c0.nodes >= 100000, "the chain records one node per op")
    y:backward(attn.ones(4))
    x, y = nil, nil -- luacheck: ignore 311
    full_gc()
    local c2 = attn.debug_counts()
    assert.same({c0.nodes, c0.tensors, c0.storages}, {c2.nodes, c2.tensors, c2.storages})
    -- dropping the output without any backward frees it too
    x, y = chain() -- luacheck: ignore 311
    x, y = nil, nil -- luacheck: ignore 311
    full_gc()
    local c3 = attn.debug_counts()
    assert.same({c0.nodes, c0.tensors, c0.storages}, {c3.nodes, c3.tensors, c3.storages})
    if base and built then
      assert.is_true(built - base > 4 * 1024, "building the chain costs memory: the counters above measure something")
    end
  end)

  it("backpropagates 100,000 in-place steps on a non-leaf and 100,000 stacked views", function()
    local x = attn.ones(2):requires_grad_(true)
    local z = x * 1
    for _ = 1, 100000 do z:mul_(1.0001) end
    z:backward(attn.ones(2))
    local expected = attn.tensor(1.0001):item() ^ 100000
    for _, v in ipairs(x.grad:totable()) do assert.is_true(math.abs(v - expected) < 1e-2 * expected) end
    x.grad = nil
    local v = x
    for i = 1, 100000 do v = i % 2 == 0 and v:view(2) or v:unsqueeze(1):squeeze(1) end
    v:backward(attn.full({2}, 3.0))
    assert.are.same({3, 3}, x.grad:totable())
  end)

  it("keeps RSS flat over 10,000 build -> backward iterations", function()
    if not rss_kb() then return pending("no /proc/self/status here") end
    local w = attn.randn(256)
    local x = attn.randn(256):requires_grad_(true)
    local function step()
      local h = (x * w):tanh()
      local loss = (h * h + h:exp()):sum() / 256
      loss:backward()
      x.grad = nil
    end
    for _ = 1, 1000 do step() end
    full_gc()
    local before, c0 = rss_kb(), attn.debug_counts()
    for _ = 1, 10000 do step() end
    full_gc()
    local growth, c1 = rss_kb() - before, attn.debug_counts()
    -- attn's live objects are back where they were, whatever the allocator
    assert.same({c0.nodes, c0.tensors, c0.storages}, {c1.nodes, c1.tensors, c1.storages})
    -- a leaked graph would cost ~10 kB per iteration (100 MB here).  Not
    -- under ASan or valgrind (scripts/sanitize.sh, valgrind.sh set
    -- ATTN_SANITIZER): their allocators hold freed blocks back (ASan's
    -- quarantine keeps up to 256 MB), so RSS says nothing there.
    if not os.getenv("ATTN_SANITIZER") then
      assert.is_true(growth < 8 * 1024, ("RSS grew by %d kB over 10,000 iterations"):format(growth))
    end
  end)

  it("frees the saved tensors when backward finishes without retain_graph", function()
    if not rss_kb() then return pending("no /proc/self/status here") end
    local n = 16 * 1024 * 1024 -- 64 MB tensors: always their own mapping
    local x = attn.zeros(n):requires_grad_(true)
    local seed = attn.ones(n)
    -- the middle exp's output is held by the graph alone
    local function run(retain)
      local y = x:exp():exp()
      full_gc()
      y:backward(seed, retain)
      x.grad = nil
      full_gc()
      return rss_kb(), attn.debug_counts().storage_bytes // 1024, y
    end
    local kept, kept_t, y1 = run(true) -- luacheck: ignore 231 (held, then dropped for the collector)
    y1 = nil
    full_gc()
    local freed, freed_t, y2 = run(false)
    -- attn's own count of live tensor memory, then the process's RSS (not
    -- under ASan, whose quarantine keeps freed blocks mapped)
    assert.is_true(kept_t - freed_t >= 64 * 1024,
      ("tensors with retain_graph %d kB, without %d kB: the saved tensor was not freed"):format(kept_t, freed_t))
    if not os.getenv("ATTN_SANITIZER") then
      assert.is_true(kept - freed > 48 * 1024,
        ("RSS with retain_graph %d kB, without %d kB: the saved tensor was not freed"):format(kept, freed))
    end
    assert.is_true(y2.requires_grad)
  end)
end)
