-- SPDX-License-Identifier: MIT
-- scripts/self_attention_from_scratch.lua (seed notebook 001 and the rest of
-- Raschka's article), run through the attn binary.  The tensors the
-- notebook prints are compared with the notebook's own text (copied into
-- spec/fixtures/seeds_self_attention.lua by scripts/fixtures/gen_seeds.py);
-- everything else with torch's numbers for the same seeds.
local S = require "support.seed_script"
local fx = require "support.fixture"

local B = {describe = describe, it = it, pending = pending, assert = assert}
if S.skip(B, "scripts/self_attention_from_scratch.lua") then return end

local F = fx.load("seeds_self_attention")
local NB = F.notebook

S.describe_run(B, "self_attention_from_scratch", function(r)

  it("prints the notebook's embedded sentence and omega, line for line", function()
    assert.are.equal("\t" .. table.concat(NB.ids, " "), S.line(r.out, "sentence_int (1-based):"))
    local emb = S.tensor_after(r.out, "embedded_sentence:")
    assert.are.equal(F.notebook_text.embedded_sentence, emb.text)
    S.assert_printed(emb, NB.embedded_sentence, "embedded_sentence")
    assert.are.equal("\t[6, 3]", S.line(r.out, "embedded_sentence.shape"))
    local omega = S.tensor_after(r.out, "omega_2:")
    assert.are.equal(F.notebook_text.omega, omega.text)
    S.assert_printed(omega, NB.omega, "omega_2")
  end)

  it("prints torch's attention weights, context vector and SelfAttention output", function()
    local w = S.tensor_after(r.out, "attention_weights:")
    S.assert_printed(w, NB.attention_weights, "attention_weights")
    local sum = 0
    for _, v in ipairs(NB.attention_weights.data) do sum = sum + v end
    assert.is_true(math.abs(sum - 1) < 1e-6)
    assert.are.equal("\t[1, 6]\tvalues.shape\t[6, 4]", S.line(r.out, "attention_weights.shape"))
    S.assert_printed(S.tensor_after(r.out, "context_vector_2:"), NB.context_vector, "context_vector_2")
    assert.are.equal("\t[1, 4]", S.line(r.out, "context_vector_2.shape"))
    S.assert_printed(S.tensor_after(r.out, "sa_out:"), NB.self_attention, "SelfAttention output")
    assert.are.equal("\t[6, 4]", S.line(r.out, "sa_out.shape"))
  end)

  it("continues with the article: multi-head wrapper and cross-attention", function()
    S.assert_printed(S.tensor_after(r.out, "context_vecs:"), F.wrapper, "MultiHeadAttentionWrapper")
    assert.are.equal("\t[6, 4]", S.line(r.out, "context_vecs.shape"))
    local d = tonumber(S.line(r.out, "attn.nn.MultiHeadAttentionWrapper, same seed: max |difference| = "))
    assert.is_true(d < 1e-6)
    assert.are.equal("\t[6, 3]\tsecond input shape\t[8, 3]", S.line(r.out, "first input shape"))
    S.assert_printed(S.tensor_after(r.out, "context_vectors:"), F.cross.y, "CrossAttention")
    assert.are.equal("\t[6, 4]", S.line(r.out, "output shape"))
  end)

  it("masks the future both ways, and the two agree", function()
    local C = F.causal
    for _, name in ipairs({"attn_scores", "attn_weights", "masked_simple", "masked_simple_norm", "masked",
                           "causal_weights"}) do
      S.assert_printed(S.tensor_after(r.out, name .. ":"), C[name], name)
    end
    local masked = S.tensor_after(r.out, "masked:")
    assert.are.equal(-math.huge, masked.values[2])  -- row 1 sees only itself
    assert.are.equal(0.6290, masked.values[7])
    local w = S.tensor_after(r.out, "causal_weights:")
    for i = 1, 6 do
      for j = i + 1, 6 do assert.are.equal(0, w.values[(i - 1) * 6 + j]) end
    end
    assert.is_true(tonumber(S.line(r.out, "the two ways agree: max |difference| = ")) < 1e-6)
    S.assert_printed(S.tensor_after(r.out, "causal context vectors:"), C.context, "causal context")
    assert.is_true(tonumber(S.line(r.out, "attn.nn.CausalSelfAttention, same seed: max |difference| = ")) < 1e-6)
  end)

  S.it_runs_alike_and_draws(B, "self_attention_from_scratch", r,
    {"self_attention_weights.png", "causal_attention_weights.png"})
end)
