-- SPDX-License-Identifier: MIT

--- Helpers shared by the specs that check error messages.
local M = {}

--- The message (a string) of the error f(...) raises; fails when f returns.
function M.message(f, ...)
  local ok, msg = pcall(f, ...)
  assert(not ok, "expected an error")
  return tostring(msg)
end

--- Asserts that f(...) raises an error whose message holds each plain-text
-- piece (pieces: one string or a list of them); returns the message.
function M.raises(pieces, f, ...)
  if type(pieces) == "string" then pieces = { pieces } end
  local ok, msg = pcall(f, ...)
  assert(not ok, "expected an error mentioning " .. table.concat(pieces, ", "))
  msg = tostring(msg)
  for _, p in ipairs(pieces) do
    assert(msg:find(p, 1, true), ("message %q lacks %q"):format(msg, p))
  end
  return msg
end

return M
