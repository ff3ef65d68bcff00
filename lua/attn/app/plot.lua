-- SPDX-License-Identifier: MIT

--- attn.plot: heatmaps, histograms and line plots, drawn in C with cairo.
--
--   local plot = require "attn".plot      -- or require "attn.plot"
--   plot.heatmap(m, {path = "attn.png", row_labels = "^abhishek$",
--                    col_labels = "^abhishek$", cmap = "viridis"})
--   plot.histogram(lengths, {path = "lengths.png", bins = edges})
--   plot.lines({{y = train, label = "train"}, {y = valid, label = "valid"}},
--              {path = "loss.png", xlabel = "epoch", logy = true})
--   plot.attention_grid(maps, {path = "heads.png", tokens = words})  -- layers x heads
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

-- attention_grid: the options it takes (no width or height: the size
-- follows from cell).
local grid_keys = {path = true, title = true, xlabel = true, ylabel = true, tokens = true, source_tokens = true,
                   layers = true, heads = true, layer_names = true, batch = true, cmap = true, colorbar = true,
                   vmin = true, vmax = true, cell = true}

local function shape_of(t) return "[" .. table.concat(t:shape(), ", ") .. "]" end

-- The layers of maps as [H, L, S] tensors (batch picked), all one shape.
local function grid_layers(fn, maps, batch)
  local layers = {}
  if is_tensor(maps) then
    local d = maps:dim()
    if d == 3 then
      layers[1] = maps
    elseif d == 4 then
      for i = 1, maps:shape()[1] do layers[i] = maps:select(1, i) end
    else
      error(("%s: maps must be a [layers, H, L, S] tensor, one layer's [H, L, S], or a list of [H, L, S] or "
        .. "[B, H, L, S] tensors (got a %d-d tensor %s)"):format(fn, d, shape_of(maps)), 3)
    end
    if batch ~= 1 then
      error(("%s: option 'batch' picks a sample of a list of [B, H, L, S] maps; a single tensor %s is one "
        .. "sample ([layers, H, L, S] or [H, L, S]): leave batch out"):format(fn, shape_of(maps)), 3)
    end
    if #layers == 0 then error(("%s: maps %s has no layer"):format(fn, shape_of(maps)), 3) end
    return layers
  end
  if type(maps) ~= "table" then
    error(("%s: maps must be a list of [H, L, S] or [B, H, L, S] tensors, one per layer, or a [layers, H, L, S] "
      .. "tensor (got %s)"):format(fn, type(maps)), 3)
  end
  local n = rawlen(maps) -- a list, read raw (a module or other object is no list)
  if n == 0 then
    error(("%s: maps is an empty list (expected one [H, L, S] or [B, H, L, S] tensor per layer)"):format(fn), 3)
  end
  for i = 1, n do
    local m = rawget(maps, i)
    if not is_tensor(m) then
      error(("%s: maps[%d] must be a [H, L, S] or [B, H, L, S] tensor (got %s)"):format(fn, i, type(m)), 3)
    end
    local d = m:dim()
    if d == 4 then
      local b = m:shape()[1]
      if batch > b then
        error(("%s: option 'batch' is %d but maps[%d] is %s: batch must be 1 to %d"):format(fn, batch, i,
          shape_of(m), b), 3)
      end
      layers[i] = m:select(1, batch)
    elseif d == 3 then
      layers[i] = m
    else
      error(("%s: maps[%d] must be [H, L, S] or [B, H, L, S] (got %s)"):format(fn, i, shape_of(m)), 3)
    end
    if i > 1 and shape_of(layers[i]) ~= shape_of(layers[1]) then
      error(("%s: maps[%d] is %s but maps[1] is %s: every layer needs the same heads, queries and keys")
        :format(fn, i, shape_of(m), shape_of(rawget(maps, 1))), 3)
    end
  end
  return layers
end

-- opts[key]: nil (1 .. n) or a non-empty list of 1-based indices up to n.
local function grid_selection(fn, key, v, n, what)
  local out = {}
  if v == nil then
    for i = 1, n do out[i] = i end
    return out
  end
  if is_tensor(v) then v = v:reshape(-1):totable() end
  if type(v) ~= "table" or #v == 0 then
    error(("%s: option '%s' must be a non-empty list of %s numbers, 1 to %d (got %s)"):format(fn, key, what, n,
      type(v) == "table" and "an empty list" or type(v)), 3)
  end
  for i = 1, #v do
    local k = type(v[i]) == "number" and math.tointeger(v[i]) or nil
    if k == nil or k < 1 or k > n then
      error(("%s: option '%s': entry %d is %s, not a %s number 1 to %d (the maps have %d %ss)"):format(fn, key, i,
        tostring(v[i]), what, n, n, what), 3)
    end
    out[i] = k
  end
  return out
end

