-- SPDX-License-Identifier: MIT

--- Character-level attention on names, from notebook to model.
--
--   attn scripts/char_attention_names.lua [--data PATH] [--out DIR]
--        [--steps N] [--quick] [--seed N]
--
-- Part 1 retells Nipun Batra's notebook "Attention" (May 2024) cell by cell
-- with attn instead of PyTorch: read a list of names, wrap each in start and
-- end symbols, turn characters into ids and ids into vectors, project them
-- to queries, keys and values, and look at the (untrained) attention matrix
-- of "^abhishek$".  Part 2 goes where the notebook stops: it trains a small
-- causal self-attention model to predict the next character of a name,
-- compares it with a bigram table, and samples new names.
--
-- Options:
--   --data PATH  one name per line (the notebook used a list of Indian first
--                names: names-indian.txt).  Default: Debian's word list
--                /usr/share/dict/american-english (package wamerican),
--                keeping its lowercase alphabetic words.
--   --out DIR    where the PNGs go (default char_attention_names_out)
--   --steps N    training steps (default 2000, about a minute on 2 cores)
--   --quick      a run of a few seconds (200 steps), for tests
--   --seed N     seeds the weights, the data split and the samples (42)
--
-- Two things differ from Python.  Lua counts from 1, so character ids are
-- 1-based: the notebook's id 0 ('$') is id 1 here.  And attn tensors are
-- always float32, so ids travel as floats holding whole numbers.
local attn = require "attn"
local nn = attn.nn
local F = attn.F
local data = require "attn.data"
local plot = require "attn.plot"
local S = require "attn.script"

---------------------------------------------------------------------------
-- Command line

local USAGE = "usage: attn scripts/char_attention_names.lua [--data PATH] [--out DIR] [--steps N] [--quick] [--seed N]"

local opts = S.args(arg, {out = "char_attention_names_out", steps = S.int(nil), quick = false,
                          seed = S.int(42, 0), data = S.str()}, USAGE)
S.outdir(opts.out)
local function out_path(name) return opts.out .. "/" .. name end

local function section(title) print(("\n== %s =="):format(title)) end

---------------------------------------------------------------------------
-- Part 1: the notebook
---------------------------------------------------------------------------

section("The names")

