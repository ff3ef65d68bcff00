-- SPDX-License-Identifier: MIT

--- attn.seq2seq: attention for recurrent encoder-decoders (Luong et al.
-- 2015, "Effective Approaches to Attention-based Neural Machine
-- Translation"; Bahdanau et al. 2015, "Neural Machine Translation by
-- Jointly Learning to Align and Translate"), as attn.nn modules.
--
-- Everything is batch-first: a decoder state h [B, H], encoder outputs
-- enc [B, S, He] and an optional source mask [B, S] (a tensor or nested
-- table, 1 = real token, 0 = padding).  Attention modules return the
-- context [B, He] and the alignment weights [B, S]; a padded position
-- gets weight exactly 0 (a row with no real position gets all-zero
-- weights and a zero context, and no NaN reaches any gradient).
--
--   local s2s = require "attn.seq2seq"          -- also attn.nn.LuongAttention ...
--   local att = s2s.LuongAttention(256, {score = "general"})
--   local ctx, w = att(h_t, enc, {mask = mask})
--
--   local bah = s2s.BahdanauAttention(512, 256, 128)
--   local keys = bah:precompute(enc)             -- U_a h_j, once per sequence
--   local ctx, w = bah(s_prev, enc, {mask = mask, keys = keys})
--
--   local step = s2s.AttnDecoderStep(nn.LSTMCell(E + 256, 256), att, {input_feeding = true})
--   local out, state, w = step(y_prev, state, enc, {mask = mask})
--
-- Source positions are 1-based (s = 1..S), as is the decoder step t of
-- local-m attention.  Parameter names follow the papers (W_a, U_a, v_a,
-- W_p, v_p, W_c), each an attn.nn.Linear without bias, so state_dicts read
-- "W_a.weight", "attention.v_a.weight", ...; BahdanauAttention(H,
-- {tutorial = true}) has the PyTorch seq2seq tutorial's Wa, Ua, Va (with
-- biases) instead.
--
-- The notebook's unbatched formulas are here as plain functions too:
-- luong_dot(H, s) and bahdanau_additive(H, s, W_a, W_b, W_c).
-- @module attn.seq2seq
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
local nn = require "attn.nn.layers"

local M = {}

local is_tensor = attn.is_tensor

local function fmt_shape(s) return "[" .. table.concat(s, ", ") .. "]" end

local function check_size(v, fn, name)
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) then
    error(("%s: %s must be an integer (got %s)"):format(fn, name, tostring(v)), 3)
  end
  if v < 1 then error(("%s: %s must be positive (got %s)"):format(fn, name, tostring(v)), 3) end
  return math.tointeger(v)
end

local function check_options(opts, fn, known) return attn._misuse.check_options(fn, opts, known) end

-- Checks that x is a tensor of rank #shape whose sizes equal the entries
-- of shape that are not false (false: any size); returns x:shape().
local function check_tensor(x, fn, name, shape, level)
  level = (level or 1) + 2
  if not is_tensor(x) then
    error(("%s: %s must be a tensor (got %s)"):format(fn, name, type(x)), level)
  end
  local s = x:shape()
  local ok = #s == #shape
  for i = 1, #shape do ok = ok and (shape[i] == false or shape[i] == s[i]) end
  if not ok then
    local want = {}
    for i = 1, #shape do want[i] = shape[i] == false and "*" or tostring(shape[i]) end
    error(("%s: %s has shape %s, expected %s"):format(fn, name, fmt_shape(s), fmt_shape(want)), level)
  end
  return s
end

-- The source mask (1 = real, 0 = pad) as a float tensor [B, S], and the
-- padding indicator (1 = pad) for masked_fill; nil, nil without a mask.
local function source_mask(mask, B, S, fn)
  if mask == nil then return nil, nil end
  if not is_tensor(mask) then
    if type(mask) ~= "table" then
      error(("%s: mask must be a tensor or a nested table [B, S] (got %s)"):format(fn, type(mask)), 3)
    end
    mask = attn.tensor(mask)
  end
  check_tensor(mask, fn, "mask", {B, S}, 2)
  mask = mask:detach()
  return mask:ne(0), mask:eq(0)
end

