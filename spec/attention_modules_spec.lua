-- SPDX-License-Identifier: MIT
-- The attention modules and building blocks of lua/attn/attention.lua
-- (reached as attn.nn.<Name>) against torch 1.13: Raschka's self-attention
-- article and its notebook (spec/fixtures/attention_article.lua),
-- grouped/multi-query attention against torch's repeat_interleave of the
-- KV heads (attention_gqa.lua), positional encodings against their
-- formulas written in torch (attention_pos.lua); all written by
-- scripts/fixtures/gen_attention.py.  Parameters built under torch's seed
-- compare bit for bit, outputs at atol 1e-5, gradients at 1e-4.  The KV
-- cache is checked against the full causal pass.
local attn = require "attn"
local nn = require "attn.nn"
local F = require "attn.functional"
local fx = require "support.fixture"

local ART = fx.load("attention_article")
local POS = fx.load("attention_pos")
local GQA = fx.load("attention_gqa")
local FWD, GRAD = 1e-5, 1e-4

local function key_of(name) return (name:gsub("%.", "_")) end

local function as_fixture(t) return {shape = t:shape(), data = fx.flat(t)} end

-- Parameters of m equal the fixture's bit for bit, and m has no others.
local assert_params = fx.assert_params

-- y = m(inputs...), compared with case.y; sum(y * y) backpropagated and
-- the input and parameter gradients compared.
local function check_run(m, case, inputs, what, opts)
  local xs = {}
  for i, t in ipairs(inputs) do xs[i] = t:detach():requires_grad_(true) end
  local args = {table.unpack(xs)}
  if opts then args[#args + 1] = opts end
  local y = m(table.unpack(args))
  fx.assert_close(y, case.y, FWD, 0, what .. " output")
  ;(y * y):sum():backward()
  for i, x in ipairs(xs) do fx.assert_close(x.grad, case.xgrad[i], GRAD, 0, what .. " input grad " .. i) end
  for name, p in m:named_parameters() do
    fx.assert_close(p.grad, case.grads[key_of(name)], GRAD, 0, what .. " grad " .. name)
  end
  m:zero_grad()
  return y
end

local function assert_rows_sum_to_one(w, what)
  for i, v in ipairs(fx.flat(w:sum(-1))) do
    assert(math.abs(v - 1) < 1e-5, ("%s: row %d of the weights sums to %.9g"):format(what, i, v))
  end
end

local function assert_near_list(got, expected, tol, what)
  assert.are.equal(#expected, #got, what .. ": length")
  for i = 1, #expected do
    assert(math.abs(got[i] - expected[i]) <= tol, ("%s: element %d is %.9g, expected %.9g"):format(what, i,
      got[i], expected[i]))
  end
end

--------------------------------------------------------------------------

describe("the self-attention notebook (torch.manual_seed(123))", function()
  local nb = ART.notebook

  it("reproduces the notebook cell by cell from one seed", function()
    attn.manual_seed(123)
    local embed = nn.Embedding(50000, 3)
    local ids = attn.tensor(nb.sentence_int)
    assert.are.same({1, 5, 6, 3, 2, 4}, nb.sentence_int) -- Life is short eat dessert first, sorted ids
    local embedded = embed(ids):detach()
    fx.assert_equal(embedded, nb.embedded_sentence, "embedded_sentence")
    -- the numbers the notebook prints
    assert_near_list(fx.flat(embedded), {0.3374, -0.1778, -0.3035, 0.1794, 1.8951, 0.4954, 0.2692, -0.0770,
      -1.0205, -0.2196, -0.3792, 0.7671, -0.5880, 0.3486, 0.6603, -1.1925, 0.6984, -1.4097}, 6e-5,
      "printed embedded_sentence")
    local w_query = nn.Parameter(attn.randn(3, 2))
    local w_key = nn.Parameter(attn.randn(3, 2))
    local w_value = nn.Parameter(attn.randn(3, 4))
    fx.assert_equal(w_query, nb.w_query, "w_query")
    fx.assert_equal(w_key, nb.w_key, "w_key")
    fx.assert_equal(w_value, nb.w_value, "w_value")
    local keys = embedded:matmul(w_key)
    local values = embedded:matmul(w_value)
    fx.assert_close(keys, nb.keys, FWD, 0, "keys")
    fx.assert_close(values, nb.values, FWD, 0, "values")
    local query_1 = embedded:select(1, 2):unsqueeze(1):matmul(w_query)
    local omega_1 = query_1:matmul(keys:t())
    fx.assert_close(omega_1, nb.omega_1, FWD, 0, "omega_1")
    assert_near_list(fx.flat(omega_1), {-0.6150, 2.4277, -0.9584, 0.2260, 1.2082, 0.5242}, 6e-5, "printed omega_1")
    local attention_weights = (omega_1 / 2 ^ 0.5):softmax(-1)
    fx.assert_close(attention_weights, nb.attention_weights, FWD, 0, "attention_weights")
    fx.assert_close(attention_weights:matmul(values), nb.context_vector_1, FWD, 0, "context_vector_1")
    -- the SelfAttention class, next in the same stream
    local sa = nn.SelfAttention(3, 2, 4)
    assert_params(sa, nb.sa_params, "SelfAttention(3, 2, 4)")
    check_run(sa, nb, {embedded}, "SelfAttention")
    -- row 2 of the class's output is the context vector computed by hand
    -- when the class's weights are used
    local q2 = embedded:select(1, 2):unsqueeze(1):matmul(sa.w_query)
    local w2 = (q2:matmul(embedded:matmul(sa.w_key):t()) / math.sqrt(2)):softmax(-1)
    local y = sa(embedded)
    fx.assert_close(w2:matmul(embedded:matmul(sa.w_value)), as_fixture(y:narrow(1, 2, 1)), 1e-6, 0, "row 2")
  end)

  it("names and shapes the parameters like the notebook's class", function()
    attn.manual_seed(1)
    local sa = nn.SelfAttention(3, 2, 4)
    assert.are.same({"w_query", "w_key", "w_value"}, nn.state_dict_keys(sa:state_dict()))
    assert.are.same({3, 2}, sa.w_key:shape())
    assert.are.same({3, 4}, sa.w_value:shape())
    assert.are.equal("SelfAttention(d_in=3, d_out_kq=2, d_out_v=4)", tostring(sa))
  end)
end)

describe("the article's attention modules", function()
  local x = fx.tensor(ART.notebook.embedded_sentence)

  it("SelfAttention with the article's torch.rand parameters", function()
    attn.manual_seed(123)
    local sa = nn.SelfAttention(3, 2, 4, {init = "rand"})
    assert_params(sa, ART.sa_rand.params, "SelfAttention rand")
    check_run(sa, ART.sa_rand, {x}, "SelfAttention rand")
    local _, w = sa(x, {need_weights = true})
    assert.are.same({6, 6}, w:shape())
    assert_rows_sum_to_one(w, "SelfAttention")
  end)

  it("SelfAttention on a batch [B, L, d_in]", function()
    attn.manual_seed(7)
    local sa = nn.SelfAttention(5, 3, 2)
    assert_params(sa, ART.sa_batched.params, "SelfAttention(5, 3, 2)")
    check_run(sa, ART.sa_batched, {fx.tensor(ART.sa_batched.x)}, "batched SelfAttention")
  end)

  it("MultiHeadAttentionWrapper: heads drawn in order, outputs concatenated", function()
    attn.manual_seed(123)
    local m = nn.MultiHeadAttentionWrapper(3, 2, 1, 4, {init = "rand"})
    assert_params(m, ART.mhw_rand.params, "wrapper rand")
    assert.are.equal(4, #m.heads)
    local y = check_run(m, ART.mhw_rand, {x}, "wrapper rand")
    assert.are.same({6, 4}, y:shape())
    attn.manual_seed(123)
    m = nn.MultiHeadAttentionWrapper(3, 2, 3, 2)
    assert_params(m, ART.mhw_randn.params, "wrapper randn")
    check_run(m, ART.mhw_randn, {x}, "wrapper randn")
    assert.are.same({"heads.0.w_query", "heads.0.w_key", "heads.0.w_value", "heads.1.w_query", "heads.1.w_key",
      "heads.1.w_value"}, nn.state_dict_keys(m:state_dict()))
  end)

  it("CausalSelfAttention: -inf before softmax, renormalising after it, and fused agree with torch", function()
    local c = ART.causal
    attn.manual_seed(123)
    local m = nn.CausalSelfAttention(3, 2, 4, 6)
    assert_params(m, c.params, "CausalSelfAttention")
    fx.assert_equal(m.mask, c.mask, "mask buffer")
    assert.are.same({"w_query", "w_key", "w_value", "mask"}, nn.state_dict_keys(m:state_dict()))
    check_run(m, c.neg_inf, {x}, "neg_inf")
    check_run(m, c.renormalise, {x}, "renormalise (option to forward)", {variant = "renormalise"})
    check_run(m, c.neg_inf, {x}, "fused", {variant = "fused"})
    -- the torch outputs of the two variants agree too
    fx.assert_close(fx.tensor(c.renormalise.y), c.neg_inf.y, 1e-6, 0, "torch's variants")
    -- L < context_length, batched
    check_run(m, c.batched, {fx.tensor(c.xb)}, "batched neg_inf")
    check_run(m, c.batched, {fx.tensor(c.xb)}, "batched renormalise", {variant = "renormalise"})
    check_run(m, c.batched, {fx.tensor(c.xb)}, "batched fused", {variant = "fused"})
    local _, w = m(x, {need_weights = true})
    local wt = w:totable()
    for i = 1, 6 do
      for j = i + 1, 6 do assert.are.equal(0, wt[i][j]) end
    end
    assert_rows_sum_to_one(w, "causal")
    local m2 = nn.CausalSelfAttention(3, 2, 4, 6, {variant = "renormalise"})
    assert.are.equal("renormalise", m2.variant)
    assert.has_error(function() m(attn.randn(7, 3)) end,
      "CausalSelfAttention: sequence length 7 exceeds context_length 6")
    assert.has_error(function() nn.CausalSelfAttention(3, 2, 4, 6, {variant = "nope"}) end)
  end)

  it("CrossAttention: queries from x_1, keys and values from x_2", function()
    local c = ART.cross
    attn.manual_seed(123)
    local m = nn.CrossAttention(3, 2, 4, {init = "rand"})
    assert_params(m, c.params, "CrossAttention")
    local second = attn.rand(8, 3) -- drawn after the module, as in the article
    fx.assert_equal(second, c.second_input, "second_input")
    local y = check_run(m, c, {x, second}, "CrossAttention")
    assert.are.same({6, 4}, y:shape())
    local _, w = m(x, second, {need_weights = true})
    assert.are.same({6, 8}, w:shape())
    assert_rows_sum_to_one(w, "CrossAttention")
    local m2 = nn.CrossAttention(3, 2, 4, {d_in_kv = 5})
    assert.are.same({6, 4}, m2(x, attn.randn(9, 5)):shape())
  end)
end)

--------------------------------------------------------------------------

describe("split_heads / combine_heads", function()
  it("splits the last dim into heads and back", function()
    local x = attn.randn(2, 5, 12)
    local h = F.split_heads(x, 3)
    assert.are.same({2, 3, 5, 4}, h:shape())
    -- head j of position l holds features (j-1)*4+1 .. j*4
    fx.assert_equal(h:select(2, 2):select(2, 4), as_fixture(x:select(2, 4):narrow(-1, 5, 4)), "head 2 of position 4")
    fx.assert_equal(F.combine_heads(h), as_fixture(x), "round trip")
    assert.are.same({3, 5, 4}, F.split_heads(attn.randn(5, 12), 3):shape())
    assert.are.equal(attn.scaled_dot_product_attention, F.scaled_dot_product_attention)
    assert.has_error(function() F.split_heads(x, 5) end,
      "split_heads: the last dim of [2, 5, 12] is not a multiple of H = 5")
  end)
end)

--------------------------------------------------------------------------

describe("grouped-query attention", function()
  local function build(c)
    attn.manual_seed(c.seed)
    local m = nn.GroupedQueryAttention(c.d_model, c.n_heads, c.n_kv_heads, {bias = c.bias, causal = c.causal,
      rope = c.rope ~= false, rope_base = c.rope ~= false and c.rope or nil})
    assert_params(m, c.params, c.seed .. "")
    return m
  end

  for _, name in ipairs({"gqa", "gqa_causal", "mqa", "gqa_rope", "mha_equiv"}) do
    it(("matches torch's repeat_interleave of the KV heads (%s)"):format(name), function()
      local c = GQA[name]
      local m = build(c)
      check_run(m, c, {fx.tensor(c.x)}, name)
    end)
  end

  it("MultiQueryAttention is one KV head", function()
    local c = GQA.mqa
    attn.manual_seed(c.seed)
    local m = nn.MultiQueryAttention(c.d_model, c.n_heads, {bias = false, causal = true})
    assert_params(m, c.params, "MQA")
    check_run(m, c, {fx.tensor(c.x)}, "MQA")
    assert.are.equal(1, m.n_kv_heads)
  end)

  it("returns weights whose rows sum to 1, zero above the diagonal when causal", function()
    local m = build(GQA.gqa_causal)
    local _, w = m(fx.tensor(GQA.gqa_causal.x), {need_weights = true})
    assert.are.same({2, 4, 5, 5}, w:shape())
    assert_rows_sum_to_one(w, "GQA")
    local wt = w:totable()
    for i = 1, 5 do
      for j = i + 1, 5 do assert.are.equal(0, wt[2][3][i][j]) end
    end
  end)

  it("combines an SDPA-convention mask with causal masking", function()
    local m = build(GQA.gqa_causal)
    local x = fx.tensor(GQA.gqa_causal.x)
    -- a keep-mask of ones changes nothing
    local y1 = m(x)
    local y2 = m(x, {attn_mask = attn.ones(5, 5), attn_mask_kind = "bool"})
    fx.assert_close(y2, as_fixture(y1), 1e-6, 0, "all-ones keep mask")
    -- hiding key 1 from everyone except query 1 (which then sees only it)
    local keep = attn.ones(5, 5)
    attn.no_grad(function() keep:narrow(2, 1, 1):fill_(0) end)
    local _, w = m(x, {attn_mask = keep, attn_mask_kind = "bool", need_weights = true})
    local wt = w:totable()
    for i = 1, 5 do assert.are.equal(0, wt[1][1][i][1]) end
    for j = 1, 5 do assert.are.equal(0, wt[1][1][1][j]) end -- query 1 sees nothing: zero row
    local add = attn.zeros(5, 5):masked_fill(keep:eq(0), -math.huge)
    local _, w2 = m(x, {attn_mask = add, attn_mask_kind = "additive", need_weights = true})
    fx.assert_close(w2, as_fixture(w), 1e-6, 0, "additive")
  end)

  it("takes unbatched input [L, d_model]", function()
    local c = GQA.gqa
    local m = build(c)
    local x = fx.tensor(c.x)
    local y = m(x:select(1, 2))
    fx.assert_close(y, as_fixture(m(x):select(1, 2)), 1e-6, 0, "unbatched")
  end)
end)

describe("the KV cache", function()
  local function stepwise(m, x, chunks)
    local cache = nn.KVCache()
    local outs, pos = {}, 1
    for _, n in ipairs(chunks) do
      outs[#outs + 1] = m(x:narrow(2, pos, n), {cache = cache})
      pos = pos + n
    end
    assert.are.equal(pos - 1, cache:length())
    return attn.cat(outs, 2), cache
  end

  for _, name in ipairs({"gqa_causal", "gqa_rope", "mqa"}) do
    it(("gives the full causal pass step by step (%s)"):format(name), function()
      local c = GQA[name]
      attn.manual_seed(c.seed)
      local m = nn.GroupedQueryAttention(c.d_model, c.n_heads, c.n_kv_heads, {bias = c.bias, causal = true,
        rope = c.rope ~= false})
      local x = attn.randn(2, 9, c.d_model)
      local full = m(x)
      local guard <close> = attn.no_grad()
      local one = stepwise(m, x, {1, 1, 1, 1, 1, 1, 1, 1, 1})
      fx.assert_close(one, as_fixture(full), 1e-5, 0, name .. " one step at a time")
      -- chunks of several queries use the bottom-right causal alignment
      local chunked, cache = stepwise(m, x, {3, 1, 4, 1})
      fx.assert_close(chunked, as_fixture(full), 1e-5, 0, name .. " in chunks")
      assert.are.same({2, c.n_kv_heads, 9, c.d_model // c.n_heads}, cache.k:shape())
    end)
  end

  it("passes gradients into every cached step when they are needed", function()
    local c = GQA.gqa_rope
    attn.manual_seed(c.seed)
    local m = nn.GroupedQueryAttention(c.d_model, c.n_heads, c.n_kv_heads, {causal = true, rope = true})
    local x = attn.randn(1, 4, c.d_model)
    local xa = x:detach():requires_grad_(true)
    ;(m(xa) ^ 2):sum():backward()
    local ga = xa.grad
    local wa = m.k_proj.weight.grad
    m:zero_grad()
    local xb = x:detach():requires_grad_(true)
    local cache = nn.KVCache()
    local loss
    for i = 1, 4 do
      local y = m(xb:narrow(2, i, 1), {cache = cache})
      loss = loss and loss + (y ^ 2):sum() or (y ^ 2):sum()
    end
    loss:backward()
    fx.assert_close(xb.grad, as_fixture(ga), 1e-4, 0, "input grad through the cache")
    fx.assert_close(m.k_proj.weight.grad, as_fixture(wa), 1e-4, 0, "k_proj grad through the cache")
  end)

  it("grows in place without gradients and checks what it is given", function()
    local cache = nn.KVCache()
    local guard <close> = attn.no_grad()
    local ks, vs = {}, {}
    for i = 1, 40 do
      ks[i], vs[i] = attn.randn(1, 2, 1, 3), attn.randn(1, 2, 1, 5)
      cache:update(ks[i], vs[i])
    end
    fx.assert_equal(cache.k, as_fixture(attn.cat(ks, 3)), "keys")
    fx.assert_equal(cache.v, as_fixture(attn.cat(vs, 3)), "values")
    assert.are.equal(40, cache:length())
    assert.has_error(function() cache:update(attn.randn(1, 3, 1, 3), attn.randn(1, 3, 1, 5)) end)
    cache:reset()
    assert.are.equal(0, cache:length())
    assert.is_nil(cache.k)
  end)
end)

--------------------------------------------------------------------------

describe("positional encodings", function()
  it("sinusoidal: the Annotated Transformer's pe buffer, added then dropped out", function()
    local c = POS.sinusoidal
    local m = nn.PositionalEncoding(c.d_model, 0.0, c.max_len)
    fx.assert_close(m.pe, c.pe, 1e-6, 0, "pe")
    assert.are.same({"pe"}, nn.state_dict_keys(m:state_dict()))
    local x = fx.tensor(c.x)
    fx.assert_close(m(x), c.y, FWD, 0, "x + pe")
    -- unbatched, and with an offset: rows offset .. offset + L - 1
    fx.assert_close(m(x:select(1, 1)), as_fixture(fx.tensor(c.y):select(1, 1)), FWD, 0, "unbatched")
    local tail = m(x:narrow(2, 4, 4), 3)
    fx.assert_close(tail, as_fixture(fx.tensor(c.y):narrow(2, 4, 4)), FWD, 0, "offset 3")
    assert.has_error(function() m(attn.randn(1, 41, 6)) end, "PositionalEncoding: positions 0..40 exceed max_len 40")
    local d = POS.sinusoidal_default
    local full = nn.PositionalEncoding(d.d_model, 0.1)
    assert.are.same({1, 5000, 16}, full.pe:shape())
    for i, r in ipairs(d.rows) do
      local got = full.pe:select(1, 1):select(1, r + 1)
      local e = fx.tensor(d.pe_rows):select(1, i)
      fx.assert_close(got, as_fixture(e), 1e-6, 0, "pe row " .. r)
    end
    local dd = POS.sinusoidal_dropout
    local md = nn.PositionalEncoding(6, dd.p, 40)
    attn.manual_seed(dd.seed)
    fx.assert_close(md(x), dd.y, FWD, 0, "with dropout")
    md:eval()
    fx.assert_close(md(x), c.y, FWD, 0, "eval mode: no dropout")
  end)

  it("learned: an Embedding of positions", function()
    local c = POS.learned
    attn.manual_seed(c.seed)
    local m = nn.LearnedPositionalEncoding(c.max_len, 6)
    fx.assert_equal(m.embedding.weight, c.weight, "weight")
    assert.are.same({"embedding.weight"}, nn.state_dict_keys(m:state_dict()))
    local x = fx.tensor(POS.sinusoidal.x):detach():requires_grad_(true)
    local y = m(x)
    fx.assert_close(y, c.y, FWD, 0, "x + E[pos]")
    ;(y * y):sum():backward()
    fx.assert_close(x.grad, c.xgrad, GRAD, 0, "input grad")
    fx.assert_close(m.embedding.weight.grad, c.wgrad, GRAD, 0, "weight grad")
    fx.assert_close(m(fx.tensor(POS.sinusoidal.x):narrow(2, 1, 3), 4), c.y_offset4, FWD, 0, "positions 4..6")
    assert.has_error(function() m(attn.randn(1, 11, 6)) end)
  end)

  it("RoPE: rotate_half convention, cos/sin tables, rotated q and k and their gradients", function()
    local c = POS.rope
    local q = fx.tensor(c.q):requires_grad_(true)
    local k = fx.tensor(c.k):requires_grad_(true)
    local cos, sin = nn.rope_cos_sin(8, attn.arange(0, 5))
    fx.assert_close(cos, c.cos, 1e-6, 0, "cos")
    fx.assert_close(sin, c.sin, 1e-6, 0, "sin")
    local qr, kr = nn.apply_rotary(q, k) -- positions 0 .. L-1
    fx.assert_close(qr, c.qr, FWD, 0, "q rotated")
    fx.assert_close(kr, c.kr, FWD, 0, "k rotated")
    ;((qr * fx.tensor(c.gq)):sum() + (kr * fx.tensor(c.gk)):sum()):backward()
    fx.assert_close(q.grad, c.qgrad, GRAD, 0, "q grad")
    fx.assert_close(k.grad, c.kgrad, GRAD, 0, "k grad")
    -- rotation keeps every pair's norm, and position 0 is not rotated
    fx.assert_close(qr:detach():norm(2, -1), as_fixture(q:detach():norm(2, -1)), 1e-5, 0, "norms")
    fx.assert_close(qr:narrow(3, 1, 1), as_fixture(q:detach():narrow(3, 1, 1)), 0, 0, "position 0")
    -- rotate_half: [-x2, x1]
    assert.are.same({-3, -4, 1, 2}, nn.rotate_half(attn.tensor({1, 2, 3, 4})):totable())
    -- explicit positions and another base; a module with the same base
    local p = POS.rope_pos
    local qp, kp = nn.apply_rotary(fx.tensor(c.q), fx.tensor(c.k), p.positions, p.base)
    fx.assert_close(qp, p.qr, FWD, 0, "q at positions")
    fx.assert_close(kp, p.kr, FWD, 0, "k at positions")
    local rot = nn.RotaryEmbedding(8, {base = p.base})
    assert.are.same({}, nn.state_dict_keys(rot:state_dict())) -- inv_freq is not persistent
    local qm = rot(fx.tensor(c.q), nil, attn.tensor(p.positions))
    fx.assert_close(qm, p.qr, FWD, 0, "RotaryEmbedding")
    -- an offset n means positions n .. n+L-1
    local qo = nn.apply_rotary(fx.tensor(c.q):narrow(3, 3, 3), nil, 2)
    fx.assert_close(qo, as_fixture(fx.tensor(c.qr):narrow(3, 3, 3)), FWD, 0, "offset 2")
    -- relative: q_m . k_n depends on m - n only
    local a, b = attn.randn(8), attn.randn(8)
    local function dot(m_, n_)
      local qa = nn.apply_rotary(a:reshape(1, 8), nil, {m_})
      local kb = nn.apply_rotary(b:reshape(1, 8), nil, {n_})
      return (qa * kb):sum():item()
    end
    assert.is_true(math.abs(dot(7, 3) - dot(14, 10)) < 1e-4)
  end)

  it("ALiBi: the paper's slopes, also for head counts that are not powers of two", function()
    for _, c in pairs(POS.alibi) do
      local got = nn.alibi_slopes(c.n)
      assert.are.equal(c.n, #got)
      for i, e in ipairs(c.slopes) do
        -- e has 9 significant digits
        assert(math.abs(got[i] - e) <= 5e-9 * e, ("alibi_slopes(%d)[%d] = %.12g, expected %.9g"):format(c.n, i,
          got[i], e))
      end
    end
    assert.are.same({0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625}, nn.alibi_slopes(8))
    local b = POS.alibi_bias
    fx.assert_close(nn.alibi_bias(b.n, b.L, b.S), b.bias, 0, 0, "bias [H, L, S] with L < S")
    fx.assert_close(nn.ALiBi(4)(4), b.square, 0, 0, "ALiBi module, square")
    -- symmetric: -slope |j - i|
    local s = nn.alibi_bias(2, 3, {symmetric = true}):totable()
    assert.are.same({-0.0625, 0, -0.0625}, s[1][2]) -- slopes(2) = {1/16, 1/256}
    -- with SDPA: an additive bias and causal masking bottom-right aligned
    local q, k, v = attn.randn(1, 4, 2, 8), attn.randn(1, 4, 5, 8), attn.randn(1, 4, 5, 8)
    local bias = nn.ALiBi(4)(2, 5)
    local keep = attn.causal_mask(2, 5, {bottom_right = true})
    local m = bias:masked_fill(keep:eq(0), -math.huge)
    local y, w = attn.scaled_dot_product_attention(q, k, v, {attn_mask = m, attn_mask_kind = "additive",
      need_weights = true})
    assert_rows_sum_to_one(w, "ALiBi")
    local explicit = ((q:matmul(k:transpose(-2, -1)) / math.sqrt(8) + m):softmax(-1)):matmul(v)
    fx.assert_close(y, as_fixture(explicit), 1e-5, 0, "ALiBi SDPA")
  end)
end)

describe("attn.nn finds the attention modules", function()
  it("loads attention.lua lazily and caches the names", function()
    local A = require "attn.attention"
    for _, name in ipairs({"SelfAttention", "MultiHeadAttentionWrapper", "CausalSelfAttention", "CrossAttention",
      "MultiheadAttention", "GroupedQueryAttention", "MultiQueryAttention", "PositionalEncoding",
      "LearnedPositionalEncoding", "RotaryEmbedding", "ALiBi", "KVCache", "apply_rotary"}) do
      assert.are.equal(A[name], nn[name], name)
      assert.are.equal(A[name], rawget(nn, name), name .. " cached")
    end
    assert.is_nil(nn.DefinitelyNotAModule)
    assert.is_nil(nn[1])
  end)
end)
