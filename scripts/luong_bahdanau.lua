-- SPDX-License-Identifier: MIT

--- Luong and Bahdanau attention (seed notebook 002) as a script, then a
-- real experiment with both.
--
--   attn scripts/luong_bahdanau.lua [--out DIR] [--quick]
--
-- Part 1 replays the notebook's cells: H [5, N = 10] holds the encoder's
-- hidden states, s_t [5, 1] the decoder's; Luong's dot score e = H^T s,
-- alpha = softmax(e), the context H alpha and the next input [s; c], then
-- Bahdanau's additive score W_a tanh(W_b s + W_c H) over the same H.  The
-- notebook draws without a seed; we fix attn.manual_seed(2015), so torch
-- under torch.manual_seed(2015) prints the same numbers.  The tensors go
-- to DIR/notebook.safetensors.
--
-- Part 2 trains two small batched seq2seq models (embedding, GRU encoder,
-- GRU decoder with attention, teacher forcing) to reverse sequences of
-- digit words ("three one four" -> "four one three"): one with Luong's
-- general score, one with Bahdanau's additive attention over a
-- bidirectional encoder.  It prints the
-- greedy-decoding accuracy on held-out sequences and the share of
-- attention mass on the anti-diagonal (where reversal must look), and
-- draws one alignment heatmap per model into DIR (default
-- out/luong_bahdanau).  --quick trains on less for a few seconds.
local attn = require "attn"
local script = require "attn.script"
local nn = require "attn.nn"
local F = require "attn.functional"
local optim = require "attn.optim"
local s2s = require "attn.seq2seq"
local data = require "attn.data"
local plot = require "attn.plot"

-- The tensors here are tiny ([32, 64] and the like): one thread beats
-- handing them to a pool (measured: half the wall time, on 2 cores).
attn.set_num_threads(1)

local opts = script.args(arg, {out = "out/luong_bahdanau", quick = false},
  "usage: attn scripts/luong_bahdanau.lua [--out DIR] [--quick]")
local out_dir, quick = script.outdir(opts.out), opts.quick

local function shape(t) return "[" .. table.concat(t:shape(), ", ") .. "]" end
local function section(title) print(("\n== %s =="):format(title)) end

---------------------------------------------------------------------------
-- Part 1: the notebook

local SEED = 2015
section(("The notebook's cells (attn.manual_seed(%d); the notebook has no seed)"):format(SEED))
do
  local _ <close> = attn.no_grad()
  attn.manual_seed(SEED)

  print("-- dot product attention (Luong)")
  local st = attn.randn(5, 1) -- the decoder state s_t
  local H = attn.randn(5, 10) -- N = 10 encoder states h_1..h_N as columns
  print("st.shape, H.T.shape", shape(st), shape(H:t()))
  local et = attn.matmul(H:t(), st) -- attention scores e_i = h_i^T s_t
  print("et.shape", shape(et))
  local alpha = et:softmax(1) -- attention distribution over the N tokens
  print("alpha", alpha)
  print("alpha.shape", shape(alpha))
  local context = attn.matmul(H, alpha) -- sum_i alpha_i h_i
  print("context_vector.shape, st.shape", shape(context), shape(st))
  local vt = attn.vstack({st, context}) -- [s_t; a_t]
  print("vt.shape", shape(vt))
  local c2 = s2s.luong_dot(H, st) -- the library's version of the same cells
  assert((c2 - context):abs():max():item() == 0, "luong_dot disagrees with the cells")

  print("-- Bahdanau attention")
  local s_t1 = attn.randn_like(st) -- the previous decoder state s_{t-1}
  print("s_t1.shape, H.shape", shape(s_t1), shape(H))
  local W_a = nn.Linear(5, 1, false).weight
  local W_b = nn.Linear(5, 5, false).weight
  local W_c = nn.Linear(5, 5, false).weight
  local a = attn.matmul(W_b, s_t1)
  local b = attn.matmul(W_c, H)
  local c = attn.matmul(W_a, (a + b):tanh()) -- scores [1, N]
  local att = c:softmax(2)
  print("att", att)
  print("H.shape, att.shape", shape(H), shape(att))
  local d = attn.matmul(att, H:t()) -- the context, a row
  print("d.shape", shape(d))

  attn.save({st = st, H = H, et = et, alpha = alpha, context = context, vt = vt, s_t1 = s_t1,
    W_a = W_a, W_b = W_b, W_c = W_c, scores = c, att = att, d = d}, out_dir .. "/notebook.safetensors")
end

---------------------------------------------------------------------------
-- Part 2: reversing digit words

local DIGITS = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}
local vocab = data.Vocab({"<pad>", "<sos>", "<eos>", table.unpack(DIGITS)})
local PAD, SOS, EOS = vocab:index("<pad>"), vocab:index("<sos>"), vocab:index("<eos>")
local V = vocab.size

