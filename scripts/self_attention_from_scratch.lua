-- SPDX-License-Identifier: MIT

--- Self-attention from scratch (seed notebook 001), then the rest of
-- Sebastian Raschka's article "Understanding and Coding Self-Attention,
-- Multi-Head Attention, Cross-Attention, and Causal-Attention in LLMs".
--
--   attn scripts/self_attention_from_scratch.lua [--out DIR]
--
-- The notebook: attn.manual_seed(123), the sentence "Life is short, eat
-- dessert first", Embedding(50000, 3), d_q = d_k = 2, d_v = 4, the
-- attention of the second word over the sentence, then a SelfAttention
-- class.  attn draws torch's random streams, so every number equals the
-- notebook's.  The article continues with a multi-head wrapper,
-- cross-attention over a second input, and causal attention done twice:
-- masking the weights and renormalising, and -inf before the softmax.
-- Each of those parts starts from attn.manual_seed(123) as the article's
-- do, with the notebook's randn weights (the article draws them with rand).
-- With --out DIR the self-attention and causal weights are drawn to DIR.
local attn = require "attn"
local S = require "attn.script"
local nn = require "attn.nn"

local opts = S.args(arg, {out = S.str()}, "usage: attn scripts/self_attention_from_scratch.lua [--out DIR]")

local function shape(t) return "[" .. table.concat(t:shape(), ", ") .. "]" end
local function section(title) print(("\n== %s =="):format(title)) end
local function max_diff(a, b) return (a - b):abs():max():item() end

attn.manual_seed(123)

---------------------------------------------------------------------------
section("Embedding an input sentence")

