-- SPDX-License-Identifier: MIT

--- Multi-head attention by splitting and combining heads (seed notebook 004).
--
--   attn scripts/multi_head_split.lua [--out DIR]
--
-- The notebook's functions: split_heads (view [B, L, H, d_k] then permute
-- to [B, H, L, d_k]), combine_heads (the inverse), scaled dot-product
-- attention on every head at once, and multi_head_attention(d_model = 256,
-- num_heads = 8) on a query [4, 5, 256] and keys/values [4, 7, 256],
-- giving [4, 5, 256].  Then the same weights are copied into
-- attn.nn.MultiheadAttention (torch.nn.MultiheadAttention's layout), whose
-- output equals the notebook's.  The notebook draws its inputs without a
-- seed; we fix attn.manual_seed(0), so torch under torch.manual_seed(0)
-- prints the same numbers.  With --out DIR the first sequence's attention
-- weights (averaged over heads) are drawn to DIR/multi_head_weights.png.
local attn = require "attn"
local S = require "attn.script"
local nn = require "attn.nn"

local opts = S.args(arg, {out = S.str()}, "usage: attn scripts/multi_head_split.lua [--out DIR]")

local function shape(t) return "[" .. table.concat(t:shape(), ", ") .. "]" end
local function section(title) print(("\n== %s =="):format(title)) end
local function max_diff(a, b) return (a - b):abs():max():item() end

---------------------------------------------------------------------------
-- The notebook's functions

--- x [B, L, num_heads * d_k] -> [B, num_heads, L, d_k]
local function split_heads(x, num_heads, d_k)
  x = x:view(x:size(1), x:size(2), num_heads, d_k)
  return x:permute(1, 3, 2, 4)
end

--- x [B, num_heads, L, d_k] -> [B, L, num_heads * d_k]
local function combine_heads(x, num_heads, d_k)
  x = x:permute(1, 3, 2, 4):contiguous()
  return x:view(x:size(1), x:size(2), num_heads * d_k)
end

--- softmax(q k^T / sqrt(d_k)) v on every head: q [B, H, L, d_k],
-- k and v [B, H, S, d_k] -> [B, H, L, d_k]
local function attention(query, key, value, d_k)
  local scores = attn.matmul(query, key:transpose(-1, -2)) / math.sqrt(d_k) -- [B, H, L, S]
  local weights = scores:softmax(-1)
  return attn.matmul(weights, value)
end

--- The notebook's multi_head_attention: fresh Linear layers (made in the
-- notebook's order: key, value, query), split, attend, combine.  Also
-- returns the layers, so their weights can be copied elsewhere.
local function multi_head_attention(d_model, num_heads, query_tensor, key_tensor, value_tensor)
  local d_k = d_model // num_heads
  local key_layer = nn.Linear(d_model, num_heads * d_k)
  local value_layer = nn.Linear(d_model, num_heads * d_k)
  local query_layer = nn.Linear(d_model, num_heads * d_k)

  local key = split_heads(key_layer(key_tensor), num_heads, d_k)
  local value = split_heads(value_layer(value_tensor), num_heads, d_k)
  local query = split_heads(query_layer(query_tensor), num_heads, d_k)

  local attention_output = attention(query, key, value, d_k)
  return combine_heads(attention_output, num_heads, d_k),
         {query = query_layer, key = key_layer, value = value_layer}
end

---------------------------------------------------------------------------
section("Split and combine heads")

local d_model, num_heads = 256, 8
local d_k = d_model // num_heads

attn.manual_seed(0)
local query_tensor = attn.randn(4, 5, d_model)  -- (batch_size, sequence_length, d_model)
local key_tensor = attn.randn(4, 7, d_model)
local value_tensor = attn.randn(4, 7, d_model)
print("query", shape(query_tensor), "key", shape(key_tensor), "value", shape(value_tensor))

local heads = split_heads(query_tensor, num_heads, d_k)
print("split_heads(query)", shape(heads))
print(("combine_heads(split_heads(query)) == query: max |difference| = %.3g"):format(
  max_diff(combine_heads(heads, num_heads, d_k), query_tensor)))
print(("attn.nn.split_heads gives the same heads: max |difference| = %.3g"):format(
  max_diff(nn.split_heads(query_tensor, num_heads), heads)))

---------------------------------------------------------------------------
section("Multi-head attention")

local attention_output, layers = multi_head_attention(d_model, num_heads, query_tensor, key_tensor, value_tensor)
print("attention_output.shape", shape(attention_output)) -- should be [4, 5, 256]
print("attention_output[1][1][1:6]:")
print(attention_output[1][1]:narrow(1, 1, 6))
print("attention_output[4][5][251:256]:")
print(attention_output[4][5]:narrow(1, 251, 6))
print("attention_output:mean():")
print(attention_output:mean())

---------------------------------------------------------------------------
section("The same weights in attn.nn.MultiheadAttention")

-- MultiheadAttention keeps the three input projections stacked in
-- in_proj_weight [3 * d_model, d_model] (query, key, value) and applies an
-- output projection, which the notebook's function does not have: make it
-- the identity.
local mha = nn.MultiheadAttention(d_model, num_heads, {batch_first = true})
attn.no_grad(function()
  mha.in_proj_weight:copy_(attn.cat({layers.query.weight, layers.key.weight, layers.value.weight}, 1))
  mha.in_proj_bias:copy_(attn.cat({layers.query.bias, layers.key.bias, layers.value.bias}, 1))
  mha.out_proj.weight:copy_(attn.eye(d_model))
  mha.out_proj.bias:zero_()
end)
local mha_output, mha_weights = mha(query_tensor, key_tensor, value_tensor) -- weights [4, 5, 7]
print("MultiheadAttention output shape", shape(mha_output))
local diff = max_diff(mha_output, attention_output)
print(("max |multi_head_attention - MultiheadAttention| = %.3g"):format(diff))
assert(diff < 1e-5, "multi_head_attention and MultiheadAttention disagree")
print("attention weights of the first sequence, averaged over the heads:")
print(mha_weights[1])

if opts.out then
  local plot = require "attn.plot"
  S.outdir(opts.out)
  local rows, cols = {}, {}
  for i = 1, 5 do rows[i] = "q" .. i end
  for j = 1, 7 do cols[j] = "k" .. j end
  print("wrote " .. plot.heatmap(mha_weights[1]:detach(), {path = opts.out .. "/multi_head_weights.png",
    row_labels = rows, col_labels = cols, xlabel = "key", ylabel = "query",
    title = "sequence 1, mean of the 8 heads"}))
end
