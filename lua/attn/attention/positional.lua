-- SPDX-License-Identifier: MIT

--- attn.attention.positional: the positional encodings of attn.attention
-- (sinusoidal, learned, rotary, ALiBi), added to the table of
-- attn.attention.blocks.  Its entries belong to attn.attention in the
-- reference.
-- @submodule attn.attention
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
local nn = require "attn.nn.layers"
local M = require "attn.attention.blocks"
local signature = require "attn.signature"

local is_tensor = attn.is_tensor
local U = M._util
local fmt_shape, check_size, check_options, check_tensor, check_bool, seq_len = U.fmt_shape, U.check_size,
  U.check_options, U.check_tensor, U.check_bool, U.seq_len

--------------------------------------------------------------------------
-- Positional encodings
-- @section positional_encodings

--- sinusoidal_table(max_len, d_model) -> [max_len, d_model] with
-- pe[p, 2i] = sin(p * w_i), pe[p, 2i+1] = cos(p * w_i) (0-based p and i
-- as in the formula), w_i = exp(2i * -(ln 10000 / d_model)), computed in
-- float32 as the Annotated Transformer does.
-- @usage
-- local pe = nn.sinusoidal_table(50, 16)                           -- [max_len, d_model]
-- print(pe.shape, pe[1][2])                                        -- position 1: sin 0, cos 0 = 1
function M.sinusoidal_table(max_len, d_model)
  max_len = check_size(max_len, "sinusoidal_table", "max_len")
  d_model = check_size(d_model, "sinusoidal_table", "d_model", true)
  if d_model % 2 ~= 0 then
    error(("sinusoidal_table: d_model must be even (got %d)"):format(d_model), 2)
  end
  local position = attn.arange(0, max_len):unsqueeze(2)                             -- [max_len, 1]
  local div_term = (attn.arange(0, d_model, 2) * -(math.log(10000.0) / d_model)):exp() -- [d_model / 2]
  local angle = position * div_term                                                 -- [max_len, d_model / 2]
  return attn.stack({angle:sin(), angle:cos()}, 3):reshape(max_len, d_model)        -- sin, cos interleaved
end

local PositionalEncoding = nn.Module:extend("PositionalEncoding")
M.PositionalEncoding = PositionalEncoding

--- PositionalEncoding(d_model, dropout [, max_len = 5000]): the Annotated
-- Transformer's: a buffer pe [1, max_len, d_model] (sinusoidal_table) added
-- to x [B, L, d_model] (or [L, d_model]), then dropout.  forward(x [, offset
-- = 0]) adds the rows of positions offset .. offset + L - 1 (for decoding
-- step by step).
-- @usage
-- local pe = nn.PositionalEncoding(16, 0.1)                        -- sinusoidal, with dropout
-- print(pe(attn.zeros(2, 10, 16)).shape)                           -- batch-first [B, T, d_model]
function PositionalEncoding:init(d_model, dropout, max_len)
  self.d_model = check_size(d_model, "PositionalEncoding", "d_model", true)
  self.max_len = check_size(max_len or 5000, "PositionalEncoding", "max_len")
  self.dropout = nn.Dropout(dropout or 0.0)
  self:register_buffer("pe", M.sinusoidal_table(self.max_len, self.d_model):unsqueeze(1))
end

local function position_rows(table_, x, offset, fn, max_len)
  offset = check_size(offset or 0, fn, "offset")
  local L = seq_len(x)
  if offset + L > max_len then
    error(("%s: positions %d..%d exceed max_len %d"):format(fn, offset, offset + L - 1, max_len), 3)
  end
  return table_:narrow(1, offset + 1, L)
end

