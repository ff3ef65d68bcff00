-- SPDX-License-Identifier: MIT
-- attn.text: the WordPiece (BERT) tokenizer.
-- 1. Known answers written by hand (Hugging Face's own BertTokenizer test
--    cases and docstring examples, ids worked out from small inline
--    vocabularies): they do not depend on the Python port.
-- 2. The Python port of HF's BertTokenizer (scripts/fixtures/gen_wordpiece.py)
--    through spec/fixtures/wordpiece_cases.lua: 50 texts x 5 configurations
--    (words, tokens, ids), encode with truncation/padding, batches, decode;
--    and wordpiece_unicode.lua: the basic tokenizer over ~8000 code points
--    sampled across Unicode under three configurations (the tables).
-- 3. The API around it: files, from_pretrained, ids into nn.Embedding,
--    invalid UTF-8, and the error messages.
local attn = require "attn"
local text = require "attn.text"
local fixture = require "support.fixture"
local S = require "support.sh"

local SRC = os.getenv("ATTN_SOURCE_DIR") or "."
local VOCAB = SRC .. "/spec/fixtures/wordpiece_vocab.txt"

local tmpfiles = {}
local function tmpfile(content)
  local path = os.tmpname()
  S.writefile(path, content)
  tmpfiles[#tmpfiles + 1] = path
  return path
end

local function tmpdir(files)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  for name, content in pairs(files) do
    S.writefile(dir .. "/" .. name, content)
    tmpfiles[#tmpfiles + 1] = dir .. "/" .. name
  end
  tmpfiles[#tmpfiles + 1] = dir
  return dir
end

teardown(function()
  for i = #tmpfiles, 1, -1 do os.remove(tmpfiles[i]) end
end)

local function ints(t)
  local v = attn.is_tensor(t) and t:totable() or t
  local out = {}
  for i, x in ipairs(v) do
    if type(x) == "table" then out[i] = ints(x) else out[i] = math.tointeger(x) end
  end
  return out
end

local raises = require("support.errors").raises

-- HF's test vocabulary (tests/models/bert/test_tokenization_bert.py).
local HF_VOCAB = {"[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ",", "low",
                  "lowest"}

describe("attn.text", function()
  it("is reachable as attn.text and as require 'attn.text'", function()
    assert.are.equal(text, attn.text)
    assert.are.equal(text.WordPiece, attn.text.WordPiece)
  end)

  it("records the Unicode version of its tables", function()
    assert.are.equal(fixture.load("wordpiece_cases").unicode_version, text.unicode_version())
  end)

  describe("known answers (Hugging Face's BertTokenizer tests)", function()
    local W = text.WordPiece

    it("splits CJK ideographs into words of their own", function()
      local tok = W.new({"[UNK]"})
      assert.are.same({"ah", "\u{535A}", "\u{63A8}", "zz"}, tok:basic_tokenize("ah\u{535A}\u{63A8}zz"))
      local keep = W.new({"[UNK]"}, {tokenize_chinese_chars = false})
      assert.are.same({"ah\u{535A}\u{63A8}zz"}, keep:basic_tokenize("ah\u{535A}\u{63A8}zz"))
    end)

    it("lower-cases and strips accents by default", function()
      local tok = W.new({"[UNK]"})
      assert.are.same({"hello", "!", "how", "are", "you", "?"}, tok:basic_tokenize(" \tHeLLo!how  \n Are yoU?  "))
      assert.are.same({"hello"}, tok:basic_tokenize("H\u{00E9}llo"))
      assert.are.same({"hallo", "!", "how", "are", "you", "?"}, tok:basic_tokenize(" \tHäLLo!how  \n Are yoU?  "))
    end)

    it("keeps accents with strip_accents = false and strips them with true", function()
      local keep = W.new({"[UNK]"}, {strip_accents = false})
      assert.are.same({"hällo", "!", "how", "are", "you", "?"}, keep:basic_tokenize(" \tHäLLo!how  \n Are yoU?  "))
      assert.are.same({"h\u{00E9}llo"}, keep:basic_tokenize("H\u{00E9}llo"))
      local strip = W.new({"[UNK]"}, {strip_accents = true})
      assert.are.same({"hallo", "!", "how", "are", "you", "?"}, strip:basic_tokenize(" \tHäLLo!how  \n Are yoU?  "))
      assert.are.same({"hello"}, strip:basic_tokenize("H\u{00E9}llo"))
    end)

    it("keeps case (and accents unless asked) with lower = false", function()
      local cased = W.new({"[UNK]"}, {lower = false})
      assert.are.same({"HeLLo", "!", "how", "Are", "yoU", "?"}, cased:basic_tokenize(" \tHeLLo!how  \n Are yoU?  "))
      assert.are.same({"HäLLo", "!", "how", "Are", "yoU", "?"}, cased:basic_tokenize(" \tHäLLo!how  \n Are yoU?  "))
      local cased_keep = W.new({"[UNK]"}, {lower = false, strip_accents = false})
      assert.are.same({"HäLLo", "!", "how", "Are", "yoU", "?"}, cased_keep:basic_tokenize(" \tHäLLo!how  \n Are yoU?  "))
      local cased_strip = W.new({"[UNK]"}, {lower = false, strip_accents = true})
      assert.are.same({"HaLLo", "!", "how", "Are", "yoU", "?"}, cased_strip:basic_tokenize(" \tHäLLo!how  \n Are yoU?  "))
    end)

    it("keeps special tokens whole (never_split)", function()
      local tok = W.new({"[UNK]"}, {lower = false})
      assert.are.same({"HeLLo", "!", "how", "Are", "yoU", "?", "[UNK]"},
        tok:basic_tokenize(" \tHeLLo!how  \n Are yoU? [UNK]"))
    end)

    it("runs greedy longest-match-first WordPiece with ## continuations", function()
      local tok = W.new({"[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing"})
      assert.are.same({}, tok:tokenize(""))
      assert.are.same({"un", "##want", "##ed", "runn", "##ing"}, tok:tokenize("unwanted running"))
      assert.are.same({"[UNK]", "runn", "##ing"}, tok:tokenize("unwantedX running"))
      assert.are.same({"un", "##want", "##ed"}, tok:wordpiece("unwanted"))
    end)

    it("tokenizes the classic example and gives 1-based ids (HF id + 1)", function()
      local tok = W.new(HF_VOCAB)
      local pieces = tok:tokenize("UNwant\u{00E9}d,running")
      assert.are.same({"un", "##want", "##ed", ",", "runn", "##ing"}, pieces)
      -- HF: [7, 4, 5, 10, 8, 9]
      assert.are.same({8, 5, 6, 11, 9, 10}, tok:convert_tokens_to_ids(pieces))
      assert.are.same(pieces, tok:convert_ids_to_tokens({8, 5, 6, 11, 9, 10}))
      assert.are.equal(1, tok:convert_tokens_to_ids("[UNK]"))
      assert.are.equal(1, tok:convert_tokens_to_ids("nope"))
      assert.are.equal("lowest", tok:convert_ids_to_tokens(13))
    end)

    it("cleans text: soft hyphen gone, unknown words [UNK] (test_clean_text)", function()
      local tok = W.new(HF_VOCAB)
      assert.are.same({"[UNK]"}, tok:tokenize("Test"))
      assert.are.same({}, tok:tokenize("\u{00AD}"))
      assert.are.same({"[UNK]"}, tok:tokenize("test"))
    end)

    it("classifies whitespace, control and punctuation like HF's _is_* helpers", function()
      local tok = W.new({"[UNK]"}, {lower = false})
      -- whitespace: space, \t, \r, \n, U+00A0 (Zs); not letters or "-"
      assert.are.same({"A", "B", "C", "D", "E"}, tok:basic_tokenize("A\tB\rC\nD\u{00A0}E"))
      -- control: U+0005 (Cc) dropped; \t \r \n are whitespace instead
      assert.are.same({"AB"}, tok:basic_tokenize("A\5B"))
      -- punctuation: "-", "$", "`", "." (ASCII symbols) are; "A" and " " are not
      assert.are.same({"A", "-", "B", "$", "C", "`", "D", ".", "E"}, tok:basic_tokenize("A-B$C`D.E"))
    end)

    it("splits 'unaffable' as un ##aff ##able (the WordpieceTokenizer docstring)", function()
      local tok = W.from_file(VOCAB)
      assert.are.same({"un", "##aff", "##able"}, tok:tokenize("unaffable"))
    end)

    it("marks words over max_input_chars_per_word characters [UNK]", function()
      local tok = W.new({"[UNK]", "a", "##a", "é", "##é"}, {max_input_chars_per_word = 100, strip_accents = false})
      local pieces = tok:tokenize(("a"):rep(100))
      assert.are.equal(100, #pieces)
      assert.are.equal("a", pieces[1])
      assert.are.equal("##a", pieces[100])
      assert.are.same({"[UNK]"}, tok:tokenize(("a"):rep(101)))
      -- characters, not bytes: 100 two-byte "é" are still one word of pieces
      assert.are.equal(100, #tok:tokenize(("é"):rep(100)))
      assert.are.same({"[UNK]"}, tok:tokenize(("é"):rep(101)))
      local short = W.new({"[UNK]", "a", "##a"}, {max_input_chars_per_word = 3})
      assert.are.same({"a", "##a", "##a"}, short:tokenize("aaa"))
      assert.are.same({"[UNK]"}, short:tokenize("aaaa"))
    end)

    it("encodes a pair with [CLS]/[SEP], token types, padding and a mask", function()
      local tok = W.new({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "!", "how", "are", "you",
                         "?"})
      local e = tok:encode("Hello world!", "How are you?", {padding = "max_length", max_length = 12})
      assert.are.same({"[CLS]", "hello", "world", "!", "[SEP]", "how", "are", "you", "?", "[SEP]", "[PAD]", "[PAD]"},
        e.tokens)
      assert.are.same({{3, 6, 7, 8, 4, 9, 10, 11, 12, 4, 1, 1}}, ints(e.input_ids))
      assert.are.same({{1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 1, 1}}, ints(e.token_type_ids))
      assert.are.same({{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}}, ints(e.attention_mask))
      assert.are.same({1, 12}, e.input_ids:shape())
      -- longest_first: the longer sequence loses its last token, the second on a tie
      local t = tok:encode("hello world !", "how are you ?", {max_length = 8, truncation = true})
      assert.are.same({"[CLS]", "hello", "world", "!", "[SEP]", "how", "are", "[SEP]"}, t.tokens)
      t = tok:encode("hello world ! hello", "how are", {max_length = 7, truncation = true})
      assert.are.same({"[CLS]", "hello", "world", "[SEP]", "how", "are", "[SEP]"}, t.tokens)
      t = tok:encode("hello world !", "how are you ?", {max_length = 7, truncation = "only_second"})
      assert.are.same({"[CLS]", "hello", "world", "!", "[SEP]", "how", "[SEP]"}, t.tokens)
      t = tok:encode("hello world !", "how are you ?", {max_length = 8, truncation = "only_first"})
      assert.are.same({"[CLS]", "hello", "[SEP]", "how", "are", "you", "?", "[SEP]"}, t.tokens)
    end)

    it("decodes: joins pieces, removes ' ##', cleans spaces before punctuation", function()
      local tok = W.new(HF_VOCAB)
      local ids = tok:convert_tokens_to_ids({"[CLS]", "un", "##want", "##ed", ",", "runn", "##ing", "[SEP]"})
      assert.are.equal("[CLS] unwanted, running [SEP]", tok:decode(ids))
      assert.are.equal("unwanted, running", tok:decode(ids, {skip_special_tokens = true}))
      assert.are.equal("[CLS] unwanted , running [SEP]", tok:decode(ids, {clean_up_tokenization_spaces = false}))
      assert.are.equal("unwanted , running", tok:convert_tokens_to_string({"un", "##want", "##ed", ",", "runn", "##ing"}))
    end)
  end)

  describe("against the Python port of HF's BertTokenizer", function()
    local F = fixture.load("wordpiece_cases")
    local toks = {}
    for name, opts in pairs(F.configs) do toks[name] = text.WordPiece.from_file(VOCAB, opts) end

    it("loads the vocabulary the fixtures were made with", function()
      assert.are.equal(F.vocab_size, toks.uncased.vocab_size)
      assert.are.equal(F.vocab_size, #toks.uncased)
    end)

    it("gives the same words, tokens and ids for every text and configuration", function()
      local n = 0
      for i, c in ipairs(F.tokenize) do
        for name, tok in pairs(toks) do
          local want = c[name]
          local label = ("text %d %q (%s)"):format(i, c.text, name)
          assert.are.same(want.words, tok:basic_tokenize(c.text), label)
          local pieces = tok:tokenize(c.text)
          assert.are.same(want.tokens, pieces, label)
          assert.are.same(want.ids, tok:convert_tokens_to_ids(pieces), label)
          n = n + 1
        end
      end
      assert.are.equal(250, n)
    end)

    it("encodes single texts and pairs: truncation, padding, special tokens", function()
      for i, c in ipairs(F.encode) do
        local label = ("encode case %d %q / %q"):format(i, c.a, tostring(c.b))
        local e = toks.uncased:encode(c.a, c.b, c.opts)
        local T = #c.want.input_ids
        assert.are.same({1, T}, e.input_ids:shape(), label)
        assert.are.same(c.want.tokens, e.tokens, label)
        assert.are.same({c.want.input_ids}, ints(e.input_ids), label)
        assert.are.same({c.want.token_type_ids}, ints(e.token_type_ids), label)
        assert.are.same({c.want.attention_mask}, ints(e.attention_mask), label)
      end
      assert.are.equal(23, #F.encode)
    end)

    it("encodes batches into [B,T] tensors", function()
      for i, c in ipairs(F.batch) do
        local label = "batch case " .. i
        local e = toks.uncased:encode_batch(c.items, c.opts)
        local ids, types, mask, tokens = {}, {}, {}, {}
        for b, r in ipairs(c.want) do
          ids[b], types[b], mask[b], tokens[b] = r.input_ids, r.token_type_ids, r.attention_mask, r.tokens
        end
        assert.are.same({#c.want, #c.want[1].input_ids}, e.input_ids:shape(), label)
        assert.are.same(ids, ints(e.input_ids), label)
        assert.are.same(types, ints(e.token_type_ids), label)
        assert.are.same(mask, ints(e.attention_mask), label)
        assert.are.same(tokens, e.tokens, label)
      end
      assert.are.equal(6, #F.batch)
    end)

    it("decodes with and without special tokens and clean-up", function()
      local tok = toks.uncased
      for i, c in ipairs(F.decode) do
        local label = "decode case " .. i
        assert.are.equal(c.plain, tok:decode(c.ids), label)
        assert.are.equal(c.skip, tok:decode(c.ids, {skip_special_tokens = true}), label)
        assert.are.equal(c.raw, tok:decode(c.ids, {clean_up_tokenization_spaces = false}), label)
        assert.are.equal(c.plain, tok:decode(attn.tensor(c.ids)), label)
        assert.are.equal(c.plain, tok:decode(attn.tensor({c.ids})), label)
      end
      assert.are.equal(7, #F.decode)
    end)

    it("classifies, lower-cases and decomposes sampled code points from all of Unicode", function()
      local U = fixture.load("wordpiece_unicode")
      local n = 0
      for _, name in ipairs({"uncased", "uncased_keep_accents", "cased_strip"}) do
        local tok = toks[name]
        for i, chunk in ipairs(U.chunks) do
          local got = table.concat(tok:basic_tokenize(chunk), " ")
          if got ~= U[name][i] then
            local cps = {}
            for _, cp in utf8.codes(chunk) do cps[#cps + 1] = ("%04X"):format(cp) end
            error(("%s: chunk %d (U+%s) gives\n%s\nexpected\n%s"):format(name, i, table.concat(cps, " U+"), got,
              U[name][i]))
          end
          n = n + 1
        end
      end
      assert.is_true(n > 500)
    end)
  end)

  describe("the tokenizer", function()
    local tok = text.WordPiece.from_file(VOCAB)

    it("drops invalid UTF-8 bytes as Python's errors='replace' + _clean_text would", function()
      assert.are.same(tok:tokenize("café"), tok:tokenize("caf\xffé"))
      assert.are.same({"cafe"}, tok:tokenize("caf\xe2\x82é"))
      assert.are.same({"cafe"}, tok:tokenize("\xc0\xafcafé\xed\xa0\x80"))
      assert.are.same({"a", "##b"}, tok:tokenize("a\x80b"))
      assert.are.same({}, tok:tokenize("\xff\xfe\xfd"))
    end)

    it("tokenizes a concatenation as the concatenation of the tokenizations", function()
      local F = fixture.load("wordpiece_cases")
      local all, parts = {}, {}
      for _, c in ipairs(F.tokenize) do
        if type(c.text) == "string" and not c.text:find("[\0-\31\127\128-\255]") then
          all[#all + 1] = c.text
          for _, p in ipairs(tok:tokenize(c.text)) do parts[#parts + 1] = p end
        end
      end
      assert.is_true(#all > 20)
      assert.are.same(parts, tok:tokenize(table.concat(all, "\n")))
      -- and again through the cache
      assert.are.same(parts, tok:tokenize(table.concat(all, " ")))
    end)

    it("splits special tokens out of the text, case-sensitively", function()
      assert.are.same({"a", "[MASK]", "b", "[SEP]", "c"}, tok:tokenize("a[MASK]b[SEP]c"))
      assert.are.same({"[", "m", "##a", "##s", "##k", "]"}, tok:tokenize("[mask]"))
      local e = tok:encode("the [MASK] is a dog")
      assert.are.same({"[CLS]", "the", "[MASK]", "is", "a", "dog", "[SEP]"}, e.tokens)
      assert.are.equal(tok.mask_id, math.tointeger(e.input_ids:totable()[1][3]))
    end)

    it("exposes the special tokens and their 1-based ids", function()
      assert.are.equal("[PAD]", tok.pad_token)
      assert.are.equal(1, tok.pad_id) -- line 1 of vocab.txt; HF's id 0
      assert.are.equal(4, tok.unk_id)
      assert.are.equal(5, tok.cls_id)
      assert.are.equal(6, tok.sep_id)
      assert.are.equal(7, tok.mask_id)
      assert.are.equal(512, tok.max_length)
      assert.are.equal("WordPiece(vocab_size=393, lower=true, strip_accents=nil, tokenize_chinese_chars=true, "
        .. "max_length=512)", tostring(tok))
    end)

    it("feeds 1-based ids straight into nn.Embedding", function()
      local e = tok:encode_batch({"Hello, world!", "Jim Henson was a puppeteer"})
      local emb = attn.nn.Embedding(tok.vocab_size, 4, {padding_idx = tok.pad_id})
      local out = emb:forward(e.input_ids)
      local B, T = e.input_ids:shape()[1], e.input_ids:shape()[2]
      assert.are.same({2, T, 4}, out:shape())
      assert.are.equal(2, B)
      -- the padded positions of row 1 look up the zeroed [PAD] row
      local mask = ints(e.attention_mask)
      for t = 1, T do
        if mask[1][t] == 0 then
          assert.are.same({0, 0, 0, 0}, out:select(1, 1):select(1, t):totable())
        end
      end
      -- token types index a 2-row table the same way
      local types = attn.nn.Embedding(2, 3)
      assert.are.same({2, T, 3}, types:forward(e.token_type_ids):shape())
    end)

    it("decodes every row of a batch", function()
      local e = tok:encode_batch({"Hello, world!", {"How are you?", "Fine, thanks."}})
      assert.are.same({"[CLS] hello, world! [SEP] [PAD] [PAD] [PAD] [PAD] [PAD]",
                       "[CLS] how are you? [SEP] fine, thanks. [SEP]"}, tok:decode_batch(e.input_ids))
      assert.are.same({"hello, world!", "how are you? fine, thanks."},
        tok:decode_batch(e.input_ids, {skip_special_tokens = true}))
      assert.are.same({"how are you?"}, tok:decode_batch({tok:convert_tokens_to_ids({"how", "are", "you", "?"})}))
    end)

    it("accepts encode(a, opts) and add_special_tokens = false", function()
      local e = tok:encode("hello world", {add_special_tokens = false})
      assert.are.same({"hello", "world"}, e.tokens)
      assert.are.same({{1, 1}}, ints(e.token_type_ids))
      local z = tok:encode("", {add_special_tokens = false})
      assert.are.same({1, 0}, z.input_ids:shape())
      assert.are.same({}, z.tokens)
    end)
  end)

  describe("vocabularies and files", function()
    it("reads vocab.txt like HF's load_vocab: CRLF and CR lines, empty lines are tokens", function()
      local p = tmpfile("\239\187\191[PAD]\r\n[UNK]\r\n\r\nhello\rworld\n")
      local tok = text.WordPiece.from_file(p)
      assert.are.same({"[PAD]", "[UNK]", "", "hello", "world"}, tok.ids_to_tokens)
      assert.are.equal(4, tok.vocab.hello)
      assert.are.same({"[PAD]", "[UNK]", "", "hello", "world"}, text.read_vocab(p))
      -- a repeated token keeps its last line (HF's dict), each line keeps its token
      local d = text.WordPiece.from_file(tmpfile("[UNK]\nx\nx\n"))
      assert.are.equal(3, d.vocab.x)
      assert.are.equal("x", d:convert_ids_to_tokens(2))
    end)

    it("builds from a map token -> id", function()
      local tok = text.WordPiece.new({["[UNK]"] = 1, hello = 2, ["##s"] = 3})
      assert.are.same({"hello", "##s"}, tok:tokenize("Hellos"))
      raises("vocab ids must be 1..3 without gaps (no token has id 2)", text.WordPiece.new, {["[UNK]"] = 1, a = 3})
      raises("vocab gives id 1 to both", text.WordPiece.new, {["[UNK]"] = 1, a = 1})
    end)

    it("reads tokenizer_config.json in from_pretrained (do_lower_case, model_max_length, tokens)", function()
      local dir = tmpdir({
        ["vocab.txt"] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n<mask>\nHello\nhello\n",
        ["tokenizer_config.json"] = '{"do_lower_case": false, "model_max_length": 8, "strip_accents": null,\n'
          .. ' "mask_token": {"__type": "AddedToken", "content": "<mask>", "lstrip": true},\n'
          .. ' "tokenizer_class": "BertTokenizer", "extra": [1, 2.5e0, "x\\u00e9\\ud83d\\ude00", true]}',
      })
      local tok = text.WordPiece.from_pretrained(dir)
      assert.is_false(tok.lower)
      assert.are.equal(8, tok.max_length)
      assert.are.equal("<mask>", tok.mask_token)
      assert.are.same({"Hello", "<mask>", "hello"}, tok:tokenize("Hello<mask>hello"))
      -- options given here win
      local low = text.WordPiece.from_pretrained(dir, {lower = true, max_length = 16})
      assert.is_true(low.lower)
      assert.are.equal(16, low.max_length)
      assert.are.same({"hello", "hello"}, low:tokenize("HELLO Hello"))
      -- truncation = true uses the model's max_length
      local e = tok:encode("hello hello hello hello hello hello hello hello", {truncation = true})
      assert.are.equal(8, #e.tokens)
    end)

    it("works without tokenizer_config.json and ignores HF's 'no limit' model_max_length", function()
      local dir = tmpdir({["vocab.txt"] = "[UNK]\nhello\n"})
      assert.are.same({"hello"}, text.WordPiece.from_pretrained(dir):tokenize("HELLO"))
      local big = tmpdir({["vocab.txt"] = "[UNK]\n", ["tokenizer_config.json"] = '{"model_max_length": 1000000000000000019884624838656}'})
      assert.are.equal(512, text.WordPiece.from_pretrained(big).max_length)
    end)
  end)

  describe("errors", function()
    local tok = text.WordPiece.from_file(VOCAB)

    it("names bad vocabularies and files", function()
      raises("WordPiece.from_file: cannot open /no/such/vocab.txt", text.WordPiece.from_file, "/no/such/vocab.txt")
      raises("WordPiece.from_file: path must be a string (got nil)", text.WordPiece.from_file)
      raises("is empty", text.WordPiece.from_file, tmpfile(""))
      raises(":2: invalid UTF-8", text.WordPiece.from_file, tmpfile("[UNK]\nab\xff\n"))
      raises("the unknown token '[UNK]' is not in the vocabulary", text.WordPiece.new, {"a", "b"})
      raises("vocab must be a list of tokens or a map token -> id (got string)", text.WordPiece.new, "vocab.txt")
      raises("vocab[2] is a number, expected a string", text.WordPiece.new, {"[UNK]", 5})
      raises("unknown option 'lowercase'", text.WordPiece.new, {"[UNK]"}, {lowercase = true})
      raises("lower must be a boolean (got string)", text.WordPiece.new, {"[UNK]"}, {lower = "yes"})
      raises("max_length must be an integer >= 1 (got 0)", text.WordPiece.new, {"[UNK]"}, {max_length = 0})
      local bad = tmpdir({["vocab.txt"] = "[UNK]\n", ["tokenizer_config.json"] = '{"do_lower_case": tru}'})
      raises("tokenizer_config.json: invalid JSON at line 1 (byte 19): unexpected 't'", text.WordPiece.from_pretrained, bad)
    end)

    it("rejects bad arguments with messages naming the method", function()
      raises("WordPiece:tokenize: text must be a string (got number)", tok.tokenize, tok, 5)
      raises("call it as tok:tokenize(...)", tok.tokenize, "hello")
      raises("WordPiece:encode: text_pair must be a string (got number)", tok.encode, tok, "a", 5)
      raises("WordPiece:encode: unknown option 'maxlen'", tok.encode, tok, "a", nil, {maxlen = 3})
      raises("padding must be false, true, 'longest', 'max_length' or 'do_not_pad' (got max)", tok.encode, tok, "a",
        {padding = "max"})
      raises("truncation must be true, false, 'longest_first'", tok.encode, tok, "a", {truncation = "left"})
      raises("WordPiece:encode_batch: items is empty", tok.encode_batch, tok, {})
      raises("items[2] must be a text or a pair {text, text_pair} (got number)", tok.encode_batch, tok, {"a", 3})
    end)

    it("rejects ids outside the vocabulary, reminding that they are 1-based", function()
      raises("WordPiece:decode: ids[2] = 0 is outside the vocabulary (ids are 1-based: 1..393)", tok.decode, tok,
        {5, 0})
      raises("ids[1] = 394 is outside the vocabulary", tok.convert_ids_to_tokens, tok, {394})
      raises("ids[1] = 1.5 is not an integer", tok.decode, tok, {1.5})
      raises("ids must be a 1-d tensor or a [1,T] tensor (got shape [2,2])", tok.decode, tok, attn.ones(2, 2))
    end)

    it("raises where HF would only log: truncation that cannot fit, ragged batches", function()
      raises("cannot truncate to max_length 6 with 'only_first': 3 tokens must go but the first sequence has 1",
        tok.encode, tok, "a", "b c d e f", {max_length = 6, truncation = "only_first"})
      raises("with 'only_second': there is no second sequence", tok.encode, tok, "a b c d", {max_length = 3,
        truncation = "only_second"})
      raises("max_length 2 is less than the 3 special tokens", tok.encode, tok, "a", "b", {max_length = 2,
        truncation = true})
      raises("the sequences have different lengths (2 has 4 tokens, an earlier one 3): pass padding",
        tok.encode_batch, tok, {"a", "b c"}, {padding = false})
      raises("even after padding to 4: one is longer than max_length", tok.encode_batch, tok, {"a", "b c d e f"},
        {padding = "max_length", max_length = 4, truncation = false})
    end)
  end)
end)
