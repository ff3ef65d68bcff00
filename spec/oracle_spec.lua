-- SPDX-License-Identifier: MIT
-- Live oracle: random cases computed by attn and by PyTorch 1.13 in the
-- same run.  Needs /usr/bin/python3 with torch; where it is missing the
-- cases are reported as pending (the fixture specs still cover every op).
local attn = require "attn"

local PY = os.getenv("ATTN_PYTHON") or "/usr/bin/python3"

local function have_torch() return require("support.sh").python_has("torch") end

local function fmt(x)
  if x ~= x then return "float('nan')" end
  if x == math.huge then return "float('inf')" end
  if x == -math.huge then return "float('-inf')" end
  return ("%.9g"):format(x)
end

local function py_tensor(t)
  local vals = {}
  local flat = t:reshape(t:numel()):totable()
  if type(flat) == "number" then flat = {flat} end
  for i, v in ipairs(flat) do vals[i] = fmt(v) end
  return ("torch.tensor([%s], dtype=torch.float32).reshape(%s)"):format(table.concat(vals, ","),
    "(" .. table.concat(t:shape(), ",") .. (t:dim() == 1 and ",)" or ")"))
end

-- Deterministic shapes and values, independent of attn's own RNG.
local rng = 20261121
local function rand01()
  rng = (rng * 1103515245 + 12345) % 2147483648
  return rng / 2147483648
end
local function rint(lo, hi) return lo + math.floor(rand01() * (hi - lo + 1)) end
local function randt(shape, positive)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local data = {}
  for i = 1, n do
    local v = (rand01() - 0.5) * 4
    data[i] = positive and math.abs(v) + 0.1 or v
  end
  local t = attn.tensor(data)
  return #shape == 0 and t:reshape({}) or t:reshape(shape)
end

local function broadcast_pair()
  local nd = rint(1, 4)
  local a, b = {}, {}
  for d = 1, nd do
    local s = rint(1, 5)
    a[d] = rand01() < 0.25 and 1 or s
    b[d] = rand01() < 0.25 and 1 or s
  end
  if rand01() < 0.3 then table.remove(b, 1) end
  return a, b
end