-- softmax over dim 2 of scores [B, S] with padded positions (pad [B, S] or
-- nil, 1 = pad) excluded: -inf before the softmax, exact zeros after it
-- (which also turns the NaN row of an all-padded row into zeros; the
-- masked_fill backward drops the gradient there).
local function masked_softmax(scores, pad)
  if pad == nil then return scores:softmax(2) end
  return scores:masked_fill(pad, -math.huge):softmax(2):masked_fill(pad, 0)
end

-- context [B, H] = sum_s w[b, s] enc[b, s, :]; w [B, S], enc [B, S, H].
local function weighted_sum(w, enc)
  return attn.matmul(w:unsqueeze(2), enc):squeeze(2)
end

-- x [*, in] @ w^T with w [out, in] (a Linear without bias on part of its
-- weight).
local function project(x, w)
  return attn.matmul(x, w:t())
end

-- Batch and source sizes from the query [B, Hq] and enc [B, S, He].
local function check_query(fn, q, qname, Hq, enc, He)
  local qs = check_tensor(q, fn, qname, {false, Hq}, 2)
  local es = check_tensor(enc, fn, "encoder_outputs", {qs[1], false, He}, 2)
  return qs[1], es[2]
end

-- -----------------------------------------------------------------------
-- Luong attention

local LuongAttention = nn.Module:extend("LuongAttention")
M.LuongAttention = LuongAttention

local scores_known = {dot = true, general = true, concat = true, dot_scaled = true, location = true}
local modes_known = {global = true, ["local-m"] = true, ["local-p"] = true}

--- LuongAttention(hidden [, opts]) with opts:
--   score = "dot" (default) | "general" | "concat" | "dot_scaled" | "location"
--     dot         h_t . h_s
--     general     h_t^T W_a h_s                     W_a: Linear(H, H)
--     concat      v_a^T tanh(W_a [h_t; h_s])         W_a: Linear(2H, H), v_a: Linear(H, 1)
--     dot_scaled  h_t . h_s / sqrt(H)
--     location    (W_a h_t)_s, s <= max_length       W_a: Linear(H, max_length)
--   max_length   the fixed source length of "location" (sources may be shorter)
--   mode = "global" (default) | "local-m" | "local-p", with D (window
--     half-width, positive integer) for the local modes:
--     local-m     p_t = t (opts.t of forward, 1-based); weights are the
--                 softmax of the scores over the window |s - p_t| <= D
--     local-p     p_t = S_b * sigmoid(v_p^T tanh(W_p h_t)) with S_b the
--                 number of real source positions in row b; the windowed
--                 softmax times exp(-(s - p_t)^2 / (2 sigma^2)), sigma = D/2
--                 (as in the paper, not renormalised: rows sum to < 1)
--                 W_p: Linear(H, predict_dim = H), v_p: Linear(predict_dim, 1)
-- Every Linear has no bias.
-- @usage
-- local att = nn.LuongAttention(16, {score = "general"})          -- "dot", "general", "concat", ...
-- local h, enc = attn.randn(2, 16), attn.randn(2, 7, 16)          -- decoder state [B, H], encoder [B, S, H]
-- local context, weights = att(h, enc, {mask = attn.ones(2, 7)})
-- print(context.shape, weights.shape)                              -- [2, 16] [2, 7]
function LuongAttention:init(hidden, opts)
  opts = check_options(opts, "LuongAttention",
    {score = true, max_length = true, mode = true, D = true, predict_dim = true})
  local H = check_size(hidden, "LuongAttention", "hidden")
  self.hidden = H
  self.context_size = H
  local score = opts.score or "dot"
  if not scores_known[score] then
    error(("LuongAttention: unknown score '%s' (dot, general, concat, dot_scaled or location)")
      :format(tostring(score)), 2)
  end
  self.score = score
  local mode = opts.mode or "global"
  if not modes_known[mode] then
    error(("LuongAttention: unknown mode '%s' (global, local-m or local-p)"):format(tostring(mode)), 2)
  end
  self.mode = mode
  if score == "general" then
    self.W_a = nn.Linear(H, H, false)
  elseif score == "concat" then
    self.W_a = nn.Linear(2 * H, H, false)
    self.v_a = nn.Linear(H, 1, false)
  elseif score == "location" then
    if opts.max_length == nil then error("LuongAttention: the location score needs opts.max_length", 2) end
    self.max_length = check_size(opts.max_length, "LuongAttention", "max_length")
    self.W_a = nn.Linear(H, self.max_length, false)
  elseif opts.max_length ~= nil then
    error("LuongAttention: max_length is an option of the location score only", 2)
  end
  if mode == "global" then
    if opts.D ~= nil or opts.predict_dim ~= nil then
      error("LuongAttention: D and predict_dim are options of local attention (mode local-m or local-p)", 2)
    end
  else
    if opts.D == nil then error(("LuongAttention: mode %s needs the window half-width D"):format(mode), 2) end
    self.D = check_size(opts.D, "LuongAttention", "D")
    if mode == "local-p" then
      local P = opts.predict_dim and check_size(opts.predict_dim, "LuongAttention", "predict_dim") or H
      self.W_p = nn.Linear(H, P, false)
      self.v_p = nn.Linear(P, 1, false)
    elseif opts.predict_dim ~= nil then
      error("LuongAttention: predict_dim is an option of local-p attention", 2)
    end
  end
