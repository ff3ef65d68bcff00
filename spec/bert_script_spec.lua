-- SPDX-License-Identifier: MIT
-- scripts/bert_attention.lua (the BertModel cells of seed notebook 004:
-- tokenize "Replace me by any text you'd like.", encode, look at one
-- layer's heads), run through the attn binary on the test model directory
-- spec/fixtures/bert.  What it prints is compared with the torch reference
-- BERT's outputs (spec/fixtures/bert/expected_single.lua, written by
-- scripts/fixtures/gen_bert.py).
local S = require "support.seed_script"
local fx = require "support.fixture"

local B = {describe = describe, it = it, pending = pending, assert = assert}
if S.skip(B, "scripts/bert_attention.lua", {"attn.text"}) then return end

local E = fx.load("bert/expected_single")
local T, H = #E.tokens, 4

-- The first n values of fixture f (row-major) as a fixture of shape.
local function head(f, shape, offset)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local data = {}
  for i = 1, n do data[i] = f.data[(offset or 0) + i] end
  return {shape = shape, data = data}
end

-- The "most attended" line of head h of layer l, from the fixture.
local function argmax_line(l, h)
  local a = E.attentions[l].data
  local parts = {}
  for qi = 1, T do
    local best, bk = -1, nil
    for k = 1, T do
      local v = a[((h - 1) * T + (qi - 1)) * T + k]
      if v > best then best, bk = v, k end
    end
    parts[qi] = E.tokens[qi] .. ">" .. E.tokens[bk]
  end
  return table.concat(parts, " ")
end

S.describe_run(B, "bert_attention", function(r)

  it("loads the test model and tokenizes the notebook's sentence into its word pieces", function()
    assert.are.equal("spec/fixtures/bert (2 layers, hidden 64, 4 heads, vocab 302; unused weights: none)",
      S.line(r.out, "model: "))
    assert.are.equal(E.text, S.line(r.out, "text: "))
    assert.are.equal(table.concat(E.tokens, " "), S.line(r.out, "tokens: "))
    S.assert_printed(S.tensor_after(r.out, "input_ids (1-based: vocab.txt line numbers):"), E.input_ids, "input_ids")
  end)

  it("prints the output shapes and torch's pooler_output", function()
    assert.are.equal("[1, 12, 64]", S.line(r.out, "last_hidden_state: "))
    assert.are.equal("[1, 64]", S.line(r.out, "pooler_output: "))
    S.assert_printed(S.tensor_after(r.out, "pooler_output[1][1:8]:"), head(E.pooler_output, {8}), "pooler_output")
    assert.are.equal("2 layers of [1, 4, 12, 12]", S.line(r.out, "attentions: "))
  end)

  it("shows the last layer by default: head 1's matrix and every head's strongest link, as torch", function()
    S.assert_printed(S.tensor_after(r.out, "layer 2, head 1 attention (rows: queries, columns: keys):"),
      head(E.attentions[2], {T, T}), "layer 2 head 1")
    assert.is_true(tonumber(S.line(r.out, "max |row sum - 1| over the heads of layer 2: ")) < 1e-5)
    for h = 1, H do assert.are.equal(argmax_line(2, h), S.line(r.out, ("head %d: "):format(h))) end
  end)

  it("shows the layer chosen with --layer", function()
    local r1 = S.run_attn("bert_attention", {"spec/fixtures/bert", "--layer", "1"})
    assert.are.equal(0, r1.code)
    S.assert_printed(S.tensor_after(r1.out, "layer 1, head 1 attention (rows: queries, columns: keys):"),
      head(E.attentions[1], {T, T}), "layer 1 head 1")
    for h = 1, H do assert.are.equal(argmax_line(1, h), S.line(r1.out, ("head %d: "):format(h))) end
  end)

  it("encodes other text given with --text", function()
    local r1 = S.run_attn("bert_attention", {"--text", "The cat sat on the mat."})
    assert.are.equal(0, r1.code)
    assert.are.equal("[CLS] the cat sat on the mat . [SEP]", S.line(r1.out, "tokens: "))
    assert.are.equal("[1, 9, 64]", S.line(r1.out, "last_hidden_state: "))
  end)

  it("refuses bad arguments and says why", function()
    local r1 = S.run_attn("bert_attention", {"--layer", "3"})
    assert.are.equal(2, r1.code)
    assert.truthy(r1.err:find("--layer 3: the model has 2 layers", 1, true), r1.err)
    r1 = S.run_attn("bert_attention", {"--layer", "x"})
    assert.are.equal(2, r1.code)
    assert.truthy(r1.err:find("--layer needs a positive integer", 1, true), r1.err)
    r1 = S.run_attn("bert_attention", {"--heads"})
    assert.are.equal(2, r1.code)
    assert.truthy(r1.err:find("unknown option --heads", 1, true), r1.err)
    r1 = S.run_attn("bert_attention", {"/nonexistent/bert-base-uncased"})
    assert.are.equal(1, r1.code)
    assert.truthy(r1.err:find("no config.json in '/nonexistent/bert-base-uncased'", 1, true), r1.err)
  end)

  local pngs = {}
  for h = 1, H do pngs[h] = ("layer2_head%d.png"):format(h) end
  S.it_runs_alike_and_draws(B, "bert_attention", r, pngs, "pics")
end)
