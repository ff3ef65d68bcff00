-- SPDX-License-Identifier: MIT
-- Cases for the sandbox's own string.rep/find/match/gmatch/gsub and
-- table.concat/insert/move/remove/sort (src/host/sandbox_lib.c).
-- spec/c/test_sandbox_lib.c runs this file in a stock state and in a
-- sandboxed one and compares the transcripts line by line: every result
-- and every error message must be the same.  Returns the transcript.

local out = {}

local function ser(v)
  local t = type(v)
  if t == "string" then return ("%q"):format(v) end
  if t == "number" then return math.type(v) .. ":" .. tostring(v) end
  if t == "table" then
    local parts = {}
    for i = 1, #v do parts[i] = ser(v[i]) end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  return tostring(v)
end

-- Error messages without the "file:line:" of Lua functions raising them.
local function msg(e)
  return (tostring(e):gsub("^[^:]*:%d+: ", ""))
end

local function record(label, ok, ...)
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = ser((select(i, ...))) end
  out[#out + 1] = label .. " -> " .. (ok and table.concat(parts, " ") or "ERROR " .. msg((...)))
end

local function call(label, f, ...) record(label, pcall(f, ...)) end

local subjects = {
  "", "a", "hello world", "  key = value  ", "aaa", "abcabc", "THE (quick) fox",
  "f(a(b)c)d", "x = [[y]] z", "one two  three", "\0a\0b", "%d%%", "abc123def45", "]]]", "a.b-c*d+e?f",
  "hello\nworld\n", "ab\255\128cd",
}
local patterns = {
  "", "a", ".", "%a+", "%d+", "(%a+)", "(%a+)%s*=%s*(%a+)", "^a", "a$", "^$", "()", "()a()",
  "(a*)", "a-b", "a-", ".-", "(.-)%s", "%s*", "[%a_][%w_]*", "[^%s]+", "[a-c]+", "[]]", "[^]]+",
  "[%]]", "[a%-z]", "[-a]", "%bxy", "%b()", "%f[%a]%a+", "%f[%A]", "%f[%z]", "(a)%1", "(%a)%1",
  "((a)(b))", "(h)(e)(l)(l)(o)", "%.", "%%", "%u", "%U+", "%l%l", "%p", "%c", "%x+", "%g+", "%w-%d",
  "a?b", "a?", "x*", "[%d%.]+", "%s+$", "^%s+", "o(r)l?", "[%z]", "%z", "\0", "%q", "[a-]", "[]",
  "%", "[a", "(a", "a)", "%1", "(()a)", "%f", "%fa", "%b", "%bx", "%0", "(a)%2", "((a)%2)", "[%",
  "(.)(.)(.)", "%d?%d?", "^(%d+)", "(%d+)$", "a+$", ".-$", "(.-)$", "[\128-\255]+", "^()", "%S+",
}

for _, s in ipairs(subjects) do
  for _, p in ipairs(patterns) do
    local tag = ("%q %q"):format(s, p)
    call("find " .. tag, string.find, s, p)
    call("find3 " .. tag, string.find, s, p, 3)
    call("find-2 " .. tag, string.find, s, p, -2)
    call("findplain " .. tag, string.find, s, p, 1, true)
    call("match " .. tag, string.match, s, p)
    call("match2 " .. tag, string.match, s, p, 2)
    record("gmatch " .. tag, pcall(function()
      local all = {}
      for a, b, c in string.gmatch(s, p) do
        all[#all + 1] = {a, b, c}
        if #all > 100 then break end
      end
      return all
    end))
    record("gmatch@3 " .. tag, pcall(function()
      local all = {}
      for a in string.gmatch(s, p, 3) do
        all[#all + 1] = a
        if #all > 100 then break end
      end
      return all
    end))
    call("gsub " .. tag, string.gsub, s, p, "<%0>")
    call("gsub1 " .. tag, string.gsub, s, p, "[%1]")
    call("gsub%% " .. tag, string.gsub, s, p, "%%")
    call("gsubn " .. tag, string.gsub, s, p, "#", 2)
    call("gsubf " .. tag, string.gsub, s, p, function(...)
      local n = select("#", ...)
      if n == 1 and (...) == "a" then return nil end
      return n .. ":" .. tostring((...))
    end)
    call("gsubt " .. tag, string.gsub, s, p, {a = "A", hello = false, [1] = "one", ["1"] = "str1"})
  end
end

-- init beyond either end, and odd arguments
for _, init in ipairs({-100, -1, 0, 1, 4, 5, 6, 100, math.maxinteger, math.mininteger}) do
  call("find init " .. init, string.find, "abcd", "", init)
  call("find init c " .. init, string.find, "abcd", "c", init)
  call("findpat init " .. init, string.find, "abcd", "c?", init)
  call("match init " .. init, string.match, "abcd", "(.)", init)
  record("gmatch init " .. init, pcall(function()
    local all = {}
    for a in string.gmatch("abcd", ".?", init) do all[#all + 1] = a end
    return all
  end))
end
call("gsub bad repl", string.gsub, "abc", "b", true)
call("gsub nil repl", string.gsub, "abc", "b")
call("gsub bad %", string.gsub, "abc", "b", "%x")
call("gsub trailing %", string.gsub, "abc", "b", "x%")
call("gsub %2 of 1", string.gsub, "abc", "(b)", "%2")
call("gsub %1 none", string.gsub, "abc", "b", "%1")
call("gsub num repl", string.gsub, "abc", "b", 42)
call("gsub float repl", string.gsub, "abc", "b", 1.5)
call("gsub pos cap", string.gsub, "abc", "()b()", "%1-%2")
call("gsub table bad", string.gsub, "abc", "b", {b = {}})
call("gsub fn bad", string.gsub, "abc", "b", function() return {} end)
call("gsub fn number", string.gsub, "abc", "(b)", function() return 7 end)
call("gsub n=0", string.gsub, "abc", "b", "x", 0)
call("gsub n=-1", string.gsub, "abc", "b", "x", -1)
call("gsub anchored", string.gsub, "aaa", "^a", "b")
call("gsub anchored empty", string.gsub, "aaa", "^", "b")
call("gsub empty", string.gsub, "abc", "", "-")
call("gsub empty star", string.gsub, "abc", "x*", "-")
call("gsub bad n", string.gsub, "abc", "b", "x", "two")
call("find nonstring", string.find, {}, "a")
call("find number", string.find, 12345, 3)
call("match pattern number", string.match, "x12y", 12)
call("too many captures", string.match, string.rep("a", 40), string.rep("(a)", 40))
call("32 captures", string.match, string.rep("a", 40), string.rep("(a)", 32))
call("deep pattern", string.match, string.rep("a", 300), string.rep("a?", 300) .. "b")
call("unfinished capture", string.gsub, "abc", "(b", "%1")
call("unfinished capture fn", string.find, "abc", "(()")
call("gmatch nonstring", string.gmatch, "abc", {})

-- string.rep
for _, args in ipairs({
  {"ab", 3}, {"ab", 3, ","}, {"ab", 0}, {"ab", -1}, {"", 5}, {"", 5, ""}, {"", 3, "-"}, {"x", 1, "sep"},
  {"ab", 2.0}, {"ab", "3"}, {"ab", 2.5}, {{}, 2}, {"x", 2^31}, {"", 1000}, {"", 1000, ""},
  {"x", math.maxinteger}, {"", 2^31, "x"}, {"ab", 1e6 // 1}, {"\0", 3, "\0"},
}) do
  record("rep " .. ser(args), pcall(function()
    local r = string.rep(table.unpack(args, 1, 3))
    return #r, r:sub(1, 40)
  end))
end

-- table functions, on plain tables and on proxies with metamethods
local function proxy(t, log)
  return setmetatable({}, {
    __index = function(_, k) log[#log + 1] = "get" .. tostring(k) return t[k] end,
    __newindex = function(_, k, v) log[#log + 1] = "set" .. tostring(k) .. "=" .. tostring(v) t[k] = v end,
    __len = function() return #t end,
  })
end
local function tcall(label, f)
  record(label, pcall(function()
    local log = {}
    local r = {f(log)}
    return r, log
  end))
end

tcall("concat", function() return table.concat({1, 2, "x", 3.5}) end)
tcall("concat sep", function() return table.concat({1, 2, 3}, ", ") end)
tcall("concat range", function() return table.concat({1, 2, 3, 4}, "-", 2, 3) end)
tcall("concat empty range", function() return table.concat({1, 2}, "-", 3, 2) end)
tcall("concat bad", function() return table.concat({1, {}, 3}) end)
tcall("concat nil", function() return table.concat({1, nil, 3}, "", 1, 3) end)
tcall("concat maxint", function() return table.concat({}, "", math.maxinteger, math.maxinteger - 1) end)
tcall("concat proxy", function(log) return table.concat(proxy({"a", "b", "c"}, log), "+") end)
tcall("concat nontable", function() return table.concat("abc") end)
tcall("concat number sep", function() return table.concat({1, 2}, 0) end)
tcall("insert end", function() local t = {1, 2} table.insert(t, 3) return t end)
tcall("insert pos", function() local t = {1, 2, 3} table.insert(t, 1, 0) return t end)
tcall("insert pos end", function() local t = {1, 2, 3} table.insert(t, 4, 0) return t end)
tcall("insert bad pos", function() local t = {1, 2, 3} table.insert(t, 5, 0) return t end)
tcall("insert pos 0", function() local t = {1, 2, 3} table.insert(t, 0, 0) return t end)
tcall("insert args", function() local t = {} table.insert(t, 1, 2, 3) return t end)
tcall("insert one arg", function() local t = {} table.insert(t) return t end)
tcall("insert proxy", function(log) local t = {1, 2} table.insert(proxy(t, log), 1, 9) return t end)
tcall("remove last", function() local t = {1, 2, 3} return table.remove(t), t end)
tcall("remove first", function() local t = {1, 2, 3} return table.remove(t, 1), t end)
tcall("remove empty", function() local t = {} return table.remove(t), t end)
tcall("remove empty 0", function() local t = {} return table.remove(t, 0), t end)
tcall("remove n+1", function() local t = {1, 2} return table.remove(t, 3), t end)
tcall("remove n+2", function() local t = {1, 2} return table.remove(t, 4), t end)
tcall("remove proxy", function(log) local t = {1, 2, 3} return table.remove(proxy(t, log), 2), t end)
tcall("move", function() return table.move({1, 2, 3}, 1, 3, 2) end)
tcall("move down", function() return table.move({1, 2, 3, 4}, 2, 4, 1) end)
tcall("move other", function() local b = {} table.move({1, 2, 3}, 1, 3, 5, b) return b end)
tcall("move empty", function() return table.move({1, 2}, 3, 1, 1) end)
tcall("move too many", function() return table.move({}, -1, math.maxinteger, 1) end)
tcall("move wrap", function() return table.move({}, 1, 10, math.maxinteger) end)
tcall("move proxy", function(log) local t = {1, 2, 3} table.move(proxy(t, log), 1, 3, 2) return t end)
tcall("move proxy other", function(log)
  local b = {}
  table.move(proxy({1, 2}, log), 1, 2, 1, proxy(b, log))
  return b
end)
tcall("move bad", function() return table.move(1, 1, 1, 1) end)
tcall("move bad dest", function() return table.move({}, 1, 1, 1, "x") end)
tcall("sort", function() local t = {5, 2, 8, 1, 9, 3} table.sort(t) return t end)
tcall("sort desc", function() local t = {5, 2, 8, 1, 9, 3} table.sort(t, function(a, b) return a > b end) return t end)
tcall("sort strings", function() local t = {"pear", "apple", "fig", "b", "a"} table.sort(t) return t end)
tcall("sort one", function() local t = {1} table.sort(t) return t end)
tcall("sort empty", function() local t = {} table.sort(t) return t end)
tcall("sort mixed", function() local t = {1, "x", 2} table.sort(t) return t end)
tcall("sort bad cmp", function() local t = {3, 1, 2} table.sort(t, 5) return t end)
tcall("sort big", function()
  local t, x = {}, 12345
  for i = 1, 2000 do x = (x * 1103515245 + 12345) % 2147483648 t[i] = x end
  table.sort(t)
  for i = 2, #t do if t[i - 1] > t[i] then return false end end
  return #t
end)
-- (the order of the accesses differs: a heap sort in the sandbox)
tcall("sort proxy", function() local log = {} local t = {3, 1, 2} table.sort(proxy(t, log)) return t end)
tcall("sort ties", function()
  local t = {}
  for i = 1, 50 do t[i] = {k = i % 5, i = i} end
  table.sort(t, function(a, b) return a.k < b.k end)
  local keys = {}
  for i = 1, #t do keys[i] = t[i].k end
  return keys
end)

-- the string metatable as scripts see it
record("string methods", pcall(function() return ("abc"):upper(), ("x"):rep(3), ("a b"):find(" ") end))
record("string mt __index", pcall(function() return getmetatable("").__index == string end))

return table.concat(out, "\n") .. "\n"
