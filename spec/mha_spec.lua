-- SPDX-License-Identifier: MIT
-- attn.nn.MultiheadAttention against torch.nn.MultiheadAttention (torch
-- 1.13): spec/fixtures/attention_mha.lua and attention_mha_masks.lua,
-- written by scripts/fixtures/gen_attention.py.  Each case builds the
-- module under torch's seed (parameters bit for bit), loads the state_dict
-- torch ran with (biases perturbed so they matter), and compares the
-- output, the attention weights (atol 1e-5) and the gradients of
-- sum(out^2) + sum(w^2) with respect to every input and parameter (1e-4).
local attn = require "attn"
local nn = require "attn.nn"
local fx = require "support.fixture"

local A = fx.load("attention_mha")
local B = fx.load("attention_mha_masks")
local FWD, GRAD = 1e-5, 1e-4

local function key_of(name) return (name:gsub("%.", "_")) end

-- The module of a case, as constructed under its seed: every weight
-- equals torch's bit for bit; then torch's run state is loaded.
local function build(case, what)
  local c = case.ctor
  attn.manual_seed(case.seed)
  local m = nn.MultiheadAttention(c.embed_dim, c.num_heads, {dropout = c.dropout, bias = c.bias,
    add_bias_kv = c.add_bias_kv, add_zero_attn = c.add_zero_attn, kdim = c.kdim, vdim = c.vdim,
    batch_first = c.batch_first})
  local perturbed = {}
  for _, n in ipairs(case.perturbed) do perturbed[n] = true end
  local n = 0
  for name, p in m:named_parameters() do
    n = n + 1
    local key = key_of(name)
    if not perturbed[name] then
      fx.assert_equal(p, case.state[key], what .. " init " .. name)
    elseif case.init[key] then
      fx.assert_equal(p, case.init[key], what .. " init " .. name) -- bias_k / bias_v: xavier_normal_
    else
      assert.are.equal(0, p:abs():max():item(), what .. " init " .. name .. " is zero")
    end
  end
  assert.are.equal(#case.keys, n, what .. ": number of parameters")
  assert.are.same(case.keys, nn.state_dict_keys(m:state_dict()), what .. ": state_dict keys in torch's order")
  assert.are.equal(case.repr, tostring(m), what .. ": module tree")
  local sd = {}
  for _, k in ipairs(case.keys) do sd[k] = fx.tensor(case.state[key_of(k)]) end
  m:load_state_dict(sd)
  return m
end

local function forward_opts(case)
  local o = {need_weights = case.need_weights, average_attn_weights = case.average_attn_weights,
             is_causal = case.is_causal or nil}
  if case.attn_mask then o.attn_mask, o.attn_mask_kind = fx.tensor(case.attn_mask), case.attn_mask_kind end
  if case.key_padding_mask then
    o.key_padding_mask, o.key_padding_mask_kind = fx.tensor(case.key_padding_mask), case.key_padding_mask_kind
  end
  return o
end

-- Rows of the weights (last dim) sum to 1.
local function assert_rows_sum_to_one(w, what)
  local s = fx.flat(w:sum(-1))
  for i, v in ipairs(s) do
    assert(math.abs(v - 1) < 1e-5, ("%s: row %d of the weights sums to %.9g"):format(what, i, v))
  end
end

local function check(case, what)
  local m = build(case, what)
  local xs = {}
  for i, f in ipairs(case.inputs) do xs[i] = fx.tensor(f):requires_grad_(true) end
  local q, k, v = xs[1], xs[2] or xs[1], xs[3] or xs[1]
  if case.dropout_seed then attn.manual_seed(case.dropout_seed) end
  local out, w = m(q, k, v, forward_opts(case))
  fx.assert_close(out, case.out, FWD, 0, what .. " output")
  local loss = (out * out):sum()
  if case.w then
    fx.assert_close(w, case.w, FWD, 0, what .. " weights")
    loss = loss + (w * w):sum()
    if not case.dropout_seed then assert_rows_sum_to_one(w, what) end
  else
    assert.is_nil(w)
  end
  loss:backward()
  for i, x in ipairs(xs) do fx.assert_close(x.grad, case.xgrad[i], GRAD, 0, what .. " input grad " .. i) end
  for name, p in m:named_parameters() do
    fx.assert_close(p.grad, case.grads[key_of(name)], GRAD, 0, what .. " grad " .. name)
  end
  return m, xs
end

describe("nn.MultiheadAttention against torch 1.13", function()
  local cases = {
    {A, "self_seqfirst", "self-attention, sequence first, one tensor for q/k/v"},
    {A, "cross_batchfirst", "batch_first cross-attention, per-head weights"},
    {A, "kvdim", "kdim/vdim different from embed_dim (q/k/v_proj_weight)"},
    {A, "nobias", "bias = false"},
    {A, "causal", "is_causal with the causal bool mask, weights (explicit path)"},
    {A, "causal_noweights", "is_causal without weights (the fused kernel's causal masking)"},
    {A, "dropout", "dropout 0.3 in training, the same mask as torch for the same seed"},
    {B, "bias_kv", "add_bias_kv, bool key_padding_mask, float attn_mask"},
    {B, "zero_attn", "add_zero_attn, bool 2-D attn_mask and bool key_padding_mask"},
    {B, "both", "add_bias_kv and add_zero_attn, batch_first, 3-D float attn_mask, per-head weights"},
    {B, "kpm_float", "a float key_padding_mask is added"},
    {B, "unbatched", "unbatched [L, E] with a 1-D key_padding_mask and a 3-D bool attn_mask"},
    {B, "unbatched_heads", "unbatched per-head weights [H, L, S]"},
    {B, "noweights", "need_weights = false with a bool key_padding_mask (fused kernel)"},
  }
  for _, c in ipairs(cases) do
    it(c[3], function() check(c[1][c[2]], c[2]) end)
  end

  it("gives the same output with and without the weights (fused and explicit paths)", function()
    for _, name in ipairs({"bias_kv", "zero_attn", "both", "unbatched"}) do
      local case = B[name]
      local m = build(case, name)
      local xs = {}
      for i, f in ipairs(case.inputs) do xs[i] = fx.tensor(f) end
      local o = forward_opts(case)
      local out = m(xs[1], xs[2], xs[3], o)
      o.need_weights = false
      local out2, w2 = m(xs[1], xs[2], xs[3], o)
      assert.is_nil(w2)
      fx.assert_close(out2, {shape = out:shape(), data = fx.flat(out)}, 1e-5, 0, name .. " fused vs explicit")
    end
  end)
end)

describe("nn.MultiheadAttention conventions", function()
  local E, H = 8, 2
  local function module(opts)
    attn.manual_seed(5)
    return nn.MultiheadAttention(E, H, opts)
  end

  it("takes torch's positional constructor arguments too", function()
    attn.manual_seed(3)
    local a = nn.MultiheadAttention(E, H, 0.0, true, true, false, 6, 4, true)
    attn.manual_seed(3)
    local b = nn.MultiheadAttention(E, H, {bias = true, add_bias_kv = true, kdim = 6, vdim = 4, batch_first = true})
    local sa, sb = a:state_dict(), b:state_dict()
    assert.are.same(nn.state_dict_keys(sa), nn.state_dict_keys(sb))
    assert.are.same({"q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias", "bias_k", "bias_v",
      "out_proj.weight", "out_proj.bias"}, nn.state_dict_keys(sa))
    for k, v in pairs(sa) do fx.assert_equal(sb[k], {shape = v:shape(), data = fx.flat(v)}, k) end
    assert.is_true(a.batch_first)
    assert.are.equal(4, a.head_dim)
    assert.is_nil(a.in_proj_weight)
  end)

  it("reads a bool mask as torch's MHA does: 1/true = NOT allowed (unlike SDPA)", function()
    local m = module()
    local x = attn.randn(3, 2, E) -- sequence first: [L=3, N=2, E]
    -- hide key 2 from every query
    local hide = attn.tensor({{0.0, 1.0, 0.0}, {0.0, 1.0, 0.0}, {0.0, 1.0, 0.0}})
    local _, w = m(x, x, x, {attn_mask = hide, attn_mask_kind = "bool"})
    local wt = w:totable()
    for b = 1, 2 do
      for i = 1, 3 do assert.are.equal(0, wt[b][i][2]) end
    end
    assert_rows_sum_to_one(w, "bool mask")
    -- a Lua table of booleans is a bool mask, the same one
    local _, w2 = m(x, x, x, {attn_mask = {{false, true, false}, {false, true, false}, {false, true, false}}})
    fx.assert_equal(w2, {shape = w:shape(), data = fx.flat(w)}, "boolean table")
    -- the same positions as an additive -inf mask
    local add = attn.zeros(3, 3):masked_fill(hide, -math.huge)
    local _, w3 = m(x, x, x, {attn_mask = add, attn_mask_kind = "additive"})
    fx.assert_close(w3, {shape = w:shape(), data = fx.flat(w)}, 1e-6, 0, "additive")
    -- key_padding_mask: 1 = padding, ignored
    local _, w4 = m(x, x, x, {key_padding_mask = attn.tensor({{0.0, 0.0, 1.0}, {0.0, 0.0, 0.0}}), key_padding_mask_kind = "bool"})
    local t4 = w4:totable()
    for i = 1, 3 do
      assert.are.equal(0, t4[1][i][3])
      assert.is_true(t4[2][i][3] > 0)
    end
  end)

  it("reads masks by dtype like torch (float: added, bool: true = masked), and refuses is_causal without a mask", function()
    local m = module()
    m:eval()
    local x = attn.randn(3, 2, E)
    local plain = m(x, x, x)
    -- a float mask without a kind is added to the scores (zeros change nothing)
    local function close(a, b) return (a - b):abs():max():item() < 1e-6 end
    assert.is_true(close(plain, m(x, x, x, {attn_mask = attn.zeros(3, 3)})))
    assert.is_true(close(plain, m(x, x, x, {key_padding_mask = attn.zeros(2, 3)})))
    -- a bool mask needs no kind: true hides the key, as a float -inf does
    local kpm = attn.tensor({{false, false, true}, {false, true, false}})
    local inf = attn.zeros(2, 3):masked_fill(kpm, -math.huge)
    assert.is_true(close(m(x, x, x, {key_padding_mask = kpm}), m(x, x, x, {key_padding_mask = inf})))
    assert.has_error(function() m(x, x, x, {attn_mask = attn.zeros(3, 3, {dtype = "int64"})}) end,
      "MultiheadAttention: attn_mask must be a bool or float tensor (got attn.int64); use attn_mask:bool() for a mask")
    assert.has_error(function() m(x, x, x, {key_padding_mask = kpm, key_padding_mask_kind = "additive"}) end)
    local ok, err = pcall(m, x, x, x, {is_causal = true})
    assert.is_false(ok)
    assert.matches("is_causal needs attn_mask", err)
    assert.has_error(function() m(x, x, x, {attn_mask = attn.zeros(3, 3), attn_mask_kind = "keep"}) end)
    assert.has_error(function() m(x, x, x, {need_weight = false}) end)
  end)

  it("checks shapes with torch's messages", function()
    local m = module()
    local x = attn.randn(3, 2, E)
    local ok, err = pcall(m, x, x, x, {attn_mask = attn.zeros(3, 4), attn_mask_kind = "bool"})
    assert.is_false(ok)
    assert.matches("the shape of the 2%-D attn_mask is %[3, 4%], but should be %[3, 3%]", err)
    ok, err = pcall(m, x, x, x, {attn_mask = attn.zeros(2, 3, 3), attn_mask_kind = "bool"})
    assert.matches("the shape of the 3%-D attn_mask is %[2, 3, 3%], but should be %[4, 3, 3%]", err)
    ok, err = pcall(m, x, x, x, {key_padding_mask = attn.zeros(2, 4), key_padding_mask_kind = "bool"})
    assert.matches("expecting key_padding_mask shape of %[2, 3%], but got %[2, 4%]", err)
    ok, err = pcall(m, attn.randn(3, 2, 6), nil, nil)
    assert.matches("was expecting embedding dimension of 8, but got 6", err)
    ok, err = pcall(m, x, attn.randn(3, E), attn.randn(3, E))
    assert.matches("expected key and value to be 3%-D", err)
    ok, err = pcall(nn.MultiheadAttention, 6, 4)
    assert.matches("embed_dim must be divisible by num_heads", err)
  end)

  it("defaults key to query and value to key (self-attention)", function()
    local m = module()
    local x = attn.randn(4, 2, E)
    local a, wa = m(x)
    local b, wb = m(x, x, x)
    fx.assert_equal(a, {shape = b:shape(), data = fx.flat(b)})
    fx.assert_equal(wa, {shape = wb:shape(), data = fx.flat(wb)})
  end)

  it("is deterministic in eval mode with dropout, and drops in training", function()
    local m = module({dropout = 0.5})
    local x = attn.randn(4, 2, E)
    m:eval()
    local a = m(x)
    local b = m(x)
    fx.assert_equal(a, {shape = b:shape(), data = fx.flat(b)})
    m:train()
    local _, w = m(x)
    -- per-head weights after dropout: some are zeroed
    local _, wh = m(x, x, x, {average_attn_weights = false})
    local zeros = 0
    for _, v in ipairs(fx.flat(wh)) do if v == 0 then zeros = zeros + 1 end end
    assert.is_true(zeros > 0)
    assert.are.same({2, 4, 4}, w:shape())
  end)

  it("gives a zero output row for a query with every key masked (torch 1.13: NaN)", function()
    local m = module()
    local x = attn.randn(3, 1, E)
    local out, w = m(x, x, x, {key_padding_mask = {{true, true, true}}})
    for _, v in ipairs(fx.flat(w)) do assert.are.equal(0, v) end
    -- the output is out_proj of a zero vector: its bias
    local b = fx.flat(m.out_proj.bias)
    local o = fx.flat(out)
    for i = 1, #o do assert.is_true(math.abs(o[i] - b[(i - 1) % E + 1]) < 1e-6) end
  end)

  it("is reachable as attn.nn.MultiheadAttention and from attention.lua", function()
    assert.are.equal(require("attn.attention").MultiheadAttention, nn.MultiheadAttention)
    assert.are.equal(attn.nn.MultiheadAttention, nn.MultiheadAttention)
    assert.is_true(nn.isinstance(module(), nn.MultiheadAttention))
    assert.is_nil(nn.NoSuchModule)
  end)
end)
