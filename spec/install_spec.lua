-- SPDX-License-Identifier: MIT
-- Packaging: `cmake --install` of the build (ATTN_BUILD_DIR, set by
-- spec/tests.cmake) into a temporary prefix, then, using only what went
-- there: a C program outside the tree built with pkg-config, the same
-- program built by an outside CMake project with find_package(attn) (shared
-- and static host library), stock lua5.4 requiring attn, and the installed
-- attn binary.

local S = require "support.sh"
local BUILD = S.env_or_pending({describe = describe, pending = pending}, "ATTN_BUILD_DIR", "install")
if not BUILD then return end

local q, writefile, readfile, exists = S.q, S.writefile, S.readfile, S.exists

-- Runs a shell command; returns { out, code } (stderr goes with stdout).
local function sh(cmd)
  local code, out = S.sh(cmd)
  return { out = out, code = code }
end

local function ok(r, what)
  assert(r.code == 0, (what or "command") .. " failed (" .. r.code .. "):\n" .. r.out)
  return r.out
end

-- An outside program: the host API and the core API together.  It hands a
-- buffer to a sandboxed script, reads the softmax back from its own memory
-- and checks the script's limits are there.
local PROGRAM = [[
#include <stdio.h>
#include <string.h>
#include <attn.h>
#include <attn_lua.h>

int main(void) {
  attn_lua_opts o;
  attn_lua_opts_init(&o);
  o.sandbox = true;
  o.memory_limit = 16 << 20;
  o.instruction_limit = 1000000;
  lua_State *L;
  if (attn_lua_newstate(&o, &L)) return printf("newstate: %s\n", attn_last_error()), 1;
  float buf[4] = {0, 1, 2, 3};
  if (attn_lua_dostring(L, "local x = ... local attn = require 'attn' x:copy_(x:softmax(-1)) return io == nil",
                        "=outside", 0, 0) != ATTN_ERR_SCRIPT) /* no x: the chunk must fail */
    return printf("expected a script error\n"), 1;
  lua_pop(L, 1);
  if (attn_lua_push_buffer(L, buf, 1, (int64_t[]){4}, NULL, NULL, NULL)) return 1;
  if (attn_lua_dostring(L, "local x = ... local attn = require 'attn' x:copy_(x:softmax(-1)) return io == nil",
                        "=outside", 1, 1))
    return printf("script: %s\n", attn_last_error()), 1;
  int sandboxed = lua_toboolean(L, -1);
  lua_pop(L, 1);
  attn_status st = attn_lua_dostring(L, "while true do end", "=loop", 0, 0);
  attn_lua_close(L);
  attn_tensor *t;
  if (attn_from_data(1, (int64_t[]){4}, buf, &t)) return 1;
  attn_tensor *s;
  if (attn_reduce_all(ATTN_SUM, t, NULL, &s)) return 1;
  printf("%s softmax %.6f %.6f %.6f %.6f sum %.6f sandboxed %d limit %d\n", ATTN_VERSION, buf[0], buf[1], buf[2],
         buf[3], attn_tensor_data(s)[0], sandboxed, st == ATTN_ERR_LIMIT);
  attn_tensor_release(s);
  attn_tensor_release(t);
  return 0;
}
]]

-- A host that sandboxes one untrusted script file with a 64 MB cap and a
-- 3 s budget (issue 14), built from the installed headers and pkg-config
-- only; it reports the status, how long the script ran, the process's peak
-- memory and whether the state still runs a normal call afterwards.
local HOSTILE_HOST = [[
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <attn_lua.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  attn_lua_opts o;
  attn_lua_opts_init(&o);
  o.sandbox = true;
  o.memory_limit = 64 << 20;
  o.time_limit = 3;
  lua_State *L;
  if (attn_lua_newstate(&o, &L)) return printf("newstate: %s\n", attn_last_error()), 1;
  double t0 = now();
  attn_status st = attn_lua_dofile(L, argv[1], 0, 0);
  double dt = now() - t0;
  lua_settop(L, 0);
  attn_status again = attn_lua_dostring(L, "return ('abc'):upper() == 'ABC' and "
                                           "require('attn').ones(2):sum():item() == 2", "=again", 0, 1);
  int fine = again == ATTN_OK && lua_toboolean(L, -1);
  attn_lua_close(L);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("status %d seconds %.3f maxrss_kb %ld again %d\n", (int)st, dt, ru.ru_maxrss, fine);
  return 0;
}
]]

