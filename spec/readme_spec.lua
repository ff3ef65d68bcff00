-- SPDX-License-Identifier: MIT
-- README.md's example ("Fifteen lines"): the ```lua block runs as written
-- under the attn binary and prints exactly the output block after it (the
-- numbers PyTorch 1.13 prints for the same program), and draws its picture.

local SRC = os.getenv("ATTN_SOURCE_DIR") or "."
local BIN = os.getenv("ATTN_BIN") or (SRC .. "/build/bin/attn")

local readfile = require("support.sh").readfile

describe("README.md", function()
  local text = readfile(SRC .. "/README.md")
  local code, expected = text:match("\n```lua\n(.-)\n```\n.-\n```\n(.-\n)```\n")

  it("has the example and its output", function()
    assert.is_string(code)
    assert.is_string(expected)
    assert.truthy(expected:find("tensor%("))
  end)

  it("prints what the README says it prints, and draws weights.png", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    local f = assert(io.open(dir .. "/example.lua", "w"))
    f:write(code, "\n")
    f:close()
    local p = assert(io.popen("cd '" .. dir .. "' && '" .. BIN .. "' example.lua 2>&1"))
    local got = p:read("a")
    p:close()
    local png = io.open(dir .. "/weights.png", "rb")
    local head = png and png:read(8)
    if png then png:close() end
    os.execute("rm -rf '" .. dir .. "'")
    assert.are.equal(expected, got)
    assert.are.equal("\137PNG\r\n\26\n", head)
  end)

  it("is a front page: under 150 lines", function()
    local n = select(2, text:gsub("\n", ""))
    assert.is_true(n < 150, "README.md has " .. n .. " lines")
  end)
end)
