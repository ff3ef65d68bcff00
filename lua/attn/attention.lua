-- SPDX-License-Identifier: MIT

--- attn.attention: attention modules and their building blocks.
--
-- Every class here is also reachable as attn.nn.<Name> (attn.nn loads this
-- file on the first lookup of a name it does not have).  The building
-- blocks and the argument checks are in attention/blocks.lua, the
-- positional encodings in attention/positional.lua; both fill this
-- module's table, which this file completes with the modules.
--
-- Building blocks (functions of this table):
--   split_heads(x [..., L, H*D], H) -> [..., H, L, D];  combine_heads (inverse)
--   causal_mask(L [, S] [, {bottom_right=}]), padding_mask(lengths, S)
--       (attn's, keep-masks for scaled_dot_product_attention: 1 = take part)
--   KVCache() for step-by-step decoding
--   sinusoidal_table(max_len, d_model)
--   rope_inv_freq(dim [, base]), rope_cos_sin(dim, positions [, base]),
--   rotate_half(x), apply_rotary(q, k, positions [, base])
--   alibi_slopes(n), alibi_bias(n_heads, L [, S] [, {symmetric=}])
--
-- Modules:
--   SelfAttention, MultiHeadAttentionWrapper, CausalSelfAttention,
--   CrossAttention     after Sebastian Raschka's "Understanding and coding
--                      self-attention" (and its notebook)
--   MultiheadAttention torch.nn.MultiheadAttention (torch 1.13) parity
--   GroupedQueryAttention, MultiQueryAttention   fewer KV heads, KV cache, RoPE
--   PositionalEncoding (sinusoidal), LearnedPositionalEncoding,
--   RotaryEmbedding, ALiBi
--
-- MASK CONVENTIONS -- they differ between the two torch APIs, and each API
-- here follows its own torch counterpart:
--   * attn.scaled_dot_product_attention (torch 2.x SDPA), and every module
--     in this file except MultiheadAttention: a boolean mask value 1/true
--     means "TAKE PART" (the key is visible); attn_mask_kind = "bool".
--   * MultiheadAttention (torch.nn.MultiheadAttention): a boolean mask
--     value 1/true means "NOT ALLOWED to attend" (masked out), for both
--     attn_mask and key_padding_mask; attn_mask_kind = "bool" there means
--     that.  Float ("additive") masks are added to the scores in both APIs.
-- As in torch, a bool tensor (attn.bool: comparisons, a Lua table of
-- booleans) is a bool mask and a float tensor an additive one, so the
-- *_kind options are only needed to read a float 0/1 tensor as a bool
-- mask (attn_mask_kind = "bool"); they still work as before.
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
require "attn.nn.layers"
local nn = require "attn.nn.containers"
local init = require "attn.nn_init"
local signature = require "attn.signature"

local M = require "attn.attention.positional" -- with attention/blocks.lua

local sdpa = attn.scaled_dot_product_attention

local U = M._util
local fmt_shape, check_size, check_options, check_tensor, check_bool, mask_arg, seq_len = U.fmt_shape,
  U.check_size, U.check_options, U.check_tensor, U.check_bool, U.mask_arg, U.seq_len
local KVCache = M.KVCacheClass
-- x @ w^T + b over any leading dims; w [out, in], b [out] or nil: the
-- core's one-node linear (same arithmetic as matmul(x, w:t()) + b; its
-- backward adds a leaf weight's gradient straight into .grad)
local linear = attn.linear

--------------------------------------------------------------------------
-- Raschka's self-attention modules
--
-- Parameters are bare matrices [d_in, d_out] used as x @ W, drawn in the
-- order w_query, w_key, w_value with randn as in the notebook (the seed's
-- SelfAttention class), so that attn.manual_seed(123) gives torch's
-- weights for torch.manual_seed(123); {init = "rand"} draws them with
-- rand instead, as the article's version of the class does.
-- @section raschka_s_self

local function draw(kind, rows, cols)
  if kind == "rand" then return attn.rand(rows, cols) end
  return attn.randn(rows, cols)
end

local function init_kind(opts, fn)
  local kind = opts.init
  if kind == nil then kind = "randn" end
  if kind ~= "randn" and kind ~= "rand" then
    error(("%s: init must be \"randn\" or \"rand\" (got %s)"):format(fn, tostring(kind)), 3)
  end
  return kind
end

local function check_input(x, fn, name, width)
  check_tensor(x, fn, name)
  local s = x:shape()
  if #s < 2 or s[#s] ~= width then
    error(("%s: %s must be [L, %d] or [B, L, %d], got %s"):format(fn, name, width, width, fmt_shape(s)), 3)
  end
  return x
end

local function need_weights_opt(opts, fn)
  opts = check_options(opts, fn, {need_weights = true})
  return check_bool(opts.need_weights, fn, "need_weights") == true
end

local SelfAttention = nn.Module:extend("SelfAttention")
M.SelfAttention = SelfAttention

--- SelfAttention(d_in, d_out_kq, d_out_v [, {init = "randn"}]):
-- forward(x [L, d_in] or [B, L, d_in] [, {need_weights = false}]) ->
-- softmax(q k^T / sqrt(d_out_kq)) v  [..., L, d_out_v]  (and the weights
-- [..., L, L] with need_weights), with q = x @ w_query, k = x @ w_key,
-- v = x @ w_value.
-- @usage
-- local sa = nn.SelfAttention(3, 2, 4)                             -- d_in, d_out_kq, d_out_v (the notebook's)
-- local y, w = sa(attn.randn(6, 3), true)
-- print(y.shape, w.shape)                                          -- [6, 4] [6, 6]
function SelfAttention:init(d_in, d_out_kq, d_out_v, init_)
  local name = self:_get_name()
  local kind = init_kind({init = init_}, name)
  self.d_in = check_size(d_in, name, "d_in", true)
  self.d_out_kq = check_size(d_out_kq, name, "d_out_kq", true)
  self.d_out_v = check_size(d_out_v, name, "d_out_v", true)
  self.w_query = nn.Parameter(draw(kind, self.d_in, self.d_out_kq))
  self.w_key = nn.Parameter(draw(kind, self.d_in, self.d_out_kq))
  self.w_value = nn.Parameter(draw(kind, self.d_in, self.d_out_v))
end

-- q, k, v of x
function SelfAttention:_qkv(x, fn)
  check_input(x, fn, "x", self.d_in)
  return x:matmul(self.w_query), x:matmul(self.w_key), x:matmul(self.w_value)
end

--- forward(x [, need_weights = false]) or forward(x, {need_weights =}):
-- softmax(q k^T / sqrt(d_out_kq)) v with q, k, v = x @ w_query,
-- x @ w_key, x @ w_value (fused SDPA).
-- @tparam Tensor x [L, d_in] or [B, L, d_in]
-- @tparam[opt] boolean need_weights also return the weights
-- @treturn Tensor [..., L, d_out_v]
-- @treturn[opt] Tensor weights [..., L, L]
function SelfAttention:forward(x, need_weights)
  local nw = need_weights_opt({need_weights = need_weights}, "SelfAttention")
  local q, k, v = self:_qkv(x, "SelfAttention")
  -- SDPA's default scale is 1/sqrt(d_out_kq), the article's
  return sdpa(q, k, v, {need_weights = nw})
end

--- extra_repr(): "d_in=.., d_out_kq=.., d_out_v=..".
function SelfAttention:extra_repr()
  return ("d_in=%d, d_out_kq=%d, d_out_v=%d"):format(self.d_in, self.d_out_kq, self.d_out_v)
end

local MultiHeadAttentionWrapper = nn.Module:extend("MultiHeadAttentionWrapper")
M.MultiHeadAttentionWrapper = MultiHeadAttentionWrapper

--- MultiHeadAttentionWrapper(d_in, d_out_kq, d_out_v, num_heads [, {init=}]):
-- num_heads independent SelfAttention heads (a ModuleList "heads", built
-- in order, so the RNG is drawn head by head) whose outputs are
-- concatenated on the last dim: [..., L, num_heads * d_out_v].
-- @usage
-- local mha = nn.MultiHeadAttentionWrapper(8, 4, 3, 2)             -- 2 SelfAttention heads, concatenated
-- print(mha(attn.randn(5, 8)).shape)                               -- attn.Size([5, 6])
function MultiHeadAttentionWrapper:init(d_in, d_out_kq, d_out_v, num_heads, init_)
  local opts = {init = init_}
  num_heads = check_size(num_heads, "MultiHeadAttentionWrapper", "num_heads", true)
  -- one module per head, built in a Lua loop: refuse counts no model has
  if num_heads > (1 << 16) then
    error(("MultiHeadAttentionWrapper: num_heads = %d is too many (at most 65536)"):format(num_heads), 2)
  end
  local heads = {}
  for i = 1, num_heads do heads[i] = SelfAttention(d_in, d_out_kq, d_out_v, opts.init) end
  self.heads = nn.ModuleList(heads)
end

--- forward(x): each head's SelfAttention output, concatenated on the last
-- dim.
-- @tparam Tensor x [L, d_in] or [B, L, d_in]
-- @treturn Tensor [..., L, num_heads * d_out_v]
function MultiHeadAttentionWrapper:forward(x)
  local outs = {}
  for i, head in ipairs(self.heads) do outs[i] = head(x) end
  return attn.cat(outs, -1)
end

local CausalSelfAttention = SelfAttention:extend("CausalSelfAttention")
M.CausalSelfAttention = CausalSelfAttention

local causal_variants = {neg_inf = true, renormalise = true, renormalize = true, fused = true}

--- CausalSelfAttention(d_in, d_out_kq, d_out_v, context_length
-- [, {init=, variant = "neg_inf", dropout = 0}]): SelfAttention (the same
-- parameters, drawn the same way) where query i sees keys j <= i only.
-- The buffer "mask" [context_length, context_length] holds 1 above the
-- diagonal (the future), as the article's triu(ones, diagonal=1).
-- Variants, all equal up to rounding:
--   "neg_inf"      scores:masked_fill(mask, -inf), then softmax (article)
--   "renormalise"  softmax first, zero the future, divide each row by its
--                  sum (the article's first, "simple" version)
--   "fused"        attn.scaled_dot_product_attention with is_causal
-- forward(x [L, d_in] or [B, L, d_in], L <= context_length
-- [, {variant=, need_weights=}]); dropout (a child Dropout) applies to the
-- weights in training.
-- @usage
-- local sa = nn.CausalSelfAttention(8, 4, 6, 10)                   -- d_in, d_kq, d_v, context length
-- local y, w = sa(attn.randn(1, 5, 8), true)                        -- need_weights
-- print(y.shape, w[1][1][2])                                        -- [1, 5, 6] 0.0: no look ahead
function CausalSelfAttention:init(d_in, d_out_kq, d_out_v, context_length, dropout, init_, variant)
  local opts = {init = init_, variant = variant, dropout = dropout}
  SelfAttention.init(self, d_in, d_out_kq, d_out_v, opts.init)
  self.context_length = check_size(context_length, "CausalSelfAttention", "context_length", true)
  variant = opts.variant or "neg_inf"
  if not causal_variants[variant] then
    error(("CausalSelfAttention: variant must be \"neg_inf\", \"renormalise\" or \"fused\" (got %s)")
      :format(tostring(variant)), 2)
  end
  self.variant = variant
  self.dropout = nn.Dropout(opts.dropout == nil and 0.0 or opts.dropout)
  self:register_buffer("mask", attn.ones(self.context_length, self.context_length):triu(1))
end

--- forward(x [, need_weights [, variant]]) or forward(x, {need_weights =,
-- variant =}): causal self-attention with the variant of the constructor
-- (or the one given here); the weights pass through the child Dropout in
-- training.
-- @tparam Tensor x [L, d_in] or [B, L, d_in], L <= context_length
-- @tparam[opt] boolean need_weights also return the weights
-- @tparam[opt] string variant "neg_inf", "renormalise" or "fused"
-- @treturn Tensor [..., L, d_out_v]
-- @treturn[opt] Tensor weights [..., L, L] (with need_weights)
function CausalSelfAttention:forward(x, need_weights, variant)
  local opts = {need_weights = need_weights, variant = variant}
  local nw = check_bool(opts.need_weights, "CausalSelfAttention", "need_weights") == true
  variant = opts.variant or self.variant
  if not causal_variants[variant] then
    error(("CausalSelfAttention: variant must be \"neg_inf\", \"renormalise\" or \"fused\" (got %s)")
      :format(tostring(variant)), 2)
  end
  local q, k, v = self:_qkv(x, "CausalSelfAttention")
  local L = seq_len(x)
  if L > self.context_length then
    error(("CausalSelfAttention: sequence length %d exceeds context_length %d"):format(L, self.context_length), 2)
  end
  if variant == "fused" then
    local p = self.dropout.training and self.dropout.p or 0
    return sdpa(q, k, v, {is_causal = true, dropout_p = p, need_weights = nw})
  end
  local scores = q:matmul(k:transpose(-2, -1))
  local future = self.mask:narrow(1, 1, L):narrow(2, 1, L)
  local scale = math.sqrt(self.d_out_kq)
  local w
  if variant == "neg_inf" then
    w = (scores:masked_fill(future, -math.huge) / scale):softmax(-1)
  else
    w = (scores / scale):softmax(-1)
    local masked = w * (1 - future) -- the article's tril(ones(L, L))
    w = masked / masked:sum(-1, true)
  end
  w = self.dropout(w)
  local out = w:matmul(v)
  if nw then return out, w end
  return out
end

--- extra_repr(): "d_in=.., d_out_kq=.., d_out_v=.., context_length=.., variant=..".
function CausalSelfAttention:extra_repr()
  return ("d_in=%d, d_out_kq=%d, d_out_v=%d, context_length=%d, variant=%s"):format(self.d_in, self.d_out_kq,
    self.d_out_v, self.context_length, self.variant)
end

local CrossAttention = nn.Module:extend("CrossAttention")
M.CrossAttention = CrossAttention

--- CrossAttention(d_in, d_out_kq, d_out_v [, {init=, d_in_kv = d_in}]):
-- forward(x_1 [..., L, d_in], x_2 [..., S, d_in_kv] [, {need_weights=}])
-- -> softmax(q_1 k_2^T / sqrt(d_out_kq)) v_2  [..., L, d_out_v]: queries
-- from x_1, keys and values from x_2 (the article's version).
-- @usage
-- local ca = nn.CrossAttention(8, 4, 6, 10)                        -- queries of size 8, keys/values of size 10
-- local y = ca(attn.randn(1, 3, 8), attn.randn(1, 5, 10))
-- print(y.shape)                                                   -- attn.Size([1, 3, 6])
function CrossAttention:init(d_in, d_out_kq, d_out_v, d_in_kv, init_)
  local opts = {init = init_, d_in_kv = d_in_kv}
  local kind = init_kind(opts, "CrossAttention")
  self.d_in = check_size(d_in, "CrossAttention", "d_in", true)
  self.d_in_kv = check_size(opts.d_in_kv == nil and d_in or opts.d_in_kv, "CrossAttention", "d_in_kv", true)
  self.d_out_kq = check_size(d_out_kq, "CrossAttention", "d_out_kq", true)
  self.d_out_v = check_size(d_out_v, "CrossAttention", "d_out_v", true)
  self.w_query = nn.Parameter(draw(kind, self.d_in, self.d_out_kq))
  self.w_key = nn.Parameter(draw(kind, self.d_in_kv, self.d_out_kq))
  self.w_value = nn.Parameter(draw(kind, self.d_in_kv, self.d_out_v))
end

--- forward(x_1, x_2 [, need_weights = false]) or with {need_weights =}:
-- queries from x_1, keys and values from x_2 (same number of dims).
-- @tparam Tensor x_1 [..., L, d_in]
-- @tparam Tensor x_2 [..., S, d_in_kv]
-- @tparam[opt] boolean need_weights also return the weights
-- @treturn Tensor [..., L, d_out_v]
-- @treturn[opt] Tensor weights [..., L, S] (with need_weights)
function CrossAttention:forward(x_1, x_2, need_weights)
  local nw = need_weights_opt({need_weights = need_weights}, "CrossAttention")
  check_input(x_1, "CrossAttention", "x_1", self.d_in)
  check_input(x_2, "CrossAttention", "x_2", self.d_in_kv)
  if x_1:dim() ~= x_2:dim() then
    error(("CrossAttention: x_1 %s and x_2 %s must have the same number of dims")
      :format(fmt_shape(x_1:shape()), fmt_shape(x_2:shape())), 2)
  end
  return sdpa(x_1:matmul(self.w_query), x_2:matmul(self.w_key), x_2:matmul(self.w_value), {need_weights = nw})
end

--- extra_repr(): "d_in=.., d_out_kq=.., d_out_v=.." and d_in_kv when it
-- differs from d_in.
function CrossAttention:extra_repr()
  local s = ("d_in=%d, d_out_kq=%d, d_out_v=%d"):format(self.d_in, self.d_out_kq, self.d_out_v)
  if self.d_in_kv ~= self.d_in then s = s .. ", d_in_kv=" .. self.d_in_kv end
  return s
end

--------------------------------------------------------------------------
-- MultiheadAttention (torch.nn.MultiheadAttention, torch 1.13)
-- @section multiheadattention

-- torch's out_proj class (a Linear that says so in the module tree)
local NonDynamicallyQuantizableLinear = nn.Linear:extend("NonDynamicallyQuantizableLinear")
M.NonDynamicallyQuantizableLinear = NonDynamicallyQuantizableLinear

local MultiheadAttention = nn.Module:extend("MultiheadAttention")
M.MultiheadAttention = MultiheadAttention

local mha_options = {dropout = true, bias = true, add_bias_kv = true, add_zero_attn = true, kdim = true,
                     vdim = true, batch_first = true}

--- MultiheadAttention(embed_dim, num_heads [, opts]) with opts {dropout = 0,
-- bias = true, add_bias_kv = false, add_zero_attn = false, kdim = embed_dim,
-- vdim = embed_dim, batch_first = false}, or torch's positional order
-- MultiheadAttention(embed_dim, num_heads, dropout, bias, add_bias_kv,
-- add_zero_attn, kdim, vdim, batch_first).
--
-- Parameters, named and initialised as torch's (so a torch state_dict
-- loads as is, and attn.manual_seed(s) gives torch's weights):
--   in_proj_weight [3E, E] (when kdim == vdim == E) or q_proj_weight [E, E],
--   k_proj_weight [E, kdim], v_proj_weight [E, vdim];  in_proj_bias [3E];
--   bias_k, bias_v [1, 1, E] (add_bias_kv);  out_proj (weight [E, E], bias [E]).
-- RNG order: out_proj is a Linear built first (its own kaiming-uniform
-- weight and uniform bias draws), then xavier_uniform_ on in_proj_weight
-- (or q, k, v in that order), zeros for in_proj_bias and out_proj.bias,
-- xavier_normal_ on bias_k then bias_v.
-- @usage
-- local mha = nn.MultiheadAttention(16, 2, {batch_first = true})
-- local x = attn.randn(1, 6, 16)
-- local out, weights = mha(x, x, x, {attn_mask = attn.causal_mask(6):eq(0)})   -- true = masked, as torch
-- print(out.shape, weights.shape)                                  -- [1, 6, 16] [1, 6, 6]
function MultiheadAttention:init(embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim, vdim,
                                 batch_first)
  local o
  if type(dropout) == "table" then
    o = check_options(dropout, "MultiheadAttention", mha_options)
  else
    o = {dropout = dropout, bias = bias, add_bias_kv = add_bias_kv, add_zero_attn = add_zero_attn, kdim = kdim,
         vdim = vdim, batch_first = batch_first}
  end
  local E = check_size(embed_dim, "MultiheadAttention", "embed_dim", true)
  local H = check_size(num_heads, "MultiheadAttention", "num_heads", true)
  for _, k in ipairs({"bias", "add_bias_kv", "add_zero_attn", "batch_first"}) do
    check_bool(o[k], "MultiheadAttention", k)
  end
  local p = o.dropout or 0.0
  if p ~= p then p = -1 end -- NaN: refused below
  if type(p) ~= "number" or p < 0 or p > 1 then
    error(("MultiheadAttention: dropout must be a number in [0, 1] (got %s)"):format(tostring(p)), 2)
  end
  self.embed_dim = E
  self.kdim = o.kdim ~= nil and check_size(o.kdim, "MultiheadAttention", "kdim", true) or E
  self.vdim = o.vdim ~= nil and check_size(o.vdim, "MultiheadAttention", "vdim", true) or E
  self._qkv_same_embed_dim = self.kdim == E and self.vdim == E
  self.num_heads = H
  self.dropout = p
  self.batch_first = o.batch_first == true
  self.head_dim = E // H
  if self.head_dim * H ~= E then
    error(("MultiheadAttention: embed_dim must be divisible by num_heads (got %d and %d)"):format(E, H), 2)
  end
  if not self._qkv_same_embed_dim then
    self.q_proj_weight = nn.Parameter(attn.empty(E, E))
    self.k_proj_weight = nn.Parameter(attn.empty(E, self.kdim))
    self.v_proj_weight = nn.Parameter(attn.empty(E, self.vdim))
    self:register_parameter("in_proj_weight", nil)
  else
    self.in_proj_weight = nn.Parameter(attn.empty(3 * E, E))
    self:register_parameter("q_proj_weight", nil)
    self:register_parameter("k_proj_weight", nil)
    self:register_parameter("v_proj_weight", nil)
  end
  local with_bias = o.bias ~= false
  if with_bias then
    self.in_proj_bias = nn.Parameter(attn.empty(3 * E))
  else
    self:register_parameter("in_proj_bias", nil)
  end
  self.out_proj = NonDynamicallyQuantizableLinear(E, E, with_bias)
  if o.add_bias_kv then
    self.bias_k = nn.Parameter(attn.empty(1, 1, E))
    self.bias_v = nn.Parameter(attn.empty(1, 1, E))
  else
    self:register_parameter("bias_k", nil)
    self:register_parameter("bias_v", nil)
  end
  self.add_zero_attn = o.add_zero_attn == true
  self:_reset_parameters()
end

function MultiheadAttention:_reset_parameters()
  if self._qkv_same_embed_dim then
    init.xavier_uniform_(self.in_proj_weight)
  else
    init.xavier_uniform_(self.q_proj_weight)
    init.xavier_uniform_(self.k_proj_weight)
    init.xavier_uniform_(self.v_proj_weight)
  end
  if self.in_proj_bias ~= nil then
    init.constant_(self.in_proj_bias, 0.0)
    init.constant_(self.out_proj.bias, 0.0)
  end
  if self.bias_k ~= nil then init.xavier_normal_(self.bias_k) end
  if self.bias_v ~= nil then init.xavier_normal_(self.bias_v) end
end


-- Pruning heads (Hugging Face's find_pruneable_heads_and_indices): heads
-- is a list of 1-based indices of the ORIGINAL heads (as numbered before
-- any pruning), pruned the set of those pruned already, n_heads the
-- current count.  Returns the heads to prune now (sorted, original
-- numbers; already pruned ones are skipped), the current positions of
-- the heads that stay (1-based) and the set of every pruned head after
-- this call (the module's new pruned_heads).  Out-of-range indices, anything but a
-- list of integers and pruning every head raise, naming fn.
function M._prune_plan(fn, heads, n_heads, pruned)
  if type(heads) ~= "table" or attn.is_tensor(heads) or getmetatable(heads) ~= nil then
    error(("%s: heads must be a list of 1-based head indices, e.g. {1, 3} (got %s)"):format(fn,
      attn.is_tensor(heads) and "a tensor: pass t:tolist()" or type(heads)), 3)
  end
  local original = n_heads
  for _ in pairs(pruned) do original = original + 1 end
  local count, new, n_new = 0, {}, 0
  for _ in pairs(heads) do count = count + 1 end
  if count ~= #heads then
    error(("%s: heads must be a list of 1-based head indices, e.g. {1, 3} (got a table with other keys)")
      :format(fn), 3)
  end
  for i = 1, #heads do
    local h = heads[i]
    local hi = type(h) == "number" and math.tointeger(h) or nil
    if hi == nil then
      error(("%s: heads[%d] must be an integer head index (got %s)"):format(fn, i, tostring(h)), 3)
    end
    if hi < 1 or hi > original then
      error(("%s: head %d is out of range 1..%d (heads are numbered from 1, as before any pruning)")
        :format(fn, hi, original), 3)
    end
    if not pruned[hi] and not new[hi] then new[hi], n_new = true, n_new + 1 end
  end
  if n_new == n_heads then
    error(("%s: pruning these heads would leave none of the %d remaining; keep at least one (a head_mask of "
      .. "zeros switches every head off without changing the module)"):format(fn, n_heads), 3)
  end
  local list, keep, all, pos = {}, {}, {}, 0
  for h = 1, original do
    if new[h] then list[#list + 1] = h end
    if new[h] or pruned[h] then all[h] = true end
    if not pruned[h] then
      pos = pos + 1
      if not new[h] then keep[#keep + 1] = pos end
    end
  end
  return list, keep, all
end

-- The rows of the heads at positions keep (1-based, head_dim rows each),
-- plus offset, as an index tensor for index_select.
function M._head_rows(keep, head_dim, offset)
  local rows = {}
  for _, p in ipairs(keep) do
    for r = 1, head_dim do rows[#rows + 1] = (offset or 0) + (p - 1) * head_dim + r end
  end
  return attn.tensor(rows):long()
end

-- p (a parameter or nil) with the entries idx of dimension dim kept, as a
-- fresh parameter with p's requires_grad (torch's prune_linear_layer:
-- index_select, clone, detach)
function M._prune_param(p, dim, idx)
  if p == nil then return nil end
  local t = attn.no_grad(function() return p:detach():index_select(dim, idx):contiguous() end)
  return nn.Parameter(t, p.requires_grad)
end

-- t [..., n] -> [..., n + 1] with a zero column: torch's pad(mask, (0, 1)),
-- which lets every query see the key that bias_kv / zero_attn append
-- (0 is "allowed" in MHA's bool convention and "add nothing" in additive).
local function pad_col(t)
  local s = t:shape()
  s[#s] = 1
  return attn.cat({t, attn.zeros(s)}, -1)
end

-- MHA-convention mask (bool: non-zero = masked out) -> additive float
local function to_additive(m, kind)
  if kind == "additive" then return m end
  return attn.zeros(m:shape()):masked_fill(m, -math.huge)
end

-- head_mask [H] or [N, H] (unbatched: [H]; a table is converted, a bool
-- or integer tensor read as float) -> the factor of the heads' outputs
-- [1 or N, H, 1, 1]
local function head_mask_arg(m, fn, H, N, batched)
  if m == nil then return nil end
  if type(m) == "table" and not attn.is_tensor(m) then m = attn.tensor(m) end
  check_tensor(m, fn, "head_mask")
  local s = m:shape()
  if not ((#s == 1 and s[1] == H) or (batched and #s == 2 and s[1] == N and s[2] == H)) then
    error(("%s: head_mask must be [num_heads] = [%d]%s (one gate per head), got %s"):format(fn, H,
      batched and (" or [N, num_heads] = [%d, %d]"):format(N, H) or " (the query is unbatched)", fmt_shape(s)), 3)
  end
  if not m:is_floating_point() then m = m:float() end
  return m:reshape(#s == 1 and 1 or N, H, 1, 1)
end

--- forward(query, key, value [, opts]) -> attn_output, attn_weights (nil
-- unless need_weights).
-- Shapes (L target, S source length, N batch, E embed_dim):
--   query [L, N, E] ([N, L, E] with batch_first) or unbatched [L, E];
--   key [S, N, kdim], value [S, N, vdim] likewise (key defaults to query,
--   value to key).
-- opts:
--   key_padding_mask  [N, S] (unbatched: [S]) with key_padding_mask_kind
--   attn_mask         [L, S] or [N * num_heads, L, S] with attn_mask_kind
--       TORCH MHA CONVENTION: for kind "bool", 1/true = NOT allowed to
--       attend (the opposite of scaled_dot_product_attention's); kind
--       "additive" masks are added to the scores.  Tables of Lua booleans
--       are bool masks.  Both masks combine (a key is hidden if either
--       hides it; additive values add).
--   need_weights = true, average_attn_weights = true: the weights
--       [N, L, S] averaged over heads, or [N, num_heads, L, S] ([L, S] /
--       [num_heads, L, S] unbatched), after dropout like torch's.
--   is_causal = false: torch 2.x's hint that attn_mask is the causal mask
--       (attn_mask is required with it).  Without key_padding_mask,
--       need_weights, bias_kv and zero_attn, the fused kernel's causal
--       masking replaces the mask; otherwise the mask is used as given.
-- The attention itself is attn.scaled_dot_product_attention: the fused
-- kernel when the weights are not needed and dropout is 0 (eval mode or
-- dropout = 0), the explicit path (torch's math) otherwise.  Unlike torch
-- 1.13 (NaN), a query whose every key is masked gets a zero output row and
-- zero weights (torch 2.5's safe softmax).  A float key_padding_mask next
-- to a bool attn_mask is added (torch 2.x's _canonical_mask), where torch
-- 1.13 would read its non-zero values as "masked".
--
-- head_mask (attn's, after torch's arguments): a float tensor [num_heads]
-- or [N, num_heads] (unbatched: [num_heads]) that multiplies each head's
-- attention output (the SDPA result, before the heads are concatenated
-- and out_proj applies): Michel, Levy and Neubig's (2019) gates xi_h, 1
-- keeps a head and 0 removes it.  It takes part in autograd, so a mask
-- with requires_grad gets d loss / d xi (attn.viz.head_importance).  It
-- multiplies the heads' outputs, which equals multiplying their
-- attention probabilities (Hugging Face's head_mask); the returned weights
-- are the probabilities without it.  After prune_heads it has one entry
-- per remaining head.
function MultiheadAttention:forward(query, key, value, key_padding_mask, need_weights, attn_mask,
                                    average_attn_weights, is_causal, key_padding_mask_kind, attn_mask_kind,
                                    head_mask)
  local fn = "MultiheadAttention"
  local opts = {key_padding_mask = key_padding_mask, need_weights = need_weights, attn_mask = attn_mask,
    average_attn_weights = average_attn_weights, is_causal = is_causal,
    key_padding_mask_kind = key_padding_mask_kind, attn_mask_kind = attn_mask_kind}
  if key == nil then key = query end
  if value == nil then value = key end
  check_tensor(query, fn, "query")
  check_tensor(key, fn, "key")
  check_tensor(value, fn, "value")
  need_weights = opts.need_weights ~= false
  local average = opts.average_attn_weights ~= false
  check_bool(opts.need_weights, fn, "need_weights")
  check_bool(opts.average_attn_weights, fn, "average_attn_weights")
  is_causal = check_bool(opts.is_causal, fn, "is_causal") == true
  local kpm, kpm_kind = mask_arg(opts.key_padding_mask, opts.key_padding_mask_kind, fn, "key_padding_mask")
  local am, am_kind = mask_arg(opts.attn_mask, opts.attn_mask_kind, fn, "attn_mask")
  local E, H = self.embed_dim, self.num_heads
  local D = H * self.head_dim -- the projections' width: E, less after prune_heads

  -- torch's _mha_shape_check
  local is_batched = query:dim() == 3
  local nd = query:dim()
  if nd == 3 or nd == 2 then
    local kind = is_batched and "batched (3-D)" or "unbatched (2-D)"
    if key:dim() ~= nd or value:dim() ~= nd then
      error(("%s: for %s query, expected key and value to be %d-D but found %d-D and %d-D tensors")
        :format(fn, kind, nd, key:dim(), value:dim()), 2)
    end
    if kpm and kpm:dim() ~= nd - 1 then
      error(("%s: for %s query, expected key_padding_mask to be nil or %d-D but found %d-D")
        :format(fn, kind, nd - 1, kpm:dim()), 2)
    end
  else
    error(("%s: query should be unbatched 2-D or batched 3-D but received a %d-D tensor"):format(fn, query:dim()), 2)
  end
  if am and am:dim() ~= 2 and am:dim() ~= 3 then
    error(("%s: expected attn_mask to be nil, 2-D or 3-D but found %d-D"):format(fn, am:dim()), 2)
  end
  if is_causal and am == nil then
    error(fn .. ": is_causal needs attn_mask (it is a hint that attn_mask is the causal mask; "
      .. "attn.causal_mask(L) gives SDPA's keep-mask, so 1 - attn.causal_mask(L) is this module's bool mask)", 2)
  end

  -- internal layout: batch first [N, L, E]
  local self_attn = rawequal(query, key) and rawequal(key, value)
  if is_batched then
    if not self.batch_first then
      query, key, value = query:transpose(1, 2), key:transpose(1, 2), value:transpose(1, 2)
    end
  else
    query, key, value = query:unsqueeze(1), key:unsqueeze(1), value:unsqueeze(1)
    if kpm then kpm = kpm:unsqueeze(1) end
  end
  local qs, ks, vs = query:shape(), key:shape(), value:shape()
  local N, L, S = qs[1], qs[2], ks[2]
  if qs[3] ~= E then
    error(("%s: was expecting embedding dimension of %d, but got %d"):format(fn, E, qs[3]), 2)
  end
  if ks[3] ~= self.kdim or vs[3] ~= self.vdim then
    error(("%s: key %s and value %s must have kdim = %d and vdim = %d features")
      :format(fn, fmt_shape(key:shape()), fmt_shape(value:shape()), self.kdim, self.vdim), 2)
  end
  if ks[1] ~= N or vs[1] ~= N or vs[2] ~= S then
    error(("%s: key %s and value %s do not match query %s in batch and source length")
      :format(fn, fmt_shape(key:shape()), fmt_shape(value:shape()), fmt_shape(query:shape())), 2)
  end
  local hm = head_mask_arg(head_mask, fn, H, N, is_batched)

  -- in-projection (torch's _in_projection_packed / _in_projection)
  local q, k, v
  local b = self.in_proj_bias
  local bq, bk, bv
  if b ~= nil then bq, bk, bv = b:narrow(1, 1, D), b:narrow(1, D + 1, D), b:narrow(1, 2 * D + 1, D) end
  if self._qkv_same_embed_dim then
    local w = self.in_proj_weight
    if self_attn then
      q, k, v = linear(query, w, b):chunk(3, -1)
    else
      q = linear(query, w:narrow(1, 1, D), bq)
      k = linear(key, w:narrow(1, D + 1, D), bk)
      v = linear(value, w:narrow(1, 2 * D + 1, D), bv)
    end
  else
    q = linear(query, self.q_proj_weight, bq)
    k = linear(key, self.k_proj_weight, bk)
    v = linear(value, self.v_proj_weight, bv)
  end

  -- masks (MHA convention) with their shapes checked against the source
  -- length before bias_kv / zero_attn add keys
  if am then
    local s = am:shape()
    if am:dim() == 2 and (s[1] ~= L or s[2] ~= S) then
      error(("%s: the shape of the 2-D attn_mask is %s, but should be %s"):format(fn, fmt_shape(s),
        fmt_shape({L, S})), 2)
    elseif am:dim() == 3 and (s[1] ~= N * H or s[2] ~= L or s[3] ~= S) then
      error(("%s: the shape of the 3-D attn_mask is %s, but should be %s"):format(fn, fmt_shape(s),
        fmt_shape({N * H, L, S})), 2)
    end
  end
  if kpm then
    local s = kpm:shape()
    if s[1] ~= N or s[2] ~= S then
      error(("%s: expecting key_padding_mask shape of %s, but got %s"):format(fn,
        fmt_shape(is_batched and {N, S} or {S}), fmt_shape(is_batched and s or {s[2]})), 2)
    end
  end

  -- bias_k / bias_v: one more key and value for every sequence
  if self.bias_k ~= nil then
    k = attn.cat({k, self.bias_k:expand(N, 1, D)}, 2)
    v = attn.cat({v, self.bias_v:expand(N, 1, D)}, 2)
    if am then am = pad_col(am) end
    if kpm then kpm = pad_col(kpm) end
  end

  q, k, v = M.split_heads(q, H), M.split_heads(k, H), M.split_heads(v, H) -- [N, H, *, hd]

  -- add_zero_attn: a zero key and value after the others
  if self.add_zero_attn then
    local zs = k:shape()
    zs[3] = 1
    k = attn.cat({k, attn.zeros(zs)}, 3)
    v = attn.cat({v, attn.zeros(zs)}, 3)
    if am then am = pad_col(am) end
    if kpm then kpm = pad_col(kpm) end
  end
  local S2 = k:shape()[3]

  -- one mask for SDPA, in SDPA's convention
  local fused_causal = is_causal and kpm == nil and not need_weights and self.bias_k == nil
    and not self.add_zero_attn
  local mask, mask_kind
  if not fused_causal then
    if am and am:dim() == 3 then am = am:reshape(N, H, L, S2) end -- [N*H, L, S'] -> [N, H, L, S']
    if kpm then kpm = kpm:reshape(N, 1, 1, S2) end
    if (am == nil or am_kind == "bool") and (kpm == nil or kpm_kind == "bool") then
      -- keep = neither mask hides the key (SDPA: 1 = take part)
      if am then mask = am:eq(0) end
      if kpm then mask = mask and mask * kpm:eq(0) or kpm:eq(0) end
      mask_kind = mask and "bool" or nil
    else
      if am then mask = to_additive(am, am_kind) end
      if kpm then
        local a = to_additive(kpm, kpm_kind)
        mask = mask and mask + a or a
      end
      mask_kind = "additive"
    end
  end

  local dropout_p = self.training and self.dropout or 0.0
  local out, w = sdpa(q, k, v, {attn_mask = mask, attn_mask_kind = mask_kind, is_causal = fused_causal,
                                dropout_p = dropout_p, need_weights = need_weights})
  if hm then out = out * hm end -- each head's output times its gate
  out = self.out_proj(M.combine_heads(out)) -- [N, L, E]
  if is_batched then
    if not self.batch_first then out = out:transpose(1, 2) end
  else
    out = out:squeeze(1)
  end
  if not need_weights then return out, nil end
  if average then w = w:sum(2) / H end -- [N, L, S'] (torch: sum over heads / num_heads)
  if not is_batched then w = w:squeeze(1) end
  return out, w
end

--- prune_heads(heads): removes the heads listed (1-based indices of the
-- original heads, as before any pruning) from the module: their rows of
-- the in-projection (in_proj_weight and in_proj_bias, or q_proj_weight,
-- k_proj_weight, v_proj_weight), of bias_k and bias_v, and their columns
-- of out_proj.weight.  num_heads drops; head_dim and embed_dim (the
-- input and output width) stay, so the output keeps its shape and equals
-- the unpruned module's with a head_mask of 0 for those heads.  Heads
-- pruned before are skipped (self.pruned_heads, a set of original
-- indices, records them, as Hugging Face's pruned_heads); an index out of
-- range, or pruning every remaining head, raises.  The parameters are new
-- tensors: make the optimizer after pruning; a pruned module's state_dict
-- loads into a module pruned the same way.  Hugging Face's
-- PreTrainedModel.prune_heads for one layer (torch's MultiheadAttention
-- has none).
-- @tparam {int,...} heads original head indices, 1-based
-- @treturn MultiheadAttention self
-- @usage
-- local mha = nn.MultiheadAttention(8, 4, {batch_first = true})
-- local x = attn.randn(1, 5, 8)
-- local masked = mha(x, x, x, {head_mask = attn.tensor({1, 0, 1, 0})})
-- mha:prune_heads({2, 4})                                          -- heads 2 and 4 of the original four
-- print(mha.num_heads, (mha(x, x, x) - masked):abs():max():item() < 1e-5)   -- 2 true
function MultiheadAttention:prune_heads(heads)
  local fn = "MultiheadAttention:prune_heads"
  local pruned = self.pruned_heads or {}
  local new, keep, all = M._prune_plan(fn, heads, self.num_heads, pruned)
  if #new == 0 then return self end
  local hd, D = self.head_dim, self.num_heads * self.head_dim
  local rows = M._head_rows(keep, hd)
  -- the same heads' rows of q, k and v packed one after the other
  local packed = attn.cat({rows, M._head_rows(keep, hd, D), M._head_rows(keep, hd, 2 * D)})
  if self._qkv_same_embed_dim then
    self.in_proj_weight = M._prune_param(self.in_proj_weight, 1, packed)
  else
    self.q_proj_weight = M._prune_param(self.q_proj_weight, 1, rows)
    self.k_proj_weight = M._prune_param(self.k_proj_weight, 1, rows)
    self.v_proj_weight = M._prune_param(self.v_proj_weight, 1, rows)
  end
  self.in_proj_bias = M._prune_param(self.in_proj_bias, 1, packed) -- nil stays nil
  if self.bias_k ~= nil then
    self.bias_k = M._prune_param(self.bias_k, 3, rows)
    self.bias_v = M._prune_param(self.bias_v, 3, rows)
  end
  self.out_proj.weight = M._prune_param(self.out_proj.weight, 2, rows)
  self.out_proj.in_features = #keep * hd
  self.num_heads = #keep
  self.pruned_heads = all
  return self
end

--------------------------------------------------------------------------
-- Grouped-query / multi-query attention
-- @section grouped_query_multi

local GroupedQueryAttention = nn.Module:extend("GroupedQueryAttention")
M.GroupedQueryAttention = GroupedQueryAttention

--- GroupedQueryAttention(d_model, n_heads, n_kv_heads [, {bias = true,
-- causal = false, dropout = 0, rope = false, rope_base = 10000}]):
-- n_heads query heads of head_dim = d_model / n_heads share n_kv_heads key
-- and value heads (query head h reads kv head floor(h / (n_heads /
-- n_kv_heads)), torch's repeat_interleave order); n_kv_heads = 1 is
-- multi-query attention, n_kv_heads = n_heads ordinary multi-head.
-- Children q_proj [d_model -> n_heads*hd], k_proj, v_proj [d_model ->
-- n_kv_heads*hd], o_proj [n_heads*hd -> d_model] (Linears, built in that
-- order).  With rope, queries and keys are rotated (apply_rotary) at their
-- absolute positions.
--
-- forward(x [B, L, d_model] or [L, d_model] [, opts]) -> y (and the
-- weights [B, n_heads, L, S] with need_weights), opts:
--   cache         a KVCache: the new keys/values are appended to it and the
--                 queries (positions T .. T+L-1, T = cache:length()) attend
--                 to all T + L keys, bottom-right causally aligned
--   attn_mask, attn_mask_kind  SDPA's convention (bool: 1 = take part),
--                 broadcastable to [B, n_heads, L, S]; combined with causal
--   need_weights  false
-- @usage
-- local gqa = nn.GroupedQueryAttention(32, 8, 2, {causal = true, rope = true})   -- 8 query heads, 2 kv heads
-- print(gqa(attn.randn(2, 6, 32)).shape)                           -- attn.Size([2, 6, 32])
function GroupedQueryAttention:init(d_model, n_heads, n_kv_heads, bias, causal, dropout, rope, rope_base)
  local fn = self:_get_name()
  local opts = {bias = bias, causal = causal, dropout = dropout, rope = rope, rope_base = rope_base}
  self.d_model = check_size(d_model, fn, "d_model", true)
  self.n_heads = check_size(n_heads, fn, "n_heads", true)
  self.n_kv_heads = check_size(n_kv_heads, fn, "n_kv_heads", true)
  if self.d_model % self.n_heads ~= 0 then
    error(("%s: d_model %d is not a multiple of n_heads %d"):format(fn, self.d_model, self.n_heads), 3)
  end
  if self.n_heads % self.n_kv_heads ~= 0 then
    error(("%s: n_heads %d is not a multiple of n_kv_heads %d"):format(fn, self.n_heads, self.n_kv_heads), 3)
  end
  check_bool(opts.bias, fn, "bias")
  check_bool(opts.causal, fn, "causal")
  check_bool(opts.rope, fn, "rope")
  self.head_dim = self.d_model // self.n_heads
  self.causal = opts.causal == true
  local p = opts.dropout
  if p == nil then p = 0.0 end
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    error(("%s: dropout must be a number in [0, 1] (got %s)"):format(fn, tostring(p)), 3)
  end
  self.dropout = p
  self.rope = opts.rope == true
  if opts.rope_base ~= nil and type(opts.rope_base) ~= "number" then
    error(("%s: rope_base must be a number (got %s)"):format(fn, type(opts.rope_base)), 3)
  end
  self.rope_base = opts.rope_base or 10000.0
  if self.rope and self.head_dim % 2 ~= 0 then
    error(("%s: rope needs an even head_dim (got %d)"):format(fn, self.head_dim), 3)
  end
  bias = opts.bias ~= false
  local hd = self.head_dim
  self.q_proj = nn.Linear(self.d_model, self.n_heads * hd, bias)
  self.k_proj = nn.Linear(self.d_model, self.n_kv_heads * hd, bias)
  self.v_proj = nn.Linear(self.d_model, self.n_kv_heads * hd, bias)
  self.o_proj = nn.Linear(self.n_heads * hd, self.d_model, bias)
end

--- forward(x [, attn_mask [, need_weights [, cache [, attn_mask_kind]]]]),
-- or these in an options table: grouped-query attention as described
-- above.
-- @tparam Tensor x [B, L, d_model] or [L, d_model]
-- @tparam[opt] Tensor attn_mask bool: true = takes part, as SDPA; a float
-- mask needs attn_mask_kind
-- @tparam[opt] boolean need_weights also return the weights
-- @tparam[opt] KVCache cache keys and values of the earlier steps
-- @tparam[opt] string attn_mask_kind the kind of a float mask
-- @treturn Tensor y of x's shape
-- @treturn[opt] Tensor weights [B, n_heads, L, S] (with need_weights)
function GroupedQueryAttention:forward(x, attn_mask, need_weights, cache, attn_mask_kind)
  local fn = self:_get_name()
  local opts = {cache = cache, attn_mask = attn_mask, attn_mask_kind = attn_mask_kind, need_weights = need_weights}
  check_tensor(x, fn, "x", {[2] = true, [3] = true})
  local nw = check_bool(opts.need_weights, fn, "need_weights") == true
  local mask, kind = mask_arg(opts.attn_mask, opts.attn_mask_kind, fn, "attn_mask")
  cache = opts.cache
  if cache ~= nil and getmetatable(cache) ~= KVCache then
    error(("%s: cache must be a KVCache (attn.nn.KVCache())"):format(fn), 2)
  end
  local batched = x:dim() == 3
  if not batched then x = x:unsqueeze(1) end
  local s = x:shape()
  if s[3] ~= self.d_model then
    error(("%s: x %s must have d_model = %d features"):format(fn, fmt_shape(s), self.d_model), 2)
  end
  local L = s[2]
  local q = M.split_heads(self.q_proj(x), self.n_heads)     -- [B, H, L, hd]
  local k = M.split_heads(self.k_proj(x), self.n_kv_heads)  -- [B, Hkv, L, hd]
  local v = M.split_heads(self.v_proj(x), self.n_kv_heads)
  local offset = cache and cache:length() or 0
  if self.rope then q, k = M.apply_rotary(q, k, offset, self.rope_base) end
  if cache then k, v = cache:update(k, v) end
  local S = k:shape()[3]
  local o = {enable_gqa = true, need_weights = nw, dropout_p = self.training and self.dropout or 0.0}
  if mask then
    if self.causal then
      local keep = M.causal_mask(L, S, {bottom_right = true})
      if kind == "bool" then
        mask = mask:ne(0) * keep
      else
        mask = mask:masked_fill(keep:eq(0), -math.huge)
      end
    end
    o.attn_mask, o.attn_mask_kind = mask, kind
  elseif self.causal then
    o.is_causal, o.causal_alignment = true, "bottom_right"
  end
  local y, w = sdpa(q, k, v, o)
  y = self.o_proj(M.combine_heads(y))
  if not batched then
    y = y:squeeze(1)
    if w then w = w:squeeze(1) end
  end
  if nw then return y, w end
  return y
end

--- extra_repr(): "d_model=.., n_heads=.., n_kv_heads=.." and causal/rope
-- when set.
function GroupedQueryAttention:extra_repr()
  local s = ("d_model=%d, n_heads=%d, n_kv_heads=%d"):format(self.d_model, self.n_heads, self.n_kv_heads)
  if self.causal then s = s .. ", causal=True" end
  if self.rope then s = s .. ", rope=True" end
  return s
end

local MultiQueryAttention = GroupedQueryAttention:extend("MultiQueryAttention")
M.MultiQueryAttention = MultiQueryAttention

--- MultiQueryAttention(d_model, n_heads [, opts]): GroupedQueryAttention
-- with one key/value head.
-- @usage
-- local mqa = nn.MultiQueryAttention(32, 4, {causal = true})       -- 4 query heads sharing one k and v
-- print(mqa(attn.randn(2, 6, 32)).shape)                           -- attn.Size([2, 6, 32])
function MultiQueryAttention:init(d_model, n_heads, bias, causal, dropout, rope, rope_base)
  GroupedQueryAttention.init(self, d_model, n_heads, 1, bias, causal, dropout, rope, rope_base)
end

-- torch's signatures (attn/signature.lua: a trailing options table); the
-- classes without a torch counterpart take their own, attn's options after
-- the required arguments (init: "randn" or "rand", the weights' draw)
signature.declare(SelfAttention, "attention.SelfAttention.", {
  init = "self, d_in, d_out_kq, d_out_v, init='randn'",
  forward = "self, x, need_weights=false", extra_repr = false})
signature.declare(MultiHeadAttentionWrapper, "attention.MultiHeadAttentionWrapper.", {
  init = "self, d_in, d_out_kq, d_out_v, num_heads, init='randn'", forward = false})
signature.declare(CausalSelfAttention, "attention.CausalSelfAttention.", {
  init = "self, d_in, d_out_kq, d_out_v, context_length, dropout=0.0, init='randn', variant='neg_inf'",
  forward = "self, x, need_weights=false, variant=nil", extra_repr = false})
signature.declare(CrossAttention, "attention.CrossAttention.", {
  init = "self, d_in, d_out_kq, d_out_v, d_in_kv=nil, init='randn'",
  forward = "self, x_1, x_2, need_weights=false", extra_repr = false})
-- torch 1.13's, then torch 2.x's is_causal and attn's mask kinds; torch's
-- device= and dtype= are not taken
signature.declare(MultiheadAttention, "attention.MultiheadAttention.", {
  init = "self, embed_dim, num_heads, dropout=0.0, bias=true, add_bias_kv=false, add_zero_attn=false, "
    .. "kdim=nil, vdim=nil, batch_first=false",
  forward = "self, query, key, value, key_padding_mask=nil, need_weights=true, attn_mask=nil, "
    .. "average_attn_weights=true, is_causal=false, key_padding_mask_kind=nil, attn_mask_kind=nil, head_mask=nil",
  prune_heads = false})
signature.declare(GroupedQueryAttention, "attention.GroupedQueryAttention.", {
  init = "self, d_model, n_heads, n_kv_heads, bias=true, causal=false, dropout=0.0, rope=false, rope_base=10000.0",
  forward = "self, x, attn_mask=nil, need_weights=false, cache=nil, attn_mask_kind=nil", extra_repr = false})
signature.declare(MultiQueryAttention, "attention.MultiQueryAttention.", {
  init = "self, d_model, n_heads, bias=true, causal=false, dropout=0.0, rope=false, rope_base=10000.0"})

return M