-- The notebook lowercases every name.  The default word list also holds
-- proper nouns ("Aaron") and possessives ("Aaron's"): keep only the words
-- that are lowercase letters already.  Either way every kept name is a-z
-- only, so '^' and '$' can never clash with a character of a name.
local path = opts.data or data.default_words_path()
local names, skipped = {}, 0
for _, line in ipairs(data.read_lines(path)) do
  local name = opts.data and line:lower() or line
  if name:match("^[a-z]+$") then
    names[#names + 1] = name
  else
    skipped = skipped + 1
  end
end
if #names < 10 then error(("%s: only %d usable names (a-z only)"):format(path, #names)) end
print(("%d names from %s (%d lines skipped: not a-z only)"):format(#names, path, skipped))
print("the first five: " .. table.concat(names, ", ", 1, 5))

-- plt.hist([len(name) for name in names], bins=range(1, 20), density=True)
local lengths = {}
for i, name in ipairs(names) do lengths[i] = #name end
local edges = {}
for e = 1, 19 do edges[#edges + 1] = e end -- range(1, 20): the edges 1, 2, ..., 19
print("histogram: " .. plot.histogram(lengths, {path = out_path("name_lengths.png"), bins = edges, density = true,
  title = "Name lengths", xlabel = "Name length", ylabel = "Density"}))

-- Attach START and END symbols to each name; they join the vocabulary.
local start_symbol, end_symbol = "^", "$"
local ct = data.CharTable(names, {start = start_symbol, stop = end_symbol})
local wrapped = {}
for i, name in ipairs(names) do wrapped[i] = ct:wrap(name) end
print("wrapped: " .. table.concat(wrapped, " ", 1, 5))
print(("vocab: %s (%d characters)"):format(table.concat(ct.chars, " "), ct.size))
local START, STOP = ct:index(start_symbol), ct:index(end_symbol)

section("Characters to ids to vectors")

-- The notebook's example name, or the first name when the data lacks one
-- of its letters.
local name = "^abhishek$"
if not pcall(ct.encode, ct, name) then name = wrapped[1] end
local encoding = ct:encode(name)
local ids = {}
for i, v in ipairs(encoding:totable()) do ids[i] = math.tointeger(v) end
print(("encode(%s) = %s -> decode = %s"):format(name, table.concat(ids, " "), ct:decode(encoding)))

attn.manual_seed(opts.seed)
local embedding_dim = 8
local char_embedding = nn.Embedding(ct.size, embedding_dim) -- one learnable 8-vector per character
print("char_embedding(encoding):")
print(char_embedding(encoding)) -- [10, 8]

-- The notebook handles one character at a time: each x_i is [1, 8].
local length_name = #name
local xs = {}
for i = 1, length_name do xs[i] = char_embedding(ct:encode(name:sub(i, i))) end

-- Values keep the embedding's width; queries and keys live in d = 4.
local d = 4
local val_linear = nn.Linear(embedding_dim, embedding_dim)
local query_linear = nn.Linear(embedding_dim, d)
local key_linear = nn.Linear(embedding_dim, d)
local vs, qs, ks = {}, {}, {}
for i = 1, length_name do
  vs[i] = val_linear(xs[i])
  qs[i] = query_linear(xs[i])
  ks[i] = key_linear(xs[i])
end

section("The attention matrix of " .. name)

-- attns[i, j] = q_i . k_j: how much character i attends to character j.
-- (No 1/sqrt(d) scaling here, as in the notebook.)
local scores = {}
for i = 1, length_name do
  scores[i] = {}
  for j = 1, length_name do scores[i][j] = qs[i]:matmul(ks[j]:t()):item() end
end
local attns = attn.tensor(scores):softmax(-1) -- each row: a distribution over the 10 characters
print("attns:")
print(attns)

-- The double loop is one matrix product: Q K^T with Q, K [10, 4].
local Q = query_linear(char_embedding(encoding))
local K = key_linear(char_embedding(encoding))
local diff = (Q:matmul(K:t()):softmax(-1) - attns):abs():max():item()
print(("softmax(Q K^T) matches the loop (max difference %.2g)"):format(diff))
assert(diff < 1e-5, "the loop and the matrix product disagree")

local sums = attns:sum(-1):totable()
for i, s in ipairs(sums) do
  assert(math.abs(s - 1) < 1e-5, ("row %d of the attention matrix sums to %.7g"):format(i, s))
end
print(("every row sums to 1 (%.6f .. %.6f)"):format(math.min(table.unpack(sums)), math.max(table.unpack(sums))))

-- Each character's new vector is its attention-weighted mix of the values.
local V = attn.cat(vs, 1) -- [10, 8]
print("attns @ V (each character's new vector):")
print(attns:matmul(V)) -- [10, 8]

local letters = {}
for i = 1, length_name do letters[i] = name:sub(i, i) end
print("heatmap: " .. plot.heatmap(attns:detach(), {path = out_path("attention_" .. name:sub(2, -2) .. ".png"),
  row_labels = letters, col_labels = letters, cmap = "hot",
  title = "Attention of " .. name .. " (untrained)", xlabel = "key", ylabel = "query"}))

---------------------------------------------------------------------------
-- Part 2: a causal self-attention model of names
---------------------------------------------------------------------------
--
-- The task: read "^abhi" and predict the next character, "s".  One name
-- gives one training example per character: inputs "^abhishek", targets
-- "abhishek$".  Attention makes this work: position i attends to the
-- characters 1..i before it (a causal mask hides the future), so one
-- forward pass predicts every next character of the name at once.

section("Training a causal self-attention model")

local context = 16            -- characters the model sees at once
local steps = opts.steps or (opts.quick and 200 or 2000)
local batch_size = 32
local eval_every = math.max(1, steps // 30)

-- Hold out 10% of the names to measure how well the model generalises.
local train_names, valid_names = data.split(names, 0.1, attn.Generator(opts.seed)) -- 0.1: the validation share
print(("%d training names, %d validation names"):format(#train_names, #valid_names))

-- A wrapped name as a list of ids.
local function name_ids(s)
  local t = {}
  for i, v in ipairs(ct:encode(ct:wrap(s)):totable()) do t[i] = math.tointeger(v) end
  return t
end

-- Examples of `context` positions: x the input ids, y the target ids (the
-- next character; 0 where a position has no target to score).  A name that
-- does not fit the context gives several windows half a context apart; a
-- later window scores only the targets the earlier one did not, so every
-- character of every name is predicted exactly once.
local IGNORE = 0
local function make_examples(list)
  local out = {}
  for _, s in ipairs(list) do
    local seq = name_ids(s)
    local n = #seq - 1 -- targets seq[2..n+1]
    local first, scored = 1, 0
    while true do
      local x, y = {}, {}
      for t = 1, math.min(context, n - first + 1) do
        local pos = first + t - 1
        x[t] = seq[pos]
        y[t] = pos > scored and seq[pos + 1] or IGNORE
      end
      out[#out + 1] = {x = x, y = y}
      scored = first + #x - 1
      if scored >= n then break end
      first = first + context // 2
    end
  end
  return out
end

-- A list of examples -> x, y [B, context] (x padded with '$', which the
-- causal mask keeps from ever being read by a real position; y with IGNORE).
local function to_batch(examples)
  local xs_, ys_ = {}, {}
  for i, e in ipairs(examples) do xs_[i], ys_[i] = e.x, e.y end
  local x = data.pad(xs_, {value = STOP, length = context})
  local y = data.pad(ys_, {value = IGNORE, length = context})
  return x, y
end

local train_examples = make_examples(train_names)
local valid_examples = make_examples(valid_names)
-- The loss curve checks a fixed sample of at most 1,000 validation names
-- (the default word list leaves 6,388), which keeps it cheap; the final
-- number uses them all.
local curve_examples = make_examples(table.move(valid_names, 1, math.min(1000, #valid_names), 1, {}))

-- The model: GPT's layout, scaled down.
--   token embedding + learned position embedding
--   -> n_layers x [LayerNorm -> causal self-attention -> + residual,
--                  LayerNorm -> MLP (4x wide, GELU) -> + residual]
--   -> LayerNorm -> Linear to one logit per character
local Block = nn.Module:extend("Block")

function Block:init(d_model, n_heads, n_kv_heads, dropout)
  self.ln1 = nn.LayerNorm(d_model)
  -- causal = true: query i sees keys 1..i.  attn runs this through its
  -- fused scaled-dot-product kernel, which never builds the L x L matrix.
  -- n_kv_heads < n_heads: grouped-query attention, heads share keys/values.
  self.attention = nn.GroupedQueryAttention(d_model, n_heads, n_kv_heads, {causal = true})
  self.drop = nn.Dropout(dropout)
  self.ln2 = nn.LayerNorm(d_model)
  self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model),
    nn.Dropout(dropout))
end

function Block:forward(x)
  x = x + self.drop(self.attention(self.ln1(x)))
  return x + self.mlp(self.ln2(x))
end

local NameModel = nn.Module:extend("NameModel")

function NameModel:init(vocab_size, d_model, n_layers, dropout)
  self.tokens = nn.Embedding(vocab_size, d_model)
  self.positions = nn.LearnedPositionalEncoding(context, d_model)
  local blocks = {}
  for i = 1, n_layers do blocks[i] = Block(d_model, 4, 2, dropout) end
  self.blocks = nn.ModuleList(blocks)
  self.ln_f = nn.LayerNorm(d_model)
  self.head = nn.Linear(d_model, vocab_size)
end

-- idx [B, L] (L <= context) -> logits [B, L, vocab_size]
function NameModel:forward(idx)
  local x = self.positions(self.tokens(idx))
  for _, block in ipairs(self.blocks) do x = block(x) end
  return self.head(self.ln_f(x))
end

-- A list of ~1,000 names is small: a wider model learns the training names
-- by heart.  Dropout (zeroing 30% of the residual updates in training) and
-- weight decay keep this one honest.
attn.manual_seed(opts.seed)
local model = NameModel(ct.size, 32, 2, 0.3)
local n_params = 0
for _, p in ipairs(model:parameters()) do n_params = n_params + p:numel() end
print(model:to_string())
print(("%d parameters, context %d, %d training steps of %d windows"):format(n_params, context, steps, batch_size))

-- Mean cross-entropy (nats per character) of a batch's scored targets.
local V_SIZE = ct.size
local function batch_loss(x, y, reduction)
  local logits = model(x)
  return F.cross_entropy(logits:reshape(-1, V_SIZE), y:reshape(-1), {ignore_index = IGNORE, reduction = reduction})
end

-- The validation loss: every character of every validation name, once.
-- Returns the mean and the number of characters scored.
local function evaluate(examples)
  local guard <close> = attn.no_grad()
  model:eval()
  local total, count = 0, 0
  for first = 1, #examples, 512 do
    local x, y = to_batch(table.move(examples, first, math.min(first + 511, #examples), 1, {}))
    total = total + batch_loss(x, y, "sum"):item()
    count = count + y:ne(IGNORE):sum():item()
  end
  model:train()
  return total / count, count
end

local optimizer = attn.optim.AdamW(model:parameters(), {lr = 1e-3, weight_decay = 0.1})
-- A short warm-up, then the rate decays linearly to a tenth.
local warmup = math.max(1, steps // 20)
local scheduler = attn.optim.LambdaLR(optimizer, function(step)
  if step < warmup then return (step + 1) / warmup end
  return 1 - 0.9 * (step - warmup) / math.max(1, steps - warmup)
end)

local curve = {steps = {}, train = {}, valid = {}}
local shuffle = attn.Generator(opts.seed)
local batches = data.batches(train_examples, batch_size, {shuffle = true, generator = shuffle})
local bar = data.progress(steps, {label = "train"})
local running, running_n = 0, 0
for step = 1, steps do
  local examples = batches()
  if examples == nil then -- an epoch is over: reshuffle
    batches = data.batches(train_examples, batch_size, {shuffle = true, generator = shuffle})
    examples = batches()
  end
  local x, y = to_batch(examples)
  local loss = batch_loss(x, y)
  optimizer:zero_grad()
  loss:backward()
  optimizer:step()
  scheduler:step()

  local l = loss:item()
  running, running_n = running + l, running_n + 1
  bar:update(step, {loss = l})
  if step % eval_every == 0 or step == steps then
    curve.steps[#curve.steps + 1] = step
    curve.train[#curve.train + 1] = running / running_n
    curve.valid[#curve.valid + 1] = evaluate(curve_examples)
    -- one line per evaluation, key=value, for grep and plotting later
    bar:write(("step=%d train_loss=%.4f valid_loss=%.4f lr=%.3g"):format(step, curve.train[#curve.train],
      curve.valid[#curve.valid], optimizer.param_groups[1].lr))
    running, running_n = 0, 0
  end
end
bar:finish()
local model_valid, valid_chars = evaluate(valid_examples)

---------------------------------------------------------------------------
-- The baseline: a bigram table
--
-- P(next | previous) from counts of character pairs in the training names,
-- plus one for every pair (add-one smoothing, so no pair has probability 0).
-- It sees one character of context; the attention model sees up to 16.

section("Validation loss: model vs bigram")

local function pair_counts(list, plus)
  local c = {}
  for a = 1, V_SIZE do
    c[a] = {}
    for b = 1, V_SIZE do c[a][b] = plus end
  end
  for _, s in ipairs(list) do
    local seq = name_ids(s)
    for i = 1, #seq - 1 do c[seq[i]][seq[i + 1]] = c[seq[i]][seq[i + 1]] + 1 end
  end
  return attn.tensor(c) -- [V, V]: row = previous character, column = next
end

local train_pairs = pair_counts(train_names, 1)
local log_probs = (train_pairs / train_pairs:sum(2, true)):log()
local valid_pairs = pair_counts(valid_names, 0)
-- the mean of -log P(next | previous) over every validation pair
local bigram_valid = (-(valid_pairs * log_probs):sum() / valid_pairs:sum()):item()
-- Both models are scored on the same characters.
assert(valid_pairs:sum():item() == valid_chars, "the model and the bigram scored different characters")
print(("%d validation characters (every letter of every validation name, and its '$')"):format(valid_chars))

print(("validation loss, uniform guess: %.4f nats/char (log %d)"):format(math.log(V_SIZE), V_SIZE))
print(("validation loss, bigram:        %.4f nats/char"):format(bigram_valid))
print(("validation loss, model:         %.4f nats/char (training batches at the end: %.4f)"):format(model_valid,
  curve.train[#curve.train]))
if model_valid < bigram_valid then
  print(("the attention model beats the bigram by %.4f nats/char"):format(bigram_valid - model_valid))
else
  print("the attention model does not beat the bigram yet: train longer (--steps)")
end

print("loss curve: " .. plot.lines({
  {x = curve.steps, y = curve.train, label = "train"},
  {x = curve.steps, y = curve.valid, label = "validation"},
  {x = {curve.steps[1], steps}, y = {bigram_valid, bigram_valid}, label = "bigram (validation)"},
}, {path = out_path("loss_curve.png"), title = "Next-character loss", xlabel = "step",
    ylabel = "cross-entropy (nats/char)"}))

---------------------------------------------------------------------------
-- The notebook's matrix again, after training
--
-- Ask the first block for its attention weights on the same name
-- (need_weights = true returns them next to the output), averaged over the
-- 4 heads.  The causal mask shows as zeros above the diagonal: '^' sees
-- only itself, 'k' sees "^abhishek".

section("What the trained model attends to in " .. name)

model:eval()
local trained
do
  local guard <close> = attn.no_grad()
  local x = model.positions(model.tokens(encoding:unsqueeze(1))) -- [1, 10, 32]
  local block = model.blocks[1]
  local _, w = block.attention(block.ln1(x), {need_weights = true}) -- w [1, 4 heads, 10, 10]
  trained = w:mean(2):select(1, 1) -- [10, 10]
end
print("trained attns (block 1, mean of the heads):")
print(trained)
print("heatmap: " .. plot.heatmap(trained, {path = out_path("attention_" .. name:sub(2, -2) .. "_trained.png"),
  row_labels = letters, col_labels = letters, cmap = "hot",
  title = "Attention of " .. name .. " (trained, block 1)", xlabel = "key", ylabel = "query"}))

-- Attention rollout (Abnar and Zuidema 2020, attn.viz): both blocks' maps,
-- their heads averaged and the residual path added, multiplied through the
-- stack: how much each position's last representation draws on each
-- character.  viz.capture records the maps without touching the model.
local rollout
do
  local cap <close> = attn.viz.capture(model)
  local guard <close> = attn.no_grad()
  model(encoding:unsqueeze(1))
  rollout = attn.viz.rollout(cap:maps()):select(1, 1) -- [10, 10]
end
print("rollout: " .. plot.heatmap(rollout, {path = out_path("rollout_" .. name:sub(2, -2) .. ".png"),
  row_labels = letters, col_labels = letters, cmap = "hot",
  title = "Attention rollout of " .. name .. " (2 blocks)", xlabel = "character", ylabel = "position"}))

---------------------------------------------------------------------------
-- Sampling new names
--
-- Start from '^', draw the next character from softmax(logits / T), append
-- it and repeat until '$'.  A temperature T below 1 sharpens the
-- distribution (safer, more typical names), above 1 flattens it.

section("Sampled names")

local known = {}
for _, s in ipairs(names) do known[s] = true end

local function sample_name(generator, temperature)
  local guard <close> = attn.no_grad()
  local seq = {START}
  while #seq < 40 do
    local first = math.max(1, #seq - context + 1) -- the last `context` characters
    local window = table.move(seq, first, #seq, 1, {})
    local logits = model(attn.tensor({window})):select(1, 1):select(1, #window) -- [V]
    local probs = (logits / temperature):softmax(-1)
    local nxt = math.tointeger(attn.multinomial(probs, 1, false, generator):item())
    if nxt == STOP then break end
    seq[#seq + 1] = nxt
  end
  return ct:decode(attn.tensor(seq)):sub(2)
end

local sampler = attn.Generator(opts.seed)
local temperature = 0.8
print(("temperature %.1f, seed %d:"):format(temperature, opts.seed))
for i = 1, 10 do
  local s = sample_name(sampler, temperature)
  print(("sample %2d: %s%s"):format(i, s, known[s] and "   (in the data)" or ""))
end
