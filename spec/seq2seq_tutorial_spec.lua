-- SPDX-License-Identifier: MIT
-- nn.BahdanauAttention in the PyTorch seq2seq tutorial's form ({tutorial =
-- true}: Wa, Ua, Va with biases) against the tutorial's module under torch
-- 1.13 (fixture from scripts/fixtures/gen_s2s_tutorial.py): its state_dict
-- loads as is; context, weights and every gradient match.
local attn = require "attn"
local fx = require "support.fixture"
local nn = attn.nn

local fix = fx.load("seq2seq_tutorial_bahdanau")

describe("BahdanauAttention, the seq2seq tutorial's form", function()
  it("loads the tutorial's state_dict and matches its outputs and gradients", function()
    local m = nn.BahdanauAttention(fix.hidden, {tutorial = true})
    assert.are.same({"Wa.weight", "Wa.bias", "Ua.weight", "Ua.bias", "Va.weight", "Va.bias"},
      nn.state_dict_keys(m:state_dict()))
    local sd = {}
    for _, p in ipairs(fix.state) do sd[p[1]] = fx.tensor(p[2]) end
    m:load_state_dict(sd)
    local query = fx.tensor(fix.query):requires_grad_(true)
    local keys = fx.tensor(fix.keys):requires_grad_(true)
    local ctx, w = m(query, keys) -- the tutorial's call: query [B, 1, H], keys [B, S, H]
    fx.assert_close(ctx, fix.context, 1e-5, 1e-5, "context")
    fx.assert_close(w, fix.weights, 1e-5, 1e-5, "weights")
    ;((ctx * fx.tensor(fix.gc)):sum() + (w * fx.tensor(fix.gw)):sum()):backward()
    fx.assert_close(query.grad, fix.grad_query, 1e-4, 1e-4, "query grad")
    fx.assert_close(keys.grad, fix.grad_keys, 1e-4, 1e-4, "keys grad")
    local params = {}
    for name, p in m:named_parameters() do params[name] = p end
    for _, g in ipairs(fix.grads) do fx.assert_close(params[g[1]].grad, g[2], 1e-4, 1e-4, g[1] .. " grad") end
  end)

  it("works in attn's own call form and in AttnDecoderStep", function()
    attn.manual_seed(4)
    local m = nn.BahdanauAttention(5, 4, 3, {tutorial = true})
    local enc, s = attn.randn(2, 6, 5), attn.randn(2, 4)
    local c2, w2 = m(s, enc, {keys = m:precompute(enc)})
    local c3, w3 = m(s:unsqueeze(2), enc)
    assert.are.same({2, 5}, c2:shape())
    assert.are.same({2, 1, 5}, c3:shape())
    assert.is_true((c3:squeeze(2) - c2):abs():max():item() < 1e-6)
    assert.is_true((w3:squeeze(2) - w2):abs():max():item() < 1e-6)
    local step = nn.AttnDecoderStep(nn.GRUCell(3 + 5, 4), m)
    local out = step(attn.randn(2, 3), {h = attn.randn(2, 4)}, enc)
    assert.are.equal(2, out:shape()[1])
    assert.is_true(attn.gradcheck(function(q, e) return m(q, e) end,
      {attn.randn(2, 1, 4):requires_grad_(true), attn.randn(2, 3, 5):requires_grad_(true)}))
  end)

  it("refuses a bad option or query", function()
    assert.has_error(function() nn.BahdanauAttention(4, {tutorial = 1}) end)
    assert.has_error(function() nn.BahdanauAttention(4, {tutrial = true}) end)
    local m = nn.BahdanauAttention(4, {tutorial = true})
    local ok, err = pcall(function() local r = m(attn.randn(2, 2, 4), attn.randn(2, 3, 4)); return r end)
    assert.is_false(ok)
    assert.matches("seq2seq_tutorial_spec.lua:%d+: BahdanauAttention: a 3%-D query must be %[B, 1, 4%]", err)
  end)
end)
