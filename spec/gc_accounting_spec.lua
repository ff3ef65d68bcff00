-- SPDX-License-Identifier: MIT
-- Tensors of every size are reported to Lua's collector with their true
-- size (header and storage), so a loop of small temporaries stays flat
-- (issue 14).  Run in a fresh `attn` process so that the peak RSS
-- (VmHWM) is the loop's alone.
local BIN = os.getenv("ATTN_BIN")

-- bin: the attn CLI (generational GC) or stock lua5.4 with require "attn"
-- (incremental GC; LUA_PATH_5_4/LUA_CPATH_5_4 come from ctest).
local function run(code, bin)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(code)
  f:close()
  local p = assert(io.popen(("%q %q 2>&1"):format(bin, path)))
  local out = p:read("a")
  p:close()
  os.remove(path)
  return out
end

local PEAK = [[
local f = io.open("/proc/self/status") local s = f and f:read("a") or "" if f then f:close() end
print("peak_kb", s:match("VmHWM:%s*(%d+)") or -1)
]]

describe("GC accounting", function()
  if not BIN or BIN == "" then
    it("needs ATTN_BIN (run through ctest)", function() pending("ATTN_BIN is not set") end)
    return
  end
  local slow = os.getenv("ATTN_SANITIZER") or os.getenv("ATTN_VALGRIND")
  local steps = slow and 300000 or 3000000

  it("frees a loop's dead temporaries within a few MB in the attn CLI (young collections)", function()
    -- (under valgrind and the sanitizers a young collection can outlast
    -- the 50 us that tells it from an incremental step, and the binding
    -- stops asking for them)
    if os.getenv("ATTN_VALGRIND") or os.getenv("ATTN_SANITIZER") then
      return pending("timing-based: not under valgrind or a sanitizer")
    end
    -- x, g and x.grad are live (4.4 MB); each pass makes a 1.47 MB relu
    -- output that nothing keeps.  Young collections every 2 MB of new
    -- tensors free it within two passes (8.4 MB at most, measured); a full
    -- collection alone lets 16 MB of them pile up (17-18 MB at most).
    local out = run([[
local attn = require "attn"
local x, g = attn.randn(720, 512):requires_grad_(), attn.randn(720, 512)
local most = 0
for i = 1, 60 do
  x:relu():backward(g)
  local b = attn.debug_counts().storage_bytes
  if b > most then most = b end
end
print("most_mb", most / 2^20)
]], BIN)
    local mb = tonumber(out:match("most_mb%s+(%S+)"))
    assert.is_not_nil(mb, out)
    assert.is_true(mb < 12, ("%.1f MB of tensors at most"):format(mb))
  end)

  -- stock lua5.4 needs attn on its module paths (the specs' own ctest
  -- run sets them; cli/busted-under-attn does not)
  local bins = { BIN }
  if package.searchpath("attn.core", package.cpath) then bins[2] = "lua5.4" end
  for _, bin in ipairs(bins) do
  local who = bin == BIN and "the attn CLI" or "stock lua5.4"
  it(("keeps a loop of %d 16-float temporaries under 128 MB of peak RSS (%s)"):format(steps, who), function()
    local out = run(([[
local attn = require "attn"
local x = attn.zeros(16)
for i = 1, %d do x = x + 1 end
assert(x[1] == %d)
]]):format(steps, steps) .. PEAK, bin)
    local kb = tonumber(out:match("peak_kb%s+(%-?%d+)"))
    assert.is_not_nil(kb, out)
    if kb < 0 then return pending("no /proc/self/status here") end
    -- ASan's quarantine keeps up to 256 MB of freed blocks mapped
    local allowed = (os.getenv("ATTN_SANITIZER") == "address" and 384 or 128) * 1024
    assert.is_true(kb < allowed, ("peak RSS %d MB"):format(kb // 1024))
  end)

  it("keeps garbage generators bounded as well (" .. who .. ")", function()
    local out = run([[
local attn = require "attn"
for i = 1, 100000 do local g = attn.Generator(i) end
]] .. PEAK, bin)
    local kb = tonumber(out:match("peak_kb%s+(%-?%d+)"))
    assert.is_not_nil(kb, out)
    if kb < 0 then return pending("no /proc/self/status here") end
    local allowed = (os.getenv("ATTN_SANITIZER") == "address" and 384 or 128) * 1024
    assert.is_true(kb < allowed, ("peak RSS %d MB (100,000 generators are 250 MB)"):format(kb // 1024))
  end)
  end
end)
