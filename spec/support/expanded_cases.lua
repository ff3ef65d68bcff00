-- SPDX-License-Identifier: MIT
-- Every op on a 2^40-element expanded (stride-0) input, for
-- spec/c/test_host_expanded.c: such an input costs no memory, so an op
-- whose work it sets (a count, a reduction, a search) is bound only by the
-- time budget, and must poll it (issue 27).
--
-- The C test loads this chunk into a sandboxed state and calls
--   plan()       -> a list of case descriptors (run in a state without a
--                   time budget: it probes each function on small twins)
--   missing()    -> names of public functions with neither a case nor an
--                   exclusion (a new op must be catalogued here)
--   run(desc)    -> runs one case on the big inputs (in a state with a 1 s
--                   budget; errors propagate, so the host sees the status)
--
-- Cases are found by probing: for every tensor method, attn.* function and
-- attn.F function, the first (input kind, argument pattern) below that
-- succeeds on the small twin of the input is run on the big one.  A
-- function no pattern fits has an explicit case (EXPLICIT) or a reason to
-- be left out (EXCLUDED).
local attn = require "attn"
local F = attn.F

local BIG, SMALL = 2 ^ 40, 8

-- input kinds: the same values and layout in a big and a small form
local KINDS = {
  {"f1", function(n) return attn.ones(1):expand(n) end},
  {"f2", function(n) local s = n == BIG and 2 ^ 20 or 4 return attn.ones(1, 1):expand(s, s) end},
  {"b1", function(n) return attn.ones(1, {dtype = "bool"}):expand(n) end},
  {"i1", function(n) return attn.ones(1, {dtype = "int64"}):expand(n) end},
}
local KIND = {}
for _, k in ipairs(KINDS) do KIND[k[1]] = k[2] end

-- argument patterns after the input (x: the input itself again)
local PATTERNS = {
  function() return {} end,
  function() return {1} end,
  function() return {-1} end,
  function(x) return {x} end,
  function() return {1, true} end,
  function() return {0.5} end,
  function() return {1, 1} end,
  function(x) return {x, x} end,
  function() return {2} end,
}

-- Functions that take no tensor whose size sets their work, each with why.
local EXCLUDED = {
  -- creation and random state: sized by their arguments, charged to the memory budget
  zeros = "creation", ones = "creation", empty = "creation", full = "creation", rand = "creation",
  randn = "creation", randint = "creation", randperm = "creation", arange = "creation",
  linspace = "creation", eye = "creation", tensor = "creation", from_table = "creation",
  tril_indices = "creation", triu_indices = "creation", Generator = "object",
  manual_seed = "random state", seed = "random state", initial_seed = "random state",
  get_rng_state = "random state", set_rng_state = "random state",
  -- process and state queries
  info = "query", get_num_threads = "query", set_num_threads = "process setting",
  set_isa = "process setting", debug_counts = "query", is_tensor = "query",
  is_grad_enabled = "query", set_grad_enabled = "mode", no_grad = "mode", enable_grad = "mode",
  dtype = "query", is_floating_point = "query",
  causal_mask = "creation", item = "one element", retain_grad = "a flag", narrow = "a view",
  backward = "a graph: its work is the forward's",
  -- files (refused in the sandbox)
  save = "file", load = "file", safetensors_info = "file",
  Size = "creation: a shape from its sizes",
  cuda = "refused at once: attn has no cuda device",
}