end

--- The settings shown by tostring(module): hidden size, score, and
-- max_length / mode / D where they apply.
function LuongAttention:extra_repr()
  local s = ("%d, score=%s"):format(self.hidden, self.score)
  if self.max_length then s = s .. ", max_length=" .. self.max_length end
  if self.mode ~= "global" then s = s .. (", mode=%s, D=%d"):format(self.mode, self.D) end
  return s
end

--- precompute(enc [B, S, H]) -> the part of the scores that depends on the
-- source only, to pass as opts.keys to every decoder step: W_a's h_s half,
-- enc W_a[:, H+1:]^T [B, S, H], for the concat score; nil for the others
-- (general projects the query instead, h_t^T W_a, which is cheaper per
-- step).
-- @usage
-- local att = nn.LuongAttention(16, {score = "concat"})
-- local enc = attn.randn(2, 7, 16)
-- local keys = att:precompute(enc)                                 -- the source-only half of the scores
-- local context = att(attn.randn(2, 16), enc, {keys = keys})
-- print(keys.shape, context.shape)                                 -- [2, 7, 16] [2, 16]
function LuongAttention:precompute(enc)
  check_tensor(enc, "LuongAttention.precompute", "encoder_outputs", {false, false, self.hidden})
  if self.score ~= "concat" then return nil end
  local H = self.hidden
  return project(enc, self.W_a.weight:narrow(2, H + 1, H))
end

-- scores [B, S] of query h [B, H] against enc [B, S, H].
function LuongAttention:_scores(h, enc, keys, B, S)
  local H = self.hidden
  local score = self.score
  if score == "dot" or score == "dot_scaled" then
    local e = attn.matmul(enc, h:unsqueeze(3)):squeeze(3)
    if score == "dot_scaled" then e = e / math.sqrt(H) end
    return e
  elseif score == "general" then
    -- h_t^T (W_a h_s) = (h_t^T W_a) h_s: one [B, H] x [H, H] product per step
    local q = attn.matmul(h, self.W_a.weight)
    return attn.matmul(enc, q:unsqueeze(3)):squeeze(3)
  elseif score == "concat" then
    -- W_a [h_t; h_s] = W_a[:, :H] h_t + W_a[:, H:] h_s
    if keys == nil then
      keys = project(enc, self.W_a.weight:narrow(2, H + 1, H))
    else
      check_tensor(keys, "LuongAttention", "opts.keys", {B, S, H}, 3)
    end
    local q = project(h, self.W_a.weight:narrow(2, 1, H))
    return self.v_a((keys + q:unsqueeze(2)):tanh()):squeeze(3)
  else -- location
    if S > self.max_length then
      error(("LuongAttention: source length %d exceeds max_length %d of the location score")
        :format(S, self.max_length), 3)
    end
    local e = self.W_a(h)
    if S < self.max_length then e = e:narrow(2, 1, S) end
    return e
  end
end