local cfg = quick and {train = 1500, test = 200, min_len = 3, max_len = 6, epochs = 3, batch = 32,
  embed = 24, hidden = 48, lr = 0.01}
  or {train = 3000, test = 500, min_len = 3, max_len = 8, epochs = 4, batch = 32,
  embed = 32, hidden = 64, lr = 0.01}

-- n distinct random sequences of digit words; `seen` keeps held-out
-- sequences out of the training set.
local function make_examples(n, seen)
  local list = {}
  while #list < n do
    local len = attn.randint(cfg.min_len, cfg.max_len + 1, {1}):item()
    local words = {}
    for i, d in ipairs(attn.randint(0, 10, {len}):totable()) do words[i] = DIGITS[math.tointeger(d) + 1] end
    local key = table.concat(words, " ")
    if not seen[key] then
      seen[key] = true
      local rev = {}
      for i = 1, len do rev[i] = words[len + 1 - i] end
      list[#list + 1] = {src = words, tgt = rev}
    end
  end
  return list
end

-- A batch of examples as padded id tensors: src [B, S] with its mask,
-- the decoder's inputs <sos> y_1 .. y_L and targets y_1 .. y_L <eos> [B, T].
local function collate(batch)
  local src, tin, tout = {}, {}, {}
  for i, ex in ipairs(batch) do
    local ids = vocab:encode(ex.tgt):totable()
    src[i] = vocab:encode(ex.src)
    tin[i] = {SOS, table.unpack(ids)}
    ids[#ids + 1] = EOS
    tout[i] = ids
  end
  local s, mask = data.pad(src, {value = PAD})
  return s, mask, (data.pad(tin, {value = PAD})), (data.pad(tout, {value = PAD}))
end

local Seq2Seq = nn.Module:extend("Seq2Seq")

--- Seq2Seq(kind), as in the papers:
--   "luong"     unidirectional GRU encoder; the decoder reads y_{t-1}, then
--               attends with its new state h_t (general score h_t^T W_a h_s)
--               and outputs tanh(W_c [c_t; h_t])
--   "bahdanau"  bidirectional GRU encoder, annotations [->h_j; <-h_j]; the
--               decoder attends with s_{t-1} (additive score) and feeds the
--               context into its GRU with y_{t-1}
function Seq2Seq:init(kind)
  local E, Hd = cfg.embed, cfg.hidden
  self.hidden = Hd
  self.embed = nn.Embedding(V, E, {padding_idx = PAD})
  self.encoder = nn.GRUCell(E, Hd)
  if kind == "luong" then
    self.step = s2s.AttnDecoderStep(nn.GRUCell(E, Hd), s2s.LuongAttention(Hd, {score = "general"}))
  else
    self.backward_encoder = nn.GRUCell(E, Hd)
    self.step = s2s.AttnDecoderStep(nn.GRUCell(E + 2 * Hd, Hd), s2s.BahdanauAttention(2 * Hd, Hd, Hd))
  end
  self.out = nn.Linear(Hd, V)
end

-- Runs cell over x [B, S, E] in the order of positions (a list); a padded
-- position (mask 0) keeps the state.  Returns the states by position.
local function run_gru(cell, x, mask, positions, hidden)
  local h, states = attn.zeros(x:size(1), hidden), {}
  for _, s in ipairs(positions) do
    local m = mask:select(2, s):unsqueeze(2)
    h = cell(x:select(2, s), h) * m + h * (1 - m)
    states[s] = h
  end
  return states, h
end

-- src [B, S], mask [B, S] -> encoder states [B, S, Hd or 2 Hd] and the
-- decoder's initial state [B, Hd]: the forward state after the last real
-- token (it has just read the first word to emit).
function Seq2Seq:encode(src, mask)
  local x = self.embed(src)
  local S = src:size(2)
  local forward, backward = {}, {}
  for s = 1, S do forward[s], backward[s] = s, S + 1 - s end
  local states, h = run_gru(self.encoder, x, mask, forward, self.hidden)
  if self.backward_encoder then
    local back = run_gru(self.backward_encoder, x, mask, backward, self.hidden)
    for s = 1, S do states[s] = attn.cat({states[s], back[s]}, 2) end
  end
  return attn.stack(states, 2), h
end

-- Teacher forcing: logits [B, T, V] and weights [B, T, S].
function Seq2Seq:forward(src, mask, tgt_in)
  local enc, h = self:encode(src, mask)
  local outs, w = self.step:decode(self.embed(tgt_in), {h = h}, enc, {mask = mask})
  return self.out(outs), w
end

-- Greedy decoding for T steps: predicted ids [B, T], weights [B, T, S].
function Seq2Seq:greedy(src, mask, T)
  local enc, h = self:encode(src, mask)
  local keys = self.step:precompute(enc)
  local y, state = attn.full({src:size(1)}, SOS), {h = h}
  local preds, ws = {}, {}
  for t = 1, T do
    local out, w
    out, state, w = self.step(self.embed(y), state, enc, {mask = mask, keys = keys})
    local _, idx = self.out(out):max(2)
    y, preds[t], ws[t] = idx, idx, w
  end
  return attn.stack(preds, 2), attn.stack(ws, 2)
end

-- Held-out scores: exact-sequence and token accuracy (<eos> included),
-- the mean attention mass on the anti-diagonal (target word t of L reads
-- source word L + 1 - t) with its uniform baseline, mean 1/L, and how
-- often the largest weight sits on the anti-diagonal.
local function evaluate(model, test)
  local _ <close> = attn.no_grad()
  local src, mask, _, tout = collate(test)
  local pred, w = model:greedy(src, mask, tout:size(2))
  local P, Y, W = pred:totable(), tout:totable(), w:totable()
  local exact, tok, ntok, diag, uniform, hits, nrows = 0, 0, 0, 0, 0, 0, 0
  for b, ex in ipairs(test) do
    local L, ok, mass = #ex.src, true, 0
    for t = 1, L + 1 do
      if P[b][t] == Y[b][t] then tok = tok + 1 else ok = false end
    end
    for t = 1, L do
      local row, s = W[b][t], L + 1 - t
      mass = mass + row[s]
      local best = 1
      for j = 2, L do if row[j] > row[best] then best = j end end
      hits = hits + (best == s and 1 or 0)
    end
    ntok, nrows = ntok + L + 1, nrows + L
    exact = exact + (ok and 1 or 0)
    diag, uniform = diag + mass / L, uniform + 1 / L
  end
  local n = #test
  return {exact = exact / n, token = tok / ntok, antidiag = diag / n, uniform = uniform / n, argmax = hits / nrows,
    pred = pred, weights = w}
end

local function train(kind, trainset)
  local model = Seq2Seq(kind)
  local opt = optim.Adam(model:parameters(), {lr = cfg.lr})
  local decay = optim.StepLR(opt, 1, 0.5) -- halve the rate after every epoch
  local steps_per_epoch = (#trainset + cfg.batch - 1) // cfg.batch
  local bar = data.progress(cfg.epochs * steps_per_epoch, {label = kind})
  local step = 0
  for epoch = 1, cfg.epochs do
    local sum, n = 0, 0
    for batch in data.batches(trainset, cfg.batch, {shuffle = true}) do
      local src, mask, tin, tout = collate(batch)
      local logits = model(src, mask, tin)
      local loss = F.cross_entropy(logits:reshape(-1, V), tout:reshape(-1), {ignore_index = PAD})
      opt:zero_grad()
      loss:backward()
      optim.clip_grad_norm_(model:parameters(), 1.0)
      opt:step()
      step = step + 1
      local l = loss:item()
      sum, n = sum + l, n + 1
      bar:update(step, {loss = l})
    end
    -- one key=value line per epoch, for grep and plotting later
    bar:write(("model=%s epoch=%d step=%d train_loss=%.4f lr=%.3g"):format(kind, epoch, step, sum / n,
      opt.param_groups[1].lr))
    decay:step()
  end
  bar:finish()
  return model
end

section(("Reversing digit words: %d training and %d held-out sequences of %d-%d words%s"):format(
  cfg.train, cfg.test, cfg.min_len, cfg.max_len, quick and " (--quick)" or ""))
attn.manual_seed(SEED)
local seen = {}
local test = make_examples(cfg.test, seen)
local trainset = make_examples(cfg.train, seen)

-- the example drawn: the first held-out sequence of the longest length
local shown = 1
for i, ex in ipairs(test) do
  if #ex.src > #test[shown].src then shown = i end
end

for _, kind in ipairs({"luong", "bahdanau"}) do
  attn.manual_seed(SEED + (kind == "luong" and 1 or 2))
  local t0 = attn.now()
  local model = train(kind, trainset)
  local r = evaluate(model, test)
  print(("%-8s held-out exact-sequence accuracy %.3f  token accuracy %.3f  (%.1f s)"):format(kind, r.exact,
    r.token, attn.now() - t0))
  print(("%-8s anti-diagonal attention mass %.3f (uniform %.3f), argmax on the anti-diagonal %.3f"):format(kind,
    r.antidiag, r.uniform, r.argmax))

  local ex, L = test[shown], #test[shown].src
  local predicted = vocab:decode(r.pred[shown]:narrow(1, 1, L + 1))
  local path = plot.heatmap(r.weights[shown]:narrow(1, 1, L + 1):narrow(2, 1, L), {
    path = ("%s/%s_alignment.png"):format(out_dir, kind),
    row_labels = predicted, col_labels = ex.src, annotate = true, cmap = "viridis",
    title = ("%s attention: %s"):format(kind == "luong" and "Luong (general)" or "Bahdanau (additive)",
      table.concat(ex.src, " ")),
    xlabel = "source", ylabel = "output"})
  print(("         %s -> %s   (%s)"):format(table.concat(ex.src, " "), table.concat(predicted, " "), path))
end
