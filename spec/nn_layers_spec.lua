-- SPDX-License-Identifier: MIT
-- attn.nn layers against torch 1.13 (spec/fixtures/nn.lua, written by
-- scripts/fixtures/gen_nn.py): parameters as constructed under the same
-- seed (bit for bit), outputs (atol 1e-5) and the gradients of sum(y * y)
-- with respect to the input and every parameter (atol 1e-4).
local attn = require "attn"
local nn = require "attn.nn"
local fx = require "support.fixture"

local F = fx.load("nn")
local FWD, GRAD = 1e-5, 1e-4

-- Parameters of m equal the fixture's (names with "." as "_") bit for bit,
-- and m has no others.
local assert_params = fx.assert_params

-- Runs m on fixture inputs (fresh leaves requiring grad), backpropagates
-- sum(y * y) and compares the output(s) and every gradient.
local function check_run(m, case, inputs, what)
  local xs = {}
  for i, f in ipairs(inputs) do xs[i] = fx.tensor(f):requires_grad_(true) end
  local outs = table.pack(m(table.unpack(xs)))
  local loss
  for i = 1, outs.n do
    local y = outs[i]
    fx.assert_close(y, case.y[i], FWD, 0, what .. " output " .. i)
    local l = (y * y):sum()
    loss = loss and loss + l or l
  end
  loss:backward()
  for i, x in ipairs(xs) do
    fx.assert_close(x.grad, case.xgrad[i], GRAD, 0, what .. " input grad " .. i)
  end
  for name, p in m:named_parameters() do
    fx.assert_close(p.grad, case.grads[(name:gsub("%.", "_"))], GRAD, 0, what .. " grad " .. name)
  end
  m:zero_grad()
  return outs
end

describe("nn.Linear", function()
  it("initialises like torch under the same seed (weight, then bias)", function()
    attn.manual_seed(123)
    local m = nn.Linear(3, 2)
    assert_params(m, F.linear.l32.params, "Linear(3, 2)")
    -- the numbers quoted in torch's docs for this seed
    local row = m.weight:select(1, 1):totable()
    assert.is_true(math.abs(row[1] - -0.2354) < 1e-4 and math.abs(row[2] - 0.0191) < 1e-4
      and math.abs(row[3] - -0.2867) < 1e-4)
    attn.manual_seed(9)
    assert_params(nn.Linear(5, 6), F.linear.l56.params, "Linear(5, 6)")
    attn.manual_seed(5)
    local nb = nn.Linear(4, 3, false)
    assert.is_nil(nb.bias)
    assert_params(nb, F.linear.nobias.params, "Linear(4, 3, false)")
  end)

  it("computes x W^T + b and its gradients", function()
    attn.manual_seed(123)
    local m = nn.Linear(3, 2)
    local c = F.linear.l32
    check_run(m, c, {c.x}, "Linear")
    fx.assert_close(m(fx.tensor(c.x1)), c.y1, FWD, 0, "Linear on a 1-d input")
  end)

  it("takes any number of leading dims, and no bias", function()
    attn.manual_seed(5)
    local m = nn.Linear(4, 3, false)
    check_run(m, F.linear.nobias, {F.linear.nobias.x}, "Linear without bias")
  end)

  it("rejects bad sizes", function()
    assert.has_error(function() nn.Linear(-1, 2) end)
    assert.has_error(function() nn.Linear(2.5, 2) end)
  end)
end)

