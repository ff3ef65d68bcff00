-- SPDX-License-Identifier: MIT
-- Printing through Lua: tostring(t) and t:tostring(suffix) give torch 1.13's
-- repr.  The formatter itself is checked case by case in spec/c/test_print.c;
-- here a few explicit strings (taken from torch 1.13) plus every default-option
-- fixture case go through the binding.
local attn = require "attn"

local SRC = os.getenv("ATTN_SOURCE_DIR") or "."

describe("tostring(tensor)", function()
  it("prints a 2-d tensor like torch", function()
    assert.are.equal("tensor([[1.5000, 2.0000],\n        [3.0000, 4.0000]])",
      tostring(attn.tensor { { 1.5, 2 }, { 3, 4 } }))
  end)

  it("uses int mode for integral values", function()
    assert.are.equal("tensor([1., 2., 3.])", tostring(attn.tensor { 1.0, 2.0, 3.0 }))
  end)

  it("prints 0-d and empty tensors", function()
    assert.are.equal("tensor(0.5000)", tostring(attn.tensor(0.5)))
    assert.are.equal("tensor([], size=(0, 3))", tostring(attn.zeros(0, 3)))
  end)

  it("switches to scientific notation and keeps NaN and -0", function()
    assert.are.equal("tensor([1.0000e-05, 1.0000e+00])", tostring(attn.tensor { 1e-5, 1 }))
    assert.are.equal("tensor([   nan, -0.0000, 2.2500])", tostring(attn.tensor { 0 / 0, -0.0, 2.25 }))
  end)

  it("summarises more than 1000 elements", function()
    assert.are.equal(
      "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n        1.9990e+03])",
      tostring(attn.arange(2000):float()))
    -- integer arange is int64, printed like torch's
    assert.are.equal("tensor([   0,    1,    2,  ..., 1997, 1998, 1999])", tostring(attn.arange(2000)))
  end)

  it("prints a transposed view in its logical order", function()
    assert.are.equal("tensor([[1., 4.],\n        [2., 5.],\n        [3., 6.]])",
      tostring(attn.tensor { { 1.0, 2.0, 3.0 }, { 4.0, 5.0, 6.0 } }:t()))
  end)

  it("adds a suffix like requires_grad=True", function()
    assert.are.equal("tensor([1.5000, 2.0000], requires_grad=True)",
      attn.tensor { 1.5, 2 }:tostring("requires_grad=True"))
  end)
end)

-- Fixture records (format described in scripts/fixtures/gen_print.py).
local function read_cases(path)
  local f = assert(io.open(path, "rb"))
  local lines = {}
  for l in f:lines() do lines[#lines + 1] = l end
  f:close()
  local cases, i = {}, 1
  local function take(key)
    local l = lines[i]
    i = i + 1
    local rest = l and l:match("^" .. key .. " (.*)$")
    assert(rest, path .. ": expected '" .. key .. "' at line " .. (i - 1))
    return rest
  end
  while i <= #lines do
    if lines[i] == "" or lines[i]:sub(1, 1) == "#" then
      i = i + 1
    else
      local c = { name = take("case"), opts = take("opts"), views = {} }
      c.shape = {}
      for v in take("shape"):gmatch("%S+") do c.shape[#c.shape + 1] = tonumber(v) end
      table.remove(c.shape, 1) -- ndim
      c.data = {}
      for v in take("data"):gmatch("%S+") do
        local x = tonumber(v)
        if v == "nan" then x = 0 / 0 elseif v == "-nan" then x = -(0 / 0)
        elseif v == "inf" then x = math.huge elseif v == "-inf" then x = -math.huge
        elseif x == 0 and v:sub(1, 1) == "-" then x = -0.0 end -- tonumber("-0") is integer 0
        c.data[#c.data + 1] = x
      end
      table.remove(c.data, 1) -- count
      while lines[i] and lines[i]:match("^view ") do
        c.views[#c.views + 1] = take("view")
      end
      c.suffix = take("suffix")
      local n = tonumber(take("expect"))
      c.expect = table.concat(lines, "\n", i, i + n - 1)
      i = i + n
      cases[#cases + 1] = c
    end
  end
  return cases
end

-- Views this spec can rebuild through the binding (others stay C-only).
local function supported(c)
  for _, v in ipairs(c.views) do
    if not v:match("^transpose %d+ %d+$") then return false end
  end
  return true
end

-- The case's tensor built through the binding.
local function build(c)
  local t
  if #c.shape == 0 then
    t = attn.tensor(c.data[1], {dtype = attn.float32})
  elseif #c.data == 0 then
    t = attn.zeros(c.shape)
  else
    t = attn.tensor(c.data, {dtype = attn.float32}):reshape(c.shape) -- torch printed float32
  end
  for _, v in ipairs(c.views) do
    local d0, d1 = v:match("^transpose (%d+) (%d+)$")
    t = t:transpose(tonumber(d0) + 1, tonumber(d1) + 1) -- fixture dims are 0-based
  end
  return t
end

describe("tostring against the torch fixtures", function()
  for _, file in ipairs { "print_cases.txt", "print_random.txt" } do
    local cases = read_cases(SRC .. "/spec/fixtures/" .. file)
    it(file .. " has cases", function() assert.is_true(#cases > 50) end)
    for _, c in ipairs(cases) do
      if c.opts == "4 80 1000 3" and supported(c) then
        it(c.name, function()
          local t = build(c)
          local s = c.suffix == "-" and tostring(t) or t:tostring(c.suffix)
          assert.are.equal(c.expect, s)
        end)
      end
    end
  end
end)
