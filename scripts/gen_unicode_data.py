#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes lua/attn/app/unicode_data.lua: the Unicode facts attn.text's BERT
tokenizer needs, taken from Python's unicodedata (the same database that
Hugging Face's BertTokenizer consults) so that the Lua port classifies,
lower-cases and strips accents exactly as Python does.

Run with the Python whose Unicode version you want (the file records it):
    /usr/bin/python3 scripts/gen_unicode_data.py

What goes in (all compact, decoded by lua/attn/app/text.lua on first use):
  classes   run-length list over U+0000..U+10FFFF: length, class, ...
            0 other, 1 dropped by _clean_text (category C* except \\t \\n \\r,
            plus U+FFFD), 2 whitespace (Zs, \\t \\n \\r, and U+2028/U+2029
            which Python's str.split() splits on), 3 punctuation (P* and the
            ASCII symbols 33-47, 58-64, 91-96, 123-126), 4 Mn with
            canonical combining class 0, 5 Mn with class > 0, 6 CJK
            ideograph (BasicTokenizer._is_chinese_char).  Earlier classes
            win (an unassigned code point in a CJK block is dropped).
  lower     runs of one-character lower-case mappings: start delta, count,
            stride, delta (str.lower() applied one character at a time,
            as BertTokenizer does, so no final-sigma context).
  lower_multi  the mappings to more than one character (U+0130).
  decomp    full canonical decompositions (NFD of one character, Hangul
            syllables excluded: those are computed): key delta, n, cps...
  kept_ccc  characters with a non-zero combining class that are not Mn
            (they survive accent stripping, so NFD's canonical reordering
            can still move them): cp, class, ...
