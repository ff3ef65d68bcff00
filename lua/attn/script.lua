-- SPDX-License-Identifier: MIT

--- attn.script: command lines and output folders for scripts.
-- The experiments under scripts/ share what used to open each of them: a
-- loop over the arguments, a usage line on stderr with status 2 for a bad
-- one, and `mkdir -p` of the folder the pictures go to.
--
--     local S = require "attn.script"
--     local opts = S.args(arg, {out = "out/names", steps = 2000, quick = false,
--                               seed = S.int(42, 0), data = S.str()}, USAGE)
--     S.outdir(opts.out)
--
-- The option table names each `--name` and gives its default, whose type
-- says what the option takes: `false` a flag (`--quick`), a string a value
-- (`--out DIR`), an integer a positive integer (`--steps N`).  `S.int` and
-- `S.str` declare an integer with another lower bound or an option
-- without a default.  Names in the table's array part take positional
-- arguments, in order (`{"dir", dir = "spec/fixtures/bert"}`).
-- `-h` and `--help` print the usage line and exit with status 0.
-- @module attn.script
local S = {}

local INT, STR = {}, {}

--- An integer option: the option name followed by an integer N >= min.
-- @tparam ?integer default the value when the option is absent (nil: absent)
-- @tparam[opt=1] integer min the smallest value accepted
-- @treturn table the option's declaration, for S.args and S.parse
-- @usage
-- local S = require "attn.script"
-- local opts = S.parse({"--seed", "0"}, {seed = S.int(42, 0)})   -- an integer >= 0, default 42
-- print(opts.seed)                                       -- 0
function S.int(default, min)
  local d = type(default) == "number" and math.tointeger(default) or nil
  if default ~= nil and d == nil then
    error("attn.script.int: default must be an integer or nil (got " .. tostring(default) .. ")", 2)
  end
  local m = type(min) == "number" and math.tointeger(min) or nil
  if min ~= nil and m == nil then
    error("attn.script.int: min must be an integer (got " .. tostring(min) .. ")", 2)
  end
  return setmetatable({default = d, min = m or 1}, INT)
end

--- A string option without a default: the option name followed by a value;
-- nil when the option is absent.
-- @treturn table the option's declaration, for S.args and S.parse
-- @usage
-- local S = require "attn.script"
-- local opts = S.parse({"--data", "names.txt"}, {data = S.str()})   -- a value without a default
-- print(opts.data)
function S.str()
  return setmetatable({}, STR)
end

local function kind_of(name, v)
  local mt = getmetatable(v)
  if mt == INT or mt == STR then return v end
  if v == false then return "flag" end
  if type(v) == "string" then return setmetatable({default = v}, STR) end
  if math.type(v) == "integer" and v >= 1 then return setmetatable({default = v, min = 1}, INT) end
  error(("attn.script.parse: option '%s' has a default of type %s; use false, a string, a positive integer, "
    .. "S.int or S.str"):format(name, math.type(v) or type(v)), 3)
end

local function int_words(min)
  if min == 1 then return "a positive integer" end
  if min == 0 then return "a non-negative integer" end
  return "an integer >= " .. min
end

