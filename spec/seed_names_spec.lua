-- SPDX-License-Identifier: MIT
-- scripts/char_attention_names.lua (seed notebook 003: Nipun Batra's
-- character-level attention on Indian first names, then a trained causal
-- self-attention model), run through the attn binary on names-indian.txt.
-- The notebook part is compared with torch 1.13 replaying it for the
-- script's seed (spec/fixtures/seeds_names.lua, written by
-- scripts/fixtures/gen_seed_names.py) and with the notebook's own printed
-- vocabulary and ids; the model part with the bigram baseline and the
-- uniform guess.
local S = require "support.seed_script"
local file_size = require("support.sh").file_size
local fx = require "support.fixture"

local DATA = os.getenv("ATTN_NAMES_DATA") or (S.source_dir .. "/../shared/data/names-indian.txt")

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

if not S.bin then
  describe("scripts/char_attention_names.lua", function()
    pending("ATTN_BIN is not set; run this spec through ctest (spec/tests.cmake sets it)")
  end)
  return
end
if not exists(DATA) then
  describe("scripts/char_attention_names.lua", function()
    pending("no names-indian.txt at " .. DATA .. " (set ATTN_NAMES_DATA)")
  end)
  return
end

local F = fx.load("seeds_names")
local NB = F.notebook

-- "validation loss, <who>: <x> nats/char" -> x
local function loss_of(out, who)
  local v = S.line(out, "validation loss, " .. who .. ":"):match("^%s*([%d.]+) nats/char")
  return assert(tonumber(v), "no loss printed for " .. who)
end

