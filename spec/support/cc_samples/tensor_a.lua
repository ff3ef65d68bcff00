-- SPDX-License-Identifier: MIT
-- Samples for spec/calling_convention_spec.lua (its header says the form).
local attn = require "attn"
local M = {}

local function x23(salt) return attn.tensor({{0.5, -1.25, 2}, {-0.75, 1.5, 0.25}}):add(salt or 0) end
local function idx(t) return attn.tensor(t, {dtype = "int64"}) end

-- reductions
M.sum = function() return {x23(), 2, true} end
M.mean = function() return {x23(), 1, true} end
M.var = function() return {x23(), 2, false, true, nil, n = 5} end
M.std = function() return {x23(), 1, false, true, nil, n = 5} end
M.amax = function() return {x23(), 2, true} end
M.amin = function() return {x23(), 1, true} end
M.norm = function() return {x23(), 1, 2, true} end
M.kthvalue = function() return {x23(), 2, 1, true} end
M.topk = function() return {x23(), 2, 2, false, true} end
M.sort = function() return {x23(), 1, true, true} end
-- arithmetic and elementwise
M.add_ = function() return {x23(), x23(1), 2} end
M.sub_ = function() return {x23(), x23(1), 0.5} end
M.clamp_ = function() return {x23(), -0.5, 1} end
M.gelu_ = function() return {x23(), "tanh"} end
-- indexing and scatter
M.index_add = function() return {x23(), 1, idx({2, 1}), x23(1), 3} end
M.index_add_ = function() return {x23(), 2, idx({3, 1, 2}), x23(1), -2} end
M.scatter_reduce = function() return {x23(), 2, idx({{1, 1, 3}, {2, 2, 2}}), x23(1), "amax", false} end
M.scatter_reduce_ = function() return {x23(), 2, idx({{3, 1, 3}, {2, 1, 2}}), x23(1), "sum", false} end
-- out_int32 = true is refused (no int32 dtype): the default is given
M.bucketize = function() return {x23(), attn.tensor({-1.0, 0.25, 1.5}), true, false} end
M.nonzero = function() return {x23():gt(0), true} end
M.diag = function() return {x23(), 1} end
M.cdist = function() return {x23():reshape(3, 2), x23(1):reshape(3, 2), 1, "donot_use_mm_for_euclid_dist"} end
M.repeat_interleave = function() return {x23(), idx({1, 2}), 1, 3} end
M.linear = function() return {x23(), x23(1), attn.tensor({1.0, -1.0})} end
M.one_hot = function() return {idx({1, 3, 2}), 4} end
M.embedding = function() return {x23(), idx({{1, 2}, {2, 2}}), 2} end
-- attention: causal, bottom-right aligned (a mask excludes is_causal); dropout
-- drawn from the sample's generator
M.scaled_dot_product_attention = function()
  local q = x23():reshape(1, 2, 3)
  local k = attn.cat({x23(1), x23(-1):flip(1)}, 1):reshape(1, 4, 3)
  local v = attn.cat({x23(2), x23(0.5)}, 1):reshape(1, 3, 4):transpose(2, 3)
  return {q, k, v, nil, 0.25, true, 0.7, true, nil, "bottom_right", attn.Generator(5), true, n = 12}
end
M.causal_mask = function() return {3, 5, true} end

return M
