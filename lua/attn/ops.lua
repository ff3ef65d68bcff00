-- SPDX-License-Identifier: MIT

--- attn.ops: tensor ops written on top of the differentiable core ops, so
-- that autograd follows them (torch 1.13 semantics, 1-based dims):
--
--   einsum(eq, a, b, ...)                 any equation torch accepts;
--                                         pairs contract as batched matmul
--   sum/mean/amax/amin/std/var over a list of dims; std/var options
--     {correction =, keepdim =, unbiased =} beside torch's positional form
--   roll(shifts, dims), diag(k), cdist(x1, x2, p), clamp(min, max) with
--   tensor bounds, repeat_interleave(repeats, dim), where(cond) with one
--   argument (= nonzero{as_tuple = true})
--   pad, cosine_similarity, normalize: exported for attn.F
--
-- Loaded by attn/init.lua, which installs each function as attn.name and
-- as the method t:name.  The C ops (sort, topk, scatter, ...) live in
-- src/lua/ops.c.
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
local M = {}

local function is_tensor(x) return M.attn.is_tensor(x) end

local function fmt_shape(s) return "[" .. table.concat(s, ",") .. "]" end

local function is_int(v) return type(v) == "number" and math.tointeger(v) ~= nil end

-- A tensor argument (tables and numbers converted).
local function as_tensor(x, fn, name, level)
  if is_tensor(x) then return x end
  local tx = type(x)
  if tx == "table" or tx == "number" then return M.attn.tensor(x) end
  error(("%s: %s must be a tensor (got %s)"):format(fn, name, tx), level + 1)
end

-- A 1-based (or negative) dim normalised to 1..nd; level points at the caller.
local function norm_dim(d, nd, fn, level, what)
  if not is_int(d) then
    error(("%s: %s must be an integer (got %s)"):format(fn, what or "dim", tostring(d)), level + 1)
  end
  local n = nd == 0 and 1 or nd
  if d == 0 or d < -n or d > n then
    error(("%s: %s %s out of range for a %d-d tensor (expected 1..%d or -%d..-1; dims are 1-based)"):format(
      fn, what or "dim", tostring(d), nd, n, n), level + 1)
  end
  d = math.tointeger(d)
  return d < 0 and d + n + 1 or d
end

-- A list of dims (a table of integers) normalised, checked for repeats and
-- returned sorted descending.
local function dim_list(x, dims, fn, level)
  local nd = x:dim()
  local seen, out = {}, {}
  for i = 1, #dims do
    local d = norm_dim(dims[i], nd, fn, level + 1)
    if seen[d] then error(("%s: dim %d appears more than once in the list"):format(fn, d), level + 1) end
    seen[d] = true
    out[#out + 1] = d
  end
  table.sort(out, function(a, b) return a > b end)
  return out, seen
end

-- Whether t is an options table ({correction = 0}) rather than a list.
local function is_opts(t)
  if type(t) ~= "table" or is_tensor(t) then return false end
  for k in pairs(t) do if type(k) == "string" then return true end end
  return false
end

local function check_opts(opts, fn, known) M.attn._misuse.check_options(fn, opts, known) end

---------------------------------------------------------------------------
-- Reductions over several dims; std/var options
-- @section reductions_over_several
---------------------------------------------------------------------------

-- r was reduced with keepdim over the dims in desc (descending): drop them.
local function drop_dims(r, desc)
  for _, d in ipairs(desc) do r = r:squeeze(d) end
  return r
end

-- Installs attn.name / t:name(dim, keepdim) that takes a list of dims as
-- well as the C function's single dim (or none), and torch's keywords in a
-- trailing options table: x:sum({dim = 2}), x:sum(2, {keepdim = true}),
-- x:mean({dim = {1, 2}, keepdim = true}).  The table is read here, not by
-- a wrapper (attn/signature.lua).  The common calls test with comparisons
-- first (a call of type() costs about 200 instructions): x:sum() calls
-- nothing before the C function, x:sum(2) one type().
local function multi_dim(name, c_fn, combine)
  local known = {"dim", "keepdim"}
  return function(x, dim, keepdim, ...)
    if (keepdim == nil or keepdim == true or keepdim == false) and (dim == nil or type(dim) ~= "table") then
      return c_fn(x, dim, keepdim, ...)
    end
    if type(dim) ~= "table" and type(keepdim) ~= "table" then return c_fn(x, dim, keepdim, ...) end -- C's checks
    x = as_tensor(x, name, "input", 2)
    if is_opts(keepdim) then -- x:sum(2, {keepdim = true})
      if select("#", ...) > 0 then error(("%s: nothing may follow the options table"):format(name), 2) end
      local opts = keepdim
      check_opts(opts, name, known)
      if opts.dim ~= nil and dim ~= nil then
        error(("%s: dim given twice (as argument 2 and in the options table)"):format(name), 2)
      end
      if opts.dim ~= nil then dim = opts.dim end
      keepdim = opts.keepdim
    elseif is_opts(dim) then -- x:sum({dim = 2, keepdim = true})
      if keepdim ~= nil or select("#", ...) > 0 then
        error(("%s: nothing may follow the options table"):format(name), 2)
      end
      local opts = dim
      check_opts(opts, name, known)
      dim, keepdim = opts.dim, opts.keepdim
    end
    if keepdim ~= nil and type(keepdim) ~= "boolean" then
      error(("%s: keepdim must be a boolean (got %s)"):format(name, type(keepdim)), 2)
    end
    if type(dim) ~= "table" or is_tensor(dim) then return c_fn(x, dim, keepdim) end
    if #dim == 0 then return c_fn(x, nil, keepdim) end -- torch: an empty list reduces every dim
    local desc = dim_list(x, dim, name, 2)
    local r = combine(x, desc)
    if not keepdim then r = drop_dims(r, desc) end
    return r
  end
end

-- Sequential keepdim reductions give torch's result for sum and mean (a
-- mean of equal-sized means is the mean).
local function sequential(c_fn)
  return function(x, desc)
    for _, d in ipairs(desc) do x = c_fn(x, d, true) end
    return x
  end
