-- SPDX-License-Identifier: MIT

--- attn.text: BERT's WordPiece tokenizer, a port of Hugging Face's
-- BertTokenizer (transformers' tokenization_bert.py, the "slow" Python one).
--
--   local text = require "attn.text"              (or require "attn".text)
--   local tok = text.WordPiece.from_pretrained("bert-base-uncased")   -- a directory
--   tok:tokenize("Héllo, naïve café!")  --> {"hello", ",", "naive", "cafe", "!"}
--   local enc = tok:encode("How are you?", "Fine.", {max_length = 16, padding = "max_length"})
--   enc.input_ids, enc.token_type_ids, enc.attention_mask   -- [1,16] tensors
--   enc.tokens                                             -- {"[CLS]", "how", ...}
--   tok:decode(enc.input_ids, {skip_special_tokens = true}) --> "how are you? fine."
--
-- ************************************************************************
-- IDS ARE 1-BASED, like every index in attn's Lua API: the Lua id of a
-- token is its LINE NUMBER in vocab.txt, i.e. Hugging Face's id + 1
-- ([PAD] is 1, not 0; bert-base-uncased's [CLS] is 102, not 101).  They go
-- straight into attn.nn.Embedding, which takes 1-based ids.  Subtract 1
-- only when comparing with numbers printed by Python.
-- token_type_ids are 1-based too, for the same reason (they index the
-- token-type embedding table): 1 for the first sentence (with [CLS] and
-- its [SEP]) and for padding, 2 for the second sentence of a pair (HF's
-- 0 and 1).  attention_mask is a mask, not an index: 1 for a real token,
-- 0 for padding, as in HF.
-- Id tensors are attn's float32 tensors holding integral values (exact
-- up to 2^24).
-- ************************************************************************
--
-- The pipeline, exactly HF's:
--  1. special tokens ([UNK] [SEP] [PAD] [CLS] [MASK]) written in the text
--     are split out whole (case-sensitive match), the rest is tokenized;
--  2. _clean_text: U+0000, U+FFFD and control characters (Unicode
--     category C*, but not \t \n \r) are removed, whitespace (Zs, \t \n \r,
--     and U+2028/U+2029, which Python's str.split() splits on) separates
--     words;
--  3. CJK ideographs (BasicTokenizer._is_chinese_char's blocks) become
--     words of their own (tokenize_chinese_chars, default true);
--  4. per word: lower-casing (Python's str.lower() one character at a
--     time, as BertTokenizer does: "Σ" is always "σ"), then accent
--     stripping (NFD, drop category Mn; by default on when lower-casing),
--     then splitting off each punctuation character (Unicode P* and every
--     ASCII symbol: "$", "^", "`", "+" ...);
--  5. greedy longest-match-first WordPiece, continuation pieces prefixed
--     "##"; a word with no split, or longer than max_input_chars_per_word
--     (100) characters, becomes [UNK].
-- Unicode facts come from lua/attn/app/unicode_data.lua, generated from
-- Python's unicodedata (text.unicode_version()).
--
-- Input must be a Lua string holding UTF-8.  Invalid UTF-8 bytes are
-- treated like Python's decode(errors="replace"): each becomes U+FFFD,
-- which step 2 removes, so they are dropped (valid characters around them
-- are kept; "caf\xffé" tokenizes as "café").
--
-- Differences from HF, on purpose: ids are 1-based (above); what HF only
-- logs is an error here (truncation that cannot reach max_length, a batch
-- whose rows differ in length without padding, decode of an id outside the
-- vocabulary where HF would print [UNK]); a UTF-8 byte-order mark at the
-- start of vocab.txt is ignored.
-- @module attn.text
local attn = require "attn.base"
local B = require "attn.app.text_basic" -- Unicode, UTF-8 and the basic tokenizer
local drop_invalid, py_strip, basic_segment, split_specials = B.drop_invalid, B.py_strip, B.basic_segment,
  B.split_specials
local json = require "attn.app.json"

local text = {}

-- ---------------------------------------------------------------------------
-- Errors

-- fail(fn, fmt, ...) raises "fn: message" at the user's line (the first
-- caller outside the attn package).
local fail = attn._misuse.fail

local function check_string(fn, what, v)
  if type(v) ~= "string" then fail(fn, "%s must be a string (got %s)", what, type(v)) end
  return v
end

-- opts must be nil or a table whose keys are all in `known` (catches typos).
local check_opts = attn._misuse.check_options

local function check_bool(fn, what, v, default)
  if v == nil then return default end
  if type(v) ~= "boolean" then fail(fn, "%s must be a boolean (got %s)", what, type(v)) end
  return v
end

local function check_posint(fn, what, v)
  local n = type(v) == "number" and math.tointeger(v)
  if not n or n < 1 then fail(fn, "%s must be an integer >= 1 (got %s)", what, tostring(v)) end
  return n
end

--- text.unicode_version() -> the Unicode version of the tables ("14.0.0"),
-- that of the Python which generated lua/attn/app/unicode_data.lua.
-- @usage
-- local text = require "attn.text"
-- print(text.unicode_version())                                  -- the Unicode tables' version, 14.0.0
function text.unicode_version()
  return B.tables().version
end

local function read_file(fn, path)
  if not io then fail(fn, "no file access here (a sandboxed state has no io library): use WordPiece.new") end
  local f, err = io.open(path, "rb")
  if not f then fail(fn, "cannot open %s", err) end
  local s, rerr = f:read("a")
  f:close()
  if not s then fail(fn, "cannot read %s: %s", path, tostring(rerr)) end
  return s
end

-- ---------------------------------------------------------------------------
-- WordPiece

local WordPiece = {}
WordPiece.__index = WordPiece
WordPiece.__name = "attn.text.WordPiece"
text.WordPiece = WordPiece

local SPECIAL_NAMES = {"unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}
local DEFAULT_SPECIAL = {unk_token = "[UNK]", sep_token = "[SEP]", pad_token = "[PAD]",
                         cls_token = "[CLS]", mask_token = "[MASK]"}

local new_options = {lower = true, do_lower_case = true, strip_accents = true, tokenize_chinese_chars = true,
                     max_length = true, model_max_length = true, max_input_chars_per_word = true,
                     unk_token = true, sep_token = true, pad_token = true, cls_token = true, mask_token = true}

-- A vocabulary given as a list (id = position) or a map token -> id.
local function vocab_from(fn, v)
  if type(v) ~= "table" then fail(fn, "vocab must be a list of tokens or a map token -> id (got %s)", type(v)) end
  local list, map = {}, {}
  local n = #v
  if n > 0 then
    for i = 1, n do
      local tok = v[i]
      if type(tok) ~= "string" then fail(fn, "vocab[%d] is a %s, expected a string", i, type(tok)) end
      if not utf8.len(tok) then fail(fn, "vocab[%d] is not valid UTF-8", i) end
      list[i] = tok
      map[tok] = i -- a repeated token keeps its last id, as HF's load_vocab
    end
    for k in pairs(v) do
      if math.type(k) ~= "integer" or k < 1 or k > n then
        fail(fn, "vocab mixes a list with other keys (%s)", tostring(k))
      end
    end
  else
    for tok, id in pairs(v) do
      if type(tok) ~= "string" then fail(fn, "vocab key %s is not a string", tostring(tok)) end
      if not utf8.len(tok) then fail(fn, "vocab key '%s' is not valid UTF-8", tok) end
      local i = type(id) == "number" and math.tointeger(id)
      if not i or i < 1 then fail(fn, "vocab['%s'] = %s is not an id >= 1", tok, tostring(id)) end
      if list[i] then fail(fn, "vocab gives id %d to both '%s' and '%s'", i, list[i], tok) end
      list[i] = tok
      map[tok] = i
      n = math.max(n, i)
    end
    for i = 1, n do
      if not list[i] then fail(fn, "vocab ids must be 1..%d without gaps (no token has id %d)", n, i) end
    end
  end
  if n == 0 then fail(fn, "vocab is empty") end
  return list, map
end

--- WordPiece.new(vocab [, opts]) -> tokenizer
-- vocab: a list of tokens (a token's id is its position, 1-based) or a
-- map token -> 1-based id (ids 1..n without gaps).
-- opts (HF's names in brackets):
--   lower = true [do_lower_case]: lower-case the text;
--   strip_accents = nil: strip accents (NFD, drop Mn); nil follows lower;
--   tokenize_chinese_chars = true: CJK ideographs become words of their own;
--   max_length = 512 [model_max_length]: the default max_length of encode;
--   max_input_chars_per_word = 100: longer words become [UNK];
--   unk_token, sep_token, pad_token, cls_token, mask_token: the special
--     tokens ("[UNK]", ...); unk_token must be in the vocabulary.
-- @usage
-- local text = require "attn.text"
-- local wp = text.WordPiece.new({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "##s", "sat"})
-- print(table.concat(wp:tokenize("The cats sat"), " "))           -- the cat ##s sat
function WordPiece.new(vocab, opts)
  local fn = "WordPiece.new"
  opts = check_opts(fn, opts, new_options)
  local list, map = vocab_from(fn, vocab)
  local self = setmetatable({}, WordPiece)
  self.ids_to_tokens = list
  self.vocab = map
  self.vocab_size = #list
  local lower = opts.lower
  if lower == nil then lower = opts.do_lower_case end
  self.lower = check_bool(fn, "lower", lower, true)
  if opts.strip_accents ~= nil then self.strip_accents = check_bool(fn, "strip_accents", opts.strip_accents) end
  self.tokenize_chinese_chars = check_bool(fn, "tokenize_chinese_chars", opts.tokenize_chinese_chars, true)
  local ml = opts.max_length
  if ml == nil then ml = opts.model_max_length end
  self.max_length = ml == nil and 512 or check_posint(fn, "max_length", ml)
  self.max_input_chars_per_word = opts.max_input_chars_per_word == nil and 100
    or check_posint(fn, "max_input_chars_per_word", opts.max_input_chars_per_word)
  local specials, seen = {}, {}
  for _, name in ipairs(SPECIAL_NAMES) do
    local tok = opts[name]
    if tok == nil then tok = DEFAULT_SPECIAL[name] end
    check_string(fn, name, tok)
    if tok == "" then fail(fn, "%s is empty", name) end
    if not utf8.len(tok) then fail(fn, "%s is not valid UTF-8", name) end
    self[name] = tok
    self[name:gsub("_token$", "_id")] = map[tok]
    if not seen[tok] then
      seen[tok] = true
      specials[#specials + 1] = tok
    end
  end
  if not self.unk_id then fail(fn, "the unknown token '%s' is not in the vocabulary", self.unk_token) end
  self.special_tokens = specials -- split out of the text whole
  self.special_set = seen
  -- For the never_split check of finish_word: first code points and the
  -- longest special token in characters.
  self._special_first, self._special_chars = {}, 0
  for _, tok in ipairs(specials) do
    self._special_first[utf8.codepoint(tok, 1)] = true
    self._special_chars = math.max(self._special_chars, utf8.len(tok))
  end
  self.special_ids = {}
  for _, tok in ipairs(specials) do
    if map[tok] then self.special_ids[map[tok]] = true end
  end
  -- No vocabulary entry is longer than this many bytes, so longer
  -- substrings need not be looked up (same result as HF's full scan).
  -- _cont maps "xyz" to "##xyz" for every continuation piece, so the
  -- search needs no concatenation.
  local maxb, maxc, cont = 0, 0, {}
  for i = 1, #list do
    local tok = list[i]
    if #tok > maxb then maxb = #tok end
    if tok:sub(1, 2) == "##" then
      cont[tok:sub(3)] = tok
      if #tok - 2 > maxc then maxc = #tok - 2 end
    end
  end
  self._max_bytes, self._max_cont_bytes, self._cont = maxb, maxc, cont
  self._cache, self._cache_n = {}, 0
  return self
end

-- vocab.txt as HF's load_vocab reads it: one token per line, lines end at
-- \n, \r\n or \r (Python's universal newlines), nothing else stripped, so
-- an empty line is a token.
local function read_vocab(fn, path)
  check_string(fn, "path", path)
  local s = read_file(fn, path)
  if s:sub(1, 3) == "\239\187\191" then s = s:sub(4) end
  s = s:gsub("\r\n?", "\n")
  local list, n, pos = {}, 0, 1
  local len = #s
  while pos <= len do
    local nl = s:find("\n", pos, true) or len + 1
    local tok = s:sub(pos, nl - 1)
    n = n + 1
    local ok, bad = utf8.len(tok)
    if not ok then fail(fn, "%s:%d: invalid UTF-8 (byte %d of the line)", path, n, bad) end
    list[n] = tok
    pos = nl + 1
  end
  if n == 0 then fail(fn, "%s is empty", path) end
  return list
end

--- text.read_vocab(path) -> list of the tokens of a vocab.txt, line by
-- line (a token's 1-based id is its index).
-- @usage
-- local text = require "attn.text"
-- local path = os.tmpname()
-- local f = assert(io.open(path, "w")); f:write("[PAD]\n[UNK]\nhello\n"); f:close()
-- print(#text.read_vocab(path))                                  -- 3
-- os.remove(path)
function text.read_vocab(path)
  return read_vocab("read_vocab", path)
end

--- WordPiece.from_file(path [, opts]) -> tokenizer reading vocab.txt at
-- path (one token per line; id = line number).  opts as WordPiece.new.
-- @usage
-- local text = require "attn.text"
-- local path = os.tmpname()
-- local f = assert(io.open(path, "w")); f:write("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n"); f:close()
-- local wp = text.WordPiece.from_file(path)                      -- a vocab.txt, one token a line
-- print(wp:encode("hello").input_ids)                            -- tensor([[3, 5, 4]])
-- os.remove(path)
function WordPiece.from_file(path, opts)
  local list = read_vocab("WordPiece.from_file", path)
  return WordPiece.new(list, opts)
end

local config_keys = {do_lower_case = "lower", strip_accents = "strip_accents",
                     tokenize_chinese_chars = "tokenize_chinese_chars", model_max_length = "max_length",
                     unk_token = "unk_token", sep_token = "sep_token", pad_token = "pad_token",
                     cls_token = "cls_token", mask_token = "mask_token"}

--- WordPiece.from_pretrained(dir [, opts]) -> tokenizer for a Hugging Face
-- model directory: dir/vocab.txt, and dir/tokenizer_config.json when it is
-- there (do_lower_case, strip_accents, tokenize_chinese_chars,
-- model_max_length and the special tokens are taken from it; opts given
-- here win).  A model_max_length above 10^6 (HF's "no limit") is ignored.
-- @usage
-- local text = require "attn.text"
-- local dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir)
-- local f = assert(io.open(dir .. "/vocab.txt", "w")); f:write("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n"); f:close()
-- local wp = text.WordPiece.from_pretrained(dir)   -- a Hugging Face folder: vocab.txt, tokenizer_config.json
-- print(#wp:tokenize("hello there"))
-- os.execute("rm -rf " .. dir)
function WordPiece.from_pretrained(dir, opts)
  local fn = "WordPiece.from_pretrained"
  check_string(fn, "dir", dir)
  opts = check_opts(fn, opts, new_options)
  local merged = {}
  local cpath = dir .. "/tokenizer_config.json"
  if not io then fail(fn, "no file access here (a sandboxed state has no io library): use WordPiece.new") end
  local f = io.open(cpath, "rb")
  if f then
    local src = f:read("a")
    f:close()
    local ok, cfg = pcall(json.decode, src or "", cpath)
    if not ok then fail(fn, "cannot parse %s", tostring(cfg)) end
    if type(cfg) ~= "table" then fail(fn, "%s does not hold a JSON object", cpath) end
    for key, name in pairs(config_keys) do
      local v = cfg[key]
      if type(v) == "table" then v = v.content end -- {"content": "[CLS]", ...} (AddedToken)
      if name == "max_length" and type(v) == "number" and v > 1e6 then v = nil end
      if v ~= nil then merged[name] = v end
    end
  end
  for k, v in pairs(opts) do
    if k == "do_lower_case" then k = "lower" elseif k == "model_max_length" then k = "max_length" end
    merged[k] = v
  end
  return WordPiece.from_file(dir .. "/vocab.txt", merged)
end

--- #tok: the vocabulary size (len(tokenizer) in transformers).
function WordPiece:__len() return self.vocab_size end

--- tostring(tok): the settings, "WordPiece(vocab_size=..., lower=..., ...)".
function WordPiece:__tostring()
  local strip = self.strip_accents
  return string.format("WordPiece(vocab_size=%d, lower=%s, strip_accents=%s, tokenize_chinese_chars=%s, max_length=%d)",
    self.vocab_size, tostring(self.lower), strip == nil and "nil" or tostring(strip),
    tostring(self.tokenize_chinese_chars), self.max_length)
end

local function check_self(fn, self)
  if getmetatable(self) ~= WordPiece then
    fail(fn, "call it as tok:%s(...) on a WordPiece tokenizer", fn:match("[%w_]+$"))
  end
end

--- tok:basic_tokenize(s) -> list of words: the text after HF's
-- BasicTokenizer (cleaning, CJK, lower-casing, accents, punctuation) and
-- before WordPiece; special tokens in the text are kept whole.
-- @usage
-- local text = require "attn.text"
-- local wp = text.WordPiece.new({"[UNK]", "hello"})
-- print(table.concat(wp:basic_tokenize("Hello, World!"), " "))    -- hello , world !
function WordPiece:basic_tokenize(s)
  check_self("WordPiece:basic_tokenize", self)
  check_string("WordPiece:basic_tokenize", "text", s)
  local out = {}
  split_specials(self, s, out, basic_segment)
  return out
end

-- ---------------------------------------------------------------------------
-- WordPiece proper

-- Greedy longest-match-first pieces of one word.
local function wordpiece_pieces(self, w)
  local vocab, unk = self.vocab, self.unk_token
  local len = #w
  local nchars = utf8.len(w)
  if nchars > self.max_input_chars_per_word then return {unk} end
  -- bounds[i]: byte where character i starts; bounds[nchars + 1] = len + 1
  local bounds
  if nchars == len then
    bounds = nil -- ASCII: character i starts at byte i
  else
    bounds = {}
    local i = 0
    for p in utf8.codes(w) do
      i = i + 1
      bounds[i] = p
    end
    bounds[nchars + 1] = len + 1
  end
  local cont = self._cont
  local pieces, start = {}, 1 -- start: character index
  while start <= nchars do
    local sb = bounds and bounds[start] or start
    local map, limit = vocab, sb + self._max_bytes -- limit: first byte past the longest candidate
    if start > 1 then map, limit = cont, sb + self._max_cont_bytes end
    local found, stop = nil, nchars
    if not bounds and stop >= limit then stop = limit - 1 end
    while stop >= start do
      local eb = bounds and bounds[stop + 1] or stop + 1
      if eb <= limit then
        local hit = map[w:sub(sb, eb - 1)]
        if hit then
          found = start > 1 and hit or w:sub(sb, eb - 1)
          break
        end
      end
      stop = stop - 1
    end
    if not found then return {unk} end
    pieces[#pieces + 1] = found
    start = stop + 1
  end
  return pieces
end

local CACHE_MAX = 50000

local function wordpiece_into(self, w, out)
  local pieces = self._cache[w]
  if not pieces then
    pieces = wordpiece_pieces(self, w)
    if self._cache_n >= CACHE_MAX then self._cache, self._cache_n = {}, 0 end
    self._cache[w] = pieces
    self._cache_n = self._cache_n + 1
  end
  local n = #out
  for i = 1, #pieces do out[n + i] = pieces[i] end
end

--- tok:wordpiece(word) -> list of the WordPiece pieces of one word (no
-- basic tokenization): {"un", "##aff", "##able"}, or {unk_token}.
-- @usage
-- local text = require "attn.text"
-- local wp = text.WordPiece.new({"[UNK]", "play", "##ing"})
-- print(table.concat(wp:wordpiece("playing"), " "))               -- play ##ing: one word, greedy longest match
function WordPiece:wordpiece(word)
  check_self("WordPiece:wordpiece", self)
  check_string("WordPiece:wordpiece", "word", word)
  local out = {}
  for w in drop_invalid(word):gmatch("%S+") do wordpiece_into(self, w, out) end
  return out
end

-- A segment of text: basic tokenizer, then WordPiece on each word.
local function tokenize_segment(self, s, out)
  local words = {}
  basic_segment(self, s, words)
  for i = 1, #words do wordpiece_into(self, words[i], out) end
end

--- tok:tokenize(s) -> list of WordPiece tokens (strings) of the text s.
-- Special tokens written in s ("[MASK]", case-sensitive) are kept whole.
-- @usage
-- local text = require "attn.text"
-- local wp = text.WordPiece.new({"[UNK]", "un", "##aff", "##able"})
-- print(table.concat(wp:tokenize("unaffable"), " "))              -- un ##aff ##able
function WordPiece:tokenize(s)
  check_self("WordPiece:tokenize", self)
  check_string("WordPiece:tokenize", "text", s)
  local out = {}
  split_specials(self, s, out, tokenize_segment)
  return out
end

-- ---------------------------------------------------------------------------
-- Ids

--- tok:convert_tokens_to_ids(tokens) -> list of 1-based ids (the unknown
-- token's id for a token not in the vocabulary); a single string gives a
-- single id.
-- @usage
-- local text = require "attn.text"
-- local wp = text.WordPiece.new({"[PAD]", "[UNK]", "hi"})
-- print(table.concat(wp:convert_tokens_to_ids({"hi", "nope"}), " "))   -- 3 2: unknown tokens get [UNK]'s id
function WordPiece:convert_tokens_to_ids(tokens)
  local fn = "WordPiece:convert_tokens_to_ids"
  check_self(fn, self)
  local vocab, unk = self.vocab, self.unk_id
  if type(tokens) == "string" then return vocab[tokens] or unk end
  if type(tokens) ~= "table" then fail(fn, "tokens must be a string or a list of strings (got %s)", type(tokens)) end
  local out = {}
  for i = 1, #tokens do
    local t = tokens[i]
    if type(t) ~= "string" then fail(fn, "tokens[%d] is a %s, expected a string", i, type(t)) end
    out[i] = vocab[t] or unk
  end
  return out
end

-- A list of 1-based ids from a list, a 1-d tensor or a [1,T] tensor.
local function id_list(fn, self, ids)
  local list
  if attn.is_tensor(ids) then
    local d = ids:dim()
    if d == 2 and ids:shape()[1] == 1 then
      ids = ids:select(1, 1)
    elseif d ~= 1 then
      fail(fn, "ids must be a 1-d tensor or a [1,T] tensor (got shape [%s])", table.concat(ids:shape(), ","))
    end
    list = ids:totable()
  elseif type(ids) == "table" then
    list = ids
  elseif type(ids) == "number" then
    list = {ids}
  else
    fail(fn, "ids must be a list of integers or a tensor (got %s)", type(ids))
  end
  local out, n = {}, self.vocab_size
  for i = 1, #list do
    local v = list[i]
    local id = type(v) == "number" and math.tointeger(v)
    if not id then fail(fn, "ids[%d] = %s is not an integer", i, tostring(v)) end
    if id < 1 or id > n then
      fail(fn, "ids[%d] = %d is outside the vocabulary (ids are 1-based: 1..%d)", i, id, n)
    end
    out[i] = id
  end
  return out
end

--- tok:convert_ids_to_tokens(ids [, {skip_special_tokens = false}]) ->
-- list of tokens.  ids: 1-based, a list, a 1-d tensor or a [1,T] tensor
-- (a single number gives a single token).
-- @usage
-- local text = require "attn.text"
-- local wp = text.WordPiece.new({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "hi"})
-- print(table.concat(wp:convert_ids_to_tokens({3, 5, 4}), " "))   -- [CLS] hi [SEP]: ids are 1-based
function WordPiece:convert_ids_to_tokens(ids, opts)
  local fn = "WordPiece:convert_ids_to_tokens"
  check_self(fn, self)
  opts = check_opts(fn, opts, {skip_special_tokens = true})
  local skip = check_bool(fn, "skip_special_tokens", opts.skip_special_tokens, false)
  local single = type(ids) == "number"
  local list = id_list(fn, self, ids)
  if single then return self.ids_to_tokens[list[1]] end
  local out = {}
  for _, id in ipairs(list) do
    if not (skip and self.special_ids[id]) then out[#out + 1] = self.ids_to_tokens[id] end
  end
  return out
end

--- tok:convert_tokens_to_string(tokens) -> the tokens joined with spaces,
-- "##" continuations glued back (HF's convert_tokens_to_string).
-- @usage
-- local text = require "attn.text"
-- local wp = text.WordPiece.new({"[UNK]", "cat", "##s"})
-- print(wp:convert_tokens_to_string({"cat", "##s"}))              -- cats
function WordPiece:convert_tokens_to_string(tokens)
  local fn = "WordPiece:convert_tokens_to_string"
  check_self(fn, self)
  if type(tokens) ~= "table" then fail(fn, "tokens must be a list of strings (got %s)", type(tokens)) end
  for i = 1, #tokens do
    if type(tokens[i]) ~= "string" then fail(fn, "tokens[%d] is a %s, expected a string", i, type(tokens[i])) end
  end
  local s = table.concat(tokens, " "):gsub(" ##", "")
  return py_strip(s)
end

-- HF's clean_up_tokenization: no space before . ? ! , and in English
-- contractions.
local CLEANUPS = {{" %.", "."}, {" %?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
                  {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}}

local decode_options = {skip_special_tokens = true, clean_up_tokenization_spaces = true}

local function decode_list(self, fn, ids, opts)
  local skip = check_bool(fn, "skip_special_tokens", opts.skip_special_tokens, false)
  local clean = check_bool(fn, "clean_up_tokenization_spaces", opts.clean_up_tokenization_spaces, true)
  local toks = {}
  for _, id in ipairs(ids) do
    if not (skip and self.special_ids[id]) then toks[#toks + 1] = self.ids_to_tokens[id] end
  end
  local s = py_strip((table.concat(toks, " "):gsub(" ##", "")))
  if clean then
    for _, r in ipairs(CLEANUPS) do s = s:gsub(r[1], r[2]) end
  end
  return s
end

--- tok:decode(ids [, {skip_special_tokens = false,
-- clean_up_tokenization_spaces = true}]) -> string.  ids: 1-based, a
-- list, a 1-d tensor or a [1,T] tensor.  Tokens are joined with spaces,
-- " ##" removed, and (clean_up_tokenization_spaces) the spaces HF's
-- clean_up_tokenization removes are removed (" ." " ?" " !" " ," " ' "
-- " n't" " 'm" " 's" " 've" " 're").  skip_special_tokens drops [CLS],
-- [SEP], [PAD], [MASK] and [UNK], as HF does.  The text is the
-- normalized one: lower-cased, accents stripped.
-- @usage
-- local text = require "attn.text"
-- local wp = text.WordPiece.new({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "##s"})
-- local ids = wp:encode("the cats").input_ids
-- print(wp:decode(ids[1], {skip_special_tokens = true}))          -- the cats
function WordPiece:decode(ids, opts)
  local fn = "WordPiece:decode"
  check_self(fn, self)
  opts = check_opts(fn, opts, decode_options)
  return decode_list(self, fn, id_list(fn, self, ids), opts)
end

--- tok:decode_batch(ids [, opts]) -> list of strings, one per row of a
-- [B,T] tensor or list of id lists; opts as decode.
-- @usage
-- local text = require "attn.text"
-- local wp = text.WordPiece.new({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"})
-- print(table.concat(wp:decode_batch({{5, 6}, {6}}), " | "))      -- a b | b
function WordPiece:decode_batch(ids, opts)
  local fn = "WordPiece:decode_batch"
  check_self(fn, self)
  opts = check_opts(fn, opts, decode_options)
  local rows
  if attn.is_tensor(ids) then
    if ids:dim() ~= 2 then fail(fn, "ids must be a [B,T] tensor (got %d dimensions)", ids:dim()) end
    rows = ids:totable()
  elseif type(ids) == "table" then
    rows = ids
  else
    fail(fn, "ids must be a [B,T] tensor or a list of id lists (got %s)", type(ids))
  end
  local out = {}
  for b = 1, #rows do
    if type(rows[b]) ~= "table" and not attn.is_tensor(rows[b]) then
      fail(fn, "ids[%d] must be a list of ids (got %s)", b, type(rows[b]))
    end
    out[b] = decode_list(self, fn, id_list(fn, self, rows[b]), opts)
  end
  return out
end

-- ---------------------------------------------------------------------------
-- Encoding: special tokens, truncation, padding

local encode_options = {max_length = true, padding = true, truncation = true, add_special_tokens = true,
                        pad_to_multiple_of = true}

local PADDING = {["longest"] = "longest", ["max_length"] = "max_length", ["do_not_pad"] = false}
local TRUNCATION = {["longest_first"] = "longest_first", ["only_first"] = "only_first",
                    ["only_second"] = "only_second", ["do_not_truncate"] = false}

-- HF's _get_padding_truncation_strategies, for the options used here.
local function strategies(self, fn, opts)
  local padding = opts.padding
  if padding == nil or padding == false then
    padding = false
  elseif padding == true then
    padding = "longest"
  elseif type(padding) == "string" and PADDING[padding] ~= nil then
    padding = PADDING[padding]
  else
    fail(fn, "padding must be false, true, 'longest', 'max_length' or 'do_not_pad' (got %s)", tostring(padding))
  end
  local max_length = opts.max_length
  if max_length ~= nil then max_length = check_posint(fn, "max_length", max_length) end
  local truncation = opts.truncation
  if truncation == nil then
    -- HF: a max_length without padding or truncation means longest_first.
    truncation = (max_length ~= nil and not padding) and "longest_first" or false
  elseif truncation == true then
    truncation = "longest_first"
  elseif truncation == false then
    truncation = false
  elseif type(truncation) == "string" and TRUNCATION[truncation] ~= nil then
    truncation = TRUNCATION[truncation]
  else
    fail(fn, "truncation must be true, false, 'longest_first', 'only_first', 'only_second' or "
      .. "'do_not_truncate' (got %s)", tostring(truncation))
  end
  if max_length == nil and (truncation or padding == "max_length") then max_length = self.max_length end
  local multiple = opts.pad_to_multiple_of
  if multiple ~= nil then multiple = check_posint(fn, "pad_to_multiple_of", multiple) end
  local special = check_bool(fn, "add_special_tokens", opts.add_special_tokens, true)
  -- padded rows are Lua lists: refuse lengths no model takes rather than
  -- fill memory (max_length = 2^40 with padding = "max_length")
  local limit = 1 << 24
  if padding == "max_length" and max_length > limit then
    fail(fn, "max_length %d is too large to pad to (at most %d)", max_length, limit)
  end
  if multiple and multiple > limit then fail(fn, "pad_to_multiple_of %d is too large (at most %d)", multiple, limit) end
  return padding, truncation, max_length, multiple, special
end

local function sub_list(t, n)
  local out = {}
  for i = 1, n do out[i] = t[i] end
  return out
end

-- HF's truncate_sequences (right side, no overflow): the token lists a
-- and b (b may be nil) shortened by `remove` tokens.
local function truncate(fn, a, b, remove, strategy, max_length)
  if strategy == "longest_first" then
    local na, nb = #a, b and #b or 0
    for _ = 1, remove do -- one token at a time from the longer; the second on a tie
      if not b or na > nb then
        if na == 0 then break end
        na = na - 1
      else
        nb = nb - 1
      end
    end
    local a2 = sub_list(a, na)
    return a2, b and sub_list(b, nb)
  elseif strategy == "only_first" then
    if #a <= remove then
      fail(fn, "cannot truncate to max_length %d with 'only_first': %d tokens must go but the first "
        .. "sequence has %d (use 'longest_first' or 'only_second')", max_length, remove, #a)
    end
    return sub_list(a, #a - remove), b
  else -- only_second
    if not b then
      fail(fn, "cannot truncate to max_length %d with 'only_second': there is no second sequence", max_length)
    end
    if #b <= remove then
      fail(fn, "cannot truncate to max_length %d with 'only_second': %d tokens must go but the second "
        .. "sequence has %d (use 'longest_first' or 'only_first')", max_length, remove, #b)
    end
    return a, sub_list(b, #b - remove)
  end
end

-- One encoded sequence (before padding): ids, token types, tokens.
local function prepare(self, fn, a, b, special, truncation, max_length)
  local ta = self:tokenize(a)
  local tb = b and self:tokenize(b)
  local nspecial = special and (b and 3 or 2) or 0
  local total = #ta + (tb and #tb or 0) + nspecial
  if truncation and max_length and total > max_length then
    if max_length < nspecial then
      fail(fn, "max_length %d is less than the %d special tokens", max_length, nspecial)
    end
    ta, tb = truncate(fn, ta, tb, total - max_length, truncation, max_length)
    local left = #ta + (tb and #tb or 0) + nspecial
    if left > max_length then
      fail(fn, "cannot truncate to max_length %d: %d tokens are left", max_length, left)
    end
  end
  local tokens, types = {}, {}
  local function add(tok, typ)
    tokens[#tokens + 1] = tok
    types[#types + 1] = typ
  end
  if special then
    if not self.cls_id then fail(fn, "the [CLS] token '%s' is not in the vocabulary", self.cls_token) end
    if not self.sep_id then fail(fn, "the [SEP] token '%s' is not in the vocabulary", self.sep_token) end
    add(self.cls_token, 1)
  end
  for i = 1, #ta do add(ta[i], 1) end
  if special then add(self.sep_token, 1) end
  if tb then
    local typ = special and 2 or 1 -- HF: without special tokens both sequences have type 0
    for i = 1, #tb do add(tb[i], typ) end
    if special then add(self.sep_token, 2) end
  end
  local ids = self:convert_tokens_to_ids(tokens)
  return {ids = ids, types = types, tokens = tokens}
end

-- The length rows are padded to (HF's pad): the longest row or
-- max_length, rounded up to a multiple; nil without padding.  A row
-- longer than that stays as it is.
local function pad_target(padding, max_length, multiple, longest)
  if not padding then return nil end
  local len = padding == "max_length" and max_length or longest
  if multiple and len % multiple ~= 0 then len = (len // multiple + 1) * multiple end
  return len
end

local function check_text(fn, what, v)
  if type(v) ~= "string" then fail(fn, "%s must be a string (got %s)", what, type(v)) end
end

-- Rows (already prepared) -> the result table with [B,T] tensors.
local function assemble(self, fn, rows, padding, max_length, multiple)
  local longest = 0
  for _, r in ipairs(rows) do longest = math.max(longest, #r.ids) end
  local target = pad_target(padding, max_length, multiple, longest)
  local ids, types, mask, tokens = {}, {}, {}, {}
  local len
  for b, r in ipairs(rows) do
    local n = #r.ids
    local ri, rt, rm, rk = {}, {}, {}, {}
    for i = 1, n do
      ri[i], rt[i], rm[i], rk[i] = r.ids[i], r.types[i], 1, r.tokens[i]
    end
    if target and n < target then
      if not self.pad_id then fail(fn, "the padding token '%s' is not in the vocabulary", self.pad_token) end
      for i = n + 1, target do
        ri[i], rt[i], rm[i], rk[i] = self.pad_id, 1, 0, self.pad_token
      end
    end
    if len and #ri ~= len then
      if padding then
        fail(fn, "the sequences have different lengths (%d and %d tokens) even after padding to %d: one is "
          .. "longer than max_length; pass truncation = true", math.min(#ri, len), math.max(#ri, len), target)
      end
      fail(fn, "the sequences have different lengths (%d has %d tokens, an earlier one %d): pass padding = "
        .. "'longest' or 'max_length'", b, #ri, len)
    end
    len = #ri
    ids[b], types[b], mask[b], tokens[b] = ri, rt, rm, rk
  end
  local function tensor(rows2)
    if len == 0 then return attn.zeros(#rows2, 0) end
    return attn.tensor(rows2)
  end
  return {input_ids = tensor(ids), token_type_ids = tensor(types), attention_mask = tensor(mask), tokens = tokens}
end

--- tok:encode(a [, b] [, opts]) -> {input_ids, token_type_ids,
-- attention_mask, tokens}: the three are [1,T] tensors, tokens the list
-- of the T token strings (padding included).  a is the text, b the
-- optional second text of a pair ([CLS] a [SEP] b [SEP]).  opts (HF's
-- meanings; encode(a, opts) works too):
--   add_special_tokens = true: [CLS] and [SEP];
--   max_length: defaults to the tokenizer's max_length (512) where
--     truncation or padding = "max_length" needs one;
--   truncation: false (default; but a max_length given without padding
--     truncates, as in HF), true = "longest_first" (drop the last token of
--     the longer sequence, of the second on a tie, until it fits),
--     "only_first", "only_second"; truncation that cannot fit raises;
--   padding: false (default), true = "longest", "max_length" (pad with
--     [PAD] to max_length; attention_mask 0 there);
--   pad_to_multiple_of: round the padded length up to a multiple.
-- IDS ARE 1-BASED (vocab.txt line numbers, HF id + 1); token types are
-- 1 (first sentence, padding) and 2 (second sentence): see the top of
-- this file.
-- @usage
-- local text = require "attn.text"
-- local wp = text.WordPiece.new({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "##s", "sat"})
-- local enc = wp:encode("the cats", "sat", {max_length = 10, padding = "max_length"})   -- a sentence pair
-- print(enc.input_ids, enc.token_type_ids, enc.attention_mask)
function WordPiece:encode(a, b, opts)
  local fn = "WordPiece:encode"
  check_self(fn, self)
  if type(b) == "table" and opts == nil then b, opts = nil, b end
  if type(opts) == "table" and opts.text_pair ~= nil and b == nil then -- HF's text_pair= keyword
    local o = {}
    for k, v in pairs(opts) do if k ~= "text_pair" then o[k] = v end end
    b, opts = opts.text_pair, o
  end
  opts = check_opts(fn, opts, encode_options)
  check_text(fn, "text", a)
  if b ~= nil then check_text(fn, "text_pair", b) end
  local padding, truncation, max_length, multiple, special = strategies(self, fn, opts)
  local row = prepare(self, fn, a, b, special, truncation, max_length)
  local out = assemble(self, fn, {row}, padding, max_length, multiple)
  out.tokens = out.tokens[1]
  return out
end

--- tok:encode_batch(items [, opts]) -> {input_ids, token_type_ids,
-- attention_mask, tokens}: [B,T] tensors and a list of B token lists.
-- items: a list whose entries are texts or pairs {a, b}.  opts as
-- encode, except that padding defaults to "longest" (a tensor needs rows
-- of one length; padding = false raises if they differ).
-- @usage
-- local text = require "attn.text"
-- local wp = text.WordPiece.new({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat"})
-- local enc = wp:encode_batch({"the cat sat", "the cat"}, {padding = true})   -- padded to the longest
-- print(enc.input_ids.shape, enc.attention_mask)
function WordPiece:encode_batch(items, opts)
  local fn = "WordPiece:encode_batch"
  check_self(fn, self)
  opts = check_opts(fn, opts, encode_options)
  if type(items) ~= "table" then
    fail(fn, "items must be a list of texts or {text, text_pair} pairs (got %s)", type(items))
  end
  if #items == 0 then fail(fn, "items is empty") end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  if o.padding == nil then o.padding = "longest" end
  local padding, truncation, max_length, multiple, special = strategies(self, fn, o)
  local rows = {}
  for i = 1, #items do
    local it = items[i]
    local a, b
    if type(it) == "string" then
      a = it
    elseif type(it) == "table" then
      a, b = it[1], it[2]
      if type(a) ~= "string" or (b ~= nil and type(b) ~= "string") or #it > 2 then
        fail(fn, "items[%d] must be a text or a pair {text, text_pair} of strings", i)
      end
    else
      fail(fn, "items[%d] must be a text or a pair {text, text_pair} (got %s)", i, type(it))
    end
    rows[i] = prepare(self, fn, a, b, special, truncation, max_length)
  end
  return assemble(self, fn, rows, padding, max_length, multiple)
end

-- tok.encode(s) for tok:encode(s) (and every other method) says to write ':'.
attn._misuse.guard_class(WordPiece, "tok")

-- functions without optional arguments (attn/signature.lua)
require("attn.signature").declare(text, "text.", {read_vocab = false, unicode_version = false})
require("attn.signature").declare(WordPiece, "text.WordPiece.", {
  basic_tokenize = false, wordpiece = false, tokenize = false, convert_tokens_to_ids = false,
  convert_tokens_to_string = false,
})
-- Hugging Face's tokenizer options are keywords (HF's own callers name
-- them): these functions read them from their options table
local NEW = "/, *, lower=true, do_lower_case=nil, strip_accents=nil, tokenize_chinese_chars=true, max_length=512, "
  .. "model_max_length=nil, max_input_chars_per_word=100, unk_token='[UNK]', sep_token='[SEP]', pad_token='[PAD]', "
  .. "cls_token='[CLS]', mask_token='[MASK]'"
local ENCODE = "*, max_length=nil, padding=false, truncation=false, add_special_tokens=true, pad_to_multiple_of=nil"
local DECODE = "/, *, skip_special_tokens=false, clean_up_tokenization_spaces=true"
require("attn.signature").declare(WordPiece, "text.WordPiece.", {
  new = "native: vocab, " .. NEW, from_file = "native: path, " .. NEW, from_pretrained = "native: dir, " .. NEW,
  convert_ids_to_tokens = "native: self, ids, /, *, skip_special_tokens=false",
  decode = "native: self, ids, " .. DECODE, decode_batch = "native: self, sequences, " .. DECODE,
  encode = "native: self, text, /, text_pair=nil, " .. ENCODE, encode_batch = "native: self, items, /, " .. ENCODE,
})

return text
