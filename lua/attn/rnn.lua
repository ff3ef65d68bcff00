-- SPDX-License-Identifier: MIT

--- attn.nn.RNN, attn.nn.GRU, attn.nn.LSTM (multi-step, multi-layer,
-- bidirectional) and attn.nn.utils.rnn (pad_sequence, PackedSequence,
-- pack_padded_sequence, pad_packed_sequence, pack_sequence), after torch
-- 1.13.  Loaded on first use of those names (see the end of nn.lua).
--
-- Parameters carry torch's names (weight_ih_l0, weight_hh_l0, bias_ih_l0,
-- bias_hh_l0, weight_hr_l0 for LSTM projections, "_reverse" for the
-- backward direction) in torch's order, with torch's init
-- U(-1/sqrt(hidden), 1/sqrt(hidden)), so a torch state_dict loads as is.
--
-- The maths per step is that of nn.GRUCell / nn.LSTMCell (gates stacked
-- r, z, n and i, f, g, o).  For speed the input projection x W_ih^T + b_ih
-- of a layer and direction is one matmul over all time steps; only
-- h W_hh^T + b_hh runs per step.
--
-- Sequences of different lengths (a PackedSequence) run as a padded batch
-- in which each sequence's state stops changing after its last step
-- (forward direction) or starts changing at its last step (reverse
-- direction): the results, final states included, are torch's.
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
local nn = require "attn.nn.layers"
local init = require "attn.nn_init"

local M = {}
local is_tensor = attn.is_tensor
local linear = attn.linear

-- Errors point at the first caller outside the attn package (the user's
-- line), however deep inside the package they are raised (core._error).
local fail = error

local function fmt_shape(s) return "[" .. table.concat(s, ", ") .. "]" end

local function pybool(b) return b and "True" or "False" end

---------------------------------------------------------------------------
-- Lengths and index tensors
-- @section lengths_and_index

--- lengths_list(lengths, fn, level): a Lua list of integers from a Lua list
-- or a 1-d tensor of any dtype holding integers.
local function lengths_list(lengths, fn, level)
  level = level + 1
  local list
  if is_tensor(lengths) then
    if lengths:dim() ~= 1 then
      fail(("%s: lengths must be a 1-d tensor or a list, got a tensor of shape %s"):format(fn,
        fmt_shape(lengths:shape())), level)
    end
    list = lengths:detach():totable()
  elseif type(lengths) == "table" and getmetatable(lengths) == nil then
    list = lengths
  else
    fail(("%s: lengths must be a list or a 1-d tensor (got %s)"):format(fn, type(lengths)), level)
  end
  local out = {}
  for i = 1, #list do
    local v = list[i]
    local n = type(v) == "number" and math.tointeger(v)
    if not n then
      local got = type(v) == "string" and ("the string %q; write %s, a number, not a string"):format(v,
        math.tointeger(tonumber(v)) or "a whole number") or tostring(v)
      fail(("%s: lengths[%d] must be an integer (got %s)"):format(fn, i, got), level)
    end
    out[i] = n
  end
  return out
end
M._lengths_list = lengths_list

-- A 1-d tensor of integers (lengths, batch sizes, 1-based indices): int64
-- where the tensor constructor knows that dtype, else float32 (exact below
-- 2^24).
local function int_tensor(list)
  local ok, t = pcall(attn.tensor, list, {dtype = "int64"})
  if ok and is_tensor(t) then return t end
  return attn.tensor(list)
end

-- Positions 1..n sorted by decreasing length, ties in their order.
local function sort_desc(lens)
  local order = {}
  for i = 1, #lens do order[i] = i end
  table.sort(order, function(a, b)
    if lens[a] ~= lens[b] then return lens[a] > lens[b] end
    return a < b
  end)
  return order
end

---------------------------------------------------------------------------
-- PackedSequence
-- @section packedsequence

local Packed = {__name = "PackedSequence"}
Packed.__index = Packed

--- PackedSequence fields, as torch's: data [sum(lengths), *] (the steps of
-- all sequences, time-major: step 1 of every sequence longer than 0, then
-- step 2, ...), batch_sizes (how many sequences have each step),
-- sorted_indices (the batch positions in decreasing length, 1-based; nil
-- when the batch was already sorted with enforce_sorted) and
-- unsorted_indices (its inverse).
local function make_packed(data, batch_sizes, sorted, unsorted)
  return setmetatable({
    data = data,
    batch_sizes = int_tensor(batch_sizes),
    sorted_indices = sorted and int_tensor(sorted) or nil,
    unsorted_indices = unsorted and int_tensor(unsorted) or nil,
    _batch_sizes = batch_sizes, _sorted = sorted,
  }, Packed)
end

--- tostring(packed): "PackedSequence(data=[...], batch_sizes=[...])" with
-- the shapes of data and batch_sizes (torch prints the tensors themselves).
function Packed:__tostring()
  return ("PackedSequence(data=%s, batch_sizes=%s)"):format(fmt_shape(self.data:shape()),
    fmt_shape(self._batch_sizes))
end

local function is_packed(x) return getmetatable(x) == Packed end
M.is_packed = is_packed

-- What to say about a value that should be a PackedSequence: a plain table
-- with a data field is a hand-made one, which lacks the batch sizes.
local function not_packed(x)
  if type(x) == "table" and getmetatable(x) == nil then
    return "a plain table; a PackedSequence is not a table of fields but what " ..
      "nn.utils.rnn.pack_padded_sequence(x, lengths) or pack_sequence(list) returns (data plus the batch sizes " ..
      "of every step)"
  end
  return type(x)
