-- SPDX-License-Identifier: MIT
-- Samples for spec/calling_convention_spec.lua (its header says the form).
local attn = require "attn"
local M = {}

M["dataset.random_split"] = {
  args = function() return {require("attn.dataset").TensorDataset(attn.arange(6)), {4, 2}, attn.Generator(3)} end,
  call = function(...) return require("attn.dataset").random_split(...) end,
  view = function(...)
    local t = {}
    for i, s in ipairs({...}) do t[i] = s.indices end
    return t
  end,
}

-- torch.device(type, index=None)
M["device.device"] = {
  args = function() return {"cpu", 1} end,
  call = function(...) return require("attn.device").device(...) end,
  view = function(d) return tostring(d) end,
}
return M
