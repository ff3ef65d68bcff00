-- SPDX-License-Identifier: MIT

--- attn.app.text_basic: the first half of attn.text: the Unicode facts
-- (decoded from attn.app.unicode_data on first use), UTF-8 helpers and
-- Hugging Face's BasicTokenizer (cleaning, CJK, lower-casing, accents,
-- punctuation, special tokens kept whole).  attn.text (text.lua) builds
-- WordPiece on top; the functions take the tokenizer as self for its
-- options.
local B = {}

-- ---------------------------------------------------------------------------
-- Unicode tables (decoded from attn.app.unicode_data on first non-ASCII text)

-- Character classes (see scripts/gen_unicode_data.py).
local OTHER, DROP, SPACE, PUNCT, MN0, MN, CJK = 0, 1, 2, 3, 4, 5, 6

local U -- {starts, codes, lower, decomp, kept}
local class_cache = {} -- code point -> class, filled on demand
local char_cache = {} -- code point -> its UTF-8 string

-- ASCII classes without the tables: control bytes other than \t \n \r
-- (and DEL) are dropped, the 32 ASCII symbols are punctuation.
for b = 0, 127 do
  local k = OTHER
  if b == 9 or b == 10 or b == 13 or b == 32 then
    k = SPACE
  elseif b < 32 or b == 127 then
    k = DROP
  elseif (b >= 33 and b <= 47) or (b >= 58 and b <= 64) or (b >= 91 and b <= 96) or (b >= 123 and b <= 126) then
    k = PUNCT
  end
  class_cache[b] = k
  char_cache[b] = string.char(b)
end

