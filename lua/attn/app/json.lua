-- SPDX-License-Identifier: MIT

--- attn.app.json: the package's one JSON reader, for the applications'
-- files: BERT's config.json and safetensors index (attn.bert.json_decode)
-- and the tokenizer's tokenizer_config.json (attn.text).  It is strict
-- (RFC 8259) and says where it stopped and why (the line, the byte and
-- what it found there).  Written in Lua rather than over
-- the core's cJSON: cJSON also takes leading zeros ("01") and "1.", and
-- reports only the position where it stopped.
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)

local json = {}

--- json.decode(text [, name]) -> value: the value of the JSON text; null
-- becomes nil, integers without a fraction or exponent are Lua integers.
-- name (default "JSON text") starts the error messages.
-- @usage
-- local bert = require "attn.bert"
-- local cfg = bert.json_decode('{"hidden_size": 8, "num_attention_heads": 2}')
-- print(cfg.hidden_size)                                 -- 8
function json.decode(text, name)
  if type(text) ~= "string" then error("json_decode: expected a string", 2) end
  if name ~= nil and type(name) ~= "string" then error("json_decode: name must be a string", 2) end
  name = name or "JSON text"
  local pos = 1
  local function fail(msg)
    local line = 1
    for _ in text:sub(1, pos - 1):gmatch("\n") do line = line + 1 end
    error(("%s: invalid JSON at line %d (byte %d): %s"):format(name, line, pos, msg), 0)
  end
  local function skip()
    pos = text:find("[^ \t\r\n]", pos) or (#text + 1)
  end
  local value
  local escapes = {['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t"}
  local function str()
    pos = pos + 1 -- the opening quote
    local parts = {}
    while true do
      local s, e = text:find('^[^"\\%c]+', pos)
      if s then
        parts[#parts + 1] = text:sub(s, e)
        pos = e + 1
      end
      local c = text:sub(pos, pos)
      if c == '"' then
        pos = pos + 1
        return table.concat(parts)
      elseif c == "\\" then
        local k = text:sub(pos + 1, pos + 1)
        if escapes[k] then
          parts[#parts + 1] = escapes[k]
          pos = pos + 2
        elseif k == "u" then
          local hex = text:match("^%x%x%x%x", pos + 2)
          if not hex then fail("bad \\u escape") end
          local cp = tonumber(hex, 16)
          pos = pos + 6
          if cp >= 0xD800 and cp <= 0xDBFF then -- a surrogate pair
            local lo = text:match("^\\u(%x%x%x%x)", pos)
            lo = lo and tonumber(lo, 16)
            if not lo or lo < 0xDC00 or lo > 0xDFFF then fail("unpaired surrogate") end
            cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
            pos = pos + 6
          elseif cp >= 0xDC00 and cp <= 0xDFFF then
            fail("unpaired surrogate")
          end
          parts[#parts + 1] = utf8.char(cp)
        else
          fail("bad escape \\" .. k)
        end
      elseif c == "" then
        fail("unterminated string")
      else
        fail("control character in a string")
      end
    end
  end
  local function number()
    local int = text:match("^-?%d+", pos)
    if not int or int:match("^-?0%d") then fail("bad number") end
    local e = pos + #int
    local frac = text:match("^%.%d+", e)
    if text:sub(e, e) == "." and not frac then fail("bad number") end
    e = e + (frac and #frac or 0)
    local exp = text:match("^[eE][-+]?%d+", e)
    if text:match("^[eE]", e) and not exp then fail("bad number") end
    e = e + (exp and #exp or 0)
    local s = text:sub(pos, e - 1)
    pos = e
    if not frac and not exp then
      local v = math.tointeger(tonumber(s))
      if v then return v end
    end
    return tonumber(s) + 0.0
  end
  local depth = 0
  function value()
    skip()
    local c = text:sub(pos, pos)
    if c == "{" or c == "[" then
      depth = depth + 1
      if depth > 200 then fail("nested too deeply") end
      pos = pos + 1
      local t, n = {}, 0
      skip()
      local close = c == "{" and "}" or "]"
      if text:sub(pos, pos) == close then
        pos = pos + 1
        depth = depth - 1
        return t
      end
      while true do
        if c == "{" then
          skip()
          if text:sub(pos, pos) ~= '"' then fail("expected a string key") end
          local k = str()
          skip()
          if text:sub(pos, pos) ~= ":" then fail("expected ':'") end
          pos = pos + 1
          t[k] = value()
        else
          n = n + 1
          t[n] = value()
        end
        skip()
        local d = text:sub(pos, pos)
        pos = pos + 1
        if d == close then break end
        if d ~= "," then
          pos = pos - 1
          fail(d == "" and "unexpected end of text" or ("expected ',' or '%s'"):format(close))
        end
      end
      depth = depth - 1
      return t
    elseif c == '"' then
      return str()
    elseif c == "-" or c:match("%d") then
      return number()
    elseif text:sub(pos, pos + 3) == "true" then
      pos = pos + 4
      return true
    elseif text:sub(pos, pos + 4) == "false" then
      pos = pos + 5
      return false
    elseif text:sub(pos, pos + 3) == "null" then
      pos = pos + 4
      return nil
    end
    fail(c == "" and "unexpected end of text" or ("unexpected '%s'"):format(c))
  end
  local v = value()
  skip()
  if pos <= #text then fail("unexpected text after the value") end
  return v
end

return json