--- Reads a command line without side effects.
-- @tparam table argv the arguments (`arg` or `{...}`; entries 1..n are read)
-- @tparam table spec the options: name = default or declaration (see the module)
-- @treturn ?table the options, defaults filled in; nil with no message when
--   `-h` or `--help` was given
-- @treturn ?string on a bad command line, what is wrong with it
-- @usage
-- local S = require "attn.script"
-- local opts, err = S.parse({"--steps", "-3"}, {steps = 10})
-- print(opts, err)                                       -- nil and what is wrong
function S.parse(argv, spec)
  if type(argv) ~= "table" then error("attn.script.parse: argv must be a table (got " .. type(argv) .. ")", 2) end
  if type(spec) ~= "table" then error("attn.script.parse: spec must be a table (got " .. type(spec) .. ")", 2) end
  local kinds, opts, positional = {}, {}, {}
  for name, v in pairs(spec) do
    if math.type(name) == "integer" then
      if type(v) ~= "string" then
        error("attn.script.parse: positional entry " .. name .. " of spec must be an option name", 2)
      end
      positional[name] = v
    elseif type(name) == "string" then
      local k = kind_of(name, v)
      kinds[name] = k
      if k == "flag" then opts[name] = false else opts[name] = k.default end
    end
  end
  local npos, i = 0, 1
  while argv[i] ~= nil do
    local a = argv[i]
    if type(a) ~= "string" then
      error(("attn.script.parse: argument %d must be a string (got %s)"):format(i, type(a)), 2)
    end
    local name = a:match("^%-%-(.+)$")
    if a == "-h" or a == "--help" then
      return nil
    elseif name then
      local k = kinds[name]
      if k == nil then return nil, "unknown option " .. a end
      if k == "flag" then
        opts[name] = true
      else
        local v = argv[i + 1]
        if v == nil then return nil, a .. " needs a value" end
        if getmetatable(k) == INT then
          local n = math.tointeger(tonumber(v))
          if n == nil or n < k.min then return nil, ("%s needs %s (got %s)"):format(a, int_words(k.min), v) end
          v = n
        end
        opts[name] = v
        i = i + 1
      end
    else
      npos = npos + 1
      local pname = positional[npos]
      if pname == nil then return nil, "unexpected argument " .. a end
      opts[pname] = a
    end
    i = i + 1
  end
  return opts
end

--- Writes msg and the usage line to stderr and exits with status 2.
-- @tparam string msg what is wrong
-- @tparam string usage the script's usage line
-- @usage
-- local S = require "attn.script"
-- local usage = "usage: train.lua [--steps N]"
-- local opts, err = S.parse({"--steps", "100"}, {steps = 10})
-- if not opts then S.fail(err, usage) end               -- on bad arguments: both lines to stderr, exit 2
function S.fail(msg, usage)
  io.stderr:write(tostring(msg), "\n", tostring(usage), "\n")
  os.exit(2)
end

--- Reads a script's command line with S.parse and acts on the outcome.
-- A help flag (-h or --help) prints the usage line and exits with status 0;
-- a bad command line goes to S.fail (status 2).
-- @tparam table argv the arguments (`arg` or `{...}`)
-- @tparam table spec the options: name = default or declaration (see the module)
-- @tparam string usage the usage line
-- @treturn table the options, defaults filled in
-- @usage
-- local S = require "attn.script"
-- local opts = S.args({"--steps", "100", "--quick"}, {steps = 2000, quick = false, out = "out/run"}, "usage: x.lua")
-- print(opts.steps, opts.quick, opts.out)                -- 100 true out/run
function S.args(argv, spec, usage)
  local opts, err = S.parse(argv, spec)
  if opts then return opts end
  if err then S.fail(err, usage) end
  print(usage)
  os.exit(0)
end

--- Creates a folder and its parents if they do not exist (`mkdir -p`).
-- @tparam string path the folder
-- @treturn string path
-- @usage
-- local S = require "attn.script"
-- local dir = S.outdir(os.tmpname() .. ".d/pictures")    -- mkdir -p; returns the path
-- print(dir)                                            -- /tmp/lua_XXXXXX.d/pictures
-- os.remove(dir); os.remove(dir:match("^(.*)/"))
function S.outdir(path)
  if type(path) ~= "string" or path == "" then
    error("attn.script.outdir: path must be a non-empty string (got " .. tostring(path) .. ")", 2)
  end
  local ok = os.execute("mkdir -p '" .. path:gsub("'", [['\'']]) .. "'")
  if not ok then error("attn.script.outdir: cannot create '" .. path .. "'", 2) end
  return path
end

-- attn-only helpers (attn/signature.lua)
require("attn.signature").declare(S, "script.", {
  int = "default=nil, min=1", str = false, parse = false, fail = false, args = false, outdir = false,
})

return S
