--- attn: a Lua-scriptable attention toolkit.
-- `local attn = require "attn"` gives this table; nothing is made global.
-- The tensor engine is the C module attn.core; this file adds what is
-- easier to write in Lua and hands back one flat namespace.
local core = require "attn.core"

local attn = {}
for name, fn in pairs(core) do
  if name:sub(1, 1) ~= "_" then attn[name] = fn end
end

attn._VERSION = "attn " .. core.info().version

--- Tensor methods defined in Lua, shared with the C ones (t:name(...)).
local methods = core._methods

--- t:type(): "attn.Tensor", like the userdata's __name.
function methods.type() return "attn.Tensor" end

return attn
