-- SPDX-License-Identifier: MIT

--- attn.base: the flat attn table without its submodules: the C engine's
-- functions (attn.core), the tensor methods written in Lua and the ops of
-- attn/ops.lua.  Submodules (attn.nn, attn.F, ...) require this file, not
-- "attn", so no file requires the package back; attn/init.lua returns this
-- same table with the submodules added on top.
local core = require "attn.core"

local attn = {}

for name, fn in pairs(core) do
  if name:sub(1, 1) ~= "_" then attn[name] = fn end
end

attn._VERSION = "attn " .. core.info().version

--- Tensor methods defined in Lua, shared with the C ones (t:name(...)).
attn._methods = core._methods
local methods = core._methods

--- t:type(): "attn.Tensor", like the userdata's __name.
function methods.type() return "attn.Tensor" end

-- einsum, multi-dim reductions, roll, diag, cdist, ... (attn/ops.lua)
require("attn.ops")._install(attn, methods)

return attn
