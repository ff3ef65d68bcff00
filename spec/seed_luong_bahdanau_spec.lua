-- SPDX-License-Identifier: MIT
-- scripts/luong_bahdanau.lua (seed notebook 002, Luong and Bahdanau
-- attention) run with --quick through the attn binary into a temporary
-- directory.  The notebook's tensors (written to notebook.safetensors and
-- printed) are compared with torch's for the same seed
-- (spec/fixtures/seed_s2s.lua, from scripts/fixtures/gen_seed_s2s.py); the
-- reversal experiment must reach a clear accuracy on held-out sequences,
-- put its attention on the anti-diagonal and draw both heatmaps.
local S = require "support.seed_script"
local fx = require "support.fixture"
local attn = require "attn"

if S.skip({describe = describe, pending = pending}, "scripts/luong_bahdanau.lua") then return end

local F = fx.load("seed_s2s")
local FWD = 1e-6 -- float32 rounding of a few sums

-- The numbers of the two result lines the script prints for a model.
local function results(out, kind)
  local acc = S.line(out, ("%-8s held-out exact-sequence accuracy "):format(kind))
  local exact, token = acc:match("^([%d.]+)  token accuracy ([%d.]+)")
  local al = S.line(out, ("%-8s anti-diagonal attention mass "):format(kind))
  local mass, uniform, argmax = al:match("^([%d.]+) %(uniform ([%d.]+)%), argmax on the anti%-diagonal ([%d.]+)")
  assert(exact and token and mass and uniform and argmax, "unexpected result lines for " .. kind)
  return {exact = tonumber(exact), token = tonumber(token), mass = tonumber(mass), uniform = tonumber(uniform),
    argmax = tonumber(argmax)}
end

describe("scripts/luong_bahdanau.lua --quick", function()
  local dir = S.tmpdir()
  local t0 = attn.now()
  local r = S.run_attn("luong_bahdanau", {"--quick", "--out", dir})
  local elapsed = attn.now() - t0
  teardown(function() S.rmtree(dir) end)

  it("runs cleanly and quickly", function()
    assert.are.equal(0, r.code, r.err)
    -- stderr holds only the two progress bars' summary lines (not a terminal),
    -- time-stamped, plus a stamped line every 10 s on a slow machine
    local sums, bad = S.progress_summaries(r.err)
    assert.truthy(sums, bad)
    assert.are.equal(2, #sums, r.err)
    assert.truthy(sums[1]:find("^luong: 141/141 %(100%%%) in "), r.err)
    assert.truthy(sums[2]:find("^bahdanau: 141/141 %(100%%%) in "), r.err)
    -- stdout: one key=value loss line per epoch and model
    local epochs = {}
    for model, epoch in r.out:gmatch("\nmodel=(%a+) epoch=(%d+) step=%d+ train_loss=[%d.]+ lr=[%d.e%-]+\n") do
      epochs[#epochs + 1] = model .. epoch
    end
    assert.is_true(#epochs >= 2 and epochs[1] == "luong1", r.out)
    -- a guard against pathological slowness, not a benchmark: skipped in
    -- sanitizer and valgrind runs (several times slower, shared machine)
    if not os.getenv("ATTN_SANITIZER") then assert.is_true(elapsed < 40, ("took %.1f s"):format(elapsed)) end
  end)

  it("prints the notebook's shapes and torch's alpha and att", function()
    assert.are.equal("\t[5, 1]\t[10, 5]", S.line(r.out, "st.shape, H.T.shape"))
    assert.are.equal("\t[10, 1]", S.line(r.out, "et.shape"))
    assert.are.equal("\t[10, 1]", S.line(r.out, "alpha.shape"))
    assert.are.equal("\t[5, 1]\t[5, 1]", S.line(r.out, "context_vector.shape, st.shape"))
    assert.are.equal("\t[10, 1]", S.line(r.out, "vt.shape"))
    assert.are.equal("\t[5, 1]\t[5, 10]", S.line(r.out, "s_t1.shape, H.shape"))
    assert.are.equal("\t[5, 10]\t[1, 10]", S.line(r.out, "H.shape, att.shape"))
    assert.are.equal("\t[1, 5]", S.line(r.out, "d.shape"))
    -- torch's own repr of the same tensors, character for character
    assert.truthy(r.out:find("\nalpha\t" .. F.alpha_repr .. "\n", 1, true), "alpha differs from torch's print")
    assert.truthy(r.out:find("\natt\t" .. F.att_repr .. "\n", 1, true), "att differs from torch's print")
  end)

  it("computes the notebook's tensors as torch does for the same seed", function()
    assert.truthy(r.out:find("attn.manual_seed(" .. F.seed .. ")", 1, true))
    local T = attn.load(dir .. "/notebook.safetensors")
    -- the random draws (randn, randn_like, nn.Linear's init) bit for bit
    for _, name in ipairs({"st", "H", "s_t1", "W_a", "W_b", "W_c"}) do
      fx.assert_equal(T[name], F[name], name)
    end
    for _, name in ipairs({"et", "alpha", "context", "vt", "scores", "att", "d"}) do
      fx.assert_close(T[name], F[name], FWD, FWD, name)
    end
    assert.is_true(math.abs(T.alpha:sum():item() - 1) < 1e-6)
    assert.is_true(math.abs(T.att:sum():item() - 1) < 1e-6)
  end)

  it("learns to reverse held-out sequences with both attentions", function()
    for _, kind in ipairs({"luong", "bahdanau"}) do
      local m = results(r.out, kind)
      -- chance is 1/10 per word; measured 0.965 / 1.000 exact
      assert.is_true(m.exact > 0.8, ("%s exact-sequence accuracy %.3f"):format(kind, m.exact))
      assert.is_true(m.token > 0.9, ("%s token accuracy %.3f"):format(kind, m.token))
    end
  end)

  it("attends along the anti-diagonal", function()
    for _, kind in ipairs({"luong", "bahdanau"}) do
      local m = results(r.out, kind)
      -- measured about 0.86 / 0.81 mass, 0.95 / 0.99 argmax; uniform 0.24
      assert.is_true(m.uniform > 0.15 and m.uniform < 1 / 3, ("%s uniform %.3f"):format(kind, m.uniform))
      assert.is_true(m.mass > 0.5, ("%s anti-diagonal mass %.3f"):format(kind, m.mass))
      assert.is_true(m.mass > 2.5 * m.uniform, ("%s anti-diagonal mass %.3f"):format(kind, m.mass))
      assert.is_true(m.argmax > 0.8, ("%s argmax on the anti-diagonal %.3f"):format(kind, m.argmax))
    end
  end)

  it("draws one alignment heatmap per model", function()
    local has_stats, plot = pcall(require, "attn.plot")
    for _, kind in ipairs({"luong", "bahdanau"}) do
      local path = ("%s/%s_alignment.png"):format(dir, kind)
      assert.truthy(r.out:find("(" .. path .. ")", 1, true), "the script names " .. path)
      local w, h = S.png_size(path)
      assert.truthy(w, path .. " is not a PNG")
      assert.is_true(w >= 200 and h >= 200, ("%s is %dx%d"):format(path, w, h))
      if has_stats and plot._pixel_stats then
        local st = plot._pixel_stats(path)
        -- a colour map with labels and numbers, not a blank canvas
        assert.is_true(st.colors > 50, ("%s has %d colours"):format(path, st.colors))
        assert.is_true(st.nonwhite > w * h / 10, ("%s has %d non-white pixels"):format(path, st.nonwhite))
      end
    end
  end)
end)