end
M._not_packed = not_packed

--- Whether x is a PackedSequence (made by pack_padded_sequence,
-- pack_sequence or a packed RNN output).  Also attn.rnn.utils.is_packed
-- (attn.nn.utils.rnn.is_packed); torch: isinstance(x, PackedSequence).
-- @param x any value
-- @treturn boolean
-- @usage
-- local packed = nn.utils.rnn.pack_sequence({attn.ones(2, 1)})
-- print(nn.utils.rnn.is_packed(packed), nn.utils.rnn.is_packed(attn.ones(1)))   -- true false
-- @function is_packed

-- The lengths in the original batch order, and the sorted order.
function Packed:_lengths()
  local bs = self._batch_sizes
  local B = bs[1] or 0
  local sorted_len = {}
  for j = 1, B do sorted_len[j] = 0 end
  for t = 1, #bs do
    for j = 1, bs[t] do sorted_len[j] = t end
  end
  local order = self._sorted
  if order == nil then
    order = {}
    for j = 1, B do order[j] = j end
  end
  local lens = {}
  for j = 1, B do lens[order[j]] = sorted_len[j] end
  return lens, order
end

--- packed:lengths(): the lengths in the original batch order (a Lua list).
-- @usage
-- local packed = nn.utils.rnn.pack_sequence({attn.ones(3, 2), attn.ones(1, 2)})
-- print(table.concat(packed:lengths(), " "))                     -- 3 1
function Packed:lengths() return (self:_lengths()) end

