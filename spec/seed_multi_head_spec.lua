-- SPDX-License-Identifier: MIT
-- scripts/multi_head_split.lua (seed notebook 004), run through the attn
-- binary; what it prints is compared with torch under torch.manual_seed(0)
-- (spec/fixtures/seeds_multi_head.lua, scripts/fixtures/gen_seeds.py, which
-- also checks there that torch's MultiheadAttention with the copied weights
-- equals the notebook's function).
local S = require "support.seed_script"
local fx = require "support.fixture"

local B = {describe = describe, it = it, pending = pending, assert = assert}
if S.skip(B, "scripts/multi_head_split.lua") then return end

local F = fx.load("seeds_multi_head")

S.describe_run(B, "multi_head_split", function(r)

  it("splits into [B, H, L, d_k] and combines back exactly", function()
    assert.are.equal("\t[4, 5, 256]\tkey\t[4, 7, 256]\tvalue\t[4, 7, 256]", S.line(r.out, "query"))
    assert.are.equal("\t[4, 8, 5, 32]", S.line(r.out, "split_heads(query)"))
    assert.are.equal("0", S.line(r.out, "combine_heads(split_heads(query)) == query: max |difference| = "))
    assert.are.equal("0", S.line(r.out, "attn.nn.split_heads gives the same heads: max |difference| = "))
  end)

  it("gives torch's [4, 5, 256] output for the same seed", function()
    assert.are.equal("\t[4, 5, 256]", S.line(r.out, "attention_output.shape"))
    S.assert_printed(S.tensor_after(r.out, "attention_output[1][1][1:6]:"), F.first, "first values")
    S.assert_printed(S.tensor_after(r.out, "attention_output[4][5][251:256]:"), F.last, "last values")
    S.assert_printed(S.tensor_after(r.out, "attention_output:mean():"), {shape = {}, data = {F.mean}}, "mean")
  end)

  it("equals attn.nn.MultiheadAttention with the same weights", function()
    assert.are.equal("\t[4, 5, 256]", S.line(r.out, "MultiheadAttention output shape"))
    local d = tonumber(S.line(r.out, "max |multi_head_attention - MultiheadAttention| = "))
    assert.is_true(d < 1e-5)
    local w = S.tensor_after(r.out, "attention weights of the first sequence, averaged over the heads:")
    S.assert_printed(w, F.weights_1, "MultiheadAttention weights")
  end)

  S.it_runs_alike_and_draws(B, "multi_head_split", r, {"multi_head_weights.png"})
end)
