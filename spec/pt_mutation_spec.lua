-- SPDX-License-Identifier: MIT
-- attn.load of damaged torch files: the fixtures torch 1.13 wrote
-- (spec/fixtures/pt/) with bytes changed, inserted, removed or cut off,
-- in the pickle (data.pkl) above all, since a stored zip record carries no
-- check the reader verifies.  Every case must load or raise an error that
-- names the function ("load: ..."), never a raw Lua error ("attempt to
-- index a nil value") or a crash; the same file twice gives the same
-- answer.  A deterministic generator picks the changes, so a failure names
-- a case that reproduces.
local attn = require "attn"
local sh = require "support.sh"

local SRC = os.getenv("ATTN_SOURCE_DIR") or "."
local FIX = SRC .. "/spec/fixtures/pt/"

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- Park-Miller: the same cases on every machine
local function lcg(seed)
  local s = seed
  return function(n)
    s = (s * 48271) % 2147483647
    return s % n
  end
end

-- The bytes of the record named data.pkl: [first, last] in the file.
-- (torch writes sizes in the central directory, not in local headers)
local function pickle_span(bytes)
  local cd = bytes:find("PK\1\2", 1, true)
  while cd do
    local csize = string.unpack("<I4", bytes, cd + 20)
    local nl = string.unpack("<I2", bytes, cd + 28)
    local local_at = string.unpack("<I4", bytes, cd + 42) + 1
    if bytes:sub(cd + 46, cd + 45 + nl):match("/data%.pkl$") then
      local lnl, lxl = string.unpack("<I2I2", bytes, local_at + 26)
      local first = local_at + 30 + lnl + lxl
      return first, first + csize - 1
    end
    cd = bytes:find("PK\1\2", cd + 46, true)
  end
  error("no data.pkl record")
end

local function mutate(bytes, rand, first, last)
  local kind = rand(5)
  local in_pickle = rand(4) ~= 0
  local lo, hi = 1, #bytes
  if in_pickle then lo, hi = first, last end
  local i = lo + rand(hi - lo + 1)
  if kind == 0 then -- one byte changed
    return bytes:sub(1, i - 1) .. string.char(rand(256)) .. bytes:sub(i + 1)
  elseif kind == 1 then -- a small integer byte turned large (lengths, counts)
    return bytes:sub(1, i - 1) .. string.char(0xF0 + rand(16)) .. bytes:sub(i + 1)
  elseif kind == 2 then -- a byte removed (the record keeps its size: the pickle runs into the next record)
    return bytes:sub(1, i - 1) .. bytes:sub(i + 1)
  elseif kind == 3 then -- cut off
    return bytes:sub(1, i)
  else -- a run of bytes swapped with another place
    local j = lo + rand(hi - lo + 1)
    local n = 1 + rand(8)
    local a, b = math.min(i, j), math.max(i, j)
    if b - a < n then return bytes end
    return bytes:sub(1, a - 1) .. bytes:sub(b, b + n - 1) .. bytes:sub(a + n, b - 1) .. bytes:sub(a, a + n - 1)
      .. bytes:sub(b + n)
  end
end

local tmpdir
setup(function() tmpdir = sh.tmpdir(true) end)
teardown(function() sh.rmtree(tmpdir) end)

local function outcome(path)
  local ok, v = pcall(attn.load, path)
  if ok then return "ok", v end
  return "error", tostring(v)
end

describe("attn.load of damaged torch files", function()
  local stats = {cases = 0, loaded = 0, refused = 0}
  for _, name in ipairs({"checkpoint.pt", "views.pt", "state_dict.pt"}) do
    it(name .. ": 3000 damaged copies load or raise load: errors", function()
      local bytes = read(FIX .. name)
      local first, last = pickle_span(bytes)
      local rand = lcg(#bytes)
      local path = tmpdir .. "/damaged.pt"
      for case = 1, 3000 do
        local damaged = mutate(bytes, rand, first, last)
        local f = assert(io.open(path, "wb"))
        f:write(damaged)
        f:close()
        local what, v = outcome(path)
        stats.cases = stats.cases + 1
        if what == "ok" then
          stats.loaded = stats.loaded + 1
          -- a pickle may hold any Python value (torch.load of a damaged file may give a number)
          assert(type(v) ~= "function" and type(v) ~= "thread" and (type(v) ~= "userdata" or attn.is_tensor(v)),
            ("%s case %d: loaded a %s"):format(name, case, type(v)))
        else
          stats.refused = stats.refused + 1
          assert(v:match("load: ") and not v:match("attempt to") and not v:match("bad argument")
            and not v:match("stack overflow"), ("%s case %d: not a load error: %s"):format(name, case, v))
          local again = select(2, outcome(path))
          assert(again == v, ("%s case %d: a second load says something else"):format(name, case))
        end
      end
    end)
  end
  it("reports the count", function()
    print(("damaged torch files: %d cases, %d loaded, %d refused"):format(stats.cases, stats.loaded,
      stats.refused))
    assert(stats.refused > 0 and stats.loaded > 0)
  end)
end)
