-- SPDX-License-Identifier: MIT

--- attn.transformer: torch.nn's transformer layers (PyTorch 1.13), built
-- on nn.MultiheadAttention.  Reachable as attn.nn.<Name> (attn.nn loads
-- this file on the first lookup) and as attn.transformer.<Name>.
--
--   TransformerEncoderLayer(d_model, nhead [, dim_feedforward = 2048
--       [, dropout = 0.1 [, activation = "relu" [, layer_norm_eps = 1e-5
--       [, batch_first = false [, norm_first = false]]]]]])
--   TransformerDecoderLayer(same arguments)
--   TransformerEncoder(encoder_layer, num_layers [, norm])
--   TransformerDecoder(decoder_layer, num_layers [, norm])
--   Transformer([d_model = 512 [, nhead = 8 [, num_encoder_layers = 6
--       [, num_decoder_layers = 6 [, dim_feedforward = 2048 [, dropout = 0.1
--       [, activation [, custom_encoder [, custom_decoder
--       [, layer_norm_eps [, batch_first [, norm_first]]]]]]]]]]]])
--   Transformer.generate_square_subsequent_mask(sz) -> [sz, sz] float,
--       -inf above the diagonal, 0 elsewhere (torch's)
--
-- Arguments follow torch's positional order; from any position on, the
-- rest may come as one options table with torch's keyword names:
--   nn.TransformerEncoderLayer(16, 4, {dim_feedforward = 32, dropout = 0,
--                                      batch_first = true, norm_first = true})
--   nn.Transformer({d_model = 16, nhead = 4, num_encoder_layers = 2})
-- activation is "relu", "gelu" (erf form), a function x -> y or a module
-- (registered as the child "activation", as torch does).
--
-- forward arguments are torch's too, positional or one options table:
--   layer(src [, src_mask [, src_key_padding_mask]])
--   layer(src, {src_mask = m, src_key_padding_mask = p})
--   dec_layer(tgt, memory [, tgt_mask, memory_mask, tgt_key_padding_mask,
--             memory_key_padding_mask])
--   encoder(src [, mask [, src_key_padding_mask]])
--   decoder(tgt, memory [, tgt_mask, memory_mask, tgt_key_padding_mask,
--           memory_key_padding_mask])
--   transformer(src, tgt [, src_mask, tgt_mask, memory_mask,
--               src_key_padding_mask, tgt_key_padding_mask,
--               memory_key_padding_mask])
-- Masks mean what they mean in torch's nn.MultiheadAttention and go to it
-- untouched: a float mask is added to the attention scores (so
-- generate_square_subsequent_mask's -inf hides the future); a bool mask
-- (a Lua table of booleans, or a bool tensor where attn has them) hides
-- the keys where it is true.  Each mask has a <name>_kind option
-- ("additive" | "bool") that says how to read a float tensor; without it a
-- float tensor is read as additive, except one holding only 0s and 1s with
-- at least one 1, which reads both ways: that one raises and asks for a
-- bool mask or the _kind option.
--
-- Parameter names are torch's (self_attn.in_proj_weight, linear1.weight,
-- norm1.weight, layers.0...., encoder.norm.weight, ...), so a torch
-- state_dict loads as is.  The containers hold deep copies of the layer
-- they are given (torch's _get_clones), and nn.Transformer re-initialises
-- every parameter with more than one dim by xavier_uniform_, like torch.
--
-- Differences from torch 1.13: no fast path (torch's inference-only
-- fused kernels and nested tensors give the same values up to rounding,
-- except that torch's nested-tensor path returns 0 at padded positions of
-- TransformerEncoder's output); a query whose every key is masked gets
-- zeros, not NaN (see nn.MultiheadAttention).
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
require "attn.nn.layers"
local nn = require "attn.nn.containers"
local init = require "attn.nn_init"
local has_hooks = nn._util.has_hooks
local attention = require "attn.attention"

local M = {}

local is_tensor = attn.is_tensor
local is_module = nn.is_module

local function fmt_shape(s)
  return "[" .. table.concat(s, ", ") .. "]"
end

local function type_name(v)
  if is_tensor(v) then return "attn.Tensor" end
  if is_module(v) then return v:_get_name() end
  return type(v)
end

-- A plain Lua table (not a tensor, module or any object with a metatable);
-- one that is not a list (a mask given as a table of booleans is one) is
-- an options table.
local function is_options(v)
  return type(v) == "table" and getmetatable(v) == nil and not is_tensor(v)
end

-- Torch's positional arguments, where an options table may take over at
-- any position: returns {name = value}.  level is the caller's error level.
local function parse_args(fn, names, args, first, level)
  local out = {}
  local known = {}
  for _, n in ipairs(names) do known[n] = true end
  local i = first
  while i <= args.n do
    local v = args[i]
    local k = i - first + 1
    if is_options(v) and #v == 0 then
      -- the options table; it must be the last argument
      if i ~= args.n then
        error(("%s: the options table must be the last argument (argument %d)"):format(fn, i), level)
      end
      for key, val in pairs(v) do
        if not known[key] then
          error(attn._misuse.unknown_option(fn, key, names), level)
        end
        if out[key] ~= nil then
          error(("%s: %s given both by position and in the options table"):format(fn, key), level)
        end
        out[key] = val
      end
      break
    end
    if k > #names then
      error(("%s: too many arguments (%d; expected at most %d)"):format(fn, args.n, first - 1 + #names), level)
    end
    out[names[k]] = v
    i = i + 1
  end
  return out
end

-- at most this many layers in a stack (each one a deep copy)
local MAX_LAYERS = 1 << 16

local function check_layers(v, fn, name, level)
  local i = type(v) == "number" and math.tointeger(v)
  if not i then error(("%s: %s must be an integer (got %s)"):format(fn, name, tostring(v)), level) end
  if i < 0 or i > MAX_LAYERS then
    error(("%s: %s must be in 0..%d (got %d)"):format(fn, name, MAX_LAYERS, i), level)
  end
  return i
end

local function check_size(v, fn, name, positive, level)
  local i = type(v) == "number" and math.tointeger(v)
  if not i then error(("%s: %s must be an integer (got %s)"):format(fn, name, tostring(v)), level) end
  if i < 0 or (positive and i == 0) then
    error(("%s: %s must be %s (got %d)"):format(fn, name, positive and "positive" or "non-negative", i), level)
  end
  if i > (1 << 40) then error(("%s: %s = %d is too large"):format(fn, name, i), level) end
  return i
end

local function check_bool(v, def, fn, name, level)
  if v == nil then return def end
  if type(v) ~= "boolean" then error(("%s: %s must be a boolean (got %s)"):format(fn, name, type(v)), level) end
  return v
end

local function check_prob(v, def, fn, name, level)
  if v == nil then return def end
  if type(v) ~= "number" or not (v >= 0 and v <= 1) then
    error(("%s: %s must be a probability in [0, 1] (got %s)"):format(fn, name, tostring(v)), level)
  end
  return v
end

local function check_eps(v, def, fn, level)
  if v == nil then return def end
  if type(v) ~= "number" or not (v >= 0) then -- luacheck: ignore 581 (NaN must fail)
    error(("%s: layer_norm_eps must be a non-negative number (got %s)"):format(fn, tostring(v)), level)
  end
  return v
end

local function relu(x) return x:relu() end
local function gelu(x) return attn.gelu(x) end

-- activation argument -> the callable stored as self.activation and the
-- name shown by extra_repr ("relu", "gelu" or nil)
local function resolve_activation(a, fn, level)
  if a == nil or a == "relu" then return relu, "relu" end
  if a == "gelu" then return gelu, "gelu" end
  if type(a) == "function" or is_module(a) then return a, nil end
  if type(a) == "table" then
    local mt = getmetatable(a)
    if mt and mt.__call then return a, nil end
  end
  error(("%s: activation should be \"relu\", \"gelu\", a function or a module, not %s")
    :format(fn, type(a) == "string" and ("\"" .. a .. "\"") or type_name(a)), level)
end

--------------------------------------------------------------------------
-- Masks
-- @section masks

-- A tensor's dtype as a string ("float32", "bool", ...), or nil where
-- tensors carry none (float32 only).
local function dtype_of(m)
  local f = attn._methods.dtype
  if f == nil then
    local ok, v = pcall(function() return m.dtype end)
    if not ok or v == nil then return nil end
    if type(v) ~= "function" then return tostring(v) end
    f = v
  end
  local ok, v = pcall(f, m)
  return ok and tostring(v) or nil
end

local function has_boolean(t, depth)
  if depth > 8 then return false end
  for _, v in ipairs(t) do
    if type(v) == "boolean" then return true end
    if type(v) == "table" and has_boolean(v, depth + 1) then return true end
  end
  return false
end

-- A mask and its kind for nn.MultiheadAttention -> mask, kind.  An
-- explicit kind is passed on; a Lua table of booleans and a bool tensor get
-- nil (MultiheadAttention reads them as bool masks); a float tensor (or a
-- Lua table of numbers, made a tensor) is additive unless it is an
-- ambiguous 0/1 tensor.
local function mask_kind(m, kind, fn, name, level)
  if m == nil then
    if kind ~= nil then error(("%s: %s_kind given without %s"):format(fn, name, name), level) end
    return nil
  end
  if kind ~= nil and kind ~= "bool" and kind ~= "additive" then
    error(("%s: %s_kind must be \"bool\" or \"additive\" (got %s)"):format(fn, name, tostring(kind)), level)
  end
  if not is_tensor(m) then
    if type(m) ~= "table" or getmetatable(m) ~= nil then
      error(("%s: %s must be a tensor or a table (got %s)"):format(fn, name, type_name(m)), level)
    end
    if has_boolean(m, 1) then return m, kind end
    local ok, t = pcall(attn.tensor, m)
    if not ok then
      error(("%s: %s: %s"):format(fn, name, tostring(t):gsub("^[^:]*:%d+: ", "")), level)
    end
    m = t
  end
  if kind ~= nil then return m, kind end
  local dt = dtype_of(m)
  if dt then
    if dt:find("bool") then return m, nil end
    if not dt:find("float") then
      error(("%s: %s must be a float or bool tensor (got %s)"):format(fn, name, dt), level)
    end
  end
  if m:numel() > 0 then
    local guard <close> = attn.no_grad()
    local ones = m:eq(1):sum():item()
    if ones > 0 and ones + m:eq(0):sum():item() == m:numel() then
      error(("%s: %s holds only 0s and 1s, which reads two ways: pass a bool mask (true = masked out) or "
        .. "say %s_kind = \"bool\" or \"additive\""):format(fn, name, name), level)
    end
  end
  return m, "additive"
end

-- shape of a mask: tensors by shape(), Lua tables by nesting
local function mask_shape(m)
  if is_tensor(m) then return m:shape() end
  local s = {}
  local t = m
  while type(t) == "table" do
    s[#s + 1] = #t
    t = t[1]
  end
  return s
end

-- Checks an attention mask [L, S] or [N * nhead, L, S] and a key padding
-- mask [N, S] ([S] unbatched) against the shapes.
local function check_attn_mask(m, fn, name, N, H, L, S, level)
  if m == nil then return end
  local s = mask_shape(m)
  local ok = (#s == 2 and s[1] == L and s[2] == S) or (#s == 3 and s[1] == N * H and s[2] == L and s[3] == S)
  if not ok then
    error(("%s: %s has shape %s, expected %s or %s"):format(fn, name, fmt_shape(s), fmt_shape({L, S}),
      fmt_shape({N * H, L, S})), level)
  end
end

local function check_kpm(m, fn, name, batched, N, S, level)
  if m == nil then return end
  local s = mask_shape(m)
  local want = batched and {N, S} or {S}
  local ok = #s == #want
  for i = 1, #want do ok = ok and s[i] == want[i] end
  if not ok then
    error(("%s: %s has shape %s, expected %s"):format(fn, name, fmt_shape(s), fmt_shape(want)), level)
  end
end

-- Checks a sequence input: [L, N, E] ([N, L, E] batch_first) or [L, E];
-- returns batched, N, L.
local function check_seq(x, fn, name, d_model, batch_first, level)
  if not is_tensor(x) then error(("%s: %s must be a tensor (got %s)"):format(fn, name, type_name(x)), level) end
  local s = x:shape()
  if #s ~= 2 and #s ~= 3 then
    error(("%s: %s must be 3-D %s (or 2-D [L, E] unbatched), got %s"):format(fn, name,
      batch_first and "[N, L, E]" or "[L, N, E]", fmt_shape(s)), level)
  end
  if s[#s] ~= d_model then
    error(("%s: %s has %d features, expected d_model = %d (shape %s)"):format(fn, name, s[#s], d_model,
      fmt_shape(s)), level)
  end
  if #s == 2 then return false, 1, s[1] end
  if batch_first then return true, s[1], s[2] end
  return true, s[2], s[1]
end

--------------------------------------------------------------------------
-- Layers
-- @section layers

local layer_names = {"d_model", "nhead", "dim_feedforward", "dropout", "activation", "layer_norm_eps",
                     "batch_first", "norm_first", "device", "dtype"}

-- The parts the encoder and decoder layers share; torch's registration
-- order follows (attention first, then linear1, dropout, linear2).
local function layer_options(fn, args, level)
  local o = parse_args(fn, layer_names, args, 1, level + 1)
  if o.device ~= nil and o.device ~= "cpu" then
    error(("%s: device must be \"cpu\" (got %s)"):format(fn, tostring(o.device)), level)
  end
  if o.dtype ~= nil and o.dtype ~= "float32" then
    error(("%s: dtype must be \"float32\" (got %s)"):format(fn, tostring(o.dtype)), level)
  end
  local r = {
    d_model = check_size(o.d_model, fn, "d_model", true, level + 1),
    nhead = check_size(o.nhead, fn, "nhead", true, level + 1),
    dim_feedforward = check_size(o.dim_feedforward == nil and 2048 or o.dim_feedforward, fn, "dim_feedforward",
      true, level + 1),
    dropout = check_prob(o.dropout, 0.1, fn, "dropout", level + 1),
    layer_norm_eps = check_eps(o.layer_norm_eps, 1e-5, fn, level + 1),
    batch_first = check_bool(o.batch_first, false, fn, "batch_first", level + 1),
    norm_first = check_bool(o.norm_first, false, fn, "norm_first", level + 1),
  }
  if r.d_model % r.nhead ~= 0 then
    error(("%s: d_model must be divisible by nhead (got %d and %d)"):format(fn, r.d_model, r.nhead), level)
  end
  r.activation, r.activation_name = resolve_activation(o.activation, fn, level + 1)
  return r
end

local function set_activation(self, r)
  self.activation = r.activation -- a module becomes the child "activation"
  self.activation_relu_or_gelu = r.activation_name == "relu" and 1 or r.activation_name == "gelu" and 2 or 0
end

local function ff_block(self, x, drop_out)
  return drop_out(self.linear2(self.dropout(self.activation(self.linear1(x)))))
end

-- the options r and the children both layers share, in torch's order:
-- self_attn, multihead_attn (cross: the decoder's), linear1, dropout,
-- linear2, norm1..norm<n>, dropout1..dropout<n>, then the activation
local function layer_children(self, r, cross, n)
  self.d_model, self.nhead, self.dim_feedforward = r.d_model, r.nhead, r.dim_feedforward
  self.dropout_p, self.layer_norm_eps = r.dropout, r.layer_norm_eps
  self.batch_first, self.norm_first = r.batch_first, r.norm_first
  self.self_attn = attention.MultiheadAttention(r.d_model, r.nhead, {dropout = r.dropout, batch_first = r.batch_first})
  if cross then
    self.multihead_attn = attention.MultiheadAttention(r.d_model, r.nhead, {dropout = r.dropout,
                                                                     batch_first = r.batch_first})
  end
  self.linear1 = nn.Linear(r.d_model, r.dim_feedforward)
  self.dropout = nn.Dropout(r.dropout)
  self.linear2 = nn.Linear(r.dim_feedforward, r.d_model)
  for i = 1, n do self["norm" .. i] = nn.LayerNorm(r.d_model, {eps = r.layer_norm_eps}) end
  for i = 1, n do self["dropout" .. i] = nn.Dropout(r.dropout) end
  set_activation(self, r)
end

local TransformerEncoderLayer = nn.Module:extend("TransformerEncoderLayer")
M.TransformerEncoderLayer = TransformerEncoderLayer

--- TransformerEncoderLayer(d_model, nhead [, ...]): self-attention and a
-- feed-forward block, each with a residual connection and a LayerNorm
-- (after the residual, or before the block with norm_first).
-- Children: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1,
-- dropout2 (and activation when it is a module).
-- @usage
-- local layer = nn.TransformerEncoderLayer(16, 4, 64, 0.1, "gelu", 1e-5, true)   -- torch's order
-- print(layer(attn.randn(2, 10, 16)).shape)             -- attn.Size([2, 10, 16])
function TransformerEncoderLayer:init(...)
  layer_children(self, layer_options("TransformerEncoderLayer", table.pack(...), 4), false, 2)
end

-- runs the layer on checked arguments (the containers call this)
function TransformerEncoderLayer:_run(x, m, mk, p, pk)
  local sa = self.self_attn
  local function sa_block(v)
    local out = sa(v, v, v, {attn_mask = m, attn_mask_kind = mk, key_padding_mask = p,
                             key_padding_mask_kind = pk, need_weights = false})
    return self.dropout1(out)
  end
  if self.norm_first then
    x = x + sa_block(self.norm1(x))
    x = x + ff_block(self, self.norm2(x), self.dropout2)
  else
    x = self.norm1(x + sa_block(x))
    x = self.norm2(x + ff_block(self, x, self.dropout2))
  end
  return x
end

local enc_layer_fwd = {"src_mask", "src_key_padding_mask", "src_mask_kind", "src_key_padding_mask_kind"}

-- Checks an encoder input and its masks; returns the masks and kinds.
local function encoder_args(self, fn, src, o, mask_name, level)
  local batched, N, L = check_seq(src, fn, "src", self.d_model, self.batch_first, level + 1)
  local m, mk = mask_kind(o[mask_name], o[mask_name .. "_kind"], fn, mask_name, level + 1)
  local p, pk = mask_kind(o.src_key_padding_mask, o.src_key_padding_mask_kind, fn, "src_key_padding_mask", level + 1)
  check_attn_mask(m, fn, mask_name, N, self.nhead, L, L, level + 1)
  check_kpm(p, fn, "src_key_padding_mask", batched, N, L, level + 1)
  return m, mk, p, pk
end

--- layer(src [, src_mask [, src_key_padding_mask]]) or
-- layer(src, {src_mask=, src_key_padding_mask=, src_mask_kind=,
-- src_key_padding_mask_kind=}) -> the output, shaped as src.
function TransformerEncoderLayer:forward(src, ...)
  local fn = "TransformerEncoderLayer"
  local o = parse_args(fn, enc_layer_fwd, table.pack(...), 1, 3)
  local m, mk, p, pk = encoder_args(self, fn, src, o, "src_mask", 3)
  return self:_run(src, m, mk, p, pk)
end

local TransformerDecoderLayer = nn.Module:extend("TransformerDecoderLayer")
M.TransformerDecoderLayer = TransformerDecoderLayer

--- TransformerDecoderLayer(d_model, nhead [, ...]): self-attention,
-- attention over the encoder's output (memory) and a feed-forward block,
-- each with a residual connection and a LayerNorm.  Children: self_attn,
-- multihead_attn, linear1, dropout, linear2, norm1, norm2, norm3,
-- dropout1, dropout2, dropout3 (and activation when it is a module).
-- @usage
-- local layer = nn.TransformerDecoderLayer(16, 2, {dim_feedforward = 32, batch_first = true})
-- local tgt, memory = attn.randn(2, 4, 16), attn.randn(2, 6, 16)
-- print(layer(tgt, memory, {tgt_mask = nn.Transformer.generate_square_subsequent_mask(4)}).shape)
function TransformerDecoderLayer:init(...)
  layer_children(self, layer_options("TransformerDecoderLayer", table.pack(...), 4), true, 3)
end

-- a = {tgt_mask, kind, memory_mask, kind, tgt_kpm, kind, memory_kpm, kind}
function TransformerDecoderLayer:_run(x, mem, a)
  local sa, ca = self.self_attn, self.multihead_attn
  local function sa_block(v)
    return self.dropout1(sa(v, v, v, {attn_mask = a[1], attn_mask_kind = a[2], key_padding_mask = a[5],
                                      key_padding_mask_kind = a[6], need_weights = false}))
  end
  local function mha_block(v)
    return self.dropout2(ca(v, mem, mem, {attn_mask = a[3], attn_mask_kind = a[4], key_padding_mask = a[7],
                                          key_padding_mask_kind = a[8], need_weights = false}))
  end
  if self.norm_first then
    x = x + sa_block(self.norm1(x))
    x = x + mha_block(self.norm2(x))
    x = x + ff_block(self, self.norm3(x), self.dropout3)
  else
    x = self.norm1(x + sa_block(x))
    x = self.norm2(x + mha_block(x))
    x = self.norm3(x + ff_block(self, x, self.dropout3))
  end
  return x
end

local dec_fwd = {"tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask", "tgt_mask_kind",
                 "memory_mask_kind", "tgt_key_padding_mask_kind", "memory_key_padding_mask_kind"}

-- Checks a decoder's tgt, memory and masks; returns the list of masks and
-- kinds that _run takes.
local function decoder_args(self, fn, tgt, memory, o, level)
  local batched, N, L = check_seq(tgt, fn, "tgt", self.d_model, self.batch_first, level + 1)
  local mb, mN, S = check_seq(memory, fn, "memory", self.d_model, self.batch_first, level + 1)
  if mb ~= batched or mN ~= N then
    error(("%s: memory %s does not match tgt %s in batch size"):format(fn, fmt_shape(memory:shape()),
      fmt_shape(tgt:shape())), level)
  end
  local a = {}
  for i, name in ipairs({"tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask"}) do
    a[2 * i - 1], a[2 * i] = mask_kind(o[name], o[name .. "_kind"], fn, name, level + 1)
  end
  check_attn_mask(a[1], fn, "tgt_mask", N, self.nhead, L, L, level + 1)
  check_attn_mask(a[3], fn, "memory_mask", N, self.nhead, L, S, level + 1)
  check_kpm(a[5], fn, "tgt_key_padding_mask", batched, N, L, level + 1)
  check_kpm(a[7], fn, "memory_key_padding_mask", batched, N, S, level + 1)
  -- _run wants {tgt_mask, k, memory_mask, k, tgt_kpm, k, memory_kpm, k}
  return a
end

-- decoder_args's list back as the options of a layer's call
local function dec_opts(a)
  return {tgt_mask = a[1], tgt_mask_kind = a[2], memory_mask = a[3], memory_mask_kind = a[4],
          tgt_key_padding_mask = a[5], tgt_key_padding_mask_kind = a[6],
          memory_key_padding_mask = a[7], memory_key_padding_mask_kind = a[8]}
end

--- dec_layer(tgt, memory [, tgt_mask, memory_mask, tgt_key_padding_mask,
-- memory_key_padding_mask]) or dec_layer(tgt, memory, {options}) with
-- those names and their _kind options -> the output, shaped as tgt.
function TransformerDecoderLayer:forward(tgt, memory, ...)
  local fn = "TransformerDecoderLayer"
  local o = parse_args(fn, dec_fwd, table.pack(...), 1, 3)
  local a = decoder_args(self, fn, tgt, memory, o, 3)
  return self:_run(tgt, memory, a)
end

--------------------------------------------------------------------------
-- Stacks
-- @section stacks

--- clones(module, n) -> list of n deep copies (fresh parameters with the
-- same values).
local function clones(module, n)
  local deepcopy = require("attn.copy").deepcopy
  local out = {}
  for i = 1, n do out[i] = deepcopy(module) end
  return out
end

-- The common part of the stacks' init: num_layers deep copies of layer in
-- self.layers (an nn.ModuleList), then the optional norm; returns the
-- options (names, given positionally or as one table).
local function stack_init(self, fn, what, layer, num_layers, names, args)
  if not is_module(layer) then
    error(("%s: %s must be a module (got %s)"):format(fn, what, type_name(layer)), 3)
  end
  local n = check_layers(num_layers, fn, "num_layers", 4)
  local o = parse_args(fn, names, args, 1, 4)
  if o.norm ~= nil and not is_module(o.norm) then
    error(("%s: norm must be a module or nil (got %s)"):format(fn, type_name(o.norm)), 3)
  end
  self.layers = nn.ModuleList(clones(layer, n))
  self.num_layers = n
  self.norm = o.norm
  return o
end

local TransformerEncoder = nn.Module:extend("TransformerEncoder")
M.TransformerEncoder = TransformerEncoder

--- TransformerEncoder(encoder_layer, num_layers [, norm [,
-- enable_nested_tensor [, mask_check]]]) or with an options table {norm=,
-- enable_nested_tensor=, mask_check=}: num_layers deep copies of
-- encoder_layer in self.layers (an nn.ModuleList, named layers.0, ...),
-- then the optional final norm.  enable_nested_tensor and mask_check
-- choose torch's fast path and are accepted for compatibility only.
-- @usage
-- local layer = nn.TransformerEncoderLayer(16, 2, {dim_feedforward = 32, batch_first = true})
-- local encoder = nn.TransformerEncoder(layer, 3)
-- local pad = attn.tensor({{false, false, true}})      -- true: a padding position, as torch
-- print(encoder(attn.randn(1, 3, 16), {src_key_padding_mask = pad}).shape)
function TransformerEncoder:init(encoder_layer, num_layers, ...)
  local fn = "TransformerEncoder"
  local o = stack_init(self, fn, "encoder_layer", encoder_layer, num_layers,
    {"norm", "enable_nested_tensor", "mask_check"}, table.pack(...))
  check_bool(o.enable_nested_tensor, true, fn, "enable_nested_tensor", 4)
  check_bool(o.mask_check, true, fn, "mask_check", 4)
  self.enable_nested_tensor = o.enable_nested_tensor ~= false
  self.mask_check = o.mask_check ~= false
end

local enc_fwd = {"mask", "src_key_padding_mask", "mask_kind", "src_key_padding_mask_kind"}

function TransformerEncoder:_run(x, m, mk, p, pk)
  for _, layer in ipairs(self.layers) do
    if has_hooks(layer) then -- called, so that its hooks run
      x = layer(x, {src_mask = m, src_mask_kind = mk, src_key_padding_mask = p, src_key_padding_mask_kind = pk})
    else
      x = layer:_run(x, m, mk, p, pk)
    end
  end
  if self.norm ~= nil then x = self.norm(x) end
  return x
end

--- encoder(src [, mask [, src_key_padding_mask]]) or encoder(src, {mask=,
-- src_key_padding_mask=, mask_kind=, src_key_padding_mask_kind=}).
function TransformerEncoder:forward(src, ...)
  local fn = "TransformerEncoder"
  local o = parse_args(fn, enc_fwd, table.pack(...), 1, 3)
  local layer = self.layers[1]
  if layer == nil or layer._run == nil then
    if layer ~= nil then
      -- a custom layer: torch calls it as layer(x, src_mask=, src_key_padding_mask=)
      local x = src
      for _, l in ipairs(self.layers) do
        x = l(x, {src_mask = o.mask, src_key_padding_mask = o.src_key_padding_mask})
      end
      if self.norm ~= nil then x = self.norm(x) end
      return x
    end
    if self.norm ~= nil then return self.norm(src) end
    return src
  end
  local m, mk, p, pk = encoder_args(layer, fn, src, o, "mask", 3)
  return self:_run(src, m, mk, p, pk)
end

local TransformerDecoder = nn.Module:extend("TransformerDecoder")
M.TransformerDecoder = TransformerDecoder

--- TransformerDecoder(decoder_layer, num_layers [, norm]) or with an
-- options table {norm=}: num_layers deep copies of decoder_layer in
-- self.layers, then the optional final norm.
-- @usage
-- local layer = nn.TransformerDecoderLayer(16, 2, {dim_feedforward = 32, batch_first = true})
-- local decoder = nn.TransformerDecoder(layer, 2)      -- 2 copies of the layer
-- local y = decoder(attn.randn(1, 4, 16), attn.randn(1, 6, 16))   -- tgt, memory
-- print(y.shape)                                        -- attn.Size([1, 4, 16])
function TransformerDecoder:init(decoder_layer, num_layers, ...)
  stack_init(self, "TransformerDecoder", "decoder_layer", decoder_layer, num_layers, {"norm"}, table.pack(...))
end

function TransformerDecoder:_run(x, mem, a)
  for _, layer in ipairs(self.layers) do
    if has_hooks(layer) then x = layer(x, mem, dec_opts(a)) else x = layer:_run(x, mem, a) end
  end
  if self.norm ~= nil then x = self.norm(x) end
  return x
end

--- decoder(tgt, memory [, tgt_mask, memory_mask, tgt_key_padding_mask,
-- memory_key_padding_mask]) or decoder(tgt, memory, {options}).
function TransformerDecoder:forward(tgt, memory, ...)
  local fn = "TransformerDecoder"
  local o = parse_args(fn, dec_fwd, table.pack(...), 1, 3)
  local layer = self.layers[1]
  if layer == nil or layer._run == nil then
    local x = tgt
    for _, l in ipairs(self.layers) do
      x = l(x, memory, {tgt_mask = o.tgt_mask, memory_mask = o.memory_mask,
                        tgt_key_padding_mask = o.tgt_key_padding_mask,
                        memory_key_padding_mask = o.memory_key_padding_mask})
    end
    if self.norm ~= nil then x = self.norm(x) end
    return x
  end
  local a = decoder_args(layer, fn, tgt, memory, o, 3)
  return self:_run(tgt, memory, a)
end

--------------------------------------------------------------------------
-- Transformer
-- @section transformer

local Transformer = nn.Module:extend("Transformer")
M.Transformer = Transformer

local xfmr_names = {"d_model", "nhead", "num_encoder_layers", "num_decoder_layers", "dim_feedforward", "dropout",
                    "activation", "custom_encoder", "custom_decoder", "layer_norm_eps", "batch_first",
                    "norm_first", "device", "dtype"}

--- Transformer([d_model = 512, nhead = 8, num_encoder_layers = 6,
-- num_decoder_layers = 6, dim_feedforward = 2048, dropout = 0.1,
-- activation = "relu", custom_encoder, custom_decoder, layer_norm_eps =
-- 1e-5, batch_first = false, norm_first = false]) positionally or as an
-- options table: encoder (TransformerEncoder with a final LayerNorm) and
-- decoder (TransformerDecoder with a final LayerNorm), then xavier_uniform_
-- on every parameter with more than one dim (torch's _reset_parameters).
-- @usage
-- local model = nn.Transformer({d_model = 16, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1,
--   dim_feedforward = 32, batch_first = true})
-- local src, tgt = attn.randn(2, 7, 16), attn.randn(2, 5, 16)
-- local mask = nn.Transformer.generate_square_subsequent_mask(5)
-- print(model(src, tgt, {tgt_mask = mask}).shape)       -- attn.Size([2, 5, 16])
function Transformer:init(...)
  local fn = "Transformer"
  local o = parse_args(fn, xfmr_names, table.pack(...), 1, 4)
  local d_model = o.d_model == nil and 512 or o.d_model
  local nhead = o.nhead == nil and 8 or o.nhead
  local ne = check_layers(o.num_encoder_layers == nil and 6 or o.num_encoder_layers, fn, "num_encoder_layers", 4)
  local nd = check_layers(o.num_decoder_layers == nil and 6 or o.num_decoder_layers, fn, "num_decoder_layers", 4)
  local lo = {dim_feedforward = o.dim_feedforward, dropout = o.dropout, activation = o.activation,
              layer_norm_eps = o.layer_norm_eps, batch_first = o.batch_first, norm_first = o.norm_first,
              device = o.device, dtype = o.dtype}
  if o.custom_encoder ~= nil and not is_module(o.custom_encoder) then
    error(("%s: custom_encoder must be a module (got %s)"):format(fn, type_name(o.custom_encoder)), 3)
  end
  if o.custom_decoder ~= nil and not is_module(o.custom_decoder) then
    error(("%s: custom_decoder must be a module (got %s)"):format(fn, type_name(o.custom_decoder)), 3)
  end
  local ok, err = pcall(function()
    if o.custom_encoder ~= nil then
      self.encoder = o.custom_encoder
    else
      local layer = TransformerEncoderLayer(d_model, nhead, lo)
      local norm = nn.LayerNorm(layer.d_model, {eps = layer.layer_norm_eps})
      self.encoder = TransformerEncoder(layer, ne, norm)
    end
    if o.custom_decoder ~= nil then
      self.decoder = o.custom_decoder
    else
      local layer = TransformerDecoderLayer(d_model, nhead, lo)
      local norm = nn.LayerNorm(layer.d_model, {eps = layer.layer_norm_eps})
      self.decoder = TransformerDecoder(layer, nd, norm)
    end
  end)
  if not ok then
    -- the layers' messages name their class; report them from here
    error((tostring(err):gsub("^[^:]*:%d+: ", "")), 3)
  end
  self:_reset_parameters()
  self.d_model = d_model
  self.nhead = nhead
  self.batch_first = o.batch_first == true
end

function Transformer:_reset_parameters()
  for _, p in ipairs(self:parameters()) do
    if p:dim() > 1 then init.xavier_uniform_(p) end
  end
end

local xfmr_fwd = {"src_mask", "tgt_mask", "memory_mask", "src_key_padding_mask", "tgt_key_padding_mask",
                  "memory_key_padding_mask", "src_mask_kind", "tgt_mask_kind", "memory_mask_kind",
                  "src_key_padding_mask_kind", "tgt_key_padding_mask_kind", "memory_key_padding_mask_kind"}

--- transformer(src, tgt [, src_mask, tgt_mask, memory_mask,
-- src_key_padding_mask, tgt_key_padding_mask, memory_key_padding_mask])
-- or transformer(src, tgt, {options}) with those names and their _kind
-- options -> the decoder's output, shaped as tgt.
function Transformer:forward(src, tgt, ...)
  local fn = "Transformer"
  local o = parse_args(fn, xfmr_fwd, table.pack(...), 1, 3)
  if not is_tensor(src) then error(("%s: src must be a tensor (got %s)"):format(fn, type_name(src)), 2) end
  if not is_tensor(tgt) then error(("%s: tgt must be a tensor (got %s)"):format(fn, type_name(tgt)), 2) end
  local is_batched = src:dim() == 3
  local bdim = self.batch_first and 1 or 2
  if is_batched and (tgt:dim() ~= 3 or src:size(bdim) ~= tgt:size(bdim)) then
    error(("%s: the batch number of src %s and tgt %s must be equal"):format(fn, fmt_shape(src:shape()),
      fmt_shape(tgt:shape())), 2)
  end
  if src:dim() == 0 or tgt:dim() == 0 or src:size(-1) ~= self.d_model or tgt:size(-1) ~= self.d_model then
    error(("%s: the feature number of src %s and tgt %s must be equal to d_model = %d"):format(fn,
      fmt_shape(src:shape()), fmt_shape(tgt:shape()), self.d_model), 2)
  end
  local enc, dec = self.encoder, self.decoder
  local memory, enc_args
  if nn.isinstance(enc, TransformerEncoder) and enc.layers[1] ~= nil and enc.layers[1]._run then
    enc_args = {encoder_args(enc.layers[1], fn, src, o, "src_mask", 3)}
    if has_hooks(enc) then -- called, so that its hooks run
      memory = enc(src, {mask = enc_args[1], mask_kind = enc_args[2], src_key_padding_mask = enc_args[3],
                         src_key_padding_mask_kind = enc_args[4]})
    else
      memory = enc:_run(src, table.unpack(enc_args, 1, 4))
    end
  else
    memory = enc(src, {mask = o.src_mask, src_key_padding_mask = o.src_key_padding_mask})
  end
  if nn.isinstance(dec, TransformerDecoder) and dec.layers[1] ~= nil and dec.layers[1]._run then
    local a = decoder_args(dec.layers[1], fn, tgt, memory, o, 3)
    if has_hooks(dec) then return dec(tgt, memory, dec_opts(a)) end
    return dec:_run(tgt, memory, a)
  end
  return dec(tgt, memory, {tgt_mask = o.tgt_mask, memory_mask = o.memory_mask,
                           tgt_key_padding_mask = o.tgt_key_padding_mask,
                           memory_key_padding_mask = o.memory_key_padding_mask})
end

--- Transformer.generate_square_subsequent_mask(sz) -> [sz, sz]: -inf above
-- the diagonal (the future), 0 on and below it: the additive causal mask
-- (torch's).  Also callable as model:generate_square_subsequent_mask(sz).
-- @usage
-- print(nn.Transformer.generate_square_subsequent_mask(3))   -- 0 on and below the diagonal, -inf above
function Transformer.generate_square_subsequent_mask(a, b)
  local sz = a
  if is_module(a) then sz = b end
  sz = check_size(sz, "generate_square_subsequent_mask", "sz", false, 2)
  if sz == 0 then return attn.zeros(0, 0) end
  return attn.full({sz, sz}, -math.huge):triu(1)
end
M.generate_square_subsequent_mask = Transformer.generate_square_subsequent_mask

-- torch's signatures (attn/signature.lua); the classes read both forms
-- themselves (parse_args), attn's mask kinds after torch's arguments; the
-- inputs before "/" are positional
local signature = require "attn.signature"
local LAYER = "d_model, nhead, dim_feedforward=2048, dropout=0.1, activation='relu', layer_norm_eps=1e-05, "
  .. "batch_first=false, norm_first=false, device=nil, dtype=nil"
local DEC_FWD = "tgt_mask=nil, memory_mask=nil, tgt_key_padding_mask=nil, memory_key_padding_mask=nil, "
  .. "tgt_mask_kind=nil, memory_mask_kind=nil, tgt_key_padding_mask_kind=nil, memory_key_padding_mask_kind=nil"
signature.declare(TransformerEncoderLayer, "transformer.TransformerEncoderLayer.", {
  init = "native: self, " .. LAYER,
  forward = "native: self, src, /, src_mask=nil, src_key_padding_mask=nil, src_mask_kind=nil, "
    .. "src_key_padding_mask_kind=nil"})
signature.declare(TransformerDecoderLayer, "transformer.TransformerDecoderLayer.", {
  init = "native: self, " .. LAYER, forward = "native: self, tgt, memory, /, " .. DEC_FWD})
signature.declare(TransformerEncoder, "transformer.TransformerEncoder.", {
  init = "native: self, encoder_layer, num_layers, /, norm=nil, enable_nested_tensor=true, mask_check=true",
  forward = "native: self, src, /, mask=nil, src_key_padding_mask=nil, mask_kind=nil, src_key_padding_mask_kind=nil"})
signature.declare(TransformerDecoder, "transformer.TransformerDecoder.", {
  init = "native: self, decoder_layer, num_layers, /, norm=nil", forward = "native: self, tgt, memory, /, " .. DEC_FWD})
signature.declare(Transformer, "transformer.Transformer.", {
  init = "native: self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048, "
    .. "dropout=0.1, activation='relu', custom_encoder=nil, custom_decoder=nil, layer_norm_eps=1e-05, "
    .. "batch_first=false, norm_first=false, device=nil, dtype=nil",
  forward = "native: self, src, tgt, /, src_mask=nil, tgt_mask=nil, memory_mask=nil, src_key_padding_mask=nil, "
    .. "tgt_key_padding_mask=nil, memory_key_padding_mask=nil, src_mask_kind=nil, tgt_mask_kind=nil, "
    .. "memory_mask_kind=nil, src_key_padding_mask_kind=nil, tgt_key_padding_mask_kind=nil, "
    .. "memory_key_padding_mask_kind=nil",
  generate_square_subsequent_mask = false, -- torch's device= has no meaning here
})
signature.declare(M, "transformer.", {generate_square_subsequent_mask = false})

return M