--- A static grid of attention maps: rows are layers, columns heads, each
-- cell a small heatmap of one head's [L, S] map (queries down, keys
-- across); returns path, layout.
--
-- maps: a list with one [H, L, S] or [B, H, L, S] tensor per layer (first
-- layer first; all of one shape), or a single tensor [layers, H, L, S]
-- (or one layer's [H, L, S]).  Options (path required, as for the other
-- plots; a string is the path): batch (1-based sample of [B, H, L, S]
-- maps, default 1); layers, heads (lists of 1-based indices to show,
-- default all, in the order given); layer_names (one name per layer of
-- maps, default "layer 1", ...); tokens (query labels, drawn left of the
-- first column's maps) and source_tokens (key labels, below the last
-- row's maps; default tokens when L == S, else none), left out when a
-- map entry is too small for a 6-unit font; title, xlabel, ylabel; cmap
-- (as heatmap's); colorbar (default true); vmin / vmax (one scale for
-- all maps; default 0, or the data minimum when below 0, to the data
-- maximum); cell (the side of one map entry in pixels for PNG, points
-- for SVG/PDF, 0.1 to 64; default: the longer side of a map about 160,
-- less when there are more than 12 rows or columns of maps (a row of maps
-- and a column share 1920), in whole units from 1 to 32, so a 12 x 12
-- grid of 64-token maps is 2 per entry, about 1,800 pixels wide).
--
-- The layout has, besides the common fields (area: the maps' bounding
-- box): cells (one {x, y, w, h} per map, row-major: layer by layer, its
-- heads left to right), colorbar = {x, y, w, h}, rows, cols, vmin, vmax,
-- cell, layers and heads (the indices shown), query_labels, key_labels
-- (whether the tokens were drawn) and rotated_key_labels.
-- @usage
-- local plot = require "attn.plot"
-- local maps = {}
-- for l = 1, 2 do maps[l] = attn.randn(3, 5, 5):softmax(-1) end   -- 2 layers of [H = 3, L = 5, S = 5]
-- local path, layout = plot.attention_grid(maps, {path = os.tmpname() .. ".png",
--   tokens = {"the", "cat", "sat", "on", "it"}, title = "attention"})
-- print(#layout.cells, layout.cell)                     -- 6 32
-- os.remove(path)
function plot.attention_grid(maps, opts)
  local fn = "attention_grid"
  if type(opts) == "string" then opts = {path = opts} end
  if type(opts) ~= "table" then
    error(("%s: expected an options table with path = \"file.png\" (got %s)"):format(fn, type(opts)), 2)
  end
  for k in pairs(opts) do
    if k == "width" or k == "height" then
      error(("%s: option '%s' is not taken: the figure's size follows from cell (the side of one map entry)")
        :format(fn, k), 2)
    end
    if not grid_keys[k] then error(require("attn.base")._misuse.unknown_option(fn, k, grid_keys), 2) end
  end
  local batch = opts.batch
  if batch == nil then
    batch = 1
  elseif type(batch) ~= "number" or math.tointeger(batch) == nil then
    error(("%s: option 'batch' must be a whole number, 1-based (got %s)"):format(fn, tostring(batch)), 2)
  else
    batch = math.tointeger(batch)
    if batch < 1 then error(("%s: option 'batch' must be 1 or more (got %d)"):format(fn, batch), 2) end
  end
  local layers = grid_layers(fn, maps, batch)
  local h, l, s = layers[1]:shape()[1], layers[1]:shape()[2], layers[1]:shape()[3]
  local shown_layers = grid_selection(fn, "layers", opts.layers, #layers, "layer")
  local shown_heads = grid_selection(fn, "heads", opts.heads, h, "head")

  local names = label_list(fn, "layer_names", opts.layer_names)
  if names and #names ~= #layers then
    error(("%s: option 'layer_names' has %d names for %d layers (it names every layer of maps; 'layers' picks "
      .. "those shown)"):format(fn, #names, #layers), 2)
  end
  local tokens = label_list(fn, "tokens", opts.tokens)
  if tokens and #tokens ~= l then
    error(("%s: option 'tokens' has %d labels for %d queries (each layer's maps are [%d, %d, %d], [H, L, S])")
      :format(fn, #tokens, l, h, l, s), 2)
  end
  local source_tokens = label_list(fn, "source_tokens", opts.source_tokens)
  if source_tokens == nil and l == s then source_tokens = tokens end
  if source_tokens and #source_tokens ~= s then
    error(("%s: option 'source_tokens' has %d labels for %d keys (each layer's maps are [%d, %d, %d], [H, L, S])")
      :format(fn, #source_tokens, s, h, l, s), 2)
  end

  local rows, row_labels, col_labels = {}, {}, {}
  for i, k in ipairs(shown_layers) do
    rows[i] = layers[k]:detach():index_select(1, shown_heads)
    row_labels[i] = names and names[k] or ("layer " .. k)
  end
  for j, k in ipairs(shown_heads) do col_labels[j] = "head " .. k end
  local copts = {path = opts.path, title = opts.title, xlabel = opts.xlabel, ylabel = opts.ylabel, cmap = opts.cmap,
                 colorbar = opts.colorbar, vmin = opts.vmin, vmax = opts.vmax, cell = opts.cell,
                 row_labels = row_labels, col_labels = col_labels, tokens = tokens, source_tokens = source_tokens}
  local path, layout = call(fn, C.attention_grid, core.stack(rows, 1), copts)
  layout.layers, layout.heads = shown_layers, shown_heads
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
  attention_grid = "native: maps, /, *, path=nil, title=nil, xlabel=nil, ylabel=nil, tokens=nil, source_tokens=nil, "
    .. "layers=nil, heads=nil, layer_names=nil, batch=nil, cmap=nil, colorbar=nil, vmin=nil, vmax=nil, cell=nil",
})

return plot