describe("nn.Embedding", function()
  it("initialises N(0, 1) like torch and zeroes the padding row (1-based)", function()
    local c = F.embedding.pad
    attn.manual_seed(11)
    local m = nn.Embedding(10, 4, {padding_idx = c.padding_idx})
    assert_params(m, c.params, "Embedding pad")
    assert.are.same({0, 0, 0, 0}, m.weight:select(1, 3):totable())
    local n = F.embedding.padneg
    attn.manual_seed(12)
    local m2 = nn.Embedding(6, 3, {padding_idx = -1})
    assert.are.equal(n.padding_idx, m2.padding_idx)
    assert_params(m2, n.params, "Embedding padding_idx=-1")
  end)

  it("looks up 1-based ids; the padding row gets no gradient", function()
    local c = F.embedding.pad
    attn.manual_seed(11)
    local m = nn.Embedding(10, 4, {padding_idx = c.padding_idx})
    local y = m(c.ids)
    fx.assert_close(y, c.y, FWD, 0, "Embedding output")
    ;(y * y):sum():backward()
    fx.assert_close(m.weight.grad, c.wgrad, GRAD, 0, "Embedding weight grad")
    -- ids as a tensor give the same
    fx.assert_close(m(attn.tensor(c.ids)), c.y, FWD, 0, "Embedding with tensor ids")
  end)

  for _, name in ipairs({"maxnorm", "maxnorm1"}) do
    it("renormalises looked-up rows in place with max_norm (" .. name .. ")", function()
      local c = F.embedding[name]
      attn.manual_seed(name == "maxnorm" and 13 or 14)
      local m = nn.Embedding(8, 3, {max_norm = c.max_norm, norm_type = c.norm_type})
      assert_params(m, c.params, "Embedding " .. name)
      local y = m(c.ids)
      fx.assert_close(y, c.y, FWD, 0, name .. " output")
      fx.assert_close(m.weight, c.after, FWD, 0, name .. " weight after the lookup")
      ;(y * y):sum():backward()
      fx.assert_close(m.weight.grad, c.wgrad, GRAD, 0, name .. " weight grad")
      assert.is_true(m.weight.is_leaf)
    end)
  end

  it("rejects bad ids and padding_idx", function()
    assert.has_error(function() nn.Embedding(5, 2, {padding_idx = 0}) end)
    assert.has_error(function() nn.Embedding(5, 2, {padding_idx = 6}) end)
    assert.has_error(function() nn.Embedding(5, 2, {padd_idx = 1}) end)
    local m = nn.Embedding(5, 2, {max_norm = 1})
    assert.has_error(function() m({0, 1}) end)
    assert.has_error(function() nn.Embedding(5, 2)({6}) end)
  end)

  it("from_pretrained uses the given weights", function()
    local w = attn.tensor({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}})
    local m = nn.Embedding.from_pretrained(w)
    assert.is_false(m.weight.requires_grad)
    assert.are.same({{5, 6}, {1, 2}}, m({3, 1}):totable())
    assert.is_true(nn.Embedding.from_pretrained(w, {freeze = false}).weight.requires_grad)
  end)
end)

