-- SPDX-License-Identifier: MIT

--- BERT's attention heads on one sentence (the BertModel cells of seed
-- notebook 004), with attn instead of transformers.
--
--   attn scripts/bert_attention.lua [MODEL_DIR] [--layer N] [--out DIR]
--        [--text "..."]
--
-- The notebook loads bert-base-uncased with BertTokenizer and BertModel,
-- encodes "Replace me by any text you'd like." and runs the model.  Here:
-- attn.text.WordPiece.from_pretrained(MODEL_DIR) tokenizes and encodes,
-- attn.bert.from_pretrained(MODEL_DIR) loads config.json and
-- model.safetensors, and the model runs once with output_attentions.  The
-- script prints the tokens, the ids, the output shapes, the first values of
-- the pooler output, layer N's attention matrix of head 1 and, for every
-- head of layer N, which token each token attends to most; with --out DIR
-- it draws one heatmap per head of layer N (DIR/layer<N>_head<h>.png,
-- tokens as labels: rows are queries, columns keys).
--
-- Options:
--   MODEL_DIR   a Hugging Face model directory holding config.json,
--               vocab.txt and model.safetensors (default: the checkout's
--               spec/fixtures/bert, the small random BERT of the specs, so
--               that the script runs without a download).  For the notebook's model, download
--               those three files of bert-base-uncased into a directory and
--               pass it.
--   --layer N   the layer whose heads are shown, 1..num_hidden_layers
--               (default: the last one)
--   --out DIR   write the heatmaps into DIR (created if needed)
--   --text S    the sentence (default the notebook's)
--
-- Token ids are 1-based in attn (the line number in vocab.txt, one more
-- than transformers' ids), and so are layer and head numbers.
local attn = require "attn"
local S = require "attn.script"

local USAGE = "usage: attn scripts/bert_attention.lua [MODEL_DIR] [--layer N] [--out DIR] [--text \"...\"]"

-- The test model of the checkout this script belongs to, wherever it runs from.
local function default_dir()
  local here = type(arg) == "table" and type(arg[0]) == "string" and arg[0]:match("^(.*)/[^/]*$") or "scripts"
  if here == "scripts" then return "spec/fixtures/bert" end
  return here .. "/../spec/fixtures/bert"
end

local opts = S.args(arg, {"dir", dir = default_dir(), layer = S.int(nil), out = S.str(),
                          text = "Replace me by any text you'd like."}, USAGE)

local ok_text, text = pcall(require, "attn.text")
if not ok_text then
  io.stderr:write("bert_attention: this script needs the WordPiece tokenizer attn.text:\n", text, "\n")
  os.exit(1)
end
local bert = require "attn.bert"

local function shape(t) return "[" .. table.concat(t:shape(), ", ") .. "]" end

-- Loading: the model (eval mode) and the tokenizer of the same directory.
local ok, model, info = pcall(bert.from_pretrained, opts.dir)
if not ok then
  io.stderr:write(tostring(model), "\n")
  os.exit(1)
end
local c = info.config
local tok = text.WordPiece.from_pretrained(opts.dir)
print(("model: %s (%d layers, hidden %d, %d heads, vocab %d; unused weights: %s)"):format(opts.dir,
  c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.vocab_size,
  #info.unused_keys == 0 and "none" or table.concat(info.unused_keys, ", ")))
local layer = opts.layer or c.num_hidden_layers
if layer > c.num_hidden_layers then
  S.fail(("--layer %d: the model has %d layers"):format(layer, c.num_hidden_layers), USAGE)
end

-- tokenizer(text, return_tensors='pt'); output = model(**encoded_input)
local enc = tok:encode(opts.text)
local tokens = enc.tokens
if type(tokens[1]) == "table" then tokens = tokens[1] end
print("text: " .. opts.text)
print("tokens: " .. table.concat(tokens, " "))
print("input_ids (1-based: vocab.txt line numbers):")
print(enc.input_ids)

local out = attn.no_grad(function()
  return model(enc.input_ids, {token_type_ids = enc.token_type_ids, attention_mask = enc.attention_mask,
                               output_attentions = true})
end)
print("last_hidden_state: " .. shape(out.last_hidden_state))
if out.pooler_output then
  print("pooler_output: " .. shape(out.pooler_output))
  local n = math.min(8, c.hidden_size)
  print(("pooler_output[1][1:%d]:"):format(n))
  print(out.pooler_output:select(1, 1):narrow(1, 1, n))
else
  print("pooler_output: none (the checkpoint has no pooler)")
end
print(("attentions: %d layers of %s"):format(#out.attentions, shape(out.attentions[1])))

-- Layer `layer`: [heads, T, T], one matrix per head (rows sum to 1).
local A = out.attentions[layer]:select(1, 1)
local H = A:shape()[1]
print(("\nlayer %d, head 1 attention (rows: queries, columns: keys):"):format(layer))
print(A:select(1, 1))
print(("max |row sum - 1| over the heads of layer %d: %.3g"):format(layer, (A:sum(-1) - 1):abs():max():item()))
print(("\nlayer %d, each token's most attended token:"):format(layer))
for h = 1, H do
  local best = A:select(1, h):argmax(-1):totable() -- 1-based key per query
  local parts = {}
  for q, k in ipairs(best) do parts[q] = tokens[q] .. ">" .. tokens[math.tointeger(k)] end
  print(("head %d: %s"):format(h, table.concat(parts, " ")))
end

if opts.out then
  local plot = require "attn.plot"
  S.outdir(opts.out)
  for h = 1, H do
    local path = ("%s/layer%d_head%d.png"):format(opts.out, layer, h)
    print("wrote " .. plot.heatmap(A:select(1, h), {path = path, row_labels = tokens, col_labels = tokens,
      title = ("layer %d, head %d"):format(layer, h), xlabel = "key", ylabel = "query"}))
  end
end
