-- SPDX-License-Identifier: MIT
--- Checks attn's layering: no import runs back up a floor and no files
-- import each other in a circle.
--
--   lua5.4 scripts/check_layers.lua [BUILD_DIR]     (default: build)
--
-- Three kinds of edges between files are read:
--   include   #include "..." in src/ (resolved beside the file, then
--             src/core/, then src/)
--   call      a global symbol one object file uses and another defines
--             (nm over BUILD_DIR's objects; skipped, and said so, when
--             there is no build)
--   require   require "attn..." in lua/attn
-- Rooms, lowest floor first (a file may import its own room or a lower
-- floor, never a higher one or a room beside it on the same floor):
--   0 src/attn.h                   the public C API (attn_lua.h just above it)
--   1 src/core                     tensors, autograd, kernels: one room per
--                                  folder, each on its own sub-floor
--     1.0 src/core/base       error messages, allocation, budgets, deadlines, threads
--     1.1 src/core/kernels    ISA dispatch, SIMD kernels, BLAS, SDPA scratch
--     1.2 src/core/tensor     storage, tensor lifetime, creation, raw copies
--     1.3 src/core/autograd   records and nodes, the recorders (by formula id)
--     1.4 src/core/ops        forward ops (they record themselves), views
--     1.5 src/core/attention  scaled dot-product attention (fused, math path)
--     1.5 src/core/io         weight files, printing
--     1.6 src/core/backward   backward formulas (grad_*.c: they call the ops)
--                             and the engine (walks the graph, accumulates)
--     Each room has one door, the header named after its folder
--     (src/core/ops/ops.h): another room may include that header only; the
--     room's other headers are its own.  A file in src/core outside these
--     folders is an error (place it in a room, or add the room to core_rooms).
--   2 src/dist, src/plot           distribution, drawing (over the core)
--   3 src/lua                      the Lua binding (argument conversion)
--   4 src/host                     embedding API (over the binding)
--   5 src/cli, src/examples        programs
-- The Lua package lua/attn is its own house over the binding (attn.core):
--   6   lua/attn and its folders   the framework: tensor helpers (ops/), nn (nn/),
--       but app/                   F, optim, data, dist, init, gradcheck,
--                                  attention (attention/)
--   6.5 lua/attn/app               applications: text, bert, seq2seq, plot, viz
--   7   lua:door                   the names users require: init.lua, nn.lua
--                                  and the aliases listed in lua_doors
-- so the framework never requires an application, and no file requires a
-- door; its files must not require each other in a circle.
-- Prints every bad edge and circle; exits 1 if there is one.

local build = arg[1] or "build"

local floors = {
  ["src/attn.h"] = 0, ["src/attn_lua.h"] = 0.5,
  ["src/core"] = 1, ["src/dist"] = 2, ["src/plot"] = 2, ["src/lua"] = 3,
  ["src/host"] = 4, ["src/cli"] = 5, ["src/examples"] = 5,
  ["lua/attn"] = 6, ["lua/attn/app"] = 6.5, ["lua:door"] = 7,
}
-- lua/attn's doors: the aggregators (attn, attn.nn) and the names of the
-- applications kept for `require "attn.bert"` (each returns attn.app.<name>).
local lua_doors = {}
for _, name in ipairs({"init", "nn", "bert", "text", "seq2seq", "plot", "viz"}) do
  lua_doors["lua/attn/" .. name .. ".lua"] = true
end

-- src/core's rooms (folders), lowest sub-floor first: a file may include
-- or call its own room or a room on a lower sub-floor, never one beside it.
local core_rooms = {
  {"base", 1.0}, {"kernels", 1.1}, {"tensor", 1.2}, {"autograd", 1.3}, {"ops", 1.4},
  {"attention", 1.5}, {"io", 1.5}, {"backward", 1.6},
}
local doors = {} -- room -> its door header
for _, r in ipairs(core_rooms) do
  local room = "src/core/" .. r[1]
  floors[room] = r[2]
  doors[room] = room .. "/" .. r[1] .. ".h"
end
local unplaced = {} -- src/core files outside the rooms

