-- SPDX-License-Identifier: MIT
-- Memory figures of this process for the benchmark scripts (Linux /proc):
--   local P = dofile(<this folder> .. "procstat.lua")
--   P.reset_peak()     resets VmHWM through /proc/self/clear_refs; false
--                      where the kernel does not allow it
--   P.kb("VmHWM")      a field of /proc/self/status in kB (nil without /proc)
local P = {}

function P.kb(field)
  local f = io.open("/proc/self/status")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return tonumber(s:match(field .. ":%s*(%d+)"))
end

function P.reset_peak()
  local f = io.open("/proc/self/clear_refs", "w")
  if not f then return false end
  local ok = f:write("5")
  f:close()
  return ok ~= nil
end

return P