--- forward(x [, offset = 0]): x + pe rows offset+1 .. offset+L (positions
-- offset .. offset + L - 1, a count: the same number as torch code uses),
-- then dropout.
-- @tparam Tensor x [B, L, d_model] or [L, d_model]
-- @tparam[opt=0] int offset
-- @treturn Tensor of x's shape
function PositionalEncoding:forward(x, offset)
  check_tensor(x, "PositionalEncoding", "x")
  local s = x:shape()
  if #s < 2 or s[#s] ~= self.d_model then
    error(("PositionalEncoding: x must be [..., L, %d], got %s"):format(self.d_model, fmt_shape(s)), 2)
  end
  local rows = position_rows(self.pe:select(1, 1), x, offset, "PositionalEncoding", self.max_len)
  return self.dropout(x + rows:detach())
end

local LearnedPositionalEncoding = nn.Module:extend("LearnedPositionalEncoding")
M.LearnedPositionalEncoding = LearnedPositionalEncoding

--- LearnedPositionalEncoding(max_len, d_model [, {dropout = 0}]): a child
-- Embedding "embedding" [max_len, d_model] (N(0, 1) init, like any
-- Embedding) whose row for each position is added to x [..., L, d_model];
-- forward(x [, offset = 0]) uses positions offset .. offset + L - 1.
-- @usage
-- local pe = nn.LearnedPositionalEncoding(64, 16)                  -- up to 64 positions, d_model 16
-- print(pe(attn.zeros(2, 10, 16)).shape)                           -- x + a learned row per position
function LearnedPositionalEncoding:init(max_len, d_model, dropout)
  local opts = {dropout = dropout}
  self.max_len = check_size(max_len, "LearnedPositionalEncoding", "max_len", true)
  self.d_model = check_size(d_model, "LearnedPositionalEncoding", "d_model", true)
  self.embedding = nn.Embedding(self.max_len, self.d_model)
  self.dropout = nn.Dropout(opts.dropout == nil and 0.0 or opts.dropout)
end

--- forward(x [, offset = 0]): x + the embedding rows of positions
-- offset .. offset + L - 1, then dropout.
-- @tparam Tensor x [..., L, d_model]
-- @tparam[opt=0] int offset
-- @treturn Tensor of x's shape
function LearnedPositionalEncoding:forward(x, offset)
  check_tensor(x, "LearnedPositionalEncoding", "x")
  local s = x:shape()
  if #s < 2 or s[#s] ~= self.d_model then
    error(("LearnedPositionalEncoding: x must be [..., L, %d], got %s"):format(self.d_model, fmt_shape(s)), 2)
  end
  offset = check_size(offset or 0, "LearnedPositionalEncoding", "offset")
  local L = seq_len(x)
  if offset + L > self.max_len then
    error(("LearnedPositionalEncoding: positions %d..%d exceed max_len %d"):format(offset, offset + L - 1,
      self.max_len), 2)
  end
  local ids = attn.arange(offset + 1, offset + L + 1) -- 1-based rows
  return self.dropout(x + self.embedding(ids))
end

-- RoPE ---------------------------------------------------------------------
--
-- Rotary position embedding in the GPT-NeoX / LLaMA (Hugging Face)
-- "rotate_half" convention: a head vector x of even size D is split into
-- halves x1 = x[1 .. D/2], x2 = x[D/2+1 .. D], and pair (x1_i, x2_i) is
-- rotated by the angle p * theta_i, theta_i = base^(-2(i-1)/D):
--   rope(x, p) = x * cos + rotate_half(x) * sin,  rotate_half(x) = [-x2, x1]
-- with cos/sin [L, D] = cos/sin of cat(p * theta, p * theta).  (The
-- original RoFormer/GPT-J form rotates interleaved pairs (x_2i, x_2i+1)
-- instead; the two differ by a fixed permutation of the head dims, which
-- the q/k projections absorb, but weights trained one way need that one.)
-- Positions p are token positions counted from 0 (the first token is not
-- rotated), like every RoPE implementation: they are angles' multipliers,
-- not indices.

