-- SPDX-License-Identifier: MIT

--- attn.data: small text-data helpers for the scripts and notebooks.
--
--   local data = require "attn".data        (or require "attn.data")
--
-- Files:     read_lines, read_words, default_words_path
-- Tokens:    Vocab (sorted words + unknown token), CharTable (characters
--            with start/stop tokens), one_hot, pad (batch + mask)
-- Sampling:  shuffle, split, batches (attn's seeded RNG: attn.randperm,
--            so attn.manual_seed(s) or an attn.Generator reproduces torch)
-- Loops:     progress (a bar with rate and ETA; one summary line when the
--            output is not a terminal)
--
-- Ids are 1-based everywhere, like every index in attn's Lua API: the id of
-- a word or character is its 0-based Python index + 1.  Errors are raised
-- with messages that start with the function's name ("Vocab: ...").
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
local core = require "attn.core"

local data = {}

-- ---------------------------------------------------------------------------
-- Argument checks

-- fail(fn, fmt, ...) raises "fn: message" at the user's line (the first
-- caller outside the attn package), however deep in the helpers below.
local fail = attn._misuse.fail

-- v as an integer when it is a number with an integral value, else nil
-- (math.tointeger alone would also convert numeric strings).
local function to_int(v)
  return type(v) == "number" and math.tointeger(v) or nil
end

local function check_string(fn, what, v)
  if type(v) ~= "string" then fail(fn, "%s must be a string (got %s)", what, type(v)) end
end

-- A list of strings, non-empty: the entries are checked one by one so the
-- message can name the first bad one.
local function check_strings(fn, what, list)
  if type(list) ~= "table" then fail(fn, "%s must be a list of strings (got %s)", what, type(list)) end
  local n = #list
  if n == 0 then fail(fn, "%s is empty", what) end
  for i = 1, n do
    local v = list[i]
    if type(v) ~= "string" then fail(fn, "%s[%d] is a %s, expected a string", what, i, type(v)) end
  end
  return n
end

-- The items of a list, checking that there is no hole (#list is only
-- meaningful for a sequence).
local function check_list(fn, what, list)
  if type(list) ~= "table" then fail(fn, "%s must be a list (got %s)", what, type(list)) end
  local n = #list
  for i = 1, n do
    if list[i] == nil then fail(fn, "%s has a hole at index %d", what, i) end
  end
  return n
end

-- An options table whose keys are all in known (a list of names).
-- the optional arguments in order and/or a trailing options table (the
-- functions so declared "native" at the end of this file)
local merge_options = attn._misuse.merge_options

local function check_bool(fn, what, v)
  if v ~= nil and type(v) ~= "boolean" then fail(fn, "%s must be a boolean (got %s)", what, type(v)) end
end

local function is_generator(g)
  local mt = type(g) == "userdata" and getmetatable(g)
  return type(mt) == "table" and mt.__name == "attn.Generator"
end

local function check_generator(fn, g)
  if g ~= nil and not is_generator(g) then
    fail(fn, "generator must be an attn.Generator (got %s)", type(g))
  end
  return g
end

-- A list of 1-based ids from a 1-d tensor or a Lua list, each an integer.
local function id_list(fn, ids)
  local list
  if attn.is_tensor(ids) then
    if ids:dim() ~= 1 then fail(fn, "ids must be a 1-d tensor (got %d dimensions)", ids:dim()) end
    list = ids:totable()
  elseif type(ids) == "table" then
    list = ids
  else
    fail(fn, "ids must be a 1-d tensor or a list of integers (got %s)", type(ids))
  end
  local out = {}
  for i = 1, #list do
    local v = to_int(list[i])
    if not v then fail(fn, "ids[%d] = %s is not an integer", i, tostring(list[i])) end
    out[i] = v
  end
  return out
end

-- The entries of names (size of them) at the 1-based ids (a 1-d tensor or
-- a list), for the tables' decode.
local function decode_ids(fn, ids, names, size)
  local out = {}
  for i, id in ipairs(id_list(fn, ids)) do
    local v = names[id]
    if not v then fail(fn, "id %d (ids[%d]) out of range (expected 1..%d)", id, i, size) end
    out[i] = v
  end
  return out
end

-- Python's sorted() on str compares code points; for UTF-8 that is byte
-- order.  Lua's `<` on strings uses strcoll, which is byte order only in
-- the "C" locale, so fall back to an explicit byte comparison otherwise.
local function byte_less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

local function sort_bytes(list)
  local collate = os.setlocale(nil, "collate")
  if collate == "C" or collate == "POSIX" then
    table.sort(list)
  else
    table.sort(list, byte_less)
  end
  return list
end

-- ---------------------------------------------------------------------------
-- Files

local function slurp(fn, path)
  check_string(fn, "path", path)
  if not io then fail(fn, "reading files is not available in a sandbox (no io library)") end
  local f, err = io.open(path, "rb")
  if not f then fail(fn, "cannot open %s", err) end -- err names the path
  local s, rerr = f:read("a")
  f:close()
  if not s then fail(fn, "cannot read %s: %s", path, tostring(rerr)) end
  if s:sub(1, 3) == "\239\187\191" then s = s:sub(4) end -- UTF-8 byte-order mark
  return s
end

local function is_space(b) return b == 32 or (b >= 9 and b <= 13) end