end

-- amax/amin: torch's gradient is shared equally by every element equal to
-- the result; the value is recomputed as sum(x where x == m) / count, whose
-- derivative is exactly that (a masked fill, not a product, so that
-- infinities stay finite elsewhere).
local function amax_like(name, is_min)
  return function(x, dim, keepdim)
    x = as_tensor(x, name, "input", 2)
    if keepdim ~= nil and type(keepdim) ~= "boolean" then
      error(("%s: keepdim must be a boolean (got %s)"):format(name, type(keepdim)), 2)
    end
    local desc
    if dim == nil or (type(dim) == "table" and #dim == 0) then
      desc = {}
      for d = x:dim(), 1, -1 do desc[#desc + 1] = d end
    elseif type(dim) == "table" and not is_tensor(dim) then
      desc = dim_list(x, dim, name, 2)
    else
      desc = {norm_dim(dim, x:dim(), name, 2)}
    end
    if x:numel() == 0 then error(("%s: cannot reduce an empty tensor %s"):format(name, fmt_shape(x:shape())), 2) end
    local m = x:detach()
    for _, d in ipairs(desc) do
      if x:dim() == 0 then break end
      m = (is_min and m:min(d, true) or m:max(d, true))
    end
    if not x:is_floating_point() then -- no gradient to share: the extreme itself, in x's dtype (torch)
      if not keepdim then m = drop_dims(m, desc) end
      return m
    end
    local hit = x:detach():eq(m)
    local count = hit
    local picked = x:masked_fill(hit:eq(0), 0)
    for _, d in ipairs(desc) do
      if x:dim() == 0 then break end
      picked = picked:sum(d, true)
      count = count:sum(d, true)
    end
    local r = picked / count
    if not keepdim then r = drop_dims(r, desc) end
    return r
  end
end

-- var/std: torch's forms
--   x:var()  x:var(dim [, unbiased [, keepdim]])  x:var({dims} [, unbiased [, keepdim]])
--   x:var(dim_or_dims, {correction =, keepdim =, unbiased =})  x:var({correction = 0})
local function var_like(name, c_fn)
  return function(x, dim, a, b, ...)
    local opts
    if is_opts(dim) then
      if a ~= nil or b ~= nil then error(("%s: nothing may follow the options table"):format(name), 2) end
      opts, dim = dim, nil
    elseif is_opts(a) then
      opts, a = a, nil
      if b ~= nil then error(("%s: nothing may follow the options table"):format(name), 2) end
    elseif is_opts(b) then
      opts, b = b, nil
      if select("#", ...) > 0 then error(("%s: nothing may follow the options table"):format(name), 2) end
    end
    if opts == nil and not (type(dim) == "table" and not is_tensor(dim)) then return c_fn(x, dim, a, b, ...) end
    x = as_tensor(x, name, "input", 2)
    local correction, keepdim = 1, false
    if opts then -- torch's keywords: the positional slots they name must be empty
      check_opts(opts, name, {correction = true, dim = true, keepdim = true, unbiased = true})
      local function twice(key, i)
        error(("%s: %s given twice (as argument %d and in the options table)"):format(name, key, i), 3)
      end
      if opts.correction ~= nil and (opts.unbiased ~= nil or a ~= nil) then
        error(("%s: give correction or unbiased, not both"):format(name), 2)
      end
      if opts.dim ~= nil then
        if dim ~= nil then twice("dim", 2) end
        dim = opts.dim
      end
      if opts.correction ~= nil then
        if type(opts.correction) ~= "number" then
          error(("%s: correction must be a number (got %s)"):format(name, type(opts.correction)), 2)
        end
        a = opts.correction
      elseif opts.unbiased ~= nil then
        if a ~= nil then twice("unbiased", 3) end
        if type(opts.unbiased) ~= "boolean" then
          error(("%s: unbiased must be a boolean (got %s)"):format(name, type(opts.unbiased)), 2)
        end
        a = opts.unbiased
      end
      if opts.keepdim ~= nil then
        if b ~= nil then twice("keepdim", 4) end
        b = opts.keepdim
      end
    end
    if a ~= nil then
      if type(a) == "boolean" then correction = a and 1 or 0
      elseif type(a) == "number" then correction = a
      else error(("%s: unbiased must be a boolean (got %s)"):format(name, type(a)), 2) end
    end
    if b ~= nil then
      if type(b) ~= "boolean" then error(("%s: keepdim must be a boolean (got %s)"):format(name, type(b)), 2) end
      keepdim = b
    end
    if dim == nil or (type(dim) == "table" and #dim == 0) then return c_fn(x, nil, correction, keepdim) end
    if type(dim) ~= "table" then return c_fn(x, norm_dim(dim, x:dim(), name, 2), correction, keepdim) end
    local desc, seen = dim_list(x, dim, name, 2)
    if #desc == 1 then return c_fn(x, desc[1], correction, keepdim) end
    -- the reduced dims moved to the end and flattened into one
    local nd, shape = x:dim(), x:shape()
    local perm, kept, keep_shape = {}, {}, {}
    for d = 1, nd do
      if not seen[d] then perm[#perm + 1] = d; kept[#kept + 1] = shape[d] end
      keep_shape[d] = seen[d] and 1 or shape[d]
    end
    for i = #desc, 1, -1 do perm[#perm + 1] = desc[i] end
    local flat_shape = {}
    for i, s in ipairs(kept) do flat_shape[i] = s end
    flat_shape[#flat_shape + 1] = -1
    local r = c_fn(x:permute(perm):reshape(flat_shape), -1, correction, false)
    if keepdim then r = r:reshape(keep_shape) end
    return r
  end
end

-- einsum: attn/ops/einsum.lua
M.einsum = require("attn.ops.einsum").einsum

---------------------------------------------------------------------------
-- roll, diag, cdist, clamp with tensors, repeat_interleave, where(cond)
-- @section roll_diag_cdist
---------------------------------------------------------------------------

--- roll(x, shifts, dims): shifts and dims numbers or equal-length lists;
-- without dims the flattened tensor rolls and keeps its shape.
-- @usage
-- print(attn.roll(attn.tensor({1, 2, 3, 4}), 1))                   -- tensor([4, 1, 2, 3])
function M.roll(x, shifts, dims)
  local fn = "roll"
  x = as_tensor(x, fn, "input", 2)
  if dims == nil then
    if type(shifts) ~= "number" and not (type(shifts) == "table" and #shifts == 1) then
      error(fn .. ": without dims, shifts must be one number", 2)
    end
    local s = type(shifts) == "table" and shifts[1] or shifts
    return M.roll(x:reshape(-1), s, 1):reshape(x:shape())
  end
  if type(shifts) == "number" then shifts = {shifts} end
  if type(dims) == "number" then dims = {dims} end
  if type(shifts) ~= "table" or type(dims) ~= "table" then
    error(fn .. ": shifts and dims must be numbers or lists of numbers", 2)
  end
  if #shifts ~= #dims then
    error(("%s: shifts has %d entries but dims has %d"):format(fn, #shifts, #dims), 2)
  end
  local fresh = false
  for i = 1, #dims do
    if not is_int(shifts[i]) then error(("%s: shifts[%d] must be an integer"):format(fn, i), 2) end
    local d = norm_dim(dims[i], x:dim(), fn, 2)
    local n = x:size(d)
    local s = n > 0 and math.tointeger(shifts[i]) % n or 0
    if s ~= 0 then x = M.attn.cat({x:narrow(d, n - s + 1, s), x:narrow(d, 1, n - s)}, d); fresh = true end
  end
  if not fresh then x = x:clone() end -- a new tensor, as torch's, even when nothing moved
  return x
end

--- diag(x, k = 0): a 1-d x gives the square matrix with x on diagonal k
-- (k > 0 above the main one); a 2-d x gives its diagonal k as 1-d.
-- @usage
-- print(attn.diag(attn.tensor({1.0, 2.0})))      -- a 2x2 diagonal matrix
-- print(attn.diag(attn.eye(3) * 2))              -- tensor([2., 2., 2.]): the diagonal of a matrix
function M.diag(x, k)
  local fn = "diag"
  x = as_tensor(x, fn, "input", 2)
  k = k == nil and 0 or k
  if not is_int(k) then error(fn .. ": diagonal must be an integer (got " .. tostring(k) .. ")", 2) end
  k = math.tointeger(k)
  if k > 1 << 31 or k < -(1 << 31) then error(("%s: diagonal %d is out of range"):format(fn, k), 2) end
  local r0, c0 = math.max(0, -k), math.max(0, k)
  if x:dim() == 1 then
    local n = x:size(1)
    local N = n + math.abs(k)
    -- the result first: its size check and the memory cap refuse a huge
    -- input before the position list is built (N * N could wrap)
    local z = M.attn.zeros({N, N}):reshape(-1)
    if n == 0 then return z:reshape({N, N}) end
    local pos = {}
    for i = 0, n - 1 do pos[#pos + 1] = (r0 + i) * N + (c0 + i) + 1 end
    return z:index_copy(1, pos, x):reshape({N, N})
  elseif x:dim() == 2 then
    local R, C = x:size(1), x:size(2)
    local pos = {}
    local i = 0
    while r0 + i < R and c0 + i < C do
      pos[#pos + 1] = (r0 + i) * C + (c0 + i) + 1
      i = i + 1
    end
    if #pos == 0 then return M.attn.zeros(0) end
    return x:reshape(-1):index_select(1, pos)
  end
  error(("%s: input must be 1-d or 2-d (got %s)"):format(fn, fmt_shape(x:shape())), 2)
end

-- torch's compute_mode values: they choose how torch computes, not what
local cdist_modes = {use_mm_for_euclid_dist_if_necessary = true, use_mm_for_euclid_dist = true,
  donot_use_mm_for_euclid_dist = true}

--- cdist(x1, x2, p = 2, compute_mode): x1 [..., P, M], x2 [..., R, M] ->
-- [..., P, R] of p-norm distances between rows (p = 0 counts differences,
-- math.huge the largest).  compute_mode (torch's) is checked and otherwise
-- has no effect: attn always computes the differences directly.
-- @usage
-- local a, b = attn.tensor({{0.0, 0.0}}), attn.tensor({{3.0, 4.0}, {0.0, 1.0}})
-- print(attn.cdist(a, b))                        -- tensor([[5., 1.]])
function M.cdist(x1, x2, p, compute_mode)
  local fn = "cdist"
  x1 = as_tensor(x1, fn, "x1", 2)
  x2 = as_tensor(x2, fn, "x2", 2)
  if not (x1:is_floating_point() and x2:is_floating_point()) then -- torch: floating inputs only
    error(("%s: expected floating tensors, got x1 %s and x2 %s (convert with :float())"):format(fn,
      tostring(x1.dtype):gsub("^attn%.", ""), (tostring(x2.dtype):gsub("^attn%.", ""))), 2)
  end
  if compute_mode ~= nil and not cdist_modes[compute_mode] then
    error(("%s: compute_mode must be one of 'use_mm_for_euclid_dist_if_necessary', 'use_mm_for_euclid_dist', " ..
      "'donot_use_mm_for_euclid_dist' (got %s)"):format(fn, tostring(compute_mode)), 2)
  end
  p = p == nil and 2 or p
  if type(p) ~= "number" or p < 0 or p ~= p then
    error(fn .. ": p must be a non-negative number (got " .. tostring(p) .. ")", 2)
  end
  if x1:dim() < 2 or x2:dim() < 2 then
    error(("%s: x1 %s and x2 %s must have at least 2 dims"):format(fn, fmt_shape(x1:shape()), fmt_shape(x2:shape())), 2)
  end
  if x1:size(-1) ~= x2:size(-1) then
    error(("%s: x1 %s and x2 %s must have the same size in the last dim"):format(
      fn, fmt_shape(x1:shape()), fmt_shape(x2:shape())), 2)
  end
  return (x1:unsqueeze(-2) - x2:unsqueeze(-3)):norm(p, -1)
end

-- The most slices repeat_interleave makes (its counts are read as a Lua list).
local MAX_REPEAT = 1 << 24

-- The 1-based int64 index [total] that repeats i counts[i] times, built as
-- a tensor (under the memory budget, whose refusal names the cap), not as
-- a Lua list of total entries: each i with a count starts a run; at the
-- run's start goes i minus the previous run's i, and the running sum gives
-- every position its i.
local function run_index(counts, total)
  local starts, steps, pos, prev = {}, {}, 1, 0
  for i = 1, #counts do
    local c = counts[i]
    if c > 0 then
      starts[#starts + 1], steps[#steps + 1] = pos, i - prev
      pos, prev = pos + c, i
    end
  end
  local attn = M.attn
  local marks = attn.zeros(total, {dtype = "int64"})
  marks[attn.tensor(starts, {dtype = "int64"})] = attn.tensor(steps, {dtype = "int64"}) -- starts are distinct
  return marks:cumsum(1)
end

--- repeat_interleave(x, repeats, dim, output_size): each element (slice
-- along dim) repeated; repeats a number or one count per element; without
-- dim x is flattened; output_size, if given, must be the result's size
-- along dim (torch's).  repeat_interleave(counts) alone gives 1-based indices, each
-- i repeated counts[i] times.
-- @usage
-- print(attn.repeat_interleave(attn.tensor({1, 2}), 2))           -- tensor([1, 1, 2, 2])
-- local kv = attn.randn(1, 2, 5, 4)                                -- 2 kv heads -> 4 query heads
-- print(kv:repeat_interleave(2, 2).shape)                          -- attn.Size([1, 4, 5, 4])
function M.repeat_interleave(x, repeats, dim, output_size)
  local fn = "repeat_interleave"
  if repeats == nil then
    local counts = as_tensor(x, fn, "repeats", 2)
    if counts:dim() > 1 then error(fn .. ": repeats must be 1-d", 2) end
    local total = 0
    local list = counts:dim() == 0 and {counts:item()} or counts:totable()
    for i, c in ipairs(list) do
      if not is_int(c) or c < 0 then error(("%s: repeats[%d] = %s is not a count"):format(fn, i, tostring(c)), 2) end
      total = total + c
      if total > MAX_REPEAT then error(("%s: the counts add up to more than %d"):format(fn, MAX_REPEAT), 2) end
    end
    if total == 0 then return M.attn.zeros(0) end
    return run_index(list, total):float() -- float32 ids, as before (torch: int64)
  end
  x = as_tensor(x, fn, "input", 2)
  if dim == nil then
    x = x:reshape(-1)
    dim = 1
  else
    dim = norm_dim(dim, x:dim(), fn, 2)
  end
  if x:dim() == 0 then x = x:reshape(1) end
  local n = x:size(dim)
  -- the counts are a Lua list of n entries: refuse a dim longer than the
  -- most slices before building it (an expanded input has 2^40)
  if n > MAX_REPEAT then
    error(("%s: size %d of dim %d is more than the %d slices it repeats (narrow the input)")
      :format(fn, n, dim, MAX_REPEAT), 2)
  end
  local reps
  if type(repeats) == "number" then
    reps = {}
    for i = 1, n do reps[i] = repeats end
  else
    reps = as_tensor(repeats, fn, "repeats", 2):reshape(-1):totable()
    if #reps == 1 and n ~= 1 then for i = 2, n do reps[i] = reps[1] end end
    if #reps ~= n then
      error(("%s: repeats has %d entries for size %d of dim %d"):format(fn, #reps, n, dim), 2)
    end
  end
  local total = 0
  for i = 1, n do
    local c = reps[i]
    if not is_int(c) or c < 0 then error(("%s: repeats[%d] = %s is not a count"):format(fn, i, tostring(c)), 2) end
    total = total + c
    if total > MAX_REPEAT then
      error(("%s: the result would have %s or more slices along dim %d (at most %d)"):format(
        fn, tostring(total), dim, MAX_REPEAT), 2)
    end
  end
  if output_size ~= nil and output_size ~= total then -- torch: the total, given to spare a sync
    error(("%s: output_size is %s but the repeats add up to %d"):format(fn, tostring(output_size), total), 2)
  end
  if total == 0 then
    local s = x:shape(); s[dim] = 0
    return M.attn.zeros(s, {dtype = x:dtype()})
  end
  -- The index is built as a tensor (under the memory budget, whose refusal
  -- names the cap), not as a Lua list of total entries: each slice i with a
  -- count starts a run; at the run's start goes i minus the previous run's
  -- slice, and the running sum gives every position its slice.
  return x:index_select(dim, run_index(reps, total))
end

--- clamp(x, min, max) where min or max may be tensors (broadcast): the
-- composition min(max(x, min), max), torch's result (max wins when min > max).
local function clamp_with(c_clamp, name)
  return function(x, lo, hi, ...)
    if not (is_tensor(lo) or is_tensor(hi)) then return c_clamp(x, lo, hi, ...) end
    x = as_tensor(x, name, "input", 2)
    if lo ~= nil then x = M.attn.maximum(x, as_tensor(lo, name, "min", 2)) end
    if hi ~= nil then x = M.attn.minimum(x, as_tensor(hi, name, "max", 2)) end
    return x
  end
end

--- where(cond) with one argument: a 1-d tensor of 1-based positions per
-- dim of cond's non-zero elements (nonzero{as_tuple = true}).
local function where_with(c_where)
  return function(cond, a, b, ...)
    if a == nil and b == nil and select("#", ...) == 0 then return M.attn.nonzero(cond, {as_tuple = true}) end
    return c_where(cond, a, b, ...)
  end
end

---------------------------------------------------------------------------
-- attn.F: pad, cosine_similarity, normalize
-- @section attn_f_pad
---------------------------------------------------------------------------

local pad_modes = {constant = true, reflect = true, replicate = true, circular = true}

--- F.pad(x, pad, mode = "constant", value = 0) or F.pad(x, pad, {mode =, value =}):
-- pad = {left, right} for the last dim, then {left, right} of the one
-- before, ... (torch's order; counts, not indices).  constant takes
-- negative counts (cropping); reflect, replicate and circular pad with x's
-- own values (reflect needs counts < the dim's size).
-- @usage
-- local x = attn.ones(2, 3)
-- print(F.pad(x, {1, 2}).shape)                  -- attn.Size([2, 6]): 1 left, 2 right on the last dim
-- print(F.pad(x, {0, 0, 1, 0}, "constant", -1))  -- a row of -1 on top
function M.pad(x, pad, mode, value)
  local fn = "pad"
  x = as_tensor(x, fn, "input", 2)
  if type(mode) == "table" then
    check_opts(mode, fn, {mode = true, value = true})
    mode, value = mode.mode, mode.value
  end
  mode = mode or "constant"
  if not pad_modes[mode] then
    error(("%s: mode must be \"constant\", \"reflect\", \"replicate\" or \"circular\" (got %s)"):format(
      fn, tostring(mode)), 2)
  end
  if value ~= nil and type(value) ~= "number" then
    error(fn .. ": value must be a number (got " .. type(value) .. ")", 2)
  end
  if mode ~= "constant" and value ~= nil and value ~= 0 then
    error(("%s: value is only for mode \"constant\" (got mode \"%s\")"):format(fn, mode), 2)
  end
  value = value or 0
  if type(pad) ~= "table" or is_tensor(pad) or #pad % 2 ~= 0 then
    error(fn .. ": pad must be a list of an even number of counts {left, right, ...}", 2)
  end
  local nd = x:dim()
  if #pad / 2 > nd then
    error(("%s: pad has %d pairs but the input %s has %d dims"):format(fn, #pad // 2, fmt_shape(x:shape()), nd), 2)
  end
  for i = 1, #pad do
    if not is_int(pad[i]) then error(("%s: pad[%d] must be an integer (got %s)"):format(fn, i, tostring(pad[i])), 2) end
    if mode ~= "constant" and pad[i] < 0 then
      error(("%s: pad[%d] = %d is negative (only mode \"constant\" crops)"):format(fn, i, pad[i]), 2)
    end
    if pad[i] > 1 << 56 then -- no size arithmetic below can overflow
      error(("%s: pad[%d] = %d is more than a dim can hold (at most 2^56 elements)"):format(fn, i, pad[i]), 2)
    end
  end
  -- the padding takes x's dtype (torch): a value it cannot hold is refused here
  if x.dtype == M.attn.int64 and not (value >= -0x1p63 and value < 0x1p63) then
    error(("%s: value %s does not fit in the input's dtype int64 (pad it as a float tensor: x:float())"):format(
      fn, value ~= value and "nan" or tostring(value)), 2)
  end
  local fresh = false
  local filled = {dtype = x.dtype}
  for p = 1, #pad // 2 do
    local d = nd - p + 1
    local left, right = math.tointeger(pad[2 * p - 1]), math.tointeger(pad[2 * p])
    local n = x:size(d)
    if mode == "constant" then
      if left < -n then -- not -left > n: -math.mininteger overflows
        error(("%s: pad[%d] = %d crops more than size %d of dim %d (a negative count crops at most the dim's "
          .. "size: %d..-1)"):format(fn, 2 * p - 1, left, n, d, -n), 2)
      end
      if left < 0 then
        x = x:narrow(d, -left + 1, n + left)
        n = n + left
        left = 0
      end
      if right < -n then
        error(("%s: pad[%d] = %d crops more than size %d of dim %d (a negative count crops at most the dim's "
          .. "size: %d..-1)"):format(fn, 2 * p, right, n, d, -n), 2)
      end
      if right < 0 then
        x = x:narrow(d, 1, n + right)
        right = 0
      end
      local parts = {}
      local s = x:shape()
      if left > 0 then s[d] = left; parts[#parts + 1] = M.attn.full(s, value, filled) end
      parts[#parts + 1] = x
      if right > 0 then s[d] = right; parts[#parts + 1] = M.attn.full(s, value, filled) end
      if #parts > 1 then x = M.attn.cat(parts, d); fresh = true end
    else
      if n == 0 then error(("%s: cannot pad dim %d of size 0 in mode \"%s\""):format(fn, d, mode), 2) end
      if mode == "reflect" and (left >= n or right >= n) then
        error(("%s: reflect padding (%d, %d) must be less than size %d of dim %d"):format(fn, left, right, n, d), 2)
      end
      if mode == "circular" and (left > n or right > n) then
        error(("%s: circular padding (%d, %d) must be at most size %d of dim %d"):format(fn, left, right, n, d), 2)
      end
      local parts = {}
      if left > 0 then
        if mode == "reflect" then parts[#parts + 1] = x:narrow(d, 2, left):flip(d)
        elseif mode == "circular" then parts[#parts + 1] = x:narrow(d, n - left + 1, left)
        else local s = x:shape(); s[d] = left; parts[#parts + 1] = x:narrow(d, 1, 1):expand(s) end
      end
      parts[#parts + 1] = x
      if right > 0 then
        if mode == "reflect" then parts[#parts + 1] = x:narrow(d, n - right, right):flip(d)
        elseif mode == "circular" then parts[#parts + 1] = x:narrow(d, 1, right)
        else local s = x:shape(); s[d] = right; parts[#parts + 1] = x:narrow(d, n, 1):expand(s) end
      end
      if #parts > 1 then x = M.attn.cat(parts, d); fresh = true end
    end
  end
  if not fresh then x = x:clone() end -- crops and zero pads: a new tensor too, as torch's
  return x
end

--- F.cosine_similarity(x1, x2, dim = 2, eps = 1e-8) (torch's dim=1 is our
-- 2): sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps)) along dim, x1
-- and x2 broadcast together.
-- @usage
-- local a, b = attn.tensor({{1.0, 0.0}, {1.0, 1.0}}), attn.tensor({{1.0, 0.0}, {-1.0, -1.0}})
-- print(F.cosine_similarity(a, b))               -- tensor([ 1., -1.]): along dim 2
function M.cosine_similarity(x1, x2, dim, eps)
  local fn = "cosine_similarity"
  x1 = as_tensor(x1, fn, "x1", 2)
  x2 = as_tensor(x2, fn, "x2", 2)
  -- torch: a floating operand is needed; a mixed pair is computed in float32
  if not (x1:is_floating_point() or x2:is_floating_point()) then
    error(("%s: expected a floating tensor, got x1 %s and x2 %s (convert with :float())"):format(fn,
      tostring(x1.dtype):gsub("^attn%.", ""), (tostring(x2.dtype):gsub("^attn%.", ""))), 2)
  end
  if not x1:is_floating_point() then x1 = x1:float() end
  if not x2:is_floating_point() then x2 = x2:float() end
  if type(dim) == "table" then
    check_opts(dim, fn, {dim = true, eps = true})
    dim, eps = dim.dim, dim.eps
  end
  if dim == nil then dim = 2 end
  eps = eps == nil and 1e-8 or eps
  if type(eps) ~= "number" then error(fn .. ": eps must be a number", 2) end
  local nd = math.max(x1:dim(), x2:dim())
  dim = norm_dim(dim, nd, fn, 2)
  -- leading dims added first so that dim means the same in both
  while x1:dim() < nd do x1 = x1:unsqueeze(1) end
  while x2:dim() < nd do x2 = x2:unsqueeze(1) end
  local a = x1 / x1:norm(2, dim, true):clamp(eps, nil)
  local b = x2 / x2:norm(2, dim, true):clamp(eps, nil)
  return (a * b):sum(dim)
end

--- F.normalize(x, p = 2, dim = 2, eps = 1e-12) or F.normalize(x, {p =, dim =, eps =}):
-- x / max(||x||_p along dim, eps), torch's (whose default dim 1 is our 2).
-- @usage
-- local x = attn.tensor({{3.0, 4.0}})
-- print(F.normalize(x))                          -- tensor([[0.6000, 0.8000]]): unit L2 rows
function M.normalize(x, p, dim, eps)
  local fn = "normalize"
  x = as_tensor(x, fn, "input", 2)
  if type(p) == "table" then
    check_opts(p, fn, {p = true, dim = true, eps = true})
    p, dim, eps = p.p, p.dim, p.eps
  end
  if p == nil then p = 2 end
  if type(p) ~= "number" or p ~= p then error(fn .. ": p must be a number (got " .. tostring(p) .. ")", 2) end
  if dim == nil then dim = 2 end
  dim = norm_dim(dim, x:dim(), fn, 2)
  eps = eps == nil and 1e-12 or eps
  if type(eps) ~= "number" or eps ~= eps then error(fn .. ": eps must be a number (got " .. tostring(eps) .. ")", 2) end
  return x / x:norm(p, dim, true):clamp(eps, nil)
end

--- tile(x, reps...) (torch.tile): x:repeat(reps) with reps padded with
-- leading 1s to x's rank; a name that Lua accepts after ':', where
-- x:repeat(...) is a syntax error ('repeat' is a keyword).
-- @usage
-- print(attn.tile(attn.tensor({1, 2}), 2))                         -- tensor([1, 2, 1, 2])
function M.tile(x, ...)
  local fn = "tile"
  x = as_tensor(x, fn, "input", 2)
  local reps = select("#", ...) == 1 and type((...)) == "table" and {table.unpack((...))} or {...}
  for i, r in ipairs(reps) do
    if math.type(r) ~= "integer" and not (type(r) == "number" and r == math.floor(r)) then
      error(("%s: reps[%d] must be an integer (got %s)"):format(fn, i, tostring(r)), 2)
    end
  end
  while #reps < x:dim() do table.insert(reps, 1, 1) end
  return x["repeat"](x, table.unpack(reps))
end

---------------------------------------------------------------------------
-- Installation
-- @section installation
---------------------------------------------------------------------------

--- Called once by attn/init.lua with the module table and the tensor
-- methods: wraps the C reductions, clamp and where, and adds the rest.
--- The functions of attn.core that attn.sum etc. wrap (attn.core keeps the
-- plain C ones).
M._wrapped = {sum = true, mean = true, var = true, std = true, clamp = true, where = true}

-- f (a C function with one result) called through a local named name, not
-- as a tail call, so that its own argument errors still read "bad argument
-- #2 to 'sum'".
local function delegate(name, f)
  local src = ("local %s = ...; return function(...) local r = %s(...); return r end"):format(name, name)
  return load(src, "=attn/ops.lua")(f) -- named as a package file, so errors skip it
end

function M._install(attn, methods)
  M.attn = attn
  local C = {}
  for name in pairs(M._wrapped) do C[name] = delegate(name, attn[name]) end
  local wrapped = {
    sum = multi_dim("sum", C.sum, sequential(C.sum)),
    mean = multi_dim("mean", C.mean, sequential(C.mean)),
    var = var_like("var", C.var),
    std = var_like("std", C.std),
    amax = amax_like("amax", false),
    amin = amax_like("amin", true),
    clamp = clamp_with(C.clamp, "clamp"),
    where = where_with(C.where),
    einsum = M.einsum,
    roll = M.roll,
    diag = M.diag,
    cdist = M.cdist,
    repeat_interleave = M.repeat_interleave,
    tile = M.tile,
  }
  -- isclose, allclose, equal, addmm, baddbmm, addbmm: attn/ops/compare.lua
  local compare = require "attn.ops.compare"
  compare.attn = attn
  for _, name in ipairs({"isclose", "allclose", "equal", "addmm", "baddbmm", "addbmm"}) do
    wrapped[name] = compare[name]
  end
  for name, f in pairs(wrapped) do
    attn[name] = f
    if name ~= "einsum" then methods[name] = f end
  end
end

return M