local function tables()
  if U then return U end
  local d = require "attn.app.unicode_data"
  local starts, codes = {}, {}
  local cp, runs = 0, d.classes
  for i = 1, #runs, 2 do
    starts[#starts + 1] = cp
    codes[#codes + 1] = runs[i + 1]
    cp = cp + runs[i]
  end
  assert(cp == 0x110000, "attn.app.unicode_data: class runs do not cover U+0000..U+10FFFF")
  -- lower[cp] = code point, or a list for the multi-character mappings
  local lower = {}
  cp = 0
  local lr = d.lower
  for i = 1, #lr, 4 do
    cp = cp + lr[i]
    local n, stride, delta = lr[i + 1], lr[i + 2], lr[i + 3]
    for j = 0, n - 1 do
      local c = cp + j * stride
      lower[c] = c + delta
    end
    cp = cp + (n - 1) * stride
  end
  for k, v in pairs(d.lower_multi) do lower[k] = v end
  -- decomp[cp] = list of code points (full canonical decomposition)
  local decomp = {}
  local dt, i = d.decomp, 1
  cp = 0
  while i <= #dt do
    cp = cp + dt[i]
    local n = dt[i + 1]
    local seq = {}
    for j = 1, n do seq[j] = dt[i + 1 + j] end
    decomp[cp] = seq
    i = i + 2 + n
  end
  local kept = {}
  for j = 1, #d.kept_ccc, 2 do kept[d.kept_ccc[j]] = d.kept_ccc[j + 1] end
  U = {starts = starts, codes = codes, lower = lower, decomp = decomp, kept = kept,
       version = d.unicode_version}
  return U
end

local function class_of(cp)
  local k = class_cache[cp]
  if k then return k end
  local t = tables()
  local starts = t.starts
  local lo, hi = 1, #starts -- the last start <= cp
  while lo < hi do
    local mid = (lo + hi + 1) // 2
    if starts[mid] <= cp then lo = mid else hi = mid - 1 end
  end
  k = t.codes[lo]
  class_cache[cp] = k
  return k
end

local function char_of(cp)
  local s = char_cache[cp]
  if not s then
    s = utf8.char(cp)
    char_cache[cp] = s
  end
  return s
end


-- Hangul syllables decompose algorithmically (Unicode 3.12).
local SBASE, LBASE, VBASE, TBASE, TCOUNT, NCOUNT, SCOUNT = 0xAC00, 0x1100, 0x1161, 0x11A7, 28, 588, 11172

-- ---------------------------------------------------------------------------
-- UTF-8

-- s with every byte that is not part of a well-formed UTF-8 sequence
-- removed: Python's decode(errors="replace") turns exactly those into
-- U+FFFD, which _clean_text then removes.  Lua's utf8 library (strict
-- mode) rejects overlong forms, surrogates and code points past U+10FFFF,
-- as Python does.
local function drop_invalid(s)
  if utf8.len(s) then return s end
  local parts, n, i, len = {}, 0, 1, #s
  while i <= len do
    local ok, bad = utf8.len(s, i)
    if ok then
      n = n + 1
      parts[n] = s:sub(i)
      break
    end
    if bad > i then
      n = n + 1
      parts[n] = s:sub(i, bad - 1)
    end
    i = bad + 1
  end
  return table.concat(parts, "", 1, n)
end

-- Python's str.strip() of whitespace at both ends (str.isspace()).
local function is_pyspace(cp)
  if cp < 128 then return cp == 32 or (cp >= 9 and cp <= 13) or (cp >= 28 and cp <= 31) end
  return cp == 0x85 or class_of(cp) == SPACE
end

local function py_strip(s)
  local first, last
  for p, cp in utf8.codes(s) do
    if not is_pyspace(cp) then
      first = first or p
      last = p
    end
  end
  if not first then return "" end
  local stop = utf8.offset(s, 2, last) - 1
  return s:sub(first, stop)
end

-- ---------------------------------------------------------------------------
-- Basic tokenizer

-- HF's _run_strip_accents on code points: NFD (full canonical
-- decomposition, then canonical reordering), then every Mn dropped.
-- Returns the new list and its length.  Only the few non-Mn marks with a
-- non-zero combining class (t.kept) can still move: they are sorted by
-- class within their run, which any class-0 character ends (a class-0 Mn
-- too, though it is dropped; a Mn of class > 0 is transparent).
local function strip_accents(t, cps, n)
  local decomp, kept = t.decomp, t.kept
  local seq, ns = {}, 0
  for i = 1, n do
    local c = cps[i]
    if c < 0xC0 then -- nothing below U+00C0 decomposes
      ns = ns + 1
      seq[ns] = c
    elseif c >= SBASE and c < SBASE + SCOUNT then
      local s = c - SBASE
      seq[ns + 1] = LBASE + s // NCOUNT
      seq[ns + 2] = VBASE + (s % NCOUNT) // TCOUNT
      ns = ns + 2
      if s % TCOUNT ~= 0 then
        ns = ns + 1
        seq[ns] = TBASE + s % TCOUNT
      end
    else
      local d = decomp[c]
      if d then
        for j = 1, #d do seq[ns + j] = d[j] end
        ns = ns + #d
      else
        ns = ns + 1
        seq[ns] = c
      end
    end
  end
  local res, m, i = {}, 0, 1
  while i <= ns do
    local c = seq[i]
    local k = class_cache[c] or class_of(c)
    i = i + 1
    if k == MN or k == MN0 then -- luacheck: ignore 542 (nonspacing marks are dropped: nothing to emit)
    elseif kept[c] then
      local run, nrun = {c}, 1
      while i <= ns do
        local x = seq[i]
        if kept[x] then
          nrun = nrun + 1
          run[nrun] = x
        elseif (class_cache[x] or class_of(x)) ~= MN then
          break
        end
        i = i + 1
      end
      for a = 2, nrun do -- stable insertion sort by combining class
        local x, b = run[a], a - 1
        while b >= 1 and kept[run[b]] > kept[x] do
          run[b + 1] = run[b]
          b = b - 1
        end
        run[b + 1] = x
      end
      for a = 1, nrun do res[m + a] = run[a] end
      m = m + nrun
    else
      m = m + 1
      res[m] = c
    end
  end
  return res, m
end

