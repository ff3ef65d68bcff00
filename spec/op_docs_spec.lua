-- SPDX-License-Identifier: MIT
-- The reference entries of the op table's ops (docs/api/ops.luadoc) are
-- generated from attn.core._ops by scripts/gen_op_docs.lua: the committed
-- file must be what the table makes now.
local ROOT = os.getenv("ATTN_SOURCE_DIR") or (debug.getinfo(1, "S").source:match("^@(.*)/spec/[^/]*$") or ".")

describe("docs/api/ops.luadoc", function()
  local text = assert(loadfile(ROOT .. "/scripts/gen_op_docs.lua"))("--text")

  it("is what scripts/gen_op_docs.lua makes of the op table", function()
    local f = assert(io.open(ROOT .. "/docs/api/ops.luadoc", "rb"))
    local have = f:read("a")
    f:close()
    assert(have == text, "docs/api/ops.luadoc is stale: run build/bin/attn scripts/gen_op_docs.lua")
  end)

  it("documents every callable op of the table and its in-place form", function()
    local n = 0
    for _, op in ipairs(require("attn.core")._ops) do
      if op.callable then
        n = n + 1
        assert(text:find("\n%-%- @function " .. op.name .. "\n"), op.name)
        assert(text:find("\n%-%- @function " .. op.name .. "_\n"), op.name .. "_")
        assert(text:find(op.doc, 1, true), op.name .. "'s doc line")
      end
    end
    assert.is_true(n >= 30)
  end)
end)