--- data.read_lines(path) -> list of the file's non-empty lines.
-- Lines end at "\n"; trailing whitespace (spaces, tabs, the "\r" of CRLF
-- files) is stripped, leading whitespace and UTF-8 bytes are kept as they
-- are, lines that end up empty are skipped, and a last line without a
-- newline counts.  A UTF-8 byte-order mark at the start is dropped.
-- @usage
-- local path = os.tmpname()
-- local f = assert(io.open(path, "w")); f:write("alpha\r\n\nbeta\n"); f:close()
-- print(table.concat(data.read_lines(path), ","))      -- alpha,beta
-- os.remove(path)
function data.read_lines(path)
  local s = slurp("read_lines", path)
  local out, n = {}, 0
  local pos, len = 1, #s
  while pos <= len do
    local nl = s:find("\n", pos, true) or len + 1
    local e = nl - 1
    while e >= pos and is_space(s:byte(e)) do e = e - 1 end
    if e >= pos then
      n = n + 1
      out[n] = s:sub(pos, e)
    end
    pos = nl + 1
  end
  return out
end

--- data.read_words(path) -> list of the file's whitespace-separated words,
-- in file order (duplicates kept).
-- @usage
-- local path = os.tmpname()
-- local f = assert(io.open(path, "w")); f:write("the cat\nsat  down\n"); f:close()
-- print(#data.read_words(path))                        -- 4
-- os.remove(path)
function data.read_words(path)
  local s = slurp("read_words", path)
  local out, n = {}, 0
  for w in s:gmatch("%S+") do
    n = n + 1
    out[n] = w
  end
  return out
end

local WORDS_PATH = "/usr/share/dict/american-english"

--- data.default_words_path() -> "/usr/share/dict/american-english", the
-- word list of Debian's wamerican package (scripts/setup.sh installs it);
-- raises if the file is not there.
-- @usage
-- local ok, path = pcall(data.default_words_path)    -- raises when wamerican is not installed
-- if ok then print(#data.read_words(path) > 1000) end -- true: Debian's word list
function data.default_words_path()
  if not io then error("default_words_path: reading files is not available in a sandbox (no io library)", 2) end
  local f = io.open(WORDS_PATH, "rb")
  if not f then
    error("default_words_path: " .. WORDS_PATH .. " not found; install Debian's wamerican package "
      .. "(scripts/setup.sh does) or pass a word file of your own", 2)
  end
  f:close()
  return WORDS_PATH
end

-- ---------------------------------------------------------------------------
-- Vocab

local Vocab = {}
Vocab.__index = Vocab
Vocab.__name = "attn.data.Vocab"

--- data.Vocab(words [, {unk = "<unk>"}]) -> vocab
-- vocab.words: the unique words sorted like Python's sorted() (code point
-- = byte order), then the unknown token LAST, so every word keeps the
-- notebook's id (`{w: i for i, w in enumerate(sorted(words))}`) + 1.
-- vocab.size = #vocab.words, vocab.unk (the token or nil), vocab.unk_id.
-- If the unknown token is itself one of the words it is not added twice.
-- unk = false builds a vocabulary without one: unknown words then raise.
-- @usage
-- local v = data.Vocab({"the", "cat", "sat", "the"})   -- sorted: cat 1, sat 2, the 3, then <unk> 4
-- print(v.size, v:encode({"the", "dog"}), table.concat(v:decode({2, 3}), " "))   -- 4 tensor([3, 4]) sat the
function data.Vocab(words, ...)
  check_strings("Vocab", "words", words)
  local opts = merge_options("Vocab", {"unk"}, ...)
  local unk = opts.unk
  if unk == nil then unk = "<unk>" end
  if unk ~= false then check_string("Vocab", "unk", unk) end

  local seen, list = {}, {}
  for _, w in ipairs(words) do
    if not seen[w] then
      seen[w] = true
      list[#list + 1] = w
    end
  end
  sort_bytes(list)
  if unk and not seen[unk] then list[#list + 1] = unk end
  local ids = {}
  for i, w in ipairs(list) do ids[w] = i end
  return setmetatable({
    words = list,
    size = #list,
    unk = unk or nil,
    unk_id = unk and ids[unk] or nil,
    ids = ids,
  }, Vocab)
end

--- vocab:index(word) -> 1-based id; the unknown token's id for a word not
-- in the vocabulary (raises when the vocabulary has no unknown token).
-- @usage
-- local v = data.Vocab({"a", "b"})
-- print(v:index("b"), v:index("nope"))                -- its id, and the unk id
function Vocab:index(w)
  check_string("Vocab:index", "word", w)
  local id = self.ids[w]
  if id then return id end
  if not self.unk_id then fail("Vocab:index", "unknown word '%s' and the vocabulary has no unknown token", w) end
  return self.unk_id
end

--- vocab:encode(words) -> 1-d tensor of 1-based ids.  words is a list of
-- strings, or one string that is split at whitespace.
-- @usage
-- local v = data.Vocab({"a", "b"})
-- print(v:encode({"b", "a", "zzz"}))                  -- unknown words get the unk id
function Vocab:encode(words)
  if type(words) == "string" then
    local list = {}
    for w in words:gmatch("%S+") do list[#list + 1] = w end
    words = list
  end
  local n = check_strings("Vocab:encode", "words", words)
  local out = {}
  for i = 1, n do
    local id = self.ids[words[i]] or self.unk_id
    if not id then
      fail("Vocab:encode", "unknown word '%s' (words[%d]) and the vocabulary has no unknown token", words[i], i)
    end
    out[i] = id
  end
  return attn.tensor(out)
end

--- vocab:decode(ids) -> list of words; ids is a 1-d tensor or a list.
-- @usage
-- local v = data.Vocab({"a", "b"})
-- print(table.concat(v:decode(attn.tensor({2, 1})), " "))   -- b a: the words of 1-based ids
function Vocab:decode(ids)
  return decode_ids("Vocab:decode", ids, self.words, self.size)
end

--- #vocab: the number of words, unk included.
-- @usage
-- local v = data.Vocab({"the", "cat", "sat"})
-- print(#v)                                          -- 4: the 3 words and "<unk>"
function Vocab:__len() return self.size end

--- tostring(vocab): "Vocab(size=N, unk=...)", the unk token quoted or none.
-- @usage
-- print(data.Vocab({"the", "cat"}))                  -- Vocab(size=3, unk='<unk>')
function Vocab:__tostring()
  return string.format("Vocab(size=%d, unk=%s)", self.size, self.unk and ("'" .. self.unk .. "'") or "none")
end

-- ---------------------------------------------------------------------------
-- CharTable

-- The characters (UTF-8 code points) of s, as strings.
local function chars_of(fn, s, what)
  local ok, bad = utf8.len(s)
  if not ok then fail(fn, "%s is not valid UTF-8 (byte %d)", what, bad) end
  local out = {}
  for c in s:gmatch(utf8.charpattern) do out[#out + 1] = c end
  return out
end

local function describe_char(c)
  if c == "" then return "'' (the empty string)" end
  local ok, cp = pcall(utf8.codepoint, c)
  if not ok then return string.format("%q (not UTF-8)", c) end
  if cp >= 32 and cp ~= 127 then return string.format("'%s' (U+%04X)", c, cp) end
  return string.format("U+%04X", cp)
end

local CharTable = {}
CharTable.__index = CharTable
CharTable.__name = "attn.data.CharTable"

local function check_token(name, v)
  if v == false then return false end
  check_string("CharTable", name, v)
  if utf8.len(v) ~= 1 then fail("CharTable", "%s must be a single character (got '%s')", name, v) end
  return v
end

--- data.CharTable(strings [, {start = "^", stop = "$"}]) -> table
-- Builds the notebook's character table from the raw strings (not yet
-- wrapped): .chars is the sorted set (code point order, as Python's
-- sorted(set(''.join(names)))) of the characters of every wrap(s), so the
-- start and stop tokens are included; .size = #.chars.  start/stop = false
-- leaves that token out.  Characters are UTF-8 code points.
-- @usage
-- local ct = data.CharTable({"anna", "bob"})        -- the characters seen, plus "^" and "$"
-- local ids = ct:encode(ct:wrap("bob"))              -- 1-based ids of "^bob$"
-- print(ct.size, ids, ct:decode(ids))
function data.CharTable(strings, ...)
  local n = check_strings("CharTable", "strings", strings)
  local opts = merge_options("CharTable", {"start", "stop"}, ...)
  local start = check_token("start", opts.start == nil and "^" or opts.start)
  local stop = check_token("stop", opts.stop == nil and "$" or opts.stop)
  if start and start == stop then fail("CharTable", "start and stop must differ (both '%s')", start) end

  local seen, chars = {}, {}
  local function add(c)
    if not seen[c] then
      seen[c] = true
      chars[#chars + 1] = c
    end
  end
  if start then add(start) end
  if stop then add(stop) end
  local pattern = utf8.charpattern
  for i = 1, n do
    local s = strings[i]
    local ok, bad = utf8.len(s)
    if not ok then fail("CharTable", "strings[%d] is not valid UTF-8 (byte %d)", i, bad) end
    for c in s:gmatch(pattern) do
      if not seen[c] then add(c) end
    end
  end
  sort_bytes(chars)
  local ids = {}
  for i, c in ipairs(chars) do ids[c] = i end
  return setmetatable({
    chars = chars,
    size = #chars,
    start = start or nil,
    stop = stop or nil,
    ids = ids,
  }, CharTable)
end

--- ct:wrap(s) -> start .. s .. stop
-- @usage
-- local ct = data.CharTable({"abc"})
-- print(ct:wrap("ab"))                               -- "^ab$": the start and stop marks added
function CharTable:wrap(s)
  check_string("CharTable:wrap", "s", s)
  return (self.start or "") .. s .. (self.stop or "")
end

--- ct:index(c) -> the 1-based id of one character (raises if unknown).
-- @usage
-- local ct = data.CharTable({"abc"})
-- print(ct:index("a"), ct:index("^"))                -- 1-based ids
function CharTable:index(c)
  check_string("CharTable:index", "c", c)
  local id = self.ids[c]
  if not id then fail("CharTable:index", "character %s is not in the table", describe_char(c)) end
  return id
end

--- ct:encode(s) -> 1-d tensor of the 1-based ids of s's characters (the
-- notebook's ids + 1).  s is encoded as given: wrap it first for the
-- start/stop tokens.  A character not in the table raises, naming it.
-- @usage
-- local ct = data.CharTable({"abc"})
-- print(ct:encode("cab"))                            -- a 1-d int64 tensor of 1-based ids
function CharTable:encode(s)
  check_string("CharTable:encode", "s", s)
  if s == "" then fail("CharTable:encode", "s is empty") end
  local out = {}
  for i, c in ipairs(chars_of("CharTable:encode", s, "s")) do
    local id = self.ids[c]
    if not id then
      fail("CharTable:encode", "character %s at position %d of '%s' is not in the table", describe_char(c), i, s)
    end
    out[i] = id
  end
  return attn.tensor(out)
end

--- ct:decode(ids) -> string; ids is a 1-d tensor or a list of 1-based ids.
-- @usage
-- local ct = data.CharTable({"abc"})
-- print(ct:decode({ct:index("c"), ct:index("a")}))   -- "ca"
function CharTable:decode(ids)
  return table.concat(decode_ids("CharTable:decode", ids, self.chars, self.size))
end

--- #table: the number of characters.
-- @usage
-- local ct = data.CharTable({"abc", "cab"})
-- print(#ct)                                         -- 5: a, b, c and the start and stop marks
function CharTable:__len() return self.size end

--- tostring(table): "CharTable(size=N, chars='...')".
-- @usage
-- print(data.CharTable({"hi"}))                      -- CharTable(size=4, chars='$^hi')
function CharTable:__tostring()
  return string.format("CharTable(size=%d, chars='%s')", self.size, table.concat(self.chars))
end

-- ---------------------------------------------------------------------------
-- Tensors

--- data.one_hot(ids, n) -> tensor of shape ids.shape .. {n}: 1 at each
-- 1-based id, 0 elsewhere (int64, as torch's).  ids is a tensor or a
-- (nested) list of ids.
-- @usage
-- print(data.one_hot({1, 3}, 3))                      -- [[1, 0, 0], [0, 0, 1]], int64
function data.one_hot(ids, n)
  if not (attn.is_tensor(ids) or type(ids) == "table") then
    fail("one_hot", "ids must be a tensor or a list of integers (got %s)", type(ids))
  end
  local k = to_int(n)
  if not k or k < 1 then fail("one_hot", "n must be an integer >= 1 (got %s)", tostring(n)) end
  return attn.one_hot(ids, k)
end

--- data.pad(seqs [, {value = 0, length = nil}]) -> x [B, T], mask [B, T]
-- seqs: a list of B sequences, each a 1-d tensor or a list of numbers.
-- T is `length` when given (longer sequences are cut to their first T
-- items), else the longest sequence's length.  Sequences are left-aligned
-- and padded on the right with `value`; mask is 1 on real items, 0 on
-- padding.
-- @usage
-- local x, mask = data.pad({{5, 6, 7}, {8}}, {value = 0})
-- print(x, mask)                                      -- [[5, 6, 7], [8, 0, 0]] and 1 on real items
function data.pad(seqs, ...)
  local B = check_list("pad", "seqs", seqs)
  if B == 0 then fail("pad", "seqs is empty") end
  local opts = merge_options("pad", {"value", "length"}, ...)
  local value = opts.value == nil and 0 or opts.value
  if type(value) ~= "number" then fail("pad", "value must be a number (got %s)", type(value)) end
  local rows = {}
  local longest = 0
  for b = 1, B do
    local s = seqs[b]
    if attn.is_tensor(s) then
      if s:dim() ~= 1 then fail("pad", "seqs[%d] must be 1-d (got %d dimensions)", b, s:dim()) end
      s = s:totable()
    elseif type(s) == "table" then
      for i = 1, #s do
        if type(s[i]) ~= "number" then fail("pad", "seqs[%d][%d] is a %s, expected a number", b, i, type(s[i])) end
      end
    else
      fail("pad", "seqs[%d] must be a 1-d tensor or a list of numbers (got %s)", b, type(s))
    end
    rows[b] = s
    if #s > longest then longest = #s end
  end
  local T = opts.length
  if T == nil then
    T = longest
    if T == 0 then fail("pad", "every sequence is empty; give a length") end
  else
    T = to_int(T)
    if not T or T < 1 then fail("pad", "length must be an integer >= 1 (got %s)", tostring(opts.length)) end
  end
  -- tensors first, so that a huge length fails in the allocation (with
  -- attn's message) instead of filling a Lua table
  local x, m = attn.full({B, T}, value), attn.zeros(B, T)
  for b = 1, B do
    local s = rows[b]
    local len = math.min(#s, T)
    if len > 0 then
      local row = {}
      for t = 1, len do row[t] = s[t] end
      x[b]:narrow(1, 1, len):copy_(attn.tensor(row))
      m[b]:narrow(1, 1, len):fill_(1)
    end
  end
  return x, m
end

-- ---------------------------------------------------------------------------
-- Shuffling, splitting, batching

-- A permutation of 1..n as a Lua list, from attn.randperm (torch's
-- randperm, so the same seed gives torch's order).
local function permutation(n, g)
  if n == 0 then return {} end
  local p = g and attn.randperm(n, g) or attn.randperm(n)
  local out = p:totable()
  for i = 1, n do out[i] = math.tointeger(out[i]) end
  return out
end

--- data.shuffle(list [, generator]) -> a new list with list's items in a
-- random order (list itself is not changed).  The order is
-- attn.randperm(#list [, generator]), so after attn.manual_seed(s) it is
-- torch's `[xs[i] for i in torch.randperm(len(xs))]` after
-- torch.manual_seed(s).  An empty list gives an empty list and draws
-- nothing.
-- @usage
-- local list = data.shuffle({1, 2, 3, 4, 5}, attn.Generator(0))   -- a shuffled copy, torch's randperm order
-- print(table.concat(list, " "))                     -- 5 1 2 4 3
function data.shuffle(list, g)
  local n = check_list("shuffle", "list", list)
  check_generator("shuffle", g)
  local out = {}
  for i, j in ipairs(permutation(n, g)) do out[i] = list[j] end
  return out
end

--- data.split(list, fraction [, generator | false]) -> train, valid
-- fraction (0 <= fraction <= 1) is the VALIDATION share: the list is
-- shuffled (as data.shuffle with the generator; pass false to keep the
-- order), then valid gets the last round(fraction * #list) items and
-- train the first ones.  So split(names, 0.1) gives 90% train, 10% valid.
-- @usage
-- local train, valid = data.split({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.2, attn.Generator(1))   -- 20% valid
-- print(#train, #valid)                                -- 8 2
function data.split(list, fraction, g)
  local n = check_list("split", "list", list)
  if n == 0 then fail("split", "list is empty") end
  if type(fraction) ~= "number" or fraction ~= fraction or fraction < 0 or fraction > 1 then
    fail("split", "fraction (the validation share) must be a number in [0, 1] (got %s)", tostring(fraction))
  end
  local items = list
  if g ~= false then
    check_generator("split", g)
    items = data.shuffle(list, g)
  end
  local n_valid = math.floor(fraction * n + 0.5)
  local n_train = n - n_valid
  local train, valid = {}, {}
  for i = 1, n_train do train[i] = items[i] end
  for i = 1, n_valid do valid[i] = items[n_train + i] end
  return train, valid
end

--- data.batches(list, batch_size [, {shuffle = true, generator = g,
-- drop_last = false}]) -> iterator
--   for batch, k in data.batches(names, 32) do ... end
-- Each step gives the next batch (a list of up to batch_size items) and
-- its 1-based number.  With shuffle the order is drawn once, when
-- batches() is called (call it again each epoch for a new order); the last
-- batch is shorter unless drop_last.
-- @usage
-- local items = {1, 2, 3, 4, 5}
-- for batch in data.batches(items, 2, {shuffle = false}) do print(table.concat(batch, ",")) end   -- 1,2 3,4 5
function data.batches(list, ...)
  local opts = merge_options("batches", {"batch_size", "shuffle", "generator", "drop_last"}, ...)
  local batch_size = opts.batch_size
  local n = check_list("batches", "list", list)
  if n == 0 then fail("batches", "list is empty") end
  local bs = to_int(batch_size)
  if not bs or bs < 1 then
    fail("batches", "batch_size must be an integer >= 1 (got %s)", tostring(batch_size))
  end
  check_bool("batches", "shuffle", opts.shuffle)
  check_bool("batches", "drop_last", opts.drop_last)
  local g = check_generator("batches", opts.generator)
  local items = list
  if opts.shuffle ~= false then items = data.shuffle(list, g) end
  local count = opts.drop_last and n // bs or (n + bs - 1) // bs
  local k = 0
  return function()
    if k >= count then return nil end
    k = k + 1
    local batch, first = {}, (k - 1) * bs
    for i = 1, math.min(bs, n - first) do batch[i] = items[first + i] end
    return batch, k
  end
end

-- ---------------------------------------------------------------------------
-- Progress bar

local function clock_string(s)
  if s ~= s or s == math.huge or s < 0 then return "?" end
  s = math.floor(s + 0.5)
  local h, m, sec = s // 3600, s % 3600 // 60, s % 60
  if h > 0 then return string.format("%d:%02d:%02d", h, m, sec) end
  return string.format("%02d:%02d", m, sec)
end

local function rate_string(r)
  if r ~= r or r == math.huge or r <= 0 then return "? it/s" end
  if r < 1 then return string.format("%.2f s/it", 1 / r) end
  return string.format("%.2f it/s", r)
end

local function extras_string(extras)
  if not extras then return "" end
  local keys = {}
  for k in pairs(extras) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  local parts = {}
  for i, k in ipairs(keys) do
    local v = extras[k]
    if math.type(v) == "float" then v = string.format("%.4g", v) end
    parts[i] = k .. "=" .. tostring(v)
  end
  return table.concat(parts, ", ")
end

local Progress = {}
Progress.__index = Progress
Progress.__name = "attn.data.Progress"

local function is_file(f) return io ~= nil and io.type(f) == "file" end

--- data.progress(total [, opts]) -> bar
--   local bar = data.progress(#batches, {label = "train"})
--   for i = 1, n do ...; bar:update(i, {loss = l}) end
--   bar:finish()
-- opts: label = "train", width = 30 (bar characters), out = io.stderr,
-- interactive (default: whether out is a terminal and TERM is not "dumb"),
-- min_interval = 0.1 (seconds between redraws), log_interval = 10
-- (seconds between log lines when not interactive; 0: none before the
-- summary), clock (a function giving seconds; default attn.now, a
-- monotonic clock).
-- Interactive: one line redrawn in place with "\r":
--   train  45%|=============>                 | 450/1000 [00:05<00:06, 81.20 it/s, loss=1.234]
-- at most once per min_interval (the last step is always drawn).  Not
-- interactive (a log file, CI, nohup): a timestamped line every
-- log_interval seconds, and one summary line at finish():
--   2026-11-28 22:05:01 train: 450/1000 (45%) 00:05<00:06, 81.20 it/s, loss=1.234
--   2026-11-28 22:05:08 train: 1000/1000 (100%) in 00:12, 81.20 it/s, loss=1.234
-- bar:write(line) prints a line (a loss report, say) to io.stdout without
-- breaking the bar, as tqdm.write does.
-- @usage
-- local bar = data.progress(100, {label = "fit", out = io.stderr})
-- for i = 1, 100 do bar:update(i, {loss = 1 / i}) end
-- bar:finish()
function data.progress(total, ...)
  local n = to_int(total)
  if not n or n < 1 then fail("progress", "total must be an integer >= 1 (got %s)", tostring(total)) end
  local opts = merge_options("progress", {"label", "width", "out", "interactive", "min_interval", "log_interval",
    "clock"}, ...)
  check_bool("progress", "interactive", opts.interactive)
  local label = opts.label == nil and "train" or opts.label
  check_string("progress", "label", label)
  local width = opts.width == nil and 30 or to_int(opts.width)
  if not width or width < 1 then fail("progress", "width must be an integer >= 1 (got %s)", tostring(opts.width)) end
  if opts.out == nil and not io then
    fail("progress", "no io library here (a sandbox): there is no file to draw the bar on")
  end
  local out = opts.out == nil and io.stderr or opts.out
  if not is_file(out) then fail("progress", "out must be an open file (got %s)", tostring(out)) end
  local clock = opts.clock or attn.now
  if type(clock) ~= "function" then fail("progress", "clock must be a function (got %s)", type(clock)) end
  local interactive = opts.interactive
  if interactive == nil then
    interactive = core._isatty(out) and os.getenv ~= nil and os.getenv("TERM") ~= "dumb"
  end
  local min_interval = opts.min_interval == nil and 0.1 or opts.min_interval
  if type(min_interval) ~= "number" or not (min_interval >= 0) then -- luacheck: ignore 581 (NaN must fail)
    fail("progress", "min_interval must be a number >= 0 (got %s)", tostring(opts.min_interval))
  end
  local log_interval = opts.log_interval == nil and 10 or opts.log_interval
  if type(log_interval) ~= "number" or not (log_interval >= 0) then -- luacheck: ignore 581 (NaN must fail)
    fail("progress", "log_interval must be a number >= 0 (got %s)", tostring(opts.log_interval))
  end
  local now = clock()
  return setmetatable({
    log_interval = log_interval,
    last_log = now,
    total = n,
    count = 0,
    label = label,
    width = width,
    out = out,
    interactive = interactive and true or false,
    min_interval = min_interval,
    clock = clock,
    started = now,
    last_draw = -math.huge,
    last_len = 0,
    done = false,
  }, Progress)
end

function Progress:_line(now)
  local elapsed = now - self.started
  local rate = elapsed > 0 and self.count / elapsed or 0 / 0
  local frac = self.count / self.total
  local filled = math.floor(frac * self.width)
  local bar = string.rep("=", filled)
  if filled < self.width then
    bar = bar .. (self.count > 0 and ">" or " ") .. string.rep(" ", self.width - filled - 1)
  end
  local eta = rate > 0 and (self.total - self.count) / rate or 0 / 0
  local extras = extras_string(self.extras)
  return string.format("%s %3d%%|%s| %d/%d [%s<%s, %s%s]", self.label, math.floor(frac * 100), bar, self.count,
    self.total, clock_string(elapsed), clock_string(eta), rate_string(rate), extras ~= "" and ", " .. extras or "")
end

-- "2026-11-28 22:05:01 " (os.date; a sandbox without it: the elapsed time)
local function stamp(self, now)
  if os and os.date then return os.date("%Y-%m-%d %H:%M:%S ") end
  return "[" .. clock_string(now - self.started) .. "] "
end

-- One log line of the state (not interactive).
function Progress:_log(now)
  local elapsed = now - self.started
  local rate = elapsed > 0 and self.count / elapsed or 0 / 0
  local eta = rate > 0 and (self.total - self.count) / rate or 0 / 0
  local extras = extras_string(self.extras)
  self.out:write(string.format("%s%s: %d/%d (%d%%) %s<%s, %s%s\n", stamp(self, now), self.label, self.count,
    self.total, math.floor(self.count / self.total * 100), clock_string(elapsed), clock_string(eta),
    rate_string(rate), extras ~= "" and ", " .. extras or ""))
  self.out:flush()
  self.last_log = now
end

function Progress:_draw(now)
  local line = self:_line(now)
  -- Blank out what a longer previous line left behind.
  local pad = self.last_len > #line and string.rep(" ", self.last_len - #line) or ""
  self.out:write("\r", line, pad)
  self.out:flush()
  self.last_len = #line
  self.last_draw = now
end

--- bar:update([i [, extras]]): i items are done (default: one more than
-- before); extras is a table of fields shown as key=value (numbers as
-- %.4g, keys sorted), kept until the next update that gives some.
-- @usage
-- local bar = data.progress(10, {label = "epoch 1"})
-- for i = 1, 10 do bar:update(i, {loss = 2 / i}) end
-- bar:finish()
function Progress:update(i, extras)
  if self.done then fail("Progress:update", "the bar is finished") end
  if i == nil then i = self.count + 1 end
  local c = to_int(i)
  if not c or c < 0 or c > self.total then
    fail("Progress:update", "i must be an integer in 0..%d (got %s)", self.total, tostring(i))
  end
  if extras ~= nil then
    if type(extras) ~= "table" then fail("Progress:update", "extras must be a table (got %s)", type(extras)) end
    self.extras = extras
  end
  self.count = c
  if self.interactive then
    local now = self.clock()
    if c == self.total or now - self.last_draw >= self.min_interval then self:_draw(now) end
  elseif self.log_interval > 0 and c < self.total then
    local now = self.clock()
    if now - self.last_log >= self.log_interval then self:_log(now) end
  end
  return self
end

--- bar:write(line [, file]): writes line and a newline to file (default
-- io.stdout) without breaking the bar: on a terminal the bar is cleared,
-- the line written and the bar drawn again below it (tqdm.write).
-- @usage
-- local bar = data.progress(3, {out = io.stderr})
-- for step = 1, 3 do
--   bar:update(step)
--   bar:write(("step=%d loss=%.4f"):format(step, 1 / step))
-- end
-- bar:finish()
function Progress:write(line, file)
  if type(line) ~= "string" and type(line) ~= "number" then
    fail("Progress:write", "line must be a string (got %s)", type(line))
  end
  file = file == nil and io.stdout or file
  if not is_file(file) then fail("Progress:write", "file must be an open file (got %s)", tostring(file)) end
  local redraw = self.interactive and not self.done and self.last_len > 0
  if redraw then
    self.out:write("\r", string.rep(" ", self.last_len), "\r")
    self.out:flush()
    self.last_len = 0
  end
  file:write(line, "\n")
  file:flush()
  if redraw then self:_draw(self.clock()) end
  return self
end

--- bar:finish(): draws the final state and ends the line (interactive), or
-- writes the one summary line (not interactive).  Later calls do nothing.
-- bar:close() and a `<close>` variable finish it too.
-- @usage
-- do
--   local bar <close> = data.progress(3, {label = "eval"})
--   for i = 1, 3 do bar:update(i) end
-- end -- finished here
function Progress:finish()
  if self.done then return self end
  self.done = true
  local now = self.clock()
  if self.interactive then
    self:_draw(now)
    self.out:write("\n")
  else
    local elapsed = now - self.started
    local rate = elapsed > 0 and self.count / elapsed or 0 / 0
    local extras = extras_string(self.extras)
    self.out:write(string.format("%s%s: %d/%d (%d%%) in %s, %s%s\n", stamp(self, now), self.label, self.count,
      self.total, math.floor(self.count / self.total * 100), clock_string(elapsed), rate_string(rate),
      extras ~= "" and ", " .. extras or ""))
  end
  self.out:flush()
  return self
end

Progress.close = Progress.finish
Progress.__close = Progress.finish

-- ---------------------------------------------------------------------------
-- Distributed sampling

local DistributedSampler = {}
DistributedSampler.__index = DistributedSampler

--- data.DistributedSampler(n [, opts]) -> sampler giving this rank its shard
-- of the example indices 1..n, with torch.utils.data.DistributedSampler's
-- semantics: opts.shuffle (default true) permutes with
-- attn.randperm(n, attn.Generator(seed + epoch)) (torch's order for the
-- same seed and epoch, so every rank draws the same permutation),
-- opts.seed (default 0), opts.drop_last (default false: the list is padded
-- by repeating its start so every rank gets ceil(n / size) indices; true:
-- the tail is dropped so every rank gets floor(n / size)).  Rank r takes
-- every size-th index starting at position r + 1.  opts.num_replicas and
-- opts.rank default to attn.dist.size() and attn.dist.rank().
--   s:set_epoch(e)    reshuffle for epoch e (call it each epoch, as in torch)
--   s:indices()       this rank's 1-based indices as a Lua list
--   s:len(), #s       how many
--   for i in s:iter() do ... end
-- @usage
-- local sampler = data.DistributedSampler(10, {num_replicas = 2, rank = 0, seed = 1})
-- sampler:set_epoch(3)                               -- a new shuffle each epoch
-- print(table.concat(sampler:indices(), " "))        -- 1 10 8 3 2: this rank's 5, as torch (1-based)
function data.DistributedSampler(n, ...)
  if type(n) ~= "number" or n ~= n or n == math.huge or n ~= math.floor(n) or n < 0 or n >= 2 ^ 53 then
    error("DistributedSampler: n must be a non-negative integer, got " .. tostring(n), 2)
  end
  n = math.tointeger(n)
  -- torch's order after the dataset (here its length n) and/or an options table
  local opts = merge_options("DistributedSampler", {"num_replicas", "rank", "shuffle", "seed", "drop_last"}, ...)
  local kinds = {shuffle = "boolean", drop_last = "boolean", seed = "integer", num_replicas = "integer",
    rank = "integer"}
  for k, v in pairs(opts) do
    local kind = kinds[k]
    if not kind then error(attn._misuse.unknown_option("DistributedSampler", k, kinds), 2) end
    if kind == "boolean" and type(v) ~= "boolean" then
      error(("DistributedSampler: option %s must be a boolean, got %s"):format(k, type(v)), 2)
    end
    if kind == "integer" then
      if math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2 ^ 53 then v = math.tointeger(v) end
      if math.type(v) ~= "integer" or (k == "seed" and v < 0) then
        error(("DistributedSampler: option %s must be a%s integer, got %s"):format(k,
          k == "seed" and " non-negative" or "n", tostring(v)), 2)
      end
    end
  end
  local dist = require "attn.dist"
  local self = setmetatable({
    n = n,
    shuffle = opts.shuffle ~= false,
    seed = math.tointeger(opts.seed or 0),
    drop_last = opts.drop_last == true,
    num_replicas = math.tointeger(opts.num_replicas or dist.size()),
    rank = math.tointeger(opts.rank or dist.rank()),
    epoch = 0,
  }, DistributedSampler)
  local P, r = self.num_replicas, self.rank
  if math.type(P) ~= "integer" or P < 1 then error("DistributedSampler: num_replicas must be an integer >= 1", 2) end
  if math.type(r) ~= "integer" or r < 0 or r >= P then
    error(("DistributedSampler: rank must be in 0..%d (0-based), got %s"):format(P - 1, tostring(r)), 2)
  end
  if self.drop_last and n % P ~= 0 then
    self.num_samples = math.ceil((n - P) / P)
  else
    self.num_samples = math.ceil(n / P)
  end
  self.total_size = self.num_samples * P
  return self
end

--- sampler:set_epoch(epoch): the epoch (an integer) that, added to the seed,
-- seeds the shuffle, so each epoch draws a new permutation, the same on
-- every rank.  Call it before each epoch, as in torch.
-- @usage
-- local sampler = data.DistributedSampler(8, {num_replicas = 2, rank = 1})
-- sampler:set_epoch(1)                               -- call it at the start of each epoch
-- print(table.concat(sampler:indices(), " "))        -- 5 7 4 1, as torch (1-based)
function DistributedSampler:set_epoch(epoch)
  if math.type(epoch) ~= "integer" then error("set_epoch: epoch must be an integer", 2) end
  self.epoch = epoch
end

--- sampler:len() -> the number of indices this rank gets each epoch:
-- ceil(n / num_replicas), or with drop_last the tail dropped; also `#sampler`.
-- @usage
-- local sampler = data.DistributedSampler(10, {num_replicas = 4, rank = 0})
-- print(sampler:len(), #sampler)                     -- 3 3: ceil(10 / 4), the list padded to 12
function DistributedSampler:len() return self.num_samples end
DistributedSampler.__len = DistributedSampler.len

--- sampler:indices() -> this rank's 1-based indices for the current epoch,
-- a Lua list: every num_replicas-th index of the (shuffled, padded) list,
-- starting at position rank + 1.
-- @usage
-- local sampler = data.DistributedSampler(6, 2, 0, false)   -- 2 replicas, rank 0, no shuffle
-- print(table.concat(sampler:indices(), " "))        -- 1 3 5
function DistributedSampler:indices()
  local n = self.n
  local all
  if self.shuffle then
    all = permutation(n, attn.Generator(self.seed + self.epoch))
  else
    all = {}
    for i = 1, n do all[i] = i end
  end
  if not self.drop_last then
    local i = 1
    while #all < self.total_size and n > 0 do
      all[#all + 1] = all[i]
      i = i + 1
    end
  end
  local out = {}
  for pos = self.rank + 1, self.total_size, self.num_replicas do out[#out + 1] = all[pos] end
  return out
end

--- sampler:iter() -> an iterator over sampler:indices(): `for i in
-- sampler:iter() do`.  A DataLoader takes the sampler itself ({sampler = s}).
-- @usage
-- local sampler = data.DistributedSampler(6, {num_replicas = 2, rank = 1, shuffle = false})
-- for i in sampler:iter() do print(i) end            -- 2, 4, 6
function DistributedSampler:iter()
  local idx, i = self:indices(), 0
  return function()
    i = i + 1
    return idx[i]
  end
end

-- torch.utils.data's TensorDataset, Subset, DataLoader, random_split and
-- default_collate (lua/attn/dataset.lua), under attn.data like torch's.
do
  local dataset = require "attn.dataset"
  for _, k in ipairs({"TensorDataset", "Subset", "DataLoader", "random_split", "default_collate"}) do
    data[k] = dataset[k]
  end
end

-- vocab.encode(s) for vocab:encode(s) (and every other method) says to write ':'.
attn._misuse.guard_class(Vocab, "vocab")
attn._misuse.guard_class(CharTable, "chars")
attn._misuse.guard_class(Progress, "progress")
attn._misuse.guard_class(DistributedSampler, "sampler")

-- attn's helpers (attn/signature.lua); these take no optional arguments
do
  local signature = require("attn.signature")
  signature.declare(data, "data.", {read_lines = false, read_words = false, default_words_path = false,
    one_hot = false})
  signature.declare(Vocab, "data.Vocab.", {index = false, encode = false, decode = false})
  signature.declare(CharTable, "data.CharTable.", {wrap = false, index = false, encode = false, decode = false})
  -- update(i, extras): extras (shown after the bar, {loss = 0.5}) is a
  -- string-keyed table itself, so no options table could be told from it
  signature.declare(Progress, "data.Progress.", {finish = false, close = false, update = false, write = false})
  -- these read their options positionally or from a trailing table themselves
  signature.declare(data, "data.", {Vocab = "native: words, unk='<unk>'",
    CharTable = "native: strings, start='^', stop='$'", pad = "native: seqs, value=0, length=nil",
    batches = "native: list, batch_size, shuffle=true, generator=nil, drop_last=false",
    progress = "native: total, label='train', width=30, out=nil, interactive=nil, min_interval=0.1, "
      .. "log_interval=10, clock=nil",
    shuffle = "list, generator=nil", split = "list, fraction, generator=nil",
    -- torch's DistributedSampler(dataset, ...) with the dataset's length n
    DistributedSampler = "native: n, num_replicas=nil, rank=nil, shuffle=true, seed=0, drop_last=false"})
end

return data
