-- SPDX-License-Identifier: MIT

--- attn.attention.blocks: the building blocks of attn.attention (head
-- splitting, masks, the KV cache) and the argument checks its files
-- share.  It makes attn.attention's table; attention/positional.lua and
-- attention.lua add to it.  Its entries belong to attn.attention in the
-- reference.
-- @submodule attn.attention
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)

local M = {}

local is_tensor = attn.is_tensor

--------------------------------------------------------------------------
-- Helpers
-- @section helpers

local function fmt_shape(s)
  return "[" .. table.concat(s, ", ") .. "]"
end

local function check_size(v, fn, name, positive)
  -- math.tointeger refuses inf, NaN and floats past 2^63 as well as fractions
  local i = type(v) == "number" and math.tointeger(v)
  if not i then
    error(("%s: %s must be an integer (got %s)"):format(fn, name, tostring(v)), 3)
  end
  if i < 0 or (positive and i == 0) then
    error(("%s: %s must be %s (got %s)"):format(fn, name, positive and "positive" or "non-negative", tostring(v)), 3)
  end
  -- no tensor holds more than 2^56 elements: larger sizes (whose products,
  -- such as 3 * embed_dim, could wrap around) are refused here
  if i > (1 << 56) then error(("%s: %s = %d is too large"):format(fn, name, i), 3) end
  return i
end

local function check_options(opts, fn, known) return attn._misuse.check_options(fn, opts, known) end

