-- SPDX-License-Identifier: MIT
-- scripts/one_hot_attention.lua (seed notebook 000), run through the attn
-- binary; what it prints is compared with torch under torch.manual_seed(0)
-- (spec/fixtures/seeds_one_hot.lua, scripts/fixtures/gen_seeds.py).
local S = require "support.seed_script"
local fx = require "support.fixture"

local B = {describe = describe, it = it, pending = pending, assert = assert}
if S.skip(B, "scripts/one_hot_attention.lua") then return end

local F = fx.load("seeds_one_hot")

S.describe_run(B, "one_hot_attention", function(r)

  it("embeds the sentences with the notebook's one-hot dictionaries", function()
    assert.truthy(r.out:find([=[
[[0, 1.0, 0, 0, 0, 0, 0, 0, 0, 0],
 [1.0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
 [0, 1.0, 0, 0, 0, 0, 0, 0, 0, 0]]
]=], 1, true))
    assert.are.equal("\t[3, 10]\t[3, 10]", S.line(r.out, "inp.shape, out.shape"))
    assert.are.same({3, 10}, F.inp.shape)
    assert.are.same({1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {table.unpack(F.inp.data, 11, 20)}) -- "is"
    assert.are.same({0, 0, 0, 0, 0, 0, 0, 0, 1, 0}, {table.unpack(F.out.data, 1, 10)})  -- "1"
  end)

  it("prints torch's dot attention weights and result for the same seed", function()
    local w = S.tensor_after(r.out, "weights:")
    S.assert_printed(w, F.weights, "weights")
    assert.truthy(w.text:find("grad_fn=<SoftmaxBackward0>", 1, true))
    S.assert_printed(S.tensor_after(r.out, "result:"), F.result, "result")
    -- the rows are distributions, and "one" (rows 1 and 3) attends alike
    for i = 1, 3 do
      local s = 0
      for j = 1, 3 do s = s + F.weights.data[(i - 1) * 3 + j] end
      assert.is_true(math.abs(s - 1) < 1e-6)
    end
    assert.are.same({table.unpack(w.values, 1, 3)}, {table.unpack(w.values, 7, 9)})
  end)

  it("prints torch's SelfAttention and MultiHeadAttention outputs", function()
    S.assert_printed(S.tensor_after(r.out, "satten(inp):"), F.self_attention, "SelfAttention")
    assert.are.equal("\t[3, 48]\toutput matrix\t[48, 8]", S.line(r.out, "heads concatenated"))
    local mh = S.tensor_after(r.out, "mul_head(inp):")
    S.assert_printed(mh, F.multi_head, "MultiHeadAttention")
    assert.are.same({3, 8}, mh.shape)
  end)

  S.it_runs_alike_and_draws(B, "one_hot_attention", r, {"one_hot_weights.png"}, "pics")

  it("refuses unknown arguments", function()
    local r2 = S.run_attn("one_hot_attention", {"--bogus"})
    assert.are.equal(2, r2.code)
    assert.truthy(r2.err:find("usage: attn scripts/one_hot_attention.lua", 1, true))
  end)
end)
