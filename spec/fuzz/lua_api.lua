-- SPDX-License-Identifier: MIT

--- The program interpreter of the fuzz_lua_api target (spec/fuzz/fuzz_lua_api.c).
--
-- fuzz_lua_api runs this chunk in a sandboxed state of the host library
-- (src/attn_lua.h: no io/os/debug, memory limit, instruction budget) with
-- the fuzzer's input as its one argument, a string read as a program:
-- each step takes an opcode byte and calls something of attn with
-- arguments drawn from the following bytes, under pcall.  Lua errors are
-- the normal outcome; only memory errors, undefined behaviour, aborts and
-- leaks (the C harness checks the live object counters after closing the
-- state) are findings.
--
-- Steps:
--   call      a function of attn or of a submodule (nn, F, optim, init, rnn, conv, activation,
--             attention, seq2seq, data, text, bert, gradcheck), chosen by
--             index in the sorted list of names; nn classes are called to
--             make modules
--   method    a method of a pool value (tensor methods from attn._methods,
--             module/optimizer methods from a fixed list), or a call of
--             the value itself (modules are callable)
--   meta      a metamethod of a tensor: arithmetic, comparison, #, indexing
--             and assignment, tostring, concatenation, close
--   backward  sum a pool tensor and back-propagate
--   set       assign a field of a pool value (module weights, flags)
--   grad      run the next step with gradient mode off
--   gc        a full garbage collection (finalizers of half-made objects)
-- Arguments: nil, small integers, edge numbers (NaN, inf, -0, 2^31, 2^53,
-- 2^63, math.mininteger/maxinteger...), booleans, strings (option names
-- and slices of the input), shape tables, nested number tables, option
-- tables with common keys, small fresh tensors, functions, pool values and
-- lists of them.
-- Results go into an 8-slot pool.  Sizes stay small unless an edge value
-- asks for an absurd size, which the memory limit refuses.
local bytes, trace = ...
local attn = require "attn"

local pos = 1
local function byte()
  local b = bytes:byte(pos)
  pos = pos + 1
  return b or 0
end
local function more() return pos <= #bytes end

-- Deterministic: the default generator is process-wide.
attn.manual_seed(0)

-- Never called: they touch files, the process or the clock's randomness
-- (the sandbox refuses most of them anyway).
local skip = {
  save = true, load = true, safetensors_info = true, set_num_threads = true, seed = true, _isatty = true,
  plot = true, heatmap = true, histogram = true, lines = true, from_file = true, read_lines = true,
  load_words = true, load_vocab = true, from_pretrained = true, load_checkpoint = true,
}

