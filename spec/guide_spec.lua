-- SPDX-License-Identifier: MIT
-- docs/guide-from-pytorch.md: every ```lua block is a complete script;
-- each must run as written (their asserts check the shapes and the
-- notebooks' numbers), so the guide cannot drift from the API.

local SRC = os.getenv("ATTN_SOURCE_DIR") or "."

local readfile = require("support.sh").readfile

describe("docs/guide-from-pytorch.md", function()
  local text = readfile(SRC .. "/docs/guide-from-pytorch.md")
  local blocks = {}
  local heading, code
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if code then
      if line == "```" then
        blocks[#blocks + 1] = { heading = heading, code = table.concat(code, "\n") }
        code = nil
      else
        code[#code + 1] = line
      end
    elseif line:match("^## ") then
      heading = line:sub(4)
    elseif line == "```lua" then
      code = {}
    end
  end

  it("has a script for each of the five notebooks", function()
    local n = 0
    for _, b in ipairs(blocks) do
      if b.heading:match("^Notebook 00%d") then n = n + 1 end
    end
    assert.are.equal(5, n)
  end)

  for _, b in ipairs(blocks) do
    it("runs the script of '" .. b.heading .. "'", function()
      local printed = {}
      local env = setmetatable({ print = function(...) printed[#printed + 1] = select("#", ...) end },
        { __index = _G })
      local chunk = assert(load(b.code, "=" .. b.heading, "t", env))
      chunk()
      assert.is_true(#printed > 0 or not b.code:find("print%("))
    end)
  end
end)