local function check_tensor(x, fn, name, dims)
  if not is_tensor(x) then
    error(("%s: %s must be a tensor (got %s)"):format(fn, name, type(x)), 3)
  end
  if dims and not dims[x:dim()] then
    local allowed = {}
    for d in pairs(dims) do allowed[#allowed + 1] = tostring(d) end
    table.sort(allowed)
    error(("%s: %s must have %s dims, got %s"):format(fn, name, table.concat(allowed, " or "),
      fmt_shape(x:shape())), 3)
  end
  return x
end

local function check_bool(v, fn, name)
  if v ~= nil and type(v) ~= "boolean" then
    error(("%s: %s must be a boolean (got %s)"):format(fn, name, type(v)), 3)
  end
  return v
end

local function has_boolean(t)
  for _, v in ipairs(t) do
    if type(v) == "boolean" then return true end
    if type(v) == "table" and has_boolean(v) then return true end
  end
  return false
end

-- A mask argument -> tensor, kind ("bool" | "additive"); nil -> nil.
-- Bool tensors (and Lua tables of booleans) are bool masks, float tensors
-- additive ones (torch); an explicit kind reads a float 0/1 tensor as bool.
local function mask_arg(m, kind, fn, name)
  if m == nil then
    if kind ~= nil then error(("%s: %s_kind given without %s"):format(fn, name, name), 3) end
    return nil
  end
  if kind ~= nil and kind ~= "bool" and kind ~= "additive" then
    error(("%s: %s_kind must be \"bool\" or \"additive\" (got %s)"):format(fn, name, tostring(kind)), 3)
  end
  if type(m) == "table" and not is_tensor(m) then
    if has_boolean(m) then
      if kind == "additive" then
        error(("%s: %s is a table of booleans but %s_kind is \"additive\""):format(fn, name, name), 3)
      end
      kind = "bool"
    end
    m = attn.tensor(m)
  elseif not is_tensor(m) then
    error(("%s: %s must be a tensor or a table (got %s)"):format(fn, name, type(m)), 3)
  end
  if m.dtype == attn.bool then
    if kind == "additive" then
      error(("%s: %s is a bool tensor but %s_kind is \"additive\" (give a float mask)"):format(fn, name, name), 3)
    end
    kind = "bool"
  elseif m.dtype ~= attn.float32 then
    error(("%s: %s must be a bool or float tensor (got %s); use %s:bool() for a mask"):format(fn, name,
      tostring(m.dtype), name), 3)
  end
  if kind == nil then kind = "additive" end -- torch: a float mask is added to the scores
  return m, kind
end

-- The sequence length of x [..., L, E]
local function seq_len(x)
  local s = x:shape()
  return s[#s - 1]
end

--------------------------------------------------------------------------
-- Building blocks
-- @section building_blocks

--- split_heads(x, H): x [..., L, H*D] -> [..., H, L, D] (a view when x's
-- layout allows it, then a transpose).
-- @usage
-- print(nn.split_heads(attn.zeros(2, 5, 32), 4).shape)             -- attn.Size([2, 4, 5, 8])
function M.split_heads(x, H)
  check_tensor(x, "split_heads", "x")
  H = check_size(H, "split_heads", "H", true)
  local s = x:shape()
  local n = #s
  if n < 2 then error(("split_heads: x must be [..., L, H*D], got %s"):format(fmt_shape(s)), 2) end
  if s[n] % H ~= 0 then
    error(("split_heads: the last dim of %s is not a multiple of H = %d"):format(fmt_shape(s), H), 2)
  end
  local shape = {}
  for i = 1, n - 1 do shape[i] = s[i] end
  shape[n], shape[n + 1] = H, s[n] // H
  return x:reshape(shape):transpose(n - 1, n)
end

--- combine_heads(x): x [..., H, L, D] -> [..., L, H*D], split_heads' inverse.
-- @usage
-- print(nn.combine_heads(attn.zeros(2, 4, 5, 8)).shape)            -- attn.Size([2, 5, 32])
function M.combine_heads(x)
  check_tensor(x, "combine_heads", "x")
  local s = x:shape()
  local n = #s
  if n < 3 then error(("combine_heads: x must be [..., H, L, D], got %s"):format(fmt_shape(s)), 2) end
  local shape = {}
  for i = 1, n - 3 do shape[i] = s[i] end
  shape[n - 2], shape[n - 1] = s[n - 1], s[n - 2] * s[n]
  return x:transpose(n - 2, n - 1):reshape(shape)
end

--- causal_mask(L [, S] [, {bottom_right = false}]) -> [L, S] keep-mask (1
-- where query i sees key j: j <= i, or j <= i + S - L bottom-right aligned),
-- and padding_mask(lengths [B], S) -> [B, 1, 1, S] (1 for j <= lengths[b]):
-- attn's, in SDPA's convention (1 = take part).
M.causal_mask = attn.causal_mask
M.padding_mask = attn.padding_mask

--------------------------------------------------------------------------
-- KV cache
-- @section kv_cache

local KVCache = {}
KVCache.__index = KVCache
KVCache.__name = "attn.attention.KVCache"

--- KVCache(): keys and values [B, Hkv, T, D] of the positions seen so far.
-- cache:update(k, v) appends the new steps (dim 3) and returns the whole
-- k, v; cache:length() is T; cache:reset() empties it.  Without gradients
-- (inference) the cache grows in place with doubling capacity, so T steps
-- cost O(T) copies; when k or v require grad it concatenates instead, so
-- gradients flow into every step.
-- @usage
-- local mqa = nn.MultiQueryAttention(16, 4, {causal = true})
-- local cache = nn.KVCache()
-- for _ = 1, 3 do mqa(attn.randn(1, 1, 16), {cache = cache}) end   -- one token at a time
-- print(cache:length())                                            -- 3
function M.KVCache()
  return setmetatable({len = 0}, KVCache)
end

--- cache:length(): T, the number of positions cached (0 when empty).
-- Also attn.attention.KVCacheClass.length.
-- @treturn int
-- @usage
-- local cache = nn.KVCache()
-- cache:update(attn.randn(1, 2, 4, 8), attn.randn(1, 2, 4, 8))
-- print(cache:length())                                            -- 4 steps cached
function KVCache:length()
  return self.len
end

--- cache:reset(): empties the cache (drops its tensors); returns it.
-- @usage
-- local cache = nn.KVCache()
-- cache:update(attn.randn(1, 2, 4, 8), attn.randn(1, 2, 4, 8))
-- cache:reset()                                                    -- a new sequence
-- print(cache:length())                                            -- 0
function KVCache:reset()
  self.k, self.v, self.kbuf, self.vbuf, self.len = nil, nil, nil, nil, 0
  return self
end

local function grow(buf, len, need, shape)
  local cap = buf and buf:shape()[3] or 0
  if need <= cap then return buf end
  local s = {shape[1], shape[2], math.max(need, 2 * cap, 16), shape[4]}
  local nb = attn.empty(s)
  if len > 0 then nb:narrow(3, 1, len):copy_(buf:narrow(3, 1, len)) end
  return nb
end

--- cache:update(k, v): appends the new steps k [B, Hkv, n, D] and
-- v [B, Hkv, n, Dv] along dim 3 and returns the whole cached k, v
-- [B, Hkv, T + n, ...].  B, Hkv and D must continue the cached ones.
-- Without gradients the cache grows in place (the returned tensors are
-- views of its buffers); with gradients it concatenates.  (Hugging Face's
-- DynamicCache.update.)
-- @tparam Tensor k 4-d
-- @tparam Tensor v 4-d, same length n as k
-- @treturn Tensor k [B, Hkv, T + n, D]
-- @treturn Tensor v [B, Hkv, T + n, Dv]
-- @usage
-- local cache = nn.KVCache()
-- local k, v = cache:update(attn.randn(1, 2, 3, 8), attn.randn(1, 2, 3, 8))
-- k, v = cache:update(attn.randn(1, 2, 1, 8), attn.randn(1, 2, 1, 8))   -- appended on dim 3
-- print(k.shape)                                                   -- attn.Size([1, 2, 4, 8])
function KVCache:update(k, v)
  check_tensor(k, "KVCache.update", "k", {[4] = true})
  check_tensor(v, "KVCache.update", "v", {[4] = true})
  local ks, vs = k:shape(), v:shape()
  if self.len > 0 then
    local ok = self.k:shape()
    local ov = self.v:shape()
    if ks[1] ~= ok[1] or ks[2] ~= ok[2] or ks[4] ~= ok[4] or vs[1] ~= ov[1] or vs[2] ~= ov[2] or vs[4] ~= ov[4] then
      error(("KVCache.update: new k %s / v %s do not continue the cached k %s / v %s")
        :format(fmt_shape(ks), fmt_shape(vs), fmt_shape(ok), fmt_shape(ov)), 2)
    end
  end
  if ks[3] ~= vs[3] then
    error(("KVCache.update: k %s and v %s have different lengths"):format(fmt_shape(ks), fmt_shape(vs)), 2)
  end
  local n = ks[3]
  local graph = attn.is_grad_enabled() and (k.requires_grad or v.requires_grad
    or (self.k ~= nil and (self.k.requires_grad or self.v.requires_grad)))
  if graph or (self.len > 0 and self.kbuf == nil) then
    -- differentiable: concatenate (and stay on that path for this cache)
    if self.len == 0 then
      self.k, self.v = k, v
    else
      self.k, self.v = attn.cat({self.k, k}, 3), attn.cat({self.v, v}, 3)
    end
    self.kbuf, self.vbuf = nil, nil
  else
    local guard <close> = attn.no_grad()
    local need = self.len + n
    self.kbuf = grow(self.kbuf, self.len, need, ks)
    self.vbuf = grow(self.vbuf, self.len, need, vs)
    if n > 0 then
      self.kbuf:narrow(3, self.len + 1, n):copy_(k)
      self.vbuf:narrow(3, self.len + 1, n):copy_(v)
    end
    self.k, self.v = self.kbuf:narrow(3, 1, need), self.vbuf:narrow(3, 1, need)
  end
  self.len = self.len + n
  return self.k, self.v
end


--- The KV cache class, for isinstance-like checks: getmetatable(c) == M.KVCacheClass
M.KVCacheClass = KVCache

-- cache.append(k, v) for cache:append(k, v) says to write ':'.
attn._misuse.guard_class(KVCache, "cache")

-- The checks attention/positional.lua and attention.lua share.
M._util = {fmt_shape = fmt_shape, check_size = check_size, check_options = check_options,
           check_tensor = check_tensor, check_bool = check_bool, mask_arg = mask_arg, seq_len = seq_len}

-- no optional arguments (attn/signature.lua); causal_mask and padding_mask
-- are attn's, declared there
require("attn.signature").declare(M, "attention.", {split_heads = false, combine_heads = false, KVCache = false})
require("attn.signature").declare(KVCache, "attention.KVCacheClass.", {length = false, reset = false,
  update = false})

return M
