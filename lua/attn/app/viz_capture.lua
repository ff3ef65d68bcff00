-- SPDX-License-Identifier: MIT

--- attn.viz's capture: every attention map of a forward pass, by module
-- path, without changing the model's code.
--
--   local cap <close> = viz.capture(model)          -- hooks on, until cap:remove()
--   model(ids)
--   local maps = cap:maps()                         -- one [B, H, L, S] map per call
--
-- Paths are model:named_modules()'s (torch's names: list children count
-- from 0, as in state_dict keys).  A forward that raises leaves its hooks'
-- bookkeeping until the model's next call, which starts afresh.
-- What is recorded, and how (each record says which in record.source):
--   * attn.scaled_dot_product_attention called inside one of the model's
--     modules (nn.MultiheadAttention, the Transformer layers, BERT,
--     GroupedQueryAttention, a user's module calling F.sdpa ...): the fused
--     kernel keeps no probabilities, so after it ran the capture computes
--     them again from the same q, k, v, mask and scale with grad off
--     ("recomputed"; before dropout, and drawing no random numbers, so the
--     model's results and its random stream stay exactly what they were);
--     a call that asked for the weights gives its own ("returned").  With
--     {grads = true} the call itself is asked for them ("asked": the
--     explicit path, torch's math, so that the output is computed from the
--     recorded map and d output / d map exists; results equal the fused
--     kernel's to float rounding).
--   * LuongAttention and BahdanauAttention: the weights their forward
--     returns ("returned"), one record per decoder step, [B, 1, 1, S].
-- A record is {path = the module's name in model:named_modules() ("" for
-- the model itself), module, call = the how-many-th record of that path,
-- kind = "sdpa" | "luong" | "bahdanau", source, weights = [B, H, L, S]
-- (an SDPA call on [L, D] gives B = H = 1, on [B, L, D] H = 1; dims
-- between the batch and L fold into H), q = [B, H, L, D] and
-- k = [B, H, S, D] with {qk = true} (sdpa calls only)}.
-- @module attn.viz
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line
local is_tensor = attn.is_tensor

local M = {}

local signature = require "attn.signature"

-- SDPA's optional parameters in torch's positional order (its declared
-- signature, after query, key and value)
local SDPA_OPTIONS = {}
do
  local names = signature.parse(signature.SIGNATURES.scaled_dot_product_attention)
  table.move(names, 4, #names, 1, SDPA_OPTIONS)
end

local active = {} -- captures recording now, oldest first
-- whether observer is installed, and what observed SDPA before it
local installed, previous_observer = false, nil

-- sdpa's options after q, k, v (positional, a trailing table or both) as
-- a fresh table name -> value; nil for a call the capture leaves to SDPA
-- alone (one that SDPA refuses, with its own message)
local function sdpa_options(...)
  local ok, o = pcall(attn._misuse.merge_options, "scaled_dot_product_attention", SDPA_OPTIONS, ...)
  return ok and o or nil
end

-- an SDPA operand or map [..., L, X] as [B, H, L, X]: [L, X] -> [1, 1, L, X];
-- [B, L, X] (a batch of one-head calls) -> [B, 1, L, X]; more leading dims
-- than two fold into the heads
local function as4(t)
  local d = t:dim()
  if d == 2 then return t:unsqueeze(1):unsqueeze(1) end
  if d == 3 then return t:unsqueeze(2) end
  if d == 4 then return t end
  local s = t:shape()
  return t:reshape(s[1], -1, s[d - 1], s[d])
end

local function observer(c_sdpa, q, k, v, ...)
  local watching
  for _, cap in ipairs(active) do
    if #cap._stack > 0 then
      watching = watching or {}
      watching[#watching + 1] = cap
    end
  end
  local o = watching and is_tensor(q) and is_tensor(k) and is_tensor(v) and sdpa_options(...)
  if not o then return c_sdpa(q, k, v, ...) end
  local grads = false
  for _, cap in ipairs(watching) do grads = grads or cap._grads end
  local out, w, source
  if o.need_weights == true then
    out, w = c_sdpa(q, k, v, ...)
    source = "returned"
  elseif grads and attn.is_grad_enabled() then
    o.need_weights = true
    out, w = c_sdpa(q, k, v, o)
    source = "asked"
  else
    out = c_sdpa(q, k, v, ...)
    o.need_weights, o.dropout_p, o.generator = true, nil, nil
    w = select(2, attn.no_grad(c_sdpa, q, k, v, o))
    source = "recomputed"
  end
  if grads and w.requires_grad then w:retain_grad() end
  for _, cap in ipairs(watching) do
    local r = {kind = "sdpa", source = source, weights = w}
    if cap._qk then r.q, r.k = as4(q:detach()), as4(k:detach()) end
    cap:_add(r)
  end
  if source == "returned" then return out, w end
  return out
end

local Capture = {__name = "attn.viz.Capture"}
Capture.__index = Capture

function Capture:_add(r)
  local path = self._stack[#self._stack]
  r.path, r.module = path[1], path[2]
  r._raw = r._raw or r.weights -- the tensor whose .grad the backward fills
  r.weights = as4(r.weights)
  local n = (self._calls[r.path] or 0) + 1
  self._calls[r.path] = n
  r.call = n
  self.records[#self.records + 1] = r
end

local function check_self(self, fn)
  if getmetatable(self) ~= Capture then
    error(("Capture:%s: call it with a colon, as cap:%s(...)"):format(fn, fn), 3)
  end
end

-- the records whose path matches the Lua pattern (all with nil)
local function select_records(self, pattern, fn)
  if pattern ~= nil and type(pattern) ~= "string" then
    error(("Capture:%s: pattern must be a string (a Lua pattern on the module path) or nil, got %s")
      :format(fn, type(pattern)), 3)
  end
  local out = {}
  for _, r in ipairs(self.records) do
    if pattern == nil or r.path:find(pattern) then out[#out + 1] = r end
  end
  return out
end

--- cap:maps([pattern]) -> list of [B, H, L, S] maps, one per recorded call in
-- call order (first layer first), of the modules whose path matches the
-- Lua pattern (all by default).
-- @tparam[opt] string pattern a Lua pattern on the module path
-- @treturn {Tensor,...} maps
-- @usage
-- local enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, 0), 2)
-- local cap = attn.viz.capture(enc)
-- enc(attn.randn(1, 5, 8))
-- cap:remove()
-- print(#cap:maps(), cap:maps()[1].shape)          -- 2 attn.Size([1, 2, 5, 5])
function Capture:maps(pattern)
  check_self(self, "maps")
  local out = {}
  for i, r in ipairs(select_records(self, pattern, "maps")) do out[i] = r.weights end
  return out
end

--- cap:grads([pattern]) -> list of d output / d map, aligned with
-- cap:maps(pattern), after a backward through the recorded forward.  Needs
-- a capture made with {grads = true}.
-- @tparam[opt] string pattern a Lua pattern on the module path
-- @treturn {Tensor,...} gradients [B, H, L, S]
-- @usage
-- local mha = nn.MultiheadAttention(8, 2, {batch_first = true})
-- local cap = attn.viz.capture(mha, {grads = true})
-- local x = attn.randn(1, 4, 8)
-- mha(x, x, x)[1][1]:narrow(1, 1, 1):sum():backward()      -- one output element
-- cap:remove()
-- print(cap:grads()[1].shape)                          -- attn.Size([1, 2, 4, 4])
function Capture:grads(pattern)
  check_self(self, "grads")
  if not self._grads then
    error("Capture:grads: this capture keeps no gradients; capture with viz.capture(model, {grads = true})", 2)
  end
  local out = {}
  for i, r in ipairs(select_records(self, pattern, "grads")) do
    local g = r._raw.grad
    if g == nil then
      error(("Capture:grads: the map of '%s' (call %d) has no gradient yet: run backward from an output first")
        :format(r.path, r.call), 2)
    end
    out[i] = g:reshape(r.weights:shape())
  end
  return out
end

--- cap:map(path) -> one [B, H, L, S] map of the module at path: its only
-- call's, or its calls' maps joined along the queries (a decoder's steps:
-- LuongAttention called once per target token gives [B, 1, T, S]).
-- @tparam string path the module's name in model:named_modules()
-- @treturn Tensor map
-- @usage
-- local att = nn.LuongAttention(4)
-- local cap = attn.viz.capture(att)
-- local enc = attn.randn(1, 6, 4)
-- for _ = 1, 3 do att(attn.randn(1, 4), enc) end      -- three decoder steps
-- cap:remove()
-- print(cap:map("").shape)                          -- attn.Size([1, 1, 3, 6])
function Capture:map(path)
  check_self(self, "map")
  if type(path) ~= "string" then error(("Capture:map: path must be a string, got %s"):format(type(path)), 2) end
  local maps = {}
  for _, r in ipairs(self.records) do
    if r.path == path then maps[#maps + 1] = r.weights end
  end
  if #maps == 0 then
    local known = self:paths()
    error(("Capture:map: no map was recorded for '%s' (recorded: %s)"):format(path,
      #known > 0 and table.concat(known, ", ") or "none"), 2)
  end
  if #maps == 1 then return maps[1] end
  local s1 = maps[1]:shape()
  for i = 2, #maps do
    local s = maps[i]:shape()
    if s[1] ~= s1[1] or s[2] ~= s1[2] or s[4] ~= s1[4] then
      error(("Capture:map: the calls of '%s' do not join along the queries: call 1 is %s, call %d is %s; "
        .. "take them one by one with cap:maps()"):format(path, tostring(maps[1]:shape()), i,
        tostring(maps[i]:shape())), 2)
    end
  end
  return attn.cat(maps, 3)
end

--- cap:paths() -> the recorded module paths, in the order of their first call.
-- @usage
-- local enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, 0), 2)
-- local cap = attn.viz.capture(enc)
-- enc(attn.randn(1, 5, 8))
-- cap:remove()
-- print(table.concat(cap:paths(), " "))           -- layers.1.self_attn layers.2.self_attn
function Capture:paths()
  check_self(self, "paths")
  local out, seen = {}, {}
  for _, r in ipairs(self.records) do
    if not seen[r.path] then
      seen[r.path] = true
      out[#out + 1] = r.path
    end
  end
  return out
end

--- cap:clear(): forgets the records (the hooks stay on), e.g. before the
-- next batch.
-- @usage
-- local mha = nn.MultiheadAttention(8, 2)
-- local cap = attn.viz.capture(mha)
-- local x = attn.randn(3, 1, 8)
-- mha(x, x, x)
-- cap:clear()
-- print(#cap)                                       -- 0
-- cap:remove()
function Capture:clear()
  check_self(self, "clear")
  self.records, self._calls = {}, {}
end

--- cap:remove(): takes the capture's hooks off the model (also when cap
-- is a `<close>` variable going out of scope); the records stay.  A second
-- call does nothing.
-- @usage
-- local lin = nn.Linear(4, 4)
-- do
--   local cap <close> = attn.viz.capture(lin)
--   lin(attn.randn(2, 4))
-- end                                               -- hooks off here
function Capture:remove()
  check_self(self, "remove")
  for _, h in ipairs(self._handles) do h:remove() end
  self._handles = {}
  for i = #active, 1, -1 do
    if active[i] == self then table.remove(active, i) end
  end
  if #active == 0 and installed then
    attn._sdpa_observer(previous_observer)
    installed, previous_observer = false, nil
  end
end
Capture.__close = Capture.remove

--- #cap: the number of records.
function Capture.__len(self) return #self.records end

--- tostring(cap): how many records of how many modules.
function Capture.__tostring(self)
  return ("attn.viz.Capture(%d records of %d modules)"):format(#self.records, #self:paths())
end

local STEPWISE = {LuongAttention = "luong", BahdanauAttention = "bahdanau"}

--- viz.capture(model [, opts]) -> Capture: records the attention maps of
-- every forward of model (and of its modules) until cap:remove().
-- opts: grads = false (keep d output / d map: the maps join the graph,
-- see cap:grads), qk = false (also keep each sdpa call's q and k, for the
-- neuron view).
-- @tparam Module model the model (any nn.Module)
-- @tparam[opt] table opts {grads =, qk =}
-- @treturn Capture the capture
-- @usage
-- local bert = require "attn.bert"
-- local model = bert.BertModel({vocab_size = 20, hidden_size = 8, num_hidden_layers = 2,
--   num_attention_heads = 2, intermediate_size = 16, max_position_embeddings = 8})
-- model:eval()
-- local cap = attn.viz.capture(model)
-- model(attn.tensor({{2, 5, 7, 3}}))
-- cap:remove()
-- print(#cap:maps(), cap:maps()[1].shape)           -- 2 attn.Size([1, 2, 4, 4])
function M.capture(model, opts)
  local fn = "viz.capture"
  if type(model) ~= "table" or type(model.named_modules) ~= "function" then
    error(("%s: model must be an nn.Module (got %s)"):format(fn, is_tensor(model) and "a tensor" or type(model)), 2)
  end
  opts = attn._misuse.check_options(fn, opts, {"grads", "qk"})
  for k, v in pairs(opts) do
    if type(v) ~= "boolean" then
      error(("%s: option '%s' must be a boolean (got %s)"):format(fn, k, type(v)), 2)
    end
  end
  local cap = setmetatable({records = {}, _grads = opts.grads == true, _qk = opts.qk == true, _calls = {},
    _stack = {}, _handles = {}}, Capture)
  local handles = cap._handles
  for name, m in model:named_modules() do
    local entry = {name, m}
    handles[#handles + 1] = m:register_forward_pre_hook(function()
      if m == model then cap._stack = {} end -- a forward that raised left its entries behind
      cap._stack[#cap._stack + 1] = entry
    end)
    local kind = STEPWISE[m:_get_name()]
    handles[#handles + 1] = m:register_forward_hook(function(_, _, _, w)
      if kind and is_tensor(w) then
        if cap._grads and w.requires_grad then w:retain_grad() end
        -- [B, S] or [B, 1, S] (one query per step) -> [B, 1, 1, S]
        local r = {kind = kind, source = "returned", _raw = w,
          weights = w:dim() == 2 and w:unsqueeze(2):unsqueeze(2) or w:unsqueeze(2)}
        cap:_add(r)
      end
      cap._stack[#cap._stack] = nil
    end)
  end
  if not installed then
    previous_observer = attn._sdpa_observer(observer)
    installed = true
  end
  active[#active + 1] = cap
  return cap
end

M.Capture = Capture

-- calling convention (attn/signature.lua): the options are keywords of
-- their own, read from the trailing table
signature.declare(M, "viz.", {capture = "native: model, /, *, grads=false, qk=false"})
signature.declare(Capture, "viz.Capture.", {maps = "self, pattern=nil", grads = "self, pattern=nil",
  map = false, paths = false, clear = false, remove = false})

return M
