-- SPDX-License-Identifier: MIT
-- check_docs.lua: every public function of attn has an LDoc entry.
--
--   build/bin/attn scripts/check_docs.lua [--no-ldoc]
--
-- The public API is walked at run time the way spec/bad_input_spec.lua walks
-- it: every module file under lua/attn (its functions, classes and their
-- methods), then attn itself (the C functions of attn.core), the tensor
-- methods (attn._methods, named attn.Tensor.*) and the method tables of the
-- objects the API makes.  A key starting with one underscore is private.
--
-- The LDoc sources are the files config.ld names.  A function counts as
-- documented when
--   * it is a Lua function and a `---` comment block with some text stands
--     directly before the line that defines it (how LDoc attaches it), or
--   * an LDoc block names it: `@function attn.zeros`, or inside a module's
--     `@type Tensor` section `@function Tensor:abs` (docs/api/*.luadoc
--     document the C functions this way; Lua files use it for functions
--     made by a factory, e.g. `M.rank = C.rank`).
-- A C function reachable under several names (attn.abs is also t:abs) is
-- documented by one entry, which must then mention the other names: the
-- method form as `:abs(` and any other function name in full.
-- Every module file under lua/attn must open with an LDoc module comment.
--
-- scripts/docs_pending.txt lists names whose documentation is known to be
-- missing (one qualified name a line; `ldoc lua/attn/x.lua` tolerates LDoc
-- warnings in that file).  A missing name not on the list fails; so does a
-- listed name that is documented or no longer exists: the list only
-- shrinks.  When the ldoc program is installed (Debian lua-ldoc) it is also
-- run over config.ld with --fatalwarnings, into a scratch folder, and its
-- own model of the sources (ldoc --filter pl.pretty.dump) must hold an item
-- for every entry counted above, so that a comment LDoc does not attach
-- (a @local one, say) does not pass for documentation.
-- Exit status 0 when all is well, 1 otherwise.


local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function realpath(p)
  local h = io.popen("readlink -f " .. shell_quote(p) .. " 2>/dev/null")
  local r = h and h:read("l")
  if h then h:close() end
  return (r and r ~= "") and r or p
end

-- The source tree: $ATTN_SOURCE_DIR (ctest sets it), else the folder above this script.
local function script_root()
  local src = os.getenv("ATTN_SOURCE_DIR")
  if src and src ~= "" then return realpath(src) end
  local script = arg and arg[0] or "scripts/check_docs.lua"
  return realpath(realpath(script):match("^(.*)/scripts/[^/]*$") or ".")
end

local ROOT = script_root()

-- The package's modules come from this source tree (the attn program has
-- copies built in, which may be older than the files being checked).
table.insert(package.searchers, 1, function(name)
  local file = name == "attn" and "init" or name:match("^attn%.([%w_.]+)$")
  if not file or file == "core" then return nil end
  local path = ROOT .. "/lua/attn/" .. file:gsub("%.", "/") .. ".lua"
  local chunk, err = loadfile(path)
  if not chunk then return err and ("\n\t" .. err) or nil end
  return chunk, path
end)
local attn = require "attn"
-- loadfile("scripts/check_docs.lua")("--lib") returns the walk and the
-- doc-block reader instead of running the check (scripts/gen_reference.lua).
local as_library = ... == "--lib"
local run_ldoc = true
for _, a in ipairs(not as_library and arg or {}) do
  if a == "--no-ldoc" then run_ldoc = false end
end

local function lines_of(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local out = {}
  for l in f:lines() do out[#out + 1] = l end
  f:close()
  return out
end

local function list_files(dir, pattern)
  local out = {}
  local p = io.popen("find " .. shell_quote(dir) .. " -type f 2>/dev/null | sort")
  if p then
    for f in p:lines() do
      if f:match(pattern) then out[#out + 1] = f end
    end
    p:close()
  end
  return out
end

---------------------------------------------------------------------------
-- The public API
---------------------------------------------------------------------------

local function module_names()
  local out = {}
  for _, f in ipairs(list_files(ROOT .. "/lua/attn", "%.lua$")) do
    local name = f:match("/lua/attn/([%w_]+)%.lua$")
    -- base.lua and nn/*.lua build the tables of attn and attn.nn (init.lua
    -- and nn.lua aggregate on top of them): documented under those names
    if name and name ~= "init" and name ~= "base" then out[#out + 1] = name end
  end
  return out
end

-- Example objects whose method tables are not reachable from a module.
local function instance_tables()
  local nn, optim, data = require "attn.nn", require "attn.optim", require "attn.data"
  local attention, text = require "attn.attention", require "attn.text"
  local sgd = optim.SGD({nn.Parameter(attn.ones(2))}, {lr = 0.1})
  return {
    {"attn.Tensor", getmetatable(attn.ones(1))},
    {"attn.Generator", getmetatable(attn.Generator(1))},
    {"attn.data.Vocab", getmetatable(data.Vocab({"a"}))},
    {"attn.data.CharTable", getmetatable(data.CharTable({"a"}))},
    {"attn.data.Progress", getmetatable(data.progress(1, {out = io.stderr, interactive = false}))},
    {"attn.attention.KVCache", getmetatable(attention.KVCache())},
    {"attn.nn.Instance", getmetatable(nn.Identity())}, -- every module object's metatable
    {"attn.nn.Class", getmetatable(nn.Linear)},        -- every module class's metatable
    {"attn.optim.Optimizer", getmetatable(sgd)},
    {"attn.optim.LRScheduler", getmetatable(optim.StepLR(sgd, 2))},
    {"attn.text.WordPiece", getmetatable(text.WordPiece.new({"[UNK]", "a"}))},
  }
end

-- name -> function, and function -> {names}.  A table reached twice is
-- walked once, under the first name (module files first, so attn.F is
-- attn.functional and attn.init is attn.nn_init).
-- opts.user_first: walk attn before the module files, so that a table is
-- named as users reach it (attn.nn.TransformerEncoderLayer, attn.F).
local function public_api(opts)
  local names, fn_of, seen = {}, {}, {}
  local function add(name, fn)
    if fn_of[name] == fn then return end
    if fn_of[name] then -- two functions under one name: keep both
      local i = 2
      while fn_of[name .. "~" .. i] do i = i + 1 end
      name = name .. "~" .. i
    end
    fn_of[name] = fn
    names[#names + 1] = name
  end
  local function walk(prefix, t, depth)
    if seen[t] or depth > 4 then return end
    seen[t] = true
    local keys = {}
    for k in next, t do
      if type(k) == "string" then keys[#keys + 1] = k end
    end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v = rawget(t, k)
      local private = k:sub(1, 1) == "_" and k:sub(2, 2) ~= "_"
      if k == "_methods" then
        walk("attn.Tensor", v, depth + 1)
      elseif k == "__index" and type(v) == "table" then
        seen[v] = nil
        walk(prefix, v, depth + 1) -- an object's methods are its class's
      elseif not private and k ~= "super" then
        local name = prefix .. "." .. k
        if type(v) == "function" then
          add(name, attn._misuse.unwrap_method(v)) -- a method's guard stands for the method (lua/attn/base.lua)
        elseif type(v) == "table" then
          walk(name, v, depth + 1)
        end
      end
    end
  end
  -- attn itself is walked as attn, not under a module that keeps a
  -- reference to it (attn.ops holds it as M.attn)
  if opts and opts.user_first then
    -- the submodules users import, then attn (whose keys also hold the
    -- modules it loaded: attn.activation, attn.transformer, ...)
    -- attn.nn serves some names on first lookup (its classes from other
    -- files, attn.attention's): look each up so that they are raw fields
    local nn = attn.nn
    local _ = nn.utils.rnn
    for _, m in ipairs(module_names()) do
      local ok, mod = pcall(require, "attn." .. m)
      if ok and type(mod) == "table" then
        for k in pairs(mod) do
          if type(k) == "string" then _ = nn[k] end
        end
      end
    end
    for _, m in ipairs({"nn", "F", "optim", "data", "dist", "plot", "text", "bert", "attention", "seq2seq",
                        "init", "gradcheck"}) do
      local mod = attn[m]
      if type(mod) == "table" then walk("attn." .. m, mod, 1) end
    end
    walk("attn", attn, 0)
  end
  seen[attn] = true
  for _, m in ipairs(module_names()) do
    local ok, mod = pcall(require, "attn." .. m)
    if ok and type(mod) == "table" then walk("attn." .. m, mod, 1) end
  end
  seen[attn] = nil
  if not (opts and opts.user_first) then walk("attn", attn, 0) end
  for _, it in ipairs(instance_tables()) do
    seen[it[2]] = nil
    walk(it[1], it[2], 1)
  end
  local groups = {}
  for _, n in ipairs(names) do
    local fn = fn_of[n]
    groups[fn] = groups[fn] or {}
    table.insert(groups[fn], n)
  end
  return names, fn_of, groups
end

---------------------------------------------------------------------------
-- The LDoc sources
---------------------------------------------------------------------------

local function ldoc_files()
  local cfg = {}
  local chunk = loadfile(ROOT .. "/config.ld", "t", cfg)
  assert(chunk, "check_docs: cannot read config.ld in " .. ROOT)
  chunk()
  local out = {}
  local list = type(cfg.file) == "table" and cfg.file or {cfg.file}
  local excluded = {}
  for _, f in ipairs(type(cfg.file) == "table" and cfg.file.exclude or {}) do excluded[ROOT .. "/" .. f] = true end
  for _, f in ipairs(list) do
    for _, p in ipairs(list_files(ROOT .. "/" .. f, "%.lua$")) do
      if not excluded[p] then out[#out + 1] = p end
    end
    for _, p in ipairs(list_files(ROOT .. "/" .. f, "%.luadoc$")) do out[#out + 1] = p end
  end
  return out
end

-- The module a source file documents: its @module (or @submodule: a file
-- that adds to another module, as nn/module.lua to attn.nn) tag, else
-- attn.<file>.
local function default_module(path)
  local name = path:match("/lua/attn/([%w_]+)%.lua$")
  if name == "init" then return "attn" end
  -- an application's old name (lua/attn/bert.lua returns attn.app.bert, whose
  -- file documents attn.bert) is no module of its own
  local app = name and io.open(ROOT .. "/lua/attn/app/" .. name .. ".lua", "r")
  if app then
    app:close()
    return nil
  end
  name = name and ("attn." .. name) or path:match("/lua/attn/(app/[%w_]+)%.lua$")
  return name and name:gsub("^app/", "attn.app.") or nil
end

-- Doc blocks of one file: {first, last, text, tags = {{tag, value}}, code = line number of the
-- statement after the block, code_text}.
local function doc_blocks(lines)
  local blocks = {}
  local i = 1
  while i <= #lines do
    local l = lines[i]
    if l:match("^%s*%-%-%-") and not l:match("^%s*%-%-%-%-") and not l:match("^%s*%-%-%[") then
      local b = {first = i, tags = {}, text = {}}
      local j = i
      while j <= #lines and lines[j]:match("^%s*%-%-") and not lines[j]:match("^%s*%-%-%[%[") do
        local body = lines[j]:gsub("^%s*%-%-%-?%s?", "")
        local tag, value = body:match("^%s*@([%w_]+)%s*(.-)%s*$")
        if tag then b.tags[#b.tags + 1] = {tag, value} end
        b.text[#b.text + 1] = body
        j = j + 1
      end
      b.last = j - 1
      b.text = table.concat(b.text, "\n")
      local k = j
      while k <= #lines and lines[k]:match("^%s*$") do k = k + 1 end
      if k == j then -- LDoc attaches a block only to the line right after it
        b.code, b.code_text = k, lines[k]
      end
      blocks[#blocks + 1] = b
      i = j
    else
      i = i + 1
    end
  end
  return blocks
end

-- Whether a module file opens with an LDoc module comment: before the
-- first line of code, a run of comment lines whose first line starts with
-- exactly three dashes (LDoc ignores a `---` line that continues a run of
-- plain `--` comments, e.g. one right after an SPDX line: leave a blank
-- line between them).
local function has_module_doc(lines)
  local i = 1
  while i <= #lines do
    local l = lines[i]
    if l:match("^%s*$") or l:match("^#!") then
      i = i + 1
    elseif l:match("^%s*%-%-") then
      local first = l
      if first:match("^%s*%-%-%-[^%-]") and first:gsub("^%s*%-%-%-", ""):match("%S") then return true end
      while i <= #lines and lines[i]:match("^%s*%-%-") do i = i + 1 end
    else
      return false
    end
  end
  return false
end

local function has_text(b)
  local t = b.text:gsub("@[%w_]+[^\n]*", ""):gsub("%s", "")
  return #t > 0
end

-- Qualified name of an `@function NAME` entry, given the current module and @type.
local function qualify(name, module, type_name)
  name = name:gsub(":", ".")
  if name:match("^attn%.") or name == "attn" then return name end
  if type_name and not name:find(".", 1, true) then name = type_name .. "." .. name end
  if module == "attn" and name:match("^Tensor%.") then return "attn." .. name end
  return module .. "." .. name
end

local function read_docs()
  local files = ldoc_files()
  local undocumented_modules = {}
  local by_name = {}   -- qualified name -> {text, where}
  local by_line = {}   -- "path:line" -> block (the statement a block documents)
  for _, path in ipairs(files) do
    local lines = lines_of(path) or {}
    local module = default_module(path)
    if module and not has_module_doc(lines) then
      undocumented_modules[#undocumented_modules + 1] = path:sub(#ROOT + 2) .. " (" .. module .. ")"
    end
    local type_name
    for _, b in ipairs(doc_blocks(lines)) do
      local fname
      for _, t in ipairs(b.tags) do
        if t[1] == "module" or t[1] == "classmod" or t[1] == "submodule" then
          module, type_name = t[2]:match("^(%S+)"), nil
        elseif t[1] == "type" then
          type_name = t[2]:match("^(%S+)")
        elseif t[1] == "section" then
          type_name = nil
        elseif t[1] == "function" then
          fname = t[2]:match("^(%S+)")
        end
      end
      if has_text(b) then
        local where = path:sub(#ROOT + 2) .. ":" .. b.first
        if fname and module then
          by_name[qualify(fname, module, type_name)] = {text = b.text, where = where, module = module, item = fname}
        end
        -- LDoc leaves local functions out of the reference (config.ld: all = false)
        if b.code and b.code_text and not b.code_text:match("^%s*local%s") then
          b.path, b.where, b.module = path, where, module
          by_line[path .. ":" .. b.code] = b
        end
      end
    end
  end
  return by_name, by_line, undocumented_modules
end

---------------------------------------------------------------------------
-- The check
---------------------------------------------------------------------------

-- The source file and line of a Lua function, nil for a C function.
local function defined_at(fn)
  local info = debug.getinfo(fn, "S")
  if info.what ~= "Lua" or info.source:sub(1, 1) ~= "@" then return nil end
  local src = info.source:sub(2)
  -- the attn program names its package's chunks "attn/x.lua"
  if src:sub(1, 1) ~= "/" and not io.open(src, "r") and io.open(ROOT .. "/lua/" .. src, "r") then
    src = ROOT .. "/lua/" .. src
  end
  return realpath(src), info.linedefined
end

local function lua_doc_block(fn, by_line)
  local path, line = defined_at(fn)
  return path and by_line[path .. ":" .. line]
end

-- The mention an entry for one name must make of another name of the same function.
local function mentioned(text, other)
  local method = other:match("^attn%.Tensor%.([%w_]+)$")
  if method then
    if text:find(":" .. method .. "(", 1, true) then return true end
    local meta = method:match("^__(%w+)$")
    if meta and text:find("__" .. meta, 1, true) then return true end
  end
  return text:find(other, 1, true) ~= nil
end

local function check_api(by_name, by_line)
  local names, fn_of, groups = public_api()
  local missing, notes, used = {}, {}, {}
  local documented = {}
  for fn, group in pairs(groups) do
    local block = type(fn) == "function" and lua_doc_block(fn, by_line)
    local entry
    for _, n in ipairs(group) do
      if by_name[n] then entry = entry or {name = n, text = by_name[n].text, doc = by_name[n]} end
    end
    if block then
      for _, n in ipairs(group) do documented[n] = true end
      used[#used + 1] = {name = group[1], path = block.path, line = block.code, where = block.where,
        module = block.module}
    elseif entry then
      used[#used + 1] = {name = entry.name, module = entry.doc.module, item = entry.doc.item, where = entry.doc.where}
      for _, n in ipairs(group) do
        if n == entry.name or by_name[n] or mentioned(entry.text, n) then
          documented[n] = true
        else
          notes[#notes + 1] = n .. " (the entry for " .. entry.name .. " should mention it)"
        end
      end
    end
  end
  for _, n in ipairs(names) do
    if not documented[n] then missing[#missing + 1] = n end
  end
  table.sort(missing)
  local exists, where = {}, {}
  for _, n in ipairs(names) do
    exists[n] = true
    local path, line = defined_at(fn_of[n])
    where[n] = path and (path:sub(1, #ROOT + 1) == ROOT .. "/" and path:sub(#ROOT + 2) or path) .. ":" .. line or "C"
  end
  return missing, notes, exists, #names, where, used
end

local function read_pending()
  local out, order = {}, {}
  for _, l in ipairs(lines_of(ROOT .. "/scripts/docs_pending.txt") or {}) do
    local s = l:gsub("#.*$", ""):match("^%s*(.-)%s*$")
    if s ~= "" then
      out[s] = true
      order[#order + 1] = s
    end
  end
  return out, order
end

local function have_ldoc()
  local h = io.popen("command -v ldoc 2>/dev/null")
  local r = h and h:read("l")
  if h then h:close() end
  return r and r ~= ""
end

-- LDoc over config.ld into a scratch folder; its warnings as "file:line: text".
local function ldoc_warnings()
  local dir = os.tmpname()
  os.remove(dir)
  local cmd = "cd " .. shell_quote(ROOT) .. " && ldoc --fatalwarnings -d " .. shell_quote(dir) .. " . 2>&1"
  local h = io.popen(cmd)
  local out, all = {}, {}
  for l in h:lines() do
    all[#all + 1] = l
    if l:match("^%S+:%d+: ") then out[#out + 1] = l end -- file:line: warning
  end
  local ok, _, code = h:close()
  os.execute("rm -rf " .. shell_quote(dir))
  if not ok and #out == 0 then
    out[1] = "ldoc exited with status " .. tostring(code) .. ": " .. table.concat(all, " | ")
  end
  return out
end

-- LDoc's own reading of the sources (ldoc --filter pl.pretty.dump): for
-- each module, its source file and its items' names and lines.
local function ldoc_model()
  local h = io.popen("cd " .. shell_quote(ROOT) .. " && ldoc --filter pl.pretty.dump . 2>/dev/null")
  local text = h:read("a")
  h:close()
  text = text:match("^[^{]*(%b{})")
  if not text then return nil, "ldoc --filter gave no table" end
  local chunk, err = load("return " .. text:gsub("<cycle>", "false"), "=ldoc dump", "t", {})
  if not chunk then return nil, err end
  local ok, modules = pcall(chunk)
  if not ok or type(modules) ~= "table" then return nil, tostring(modules) end
  local by_module, by_file = {}, {}
  for _, m in ipairs(modules) do
    local names, lines = {}, {}
    for _, it in ipairs(type(m.items) == "table" and m.items or {}) do
      if type(it) == "table" then
        if it.name then names[it.name] = true end
        if it.lineno then lines[it.lineno] = true end
      end
    end
    local entry = {names = names, lines = lines}
    if m.name then by_module[m.name] = entry end
    if type(m.file) == "string" then by_file[realpath(m.file)] = entry end
  end
  return {by_module = by_module, by_file = by_file}
end

-- The entries check_docs counted that LDoc's reference leaves out.
local function ldoc_omissions(used)
  local model, err = ldoc_model()
  if not model then return {"cannot read LDoc's model of the sources: " .. tostring(err)} end
  local out = {}
  for _, u in ipairs(used) do
    local found
    if u.path then
      local m = model.by_file[u.path]
      found = m and m.lines[u.line]
      -- a @submodule file's items are filed under the module it adds to
      -- (nn/module.lua's under attn.nn, whose file is nn.lua)
      local mm = not found and u.module and model.by_module[u.module]
      if mm then found = mm.lines[u.line] end
    else
      local m = model.by_module[u.module]
      found = m and m.names[u.item]
    end
    if not found then out[#out + 1] = "LDoc leaves out the entry for " .. u.name .. " (" .. u.where .. ")" end
  end
  table.sort(out)
  return out
end

local function main()
  local by_name, by_line, undocumented_modules = read_docs()
  local missing, notes, exists, total, where, used = check_api(by_name, by_line)
  local pending, pending_order = read_pending()
  local failures, tolerated = {}, 0
  for _, n in ipairs(missing) do
    if pending[n] then
      tolerated = tolerated + 1
    else
      failures[#failures + 1] = "undocumented: " .. n .. " (" .. where[n] .. ")"
    end
  end
  for _, n in ipairs(notes) do failures[#failures + 1] = "alias not mentioned: " .. n end
  for _, m in ipairs(undocumented_modules) do
    failures[#failures + 1] = "no module comment (a `---` block before the code): " .. m
  end
  local missing_set = {}
  for _, n in ipairs(missing) do missing_set[n] = true end

  local ldoc_state = "not run (--no-ldoc)"
  local warned_files = {}
  if run_ldoc then
    if have_ldoc() then
      local warnings = ldoc_warnings()
      for _, w in ipairs(warnings) do
        local file = w:match("^(.-):%d+:")
        local rel = file and (file:sub(1, #ROOT + 1) == ROOT .. "/" and file:sub(#ROOT + 2) or file)
        if rel then warned_files[rel] = true end
        if not (rel and pending["ldoc " .. rel]) then failures[#failures + 1] = "ldoc: " .. w end
      end
      ldoc_state = #warnings == 0 and "ran clean" or (#warnings .. " warning(s)")
      for _, o in ipairs(ldoc_omissions(used)) do failures[#failures + 1] = o end
    else
      ldoc_state = "skipped: ldoc is not installed (Debian lua-ldoc; scripts/setup.sh --docs)"
    end
  end
  for _, p in ipairs(pending_order) do
    local file = p:match("^ldoc%s+(%S+)$")
    if file then
      if run_ldoc and have_ldoc() and not warned_files[file] then
        failures[#failures + 1] = "docs_pending.txt: LDoc no longer warns about " .. file .. "; remove the line"
      end
    elseif not exists[p] then
      failures[#failures + 1] = "docs_pending.txt: " .. p .. " is not a public function (any more); remove the line"
    elseif not missing_set[p] then
      failures[#failures + 1] = "docs_pending.txt: " .. p .. " is documented now; remove the line"
    end
  end

  print(string.format("check_docs: %d public functions, %d documented, %d pending (scripts/docs_pending.txt); ldoc %s",
    total, total - #missing, tolerated, ldoc_state))
  if #failures > 0 then
    for _, f in ipairs(failures) do print(f) end
    print(string.format("check_docs: %d problem(s)", #failures))
    return 1
  end
  return 0
end

if as_library then
  return {root = ROOT, public_api = public_api, read_docs = read_docs, lua_doc_block = lua_doc_block,
    defined_at = defined_at, mentioned = mentioned, lines_of = lines_of}
end
os.exit(main())
