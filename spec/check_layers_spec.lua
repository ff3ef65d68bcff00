-- SPDX-License-Identifier: MIT
-- scripts/check_layers.lua: the layering check catches what it is meant to
-- (circles of requires, includes and calls, calls up a core sub-floor, a
-- core file outside the rooms, an include past a room's door) in scratch
-- repositories, and passes on this tree.
local SRC = os.getenv("ATTN_SOURCE_DIR") or "."
local BUILD = os.getenv("ATTN_BUILD_DIR") or (SRC .. "/build")
local CHECK = SRC .. "/scripts/check_layers.lua"

local S = require "support.sh"
local sh, have, write = S.sh, S.have, S.writefile

-- A scratch git repository holding files = {path = text}; C files are
-- compiled into DIR/build/CMakeFiles/t.dir/<path>.o, where the checker
-- reads the calls.
local function scratch(files)
  local dir = os.tmpname()
  os.remove(dir)
  assert(sh("mkdir -p " .. dir) == 0)
  for path, text in pairs(files) do
    assert(sh(("mkdir -p '%s/%s'"):format(dir, path:match("^(.*)/") or ".")) == 0)
    write(dir .. "/" .. path, text)
    if path:match("%.c$") then
      local obj = ("%s/build/CMakeFiles/t.dir/%s.o"):format(dir, path)
      assert(sh(("mkdir -p '%s'"):format(obj:match("^(.*)/"))) == 0)
      local rc, out = sh(("cc -c -o '%s' '%s/%s'"):format(obj, dir, path))
      assert(rc == 0, out)
    end
  end
  assert(sh(("cd '%s' && git init -q . && git add -A"):format(dir)) == 0)
  return dir
end

local function check(dir)
  return sh(("cd '%s' && lua5.4 '%s' build"):format(dir, CHECK))
end

local function cleanup(dir) sh(("rm -rf '%s'"):format(dir)) end

-- Runs the checker on a scratch repository of files; asserts its exit
-- status and that its output matches each pattern; returns the output.
local function expect(status, files, ...)
  local dir = scratch(files)
  local rc, out = check(dir)
  cleanup(dir)
  assert.equal(status, rc, out)
  for _, pattern in ipairs({ ... }) do assert.matches(pattern, out) end
  return out
end

describe("check_layers", function()
  if not (have("git") and have("nm") and have("cc") and have("lua5.4")) then
    pending("needs git, nm, cc and lua5.4")
    return
  end

  it("passes on this tree", function()
    local rc, out = sh(("cd '%s' && lua5.4 '%s' '%s'"):format(SRC, CHECK, BUILD))
    assert.equal(0, rc, out)
    assert.matches("0 problems", out)
  end)

  it("finds a circle of requires in lua/attn", function()
    expect(1, {
      ["lua/attn/init.lua"] = 'local b = require "attn.base"\nreturn b\n',
      ["lua/attn/base.lua"] = 'local nn = require "attn.nn"\nreturn {}\n',
      ["lua/attn/nn.lua"] = 'local attn = require "attn"\nreturn {}\n',
    }, "circle of 3 files", "lua/attn/nn.lua %-> lua/attn/init.lua %(require%)")
  end)

  it("passes the same files once the circle is broken", function()
    expect(0, {
      ["lua/attn/init.lua"] = 'local b = require "attn.base"\nlocal nn = require "attn.nn"\nreturn b\n',
      ["lua/attn/base.lua"] = 'return {}\n',
      ["lua/attn/nn.lua"] = 'local attn = require "attn.base"\nreturn {}\n',
    })
  end)

  it("finds the framework requiring an application or a door", function()
    expect(1, {
      ["lua/attn/optim.lua"] = 'local text = require "attn.app.text"\nreturn {}\n',
      ["lua/attn/nn/module.lua"] = 'local nn = require "attn.nn"\nreturn {}\n',
      ["lua/attn/app/text.lua"] = 'return {}\n',
      ["lua/attn/nn.lua"] = 'return require "attn.nn.module"\n',
    }, "up or sideways: lua/attn/optim.lua %-> lua/attn/app/text.lua %(require", "up or sideways: lua/attn/nn/module.lua %-> lua/attn/nn.lua %(require")
  end)

  it("allows an application over the framework and the doors over both", function()
    expect(0, {
      ["lua/attn/init.lua"] = 'local b = require "attn.base"\nlocal t = require "attn.app.text"\nreturn b\n',
      ["lua/attn/base.lua"] = 'return {}\n',
      ["lua/attn/nn/module.lua"] = 'local b = require "attn.base"\nreturn {}\n',
      ["lua/attn/app/text.lua"] = 'local nn = require "attn.nn.module"\nreturn {}\n',
      ["lua/attn/text.lua"] = 'return require "attn.app.text"\n',
    })
  end)

  it("finds a call up a core sub-floor and the circle it closes", function()
    expect(1, {
      -- tensor.c (core/tensor) calling graph.c (core/autograd) is a call up
      ["src/core/tensor/tensor.c"] =
        "void attn_graph_thing(void);\nvoid attn_tensor_thing(void) { attn_graph_thing(); }\n",
      ["src/core/autograd/graph.c"] =
        "void attn_tensor_thing(void);\nvoid attn_graph_thing(void) { attn_tensor_thing(); }\n",
    }, "up or sideways: src/core/tensor/tensor.c %-> src/core/autograd/graph.c %(call", "circle of 2 files")
  end)

  it("allows the same call downwards", function()
    expect(0, {
      ["src/core/tensor/tensor.c"] = "void attn_tensor_thing(void) {}\n",
      ["src/core/autograd/graph.c"] =
        "void attn_tensor_thing(void);\nvoid attn_graph_thing(void) { attn_tensor_thing(); }\n",
    })
  end)

  it("finds an include circle", function()
    expect(1, {
      ["src/core/ops/a.h"] = '#include "b.h"\n',
      ["src/core/ops/b.h"] = '#include "a.h"\n',
    }, "circle of 2 files")
  end)

  it("refuses a core file outside the rooms", function()
    expect(1, {
      ["src/core/newthing.c"] = "int attn_newthing(void) { return 1; }\n",
      ["src/core/misc/other.h"] = "int attn_other(void);\n",
      ["src/core/base/base.h"] = "int attn_base(void);\n",
    }, "no room: src/core/newthing.c", "no room: src/core/misc/other.h")
  end)

  it("refuses an include of another room's own header, not of its door", function()
    local out = expect(1, {
      ["src/core/kernels/kernels.h"] = "int attn_k(void);\n",
      ["src/core/kernels/vmath.h"] = "int attn_v(void);\n",
      ["src/core/kernels/tiles.h"] = '#include "vmath.h"\n#include "kernels.h"\n',
      ["src/core/ops/ops.h"] = '#include "kernels/kernels.h"\n#include "kernels/vmath.h"\nint attn_o(void);\n',
    }, "private header: src/core/ops/ops.h %-> src/core/kernels/vmath.h")
    assert.not_matches("kernels/kernels.h %(", out)
    assert.not_matches("tiles.h %->", out)
    assert.matches("1 problem\n", out)
  end)

  it("refuses an include up or sideways between rooms", function()
    expect(1, {
      ["src/core/io/io.h"] = "int attn_io(void);\n",
      ["src/core/attention/attention.h"] = '#include "io/io.h"\n',
      ["src/core/base/base.h"] = '#include "attention/attention.h"\n',
    }, "up or sideways: src/core/attention/attention.h %-> src/core/io/io.h %(include", "up or sideways: src/core/base/base.h %-> src/core/attention/attention.h %(include")
  end)
end)
