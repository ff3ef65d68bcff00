-- SPDX-License-Identifier: MIT

--- Helpers shared by the specs that run programs and touch files: shell
-- quoting, whole-file reads and writes, scratch directories and running a
-- command for its exit status and output.
local M = {}

--- The source tree (ATTN_SOURCE_DIR, set by spec/tests.cmake; else ".").
M.SRC = os.getenv("ATTN_SOURCE_DIR") or "."

--- s (any value, through tostring) quoted for the shell.
function M.q(s) return "'" .. (tostring(s):gsub("'", [['\'']])) .. "'" end

--- The bytes of the file at path (raises if it cannot be opened).
function M.readfile(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

--- Writes s to the file at path, replacing it.
function M.writefile(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

--- Whether a file can be opened for reading at path.
function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

--- A new empty directory (mktemp -d); in_memory: in /dev/shm where there
-- is one (specs that write thousands of small files).
function M.tmpdir(in_memory)
  local p = assert(io.popen(in_memory and "mktemp -d -p /dev/shm 2>/dev/null || mktemp -d" or "mktemp -d"))
  local d = p:read("l")
  p:close()
  assert(d and d ~= "", "mktemp -d failed")
  return d
end

--- Removes the directory tree at d.
function M.rmtree(d) os.execute("rm -rf " .. M.q(d)) end

--- The names in directory d (ls -A), sorted.
function M.listing(d)
  local p = assert(io.popen("ls -A " .. M.q(d)))
  local out = {}
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  table.sort(out)
  return out
end

--- The size in bytes of the file at path (nil when it cannot be opened).
function M.file_size(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local n = f:seek("end")
  f:close()
  return n
end

--- Runs a shell command with stderr joined to stdout; returns its exit
-- status (128 + the signal when killed) and its output.
function M.sh(cmd)
  local out = os.tmpname()
  local _, how, code = os.execute("(" .. cmd .. ") >" .. M.q(out) .. " 2>&1")
  local text = M.readfile(out)
  os.remove(out)
  return how == "exit" and code or 128 + code, text
end

--- Runs a shell command with stdin from the text stdin (empty when nil)
-- and stdout and stderr apart; returns {out =, err =, code =} (code: the
-- exit status, 128 + the signal when killed).
function M.capture(cmd, stdin)
  local inp, out, err = os.tmpname(), os.tmpname(), os.tmpname()
  M.writefile(inp, stdin or "")
  local _, how, code = os.execute(("(%s) <%s >%s 2>%s"):format(cmd, M.q(inp), M.q(out), M.q(err)))
  local r = { out = M.readfile(out), err = M.readfile(err), code = how == "exit" and code or 128 + code }
  os.remove(inp)
  os.remove(out)
  os.remove(err)
  return r
end

--- The Python the specs ask (ATTN_PYTHON; else Debian's, which has torch).
M.PY = os.getenv("ATTN_PYTHON") or "/usr/bin/python3"

--- Whether M.PY can import the Python module mod (torch, numpy).
function M.python_has(mod)
  return (M.sh(M.q(M.PY) .. " -c " .. M.q("import " .. mod))) == 0
end

--- The value of the environment variable name (spec/tests.cmake sets it);
-- when it is unset or empty, nil after a pending describe(title) that says
-- so (b = {describe =, pending =}), and the spec returns.
function M.env_or_pending(b, name, title)
  local v = os.getenv(name)
  if v and v ~= "" then return v end
  b.describe(title, function()
    b.pending(name .. " is not set; run this spec through ctest (spec/tests.cmake sets it)")
  end)
end

--- This process's resident set size in kB (nil without /proc).
function M.rss_kb()
  local f = io.open("/proc/self/status")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)"))
end

--- Whether the program prog is on PATH.
function M.have(prog) return (M.sh("command -v " .. M.q(prog))) == 0 end

return M
