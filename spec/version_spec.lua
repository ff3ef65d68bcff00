-- SPDX-License-Identifier: MIT
-- One version number, in VERSION: attn.version, attn.info().version, the
-- generated header, the .pc files, the rockspec and CHANGELOG.md must all
-- say the same.
local attn = require "attn"

local SRC = os.getenv("ATTN_SOURCE_DIR") or "."
local BUILD = os.getenv("ATTN_BUILD_DIR")

local readfile = require("support.sh").readfile

local VERSION = readfile(SRC .. "/VERSION"):match("^(%d+%.%d+%.%d+)\n$")

describe("version", function()
  it("VERSION holds one MAJOR.MINOR.PATCH line", function()
    assert.is_string(VERSION, "VERSION must be one line MAJOR.MINOR.PATCH")
  end)

  it("attn.version and attn.info().version are VERSION's", function()
    assert.are.equal(VERSION, attn.version)
    assert.are.equal(VERSION, attn.info().version)
    assert.are.equal("attn " .. VERSION, attn._VERSION)
  end)

  it("the rockspec is attn-VERSION-1.rockspec, with that version, tag and the MIT licence", function()
    local names = {}
    local p = assert(io.popen("ls " .. "'" .. SRC:gsub("'", [['\'']]) .. "'"))
    for name in p:lines() do
      if name:match("%.rockspec$") then names[#names + 1] = name end
    end
    p:close()
    assert.are.same({ "attn-" .. VERSION .. "-1.rockspec" }, names)
    -- LuaRocks loads a rockspec as a chunk in an empty environment.
    local env = {}
    local chunk = assert(load(readfile(SRC .. "/" .. names[1]), "=rockspec", "t", env))
    chunk()
    assert.are.equal("attn", env.package)
    assert.are.equal(VERSION .. "-1", env.version)
    assert.are.equal("v" .. VERSION, env.source.tag)
    assert.are.equal("MIT", env.description.license)
  end)

  it("LICENSE is the MIT licence and CHANGELOG.md has a section for VERSION", function()
    assert.truthy(readfile(SRC .. "/LICENSE"):match("^MIT License\n"))
    local changelog = readfile(SRC .. "/CHANGELOG.md")
    assert.truthy(changelog:find("\n## [" .. VERSION .. "]", 1, true), "CHANGELOG.md: no '## [" .. VERSION .. "]'")
  end)

  if not BUILD or BUILD == "" then
    pending("ATTN_BUILD_DIR is not set: the generated header and .pc files are not checked (ctest sets it)")
    return
  end

  it("the generated attn_version.h and the pkg-config files say VERSION", function()
    local h = readfile(BUILD .. "/generated/attn_version.h")
    assert.are.equal(VERSION, h:match('#define ATTN_VERSION "([^"]+)"'))
    for _, pc in ipairs { "attn.pc", "attn-lua.pc" } do
      local s = readfile(BUILD .. "/" .. pc)
      assert.are.equal(VERSION, s:match("\nVersion: (%S+)\n"), pc)
    end
    assert.truthy(readfile(BUILD .. "/attn-lua.pc"):find("Requires: attn = " .. VERSION, 1, true))
  end)
end)
