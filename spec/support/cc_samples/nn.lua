-- SPDX-License-Identifier: MIT
-- Samples for spec/calling_convention_spec.lua (its header says the form):
-- attn.nn's classes (args[1] stands for self: the spec calls the class),
-- their methods (args[1] is the instance) and functions.
local attn = require "attn"
local nn = require "attn.nn"
local M = {}

local function x23(salt) return attn.tensor({{0.5, -1.25, 2}, {-0.75, 1.5, 0.25}}):add(salt or 0) end
local function seeded(f) return function(...) attn.manual_seed(1); return f(...) end end

M["nn.Linear.init"] = function() return {true, 3, 2, false} end
M["nn.Embedding.init"] = function()
  return {true, 5, 3, 2, 1.5, 1.0, false, false, attn.arange(15):float():reshape(5, 3)}
end
M["nn.Embedding.from_pretrained"] = function()
  return {attn.arange(12):float():reshape(4, 3), false, -1, 2.0, 1.0, false, false}
end
M["nn.LayerNorm.init"] = function() return {true, {3}, 1e-3, false} end
M["nn.Dropout.init"] = function() return {true, 0.25, true} end
M["nn.ReLU.init"] = function() return {true, true} end
M["nn.GELU.init"] = function() return {true, "tanh"} end
M["nn.Softmax.init"] = function() return {true, 2} end
M["nn.LogSoftmax.init"] = function() return {true, -1} end
M["nn.SiLU.init"] = function() return {true, true} end
M["nn.Mish.init"] = function() return {true, true} end
M["nn.LeakyReLU.init"] = function() return {true, 0.2, true} end
M["nn.ELU.init"] = function() return {true, 0.5, true} end
M["nn.Softplus.init"] = function() return {true, 2, 10} end
M["nn.GRUCell.init"] = function() return {true, 3, 2, false} end
M["nn.LSTMCell.init"] = function() return {true, 3, 2, false} end
M["nn.GRUCell.forward"] = function() return {seeded(nn.GRUCell)(3, 2), x23(), x23(1):narrow(2, 1, 2)} end
M["nn.LSTMCell.forward"] = function()
  return {seeded(nn.LSTMCell)(3, 2), x23(), {x23(1):narrow(2, 1, 2), x23(2):narrow(2, 2, 2)}}
end
M["nn.Conv1d.init"] = function() return {true, 4, 6, 3, 2, 1, 2, 2, false, "reflect"} end
M["nn.RNN.init"] = function() return {true, 3, 4, 2, "relu", false, true, 0.5, true} end
M["nn.GRU.init"] = function() return {true, 3, 4, 2, false, true, 0.5, true} end
M["nn.LSTM.init"] = function() return {true, 3, 4, 2, false, true, 0.5, true, 2} end
M["rnn.RNNBase.forward"] = function()
  return {seeded(nn.GRU)(3, 2, 1, true, true), x23():reshape(1, 2, 3), x23(1):narrow(2, 1, 2):narrow(1, 1, 1):reshape(1, 1, 2)}
end

-- nn.utils.rnn (lists of sequences; lengths 1-based counts)
local function seqs() return {x23(), x23(1):narrow(1, 1, 1)} end
M["nn.utils.rnn.pad_sequence"] = function() return {seqs(), true, -1.5} end
M["nn.utils.rnn.pack_padded_sequence"] = {
  args = function() return {attn.stack({x23(), x23(1)}, 2), {1, 2}, false, false} end,
  view = function(p) return {p.data, p.batch_sizes, p.sorted_indices, p.unsorted_indices} end,
}
M["nn.utils.rnn.pad_packed_sequence"] = function()
  local p = nn.utils.rnn.pack_sequence(seqs())
  return {p, true, -2.0, 3}
end
M["nn.utils.rnn.pack_sequence"] = {
  args = function() return {{x23(1):narrow(1, 1, 1), x23()}, false} end,
  view = function(p) return {p.data, p.batch_sizes, p.sorted_indices, p.unsorted_indices} end,
}

-- Module's methods, on a small model
local function model()
  attn.manual_seed(2)
  local m = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))
  m:register_buffer("steps", attn.zeros(1))
  return m
end
local function names(iter_or_list)
  local out = {}
  if type(iter_or_list) == "function" then
    for k in iter_or_list do out[#out + 1] = k end
  else
    for i, v in ipairs(iter_or_list) do out[i] = type(v) == "table" and v[1] or v end
  end
  return out
end
M["nn.Module.register_buffer"] = {
  args = function() return {model(), "extra", attn.ones(2), false} end,
  view = function() return true end, -- checked through state_dict below
}
M["nn.Module.named_parameters"] = {args = function() return {model(), "net", false} end,
  view = function(r) return names(r) end}
M["nn.Module.parameters"] = {args = function() return {model(), false} end, view = function(r) return #r end}
M["nn.Module.named_buffers"] = {args = function() return {model(), "net", true} end,
  view = function(r) return names(r) end}
M["nn.Module.buffers"] = {args = function() return {model(), false} end, view = function(r) return #r end}
M["nn.Module.named_modules"] = {args = function() return {model(), "root"} end, view = function(r) return names(r) end}
M["nn.Module.train"] = {args = function() return {model(), false} end, view = function(m) return m.training end}
M["nn.Module.requires_grad_"] = {args = function() return {model(), false} end,
  view = function(m) return m:parameters()[1].requires_grad end}
M["nn.Module.zero_grad"] = {
  args = function()
    local m = model()
    m(x23()):sum():backward()
    return {m, false}
  end,
  call = function(m, ...) m:zero_grad(...); return m end,
  view = function(m) return m:parameters()[1].grad end,
}
M["nn.Module.state_dict"] = {args = function() return {model(), "p.", true} end,
  view = function(sd) return nn.state_dict_keys(sd) end}
M["nn.Module.load"] = {
  args = function()
    local path = (os.getenv("ATTN_BUILD_DIR") or "/tmp") .. "/cc_module_load.safetensors"
    local m = model()
    m:save(path)
    attn.manual_seed(5)
    return {nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1)), path, false}
  end,
}
M["nn.Module.to"] = {args = function() return {model(), "cpu", "float64", false} end,
  view = function(m) return m:parameters()[1].dtype end}
M["nn.Parameter"] = {args = function() return {x23(), false} end,
  view = function(p) return {p, p.requires_grad} end}
M["nn.DistributedDataParallel.init"] = {
  args = function() return {true, seeded(nn.Linear)(2, 2), false, 4} end,
  view = function(d) return {d.bucket_mb, d.broadcast_buffers, d.module.weight} end,
}
M["nn.utils.clip_grad_norm_"] = function()
  local w = attn.tensor({3.0, -4.0}):requires_grad_(true)
  w.grad = attn.tensor({3.0, -4.0})
  return {{w}, 1.0, 1, false}
end

return M