local sentence = "Life is short, eat dessert first"
local words = {}
for w in sentence:gsub(",", ""):gmatch("%S+") do words[#words + 1] = w end
-- the vocabulary is the sentence's words, sorted; ids count from 1 in Lua
local vocab = {table.unpack(words)}
table.sort(vocab)
local word_to_idx = {}
for i, w in ipairs(vocab) do word_to_idx[w] = i end
local ids = {}
for i, w in ipairs(words) do ids[i] = word_to_idx[w] end
print("sentence_int (1-based):", table.concat(ids, " "))
local sentence_int = attn.tensor(ids)

local vocab_size = 50000
local embed = nn.Embedding(vocab_size, 3)
local embedded_sentence = embed(sentence_int)
print("embedded_sentence:")
print(embedded_sentence)
print("embedded_sentence.shape", shape(embedded_sentence))

---------------------------------------------------------------------------
section("Defining weight matrices")

local d_q, d_k, d_v = 2, 2, 4
local d = embedded_sentence:size(2)
local w_query = nn.Parameter(attn.randn(d, d_q))
local w_key = nn.Parameter(attn.randn(d, d_k))
local w_value = nn.Parameter(attn.randn(d, d_v))

local keys = embedded_sentence:matmul(w_key)     -- [6, d_k]
local values = embedded_sentence:matmul(w_value) -- [6, d_v]

-- The attention of one word, the second ("is"): the notebook's x_1 and
-- omega_1, since Python counts from 0.
local x_2 = embedded_sentence[2]
local query_2 = x_2:unsqueeze(1):matmul(w_query) -- [1, d_q]
local omega_2 = query_2:matmul(keys:t())         -- [1, 6] unnormalised scores
print("omega_2:")
print(omega_2)

local attention_weights = (omega_2 / d_k ^ 0.5):softmax(-1)
print("attention_weights:")
print(attention_weights)
print("attention_weights.shape", shape(attention_weights), "values.shape", shape(values))

local context_vector_2 = attention_weights:matmul(values) -- [1, d_v]
print("context_vector_2:")
print(context_vector_2)
print("context_vector_2.shape", shape(context_vector_2))

---------------------------------------------------------------------------
section("Self Attention")

local SelfAttention = nn.Module:extend("SelfAttention")

function SelfAttention:init(d_in, d_out_kq, d_out_v)
  self.d_out_kq = d_out_kq
  self.w_query = nn.Parameter(attn.randn(d_in, d_out_kq))
  self.w_key = nn.Parameter(attn.randn(d_in, d_out_kq))
  self.w_value = nn.Parameter(attn.randn(d_in, d_out_v))
end

--- x [L, d_in] -> context vectors [L, d_out_v] (and the weights [L, L])
function SelfAttention:forward(x)
  local q = x:matmul(self.w_query) -- queries
  local k = x:matmul(self.w_key)   -- keys
  local v = x:matmul(self.w_value) -- values
  local attn_scores = q:matmul(k:t())
  local attn_weights = (attn_scores / self.d_out_kq ^ 0.5):softmax(-1)
  return attn_weights:matmul(v), attn_weights
end

local self_attn = SelfAttention(3, 2, 4)
local sa_out, sa_weights = self_attn(embedded_sentence)
print("sa_out:")
print(sa_out)
print("sa_out.shape", shape(sa_out))

local x = embedded_sentence:detach()

---------------------------------------------------------------------------
section("Multi-head attention: a wrapper around SelfAttention heads")

local MultiHeadAttentionWrapper = nn.Module:extend("MultiHeadAttentionWrapper")

function MultiHeadAttentionWrapper:init(d_in, d_out_kq, d_out_v, num_heads)
  local heads = {}
  for i = 1, num_heads do heads[i] = SelfAttention(d_in, d_out_kq, d_out_v) end
  self.heads = nn.ModuleList(heads)
end

function MultiHeadAttentionWrapper:forward(inputs)
  local outs = {}
  for i, head in ipairs(self.heads) do outs[i] = head(inputs) end
  return attn.cat(outs, -1) -- [L, num_heads * d_out_v]
end

attn.manual_seed(123)
local mha = MultiHeadAttentionWrapper(3, 2, 1, 4)
local context_vecs = mha(x)
print("context_vecs:")
print(context_vecs)
print("context_vecs.shape", shape(context_vecs))
attn.manual_seed(123)
print(("attn.nn.MultiHeadAttentionWrapper, same seed: max |difference| = %.3g"):format(
  max_diff(nn.MultiHeadAttentionWrapper(3, 2, 1, 4)(x), context_vecs)))

---------------------------------------------------------------------------
section("Cross-attention: queries from one input, keys and values from another")

local CrossAttention = SelfAttention:extend("CrossAttention")

function CrossAttention:forward(x_q, x_kv)
  local queries_1 = x_q:matmul(self.w_query) -- [L1, d_out_kq]
  local keys_2 = x_kv:matmul(self.w_key)      -- [L2, d_out_kq]
  local values_2 = x_kv:matmul(self.w_value)  -- [L2, d_out_v]
  local attn_scores = queries_1:matmul(keys_2:t())
  local attn_weights = (attn_scores / self.d_out_kq ^ 0.5):softmax(-1) -- [L1, L2]
  return attn_weights:matmul(values_2)
end

attn.manual_seed(123)
local crossattn = CrossAttention(3, 2, 4)
local first_input = x
local second_input = attn.rand(8, 3)
print("first input shape", shape(first_input), "second input shape", shape(second_input))
local context_vectors = crossattn(first_input, second_input)
print("context_vectors:")
print(context_vectors)
print("output shape", shape(context_vectors))

---------------------------------------------------------------------------
section("Causal self-attention: no peeking at later words")

attn.manual_seed(123)
local sa = SelfAttention(3, 2, 4)
local queries = x:matmul(sa.w_query)
local keys_c = x:matmul(sa.w_key)
local values_c = x:matmul(sa.w_value)
local attn_scores = queries:matmul(keys_c:t())
print("attn_scores:")
print(attn_scores)
local attn_weights = (attn_scores / d_k ^ 0.5):softmax(-1)
print("attn_weights:")
print(attn_weights)

-- 1. zero the weights above the diagonal, then renormalise each row
local block_size = attn_scores:size(1)
local mask_simple = attn.ones(block_size, block_size):tril()
local masked_simple = attn_weights * mask_simple
print("masked_simple:")
print(masked_simple)
local row_sums = masked_simple:sum(2, true)
local masked_simple_norm = masked_simple / row_sums
print("masked_simple_norm:")
print(masked_simple_norm)

-- 2. -inf above the diagonal before the softmax: exp(-inf) = 0
local mask = attn.ones(block_size, block_size):triu(1)
local masked = attn_scores:masked_fill(mask, -math.huge)
print("masked:")
print(masked)
local causal_weights = (masked / d_k ^ 0.5):softmax(-1)
print("causal_weights:")
print(causal_weights)

local diff = max_diff(masked_simple_norm, causal_weights)
print(("the two ways agree: max |difference| = %.3g"):format(diff))
assert(diff < 1e-6, "the two causal masks disagree")

local causal_context = causal_weights:matmul(values_c)
print("causal context vectors:")
print(causal_context)
attn.manual_seed(123)
print(("attn.nn.CausalSelfAttention, same seed: max |difference| = %.3g"):format(
  max_diff(nn.CausalSelfAttention(3, 2, 4, block_size)(x), causal_context)))

if opts.out then
  local plot = require "attn.plot"
  S.outdir(opts.out)
  for _, p in ipairs({{"self_attention_weights.png", sa_weights, "SelfAttention weights (seed 123)"},
                      {"causal_attention_weights.png", causal_weights, "causal attention weights"}}) do
    print("wrote " .. plot.heatmap(p[2]:detach(), {path = opts.out .. "/" .. p[1], row_labels = words,
      col_labels = words, title = p[3], xlabel = "key", ylabel = "query", annotate = true}))
  end
end