local cases = {}
local function case(name, attn_fn, py_expr, tol)
  cases[#cases + 1] = {name = name, got = attn_fn(), py = py_expr, tol = tol or 1e-5}
end

for i = 1, 30 do
  local sa, sb = broadcast_pair()
  local a, b = randt(sa), randt(sb)
  for _, op in ipairs({"add", "sub", "mul", "div", "maximum"}) do
    case(("%s %d"):format(op, i), function() return attn[op](a, b) end,
      ("torch.%s(%s, %s)"):format(op, py_tensor(a), py_tensor(b)))
  end
  local p = randt(sa, true)
  case("pow " .. i, function() return p ^ b end, ("torch.pow(%s, %s)"):format(py_tensor(p), py_tensor(b)))
end

for i = 1, 20 do
  local shape = {rint(1, 4), rint(1, 6), rint(1, 7)}
  local x = randt(shape)
  for _, op in ipairs({"exp", "tanh", "sigmoid", "relu"}) do
    case(op .. " " .. i, function() return x[op](x) end, ("torch.%s(%s)"):format(op, py_tensor(x)))
  end
  case("gelu " .. i, function() return x:gelu() end, ("torch.nn.functional.gelu(%s)"):format(py_tensor(x)))
  local d = rint(1, 3)
  case("softmax " .. i, function() return x:softmax(d) end,
    ("torch.softmax(%s, dim=%d)"):format(py_tensor(x), d - 1), 1e-6)
  case("log_softmax " .. i, function() return x:log_softmax(-d) end,
    ("torch.log_softmax(%s, dim=%d)"):format(py_tensor(x), -d), 1e-5)
  case("sum " .. i, function() return x:sum(d) end, ("%s.sum(dim=%d)"):format(py_tensor(x), d - 1))
  case("mean keepdim " .. i, function() return x:mean(d, true) end,
    ("%s.mean(dim=%d, keepdim=True)"):format(py_tensor(x), d - 1))
  case("max " .. i, function() return (x:max(d)) end, ("%s.max(dim=%d).values"):format(py_tensor(x), d - 1))
  case("var " .. i, function() return x:var(d) end, ("%s.var(dim=%d)"):format(py_tensor(x), d - 1), 1e-4)
  case("tril " .. i, function() return attn.tril(x, d - 2) end,
    ("torch.tril(%s, %d)"):format(py_tensor(x), d - 2))
end

for i = 1, 25 do
  local m, k, n = rint(1, 9), rint(1, 9), rint(1, 9)
  local batch_a = rand01() < 0.5 and {rint(1, 3)} or {}
  local batch_b = rand01() < 0.5 and {rint(1, 3)} or {}
  if #batch_a == 1 and #batch_b == 1 and batch_a[1] ~= batch_b[1] then batch_b[1] = 1 end
  local sa, sb = {}, {}
  for _, s in ipairs(batch_a) do sa[#sa + 1] = s end
  sa[#sa + 1] = m
  sa[#sa + 1] = k
  for _, s in ipairs(batch_b) do sb[#sb + 1] = s end
  sb[#sb + 1] = n
  sb[#sb + 1] = k
  local a, bt = randt(sa), randt(sb)
  -- b is a transposed (non-contiguous) view
  case("matmul " .. i, function() return a:matmul(bt:transpose(-1, -2)) end,
    ("torch.matmul(%s, %s.transpose(-1, -2))"):format(py_tensor(a), py_tensor(bt)), 1e-4)
end

for i = 1, 10 do
  local x, y = randt({rint(1, 3), 4}), randt({rint(1, 3), 4})
  case("cat " .. i, function() return attn.cat({x, y}, 1) end,
    ("torch.cat([%s, %s], 0)"):format(py_tensor(x), py_tensor(y)), 0)
end

-- RNG streams: bit-exact
for i, spec in ipairs({{0, 5}, {1, 16}, {42, 17}, {123, 6}, {7, 100}, {99999, 33}}) do
  local seed, n = spec[1], spec[2]
  case("randn seed " .. seed, function() attn.manual_seed(seed); return attn.randn(n) end,
    ("(torch.manual_seed(%d), torch.randn(%d))[1]"):format(seed, n), 0)
  case("rand seed " .. seed, function() attn.manual_seed(seed); return attn.rand(n) end,
    ("(torch.manual_seed(%d), torch.rand(%d))[1]"):format(seed, n), 0)
  local _ = i
end

describe("live oracle (torch " .. (have_torch() and "present" or "absent") .. ")", function()
  if not have_torch() then
    it("is skipped", function() pending("torch is not installed for " .. PY .. ": live-oracle cases skipped") end)
    return
  end
  -- one python process computes every expected result
  local lines = {"import torch", "def out(t):", "    t = t.detach().float().reshape(-1).tolist()",
    "    print('{' + ','.join(repr(float(v)).replace('nan', '0/0').replace('inf', 'math.huge') for v in t) + '},')",
    "print('return {')"}
  for _, c in ipairs(cases) do lines[#lines + 1] = "out(" .. c.py .. ")" end
  lines[#lines + 1] = "print('}')"
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
  local p = assert(io.popen(PY .. " " .. path .. " 2>&1"))
  local out = p:read("a")
  p:close()
  os.remove(path)
  local chunk = load(out, "torch", "t", {math = math})
  local expected = chunk and chunk()

  it("torch ran every case", function()
    assert.is_table(expected, out:sub(1, 500))
    assert.equal(#cases, #expected)
  end)
  for i, c in ipairs(cases) do
    it(c.name, function()
      local e = assert(expected and expected[i], "torch gave no result")
      local g = c.got:reshape(c.got:numel()):totable()
      if type(g) == "number" then g = {g} end
      assert.equal(#e, #g)
      for j = 1, #e do
        local want = attn.tensor{e[j]}[1] -- rounded to float32 like ours
        local ok = (want ~= want and g[j] ~= g[j]) or math.abs(g[j] - want) <= c.tol * (1 + math.abs(want))
        if not ok then error(("%s: element %d is %.9g, torch says %.9g"):format(c.name, j, g[j], want)) end
      end
    end)
  end
end)