"""
import os
import sys
import unicodedata as ud

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "lua", "attn", "app", "unicode_data.lua")
MAXCP = 0x110000

CJK = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
       (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


def is_cjk(cp):
    return any(a <= cp <= b for a, b in CJK)


def is_ascii_punct(cp):
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126


def char_class(cp):
    c = chr(cp)
    cat = ud.category(c)
    if c in "\t\n\r":
        return 2
    if cat.startswith("C") or cp == 0xFFFD:
        return 1
    if cat == "Zs" or c.isspace():
        return 2
    if is_cjk(cp):
        return 6
    if is_ascii_punct(cp) or cat.startswith("P"):
        return 3
    if cat == "Mn":
        return 4 if ud.combining(c) == 0 else 5
    return 0


def class_runs():
    runs = []
    prev, length = char_class(0), 0
    for cp in range(MAXCP):
        k = char_class(cp)
        if k != prev:
            runs += [length, prev]
            prev, length = k, 0
        length += 1
    runs += [length, prev]
    return runs


def lower_tables():
    single, multi = [], {}
    for cp in range(MAXCP):
        lo = chr(cp).lower()
        if lo == chr(cp):
            continue
        # The tokenizer lowers one character at a time and again per word;
        # that is only the same as Python's if lower() is idempotent.
        assert lo.lower() == lo, hex(cp)
        if len(lo) == 1:
            single.append((cp, ord(lo) - cp))
        else:
            multi[cp] = [ord(x) for x in lo]
    # Runs: same delta, code points in arithmetic progression.
    runs, i, last = [], 0, 0
    while i < len(single):
        cp, d = single[i]
        j, stride = i + 1, None
        if j < len(single) and single[j][1] == d:
            stride = single[j][0] - cp
            while j < len(single) and single[j][1] == d and single[j][0] - single[j - 1][0] == stride:
                j += 1
        count = j - i
        runs += [cp - last, count, stride or 1, d]
        last = cp + (count - 1) * (stride or 1)
        i = j
    return runs, multi


def decomp_table():
    out, last = [], 0
    for cp in range(MAXCP):
        if 0xAC00 <= cp <= 0xD7A3:
            continue
        d = ud.normalize("NFD", chr(cp))
        if d == chr(cp):
            continue
        out += [cp - last, len(d)] + [ord(x) for x in d]
        last = cp
    return out


def kept_ccc():
    out = []
    for cp in range(MAXCP):
        c = chr(cp)
        if ud.combining(c) > 0 and ud.category(c) != "Mn":
            out += [cp, ud.combining(c)]
    return out


def numbers(xs, per_line=24, width=120):
    """Lines of per_line numbers; a line that would pass width columns
    (.luacheckrc's max_line_length) goes on as many lines as it needs, so
    the other lines keep their place."""
    lines = []
    for i in range(0, len(xs), per_line):
        line = ""
        for x in xs[i:i + per_line]:
            item = "%d," % x
            if line and 4 + len(line) + len(item) > width:
                lines.append("    " + line)
                line = ""
            line += item
        lines.append("    " + line)
    return "\n".join(lines)


def check(runs, lruns, lmulti, dec):
    """Decode what was written the way text.lua does and compare."""
    cp = 0
    for i in range(0, len(runs), 2):
        n, k = runs[i], runs[i + 1]
        for x in (cp, cp + n - 1):
            assert char_class(x) == k, hex(x)
        cp += n
    assert cp == MAXCP
    lo, cp = {}, 0
    for i in range(0, len(lruns), 4):
        cp += lruns[i]
        n, stride, d = lruns[i + 1], lruns[i + 2], lruns[i + 3]
        for j in range(n):
            lo[cp + j * stride] = cp + j * stride + d
        cp += (n - 1) * stride
    for x in range(MAXCP):
        want = chr(x).lower()
        if x in lmulti:
            assert [ord(y) for y in want] == lmulti[x]
        else:
            assert chr(lo.get(x, x)) == want, hex(x)
    i, cp, seen = 0, 0, 0
    while i < len(dec):
        cp += dec[i]
        n = dec[i + 1]
        assert "".join(chr(y) for y in dec[i + 2:i + 2 + n]) == ud.normalize("NFD", chr(cp))
        i += 2 + n
        seen += 1
    return seen


def main():
    runs = class_runs()
    lruns, lmulti = lower_tables()
    dec = decomp_table()
    kept = kept_ccc()
    ndec = check(runs, lruns, lmulti, dec)
    with open(OUT, "w") as f:
        f.write("-- SPDX-License-Identifier: MIT\n\n")
        f.write("--- attn.app.unicode_data: Unicode %s facts for attn.text (BERT's basic tokenizer).\n"
                % ud.unidata_version)
        f.write("-- Generated by scripts/gen_unicode_data.py from Python %d.%d's unicodedata;"
                " do not edit.\n" % sys.version_info[:2])
        f.write("-- The encodings are described in that script; attn.text decodes them on first use.\n")
        f.write("\n--- The tables attn.text reads, keyed by name (LDoc lists the version only).\n"
                "-- @table unicode_data\n"
                "-- @field unicode_version the Unicode version the tables describe\n")
        f.write("return {\n")
        f.write('  unicode_version = "%s",\n' % ud.unidata_version)
        f.write("  -- run length, class (0 other, 1 dropped, 2 space, 3 punctuation, 4 Mn ccc 0,\n"
                "  -- 5 Mn ccc > 0, 6 CJK), ... from U+0000 (%d runs)\n" % (len(runs) // 2))
        f.write("  classes = {\n%s\n  },\n" % numbers(runs))
        f.write("  -- start delta, count, stride, delta (%d runs)\n" % (len(lruns) // 4))
        f.write("  lower = {\n%s\n  },\n" % numbers(lruns))
        f.write("  lower_multi = {%s},\n" % ", ".join(
            "[%d] = {%s}" % (k, ",".join(str(x) for x in v)) for k, v in sorted(lmulti.items())))
        f.write("  -- key delta, n, n code points (%d decompositions)\n" % ndec)
        f.write("  decomp = {\n%s\n  },\n" % numbers(dec))
        f.write("  -- code point, combining class\n")
        f.write("  kept_ccc = {\n%s\n  },\n" % numbers(kept, per_line=16))
        f.write("}\n")
    print("wrote %s (%d bytes): %d class runs, %d lower runs, %d decompositions"
          % (OUT, os.path.getsize(OUT), len(runs) // 2, len(lruns) // 4, ndec))


if __name__ == "__main__":
    main()
