-- SPDX-License-Identifier: MIT

--- attn.bert: a BERT encoder (Hugging Face's BertModel) built from attn.nn,
-- loading Hugging Face model directories.
--
--   local attn = require "attn"
--   local bert = attn.bert                   -- or require "attn.bert"
--   local model = bert.from_pretrained("bert-base-uncased")  -- a directory
--   local tok = attn.text.WordPiece.from_pretrained("bert-base-uncased")
--   local enc = tok:encode("Replace me by any text you'd like.")
--   local out = attn.no_grad(function()
--     return model(enc.input_ids, {attention_mask = enc.attention_mask,
--                                  output_attentions = true})
--   end)
--   out.last_hidden_state  -- [B, T, hidden_size]
--   out.pooler_output      -- [B, hidden_size]
--   out.attentions[l]      -- layer l's probabilities [B, heads, T, T]
--
-- The model.  bert.BertModel(config) builds the module tree of
-- transformers' BertModel with its module names, so state_dict() has a
-- checkpoint's keys (embeddings.word_embeddings.weight, encoder.layer.0.
-- attention.self.query.weight, ..., pooler.dense.weight):
--   embeddings     word + token type + position embeddings (in HF's order),
--                  LayerNorm, dropout
--   encoder.layer  num_hidden_layers x (self-attention through attn's fused
--                  scaled_dot_product_attention with the padding mask,
--                  output projection, dropout, residual + LayerNorm;
--                  feed-forward dense -> hidden_act -> dense, dropout,
--                  residual + LayerNorm), post-LN as in BERT
--   pooler         dense + tanh of the first ([CLS]) token
-- A fresh model is initialised like HF's _init_weights (N(0,
-- initializer_range) weights, zero biases, LayerNorm 1/0, a zero padding
-- row) with attn's generator, and starts in training mode like any module.
--
-- model(input_ids [, opts]) -> {last_hidden_state, pooler_output,
--   hidden_states, attentions}
--   input_ids       [B, T] (or [T], a batch of one) of 1-BASED token ids:
--                   attn numbers everything from 1, so id = HF id + 1 =
--                   the line number in vocab.txt (what attn.text gives).
--   opts.token_type_ids  [B, T] segment ids, 1-BASED too: the first
--                   segment (HF's 0) is 1, the second (HF's 1) is 2.
--                   Default: all 1.
--   opts.attention_mask  [B, T]: 1 for real tokens, 0 for padding.  As in
--                   HF, (1 - mask) * finfo(float32).min is added to the
--                   scores, so real tokens never see padding and a padded
--                   batch gives each sequence the outputs it has alone.
--   opts.position_ids    [B, T] or [1, T], 1-based (default 1..T).
--   opts.output_attentions    also return attentions: a list with one
--                   [B, heads, T, T] tensor of probabilities per layer.
--   opts.output_hidden_states also return hidden_states: a list of
--                   num_hidden_layers + 1 tensors [B, T, hidden] (the
--                   embeddings' output first).
--   pooler_output is nil for a model built without its pooler.
-- Outputs always keep the batch dim.  The forward pass records autograd
-- when parameters require grad (they do, as in torch): wrap inference in
-- attn.no_grad().  Dropout is active in training mode only (model:eval()).
--
-- bert.from_pretrained(dir [, opts]) -> model, info
--   Reads dir/config.json and dir/model.safetensors (or a sharded
--   model.safetensors.index.json) and returns a model in eval mode whose
--   parameters share the loaded tensors' storage (the file is read once,
--   into the tensors, and not copied again).  Accepted key styles:
--     - BertModel keys (embeddings..., encoder..., pooler...);
--     - a "bert." prefix, as in bert-base-uncased's model.safetensors and
--       every BertFor* checkpoint; the task heads (cls.*, classifier.*,
--       qa_outputs.*, ...) are not used;
--     - LayerNorm.gamma / LayerNorm.beta of old TF-ported checkpoints;
--     - the buffers embeddings.position_ids / token_type_ids (ignored).
--   A config.json with pruned_heads (a checkpoint saved after
--   prune_heads) gives the model pruned the same way.
--   F16/BF16/F64 files load converted to float32.  A checkpoint without
--   pooler weights gives a model without a pooler (HF would draw a random
--   one).  Any other missing or mis-shaped weight raises, naming the file.
--   opts: add_pooling_layer (default true; false drops the pooler),
--   requires_grad (default true).
--   info: {config =, path =, unused_keys = {...} (sorted), missing_keys =
--   {...}}.
--
-- bert.read_config(path) -> config table with BertConfig's defaults filled
-- in; bert.config(t) does the same for a table.  hidden_act: "gelu" (erf),
-- "gelu_new", "gelu_pytorch_tanh", "gelu_fast" (the tanh approximation),
-- "relu", "silu"/"swish", "tanh".  position_embedding_type must be
-- "absolute".  pruned_heads (the heads BertModel:prune_heads removed):
-- {[layer] = {heads}} with 1-based numbers, or Hugging Face's config.json
-- form {"0": [1, 2]} (string keys, 0-based layers and heads), which it
-- converts; a BertModel built from such a config prunes those heads, and
-- from_pretrained loads a pruned checkpoint.
--
-- bert.json_decode(text [, name]) -> value: a small strict JSON reader
-- (objects -> tables, arrays -> lists, null -> nil); errors name `name`
-- and the byte position.
-- @module attn.bert
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
require "attn.nn.layers"
local nn = require "attn.nn.containers"
local attention = require "attn.attention"
local json = require "attn.app.json"

local bert = {}

local is_tensor = attn.is_tensor
local sdpa = attn.scaled_dot_product_attention
local split_heads, combine_heads = attention.split_heads, attention.combine_heads

-- torch.finfo(torch.float32).min: HF's "minus infinity" for masked keys
local FLOAT_MIN = -3.4028234663852886e38

local function fmt_shape(s)
  return "[" .. table.concat(s, ", ") .. "]"
end

-- ------------------------------------------------------------------------
-- JSON

--- json_decode(text [, name]) -> value: a strict JSON reader (RFC 8259),
-- enough for config.json files and safetensors index files.  null becomes
-- nil (so absent and null read the same, as for an optional config field);
-- name is used in error messages.  Python: json.loads.
-- @function json_decode
bert.json_decode = json.decode

-- A sandbox (attn_lua.h) has no io library: loading from files fails
-- with a message saying so (bert.config and BertModel still work).
local function need_io(fn, level)
  if type(io) ~= "table" or type(io.open) ~= "function" then
    error(("%s: reading files is not available in a sandbox (no io library)"):format(fn), level + 1)
  end
end

local function read_file(path, fn)
  if type(path) ~= "string" then error(("%s: path must be a string (got %s)"):format(fn, type(path)), 3) end
  need_io(fn, 3)
  local f, err = io.open(path, "rb")
  if not f then error(("%s: cannot open '%s' (%s)"):format(fn, path, err), 3) end
  local s = f:read("a")
  f:close()
  return s
end

local function read_json(path, fn)
  local text = read_file(path, fn)
  local ok, v = pcall(bert.json_decode, text, ("%s: '%s'"):format(fn, path))
  if not ok then error(v, 3) end
  return v
end

-- ------------------------------------------------------------------------
-- Config

