-- SPDX-License-Identifier: MIT

--- attn.signature: torch's signatures of attn's public functions, declared
-- once (the calling convention of issue 29).
--
-- Every optional argument that torch takes by keyword can be given in a
-- trailing options table, and torch's positional order works too:
--
--     F.gelu(x, "tanh")              F.gelu(x, {approximate = "tanh"})
--     x:argmax(2, true)              x:argmax(2, {keepdim = true})
--     attn.cat(xs, 2)                attn.cat(xs, {dim = 2})
--
-- A line of SIGNATURES names a function and its torch signature, the
-- parameters in torch's order, the optional ones with "=default":
--
--     argmax = "input, dim=nil, keepdim=false"
--
-- From that line come the argument handling (a trailing plain table whose
-- first key is a string, after the required arguments, becomes the
-- positional arguments it names; an unknown key is an error listing the
-- valid ones) and the generic check of both forms
-- (spec/calling_convention_spec.lua).  A C function is declared to the
-- binding (core._declare: the expansion costs nothing until an options
-- table is given); a Lua function is wrapped.  A line written "native:
-- ..." marks a function that reads its options table itself (then only
-- the spec uses the line), as does torch's bare "*" (the parameters after
-- it are keyword-only) and "*size" (torch's varargs sizes); false marks a
-- function without optional arguments.
--
-- Keys: "name" is attn.name and the tensor method t:name (self standing
-- for torch's input); "F.name" is attn.F.name (nn.functional); other
-- modules use their path under attn ("optim.clip_grad_norm_"), a class's
-- methods its path and the method ("nn.Linear.forward", "self" first;
-- "nn.Linear.init" is the constructor nn.Linear(...)).  The rooms above
-- this one declare their functions next to them (M.declare).  Extend the
-- declarations when a function is added; the spec fails for a public
-- function they lack.
local core = require "attn.core"
local error = core._error -- positioned at the user's line

local M = {}

-- Signatures written in torch's order.  Defaults are informative (the
-- function applies its own); only the names and the count of required
-- parameters drive the expansion.
M.SIGNATURES = {
  -- attn.* and tensor methods
  add = "input, other, alpha=1",
  sub = "input, other, alpha=1",
  gelu = "input, approximate='none'",
  softmax = "input, dim", -- torch's dtype= is not taken (attn computes in float32)
  log_softmax = "input, dim",
  cumsum = "input, dim",
  argmax = "input, dim=nil, keepdim=false",
  argmin = "input, dim=nil, keepdim=false",
  all = "input, dim=nil, keepdim=false",
  any = "input, dim=nil, keepdim=false",
  prod = "input, dim=nil, keepdim=false",
  multinomial = "input, num_samples, replacement=false, generator=nil",
  cat = "tensors, dim=1",
  stack = "tensors, dim=1",
  isclose = "input, other, rtol=1e-05, atol=1e-08, equal_nan=false",
  allclose = "input, other, rtol=1e-05, atol=1e-08, equal_nan=false",
  equal = false,
  addmm = "input, mat1, mat2, beta=1, alpha=1",
  baddbmm = "input, batch1, batch2, beta=1, alpha=1",
  addbmm = "input, batch1, batch2, beta=1, alpha=1",
  tolist = false,
  -- sum and mean (Lua functions, attn/ops.lua) stay undeclared: a Lua
  -- wrapper costs them about 1000 instructions a call (callgrind)
  max = "input, dim=nil, keepdim=false",
  min = "input, dim=nil, keepdim=false",
  logsumexp = "input, dim, keepdim=false",
  argsort = "input, dim=-1, descending=false",
  flatten = "input, start_dim=1, end_dim=-1",
  chunk = "input, chunks, dim=1",
  split = "tensor, split_size_or_sections, dim=1",
  unbind = "input, dim=1",
  clamp = "input, min=nil, max=nil",
  tril = "input, diagonal=0",
  triu = "input, diagonal=0",
  roll = "input, shifts, dims=nil",
  transpose = "input, dim0, dim1",
  -- no optional arguments (torch's and attn's)
  abs = false, abs_ = false, ceil = false, ceil_ = false, cos = false, cos_ = false, erf = false, erf_ = false,
  exp = false, exp_ = false, expm1 = false, expm1_ = false, floor = false, floor_ = false, log = false, log_ = false,
  log1p = false, log1p_ = false, neg = false, neg_ = false, reciprocal = false, reciprocal_ = false, relu = false,
  relu_ = false, rsqrt = false, rsqrt_ = false, sigmoid = false, sigmoid_ = false, sign = false, sign_ = false,
  sin = false, sin_ = false, sqrt = false, sqrt_ = false, square = false, square_ = false, tan = false, tan_ = false,
  tanh = false, tanh_ = false, atan2 = false, atan2_ = false, eq = false, eq_ = false, ne = false, ne_ = false,
  lt = false, lt_ = false, le = false, le_ = false, gt = false, gt_ = false, ge = false, ge_ = false,
  maximum = false, maximum_ = false, minimum = false, minimum_ = false, fmod = false, fmod_ = false, mul = false,
  mul_ = false, pow = false, pow_ = false, logical_and = false, logical_or = false, logical_xor = false,
  logical_not = false, isnan = false, isinf = false, isfinite = false, remainder = false, floor_divide = false,
  dot = false, mm = false, bmm = false, matmul = false, outer = false, dim = false, numel = false,
  is_contiguous = false, is_floating_point = false, element_size = false, item = false, t = false,
  expand_as = false, view_as = false, reshape_as = false, type_as = false, detach = false, detach_ = false,
  is_tensor = false, masked_select = false, totable = false, is_grad_enabled = false, get_num_threads = false,
  initial_seed = false, seed = false, now = false,
  -- == tensor_a: reductions, indexing, scatter, sort, norms (helper A adds lines here) ==
  -- sum and mean read their trailing options table themselves (attn/ops.lua:
  -- no wrapper on the hot path); torch's dtype= is not taken
  sum = "native: input, dim=nil, keepdim=false",
  mean = "native: input, dim=nil, keepdim=false",
  -- var/std: torch's two overloads, (dim, unbiased, keepdim) and the
  -- keyword correction= (attn/ops.lua reads the table)
  var = "native: input, dim=nil, unbiased=true, keepdim=false, *, correction=1",
  std = "native: input, dim=nil, unbiased=true, keepdim=false, *, correction=1",
  amax = "input, dim=nil, keepdim=false", -- torch's default dim=() is every dim
  amin = "input, dim=nil, keepdim=false",
  norm = "input, p='fro', dim=nil, keepdim=false", -- torch's dtype= is not taken
  kthvalue = "input, k, dim=-1, keepdim=false",
  topk = "input, k, dim=-1, largest=true, sorted=true", -- results are always sorted
  sort = "input, dim=-1, descending=false, stable=false", -- always stable
  -- torch's keyword-only alpha, include_self, right and out_int32 are
  -- positional too (as add's alpha; bucketize's slot 3 was right already);
  -- out_int32 = true is refused (no int32 dtype)
  add_ = "input, other, alpha=1",
  sub_ = "input, other, alpha=1",
  index_add = "input, dim, index, source, alpha=1",
  index_add_ = "input, dim, index, source, alpha=1",
  scatter_reduce = "input, dim, index, src, reduce, include_self=true",
  scatter_reduce_ = "input, dim, index, src, reduce, include_self=true",
  bucketize = "input, boundaries, right=false, out_int32=false",
  nonzero = "native: input, *, as_tuple=false", -- the binding reads {as_tuple = true}
  clamp_ = "input, min=nil, max=nil",
  gelu_ = "input, approximate='none'",
  diag = "input, diagonal=0",
  cdist = "x1, x2, p=2.0, compute_mode='use_mm_for_euclid_dist_if_necessary'",
  repeat_interleave = "input, repeats, dim=nil, output_size=nil", -- output_size positional too
  linear = "input, weight, bias=nil",
  one_hot = "tensor, num_classes=-1",
  embedding = "weight, indices, padding_idx=nil", -- torch.embedding's order (weight first)
  -- torch 2.x's SDPA (1.13 has none), then attn's own options
  scaled_dot_product_attention = "query, key, value, attn_mask=nil, dropout_p=0.0, is_causal=false, scale=nil, "
    .. "enable_gqa=false, attn_mask_kind=nil, causal_alignment=nil, generator=nil, need_weights=false",
  causal_mask = "L, S=nil, bottom_right=false", -- attn's
  -- no optional arguments; torch's that attn cannot honour left out:
  -- div's rounding_mode=, round's decimals=, gather's sparse_grad=,
  -- scatter_'s reduce= (scatter_reduce_ is the reducing form)
  div = false, div_ = false, round = false, round_ = false, gather = false, index_select = false,
  index_copy = false, index_copy_ = false, index_fill = false, index_fill_ = false, masked_fill = false,
  masked_fill_ = false, scatter = false, scatter_ = false, scatter_add = false, scatter_add_ = false,
  silu = false, silu_ = false, where = false, einsum = false, padding_mask = false,
  -- == end tensor_a ==
  -- == tensor_b: creation, random, shape, conversion, autograd, state (helper B adds lines here) ==
  -- creation: the factories read their options table themselves (the
  -- binding); torch's out=, layout=, device=, pin_memory= and
  -- memory_format= are not taken (attn has one layout, the CPU)
  zeros = "native: *size, *, dtype=nil, requires_grad=false",
  ones = "native: *size, *, dtype=nil, requires_grad=false",
  empty = "native: *size, *, dtype=nil, requires_grad=false",
  tensor = "native: data, *, dtype=nil, requires_grad=false",
  zeros_like = "native: input, *, dtype=nil, requires_grad=false",
  ones_like = "native: input, *, dtype=nil, requires_grad=false",
  empty_like = "native: input, *, dtype=nil, requires_grad=false",
  -- their positional parameters may be in the table too (attn/base.lua
  -- moves them to their places before the binding reads the table)
  full = "native: size, fill_value, *, dtype=nil, requires_grad=false",
  full_like = "native: input, fill_value, *, dtype=nil, requires_grad=false",
  eye = "native: n, m=nil, *, dtype=nil, requires_grad=false",
  arange = "native: start=0, end, step=1, *, dtype=nil, requires_grad=false",
  linspace = "native: start, end, steps, *, dtype=nil, requires_grad=false",
  randint = "native: low=0, high, size, *, generator=nil, dtype=nil, requires_grad=false",
  randperm = "native: n, *, generator=nil, dtype=nil, requires_grad=false",
  -- torch's dtype= is not taken: attn samples in float32 (torch's float64
  -- and half draws are other streams); rand_like's generator is attn's
  rand = "native: *size, *, generator=nil, requires_grad=false",
  randn = "native: *size, *, generator=nil, requires_grad=false",
  rand_like = "native: input, *, requires_grad=false, generator=nil",
  randn_like = "native: input, *, requires_grad=false, generator=nil",
  -- in-place samplers: torch's keyword-only generator is positional too
  -- (attn takes a trailing generator)
  bernoulli = "input, generator=nil", -- torch's bernoulli(input, p) overload is bernoulli_
  bernoulli_ = "input, p=0.5, generator=nil",
  exponential_ = "input, lambd=1, generator=nil",
  normal_ = "input, mean=0, std=1, generator=nil",
  uniform_ = "input, from=0, to=1, generator=nil",
  random_ = "input, from=0, to=nil, generator=nil",
  -- shape and conversion
  size = "input, dim=nil",
  stride = "input, dim=nil",
  squeeze = "input, dim=nil",
  slice = "input, dim, first=1, last=nil, step=1", -- attn's (1-based, inclusive bounds)
  type = "input, dtype=nil", -- torch's non_blocking= is not taken
  tostring = "input, suffix=nil", -- attn's: the suffix after the values
  -- to: torch's to(device=None, dtype=None, non_blocking=False, copy=False)
  -- form; the binding reads the table (and the dtype and tensor forms)
  to = "native: input, device=nil, dtype=nil, non_blocking=false, copy=false",
  -- load: torch's map_location= is not taken (the CPU only); format is attn's
  load = "f, format=nil",
  -- autograd: torch's create_graph= and inputs= are not taken
  backward = "input, gradient=nil, retain_graph=nil",
  requires_grad_ = "input, requires_grad=true",
  -- no optional arguments; torch's memory_format= (bfloat16 ... clone,
  -- contiguous, cpu), cuda's device= and non_blocking= and copy_'s
  -- non_blocking= are not taken.  A function whose only optional
  -- parameter comes first takes no options table (set_isa(family),
  -- attn.Generator(seed): torch's device= is not taken)
  bfloat16 = false, bool = false, double = false, float = false, half = false, long = false, cpu = false,
  cuda = false, clone = false, contiguous = false, copy_ = false, expand = false, fill_ = false, flip = false,
  narrow = false, permute = false, ["repeat"] = false, rep = false, tile = false, zero_ = false, view = false,
  reshape = false, select = false, unsqueeze = false, retain_grad = false, hstack = false, vstack = false,
  shape = false, Size = false, manual_seed = false, get_rng_state = false, set_rng_state = false,
  enable_grad = false, no_grad = false, set_grad_enabled = false, debug_counts = false, info = false,
  set_num_threads = false, set_isa = false, safetensors_info = false,
  deepcopy = false, -- Python's memo is internal (attn/copy.lua)
  Generator = false, ["Generator.manual_seed"] = false, ["Generator.seed"] = false,
  ["Generator.initial_seed"] = false, ["Generator.get_state"] = false, ["Generator.set_state"] = false,
  -- save(obj, f, metadata=nil): metadata is itself a string-keyed table, so a
  -- trailing options table cannot be told from it; declared without options
  save = false,
  -- == end tensor_b ==
  -- attn.F (torch.nn.functional)
  ["F.gelu"] = "input, approximate='none'",
  ["F.softmax"] = "input, dim",
  ["F.log_softmax"] = "input, dim",
  ["F.dropout"] = "input, p=0.5, training=true",
  ["F.leaky_relu"] = "input, negative_slope=0.01, inplace=false",
  ["F.elu"] = "input, alpha=1.0, inplace=false",
  ["F.softplus"] = "input, beta=1, threshold=20",
  ["F.layer_norm"] = "input, normalized_shape, weight=nil, bias=nil, eps=1e-05",
  ["F.one_hot"] = "tensor, num_classes=-1",
  ["F.linear"] = "input, weight, bias=nil",
  -- == functional: the other attn.F functions (helper F adds lines here) ==
  ["F.relu"] = false, ["F.tanh"] = false, ["F.sigmoid"] = false, -- torch's inplace= of relu: attn has relu_
  ["F.silu"] = "input, inplace=false",
  ["F.mish"] = "input, inplace=false",
  ["F.normalize"] = "input, p=2.0, dim=2, eps=1e-12", -- torch's dim=1 is attn's 2 (1-based)
  ["F.pad"] = "input, pad, mode='constant', value=nil",
  ["F.cosine_similarity"] = "x1, x2, dim=2, eps=1e-08",
  ["F.conv1d"] = "input, weight, bias=nil, stride=1, padding=0, dilation=1, groups=1",
  -- the losses: torch's order, the deprecated size_average/reduce included
  ["F.nll_loss"] = "input, target, weight=nil, size_average=nil, ignore_index=-100, reduce=nil, reduction='mean'",
  ["F.cross_entropy"] = "input, target, weight=nil, size_average=nil, ignore_index=-100, reduce=nil, "
    .. "reduction='mean', label_smoothing=0.0",
  ["F.mse_loss"] = "input, target, size_average=nil, reduce=nil, reduction='mean'",
  ["F.l1_loss"] = "input, target, size_average=nil, reduce=nil, reduction='mean'",
  ["F.smooth_l1_loss"] = "input, target, size_average=nil, reduce=nil, reduction='mean', beta=1.0",
  ["F.huber_loss"] = "input, target, reduction='mean', delta=1.0",
  ["F.binary_cross_entropy"] = "input, target, weight=nil, size_average=nil, reduce=nil, reduction='mean'",
  ["F.binary_cross_entropy_with_logits"] = "input, target, weight=nil, size_average=nil, reduce=nil, "
    .. "reduction='mean', pos_weight=nil",
  ["F.kl_div"] = "input, target, size_average=nil, reduce=nil, reduction='mean', log_target=false",
  -- attn's (attn.dist.ring_attention)
  ["F.ring_attention"] = "query, key, value, causal=false, scale=nil, is_causal=false",
  ["F.split_heads"] = false, ["F.combine_heads"] = false,
  -- == end functional ==
}

