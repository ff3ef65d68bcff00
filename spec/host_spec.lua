-- SPDX-License-Identifier: MIT
-- The example host (src/examples/attn_viz.c, built as bin/attn_viz): it
-- embeds attn through attn_lua.h, hands its own buffers to a sandboxed user
-- script and reads the result.  Its numbers must be what attn computes
-- here for the same inputs, and every kind of failing script must end in
-- a message and exit status 1 (the host survives: no signal, no abort).
-- The C tests of the library itself are spec/c/test_host.c.

local S = require "support.sh"
local SRC = S.SRC
local BUILD = S.env_or_pending({describe = describe, pending = pending}, "ATTN_BUILD_DIR", "example host")
if not BUILD then return end
local VIZ = BUILD .. "/bin/attn_viz"

local attn = require "attn"

local q, writefile = S.q, S.writefile

-- Runs attn_viz on a script file; returns { out, err, code }.
local function viz(path)
  return S.capture(q(VIZ) .. " " .. q(path))
end

local function viz_code(code)
  local path = os.tmpname()
  writefile(path, code)
  local r = viz(path)
  os.remove(path)
  return r
end

-- The host's inputs, rebuilt here: x[i][j] = sinf(0.7 (i+1)(j+1)) + 0.1 j
-- (0-based i, j) in float32.
local L, D = 6, 16
local function host_x()
  local rows = {}
  for i = 0, L - 1 do
    local row = {}
    for j = 0, D - 1 do
      local a = attn.tensor(0.7):mul((i + 1) * (j + 1)):sin():item()
      row[j + 1] = a + attn.tensor(0.1):mul(j):item()
    end
    rows[i + 1] = row
  end
  return attn.tensor(rows)
end

describe("example host attn_viz", function()
  it("runs the user script on the host's buffers and prints what attn computes", function()
    local r = viz(SRC .. "/src/examples/viz_dot.lua")
    assert.are.equal("", r.err)
    assert.are.equal(0, r.code)
    -- the same script, run here on the same inputs
    local f = assert(loadfile(SRC .. "/src/examples/viz_dot.lua"))()
    local weights = attn.zeros(L, L)
    local tokens = { "Life", "is", "short", "eat", "dessert", "first" }
    local ctx = f(host_x(), weights, tokens)
    local row = 0
    for line in r.out:gmatch("[^\n]+") do
      local tok, rest = line:match("^%s*(%S+)%s+(.[%d.]+.*)$")
      if rest and tok == tokens[row + 1] then
        row = row + 1
        local col = 0
        for v in rest:gmatch("(%d+%.%d+)") do
          col = col + 1
          assert.is_true(math.abs(tonumber(v) - weights[{ row, col }]) < 2e-6,
            ("weight [%d,%d]: host %s, here %.7f"):format(row, col, v, weights[{ row, col }]))
        end
        assert.are.equal(L, col)
      end
    end
    assert.are.equal(L, row)
    assert.truthy(r.out:find("rows sum to 1 within", 1, true))
    local shape, vals = r.out:match("context: 2%-d %[([%d,]+)%], row 1:([^\n]+)")
    assert.are.equal("6,8", shape)
    local j = 0
    for v in vals:gmatch("%S+") do
      j = j + 1
      assert.is_true(math.abs(tonumber(v) - ctx[{ 1, j }]) < 1e-5, "context value " .. j)
    end
    assert.are.equal(8, j)
    local used, limit = r.out:match("script memory at the end: (%d+) of (%d+) bytes")
    assert.are.equal(64 * 1024 * 1024, tonumber(limit))
    assert.is_true(tonumber(used) > 0 and tonumber(used) < tonumber(limit))
  end)

  -- Scripts that fail: status, message, exit 1.
  local cases = {
    { "a syntax error", "return function(", "script error: .*expected near <eof>" },
    { "a run-time error with a traceback", "return function(x) local n return n + 1 end",
      "script error: .*attempt to perform arithmetic.*stack traceback:" },
    { "a shape error from the core", "return function(x, w) w:copy_(x) end",
      "script error: .*copy_" },
    { "not returning a function", "return 42", "^attn_viz: %S+ must return a function" },
    { "an endless loop", "return function() while true do end end", "limit reached: .*instruction limit of 100000000" },
    { "an endless loop catching its errors", "return function() while true do pcall(function() while true do end end) end end",
      "limit reached: .*instruction limit" },
    { "a 100 GB tensor", "return function() return require('attn').zeros(25000000000) end",
      "script error: .*not enough memory: zeros needs 95367 MB for %[25000000000%], cap 64 MB" },
    { "tables growing forever", "return function() local t = {} while true do t[#t + 1] = {} end end",
      "out of memory: not enough memory" },
    { "reading a file", "return function() return io.open('/etc/passwd'):read('a') end", "script error: .*global 'io'" },
    { "running a command", "return function() os.execute('touch /tmp/attn_viz_pwned') end", "script error: .*field 'execute'" },
    { "loading a C module", "return function() return package.loadlib('libc.so.6', 'system') end", "script error: .*field 'loadlib'" },
    { "writing through attn.save", "return function(x) require('attn').save({x = x}, '/tmp/attn_viz_pwned') end",
      "not available in a sandbox" },
  }
  for _, c in ipairs(cases) do
    it("reports " .. c[1] .. " and exits 1", function()
      local r = viz_code(c[2])
      assert.are.equal(1, r.code)
      assert.are.equal("", r.out)
      assert.truthy(r.err:find("^attn_viz: "), r.err)
      assert.truthy(r.err:match(c[3]), r.err)
    end)
  end
  it("left no file behind from the sandboxed scripts", function()
    assert.is_nil(io.open("/tmp/attn_viz_pwned"))
  end)

  it("reports a missing script", function()
    local r = viz("/nonexistent/script.lua")
    assert.are.equal(1, r.code)
    assert.truthy(r.err:match("^attn_viz: cannot read the script: cannot open /nonexistent/script.lua"), r.err)
  end)
end)
