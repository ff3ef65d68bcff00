-- SPDX-License-Identifier: MIT
-- The LDoc reference covers the public API: scripts/check_docs.lua walks
-- every public function of attn and fails on one without an LDoc entry
-- that is not on scripts/docs_pending.txt (a list that may only shrink),
-- and LDoc itself (Debian lua-ldoc) must run over config.ld without a
-- warning; that part is skipped, saying so, where ldoc is not installed.

local SRC = os.getenv("ATTN_SOURCE_DIR") or "."
local BIN = os.getenv("ATTN_BIN") or (SRC .. "/build/bin/attn")

local S = require "support.sh"
local sh_quote, readfile, writefile = S.q, S.readfile, S.writefile

-- Runs check_docs.lua with the given arguments against the tree at root.
local function check(root, args)
  return S.sh("cd " .. sh_quote(root) .. " && ATTN_SOURCE_DIR=" .. sh_quote(root) .. " " .. sh_quote(BIN) ..
    " " .. sh_quote(SRC .. "/scripts/check_docs.lua") .. " " .. (args or ""))
end

local function have_ldoc() return S.have("ldoc") end

-- A scratch copy of the parts of the tree the checker reads.
local function scratch_tree()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. sh_quote(dir .. "/scripts") .. " && cp -R " .. sh_quote(SRC .. "/lua") .. " " ..
    sh_quote(SRC .. "/docs") .. " " .. sh_quote(SRC .. "/config.ld") .. " " .. sh_quote(dir) .. " && cp " ..
    sh_quote(SRC .. "/scripts/docs_pending.txt") .. " " .. sh_quote(dir .. "/scripts/")))
  return dir
end

describe("the LDoc reference", function()
  it("documents every public function (scripts/check_docs.lua)", function()
    local rc, out = check(SRC, "--no-ldoc")
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("public functions", 1, true), out)
  end)

  it("is built by LDoc without a warning", function()
    if not have_ldoc() then
      return pending("ldoc is not installed (Debian lua-ldoc: scripts/setup.sh --docs); LDoc run skipped")
    end
    local rc, out = check(SRC)
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("ldoc ran clean", 1, true) or out:find("ldoc %d+ warning"), out)
  end)

  describe("the checker", function()
    local dir
    before_each(function() dir = scratch_tree() end)
    after_each(function() S.rmtree(dir) end)

    -- Replaces the one match of from in the scratch file rel by to.
    local function patch(rel, from, to)
      local text, n = readfile(dir .. rel):gsub(from, to)
      assert.are.equal(1, n, "the spec could not find " .. from .. " in " .. rel)
      writefile(dir .. rel, text)
    end

    -- The checker run with args fails, printing each of the given texts.
    local function fails_with(args, ...)
      local rc, out = check(dir, args)
      assert.are.equal(1, rc, out)
      for _, text in ipairs({ ... }) do assert.truthy(out:find(text, 1, true), out) end
    end

    it("fails on a public function whose doc comment is gone", function()
      local path = dir .. "/lua/attn/app/plot.lua"
      local text = readfile(path)
      -- the block's opening `---` (the last one before the function) becomes `--`
      local fn_at = text:find("\nfunction plot%.histogram")
      local open, n = nil, 0
      if fn_at then
        local at = 1
        while true do
          local i = text:find("\n%-%-%- ", at)
          if not i or i > fn_at then break end
          open, at = i, i + 1
        end
      end
      if open then
        text, n = text:sub(1, open) .. "-- " .. text:sub(open + 5), 1
      end
      assert.are.equal(1, n, "the spec could not find plot.histogram's doc block")
      writefile(path, text)
      fails_with("--no-ldoc", "undocumented: attn.plot.histogram")
    end)

    it("fails on a C function whose entry is gone", function()
      patch("/docs/api/core.luadoc", "\n%-%- @function zeros\n", "\n-- (removed)\n")
      fails_with("--no-ldoc", "undocumented: attn.zeros (C)")
    end)

    it("fails when an entry for a method leaves out the method form", function()
      patch("/docs/api/core.luadoc", "Method: `t:cumsum%(dim%)`%.", "")
      fails_with("--no-ldoc", "alias not mentioned: attn.Tensor.cumsum")
    end)

    it("fails on an entry that LDoc leaves out of the reference (with ldoc installed)", function()
      if not have_ldoc() then
        return pending("ldoc is not installed (Debian lua-ldoc: scripts/setup.sh --docs); LDoc run skipped")
      end
      patch("/docs/api/core.luadoc", "\n%-%- @function zeros\n", "\n-- @function zeros\n-- @local\n")
      fails_with(nil, "LDoc leaves out the entry for attn.zeros")
    end)

    it("fails on a pending name that is documented or does not exist, so the list only shrinks", function()
      local path = dir .. "/scripts/docs_pending.txt"
      writefile(path, readfile(path) .. "attn.zeros\nattn.no_such_function\n")
      fails_with("--no-ldoc", "attn.zeros is documented now", "attn.no_such_function is not a public function")
    end)
  end)
end)
