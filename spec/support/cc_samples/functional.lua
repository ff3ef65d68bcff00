-- SPDX-License-Identifier: MIT
-- Samples for spec/calling_convention_spec.lua (its header says the form):
-- attn.F, the activations, losses, init, copy, conv and gradcheck.
local attn = require "attn"
local M = {}

local function x23(salt) return attn.tensor({{0.5, -1.25, 2}, {-0.75, 1.5, 0.25}}):add(salt or 0) end
local function idx(t) return attn.tensor(t):long() end
local function logp() return x23():log_softmax(2) end
local function probs() return x23(0.5):softmax(2) end

-- activations (attn.F and attn.activation take the same arguments)
local ACTIVATIONS = {
  silu = function() return {x23(), true} end,
  mish = function() return {x23(), true} end,
  leaky_relu = function() return {x23(), 0.2, true} end,
  elu = function() return {x23(), 0.5, true} end,
  softplus = function() return {x23(), 2, 1} end,
}
for name, f in pairs(ACTIVATIONS) do M["activation." .. name] = f end
M["F.silu"] = ACTIVATIONS.silu
M["F.mish"] = ACTIVATIONS.mish

M["F.normalize"] = function() return {x23(), 1, 1, 1e-6} end
M["F.pad"] = function() return {x23(), {1, 2}, "constant", 0.5} end
M["F.cosine_similarity"] = function() return {x23(), x23(1), 1, 1e-6} end
local function conv_args()
  local x = attn.arange(10):float():reshape(1, 2, 5):mul(0.1)
  local w = attn.arange(12):float():reshape(3, 2, 2):mul(-0.05)
  return {x, w, attn.tensor({0.5, -0.5, 1.0}), 2, 1, 2, 1}
end
M["F.conv1d"] = conv_args
M["conv.conv1d"] = conv_args

-- losses: every argument given (size_average/reduce decide the reduction
-- when given, as in torch)
local function w4() return attn.tensor({1.0, 0.5, 2.0}) end
M["F.nll_loss"] = function() return {logp(), idx({1, 3}), w4(), false, 2, true, "mean"} end
M["F.cross_entropy"] = function() return {x23(), idx({1, 3}), w4(), true, 2, true, "sum", 0.1} end
M["F.mse_loss"] = function() return {x23(), x23(1), false, true, "mean"} end
M["F.l1_loss"] = function() return {x23(), x23(0.5), true, false, "sum"} end
M["F.smooth_l1_loss"] = function() return {x23(), x23(0.5), false, true, "mean", 0.25} end
M["F.huber_loss"] = function() return {x23(), x23(1.5), "sum", 0.5} end
M["F.binary_cross_entropy"] = function() return {x23():sigmoid(), probs(), w4(), false, true, "mean"} end
M["F.binary_cross_entropy_with_logits"] = function()
  return {x23(), probs(), w4(), true, true, "sum", attn.tensor({2.0, 1.0, 0.5})}
end
M["F.kl_div"] = function() return {logp(), x23(1):log_softmax(2), false, true, "mean", true} end
M["F.ring_attention"] = function()
  local q = x23():reshape(1, 2, 3)
  return {attn.cat({q, q:flip(2)}, 2), attn.cat({q:mul(0.5), q}, 2), attn.cat({q, q:neg()}, 2), true, 0.5, true}
end

-- the loss classes (args[1] stands for self: the spec calls the class)
M["losses.CrossEntropyLoss.init"] = function() return {true, w4(), false, 2, true, "mean", 0.1} end
M["losses.NLLLoss.init"] = function() return {true, w4(), true, 3, false, "sum"} end
M["losses.KLDivLoss.init"] = function() return {true, false, true, "batchmean", true} end
M["losses.MSELoss.init"] = function() return {true, false, true, "mean"} end
M["losses.L1Loss.init"] = function() return {true, true, false, "sum"} end
M["losses.SmoothL1Loss.init"] = function() return {true, false, true, "none", 0.5} end
M["losses.HuberLoss.init"] = function() return {true, "sum", 0.25} end
M["losses.BCELoss.init"] = function() return {true, w4(), false, true, "mean"} end
M["losses.BCEWithLogitsLoss.init"] = function() return {true, w4(), true, true, "sum", attn.tensor({2.0})} end

-- init: a fresh tensor filled in place, with a generator where one is taken
M["init.calculate_gain"] = function() return {"leaky_relu", 0.2} end
M["init.uniform_"] = function() return {attn.empty(3, 4), -0.5, 2.0, attn.Generator(3)} end
M["init.normal_"] = function() return {attn.empty(3, 4), 1.0, 0.5, attn.Generator(4)} end
M["init.xavier_uniform_"] = function() return {attn.empty(3, 4), 2.0, attn.Generator(5)} end
M["init.xavier_normal_"] = function() return {attn.empty(3, 4), 0.5, attn.Generator(6)} end
M["init.kaiming_uniform_"] = function() return {attn.empty(3, 4), 0.1, "fan_out", "relu", attn.Generator(7)} end
M["init.kaiming_normal_"] = function() return {attn.empty(3, 4), 0.2, "fan_out", "leaky_relu", attn.Generator(8)} end
M["init.sparse_"] = function() return {attn.empty(4, 3), 0.5, 0.02, attn.Generator(9)} end

M["copy.deepcopy"] = function() return {{x23(), {a = x23(1)}}, {}} end
M["gradcheck.gradcheck"] = function()
  return {function(x) return (x * x):sum() end, {x23():requires_grad_(true)}, 1e-3, 1e-2, 1e-2, true, 8, 7}
end

return M
