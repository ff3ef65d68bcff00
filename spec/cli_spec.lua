-- SPDX-License-Identifier: MIT
-- The attn interpreter binary: lua5.4's command line with attn preloaded.
-- Runs the binary named by ATTN_BIN (set by spec/tests.cmake) through the
-- shell, with stdin, stdout and stderr in temporary files.

local S = require "support.sh"
local BIN = S.env_or_pending({describe = describe, pending = pending}, "ATTN_BIN", "attn binary")
if not BIN then return end
local q, readfile, writefile, tmpdir, rmtree = S.q, S.readfile, S.writefile, S.tmpdir, S.rmtree

-- Runs `attn <args>` (args already shell-quoted).  opts.stdin: text fed to
-- stdin (empty by default); opts.env: "VAR=value ..." assignments;
-- opts.cwd: directory to run in.  LUA_INIT* are removed unless opts.env
-- sets them.  Returns { out, err, code }.
local function run(args, opts)
  opts = opts or {}
  return S.capture(("%s env -u LUA_INIT -u LUA_INIT_5_4 %s %s %s"):format(
    opts.cwd and ("cd " .. q(opts.cwd) .. " &&") or "", opts.env or "", q(BIN), args or ""), opts.stdin)
end

local function script(text)
  local path = os.tmpname()
  writefile(path, text)
  return path
end

-- Expect success with exactly this stdout.
local function ok_out(r, expected)
  assert.are.equal("", r.err)
  assert.are.equal(0, r.code)
  assert.are.equal(expected, r.out)
end