-- x [T, B, *] (time-major, original order) -> packed data rows, given the
-- sorted order and batch sizes: one index_select (differentiable).
local function pack_rows(x, order, batch_sizes)
  local T, B = x:size(1), x:size(2)
  local idx = {}
  for t = 1, #batch_sizes do
    local base = (t - 1) * B
    for j = 1, batch_sizes[t] do idx[#idx + 1] = base + order[j] end
  end
  local shape = x:shape()
  local flat = {T * B}
  for i = 3, #shape do flat[#flat + 1] = shape[i] end
  return x:reshape(flat):index_select(1, idx)
end

-- packed data [N, *] -> [T, B, *] time-major in the original order, with
-- padding_value where a sequence has ended.
local function unpack_rows(packed, padding_value, total_length)
  local data = packed.data
  local bs = packed._batch_sizes
  local lens, order = packed:_lengths()
  local B = #lens
  local T = math.max(#bs, total_length or 0)
  local N = data:size(1)
  local shape = data:shape()
  local row = {1}
  for i = 2, #shape do row[#row + 1] = shape[i] end
  local src = attn.cat({data, attn.full(row, padding_value or 0)}, 1)
  local pos = {} -- sorted position of each original batch entry
  for j = 1, B do pos[order[j]] = j end
  local idx, offset = {}, 0
  for t = 1, T do
    local n = bs[t] or 0
    for b = 1, B do
      local j = pos[b]
      idx[#idx + 1] = j <= n and (offset + j) or (N + 1)
    end
    offset = offset + n
  end
  local out = {T, B}
  for i = 2, #shape do out[#out + 1] = shape[i] end
  return src:index_select(1, idx):reshape(out), lens
end

-- Options given either positionally or as one trailing table.
local named_args = attn._misuse.named_args

local function check_bool(v, def, fn, name, level)
  if v == nil then return def end
  if type(v) ~= "boolean" then
    fail(("%s: %s must be a boolean (got %s)"):format(fn, name, tostring(v)), level + 1)
  end
  return v
end

local function check_number(v, def, fn, name, level)
  if v == nil then return def end
  if type(v) ~= "number" then
    fail(("%s: %s must be a number (got %s)"):format(fn, name, tostring(v)), level + 1)
  end
  return v
end

local utils = {}
M.utils = utils
utils.PackedSequence = Packed
--- is_packed(x): whether x is a PackedSequence.
utils.is_packed = is_packed

--- pad_sequence(sequences [, batch_first = false [, padding_value = 0]])
-- or pad_sequence(sequences, {batch_first=, padding_value=}): a list of
-- tensors [L_i, *] with the same trailing dims -> [max L, B, *] (or
-- [B, max L, *]), padded with padding_value; differentiable.
-- @usage
-- local seqs = {attn.ones(3), attn.ones(1)}
-- print(nn.utils.rnn.pad_sequence(seqs, true, -1))               -- [[1, 1, 1], [1, -1, -1]]
function utils.pad_sequence(sequences, ...)
  local fn = "pad_sequence"
  local o = named_args(fn, {...}, {"batch_first", "padding_value"})
  local batch_first = check_bool(o.batch_first, false, fn, "batch_first", 2)
  local padding_value = check_number(o.padding_value, 0, fn, "padding_value", 2)
  if is_tensor(sequences) then
    if sequences:dim() == 0 then
      fail(fn .. ": sequences must be a list of tensors or a tensor of at least 1 dim", 2)
    end
    local list = {}
    for i = 1, sequences:size(1) do list[i] = sequences:select(1, i) end
    sequences = list
  end
  if type(sequences) ~= "table" or getmetatable(sequences) ~= nil or #sequences == 0 then
    fail(fn .. ": sequences must be a non-empty list of tensors", 2)
  end
  local trailing, maxlen
  for i, s in ipairs(sequences) do
    if not is_tensor(s) then fail(("%s: sequences[%d] is not a tensor (got %s)"):format(fn, i, type(s)), 2) end
    if s:dim() == 0 then fail(("%s: sequences[%d] is 0-d; each must be [L, *]"):format(fn, i), 2) end
    local sh = s:shape()
    local tr = {table.unpack(sh, 2)}
    if trailing == nil then
      trailing = tr
    else
      local same = #tr == #trailing
      for k = 1, #tr do same = same and tr[k] == trailing[k] end
      if not same then
        fail(("%s: sequences[%d] has shape %s, whose trailing dims differ from sequences[1]'s %s"):format(fn, i,
          fmt_shape(sh), fmt_shape(sequences[1]:shape())), 2)
      end
    end
    maxlen = math.max(maxlen or 0, sh[1])
  end
  local padded = {}
  for i, s in ipairs(sequences) do
    local L = s:size(1)
    if L < maxlen then
      local fill = {maxlen - L, table.unpack(trailing)}
      s = attn.cat({s, attn.full(fill, padding_value)}, 1)
    end
    padded[i] = s
  end
  return attn.stack(padded, batch_first and 1 or 2)
end

--- pack_padded_sequence(input, lengths [, batch_first = false [,
-- enforce_sorted = true]]) or (input, lengths, {batch_first=,
-- enforce_sorted=}): input [T, B, *] (or [B, T, *]) and the B lengths (a
-- list or a 1-d tensor) -> a PackedSequence.  With enforce_sorted the
-- lengths must decrease; otherwise the batch is sorted here and
-- sorted_indices / unsorted_indices record the order.
-- @usage
-- local padded = attn.randn(2, 4, 3)                             -- [B, T, features]
-- local packed = nn.utils.rnn.pack_padded_sequence(padded, {4, 2}, true)   -- lengths, batch_first
-- local out, h = nn.GRU(3, 5, {batch_first = true})(packed)
-- print(nn.utils.rnn.is_packed(out), h.shape)
function utils.pack_padded_sequence(input, lengths, ...)
  local fn = "pack_padded_sequence"
  local o = named_args(fn, {...}, {"batch_first", "enforce_sorted"})
  local batch_first = check_bool(o.batch_first, false, fn, "batch_first", 2)
  local enforce_sorted = check_bool(o.enforce_sorted, true, fn, "enforce_sorted", 2)
  if not is_tensor(input) then fail(("%s: input must be a tensor (got %s)"):format(fn, type(input)), 2) end
  if input:dim() < 2 then
    fail(("%s: input must be [T, B, *] (or [B, T, *] with batch_first), got %s"):format(fn,
      fmt_shape(input:shape())), 2)
  end
  local lens = lengths_list(lengths, fn, 2)
  if batch_first then input = input:transpose(1, 2) end
  local T, B = input:size(1), input:size(2)
  if #lens ~= B then
    fail(("%s: expected %d lengths (the batch size of input %s), got %d"):format(fn, B,
      fmt_shape(input:shape()), #lens), 2)
  end
  for i, n in ipairs(lens) do
    if n <= 0 then
      fail(("%s: lengths[%d] is %d; every sequence must have at least one step"):format(fn, i, n), 2)
    end
    if n > T then
      fail(("%s: lengths[%d] is %d, longer than the input's %d steps"):format(fn, i, n, T), 2)
    end
  end
  local order, sorted, unsorted
  if enforce_sorted then
    for i = 2, #lens do
      if lens[i] > lens[i - 1] then
        fail(("%s: lengths must be sorted in decreasing order when enforce_sorted is true (lengths[%d] = %d > "
          .. "lengths[%d] = %d); sort the batch or pass enforce_sorted = false"):format(fn, i, lens[i], i - 1,
          lens[i - 1]), 2)
      end
    end
    order = {}
    for i = 1, B do order[i] = i end
  else
    order = sort_desc(lens)
    sorted, unsorted = order, {}
    for j, b in ipairs(order) do unsorted[b] = j end
  end
  local batch_sizes = {}
  local maxlen = lens[order[1]] or 0
  for t = 1, maxlen do
    local n = 0
    for j = 1, B do if lens[order[j]] >= t then n = n + 1 end end
    batch_sizes[t] = n
  end
  return make_packed(pack_rows(input, order, batch_sizes), batch_sizes, sorted, unsorted)
end

--- pad_packed_sequence(sequence [, batch_first = false [, padding_value = 0
-- [, total_length]]]) or (sequence, {batch_first=, padding_value=,
-- total_length=}) -> padded [T, B, *] (or [B, T, *]), lengths (a 1-d
-- tensor, in the original batch order).  T is the longest length, or
-- total_length when given (it may not be shorter).
-- @usage
-- local packed = nn.utils.rnn.pack_sequence({attn.ones(3, 2), attn.ones(1, 2)})
-- local padded, lengths = nn.utils.rnn.pad_packed_sequence(packed, {batch_first = true})
-- print(padded.shape, lengths)                                   -- [2, 3, 2] and the lengths
function utils.pad_packed_sequence(sequence, ...)
  local fn = "pad_packed_sequence"
  if not is_packed(sequence) then
    fail(("%s: sequence must be a PackedSequence (got %s)"):format(fn, not_packed(sequence)), 2)
  end
  local o = named_args(fn, {...}, {"batch_first", "padding_value", "total_length"})
  local batch_first = check_bool(o.batch_first, false, fn, "batch_first", 2)
  local padding_value = check_number(o.padding_value, 0, fn, "padding_value", 2)
  local total_length = o.total_length
  if total_length ~= nil then
    local n = type(total_length) == "number" and math.tointeger(total_length)
    if not n then fail(("%s: total_length must be an integer (got %s)"):format(fn, tostring(total_length)), 2) end
    if n > (1 << 24) then
      fail(("%s: total_length %d is too large (at most 2^24 steps)"):format(fn, n))
    end
    if n < #sequence._batch_sizes then
      fail(("%s: total_length %d is shorter than the longest sequence (%d)"):format(fn, n,
        #sequence._batch_sizes), 2)
    end
    total_length = n
  end
  local padded, lens = unpack_rows(sequence, padding_value, total_length)
  if batch_first then padded = padded:transpose(1, 2) end
  return padded, int_tensor(lens)
end

--- pack_sequence(sequences [, enforce_sorted = true]): pad_sequence then
-- pack_padded_sequence with the sequences' lengths.
-- @usage
-- local seqs = {attn.randn(4, 3), attn.randn(2, 3)}              -- longest first
-- local packed = nn.utils.rnn.pack_sequence(seqs)
-- print(packed.data.shape)                                       -- attn.Size([6, 3])
function utils.pack_sequence(sequences, enforce_sorted)
  local fn = "pack_sequence"
  if type(sequences) ~= "table" or getmetatable(sequences) ~= nil or #sequences == 0 then
    fail(fn .. ": sequences must be a non-empty list of tensors", 2)
  end
  enforce_sorted = check_bool(enforce_sorted, true, fn, "enforce_sorted", 2)
  local lens = {}
  for i, s in ipairs(sequences) do
    if not is_tensor(s) or s:dim() == 0 then
      fail(("%s: sequences[%d] must be a tensor [L, *]"):format(fn, i), 2)
    end
    lens[i] = s:size(1)
  end
  local ok, res = pcall(utils.pad_sequence, sequences)
  if not ok then fail((tostring(res):gsub("^.-pad_sequence:", fn .. ":")), 2) end
  for i = 2, #lens do
    if enforce_sorted and lens[i] > lens[i - 1] then
      fail(("%s: sequences must be sorted by decreasing length when enforce_sorted is true (sequence %d "
        .. "has %d steps, sequence %d has %d); pass enforce_sorted = false"):format(fn, i, lens[i], i - 1,
        lens[i - 1]), 2)
    end
  end
  return utils.pack_padded_sequence(res, lens, false, enforce_sorted)
end

---------------------------------------------------------------------------
-- RNN, GRU, LSTM
-- @section rnn_gru_lstm

local gate_count = {RNN_TANH = 1, RNN_RELU = 1, GRU = 3, LSTM = 4}

local RNNBase = nn.Module:extend("RNNBase")
M.RNNBase = RNNBase

local rnn_options = {"num_layers", "bias", "batch_first", "dropout", "bidirectional", "proj_size", "nonlinearity"}

local function check_size(v, fn, name, min)
  local i = type(v) == "number" and math.tointeger(v)
  if not i then fail(("%s: %s must be an integer (got %s)"):format(fn, name, tostring(v)), 4) end
  if i < min then fail(("%s: %s must be at least %d (got %d)"):format(fn, name, min, i), 4) end
  if i > (1 << 40) then fail(("%s: %s = %d is too large"):format(fn, name, i), 4) end
  return i
end

-- init(self, name, mode, input_size, hidden_size [, num_layers] [, opts])
local function base_init(self, name, mode, input_size, hidden_size, a, b)
  local opts
  if type(a) == "table" then
    opts = a
  else
    opts = b or {}
    if a ~= nil then
      if opts.num_layers ~= nil then
        fail(("%s: num_layers given twice (argument 3 and option)"):format(name), 3)
      end
      local o = {}
      for k, v in pairs(opts) do o[k] = v end
      o.num_layers = a
      opts = o
    end
  end
  if type(opts) ~= "table" or is_tensor(opts) then
    fail(("%s: options must be a table such as {num_layers = 2, batch_first = true} (got %s)"):format(name,
      type(opts)), 3)
  end
  for k in pairs(opts) do
    local ok = false
    for _, n in ipairs(rnn_options) do
      if n == k and (n ~= "proj_size" or mode == "LSTM") and (n ~= "nonlinearity" or name == "RNN") then ok = true end
    end
    if not ok then
      local valid = {"num_layers", "bias", "batch_first", "dropout", "bidirectional"}
      if name == "RNN" then valid[#valid + 1] = "nonlinearity" end
      if name == "LSTM" then valid[#valid + 1] = "proj_size" end
      fail(attn._misuse.unknown_option(name, k, valid), 3)
    end
  end
  if name == "RNN" then
    local nl = opts.nonlinearity
    if nl == nil then nl = "tanh" end
    if nl == "tanh" then mode = "RNN_TANH"
    elseif nl == "relu" then mode = "RNN_RELU"
    else fail(("RNN: unknown nonlinearity '%s' (expected 'tanh' or 'relu')"):format(tostring(nl)), 3) end
    self.nonlinearity = nl
  end
  self.mode = mode
  self.input_size = check_size(input_size, name, "input_size", 0)
  self.hidden_size = check_size(hidden_size, name, "hidden_size", 1)
  self.num_layers = check_size(opts.num_layers == nil and 1 or opts.num_layers, name, "num_layers", 1)
  if self.num_layers > 65536 then
    fail(("%s: num_layers = %d is too large (at most 65536)"):format(name, self.num_layers))
  end
  self.bias = check_bool(opts.bias, true, name, "bias", 2)
  self.batch_first = check_bool(opts.batch_first, false, name, "batch_first", 2)
  self.bidirectional = check_bool(opts.bidirectional, false, name, "bidirectional", 2)
  local p = opts.dropout
  if p == nil then p = 0 end
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    fail(("%s: dropout should be a number in range [0, 1] representing the probability of an element being "
      .. "zeroed (got %s)"):format(name, tostring(p)), 3)
  end
  self.dropout = p
  self.proj_size = check_size(opts.proj_size == nil and 0 or opts.proj_size, name, "proj_size", 0)
  if self.proj_size >= self.hidden_size and self.proj_size > 0 then
    fail(("LSTM: proj_size (%d) has to be smaller than hidden_size (%d)"):format(self.proj_size,
      self.hidden_size), 3)
  end
  local H = self.hidden_size
  local G = gate_count[mode] * H
  local real_h = self.proj_size > 0 and self.proj_size or H
  local D = self.bidirectional and 2 or 1
  for layer = 0, self.num_layers - 1 do
    for dir = 0, D - 1 do
      local sfx = "_l" .. layer .. (dir == 1 and "_reverse" or "")
      local in_size = layer == 0 and self.input_size or real_h * D
      self["weight_ih" .. sfx] = nn.Parameter(attn.empty(G, in_size))
      self["weight_hh" .. sfx] = nn.Parameter(attn.empty(G, real_h))
      if self.bias then
        self["bias_ih" .. sfx] = nn.Parameter(attn.empty(G))
        self["bias_hh" .. sfx] = nn.Parameter(attn.empty(G))
      end
      if self.proj_size > 0 then
        self["weight_hr" .. sfx] = nn.Parameter(attn.empty(self.proj_size, H))
      end
    end
  end
  self:reset_parameters()
end

--- reset_parameters(): every parameter ~ U(-1/sqrt(hidden), 1/sqrt(hidden))
-- in registration order (torch's).
-- @usage
-- local gru = nn.GRU(3, 4)
-- gru:reset_parameters()                            -- uniform(-1/sqrt(hidden), 1/sqrt(hidden)), torch's init
function RNNBase:reset_parameters()
  local stdv = 1.0 / math.sqrt(self.hidden_size)
  for _, p in ipairs(self:parameters()) do init.uniform_(p, -stdv, stdv) end
end

--- flatten_parameters(): nothing to do (torch's does nothing on the CPU
-- either; it exists so that ported code runs).
-- @usage
-- local gru = nn.GRU(4, 4)
-- gru:flatten_parameters()                         -- a no-op kept for torch scripts (no cuDNN)
function RNNBase:flatten_parameters() end

--- extra_repr(): the arguments shown in the module tree, as torch prints
-- them: "input_size, hidden_size" then proj_size, num_layers, bias,
-- batch_first, dropout and bidirectional where they differ from the
-- defaults (without the nonlinearity, as torch).
-- @usage
-- print(nn.LSTM(3, 4, 2, {dropout = 0.1}))          -- LSTM(3, 4, num_layers=2, dropout=0.1)
function RNNBase:extra_repr()
  local s = ("%d, %d"):format(self.input_size, self.hidden_size)
  if self.proj_size ~= 0 then s = s .. ", proj_size=" .. self.proj_size end
  if self.num_layers ~= 1 then s = s .. ", num_layers=" .. self.num_layers end
  if self.bias ~= true then s = s .. ", bias=" .. pybool(self.bias) end
  if self.batch_first then s = s .. ", batch_first=True" end
  if self.dropout ~= 0 then s = s .. ", dropout=" .. nn._pyrepr(self.dropout) end
  if self.bidirectional then s = s .. ", bidirectional=True" end
  return s -- like torch's, without the nonlinearity
end

-- The T steps of t [T, ...] as a list of [...] views.  Under autograd the
-- backward of a view writes the gradient into zeros of the viewed tensor's
-- size, so T selects from the whole of t would cost O(T^2) in the
-- backward; halving recursively costs O(T log T).
local function steps_of(t)
  local T = t:size(1)
  local out = {}
  if not (t.requires_grad and attn.is_grad_enabled()) then
    for i = 1, T do out[i] = t:select(1, i) end
    return out
  end
  local function split(v, first, n)
    if n == 1 then
      out[first] = v:select(1, 1)
      return
    end
    local h = n // 2
    split(v:narrow(1, 1, h), first, h)
    split(v:narrow(1, h + 1, n - h), first + h, n - h)
  end
  split(t, 1, T)
  return out
end

-- One direction of one layer over x [T, B, F] (time-major).  h, c: the
-- initial states [B, real_h] / [B, H] (c only for LSTM).  masks: nil, or
-- per step a [B, 1] condition "this sequence has step t".  Returns the
-- outputs [T, B, real_h] and the final h (and c).
local function run_direction(self, x, sfx, h, c, reverse, masks)
  local mode = self.mode
  local w_ih, w_hh = self["weight_ih" .. sfx], self["weight_hh" .. sfx]
  local b_ih, b_hh = self["bias_ih" .. sfx], self["bias_hh" .. sfx]
  local w_hr = self["weight_hr" .. sfx]
  local T = x:size(1)
  local outs = {}
  if T == 0 then
    local shape = x:shape()
    return attn.zeros(0, shape[2], h:size(2)), h, c
  end
  -- all steps' input projections at once: [T, B, G*H]
  local gi = steps_of(linear(x, w_ih, b_ih))
  local Hs = w_hh:size(1) // gate_count[mode] -- hidden_size
  local where = attn.where
  for step = 1, T do
    local t = reverse and (T + 1 - step) or step
    local hn, cn
    if mode == "GRU" then
      -- r and z in one add and one sigmoid over the first 2H gate columns
      local gh = linear(h, w_hh, b_hh)
      local g = gi[t]
      local rz = (g:narrow(2, 1, 2 * Hs) + gh:narrow(2, 1, 2 * Hs)):sigmoid()
      local r, z = rz:narrow(2, 1, Hs), rz:narrow(2, Hs + 1, Hs)
      local n = (g:narrow(2, 2 * Hs + 1, Hs) + gh:narrow(2, 2 * Hs + 1, Hs) * r):tanh()
      hn = (h - n) * z + n
    elseif mode == "LSTM" then
      -- one sigmoid over all 4H gate columns (the g block's is unused)
      local g = gi[t] + linear(h, w_hh, b_hh)
      local sg = g:sigmoid()
      local i, f, o = sg:narrow(2, 1, Hs), sg:narrow(2, Hs + 1, Hs), sg:narrow(2, 3 * Hs + 1, Hs)
      local gg = g:narrow(2, 2 * Hs + 1, Hs):tanh()
      cn = f * c + i * gg
      hn = o * cn:tanh()
      if w_hr then hn = linear(hn, w_hr) end
    else
      local a = gi[t] + linear(h, w_hh, b_hh)
      hn = mode == "RNN_TANH" and a:tanh() or a:relu()
    end
    if masks then
      local m = masks[t]
      hn = where(m, hn, h)
      if cn then cn = where(m, cn, c) end
    end
    outs[t] = hn
    h, c = hn, cn
  end
  return attn.stack(outs, 1), h, c
end

-- Checks a state tensor [L*D, B, size] (or [L*D, size] unbatched).
local function check_state(name, what, s, batched, LD, B, size)
  if not is_tensor(s) then
    fail(("%s: %s must be a tensor (got %s)"):format(name, what, type(s)), 4)
  end
  local want = batched and {LD, B, size} or {LD, size}
  local got = s:shape()
  local ok = #got == #want
  for i = 1, #want do ok = ok and got[i] == want[i] end
  if not ok then
    fail(("%s: Expected %s size %s, got %s"):format(name, what, fmt_shape(want), fmt_shape(got)), 4)
  end
  if not batched then s = s:unsqueeze(2) end
  return s
end

--- rnn(input [, hx]) -> output, h_n (RNN, GRU) or output, {h_n, c_n}
-- (LSTM).  input [T, B, input_size] ([B, T, input_size] with batch_first;
-- [T, input_size] unbatched) or a PackedSequence; hx [L*D, B, H] (LSTM:
-- {h0, c0}, h0 [L*D, B, proj_size or H], c0 [L*D, B, H]), zeros when nil,
-- where L = num_layers and D = 2 when bidirectional.  output [T, B, D*H]
-- (or batch-first; a PackedSequence for a packed input) holds the last
-- layer's h at every step, both directions concatenated; h_n the final
-- state of each layer and direction (l1 forward, l1 reverse, l2 ...),
-- taken at each sequence's own last step.
-- @usage
-- local gru = nn.GRU(3, 4, {batch_first = true})
-- local h0 = attn.zeros(1, 2, 4)                    -- [layers * directions, B, hidden]
-- local out, h = gru(attn.randn(2, 5, 3), h0)
-- print(out.shape, h.shape)                         -- [2, 5, 4] [1, 2, 4]
function RNNBase:forward(input, hx)
  -- torch's keywords in a trailing options table (declared "native" below:
  -- a PackedSequence and LSTM's {h, c} are tables too, so only a plain
  -- table with string keys is read as options)
  local function plain_opts(t) return type(t) == "table" and getmetatable(t) == nil and type(next(t)) == "string" end
  if hx ~= nil and plain_opts(hx) then
    attn._misuse.check_options(self:_get_name() .. ":forward", hx, {"hx"})
    hx = hx.hx
  elseif hx == nil and plain_opts(input) and input.input ~= nil then
    attn._misuse.check_options(self:_get_name() .. ":forward", input, {"input", "hx"})
    input, hx = input.input, input.hx
  end
  local name = self:_get_name()
  local mode = self.mode
  local packed = is_packed(input)
  local x, lens, batched
  if packed then
    x, lens = unpack_rows(input, 0)
    batched = true
  else
    if not is_tensor(input) then
      fail(("%s: input must be a tensor or a PackedSequence (got %s)"):format(name, not_packed(input)), 2)
    end
    local d = input:dim()
    if d ~= 2 and d ~= 3 then
      fail(("%s: Expected input to be 2-D or 3-D but received %d-D tensor %s"):format(name, d,
        fmt_shape(input:shape())), 2)
    end
    batched = d == 3
    x = input
    if not batched then
      x = x:unsqueeze(2)
    elseif self.batch_first then
      x = x:transpose(1, 2)
    end
  end
  local F_in = x:size(3)
  if F_in ~= self.input_size then
    fail(("%s: input.size(-1) must be equal to input_size. Expected %d, got %d"):format(name, self.input_size,
      F_in), 2)
  end
  local T, B = x:size(1), x:size(2)
  local D = self.bidirectional and 2 or 1
  local LD = self.num_layers * D
  local H = self.hidden_size
  local real_h = self.proj_size > 0 and self.proj_size or H
  local h0, c0
  if mode == "LSTM" then
    if hx ~= nil then
      if type(hx) ~= "table" or is_tensor(hx) or getmetatable(hx) ~= nil then
        fail(("LSTM: hx must be a table {h0, c0} (got %s)"):format(is_tensor(hx) and "a tensor" or type(hx)), 2)
      end
      h0 = check_state(name, "hx[1] (h0)", hx[1], batched, LD, B, real_h)
      c0 = check_state(name, "hx[2] (c0)", hx[2], batched, LD, B, H)
    end
  elseif hx ~= nil then
    h0 = check_state(name, "hidden", hx, batched, LD, B, H)
  end
  if h0 == nil then h0 = attn.zeros(LD, B, real_h) end
  if mode == "LSTM" and c0 == nil then c0 = attn.zeros(LD, B, H) end

  local masks
  if packed then
    local lt = attn.tensor(lens):reshape(B, 1)
    masks = {}
    for t = 1, T do masks[t] = lt:gt(t - 1) end
  end
  local order, bsizes
  if packed then order, bsizes = input._sorted, input._batch_sizes end
  if packed and order == nil then
    order = {}
    for j = 1, B do order[j] = j end
  end

  local hn, cn = {}, {}
  local layer_in = x
  for layer = 0, self.num_layers - 1 do
    local outs = {}
    for dir = 0, D - 1 do
      local k = layer * D + dir + 1
      local sfx = "_l" .. layer .. (dir == 1 and "_reverse" or "")
      local out, h, c = run_direction(self, layer_in, sfx, h0:select(1, k), c0 and c0:select(1, k), dir == 1, masks)
      outs[#outs + 1] = out
      hn[k], cn[k] = h, c
    end
    local out = D == 2 and attn.cat(outs, 3) or outs[1]
    if self.dropout > 0 and self.training and layer < self.num_layers - 1 then
      if packed then
        -- torch drops out the packed data: the same draws as torch's
        local data = nn._dropout(pack_rows(out, order, bsizes), self.dropout, true)
        out = unpack_rows(setmetatable({data = data, _batch_sizes = bsizes, _sorted = input._sorted}, Packed), 0)
      else
        out = nn._dropout(out, self.dropout, true)
      end
    end
    layer_in = out
  end
  local output = layer_in
  local h_n = attn.stack(hn, 1)
  local c_n = mode == "LSTM" and attn.stack(cn, 1) or nil
  if packed then
    output = setmetatable({data = pack_rows(output, order, bsizes), batch_sizes = input.batch_sizes,
      sorted_indices = input.sorted_indices, unsorted_indices = input.unsorted_indices,
      _batch_sizes = bsizes, _sorted = input._sorted}, Packed)
  elseif not batched then
    output = output:squeeze(2)
    h_n = h_n:squeeze(2)
    if c_n then c_n = c_n:squeeze(2) end
  elseif self.batch_first then
    output = output:transpose(1, 2)
  end
  if mode == "LSTM" then return output, {h_n, c_n} end
  return output, h_n
end

-- torch's positional order after num_layers (a trailing options table is
-- expanded into it by the declarations below, attn/signature.lua) -> the
-- (num_layers, options) base_init takes
local function positional(num_layers, names, ...)
  if type(num_layers) == "table" then return num_layers, ... end -- base_init's own (options) form
  local o, any = {}, false
  for i, k in ipairs(names) do
    local v = select(i, ...)
    if v ~= nil then o[k], any = v, true end
  end
  if select("#", ...) > #names then
    local extra = select(#names + 1, ...)
    if extra ~= nil then return num_layers, extra end -- (num_layers, options): base_init says what is wrong
  end
  return num_layers, any and o or nil
end

--- nn.RNN(input_size, hidden_size [, num_layers] [, {num_layers=, bias=,
-- batch_first=, dropout=, bidirectional=, nonlinearity = "tanh"|"relu"}]):
-- h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh).
local RNN = RNNBase:extend("RNN")
M.RNN = RNN
--- RNN:init(input_size, hidden_size [, num_layers] [, opts]), called by
-- `nn.RNN(...)`: an Elman RNN over a whole sequence, per step
-- h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh) with act tanh (or relu), for
-- num_layers stacked layers (each the input of the next) and, with
-- bidirectional, a reverse direction too.  opts (or torch's positional
-- order num_layers, nonlinearity, bias, batch_first, dropout,
-- bidirectional): num_layers = 1, nonlinearity = "tanh" | "relu",
-- bias = true, batch_first = false, dropout = 0 (between layers, in
-- training), bidirectional = false.  Registers weight_ih_l0, weight_hh_l0,
-- bias_ih_l0, bias_hh_l0, ... with torch's names and init; calling it runs
-- RNNBase:forward.  torch.nn.RNN.
-- @usage
-- local rnn = nn.RNN(4, 6, {nonlinearity = "relu"})
-- local out, h = rnn(attn.randn(5, 2, 4))          -- [T, B, input] (batch_first = false)
-- print(out.shape, h.shape)                        -- [5, 2, 6] [1, 2, 6]
function RNN:init(input_size, hidden_size, num_layers, ...)
  base_init(self, "RNN", "RNN_TANH", input_size, hidden_size, positional(num_layers,
    {"nonlinearity", "bias", "batch_first", "dropout", "bidirectional"}, ...))
end

--- nn.GRU(input_size, hidden_size [, num_layers] [, opts]): nn.GRUCell's
-- step over the sequence, layers and directions as torch's nn.GRU.
local GRU = RNNBase:extend("GRU")
M.GRU = GRU
--- GRU:init(input_size, hidden_size [, num_layers] [, opts]), called by
-- `nn.GRU(...)`: a gated recurrent unit over a whole sequence, per step
-- nn.GRUCell's r = sigmoid(x W_ir^T + b_ir + h W_hr^T + b_hr), z likewise,
-- n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn)),
-- h' = (1 - z) * n + z * h; layers and directions as nn.RNN.  opts (or
-- torch's positional order num_layers, bias, batch_first, dropout,
-- bidirectional) as RNN:init without nonlinearity; each weight stacks the
-- three gates (r, z, n).  torch.nn.GRU.
-- @usage
-- local gru = nn.GRU(10, 20, 2, true, true)        -- input 10, hidden 20, 2 layers, bias, batch_first
-- local out, h = gru(attn.randn(3, 5, 10))         -- [B, T, input]
-- print(out.shape, h.shape)                        -- [3, 5, 20] and [2, 3, 20]
function GRU:init(input_size, hidden_size, num_layers, ...)
  base_init(self, "GRU", "GRU", input_size, hidden_size, positional(num_layers,
    {"bias", "batch_first", "dropout", "bidirectional"}, ...))
end

--- nn.LSTM(input_size, hidden_size [, num_layers] [, opts]): nn.LSTMCell's
-- step; opts also take proj_size (h = (o * tanh(c)) W_hr^T, of that size).
local LSTM = RNNBase:extend("LSTM")
M.LSTM = LSTM
--- LSTM:init(input_size, hidden_size [, num_layers] [, opts]), called by
-- `nn.LSTM(...)`: a long short-term memory over a whole sequence, per step
-- nn.LSTMCell's gates i, f, o (sigmoid) and g (tanh) of
-- x W_ih^T + b_ih + h W_hh^T + b_hh, c' = f * c + i * g and
-- h' = o * tanh(c'); layers and directions as nn.RNN.  The state is the
-- pair {h, c}.  opts (or torch's positional order num_layers, bias,
-- batch_first, dropout, bidirectional, proj_size) as GRU:init plus
-- proj_size = 0 (when > 0, h' = (o * tanh(c')) W_hr^T of that size, the
-- weight weight_hr_l*).  torch.nn.LSTM.
-- @usage
-- local lstm = nn.LSTM(8, 16, {batch_first = true})
-- local out, state = lstm(attn.randn(2, 7, 8))
-- local h, c = state[1], state[2]
-- print(out.shape, h.shape, c.shape)              -- [2, 7, 16] [1, 2, 16] [1, 2, 16]
function LSTM:init(input_size, hidden_size, num_layers, ...)
  base_init(self, "LSTM", "LSTM", input_size, hidden_size, positional(num_layers,
    {"bias", "batch_first", "dropout", "bidirectional", "proj_size"}, ...))
end

-- torch's signatures (attn/signature.lua: a trailing options table)
local signature = require "attn.signature"
signature.declare(utils, "nn.utils.rnn.", {
  pad_sequence = "sequences, batch_first=false, padding_value=0.0",
  pack_padded_sequence = "input, lengths, batch_first=false, enforce_sorted=true",
  pad_packed_sequence = "sequence, batch_first=false, padding_value=0.0, total_length=nil",
  pack_sequence = "sequences, enforce_sorted=true",
  is_packed = false,
})
signature.declare(Packed, "nn.utils.rnn.PackedSequence.", {lengths = false})
signature.declare(RNNBase, "rnn.RNNBase.", {forward = "native: self, input, hx=nil", reset_parameters = false,
  flatten_parameters = false, extra_repr = false})
signature.declare(RNN, "nn.RNN.", {init = "self, input_size, hidden_size, num_layers=1, nonlinearity='tanh', "
  .. "bias=true, batch_first=false, dropout=0.0, bidirectional=false"})
signature.declare(GRU, "nn.GRU.", {init = "self, input_size, hidden_size, num_layers=1, bias=true, batch_first=false, "
  .. "dropout=0.0, bidirectional=false"})
signature.declare(LSTM, "nn.LSTM.", {init = "self, input_size, hidden_size, num_layers=1, bias=true, "
  .. "batch_first=false, "
  .. "dropout=0.0, bidirectional=false, proj_size=0"})

-- nn.utils.rnn's functions also at the top (attn.rnn.pad_sequence, ...)
for _, k in ipairs({"pad_sequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence"}) do
  M[k] = utils[k]
end

-- A call of a PackedSequence method with '.' says to write ':'.
attn._misuse.guard_class(Packed, "packed")

return M