-- Explicit cases: the known offenders of issue 27 and operands other than
-- the first that set the work.
local EXPLICIT = {
  ["index by mask"] = function(B) return attn.ones(1):expand(B:size(1))[B] end,
  -- the target cannot own 2^40 elements: an expanded one (refused or stopped)
  ["setitem by mask"] = function(B) local y = attn.zeros(1):expand(B:size(1)) y[B] = 1 end,
  ["coroutine masked_select"] = function(B)
    local co = coroutine.wrap(function() return attn.ones(1):masked_select(B) end)
    return co()
  end,
  ["masked_select by a big mask"] = function(B) return attn.ones(1):masked_select(B) end,
  ["nonzero"] = function(B) return B:nonzero() end,
  ["embedding of expanded ids"] = function(_, I) return attn.embedding(attn.ones(3, 2), I) end,
  ["index_select of expanded ids"] = function(_, I) return attn.ones(3):index_select(1, I) end,
  ["cross_entropy of expanded rows"] = function()
    local x = attn.ones(1, 3):expand(2 ^ 38, 3)
    return F.cross_entropy(x, attn.ones(1, {dtype = "int64"}):expand(2 ^ 38))
  end,
  ["sum to a scalar"] = function(_, _, F1) return F1:sum() end,
  ["max over a dim"] = function() return attn.ones(1, 3):expand(2 ^ 38, 3):max(1) end,
  ["any"] = function(B) return B:any() end,
  ["all"] = function(B) return B:all() end,
  ["sort"] = function(_, _, F1) return F1:sort() end,
  ["topk"] = function(_, _, F1) return F1:topk(2) end,
  ["argmax"] = function(_, _, F1) return F1:argmax() end,
  ["tostring"] = function(_, _, F1) return tostring(F1) end,
  -- index operands that set the work (the target is small)
  ["gather"] = function(_, I) return attn.ones(3):gather(1, I) end,
  ["scatter"] = function(_, I, F1) return attn.zeros(3):scatter(1, I, F1) end,
  ["scatter_add"] = function(_, I, F1) return attn.zeros(3):scatter_add(1, I, F1) end,
  ["scatter_reduce"] = function(_, I, F1) return attn.zeros(3):scatter_reduce(1, I, F1, "amax") end,
  ["scatter_add_"] = function(_, I, F1) return attn.zeros(3):scatter_add_(1, I, F1) end,
  ["index_add"] = function(_, I, F1) return attn.zeros(3):index_add(1, I, F1) end,
  ["index_add_"] = function(_, I, F1) return attn.zeros(3):index_add_(1, I, F1) end,
  ["index_copy"] = function(_, I, F1) return attn.zeros(3):index_copy(1, I, F1) end,
  ["index_fill"] = function(_, I) return attn.zeros(3):index_fill(1, I, 2) end,
  ["index_fill_"] = function(_, I) return attn.zeros(3):index_fill_(1, I, 2) end,
  ["masked_fill_ by a big mask"] = function(B) return attn.zeros(1):expand(B:size(1)):clone():masked_fill_(B, 1) end,
  ["bmm"] = function() local x = attn.ones(1, 1, 1):expand(2 ^ 38, 1, 1) return x:bmm(x) end,
  ["baddbmm"] = function() local x = attn.ones(1, 1, 1):expand(2 ^ 38, 1, 1) return attn.baddbmm(x, x, x) end,
  ["addbmm"] = function() local x = attn.ones(1, 1, 1):expand(2 ^ 38, 1, 1) return attn.addbmm(x[1], x, x) end,
  ["cat"] = function(_, _, F1) return attn.cat({F1, F1}) end,
  ["stack"] = function(_, _, F1) return attn.stack({F1, F1}) end,
  ["hstack"] = function(_, _, F1) return attn.hstack({F1, F1}) end,
  ["vstack"] = function(_, _, F1) return attn.vstack({F1, F1}) end,
  ["einsum"] = function(_, _, F1) return attn.einsum("i->", F1) end,
  ["layer_norm"] = function() return F.layer_norm(attn.ones(1, 4):expand(2 ^ 38, 4), {4}) end,
  ["pad"] = function(_, _, F1) return F.pad(F1, {1, 1}) end,
  ["conv1d"] = function() return F.conv1d(attn.ones(1, 1, 1):expand(1, 1, 2 ^ 40), attn.ones(1, 1, 3)) end,
  ["combine_heads"] = function() return F.combine_heads(attn.ones(1, 1, 1, 1):expand(2 ^ 10, 2 ^ 10, 2 ^ 10, 2 ^ 10)) end,
}
local REQUIRED_LIMIT = {"index by mask", "coroutine masked_select",
                        "masked_select by a big mask", "nonzero"}

local function public(t)
  local names = {}
  for k, v in pairs(t) do
    if type(k) == "string" and type(v) == "function" and k:sub(1, 1) ~= "_" then names[#names + 1] = k end
  end
  table.sort(names)
  return names
end

local TABLES = {
  m = function() return attn._methods end,
  a = function() return attn end,
  f = function() return F end,
}

local function call(where, name, kind, pat, n)
  local x = KIND[kind](n)
  local args = PATTERNS[pat](x)
  local fn = TABLES[where]()[name]
  if where == "m" then return fn(x, table.unpack(args)) end
  return fn(x, table.unpack(args))
end

local M = {}

function M.plan()
  local out, seen = {}, {}
  for _, where in ipairs({"m", "a", "f"}) do
    for _, name in ipairs(public(TABLES[where]())) do
      local fn = TABLES[where]()[name]
      if not EXCLUDED[name] and not seen[fn] then
        local found
        for _, k in ipairs(KINDS) do
          for p = 1, #PATTERNS do
            if pcall(call, where, name, k[1], p, SMALL) then
              found = ("%s|%s|%s|%d"):format(where, name, k[1], p)
              break
            end
          end
          if found then break end
        end
        if found then
          out[#out + 1] = found
          seen[fn] = true
        end
      end
    end
  end
  local names = {}
  for k in pairs(EXPLICIT) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do out[#out + 1] = "x|" .. k end
  return table.concat(out, "\n")
end

-- Public functions with no probed case, no explicit case and no exclusion.
function M.missing()
  local planned = {}
  for line in M.plan():gmatch("[^\n]+") do
    local where, name = line:match("^(%a)|([^|]+)")
    planned[where .. "." .. name] = true
  end
  local miss, fns = {}, {}
  for _, where in ipairs({"m", "a", "f"}) do
    for _, name in ipairs(public(TABLES[where]())) do
      local fn = TABLES[where]()[name]
      if planned[where .. "." .. name] then fns[fn] = true end
    end
  end
  for _, where in ipairs({"m", "a", "f"}) do
    for _, name in ipairs(public(TABLES[where]())) do
      local fn = TABLES[where]()[name]
      -- an in-place op's work is set by its target, which must own its
      -- memory (an expanded target is refused); those whose index or mask
      -- operand sets the work have explicit cases
      local inplace = name:sub(-1) == "_"
      if not planned[where .. "." .. name] and not fns[fn] and not EXCLUDED[name] and not EXPLICIT[name]
        and not inplace then
        miss[#miss + 1] = where .. "." .. name
      end
    end
  end
  return table.concat(miss, " ")
end

function M.required() return table.concat(REQUIRED_LIMIT, "\n") end

function M.run(desc)
  local where, rest = desc:match("^(%a)|(.*)$")
  if where == "x" then
    return EXPLICIT[rest](KIND.b1(BIG), KIND.i1(BIG), KIND.f1(BIG))
  end
  local name, kind, pat = rest:match("^([^|]+)|([^|]+)|(%d+)$")
  return call(where, name, kind, tonumber(pat), BIG)
end

return M