-- One whitespace-separated word (its code points cps[1..n]): lower-case,
-- strip accents, split off punctuation; the words go to out.
local function finish_word(self, cps, n, out)
  local t = (self.lower or self.strip_accents) and tables()
  if self.lower then
    local lower, m, res = t.lower, 0, {}
    for i = 1, n do
      local l = lower[cps[i]]
      if l == nil then
        m = m + 1
        res[m] = cps[i]
      elseif type(l) == "table" then
        for j = 1, #l do res[m + j] = l[j] end
        m = m + #l
      else
        m = m + 1
        res[m] = l
      end
    end
    cps, n = res, m
  end
  -- A word that is a special token is kept whole (HF's never_split),
  -- which can only happen when the text had a control character inside
  -- one ("[CL\1S]"); it then goes through WordPiece like any word.
  if n > 0 and n <= self._special_chars and self._special_first[cps[1]] then
    local parts = {}
    for i = 1, n do parts[i] = char_of(cps[i]) end
    local w = table.concat(parts)
    if self.special_set[w] then
      out[#out + 1] = w
      return
    end
  end
  local strip = self.strip_accents
  if strip == nil then strip = self.lower end
  if strip then cps, n = strip_accents(t, cps, n) end
  local parts, np = {}, 0
  for i = 1, n do
    local c = cps[i]
    if (class_cache[c] or class_of(c)) == PUNCT then
      if np > 0 then
        out[#out + 1] = table.concat(parts, "", 1, np)
        np = 0
      end
      out[#out + 1] = char_of(c)
    else
      np = np + 1
      parts[np] = char_of(c)
    end
  end
  if np > 0 then out[#out + 1] = table.concat(parts, "", 1, np) end
end

-- Any text (valid UTF-8): character by character.
local function basic_general(self, s, out)
  local cjk = self.tokenize_chinese_chars
  local cps, n = {}, 0
  for _, cp in utf8.codes(s) do
    local k = class_cache[cp] or class_of(cp)
    if k == SPACE then
      if n > 0 then
        finish_word(self, cps, n, out)
        cps, n = {}, 0
      end
    elseif k == CJK and cjk then
      if n > 0 then
        finish_word(self, cps, n, out)
        cps, n = {}, 0
      end
      finish_word(self, {cp}, 1, out)
    elseif k ~= DROP then
      n = n + 1
      cps[n] = cp
    end
  end
  if n > 0 then finish_word(self, cps, n, out) end
end

-- An ASCII run without control bytes: lower-case, split off punctuation
-- (ASCII %p is exactly HF's ASCII punctuation), split at whitespace.
local function basic_ascii(self, s, out)
  if self.lower then s = s:lower() end
  if s:find("%p") then s = s:gsub("%p", " %0 ") end
  for w in s:gmatch("[^ \t\n\r]+") do out[#out + 1] = w end
end

-- One segment of text without special tokens -> words, appended to out.
-- ASCII text goes through string patterns; text with other bytes is cut
-- at ASCII whitespace (a word boundary either way, and never inside a
-- UTF-8 sequence) and each run with a non-ASCII or control byte goes
-- through the general path.  Control bytes matter: they are removed, not
-- separators ("a\vb" is "ab"), and can interrupt a special token.
local function basic_segment(self, s, out)
  if not s:find("[\0-\8\11\12\14-\31\127-\255]") then return basic_ascii(self, s, out) end
  for run in s:gmatch("[^ \t\n\r]+") do
    if run:find("[\0-\8\11\12\14-\31\127-\255]") then
      basic_general(self, drop_invalid(run), out)
    else
      basic_ascii(self, run, out)
    end
  end
end

-- The text split at the special tokens written in it: calls
-- segment(self, piece, out) for the text between them and appends the
-- special tokens themselves to out.
local function split_specials(self, s, out, segment)
  local specials = self.special_tokens
  local nexts = {}
  for i, tok in ipairs(specials) do nexts[i] = s:find(tok, 1, true) or false end
  local pos = 1
  while true do
    local best, bi = nil, nil
    for i = 1, #specials do
      local p = nexts[i]
      if p and p < pos then -- overlapped by the previous match: look again
        p = s:find(specials[i], pos, true) or false
        nexts[i] = p
      end
      if p and (not best or p < best or (p == best and #specials[i] > #specials[bi])) then
        best, bi = p, i
      end
    end
    if not best then break end
    if best > pos then segment(self, s:sub(pos, best - 1), out) end
    out[#out + 1] = specials[bi]
    pos = best + #specials[bi]
  end
  if pos <= #s then segment(self, s:sub(pos), out) end
end

B.tables, B.drop_invalid, B.py_strip = tables, drop_invalid, py_strip
B.basic_segment, B.split_specials = basic_segment, split_specials

return B