-- The printed 10 x 10 attention matrix p: every row sums to 1 (up to the
-- print's rounding); causal: zeros above the diagonal, else all positive.
local function assert_attention_rows(p, causal)
  assert.are.same({10, 10}, p.shape)
  for i = 1, 10 do
    local sum, slack = 0, 0
    for j = 1, 10 do
      local k = (i - 1) * 10 + j
      if not causal then
        assert.is_true(p.values[k] > 0)
      elseif j > i then
        assert.are.equal(0, p.values[k])
      end
      sum, slack = sum + p.values[k], slack + p.tols[k]
    end
    assert.is_true(math.abs(sum - 1) <= slack + 1e-6, ("row %d sums to %.6f"):format(i, sum))
  end
end

describe("scripts/char_attention_names.lua --quick", function()
  local dir = S.tmpdir()
  local r = S.run_attn("char_attention_names", {"--data", DATA, "--out", dir, "--quick"})

  it("runs cleanly; the progress bar writes one summary line off a terminal", function()
    assert.are.equal(0, r.code)
    -- one summary line (plus a stamped line every 10 s on a slow machine)
    local sums, bad = S.progress_summaries(r.err)
    assert.truthy(sums, bad)
    assert.are.equal(1, #sums, r.err)
    assert.truthy(sums[1]:match("^train: 200/200 %(100%%%) in [%d:]+, [%d.]+ it/s, loss=[%d.]+$"), r.err)
    -- stdout: a key=value line per evaluation, the last at step 200
    local steps = {}
    for step in r.out:gmatch("step=(%d+) train_loss=[%d.]+ valid_loss=[%d.]+ lr=[%d.e%-]+\n") do
      steps[#steps + 1] = tonumber(step)
    end
    assert.is_true(#steps >= 10, r.out)
    assert.are.equal(200, steps[#steps])
  end)

  it("builds the notebook's 28-character vocabulary", function()
    assert.are.equal(28, NB.size)
    assert.are.equal(("%s (%d characters)"):format(table.concat(NB.vocab, " "), NB.size), S.line(r.out, "vocab: "))
    assert.are.equal(DATA .. " (0 lines skipped: not a-z only)", S.line(r.out, F.n_names .. " names from "))
  end)

  it("encodes ^abhishek$ with the notebook's ids plus one, and decodes it back", function()
    local ids = {}
    for i, v in ipairs(NB.ids) do ids[i] = v + 1 end
    assert.are.same({2, 3, 4, 10, 11, 21, 10, 7, 13, 1}, ids)
    assert.are.equal(table.concat(ids, " ") .. " -> decode = ^abhishek$", S.line(r.out, "encode(^abhishek$) = "))
  end)

  it("prints torch's embedding, attention matrix and attns @ V for seed 42", function()
    S.assert_printed(S.tensor_after(r.out, "char_embedding(encoding):"), F.embedding, "char_embedding(encoding)")
    S.assert_printed(S.tensor_after(r.out, "attns:"), F.attns, "attns")
    S.assert_printed(S.tensor_after(r.out, "attns @ V (each character's new vector):"), F.attns_values, "attns @ V")
  end)

  it("prints a 10 x 10 attention matrix whose rows sum to 1", function()
    assert_attention_rows(S.tensor_after(r.out, "attns:"), false)
    local diff = S.line(r.out, "softmax(Q K^T) matches the loop (max difference "):match("^([^)]+)%)$")
    assert.is_true(tonumber(diff) < 1e-5)
    assert.truthy(S.line(r.out, "every row sums to 1 "))
  end)

  it("writes the four PNGs, each a real picture", function()
    for _, name in ipairs({"name_lengths.png", "attention_abhishek.png", "attention_abhishek_trained.png",
                           "loss_curve.png"}) do
      local path = dir .. "/" .. name
      local w, h = S.png_size(path)
      assert.truthy(w, name .. " is not a PNG")
      assert.is_true(w >= 300 and h >= 200, ("%s is %dx%d"):format(name, w, h))
      -- a blank canvas of that size compresses to a few hundred bytes
      assert.is_true(file_size(path) > 4000, ("%s has only %d bytes"):format(name, file_size(path)))
    end
    assert.are.equal(dir .. "/loss_curve.png", S.line(r.out, "loss curve: "))
  end)

  it("splits the names and scores the bigram baseline like torch", function()
    assert.are.equal(F.n_valid .. " validation names", S.line(r.out, F.n_train .. " training names, "))
    assert.truthy(S.line(r.out, F.valid_chars .. " validation characters"))
    local bigram = loss_of(r.out, "bigram")
    assert.is_true(math.abs(bigram - F.bigram_valid) <= 5e-5 + 1e-6, ("bigram %.4f, torch %.6f"):format(bigram,
      F.bigram_valid))
    assert.are.equal(("%.4f nats/char (log 28)"):format(math.log(28)), S.line(r.out, "validation loss, uniform guess: "))
  end)

  it("learns in 200 steps: the model's validation loss is far below the uniform guess", function()
    local model = loss_of(r.out, "model")
    assert.is_true(model < math.log(28) - 0.5, ("model %.4f vs log 28 = %.4f"):format(model, math.log(28)))
    assert.is_true(model > 1.0, "a validation loss this low means the split leaks")
  end)

  it("shows a causal trained attention matrix: zero above the diagonal, rows summing to 1", function()
    local p = S.tensor_after(r.out, "trained attns (block 1, mean of the heads):")
    assert_attention_rows(p, true)
    assert.are.equal(1, p.values[1]) -- '^' sees only itself
  end)

  it("prints ten sampled names", function()
    local samples = {}
    for i, s in r.out:gmatch("\nsample%s+(%d+): ([^\n]*)") do
      samples[#samples + 1] = s:gsub("   %(in the data%)$", "")
      assert.are.equal(#samples, tonumber(i))
    end
    assert.are.equal(10, #samples)
    local nonempty = 0
    for _, s in ipairs(samples) do
      assert.truthy(s:match("^[a-z]*$"), s)
      if #s > 0 then nonempty = nonempty + 1 end
    end
    assert.is_true(nonempty >= 8)
    S.rmtree(dir)
  end)
end)

describe("scripts/char_attention_names.lua --steps 400", function()
  it("beats the bigram baseline on the validation names", function()
    local dir = S.tmpdir()
    local r = S.run_attn("char_attention_names", {"--data", DATA, "--out", dir, "--steps", "400"})
    S.rmtree(dir)
    assert.are.equal(0, r.code, r.err)
    local model, bigram = loss_of(r.out, "model"), loss_of(r.out, "bigram")
    assert.is_true(model < bigram - 0.05, ("model %.4f, bigram %.4f"):format(model, bigram))
    assert.truthy(S.line(r.out, "the attention model beats the bigram by "))
  end)
end)

describe("scripts/char_attention_names.lua arguments", function()
  it("rejects bad options with a usage message and status 2", function()
    for _, args in ipairs({{"--steps", "0"}, {"--steps", "x"}, {"--seed"}, {"--bogus"}}) do
      local r = S.run_attn("char_attention_names", args)
      assert.are.equal(2, r.code, table.concat(args, " "))
      assert.are.equal("", r.out)
      assert.truthy(r.err:find(args[1], 1, true), r.err)
    end
  end)
end)
