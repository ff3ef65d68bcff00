-- SPDX-License-Identifier: MIT

--- attn.plot: heatmaps, histograms and line plots, drawn in C with cairo.
--
--   local plot = require "attn".plot      -- or require "attn.plot"
--   plot.heatmap(m, {path = "attn.png", row_labels = "^abhishek$",
--                    col_labels = "^abhishek$", cmap = "viridis"})
--   plot.histogram(lengths, {path = "lengths.png", bins = edges})
--   plot.lines({{y = train, label = "train"}, {y = valid, label = "valid"}},
--              {path = "loss.png", xlabel = "epoch", logy = true})
--
-- Every function writes one file whose format follows the extension of
-- opts.path (.png, .svg or .pdf; a string in place of opts is the path),
-- replacing it atomically, and returns the path and a layout table: the
-- plot area {x, y, w, h} (pixels from the top-left corner for PNG, points
-- for SVG/PDF), the figure's width and height, and what each kind drew
-- (heatmap: rows, cols, vmin, vmax, colorbar = {x, y, w, h}; histogram:
-- counts, edges and the view xmin, xmax, ymin, ymax; lines: the view and
-- legend = {x, y, w, h} when there is one).
--
-- Options every kind takes: path (required), title, xlabel, ylabel, width,
-- height (default 640 x 480; heatmaps size themselves from their cells).
--
-- heatmap(m, opts): m is a 2-d tensor or nested table (a 1-d one is one
--   row); row m[i] is drawn at the top.  row_labels / col_labels: lists of
--   labels, or a string whose characters are the labels; column labels
--   turn vertical when they do not fit their cells.  cmap: "viridis"
--   (default), "magma", "hot", "gray", "coolwarm".  colorbar (default
--   true), annotate (true, or a format such as "%.3f": values in the
--   cells, black or white for contrast), vmin / vmax (default: the finite
--   data range; values beyond are clamped).  NaN cells stay blank.
-- histogram(values, opts): values is a tensor or list (flattened).  bins:
--   a count (default 10) or a list of increasing edges; range = {lo, hi}
--   for a count (default: the data's range); density = true divides the
--   counts by total * bin width.  Binning is numpy's / plt.hist's: bins
--   are [a, b) except the last, [a, b]; values outside the edges, NaN
--   and +-inf are not counted.
-- lines(series, opts): series is a list of {y = list|tensor, x = optional
--   list|tensor (default 1, 2, ...), label = optional string}; a single
--   series, or a bare list/tensor of y values, is accepted too.  Labelled
--   series get a legend, put in the corner where it hides the fewest
--   points.  logy = true draws y on a log10 scale.  NaN points (and
--   non-positive ones on a log scale) break the line.
-- @module attn.plot
local core = require "attn.core"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
local C = core._plot
if C == nil then
  -- A sandbox (attn_lua.h) removes the C side, which writes files: every
  -- plot function then fails with a message saying so.
  C = setmetatable({}, {__index = function(_, name)
    return function()
      error(("%s: attn.plot is not available in a sandbox (it writes files)"):format(name), 2)
    end
  end})
end
local is_tensor = core.is_tensor

local plot = {}

-- Calls the C function; its errors are raised again at the caller of the
-- plot function, so messages point at the user's line.
-- The C functions run through pcall have no name for Lua's argument
-- errors ("bad argument #1 to '?'"): name the plot function instead.
local function call(name, fn, ...)
  local ok, path, layout = pcall(fn, ...)
  if not ok then
    if type(path) == "string" and path:find("to '?'", 1, true) then
      path = name .. ": " .. path:gsub(" to '%?'", "")
    end
    error(path, 3)
  end
  return path, layout
end

local common = {path = true, title = true, xlabel = true, ylabel = true, width = true, height = true}
local specific = {
  heatmap = {row_labels = true, col_labels = true, cmap = true, colorbar = true, annotate = true, vmin = true,
             vmax = true},
  histogram = {bins = true, range = true, density = true},
  lines = {logy = true},
}

-- A fresh options table with every key checked against the kind's list.
local function options(fn, opts)
  if type(opts) == "string" then return {path = opts} end
  if type(opts) ~= "table" then
    error(("%s: expected an options table with path = \"file.png\" (got %s)"):format(fn, type(opts)), 3)
  end
  local out = {}
  for k, v in pairs(opts) do
    if not (common[k] or specific[fn][k]) then
      local valid = {}
      for n in pairs(common) do valid[n] = true end
      for n in pairs(specific[fn]) do valid[n] = true end
      error(require("attn.base")._misuse.unknown_option(fn, k, valid), 3)
    end
    out[k] = v
  end
  return out
end

-- Labels: a string gives one label per (UTF-8) character; a list gives
-- tostring of each entry.
local function label_list(fn, key, v)
  if v == nil then return nil end
  local out = {}
  if type(v) == "string" then
    local ok = pcall(function()
      for _, c in utf8.codes(v) do out[#out + 1] = utf8.char(c) end
    end)
    if not ok then -- not UTF-8: one label per byte
      out = {}
      for i = 1, #v do out[i] = v:sub(i, i) end
    end
    return out
  end
  if type(v) ~= "table" then
    error(("%s: option '%s' must be a list of labels or a string (got %s)"):format(fn, key, type(v)), 3)
  end
  for i = 1, #v do out[i] = tostring(v[i]) end
  return out
end

--- Heatmap of a matrix; returns path, layout.
-- @usage
-- local plot = require "attn.plot"
-- local weights = attn.randn(4, 4):softmax(-1)
-- local path = plot.heatmap(weights, {path = os.tmpname() .. ".png", row_labels = {"a", "b", "c", "d"},
--   col_labels = {"a", "b", "c", "d"}, annotate = "%.2f", title = "attention"})
-- os.remove(path)
function plot.heatmap(m, opts)
  opts = options("heatmap", opts)
  opts.row_labels = label_list("heatmap", "row_labels", opts.row_labels)
  opts.col_labels = label_list("heatmap", "col_labels", opts.col_labels)
  local path, layout = call("heatmap", C.heatmap, m, opts)
  return path, layout
end

--- Histogram of values; returns path, layout (with counts and edges).
-- @usage
-- local plot = require "attn.plot"
-- local path, layout = plot.histogram(attn.randn(1000), {path = os.tmpname() .. ".png", bins = 30, density = true})
-- print(#layout.counts, #layout.edges)                -- 30 31
-- os.remove(path)
function plot.histogram(values, opts)
  opts = options("histogram", opts)
  if is_tensor(opts.bins) then opts.bins = opts.bins:reshape(-1):totable() end
  local path, layout = call("histogram", C.histogram, values, opts)
  return path, layout
end

-- A series given as a bare list of numbers or a tensor.
local function is_values(v)
  return is_tensor(v) or (type(v) == "table" and type(v[1]) == "number")
end

--- Line plot of one or more series; returns path, layout.
-- @usage
-- local plot = require "attn.plot"
-- local path = plot.lines({{name = "train", x = {1, 2, 3}, y = {2.0, 1.2, 0.9}},
--   {name = "valid", x = {1, 2, 3}, y = {2.1, 1.5, 1.3}}}, {path = os.tmpname() .. ".png", ylabel = "loss"})
-- os.remove(path)
function plot.lines(series, opts)
  opts = options("lines", opts)
  if is_values(series) or (type(series) == "table" and series.y ~= nil) then series = {series} end
  if type(series) ~= "table" then
    error(("lines: expected a list of series {y = ..., x = ..., label = ...} (got %s)"):format(type(series)), 2)
  end
  local list = {}
  for i = 1, #series do
    local s = series[i]
    list[i] = is_values(s) and {y = s} or s
  end
  local path, layout = call("lines", C.lines, list, opts)
  return path, layout
end

--- The colour of map `name` at t in [0, 1] (clamped): r, g, b in [0, 1].
-- @usage
-- local plot = require "attn.plot"
-- local r, g, b = plot.colormap("viridis", 0.5)          -- the colour at 0.5
-- print(r, g, b)                                      -- about 0.128 0.565 0.551, in [0, 1]
function plot.colormap(name, t) return C.colormap(name, t) end

--- The names of the colour maps.
-- @usage
-- local plot = require "attn.plot"
-- print(table.concat(plot.colormaps(), " "))
function plot.colormaps() return C.colormaps() end

--- For tests: reads a PNG back with cairo.  _pixel_stats(path [, x, y
-- [, w, h]]) -> {width, height, colors (distinct), nonwhite (pixels),
-- pixels, lightest, darkest ({r, g, b, a}, by luminance), pixel = {r, g,
-- b, a} at (x, y)}; coordinates as in the layouts; with w, h the counts
-- cover that region only.
plot._pixel_stats = C.pixel_stats

--- For tests: compares two PNGs of the same size with cairo.
-- _png_diff(a, b) -> {width, height, mean_abs (the mean absolute channel
-- difference, 0..255, over r, g, b, a), differing (the fraction of pixels
-- whose largest channel difference exceeds 32)}; screenshots compared
-- within a tolerance (spec/viz_html_spec.lua).
plot._png_diff = C.png_diff

-- functions without optional arguments (attn/signature.lua)
require("attn.signature").declare(plot, "plot.", {colormap = false, colormaps = false})
-- the plots' options are keywords of their own (path is required; a string
-- is the path alone); they read them from their options table
local COMMON = "*, path=nil, title=nil, xlabel=nil, ylabel=nil, width=nil, height=nil"
require("attn.signature").declare(plot, "plot.", {
  heatmap = "native: m, /, " .. COMMON .. ", row_labels=nil, col_labels=nil, cmap=nil, colorbar=nil, annotate=nil, "
    .. "vmin=nil, vmax=nil",
  histogram = "native: values, /, " .. COMMON .. ", bins=nil, range=nil, density=nil",
  lines = "native: series, /, " .. COMMON .. ", logy=nil",
})

return plot