local function room_of(path)
  if floors[path] then return path end
  if lua_doors[path] then return "lua:door" end
  -- the framework's folders (lua/attn/nn, lua/attn/attention): pieces of attn.nn, attn.attention
  if path:match("^lua/attn/[%w_]+/[^/]+%.lua$") and not path:match("^lua/attn/app/") then return "lua/attn" end
  local dir = path:match("^(.*)/[^/]+$")
  if dir == "src/core" or (dir and dir:match("^src/core/") and not floors[dir]) then
    unplaced[path] = true
    return nil
  end
  return floors[dir] and dir or nil
end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function lines_of(cmd)
  local p = assert(io.popen(cmd))
  local out = {}
  for l in p:lines() do out[#out + 1] = l end
  p:close()
  return out
end

-- files ---------------------------------------------------------------------
local files = {}
for _, l in ipairs(lines_of("git ls-files 'src/*.c' 'src/*.h' 'lua/attn/*.lua' 2>/dev/null")) do
  if room_of(l) then files[#files + 1] = l end
end
if #files == 0 then
  io.stderr:write("check_layers: no files found (run it from the repository root)\n")
  os.exit(2)
end
local is_file = {}
for _, f in ipairs(files) do is_file[f] = true end

local edges = {} -- edges[a][b] = kind
local private = {} -- includes of another core room's own headers
local function add_edge(a, b, kind)
  if a == b then return end
  edges[a] = edges[a] or {}
  edges[a][b] = edges[a][b] or kind
end

-- includes ------------------------------------------------------------------
for _, f in ipairs(files) do
  if f:match("%.[ch]$") then
    local dir = f:match("^(.*)/[^/]+$")
    for inc in (read(f) or ""):gmatch('#%s*include%s*"([^"]+)"') do
      local target
      for _, base in ipairs({ dir, "src/core", "src" }) do
        local p = (base .. "/" .. inc):gsub("[^/]+/%.%./", "")
        if is_file[p] then target = p break end
      end
      if target then
        add_edge(f, target, "include")
        local rf, rt = room_of(f), room_of(target)
        if doors[rt] and rf ~= rt and target ~= doors[rt] then private[#private + 1] = { f, target, rt } end
      end
    end
  end
end

-- calls (nm over the build's objects) ----------------------------------------
local objects = lines_of("find '" .. build .. "/CMakeFiles' -name '*.c.o' 2>/dev/null")
local defs, uses = {}, {}
local nobj = 0
for _, o in ipairs(objects) do
  local src = o:match("%.dir/(src/.-%.c)%.o$")
  if src and is_file[src] and not uses[src] then
    nobj = nobj + 1
    uses[src] = {}
    for _, l in ipairs(lines_of("nm -g '" .. o .. "' 2>/dev/null")) do
      local kind, sym = l:match("^%x*%s+(%a)%s+(%S+)$")
      if kind == "U" then
        uses[src][#uses[src] + 1] = sym
      elseif kind and kind ~= "w" and kind ~= "v" then
        defs[sym] = defs[sym] or {}
        defs[sym][#defs[sym] + 1] = src
      end
    end
  end
end
if nobj == 0 then
  print("check_layers: no object files under " .. build .. "/CMakeFiles: calls between files not checked")
end
for src, list in pairs(uses) do
  for _, sym in ipairs(list) do
    for _, d in ipairs(defs[sym] or {}) do add_edge(src, d, "call") end
  end
end

-- requires ------------------------------------------------------------------
local function module_file(name)
  if name == "attn" then return "lua/attn/init.lua" end
  local sub = name:match("^attn%.([%w_.]+)$")
  return sub and "lua/attn/" .. sub:gsub("%.", "/") .. ".lua" or nil
end
for _, f in ipairs(files) do
  if f:match("%.lua$") then
    local s = read(f) or ""
    s = s:gsub("%-%-%[(=*)%[.-%]%1%]", ""):gsub("%-%-[^\n]*", "") -- comments
    local pattern = "require%s*%(?%s*[\"']([%w_.]+)[\"']"
    -- require(name) with a computed name: every "attn..." string of the
    -- file may be one, so each counts as required
    if s:find("require%s*%(%s*[%a_]") then pattern = "[\"'](attn[%w_.]*)[\"']" end
    for name in s:gmatch(pattern) do
      local target = module_file(name)
      if target and is_file[target] then add_edge(f, target, "require") end
    end
  end
end

-- checks --------------------------------------------------------------------
local bad = 0
local nedges = 0
local unplaced_list = {}
for f in pairs(unplaced) do unplaced_list[#unplaced_list + 1] = f end
table.sort(unplaced_list)
for _, f in ipairs(unplaced_list) do
  bad = bad + 1
  local names = {}
  for _, r in ipairs(core_rooms) do names[#names + 1] = r[1] end
  print(("no room: %s is outside src/core's rooms (move it into one: %s; or add its folder to core_rooms)"):format(f,
    table.concat(names, ", ")))
end
table.sort(private, function(x, y) return x[1] .. x[2] < y[1] .. y[2] end)
for _, p in ipairs(private) do
  bad = bad + 1
  print(("private header: %s -> %s (%s's own header; include its door, %s)"):format(p[1], p[2], p[3], doors[p[3]]))
end
local sorted_files = {}
for _, f in ipairs(files) do sorted_files[#sorted_files + 1] = f end
table.sort(sorted_files)

for _, a in ipairs(sorted_files) do
  local targets = {}
  for b in pairs(edges[a] or {}) do targets[#targets + 1] = b end
  table.sort(targets)
  for _, b in ipairs(targets) do
    nedges = nedges + 1
    local ra, rb = room_of(a), room_of(b)
    local fa, fb = floors[ra], floors[rb]
    if ra ~= rb and (fb > fa or fb == fa) then
      bad = bad + 1
      print(("up or sideways: %s -> %s (%s; %s is floor %g, %s floor %g)"):format(a, b, edges[a][b], ra, fa, rb, fb))
    end
  end
end

-- circles: strongly connected components (Tarjan), iterative
local index, low, on, stack, counter = {}, {}, {}, {}, 0
local circles = {}
local function strongconnect(v0)
  local work = { { v0, nil } }
  while #work > 0 do
    local top = work[#work]
    local v = top[1]
    if not index[v] then
      counter = counter + 1
      index[v], low[v] = counter, counter
      stack[#stack + 1] = v
      on[v] = true
      local succ = {}
      for w in pairs(edges[v] or {}) do succ[#succ + 1] = w end
      table.sort(succ)
      top[2], top[3] = succ, 0
    end
    top[3] = top[3] + 1
    local w = top[2][top[3]]
    if w then
      if not index[w] then
        work[#work + 1] = { w }
      elseif on[w] then
        low[v] = math.min(low[v], index[w])
      end
    else
      work[#work] = nil
      if #work > 0 then
        local parent = work[#work][1]
        low[parent] = math.min(low[parent], low[v])
      end
      if low[v] == index[v] then
        local comp = {}
        repeat
          local w2 = table.remove(stack)
          on[w2] = false
          comp[#comp + 1] = w2
        until w2 == v
        if #comp > 1 then
          table.sort(comp)
          circles[#circles + 1] = comp
        end
      end
    end
  end
end
for _, f in ipairs(sorted_files) do
  if not index[f] then strongconnect(f) end
end
for _, comp in ipairs(circles) do
  bad = bad + 1
  local set = {}
  for _, f in ipairs(comp) do set[f] = true end
  print(("circle of %d files:"):format(#comp))
  for _, a in ipairs(comp) do
    local tos = {}
    for b, kind in pairs(edges[a] or {}) do
      if set[b] then tos[#tos + 1] = b .. " (" .. kind .. ")" end
    end
    table.sort(tos)
    print("  " .. a .. " -> " .. table.concat(tos, ", "))
  end
end

print(("check_layers: %d files, %d edges (%d object files read), %d problem%s"):format(#files, nedges, nobj, bad,
  bad == 1 and "" or "s"))
os.exit(bad == 0 and 0 or 1)
