-- SPDX-License-Identifier: MIT
-- Borrowed tensors closed under a running call (issue 14, the class, not
-- just the reproducers).  Every C function of the binding (attn.core and
-- the tensor methods) and every function of the attn module is called with
-- tensor arguments and then an argument whose metamethods close those
-- tensors (an options table's __index, a list whose entries are converted,
-- finalizers started by the allocations the call makes).  Each call may
-- fail with a Lua error, but must not touch freed memory: under ASan
-- (scripts/sanitize.sh runs this spec) a use-after-free aborts the run,
-- and in normal builds the pins are checked directly: a tensor closed
-- mid-call keeps its storage alive until the call ends.
local attn = require "attn"

-- Functions that would block, print a lot or touch files.
local SKIP = { set_num_threads = true, save = true, load = true, safetensors_info = true, save_npy = true,
  load_npy = true, save_npz = true, load_npz = true, _isatty = true, manual_seed = true, seed = true }

local function churn()
  local junk = {}
  for i = 1, 8 do junk[i] = attn.randn(33, 17) end
  return junk
end

-- Fresh arguments and a closer that closes them when Lua code runs.
local function setup(kind)
  local xs = { attn.randn(4, 4), attn.randn(4, 4), attn.randn(4, 4) }
  local function close_all()
    for _, x in ipairs(xs) do
      pcall(function() local guard <close> = x end)
    end
    churn()
  end
  local closer
  if kind == "options" then
    closer = setmetatable({}, { __index = function() close_all() return nil end })
  elseif kind == "list" then
    -- a list whose later entries are tables (converted: allocations), with
    -- finalizers pending that close the tensors already borrowed
    closer = { xs[1], { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, xs[2] }
    for _ = 1, 4 do setmetatable({}, { __gc = close_all }) end
  else
    closer = setmetatable({}, { __index = function() close_all() return nil end,
      __len = function() close_all() return 0 end, __call = function() close_all() end })
  end
  return xs, closer
end

local function functions()
  local list = {}
  local seen = {}
  local function add(name, f)
    if type(f) == "function" and not seen[f] and not SKIP[name:match("[^.:]+$")] then
      seen[f] = true
      list[#list + 1] = { name, f }
    end
  end
  for k, f in pairs(require("attn.core")) do
    if type(k) == "string" then add("attn.core." .. k, f) end
  end
  for k, f in pairs(attn._methods) do
    if type(k) == "string" then add("Tensor:" .. k, f) end
  end
  for k, f in pairs(attn) do
    if type(k) == "string" then add("attn." .. k, f) end
  end
  table.sort(list, function(a, b) return a[1] < b[1] end)
  return list
end

describe("borrowed tensors closed mid-call", function()
  it("keep their storage alive until the call ends (pins)", function()
    local q, k, v = attn.randn(1, 2, 24, 8), attn.randn(1, 2, 24, 8), attn.randn(1, 2, 24, 8)
    local want = attn.scaled_dot_product_attention(q:clone(), k:clone(), v:clone(), { is_causal = true })
    collectgarbage() -- the clones are garbage: a collection inside the call must not change the count
    local before
    local opts = setmetatable({}, { __index = function(_, key)
      if key == "is_causal" then
        before = before or attn.debug_counts().storages
        do local guard <close> = q end
        do local guard <close> = k end
        do local guard <close> = v end
        -- closed for Lua, alive for the call: no storage was freed
        assert.are.equal(before, attn.debug_counts().storages)
        churn()
        return true
      end
    end })
    local got = attn.scaled_dot_product_attention(q, k, v, opts)
    assert.are.equal(0, (got - want):abs():max():item())
    assert.has_error(function() return q + 1 end)
  end)

  local fns = functions()
  it("no binding or module function crashes (" .. #fns .. " functions, 5 argument patterns)", function()
    local calls, errors = 0, 0
    for _, entry in ipairs(fns) do
      local f = entry[2]
      for _, kind in ipairs({ "options", "list", "any" }) do
        for nargs = 0, 2 do
          if not (kind ~= "options" and nargs == 2) then
            local xs, closer = setup(kind)
            local args = {}
            for i = 1, nargs do args[i] = xs[i] end
            args[#args + 1] = closer
            calls = calls + 1
            local ok = pcall(f, table.unpack(args, 1, nargs + 1))
            if not ok then errors = errors + 1 end
          end
        end
      end
      collectgarbage()
    end
    print(("  %d calls over %d functions, %d raised (as they may)"):format(calls, #fns, errors))
    assert.is_true(calls >= 5 * #fns)
  end)
end)