-- Sorted names of the callables of a table.
local function catalog(t)
  local names = {}
  for k, v in pairs(t) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" and not skip[k] then
      local callable = type(v) == "function"
      if type(v) == "table" then
        -- a metatable of the binding (it has a __name: attn.Generator, the
        -- dtypes) is locked in the sandbox, where getmetatable gives a
        -- stand-in without __call: left out here too, so that the seed
        -- generator (run outside the sandbox) numbers names the same way
        local mt = getmetatable(v)
        callable = type(mt) == "table" and mt.__call ~= nil and mt.__name == nil
      end
      if callable then names[#names + 1] = k end
    end
  end
  table.sort(names)
  return names
end

local namespaces = { "attn", "nn", "F", "optim", "init", "attention", "seq2seq", "data", "text", "bert", "gradcheck",
  "rnn", "conv", "activation" }
local catalogs = {}
-- the transformer layers, loss modules and deep copies (appended, so that
-- the earlier namespaces keep their numbers)
for _, ns in ipairs({ "transformer", "losses", "copy" }) do namespaces[#namespaces + 1] = ns end
local function namespace(i)
  local name = namespaces[i]
  local c = catalogs[name]
  if not c then
    local ok, t = pcall(function() return name == "attn" and attn or attn[name] end)
    if not ok or type(t) ~= "table" then t = {} end
    c = { t = t, names = catalog(t) }
    catalogs[name] = c
  end
  return c
end

local tensor_methods = catalog(attn._methods)
local object_methods = {
  "forward", "parameters", "named_parameters", "state_dict", "load_state_dict", "zero_grad", "train", "eval",
  "step", "apply", "children", "modules", "named_modules", "extra_repr", "to_string", "requires_grad_",
  "reset_parameters", "register_buffer", "register_parameter", "add_module", "get_submodule", "buffers",
  "named_buffers", "named_children", "get_lr", "add_param_group", "encode", "decode", "tokenize", "__call",
  "sample", "batches", "shuffle", "split", "next", "reset", "greedy_decode", "init_state", "attend",
}

local edges = {
  0 / 0, 1 / 0, -1 / 0, -0.0, 0.5, -1, 1e-300, 1e308, 2 ^ 31, 2 ^ 32 + 1, 2 ^ 53, 2 ^ 63, -2 ^ 63,
  math.maxinteger, math.mininteger, math.maxinteger - 1, 2147483647, -2147483648, 4294967296, 1.5, -0.5, 3.4e38,
}
local strings = {
  "mean", "sum", "none", "relu", "gelu", "tanh", "sigmoid", "linear", "batchmean", "", "x", "weight", "bias",
  "fan_in", "fan_out", "leaky_relu", "left", "right", "max", "constant", "[UNK]", "hello world", "a\0b",
  "\xff\xfe", "unaffected ünïcödé 中文", "##ing", "reflect", "F32",
}
local option_keys = {
  "dim", "keepdim", "p", "eps", "bias", "num_heads", "dropout", "batch_first", "reduction", "ignore_index",
  "label_smoothing", "weight", "lr", "momentum", "betas", "weight_decay", "is_causal", "attn_mask", "scale",
  "enable_gqa", "padding_idx", "max_norm", "generator", "kdim", "vdim", "need_weights", "key_padding_mask",
  "average_attn_weights", "approximate", "inplace", "training", "mode", "correction", "unbiased", "min", "max",
  "steps", "gamma", "step_size", "T_max", "eta_min", "lower", "do_lower_case", "max_len", "affine",
  "num_layers", "bidirectional", "proj_size", "stride", "padding", "dilation", "groups", "padding_value",
  "enforce_sorted", "negative_slope", "alpha", "beta", "threshold",
}
-- the transformer layers' and loss modules' options (appended likewise)
for _, k in ipairs({ "src_mask", "tgt_mask", "src_key_padding_mask", "norm_first", "dim_feedforward", "log_target",
  "pos_weight", "tutorial" }) do option_keys[#option_keys + 1] = k end

-- the ops of issue 15 (scatter_reduce's "amax", F.pad's modes, einsum
-- equations, dtype names) and their options (appended likewise)
for _, v in ipairs({ "amax", "replicate", "bij,bjk->bik", "ii->i", "...ij->...ji", "int64", "bool" }) do
  strings[#strings + 1] = v
end
for _, k in ipairs({ "largest", "sorted", "descending", "stable", "include_self", "right", "as_tuple" }) do
  option_keys[#option_keys + 1] = k
end

-- Called without input (spec/fuzz/gen_lua_seeds.lua), the chunk hands out
-- its tables so that seeds can be written as named calls.
if bytes == nil then
  return {
    namespaces = namespaces, namespace = namespace, tensor_methods = tensor_methods,
    object_methods = object_methods, strings = strings, option_keys = option_keys,
  }
end

-- ---------------------------------------------------------------- values

local pool = {}
do
  local ok = pcall(function()
    pool[1] = attn.randn(2, 3)
    pool[2] = attn.arange(6)
    pool[3] = attn.tensor(1.5)
    pool[4] = attn.randn(2, 3, 4):requires_grad_()
    pool[5] = attn.randn(4, 3)
    pool[6] = attn.zeros(0)
    pool[7] = attn.ones(4, 4)
    pool[8] = attn.randn(1, 2, 4, 8)
  end)
  if not ok then return end
end

local arg -- forward

local function number()
  local c = byte()
  if c < 0xc0 then return c % 9 - 1 end
  if c < 0xe0 then return (c % 9 - 4) * 0.25 end
  return edges[c % #edges + 1]
end

local function small_shape()
  local n = byte() % 5
  local s = {}
  for i = 1, n do s[i] = byte() % 5 end
  if byte() >= 0xf8 then s[#s + 1] = number() end
  return s
end

local function nested(depth)
  local n = byte() % 4
  local t = {}
  for i = 1, n do
    if depth < 3 and byte() >= 0xa0 then t[i] = nested(depth + 1) else t[i] = number() end
  end
  return t
end

local function options(depth)
  local t = {}
  for _ = 1, byte() % 4 do
    local k = option_keys[byte() % #option_keys + 1]
    t[k] = arg(depth + 1)
  end
  return t
end

function arg(depth)
  depth = depth or 0
  local c = byte() % 16
  if c == 0 then return nil
  elseif c <= 3 then return number()
  elseif c <= 6 then return pool[byte() % 8 + 1]
  elseif c == 7 then return byte() % 2 == 0
  elseif c == 8 then return strings[byte() % #strings + 1]
  elseif c == 9 then -- a slice of the input itself
    local n = byte() % 16
    return bytes:sub(pos, pos + n - 1)
  elseif c == 10 then return small_shape()
  elseif c == 11 then return nested(0)
  elseif c == 12 then return depth < 2 and options(depth) or nil
  elseif c == 13 then
    local ok, t = pcall(attn.randn, table.unpack(small_shape()))
    return ok and t or nil
  elseif c == 14 then -- a callback returning a pool value
    local v = pool[byte() % 8 + 1]
    return function() return v end
  else -- a list of pool values (cat, stack, optimizer parameters)
    local t = {}
    for i = 1, byte() % 4 do t[i] = pool[byte() % 8 + 1] end
    return t
  end
end

local function args()
  local n = byte() % 6
  local a = {}
  for i = 1, n do a[i] = arg(0) end
  return a, n
end

-- ATTN_FUZZ_TRACE=1 (the harness passes trace): each step and its outcome.
local what = ""
local function describe(a, n)
  if not trace then return "" end
  local parts = {}
  for i = 1, n do
    local v = a[i]
    if attn.is_tensor(v) then
      local ok, s = pcall(function() return "tensor" .. attn.tostring(attn.tensor(v:shape())) end)
      parts[i] = ok and s or "tensor"
    elseif type(v) == "string" then
      parts[i] = ("%q"):format(v)
    elseif type(v) == "table" then
      local items = {}
      for k, x in pairs(v) do items[#items + 1] = tostring(k) .. "=" .. (attn.is_tensor(x) and "tensor" or tostring(x)) end
      parts[i] = "{" .. table.concat(items, ",") .. "}"
    else
      parts[i] = tostring(v)
    end
  end
  return "(" .. table.concat(parts, ", ") .. ")"
end
local function log(ok, ...)
  if trace then print(("step %-40s %s"):format(what, ok and "ok" or tostring((...)))) end
end

-- The first two results go to pool slots slot and slot + 1 (the slot byte
-- is read before the call, so a program's bytes do not depend on results).
local function keep(slot, ok, ...)
  log(ok, ...)
  if not ok then return end
  local n = select("#", ...)
  for i = 1, math.min(n, 2) do
    local v = select(i, ...)
    if v ~= nil then pool[(slot + i - 1) % 8 + 1] = v end
  end
end

-- ---------------------------------------------------------------- steps

local function is_tensor(v) return attn.is_tensor(v) end

local function call_step()
  local i = byte() % #namespaces + 1
  local ns = namespace(i)
  if #ns.names == 0 then return end
  local name = ns.names[byte() % #ns.names + 1]
  local a, n = args()
  local slot = byte()
  what = namespaces[i] .. "." .. name .. describe(a, n)
  keep(slot, pcall(ns.t[name], table.unpack(a, 1, n)))
end

local function method_step()
  local obj = pool[byte() % 8 + 1]
  local m = byte()
  local a, n = args()
  local slot = byte()
  if is_tensor(obj) then
    local name = tensor_methods[m % #tensor_methods + 1]
    what = "tensor:" .. name .. describe(a, n)
    keep(slot, pcall(function() return obj[name](obj, table.unpack(a, 1, n)) end))
  else
    local name = object_methods[m % #object_methods + 1]
    what = type(obj) .. ":" .. name .. describe(a, n)
    if name == "__call" then
      keep(slot, pcall(obj, table.unpack(a, 1, n)))
    else
      keep(slot, pcall(function() return obj[name](obj, table.unpack(a, 1, n)) end))
    end
  end
end

local metas = {
  function(x, y) return x + y end, function(x, y) return x - y end, function(x, y) return x * y end,
  function(x, y) return x / y end, function(x, y) return x ^ y end, function(x) return -x end,
  function(x, y) return x == y end, function(x, y) return x < y end, function(x, y) return x <= y end,
  function(x) return #x end, function(x) return tostring(x) end, function(x, y) return x .. y end,
  function(x, y) return x[y] end, function(x, y, z) x[y] = z end, function(x, y) return x % y end,
  function(x, y) return x // y end, function(x, y) return x(y) end,
  function(x) local guard <close> = x end,
  function(x, y) return y + x end,
}

local function meta_step()
  local op = byte() % #metas + 1
  local f = metas[op]
  local x = pool[byte() % 8 + 1]
  local y = arg(0)
  local z = arg(0)
  local slot = byte()
  what = "meta " .. op .. describe({ x, y, z }, 3)
  keep(slot, pcall(f, x, y, z))
end

local function backward_step()
  local t = pool[byte() % 8 + 1]
  local g = byte() >= 0xc0 and arg(0) or nil
  local sum, retain = byte() < 0x80, byte() % 2 == 0
  what = "backward"
  log(pcall(function()
    local s = sum and t:sum() or t
    s:backward(g, retain)
  end))
end

local fields = { "weight", "bias", "training", "grad", "requires_grad", "p", "eps", "num_heads", "data", "lr" }
local function set_step()
  local obj = pool[byte() % 8 + 1]
  local k = fields[byte() % #fields + 1]
  local v = arg(0)
  what = "set ." .. k .. describe({ obj, v }, 2)
  log(pcall(function() obj[k] = v end))
end

local step -- forward
local function no_grad_step()
  pcall(attn.no_grad, function() step() end)
end

local steps = { call_step, call_step, call_step, method_step, method_step, method_step, meta_step, meta_step,
  backward_step, set_step, no_grad_step, function() collectgarbage() end }

function step()
  local op = byte()
  steps[op % #steps + 1]()
end

for _ = 1, 48 do
  if not more() then break end
  step()
end