describe("nn.LayerNorm", function()
  it("starts with weight ones and bias zeros", function()
    local m = nn.LayerNorm(5)
    assert_params(m, F.layernorm.ln5.init, "LayerNorm(5)")
    assert_params(nn.LayerNorm({2, 3}, 1e-3), F.layernorm.ln23.init, "LayerNorm({2, 3})")
    local na = nn.LayerNorm(4, {elementwise_affine = false})
    assert.are.equal(0, #na:parameters())
  end)

  local shapes = {ln5 = {5, 1e-5, true}, ln23 = {{2, 3}, 1e-3, true}, noaffine = {4, 1e-5, false}}
  for name, args in pairs(shapes) do
    it("matches torch forward and backward (" .. name .. ")", function()
      local c = F.layernorm[name]
      local m = nn.LayerNorm(args[1], args[2], args[3])
      if args[3] then
        attn.no_grad(function()
          m.weight:copy_(fx.tensor(c.params.weight))
          m.bias:copy_(fx.tensor(c.params.bias))
        end)
      end
      check_run(m, c, {c.x}, "LayerNorm " .. name)
    end)
  end

  it("checks the trailing dims", function()
    assert.has_error(function() nn.LayerNorm(4)(attn.zeros(2, 5)) end)
    assert.has_error(function() nn.LayerNorm({}) end)
    assert.has_error(function() nn.LayerNorm("4") end)
  end)
end)

describe("nn.Dropout", function()
  it("draws torch's mask for the same seed and scales by 1 / (1 - p)", function()
    local c = F.dropout.p03
    local m = nn.Dropout(c.p)
    assert.is_true(m.training)
    attn.manual_seed(c.seed)
    local x = fx.tensor(c.x):requires_grad_(true)
    local y = m(x)
    fx.assert_close(y, c.y[1], 0, 0, "dropout output (bit-exact)")
    ;(y * y):sum():backward()
    fx.assert_close(x.grad, c.xgrad[1], GRAD, 0, "dropout input grad")
    -- the stream goes on: a second call draws the next mask
    fx.assert_close(m(fx.tensor(c.x)), c.y2, 0, 0, "second dropout call")
  end)

  it("draws the mask in the logical order of a non-contiguous input", function()
    local c = F.dropout.p05t
    attn.manual_seed(c.seed)
    fx.assert_close(nn.Dropout(c.p)(fx.tensor(c.x):t()), c.y, 0, 0, "dropout of a transposed input")
  end)

  it("is the identity in eval mode and for p = 0; zeros for p = 1", function()
    local x = fx.tensor(F.dropout.p03.x)
    local m = nn.Dropout(0.3)
    m:eval()
    assert.is_false(m.training)
    assert.are.equal(x, m(x)) -- torch returns the input itself
    m:train()
    assert.is_true(m.training)
    assert.are_not.equal(x, m(x))
    assert.are.equal(x, nn.Dropout(0)(x))
    local c = F.dropout.p1
    local xr = fx.tensor(c.x):requires_grad_(true)
    local y = nn.Dropout(1)(xr)
    fx.assert_close(y, c.y[1], 0, 0, "p = 1")
    ;(y * y):sum():backward()
    fx.assert_close(xr.grad, c.xgrad[1], 0, 0, "p = 1 grad")
  end)

  it("draws nothing in eval mode", function()
    local x = attn.ones(3, 3)
    attn.manual_seed(5)
    nn.Dropout(0.5):eval()(x)
    local a = attn.rand(2):totable()
    attn.manual_seed(5)
    local b = attn.rand(2):totable()
    assert.are.same(b, a)
  end)

  it("rejects p outside [0, 1]", function()
    assert.has_error(function() nn.Dropout(1.5) end)
    assert.has_error(function() nn.Dropout(-0.1) end)
  end)
end)

describe("activation modules", function()
  local A = F.activations
  for _, c in ipairs(A.cases) do
    local label = c.repr
    it(label .. " matches torch", function()
      local m = nn[c.name](table.unpack(c.args))
      check_run(m, {y = {c.y}, xgrad = {c.xgrad}, grads = {}}, {A.x}, label)
      if c.name ~= "Softmax" and c.name ~= "LogSoftmax" then
        assert.are.equal(c.repr, tostring(m))
      end
    end)
  end

  it("Softmax and LogSoftmax print their 1-based dim", function()
    assert.are.equal("Softmax(dim=2)", tostring(nn.Softmax(2)))
    assert.are.equal("LogSoftmax(dim=-1)", tostring(nn.LogSoftmax(-1)))
    assert.has_error(function() nn.Softmax() end)
  end)

  it("GELU rejects an unknown approximation", function()
    assert.has_error(function() nn.GELU("fast") end)
  end)
end)

describe("nn.GRUCell", function()
  local c = F.cells.gru
  it("initialises U(-1/sqrt(h), 1/sqrt(h)) in torch's order", function()
    attn.manual_seed(31)
    assert_params(nn.GRUCell(3, 4), c.params, "GRUCell")
    attn.manual_seed(32)
    assert_params(nn.GRUCell(3, 4, false), F.cells.gru_nobias.params, "GRUCell without bias")
  end)

  it("matches torch forward and backward", function()
    attn.manual_seed(31)
    local m = nn.GRUCell(3, 4)
    check_run(m, c, {c.x, c.h}, "GRUCell")
    fx.assert_close(m(fx.tensor(c.x)), c.y_nohx, FWD, 0, "GRUCell with zero state")
    fx.assert_close(m(fx.tensor(c.x)[2], fx.tensor(c.h)[2]), c.y_unbatched, FWD, 0, "GRUCell unbatched")
    attn.manual_seed(32)
    local nb = F.cells.gru_nobias
    fx.assert_close(nn.GRUCell(3, 4, false)(fx.tensor(nb.x), fx.tensor(nb.h)), nb.y, FWD, 0, "GRUCell no bias")
  end)

  it("checks its inputs", function()
    local m = nn.GRUCell(3, 4)
    assert.has_error(function() m(attn.zeros(2, 5)) end)
    assert.has_error(function() m(attn.zeros(2, 3), attn.zeros(3, 4)) end)
    assert.has_error(function() m(attn.zeros(1, 2, 3)) end)
  end)
end)

describe("nn.LSTMCell", function()
  local c = F.cells.lstm
  it("initialises like torch", function()
    attn.manual_seed(41)
    assert_params(nn.LSTMCell(3, 4), c.params, "LSTMCell")
    attn.manual_seed(42)
    assert_params(nn.LSTMCell(3, 4, false), F.cells.lstm_nobias.params, "LSTMCell without bias")
  end)

  it("returns h, c like torch, with gradients", function()
    attn.manual_seed(41)
    local m = nn.LSTMCell(3, 4)
    local x = fx.tensor(c.x):requires_grad_(true)
    local h = fx.tensor(c.h):requires_grad_(true)
    local cc = fx.tensor(c.c):requires_grad_(true)
    local hy, cy = m(x, {h, cc})
    fx.assert_close(hy, c.hy, FWD, 0, "LSTMCell h")
    fx.assert_close(cy, c.cy, FWD, 0, "LSTMCell c")
    ;((hy * hy):sum() + (cy * cy):sum()):backward()
    fx.assert_close(x.grad, c.xgrad[1], GRAD, 0, "LSTMCell x grad")
    fx.assert_close(h.grad, c.xgrad[2], GRAD, 0, "LSTMCell h grad")
    fx.assert_close(cc.grad, c.xgrad[3], GRAD, 0, "LSTMCell c grad")
    for name, p in m:named_parameters() do
      fx.assert_close(p.grad, c.grads[name], GRAD, 0, "LSTMCell grad " .. name)
    end
    local hu, cu = m(fx.tensor(c.x)[2], {fx.tensor(c.h)[2], fx.tensor(c.c)[2]})
    fx.assert_close(hu, c.hy_unbatched, FWD, 0, "LSTMCell unbatched h")
    fx.assert_close(cu, c.cy_unbatched, FWD, 0, "LSTMCell unbatched c")
    local h0, c0 = m(fx.tensor(c.x))
    fx.assert_close(h0, c.hy_nohx, FWD, 0, "LSTMCell zero state h")
    fx.assert_close(c0, c.cy_nohx, FWD, 0, "LSTMCell zero state c")
    attn.manual_seed(42)
    local nb = F.cells.lstm_nobias
    local h2, c2 = nn.LSTMCell(3, 4, false)(fx.tensor(c.x), {fx.tensor(c.h), fx.tensor(c.c)})
    fx.assert_close(h2, nb.hy, FWD, 0, "LSTMCell no bias h")
    fx.assert_close(c2, nb.cy, FWD, 0, "LSTMCell no bias c")
  end)

  it("prints like torch", function()
    assert.are.equal("LSTMCell(3, 4, bias=False)", tostring(nn.LSTMCell(3, 4, false)))
    assert.are.equal("GRUCell(3, 4)", tostring(nn.GRUCell(3, 4)))
  end)
end)

describe("attn.linear with empty features", function()
  it("backpropagates through zero outputs or zero inputs (torch gives zero gradients of the right shapes)", function()
    local x = attn.randn(5, 3):requires_grad_()
    local w = attn.randn(0, 3):requires_grad_()
    attn.linear(x, w):sum():backward()
    assert.are.same({5, 3}, x.grad:shape())
    assert.are.equal(0, x.grad:abs():sum():item())
    assert.are.same({0, 3}, w.grad:shape())
    local x2 = attn.randn(2, 4, 0):requires_grad_()
    local w2 = attn.randn(3, 0):requires_grad_()
    local b2 = attn.randn(3):requires_grad_()
    attn.linear(x2, w2, b2):sum():backward()
    assert.are.same({3, 0}, w2.grad:shape())
    assert.are.same({8, 8, 8}, b2.grad:totable())
  end)
end)
