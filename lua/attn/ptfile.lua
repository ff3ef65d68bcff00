-- SPDX-License-Identifier: MIT

--- attn.ptfile: torch's checkpoint format (torch.save, torch >= 1.6).
-- A .pt / .pth / pytorch_model.bin file is a zip archive (read and written
-- by the C core, src/core/io/io_torch.c) around data.pkl, a pickle
-- (protocol 2).  This file holds a restricted unpickler: it rebuilds
-- tensors (torch._utils._rebuild_tensor_v2, _rebuild_parameter), dicts,
-- OrderedDicts, lists, tuples, numbers, strings, bools and None, and
-- refuses every other global (it never runs code).  attn.load and
-- attn.save call it for these files.
-- @module attn.ptfile
local core = require "attn.core"

local M = {}

local spack, sunpack = string.pack, string.unpack

-- Globals the unpickler accepts: module .. "." .. name -> what it stands for.
local STORAGES = {
  FloatStorage = true, DoubleStorage = true, HalfStorage = true, BFloat16Storage = true, LongStorage = true,
  IntStorage = true, ShortStorage = true, CharStorage = true, ByteStorage = true, BoolStorage = true,
}

local ALLOWED = {
  ["collections.OrderedDict"] = true, ["torch._utils._rebuild_tensor_v2"] = true,
  ["torch._utils._rebuild_parameter"] = true,
}
local NONE = {} -- None inside containers being built (removed at the end)

local function fail(path, fmt, ...) error(("load: '%s': " .. fmt):format(path, ...), 0) end

-- Tensors from their storage: storage = {type=, key=, numel=}.
local function rebuild_tensor(ctx, storage, offset, size, stride)
  if type(storage) ~= "table" or storage.kind ~= "storage" then
    fail(ctx.path, "_rebuild_tensor_v2 got a %s where a storage was expected", type(storage))
  end
  local st = ctx.storages[storage.key]
  if not st then
    st = ctx.ar:storage(storage.key, storage.type, storage.numel)
    ctx.storages[storage.key] = st
  end
  if type(size) ~= "table" or size.kind ~= "tuple" or type(stride) ~= "table" or stride.kind ~= "tuple" or
    math.type(offset) ~= "integer" then
    fail(ctx.path, "_rebuild_tensor_v2 with a bad size, stride or offset")
  end
  -- a view the file describes wrongly (past its storage, bad sizes) is the file's fault: say so by name
  local ok, t = pcall(core._pt_view, st, offset, size.items, stride.items)
  if not ok then fail(ctx.path, "a tensor in data.pkl is not a valid view of its storage (%s)",
    (tostring(t):gsub("^[^\n]-:%d+: ", ""))) end
  return t
end

local function call_global(ctx, g, args)
  if type(args) ~= "table" or args.kind ~= "tuple" then fail(ctx.path, "REDUCE without an argument tuple") end
  local a = args.items
  if g == "collections.OrderedDict" then
    return {kind = "dict", keys = {}, vals = {}}
  elseif g == "torch._utils._rebuild_tensor_v2" then
    return rebuild_tensor(ctx, a[1], a[2], a[3], a[4])
  elseif g == "torch._utils._rebuild_parameter" then
    if not core.is_tensor(a[1]) then fail(ctx.path, "_rebuild_parameter of a non-tensor") end
    return a[1]
  end
  fail(ctx.path, "data.pkl calls %s, which is not a tensor or container; refused (a restricted loader never runs " ..
    "code)", g)
end

-- Python values -> Lua: dict -> table (keys as they are), list/tuple ->
-- 1-based array, None -> nil.
local function to_lua(v, seen)
  if v == NONE then return nil end
  if type(v) ~= "table" or v.kind == nil then return v end
  if v.kind == "global" or v.kind == "storage" then return v end
  if seen[v] then return seen[v] end
  local out = {}
  seen[v] = out
  if v.kind == "dict" then
    for i = 1, #v.keys do
      local k = to_lua(v.keys[i], seen)
      if k ~= nil then out[k] = to_lua(v.vals[i], seen) end
    end
  else
    for i = 1, v.n or #v.items do out[i] = to_lua(v.items[i], seen) end
  end
  return out
end

local function new_dict() return {kind = "dict", keys = {}, vals = {}} end

