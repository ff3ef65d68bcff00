-- SPDX-License-Identifier: MIT

--- attn.ops.einsum: attn.einsum (torch.einsum), written over the core's
-- differentiable ops (diagonals, sums, one batched matmul per pair), so
-- autograd follows it.  attn.ops installs it as attn.einsum; its entry
-- belongs to attn.ops in the reference.
-- @submodule attn.ops
local core = require "attn.core"
local error = core._error -- raises at the user's line (the first caller outside attn)

local M = {}

-- Labels are single letters; the ellipsis dims become labels "1".."k",
-- numbered from the right so that operands with fewer of them line up.
local function parse_term(term, fn, level)
  local labels, ell_at = {}, nil
  local i = 1
  while i <= #term do
    local c = term:sub(i, i)
    if c == "." then
      if term:sub(i, i + 2) ~= "..." then
        error(("%s: '.' must be part of an ellipsis '...' in \"%s\""):format(fn, term), level + 1)
      end
      if ell_at then error(("%s: more than one ellipsis in \"%s\""):format(fn, term), level + 1) end
      ell_at = #labels + 1
      i = i + 3
    elseif c:match("%a") then
      labels[#labels + 1] = c
      i = i + 1
    else
      error(("%s: invalid subscript '%s' in \"%s\" (letters a-z, A-Z and '...' only)"):format(fn, c, term),
        level + 1)
    end
  end
  return labels, ell_at
end

-- Expands a parsed term for a tensor of nd dims into one label per dim.
local function term_labels(labels, ell_at, nd, fn, k, level)
  local n_ell = nd - #labels
  if (ell_at and n_ell < 0) or (not ell_at and n_ell ~= 0) then
    error(("%s: operand %d has %d dims but its subscripts name %d%s"):format(fn, k, nd, #labels,
      ell_at and " and more with '...'" or ""), level + 1)
  end
  local out = {}
  for i = 1, #labels + 1 do
    if i == ell_at then
      for e = n_ell, 1, -1 do out[#out + 1] = tostring(e) end
    end
    if labels[i] then out[#out + 1] = labels[i] end
  end
  return out, ell_at and n_ell or 0
end

local function index_of(list, v)
  for i = 1, #list do if list[i] == v then return i end end
end

-- Operand x with labels lab: a label repeated takes the diagonal (x times an
-- identity, summed), leaving one dim per distinct label.
local function take_diagonals(x, lab, fn, level)
  while true do
    local i, j
    for a = 1, #lab do
      for b = a + 1, #lab do
        if lab[a] == lab[b] then i, j = a, b break end
      end
      if i then break end
    end
    if not i then return x, lab end
    local n = x:size(i)
    if x:size(j) ~= n then
      error(("%s: subscript '%s' repeated in one operand with sizes %d and %d"):format(fn, lab[i], n, x:size(j)),
        level + 1)
    end
    -- move i, j to the end, multiply by eye, sum the last
    local perm, rest = {}, {}
    for d = 1, #lab do if d ~= i and d ~= j then perm[#perm + 1] = d; rest[#rest + 1] = lab[d] end end
    perm[#perm + 1] = i
    perm[#perm + 1] = j
    x = (x:permute(perm) * core.eye(n)):sum(-1)
    rest[#rest + 1] = lab[i]
    lab = rest
  end
end

-- Sums x over the labels for which drop(label) is true.
local function sum_labels(x, lab, drop)
  local keep = {}
  for d = #lab, 1, -1 do
    if drop(lab[d]) then x = x:sum(d) end
  end
  for d = 1, #lab do if not drop(lab[d]) then keep[#keep + 1] = lab[d] end end
  return x, keep
end

local function permute_to(x, lab, order)
  local perm, same = {}, true
  for i, l in ipairs(order) do
    perm[i] = index_of(lab, l)
    if perm[i] ~= i then same = false end
  end
  if same or #order <= 1 then return x end
  return x:permute(perm)
end

local function prod(list)
  local p = 1
  for _, v in ipairs(list) do p = p * v end
  return p
end

-- Contracts a (labels la) with b (labels lb), keeping the labels in keep:
-- shared labels kept are batch dims, shared others are summed by matmul.
local function contract(a, la, b, lb, keep, fn, level)
  local in_b = {}
  for _, l in ipairs(lb) do in_b[l] = true end
  local in_a = {}
  for _, l in ipairs(la) do in_a[l] = true end
  -- labels of one side that nothing needs: summed away first
  a, la = sum_labels(a, la, function(l) return not in_b[l] and not keep[l] end)
  b, lb = sum_labels(b, lb, function(l) return not in_a[l] and not keep[l] end)
  -- size-1 broadcasting of shared labels
  for _, l in ipairs(la) do
    local ia, ib = index_of(la, l), index_of(lb, l)
    if ib then
      local sa, sb = a:size(ia), b:size(ib)
      if sa ~= sb then
        if sa ~= 1 and sb ~= 1 then
          error(("%s: subscript '%s' has size %d in one operand and %d in another"):format(
            fn, tonumber(l) and "..." or l, sa, sb), level + 1)
        end
        if keep[l] then
          if sa == 1 then
            local s = a:shape(); s[ia] = sb; a = a:expand(s)
          else
            local s = b:shape(); s[ib] = sa; b = b:expand(s)
          end
        elseif sa == 1 then
          b = b:sum(ib, true)
        else
          a = a:sum(ia, true)
        end
      end
    end
  end
  local batch, left, con, right = {}, {}, {}, {}
  for _, l in ipairs(la) do
    if index_of(lb, l) then
      if keep[l] then batch[#batch + 1] = l else con[#con + 1] = l end
    else
      left[#left + 1] = l
    end
  end
  for _, l in ipairs(lb) do if not index_of(la, l) then right[#right + 1] = l end end
  local function sizes(x, lab, list)
    local s = {}
    for i, l in ipairs(list) do s[i] = x:size(index_of(lab, l)) end
    return s
  end
  local bs, ls, cs, rs = sizes(a, la, batch), sizes(a, la, left), sizes(a, la, con), sizes(b, lb, right)
  local order_a, order_b = {}, {}
  for _, l in ipairs(batch) do order_a[#order_a + 1] = l; order_b[#order_b + 1] = l end
  for _, l in ipairs(left) do order_a[#order_a + 1] = l end
  for _, l in ipairs(con) do order_a[#order_a + 1] = l; order_b[#order_b + 1] = l end
  for _, l in ipairs(right) do order_b[#order_b + 1] = l end
  local A = permute_to(a, la, order_a):reshape({prod(bs), prod(ls), prod(cs)})
  local B = permute_to(b, lb, order_b):reshape({prod(bs), prod(cs), prod(rs)})
  local C = A:matmul(B)
  local shape, lab = {}, {}
  for i, l in ipairs(batch) do shape[#shape + 1] = bs[i]; lab[#lab + 1] = l end
  for i, l in ipairs(left) do shape[#shape + 1] = ls[i]; lab[#lab + 1] = l end
  for i, l in ipairs(right) do shape[#shape + 1] = rs[i]; lab[#lab + 1] = l end
  if #shape == 0 then return C:reshape({}), lab end
  return C:reshape(shape), lab
end

--- einsum(equation, a, b, ...) or einsum(equation, {a, b, ...}): torch's
-- einsum (implicit output: the labels seen once, alphabetically, uppercase
-- first; '...' broadcasts; a label repeated in one operand takes the
-- diagonal).  Operands contract left to right, each pair as one batched
-- matmul.
-- @usage
-- local q, k = attn.randn(2, 5, 8), attn.randn(2, 7, 8)
-- print(attn.einsum("bld,bsd->bls", q, k).shape)   -- attn.Size([2, 5, 7])
function M.einsum(eq, ...)
  local fn = "einsum"
  if type(eq) ~= "string" then error(("%s: the equation must be a string (got %s)"):format(fn, type(eq)), 2) end
  local ops = {...}
  if #ops == 1 and type(ops[1]) == "table" and not core.is_tensor(ops[1]) then ops = ops[1] end
  if #ops == 0 then error(fn .. ": at least one operand is needed", 2) end
  for i = 1, #ops do
    local x = ops[i]
    if not core.is_tensor(x) then
      if type(x) ~= "table" and type(x) ~= "number" then
        error(("%s: operand %d must be a tensor (got %s)"):format(fn, i, type(x)), 2)
      end
      ops[i] = core.tensor(x)
    end
  end
  eq = eq:gsub("%s", "")
  local lhs, rhs = eq:match("^(.-)%->(.*)$")
  if not lhs then lhs = eq end
  local terms = {}
  for term in (lhs .. ","):gmatch("([^,]*),") do terms[#terms + 1] = term end
  if #terms ~= #ops then
    error(("%s: the equation has %d operand terms but %d operands were given"):format(fn, #terms, #ops), 2)
  end
  local labs, count, max_ell = {}, {}, 0
  for k, term in ipairs(terms) do
    local labels, ell_at = parse_term(term, fn, 2)
    local lab, n_ell = term_labels(labels, ell_at, ops[k]:dim(), fn, k, 2)
    if n_ell > max_ell then max_ell = n_ell end
    labs[k] = lab
    for _, l in ipairs(labels) do count[l] = (count[l] or 0) + 1 end
  end
  -- output labels
  local out = {}
  if rhs then
    local labels, ell_at = parse_term(rhs, fn, 2)
    local seen = {}
    for i = 1, #labels + 1 do
      if i == ell_at then for e = max_ell, 1, -1 do out[#out + 1] = tostring(e) end end
      local l = labels[i]
      if l then
        if seen[l] then error(("%s: output subscript '%s' appears more than once"):format(fn, l), 2) end
        if not count[l] then error(("%s: output subscript '%s' does not appear in any operand"):format(fn, l), 2) end
        seen[l] = true
        out[#out + 1] = l
      end
    end
  else
    for e = max_ell, 1, -1 do out[#out + 1] = tostring(e) end
    local once = {}
    for l, c in pairs(count) do if c == 1 then once[#once + 1] = l end end
    table.sort(once) -- ASCII: uppercase before lowercase, as torch
    for _, l in ipairs(once) do out[#out + 1] = l end
  end
  local in_out = {}
  for _, l in ipairs(out) do in_out[l] = true end
  -- diagonals, then labels needed by no one else summed away
  local xs = {}
  for k = 1, #ops do xs[k], labs[k] = take_diagonals(ops[k], labs[k], fn, 2) end
  -- contract left to right
  local acc, acc_lab = xs[1], labs[1]
  for k = 2, #ops do
    local keep = {}
    for l in pairs(in_out) do keep[l] = true end
    for j = k + 1, #ops do for _, l in ipairs(labs[j]) do keep[l] = true end end
    acc, acc_lab = contract(acc, acc_lab, xs[k], labs[k], keep, fn, 2)
  end
  acc, acc_lab = sum_labels(acc, acc_lab, function(l) return not in_out[l] end)
  -- ellipsis labels the result lacks (a smaller broadcast) come in as size 1
  if #acc_lab < #out then
    local shape = {}
    for _, l in ipairs(out) do
      local i = index_of(acc_lab, l)
      shape[#shape + 1] = i and acc:size(i) or 1
    end
    local ordered = permute_to(acc, acc_lab, (function()
      local o = {}
      for _, l in ipairs(out) do if index_of(acc_lab, l) then o[#o + 1] = l end end
      return o
    end)())
    return ordered:reshape(shape)
  end
  local r = permute_to(acc, acc_lab, out)
  if #out == 0 and r:dim() ~= 0 then r = r:reshape({}) end
  return r
end

return M