describe("attn binary", function()
  describe("scripts", function()
    it("passes arguments through arg and ...", function()
      local s = script([[
        print(select("#", ...), ...)
        print(#arg, arg[1], arg[2], arg[3])
        print(arg[-1], arg[-2], arg[-3], arg[-4] ~= nil, arg[-5])
      ]])
      local r = run("-W -e 'x=1' " .. q(s) .. " a 2 'three words'")
      os.remove(s)
      ok_out(r, "3\ta\t2\tthree words\n3\ta\t2\tthree words\nx=1\t-e\t-W\ttrue\tnil\n")
    end)

    it("sets arg[0] to the script and arg[-n] to the interpreter", function()
      local s = script("print(arg[0]) print(arg[-1])")
      local r = run(q(s))
      os.remove(s)
      ok_out(r, s .. "\n" .. BIN .. "\n")
    end)

    it("returns the status given to os.exit", function()
      local r = run("-e 'os.exit(3)'")
      assert.are.equal(3, r.code)
    end)

    it("runs stdin as the script for '-', with arguments", function()
      ok_out(run("- x y", { stdin = "print('stdin', ...)" }), "stdin\tx\ty\n")
    end)

    it("runs a file named '-' after '--'", function()
      local dir = tmpdir()
      writefile(dir .. "/-", "print('file dash', ...)")
      local r = run("-- - 1", { cwd = dir, stdin = "print('not this')" })
      rmtree(dir)
      ok_out(r, "file dash\t1\n")
    end)

    it("runs piped stdin as a script when no script is given", function()
      ok_out(run("", { stdin = "print(#arg, 6 * 7)" }), "0\t42\n")
    end)
  end)

  describe("errors", function()
    it("reports a syntax error with exit status 1", function()
      local s = script("x = = 1\n")
      local r = run(q(s))
      os.remove(s)
      assert.are.equal(1, r.code)
      assert.are.equal("", r.out)
      assert.truthy(r.err:find(s .. ":1:", 1, true), r.err)
      assert.truthy(r.err:find("unexpected symbol near '='", 1, true), r.err)
    end)

    it("reports a runtime error with a traceback and exit status 1", function()
      local s = script("print('before')\nfunction explode() error('boom') end\nexplode()\nprint('after')\n")
      local r = run(q(s))
      os.remove(s)
      assert.are.equal(1, r.code)
      assert.are.equal("before\n", r.out)
      assert.truthy(r.err:find(s .. ":2: boom", 1, true), r.err)
      assert.truthy(r.err:find("stack traceback:", 1, true), r.err)
      assert.truthy(r.err:find("explode", 1, true), r.err)
      assert.truthy(r.err:find(s .. ":3: in main chunk", 1, true), r.err)
    end)

    it("describes non-string error objects", function()
      local r = run([[-e 'error({})']])
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("(error object is a table value)", 1, true), r.err)
      r = run([[-e 'error(setmetatable({}, {__tostring = function() return "custom message" end}))']])
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("custom message", 1, true), r.err)
    end)

    it("fails with status 1 for a missing script", function()
      local r = run("/nonexistent/dir/none.lua")
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("cannot open /nonexistent/dir/none.lua", 1, true), r.err)
    end)

    it("fails with status 1 for an error in piped stdin", function()
      local r = run("", { stdin = "error('from stdin')" })
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("stdin:1: from stdin", 1, true), r.err)
    end)

    it("prints the usage for a bad option or a missing argument", function()
      local r = run("-q")
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("unrecognized option '-q'", 1, true), r.err)
      assert.truthy(r.err:find("usage: ", 1, true), r.err)
      r = run("-e")
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("'-e' needs argument", 1, true), r.err)
      r = run("-l")
      assert.are.equal(1, r.code)
      assert.truthy(r.err:find("'-l' needs argument", 1, true), r.err)
    end)

    it("stops at the first failing -e", function()
      local r = run("-e 'print(1)' -e 'error(\"second\")' -e 'print(3)'")
      assert.are.equal(1, r.code)
      assert.are.equal("1\n", r.out)
      assert.truthy(r.err:find("(command line):1: second", 1, true), r.err)
    end)
  end)

  describe("options", function()
    it("-e runs statements in order, joined or separate", function()
      ok_out(run("-e 'x = 20' '-ex = x + 1' -e 'print(x * 2)'"), "42\n")
    end)

    it("-e then a script: the script still gets its arguments", function()
      local s = script("print(y, ...)")
      local r = run("-e 'y = 5' " .. q(s) .. " arg1")
      os.remove(s)
      ok_out(r, "5\targ1\n")
    end)

    it("-l mod and -l g=mod set globals", function()
      ok_out(run("-l attn -e 'print(type(attn), attn == require \"attn\")'"), "table\ttrue\n")
      ok_out(run("-l a=attn -e 'print(rawget(_G, \"attn\"), a == require \"attn\")'"), "nil\ttrue\n")
      ok_out(run("-l s=string -e 'print(s == string)'"), "true\n")
    end)

    it("-l fails with status 1 for an unknown module", function()
      local r = run("-l no_such_module_xyz -e 'print(1)'")
      assert.are.equal(1, r.code)
      assert.are.equal("", r.out)
      assert.truthy(r.err:find("module 'no_such_module_xyz' not found", 1, true), r.err)
    end)

    it("-v prints the Lua and attn versions", function()
      local r = run("-v")
      assert.are.equal(0, r.code)
      assert.are.equal("", r.err)
      local lua_line, attn_line, rest = r.out:match("^([^\n]*)\n([^\n]*)\n(.*)$")
      assert.truthy(lua_line, r.out)
      assert.are.equal("", rest)
      assert.truthy(lua_line:match("^Lua 5%.4%.%d+  Copyright"), lua_line)
      local v, luav, core = attn_line:match("^attn (%d+%.%d+%.%d+) %((Lua 5%.4%.%d+), OpenBLAS ([^)]+)%)$")
      assert.truthy(v, attn_line)
      assert.are.equal(lua_line:match("^Lua 5%.4%.%d+"), luav)
      assert.are_not.equal("", core)
      local src = os.getenv("ATTN_SOURCE_DIR")
      if src then
        assert.are.equal(readfile(src .. "/VERSION"):match("^(%S+)\n$"), v)
      end
    end)

    it("-v with a script prints the version and runs it", function()
      local r = run("-v -e 'print(\"ran\")'")
      assert.are.equal(0, r.code)
      assert.truthy(r.out:match("^Lua 5%.4[^\n]*\nattn [^\n]*\nran\n$"), r.out)
    end)

    it("does not load OpenBLAS unless -v asks for it", function()
      local probe = [[-e 'local f = io.open("/proc/self/maps") if not f then print("skip") return end
        print(f:read("a"):find("openblas", 1, true) and "loaded" or "not loaded")']]
      local r = run(probe)
      assert.are.equal(0, r.code, r.err)
      if r.out ~= "skip\n" then
        assert.are.equal("not loaded\n", r.out)
        r = run("-v " .. probe)
        assert.truthy(r.out:find("\nloaded\n", 1, true), r.out)
      end
    end)

    it("-W turns warnings on", function()
      local r = run("-e 'warn(\"quiet\")'")
      assert.are.equal("", r.err)
      r = run("-W -e 'warn(\"loud\")'")
      assert.are.equal(0, r.code)
      assert.truthy(r.err:find("Lua warning: loud", 1, true), r.err)
    end)

    it("runs LUA_INIT_5_4, else LUA_INIT, before the options", function()
      ok_out(run("-e 'print(\"main\")'", { env = "LUA_INIT='print(\"init\")'" }), "init\nmain\n")
      ok_out(run("-e 'print(\"main\")'", { env = "LUA_INIT='print(\"init\")' LUA_INIT_5_4='print(\"init54\")'" }),
        "init54\nmain\n")
      local s = script("print('init file')")
      ok_out(run("-e 'print(\"main\")'", { env = "LUA_INIT=@" .. q(s) }), "init file\nmain\n")
      os.remove(s)
      local r = run("-e 'print(\"main\")'", { env = "LUA_INIT='error(\"bad init\")'" })
      assert.are.equal(1, r.code)
      assert.are.equal("", r.out)
      assert.truthy(r.err:find("LUA_INIT:1: bad init", 1, true), r.err)
    end)

    it("-E ignores LUA_INIT and LUA_PATH", function()
      ok_out(run("-E -e 'print(\"main\")'", { env = "LUA_INIT='print(\"init\")'" }), "main\n")
      local r = run("-E -e 'io.write(package.path)'", { env = "LUA_PATH_5_4='/nonexistent_dir_x/?.lua'" })
      assert.are.equal(0, r.code)
      assert.falsy(r.out:find("nonexistent_dir_x", 1, true), r.out)
      r = run("-e 'io.write(package.path)'", { env = "LUA_PATH_5_4='/nonexistent_dir_x/?.lua'" })
      assert.are.equal("/nonexistent_dir_x/?.lua", r.out)
    end)
  end)

  describe("preloaded attn", function()
    it("require 'attn' works from any directory with empty LUA_PATH/LUA_CPATH", function()
      local dir = tmpdir()
      local r = run("-e 'local attn = require \"attn\" print(type(attn), package.path, package.cpath)'", {
        cwd = dir, env = "LUA_PATH_5_4= LUA_CPATH_5_4= LUA_PATH= LUA_CPATH=" })
      rmtree(dir)
      ok_out(r, "table\t\t\n")
    end)

    it("package.loaded['attn.core'] is the preloaded C module that attn uses", function()
      local s = script([[
        assert(debug.getinfo(package.preload["attn.core"], "S").what == "C", "attn.core is not preloaded")
        assert(package.loaded["attn.core"] == nil, "attn.core loaded before require")
        local attn = require "attn"
        local core = package.loaded["attn.core"]
        assert(type(core) == "table", "require 'attn' did not load attn.core")
        assert(require("attn.core") == core)
        local shared = 0
        local wrapped = require("attn.ops")._wrapped -- Lua wrappers of these (dim lists, options)
        -- torch .pt dispatch, and SDPA's frame that attn.viz.capture observes (base.lua)
        wrapped = setmetatable({load = true, save = true, scaled_dot_product_attention = true}, {__index = wrapped})
        for k, v in pairs(attn) do
          if type(v) == "function" and core[k] ~= nil and not wrapped[k] then
            assert(rawequal(core[k], v), "attn." .. tostring(k) .. " differs from attn.core's")
            shared = shared + 1
          end
        end
        assert(shared > 0, "attn exposes no function of attn.core")
        print("ok")
      ]])
      local r = run(q(s))
      os.remove(s)
      ok_out(r, "ok\n")
    end)

    it("never loads attn from disk, even when it is on the paths", function()
      -- Decoys in the current directory, and the real core.so on LUA_CPATH.
      local dir = tmpdir()
      os.execute("mkdir -p " .. q(dir .. "/attn"))
      writefile(dir .. "/attn/init.lua", "error('disk attn/init.lua was loaded')")
      writefile(dir .. "/attn.lua", "error('disk attn.lua was loaded')")
      writefile(dir .. "/attn/core.lua", "error('disk attn/core.lua was loaded')")
      local build = os.getenv("ATTN_BUILD_DIR")
      local cpath = (build and build .. "/?.so;" or "") .. "./?.so"
      local s = script([[
        local attn = require "attn"
        assert(package.loaded["attn.core"] ~= nil)
        for k in pairs(debug.getregistry()._CLIBS or {}) do
          assert(type(k) ~= "string" or not k:find("attn"), "C library loaded from disk: " .. tostring(k))
        end
        local f = io.open("/proc/self/maps")
        if f then
          local maps = f:read("a")
          f:close()
          assert(not maps:find("core.so", 1, true), "a core.so is mapped")
        end
        print("ok")
      ]])
      local r = run(q(s), { cwd = dir, env = "LUA_PATH_5_4='./?.lua;./?/init.lua' LUA_CPATH_5_4=" .. q(cpath) })
      os.remove(s)
      rmtree(dir)
      ok_out(r, "ok\n")
    end)

    it("adds no globals", function()
      ok_out(run("-e 'print(rawget(_G, \"attn\"))'"), "nil\n")
    end)
  end)

  describe("REPL", function()
    -- Runs `attn <args>` with stdin; asserts that it exits 0, that stdout
    -- and stderr hold each plain-text piece of want.out and want.err, and
    -- that stderr is empty when want.err is "".
    local function repl(args, stdin, want)
      local r = run(args, { stdin = stdin })
      assert.are.equal(0, r.code)
      if want.err == "" then assert.are.equal("", r.err) end
      for _, piece in ipairs(want.out or {}) do assert.truthy(r.out:find(piece, 1, true), r.out) end
      for _, piece in ipairs(type(want.err) == "table" and want.err or {}) do
        assert.truthy(r.err:find(piece, 1, true), r.err)
      end
      return r
    end

    it("-i reads statements from a pipe", function()
      local r = repl("-i", "print(6*7)\n", { out = { "42" } })
      assert.truthy(r.out:match("^Lua 5%.4[^\n]*\nattn "), r.out)
    end)

    for _, c in ipairs({
      { "prints the values of expressions and of =expr", "-i", "=6*7\n'ab'..'cd'\nreturn 'x', 'y'\n",
        { out = { "42\n", "abcd\n", "x\ty\n" } } },
      { "continues incomplete statements with the >> prompt", "-i", "t = {\n  11,\n  31 }\n=t[1] + t[2]\n",
        { err = "", out = { ">> ", "42\n" } } },
      { "reports errors and keeps going", "-i", "error('oops')\nx = = 1\nprint('still' .. 'here')\n",
        { err = { "stdin:1: oops", "stack traceback:", "stdin:1: unexpected symbol near '='" }, out = { "stillhere\n" } } },
      { "reports an incomplete statement at end of input", "-i", "x = 1 +\n",
        { err = { "stdin:1: unexpected symbol near <eof>" } } },
      { "uses _PROMPT and _PROMPT2", "-e '_PROMPT = \"P1:\" _PROMPT2 = \"P2:\"' -i", "x = {\n}\n",
        { out = { "P1:", "P2:" } } },
      { "can use attn", "-i", "attn = require 'attn'\n=type(attn)\n", { err = "", out = { "table\n" } } },
    }) do
      it(c[1], function() repl(c[2], c[3], c[4]) end)
    end

    it("runs after the script with -i and sees its globals", function()
      local s = script("answer = 40")
      local r = run("-i " .. q(s), { stdin = "=answer + 2\n" })
      os.remove(s)
      assert.are.equal(0, r.code)
      assert.truthy(r.out:find("42", 1, true), r.out)
    end)
  end)

  it("is interrupted by SIGINT with an 'interrupted!' error", function()
    local out, err = os.tmpname(), os.tmpname()
    -- Send SIGINT once the loop is running (the script says "go" from
    -- inside it); a watchdog kills the process should the signal be lost.
    local cmd = ("%s -e 'io.stdout:write(\"go\\n\") io.stdout:flush() while true do end' >%s 2>%s </dev/null & "
      .. "pid=$!; (sleep 5; kill -KILL $pid) >/dev/null 2>&1 & dog=$!; i=0; "
      .. "while [ ! -s %s ] && [ $i -lt 200 ]; do sleep 0.01; i=$((i+1)); done; "
      .. "kill -INT $pid; wait $pid; rc=$?; kill $dog; exit $rc"):format(q(BIN), q(out), q(err), q(out))
    local _, _, code = os.execute(cmd)
    local o, e = readfile(out), readfile(err)
    os.remove(out)
    os.remove(err)
    assert.are.equal("go\n", o)
    assert.are.equal(1, code)
    assert.truthy(e:find("interrupted!", 1, true), e)
  end)
end)
