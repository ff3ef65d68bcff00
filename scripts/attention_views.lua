-- SPDX-License-Identifier: MIT

--- Look inside BERT's attention with attn.viz: the maps of one forward
-- pass on a sentence pair, drawn as interactive HTML views (head, model and
-- neuron view, each one self-contained file for any browser, offline) and
-- as a static layers x heads grid, then attention rollout, gradient-weighted
-- relevance for the [CLS] token and the heads' importance.
--
--   attn scripts/attention_views.lua [MODEL_DIR] [--out DIR] [--text A] [--pair B]
--
-- MODEL_DIR is a Hugging Face BERT directory (config.json, vocab.txt,
-- model.safetensors; default: the checkout's spec/fixtures/bert, the small
-- random BERT of the specs, so the script runs without a download; for the
-- notebooks' bert-base-uncased, download those three files and pass the
-- folder).  The pair defaults to the two sentences of seed notebook 004.
-- Writes into DIR (default out/attention_views): head_view.html,
-- model_view.html, neuron_view.html, attention_grid.png, rollout.png,
-- relevance.png; prints what each file is and the numbers behind it.
local attn = require "attn"
local S = require "attn.script"
local viz, plot, bert, text = attn.viz, attn.plot, attn.bert, attn.text

local USAGE = "usage: attn scripts/attention_views.lua [MODEL_DIR] [--out DIR] [--text A] [--pair B]"

local function default_dir()
  local here = type(arg) == "table" and type(arg[0]) == "string" and arg[0]:match("^(.*)/[^/]*$") or "scripts"
  if here == "scripts" then return "spec/fixtures/bert" end
  return here .. "/../spec/fixtures/bert"
end

local opts = S.args(arg, {"dir", dir = default_dir(), out = "out/attention_views",
  text = "Replace me by any text you'd like.", pair = "persistence is all you need"}, USAGE)
local out = S.outdir(opts.out)
local function path(name) return out .. "/" .. name end

local model = bert.from_pretrained(opts.dir)
model:eval()
local tok = text.WordPiece.from_pretrained(opts.dir)
local enc = tok:encode(opts.text, opts.pair)
local tokens = enc.tokens
if type(tokens[1]) == "table" then tokens = tokens[1] end
local c = model.config
print(("model: %s (%d layers, %d heads)"):format(opts.dir, c.num_hidden_layers, c.num_attention_heads))
print("tokens: " .. table.concat(tokens, " "))

-- 1. Capture: one forward pass, every layer's map [1, heads, T, T] (and
-- each layer's q and k for the neuron view).  The model's code is unchanged.
local maps, qs, ks
do
  local cap <close> = viz.capture(model, {qk = true})
  attn.no_grad(function()
    return model(enc.input_ids, {token_type_ids = enc.token_type_ids, attention_mask = enc.attention_mask})
  end)
  maps = cap:maps()
  qs, ks = {}, {}
  for i, r in ipairs(cap.records) do qs[i], ks[i] = r.q, r.k end
  print(("captured %d maps of %s (%s) from %s ... %s"):format(#maps, tostring(maps[1]:shape()),
    cap.records[1].source, cap.records[1].path, cap.records[#maps].path))
end

-- 2. The views.
print("head view:   " .. viz.head_view(maps, {path = path("head_view.html"), tokens = tokens,
  title = "BERT: " .. opts.text .. " / " .. opts.pair}))
print("model view:  " .. viz.model_view(maps, {path = path("model_view.html"), tokens = tokens}))
print("neuron view: " .. viz.neuron_view({q = qs, k = ks, maps = maps}, {path = path("neuron_view.html"),
  tokens = tokens, layer = 1, head = 1}))
print("grid:        " .. plot.attention_grid(maps, {path = path("attention_grid.png"), tokens = tokens,
  title = "attention: layers x heads"}))

-- 3. Rollout: how much each token's final representation draws on each
-- input token, through the residual connections and every layer.
local R = viz.rollout(maps):select(1, 1) -- [T, T]
print("rollout:     " .. plot.heatmap(R, {path = path("rollout.png"), row_labels = tokens, col_labels = tokens,
  title = "attention rollout", xlabel = "input token", ylabel = "output token"}))
local cls = R:select(1, 1)
local order = cls:argsort(1, true):totable()
local top = {}
for i = 1, math.min(3, #order) do
  local j = math.tointeger(order[i])
  top[i] = ("%s %.3f"):format(tokens[j], cls[j])
end
print("[CLS] draws most on: " .. table.concat(top, ", "))

-- 4. Relevance (Chefer et al. 2021) of the tokens for one output: the
-- pooled [CLS] vector's first feature, through the maps and their gradients.
do
  local cap <close> = viz.capture(model, {grads = true})
  local o = model(enc.input_ids, {token_type_ids = enc.token_type_ids, attention_mask = enc.attention_mask})
  local y = o.pooler_output or o.last_hidden_state:select(2, 1)
  y:select(1, 1):narrow(1, 1, 1):sum():backward()
  local rel = viz.relevance(cap:maps(), cap:grads()):select(1, 1) -- [T, T]
  print("relevance:   " .. plot.heatmap(rel, {path = path("relevance.png"), row_labels = tokens,
    col_labels = tokens, title = "relevance for pooler_output[1]", xlabel = "token", ylabel = "token"}))
end

-- 5. Head importance (Michel et al. 2019): |d loss / d head mask| for a
-- made-up objective (the squared last hidden state), per layer, normalised.
local imp = viz.head_importance(function(mask)
  local o = model(enc.input_ids, {token_type_ids = enc.token_type_ids, attention_mask = enc.attention_mask,
    head_mask = mask})
  return o.last_hidden_state:square():mean()
end, c.num_hidden_layers, c.num_attention_heads)
print("head importance (rows: layers, columns: heads):")
print(imp)