--- forward(h_t [B, H], enc [B, S, H] [, opts]) -> context [B, H],
-- weights [B, S] (and p_t [B] for local-p).  opts: mask [B, S] (1 = real
-- token), keys (from precompute), t (the 1-based decoder step, local-m).
-- @usage
-- local h, enc = attn.randn(2, 16), attn.randn(2, 7, 16)             -- h_t [B, H], encoder outputs [B, S, H]
-- local att_m = nn.LuongAttention(16, {mode = "local-m", D = 1})
-- local context, weights = att_m(h, enc, {t = 3})                     -- step t = 3 attends to sources 2..4
-- local att_p = nn.LuongAttention(16, {mode = "local-p", D = 2})
-- print(att_p(h, enc, {mask = attn.ones(2, 7)}))                      -- context [2, 16], weights [2, 7], p_t [2]
function LuongAttention:forward(h, enc, opts)
  opts = check_options(opts, "LuongAttention", {mask = true, keys = true, t = true})
  local B, S = check_query("LuongAttention", h, "h_t", self.hidden, enc, self.hidden)
  local real, pad = source_mask(opts.mask, B, S, "LuongAttention")
  local scores = self:_scores(h, enc, opts.keys, B, S)
  if self.mode == "global" then
    local w = masked_softmax(scores, pad)
    return weighted_sum(w, enc), w
  end
  local D = self.D
  local pos = attn.arange(1, S + 1):unsqueeze(1) -- [1, S]
  local p, dist
  if self.mode == "local-m" then
    local t = type(opts.t) == "number" and math.tointeger(opts.t)
    if not t or t < 1 then
      error("LuongAttention: local-m attention needs the decoder step opts.t (a 1-based integer)", 2)
    end
    dist = pos - t
  else
    if opts.t ~= nil then error("LuongAttention: opts.t is for local-m attention (local-p predicts p_t)", 2) end
    local len = real and real:sum(2, true) or S -- [B, 1] or S
    p = self.v_p(self.W_p(h):tanh()):sigmoid() * len -- [B, 1]
    dist = pos - p -- [B, S]
  end
  -- outside the window [p_t - D, p_t + D] counts as padding
  local outside = dist:detach():abs():gt(D)
  if pad then outside = (outside + pad):gt(0) end
  if outside:shape()[1] ~= B then outside = outside:expand(B, S) end
  local w = masked_softmax(scores, outside)
  if self.mode == "local-m" then return weighted_sum(w, enc), w end
  local sigma = D / 2
  w = w * (dist * dist * (-1 / (2 * sigma * sigma))):exp()
  return weighted_sum(w, enc), w, p:squeeze(2)
end

-- -----------------------------------------------------------------------
-- Bahdanau attention

local BahdanauAttention = nn.Module:extend("BahdanauAttention")
M.BahdanauAttention = BahdanauAttention

--- BahdanauAttention(enc_hidden, dec_hidden, attn_dim [, opts]): additive
-- attention e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j) with W_a: Linear(dec_hidden,
-- attn_dim), U_a: Linear(enc_hidden, attn_dim), v_a: Linear(attn_dim, 1),
-- no biases.
-- opts.tutorial = true gives the PyTorch seq2seq tutorial's form and names:
-- Wa, Ua, Va (Linear layers with biases), score = Va(tanh(Wa(query) +
-- Ua(keys))), so the tutorial's state_dict (Wa.weight, Wa.bias, Ua.weight,
-- ..., Va.bias) loads as is; BahdanauAttention(hidden_size, {tutorial =
-- true}) is the tutorial's BahdanauAttention(hidden_size) (every size
-- hidden_size).
-- @usage
-- local att = nn.BahdanauAttention(16, 12, 10)                     -- encoder 16, decoder 12, attention 10
-- local enc, s = attn.randn(2, 7, 16), attn.randn(2, 12)
-- local context, weights = att(s, enc, {mask = attn.ones(2, 7)})
-- print(context.shape, weights.shape)                              -- [2, 16] [2, 7]
function BahdanauAttention:init(enc_hidden, dec_hidden, attn_dim, opts)
  if type(dec_hidden) == "table" and attn_dim == nil and opts == nil then
    opts, dec_hidden, attn_dim = dec_hidden, enc_hidden, enc_hidden
  end
  opts = check_options(opts, "BahdanauAttention", {tutorial = true})
  if opts.tutorial ~= nil and type(opts.tutorial) ~= "boolean" then
    error(("BahdanauAttention: tutorial must be a boolean (got %s)"):format(type(opts.tutorial)), 3)
  end
  self.enc_hidden = check_size(enc_hidden, "BahdanauAttention", "enc_hidden")
  self.dec_hidden = check_size(dec_hidden, "BahdanauAttention", "dec_hidden")
  self.attn_dim = check_size(attn_dim, "BahdanauAttention", "attn_dim")
  self.context_size = self.enc_hidden
  self.tutorial = opts.tutorial == true
  if self.tutorial then
    self.Wa = nn.Linear(self.dec_hidden, self.attn_dim)
    self.Ua = nn.Linear(self.enc_hidden, self.attn_dim)
    self.Va = nn.Linear(self.attn_dim, 1)
  else
    self.W_a = nn.Linear(self.dec_hidden, self.attn_dim, false)
    self.U_a = nn.Linear(self.enc_hidden, self.attn_dim, false)
    self.v_a = nn.Linear(self.attn_dim, 1, false)
  end