-- BertConfig's defaults (bert-base-uncased's values).
local defaults = {
  vocab_size = 30522, hidden_size = 768, num_hidden_layers = 12, num_attention_heads = 12,
  intermediate_size = 3072, hidden_act = "gelu", hidden_dropout_prob = 0.1,
  attention_probs_dropout_prob = 0.1, max_position_embeddings = 512, type_vocab_size = 2,
  initializer_range = 0.02, layer_norm_eps = 1e-12, pad_token_id = 0, position_embedding_type = "absolute",
}

-- hidden_act -> a module (HF's ACT2FN names)
local activations = {
  gelu = function() return nn.GELU() end,
  gelu_new = function() return nn.GELU("tanh") end,
  gelu_pytorch_tanh = function() return nn.GELU("tanh") end,
  gelu_fast = function() return nn.GELU("tanh") end,
  relu = function() return nn.ReLU() end,
  tanh = function() return nn.Tanh() end,
}
local SiLU = nn.Module:extend("SiLU")
function SiLU:forward(x) return x:silu() end
activations.silu = function() return SiLU() end
activations.swish = activations.silu

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

--- config(t [, source]) -> a copy of t with BertConfig's defaults filled
-- in, checked; source names t in messages (a file name).
-- @usage
-- local bert = require "attn.bert"
-- local c = bert.config({hidden_size = 64, num_attention_heads = 4})
-- print(c.num_hidden_layers, c.hidden_act, c.layer_norm_eps)      -- BertConfig's defaults: 12 gelu 1e-12
function bert.config(t, source)
  if source ~= nil and type(source) ~= "string" then
    error(("bert.config: source must be a string naming the config (got %s)"):format(type(source)), 2)
  end
  source = source or "config"
  if type(t) ~= "table" then error(("bert.config: %s must be a table (got %s)"):format(source, type(t)), 2) end
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  for k, v in pairs(defaults) do
    if c[k] == nil then c[k] = v end
  end
  local function bad(msg, ...) error(("bert.config: %s: " .. msg):format(source, ...), 3) end
  for _, k in ipairs({"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                      "intermediate_size", "max_position_embeddings", "type_vocab_size"}) do
    local v = type(c[k]) == "number" and math.tointeger(c[k]) -- refuses fractions, inf, NaN, 2^63
    if not v then bad("%s must be an integer (got %s)", k, tostring(c[k])) end
    if v < (k == "num_hidden_layers" and 0 or 1) then bad("%s must be positive (got %d)", k, v) end
    c[k] = v
  end
  if c.hidden_size % c.num_attention_heads ~= 0 then
    bad("hidden_size %d is not a multiple of num_attention_heads %d", c.hidden_size, c.num_attention_heads)
  end
  for _, k in ipairs({"hidden_dropout_prob", "attention_probs_dropout_prob"}) do
    local v = c[k]
    if type(v) ~= "number" or not (v >= 0 and v <= 1) then
      bad("%s must be a number in [0, 1] (got %s)", k, tostring(v))
    end
  end
  for _, k in ipairs({"layer_norm_eps", "initializer_range"}) do
    if type(c[k]) ~= "number" or c[k] < 0 then bad("%s must be a non-negative number (got %s)", k, tostring(c[k])) end
  end
  if type(c.hidden_act) ~= "string" or not activations[c.hidden_act] then
    bad("hidden_act %s is not supported (expected one of %s)", tostring(c.hidden_act),
      table.concat(sorted_keys(activations), ", "))
  end
  if c.position_embedding_type ~= "absolute" then
    bad("position_embedding_type %s is not supported (only \"absolute\")", tostring(c.position_embedding_type))
  end
  local pad = c.pad_token_id
  if pad ~= nil and (math.type(pad) ~= "integer" or pad < 0 or pad >= c.vocab_size) then
    bad("pad_token_id must be an id in 0..%d (HF's 0-based numbering; got %s)", c.vocab_size - 1, tostring(pad))
  end
  if c.pruned_heads ~= nil then
    -- {[layer] = {heads}} 1-based, or HF's JSON {"0": [1, 2]} (0-based): 1-based, sorted
    local p, out = c.pruned_heads, {}
    if type(p) ~= "table" or is_tensor(p) then
      bad("pruned_heads must be a table {[layer] = {heads...}} (got %s)", type(p))
    end
    for k, heads in pairs(p) do
      local layer, base
      if type(k) == "string" and k:match("^%d+$") then
        layer, base = math.tointeger(tonumber(k)) + 1, 1
      elseif math.type(k) == "integer" then
        layer, base = k, 0
      else
        bad("pruned_heads has the key %s (1-based layer numbers, or Hugging Face's \"0\", \"1\", ...)", tostring(k))
      end
      if layer < 1 or layer > c.num_hidden_layers then
        bad("pruned_heads: layer %d is not in 1..%d", layer, c.num_hidden_layers)
      end
      if type(heads) ~= "table" or is_tensor(heads) then
        bad("pruned_heads: the heads of layer %d must be a list (got %s)", layer, type(heads))
      end
      local list, seen = {}, {}
      for i = 1, #heads do
        local h = type(heads[i]) == "number" and math.tointeger(heads[i]) or nil
        if h == nil or h + base < 1 or h + base > c.num_attention_heads then
          bad("pruned_heads: layer %d has the head %s (the heads are %s)", layer, tostring(heads[i]),
            base == 1 and ("0.." .. (c.num_attention_heads - 1) .. " in Hugging Face's form")
            or ("1.." .. c.num_attention_heads))
        end
        if not seen[h + base] then seen[h + base], list[#list + 1] = true, h + base end
      end
      if #list == c.num_attention_heads then bad("pruned_heads: layer %d would have no head left", layer) end
      table.sort(list)
      if #list > 0 then out[layer] = list end
    end
    c.pruned_heads = out
  end
  return c
end

--- read_config(path) -> config (bert.config of the file's JSON object).
-- @usage
-- local bert = require "attn.bert"
-- local path = os.tmpname()
-- local f = assert(io.open(path, "w")); f:write('{"hidden_size": 32, "num_attention_heads": 4}'); f:close()
-- print(bert.read_config(path).intermediate_size)                 -- 3072, the default
-- os.remove(path)
function bert.read_config(path)
  local t = read_json(path, "bert.read_config")
  if type(t) ~= "table" or t[1] ~= nil then
    error(("bert.read_config: '%s' does not hold a JSON object"):format(path), 2)
  end
  return bert.config(t, "'" .. path .. "'")
end

-- ------------------------------------------------------------------------
-- Weights: where each parameter comes from

-- A weight source hands out checkpoint tensors by BertModel name, checking
-- shapes; without a source (nil) layers draw HF's initialisation.
local Source = {}
Source.__index = Source

local function new_source(tensors, path, requires_grad)
  return setmetatable({tensors = tensors, used = {}, missing = {}, errors = {}, path = path,
                       requires_grad = requires_grad ~= false}, Source)
end

-- The tensor `name` as an nn.Parameter sharing its storage, or nil (noted
-- as missing) when absent.
function Source:take(name, shape)
  local t = self.tensors[name]
  if t == nil then
    self.missing[#self.missing + 1] = name
    return nil
  end
  self.used[name] = true
  local s = t:shape()
  local same = #s == #shape
  for i = 1, #shape do same = same and s[i] == shape[i] end
  if not same then
    self.errors[#self.errors + 1] = ("%s has shape %s, expected %s"):format(name, fmt_shape(s), fmt_shape(shape))
    return nil
  end
  local p = nn.Parameter(t, self.requires_grad)
  return p
end

local function take(src, name, shape)
  if src == nil then return nil end
  return src:take(name, shape)
end

-- A parameter from the source, or a fresh one from init(shape).
local function param(src, name, shape, init)
  local p = take(src, name, shape)
  if p ~= nil then return p end
  return nn.Parameter(init(shape))
end

local function normal_init(std)
  return function(shape) return attn.empty(shape):normal_(0, std) end
end
local function zeros_init(shape) return attn.zeros(shape) end
local function ones_init(shape) return attn.ones(shape) end

-- ------------------------------------------------------------------------
-- Layers with checkpoint weights

-- nn.Linear whose parameters are given (no random draw to throw away).
local Linear = nn.Linear:extend("Linear")
function Linear:init(in_features, out_features, weight, bias)
  self.in_features, self.out_features = in_features, out_features
  self.weight, self.bias = weight, bias
end

local function linear(src, c, name, in_f, out_f)
  return Linear(in_f, out_f,
    param(src, name .. ".weight", {out_f, in_f}, normal_init(c.initializer_range)),
    param(src, name .. ".bias", {out_f}, zeros_init))
end

local function layer_norm(src, c, name)
  local ln = nn.LayerNorm(c.hidden_size, c.layer_norm_eps)
  ln.weight = param(src, name .. ".weight", {c.hidden_size}, ones_init)
  ln.bias = param(src, name .. ".bias", {c.hidden_size}, zeros_init)
  return ln
end

local function embedding(src, c, name, n, padding)
  local w = take(src, name .. ".weight", {n, c.hidden_size})
  if w == nil then
    w = nn.Parameter(attn.empty(n, c.hidden_size):normal_(0, c.initializer_range))
    if padding then
      local guard <close> = attn.no_grad()
      w:select(1, padding):zero_()
    end
  end
  return nn.Embedding(n, c.hidden_size, {_weight = w, padding_idx = padding})
end

-- ------------------------------------------------------------------------
-- Modules (transformers' names)

local function check_options(opts, fn, known) return attn._misuse.check_options(fn, opts, known) end

-- The building blocks are public (bert.BertLayer(config) ...): they check
-- their config (bert.config) and name prefix as BertModel does.
local function block_args(name, c, prefix, default)
  if type(c) ~= "table" then
    error(("%s: expected a config table (see bert.config) (got %s)"):format(name, type(c)), 3)
  end
  local ok, checked = pcall(bert.config, c)
  if not ok then error(checked, 3) end
  if prefix ~= nil and type(prefix) ~= "string" then
    error(("%s: the name prefix must be a string (got %s)"):format(name, type(prefix)), 3)
  end
  return checked, prefix or default or ""
end

local opt_bool = nn._util.opt_bool -- a boolean option (nil: def)

local BertEmbeddings = nn.Module:extend("BertEmbeddings")
bert.BertEmbeddings = BertEmbeddings

--- BertEmbeddings(c [, src] [, prefix = "embeddings."]): word, position and
-- token-type embeddings, summed, then LayerNorm and dropout (HF's BertEmbeddings).
-- c: a config table (bert.config fills the defaults); src: the weight
-- source (nil: HF's random initialisation); prefix: the state-dict name
-- prefix of the block's parameters (as in HF's checkpoints).
-- @usage
-- local bert = require "attn.bert"
-- local cfg = bert.config({vocab_size = 30, hidden_size = 8, num_attention_heads = 2, max_position_embeddings = 16})
-- local emb = bert.BertEmbeddings(cfg)
-- local ids = attn.tensor({{3, 7, 9}})
-- print(emb(ids, attn.ones(1, 3):long(), attn.arange(1, 4):reshape(1, 3)).shape)   -- [1, 3, 8]
function BertEmbeddings:init(c, src, prefix)
  c, prefix = block_args("BertEmbeddings", c, prefix, "embeddings.")
  local pad = c.pad_token_id and (c.pad_token_id + 1) or nil -- 1-based in attn
  self.word_embeddings = embedding(src, c, prefix .. "word_embeddings", c.vocab_size, pad)
  self.position_embeddings = embedding(src, c, prefix .. "position_embeddings", c.max_position_embeddings)
  self.token_type_embeddings = embedding(src, c, prefix .. "token_type_embeddings", c.type_vocab_size)
  self.LayerNorm = layer_norm(src, c, prefix .. "LayerNorm")
  self.dropout = nn.Dropout(c.hidden_dropout_prob)
end

--- forward(input_ids, token_type_ids, position_ids): ids [B, T], token
-- types [B, T], positions [B or 1, T], all 1-based -> [B, T, hidden].
function BertEmbeddings:forward(input_ids, token_type_ids, position_ids)
  -- HF's order: (words + token types) + positions
  local e = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
  e = e + self.position_embeddings(position_ids)
  return self.dropout(self.LayerNorm(e))
end

local BertSelfAttention = nn.Module:extend("BertSelfAttention")
bert.BertSelfAttention = BertSelfAttention

--- BertSelfAttention(c [, src] [, prefix]): query/key/value projections and
-- multi-head scaled dot-product attention (HF's BertSelfAttention).
-- c, src, prefix: as for bert.BertEmbeddings.
-- @usage
-- local bert = require "attn.bert"
-- local cfg = bert.config({hidden_size = 8, num_attention_heads = 2})
-- local sa = bert.BertSelfAttention(cfg)
-- local y, probs = sa(attn.randn(1, 5, 8), nil, true)            -- need_weights
-- print(y.shape, probs.shape)                                    -- [1, 5, 8] [1, 2, 5, 5]
function BertSelfAttention:init(c, src, prefix)
  c, prefix = block_args("BertSelfAttention", c, prefix)
  self.num_attention_heads = c.num_attention_heads
  self.attention_head_size = c.hidden_size // c.num_attention_heads
  local all = self.num_attention_heads * self.attention_head_size
  self.all_head_size = all -- less after prune_heads
  self.query = linear(src, c, prefix .. "query", c.hidden_size, all)
  self.key = linear(src, c, prefix .. "key", c.hidden_size, all)
  self.value = linear(src, c, prefix .. "value", c.hidden_size, all)
  -- applied to the probabilities inside the fused SDPA (its p is used)
  self.dropout = nn.Dropout(c.attention_probs_dropout_prob)
end

-- A block's head_mask: nil, or [H] or [B, H] (a table is converted) ->
-- the factor [1 or B, H, 1, 1] of the probabilities and contexts ([H, 1,
-- 1] for an unbatched h [T, hidden], which takes [H] only)
local function block_head_mask(m, fn, H, h)
  if m == nil then return nil end
  if type(m) == "table" and not is_tensor(m) then m = attn.tensor(m) end
  if not is_tensor(m) then error(("%s: head_mask must be a tensor (got %s)"):format(fn, type(m)), 3) end
  local batched = not is_tensor(h) or h:dim() ~= 2
  local B = is_tensor(h) and h:dim() >= 3 and h:shape()[1] or 1
  local s = m:shape()
  if not ((#s == 1 and s[1] == H) or (batched and #s == 2 and (s[1] == B or s[1] == 1) and s[2] == H)) then
    error(("%s: head_mask must be [num_heads] = [%d]%s for this layer, got %s"):format(fn, H,
      batched and (" or [batch, num_heads] = [%d, %d]"):format(B, H) or "", fmt_shape(s)), 3)
  end
  if not m:is_floating_point() then m = m:float() end
  if not batched then return m:reshape(H, 1, 1) end
  return m:reshape(#s == 1 and 1 or s[1], H, 1, 1)
end

--- forward(h, mask, need_weights, head_mask): h [B, T, hidden], mask
-- [B, 1, 1, T] additive or nil -> context [B, T, all_head_size],
-- probabilities [B, H, T, T] when need_weights.  head_mask [H] or [B, H]
-- (1 keeps a head, 0 drops it) multiplies each head's probabilities, as
-- in Hugging Face (the returned probabilities include it); the fused
-- SDPA keeps no probabilities, so it multiplies each head's context,
-- which is the same product.
function BertSelfAttention:forward(h, mask, need_weights, head_mask)
  local H = self.num_attention_heads
  local hm = block_head_mask(head_mask, "BertSelfAttention", H, h)
  local q = split_heads(self.query(h), H) -- [B, H, T, D]
  local k = split_heads(self.key(h), H)
  local v = split_heads(self.value(h), H)
  local o = {need_weights = need_weights, dropout_p = self.training and self.dropout.p or 0.0}
  if mask ~= nil then o.attn_mask, o.attn_mask_kind = mask, "additive" end
  local ctx, w = sdpa(q, k, v, o) -- scale 1/sqrt(D), as HF
  if hm then
    ctx = ctx * hm
    if w then w = w * hm end
  end
  return combine_heads(ctx), w
end

-- bert[name], dense [c[in_key] -> hidden] -> dropout -> LayerNorm(. +
-- residual): BertSelfOutput and BertOutput, which differ only in in_key
local function add_norm_block(name, in_key)
  local M = nn.Module:extend(name)
  bert[name] = M
  function M:init(c, src, prefix)
    c, prefix = block_args(name, c, prefix)
    self.dense = linear(src, c, prefix .. "dense", c[in_key], c.hidden_size)
    self.LayerNorm = layer_norm(src, c, prefix .. "LayerNorm")
    self.dropout = nn.Dropout(c.hidden_dropout_prob)
  end
  function M:forward(h, residual)
    return self.LayerNorm(self.dropout(self.dense(h)) + residual)
  end
  return M
end

--- BertSelfOutput(c [, src] [, prefix]): dense [hidden -> hidden], dropout,
-- LayerNorm of the sum with the residual (HF's BertSelfOutput).
-- c, src, prefix: as for bert.BertEmbeddings.
-- @usage
-- local bert = require "attn.bert"
-- local cfg = bert.config({hidden_size = 8, num_attention_heads = 2})
-- local out = bert.BertSelfOutput(cfg)
-- local h = attn.randn(1, 5, 8)
-- print(out(h, h).shape)                                         -- LayerNorm(dropout(dense(h)) + residual)
-- @function BertSelfOutput:init

--- forward(h, residual) -> LayerNorm(dropout(dense(h)) + residual) [B, T,
-- hidden].
-- @function BertSelfOutput:forward
local BertSelfOutput = add_norm_block("BertSelfOutput", "hidden_size")

--- BertOutput(c [, src] [, prefix]): dense [intermediate -> hidden], dropout,
-- LayerNorm of the sum with the residual (HF's BertOutput).
-- c, src, prefix: as for bert.BertEmbeddings.
-- @usage
-- local bert = require "attn.bert"
-- local cfg = bert.config({hidden_size = 8, num_attention_heads = 2, intermediate_size = 32})
-- local h = attn.randn(1, 5, 8)
-- print(bert.BertOutput(cfg)(attn.randn(1, 5, 32), h).shape)     -- back to [1, 5, 8]
-- @function BertOutput:init

--- forward(h, residual) -> LayerNorm(dropout(dense(h)) + residual) [B, T,
-- hidden]; h [B, T, intermediate_size].
-- @function BertOutput:forward
local BertOutput = add_norm_block("BertOutput", "intermediate_size")

local BertAttention = nn.Module:extend("BertAttention")
bert.BertAttention = BertAttention

--- BertAttention(c [, src] [, prefix]): BertSelfAttention then
-- BertSelfOutput (HF's BertAttention).
-- c, src, prefix: as for bert.BertEmbeddings.
-- @usage
-- local bert = require "attn.bert"
-- local cfg = bert.config({hidden_size = 8, num_attention_heads = 2})
-- local block = bert.BertAttention(cfg)
-- print(block(attn.randn(1, 5, 8)).shape)                        -- attn.Size([1, 5, 8])
function BertAttention:init(c, src, prefix)
  c, prefix = block_args("BertAttention", c, prefix)
  self.self = BertSelfAttention(c, src, prefix .. "self.")
  self.output = BertSelfOutput(c, src, prefix .. "output.")
end

--- forward(h, mask, need_weights, head_mask) -> [B, T, hidden],
-- probabilities or nil (head_mask: as for BertSelfAttention).
function BertAttention:forward(h, mask, need_weights, head_mask)
  local ctx, w = self.self(h, mask, need_weights, head_mask)
  return self.output(ctx, h), w
end

--- prune_heads(heads): removes the heads listed (1-based indices of the
-- layer's original heads) from this layer, as Hugging Face's
-- BertAttention.prune_heads: their rows of self.query, self.key and
-- self.value (weights and biases) and their columns of output.dense's
-- weight; self.num_attention_heads and self.all_head_size drop, the
-- output keeps hidden_size features and equals the unpruned layer's with
-- a head_mask of 0 for those heads.  Heads pruned before are skipped
-- (self.pruned_heads, a set of original indices, records them); an index
-- out of range or pruning every remaining head raises.
-- @tparam {int,...} heads original head indices, 1-based
-- @treturn BertAttention self
-- @usage
-- local bert = require "attn.bert"
-- local block = bert.BertAttention(bert.config({hidden_size = 8, num_attention_heads = 4}))
-- block:prune_heads({1, 3})
-- print(block.self.num_attention_heads, block.self.query.weight.shape)   -- 2 [4, 8]
function BertAttention:prune_heads(heads)
  local fn = "BertAttention:prune_heads"
  local sa = self.self
  local pruned = self.pruned_heads or {}
  local new, keep, all = attention._prune_plan(fn, heads, sa.num_attention_heads, pruned)
  if #new == 0 then return self end
  local rows = attention._head_rows(keep, sa.attention_head_size)
  local prune = attention._prune_param
  for _, name in ipairs({"query", "key", "value"}) do
    local lin = sa[name]
    lin.weight = prune(lin.weight, 1, rows)
    if lin.bias ~= nil then lin.bias = prune(lin.bias, 1, rows) end
    lin.out_features = rows:numel()
  end
  local dense = self.output.dense
  dense.weight = prune(dense.weight, 2, rows)
  dense.in_features = rows:numel()
  sa.num_attention_heads = #keep
  sa.all_head_size = rows:numel()
  self.pruned_heads = all
  return self
end

local BertIntermediate = nn.Module:extend("BertIntermediate")
bert.BertIntermediate = BertIntermediate

--- BertIntermediate(c [, src] [, prefix]): dense [hidden -> intermediate]
-- and the config's hidden_act (HF's BertIntermediate).
-- c, src, prefix: as for bert.BertEmbeddings.
-- @usage
-- local bert = require "attn.bert"
-- local cfg = bert.config({hidden_size = 8, num_attention_heads = 2, intermediate_size = 32})
-- print(bert.BertIntermediate(cfg)(attn.randn(1, 5, 8)).shape)   -- attn.Size([1, 5, 32])
function BertIntermediate:init(c, src, prefix)
  c, prefix = block_args("BertIntermediate", c, prefix)
  self.dense = linear(src, c, prefix .. "dense", c.hidden_size, c.intermediate_size)
  self.intermediate_act_fn = activations[c.hidden_act]()
end

--- forward(h [B, T, hidden]) -> [B, T, intermediate_size].
function BertIntermediate:forward(h)
  return self.intermediate_act_fn(self.dense(h))
end

local BertLayer = nn.Module:extend("BertLayer")
bert.BertLayer = BertLayer

--- BertLayer(c [, src] [, prefix]): attention, intermediate and output
-- blocks (HF's BertLayer).
-- c, src, prefix: as for bert.BertEmbeddings.
-- @usage
-- local bert = require "attn.bert"
-- local cfg = bert.config({hidden_size = 8, num_attention_heads = 2, intermediate_size = 16})
-- local layer = bert.BertLayer(cfg)
-- print(layer(attn.randn(1, 5, 8)).shape)                        -- attn.Size([1, 5, 8])
function BertLayer:init(c, src, prefix)
  c, prefix = block_args("BertLayer", c, prefix)
  self.attention = BertAttention(c, src, prefix .. "attention.")
  self.intermediate = BertIntermediate(c, src, prefix .. "intermediate.")
  self.output = BertOutput(c, src, prefix .. "output.")
end

--- forward(h, mask, need_weights, head_mask): h [B, T, hidden] -> [B, T,
-- hidden], probabilities [B, H, T, T] or nil (head_mask: as for
-- BertSelfAttention).
function BertLayer:forward(h, mask, need_weights, head_mask)
  local a, w = self.attention(h, mask, need_weights, head_mask)
  return self.output(self.intermediate(a), a), w
end

local BertEncoder = nn.Module:extend("BertEncoder")
bert.BertEncoder = BertEncoder

--- BertEncoder(c [, src] [, prefix]): num_hidden_layers BertLayers in an
-- nn.ModuleList named `layer` (HF's BertEncoder).
-- c, src, prefix: as for bert.BertEmbeddings.
-- @usage
-- local bert = require "attn.bert"
-- local cfg = bert.config({hidden_size = 8, num_attention_heads = 2, intermediate_size = 16, num_hidden_layers = 3})
-- local h, hidden, attentions = bert.BertEncoder(cfg)(attn.randn(1, 5, 8), nil, true)   -- output_attentions
-- print(h.shape, #attentions)                                    -- [1, 5, 8] 3
function BertEncoder:init(c, src, prefix)
  c, prefix = block_args("BertEncoder", c, prefix)
  local layers = {}
  for i = 1, c.num_hidden_layers do
    layers[i] = BertLayer(c, src, ("%slayer.%d."):format(prefix, i - 1)) -- torch's 0-based names
  end
  self.layer = nn.ModuleList(layers)
end

-- The encoder's head_mask -> layer i's ([H] or nil): a tensor [H] (every
-- layer), [num_layers, H], or a list of one tensor (or nil) per layer
-- (layers pruned to different head counts)
local function layer_head_mask(m, i, n)
  if m == nil then return nil end
  if is_tensor(m) then
    if m:dim() == 2 then
      if m:shape()[1] ~= n then
        error(("BertEncoder: head_mask %s must have one row per layer (%d)"):format(fmt_shape(m:shape()), n), 4)
      end
      return m:select(1, i)
    end
    return m
  end
  if type(m) ~= "table" then
    error(("BertEncoder: head_mask must be a tensor [num_heads] or [num_layers, num_heads] or a list of one "
      .. "tensor per layer (got %s)"):format(type(m)), 4)
  end
  if type(m[1]) == "number" then return m end -- {1, 0, 1}: a table for [num_heads]
  return m[i] or nil
end

--- forward(h, mask, output_attentions, output_hidden_states, head_mask):
-- runs every layer; returns the last hidden state, the list of hidden
-- states (when asked) and of attention probabilities (when asked).
-- head_mask (1 keeps a head, 0 drops it): [num_heads] for every layer,
-- [num_layers, num_heads], or a list of one [num_heads_l] tensor (or
-- nil) per layer, for layers pruned to different head counts.
function BertEncoder:forward(h, mask, output_attentions, output_hidden_states, head_mask)
  local hidden = output_hidden_states and {h} or nil
  local attns = output_attentions and {} or nil
  for i = 1, #self.layer do
    local w
    h, w = self.layer[i](h, mask, output_attentions, layer_head_mask(head_mask, i, #self.layer))
    if hidden then hidden[#hidden + 1] = h end
    if attns then attns[i] = w end
  end
  return h, hidden, attns
end

local BertPooler = nn.Module:extend("BertPooler")
bert.BertPooler = BertPooler

--- BertPooler(c [, src] [, prefix]): dense [hidden -> hidden] and tanh on the
-- first token (HF's BertPooler).
-- c, src, prefix: as for bert.BertEmbeddings.
-- @usage
-- local bert = require "attn.bert"
-- local cfg = bert.config({hidden_size = 8, num_attention_heads = 2})
-- print(bert.BertPooler(cfg)(attn.randn(2, 5, 8)).shape)         -- tanh(dense(the [CLS] vector)): [2, 8]
function BertPooler:init(c, src, prefix)
  c, prefix = block_args("BertPooler", c, prefix)
  self.dense = linear(src, c, prefix .. "dense", c.hidden_size, c.hidden_size)
  self.activation = nn.Tanh()
end

--- forward(h): h [B, T, hidden] -> tanh(dense(h[:, 1])) [B, hidden].
function BertPooler:forward(h)
  if not is_tensor(h) or h:dim() < 2 then
    error(("BertPooler: h must be a tensor [batch, seq_len, hidden] (got %s)"):format(
      is_tensor(h) and fmt_shape(h:shape()) or type(h)), 2)
  end
  return self.activation(self.dense(h:select(2, 1)))
end

local BertModel = nn.Module:extend("BertModel")
bert.BertModel = BertModel

--- BertModel(config [, {add_pooling_layer = true}]): config is a table of
-- BertConfig fields (defaults filled in by bert.config).  A config with
-- pruned_heads gives a model with those heads pruned (prune_heads after
-- building), as in Hugging Face.
-- @usage
-- local bert = require "attn.bert"
-- local model = bert.BertModel({vocab_size = 30, hidden_size = 8, num_hidden_layers = 2, num_attention_heads = 2,
--   intermediate_size = 16, max_position_embeddings = 16})       -- BertConfig fields, defaults filled in
-- local out = model(attn.tensor({{3, 7, 9, 4}}), {output_attentions = true})   -- 1-based token ids
-- print(out.last_hidden_state.shape, out.pooler_output.shape, #out.attentions)   -- [1, 4, 8] [1, 8] 2
function BertModel:init(config, opts, src)
  opts = check_options(opts, "BertModel", {add_pooling_layer = true})
  opt_bool(opts.add_pooling_layer, true, "BertModel", "add_pooling_layer")
  local c = bert.config(config)
  self.config = c
  self.embeddings = BertEmbeddings(c, src, "embeddings.")
  self.encoder = BertEncoder(c, src, "encoder.")
  if opts.add_pooling_layer ~= false then self.pooler = BertPooler(c, src, "pooler.") end
  if c.pruned_heads and next(c.pruned_heads) then self:prune_heads(c.pruned_heads) end
end

-- x as a tensor of ids [B, T] (a table is converted; [T] is a batch of one)
local function ids_arg(x, what, B, T)
  if x == nil then return nil end
  if not is_tensor(x) then
    if type(x) ~= "table" then
      error(("BertModel: %s must be a tensor or a table (got %s)"):format(what, type(x)), 3)
    end
    x = attn.tensor(x)
  end
  if x:dim() == 1 then x = x:unsqueeze(1) end
  local s = x:shape()
  if #s ~= 2 then error(("BertModel: %s must be [batch, seq_len], got %s"):format(what, fmt_shape(s)), 3) end
  if B and (s[1] ~= B and not (what == "position_ids" and s[1] == 1) or s[2] ~= T) then
    error(("BertModel: %s has shape %s, expected [%d, %d] like input_ids"):format(what, fmt_shape(s), B, T), 3)
  end
  return x
end

-- Values of ids in lo..hi, with a message in the model's terms.
local function check_range(x, what, lo, hi, hint)
  if x:numel() == 0 then return end
  local mn, mx = x:min():item(), x:max():item()
  if mn < lo or mx > hi then
    error(("BertModel: %s must lie in %d..%d (found %s)%s"):format(what, lo, hi,
      tostring(math.tointeger(mn < lo and mn or mx) or (mn < lo and mn or mx)), hint or ""), 3)
  end
end

local forward_options = {token_type_ids = true, attention_mask = true, position_ids = true,
                         output_attentions = true, output_hidden_states = true, head_mask = true}

--- model(input_ids [, opts]) -> {last_hidden_state [B, T, hidden],
-- pooler_output [B, hidden] or nil, hidden_states, attentions}.
-- input_ids [B, T] (or [T], a table is converted) are 1-based: the line
-- number in vocab.txt, HF's id + 1.  opts: token_type_ids (1-based: the
-- first segment is 1), attention_mask (1 = real token, 0 = padding),
-- position_ids (1-based), output_attentions, output_hidden_states,
-- head_mask: [num_heads] (every layer) or [num_layers, num_heads], 1.0
-- keeps a head and 0.0 drops it, multiplied into each layer's attention
-- probabilities (the attentions returned include it) as Hugging Face's
-- head_mask; gradients flow into it (attn.viz.head_importance).  After
-- prune_heads, a list of one [remaining heads] tensor per layer.
-- transformers.BertModel.forward with return_dict=True.
function BertModel:forward(input_ids, opts)
  opts = check_options(opts, "BertModel", forward_options)
  opt_bool(opts.output_attentions, false, "BertModel", "output_attentions")
  opt_bool(opts.output_hidden_states, false, "BertModel", "output_hidden_states")
  local c = self.config
  if input_ids == nil then error("BertModel: input_ids is required", 2) end
  local ids = ids_arg(input_ids, "input_ids")
  local B, T = ids:shape()[1], ids:shape()[2]
  if T > c.max_position_embeddings then
    error(("BertModel: sequence length %d exceeds max_position_embeddings %d"):format(T, c.max_position_embeddings), 2)
  end
  check_range(ids, "input_ids", 1, c.vocab_size,
    " (attn's token ids are 1-based: the line number in vocab.txt, HF id + 1)")
  local types = ids_arg(opts.token_type_ids, "token_type_ids", B, T)
  if types then
    check_range(types, "token_type_ids", 1, c.type_vocab_size,
      " (1-based in attn: the first segment is 1, the second 2)")
  else
    types = attn.ones(B, T)
  end
  local pos = ids_arg(opts.position_ids, "position_ids", B, T)
  if pos then
    check_range(pos, "position_ids", 1, c.max_position_embeddings, " (1-based)")
  else
    pos = attn.arange(1, T + 1):unsqueeze(1) -- [1, T]
  end
  local mask
  local m = ids_arg(opts.attention_mask, "attention_mask", B, T)
  if m then
    -- HF's extended mask: 0 where the key takes part, finfo.min where not
    mask = ((1 - m) * FLOAT_MIN):reshape({B, 1, 1, T})
  end
  local h = self.embeddings(ids, types, pos)
  local oa, oh = opts.output_attentions == true, opts.output_hidden_states == true
  local last, hidden, attns = self.encoder(h, mask, oa, oh, self:_head_mask(opts.head_mask))
  return {
    last_hidden_state = last,
    pooler_output = self.pooler and self.pooler(last) or nil,
    hidden_states = hidden,
    attentions = attns,
  }
end

-- BertModel's head_mask checked against the layers' head counts: a
-- tensor [H] or [num_layers, H] (a table is converted), or a list of one
-- tensor [H_l] (or false) per layer
function BertModel:_head_mask(m)
  if m == nil then return nil end
  local layers = self.encoder.layer
  local n = #layers
  local counts, same = {}, true
  for i = 1, n do
    counts[i] = layers[i].attention.self.num_attention_heads
    same = same and counts[i] == counts[1]
  end
  local want = same and ("[num_heads] = [%d] or [num_layers, num_heads] = [%d, %d]"):format(counts[1] or 0, n,
    counts[1] or 0) or "a list of one [num_heads] tensor per layer (the layers have different head counts after "
    .. "prune_heads)"
  local function bad(got) error(("BertModel: head_mask must be %s, got %s"):format(want, got), 4) end
  if type(m) == "table" and not is_tensor(m) and (type(m[1]) == "number" or type(m[1]) == "table"
      and not is_tensor(m[1])) then
    m = attn.tensor(m) -- {1, 0, 1, 1} or {{...}, {...}}
  end
  if is_tensor(m) then
    if not m:is_floating_point() then m = m:float() end
    local s = m:shape()
    if not same or not ((#s == 1 and s[1] == counts[1]) or (#s == 2 and s[1] == n and s[2] == counts[1])) then
      bad(fmt_shape(s))
    end
    return m
  end
  if type(m) ~= "table" then bad(type(m)) end
  local list = {}
  for k in pairs(m) do
    if math.type(k) ~= "integer" or k < 1 or k > n then bad("a table with key " .. tostring(k)) end
  end
  for i = 1, n do
    local t = m[i]
    if t ~= nil and t ~= false then
      if not is_tensor(t) then bad(("a list whose entry %d is a %s"):format(i, type(t))) end
      if t:dim() ~= 1 or t:shape()[1] ~= counts[i] then
        bad(("a list whose entry %d is %s (layer %d has %d heads)"):format(i, fmt_shape(t:shape()), i, counts[i]))
      end
      list[i] = t:is_floating_point() and t or t:float()
    end
  end
  return list
end

--- prune_heads(heads_to_prune): heads_to_prune maps a layer (1-based) to
-- a list of its heads to remove (1-based, as numbered before any
-- pruning): {[1] = {1, 2}, [3] = {4}}.  Each layer's
-- BertAttention:prune_heads does the work (Hugging Face's semantics); the
-- pruned heads are also recorded in model.config.pruned_heads ({[layer] =
-- sorted heads}), as HF's config.  The output then equals the unpruned
-- model's with head_mask 0 for those heads.  The parameters are new
-- tensors (make the optimizer after pruning); a pruned model's
-- state_dict loads into a model pruned the same way (BertModel(config),
-- prune_heads, load_state_dict).  PreTrainedModel.prune_heads.
-- @tparam table heads_to_prune {[layer] = {head, ...}}
-- @treturn BertModel self
-- @usage
-- local bert = require "attn.bert"
-- local model = bert.BertModel({vocab_size = 30, hidden_size = 8, num_hidden_layers = 2, num_attention_heads = 4,
--   intermediate_size = 16, max_position_embeddings = 16})
-- model:eval()
-- local ids = attn.tensor({{3, 7, 9, 4}})
-- local mask = attn.tensor({{1, 1, 1, 1}, {0, 1, 1, 0}})          -- layer 2 without heads 1 and 4
-- local masked = model(ids, {head_mask = mask}).last_hidden_state
-- model:prune_heads({[2] = {1, 4}})
-- print((model(ids).last_hidden_state - masked):abs():max():item() < 1e-5)   -- true
function BertModel:prune_heads(heads_to_prune)
  local fn = "BertModel:prune_heads"
  if type(heads_to_prune) ~= "table" or is_tensor(heads_to_prune) or getmetatable(heads_to_prune) ~= nil then
    error(("%s: expected a table {[layer] = {heads...}} (1-based layers and heads) (got %s)"):format(fn,
      is_tensor(heads_to_prune) and "a tensor" or type(heads_to_prune)), 2)
  end
  local n = #self.encoder.layer
  local layers = {}
  for l, heads in pairs(heads_to_prune) do
    local li = type(l) == "number" and math.tointeger(l) or nil
    if li == nil or li < 1 or li > n then
      error(("%s: layer %s is not a layer number in 1..%d"):format(fn, tostring(l), n), 2)
    end
    layers[#layers + 1] = li
    if type(heads) ~= "table" or is_tensor(heads) then
      error(("%s: the heads of layer %d must be a list of 1-based head indices (got %s)"):format(fn, li,
        is_tensor(heads) and "a tensor" or type(heads)), 2)
    end
  end
  table.sort(layers)
  -- check every layer's list before changing any
  for _, l in ipairs(layers) do
    local a = self.encoder.layer[l].attention
    local ok, err = pcall(attention._prune_plan, ("%s: layer %d"):format(fn, l), heads_to_prune[l],
      a.self.num_attention_heads, a.pruned_heads or {})
    if not ok then error(err, 2) end
  end
  local record = self.config.pruned_heads or {}
  for _, l in ipairs(layers) do
    local a = self.encoder.layer[l].attention
    a:prune_heads(heads_to_prune[l])
    local list = {}
    for h in pairs(a.pruned_heads or {}) do list[#list + 1] = h end
    table.sort(list)
    record[l] = list
  end
  self.config.pruned_heads = record
  return self
end

--- Nothing beyond the submodules for tostring(model).
function BertModel:extra_repr()
  return ""
end

-- ------------------------------------------------------------------------
-- Loading a Hugging Face directory

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function join(dir, name)
  if dir:sub(-1) == "/" then return dir .. name end
  return dir .. "/" .. name
end

-- name -> tensor of every safetensors file of the model in dir.
local function load_weights(dir, fn)
  local single = join(dir, "model.safetensors")
  if exists(single) then
    local ok, t = pcall(attn.load, single, "safetensors")
    if not ok then error(("%s: %s"):format(fn, t), 3) end
    return t, single
  end
  local index = join(dir, "model.safetensors.index.json")
  if exists(index) then
    local j = read_json(index, fn)
    if type(j) ~= "table" or type(j.weight_map) ~= "table" then
      error(("%s: '%s' has no weight_map object"):format(fn, index), 3)
    end
    local files, all = {}, {}
    for _, file in pairs(j.weight_map) do
      if type(file) ~= "string" or file:find("/", 1, true) or file:find("^%.") then
        error(("%s: '%s': bad shard name %s"):format(fn, index, tostring(file)), 3)
      end
      files[file] = true
    end
    for _, file in ipairs(sorted_keys(files)) do
      local path = join(dir, file)
      local ok, t = pcall(attn.load, path, "safetensors")
      if not ok then error(("%s: %s"):format(fn, t), 3) end
      for k, v in pairs(t) do
        if all[k] then error(("%s: tensor '%s' is in two shards ('%s')"):format(fn, k, path), 3) end
        all[k] = v
      end
    end
    return all, index
  end
  local others = {}
  for _, f in ipairs({"pytorch_model.bin", "tf_model.h5", "flax_model.msgpack", "model.ckpt.index"}) do
    if exists(join(dir, f)) then others[#others + 1] = f end
  end
  if #others > 0 then
    error(("%s: '%s' has no model.safetensors, only %s, which attn cannot read; convert it with torch: "
      .. "python3 -c \"import torch; from safetensors.torch import save_file; "
      .. "sd = torch.load('pytorch_model.bin', map_location='cpu'); "
      .. "save_file({k: v.clone().contiguous() for k, v in sd.items()}, 'model.safetensors')\" "
      .. "(or download model.safetensors from the model's page)"):format(fn, dir, table.concat(others, ", ")), 3)
  end
  error(("%s: '%s' has no model.safetensors (nor model.safetensors.index.json)"):format(fn, single), 3)
end

-- Checkpoint names -> BertModel names: drops the "bert." prefix (keys
-- outside it are task heads, left unused), renames LayerNorm gamma/beta,
-- sets the buffers aside.  Returns names -> tensors, unused keys.
local function normalise(tensors, path, fn)
  local prefixed = false
  for k in pairs(tensors) do
    if k:sub(1, 5) == "bert." then prefixed = true break end
  end
  local out, origin, unused = {}, {}, {}
  for _, k in ipairs(sorted_keys(tensors)) do
    local name = k
    if prefixed then name = k:sub(1, 5) == "bert." and k:sub(6) or nil end
    if name then
      name = name:gsub("%.gamma$", ".weight"):gsub("%.beta$", ".bias")
      if name == "embeddings.position_ids" or name == "embeddings.token_type_ids" then name = nil end
    end
    if name == nil then
      unused[#unused + 1] = k
    elseif out[name] then
      error(("%s: '%s' holds both %s and %s"):format(fn, path, origin[name], k), 3)
    else
      out[name], origin[name] = tensors[k], k
    end
  end
  return out, unused, origin
end

-- A pruned checkpoint (config.json's pruned_heads): each pruned layer's
-- query/key/value rows and output.dense columns back at their full
-- shapes, zeros for the pruned heads, so that the model builds as usual;
-- BertModel's init then prunes those heads again (the zeros go).  A
-- tensor of another shape is left for the shape check to report.
local function unprune(named, c)
  local H = c.num_attention_heads
  local hd = c.hidden_size // H
  for l, heads in pairs(c.pruned_heads) do
    local gone = {}
    for _, h in ipairs(heads) do gone[h] = true end
    local width = (H - #heads) * hd
    local pre = ("encoder.layer.%d.attention."):format(l - 1)
    local function expand(name, dim)
      local t = named[name]
      if t == nil or t:dim() < dim or t:shape()[dim] ~= width then return end
      local parts, pos = {}, 0
      for h = 1, H do
        if gone[h] then
          local s = t:shape()
          s[dim] = hd
          parts[h] = attn.zeros(s)
        else
          parts[h] = t:narrow(dim, pos * hd + 1, hd)
          pos = pos + 1
        end
      end
      named[name] = attn.cat(parts, dim)
    end
    for _, m in ipairs({"query", "key", "value"}) do
      expand(pre .. "self." .. m .. ".weight", 1)
      expand(pre .. "self." .. m .. ".bias", 1)
    end
    expand(pre .. "output.dense.weight", 2)
  end
end

--- from_pretrained(dir [, opts]) -> model (eval mode), info
-- @usage
-- local bert = require "attn.bert"
-- local dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir)
-- local tiny = '{"vocab_size": 30, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, '
--   .. '"intermediate_size": 16, "max_position_embeddings": 16}'
-- local f = assert(io.open(dir .. "/config.json", "w")); f:write(tiny); f:close()
-- bert.BertModel(bert.json_decode(tiny)):save(dir .. "/model.safetensors")
-- local model = bert.from_pretrained(dir, {add_pooling_layer = false})   -- e.g. a bert-base-uncased download
-- print(model(attn.tensor({{2, 5}})).last_hidden_state.shape)
-- os.execute("rm -rf " .. dir)
function bert.from_pretrained(dir, opts)
  local fn = "bert.from_pretrained"
  if type(dir) ~= "string" then error(("%s: expected a directory name (got %s)"):format(fn, type(dir)), 2) end
  opts = check_options(opts, fn, {add_pooling_layer = true, requires_grad = true})
  opt_bool(opts.add_pooling_layer, true, fn, "add_pooling_layer")
  opt_bool(opts.requires_grad, true, fn, "requires_grad")
  need_io(fn, 2)
  local cfg_path = join(dir, "config.json")
  if not exists(cfg_path) then error(("%s: no config.json in '%s'"):format(fn, dir), 2) end
  local raw = read_json(cfg_path, fn)
  if type(raw) ~= "table" or raw[1] ~= nil then
    error(("%s: '%s' does not hold a JSON object"):format(fn, cfg_path), 2)
  end
  local ok, c = pcall(bert.config, raw, "'" .. cfg_path .. "'")
  if not ok then error(c, 2) end
  local tensors, path = load_weights(dir, fn)
  local named, unused, origin = normalise(tensors, path, fn)
  tensors = nil -- luacheck: ignore (the task heads can go with the next collection)
  if c.pruned_heads and next(c.pruned_heads) then unprune(named, c) end
  local pooling = opts.add_pooling_layer ~= false
  local missing = {}
  if pooling and named["pooler.dense.weight"] == nil and named["pooler.dense.bias"] == nil then
    pooling = false
    missing = {"pooler.dense.weight", "pooler.dense.bias"}
  end
  local src = new_source(named, path, opts.requires_grad)
  local model = BertModel(c, {add_pooling_layer = pooling}, src)
  local problems = {}
  for _, e in ipairs(src.errors) do problems[#problems + 1] = e end
  if #src.missing > 0 then problems[#problems + 1] = "missing " .. table.concat(src.missing, ", ") end
  if #problems > 0 then
    error(("%s: '%s' does not fit config.json (hidden_size %d, %d layers, vocab_size %d): %s"):format(fn, path,
      c.hidden_size, c.num_hidden_layers, c.vocab_size, table.concat(problems, "; ")), 2)
  end
  for _, name in ipairs(sorted_keys(named)) do
    if not src.used[name] then unused[#unused + 1] = origin[name] end
  end
  table.sort(unused)
  named, src = nil, nil -- luacheck: ignore
  collectgarbage() -- frees the unused tensors (task heads) now, not at some later step
  model:eval()
  return model, {config = c, path = path, unused_keys = unused, missing_keys = missing}
end

--- BertModel.from_pretrained(dir [, opts]): bert.from_pretrained (call it
-- with a dot).  transformers.BertModel.from_pretrained.
-- @usage
-- local bert = require "attn.bert"
-- local dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir)
-- local tiny = '{"vocab_size": 30, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, '
--   .. '"intermediate_size": 16, "max_position_embeddings": 16}'
-- local f = assert(io.open(dir .. "/config.json", "w")); f:write(tiny); f:close()
-- bert.BertModel(bert.json_decode(tiny)):save(dir .. "/model.safetensors")   -- a Hugging Face folder's two files
-- local model, info = bert.BertModel.from_pretrained(dir)
-- print(#info.missing_keys)                                     -- 0
-- os.execute("rm -rf " .. dir)
BertModel.from_pretrained = function(dir, opts)
  if type(dir) == "table" and dir == BertModel then
    error("BertModel.from_pretrained: call it with a dot: bert.BertModel.from_pretrained(dir)", 2)
  end
  return bert.from_pretrained(dir, opts)
end

-- A call of a Source method with '.' says to write ':'.
attn._misuse.guard_class(Source, "source")

-- the signatures (attn/signature.lua).  A config is a string-keyed table
-- itself, so the building blocks' (config, src, prefix) and
-- bert.from_pretrained's options are read by the functions themselves
-- (native); Hugging Face's names for BertModel's forward.
local signature = require "attn.signature"
signature.declare(bert, "bert.", {
  config = "t, source=nil", read_config = false, json_decode = "text, name=nil",
  from_pretrained = "native: dir, /, *, add_pooling_layer=true, requires_grad=false",
})
signature.declare(BertModel, "bert.BertModel.", {
  init = "native: self, config, /, *, add_pooling_layer=true",
  forward = "native: self, input_ids, /, *, attention_mask=nil, token_type_ids=nil, position_ids=nil, "
    .. "output_attentions=false, output_hidden_states=false, head_mask=nil",
  from_pretrained = "native: dir, /, *, add_pooling_layer=true, requires_grad=false",
  extra_repr = false, prune_heads = false,
})
for _, name in ipairs({"BertEmbeddings", "BertSelfAttention", "BertSelfOutput", "BertAttention", "BertIntermediate",
                       "BertOutput", "BertLayer", "BertEncoder", "BertPooler"}) do
  signature.declare(bert[name], "bert." .. name .. ".", {init = false})
end
signature.declare(bert.BertEmbeddings, "bert.BertEmbeddings.", {
  forward = "self, input_ids, token_type_ids, position_ids"})
for _, name in ipairs({"BertSelfAttention", "BertAttention", "BertLayer"}) do
  signature.declare(bert[name], "bert." .. name .. ".", {
    forward = "self, hidden_states, attention_mask=nil, need_weights=false, head_mask=nil"})
end
signature.declare(bert.BertAttention, "bert.BertAttention.", {prune_heads = false})
signature.declare(bert.BertEncoder, "bert.BertEncoder.", {
  forward = "self, hidden_states, attention_mask=nil, output_attentions=false, output_hidden_states=false, "
    .. "head_mask=nil"})
for _, name in ipairs({"BertSelfOutput", "BertIntermediate", "BertOutput", "BertPooler"}) do
  signature.declare(bert[name], "bert." .. name .. ".", {forward = false})
end

return bert
