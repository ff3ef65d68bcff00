-- SPDX-License-Identifier: MIT
-- Samples for spec/calling_convention_spec.lua (its header says the form).
local attn = require "attn"
local M = {}

local function x23(salt) return attn.tensor({{0.5, -1.25, 2}, {-0.75, 1.5, 0.25}}):add(salt or 0) end

-- creation (the factories read their own options)
M.zeros = function() return {{2, 3}, "int64", false} end
M.ones = function() return {{3, 2}, "float32", true} end
M.empty = function() return {{2, 0}, "int64", false} end -- 0 elements: nothing uninitialised to compare
M.tensor = function() return {{{1, 2}, {3, 4}}, "float32", true} end
M.zeros_like = function() return {x23(), "int64", false} end
M.ones_like = function() return {x23():long(), "float32", true} end
M.empty_like = function() return {x23():reshape(6, 1):narrow(1, 1, 0), "int64", false} end
M.full = function() return {{2, 3}, 4, "float32", true} end
M.full_like = function() return {x23(), 2, "int64", false} end
M.eye = function() return {2, 3, "int64", false} end
M.arange = function() return {1, 8, 3, "float32", true} end
M.linspace = function() return {-1, 2, 4, "float32", true} end
M.randint = function() return {2, 9, {2, 3}, attn.Generator(5), "float32", false} end
M.randperm = function() return {6, attn.Generator(6), "float32", true} end
M.rand = function() return {{2, 3}, attn.Generator(1), true} end
M.randn = function() return {{3}, attn.Generator(2), false} end
M.rand_like = function() return {x23(), true, attn.Generator(3)} end
M.randn_like = function() return {x23(), false, attn.Generator(4)} end
-- in-place samplers
M.bernoulli = function() return {attn.tensor({0.2, 0.5, 0.9, 0.1}), attn.Generator(3)} end
M.bernoulli_ = function() return {attn.zeros(2, 3), 0.3, attn.Generator(4)} end
M.exponential_ = function() return {attn.zeros(2, 3), 2.5, attn.Generator(5)} end
M.normal_ = function() return {attn.zeros(2, 3), 1.5, 0.5, attn.Generator(6)} end
M.uniform_ = function() return {attn.zeros(2, 3), -2, 3, attn.Generator(7)} end
M.random_ = function() return {attn.zeros(2, 3), 2, 9, attn.Generator(8)} end
-- shape and conversion
M.size = function() return {x23(), 2} end
M.stride = function() return {x23(), 1} end
M.squeeze = function() return {x23():reshape(2, 1, 3), 2} end
M.slice = function() return {x23(), 2, 1, 3, 2} end
M.type = function() return {x23(), "int64"} end
M.tostring = function() return {x23(), ", note"} end
M.to = function() return {x23(), "cpu", "int64", false, true} end
local saved -- a file to load, written once a run (in the build tree: no temporary left behind)
M.load = function()
  if not saved then
    saved = (os.getenv("ATTN_BUILD_DIR") or ".") .. "/cc_load_sample.safetensors"
    attn.save({w = x23()}, saved)
  end
  return {saved, "safetensors"}
end
-- autograd: the gradient the call leaves in the leaf is compared
local leaf
M.backward = {
  args = function()
    leaf = attn.tensor({1.0, -2.0, 3.0}):requires_grad_()
    return {leaf:mul(leaf), attn.tensor({0.5, 1.0, 2.0}), true}
  end,
  call = function(y, ...) y:backward(...); return leaf.grad end,
}
M.requires_grad_ = {
  args = function() return {x23(), false} end,
  view = function(t) return {t, t.requires_grad} end,
}

return M
