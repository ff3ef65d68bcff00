-- SPDX-License-Identifier: MIT
-- attn.plot.attention_grid: layers x heads of attention maps in one figure.
-- Small grids (2 layers x 3 heads of 5 x 5 maps) are drawn to PNG, SVG and
-- PDF in a temporary directory; the layout says where each map went and
-- attn.plot._pixel_stats reads the PNG's pixels back there, so the checks
-- look at what was drawn where.
local attn = require "attn"
local plot = require "attn.plot"

local S = require "support.sh"
local raises = require("support.errors").raises
local PC = require "support.plot_checks"
local png_size, cmap255, assert_rgb, pixel = PC.png_size, PC.cmap255, PC.assert_rgb, PC.pixel

local tmpdir
local function tmp(name) return tmpdir .. "/" .. name end

before_each(function() tmpdir = S.tmpdir() end)

after_each(function()
  if tmpdir then S.rmtree(tmpdir) end
end)

local function listing() return S.listing(tmpdir) end

local function luminance(px) return 0.299 * px[1] + 0.587 * px[2] + 0.114 * px[3] end

-- The value at layer l, head h, query i, key j (1-based) of the test maps:
-- all distinct, 0 .. 25 * layers * heads - 1.
local function value(l, h, i, j, heads, keys) return ((l - 1) * heads + (h - 1)) * 25 + (i - 1) * keys + (j - 1) end

-- layers tensors [heads, queries, keys] of value().
local function maps(layers, heads, queries, keys)
  local out = {}
  for l = 1, layers do
    local t = {}
    for h = 1, heads do
      t[h] = {}
      for i = 1, queries do
        t[h][i] = {}
        for j = 1, keys do t[h][i][j] = value(l, h, i, j, heads, keys) end
      end
    end
    out[l] = attn.tensor(t)
  end
  return out
end

-- Centre of entry (i, j) of a map's rectangle.
local function entry(rect, cell, i, j) return rect.x + (j - 0.5) * cell, rect.y + (i - 0.5) * cell end

local TOKENS = {"the", "cat", "sat", "on", "it"}

