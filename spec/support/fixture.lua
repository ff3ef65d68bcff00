-- SPDX-License-Identifier: MIT

--- Helpers shared by the specs: loading fixtures written by the
-- scripts/fixtures/gen_*.py generators and comparing tensors with them.
local attn = require "attn"

local M = {}

local source_dir = os.getenv("ATTN_SOURCE_DIR") or "."

--- Loads spec/fixtures/<name>.lua (a file that returns a table).
function M.load(name)
  local path = source_dir .. "/spec/fixtures/" .. name .. ".lua"
  local chunk, err = loadfile(path, "t", {math = math})
  assert(chunk, err)
  return chunk()
end

-- The generators write a float 1.0 as 1, so a fixture's data keep the
-- dtype it records, else float32 (bool when every value is a boolean).
local function data_dtype(f)
  if f.dtype then return f.dtype end
  for _, v in ipairs(f.data) do
    if type(v) ~= "boolean" then return "float32" end
  end
  return #f.data > 0 and "bool" or "float32"
end

--- A fixture tensor {shape = {...}, data = {...}} as an attn tensor.
function M.tensor(f)
  local t = attn.tensor(f.data, {dtype = data_dtype(f)})
  if #f.shape == 0 then return t:reshape({}) end
  return t:reshape(f.shape)
end

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

local function fmt_shape(s) return "[" .. table.concat(s, ",") .. "]" end

--- Flat list of a tensor's values in row-major order.
-- Booleans (bool tensors) count as 1 and 0.
function M.flat(t)
  local n = t:numel()
  local v = t:reshape(n):totable()
  if type(v) ~= "table" then v = {v} end
  for i = 1, #v do
    if v[i] == true then v[i] = 1 elseif v[i] == false then v[i] = 0 end
  end
  return v
end

--- Asserts that tensor t equals the fixture f elementwise within
-- atol + rtol * |expected|; NaNs must match NaNs, infinities must match.
function M.assert_close(t, f, atol, rtol, what)
  atol = atol or 1e-5
  rtol = rtol or 0
  what = what or "tensor"
  local shape = t:shape()
  assert(same_shape(shape, f.shape),
    ("%s: shape %s, expected %s"):format(what, fmt_shape(shape), fmt_shape(f.shape)))
  if f.dtype then -- fixtures that record torch's dtype ("float32", "int64", "bool")
    assert(tostring(t.dtype) == "attn." .. f.dtype,
      ("%s: dtype %s, expected attn.%s"):format(what, tostring(t.dtype), f.dtype))
  end
  local got = M.flat(t)
  -- round the expected values to float32 the same way the tensor did
  -- int64 results compare exactly against int64 expectations
  local int = f.dtype == "int64" or (f.dtype == nil and t.dtype == attn.int64)
  local expected = #f.data > 0 and M.flat(attn.tensor(f.data, {dtype = int and "int64" or data_dtype(f)})) or {}
  for i, e in ipairs(expected) do
    local g = got[i]
    local ok
    if e ~= e then ok = g ~= g
    elseif e == math.huge or e == -math.huge then ok = g == e
    else ok = math.abs(g - e) <= atol + rtol * math.abs(e) end
    if not ok then
      error(("%s: element %d is %.9g, expected %.9g (atol %g)"):format(what, i, g, e, atol), 2)
    end
  end
  return true
end

--- Bit-exact comparison (for RNG streams and data movement).
function M.assert_equal(t, f, what)
  return M.assert_close(t, f, 0, 0, what)
end

--- The parameters of module m equal the fixture's bit for bit (expected:
-- {name with "." written "_" = fixture}), and m has no others.
function M.assert_params(m, expected, what)
  local n = 0
  for name, p in m:named_parameters() do
    local key = name:gsub("%.", "_")
    assert(expected[key], ("%s: unexpected parameter %s"):format(what, name))
    M.assert_equal(p, expected[key], what .. " " .. name)
    n = n + 1
  end
  local m_expected = 0
  for _ in pairs(expected) do m_expected = m_expected + 1 end
  assert(m_expected == n, ("%s: number of parameters: %d, expected %d"):format(what, n, m_expected))
end

--- A leaf tensor (requires grad) of the given shape holding distinct
-- values 0.25 apart in random order (no ties for max, min or sort).
function M.distinct(...)
  local shape = { ... }
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return ((attn.randperm(n) - 1) * 0.25 - 1):reshape(shape):detach():requires_grad_(true)
end

return M
