-- SPDX-License-Identifier: MIT
-- OpenBLAS core selection: attn must set OPENBLAS_CORETYPE itself before
-- OpenBLAS initialises (under the attn binary and under stock lua5.4),
-- respect a user's explicit choice, and leave the environment untouched.
local attn = require "attn"

local bin = os.getenv("ATTN_BIN")

local function run(cmd)
  local f = assert(io.popen(cmd .. " 2>&1"))
  local out = f:read("a")
  f:close()
  return (out:gsub("%s+$", ""))
end

local probe = [[local a = require 'attn'; local i = a.info(); ]] ..
  [[print(i.blas_core .. ' ' .. i.blas_coretype_source .. ' ' .. tostring(os.getenv('OPENBLAS_CORETYPE')))]]

-- stock lua5.4 finds the package through the source and build trees
local src, build = os.getenv("ATTN_SOURCE_DIR") or ".", os.getenv("ATTN_BUILD_DIR") or "build"
local lua_env = ("LUA_PATH_5_4='%s/lua/?.lua;%s/lua/?/init.lua;;' LUA_CPATH_5_4='%s/?.so;;' lua5.4"):format(
  src, src, build)
local interpreters = {{"lua5.4", lua_env}}
if bin then interpreters[#interpreters + 1] = {"attn", bin} end

for _, interp in ipairs(interpreters) do
  local name, exe = interp[1], interp[2]
  describe("OpenBLAS core under " .. name, function()
    it("is chosen by attn from cpuid and the variable is not left behind", function()
      local out = run(("env -u OPENBLAS_CORETYPE %s -e %q"):format(exe, probe))
      local core, source, env = out:match("^(%S+) (%S+) (%S+)$")
      assert.is_not_nil(core, out)
      assert.is_not.equal("Prescott", core)
      assert.equal("nil", env)
      assert.is_true(source == "attn" or source == "openblas", out)
    end)
    it("follows ATTN_BLAS_CORETYPE when it names a core", function()
      local out = run(("env -u OPENBLAS_CORETYPE ATTN_BLAS_CORETYPE=Haswell %s -e %q"):format(exe, probe))
      assert.equal("Haswell attn nil", out)
    end)
    it("never overrides the user's OPENBLAS_CORETYPE", function()
      local out = run(("OPENBLAS_CORETYPE=Sandybridge %s -e %q"):format(exe, probe))
      assert.equal("Sandybridge user Sandybridge", out)
    end)
  end)
end

describe("info", function()
  it("names the loaded library and the core in use", function()
    local i = attn.info()
    assert.matches("openblas", i.blas)
    assert.matches("OpenBLAS", i.blas_config)
    assert.is_string(i.blas_core)
  end)
end)
