-- SPDX-License-Identifier: MIT

--- Attention on a one-hot toy corpus (seed notebook 000).
--
--   attn scripts/one_hot_attention.lua [--out DIR]
--
-- Two tiny "languages" ("one is one" / "1 la 1") with one-hot word
-- vectors; scaled dot-product attention with random W_q, W_k, W_v; the
-- notebook's SelfAttention and MultiHeadAttention classes (every head's
-- output concatenated, then one output matrix [dk * nh, dk]) written with
-- attn.nn.  The notebook draws its weights without a seed; we fix
-- attn.manual_seed(0), so torch under torch.manual_seed(0) prints the same
-- numbers.  With --out DIR the dot attention weights are drawn to
-- DIR/one_hot_weights.png.
local attn = require "attn"
local S = require "attn.script"
local nn = require "attn.nn"

local opts = S.args(arg, {out = S.str()}, "usage: attn scripts/one_hot_attention.lua [--out DIR]")

local function shape(t) return "[" .. table.concat(t:shape(), ", ") .. "]" end
local function section(title) print(("\n== %s =="):format(title)) end

attn.manual_seed(0)

---------------------------------------------------------------------------
section("Create data")

local corpus_a = {"one is one", "two is two", "three is three", "four is four", "five is five",
                  "six is six", "seven is seven", "eight is eight", "nine is nine"}
local corpus_b = {"1 la 1", "2 la 2", "3 la 3", "4 la 4", "5 la 5", "6 la 6", "7 la 7", "8 la 8", "9 la 9"}

-- word -> one-hot vector of 10, in the notebook's order
local function one_hot_dict(words)
  local dict = {}
  for i, w in ipairs(words) do
    local v = {}
    for j = 1, #words do v[j] = j == i and 1.0 or 0 end
    dict[w] = v
  end
  return dict
end
local embed_a = one_hot_dict({"is", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"})
local embed_b = one_hot_dict({"9", "8", "7", "6", "5", "4", "3", "2", "1", "la"})

local function sentence_embed(sentence, embed_dict)
  local res = {}
  for word in sentence:gmatch("%S+") do res[#res + 1] = embed_dict[word] end
  return res
end

-- the list of lists, printed as Python prints it
local function show_rows(rows)
  local lines = {}
  for i, row in ipairs(rows) do
    local cells = {}
    for j, v in ipairs(row) do cells[j] = tostring(v) end
    lines[i] = "[" .. table.concat(cells, ", ") .. "]"
  end
  print("[" .. table.concat(lines, ",\n ") .. "]")
end

print(("%d sentence pairs, e.g. %q -> %q"):format(#corpus_a, corpus_a[1], corpus_b[1]))
show_rows(sentence_embed("one is one", embed_a))
local inp = attn.tensor(sentence_embed("one is one", embed_a))
local out = attn.tensor(sentence_embed("1 la 1", embed_b))
print("inp.shape, out.shape", shape(inp), shape(out))

---------------------------------------------------------------------------
section("Scaled dot product attention")

-- Fresh W_q, W_k, W_v [d_in, dk] on every call, as in the notebook.
local function dot_attention(x, dk)
  local d_in = x:size(-1)
  local wq = attn.rand(d_in, dk):requires_grad_(true)
  local wk = attn.rand(d_in, dk):requires_grad_(true)
  local wv = attn.rand(d_in, dk):requires_grad_(true)
  local q, k, v = x:matmul(wq), x:matmul(wk), x:matmul(wv)
  local logit = q:matmul(k:t()) / math.sqrt(dk)   -- [L, L]
  local weight = logit:softmax(-1)                -- each row sums to 1
  return weight, weight:matmul(v)                 -- [L, L], [L, dk]
end

local weights, result = dot_attention(inp, 8)
print("weights:")
print(weights)
print("result:")
print(result)

---------------------------------------------------------------------------
section("SelfAttention")

-- The notebook keeps W_q, W_k, W_v as plain tensors, which a module does
-- not register; nn.Parameter makes them the module's parameters.
local SelfAttention = nn.Module:extend("SelfAttention")

function SelfAttention:init(d_in, dk)
  self.dk = dk
  self.wq = nn.Parameter(attn.rand(d_in, dk))
  self.wk = nn.Parameter(attn.rand(d_in, dk))
  self.wv = nn.Parameter(attn.rand(d_in, dk))
end

function SelfAttention:forward(x)
  local q, k, v = x:matmul(self.wq), x:matmul(self.wk), x:matmul(self.wv)
  local weight = (q:matmul(k:t()) / math.sqrt(self.dk)):softmax(-1)
  return weight:matmul(v)
end

local dk = 8
local satten = SelfAttention(inp:size(-1), dk)
print("satten(inp):")
print(satten(inp))

---------------------------------------------------------------------------
section("Multi-head Attention")

local MultiHeadAttention = nn.Module:extend("MultiHeadAttention")

--- nh SelfAttention heads of size d_head; their outputs [L, d_head] are
-- concatenated to [L, d_head * nh] and mapped back to [L, d_head] by out.
function MultiHeadAttention:init(d_in, d_head, nh)
  local heads = {}
  for i = 1, nh do heads[i] = SelfAttention(d_in, d_head) end
  self.layers = nn.ModuleList(heads)
  self.out = nn.Parameter(attn.rand(d_head * nh, d_head))
end

function MultiHeadAttention:forward(x)
  local res = {}
  for i, layer in ipairs(self.layers) do res[i] = layer(x) end
  local ccat = attn.cat(res, 2)  -- [L, dk * nh]
  return ccat:matmul(self.out), ccat
end

local nh = 6
local mul_head = MultiHeadAttention(inp:size(-1), dk, nh)
local res, ccat = mul_head(inp)
print("heads concatenated", shape(ccat), "output matrix", shape(mul_head.out))
print("mul_head(inp):")
print(res)

if opts.out then
  local plot = require "attn.plot"
  S.outdir(opts.out)
  local words = {"one", "is", "one"}
  local path = plot.heatmap(weights:detach(), {path = opts.out .. "/one_hot_weights.png", row_labels = words,
    col_labels = words, title = "dot attention weights", annotate = true, width = 420, height = 360})
  print("wrote " .. path)
end