-- Hostile scripts: limit = true when the time budget must be what stops
-- them (ATTN_ERR_LIMIT = 8); the others fail on the memory cap.
local HOSTILE = {
  {limit = true, code = "local attn = require 'attn' local q = attn.randn(1, 8, 4096, 64) "
    .. "while true do attn.scaled_dot_product_attention(q, q, q) end"},
  {limit = true, code = "local attn = require 'attn' local a = attn.randn(2048, 2048) "
    .. "while true do pcall(a.matmul, a, a) end"},
  {limit = true, code = "local attn = require 'attn' return attn.ones(1, 1):expand(2^40, 1):sum(1)"},
  {limit = true, code = "return string.rep('a', 1e5):find('.-b')"},
  {limit = true, code = "return string.rep('a', 3000):gsub(string.rep('a*', 12) .. 'b', '')"},
  {limit = true, code = "for x in string.rep('a', 1e5):gmatch('.-b') do end"},
  {limit = true, code = "while true do pcall(string.rep, '', 1 << 50) end"},
  {limit = true, code = "return table.move({}, 1, 1 << 50, 2)"},
  {limit = true, code = "return table.sort(setmetatable({}, {__len = function() return (1 << 31) - 2 end, "
    .. "__index = rawlen, __newindex = rawequal}))"},
  {limit = true, code = "return table.insert(setmetatable({}, {__len = function() return 1 << 50 end}), 1, 0)"},
  -- (8 MB chunks parsed in a loop: the budget, or the cap if garbage piles up)
  {limit = "or memory", code = "while true do load(string.rep('x=1 ', 2e6)) end"},
  {code = "local attn = require 'attn' local t = {} while true do t[#t + 1] = attn.ones(1 << 16) end"},
  {code = "local t = {} while true do t[#t + 1] = string.rep('x', 1 << 20) .. #t end"},
  {code = "return string.rep('x', 1 << 30)"},
}

local EXPECTED = "0.1.0 softmax 0.032059 0.087144 0.236883 0.643914 sum 1.000000 sandboxed 1 limit 1\n"