--- rope_inv_freq(dim [, base = 10000]) -> [dim/2]: 1 / base^(2i/dim)
-- (float32, as torch computes it)
-- @usage
-- print(nn.rope_inv_freq(8))                                       -- 1 / 10000^(2i/8), i = 0..3
function M.rope_inv_freq(dim, base)
  dim = check_size(dim, "rope_inv_freq", "dim", true)
  if dim % 2 ~= 0 then error(("rope_inv_freq: dim must be even (got %d)"):format(dim), 2) end
  base = base or 10000.0
  if type(base) ~= "number" or base <= 0 then error("rope_inv_freq: base must be a positive number", 2) end
  return 1.0 / attn.pow(base, attn.arange(0, dim, 2) / dim)
end

-- positions argument -> float tensor [L]
local function positions_arg(positions, L, fn)
  if positions == nil then return attn.arange(0, L) end
  if type(positions) == "number" then
    local off = check_size(positions, fn, "positions (an offset)")
    return attn.arange(off, off + L)
  end
  if type(positions) == "table" and not is_tensor(positions) then positions = attn.tensor(positions) end
  check_tensor(positions, fn, "positions", {[1] = true})
  if positions:numel() ~= L then
    error(("%s: %d positions for a sequence of %d"):format(fn, positions:numel(), L), 3)
  end
  return positions
end

--- rope_cos_sin(dim, positions [, base]) -> cos, sin [L, dim] for a 1-d
-- tensor (or table) of L positions: cos/sin of cat(p * inv_freq, p * inv_freq).
-- @usage
-- local cos, sin = nn.rope_cos_sin(8, attn.arange(1, 5))           -- head dim 8, positions 1..4
-- print(cos.shape, sin.shape)
function M.rope_cos_sin(dim, positions, base)
  local inv = M.rope_inv_freq(dim, base)
  if type(positions) == "table" and not is_tensor(positions) then positions = attn.tensor(positions) end
  check_tensor(positions, "rope_cos_sin", "positions", {[1] = true})
  local freqs = attn.outer(positions, inv) -- [L, dim/2]
  local emb = attn.cat({freqs, freqs}, -1)
  return emb:cos(), emb:sin()
end

--- rotate_half(x [..., D]) -> [-x2, x1]
-- @usage
-- print(nn.rotate_half(attn.tensor({1.0, 2.0, 3.0, 4.0})))         -- tensor([-3., -4.,  1.,  2.])
function M.rotate_half(x)
  check_tensor(x, "rotate_half", "x")
  if x:dim() == 0 then error("rotate_half: x must have a last dim to split, got a 0-d tensor", 2) end
  local D = x:shape()[x:dim()]
  if D % 2 ~= 0 then error(("rotate_half: the last dim must be even (got %d)"):format(D), 2) end
  local h = D // 2
  return attn.cat({-x:narrow(-1, h + 1, h), x:narrow(-1, 1, h)}, -1)
end

--- apply_rotary(q, k, positions [, base = 10000]) -> q', k': q [..., L, D]
-- and k [..., S, D] (k may be nil) rotated at positions: nil (0 .. L-1),
-- a number n (n .. n+L-1), or a tensor/table of L positions; k uses the
-- same positions, so it needs S == L (rotate cached keys when they are
-- made).  base may also be given as {base = b}.
-- @usage
-- local q, k = attn.randn(1, 1, 4, 8), attn.randn(1, 1, 4, 8)
-- local qr, kr = nn.apply_rotary(q, k)                             -- positions 1..4
-- print(qr.shape)
function M.apply_rotary(q, k, positions, base)
  if type(base) == "table" then base = check_options(base, "apply_rotary", {base = true}).base end
  check_tensor(q, "apply_rotary", "q")
  local L, D = seq_len(q), q:shape()[q:dim()]
  if k ~= nil then
    check_tensor(k, "apply_rotary", "k")
    if seq_len(k) ~= L or k:shape()[k:dim()] ~= D then
      error(("apply_rotary: q %s and k %s need the same length and head size"):format(fmt_shape(q:shape()),
        fmt_shape(k:shape())), 2)
    end
  end
  local pos = positions_arg(positions, L, "apply_rotary")
  local cos, sin = M.rope_cos_sin(D, pos, base)
  local qr = q * cos + M.rotate_half(q) * sin
  if k == nil then return qr end
  return qr, k * cos + M.rotate_half(k) * sin
