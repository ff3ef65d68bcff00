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
M.nonzero = function() return {x23():gt(0), true} end
M.diag = function() return {x23(), 1} end
M.cdist = function() return {x23():reshape(3, 2), x23(1):reshape(3, 2), 1, "donot_use_mm_for_euclid_dist"} end
M.repeat_interleave = function() return {x23(), idx({1, 2}), 1, 3} end
M.linear = function() return {x23(), x23(1), attn.tensor({1.0, -1.0})} end
M.one_hot = function() return {idx({1, 3, 2}), 4} end
M.embedding = function() return {x23(), idx({{1, 2}, {2, 2}}), 2} end

return M