describe("cmake --install into a temporary prefix", function()
  local dir, prefix, libdir

  setup(function()
    dir = S.tmpdir()
    prefix = dir .. "/prefix"
    ok(sh("cmake --install " .. q(BUILD) .. " --prefix " .. q(prefix)), "cmake --install")
    writefile(dir .. "/prog.c", PROGRAM)
  end)

  teardown(function()
    if dir then os.execute("rm -rf " .. q(dir)) end
  end)

  local function pc(args)
    return ok(sh("PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=" .. q(libdir .. "/pkgconfig") .. ":/usr/lib/x86_64-linux-gnu/pkgconfig:/usr/lib/pkgconfig:/usr/share/pkgconfig pkg-config " .. args), "pkg-config " .. args)
  end

  it("installs headers, libraries, the Lua package, the binary and the package files", function()
    for _, cand in ipairs({ "lib", "lib64", "lib/x86_64-linux-gnu" }) do
      if exists(prefix .. "/" .. cand .. "/pkgconfig/attn.pc") then libdir = prefix .. "/" .. cand end
    end
    assert(libdir, "no attn.pc under " .. prefix)
    for _, f in ipairs({ "/include/attn.h", "/include/attn_lua.h", "/bin/attn", "/share/lua/5.4/attn/init.lua",
      "/share/lua/5.4/attn/nn.lua" }) do
      assert(exists(prefix .. f), "missing " .. f)
    end
    for _, f in ipairs({ "/libattn.so", "/libattn.a", "/libattn_lua.so", "/libattn_lua.a", "/pkgconfig/attn-lua.pc",
      "/cmake/attn/attnConfig.cmake", "/cmake/attn/attnConfigVersion.cmake", "/cmake/attn/attnTargets.cmake",
      "/lua/5.4/attn/core.so" }) do
      assert(exists(libdir .. f), "missing " .. libdir .. f)
    end
  end)

  it("attn/core.so does not link liblua (the interpreter provides Lua)", function()
    local deps = ok(sh("ldd " .. q(libdir .. "/lua/5.4/attn/core.so")))
    assert.falsy(deps:find("liblua"), deps)
    assert.truthy(ok(sh("ldd " .. q(libdir .. "/libattn_lua.so"))):find("liblua5%.4"))
  end)

  it("pkg-config points into the prefix it was installed to", function()
    local cflags = pc("--cflags attn-lua")
    -- the .pc files are relocatable: their prefix is ${pcfiledir}/../..
    local inc = assert(cflags:match("%-I(%S+)"), cflags)
    assert.are.equal(ok(sh("realpath " .. q(prefix .. "/include"))), ok(sh("realpath " .. q(inc))))
    assert.truthy(cflags:find("lua5.4", 1, true), cflags)
    local libs = pc("--libs attn-lua")
    assert.truthy(libs:find("-lattn_lua", 1, true) and libs:find("-lattn", 1, true), libs)
    assert.are.equal("0.1.0\n", pc("--modversion attn"))
  end)

  it("builds and runs an outside C program with pkg-config", function()
    local flags = pc("--cflags --libs attn-lua"):gsub("\n", "")
    ok(sh(("cc -std=c11 -o %s %s %s -Wl,-rpath,%s"):format(q(dir .. "/prog_pc"), q(dir .. "/prog.c"), flags,
      q(libdir))), "cc")
    assert.are.equal(EXPECTED, ok(sh(q(dir .. "/prog_pc")), "prog_pc"))
  end)

  it("sandboxes hostile scripts with a 64 MB cap and a 3 s budget: none runs over 5 s or takes 200 MB", function()
    local flags = pc("--cflags --libs attn-lua"):gsub("\n", "")
    writefile(dir .. "/hostile.c", HOSTILE_HOST)
    ok(sh(("cc -std=c11 -o %s %s %s -Wl,-rpath,%s"):format(q(dir .. "/hostile"), q(dir .. "/hostile.c"), flags,
      q(libdir))), "cc")
    local san = os.getenv("ATTN_SANITIZER")
    for i, h in ipairs(HOSTILE) do
      local path = dir .. "/hostile" .. i .. ".lua"
      writefile(path, h.code)
      local out = ok(sh(q(dir .. "/hostile") .. " " .. q(path)), "hostile " .. i)
      local st, secs, rss, again = out:match("status (%d+) seconds (%S+) maxrss_kb (%d+) again (%d)")
      assert(st, out)
      st, secs, rss = tonumber(st), tonumber(secs), tonumber(rss)
      local what = ("script %d (%s): %s"):format(i, h.code, out)
      if h.limit == true then
        assert.equal(8, st, what)
      elseif h.limit then
        assert.is_true(st == 8 or st == 4, what)
      else
        assert.is_true(st ~= 0, what)
      end
      assert.equal("1", again, what)
      if not san then
        assert.is_true(secs < 5, what)
        assert.is_true(rss < 200 * 1024, what)
      elseif san ~= "valgrind" then
        assert.is_true(secs < 10, what)
      end
    end
  end)

  it("builds and runs it with find_package(attn) in CMake, shared and static", function()
    local src = dir .. "/cmake_project"
    os.execute("mkdir -p " .. q(src))
    os.execute("cp " .. q(dir .. "/prog.c") .. " " .. q(src .. "/prog.c"))
    writefile(src .. "/CMakeLists.txt", [[
cmake_minimum_required(VERSION 3.25)
project(outside LANGUAGES C)
find_package(attn 0.1 REQUIRED)
add_executable(prog_shared prog.c)
target_link_libraries(prog_shared PRIVATE attn::attn_lua)
add_executable(prog_static prog.c)
target_link_libraries(prog_static PRIVATE attn::attn_lua_static)
message(STATUS "attn Lua modules in ${attn_LUA_CMOD_DIR}")
]])
    local out = ok(sh(("cmake -S %s -B %s -DCMAKE_PREFIX_PATH=%s"):format(q(src), q(src .. "/b"), q(prefix))),
      "cmake configure")
    assert.truthy(out:find("attn Lua modules in " .. prefix, 1, true), out)
    ok(sh("cmake --build " .. q(src .. "/b")), "cmake --build")
    assert.are.equal(EXPECTED, ok(sh(q(src .. "/b/prog_shared")), "prog_shared"))
    assert.are.equal(EXPECTED, ok(sh(q(src .. "/b/prog_static")), "prog_static"))
    -- the shared one really uses the installed library
    assert.truthy(ok(sh("ldd " .. q(src .. "/b/prog_shared"))):find(libdir .. "/libattn_lua.so", 1, true))
  end)

  it("lua5.4 finds attn with only the installed paths", function()
    local lmod, cmod = prefix .. "/share/lua/5.4", libdir .. "/lua/5.4"
    local code = [[
local attn = require "attn"
print(package.searchpath("attn.core", package.cpath), package.searchpath("attn", package.path))
print(attn.ones(2, 3):sum():item(), attn.nn.Linear ~= nil)]]
    local out = ok(sh(("cd %s && env -u LUA_INIT -u LUA_INIT_5_4 LUA_PATH_5_4=%s LUA_CPATH_5_4=%s lua5.4 -e %s"):format(
      q(dir), q(lmod .. "/?.lua;" .. lmod .. "/?/init.lua"), q(cmod .. "/?.so"), q(code))), "lua5.4")
    assert.are.equal(cmod .. "/attn/core.so\t" .. lmod .. "/attn/init.lua\n6.0\ttrue\n", out)
    -- and without them it is not found: the test looks where it says
    local r = sh(("cd %s && env -u LUA_INIT -u LUA_INIT_5_4 LUA_PATH_5_4=%s LUA_CPATH_5_4=%s lua5.4 -e %s"):format(
      q(dir), q(dir .. "/?.lua"), q(dir .. "/?.so"), q('require "attn"')))
    assert.are_not.equal(0, r.code)
  end)

  it("the installed attn binary runs from anywhere", function()
    local out = ok(sh(("cd %s && env -u LUA_INIT -u LUA_INIT_5_4 LUA_PATH_5_4= LUA_CPATH_5_4= %s -e %s"):format(
      q(dir), q(prefix .. "/bin/attn"), q('print(require("attn").eye(3):sum():item())'))), "attn")
    assert.are.equal("3.0\n", out)
  end)

  it("the rockspec passes luarocks lint", function()
    if sh("command -v luarocks").code ~= 0 then
      pending("luarocks is not installed")
      return
    end
    local src = os.getenv("ATTN_SOURCE_DIR") or "."
    local version = readfile(src .. "/VERSION"):match("^(%S+)")
    ok(sh("cd " .. q(src) .. " && luarocks --lua-version 5.4 lint attn-" .. version .. "-1.rockspec"), "luarocks lint")
  end)
end)
