-- SPDX-License-Identifier: MIT
-- attn.data's TensorDataset, DataLoader, random_split and Subset against
-- torch 1.13 (fixtures from scripts/fixtures/gen_dataloader.py): the whole
-- batch order of every epoch (shuffle with a generator, shuffle after
-- manual_seed without one, drop_last, batch sizes that do not divide),
-- the global generator's next draws after the epochs where the fixture
-- seeded it (torch draws a base seed every epoch), random_split's indices for integer and fraction
-- lengths, and default_collate's shapes, dtypes and values.  Every loader
-- is built in torch's positional order and with an options table.
local attn = require "attn"
local fx = require "support.fixture"
local data = attn.data

local F = fx.load("dataloader")

-- The global generator's next draws, as the fixture's torch.randint(0, 2^31, (4,)).
local function after() return attn.randint(0, 2 ^ 31, {4}):totable() end

local function ints(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = math.tointeger(v) end
  return out
end

local function same_list(got, want, what)
  assert.are.same(want, ints(got), what)
end

local function build(c, form)
  local x = attn.arange(c.n)
  local ds = data.TensorDataset(x, x * 10)
  local g = c.gen and attn.Generator(c.gen) or nil
  if form == "positional" then
    return data.DataLoader(ds, c.batch_size, c.shuffle, nil, nil, 0, nil, false, c.drop_last, 0, nil, nil, g)
  end
  return data.DataLoader(ds, {batch_size = c.batch_size, shuffle = c.shuffle, drop_last = c.drop_last, generator = g})
end

-- The epochs of a loader as {epoch -> {batch -> 1-based indices}}, with
-- one of the iteration forms.
local ITERS = {
  call = function(loader)
    local out = {}
    for xb, yb in loader do
      assert.is_true(attn.equal(yb, xb * 10))
      out[#out + 1] = xb
    end
    return out
  end,
  iter = function(loader)
    local out = {}
    for xb in loader:iter() do out[#out + 1] = xb end
    return out
  end,
  enumerate = function(loader)
    local out = {}
    for k, xb, yb in loader:enumerate() do
      assert.are.equal(#out + 1, k)
      assert.is_true(attn.equal(yb, xb * 10))
      out[#out + 1] = xb
    end
    return out
  end,
}

describe("attn.data.DataLoader against torch 1.13", function()
  it("gives torch's batches epoch by epoch, and leaves the global generator at torch's state", function()
    local runs, batches = 0, 0
    for _, c in ipairs(F.loaders) do
      for _, form in ipairs({"positional", "options"}) do
        for _, how in ipairs({"call", "iter", "enumerate"}) do
          if c.seed then attn.manual_seed(c.seed) end
          local loader = build(c, form)
          assert.are.equal(c.len, #loader)
          assert.are.equal(c.len, loader:len())
          for e = 1, c.epochs do
            local got = ITERS[how](loader)
            local what = ("n=%d bs=%d shuffle=%s drop_last=%s gen=%s seed=%s %s/%s epoch %d"):format(c.n,
              c.batch_size, tostring(c.shuffle), tostring(c.drop_last), tostring(c.gen), tostring(c.seed), form, how, e)
            assert.are.equal(#c.batches[e], #got, what)
            for b, xb in ipairs(got) do
              assert.are.equal(attn.int64, xb.dtype)
              same_list(xb:totable(), (function()
                local w = {}
                for i, v in ipairs(c.batches[e][b]) do w[i] = v - 1 end -- the data are arange(n): 0-based values
                return w
              end)(), what .. " batch " .. b)
              batches = batches + 1
            end
          end
          if c.seed then same_list(after(), c.after, "global draws after the epochs") end
          runs = runs + 1
        end
      end
    end
    print(("\n  %d loader runs, %d batches compared with torch"):format(runs, batches))
  end)

  it("a loop that breaks starts a fresh epoch next time", function()
    attn.manual_seed(0)
    local loader = data.DataLoader(data.TensorDataset(attn.arange(6)), 2, true)
    local first = loader:iter()() -- one batch of an epoch left unfinished
    assert.is_true(attn.is_tensor(first))
    for _ in loader do break end -- luacheck: ignore 512
    local n = 0
    for _ in loader do n = n + 1 end
    assert.are.equal(3, n)
  end)

  it("collates like torch's default_collate (shapes, dtypes, values)", function()
    local x = attn.arange(24):float():reshape(4, 2, 3) / 4
    local y = attn.tensor({3, 1, 4, 1}, {dtype = attn.int64})
    local function check(got, want, what)
      if want.shape then
        assert.is_true(attn.is_tensor(got), what)
        local dt = want.dtype
        assert.are.same(want.shape, {table.unpack(got.shape)}, what)
        assert.are.equal(attn[dt], got.dtype, what)
        local vals = got:reshape(-1):totable()
        if dt == "int64" then vals = ints(vals) end
        assert.are.same(want.data, vals, what)
      elseif type(want) == "table" then
        for k, w in pairs(want) do check(got[k], w, what .. "." .. tostring(k)) end
      else
        assert.are.equal(want, got, what)
      end
    end
    local cases = {
      tensors = {{x[1], y[1]}, {x[2], y[2]}, {x[3], y[3]}},
      numbers = {{1, 2.5, "a", true}, {-3, 0.25, "bc", false}},
      dicts = {{a = x[1], b = 7}, {a = x[2], b = 8}},
      nested = {{x[1], {y[1], 1}}, {x[3], {y[3], 2}}},
    }
    for _, c in ipairs(F.collate) do check(data.default_collate(cases[c.name]), c.value, c.name) end
    -- a loader over a Lua list of items, and over an object with :len()/:get(i)
    local items = {}
    for i = 1, 5 do items[i] = {x[(i - 1) % 4 + 1], i, "s" .. i} end
    local got = {}
    for xb, nb, sb in data.DataLoader(items, 2) do got[#got + 1] = {xb:size(1), ints(nb:totable()), sb} end
    assert.are.same({{2, {1, 2}, {"s1", "s2"}}, {2, {3, 4}, {"s3", "s4"}}, {1, {5}, {"s5"}}}, got)
    local obj = {len = function() return 3 end, get = function(_, i) return attn.full({2}, i) end}
    local sums = {}
    for xb in data.DataLoader(obj, {batch_size = 3}) do sums[#sums + 1] = xb:sum():item() end
    assert.are.same({12}, sums)
    -- the TensorDataset fast path (index_select) equals stacking the rows (default_collate)
    local ds = data.TensorDataset(x, y)
    local fast, slow = {}, {}
    for xb, yb in data.DataLoader(ds, 3) do fast[#fast + 1] = {xb, yb} end
    for xb, yb in data.DataLoader(ds, 3, false, nil, nil, 0, data.default_collate) do slow[#slow + 1] = {xb, yb} end
    assert.are.equal(2, #fast)
    for i = 1, 2 do
      assert.is_true(attn.equal(fast[i][1], slow[i][1]))
      assert.is_true(attn.equal(fast[i][2], slow[i][2]))
    end
  end)

  it("takes a sampler, a batch_sampler, batch_size = false and a collate_fn", function()
    local ds = data.TensorDataset(attn.arange(8))
    local got = {}
    for xb in data.DataLoader(ds, 3, false, {8, 1, 2, 7}) do got[#got + 1] = ints(xb:totable()) end
    assert.are.same({{7, 0, 1}, {6}}, got)
    got = {}
    for xb in data.DataLoader(ds, {batch_sampler = {{2, 3}, {5}}}) do got[#got + 1] = ints(xb:totable()) end
    assert.are.same({{1, 2}, {4}}, got)
    got = {}
    for xb in data.DataLoader(ds, {batch_size = false}) do got[#got + 1] = xb:item() end
    assert.are.same({0, 1, 2, 3, 4, 5, 6, 7}, ints(got))
    local sampler = data.DistributedSampler(8, {num_replicas = 2, rank = 1, shuffle = false})
    local loader = data.DataLoader(ds, {batch_size = 2, sampler = sampler})
    assert.are.equal(2, #loader)
    got = {}
    for xb in loader do got[#got + 1] = ints(xb:totable()) end
    assert.are.same({{1, 3}, {5, 7}}, got)
    local n = 0
    for s in data.DataLoader(ds, 4, false, nil, nil, 0, function(b) return #b end) do n = n + s end
    assert.are.equal(8, n)
  end)

  it("refuses bad arguments with torch's messages", function()
    local ds = data.TensorDataset(attn.arange(4))
    local cases = {
      {function() data.TensorDataset(attn.zeros(3), attn.zeros(4)) end, "Size mismatch between tensors"},
      {function() data.TensorDataset(attn.zeros(3), 5) end, "TensorDataset: argument 2 must be a tensor"},
      {function() data.TensorDataset() end, "TensorDataset: expects at least one tensor"},
      {function() return ds[5] end, "TensorDataset: index 5 is out of range for 4 items"},
      {function() data.DataLoader(ds, 0) end, "batch_size should be a positive integer value"},
      {function() data.DataLoader(ds, {batch_size = 2, shufle = true}) end, "did you mean 'shuffle'"},
      {function() data.DataLoader(ds, 2, true, {1, 2}) end, "sampler option is mutually exclusive with shuffle"},
      {function() data.DataLoader(ds, {batch_size = 2, batch_sampler = {{1}}}) end,
        "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"},
      {function() data.DataLoader(ds, {num_workers = 2}) end, "use num_workers = 0"},
      {function() data.DataLoader(ds, {shuffle = 1}) end, "DataLoader: shuffle must be a boolean"},
      {function() data.DataLoader(ds, {generator = 3}) end, "generator must be an attn.Generator"},
      {function() data.DataLoader(attn.zeros(3)) end, "DataLoader: dataset must be"},
      {function() data.DataLoader(ds, 2, {batch_size = 3}) end, "batch_size given both positionally"},
      {function() data.random_split(ds, {3, 2}) end,
        "Sum of input lengths does not equal the length of the input dataset!"},
      {function() data.random_split(ds, {1.5, -0.5}) end, "lengths[2] must be a non-negative integer"},
      {function() data.random_split(ds, {0.5, 0.5}, 7) end, "generator must be an attn.Generator"},
      {function() data.random_split(ds, {2.5, 1.5}) end, "lengths[1] = 2.5 is not an integer"},
      {function() data.Subset(ds, {1, 9}) end, "Subset: indices[2] must be an integer in 1..4"},
      {function() data.default_collate({{1, 2}, {3}}) end, "each element in list of batch should be of equal size"},
      {function() data.default_collate({print}) end, "default_collate: batch must contain tensors"},
      {function() data.DataLoader(ds, 2).iter() end, "call it as loader:iter()"},
      {function() return ds.len() end, "call it as ds:len()"},
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok, c[2])
      assert.is_truthy(tostring(err):find(c[2], 1, true), ("want %q, got %q"):format(c[2], tostring(err)))
    end
  end)
end)

describe("attn.data.random_split against torch 1.13", function()
  it("gives torch's lengths and indices, integer lengths and fractions", function()
    for _, c in ipairs(F.splits) do
      for _, form in ipairs({"positional", "options"}) do
        if c.seed then attn.manual_seed(c.seed) end
        local items = {}
        for i = 1, c.n do items[i] = i * 100 end
        local g = c.gen and attn.Generator(c.gen) or nil
        local parts
        if form == "positional" then
          parts = {data.random_split(items, c.lengths, g)}
        else
          parts = {data.random_split(items, c.lengths, {generator = g})}
        end
        assert.are.equal(#c.sizes, #parts)
        for i, p in ipairs(parts) do
          assert.are.equal(c.sizes[i], #p)
          assert.are.same(c.indices[i], p.indices)
          for j = 1, #p do assert.are.equal(c.indices[i][j] * 100, p[j]) end
        end
        if c.seed then same_list(after(), c.after, "global draws after random_split") end
      end
    end
  end)

  it("Subsets of a TensorDataset feed a DataLoader", function()
    local ds = data.TensorDataset(attn.arange(10), attn.arange(10) * 2)
    local train, val = data.random_split(ds, {0.8, 0.2}, attn.Generator(0))
    assert.are.equal(8, #train)
    assert.are.equal(2, #val)
    local seen = 0
    for xb, yb in data.DataLoader(train, 3) do
      assert.is_true(attn.equal(yb, xb * 2))
      seen = seen + xb:size(1)
    end
    assert.are.equal(8, seen)
    -- the Subset fast path (index_select on the parent) equals stacking the items
    local fast, slow = {}, {}
    for xb in data.DataLoader(train, 3) do fast[#fast + 1] = xb end
    for xb in data.DataLoader(train, 3, false, nil, nil, 0, data.default_collate) do slow[#slow + 1] = xb end
    assert.are.equal(3, #fast)
    for i = 1, 3 do assert.is_true(attn.equal(fast[i], slow[i])) end
    assert.are.equal(attn.utils.data.DataLoader, data.DataLoader)
  end)
end)
