-- Draws the two README pictures with attn.plot:
--   attention_abhishek.png  the notebook's (untrained) self-attention
--                           weights of '^abhishek$', characters as labels
--   loss_curve.png          train / validation loss of a character bigram
--                           model (Embedding(V, V) as logits, Adam)
-- Run from the repository root:
--   build/bin/attn docs/img/make_images.lua [names file] [output dir]
local attn = require "attn"
local nn, F, plot = attn.nn, attn.F, attn.plot
local names_path = arg[1] or "../shared/data/names-indian.txt"
local out = arg[2] or "docs/img"

-- The names, lowercased and wrapped in ^ ... $, and their characters.
local names, set = {}, {}
for line in io.lines(names_path) do
  local s = line:gsub("%s+$", ""):lower()
  if #s > 0 then
    names[#names + 1] = "^" .. s .. "$"
    for c in names[#names]:gmatch(".") do set[c] = true end
  end
end
local chars = {}
for c in pairs(set) do chars[#chars + 1] = c end
table.sort(chars)
local id = {}
for i, c in ipairs(chars) do id[c] = i end
local V = #chars

-- 1. softmax(Q K^T / sqrt(d)) of a random character embedding, as the
--    notebook draws it before any training.
attn.manual_seed(42)
local word = "^abhishek$"
local ids = {}
for c in word:gmatch(".") do ids[#ids + 1] = id[c] end
local emb, q, k = nn.Embedding(V, 16), nn.Linear(16, 16), nn.Linear(16, 16)
local w = attn.no_grad(function()
  local x = emb(attn.tensor(ids))
  return attn.softmax(q(x):matmul(k(x):t()) / 4, 2)
end)
print(plot.heatmap(w, {path = out .. "/attention_abhishek.png", row_labels = word, col_labels = word,
  title = "Self-attention weights of '^abhishek$'", xlabel = "key", ylabel = "query", annotate = "%.2f"}))

-- 2. A bigram model: 90% of the names train it on batches of 256
--    character pairs, the rest give the validation loss every 10 steps.
attn.manual_seed(0)
local train, valid = {}, {}
for i, p in ipairs(attn.randperm(#names):totable()) do
  local list = i <= 0.9 * #names and train or valid
  local n = names[p]
  for j = 1, #n - 1 do list[#list + 1] = {id[n:sub(j, j)], id[n:sub(j + 1, j + 1)]} end
end
local function batch(pairs_, idx)
  local a, b = {}, {}
  for i, j in ipairs(idx) do a[i], b[i] = pairs_[j][1], pairs_[j][2] end
  return attn.tensor(a), attn.tensor(b)
end
local all = {}
for i = 1, #valid do all[i] = i end
local va, vb = batch(valid, all)
local model = nn.Embedding(V, V)
local opt = attn.optim.Adam(model:parameters(), {lr = 0.05})
local steps, tl, vx, vl = 400, {}, {}, {}
for step = 1, steps do
  local pick = attn.randint(1, #train + 1, {256}):totable()
  local a, b = batch(train, pick)
  local loss = F.cross_entropy(model(a), b)
  opt:zero_grad()
  loss:backward()
  opt:step()
  tl[step] = loss:item()
  if step == 1 or step % 10 == 0 then
    vx[#vx + 1] = step
    vl[#vl + 1] = attn.no_grad(function() return F.cross_entropy(model(va), vb):item() end)
  end
end
print(("bigram: train %.3f, validation %.3f after %d steps"):format(tl[steps], vl[#vl], steps))
print(plot.lines({{y = tl, label = "train (batch of 256)"}, {x = vx, y = vl, label = "validation"}},
  {path = out .. "/loss_curve.png", title = "Character bigram model on names-indian.txt",
   xlabel = "step", ylabel = "cross-entropy (nats)", width = 640, height = 400}))