end

local RotaryEmbedding = nn.Module:extend("RotaryEmbedding")
M.RotaryEmbedding = RotaryEmbedding

--- RotaryEmbedding(dim [, {base = 10000}]): the non-persistent buffer
-- inv_freq [dim/2] (as Hugging Face's LLaMA); forward(q, k [, positions])
-- is apply_rotary with this base.
-- @usage
-- local rope = nn.RotaryEmbedding(8)                               -- head dim 8
-- local q, k = attn.randn(1, 2, 5, 8), attn.randn(1, 2, 5, 8)
-- local qr, kr = rope(q, k)                                        -- rotated by position
-- print(qr.shape, kr.shape)
function RotaryEmbedding:init(dim, base)
  local opts = {base = base}
  self.dim = check_size(dim, "RotaryEmbedding", "dim", true)
  self.base = opts.base
  if self.base == nil then self.base = 10000.0 end
  if type(self.base) ~= "number" then
    error(("RotaryEmbedding: base must be a number (got %s)"):format(type(self.base)), 2)
  end
  self:register_buffer("inv_freq", M.rope_inv_freq(self.dim, self.base), false)
end

--- forward(q [, k] [, positions]): apply_rotary(q, k, positions, self.base):
-- q (and k) rotated at their positions.
-- @tparam Tensor q [..., L, dim]
-- @tparam[opt] Tensor k [..., L, dim]
-- @param[opt] positions as apply_rotary
-- @treturn Tensor q rotated
-- @treturn[opt] Tensor k rotated
function RotaryEmbedding:forward(q, k, positions)
  check_tensor(q, "RotaryEmbedding", "q")
  if q:shape()[q:dim()] ~= self.dim then
    error(("RotaryEmbedding: q %s must have head size %d"):format(fmt_shape(q:shape()), self.dim), 2)
  end
  return M.apply_rotary(q, k, positions, self.base)
end

--- extra_repr(): "dim=.., base=10000.0".
function RotaryEmbedding:extra_repr()
  return ("dim=%d, base=%s"):format(self.dim, nn._pyrepr(self.base))
end

-- ALiBi --------------------------------------------------------------------

local function slopes_power_of_2(n)
  local start = 2 ^ (-2 ^ -(math.log(n, 2) - 3))
  local ratio = start
  local out = {}
  for i = 0, n - 1 do out[i + 1] = start * ratio ^ i end
  return out
end

--- alibi_slopes(n) -> list of n head slopes (Lua numbers), the ALiBi
-- paper's: for n a power of two, the geometric sequence starting at
-- 2^(-8/n) with that ratio; otherwise the slopes of the closest smaller
-- power of two c, followed by every other slope of 2c (its odd-numbered
-- ones) until there are n.
-- @usage
-- print(table.concat(nn.alibi_slopes(4), ", "))                   -- 0.25, 0.0625, 0.015625, 0.00390625
function M.alibi_slopes(n)
  n = check_size(n, "alibi_slopes", "n", true)
  -- a Lua list of n numbers: refuse counts no model has rather than loop
  if n > (1 << 24) then error(("alibi_slopes: n = %d heads is too many (at most 2^24)"):format(n), 2) end
  local l2 = math.log(n, 2)
  if l2 == math.floor(l2) then return slopes_power_of_2(n) end
  local c = 2 ^ math.floor(l2)
  c = math.tointeger(c)
  local out = slopes_power_of_2(c)
  local extra = M.alibi_slopes(2 * c)
  for i = 1, n - c do out[c + i] = extra[2 * i - 1] end
  return out
end

--- alibi_bias(n_heads, L [, S = L] [, {symmetric = false}]) -> [n_heads, L, S]
-- additive bias slope_h * (j - i') with i' = i + S - L the query's
-- position when the last query sits at the last key (0 on that diagonal,
-- -slope per step into the past; positive to the future, which a causal
-- mask hides).  symmetric: -slope_h * |j - i'| for bidirectional use.
-- @usage
-- print(nn.alibi_bias(2, 3).shape)                                 -- [2, 3, 3]: a head's slope times -distance
function M.alibi_bias(n_heads, L, S, symmetric)
  local opts = {symmetric = symmetric}
  check_bool(opts.symmetric, "alibi_bias", "symmetric")
  L = check_size(L, "alibi_bias", "L")
  S = check_size(S or L, "alibi_bias", "S")
  local slopes = attn.tensor(M.alibi_slopes(n_heads)):reshape(n_heads, 1, 1)
  local rel = attn.arange(0, S):reshape(1, S) - attn.arange(0, L):reshape(L, 1) - (S - L) -- [L, S]
  if opts.symmetric then rel = -rel:abs() end
  return slopes * rel:unsqueeze(1)
end

local ALiBi = nn.Module:extend("ALiBi")
M.ALiBi = ALiBi

--- ALiBi(n_heads [, {symmetric = false}]): the non-persistent buffer
-- slopes [n_heads]; forward(L [, S]) -> alibi_bias [n_heads, L, S], to add
-- to the scores (attn_mask_kind = "additive"; it broadcasts over batch).
-- @usage
-- local alibi = nn.ALiBi(4)                                        -- 4 heads
-- local bias = alibi(6)                                            -- [4, 6, 6], added to the scores
-- local q = attn.randn(1, 4, 6, 8)
-- local y = attn.scaled_dot_product_attention(q, q, q, {attn_mask = bias, attn_mask_kind = "additive"})
-- print(bias.shape, y.shape)
function ALiBi:init(n_heads, symmetric)
  local opts = {symmetric = symmetric}
  check_bool(opts.symmetric, "ALiBi", "symmetric")
  self.n_heads = check_size(n_heads, "ALiBi", "n_heads", true)
  self.symmetric = opts.symmetric == true
  self:register_buffer("slopes", attn.tensor(M.alibi_slopes(self.n_heads)), false)
end

--- forward(L [, S = L]): alibi_bias(n_heads, L, S, {symmetric =}), an
-- additive bias [n_heads, L, S].
-- @tparam int L
-- @tparam[opt] int S
-- @treturn Tensor [n_heads, L, S]
function ALiBi:forward(L, S)
  return M.alibi_bias(self.n_heads, L, S, self.symmetric)
end

--- extra_repr(): "n_heads=.." and ", symmetric=True" when set.
function ALiBi:extra_repr()
  return ("n_heads=%d"):format(self.n_heads) .. (self.symmetric and ", symmetric=True" or "")
end

-- the signatures (attn/signature.lua: a trailing options table); torch has
-- none of these, they take their own
signature.declare(M, "attention.", {
  sinusoidal_table = false, rope_inv_freq = "dim, base=10000.0", rope_cos_sin = "dim, positions, base=10000.0",
  rotate_half = false, apply_rotary = "q, k, positions=nil, base=10000.0", alibi_slopes = false,
  alibi_bias = "n_heads, L, S=nil, symmetric=false"})
signature.declare(PositionalEncoding, "attention.PositionalEncoding.", {
  init = "self, d_model, dropout=0.0, max_len=5000", forward = "self, x, offset=0"})
signature.declare(LearnedPositionalEncoding, "attention.LearnedPositionalEncoding.", {
  init = "self, max_len, d_model, dropout=0.0", forward = "self, x, offset=0"})
signature.declare(RotaryEmbedding, "attention.RotaryEmbedding.", {
  init = "self, dim, base=10000.0", forward = "self, q, k=nil, positions=nil", extra_repr = false})
signature.declare(ALiBi, "attention.ALiBi.", {
  init = "self, n_heads, symmetric=false", forward = "self, L, S=nil", extra_repr = false})

return M
