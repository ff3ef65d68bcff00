-- SPDX-License-Identifier: MIT

--- Helpers for the seed-script specs (spec/seed_*_spec.lua): run a script
-- of scripts/ through the attn binary (ATTN_BIN, set by spec/tests.cmake)
-- or stock lua5.4, and read back the tensors it printed.
--
-- A printed tensor is torch's repr, "tensor([[ 0.3374, -0.1778], ...],
-- grad_fn=<...>)"; printed_tensor parses it into its shape, its values and,
-- for each value, half a unit of the last printed digit (the rounding the
-- print did), so a printed number is compared with torch's float32 value
-- up to that rounding.
local M = {}

M.source_dir = os.getenv("ATTN_SOURCE_DIR") or "."
M.build_dir = os.getenv("ATTN_BUILD_DIR")
M.bin = os.getenv("ATTN_BIN")
if M.bin == "" then M.bin = nil end

local S = require "support.sh"
local q = S.q

local function run(prefix, name, args)
  local argv = {}
  for i, a in ipairs(args or {}) do argv[i] = q(a) end
  return S.capture(("cd %s && %s %s %s"):format(q(M.source_dir), prefix,
    q("scripts/" .. name .. ".lua"), table.concat(argv, " ")))
end

--- run_attn(name [, args]) -> {out=, err=, code=}: `attn scripts/<name>.lua args`.
function M.run_attn(name, args)
  assert(M.bin, "ATTN_BIN is not set")
  return run("env -u LUA_INIT -u LUA_INIT_5_4 " .. q(M.bin), name, args)
end

--- lua5.4 with the package of this tree, or nil when there is no build
-- (ATTN_BUILD_DIR/attn/core.so) or no lua5.4 to run.
function M.stock_lua()
  if not M.build_dir then return nil end
  local f = io.open(M.build_dir .. "/attn/core.so", "rb")
  if not f then return nil end
  f:close()
  if not os.execute("command -v lua5.4 >/dev/null 2>&1") then return nil end
  local src = M.source_dir
  return ("env -u LUA_INIT -u LUA_INIT_5_4 LUA_PATH_5_4=%s LUA_CPATH_5_4=%s lua5.4"):format(
    q(src .. "/lua/?.lua;" .. src .. "/lua/?/init.lua;;"), q(M.build_dir .. "/?.so;;"))
end

--- run_lua(name [, args]) -> {out=, err=, code=} under stock lua5.4.
function M.run_lua(name, args)
  return run(assert(M.stock_lua(), "no lua5.4 with a built attn/core.so"), name, args)
end

--- True when the attn binary can load attn.plot (the pictures need it).
function M.has_plot()
  return M.bin ~= nil and os.execute(("env -u LUA_INIT -u LUA_INIT_5_4 %s -e 'require \"attn.plot\"' "
    .. ">/dev/null 2>&1"):format(q(M.bin))) == true
end

--- A fresh temporary directory (remove it with rmtree).
M.tmpdir, M.rmtree = S.tmpdir, S.rmtree

