-- SPDX-License-Identifier: MIT
-- End-to-end training with attn.F and attn.optim:
--  1. a char-level bigram model (embedding -> tanh -> linear ->
--     cross_entropy) trained with Adam on the first 50 names of
--     shared/data/names-indian.txt follows torch 1.13's loss curve from the
--     same initial weights (fixture from scripts/fixtures/gen_optim.py);
--  2. a 10,000-step training loop keeps a flat resident set size.
local attn = require "attn"
local fx = require "support.fixture"
local F, optim = attn.F, attn.optim

local function read_names(path, n)
  local f = io.open(path, "r")
  if not f then return nil end
  local names = {}
  for line in f:lines() do
    local s = line:gsub("%s+", ""):lower()
    if #s > 0 and #names < n then names[#names + 1] = s end
  end
  f:close()
  return names
end

describe("training", function()
  it("a char-level model follows torch's Adam loss curve", function()
    local fix = fx.load("optim_train")
    local path = (os.getenv("ATTN_SOURCE_DIR") or ".") .. "/../shared/data/names-indian.txt"
    local names = read_names(path, fix.names)
    if not names then
      pending("no " .. path)
      return
    end
    -- vocabulary: "." (start/end) then the sorted characters
    local set, chars = {}, {}
    for _, s in ipairs(names) do
      for c in s:gmatch(".") do
        if not set[c] then
          set[c] = true
          chars[#chars + 1] = c
        end
      end
    end
    table.sort(chars)
    local vocab = "." .. table.concat(chars)
    assert.are.equal(fix.vocab, vocab)
    local stoi = {}
    for i = 1, #vocab do stoi[vocab:sub(i, i)] = i end
    local xs, ys = {}, {}
    for _, s in ipairs(names) do
      s = "." .. s .. "."
      for i = 1, #s - 1 do
        xs[#xs + 1] = stoi[s:sub(i, i)]
        ys[#ys + 1] = stoi[s:sub(i + 1, i + 1)]
      end
    end
    assert.are.equal(fix.pairs, #xs)
    local X, Y = attn.tensor(xs), attn.tensor(ys)

    local E = fx.tensor(fix.E):requires_grad_(true)
    local W = fx.tensor(fix.W):requires_grad_(true)
    local B = fx.tensor(fix.B):requires_grad_(true)
    local opt = optim.Adam({E, W, B}, {lr = fix.lr})
    local function loss_fn() return F.cross_entropy(F.linear(attn.embedding(E, X):tanh(), W, B), Y) end
    for step = 1, fix.steps do
      local loss = loss_fn()
      local l, e = loss:item(), fix.losses[step]
      assert(math.abs(l - e) <= 1e-4, ("step %d: loss %.7f, torch %.7f"):format(step, l, e))
      opt:zero_grad()
      loss:backward()
      opt:step()
    end
    local final = attn.no_grad(loss_fn):item()
    local expected = fix.losses[fix.steps + 1]
    assert(math.abs(final - expected) <= 1e-4, ("final loss %.7f, torch %.7f"):format(final, expected))
    assert.is_true(final < fix.losses[1] - 1) -- it did learn
  end)

  it("keeps memory flat over 10,000 steps", function()
    local status = io.open("/proc/self/status", "r")
    if not status then
      pending("no /proc/self/status")
      return
    end
    status:close()
    local rss_kb = require("support.sh").rss_kb
    attn.manual_seed(3)
    local V, D, N = 20, 16, 64
    local X = (attn.rand(N) * V):floor() + 1
    local Y = (attn.rand(N) * V):floor() + 1
    local E = attn.randn({V, D}):requires_grad_(true)
    local W = (attn.randn({V, D}) * 0.25):requires_grad_(true)
    local B = attn.zeros(V):requires_grad_(true)
    local opt = optim.AdamW({E, W, B}, {lr = 1e-2})
    local sched = optim.StepLR(opt, 1000, 0.9)
    local first, rss1000, loss
    local t0 = os.clock()
    for step = 1, 10000 do
      local h = F.dropout(attn.embedding(E, X):tanh(), 0.1)
      loss = F.cross_entropy(F.linear(h, W, B), Y, {label_smoothing = 0.05})
      if step == 1 then first = loss:item() end
      opt:zero_grad()
      loss:backward()
      optim.clip_grad_norm_({E, W, B}, 5.0)
      opt:step()
      sched:step()
      if step == 1000 then rss1000 = rss_kb() end
    end
    local growth = rss_kb() - rss1000
    -- Not under ASan or valgrind (ATTN_SANITIZER, set by scripts/sanitize.sh
    -- and valgrind.sh): their allocators hold freed blocks back (ASan's
    -- quarantine keeps up to 256 MB), so RSS says nothing there; they check
    -- leaks themselves, and autograd_spec compares attn's live-object counts.
    if not os.getenv("ATTN_SANITIZER") then
      assert(growth < 20 * 1024, ("RSS grew by %d kB between step 1,000 and 10,000"):format(growth))
    end
    assert.is_true(loss:item() < first) -- it trained
    -- a speed bound: not under valgrind (scripts/valgrind.sh), ~30x slower
    if os.getenv("ATTN_SANITIZER") ~= "valgrind" then assert.is_true(os.clock() - t0 < 60) end
  end)
end)
