-- The specs of a user's model, run from this folder with
--     busted --lua=lua5.4        (or plain `busted`: .busted sets lua5.4)
-- busted finds src/tiny_attention.lua on its default lpath (./src/?.lua).
local attn = require "attn"
local TinyAttention = require "tiny_attention"
local golden = dofile("spec/fixtures/tiny_attention.lua") -- from PyTorch, same seed

-- float32 against torch's float32: agree to a few ulps, so 1e-5 is ample
local function close(expected, actual, tol)
  local ok = attn.allclose(actual, attn.tensor(expected), {rtol = tol or 1e-5, atol = tol or 1e-5})
  assert(ok, ("not within %g of the fixture:\n%s"):format(tol or 1e-5, tostring(actual)))
end

describe("TinyAttention", function()
  local model, x
  before_each(function()
    attn.manual_seed(0) -- torch's generator: same weights and input as the fixture
    model = TinyAttention(4)
    x = attn.randn(2, 3, 4)
  end)

  it("takes its input and weights from the seed as torch does", function()
    close(golden.x, x, 0)
  end)

  it("gives [B, T, d] outputs and causal weights whose rows sum to 1", function()
    local y, w = model(x)
    assert.are.same({2, 3, 4}, {y:size()}) -- torch: y.shape == (2, 3, 4)
    assert.is_true(attn.allclose(w:sum(-1), attn.ones(2, 3)))
    assert.are.equal(0, w[1][1][2]) -- nothing from the future (a number: t[i][j][k] is one element)
  end)

  it("matches PyTorch's output, weights and gradient", function()
    local y, w = model(x)
    close(golden.y, y)
    close(golden.w, w)
    y:sum():backward()
    close(golden.q_grad, model.q.weight.grad)
  end)

  it("has gradients that match finite differences", function()
    local x64 = attn.randn(1, 3, 4):requires_grad_()
    assert.is_true(attn.gradcheck(function(inp) return (model(inp)) end, {x64}))
  end)
end)
