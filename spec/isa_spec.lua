-- SPDX-License-Identifier: MIT
-- Kernel families (issue 19): attn.info() reports them, attn.set_isa
-- switches them, and every family this CPU supports computes the same
-- results as the portable one within the kernels' tolerances.
local attn = require "attn"

local function max_diff(a, b)
  return (a - b):abs():max():item()
end

describe("kernel families", function()
  local info = attn.info()
  local start = info.isa
  local families = {}
  for f in info.isa_available:gmatch("[^,]+") do families[#families + 1] = f end

  after_each(function() attn.set_isa(start) end)

  it("are reported by attn.info()", function()
    assert.is_string(info.isa)
    assert.is_string(info.isa_best)
    assert.equals(info.isa_best, families[1]) -- widest first
    assert.equals("portable", families[#families])
    local found = false
    for _, f in ipairs(families) do found = found or f == info.isa end
    assert.is_true(found)
    assert.is_string(info.cpu)
    if os.getenv("ATTN_ISA") and os.getenv("ATTN_ISA") ~= "" then
      assert.equals(os.getenv("ATTN_ISA"), info.isa_requested)
      if os.getenv("ATTN_ISA") ~= info.isa and os.getenv("ATTN_ISA") ~= "auto" then assert.is_string(info.isa_note) end
    end
  end)

  it("switch with attn.set_isa and refuse what the CPU lacks", function()
    for _, f in ipairs(families) do
      attn.set_isa(f)
      assert.equals(f, attn.info().isa)
    end
    attn.set_isa()
    assert.equals(info.isa_best, attn.info().isa)
    local ok, err = pcall(attn.set_isa, "sse9")
    assert.is_false(ok)
    assert.matches("set_isa: unknown family 'sse9'", err)
    for _, f in ipairs({"avx512", "avx2"}) do
      if not info.isa_available:find(f, 1, true) then
        ok, err = pcall(attn.set_isa, f)
        assert.is_false(ok)
        assert.matches("set_isa: family '" .. f .. "'", err)
      end
    end
  end)

  it("give the same SDPA, softmax, reductions and elementwise results", function()
    attn.manual_seed(19)
    local q, k, v = attn.randn(2, 3, 77, 40), attn.randn(2, 3, 90, 40), attn.randn(2, 3, 90, 24)
    local x = attn.randn(5, 33, 70)
    local function run()
      local qg, kg, vg = q:clone():requires_grad_(), k:clone():requires_grad_(), v:clone():requires_grad_()
      local o = attn.scaled_dot_product_attention(qg, kg, vg, {is_causal = true})
      o:mul(o):sum():backward()
      return {o = o:detach(), dq = qg.grad, dk = kg.grad, dv = vg.grad, sm = x:softmax(-1), lsm = x:log_softmax(1),
        sum = x:sum(1), var = x:var(-1), cumsum = x:cumsum(1), max = x:max(1), gelu = attn.F.gelu(x),
        mul = x * x:transpose(1, 3):contiguous():transpose(1, 3) + 1, clamp = x:clamp(-0.5, 0.5)}
    end
    attn.set_isa("portable")
    local ref = run()
    for _, f in ipairs(families) do
      attn.set_isa(f)
      local got = run()
      for name, t in pairs(ref) do
        local tol = (name == "o" or name:sub(1, 1) == "d") and 2e-5 or 1e-6
        assert(max_diff(got[name], t) <= tol * (1 + t:abs():max():item()),
          ("%s: %s differs from portable by %g"):format(f, name, max_diff(got[name], t)))
      end
    end
  end)
end)
