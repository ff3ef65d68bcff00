-- SPDX-License-Identifier: MIT

--- attn.dataset: torch.utils.data's map-style datasets and loader.
--
--   local data = require "attn".data     (attn.data.TensorDataset, ...;
--                                         also attn.utils.data.*)
--   local ds = data.TensorDataset(x, y)
--   local loader = data.DataLoader(ds, 32, true)  -- or {batch_size = 32, shuffle = true}
--   for xb, yb in loader do ... end               -- or loader:iter()
--   local train, val = data.random_split(ds, {0.8, 0.2}, attn.Generator(0))
--
-- The orders are torch 1.13's: a shuffled epoch is randperm(n, generator)
-- (attn.randperm is torch's), and without a generator each epoch seeds a
-- fresh generator with an int64 drawn from the global one, as torch's
-- RandomSampler does; every epoch also draws torch's "base seed" from the
-- loader's generator (or the global one), so the global generator is at
-- torch's state after each epoch.  Indices are 1-based.  A dataset is a
-- TensorDataset or Subset, a Lua list of items, or any object with
-- :len()/:get(i) or __len/__index.  Loading happens in the calling thread
-- (num_workers must be 0).
local attn = require "attn.base"

local M = {}

local fail = attn._misuse.fail
local unpack = table.unpack

local function is_generator(g)
  local mt = type(g) == "userdata" and getmetatable(g)
  return type(mt) == "table" and mt.__name == "attn.Generator"
end

-- A plain Lua table (no tensor, module or other object).
local function is_plain(t) return type(t) == "table" and getmetatable(t) == nil end

local function to_int(v) return type(v) == "number" and math.tointeger(v) or nil end

local function describe(v)
  if attn.is_tensor(v) then return "a tensor" end
  if is_generator(v) then return "a Generator" end
  return type(v) == "table" and "a table" or (type(v) == "nil" and "nil" or ("a " .. type(v)))
end

-- Raises unless g is nil or an open attn.Generator.
local function check_generator(fn, g)
  if g == nil then return end
  if not is_generator(g) then fail(fn, "generator must be an attn.Generator (got %s)", describe(g)) end
  if not pcall(g.initial_seed, g) then fail(fn, "generator is closed") end
end

-- ---------------------------------------------------------------------------
-- Datasets

-- The number of items of a dataset and item i (1-based).
local function ds_len(ds)
  if type(ds) == "table" or type(ds) == "userdata" then
    local ok, f = pcall(function() return ds.len end)
    if ok and type(f) == "function" then return f(ds) end
    local mt = getmetatable(ds)
    if is_plain(ds) or (type(mt) == "table" and mt.__len) then return #ds end
  end
  return nil
end

local function ds_get(ds, i)
  if type(ds) == "table" or type(ds) == "userdata" then
    local f = ds.get
    if type(f) == "function" then return f(ds, i) end
  end
  return ds[i]
end

local function check_dataset(fn, ds)
  local n = (type(ds) == "table" or type(ds) == "userdata") and not attn.is_tensor(ds) and ds_len(ds)
  if math.type(n) ~= "integer" or n < 0 then
    fail(fn, "dataset must be a TensorDataset, a Subset, a Lua list of items or an object with :len() and " ..
      ":get(i) (or __len and __index) (got %s)", describe(ds))
  end
  return n
end

-- i as an index of a dataset of n items: 1..n, or -n..-1 from the end.
local function check_index(fn, i, n)
  local k = to_int(i)
  if not k then fail(fn, "index must be an integer (got %s)", describe(i)) end
  if k < 0 then k = n + 1 + k end
  if k < 1 or k > n then fail(fn, "index %d is out of range for %d items", to_int(i), n) end
  return k
end

local TensorDataset = {}
TensorDataset.__name = "attn.data.TensorDataset"
local TensorDatasetMethods = {}

--- data.TensorDataset(t1, t2, ...) -> dataset whose item i is the list
-- {t1[i], t2[i], ...} (the rows along dim 1: views).  torch's
-- TensorDataset; the tensors must have the same size along dim 1.
-- `ds[i]`, `ds:get(i)` (i in 1..#ds, or negative from the end), `#ds`,
-- `ds:len()`; `ds.tensors` is the list of tensors.  A DataLoader over it
-- gives `for xb, yb in loader do`.
-- @usage
-- local ds = data.TensorDataset(attn.randn(5, 2), attn.tensor({1, 2, 1, 2, 1}))
-- local x, y = table.unpack(ds[2])                   -- the 2nd row of each tensor
-- print(#ds, x.shape, y)
function M.TensorDataset(...)
  local n = select("#", ...)
  if n == 0 then fail("TensorDataset", "expects at least one tensor") end
  local tensors = {...}
  for i = 1, n do
    local t = tensors[i]
    if not attn.is_tensor(t) then fail("TensorDataset", "argument %d must be a tensor (got %s)", i, describe(t)) end
    if t:dim() == 0 then fail("TensorDataset", "argument %d is a 0-d tensor; it needs a dim 1 to index", i) end
  end
  local rows = tensors[1]:size(1)
  for i = 2, n do
    local r = tensors[i]:size(1)
    if r ~= rows then
      fail("TensorDataset", "Size mismatch between tensors: tensor 1 has %d rows (size of dim 1), tensor %d has %d",
        rows, i, r)
    end
  end
  return setmetatable({tensors = tensors, _n = rows}, TensorDataset)
end

--- ds:len() -> the number of items (the size of dim 1); also `#ds`.
-- @usage
-- local ds = data.TensorDataset(attn.randn(5, 2), attn.arange(5))
-- print(ds:len(), #ds)                               -- 5 5
function TensorDatasetMethods.len(self) return self._n end

--- ds:get(i) -> item i, the list {t1[i], t2[i], ...}; also `ds[i]`.
-- @usage
-- local ds = data.TensorDataset(attn.randn(5, 2), attn.arange(5))
-- local x, y = table.unpack(ds:get(-1))              -- the last item; ds[-1] too
-- print(x.shape, y)                                  -- attn.Size([2]) tensor(4)
function TensorDatasetMethods.get(self, i)
  local k = check_index("TensorDataset", i, self._n)
  local out = {}
  for j, t in ipairs(self.tensors) do out[j] = t:select(1, k) end
  return out
end

TensorDataset.__len = TensorDatasetMethods.len
TensorDataset.__index = function(self, k)
  if type(k) == "number" then return TensorDatasetMethods.get(self, k) end
  return TensorDatasetMethods[k]
end
TensorDataset.__tostring = function(self)
  return ("attn.data.TensorDataset(%d items, %d tensors)"):format(self._n, #self.tensors)
end

local Subset = {}
Subset.__name = "attn.data.Subset"
local SubsetMethods = {}

--- data.Subset(dataset, indices) -> the items of dataset at indices (a
-- list of 1-based indices).  torch's Subset: `s[i]` / `s:get(i)` is
-- dataset[indices[i]], `#s` / `s:len()` is #indices; `s.dataset` and
-- `s.indices` are the arguments.
-- @usage
-- local ds = data.TensorDataset(attn.arange(10))
-- local first = data.Subset(ds, {1, 2, 3})           -- 1-based indices
-- print(#first, first[3][1])                         -- 3 tensor(2)
function M.Subset(dataset, indices)
  local n = check_dataset("Subset", dataset)
  if not is_plain(indices) then fail("Subset", "indices must be a list of integers (got %s)", describe(indices)) end
  local m = #indices
  for i = 1, m do
    local k = to_int(indices[i])
    if not k or k < 1 or k > n then
      fail("Subset", "indices[%d] must be an integer in 1..%d (got %s)", i, n, tostring(indices[i]))
    end
  end
  return setmetatable({dataset = dataset, indices = indices, _n = m}, Subset)
end

--- s:len() -> the number of items; also `#s`.
-- @usage
-- local s = data.Subset(data.TensorDataset(attn.arange(10)), {2, 4, 6})
-- print(s:len(), #s)                                 -- 3 3
function SubsetMethods.len(self) return self._n end

--- s:get(i) -> dataset's item indices[i]; also `s[i]`.
-- @usage
-- local s = data.Subset(data.TensorDataset(attn.arange(10)), {2, 4, 6})
-- print(s:get(2)[1])                                 -- tensor(3): item 4 of the dataset
function SubsetMethods.get(self, i)
  local k = check_index("Subset", i, self._n)
  return ds_get(self.dataset, to_int(self.indices[k]))
end

Subset.__len = SubsetMethods.len
Subset.__index = function(self, k)
  if type(k) == "number" then return SubsetMethods.get(self, k) end
  return SubsetMethods[k]
end
Subset.__tostring = function(self) return ("attn.data.Subset(%d items)"):format(self._n) end

-- ---------------------------------------------------------------------------
-- Random numbers as torch draws them

-- torch.empty((), dtype=torch.int64).random_(generator=g).item(): one
-- 64-bit draw modulo 2^63.  attn's random_(low, high) on int64 takes
-- draw % (high - low) + low, so [-2^63, 0) shifted by 2^63 is that value.
local function draw_int64(g)
  local t = attn.zeros({1}, {dtype = attn.int64})
  if g then t:random_(math.mininteger, 0, g) else t:random_(math.mininteger, 0) end
  return t:item() - math.mininteger
end
M._draw_int64 = draw_int64

-- randperm(n [, g]) as a Lua list of 1-based integers (nothing drawn for n = 0).
local function permutation(n, g)
  if n == 0 then return {} end
  local p = (g and attn.randperm(n, g) or attn.randperm(n)):totable()
  for i = 1, n do p[i] = math.tointeger(p[i]) end
  return p
end

-- ---------------------------------------------------------------------------
-- Collation

local collate

local function is_list(t)
  if not is_plain(t) then return false end
  local n = #t
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
  end
  return true
end


function collate(batch)
  local elem = batch[1]
  local n = #batch
  if attn.is_tensor(elem) then
    for i = 2, n do
      if not attn.is_tensor(batch[i]) then
        fail("default_collate", "item %d is %s, item 1 a tensor: every item must have the same structure", i,
          describe(batch[i]))
      end
    end
    return attn.stack(batch, 1)
  end
  local kind = math.type(elem) or type(elem)
  if kind == "integer" or kind == "float" or kind == "boolean" then
    local all_int, values = true, {}
    for i = 1, n do
      local v = batch[i]
      if kind == "boolean" then
        if type(v) ~= "boolean" then fail("default_collate", "item %d is %s, item 1 a boolean", i, describe(v)) end
      elseif type(v) ~= "number" then
        fail("default_collate", "item %d is %s, item 1 a number", i, describe(v))
      elseif math.type(v) ~= "integer" then
        all_int = false
      end
      values[i] = v
    end
    if kind == "boolean" then return attn.tensor(values, {dtype = attn.bool}) end
    -- torch: an int first gives torch.tensor(batch) (int64, or float32 if a float follows); a float gives float64
    if kind == "integer" then return attn.tensor(values, {dtype = all_int and attn.int64 or attn.float32}) end
    return attn.tensor(values, {dtype = attn.float64})
  end
  if kind == "string" then
    local out = {}
    for i = 1, n do out[i] = batch[i] end
    return out
  end
  if is_plain(elem) then
    if is_list(elem) then
      local size = #elem
      for i = 2, n do
        if not is_plain(batch[i]) or #batch[i] ~= size then
          fail("default_collate", "each element in list of batch should be of equal size (item 1 has %d, item %d %s)",
            size, i, is_plain(batch[i]) and tostring(#batch[i]) or describe(batch[i]))
        end
      end
      local out = {}
      for j = 1, size do
        local column = {}
        for i = 1, n do column[i] = batch[i][j] end
        out[j] = collate(column)
      end
      return out
    end
    local out = {}
    for key in pairs(elem) do
      local column = {}
      for i = 1, n do
        if not is_plain(batch[i]) or batch[i][key] == nil then
          fail("default_collate", "item %d has no key %s (item 1 has it)", i, tostring(key))
        end
        column[i] = batch[i][key]
      end
      out[key] = collate(column)
    end
    return out
  end
  fail("default_collate", "batch must contain tensors, numbers, booleans, strings or tables (lists, dicts); found %s",
    describe(elem))
end

--- data.default_collate(batch) -> the items of batch (a list) merged as
-- torch's default_collate: tensors are stacked along a new dim 1; Lua
-- integers give an int64 tensor, booleans a bool tensor, Lua floats a
-- float64 tensor (torch's collate_float_fn); strings
-- stay a list; lists collate position by position and dicts key by key,
-- recursively.
-- @usage
-- local batch = data.default_collate({{attn.ones(2), 1}, {attn.zeros(2), 0}})
-- print(batch[1].shape, batch[2])                     -- [2, 2] and tensor([1, 0])
function M.default_collate(batch)
  if not is_list(batch) or #batch == 0 then
    fail("default_collate", "batch must be a non-empty list of items (got %s)", describe(batch))
  end
  return collate(batch)
end

-- ---------------------------------------------------------------------------
-- DataLoader

local DataLoader = {}
DataLoader.__name = "attn.data.DataLoader"
local LoaderMethods = {}
DataLoader.__index = LoaderMethods

-- torch's positional order.
local POSITIONAL = {"dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "collate_fn",
  "pin_memory", "drop_last", "timeout", "worker_init_fn", "multiprocessing_context", "generator"}
local KNOWN = {}
for _, k in ipairs(POSITIONAL) do KNOWN[k] = true end
KNOWN.prefetch_factor, KNOWN.persistent_workers, KNOWN.pin_memory_device = true, true, true

-- The trailing options table: a plain table whose keys are all strings
-- (a list there is a positional sampler or batch_sampler).
local function is_options(t)
  if not is_plain(t) then return false end
  for k in pairs(t) do
    if type(k) ~= "string" then return false end
  end
  return true
end

-- A sampler: a list of indices or an object with :iter() (and :len() or __len).
local function sampler_len(fn, what, s)
  if is_plain(s) then return #s end
  local ok, it = pcall(function() return s.iter end)
  local n = (type(s) == "table" or type(s) == "userdata") and ok and type(it) == "function" and ds_len(s)
  if math.type(n) ~= "integer" then
    fail(fn, "%s must be a list of %s or an object with :iter() and :len() (got %s)", what,
      what == "sampler" and "indices" or "index lists", describe(s))
  end
  return n
end

local function sampler_iter(s)
  if is_plain(s) then
    local i = 0
    return function()
      i = i + 1
      return s[i]
    end
  end
  return s:iter()
end

--- data.DataLoader(dataset [, batch_size = 1 [, shuffle = false [,
-- sampler [, batch_sampler [, num_workers = 0 [, collate_fn [,
-- pin_memory = false [, drop_last = false [, timeout = 0 [,
-- worker_init_fn [, multiprocessing_context [, generator]]]]]]]]]]]] [, opts])
-- -> loader.  torch's DataLoader, in torch's positional order or with a
-- trailing options table of the same names ({batch_size = 32, shuffle =
-- true, generator = g}).  shuffle gives torch's order for the same seed:
-- randperm(n, generator), and without a generator a fresh generator
-- seeded each epoch from the global one (so after attn.manual_seed(s) the
-- epochs are torch's after torch.manual_seed(s)).  sampler: a list of
-- 1-based indices or an object with :iter() and :len() (e.g.
-- data.DistributedSampler); batch_sampler: a list of index lists or such
-- an object.  collate_fn(list of items) defaults to data.default_collate;
-- batch_size = false turns batching off (torch's None: one item a step,
-- not collated).  num_workers must be 0, and worker_init_fn and
-- multiprocessing_context nil (loading runs in the calling thread);
-- pin_memory, timeout and pin_memory_device are accepted and have no
-- effect on CPU.
--   for xb, yb in loader do ... end       a new epoch each loop
--   for xb, yb in loader:iter() do ... end
--   for k, xb, yb in loader:enumerate() do ... end   (k = 1, 2, ...)
--   #loader, loader:len()                 the number of batches
-- A batch that is a list (the items were lists, as TensorDataset's) is
-- given as that many values; any other batch as one value.
-- @usage
-- local ds = data.TensorDataset(attn.randn(10, 3), attn.arange(10))
-- local loader = data.DataLoader(ds, {batch_size = 4, shuffle = true, drop_last = true})
-- for xb, yb in loader do print(xb.shape, yb.shape) end   -- two batches of 4
-- print(#loader)                                     -- 2
function M.DataLoader(...)
  local nargs = select("#", ...)
  local args = {...}
  while nargs > 0 and args[nargs] == nil do nargs = nargs - 1 end
  local o = {}
  if nargs >= 2 and is_options(args[nargs]) then
    local opts = args[nargs]
    nargs = nargs - 1
    for k, v in pairs(opts) do
      if not KNOWN[k] then error(attn._misuse.unknown_option("DataLoader", k, KNOWN), 2) end
      o[k] = v
    end
  end
  if nargs > #POSITIONAL then
    fail("DataLoader", "takes at most %d positional arguments (torch's order: %s), got %d", #POSITIONAL,
      table.concat(POSITIONAL, ", "), nargs)
  end
  for i = 1, nargs do
    local k = POSITIONAL[i]
    if args[i] ~= nil then
      if o[k] ~= nil then fail("DataLoader", "%s given both positionally and in the options table", k) end
      o[k] = args[i]
    end
  end
  local ds = o.dataset
  local n = check_dataset("DataLoader", ds)
  local function check_bool(k)
    if o[k] ~= nil and type(o[k]) ~= "boolean" then
      fail("DataLoader", "%s must be a boolean (got %s)", k, describe(o[k]))
    end
  end
  check_bool("shuffle")
  check_bool("drop_last")
  check_bool("pin_memory")
  check_bool("persistent_workers")
  local bs = o.batch_size
  if bs == nil then bs = 1 end
  if bs ~= false then
    bs = to_int(bs)
    if not bs or bs < 1 then
      fail("DataLoader", "batch_size should be a positive integer value (or false for no batching), but got " ..
        "batch_size=%s", tostring(o.batch_size))
    end
  end
  local nw = o.num_workers
  if nw ~= nil and not to_int(nw) then fail("DataLoader", "num_workers must be an integer (got %s)", describe(nw)) end
  if nw ~= nil and to_int(nw) < 0 then
    fail("DataLoader", "num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
  end
  if nw ~= nil and to_int(nw) > 0 then
    fail("DataLoader", "num_workers = %d: attn loads in the calling thread; use num_workers = 0", to_int(nw))
  end
  if o.worker_init_fn ~= nil or o.multiprocessing_context ~= nil then
    fail("DataLoader", "worker_init_fn and multiprocessing_context need worker processes; attn loads in the calling " ..
      "thread (leave them nil)")
  end
  if o.prefetch_factor ~= nil and o.prefetch_factor ~= 2 then
    fail("DataLoader", "prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 to " ..
      "enable multiprocessing.")
  end
  if o.persistent_workers then fail("DataLoader", "persistent_workers option needs num_workers > 0") end
  if o.timeout ~= nil and (type(o.timeout) ~= "number" or o.timeout < 0) then
    fail("DataLoader", "timeout option should be non-negative")
  end
  if o.pin_memory_device ~= nil and type(o.pin_memory_device) ~= "string" then
    fail("DataLoader", "pin_memory_device must be a string (got %s)", describe(o.pin_memory_device))
  end
  if o.collate_fn ~= nil and type(o.collate_fn) ~= "function" then
    local mt = getmetatable(o.collate_fn)
    if not (type(mt) == "table" and mt.__call) then
      fail("DataLoader", "collate_fn must be a function (got %s)", describe(o.collate_fn))
    end
  end
  local g = o.generator
  check_generator("DataLoader", g)
  if o.sampler ~= nil and o.shuffle then fail("DataLoader", "sampler option is mutually exclusive with shuffle") end
  local self = {dataset = ds, generator = g, drop_last = o.drop_last == true, collate_fn = o.collate_fn,
    shuffle = o.shuffle == true, _n = n}
  if o.batch_sampler ~= nil then
    if (o.batch_size ~= nil and bs ~= 1) or o.shuffle or o.sampler ~= nil or o.drop_last then
      fail("DataLoader", "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last")
    end
    self.batch_sampler = o.batch_sampler
    self._len = sampler_len("DataLoader", "batch_sampler", o.batch_sampler)
    self.batch_size = false
  else
    if bs == false and self.drop_last then
      fail("DataLoader", "batch_size=false (torch's None) disables auto-batching and is mutually exclusive with " ..
        "drop_last")
    end
    self.batch_size = bs
    self.sampler = o.sampler
    local m = o.sampler ~= nil and sampler_len("DataLoader", "sampler", o.sampler) or n
    if bs == false then
      self._len = m
    else
      self._len = self.drop_last and m // bs or (m + bs - 1) // bs
    end
  end
  return setmetatable(self, DataLoader)
end

--- loader:len() -> the number of batches an epoch gives (torch's
-- len(loader)); also `#loader`.
-- @usage
-- local loader = data.DataLoader(data.TensorDataset(attn.randn(10, 3)), 4)
-- print(loader:len(), #loader)                       -- 3 3: batches of 4, 4 and 2
function LoaderMethods.len(self) return self._len end
DataLoader.__len = LoaderMethods.len

-- The epoch's indices one at a time: the sampler's, else 1..n or torch's
-- RandomSampler order (drawn at the first step, as torch's lazy sampler).
local function index_stream(self)
  if self.sampler ~= nil then return sampler_iter(self.sampler) end
  local n, i, order = self._n, 0, nil
  if not self.shuffle then
    return function()
      if i >= n then return nil end
      i = i + 1
      return i
    end
  end
  local g, spent = self.generator, false
  return function()
    if not order then
      if not g then g = attn.Generator(draw_int64(nil)) end
      order = permutation(n, g)
    end
    i = i + 1
    if i > n and not spent then
      -- torch's RandomSampler draws randperm(n) once more when it is
      -- exhausted (the slice [:num_samples % n] of a fresh permutation)
      spent = true
      permutation(n, g)
    end
    return order[i]
  end
end

-- The epoch's batches of indices: torch's BatchSampler.
local function batch_stream(self)
  if self.batch_sampler ~= nil then return sampler_iter(self.batch_sampler) end
  local next_index = index_stream(self)
  local bs, drop = self.batch_size, self.drop_last
  if bs == false then
    return function()
      local k = next_index()
      return k
    end
  end
  return function()
    local batch = {}
    for j = 1, bs do
      local k = next_index()
      if k == nil then break end
      batch[j] = k
    end
    if #batch == 0 or (drop and #batch < bs) then return nil end
    return batch
  end
end

-- Collates a TensorDataset batch with one index_select a tensor (the same
-- values as stacking the rows).
local function tensor_batch(ds, idx)
  local n = ds._n
  for j, k in ipairs(idx) do idx[j] = check_index("TensorDataset", k, n) end
  local pos = attn.tensor(idx, {dtype = attn.int64})
  local out = {}
  for j, t in ipairs(ds.tensors) do out[j] = t:index_select(1, pos) end
  return out
end

local function load_batch(self, idx)
  local ds = self.dataset
  if self.batch_size == false and self.batch_sampler == nil then
    local item = ds_get(ds, idx)
    if self.collate_fn then return self.collate_fn(item), true end
    return item, is_list(item)
  end
  if not is_plain(idx) then fail("DataLoader", "a batch of indices must be a list (got %s)", describe(idx)) end
  if self.collate_fn == nil and getmetatable(ds) == TensorDataset then
    return tensor_batch(ds, {unpack(idx)}), true
  end
  if self.collate_fn == nil and getmetatable(ds) == Subset and getmetatable(ds.dataset) == TensorDataset then
    local mapped = {} -- random_split's halves: the parent's rows, one index_select a tensor
    for j, k in ipairs(idx) do mapped[j] = to_int(ds.indices[check_index("Subset", k, ds._n)]) end
    return tensor_batch(ds.dataset, mapped), true
  end
  local items = {}
  for j, k in ipairs(idx) do
    local item = ds_get(ds, k)
    if item == nil then fail("DataLoader", "dataset item %s is nil", tostring(k)) end
    items[j] = item
  end
  if self.collate_fn then return self.collate_fn(items), true end
  if #items == 0 then fail("DataLoader", "a batch of indices is empty") end
  return collate(items), is_list(items[1])
end

local function emit(batch, spread)
  if spread and is_list(batch) then return unpack(batch) end
  return batch
end

--- loader:iter() -> an iterator over one epoch: `for xb, yb in
-- loader:iter() do`.  Each call starts a new epoch (torch's
-- iter(loader)): it draws torch's base seed from the loader's generator
-- (or the global one), and the shuffled order at the first step.
-- @usage
-- local ds = data.TensorDataset(attn.randn(10, 3), attn.arange(10))
-- local loader = data.DataLoader(ds, {batch_size = 4, shuffle = true})
-- for xb, yb in loader:iter() do print(xb.shape, yb.shape) end   -- [4, 3] [4], ..., [2, 3] [2]
function LoaderMethods.iter(self)
  draw_int64(self.generator)
  local next_batch = batch_stream(self)
  return function()
    local idx = next_batch()
    if idx == nil then return nil end
    return emit(load_batch(self, idx))
  end
end

--- loader:enumerate() -> an iterator over one epoch giving the batch
-- number first: `for k, xb, yb in loader:enumerate() do` (Python's
-- enumerate(loader), with k from 1).
-- @usage
-- local loader = data.DataLoader(data.TensorDataset(attn.randn(10, 3)), 5)
-- for k, xb in loader:enumerate() do print(k, xb.shape) end        -- 1 [5, 3], then 2 [5, 3]
function LoaderMethods.enumerate(self)
  local it, k = LoaderMethods.iter(self), 0
  local function step(...)
    if (...) == nil then return nil end
    return k, ...
  end
  return function()
    k = k + 1
    return step(it())
  end
end

-- `for xb, yb in loader do`: the generic for calls the loader with a nil
-- control value first (a new epoch), then with the previous first value.
DataLoader.__call = function(self, _, control)
  if control == nil or rawget(self, "_epoch") == nil then rawset(self, "_epoch", LoaderMethods.iter(self)) end
  local it = rawget(self, "_epoch")
  local function finish(...)
    if (...) == nil then rawset(self, "_epoch", nil) end
    return ...
  end
  return finish(it())
end

DataLoader.__tostring = function(self)
  return ("attn.data.DataLoader(%d batches of %s)"):format(self._len, tostring(self.batch_size))
end

-- ---------------------------------------------------------------------------
-- random_split

local function isclose(a, b) return math.abs(a - b) <= 1e-9 * math.max(math.abs(a), math.abs(b)) end

--- data.random_split(dataset, lengths [, generator]) -> Subsets, one per
-- length, as multiple values: `local train, val = data.random_split(ds,
-- {0.8, 0.2}, attn.Generator(42))`.  torch's random_split: lengths are
-- item counts summing to #dataset, or fractions summing to 1 (each
-- floor(#dataset * f), the remainder added one by one round-robin from
-- the first); the items are randperm(#dataset, generator) (the global
-- generator when none is given), cut in order.  The generator may also
-- be given as {generator = g}.  `{data.random_split(...)}` gives the list.
-- @usage
-- local ds = data.TensorDataset(attn.arange(10))
-- local train, valid = data.random_split(ds, {8, 2}, attn.Generator(42))   -- torch's split for the seed
-- print(#train, #valid)
function M.random_split(dataset, lengths, generator)
  local n = check_dataset("random_split", dataset)
  if is_options(generator) then
    local opts = attn._misuse.check_options("random_split", generator, {"generator"})
    generator = opts.generator
  end
  check_generator("random_split", generator)
  if not is_list(lengths) or #lengths == 0 then
    fail("random_split", "lengths must be a non-empty list of integers or fractions (got %s)", describe(lengths))
  end
  local sum = 0
  for i, v in ipairs(lengths) do
    if type(v) ~= "number" or v ~= v or v < 0 or v == math.huge then
      fail("random_split", "lengths[%d] must be a non-negative integer or a fraction in [0, 1] (got %s)", i,
        tostring(v))
    end
    sum = sum + v
  end
  local sizes = {}
  if isclose(sum, 1) and sum <= 1 then
    local total = 0
    for i, f in ipairs(lengths) do
      if f > 1 then fail("random_split", "Fraction at index %d is not between 0 and 1", i) end
      sizes[i] = math.tointeger(math.floor(n * f))
      total = total + sizes[i]
    end
    for i = 0, n - total - 1 do
      local at = i % #sizes + 1
      sizes[at] = sizes[at] + 1
    end
  else
    for i, v in ipairs(lengths) do
      sizes[i] = to_int(v)
      if not sizes[i] then
        fail("random_split", "lengths[%d] = %s is not an integer (fractions must sum to 1)", i, tostring(v))
      end
    end
  end
  local total = 0
  for _, s in ipairs(sizes) do total = total + s end
  if total ~= n then
    fail("random_split", "Sum of input lengths does not equal the length of the input dataset! (%d vs %d items)",
      total, n)
  end
  local perm = permutation(total, generator)
  local out, offset = {}, 0
  for i, s in ipairs(sizes) do
    local idx = {}
    for j = 1, s do idx[j] = perm[offset + j] end
    offset = offset + s
    out[i] = M.Subset(dataset, idx)
  end
  return unpack(out)
end

-- torch's signatures (attn/signature.lua)
require("attn.signature").declare(M, "dataset.", {TensorDataset = false, Subset = false, default_collate = false,
  random_split = "dataset, lengths, generator=nil",
  -- DataLoader reads torch's positional order and a trailing options table itself
  DataLoader = "native: dataset, batch_size=1, shuffle=nil, sampler=nil, batch_sampler=nil, num_workers=0, "
    .. "collate_fn=nil, pin_memory=false, drop_last=false, timeout=0, worker_init_fn=nil, "
    .. "multiprocessing_context=nil, generator=nil, *, prefetch_factor=nil, persistent_workers=false, "
    .. "pin_memory_device=''"})

-- loader.iter() for loader:iter() (and every other method) says to write ':'.
attn._misuse.guard_class(LoaderMethods, "loader", "_len")
attn._misuse.guard_class(TensorDatasetMethods, "ds", "tensors")
attn._misuse.guard_class(SubsetMethods, "subset", "indices")

return M
