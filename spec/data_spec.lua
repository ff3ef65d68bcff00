-- SPDX-License-Identifier: MIT
-- attn.data: files, Vocab, CharTable, one_hot, pad, shuffle/split/batches
-- (torch's randperm order for a seed) and the progress bar, error paths
-- included.  The names checks use ../shared/data/names-indian.txt next to
-- the checkout (pending when it is not there).
local attn = require "attn"
local data = require "attn.data"
local core = require "attn.core"

-- A temporary file holding `content`; returns its path.
local tmpfiles = {}
local function tmpfile(content)
  local path = os.tmpname()
  require("support.sh").writefile(path, content)
  tmpfiles[#tmpfiles + 1] = path
  return path
end

local function ints(t)
  local out = {}
  for i, v in ipairs(attn.is_tensor(t) and t:totable() or t) do out[i] = math.tointeger(v) end
  return out
end

local raises = require("support.errors").raises

local NAMES = (os.getenv("ATTN_SOURCE_DIR") or ".") .. "/../shared/data/names-indian.txt"
local function have(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

teardown(function()
  for _, p in ipairs(tmpfiles) do os.remove(p) end
end)

describe("attn.data", function()
  it("is reachable as attn.data and as require 'attn.data'", function()
    assert.are.equal(data, attn.data)
  end)

  describe("read_lines", function()
    it("handles CRLF, a last line without newline, blank lines and UTF-8", function()
      local p = tmpfile("Abhishek\r\nAman  \t\r\n\r\n   \n  lead\nAsunción\r\nAtatürk")
      assert.are.same({"Abhishek", "Aman", "  lead", "Asunción", "Atatürk"}, data.read_lines(p))
    end)

    it("drops a UTF-8 byte-order mark and keeps a final newline from adding a line", function()
      local p = tmpfile("\239\187\191one\ntwo\n")
      assert.are.same({"one", "two"}, data.read_lines(p))
    end)

    it("gives an empty list for an empty or blank file", function()
      assert.are.same({}, data.read_lines(tmpfile("")))
      assert.are.same({}, data.read_lines(tmpfile("\n\r\n \n")))
    end)

    it("names the missing path and rejects a non-string path", function()
      raises("read_lines: cannot open /no/such/dir/names.txt", data.read_lines, "/no/such/dir/names.txt")
      raises("read_lines: path must be a string (got number)", data.read_lines, 42)
    end)
  end)

  describe("read_words", function()
    it("splits at any whitespace, in file order, duplicates kept", function()
      local p = tmpfile("Life is\tshort,\r\n\n eat  dessert first\nis")
      assert.are.same({"Life", "is", "short,", "eat", "dessert", "first", "is"}, data.read_words(p))
    end)

    it("names the missing path", function()
      raises("read_words: cannot open /no/such/words", data.read_words, "/no/such/words")
      raises("read_words: path must be a string (got nil)", data.read_words)
    end)
  end)

  describe("default_words_path", function()
    it("is Debian's wamerican list, a big list of words", function()
      if not have("/usr/share/dict/american-english") then
        return pending("wamerican is not installed (scripts/setup.sh installs it)")
      end
      local path = data.default_words_path()
      assert.are.equal("/usr/share/dict/american-english", path)
      local words = data.read_words(path)
      assert.is_true(#words > 50000)
      local seen = {}
      for _, w in ipairs(words) do seen[w] = true end
      assert.is_true(seen.attention and seen.name and true or false)
    end)

    it("raises a clear error when the list is absent", function()
      -- io.open stubbed for this case only, restored below
      local real_open = io.open
      io.open = function(path, ...) -- luacheck: ignore 122
        if path == "/usr/share/dict/american-english" then return nil, path .. ": No such file or directory" end
        return real_open(path, ...)
      end
      local ok, err = pcall(data.default_words_path)
      io.open = real_open -- luacheck: ignore 122
      assert.is_false(ok)
      assert.is_truthy(err:find("/usr/share/dict/american-english not found", 1, true))
      assert.is_truthy(err:find("wamerican", 1, true))
    end)
  end)

  describe("Vocab", function()
    -- Seed 001: words = sorted(sentence.split()); word_to_idx = enumerate;
    -- sentence_int = tensor([0, 4, 5, 2, 1, 3]).
    local sentence = "Life is short, eat dessert first"

    it("numbers the notebook's sorted words like word_to_idx, + 1, unknown last", function()
      local words = {}
      for w in sentence:gsub(",", ""):gmatch("%S+") do words[#words + 1] = w end
      local v = data.Vocab(words)
      assert.are.same({"Life", "dessert", "eat", "first", "is", "short", "<unk>"}, v.words)
      assert.are.equal(7, v.size)
      assert.are.equal(7, #v)
      assert.are.equal("<unk>", v.unk)
      assert.are.equal(7, v.unk_id)
      assert.are.same({1, 5, 6, 3, 2, 4}, ints(v:encode(words)))
      assert.are.same({1, 5, 6, 3, 2, 4, 7}, ints(v:encode("Life is short eat dessert first cake")))
      assert.are.equal(1, v:index("Life"))
      assert.are.equal(7, v:index("life"))
      assert.are.same({"eat", "<unk>", "Life"}, v:decode(attn.tensor({3, 7, 1})))
      assert.are.same({"short"}, v:decode({6}))
      assert.are.equal("Vocab(size=7, unk='<unk>')", tostring(v))
    end)

    it("sorts like Python's sorted() on str (byte order), duplicates once", function()
      -- sorted(["b", "B", "a", "é", "z", "Z", "ab", "a", "_", "1"]) in Python:
      -- ['1', 'B', 'Z', '_', 'a', 'ab', 'b', 'z', 'é']
      local v = data.Vocab({"b", "B", "a", "é", "z", "Z", "ab", "a", "_", "1"}, {unk = false})
      assert.are.same({"1", "B", "Z", "_", "a", "ab", "b", "z", "é"}, v.words)
      assert.is_nil(v.unk)
      assert.is_nil(v.unk_id)
    end)

    it("sorts in byte order whatever the collation locale", function()
      local old = os.setlocale(nil, "collate")
      local loc = os.setlocale("C.UTF-8", "collate") or os.setlocale("en_US.UTF-8", "collate")
      if not loc then return pending("no UTF-8 collation locale here") end
      local ok, v = pcall(data.Vocab, {"b", "B", "é", "a", "Z"}, {unk = false})
      os.setlocale(old, "collate")
      assert.is_true(ok, v)
      assert.are.same({"B", "Z", "a", "b", "é"}, v.words)
    end)

    it("takes a custom unknown token, not twice when it is a word", function()
      local v = data.Vocab({"b", "a"}, {unk = "?"})
      assert.are.same({"a", "b", "?"}, v.words)
      assert.are.equal(3, v:index("zzz"))
      local w = data.Vocab({"b", "<unk>", "a"})
      assert.are.same({"<unk>", "a", "b"}, w.words)
      assert.are.equal(1, w.unk_id)
      assert.are.equal(1, w:index("c"))
    end)

    it("raises on unknown words when it has no unknown token", function()
      local v = data.Vocab({"a", "b"}, {unk = false})
      raises("Vocab:index: unknown word 'c'", v.index, v, "c")
      raises("Vocab:encode: unknown word 'c' (words[2])", v.encode, v, {"a", "c"})
    end)

    it("rejects bad input with clear errors", function()
      raises("Vocab: words is empty", data.Vocab, {})
      raises("Vocab: words must be a list of strings (got string)", data.Vocab, "a b")
      raises("Vocab: words[2] is a number, expected a string", data.Vocab, {"a", 3})
      raises("Vocab: unk must be a string (got number)", data.Vocab, {"a"}, {unk = 1})
      -- torch-style positional options (issue 29): the second argument is unk
      raises("Vocab: unk", data.Vocab, {"a"}, 5)
      local v = data.Vocab({"a", "b"})
      raises("Vocab:index: word must be a string (got number)", v.index, v, 1)
      raises("Vocab:encode: words is empty", v.encode, v, {})
      raises("Vocab:encode: words[1] is a boolean", v.encode, v, {true})
      raises("Vocab:decode: id 4 (ids[2]) out of range (expected 1..3)", v.decode, v, {1, 4})
      raises("Vocab:decode: id 0 (ids[1]) out of range", v.decode, v, attn.tensor({0}))
      raises("Vocab:decode: ids[1] = 1.5 is not an integer", v.decode, v, {1.5})
      raises("Vocab:decode: ids must be a 1-d tensor (got 2 dimensions)", v.decode, v, attn.ones(1, 2))
      raises("Vocab:decode: ids must be a 1-d tensor or a list of integers (got string)", v.decode, v, "1")
    end)

    it("points errors at the caller's line", function()
      local ok, err = pcall(function()
        local v = data.Vocab({1})
        return v
      end)
      assert.is_false(ok)
      assert.is_truthy(err:find("data_spec.lua:%d+: Vocab: words%[1%]"), err)
    end)
  end)

  describe("CharTable", function()
    it("gives the notebook's 28 characters and ids for the Indian names", function()
      if not have(NAMES) then return pending(NAMES .. " is not there") end
      local names = data.read_lines(NAMES)
      assert.are.equal(1165, #names)
      for i, n in ipairs(names) do names[i] = n:lower() end
      local ct = data.CharTable(names)
      -- print(vocab, len(vocab)) in seed 003
      local want = {"$", "^"}
      for c = string.byte("a"), string.byte("z") do want[#want + 1] = string.char(c) end
      assert.are.same(want, ct.chars)
      assert.are.equal(28, ct.size)
      local name = ct:wrap(names[1])
      assert.are.equal("^abhishek$", name)
      -- notebook: tensor([ 1,  2,  3,  9, 10, 20,  9,  6, 12,  0]), here + 1
      local ids = ct:encode(name)
      assert.are.same({10}, ids:shape())
      assert.are.same({2, 3, 4, 10, 11, 21, 10, 7, 13, 1}, ints(ids))
      assert.are.equal("^abhishek$", ct:decode(ids))
      assert.are.equal("^aman$", ct:decode(ints(ct:encode("^aman$"))))
    end)

    it("builds from raw strings, start and stop included and sorted", function()
      local ct = data.CharTable({"ba", "cab"})
      assert.are.same({"$", "^", "a", "b", "c"}, ct.chars)
      assert.are.equal(5, #ct)
      assert.are.equal("^cab$", ct:wrap("cab"))
      assert.are.equal(3, ct:index("a"))
      assert.are.equal("CharTable(size=5, chars='$^abc')", tostring(ct))
    end)

    it("takes other tokens, or none", function()
      local ct = data.CharTable({"ab"}, {start = "<", stop = ">"})
      assert.are.same({"<", ">", "a", "b"}, ct.chars)
      assert.are.equal("<ab>", ct:wrap("ab"))
      local bare = data.CharTable({"ba"}, {start = false, stop = false})
      assert.are.same({"a", "b"}, bare.chars)
      assert.are.equal("ba", bare:wrap("ba"))
      assert.are.same({2, 1}, ints(bare:encode("ba")))
    end)

    it("treats a UTF-8 character as one entry", function()
      local ct = data.CharTable({"café", "Ångström"})
      assert.are.same({"$", "^", "a", "c", "f", "g", "m", "n", "r", "s", "t", "Å", "é", "ö"}, ct.chars)
      local ids = ct:encode(ct:wrap("café"))
      assert.are.same({6}, ids:shape())
      assert.are.equal("^café$", ct:decode(ids))
    end)

    it("names a character that is not in the table", function()
      local ct = data.CharTable({"abc"})
      raises("CharTable:encode: character 'z' (U+007A) at position 3 of '^az$' is not in the table", ct.encode, ct,
        "^az$")
      raises("character 'é' (U+00E9)", ct.encode, ct, "é")
      raises("CharTable:index: character 'q' (U+0071) is not in the table", ct.index, ct, "q")
      raises("CharTable:encode: character U+000A at position 2", ct.encode, ct, "a\n")
    end)

    it("rejects bad input with clear errors", function()
      raises("CharTable: strings is empty", data.CharTable, {})
      raises("CharTable: strings[2] is a table, expected a string", data.CharTable, {"a", {}})
      raises("CharTable: strings must be a list of strings (got nil)", data.CharTable)
      raises("CharTable: strings[1] is not valid UTF-8 (byte 2)", data.CharTable, {"a\255"})
      raises("CharTable: start must be a single character (got '<s>')", data.CharTable, {"a"}, {start = "<s>"})
      raises("CharTable: stop must be a string (got number)", data.CharTable, {"a"}, {stop = 1})
      raises("CharTable: start and stop must differ (both '#')", data.CharTable, {"a"}, {start = "#", stop = "#"})
      local ct = data.CharTable({"ab"})
      raises("CharTable:encode: s must be a string (got table)", ct.encode, ct, {"a"})
      raises("CharTable:encode: s is empty", ct.encode, ct, "")
      raises("CharTable:encode: s is not valid UTF-8", ct.encode, ct, "\200")
      raises("CharTable:decode: id 5 (ids[1]) out of range (expected 1..4)", ct.decode, ct, {5})
      raises("CharTable:decode: ids[2] = 2.5 is not an integer", ct.decode, ct, attn.tensor({1, 2.5}))
      raises("CharTable:wrap: s must be a string (got nil)", ct.wrap, ct)
    end)
  end)

  describe("one_hot", function()
    it("puts a 1 at each 1-based id, for lists and tensors of any shape", function()
      local t = data.one_hot({2, 1, 3}, 3)
      assert.are.same({{0, 1, 0}, {1, 0, 0}, {0, 0, 1}}, t:totable())
      local u = data.one_hot(attn.tensor({{1, 4}}), 4)
      assert.are.same({1, 2, 4}, u:shape())
      assert.are.same({{{1, 0, 0, 0}, {0, 0, 0, 1}}}, u:totable())
    end)

    it("rejects bad input", function()
      raises("one_hot: n must be an integer >= 1 (got 0)", data.one_hot, {1}, 0)
      raises("one_hot: n must be an integer >= 1 (got 1.5)", data.one_hot, {1}, 1.5)
      raises("one_hot: n must be an integer >= 1 (got nil)", data.one_hot, {1})
      raises("one_hot: ids must be a tensor or a list of integers (got string)", data.one_hot, "1", 2)
      raises("out of range (expected 1..2)", data.one_hot, {3}, 2)
    end)
  end)

  describe("pad", function()
    it("pads lists and tensors to the longest, with a mask", function()
      local x, m = data.pad({{1, 2, 3}, attn.tensor({4}), {}})
      assert.are.same({{1, 2, 3}, {4, 0, 0}, {0, 0, 0}}, x:totable())
      assert.are.same({{1, 1, 1}, {1, 0, 0}, {0, 0, 0}}, m:totable())
    end)

    it("takes a padding value and a fixed length (cutting longer rows)", function()
      local x, m = data.pad({{5, 6, 7}, {8}}, {value = -1, length = 2})
      assert.are.same({{5, 6}, {8, -1}}, x:totable())
      assert.are.same({{1, 1}, {1, 0}}, m:totable())
      local y, n = data.pad({{5}}, {length = 3, value = 9})
      assert.are.same({{5, 9, 9}}, y:totable())
      assert.are.same({{1, 0, 0}}, n:totable())
    end)

    it("rejects bad input", function()
      raises("pad: seqs is empty", data.pad, {})
      raises("pad: seqs must be a list (got number)", data.pad, 3)
      raises("pad: seqs[2] must be 1-d (got 2 dimensions)", data.pad, {{1}, attn.ones(2, 2)})
      raises("pad: seqs[1][2] is a string, expected a number", data.pad, {{1, "x"}})
      raises("pad: seqs[1] must be a 1-d tensor or a list of numbers (got string)", data.pad, {"ab"})
      raises("pad: every sequence is empty; give a length", data.pad, {{}, {}})
      raises("pad: length must be an integer >= 1 (got 0)", data.pad, {{1}}, {length = 0})
      raises("pad: value must be a number (got string)", data.pad, {{1}}, {value = "0"})
    end)
  end)

  describe("shuffle", function()
    local letters = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}

    it("is torch's [xs[i] for i in torch.randperm(n)] for the same seed", function()
      -- /usr/bin/python3: torch.manual_seed(0); torch.randperm(10).tolist()
      --   -> [4, 1, 7, 5, 3, 9, 0, 8, 6, 2]; then torch.randperm(5) -> [3, 2, 4, 0, 1]
      attn.manual_seed(0)
      assert.are.same({"e", "b", "h", "f", "d", "j", "a", "i", "g", "c"}, data.shuffle(letters))
      assert.are.same({"d", "c", "e", "a", "b"}, data.shuffle({"a", "b", "c", "d", "e"}))
      -- again from the same seed: the same order
      attn.manual_seed(0)
      assert.are.same({"e", "b", "h", "f", "d", "j", "a", "i", "g", "c"}, data.shuffle(letters))
      -- torch.manual_seed(1); randperm(5), randperm(5) -> [0, 4, 2, 3, 1], [3, 2, 4, 1, 0]
      attn.manual_seed(1)
      assert.are.same({10, 50, 30, 40, 20}, data.shuffle({10, 20, 30, 40, 50}))
      assert.are.same({40, 30, 50, 20, 10}, data.shuffle({10, 20, 30, 40, 50}))
    end)

    it("uses a generator when given one", function()
      -- torch.randperm(7, generator=torch.Generator().manual_seed(42)) -> [1, 6, 3, 5, 4, 0, 2]
      attn.manual_seed(0)
      local g = attn.Generator(42)
      assert.are.same({2, 7, 4, 6, 5, 1, 3}, data.shuffle({1, 2, 3, 4, 5, 6, 7}, g))
      -- the default stream was not touched
      assert.are.same({"e", "b", "h", "f", "d", "j", "a", "i", "g", "c"}, data.shuffle(letters))
    end)

    it("returns a new list holding the same items", function()
      local xs = {}
      for i = 1, 200 do xs[i] = i end
      local ys = data.shuffle(xs)
      assert.are.equal(200, #ys)
      assert.are.equal(1, xs[1])
      assert.are.equal(200, xs[200])
      local seen, moved = {}, 0
      for i, v in ipairs(ys) do
        seen[v] = true
        if v ~= i then moved = moved + 1 end
      end
      for i = 1, 200 do assert.is_true(seen[i]) end
      assert.is_true(moved > 100)
      assert.are.same({}, data.shuffle({}))
    end)

    it("rejects bad input", function()
      raises("shuffle: list must be a list (got string)", data.shuffle, "abc")
      raises("shuffle: generator must be an attn.Generator (got number)", data.shuffle, {1, 2}, 42)
      raises("shuffle: list has a hole at index 2", data.shuffle, setmetatable({1, nil, 3}, {__len = function() return 3 end}))
    end)
  end)

  describe("split", function()
    local ten = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}

    it("gives train first, then the validation share, in order with false", function()
      local train, valid = data.split(ten, 0.3, false)
      assert.are.same({1, 2, 3, 4, 5, 6, 7}, train)
      assert.are.same({8, 9, 10}, valid)
      local t0, v0 = data.split(ten, 0, false)
      assert.are.equal(10, #t0)
      assert.are.same({}, v0)
      local t1, v1 = data.split(ten, 1, false)
      assert.are.same({}, t1)
      assert.are.equal(10, #v1)
      -- round(0.25 * 10) = 3 (halves round up)
      local t2, v2 = data.split(ten, 0.25, false)
      assert.are.equal(7, #t2)
      assert.are.equal(3, #v2)
    end)

    it("shuffles first with the seeded RNG or a generator", function()
      -- torch.manual_seed(0); randperm(10) -> [4, 1, 7, 5, 3, 9, 0, 8, 6, 2] (+1 here)
      attn.manual_seed(0)
      local train, valid = data.split(ten, 0.2)
      assert.are.same({5, 2, 8, 6, 4, 10, 1, 9}, train)
      assert.are.same({7, 3}, valid)
      -- Generator(42), randperm(7) -> [1, 6, 3, 5, 4, 0, 2]
      local tr, va = data.split({1, 2, 3, 4, 5, 6, 7}, 0.3, attn.Generator(42))
      assert.are.same({2, 7, 4, 6, 5}, tr)
      assert.are.same({1, 3}, va)
    end)

    it("rejects bad input", function()
      raises("split: list is empty", data.split, {}, 0.1)
      raises("split: fraction (the validation share) must be a number in [0, 1] (got 1.5)", data.split, ten, 1.5)
      raises("split: fraction (the validation share) must be a number in [0, 1] (got -0.1)", data.split, ten, -0.1)
      raises("split: fraction (the validation share) must be a number in [0, 1] (got nil)", data.split, ten)
      raises("must be a number in [0, 1] (got", data.split, ten, 0 / 0)
      raises("split: generator must be an attn.Generator (got table)", data.split, ten, 0.1, {})
    end)
  end)

  describe("batches", function()
    local five = {"a", "b", "c", "d", "e"}

    local function collect(it)
      local out, ks = {}, {}
      for b, k in it do
        out[#out + 1] = b
        ks[#ks + 1] = k
      end
      return out, ks
    end

    it("cuts the list into batches in order without shuffle", function()
      local bs, ks = collect(data.batches(five, 2, {shuffle = false}))
      assert.are.same({{"a", "b"}, {"c", "d"}, {"e"}}, bs)
      assert.are.same({1, 2, 3}, ks)
      assert.are.same({{"a", "b"}, {"c", "d"}}, (collect(data.batches(five, 2, {shuffle = false, drop_last = true}))))
      assert.are.same({five}, (collect(data.batches(five, 10, {shuffle = false}))))
      assert.are.same({}, (collect(data.batches(five, 10, {shuffle = false, drop_last = true}))))
    end)

    it("shuffles by default, in torch's randperm order", function()
      -- torch.manual_seed(0); randperm(10) -> [4, 1, 7, 5, 3, 9, 0, 8, 6, 2]
      attn.manual_seed(0)
      local bs = collect(data.batches({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 4))
      assert.are.same({{5, 2, 8, 6}, {4, 10, 1, 9}, {7, 3}}, bs)
      -- Generator(42), randperm(7) -> [1, 6, 3, 5, 4, 0, 2]
      local gs = collect(data.batches({1, 2, 3, 4, 5, 6, 7}, 3, {generator = attn.Generator(42)}))
      assert.are.same({{2, 7, 4}, {6, 5, 1}, {3}}, gs)
    end)

    it("rejects bad input", function()
      raises("batches: batch_size must be an integer >= 1 (got 0)", data.batches, five, 0)
      raises("batches: batch_size must be an integer >= 1 (got 1.5)", data.batches, five, 1.5)
      raises("batches: batch_size must be an integer >= 1 (got 2)", data.batches, five, "2")
      raises("batches: list is empty", data.batches, {}, 2)
      -- the third argument is shuffle (issue 29's positional order)
      raises("batches: shuffle", data.batches, five, 2, "x")
      raises("batches: generator must be an attn.Generator (got number)", data.batches, five, 2, {generator = 1})
    end)
  end)

  describe("progress", function()
    -- A clock the test moves by hand.
    local function fake_clock(t0)
      local c = {t = t0 or 0}
      c.fn = function() return c.t end
      return c
    end

    local function capture()
      local path = os.tmpname()
      tmpfiles[#tmpfiles + 1] = path
      local f = assert(io.open(path, "w+b"))
      return f, function()
        f:seek("set")
        local s = f:read("a")
        f:close()
        return s
      end
    end

    -- The lines of a log with their "YYYY-MM-DD HH:MM:SS " stamps checked and cut off.
    local function unstamped(s)
      local out = {}
      for line in s:gmatch("([^\n]*)\n") do
        local rest = line:match("^%d%d%d%d%-%d%d%-%d%d %d%d:%d%d:%d%d (.*)$")
        assert(rest, "no time stamp: " .. line)
        out[#out + 1] = rest
      end
      return table.concat(out, "\n") .. "\n"
    end

    it("is quiet but for one summary line when out is not a terminal", function()
      local f, read = capture()
      local clk = fake_clock(100)
      local bar = data.progress(100, {out = f, clock = clk.fn})
      assert.is_false(bar.interactive) -- a file is not a terminal
      for i = 1, 100 do
        clk.t = clk.t + 0.04
        bar:update(i, {loss = 1 / i})
      end
      bar:finish()
      bar:finish() -- once only
      -- 4 s: less than log_interval (10 s), so no line before the summary
      assert.are.equal("train: 100/100 (100%) in 00:04, 25.00 it/s, loss=0.01\n", unstamped(read()))
    end)

    it("logs a stamped line every log_interval seconds when not on a terminal", function()
      local f, read = capture()
      local clk = fake_clock(50)
      local bar = data.progress(100, {out = f, clock = clk.fn, log_interval = 1.5})
      for i = 1, 100 do
        clk.t = clk.t + 0.0625 -- 16 it/s, 6.25 s in all: lines at 1.5, 3.0, 4.5 and 6.0 s
        bar:update(i, {loss = 8 / i})
      end
      bar:finish()
      assert.are.equal(table.concat({
        "train: 24/100 (24%) 00:02<00:05, 16.00 it/s, loss=0.3333",
        "train: 48/100 (48%) 00:03<00:03, 16.00 it/s, loss=0.1667",
        "train: 72/100 (72%) 00:05<00:02, 16.00 it/s, loss=0.1111", -- 4.5 s rounds up
        "train: 96/100 (96%) 00:06<00:00, 16.00 it/s, loss=0.08333",
        "train: 100/100 (100%) in 00:06, 16.00 it/s, loss=0.08", ""}, "\n"), unstamped(read()))
      local g, read_g = capture()
      local quiet = data.progress(10, {out = g, clock = clk.fn, log_interval = 0})
      for i = 1, 10 do
        clk.t = clk.t + 100
        quiet:update(i)
      end
      quiet:finish()
      assert.are.equal(1, select(2, read_g():gsub("\n", "")))
      raises("progress: log_interval must be a number >= 0 (got -1)", data.progress, 5, {log_interval = -1})
    end)

    it("writes lines without breaking the bar (bar:write)", function()
      local f, read = capture()
      local lines, read_lines = capture()
      local clk = fake_clock()
      local bar = data.progress(2, {out = f, clock = clk.fn, interactive = true, min_interval = 0, width = 4})
      clk.t = 1
      bar:update(1)
      bar:write("step=1 loss=0.5", lines)
      clk.t = 2
      bar:update(2)
      bar:finish()
      bar:write("done", lines)
      local line1 = "train  50%|==> | 1/2 [00:01<00:01, 1.00 it/s]"
      -- drawn, blanked out for the line, drawn again, then the rest
      assert.are.equal("\r" .. line1 .. "\r" .. string.rep(" ", #line1) .. "\r\r" .. line1, read():sub(1, 3 * #line1 + 4))
      assert.are.equal("step=1 loss=0.5\ndone\n", read_lines())
      local g, read_g = capture()
      local plain = data.progress(2, {out = g, interactive = false})
      plain:write("a line", g)
      assert.are.equal("a line\n", read_g())
      raises("Progress:write: line must be a string (got table)", function() plain:write({}) end)
    end)

    it("summarises an unfinished loop with its own label and fields", function()
      local f, read = capture()
      local clk = fake_clock()
      local bar = data.progress(1000, {out = f, clock = clk.fn, label = "epoch 3", interactive = false})
      for _ = 1, 250 do bar:update() end
      bar:update(nil, {loss = 2.5, lr = 0.001, step = "warm"})
      clk.t = 3725
      bar:finish()
      assert.are.equal("epoch 3: 251/1000 (25%) in 1:02:05, 14.84 s/it, loss=2.5, lr=0.001, step=warm\n",
        unstamped(read()))
    end)

    it("redraws one line with percent, count, time, ETA and rate, throttled", function()
      local f, read = capture()
      local clk = fake_clock()
      -- steps of 1/64 s and redraws at most every 1/8 s: binary fractions, so
      -- the draws land exactly on items 1, 9, 17, ..., 193
      local bar = data.progress(200, {out = f, clock = clk.fn, interactive = true, width = 10, min_interval = 0.125})
      for i = 1, 200 do
        clk.t = clk.t + 1 / 64 -- 64 it/s, 3.125 s in all
        bar:update(i, i % 50 == 0 and {loss = 4 / i} or nil)
      end
      bar:finish()
      local s = read()
      local _, draws = s:gsub("\r", "")
      -- 25 throttled draws, the last item (always drawn) and finish's
      assert.are.equal(27, draws)
      local _, newlines = s:gsub("\n", "")
      assert.are.equal(1, newlines)
      assert.are.equal("\n", s:sub(-1))
      assert.is_truthy(s:find("\rtrain   0%|>         | 1/200 [00:00<00:03, 64.00 it/s]\r", 1, true), s)
      assert.is_truthy(s:find("\rtrain   4%|>         | 9/200 [00:00<00:03, 64.00 it/s]\r", 1, true), s)
      assert.is_nil(s:find(" 2/200", 1, true))
      assert.is_truthy(s:find("\rtrain  48%|====>     | 97/200 [00:02<00:02, 64.00 it/s, loss=0.08]\r", 1, true), s)
      local final = "\rtrain 100%|==========| 200/200 [00:03<00:00, 64.00 it/s, loss=0.02]"
      -- item 193's line ended "loss=0.02667]": 3 blanks cover its tail
      assert.are.equal(final .. "   " .. final .. "\n", s:sub(-2 * #final - 4))
    end)

    it("is interactive on a terminal unless told otherwise", function()
      local bar = data.progress(3, {out = io.stderr, interactive = false})
      assert.is_false(bar.interactive)
      local auto = data.progress(3)
      assert.are.equal(core._isatty(io.stderr) and os.getenv("TERM") ~= "dumb", auto.interactive)
    end)

    it("blanks out the rest of a longer previous line", function()
      local f, read = capture()
      local clk = fake_clock()
      local bar = data.progress(2, {out = f, clock = clk.fn, interactive = true, min_interval = 0})
      clk.t = 1
      bar:update(1, {note = "a long note here"})
      clk.t = 2
      bar:update(2, {note = "x"})
      bar:finish()
      local lines = {}
      for l in read():gmatch("\r([^\r\n]*)") do lines[#lines + 1] = l end
      assert.are.equal(3, #lines)
      assert.are.equal(#lines[1], #lines[2])
      assert.is_truthy(lines[2]:find("note=x%]" .. string.rep(" ", #"a long note here" - 1) .. "$"))
    end)

    it("closes with <close>", function()
      local f, read = capture()
      do
        local bar <close> = data.progress(3, {out = f, clock = function() return 0 end, label = "c"})
        bar:update(3)
      end
      assert.are.equal("c: 3/3 (100%) in 00:00, ? it/s\n", unstamped(read()))
    end)

    it("detects terminals through attn.core._isatty", function()
      local f = assert(io.open(tmpfile(""), "rb"))
      assert.is_false(core._isatty(f))
      f:close()
      assert.is_false(core._isatty(f)) -- closed
      raises("FILE* expected", core._isatty, "stderr")
      assert.are.equal("boolean", type(core._isatty(io.stderr)))
    end)

    it("rejects bad input", function()
      raises("progress: total must be an integer >= 1 (got 0)", data.progress, 0)
      raises("progress: total must be an integer >= 1 (got 10)", data.progress, "10")
      raises("progress: width must be an integer >= 1 (got 0)", data.progress, 5, {width = 0})
      local closed = assert(io.open(tmpfile(""), "rb"))
      closed:close()
      raises("progress: out must be an open file (got file (closed))", data.progress, 5, {out = closed})
      raises("progress: out must be an open file", data.progress, 5, {out = "stderr"})
      raises("progress: label must be a string (got number)", data.progress, 5, {label = 1})
      raises("progress: min_interval must be a number >= 0 (got -1)", data.progress, 5, {min_interval = -1})
      raises("progress: clock must be a function (got number)", data.progress, 5, {clock = 1})
      local f = capture()
      local bar = data.progress(5, {out = f})
      raises("Progress:update: i must be an integer in 0..5 (got 6)", bar.update, bar, 6)
      raises("Progress:update: i must be an integer in 0..5 (got -1)", bar.update, bar, -1)
      raises("Progress:update: extras must be a table (got number)", bar.update, bar, 1, 0.5)
      bar:finish()
      raises("Progress:update: the bar is finished", bar.update, bar, 1)
    end)
  end)
end)