end

--- The settings shown by tostring(module): enc_hidden, dec_hidden, attn_dim.
function BahdanauAttention:extra_repr()
  return ("enc_hidden=%d, dec_hidden=%d, attn_dim=%d%s"):format(self.enc_hidden, self.dec_hidden, self.attn_dim,
    self.tutorial and ", tutorial=true" or "")
end

-- the three layers under either naming
local function bahdanau_layers(self)
  if self.tutorial then return self.Wa, self.Ua, self.Va end
  return self.W_a, self.U_a, self.v_a
end

--- precompute(enc [B, S, He]) -> keys U_a h_j [B, S, attn_dim]: compute it
-- once per source sequence and pass it as opts.keys to every step.
-- @usage
-- local att = nn.BahdanauAttention(16, 12, 10)
-- local enc = attn.randn(2, 7, 16)
-- local keys = att:precompute(enc)                                 -- U_a h_j, reused by every step
-- local context = att(attn.randn(2, 12), enc, {keys = keys})
-- print(keys.shape)                                                -- [2, 7, 10]
function BahdanauAttention:precompute(enc)
  check_tensor(enc, "BahdanauAttention.precompute", "encoder_outputs", {false, false, self.enc_hidden})
  local _, U = bahdanau_layers(self)
  return U(enc)
end

--- forward(s_prev [B, Hd], enc [B, S, He] [, opts]) -> context [B, He],
-- weights [B, S].  opts: mask [B, S] (1 = real token), keys (from
-- precompute; computed here when absent).  The tutorial's shapes work too:
-- query [B, 1, Hd] gives context [B, 1, He] and weights [B, 1, S].
-- @usage
-- local att = nn.BahdanauAttention(16, {tutorial = true})             -- the PyTorch tutorial's module
-- local query, keys = attn.randn(2, 1, 16), attn.randn(2, 7, 16)      -- query [B, 1, H], encoder [B, S, H]
-- local context, weights = att(query, keys)
-- print(context.shape, weights.shape)                                 -- [2, 1, 16] [2, 1, 7]
function BahdanauAttention:forward(s, enc, opts)
  opts = check_options(opts, "BahdanauAttention", {mask = true, keys = true})
  local step_dim = is_tensor(s) and s:dim() == 3
  if step_dim then
    if s:size(2) ~= 1 then
      error(("BahdanauAttention: a 3-D query must be [B, 1, %d] (got %s)"):format(self.dec_hidden,
        fmt_shape(s:shape())), 2)
    end
    s = s:squeeze(2)
  end
  local B, S = check_query("BahdanauAttention", s, "s_prev", self.dec_hidden, enc, self.enc_hidden)
  local _, pad = source_mask(opts.mask, B, S, "BahdanauAttention")
  local W, U, V = bahdanau_layers(self)
  local keys = opts.keys
  if keys == nil then
    keys = U(enc)
  else
    check_tensor(keys, "BahdanauAttention", "opts.keys", {B, S, self.attn_dim})
  end
  local scores = V((keys + W(s):unsqueeze(2)):tanh()):squeeze(3)
  local w = masked_softmax(scores, pad)
  local ctx = weighted_sum(w, enc)
  if step_dim then return ctx:unsqueeze(2), w:unsqueeze(2) end
  return ctx, w