--- Parses a signature line: the list of names, the number of required
-- parameters (those before the first one with a default), the number of
-- leading ones that are never in the options table (the first: the
-- tensor, self, or the list of tensors of cat; torch takes every other
-- one by keyword too, F.softmax(x, dim = 2)) and what else the line says:
-- {native = the function reads its options table itself (a line written
-- "native: ..."), kwonly = the index of the first keyword-only parameter
-- (after torch's bare "*": these come only in the options table),
-- varargs = the index of a "*size" parameter (torch's *size: its values
-- are spread among the arguments), defaults = {name = the default as
-- written}, slash = true when the line has "/"}.  A line with keyword-only parameters
-- is native: the expansion cannot place them.  Python's "/" ends the
-- positional-only parameters (the module's input of a forward method,
-- "self, src, /, src_mask=nil"): these are never in the options table.
-- @usage
-- local signature = require "attn.signature"
-- local names, ndefault = signature.parse("input, dim=nil, keepdim=false")
-- print(table.concat(names, " "), ndefault)
function M.parse(sig)
  local body = sig:match("^native:%s*(.*)$")
  local info = {native = body ~= nil, defaults = {}}
  body = body or sig
  local names, nreq, optional, lead = {}, 0, false, 1
  for item in body:gmatch("[^,]+") do
    item = item:match("^%s*(.-)%s*$")
    if item == "/" then
      lead, info.slash = #names, true
    elseif item == "*" then
      info.kwonly = #names + 1
    else
      local star, name, default = item:match("^(%*?)([%w_]+)%s*(=?)")
      assert(name, "attn.signature: bad signature " .. sig)
      names[#names + 1] = name
      if star == "*" then info.varargs, info.kwonly = #names, #names + 1 end
      if default == "=" then
        optional = true
        info.defaults[name] = item:match("=%s*(.-)$")
      elseif not optional then
        nreq = nreq + 1
      end
    end
  end
  if info.kwonly then
    info.native = true
    if info.kwonly > #names then info.kwonly = nil end
  end
  return names, nreq, lead, info
end

--- Whether v is an options table: plain, and its first key a string.
-- @usage
-- local signature = require "attn.signature"
-- print(signature.is_options({dim = 2}), signature.is_options({1, 2}), signature.is_options(attn.ones(1)))
function M.is_options(v)
  return type(v) == "table" and getmetatable(v) == nil and type(next(v)) == "string"
end

--- The expander of function fn (its name in messages): (...) with a
-- trailing options table -> the same arguments, positional; the first
-- lead parameters are never options.  With npos (a line whose parameters
-- after the npos-th are keyword-only and read by the function itself),
-- those go on in one trailing table of their own.
-- @usage
-- local signature = require "attn.signature"
-- local expand = signature.expander("f", {"input", "dim", "keepdim"}, 1)
-- print(type(expand))                                              -- what the binding calls with a table
function M.expander(fn, names, lead, npos)
  npos = npos or #names
  local index, valid = {}, {}
  for i, n in ipairs(names) do
    index[n] = i
    if i > lead then valid[#valid + 1] = n end
  end
  return function(...)
    local n = select("#", ...)
    local args = {...}
    local opts = args[n]
    args[n] = nil
    local last, rest = n - 1, nil
    for k, v in next, opts do
      local i = index[k]
      if i == nil or i <= lead then
        error(M.unknown_option(fn, k, valid), 2)
      end
      if i > npos then
        rest = rest or {}
        rest[k] = v
      else
        if i <= n - 1 and args[i] ~= nil then
          error(("%s: %s given twice (as argument %d and in the options table)"):format(fn, k, i), 2)
        end
        args[i] = v
        if i > last then last = i end
      end
    end
    if rest then
      last = last + 1
      args[last] = rest
    end
    return table.unpack(args, 1, last)
  end
end

--- The message for an unknown key: attn._misuse.unknown_option, set by
-- attn.base (which requires this file, so this file cannot require it).
function M.unknown_option(fn, key, valid)
  return ("%s: unknown option '%s'; valid options: %s"):format(fn, tostring(key), table.concat(valid, ", "))
end

-- wrapper -> the function it wraps (attn._misuse.unwrap_method)
M.wrapped = setmetatable({}, {__mode = "k"})

-- The wrapper's source for k declared parameters: fixed parameters (no
-- select calls on the common path: a call without options costs two type
-- tests), extra arguments passed on; the options table, if any, is the
-- last non-nil one among p2..pk.
local function wrapper_source(k)
  local ps = {}
  for i = 1, k do ps[i] = "p" .. i end
  local list = table.concat(ps, ", ")
  local find = {("local last = p%d"):format(k)}
  for i = k - 1, 2, -1 do find[#find + 1] = ("if last == nil then last = p%d end"):format(i) end
  return ([[
local f, slow, is_options = ...
return function(%s, ...)
  if (...) ~= nil then return slow(%s, ...) end -- more than declared: an options table among them?
  %s
  if type(last) == "table" and is_options(last) then return slow(%s) end
  return f(%s, ...)
end]]):format(list, list, table.concat(find, "\n  "), list, list)
end

--- f (a Lua function) taking a trailing options table as declared.
-- @usage
-- local signature = require "attn.signature"
-- local f = signature.wrap("scale", function(x, factor) return x * (factor or 1) end, "x, factor=1")
-- print(f(2, {factor = 3}))                                        -- 6: options by name
function M.wrap(fn, f, sig)
  local names, _, lead = M.parse(sig)
  local expand = M.expander(fn, names, lead)
  -- the slow path: the arguments up to the options table, expanded
  local function slow(...)
    local args, n = {...}, select("#", ...)
    local last = n
    while last > 0 and args[last] == nil do last = last - 1 end
    if not M.is_options(args[last]) then return f(...) end
    return f(expand(table.unpack(args, 1, last)))
  end
  local w
  if #names >= 2 then
    w = load(wrapper_source(#names), "=attn/signature.lua")(f, slow, M.is_options)
  else
    w = f
  end
  M.wrapped[w] = f
  return w
end

-- f declared under key: a binding function learns its expander; a Lua
-- function is returned wrapped.
local function declare(f, fn, sig)
  local names, _, lead = M.parse(sig)
  if pcall(core._declare, f, lead, M.expander(fn, names, lead)) then return f end -- a binding function
  return M.wrap(fn, f, sig)
end

--- The name of the function declared under key in messages: "gelu" for
-- "F.gelu" and "optim.clip_grad_norm_", the class for a constructor
-- ("nn.Linear.init": "Linear"), "Class:name" for a method.
-- @usage
-- local signature = require "attn.signature"
-- print(signature.display_name("nn.Linear.init"), signature.display_name("F.gelu"))   -- Linear gelu
function M.display_name(key)
  local class, name = key:match("([%w_]+)%.([%w_]+)$")
  if not class then return key end
  if name == "init" then return class end
  if class:match("^%u") and (select(2, key:gsub("%.", "")) >= 2 or class:match("%l")) then
    return class .. ":" .. name
  end
  return name
end

--- Installs the declarations of the functions in table t whose keys are
-- prefix .. name ("" for attn and the tensor methods, "F." for attn.F,
-- "nn.Linear." for a class: its init is the constructor).
-- @usage
-- local signature = require "attn.signature"
-- local t = signature.install({}, "nothing.")                       -- wraps the declared functions of t
-- print(next(t))                                                   -- nil: nothing declared under "nothing."
function M.install(t, prefix)
  for key, sig in pairs(M.SIGNATURES) do
    local name = key:sub(1, #prefix) == prefix and key:sub(#prefix + 1) or nil
    if name and not name:find(".", 1, true) and type(sig) == "string" and not select(4, M.parse(sig)).native then
      local f = rawget(t, name)
      if type(f) == "function" and not M.wrapped[f] then rawset(t, name, declare(f, M.display_name(key), sig)) end
    end
  end
  return t
end

--- Declares the functions of table t: decls maps a name to its torch
-- signature (or false: no optional arguments), the key being prefix ..
-- name.  For the rooms above this one (nn, optim, data, ...), next to the
-- functions they declare:
--
--     signature.declare(nn.Linear, "nn.Linear.", {
--       init = "self, in_features, out_features, bias=true",
--       forward = false, extra_repr = false})
-- @usage
-- local signature = require "attn.signature"
-- local M = {}
-- function M.greet(name, opts) return "hello " .. name .. ((opts or {}).punct or "") end
-- signature.declare(M, "example.", {greet = "native: name, punct=''"})   -- the torch-style signature
-- print(signature.SIGNATURES["example.greet"])
function M.declare(t, prefix, decls)
  for name, sig in pairs(decls) do
    local old = M.SIGNATURES[prefix .. name] -- the same line again: a module loaded anew
    assert(old == nil or old == sig, "attn.signature: declared twice: " .. prefix .. name)
    M.SIGNATURES[prefix .. name] = sig
  end
  return M.install(t, prefix)
end

-- this machinery: internal functions without optional arguments
M.declare(M, "signature.", {parse = false, is_options = false, expander = false, unknown_option = false,
  wrap = false, install = false, declare = false, display_name = false})

return M