--- width, height of a PNG file (nil if path is not a PNG).
function M.png_size(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local head = f:read(24)
  f:close()
  if not head or #head < 24 or head:sub(1, 8) ~= "\x89PNG\r\n\x1a\n" or head:sub(13, 16) ~= "IHDR" then
    return nil
  end
  return string.unpack(">I4I4", head, 17)
end

local function plain(s)
  return (s:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0"))
end

--- A progress bar's stderr off a terminal -> its summary lines, unstamped.
-- Every line must be time-stamped; lines before a summary may be the
-- interim lines logged every log_interval (10 s) on a slow machine
-- (sanitizers, valgrind): those are checked and dropped. Returns nil and
-- the offending line for anything else.
function M.progress_summaries(err)
  local stamp = "^%d%d%d%d%-%d%d%-%d%d %d%d:%d%d:%d%d "
  local out = {}
  if err ~= "" and err:sub(-1) ~= "\n" then return nil, "no newline at the end" end
  for l in err:gmatch("([^\n]*)\n") do
    local body = l:match(stamp .. "(.*)$")
    if not body then return nil, l end
    if body:find("^[%w_ ]+: %d+/%d+ %(%d+%%%) in [%d:]+, [%d.]+ it/s") then
      out[#out + 1] = body
    elseif not body:find("^[%w_ ]+: %d+/%d+ %(%d+%%%) [%d:]+<[%d:]+, [%d.]+ it/s") then
      return nil, l
    end
  end
  return out
end

--- The text after the first line of out that equals label (error if none).
function M.after(out, label)
  local text = "\n" .. out
  local _, e = text:find("\n" .. plain(label) .. "\n")
  if not e then error(("no line %q in the output"):format(label), 2) end
  return text:sub(e + 1)
end

--- The rest of the first line of out that starts with prefix (error if none).
function M.line(out, prefix)
  for l in (out .. "\n"):gmatch("(.-)\n") do
    if l:sub(1, #prefix) == prefix then return l:sub(#prefix + 1) end
  end
  error(("no line starting with %q in the output"):format(prefix), 2)
end

-- One printed number -> value, half a unit of its last digit.
local function number(tok)
  if tok == "inf" then return math.huge, 0 end
  if tok == "-inf" then return -math.huge, 0 end
  if tok == "nan" or tok == "-nan" then return 0 / 0, 0 end
  local mant, exp = tok:match("^([-+]?[%d.]+)[eE]([-+]?%d+)$")
  mant = mant or tok
  local v = tonumber(tok)
  if not v then error(("not a number: %q"):format(tok), 3) end
  local decimals = mant:match("%.(%d*)$")
  decimals = decimals and #decimals or 0
  -- "1." (torch's integer-valued print) is exact
  local ulp = decimals == 0 and 0 or 0.5 * 10.0 ^ (-decimals) * 10.0 ^ (tonumber(exp) or 0)
  return v, ulp
end

--- printed_tensor(text) -> {shape=, values=, tols=, text=}: the first
-- tensor repr in text (torch's layout, as attn prints it).
function M.printed_tensor(text)
  local s = text:find("tensor(", 1, true)
  if not s then error("no tensor( in the text", 2) end
  local i = s + #"tensor("
  local values, tols, shape = {}, {}, {}
  local depth, count, maxdepth = 0, {}, 0
  local function push(tok)
    local v, t = number(tok)
    values[#values + 1], tols[#tols + 1] = v, t
  end
  if text:sub(i, i) ~= "[" then -- a 0-d tensor
    local tok = text:match("^%s*([^,%)%s]+)", i)
    push(tok)
    local e = text:find(")", i, true)
    return {shape = {}, values = values, tols = tols, text = text:sub(s, e)}
  end
  while true do
    local c = text:sub(i, i)
    if c == "" then error("unterminated tensor repr", 2) end
    if c == "[" then
      depth = depth + 1
      maxdepth = math.max(maxdepth, depth)
      count[depth] = 0
      if depth > 1 then count[depth - 1] = count[depth - 1] + 1 end
      i = i + 1
    elseif c == "]" then
      -- the first complete list at each depth gives that dim's size
      if shape[depth] == nil then shape[depth] = count[depth] end
      depth = depth - 1
      i = i + 1
      if depth == 0 then break end
    elseif c:match("[%s,]") then
      i = i + 1
    elseif text:sub(i, i + 2) == "..." then
      error("the tensor was printed summarized (...)", 2)
    else
      local tok = text:match("^[^,%]%s]+", i)
      push(tok)
      count[depth] = count[depth] + 1
      i = i + #tok
    end
  end
  local e = text:find(")", i, true)
  local n = 1
  for d = 1, maxdepth do n = n * shape[d] end
  assert(n == #values, "ragged tensor repr")
  return {shape = shape, values = values, tols = tols, text = text:sub(s, e)}
end

--- The first tensor printed after the line label.
function M.tensor_after(out, label)
  return M.printed_tensor(M.after(out, label))
end

local function fmt_shape(s) return "[" .. table.concat(s, ", ") .. "]" end

--- Asserts that the printed tensor p shows the fixture tensor f ({shape,
-- data}, float32 values) up to the print's rounding (plus 1e-6 relative
-- for float32 differences in the last bit).
function M.assert_printed(p, f, what)
  what = what or "printed tensor"
  assert(#p.shape == #f.shape and fmt_shape(p.shape) == fmt_shape(f.shape),
    ("%s: printed shape %s, expected %s"):format(what, fmt_shape(p.shape), fmt_shape(f.shape)))
  for k, e in ipairs(f.data) do
    local g = p.values[k]
    local ok
    if e ~= e then ok = g ~= g
    elseif e == math.huge or e == -math.huge then ok = g == e
    else ok = math.abs(g - e) <= p.tols[k] + 1e-6 * math.max(1, math.abs(e)) end
    if not ok then
      error(("%s: element %d printed as %.9g, expected %.9g"):format(what, k, g, e), 2)
    end
  end
  return true
end

--- The frame of a seed spec, with busted's functions in b ({describe =,
-- pending =}): true, after a pending describe(title), when the spec cannot
-- run (no ATTN_BIN, or a module in needs that does not load); the spec
-- then returns.
function M.skip(b, title, needs)
  local why = not M.bin and "ATTN_BIN is not set; run this spec through ctest (spec/tests.cmake sets it)"
  for _, mod in ipairs(needs or {}) do
    why = why or (not pcall(require, mod) and (mod .. " (which the script needs) is not available"))
  end
  if why then b.describe(title, function() b.pending(why) end) end
  return why and true or false
end

--- describe("scripts/<name>.lua") that runs `attn scripts/<name>.lua` once,
-- checks it ran cleanly (empty stderr, status 0: busted's it and assert in b)
-- and hands the result {out, err, code} to body for the rest of its cases.
function M.describe_run(b, name, body)
  b.describe("scripts/" .. name .. ".lua", function()
    local r = M.run_attn(name)
    b.it("runs cleanly", function()
      b.assert.are.equal("", r.err)
      b.assert.are.equal(0, r.code)
    end)
    body(r)
  end)
end

--- The two checks every seed spec shares, as busted `it` blocks (call inside
-- a describe; busted's it/pending/assert live in the spec's environment, so
-- the spec hands them over as b): the script prints the same under stock
-- lua5.4 as under the attn binary (r is the attn run), and with --out it
-- draws each PNG in pngs (into dir/subdir when subdir is given, so the
-- script must create it).
function M.it_runs_alike_and_draws(b, name, r, pngs, subdir)
  local it, pending, assert = b.it, b.pending, b.assert
  it("prints the same under stock lua5.4 with the installed package", function()
    if not M.stock_lua() then
      pending("no lua5.4 with a built attn/core.so (ATTN_BUILD_DIR)")
      return
    end
    local r2 = M.run_lua(name)
    assert.are.equal("", r2.err)
    assert.are.equal(r.out, r2.out)
  end)

  it("draws " .. table.concat(pngs, ", ") .. " with --out DIR", function()
    if not M.has_plot() then
      pending("attn.plot is not available in this build")
      return
    end
    local dir = M.tmpdir()
    local out = subdir and (dir .. "/" .. subdir) or dir
    local r2 = M.run_attn(name, {"--out", out})
    local sizes = {}
    for i, png in ipairs(pngs) do sizes[i] = {M.png_size(out .. "/" .. png)} end
    M.rmtree(dir)
    assert.are.equal("", r2.err)
    assert.are.equal(0, r2.code)
    for i, png in ipairs(pngs) do
      local w, h = sizes[i][1], sizes[i][2]
      assert.truthy(w and w > 100 and h > 100, png .. " is not a PNG of a sensible size")
      assert.truthy(r2.out:find("wrote " .. out .. "/" .. png, 1, true), "no 'wrote' line for " .. png)
    end
  end)
end

return M
