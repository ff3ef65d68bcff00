-- SPDX-License-Identifier: MIT
-- attn.seq2seq (Luong and Bahdanau attention, attentional decoder steps)
-- against torch 1.13: spec/fixtures/seq2seq_*.lua, written by
-- scripts/fixtures/gen_seq2seq.py from plain torch compositions of the
-- papers' formulas.  Modules built under the same seed must hold torch's
-- parameters bit for bit and load torch's state_dict; outputs and weights
-- must match within 1e-5, the gradients of sum(ctx * gc) + sum(w * gw)
-- for every input and parameter within 1e-4.  Alignment rows must sum to
-- 1 over the real positions (in the window, for local attention) with
-- exact zeros elsewhere.
local attn = require "attn"
local nn = require "attn.nn"
local s2s = require "attn.seq2seq"
local fx = require "support.fixture"

local FWD, GRAD = 1e-5, 1e-4

-- Compares m's parameters (names in order, values bit for bit) with the
-- fixture's state_dict list, then loads that state_dict (strict).
local function check_params(m, list, what)
  local i = 0
  for name, p in m:named_parameters() do
    i = i + 1
    local e = list[i]
    assert(e, ("%s: unexpected parameter %s"):format(what, name))
    assert.are.equal(e[1], name, what .. ": parameter " .. i)
    fx.assert_equal(p, e[2], what .. " " .. name)
  end
  assert.are.equal(#list, i, what .. ": number of parameters")
  local sd, keys = {}, {}
  for _, e in ipairs(list) do sd[e[1]] = fx.tensor(e[2]); keys[#keys + 1] = e[1] end
  assert.are.same(keys, nn.state_dict_keys(m:state_dict()), what .. ": state_dict keys")
  local res = m:load_state_dict(sd)
  assert.are.equal(0, #res.missing_keys + #res.unexpected_keys)
end

local function check_grads(m, list, what)
  local n = 0
  for _, e in ipairs(list) do
    local p
    for name, q in m:named_parameters() do if name == e[1] then p = q end end
    assert(p, what .. ": no parameter " .. e[1])
    fx.assert_close(p.grad, e[2], GRAD, 0, what .. " grad " .. e[1])
    n = n + 1
  end
  assert.is_true(n > 0 or #m:parameters() == 0)
  m:zero_grad()
end

local function leaf(f) return fx.tensor(f):requires_grad_(true) end

-- Rows of w [B, S] (a flat list of rows) against the mask and an optional
-- window: zero outside, and (after dividing by the Gaussian for local-p)
-- summing to 1 inside whenever a real position is inside.
local function check_rows(w, mask, inside, divide, what)
  local rows = w:totable()
  for b, row in ipairs(rows) do
    local sum, any = 0, false
    for s, v in ipairs(row) do
      local real = (mask == nil or mask[b][s] == 1) and (inside == nil or inside(b, s))
      if real then
        any = true
        sum = sum + (divide and v / divide(b, s) or v)
      else
        assert.are.equal(0, v, ("%s: row %d position %d is outside but has weight %g"):format(what, b, s, v))
      end
    end
    if any then
      assert.is_true(math.abs(sum - 1) < 1e-5, ("%s: row %d sums to %.9g"):format(what, b, sum))
    end
  end
end

local function mask_table(f) return fx.tensor(f):totable() end

--------------------------------------------------------------------------

describe("seq2seq.LuongAttention", function()
  local F = fx.load("seq2seq_luong")
  local mask = mask_table(F.mask)

  local function build(c)
    attn.manual_seed(c.seed)
    return s2s.LuongAttention(F.H, {score = c.score, mode = c.mode, D = c.D,
      max_length = c.score == "location" and F.max_length or nil})
  end

  for _, c in ipairs(F.cases) do
    it(("%s: torch's parameters, outputs, weights and gradients"):format(c.name), function()
      local m = build(c)
      check_params(m, c.params, c.name)
      -- once computing the keys inside, once with precompute's keys
      for _, pre in ipairs({false, true}) do
        local what = c.name .. (pre and " (precomputed keys)" or "")
        local h, enc = leaf(F.h), leaf(F.enc)
        local keys = pre and m:precompute(enc) or nil
        if c.score ~= "concat" then assert.is_nil(keys) end
        local ctx, w, p = m(h, enc, {mask = c.masked and F.mask and fx.tensor(F.mask) or nil, keys = keys, t = c.t})
        fx.assert_close(ctx, c.ctx, FWD, 0, what .. " context")
        fx.assert_close(w, c.w, FWD, 0, what .. " weights")
        if c.p then fx.assert_close(p, c.p, FWD, 0, what .. " p_t") else assert.is_nil(p) end
        local loss = (ctx * fx.tensor(F.gc)):sum() + (w * fx.tensor(F.gw)):sum()
        loss:backward()
        fx.assert_close(h.grad, c.h_grad, GRAD, 0, what .. " h_t grad")
        fx.assert_close(enc.grad, c.enc_grad, GRAD, 0, what .. " encoder grad")
        check_grads(m, c.grads, what)

        local inside, divide
        if c.mode == "local-m" then
          inside = function(_, s) return math.abs(s - c.t) <= c.D end
        elseif c.mode == "local-p" then
          local pt = p:totable()
          inside = function(b, s) return math.abs(s - pt[b]) <= c.D end
          local sigma = c.D / 2
          divide = function(b, s) return math.exp(-(s - pt[b]) ^ 2 / (2 * sigma * sigma)) end
        end
        check_rows(w, c.masked and mask or nil, inside, divide, what)
      end
    end)
  end

  it("gives an all-padded row zero weights, a zero context and no NaN gradient", function()
    local c = F.cases[2] -- dot_mask
    local m = build(c)
    local h, enc = leaf(F.h), leaf(F.enc)
    local ctx, w = m(h, enc, {mask = mask})          -- a nested table works as a mask
    assert.are.same({0, 0, 0, 0, 0}, w:totable()[F.B])
    assert.are.same({0, 0, 0, 0}, ctx:totable()[F.B])
    ;(ctx:sum() + w:sum()):backward()
    for _, v in ipairs(fx.flat(h.grad)) do assert.is_true(v == v) end
    for _, v in ipairs(fx.flat(enc.grad)) do assert.is_true(v == v) end
  end)

  it("scales dot scores by 1/sqrt(H) and reads location scores from W_a h_t", function()
    local h, enc = fx.tensor(F.h), fx.tensor(F.enc)
    local _, w1 = s2s.LuongAttention(F.H)(h * 0.5, enc)
    local _, w2 = s2s.LuongAttention(F.H, {score = "dot_scaled"})(h, enc)
    fx.assert_close(w1, {shape = w2:shape(), data = fx.flat(w2)}, 1e-6, 0, "dot_scaled = dot of h / 2 when H = 4")
    local loc = s2s.LuongAttention(F.H, {score = "location", max_length = 5})
    local _, w3 = loc(h, enc)
    fx.assert_close(w3, {shape = {F.B, F.S}, data = fx.flat(loc.W_a(h):softmax(2))}, 1e-6, 0, "location")
  end)

  it("is reachable through attn.nn and prints like a torch module", function()
    assert.are.equal(s2s.LuongAttention, nn.LuongAttention)
    assert.are.equal(s2s.BahdanauAttention, attn.nn.BahdanauAttention)
    assert.are.equal(s2s.AttnDecoderStep, attn.nn.AttnDecoderStep)
    local m = s2s.LuongAttention(4, {score = "concat", mode = "local-p", D = 2})
    assert.is_true(nn.isinstance(m, nn.Module))
    assert.are.equal(table.concat({
      "LuongAttention(",
      "  4, score=concat, mode=local-p, D=2",
      "  (W_a): Linear(in_features=8, out_features=4, bias=False)",
      "  (v_a): Linear(in_features=4, out_features=1, bias=False)",
      "  (W_p): Linear(in_features=4, out_features=4, bias=False)",
      "  (v_p): Linear(in_features=4, out_features=1, bias=False)",
      ")"}, "\n"), tostring(m))
  end)

  it("rejects bad options and shapes with messages", function()
    local function fails(pattern, fn, ...)
      local ok, err = pcall(fn, ...)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(pattern, 1, true), tostring(err))
    end
    fails("unknown score 'bilinear'", s2s.LuongAttention, 4, {score = "bilinear"})
    fails("unknown mode 'local'", s2s.LuongAttention, 4, {mode = "local"})
    fails("needs opts.max_length", s2s.LuongAttention, 4, {score = "location"})
    fails("needs the window half-width D", s2s.LuongAttention, 4, {mode = "local-p"})
    fails("unknown option 'scroe'", s2s.LuongAttention, 4, {scroe = "dot"})
    fails("hidden must be positive", s2s.LuongAttention, 0)
    local m = s2s.LuongAttention(4)
    local h, enc = attn.randn(2, 4), attn.randn(2, 3, 4)
    fails("h_t has shape [2, 5], expected [*, 4]", m, attn.randn(2, 5), enc)
    fails("encoder_outputs has shape [3, 3, 4], expected [2, *, 4]", m, h, attn.randn(3, 3, 4))
    fails("mask has shape [2, 4], expected [2, 3]", m, h, enc, {mask = attn.ones(2, 4)})
    local lm = s2s.LuongAttention(4, {mode = "local-m", D = 1})
    fails("needs the decoder step opts.t", lm, h, enc)
    local loc = s2s.LuongAttention(4, {score = "location", max_length = 2})
    fails("source length 3 exceeds max_length 2", loc, h, enc)
    local cat = s2s.LuongAttention(4, {score = "concat"})
    fails("opts.keys has shape [2, 3, 5], expected [2, 3, 4]", cat, h, enc, {keys = attn.randn(2, 3, 5)})
  end)
end)

--------------------------------------------------------------------------

describe("seq2seq.BahdanauAttention", function()
  local F = fx.load("seq2seq_bahdanau")
  local mask = mask_table(F.mask)

  for _, c in ipairs(F.cases) do
    it(("%s: torch's parameters, outputs, weights and gradients"):format(c.name), function()
      attn.manual_seed(c.seed)
      local m = s2s.BahdanauAttention(F.enc_hidden, F.dec_hidden, F.attn_dim)
      check_params(m, c.params, c.name)
      local s, enc = leaf(F.s), leaf(F.enc)
      local keys
      if c.precompute then
        keys = m:precompute(enc)
        fx.assert_close(keys, c.keys, FWD, 0, c.name .. " keys U_a h")
      end
      local ctx, w = m(s, enc, {mask = c.masked and fx.tensor(F.mask) or nil, keys = keys})
      fx.assert_close(ctx, c.ctx, FWD, 0, c.name .. " context")
      fx.assert_close(w, c.w, FWD, 0, c.name .. " weights")
      ;((ctx * fx.tensor(F.gc)):sum() + (w * fx.tensor(F.gw)):sum()):backward()
      fx.assert_close(s.grad, c.s_grad, GRAD, 0, c.name .. " s grad")
      fx.assert_close(enc.grad, c.enc_grad, GRAD, 0, c.name .. " encoder grad")
      check_grads(m, c.grads, c.name)
      check_rows(w, c.masked and mask or nil, nil, nil, c.name)
    end)
  end

  it("uses the precomputed keys instead of U_a (enc) when given", function()
    attn.manual_seed(1)
    local m = s2s.BahdanauAttention(F.enc_hidden, F.dec_hidden, F.attn_dim)
    local s, enc = fx.tensor(F.s), fx.tensor(F.enc)
    local calls = 0
    m.U_a.forward = function(self, x) calls = calls + 1; return nn.Linear.forward(self, x) end
    local keys = m:precompute(enc)
    assert.are.equal(1, calls)
    local c1, w1 = m(s, enc, {keys = keys})
    local c2, w2 = m(s, enc, {keys = keys * 0})      -- keys really are what is used
    assert.are.equal(1, calls)
    local c3, w3 = m(s, enc)
    assert.are.equal(2, calls)
    assert.are.same(fx.flat(c1), fx.flat(c3))
    assert.are.same(fx.flat(w1), fx.flat(w3))
    assert.are_not.same(fx.flat(w1), fx.flat(w2))
    assert.is_not_nil(c2)
  end)

  it("rejects bad shapes with messages", function()
    local m = s2s.BahdanauAttention(6, 4, 5)
    local ok, err = pcall(m, attn.randn(2, 6), attn.randn(2, 3, 6))
    assert.is_false(ok)
    assert.is_truthy(err:find("s_prev has shape [2, 6], expected [*, 4]", 1, true), err)
    ok, err = pcall(m, attn.randn(2, 4), attn.randn(2, 3, 6), {keys = attn.randn(2, 3, 4)})
    assert.is_false(ok)
    assert.is_truthy(err:find("opts.keys has shape [2, 3, 4], expected [2, 3, 5]", 1, true), err)
  end)
end)

--------------------------------------------------------------------------

describe("seq2seq.AttnDecoderStep", function()
  local F = fx.load("seq2seq_decoder")
  local mask = mask_table(F.mask)

  local function build(c)
    attn.manual_seed(c.seed)
    local cell = c.cell == "lstm" and nn.LSTMCell(c.input_size, F.H) or nn.GRUCell(c.input_size, F.H)
    local att
    if c.attention == "bahdanau" then
      att = s2s.BahdanauAttention(F.enc_hidden, F.H, F.attn_dim)
    else
      att = s2s.LuongAttention(F.H, c.opts)
    end
    return s2s.AttnDecoderStep(cell, att, {attentional = c.attentional, input_feeding = c.input_feeding})
  end

  -- T steps, one call each (use_decode false) or through decode(); returns
  -- outputs [B, T, H], weights [B, T, S], the final state and the leaves.
  local function unroll(step, c, use_decode)
    local L = {ys = leaf(F.ys), enc = leaf(c.attention == "bahdanau" and F.enc_bahdanau or F.enc_luong),
      h0 = leaf(F.h0), c0 = leaf(F.c0)}
    local state = {h = L.h0, c = c.cell == "lstm" and L.c0 or nil}
    local m = fx.tensor(F.mask)
    if use_decode then
      local outs, ws, st = step:decode(L.ys, state, L.enc, {mask = m})
      return outs, ws, st, L
    end
    local keys = step:precompute(L.enc)
    local outs, ws = {}, {}
    for t = 1, F.T do
      local opts = {mask = m, keys = keys, t = c.opts and c.opts.mode == "local-m" and t or nil}
      local out, w
      out, state, w = step(L.ys:select(2, t), state, L.enc, opts)
      outs[t], ws[t] = out, w
    end
    return attn.stack(outs, 2), attn.stack(ws, 2), state, L
  end

  for _, c in ipairs(F.cases) do
    for _, use_decode in ipairs({false, true}) do
      local what = c.name .. (use_decode and " (decode)" or " (step by step)")
      it(what .. ": a 3-step unroll matches torch, gradients included", function()
        local step = build(c)
        check_params(step, c.params, what)
        local outs, ws, st, L = unroll(step, c, use_decode)
        fx.assert_close(outs, c.outs, FWD, 0, what .. " outputs")
        fx.assert_close(ws, c.ws, FWD, 0, what .. " weights")
        fx.assert_close(st.h, c.h, FWD, 0, what .. " final h")
        if c.cell == "lstm" then fx.assert_close(st.c, c.c, FWD, 0, what .. " final c") end
        if c.input_feeding then
          fx.assert_close(st.feed, {shape = {F.B, F.H}, data = fx.flat(outs:select(2, F.T))}, 0, 0, what .. " feed")
        else
          assert.is_nil(st.feed)
        end
        ;((outs * fx.tensor(F.go)):sum() + (ws * fx.tensor(F.gw)):sum()):backward()
        fx.assert_close(L.ys.grad, c.ys_grad, GRAD, 0, what .. " input grad")
        fx.assert_close(L.enc.grad, c.enc_grad, GRAD, 0, what .. " encoder grad")
        fx.assert_close(L.h0.grad, c.h0_grad, GRAD, 0, what .. " h0 grad")
        if c.cell == "lstm" then fx.assert_close(L.c0.grad, c.c0_grad, GRAD, 0, what .. " c0 grad") end
        check_grads(step, c.grads, what)
        if not (c.opts and c.opts.mode == "local-p") then
          for t = 1, F.T do
            local inside
            if c.opts and c.opts.mode == "local-m" then
              inside = function(_, s) return math.abs(s - t) <= c.opts.D end
            end
            check_rows(ws:select(2, t), mask, inside, nil, what .. " step " .. t)
          end
        end
      end)
    end
  end

  it("computes the Bahdanau keys once per sequence in decode", function()
    local c
    for _, e in ipairs(F.cases) do if e.name == "gru_bahdanau" then c = e end end
    local step = build(c)
    local calls = 0
    step.attention.U_a.forward = function(self, x) calls = calls + 1; return nn.Linear.forward(self, x) end
    unroll(step, c, true)
    assert.are.equal(1, calls)
  end)

  it("picks the order from the attention and checks the cell's sizes", function()
    local bah = s2s.AttnDecoderStep(nn.GRUCell(3 + 6, 4), s2s.BahdanauAttention(6, 4, 5))
    assert.are.equal("bahdanau", bah.order)
    assert.is_false(bah.attentional)
    assert.is_nil(bah.W_c)
    local lu = s2s.AttnDecoderStep(nn.GRUCell(3, 4), s2s.LuongAttention(4))
    assert.are.equal("luong", lu.order)
    assert.is_true(lu.attentional)
    assert.are.same({4, 8}, lu.W_c.weight:shape())
    local ok, err = pcall(s2s.AttnDecoderStep, nn.GRUCell(3, 5), s2s.LuongAttention(4))
    assert.is_false(ok)
    assert.is_truthy(err:find("query size 4 differs from the cell's hidden_size 5", 1, true), err)
    local fed = s2s.AttnDecoderStep(nn.LSTMCell(3, 4), s2s.LuongAttention(4), {input_feeding = true})
    ok, err = pcall(fed, attn.randn(2, 3), nil, attn.randn(2, 5, 4))
    assert.is_false(ok)
    assert.is_truthy(err:find("the cell takes inputs of size 3 but gets 7 (y_prev 3 + feed 4)", 1, true), err)
  end)
end)

--------------------------------------------------------------------------

describe("seq2seq notebook formulas", function()
  local F = fx.load("seq2seq_notebook")

  it("draws the notebook's tensors as torch does under the same seed", function()
    attn.manual_seed(F.seed)
    local st = attn.randn(5, 1)
    local H = attn.randn(5, 10)
    local s_t1 = attn.randn_like(st)
    local W_a = nn.Linear(5, 1, false).weight
    local W_b = nn.Linear(5, 5, false).weight
    local W_c = nn.Linear(5, 5, false).weight
    fx.assert_equal(st, F.st, "st")
    fx.assert_equal(H, F.H, "H")
    fx.assert_equal(s_t1, F.s_t1, "s_t1")
    fx.assert_equal(W_a, F.W_a, "W_a")
    fx.assert_equal(W_b, F.W_b, "W_b")
    fx.assert_equal(W_c, F.W_c, "W_c")
  end)

  it("luong_dot: e = H^T s, alpha = softmax(e), context = H alpha, [s; c]", function()
    local H, s = leaf(F.H), leaf(F.st)
    local context, alpha, e, v = s2s.luong_dot(H, s)
    local L = F.luong
    fx.assert_close(e, L.e, FWD, 0, "e")
    fx.assert_close(alpha, L.alpha, FWD, 0, "alpha")
    fx.assert_close(context, L.context, FWD, 0, "context")
    fx.assert_close(v, L.v, FWD, 0, "[s; c]")
    assert.is_true(math.abs(alpha:sum():item() - 1) < 1e-6)
    ;((v * fx.tensor(F.g_v)):sum() + (alpha * fx.tensor(F.g_alpha)):sum()):backward()
    fx.assert_close(H.grad, L.H_grad, GRAD, 0, "H grad")
    fx.assert_close(s.grad, L.s_grad, GRAD, 0, "s grad")
  end)

  it("bahdanau_additive: W_a tanh(W_b s + W_c H), softmax, att H^T", function()
    local H, s = leaf(F.H), leaf(F.s_t1)
    local W_a, W_b, W_c = leaf(F.W_a), leaf(F.W_b), leaf(F.W_c)
    local context, att, scores = s2s.bahdanau_additive(H, s, W_a, W_b, W_c)
    local Bf = F.bahdanau
    fx.assert_close(scores, Bf.scores, FWD, 0, "scores")
    fx.assert_close(att, Bf.att, FWD, 0, "att")
    fx.assert_close(context, Bf.context, FWD, 0, "context")
    ;((context * fx.tensor(F.g_d)):sum() + (att * fx.tensor(F.g_att)):sum()):backward()
    fx.assert_close(H.grad, Bf.H_grad, GRAD, 0, "H grad")
    fx.assert_close(s.grad, Bf.s_grad, GRAD, 0, "s grad")
    fx.assert_close(W_a.grad, Bf.W_a_grad, GRAD, 0, "W_a grad")
    fx.assert_close(W_b.grad, Bf.W_b_grad, GRAD, 0, "W_b grad")
    fx.assert_close(W_c.grad, Bf.W_c_grad, GRAD, 0, "W_c grad")
  end)
end)
