-- SPDX-License-Identifier: MIT
-- float16, bfloat16 and float64 as storage dtypes (issue 29): conversions
-- rounding as torch 1.13 (spec/fixtures/storage_dtypes.lua, written by
-- scripts/fixtures/gen_storage_dtypes.py), the torch idioms x:half(),
-- x:to(...), x:type(...), x:cpu(), printing, data movement, save/load, and
-- every compute op refusing them with one clear message (attn computes in
-- float32).
local attn = require("attn")
local fixture = require("spec.support.fixture")
local FX = fixture.load("storage_dtypes")

local STORAGE_MSG = "a storage dtype (attn computes in float32): convert it with x:float()"

-- exact comparison of two lists of numbers: NaN matches NaN, -0 is not 0
local function same_values(got, want, what)
  assert.are.equal(#want, #got, what .. ": length")
  for i = 1, #want do
    local g, w = got[i], want[i]
    local ok
    if w ~= w then
      ok = g ~= g
    elseif w == 0 then
      ok = g == 0 and 1 / g == 1 / w
    else
      ok = g == w
    end
    if not ok then error(("%s: element %d is %s, torch gives %s"):format(what, i, tostring(g), tostring(w)), 2) end
  end
end

local function f32(list) return attn.tensor(list) end -- Lua floats: float32
local function f64(list) return attn.tensor(list, {dtype = "float64"}) end
local function i64(list) return attn.tensor(list, {dtype = "int64"}) end

describe("storage dtypes convert as torch 1.13", function()
  for _, name in ipairs({"f16", "bf16"}) do
    local dt = name == "f16" and "float16" or "bfloat16"
    local other = name == "f16" and "bfloat16" or "float16"
    local R = FX[name]
    it(dt .. " from float32 (ties to even, subnormals, overflow, NaN)", function()
      local h = f32(FX.f32):to(dt)
      assert.are.equal(attn[dt], h.dtype)
      same_values(h:float():totable(), R.from_f32, dt .. " from float32")
    end)
    it(dt .. " from float64 (through float, as torch)", function()
      same_values(f64(FX.f64):to(dt):float():totable(), R.from_f64, dt .. " from float64")
    end)
    it(dt .. " from int64", function()
      same_values(i64(FX.i64):to(dt):float():totable(), R.from_i64, dt .. " from int64")
    end)
    it(dt .. " to int64 (truncation), bool (nonzero), float64 and " .. other, function()
      assert.are.same(R.to_i64, f32(R.to_i64_in):to(dt):long():totable())
      assert.are.same(R.to_bool, f32(FX.f32):to(dt):bool():totable())
      local d = f32(FX.f32):to(dt):double()
      assert.are.equal(attn.float64, d.dtype)
      same_values(d:totable(), R.to_f64, dt .. " to float64")
      same_values(f32(FX.f32):to(dt):to(other):float():totable(), R.to_other, dt .. " to " .. other)
    end)
    it(dt .. " of a strided view equals the contiguous conversion", function()
      local x = f32(FX.f32):narrow(1, 1, 84):view(12, 7):t()
      same_values(x:to(dt):float():flatten():totable(), x:contiguous():to(dt):float():flatten():totable(), dt)
      same_values(x:to(dt):t():contiguous():to(other):t():float():flatten():totable(),
        x:to(dt):to(other):float():flatten():totable(), dt .. " strided to " .. other)
    end)
    it(dt .. " from Lua numbers (attn.tensor with a dtype) equals the conversion from float32", function()
      same_values(attn.tensor(FX.f32, {dtype = dt}):float():totable(), R.from_f32, dt .. " from Lua numbers")
    end)
  end
  it("float64 from and to float32, int64", function()
    same_values(f32(FX.f32):double():totable(), FX.f64_from_f32, "float64 from float32")
    same_values(f64(FX.f64):float():totable(), FX.f32_from_f64, "float32 from float64")
    assert.are.same(FX.f64_to_i64, f64(FX.f64_finite):long():totable())
    same_values(i64(FX.i64):double():totable(), FX.i64_to_f64, "float64 from int64")
    same_values(attn.tensor({true, false}):half():float():totable(), FX.bool_to, "float16 from bool")
  end)
end)

describe("storage dtype idioms", function()
  local x = attn.tensor({{1.5, -2.0, 3.0}, {0.5, 4.0, -1.0}})
  it("half, bfloat16, double, float, to, type", function()
    assert.are.equal(attn.float16, x:half().dtype)
    assert.are.equal(attn.bfloat16, x:bfloat16().dtype)
    assert.are.equal(attn.float64, x:double().dtype)
    assert.are.equal(attn.float32, x:half():float().dtype)
    assert.are.equal(attn.float16, x:to("float16").dtype)
    assert.are.equal(attn.float16, x:to("half").dtype)
    assert.are.equal(attn.float16, x:to(attn.half).dtype)
    assert.are.equal(attn.bfloat16, x:to({dtype = "bfloat16"}).dtype)
    assert.are.equal(attn.float64, x:to("cpu", "float64").dtype)
    assert.are.equal(attn.float64, x:type("float64").dtype)
    assert.are.equal(attn.float16, x:type("torch.HalfTensor").dtype)
    assert.are.equal("torch.FloatTensor", x:type())
    assert.are.equal("torch.BFloat16Tensor", x:bfloat16():type())
    assert.are.equal(attn.float64, x:to(x:double()).dtype) -- another tensor's dtype
    local h = x:half()
    assert.are.equal(h, h:half()) -- same dtype: the tensor itself, like torch
    assert.are_not.equal(h, h:to("half", {copy = true}))
    assert.is_true(h:is_floating_point())
    assert.are.equal(2, h:element_size())
    assert.are.equal(8, x:double():element_size())
    assert.is_true(attn.float16.is_floating_point)
    assert.are.equal(attn.float16, attn.half)
    assert.are.equal(attn.float64, attn.double)
  end)
  it("creation with a dtype", function()
    local z = attn.zeros(2, 3, {dtype = "float16"})
    assert.are.equal(attn.float16, z.dtype)
    assert.are.same({{0, 0, 0}, {0, 0, 0}}, z:totable())
    assert.are.same({1, 1}, attn.ones(2, {dtype = "bfloat16"}):totable())
    assert.are.same({0.5, 0.5}, attn.full({2}, 0.5, {dtype = "float64"}):totable())
    assert.are.equal(65504, attn.full({1}, 65519, {dtype = "float16"}):item())
    assert.are.equal(math.huge, attn.full({1}, 65520, {dtype = "float16"}):item())
    local t = attn.tensor({{1, 2}, {3, 4}}, {dtype = "float64"})
    assert.are.equal(attn.float64, t.dtype)
    assert.are.same({{1, 2}, {3, 4}}, t:totable())
    assert.are.equal(0.1, attn.tensor(0.1, {dtype = "float64"}):item()) -- exact double
  end)
  it("devices: cpu is a no-op, cuda a clear error", function()
    assert.are.equal(x, x:cpu())
    assert.are.equal(x, x:to("cpu"))
    assert.are.equal(x, x:to("cpu:0"))
    assert.has_error(function() x:to("cuda") end,
      "to: device 'cuda' is not available: attn runs on the CPU only (write x:to(\"cpu\") or leave the device out)")
    assert.has_error(function() x:to("cuda:0", "float16") end)
    assert.has_error(function() x:cuda() end)
    assert.has_error(function() x:to("float128") end)
  end)
  it("prints as torch, with the dtype suffix", function()
    for _, p in ipairs(FX.prints) do
      assert.are.equal(p.text, tostring(attn.tensor(p.data, {dtype = p.dtype})))
    end
  end)
  it("data movement keeps the dtype and the values", function()
    local h = x:half()
    local function same(a, b) assert.are.same(a:float():totable(), b:totable()) end
    for _, case in ipairs({
      {"view", function(t) return t:view(3, 2) end}, {"reshape", function(t) return t:reshape(6) end},
      {"transpose", function(t) return t:transpose(1, 2) end}, {"t", function(t) return t:t() end},
      {"permute", function(t) return t:permute(2, 1) end}, {"narrow", function(t) return t:narrow(2, 2, 2) end},
      {"select", function(t) return t:select(1, 2) end}, {"expand", function(t) return t:view(2, 1, 3):expand(2, 4, 3) end},
      {"unsqueeze", function(t) return t:unsqueeze(1) end}, {"squeeze", function(t) return t:unsqueeze(1):squeeze(1) end},
      {"flatten", function(t) return t:flatten() end}, {"contiguous", function(t) return t:t():contiguous() end},
      {"clone", function(t) return t:clone() end}, {"cat", function(t) return attn.cat({t, t}, 2) end},
      {"stack", function(t) return attn.stack({t, t}) end}, {"index", function(t) return t[2] end},
      {"index_select", function(t) return t:index_select(2, attn.tensor({3, 1}, {dtype = "int64"})) end},
      {"flip", function(t) return t:flip(1) end}, {"repeat", function(t) return t:repeat_(2, 1) end},
    }) do
      local name, f = case[1], case[2]
      if name ~= "repeat" or h.repeat_ then
        local r = f(h)
        assert.are.equal(attn.float16, r.dtype, name)
        same(r, f(x))
      end
    end
    assert.are.equal(-2.0, h[1][2])
    assert.are.same({1.5, -2.0, 3.0}, h[1]:totable())
  end)
  it("writes round into the storage dtype (index put, fill_, copy_ across dtypes)", function()
    local h = attn.zeros(3, {dtype = "float16"})
    h[1] = 7
    h[2] = 65520
    h[3] = 0.1
    same_values(h:float():totable(), {7, math.huge, 0x1.998p-4}, "index put")
    h:fill_(2049)
    assert.are.same({2048, 2048, 2048}, h:totable())
    h:copy_(attn.tensor({1.5, 2.0, 1e-8}))
    same_values(h:totable(), {1.5, 2.0, 0.0}, "copy_ from float32")
    local f = attn.zeros(3)
    f:copy_(attn.tensor({0.1, 0.2, 0.3}, {dtype = "float64"}))
    assert.are.same(attn.tensor({0.1, 0.2, 0.3}):totable(), f:totable())
    local b = attn.zeros(2, {dtype = "bfloat16"})
    b:copy_(attn.tensor({1 + 2 ^ -8, 3.0}))
    assert.are.same({1.0, 3.0}, b:totable())
  end)
  it("load_state_dict converts into float32 parameters (as torch's copy_); layers refuse a half input", function()
    local l = attn.nn.Linear(3, 2)
    local sd = {}
    for k, v in pairs(l:state_dict()) do sd[k] = (v + 0.1):half() end
    l:load_state_dict(sd)
    assert.are.equal(attn.float32, l.weight.dtype)
    assert.are.same(sd.weight:float():totable(), l.weight:totable())
    local ok, err = pcall(function() return l(attn.ones(4, 3):half()) end)
    assert.is_false(ok)
    assert.matches(STORAGE_MSG, err, 1, true)
  end)
  it("requires_grad is refused with a clear message", function()
    assert.has_error(function() attn.zeros(2, {dtype = "float16"}):requires_grad_() end,
      "requires_grad_: float16 is a storage dtype (attn computes and differentiates in float32): convert it with "
      .. "x:float() and make that require grad")
    local w = attn.ones(2):requires_grad_()
    local ok, err = pcall(function() return w:half() end)
    assert.is_false(ok)
    assert.matches("x requires grad and float16 is a storage dtype", err, 1, true)
    assert.are.equal(attn.float16, w:detach():half().dtype)
  end)
end)

describe("storage dtypes save in their own dtype", function()
  local x = attn.tensor({0.1, 65519, 1e-8, 3.0, -2.5})
  local dir = os.tmpname()
  os.remove(dir)
  it("safetensors: F16, BF16, F64; loading converts to float32 as before", function()
    local path = dir .. ".safetensors"
    attn.save({h = x:half(), b = x:bfloat16(), d = x:double(), f = x}, path)
    local info = attn.safetensors_info(path)
    local dtypes = {}
    for k, e in pairs(info) do dtypes[k] = e.dtype end
    assert.are.same({h = "F16", b = "BF16", d = "F64", f = "F32"}, dtypes)
    local back = attn.load(path)
    os.remove(path)
    assert.are.equal(attn.float32, back.h.dtype)
    assert.are.same(x:half():float():totable(), back.h:totable())
    assert.are.same(x:bfloat16():float():totable(), back.b:totable())
    assert.are.same(x:double():float():totable(), back.d:totable())
    -- a loaded half model converted with :half() saves back as half
    attn.save({w = back.h:half()}, path)
    local again = attn.load(path)
    os.remove(path)
    assert.are.same(back.h:totable(), again.w:totable())
  end)
  it("npy: <f2 and <f8; bfloat16 has no numpy dtype (a clear error)", function()
    local path = dir .. ".npy"
    attn.save(x:half(), path)
    assert.are.same(x:half():float():totable(), attn.load(path):totable())
    attn.save(x:double(), path)
    assert.are.same(x:double():float():totable(), attn.load(path):totable())
    os.remove(path)
    assert.has_error(function() attn.save(x:bfloat16(), path) end)
  end)
end)

describe("compute ops refuse storage dtypes", function()
  it("with the message naming the function and the argument", function()
    local h = attn.ones(2, 3, {dtype = "float16"})
    assert.has_error(function() return h + h end, "add: argument 1 is float16, " .. STORAGE_MSG)
    assert.has_error(function() return attn.ones(2) * attn.ones(2, {dtype = "float64"}) end,
      "mul: argument 2 is float64, " .. STORAGE_MSG)
    assert.has_error(function() return h:sum() end, "sum: argument 1 is float16, " .. STORAGE_MSG)
    assert.has_error(function() return attn.matmul(h, h:t()) end)
    assert.has_error(function() return attn.softmax(h, 1) end)
  end)

  -- The walk: every op of the op table and every public tensor function,
  -- given float16 inputs, either errors with the storage message or gives
  -- the float32 call's answer (data movement), never garbage nor a crash.
  local SKIP = { -- random, in place on shared state, or not tensor functions
    backward = true, manual_seed = true, seed = true, set_num_threads = true, set_isa = true,
    set_default_generator = true, cuda = true, register_hook = true, retain_grad = true,
  }
  local function random_name(n)
    return n:find("rand") or n:find("dropout") or n:find("bernoulli") or n:find("multinomial")
      or n:find("normal") or n:find("uniform") or n:find("exponential") or n:find("random") or n:find("shuffle")
      or n:find("empty")
  end
  local function values(r)
    if attn.is_tensor(r) then return r.dtype == attn.float32 and r:totable() or r:float():totable() end
    return r
  end
  it("walks the op table and the tensor methods with float16 inputs", function()
    local names, seen = {}, {}
    for _, op in ipairs(require("attn.core")._ops) do
      if not seen[op.name] then names[#names + 1], seen[op.name] = op.name, true end
    end
    for k, v in pairs(attn._methods) do
      if type(v) == "function" and k:sub(1, 1) ~= "_" and not seen[k] then names[#names + 1], seen[k] = k, true end
    end
    table.sort(names)
    local bad, refused, worked = {}, 0, 0
    for _, name in ipairs(names) do
      local f = attn._methods[name]
      if f and not SKIP[name] and not random_name(name) then
        for _, nargs in ipairs({1, 2}) do
          local x = attn.tensor({{1.5, -2.0, 3.0}, {0.5, 4.0, -1.0}})
          local h = x:half()
          local ok16, r16 = pcall(f, h, nargs == 2 and h or nil)
          local x2 = attn.tensor({{1.5, -2.0, 3.0}, {0.5, 4.0, -1.0}})
          local ok32, r32 = pcall(f, x2, nargs == 2 and x2 or nil)
          if ok16 then
            worked = worked + 1
            if not ok32 then
              bad[#bad + 1] = name .. "/" .. nargs .. ": float16 worked where float32 failed: " .. tostring(r32)
            elseif attn.is_tensor(r16) and attn.is_tensor(r32) then
              local a, b = values(r16), values(r32)
              if not pcall(assert.are.same, b, a) then
                bad[#bad + 1] = name .. "/" .. nargs .. ": float16 result differs from float32's"
              end
            end
          else
            local msg = tostring(r16)
            if msg:find(STORAGE_MSG, 1, true) or msg:find("is a storage dtype", 1, true) then
              refused = refused + 1
            elseif ok32 then
              bad[#bad + 1] = name .. "/" .. nargs .. ": failed without the storage message: " .. msg
            end
          end
        end
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
    assert(refused > 50, "refused only " .. refused)
    assert(worked > 20, "worked only " .. worked)
  end)
end)