end

-- -----------------------------------------------------------------------
-- Decoder step

local AttnDecoderStep = nn.Module:extend("AttnDecoderStep")
M.AttnDecoderStep = AttnDecoderStep

--- AttnDecoderStep(cell, attention [, opts]): one step of an attentional
-- decoder around an nn.GRUCell or nn.LSTMCell (any cell called as
-- cell(x, h) -> h' works like a GRUCell) and a LuongAttention or
-- BahdanauAttention.  opts:
--   order = "luong" | "bahdanau" (default: "bahdanau" for a
--     BahdanauAttention, else "luong")
--     luong     h_t = cell(x_t, h_{t-1}); c_t, a_t = attention(h_t, enc)
--     bahdanau  c_t, a_t = attention(h_{t-1}, enc); h_t = cell([x_t; c_t], h_{t-1})
--   attentional (default true for luong, false for bahdanau): the output
--     is h~_t = tanh(W_c [c_t; h_t]), W_c: Linear(C + H, H) without bias
--     (C the context size); otherwise the output is h_t
--   input_feeding (default false): the previous output (h~_{t-1}, zeros
--     at the first step) is concatenated to the next input, so the cell's
--     input_size is E + H (+ C for bahdanau) for embeddings of size E.
-- @usage
-- local enc = attn.randn(2, 7, 16)                                 -- [B, S, C] encoder outputs
-- local step = nn.AttnDecoderStep(nn.GRUCell(8, 16), nn.LuongAttention(16, {score = "general"}))
-- local out, state, weights = step(attn.randn(2, 8), nil, enc)     -- one decoder step
-- print(out.shape, weights.shape)                                  -- [2, 16] [2, 7]
function AttnDecoderStep:init(cell, attention, opts)
  opts = check_options(opts, "AttnDecoderStep", {order = true, attentional = true, input_feeding = true})
  if not nn.is_module(cell) then error("AttnDecoderStep: cell must be a module (GRUCell, LSTMCell)", 2) end
  if not nn.is_module(attention) then error("AttnDecoderStep: attention must be a module", 2) end
  local order = opts.order or (nn.isinstance(attention, BahdanauAttention) and "bahdanau" or "luong")
  if order ~= "luong" and order ~= "bahdanau" then
    error(("AttnDecoderStep: unknown order '%s' (luong or bahdanau)"):format(tostring(order)), 2)
  end
  local H = cell.hidden_size
  if math.type(H) ~= "integer" then error("AttnDecoderStep: the cell has no integer hidden_size", 2) end
  local C = attention.context_size
  if math.type(C) ~= "integer" then error("AttnDecoderStep: the attention module has no integer context_size", 2) end
  local qsize = attention.dec_hidden or attention.hidden
  if qsize ~= nil and qsize ~= H then
    error(("AttnDecoderStep: the attention's query size %d differs from the cell's hidden_size %d"):format(qsize, H), 2)
  end
  self.order = order
  self.lstm = nn.isinstance(cell, nn.LSTMCell)
  self.hidden_size = H
  self.context_size = C
  local attentional = opts.attentional
  if attentional == nil then attentional = order == "luong" end
  for _, k in ipairs({"attentional", "input_feeding"}) do
    if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
      error(("AttnDecoderStep: %s must be a boolean (got %s)"):format(k, type(opts[k])), 2)
    end
  end
  self.attentional = attentional == true
  self.input_feeding = opts.input_feeding == true
  self.cell = cell
  self.attention = attention
  if self.attentional then self.W_c = nn.Linear(C + H, H, false) end
end

--- The settings shown by tostring(module): order, attentional, input_feeding.
function AttnDecoderStep:extra_repr()
  return ("order=%s, attentional=%s, input_feeding=%s"):format(self.order,
    self.attentional and "True" or "False", self.input_feeding and "True" or "False")
end

--- precompute(enc) -> the attention's per-sequence keys (or nil).
-- @usage
-- local enc = attn.randn(2, 7, 16)
-- local step = nn.AttnDecoderStep(nn.GRUCell(8 + 16, 16), nn.BahdanauAttention(16, 16, 10))
-- local keys = step:precompute(enc)                                -- once per source sequence
-- local out = step(attn.randn(2, 8), nil, enc, {keys = keys})
-- print(out.shape)                                                -- [2, 16]
function AttnDecoderStep:precompute(enc)
  return self.attention:precompute(enc)
end

--- forward(y_prev [B, E], state, enc [B, S, C] [, opts]) -> output [B, H],
-- new state, weights [B, S], context [B, C].  state is nil (zeros) or
-- {h = [B, H], c = [B, H] (LSTM), feed = [B, H] (input feeding)}; missing
-- entries are zeros.  opts go to the attention (mask, keys, t).
-- @usage
-- local step = nn.AttnDecoderStep(nn.LSTMCell(8 + 16, 16), nn.LuongAttention(16), {input_feeding = true})
-- local enc, state = attn.randn(2, 7, 16), nil                        -- nil: zero h, c and feed
-- local out, weights
-- for _ = 1, 3 do out, state, weights = step(attn.randn(2, 8), state, enc) end   -- state: {h =, c =, feed =}
-- print(out.shape, state.c.shape, weights.shape)                      -- [2, 16] [2, 16] [2, 7]
function AttnDecoderStep:forward(y, state, enc, opts)
  local fn = "AttnDecoderStep"
  local ys = check_tensor(y, fn, "y_prev", {false, false})
  local B, H = ys[1], self.hidden_size
  if state ~= nil and (type(state) ~= "table" or nn.is_module(state)) then
    error("AttnDecoderStep: state must be nil or a table {h =, c =, feed =}", 2)
  end
  state = state or {}
  local function part(name)
    local v = state[name]
    if v == nil then return attn.zeros(B, H) end
    check_tensor(v, fn, "state." .. name, {B, H}, 2)
    return v
  end
  local h0 = part("h")
  local c0 = self.lstm and part("c") or nil
  local ctx, w
  local inputs = {y}
  if self.order == "bahdanau" then
    ctx, w = self.attention(h0, enc, opts)
    inputs[#inputs + 1] = ctx
  end
  if self.input_feeding then inputs[#inputs + 1] = part("feed") end
  local x = #inputs == 1 and y or attn.cat(inputs, 2)
  local want = self.cell.input_size
  if math.type(want) == "integer" and x:shape()[2] ~= want then
    error(("AttnDecoderStep: the cell takes inputs of size %d but gets %d (y_prev %d%s%s)"):format(want,
      x:shape()[2], ys[2], self.order == "bahdanau" and (" + context " .. self.context_size) or "",
      self.input_feeding and (" + feed " .. H) or ""), 2)
  end
  local h, c
  if self.lstm then
    h, c = self.cell(x, {h0, c0})
  else
    h = self.cell(x, h0)
  end
  if self.order == "luong" then ctx, w = self.attention(h, enc, opts) end
  local out = h
  if self.attentional then out = self.W_c(attn.cat({ctx, h}, 2)):tanh() end
  local new_state = {h = h, c = c}
  if self.input_feeding then new_state.feed = out end
  return out, new_state, w, ctx
end

--- decode(ys [B, T, E], state, enc [B, S, C] [, opts]) -> outputs
-- [B, T, H], weights [B, T, S], final state: T steps of teacher forcing,
-- with the attention keys precomputed once (opts.keys overrides) and,
-- for local-m attention, t = 1..T.  opts: mask, keys.
-- @usage
-- local enc = attn.randn(2, 7, 16)
-- local step = nn.AttnDecoderStep(nn.GRUCell(8, 16), nn.LuongAttention(16))
-- local outs, weights = step:decode(attn.randn(2, 5, 8), nil, enc)   -- 5 steps of teacher forcing
-- print(outs.shape, weights.shape)                                 -- [2, 5, 16] [2, 5, 7]
function AttnDecoderStep:decode(ys, state, enc, opts)
  opts = check_options(opts, "AttnDecoderStep.decode", {mask = true, keys = true})
  local s = check_tensor(ys, "AttnDecoderStep.decode", "ys", {false, false, false})
  local keys = opts.keys
  if keys == nil then keys = self:precompute(enc) end
  local local_m = self.attention.mode == "local-m"
  local outs, ws = {}, {}
  for t = 1, s[2] do
    local step_opts = {mask = opts.mask, keys = keys, t = local_m and t or nil}
    local out, w
    out, state, w = self(ys:select(2, t), state, enc, step_opts)
    outs[t], ws[t] = out, w
  end
  return attn.stack(outs, 2), attn.stack(ws, 2), state
end

-- -----------------------------------------------------------------------
-- The notebook's unbatched formulas

--- luong_dot(H [d, N], s [d, 1]) -> context [d, 1], alpha [N, 1], e [N, 1],
-- v [2d, 1]: e = H^T s, alpha = softmax(e), context = H alpha and the
-- decoder's next input v = [s; context].
-- @usage
-- local seq2seq = require "attn.seq2seq"
-- local context, alpha = seq2seq.luong_dot(attn.randn(4, 5), attn.randn(4, 1))   -- H [d, N], s [d, 1]
-- print(context.shape, alpha.shape)                                -- [4, 1] [5, 1]
function M.luong_dot(H, s)
  local hs = check_tensor(H, "luong_dot", "H", {false, false})
  check_tensor(s, "luong_dot", "s", {hs[1], 1})
  local e = attn.matmul(H:t(), s)
  local alpha = e:softmax(1)
  local context = attn.matmul(H, alpha)
  return context, alpha, e, attn.cat({s, context}, 1)
end

--- bahdanau_additive(H [d, N], s [d, 1], W_a [1, k], W_b [k, d], W_c [k, d])
-- -> context [1, d], att [1, N], scores [1, N], in the notebook's names:
-- scores = W_a tanh(W_b s + W_c H), att = softmax(scores) over the N
-- positions, context = att H^T.
-- @usage
-- local seq2seq = require "attn.seq2seq"
-- local d, N, k = 4, 5, 3
-- local context, att = seq2seq.bahdanau_additive(attn.randn(d, N), attn.randn(d, 1), attn.randn(1, k),
--   attn.randn(k, d), attn.randn(k, d))                            -- the notebook's names and shapes
-- print(context.shape, att.shape)                                  -- [1, 4] [1, 5]
function M.bahdanau_additive(H, s, W_a, W_b, W_c)
  local hs = check_tensor(H, "bahdanau_additive", "H", {false, false})
  check_tensor(s, "bahdanau_additive", "s", {hs[1], 1})
  local k = check_tensor(W_b, "bahdanau_additive", "W_b", {false, hs[1]})[1]
  check_tensor(W_c, "bahdanau_additive", "W_c", {k, hs[1]})
  check_tensor(W_a, "bahdanau_additive", "W_a", {1, k})
  local scores = attn.matmul(W_a, (attn.matmul(W_b, s) + attn.matmul(W_c, H)):tanh())
  local att = scores:softmax(2)
  return attn.matmul(att, H:t()), att, scores
end

-- the signatures (attn/signature.lua); these classes are attn's (torch has
-- none) and read their options themselves; a decoder state is a
-- string-keyed table itself
local signature = require "attn.signature"
signature.declare(LuongAttention, "seq2seq.LuongAttention.", {
  init = "native: self, hidden, /, *, score='dot', max_length=nil, mode='global', D=nil, predict_dim=nil",
  forward = "native: self, h, enc, /, *, mask=nil, keys=nil, t=nil", precompute = false, extra_repr = false})
signature.declare(BahdanauAttention, "seq2seq.BahdanauAttention.", {
  init = "native: self, enc_hidden, dec_hidden, attn_dim, /, *, tutorial=false",
  forward = "native: self, s, enc, /, *, mask=nil, keys=nil", precompute = false, extra_repr = false})
signature.declare(AttnDecoderStep, "seq2seq.AttnDecoderStep.", {
  init = "native: self, cell, attention, /, *, order='luong', attentional=true, input_feeding=false",
  forward = "native: self, y, state, enc, /, *, mask=nil, keys=nil",
  decode = "native: self, ys, state, enc, /, *, mask=nil, keys=nil", precompute = false, extra_repr = false})
signature.declare(M, "seq2seq.", {luong_dot = false, bahdanau_additive = false})

return M