describe("attn.plot.attention_grid", function()
  it("draws 2 layers x 3 heads as a PNG: maps in row-major cells, one colour scale, labels, colour bar", function()
    local path = tmp("grid.png")
    local ret, lay = plot.attention_grid(maps(2, 3, 5, 5), {path = path, tokens = TOKENS, title = "attention"})
    assert.are.equal(path, ret)
    local w, h = png_size(path)
    assert.are.equal(lay.width, w)
    assert.are.equal(lay.height, h)
    assert.are.equal(2, lay.rows)
    assert.are.equal(3, lay.cols)
    assert.are.same({1, 2}, lay.layers)
    assert.are.same({1, 2, 3}, lay.heads)
    -- the automatic entry size: 32 for maps of 5 tokens
    assert.are.equal(32, lay.cell)
    assert.are.equal(0, lay.vmin)
    assert.are.equal(149, lay.vmax)
    -- cells: row-major, rows share y, columns share x, no overlap
    assert.are.equal(6, #lay.cells)
    for k, c in ipairs(lay.cells) do
      assert.are.equal(5 * 32, c.w)
      assert.are.equal(5 * 32, c.h)
      local r, col = (k - 1) // 3, (k - 1) % 3
      assert.are.equal(lay.cells[r * 3 + 1].y, c.y)
      assert.are.equal(lay.cells[col + 1].x, c.x)
      if col > 0 then assert(c.x > lay.cells[k - 1].x + lay.cells[k - 1].w, "cell " .. k .. " overlaps its left") end
      if r > 0 then assert(c.y > lay.cells[k - 3].y + lay.cells[k - 3].h, "cell " .. k .. " overlaps the one above") end
    end
    assert.are.equal(lay.x, lay.cells[1].x)
    assert.are.equal(lay.y, lay.cells[1].y)
    assert.are.equal(lay.x + lay.w, lay.cells[6].x + lay.cells[6].w)
    assert.are.equal(lay.y + lay.h, lay.cells[6].y + lay.cells[6].h)
    -- each map's entries in the colour map's colour at value / 149
    for l = 1, 2 do
      for hd = 1, 3 do
        local rect = lay.cells[(l - 1) * 3 + hd]
        for _, ij in ipairs({{1, 1}, {1, 5}, {3, 2}, {5, 5}}) do
          local x, y = entry(rect, lay.cell, ij[1], ij[2])
          local v = value(l, hd, ij[1], ij[2], 3, 5)
          assert_rgb(cmap255("viridis", v / 149), pixel(path, x, y), 1,
            ("layer %d head %d entry (%d, %d)"):format(l, hd, ij[1], ij[2]))
        end
      end
    end
    -- one colour bar over both rows: high values at the top
    local cb = lay.colorbar
    assert.are.equal(lay.y, cb.y)
    assert.are.equal(lay.h, cb.h)
    assert(cb.x > lay.x + lay.w, "the colour bar is not right of the maps")
    assert_rgb(cmap255("viridis", 1 - 3 / cb.h), pixel(path, cb.x + cb.w / 2, cb.y + 2), 2, "colour bar top")
    assert_rgb(cmap255("viridis", 3 / cb.h), pixel(path, cb.x + cb.w / 2, cb.y + cb.h - 3), 2, "colour bar bottom")
    -- text: head labels above row 1, layer and token labels left of column 1,
    -- key labels under row 2, the title at the top
    assert.is_true(lay.query_labels)
    assert.is_true(lay.key_labels)
    assert.is_false(lay.rotated_key_labels)
    local function inked(x, y, rw, rh, what)
      local st = plot._pixel_stats(path, x, y, rw, rh)
      assert(st.nonwhite > 5 and luminance(st.darkest) < 80, "no " .. what .. " drawn")
    end
    local c1, c4 = lay.cells[1], lay.cells[4]
    inked(c1.x, c1.y - 16, c1.w, 14, "head label")
    inked(c4.x, c4.y + c4.h + 2, c4.w, 12, "key label")
    inked(c1.x - 30, c1.y, 28, c1.h, "query label")
    inked(0, c4.y, c1.x - 40, c4.h, "layer label")
    inked(lay.x, 0, lay.w, c1.y - 20, "title")
    -- token labels only along the outer maps: none between columns or rows
    local between = plot._pixel_stats(path, c1.x + c1.w + 1, c1.y + 2, lay.cells[2].x - c1.x - c1.w - 2, c1.h - 4)
    assert.are.equal(0, between.nonwhite)
    between = plot._pixel_stats(path, c1.x + 2, c1.y + c1.h + 1, c1.w - 4, c4.y - c1.y - c1.h - 2)
    assert.are.equal(0, between.nonwhite)
    -- nothing left beside the file
    assert.are.same({"grid.png"}, listing())
  end)

  it("writes SVG and PDF with the PNG's layout, replacing files atomically", function()
    local m = maps(2, 3, 5, 5)
    local _, png = plot.attention_grid(m, {path = tmp("g.png"), tokens = TOKENS})
    for _, ext in ipairs({"svg", "pdf", "SVG"}) do
      local path = tmp("g." .. ext)
      S.writefile(path, "old")
      local ret, lay = plot.attention_grid(m, {path = path, tokens = TOKENS})
      assert.are.equal(path, ret)
      local s = S.readfile(path)
      if ext == "pdf" then
        assert.are.equal("%PDF-", s:sub(1, 5))
      else
        assert(s:find("<svg", 1, true), "not an SVG")
        assert(not s:find("<image", 1, true), "a small grid's maps are rectangles, not images")
        local w, h = s:match('<svg[^>]- width="([%d.]+)p?t?" height="([%d.]+)p?t?"')
        assert.are.equal(lay.width, tonumber(w))
        assert.are.equal(lay.height, tonumber(h))
      end
      assert.are.equal(png.width, lay.width)
      assert.are.equal(png.height, lay.height)
      assert.are.equal(#png.cells, #lay.cells)
      for k = 1, #png.cells do assert.are.same(png.cells[k], lay.cells[k]) end
    end
    assert.are.same({"g.SVG", "g.pdf", "g.png", "g.svg"}, listing()) -- no temporaries
    -- a grid of many entries: SVG maps as images keep the file small
    local big = {}
    for l = 1, 2 do big[l] = attn.rand(4, 32, 32) end
    local path = tmp("big.svg")
    plot.attention_grid(big, {path = path})
    local s = S.readfile(path)
    local images = select(2, s:gsub("<image", "<image"))
    assert(images >= 8, "expected 8 map images, found " .. images)
    assert(#s < 400000, "SVG of 8 32 x 32 maps is " .. #s .. " bytes")
  end)

  it("takes a [layers, H, L, S] tensor, a list of [B, H, L, S] maps with batch, and selects layers and heads", function()
    local m = maps(2, 3, 5, 5)
    local stacked = attn.stack(m, 1)
    local _, a = plot.attention_grid(stacked, {path = tmp("a.png")})
    assert.are.equal(6, #a.cells)
    -- batch 2 of [2, H, L, S] maps draws the second sample
    local batched = {}
    for l = 1, 2 do batched[l] = attn.stack({attn.zeros(3, 5, 5), m[l]}, 1) end
    local path = tmp("b.png")
    local _, b = plot.attention_grid(batched, {path = path, batch = 2})
    assert.are.equal(149, b.vmax)
    local x, y = entry(b.cells[6], b.cell, 5, 5)
    assert_rgb(cmap255("viridis", 1), pixel(path, x, y), 1, "batch 2, layer 2 head 3, entry (5, 5)")
    -- layers = {2}, heads = {3, 1}: one row, head 3 then head 1, in the order given
    path = tmp("sel.png")
    local _, s = plot.attention_grid(m, {path = path, layers = {2}, heads = {3, 1}, tokens = TOKENS})
    assert.are.equal(1, s.rows)
    assert.are.equal(2, s.cols)
    assert.are.same({2}, s.layers)
    assert.are.same({3, 1}, s.heads)
    assert.are.equal(2, #s.cells)
    -- the shared scale is still 0 .. the maximum of the maps shown
    local lo, hi = value(2, 1, 1, 1, 3, 5), value(2, 3, 5, 5, 3, 5)
    assert.are.equal(0, s.vmin)
    assert.are.equal(hi, s.vmax)
    x, y = entry(s.cells[1], s.cell, 2, 4)
    assert_rgb(cmap255("viridis", value(2, 3, 2, 4, 3, 5) / hi), pixel(path, x, y), 1, "layer 2 head 3")
    x, y = entry(s.cells[2], s.cell, 1, 1)
    assert_rgb(cmap255("viridis", lo / hi), pixel(path, x, y), 1, "layer 2 head 1")
    -- the same through the stacked tensor
    local _, s2 = plot.attention_grid(stacked, {path = tmp("sel2.png"), layers = {2}, heads = {3, 1},
                                                tokens = TOKENS})
    assert.are.same(s.cells, s2.cells)
    -- layer_names names every layer; the row shown gets its layer's name
    -- (a short "b", not the long first name: the maps move left)
    local _, s3 = plot.attention_grid(stacked, {path = tmp("sel3.png"), layers = {2}, heads = {3, 1},
                                                tokens = TOKENS, layer_names = {"a much longer name", "b"}})
    assert(s3.cells[1].x < s.cells[1].x, "layer 2 is not labelled with layer_names[2]")
    local _, s4 = plot.attention_grid(stacked, {path = tmp("sel4.png"), layers = {1}, tokens = TOKENS,
                                                layer_names = {"a much longer name", "b"}})
    assert(s4.cells[1].x > s.cells[1].x, "layer 1 is not labelled with layer_names[1]")
  end)

  it("draws cross-attention maps (L ~= S) with query and key tokens", function()
    local m = maps(2, 3, 4, 7)
    local queries = {"a", "b", "c", "d"}
    local keys = {"un", "deux", "trois", "quatre", "cinq", "six", "sept"}
    local path = tmp("cross.png")
    local _, lay = plot.attention_grid(m, {path = path, tokens = queries, source_tokens = keys, cmap = "magma",
                                           vmin = 0, vmax = 100})
    assert.are.equal(22, lay.cell) -- 160 / 7 keys, whole units
    for _, c in ipairs(lay.cells) do
      assert.are.equal(7 * lay.cell, c.w)
      assert.are.equal(4 * lay.cell, c.h)
    end
    assert.is_true(lay.query_labels)
    assert.is_true(lay.key_labels)
    assert.is_true(lay.rotated_key_labels) -- "quatre" is wider than 22 pixels
    assert.are.equal(0, lay.vmin)
    assert.are.equal(100, lay.vmax)
    -- layer 2, head 3, query 4, key 7: value 5 * 25 + 3 * 7 + 6 = 152, clamped to vmax
    local x, y = entry(lay.cells[6], lay.cell, 4, 7)
    assert_rgb(cmap255("magma", 1), pixel(path, x, y), 1, "clamped entry")
    x, y = entry(lay.cells[1], lay.cell, 2, 3)
    assert_rgb(cmap255("magma", value(1, 1, 2, 3, 3, 7) / 100), pixel(path, x, y), 1, "layer 1 head 1 (2, 3)")
    -- key labels under the last row, rotated: taller than one line
    local c = lay.cells[4]
    local st = plot._pixel_stats(path, c.x, c.y + c.h + 20, c.w, 15)
    assert(st.nonwhite > 5, "no rotated key labels below the last row")
    -- tokens alone label the queries only when L ~= S
    local _, q = plot.attention_grid(m, {path = tmp("cross2.png"), tokens = queries})
    assert.is_true(q.query_labels)
    assert.is_false(q.key_labels)
  end)

  it("leaves the tokens out when the entries are too small, and sizes 12 x 12 grids of 64 tokens", function()
    local _, lay = plot.attention_grid(maps(2, 3, 5, 5), {path = tmp("small.png"), tokens = TOKENS, cell = 4})
    assert.are.equal(4, lay.cell)
    assert.is_false(lay.query_labels)
    assert.is_false(lay.key_labels)
    assert.are.equal(20, lay.cells[1].w)
    local words = {}
    for i = 1, 64 do words[i] = "w" .. i end
    local big = attn.rand(12, 12, 64, 64)
    local path = tmp("bert.png")
    local _, b = plot.attention_grid(big, {path = path, tokens = words, title = "12 x 12"})
    assert.are.equal(2, b.cell)
    assert.are.equal(144, #b.cells)
    assert(b.width <= 2400 and b.height <= 2400, ("a 12 x 12 grid is %d x %d"):format(b.width, b.height))
    assert.is_false(b.query_labels)
    local w, h = png_size(path)
    assert.are.same({b.width, b.height}, {w, h})
  end)

  it("raises errors that name the function, the argument and the shapes", function()
    local m = maps(2, 3, 5, 5)
    local P = tmp("e.png")
    raises({"attention_grid", "maps", "got string"}, plot.attention_grid, "x", {path = P})
    raises({"attention_grid", "maps is an empty list"}, plot.attention_grid, {}, {path = P})
    raises({"attention_grid", "2-d tensor [5, 5]"}, plot.attention_grid, attn.rand(5, 5), {path = P})
    raises({"attention_grid", "maps[2] must be [H, L, S] or [B, H, L, S] (got [5, 5])"}, plot.attention_grid,
      {m[1], attn.rand(5, 5)}, {path = P})
    raises({"attention_grid", "maps[2] is [2, 5, 5] but maps[1] is [3, 5, 5]"}, plot.attention_grid,
      {m[1], attn.rand(2, 5, 5)}, {path = P})
    raises({"attention_grid", "maps[2] must be a [H, L, S] or [B, H, L, S] tensor (got table)"},
      plot.attention_grid, {m[1], {}}, {path = P})
    raises({"attention_grid", "option 'batch' is 3 but maps[1] is [2, 3, 5, 5]", "1 to 2"}, plot.attention_grid,
      {attn.rand(2, 3, 5, 5)}, {path = P, batch = 3})
    raises({"attention_grid", "option 'batch'", "leave batch out"}, plot.attention_grid, attn.rand(2, 3, 5, 5),
      {path = P, batch = 2})
    raises({"attention_grid", "option 'batch' must be a whole number"}, plot.attention_grid, m, {path = P,
      batch = 1.5})
    raises({"attention_grid", "option 'layers': entry 2 is 3", "1 to 2"}, plot.attention_grid, m,
      {path = P, layers = {1, 3}})
    raises({"attention_grid", "option 'heads': entry 1 is 0", "1 to 3"}, plot.attention_grid, m,
      {path = P, heads = {0}})
    raises({"attention_grid", "option 'heads'", "an empty list"}, plot.attention_grid, m, {path = P, heads = {}})
    raises({"attention_grid", "option 'tokens' has 4 labels for 5 queries", "[3, 5, 5]"}, plot.attention_grid, m,
      {path = P, tokens = {"a", "b", "c", "d"}})
    raises({"attention_grid", "option 'source_tokens' has 2 labels for 5 keys"}, plot.attention_grid, m,
      {path = P, source_tokens = {"a", "b"}})
    raises({"attention_grid", "option 'layer_names' has 1 names for 2 layers"}, plot.attention_grid, m,
      {path = P, layer_names = {"x"}})
    raises({"attention_grid", "option 'width' is not taken", "cell"}, plot.attention_grid, m, {path = P, width = 300})
    raises({"attention_grid", "colorbars"}, plot.attention_grid, m, {path = P, colorbars = false})
    raises({"attention_grid", "option 'cell' must be 0.1 to 64 (got 0)"}, plot.attention_grid, m, {path = P, cell = 0})
    raises({"attention_grid", "unknown cmap 'jet'"}, plot.attention_grid, m, {path = P, cmap = "jet"})
    raises({"attention_grid", "vmin (2) is above vmax (1)"}, plot.attention_grid, m, {path = P, vmin = 2, vmax = 1})
    raises({"attention_grid", "option 'path' is required"}, plot.attention_grid, m, {})
    raises({"attention_grid", "must end in .png, .svg or .pdf"}, plot.attention_grid, m, {path = tmp("e.bmp")})
    raises({"attention_grid", "at cell = 64 make a", "give a smaller cell"}, plot.attention_grid,
      attn.rand(1, 12, 64, 64), {path = P, cell = 64})
    raises({"attention_grid", "no finite values"}, plot.attention_grid, attn.full({1, 2, 2}, 0 / 0), {path = P})
    assert.are.same({}, listing()) -- no file, no temporary left behind
  end)
end)
