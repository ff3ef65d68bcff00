-- SPDX-License-Identifier: MIT
-- attn.plot: heatmaps, histograms and line plots drawn with cairo.  Each
-- kind is rendered into a temporary directory and read back: the PNG's
-- IHDR gives its size, attn.plot._pixel_stats (cairo's PNG reader) gives
-- pixel colours and counts, so the checks look at what was drawn where.
local attn = require "attn"
local plot = require "attn.plot"

local S = require "support.sh"
local q = S.q

local tmpdir
local function tmp(name) return tmpdir .. "/" .. name end

setup(function() tmpdir = S.tmpdir() end)

teardown(function()
  if tmpdir then S.rmtree(tmpdir) end
end)

local read, exists = S.readfile, S.exists
local PC = require "support.plot_checks"
local png_size, cmap255, assert_rgb, pixel = PC.png_size, PC.cmap255, PC.assert_rgb, PC.pixel
local function listing() return S.listing(tmpdir) end

-- Names in tmpdir (sorted).
local function luminance(px) return 0.299 * px[1] + 0.587 * px[2] + 0.114 * px[3] end

-- Expects fn(...) to raise a message containing each plain-text piece.
local raises = require("support.errors").raises

-- 10 x 10 values 0..99 row by row: the top-left cell is the minimum, the
-- bottom-right one the maximum.
local function ramp()
  local m = {}
  for i = 1, 10 do
    m[i] = {}
    for j = 1, 10 do m[i][j] = (i - 1) * 10 + (j - 1) end
  end
  return m
end

-- Centre of cell (i, j) (1-based) of a heatmap layout.
local function cell_centre(lay, i, j)
  local cw, ch = lay.w / lay.cols, lay.h / lay.rows
  return lay.x + (j - 0.5) * cw, lay.y + (i - 0.5) * ch, cw, ch
end

-- Device position of a data point in a lines/histogram layout (linear y).
local function to_px(lay, x, y)
  return lay.x + (x - lay.xmin) / (lay.xmax - lay.xmin) * lay.w,
         lay.y + lay.h - (y - lay.ymin) / (lay.ymax - lay.ymin) * lay.h
end

describe("attn.plot", function()
  it("is the same table through attn.plot and require 'attn.plot'", function()
    assert.are.equal(plot, attn.plot)
    assert.is_function(plot.heatmap)
    assert.is_function(plot.histogram)
    assert.is_function(plot.lines)
  end)

  describe("colour maps", function()
    it("viridis and magma follow matplotlib's tables", function()
      -- entries k of matplotlib's 256-colour _viridis_data / _magma_data
      local ref = {
        viridis = {[0] = {0.267004, 0.004874, 0.329415}, [64] = {0.229739, 0.322361, 0.545706},
                   [128] = {0.127568, 0.566949, 0.550556}, [191] = {0.360741, 0.785964, 0.387814},
                   [255] = {0.993248, 0.906157, 0.143936}},
        magma = {[0] = {0.001462, 0.000466, 0.013866}, [128] = {0.716387, 0.214982, 0.475290},
                 [255] = {0.987053, 0.991438, 0.749504}},
      }
      for name, entries in pairs(ref) do
        for k, rgb in pairs(entries) do
          local r, g, b = plot.colormap(name, k / 255)
          local got = {r, g, b}
          for c = 1, 3 do
            assert(math.abs(got[c] - rgb[c]) < 1e-3, ("%s(%d/255)[%d]: %g vs %g"):format(name, k, c, got[c], rgb[c]))
          end
        end
      end
    end)

    it("hot, gray and coolwarm hit their control points and clamp outside [0, 1]", function()
      local function close(name, t, rgb)
        local r, g, b = plot.colormap(name, t)
        assert.is_near(rgb[1], r, 1e-5)
        assert.is_near(rgb[2], g, 1e-5)
        assert.is_near(rgb[3], b, 1e-5)
      end
      close("hot", 0, {0.0416, 0, 0})
      close("hot", 0.365079, {1, 0, 0})
      close("hot", 0.746032, {1, 1, 0})
      close("hot", 1, {1, 1, 1})
      close("gray", 0.25, {0.25, 0.25, 0.25})
      close("coolwarm", 0, {0.229806, 0.298718, 0.753683})
      close("coolwarm", 0.5, {0.865395, 0.865410, 0.865396})
      close("coolwarm", 1, {0.705673, 0.015556, 0.150233})
      close("viridis", -3, {plot.colormap("viridis", 0)})
      close("magma", 7, {plot.colormap("magma", 1)})
      assert.are.same({"viridis", "magma", "hot", "gray", "coolwarm"}, plot.colormaps())
      raises({"unknown cmap 'jet'", "viridis"}, plot.colormap, "jet", 0.5)
    end)
  end)

  describe("heatmap", function()
    it("draws a PNG with character labels, cells in the colour map's colours and a colour bar", function()
      local s = "^abhishek$"
      local path = tmp("attn.png")
      local ret, lay = plot.heatmap(ramp(), {path = path, row_labels = s, col_labels = s, title = "attention",
                                             xlabel = "key", ylabel = "query"})
      assert.are.equal(path, ret)
      local w, h, bytes = png_size(path)
      assert.are.equal(lay.width, w)
      assert.are.equal(lay.height, h)
      assert.are.equal(10, lay.rows)
      assert.are.equal(10, lay.cols)
      assert.are.equal(0, lay.vmin)
      assert.are.equal(99, lay.vmax)
      assert(bytes > 8000, "PNG is only " .. bytes .. " bytes")
      local st = plot._pixel_stats(path)
      assert.are.equal(w, st.width)
      assert.are.equal(h, st.height)
      assert(st.colors > 200, "only " .. st.colors .. " colours")
      assert(st.nonwhite > 0.4 * w * h, "only " .. st.nonwhite .. " coloured pixels")
      -- row 1 is at the top: m[1][1] = 0 has viridis(0), m[10][10] = 99 viridis(1)
      local x, y = cell_centre(lay, 1, 1)
      assert_rgb({68, 1, 84}, pixel(path, x, y), 1, "top-left cell")
      x, y = cell_centre(lay, 10, 10)
      assert_rgb({253, 231, 37}, pixel(path, x, y), 1, "bottom-right cell")
      x, y = cell_centre(lay, 6, 5) -- value 54
      assert_rgb(cmap255("viridis", 54 / 99), pixel(path, x, y), 1, "cell (6, 5)")
      x, y = cell_centre(lay, 1, 10) -- value 9: top-right, not bottom-left
      assert_rgb(cmap255("viridis", 9 / 99), pixel(path, x, y), 1, "cell (1, 10)")
      -- the colour bar: high values at the top
      local cb = lay.colorbar
      assert_rgb(cmap255("viridis", 1 - 3 / cb.h), pixel(path, cb.x + cb.w / 2, cb.y + 2), 2, "colour bar top")
      assert_rgb(cmap255("viridis", 3 / cb.h), pixel(path, cb.x + cb.w / 2, cb.y + cb.h - 3), 2,
        "colour bar bottom")
      -- text: the row labels left of row 1, the column labels under
      -- column 1, the title above the cells
      local _, ry, _, ch = cell_centre(lay, 1, 1)
      local rl = plot._pixel_stats(path, 0, ry - ch / 2, lay.x - 5, ch)
      assert(rl.nonwhite > 5 and luminance(rl.darkest) < 80, "no row label drawn")
      local cx, _, cw = cell_centre(lay, 10, 1)
      local cl = plot._pixel_stats(path, cx - cw / 2, lay.y + lay.h + 6, cw, 16)
      assert(cl.nonwhite > 5 and luminance(cl.darkest) < 80, "no column label drawn")
      local title = plot._pixel_stats(path, lay.x, 0, lay.w, lay.y - 2)
      assert(title.nonwhite > 20 and luminance(title.darkest) < 50, "no title drawn")
      assert.is_false(lay.rotated_col_labels)
    end)

    it("annotates cells with text that contrasts with the cell", function()
      local path = tmp("annot.png")
      local _, lay = plot.heatmap(ramp(), {path = path, annotate = true, colorbar = false})
      assert.is_nil(lay.colorbar)
      -- the dark first cell carries light text, the light last cell dark text
      local x, y, cw, ch = cell_centre(lay, 1, 1)
      local dark = plot._pixel_stats(path, x - cw / 2 + 1, y - ch / 2 + 1, cw - 2, ch - 2)
      assert(dark.colors > 3, "no text in the first cell")
      assert(luminance(dark.lightest) > 200, "text on the dark cell is not light")
      x, y = cell_centre(lay, 10, 10)
      local light = plot._pixel_stats(path, x - cw / 2 + 1, y - ch / 2 + 1, cw - 2, ch - 2)
      assert(light.colors > 3, "no text in the last cell")
      assert(luminance(light.darkest) < 60, "text on the light cell is not dark")
      -- without annotate a cell is one flat colour
      local plain = tmp("plain.png")
      local _, lay2 = plot.heatmap(ramp(), {path = plain})
      x, y, cw, ch = cell_centre(lay2, 1, 1)
      assert.are.equal(1, plot._pixel_stats(plain, x - cw / 2 + 1, y - ch / 2 + 1, cw - 2, ch - 2).colors)
      -- a format string is used as given; others are refused
      plot.heatmap(ramp(), {path = tmp("fmt.png"), annotate = "%.1e"})
      raises({"annotate", "%s"}, plot.heatmap, ramp(), {path = tmp("x.png"), annotate = "%s"})
      raises({"annotate"}, plot.heatmap, ramp(), {path = tmp("x.png"), annotate = "%d%n"})
      raises({"annotate"}, plot.heatmap, ramp(), {path = tmp("x.png"), annotate = 3})
    end)

    it("turns long column labels vertical and accepts label lists", function()
      local names = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"}
      local path = tmp("long.png")
      local _, lay = plot.heatmap(ramp(), {path = path, col_labels = names, row_labels = names})
      assert.is_true(lay.rotated_col_labels)
      -- the labels hang below the cells: "epsilon" is taller than one line
      local x, _, cw = cell_centre(lay, 10, 5)
      local below = plot._pixel_stats(path, x - cw / 2, lay.y + lay.h + 30, cw, 10)
      assert(below.nonwhite > 3, "rotated label does not reach 30 units below the cells")
      raises({"col_labels", "9 labels for 10 columns"}, plot.heatmap, ramp(),
        {path = tmp("x.png"), col_labels = "123456789"})
    end)

    it("leaves NaN cells blank and clamps values to vmin / vmax", function()
      local nan = 0 / 0
      local path = tmp("nan.png")
      local _, lay = plot.heatmap({{nan, 0.5, 2}, {-1, 0.25, 1}}, {path = path, vmin = 0, vmax = 1, cmap = "gray"})
      assert.are.equal(0, lay.vmin)
      assert.are.equal(1, lay.vmax)
      assert_rgb({255, 255, 255}, pixel(path, cell_centre(lay, 1, 1)), 0, "NaN cell")
      assert_rgb({128, 128, 128}, pixel(path, cell_centre(lay, 1, 2)), 1, "0.5")
      assert_rgb({255, 255, 255}, pixel(path, cell_centre(lay, 1, 3)), 0, "2 clamped to vmax")
      assert_rgb({0, 0, 0}, pixel(path, cell_centre(lay, 2, 1)), 0, "-1 clamped to vmin")
      assert_rgb({64, 64, 64}, pixel(path, cell_centre(lay, 2, 2)), 1, "0.25")
    end)

    it("uses every colour map", function()
      for _, name in ipairs(plot.colormaps()) do
        local path = tmp("cm_" .. name .. ".png")
        local t = attn.tensor({{1, 2}, {3, 4}})
        local _, lay = plot.heatmap(t, {path = path, cmap = name})
        assert_rgb(cmap255(name, 0), pixel(path, cell_centre(lay, 1, 1)), 1, name .. " low")
        assert_rgb(cmap255(name, 1), pixel(path, cell_centre(lay, 2, 2)), 1, name .. " high")
        assert_rgb(cmap255(name, 1 / 3), pixel(path, cell_centre(lay, 1, 2)), 1, name .. " 1/3")
      end
    end)

    it("takes tensors (a 1-d one is one row) and a given figure size", function()
      local path = tmp("sized.png")
      local _, lay = plot.heatmap(attn.arange(0, 12):reshape(3, 4):t(), {path = path, width = 500, height = 300})
      assert.are.equal(4, lay.rows)
      assert.are.equal(3, lay.cols)
      local w, h = png_size(path)
      assert.are.equal(500, w)
      assert.are.equal(300, h)
      -- the transposed view is read through its strides: m[1][2] = 4
      assert_rgb(cmap255("viridis", 4 / 11), pixel(path, cell_centre(lay, 1, 2)), 1, "transposed cell")
      local _, lay1 = plot.heatmap(attn.tensor({3, 1, 2}), {path = tmp("row.png")})
      assert.are.equal(1, lay1.rows)
      assert.are.equal(3, lay1.cols)
    end)

    it("writes SVG and PDF by extension", function()
      local s = "^abhishek$"
      local _, lay = plot.heatmap(ramp(), {path = tmp("h.svg"), row_labels = s, col_labels = s, title = "t"})
      local svg = read(tmp("h.svg"))
      assert.are.equal("<?xml", svg:sub(1, 5))
      assert.truthy(svg:find("<svg", 1, true))
      assert.truthy(svg:find(('width="%dpt"'):format(lay.width), 1, true))
      assert.truthy(svg:find("</svg>%s*$"))
      assert(#svg > 5000, "SVG is only " .. #svg .. " bytes")
      plot.heatmap(ramp(), {path = tmp("H.PDF"), cmap = "magma", annotate = true})
      local pdf = read(tmp("H.PDF"))
      assert.are.equal("%PDF-", pdf:sub(1, 5))
      assert.truthy(pdf:find("%%EOF%s*$"))
      assert(#pdf > 3000, "PDF is only " .. #pdf .. " bytes")
    end)
  end)

  describe("histogram", function()
    it("bins like plt.hist(bins = range(1, 20)): [a, b) bins, the last one closed", function()
      local edges = {}
      for i = 1, 19 do edges[i] = i end
      local values = {1, 1.5, 2, 2, 2.999, 3, 10, 18, 18.5, 19, 0.99, 19.01, 0 / 0, 1 / 0, -1 / 0}
      local path = tmp("hist.png")
      local _, lay = plot.histogram(values, {path = path, bins = edges, title = "lengths", xlabel = "length",
                                             ylabel = "count"})
      local expect = {}
      for i = 1, 18 do expect[i] = 0 end
      expect[1], expect[2], expect[3], expect[10], expect[18] = 2, 3, 1, 1, 3
      assert.are.same(expect, lay.counts)
      assert.are.same(edges, lay.edges)
      local w, h, bytes = png_size(path)
      assert.are.equal(640, w)
      assert.are.equal(480, h)
      assert(bytes > 3000, "PNG is only " .. bytes .. " bytes")
      -- the middle of the tallest bar is matplotlib's first colour
      local x, y = to_px(lay, 2.5, 1.5)
      assert_rgb({31, 119, 180}, pixel(path, x, y), 1, "bar")
      -- and above it is background
      x, y = to_px(lay, 2.5, 3.3)
      assert_rgb({255, 255, 255}, pixel(path, x, y), 0, "above the bar")
      local st = plot._pixel_stats(path)
      assert(st.nonwhite > 5000, "only " .. st.nonwhite .. " coloured pixels")
    end)

    it("divides a count over the data's range or a given one, as numpy does", function()
      local _, lay = plot.histogram({1, 2, 2, 3, 3, 3}, {path = tmp("h3.png"), bins = 3})
      assert.are.same({1, 2, 3}, lay.counts)
      assert.are.equal(1, lay.edges[1])
      assert.is_near(5 / 3, lay.edges[2], 1e-12)
      assert.are.equal(3, lay.edges[4])
      _, lay = plot.histogram(attn.tensor({{0, 1}, {2, 9}}), {path = tmp("hr.png"), bins = 2, range = {0, 4}})
      assert.are.same({2, 1}, lay.counts) -- 9 is outside
      assert.are.same({0, 2, 4}, lay.edges)
      _, lay = plot.histogram({5, 5, 5}, {path = tmp("h5.png")}) -- one value: a unit range, 10 bins
      assert.are.equal(10, #lay.counts)
      assert.are.equal(4.5, lay.edges[1])
      assert.are.equal(5.5, lay.edges[11])
      assert.are.equal(3, lay.counts[6])
    end)

    it("keeps Lua numbers in double precision", function()
      -- float32(0.7) is below 0.7 and would land in the first bin
      local _, lay = plot.histogram({0.7}, {path = tmp("h07.png"), bins = {0, 0.7, 1}})
      assert.are.same({0, 1}, lay.counts)
      raises({"'values' must hold numbers", "entry 2 is a string"}, plot.histogram, {1, "2"}, {path = tmp("x.png")})
    end)

    it("density = true integrates to one", function()
      local _, lay = plot.histogram({0.1, 0.2, 0.3, 1.5, 3.9}, {path = tmp("hd.svg"), bins = {0, 1, 2, 4},
                                                                density = true})
      local area = 0
      for i = 1, 3 do area = area + lay.counts[i] * (lay.edges[i + 1] - lay.edges[i]) end
      assert.is_near(1, area, 1e-12)
      assert.is_near(0.6, lay.counts[1], 1e-12)
      assert.is_near(0.1, lay.counts[3], 1e-12)
      local svg = read(tmp("hd.svg"))
      assert.are.equal("<?xml", svg:sub(1, 5))
      plot.histogram({1, 2, 3}, {path = tmp("h.pdf")})
      assert.are.equal("%PDF-", read(tmp("h.pdf")):sub(1, 5))
    end)
  end)

  describe("lines", function()
    it("draws several series in distinct colours with a legend", function()
      local path = tmp("loss.png")
      local _, lay = plot.lines({{y = {2, 2, 2, 2, 2}, label = "train"}, {y = {1, 1, 1, 1, 1}, label = "valid"}},
        {path = path, title = "loss", xlabel = "epoch", ylabel = "loss"})
      local w, h, bytes = png_size(path)
      assert.are.equal(640, w)
      assert.are.equal(480, h)
      assert(bytes > 5000, "PNG is only " .. bytes .. " bytes")
      -- x defaults to 1..n; the view pads the data by 5%
      assert(lay.xmin < 1 and lay.xmax > 5 and lay.ymin < 1 and lay.ymax > 2)
      local x, y = to_px(lay, 2.5, 2)
      assert_rgb({31, 119, 180}, pixel(path, x, y), 2, "first series")
      x, y = to_px(lay, 2.5, 1)
      assert_rgb({255, 127, 14}, pixel(path, x, y), 2, "second series")
      local lg = assert(lay.legend, "no legend")
      local st = plot._pixel_stats(path, lg.x + 2, lg.y + 2, lg.w - 4, lg.h - 4)
      assert(st.colors > 10 and luminance(st.darkest) < 60, "legend has no text")
      local _, nolabels = plot.lines({{y = {1, 2}}}, {path = tmp("nolegend.png")})
      assert.is_nil(nolabels.legend)
    end)

    it("breaks the line at NaN and uses given x values", function()
      local nan = 0 / 0
      local path = tmp("gap.png")
      local _, lay = plot.lines({y = {1, 1, nan, nan, 1, 1}, x = {10, 20, 30, 40, 50, 60}}, {path = path})
      assert(lay.xmin < 10 and lay.xmax > 60)
      local x, y = to_px(lay, 15, 1)
      assert_rgb({31, 119, 180}, pixel(path, x, y), 2, "before the gap")
      x, y = to_px(lay, 35, 1)
      assert(luminance(pixel(path, x, y)) > 200, "the gap is drawn")
      x, y = to_px(lay, 55, 1)
      assert_rgb({31, 119, 180}, pixel(path, x, y), 2, "after the gap")
    end)

    it("draws y on a log scale, skipping non-positive values", function()
      local y = {}
      for i = 1, 50 do y[i] = 10 ^ (-i / 10) end
      y[7] = 0
      y[8] = -1
      local path = tmp("log.png")
      local _, lay = plot.lines({{y = y, label = "loss"}, {y = attn.full({50}, 0.01)}}, {path = path, logy = true})
      -- the view pads log10 of the data, [-5, -0.1], by 5% of its span
      assert.is_near(-5 - 0.245, math.log(lay.ymin, 10), 1e-9)
      assert.is_near(-0.1 + 0.245, math.log(lay.ymax, 10), 1e-9)
      -- 0.01 sits where log10 puts it
      local frac = (math.log(0.01, 10) - math.log(lay.ymin, 10)) / (math.log(lay.ymax, 10) - math.log(lay.ymin, 10))
      local px, py = lay.x + lay.w * 0.7, lay.y + lay.h * (1 - frac)
      assert_rgb({255, 127, 14}, pixel(path, px, py), 2, "constant series on the log axis")
      plot.lines(attn.arange(1, 20), {path = tmp("log.svg"), logy = true})
      assert.are.equal("<?xml", read(tmp("log.svg")):sub(1, 5))
      plot.lines({1, 2, 4, 8}, tmp("short.pdf"))
      assert.are.equal("%PDF-", read(tmp("short.pdf")):sub(1, 5))
    end)
  end)

  describe("errors", function()
    local m = {{1, 2}, {3, 4}}
    local nan = 0 / 0

    it("raise for bad paths and leave nothing behind", function()
      local before = listing()
      raises({"cannot tell the format", "x.jpg", ".png"}, plot.heatmap, m, {path = tmp("x.jpg")})
      raises({"cannot tell the format"}, plot.lines, {1, 2}, {path = tmp("noext")})
      raises({"No such file or directory", "missing/x.png"}, plot.heatmap, m, {path = tmp("missing/x.png")})
      raises({"missing/x.svg"}, plot.histogram, {1, 2}, {path = tmp("missing/x.svg")})
      assert.are.same(before, listing())
      -- a directory that cannot hold files: its "parent" is a regular file
      local f = assert(io.open(tmp("afile"), "w"))
      f:write("x")
      f:close()
      before = listing()
      raises({"afile/x.pdf"}, plot.lines, {1, 2}, {path = tmp("afile/x.pdf")})
      assert.are.same(before, listing())
      -- an existing directory in the way: the rename fails, no temporary stays
      os.execute("mkdir " .. q(tmp("dir.png")))
      before = listing()
      raises({"dir.png"}, plot.heatmap, m, {path = tmp("dir.png")})
      assert.are.same(before, listing())
      raises({"path", "required"}, plot.heatmap, m, {title = "no path"})
      raises({"options table"}, plot.heatmap, m)
    end)

    it("raise for empty or non-finite data", function()
      raises({"empty"}, plot.heatmap, {}, {path = tmp("x.png")})
      raises({"empty", "[0, 3]"}, plot.heatmap, attn.zeros(0, 3), {path = tmp("x.png")})
      raises({"2-d"}, plot.heatmap, attn.zeros(2, 2, 2), {path = tmp("x.png")})
      raises({"no finite values"}, plot.heatmap, {{nan, nan}}, {path = tmp("x.png")})
      raises({"no values"}, plot.histogram, {}, {path = tmp("x.png")})
      raises({"no finite values"}, plot.histogram, {nan, 1 / 0}, {path = tmp("x.png")})
      raises({"no series"}, plot.lines, {}, {path = tmp("x.png")})
      raises({"series 1 is empty"}, plot.lines, {{y = {}}}, {path = tmp("x.png")})
      raises({"no finite points"}, plot.lines, {{y = {nan, nan}}}, {path = tmp("x.png")})
      raises({"log scale"}, plot.lines, {{y = {0, -1}}}, {path = tmp("x.png"), logy = true})
      raises({"series 2 has no 'y'"}, plot.lines, {{y = {1}}, {x = {1}}}, {path = tmp("x.png")})
      raises({"1 x values for 2 y values"}, plot.lines, {{y = {1, 2}, x = {1}}}, {path = tmp("x.png")})
      raises({"not rectangular"}, plot.heatmap, {{1, 2}, {3}}, {path = tmp("x.png")})
    end)

    it("raise for bad options", function()
      raises({"unknown cmap 'jet'"}, plot.heatmap, m, {path = tmp("x.png"), cmap = "jet"})
      raises({"unknown option 'colour'"}, plot.heatmap, m, {path = tmp("x.png"), colour = "red"})
      raises({"unknown option 'bins'"}, plot.lines, {1, 2}, {path = tmp("x.png"), bins = 3})
      raises({"vmin (3) is above vmax (1)"}, plot.heatmap, m, {path = tmp("x.png"), vmin = 3, vmax = 1})
      raises({"row_labels", "3 labels for 2 rows"}, plot.heatmap, m, {path = tmp("x.png"), row_labels = "abc"})
      raises({"'colorbar' must be a boolean"}, plot.heatmap, m, {path = tmp("x.png"), colorbar = 1})
      raises({"'title' must be a string"}, plot.heatmap, m, {path = tmp("x.png"), title = 3})
      raises({"'width' must be between"}, plot.heatmap, m, {path = tmp("x.png"), width = 10})
      raises({"'height' must be between"}, plot.lines, {1, 2}, {path = tmp("x.png"), height = 1e9})
      raises({"no room"}, plot.lines, {1, 2}, {path = tmp("x.png"), width = 40, height = 40})
      raises({"bin edges must increase"}, plot.histogram, {1}, {path = tmp("x.png"), bins = {1, 3, 2}})
      raises({"'bins' must be 1 to 100000"}, plot.histogram, {1}, {path = tmp("x.png"), bins = 0})
      raises({"whole number"}, plot.histogram, {1}, {path = tmp("x.png"), bins = 2.5})
      raises({"'range' is reversed"}, plot.histogram, {1}, {path = tmp("x.png"), range = {3, 1}})
      raises({"not both"}, plot.histogram, {1}, {path = tmp("x.png"), range = {0, 1}, bins = {0, 1}})
      raises({"'label' must be a string"}, plot.lines, {{y = {1, 2}, label = 3}}, {path = tmp("x.png")})
      raises({"not a PNG"}, plot._pixel_stats, tmp("afile"))
    end)

    it("replace an existing file only once the new one is complete", function()
      local path = tmp("replace.png")
      local f = assert(io.open(path, "w"))
      f:write("old contents")
      f:close()
      raises({"unknown cmap"}, plot.heatmap, m, {path = path, cmap = "nope"})
      assert.are.equal("old contents", read(path))
      plot.heatmap(m, {path = path})
      local w = png_size(path)
      assert(w > 0)
      for _, name in ipairs(listing()) do
        assert.is_nil(name:find(".tmp.", 1, true), "temporary left behind: " .. name)
      end
      assert.is_true(exists(path))
    end)
  end)
end)