local function set_item(d, k, v)
  if type(d) ~= "table" or d.kind ~= "dict" then return false end
  d.keys = d.keys or {}
  d.vals = d.vals or {}
  d.keys[#d.keys + 1] = k
  d.vals[#d.vals + 1] = v
  return true
end

local function unpickle(ctx, s)
  local path = ctx.path
  local stack, memo, marks = {}, {}, {}
  local nmemo = 0
  local pos, len = 1, #s
  local function need(n, what)
    if pos + n - 1 > len then fail(path, "data.pkl ends inside %s (truncated?)", what) end
  end
  local function push(v) stack[#stack + 1] = v end
  local function pop()
    local n = #stack
    if n == 0 then fail(path, "data.pkl pops an empty stack") end
    local v = stack[n]
    stack[n] = nil
    return v
  end
  local function pop_mark()
    local m = marks[#marks]
    if not m then fail(path, "data.pkl has no MARK") end
    marks[#marks] = nil
    local items = {}
    for i = m + 1, #stack do items[#items + 1] = stack[i] end
    for i = #stack, m + 1, -1 do stack[i] = nil end
    return items
  end
  local function tuple(items) return {kind = "tuple", items = items, n = #items} end
  local function read_str(n)
    need(n, "a string")
    local v = s:sub(pos, pos + n - 1)
    pos = pos + n
    return v
  end
  local function unpack(fmt, n)
    need(n, "a number")
    local v = sunpack(fmt, s, pos)
    pos = pos + n
    return v
  end
  local function line()
    local e = s:find("\n", pos, true)
    if not e then fail(path, "data.pkl ends inside a GLOBAL") end
    local v = s:sub(pos, e - 1)
    pos = e + 1
    return v
  end
  while true do
    need(1, "an opcode")
    local op = s:byte(pos)
    pos = pos + 1
    if op == 0x80 then -- PROTO
      local v = unpack("B", 1)
      if v > 5 then fail(path, "pickle protocol %d", v) end
    elseif op == 0x95 then -- FRAME
      unpack("<I8", 8)
    elseif op == 0x2e then -- STOP
      return pop()
    elseif op == 0x28 then marks[#marks + 1] = #stack -- MARK
    elseif op == 0x7d then push(new_dict()) -- EMPTY_DICT
    elseif op == 0x5d then push({kind = "list", items = {}, n = 0}) -- EMPTY_LIST
    elseif op == 0x29 then push(tuple({})) -- EMPTY_TUPLE
    elseif op == 0x74 then push(tuple(pop_mark())) -- TUPLE
    elseif op == 0x85 or op == 0x86 or op == 0x87 then -- TUPLE1..3
      local n = op - 0x84
      local items = {}
      for i = n, 1, -1 do items[i] = pop() end
      push(tuple(items))
    elseif op == 0x73 then -- SETITEM
      local v = pop()
      local k = pop()
      if not set_item(stack[#stack], k, v) then fail(path, "SETITEM on a non-dict") end
    elseif op == 0x75 then -- SETITEMS
      local items = pop_mark()
      local d = stack[#stack]
      for i = 1, #items, 2 do
        if not set_item(d, items[i], items[i + 1]) then fail(path, "SETITEMS on a non-dict") end
      end
    elseif op == 0x61 or op == 0x65 then -- APPEND, APPENDS
      local items = op == 0x61 and {pop()} or pop_mark()
      local l = stack[#stack]
      if type(l) ~= "table" or l.kind ~= "list" then fail(path, "APPEND on a non-list") end
      for _, v in ipairs(items) do
        l.n = l.n + 1
        l.items[l.n] = v
      end
    elseif op == 0x4a then push(unpack("<i4", 4)) -- BININT
    elseif op == 0x4b then push(unpack("B", 1)) -- BININT1
    elseif op == 0x4d then push(unpack("<I2", 2)) -- BININT2
    elseif op == 0x8a then -- LONG1
      local n = unpack("B", 1)
      if n > 8 then fail(path, "an integer of %d bytes (over 64 bits)", n) end
      if n == 0 then push(0) else push(unpack("<i" .. n, n)) end
    elseif op == 0x47 then push(unpack(">d", 8)) -- BINFLOAT
    elseif op == 0x58 then push(read_str(unpack("<I4", 4))) -- BINUNICODE
    elseif op == 0x8c then push(read_str(unpack("B", 1))) -- SHORT_BINUNICODE
    elseif op == 0x8d then push(read_str(unpack("<I8", 8))) -- BINUNICODE8
    elseif op == 0x55 or op == 0x43 then push(read_str(unpack("B", 1))) -- SHORT_BINSTRING/BYTES
    elseif op == 0x54 or op == 0x42 then push(read_str(unpack("<I4", 4))) -- BINSTRING/BINBYTES
    elseif op == 0x4e then push(NONE) -- NONE
    elseif op == 0x88 then push(true) -- NEWTRUE
    elseif op == 0x89 then push(false) -- NEWFALSE
    elseif op == 0x71 or op == 0x72 or op == 0x94 then -- BINPUT, LONG_BINPUT, MEMOIZE
      local i = op == 0x71 and unpack("B", 1) or op == 0x72 and unpack("<I4", 4) or nmemo
      if memo[i] == nil then nmemo = nmemo + 1 end
      memo[i] = stack[#stack]
    elseif op == 0x68 or op == 0x6a then -- BINGET, LONG_BINGET
      local i = op == 0x68 and unpack("B", 1) or unpack("<I4", 4)
      if memo[i] == nil then fail(path, "data.pkl refers to memo entry %d that was never stored", i) end
      push(memo[i])
    elseif op == 0x30 then pop() -- POP
    elseif op == 0x31 then pop_mark() -- POP_MARK
    elseif op == 0x32 then push(stack[#stack]) -- DUP
    elseif op == 0x63 or op == 0x93 then -- GLOBAL, STACK_GLOBAL
      local mod, name
      if op == 0x63 then
        mod = line()
        name = line()
      else
        name = pop()
        mod = pop()
      end
      local full = tostring(mod) .. "." .. tostring(name)
      if not (ALLOWED[full] or mod == "torch" and STORAGES[name]) then
        fail(path, "data.pkl refers to %s, which a restricted loader does not run (only tensors, numbers, " ..
          "strings, bools, None and containers load)", full)
      end
      push({kind = "global", name = full, mod = mod, short = name})
    elseif op == 0x51 then -- BINPERSID
      local pid = pop()
      local a = type(pid) == "table" and pid.kind == "tuple" and pid.items
      if not a or a[1] ~= "storage" or type(a[2]) ~= "table" or a[2].kind ~= "global" or a[2].mod ~= "torch" or
        not STORAGES[a[2].short] or type(a[3]) ~= "string" or math.type(a[5]) ~= "integer" then
        fail(path, "data.pkl has a persistent id that is not a torch storage")
      end
      push({kind = "storage", type = a[2].short, key = a[3], numel = a[5]})
    elseif op == 0x52 then -- REDUCE
      local args = pop()
      local g = pop()
      if type(g) ~= "table" or g.kind ~= "global" then fail(path, "REDUCE on a non-global") end
      push(call_global(ctx, g.name, args))
    elseif op == 0x62 then -- BUILD: an OrderedDict's attributes (state_dict's _metadata) are dropped
      local _ = pop()
      local obj = stack[#stack]
      if type(obj) ~= "table" or obj.kind ~= "dict" then fail(path, "BUILD on something other than a dict") end
    else
      fail(path, "data.pkl uses pickle opcode 0x%02x ('%s'), which a restricted loader does not run", op,
        string.char(op):match("%g") or "?")
    end
  end
end

--- Reads a torch.save file (the zip format of torch >= 1.6).
-- A state_dict comes back as {name = tensor}, a checkpoint as nested tables
-- (dicts keep their keys, lists and tuples become 1-based arrays, None
-- becomes nil).  Tensors sharing a storage share it here too.  float16,
-- bfloat16 and float64 storages load as float32, int8/16/32 and uint8 as
-- int64, bool as bool.  Any global other than tensors and OrderedDict is
-- refused (it is never run).
-- @tparam string path
-- @return the saved object
-- @usage
-- local ptfile = require "attn.ptfile"
-- local path = os.tmpname() .. ".pt"
-- ptfile.save({w = attn.ones(2, 2)}, path)               -- torch.save's zip format
-- print(ptfile.load(path).w)                             -- also attn.load(path)
-- os.remove(path)
function M.load(path)
  if type(path) ~= "string" then error(("load: path must be a string (got %s)"):format(type(path)), 2) end
  local ar = core._pt_open(path)
  local ctx = {path = path, ar = ar, storages = {}}
  local ok, res = pcall(function() return to_lua(unpickle(ctx, ar:record("data.pkl")), {}) end)
  ar:close()
  if not ok then error(res, 0) end
  return res
end

-- Pickler (protocol 2) for attn.save.
local function pickle(obj, ctx)
  local out = {}
  local function w(x) out[#out + 1] = x end
  local function global(mod, name) w("c" .. mod .. "\n" .. name .. "\n") end
  local function str(x) w("X" .. spack("<s4", x)) end
  local seen = {}
  local function value(v)
    local t = type(v)
    if v == nil then w("N")
    elseif t == "boolean" then w(v and "\x88" or "\x89")
    elseif math.type(v) == "integer" then w("\x8a\x08" .. spack("<i8", v))
    elseif t == "number" then w("G" .. spack(">d", v))
    elseif t == "string" then str(v)
    elseif core.is_tensor(v) then
      local sname = core._pt_storage_name(v)
      if not sname then error(("save: '%s': cannot save a %s tensor to .pt"):format(ctx.path, v.dtype), 0) end
      local key = tostring(#ctx.tensors)
      ctx.tensors[#ctx.tensors + 1] = v
      local shape, stride, acc = {}, {}, 1
      local n = v:dim()
      for i = 1, n do shape[i] = v:size(i) end
      for i = n, 1, -1 do
        stride[i] = acc
        acc = acc * shape[i]
      end
      global("torch._utils", "_rebuild_tensor_v2")
      w("(")
      w("(") str("storage") global("torch", sname) str(key) str("cpu") value(acc) w("tQ")
      value(0)
      w("(") for i = 1, n do value(shape[i]) end w("t")
      w("(") for i = 1, n do value(stride[i]) end w("t")
      w("\x89")
      global("collections", "OrderedDict") w(")R")
      w("tR")
    elseif t == "table" then
      if seen[v] then error(("save: '%s': a table that contains itself"):format(ctx.path), 0) end
      seen[v] = true
      local n = #v
      local count = 0
      for _ in pairs(v) do count = count + 1 end
      if n > 0 and count == n then
        w("](") for i = 1, n do value(v[i]) end w("e")
      else
        local keys = {}
        for k in pairs(v) do
          local kt = type(k)
          if kt ~= "string" and kt ~= "number" then
            error(("save: '%s': table keys must be strings or numbers (found a %s)"):format(ctx.path, kt), 0)
          end
          keys[#keys + 1] = k
        end
        table.sort(keys, function(a, b)
          if type(a) == type(b) then return a < b end
          return type(a) == "number"
        end)
        global("collections", "OrderedDict") w(")R")
        if #keys > 0 then
          w("(") for _, k in ipairs(keys) do value(k) value(v[k]) end w("u")
        end
      end
      seen[v] = nil
    else
      error(("save: '%s': cannot save a %s to .pt"):format(ctx.path, t), 0)
    end
  end
  w("\x80\x02")
  value(obj)
  w(".")
  return table.concat(out)
end

--- Writes obj (a tensor, or a table of tensors, numbers, strings, bools and
-- tables) in torch.save's zip format, which torch.load (>= 1.6) reads: a
-- table with string keys becomes an OrderedDict (keys sorted), an array a
-- list; tensors keep their dtype (float32, int64, bool; float16, bfloat16,
-- float64 where attn has them).
-- @param obj
-- @tparam string path
-- @usage
-- local ptfile = require "attn.ptfile"
-- local path = os.tmpname() .. ".pt"
-- ptfile.save(nn.Linear(2, 2):state_dict(), path)        -- torch.load(path) reads it
-- os.remove(path)
function M.save(obj, path)
  if type(path) ~= "string" then error(("save: path must be a string (got %s)"):format(type(path)), 2) end
  local ctx = {path = path, tensors = {}}
  local data = pickle(obj, ctx)
  local wr = core._pt_writer(path)
  local ok, err = pcall(function()
    wr:add("archive/data.pkl", data)
    for i, t in ipairs(ctx.tensors) do wr:add("archive/data/" .. (i - 1), t) end
    wr:add("archive/version", "3\n")
    wr:commit()
  end)
  if not ok then
    pcall(wr.abort, wr)
    error(err, 0)
  end
end

-- Whether attn.save should write this format (.bin: pytorch_model.bin).
local function ext_pt(path)
  local l = path:lower()
  return l:match("%.pt$") or l:match("%.pth$") or l:match("%.bin$") or l:match("%.ckpt$")
end

--- Internal: does path (with format, as attn.load takes it) name a torch file?
function M._is_pt(path, format)
  if type(path) ~= "string" then return false end
  if format ~= nil then return format == "pt" or format == "torch" end
  local l = path:lower()
  -- .bin and other names are recognised by their first bytes (a .bin may
  -- be safetensors, .npz or .npy too)
  if l:match("%.pt$") or l:match("%.pth$") or l:match("%.ckpt$") then return true end
  if l:match("%.safetensors$") or l:match("%.npz$") or l:match("%.npy$") then return false end
  local f = io.open(path, "rb")
  if not f then return false end
  local head = f:read(64) or ""
  f:close()
  if head:sub(1, 2) == "\x80\x02" then return true end
  if head:sub(1, 4) ~= "PK\3\4" or #head < 30 then return false end
  local nl = sunpack("<I2", head, 27)
  local name = head:sub(31, 30 + nl)
  return name:match("/data%.pkl$") ~= nil
end

M._ext_pt = ext_pt

-- no optional arguments (attn/signature.lua)
require("attn.signature").declare(M, "ptfile.", {load = false, save = false})

return M
