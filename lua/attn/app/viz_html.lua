-- SPDX-License-Identifier: MIT

--- attn.app.viz_html: interactive views of attention maps, each one
-- self-contained HTML file (the page's script and style are inline: no
-- network, no library; it opens from disk in Chromium and Firefox).
--
--   head_view(maps, opts)     tokens on both sides, lines weighted by
--                             attention, a layer selector, heads toggled
--                             by their colour squares; hovering a token
--                             isolates its lines (like bertviz's head view)
--   model_view(maps, opts)    the layers x heads grid as thumbnails;
--                             clicking one opens it large, with tokens
--   neuron_view(data, opts)   one head's query and key vectors, their
--                             elementwise products for a chosen query
--                             token, the scores q.k/sqrt(D) and softmax
--
-- maps is a list of layers, each a [B, H, L, S] (or [H, L, S]) float
-- tensor of attention weights: L queries, S keys (the data contract of
-- issue 32; attn.viz's capture produces it).  Options: path (required;
-- the file written, returned), tokens (the L query tokens; default 1, 2,
-- ...), source_tokens (the S keys' tokens; default tokens: different
-- ones give cross attention), batch (1-based, default 1), layer (shown
-- first, default 1), heads (shown first, default all), title,
-- layer_names.
--
-- The weights travel as bytes (0..255, one per weight, base64; a weight
-- is shown to within 1/510): a 12-layer, 12-head, 64-token BERT map set
-- gives a file of about 0.8 MB.  The neuron view's q and k keep 4
-- significant digits.
-- The page reads its initial state from the URL's fragment, e.g.
-- view.html#layer=2&heads=1,3&token=4 (model view: open=2,3; neuron view:
-- token=2), and #selftest makes it click through its own controls with
-- real DOM events and write what it saw as JSON into <pre id="selftest">
-- (spec/viz_html_spec.lua reads it with headless Chromium's --dump-dom).
-- @module attn.app.viz_html
local core = require "attn.core"
local error = core._error -- raises at the user's line (the first caller outside attn)
local is_tensor = core.is_tensor

local M = {}

---------------------------------------------------------------------------
-- Checking the arguments
---------------------------------------------------------------------------

local function shape_of(t) return "[" .. table.concat({t:size()}, ", ") .. "]" end

local COMMON = {path = true, tokens = true, source_tokens = true, batch = true, layer = true, heads = true,
                title = true, layer_names = true}
local VALID = {head_view = COMMON, model_view = COMMON,
               neuron_view = {path = true, tokens = true, source_tokens = true, batch = true, layer = true,
                              head = true, token = true, title = true}}

-- A copy of opts with every key checked; path is required.
local function options(fn, opts)
  if type(opts) ~= "table" or is_tensor(opts) then
    error(("%s: expected an options table with path = \"view.html\" (got %s)"):format(fn,
      is_tensor(opts) and "a tensor" or type(opts)), 3)
  end
  local out = {}
  for k, v in pairs(opts) do
    if not VALID[fn][k] then
      error(require("attn.base")._misuse.unknown_option(fn, k, VALID[fn]), 3)
    end
    out[k] = v
  end
  if type(out.path) ~= "string" or out.path == "" then
    error(("%s: option 'path' must name the HTML file to write, e.g. path = \"view.html\" (got %s)"):format(fn,
      out.path == "" and "an empty string" or type(out.path)), 3)
  end
  if out.path:find("\0", 1, true) then error(("%s: option 'path' holds a NUL byte"):format(fn), 3) end
  if out.title ~= nil and type(out.title) ~= "string" then
    error(("%s: option 'title' must be a string (got %s)"):format(fn, type(out.title)), 3)
  end
  return out
end

-- An integer option in 1..hi (default def).
local function index_option(fn, opts, key, hi, what, def)
  local v = opts[key]
  if v == nil then return def end
  if math.type(v) == "float" and v == math.floor(v) and v >= -2 ^ 53 and v <= 2 ^ 53 then v = math.tointeger(v) end
  if math.type(v) ~= "integer" then
    error(("%s: option '%s' must be an integer from 1 to %d (got %s)"):format(fn, key, hi,
      type(v) == "number" and tostring(v) or type(v)), 3)
  end
  if v < 1 or v > hi then
    error(("%s: option '%s' is %d: it must be from 1 to %d (the number of %s)"):format(fn, key, v, hi, what), 3)
  end
  return v
end

-- A list of n labels (strings or numbers) or the default.
local function label_option(fn, opts, key, n, what, default)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= "table" or is_tensor(v) then
    error(("%s: option '%s' must be a list of %d strings, one per %s (got %s)"):format(fn, key, n, what,
      is_tensor(v) and "a tensor" or type(v)), 3)
  end
  if #v ~= n then
    error(("%s: option '%s' has %d entries but there are %d %ss"):format(fn, key, #v, n, what), 3)
  end
  local out = {}
  for i = 1, n do
    local s = v[i]
    if type(s) == "number" then s = tostring(s) end
    if type(s) ~= "string" then
      error(("%s: option '%s': entry %d must be a string (got %s)"):format(fn, key, i, type(s)), 3)
    end
    out[i] = s
  end
  return out
end

local function numbered(n)
  local out = {}
  for i = 1, n do out[i] = tostring(i) end
  return out
end

-- maps checked against the contract -> {maps, layers, B, H, L, S}.
local function check_maps(fn, maps, key)
  key = key or "maps"
  if is_tensor(maps) or type(maps) ~= "table" then
    error(("%s: %s must be a list of [B, H, L, S] or [H, L, S] tensors, one per layer (got %s)"):format(fn, key,
      is_tensor(maps) and "a tensor: wrap it in a list, {map}" or type(maps)), 3)
  end
  if #maps == 0 then error(("%s: %s is an empty list (expected one tensor per layer)"):format(fn, key), 3) end
  local first
  for i = 1, #maps do
    local m = maps[i]
    if not is_tensor(m) then
      error(("%s: %s[%d] must be a [B, H, L, S] or [H, L, S] tensor (got %s)"):format(fn, key, i, type(m)), 3)
    end
    if not m:is_floating_point() then
      error(("%s: %s[%d] must be a floating-point tensor (got %s)"):format(fn, key, i, tostring(m.dtype)), 3)
    end
    local d = m:dim()
    if d ~= 3 and d ~= 4 then
      error(("%s: %s[%d] is %s: expected [B, H, L, S] or [H, L, S]"):format(fn, key, i, shape_of(m)), 3)
    end
    local s = {m:size()}
    if d == 3 then table.insert(s, 1, 1) end
    if first == nil then
      first = s
      for k = 1, 4 do
        if s[k] == 0 then
          error(("%s: %s[%d] is %s: every dimension must be at least 1"):format(fn, key, i, shape_of(m)), 3)
        end
      end
    elseif s[1] ~= first[1] or s[2] ~= first[2] or s[3] ~= first[3] or s[4] ~= first[4] then
      error(("%s: %s[%d] is %s but %s[1] is %s (every layer must have the same shape)"):format(fn, key, i,
        shape_of(m), key, shape_of(maps[1])), 3)
    end
  end
  return {maps = maps, layers = #maps, B = first[1], H = first[2], L = first[3], S = first[4]}
end

-- The tokens of both sides (cross attention: source_tokens differ).
local function tokens_of(fn, opts, L, S)
  local tokens = label_option(fn, opts, "tokens", L, "query", nil)
  local source = opts.source_tokens
  if source == nil then
    if tokens and L == S then return tokens, tokens end
    if not tokens then return numbered(L), numbered(S) end
    error(("%s: there are %d keys but %d query tokens: give source_tokens (the keys' tokens) for cross "
      .. "attention"):format(fn, S, L), 3)
  end
  return tokens or numbered(L), label_option(fn, opts, "source_tokens", S, "key", nil)
end

---------------------------------------------------------------------------
-- Writing the page
---------------------------------------------------------------------------

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local B64C = {}
for i = 1, 64 do B64C[i - 1] = B64:sub(i, i) end

-- bytes (a list of integers 0..255) as base64.
local function base64(bytes)
  local out, n = {}, #bytes
  for i = 1, n, 3 do
    local a, b, c = bytes[i], bytes[i + 1], bytes[i + 2]
    local v = a * 65536 + (b or 0) * 256 + (c or 0)
    out[#out + 1] = B64C[v >> 18] .. B64C[(v >> 12) & 63] .. (b and B64C[(v >> 6) & 63] or "=")
      .. (c and B64C[v & 63] or "=")
  end
  return table.concat(out)
end

-- Valid UTF-8 (each invalid byte becomes U+FFFD).
local function utf8_clean(s)
  if utf8.len(s) then return s end
  local out, i = {}, 1
  while i <= #s do
    local c = s:match("^[%z\1-\127\194-\244][\128-\191]*", i)
    if c and utf8.len(c) == 1 then
      out[#out + 1] = c
      i = i + #c
    else
      out[#out + 1] = "\239\191\189"
      i = i + 1
    end
  end
  return table.concat(out)
end

local JSON_ESCAPES = {['"'] = '\\"', ["\\"] = "\\\\", ["<"] = "\\u003c", [">"] = "\\u003e", ["&"] = "\\u0026",
                      ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t"}

-- A JSON string that is also safe inside <script>: no '<', '>' or '&',
-- no U+2028/2029 (line ends to older JavaScript).
local function json_string(s)
  s = utf8_clean(s):gsub('[%c"\\<>&]', function(c)
    return JSON_ESCAPES[c] or ("\\u%04x"):format(c:byte())
  end)
  s = s:gsub("\226\128\168", "\\u2028"):gsub("\226\128\169", "\\u2029")
  return '"' .. s .. '"'
end

-- JSON of the page's data: strings, numbers, booleans, lists (a table
-- with [1] or the marker LIST) and objects (sorted keys).
local LIST = {}
local function json(v)
  local t = type(v)
  if t == "string" then return json_string(v) end
  if t == "boolean" then return tostring(v) end
  if t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then return "null" end
    if math.type(v) == "integer" then return tostring(v) end
    return ("%.4g"):format(v)
  end
  if t == "nil" then return "null" end
  if v[1] ~= nil or v[LIST] then
    local out = {}
    for i = 1, #v do out[i] = json(v[i]) end
    return "[" .. table.concat(out, ",") .. "]"
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do out[#out + 1] = json_string(k) .. ":" .. json(v[k]) end
  return "{" .. table.concat(out, ",") .. "}"
end

local function html_escape(s)
  return (utf8_clean(s):gsub("[&<>\"']", {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;",
                                         ["'"] = "&#39;"}))
end

-- The [H, L, S] slice of batch b of a map, its values as a flat list.
local function values_of(m, b)
  if m:dim() == 4 then m = m[b] end
  return m:contiguous():reshape(-1):tolist()
end

-- Every layer's weights (batch b) as bytes 0..255 (NaN 0, clamped), base64.
local function quantized(info, b)
  local bytes, n = {}, 0
  local floor = math.floor
  for l = 1, info.layers do
    local v = values_of(info.maps[l], b)
    for i = 1, #v do
      local x = v[i]
      local q = (x == x) and floor(x * 255 + 0.5) or 0
      n = n + 1
      bytes[n] = q < 0 and 0 or (q > 255 and 255 or q)
    end
  end
  return base64(bytes)
end

-- The file written atomically (a temporary name, then renamed).
local function write_file(fn, path, text)
  if not (io and os and os.rename) then
    error(("%s: writing files is not available in a sandbox (no io library)"):format(fn), 3)
  end
  local tmp = path .. ".tmp"
  local f, err = io.open(tmp, "wb")
  if not f then error(("%s: cannot write '%s': %s"):format(fn, path, err), 3) end
  local ok, werr = f:write(text)
  f:close()
  if not ok then
    os.remove(tmp)
    error(("%s: cannot write '%s': %s"):format(fn, path, werr), 3)
  end
  local rok, rerr = os.rename(tmp, path)
  if not rok then
    os.remove(tmp)
    error(("%s: cannot write '%s': %s"):format(fn, path, rerr), 3)
  end
  return path
end

local CSS = [==[
body { font-family: "DejaVu Sans", sans-serif; font-size: 13px; color: #222; background: #fff; margin: 12px; }
h1 { font-size: 16px; font-weight: bold; margin: 0 0 8px 0; }
.controls { margin-bottom: 8px; }
.controls select { font-family: inherit; font-size: 13px; }
.note { color: #666; font-size: 11px; margin-top: 4px; }
.head-squares { display: inline-block; margin-left: 12px; vertical-align: middle; }
.head-square { display: inline-block; width: 14px; height: 14px; margin-right: 3px; cursor: pointer;
  border: 1px solid #fff; vertical-align: middle; }
.head-square.off { opacity: 0.2; }
.pane { position: relative; }
.token { position: absolute; height: 20px; line-height: 20px; white-space: pre; overflow: hidden;
  text-overflow: ellipsis; cursor: pointer; padding: 0 4px; box-sizing: border-box; }
.token.query { text-align: right; }
.token.key { text-align: left; }
.token.active { background: #e8e8e8; font-weight: bold; }
.token.selected { background: #ffe9a8; }
canvas.lines { position: absolute; }
table.grid { border-collapse: collapse; }
table.grid td, table.grid th { padding: 2px; font-weight: normal; font-size: 11px; text-align: center; }
table.grid th.row { text-align: right; padding-right: 6px; white-space: nowrap; }
canvas.thumb { width: 56px; height: 56px; border: 1px solid #ccc; cursor: pointer; image-rendering: pixelated;
  display: block; }
#overlay { position: fixed; left: 0; top: 0; right: 0; bottom: 0; background: rgba(0, 0, 0, 0.35);
  display: none; overflow: auto; }
#overlay.open { display: block; }
#overlay .panel { background: #fff; margin: 24px auto; padding: 12px; width: 600px; border-radius: 4px; }
#overlay .close { float: right; cursor: pointer; font-size: 16px; padding: 0 6px; }
.neuron { display: flex; align-items: flex-start; }
.neuron .queries { position: relative; width: 150px; margin-right: 12px; }
.neuron .colhead { color: #555; font-size: 12px; text-align: right; padding: 0 4px; line-height: 20px; }
table.vectors { border-collapse: collapse; }
table.vectors td, table.vectors th { padding: 1px 4px; font-size: 12px; white-space: pre; height: 18px; }
table.vectors th { font-weight: normal; color: #555; text-align: left; }
table.vectors td.num { text-align: right; font-family: "DejaVu Sans Mono", monospace; }
table.vectors tr.qrow td { border-bottom: 1px solid #ccc; }
.bar { display: inline-block; height: 10px; background: #4a7ab5; vertical-align: middle; margin-right: 4px; }
pre#selftest { font-size: 10px; white-space: pre-wrap; }
]==]

-- The page's script.  One script serves the three views: DATA.view says
-- which to build.  Plain DOM and canvas, no library.
local JS = [==[
"use strict";
(function () {
  var DATA = JSON.parse(document.getElementById("attn-data").textContent);
  var ROW = 20;          // pixels per token row
  var TOKEN_W = 130;     // width of a token column
  var LINES_W = 220;     // width of the lines between the columns
  var LINE_WIDTH = 2;    // of a line, in pixels

  // One colour per head: Tableau's ten, then evenly spread hues.
  var PALETTE = [[31, 119, 180], [255, 127, 14], [44, 160, 44], [214, 39, 40], [148, 103, 189],
                 [140, 86, 75], [227, 119, 194], [127, 127, 127], [188, 189, 34], [23, 190, 207]];
  function hslToRgb(h, s, l) {
    function f(n) {
      var k = (n + h / 30) % 12, a = s * Math.min(l, 1 - l);
      return Math.round(255 * (l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1))));
    }
    return [f(0), f(8), f(4)];
  }
  function headRgb(h) { return h < PALETTE.length ? PALETTE[h] : hslToRgb((h * 137.508) % 360, 0.6, 0.45); }
  function headCss(h) { return "rgb(" + headRgb(h).join(",") + ")"; }

  function el(tag, className, parent, text) {
    var e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  // The URL fragment: #layer=2&heads=1,3&token=4 -> {layer: "2", ...}.
  function parseHash() {
    var out = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      if (!kv) return;
      var i = kv.indexOf("=");
      if (i < 0) out[decodeURIComponent(kv)] = true;
      else out[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1));
    });
    return out;
  }
  // "2" -> 1 (0-based) when in 1..n, else fallback.
  function hashIndex(v, n, fallback) {
    var i = parseInt(v, 10);
    return i >= 1 && i <= n ? i - 1 : fallback;
  }

  // The weights: bytes [layer][head][query][key], 0..255 for 0..1.
  var W = null;
  if (DATA.weights) {
    var raw = atob(DATA.weights);
    W = new Uint8Array(raw.length);
    for (var n = 0; n < raw.length; n++) W[n] = raw.charCodeAt(n);
  }
  function weight(layer, head, i, j) {
    return W[((layer * DATA.heads + head) * DATA.L + i) * DATA.S + j] / 255;
  }

  // Pixels a canvas has drawn on (alpha > 0): what a user would see.
  function ink(canvas) {
    var d = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data, count = 0;
    for (var p = 3; p < d.length; p += 4) if (d[p] > 0) count++;
    return count;
  }

  // Antialiased lines drawn into a premultiplied RGBA buffer, then put on
  // a canvas.  The canvas's own strokes took 2.2 s to rasterise for a
  // BERT-size head view (46,000 lines) in headless Chromium without a GPU;
  // this takes 0.8 s there and gives the same pixels on every machine.
  function LineRaster(canvas) {
    this.canvas = canvas;
    this.w = canvas.width;
    this.h = canvas.height;
    this.buf = new Float32Array(this.w * this.h * 4);
  }
  LineRaster.prototype.clear = function () { this.buf.fill(0); };
  // A line LINE_WIDTH pixels wide from (x0, y0) to (x1, y1) in colour rgb
  // (0..255) with opacity alpha: along its major axis, each step covers
  // the pixels of the minor axis that the line's band overlaps, each by
  // the length of the overlap (the band widened by 1/cos of the slope).
  LineRaster.prototype.line = function (x0, y0, x1, y1, rgb, alpha) {
    var steep = Math.abs(y1 - y0) > Math.abs(x1 - x0), t;
    if (steep) { t = x0; x0 = y0; y0 = t; t = x1; x1 = y1; y1 = t; }
    if (x0 > x1) { t = x0; x0 = x1; x1 = t; t = y0; y0 = y1; y1 = t; }
    var g = x1 > x0 ? (y1 - y0) / (x1 - x0) : 0, half = LINE_WIDTH / 2 * Math.sqrt(1 + g * g);
    var major = steep ? this.h : this.w, minor = steep ? this.w : this.h;
    var buf = this.buf, w = this.w, r = rgb[0], gr = rgb[1], b = rgb[2];
    var start = Math.max(0, Math.floor(x0)), end = Math.min(major - 1, Math.ceil(x1) - 1);
    // p moves by step along the major axis and by across along the minor one
    var step = steep ? 4 * w : 4, across = steep ? 4 : 4 * w;
    function blend(p, a) {
      var k = 1 - a;
      buf[p] = r * a + buf[p] * k;
      buf[p + 1] = gr * a + buf[p + 1] * k;
      buf[p + 2] = b * a + buf[p + 2] * k;
      buf[p + 3] = a + buf[p + 3] * k;
    }
    for (var x = start; x <= end; x++) {
      var y = y0 + g * (x + 0.5 - x0), lo = y - half, hi = y + half;
      if (lo < 0) lo = 0;
      if (hi > minor) hi = minor;
      if (hi <= lo) continue; // off the canvas
      var first = Math.floor(lo), last = Math.ceil(hi) - 1, p = x * step + first * across;
      if (first === last) { // the band inside one pixel
        blend(p, alpha * (hi - lo));
        continue;
      }
      blend(p, alpha * (first + 1 - lo)); // partly covered ends, fully covered pixels between
      for (var row = first + 1; row < last; row++) blend(p += across, alpha);
      blend(p + across, alpha * (hi - last));
    }
  };
  // The buffer onto the canvas (ImageData is not premultiplied).
  LineRaster.prototype.show = function () {
    var ctx = this.canvas.getContext("2d"), img = ctx.createImageData(this.w, this.h), d = img.data, buf = this.buf;
    for (var p = 0; p < buf.length; p += 4) {
      var a = buf[p + 3];
      if (a <= 0) continue;
      d[p] = Math.round(buf[p] / a);
      d[p + 1] = Math.round(buf[p + 1] / a);
      d[p + 2] = Math.round(buf[p + 2] / a);
      d[p + 3] = Math.round(255 * a);
    }
    ctx.putImageData(img, 0, 0);
  };

  // A pane of query tokens (left), key tokens (right) and the lines of
  // the shown heads between them; hovering a token isolates its lines.
  function LinePane(parent) {
    var self = this;
    this.layer = 0;
    this.shown = [];
    this.hover = null; // {side: "query" | "key", index}
    this.pinned = null;
    var rows = Math.max(DATA.L, DATA.S);
    this.root = el("div", "pane", parent);
    this.root.style.height = rows * ROW + "px";
    this.root.style.width = 2 * TOKEN_W + LINES_W + "px";
    this.queries = DATA.tokens.map(function (t, i) { return self.token("query", t, i, 0); });
    this.keys = DATA.source_tokens.map(function (t, j) { return self.token("key", t, j, TOKEN_W + LINES_W); });
    this.canvas = el("canvas", "lines", this.root);
    this.canvas.width = LINES_W;
    this.canvas.height = rows * ROW;
    this.canvas.style.left = TOKEN_W + "px";
    this.canvas.style.top = "0px";
    this.raster = new LineRaster(this.canvas);
    this.stats = {lines: 0, checksum: 0};
  }
  LinePane.prototype.token = function (side, text, index, left) {
    var self = this, t = el("div", "token " + side, this.root, text);
    t.title = text;
    t.style.left = left + "px";
    t.style.top = index * ROW + "px";
    t.style.width = TOKEN_W + "px";
    t.dataset.index = index;
    t.addEventListener("mouseenter", function () { self.hover = {side: side, index: index}; self.draw(); });
    t.addEventListener("mouseleave", function () { self.hover = null; self.draw(); });
    t.addEventListener("click", function () { // pins the token's lines (a second click frees them)
      var pinned = self.pinned && self.pinned.side === side && self.pinned.index === index;
      self.pinned = pinned ? null : {side: side, index: index};
      self.draw();
    });
    return t;
  };
  LinePane.prototype.draw = function () {
    var focus = this.hover || this.pinned, raster = this.raster;
    var lines = 0, checksum = 0, start = performance.now();
    raster.clear();
    for (var s = 0; s < this.shown.length; s++) {
      var h = this.shown[s], rgb = headRgb(h);
      for (var i = 0; i < DATA.L; i++) {
        if (focus && focus.side === "query" && focus.index !== i) continue;
        for (var j = 0; j < DATA.S; j++) {
          if (focus && focus.side === "key" && focus.index !== j) continue;
          var w = weight(this.layer, h, i, j);
          if (w <= 0) continue;
          raster.line(0, i * ROW + ROW / 2, LINES_W, j * ROW + ROW / 2, rgb, w);
          lines++;
          checksum = (checksum + w * (1 + i * DATA.S + j) * (1 + h)) % 1e9;
        }
      }
    }
    raster.show();
    [["query", this.queries], ["key", this.keys]].forEach(function (pair) {
      pair[1].forEach(function (t, k) {
        t.classList.toggle("active", !!focus && focus.side === pair[0] && focus.index === k);
      });
    });
    this.stats = {lines: lines, checksum: Math.round(checksum * 1000) / 1000,
                  ms: Math.round((performance.now() - start) * 10) / 10};
  };

  function layerName(l) { return DATA.layer_names ? DATA.layer_names[l] : "Layer " + (l + 1); }

  // ==== head view ====
  function headView(root, hash) {
    var state = {layer: hashIndex(hash.layer, DATA.layers, DATA.layer - 1), on: []};
    var initial = hash.heads ? String(hash.heads).split(",").map(function (v) { return hashIndex(v, DATA.heads, -1); })
                             : DATA.initial_heads.map(function (h) { return h - 1; });
    for (var h = 0; h < DATA.heads; h++) state.on[h] = initial.indexOf(h) >= 0;
    var controls = el("div", "controls", root);
    el("label", "", controls, "Layer: ");
    var select = el("select", "", controls);
    select.id = "layer-select";
    for (var l = 0; l < DATA.layers; l++) {
      var o = el("option", "", select, layerName(l));
      o.value = String(l);
    }
    select.value = String(state.layer);
    var squares = el("span", "head-squares", controls);
    var squareEls = [];
    for (h = 0; h < DATA.heads; h++) {
      var sq = el("span", "head-square", squares);
      sq.style.background = headCss(h);
      sq.title = "head " + (h + 1) + " (click to toggle; double-click to show it alone)";
      sq.dataset.head = h;
      squareEls.push(sq);
    }
    el("div", "note", root, "Lines: attention from each query token (left) to each key token (right); " +
       "opacity = weight. Hover a token to isolate its lines.");
    var pane = new LinePane(root);
    var q = hashIndex(hash.token, DATA.L, -1);
    if (q >= 0) pane.pinned = {side: "query", index: q};
    function redraw() {
      pane.layer = state.layer;
      pane.shown = [];
      for (var k = 0; k < DATA.heads; k++) {
        if (state.on[k]) pane.shown.push(k);
        squareEls[k].classList.toggle("off", !state.on[k]);
      }
      pane.draw();
    }
    select.addEventListener("change", function () { state.layer = parseInt(select.value, 10); redraw(); });
    squareEls.forEach(function (sq, k) {
      sq.addEventListener("click", function () { state.on[k] = !state.on[k]; redraw(); });
      sq.addEventListener("dblclick", function () {
        for (var m = 0; m < DATA.heads; m++) state.on[m] = m === k;
        redraw();
      });
    });
    redraw();
    return {
      selftest: function () {
        function snap() {
          return {layer: state.layer + 1, heads_on: pane.shown.length, lines: pane.stats.lines,
                  checksum: pane.stats.checksum, ink: ink(pane.canvas)};
        }
        var out = {view: "head", draw_ms: pane.stats.ms, tokens: {query: pane.queries.length, key: pane.keys.length},
                   token_text: {query: pane.queries.map(function (t) { return t.textContent; }),
                                key: pane.keys.map(function (t) { return t.textContent; })},
                   layers: select.options.length, heads: squareEls.length, initial: snap()};
        squareEls[0].dispatchEvent(new MouseEvent("click", {bubbles: true}));
        out.after_head_click = snap();
        squareEls[0].dispatchEvent(new MouseEvent("click", {bubbles: true}));
        out.after_second_click = snap();
        select.value = String((state.layer + 1) % DATA.layers);
        select.dispatchEvent(new Event("change", {bubbles: true}));
        out.after_layer_change = snap();
        pane.queries[0].dispatchEvent(new MouseEvent("mouseenter"));
        out.hover_query = snap();
        out.hover_active = document.querySelectorAll(".token.active").length;
        pane.queries[0].dispatchEvent(new MouseEvent("mouseleave"));
        pane.keys[DATA.S - 1].dispatchEvent(new MouseEvent("mouseenter"));
        out.hover_key = snap();
        pane.keys[DATA.S - 1].dispatchEvent(new MouseEvent("mouseleave"));
        out.after_leave = snap();
        pane.queries[0].dispatchEvent(new MouseEvent("click", {bubbles: true}));
        out.pinned_query = snap();
        pane.queries[0].dispatchEvent(new MouseEvent("click", {bubbles: true}));
        out.unpinned = snap();
        squareEls[DATA.heads - 1].dispatchEvent(new MouseEvent("dblclick", {bubbles: true}));
        out.after_dblclick = snap();
        return out;
      }
    };
  }

  // ==== model view ====
  // A thumbnail: the [L, S] map as a heatmap in the head's colour, each
  // map scaled to its own largest weight.
  function drawThumb(canvas, layer, head) {
    var ctx = canvas.getContext("2d"), img = ctx.createImageData(DATA.S, DATA.L), rgb = headRgb(head), max = 0;
    var i, j;
    for (i = 0; i < DATA.L; i++) for (j = 0; j < DATA.S; j++) max = Math.max(max, weight(layer, head, i, j));
    for (i = 0; i < DATA.L; i++) {
      for (j = 0; j < DATA.S; j++) {
        var t = max > 0 ? weight(layer, head, i, j) / max : 0, p = 4 * (i * DATA.S + j);
        for (var c = 0; c < 3; c++) img.data[p + c] = Math.round(255 + (rgb[c] - 255) * t);
        img.data[p + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
  }

  function modelView(root, hash) {
    el("div", "note", root, "Rows: layers; columns: heads. Each thumbnail is the map (queries down, keys " +
       "across) scaled to its largest weight. Click one to open it.");
    var table = el("table", "grid", root), head = el("tr", "", table);
    el("th", "", head);
    for (var h = 0; h < DATA.heads; h++) el("th", "", head, "head " + (h + 1));
    var thumbs = [];
    var overlay = el("div", "", document.body);
    overlay.id = "overlay";
    var panel = el("div", "panel", overlay);
    var close = el("span", "close", panel, "\u00d7");
    var caption = el("h1", "", panel);
    var pane = new LinePane(panel);
    var opened = null;
    function open(layer, k) {
      opened = {layer: layer, head: k};
      caption.textContent = layerName(layer) + ", head " + (k + 1);
      pane.layer = layer;
      pane.shown = [k];
      pane.hover = null;
      pane.draw();
      overlay.classList.add("open");
    }
    function shut() { opened = null; overlay.classList.remove("open"); }
    close.addEventListener("click", shut);
    overlay.addEventListener("click", function (e) { if (e.target === overlay) shut(); });
    document.addEventListener("keydown", function (e) { if (e.key === "Escape") shut(); });
    for (var l = 0; l < DATA.layers; l++) {
      var tr = el("tr", "", table);
      el("th", "row", tr, layerName(l));
      for (h = 0; h < DATA.heads; h++) {
        var c = el("canvas", "thumb", el("td", "", tr));
        c.width = DATA.S;
        c.height = DATA.L;
        c.title = layerName(l) + ", head " + (h + 1);
        c.dataset.layer = l;
        c.dataset.head = h;
        drawThumb(c, l, h);
        c.addEventListener("click", open.bind(null, l, h));
        thumbs.push(c);
      }
    }
    if (hash.open) {
      var p = String(hash.open).split(",");
      var ol = hashIndex(p[0], DATA.layers, -1), oh = hashIndex(p[1], DATA.heads, -1);
      if (ol >= 0 && oh >= 0) open(ol, oh);
    }
    return {
      selftest: function () {
        var out = {view: "model", thumbnails: thumbs.length, layers: table.rows.length - 1, heads: DATA.heads,
                   open_before: overlay.classList.contains("open")};
        var target = thumbs[thumbs.length - 1];
        target.dispatchEvent(new MouseEvent("click", {bubbles: true}));
        out.open_after_click = overlay.classList.contains("open");
        out.opened = opened && {layer: opened.layer + 1, head: opened.head + 1};
        out.caption = caption.textContent;
        out.overlay_tokens = {query: pane.queries.length, key: pane.keys.length};
        out.overlay_lines = pane.stats.lines;
        out.overlay_checksum = pane.stats.checksum;
        out.overlay_ink = ink(pane.canvas);
        out.thumb_ink = ink(target);
        thumbs[0].dispatchEvent(new MouseEvent("click", {bubbles: true}));
        out.second = {layer: opened.layer + 1, head: opened.head + 1, checksum: pane.stats.checksum};
        close.dispatchEvent(new MouseEvent("click", {bubbles: true}));
        out.open_after_close = overlay.classList.contains("open");
        return out;
      }
    };
  }

  // ==== neuron view ====
  // A strip of D cells: blue for negative, red for positive, scaled by max.
  function strip(parent, values, max) {
    var cell = Math.max(2, Math.min(8, Math.floor(320 / values.length)));
    var c = el("canvas", "strip", parent);
    c.width = values.length * cell;
    c.height = 14;
    var ctx = c.getContext("2d");
    values.forEach(function (v, d) {
      var t = max > 0 ? Math.max(-1, Math.min(1, v / max)) : 0, a = Math.round(255 * (1 - Math.abs(t)));
      ctx.fillStyle = t >= 0 ? "rgb(255," + a + "," + a + ")" : "rgb(" + a + "," + a + ",255)";
      ctx.fillRect(d * cell, 0, cell, 14);
    });
    c.title = values.map(function (v) { return v.toFixed(3); }).join(" ");
    return c;
  }
  function maxAbs(rows) {
    var m = 0;
    rows.forEach(function (r) { r.forEach(function (v) { m = Math.max(m, Math.abs(v)); }); });
    return m;
  }

  function neuronView(root, hash) {
    var Q = DATA.q, K = DATA.k, D = DATA.D, scale = 1 / Math.sqrt(D);
    var state = {token: hashIndex(hash.token, DATA.L, DATA.token - 1)};
    el("div", "note", root, "Click a query token (left). Strips: red positive, blue negative; " +
       "q \u00d7 k is elementwise, the score q\u00b7k/\u221aD, then softmax over the keys.");
    var wrap = el("div", "neuron", root);
    var left = el("div", "queries", wrap);
    left.style.height = (DATA.L + 1) * ROW + "px";
    el("div", "colhead", left, "query");
    var queries = DATA.tokens.map(function (t, i) {
      var e = el("div", "token query", left, t);
      e.title = t;
      e.style.top = (i + 1) * ROW + "px";
      e.style.left = "0px";
      e.style.width = "150px";
      e.addEventListener("click", function () { state.token = i; render(); });
      return e;
    });
    var right = el("div", "", wrap);
    var qmax = maxAbs(Q), kmax = maxAbs(K);
    var result = {};
    function render() {
      var i = state.token, q = Q[i];
      queries.forEach(function (e, k) { e.classList.toggle("selected", k === i); });
      right.textContent = "";
      var t = el("table", "vectors", right), hr = el("tr", "", t);
      ["key", "k", "q \u00d7 k", "q\u00b7k/\u221aD", "softmax"].concat(DATA.map ? ["captured"] : [])
        .forEach(function (s) { el("th", "", hr, s); });
      var qr = el("tr", "qrow", t);
      el("td", "", qr, "q: " + DATA.tokens[i]);
      strip(el("td", "", qr), q, qmax);
      el("td", "", qr);
      el("td", "", qr);
      el("td", "", qr);
      if (DATA.map) el("td", "", qr);
      var products = K.map(function (k) { return k.map(function (v, d) { return v * q[d]; }); });
      var pmax = maxAbs(products);
      var scores = products.map(function (p) { return scale * p.reduce(function (a, b) { return a + b; }, 0); });
      var top = Math.max.apply(null, scores);
      var ex = scores.map(function (s) { return Math.exp(s - top); });
      var total = ex.reduce(function (a, b) { return a + b; }, 0);
      var probs = ex.map(function (e) { return e / total; });
      var diff = 0;
      K.forEach(function (k, j) {
        var tr = el("tr", "krow", t);
        el("td", "", tr, DATA.source_tokens[j]);
        strip(el("td", "", tr), k, kmax);
        strip(el("td", "", tr), products[j], pmax);
        el("td", "num", tr, scores[j].toFixed(3));
        var sm = el("td", "num", tr);
        el("span", "bar", sm).style.width = Math.round(60 * probs[j]) + "px";
        sm.appendChild(document.createTextNode(probs[j].toFixed(3)));
        if (DATA.map) {
          el("td", "num", tr, DATA.map[i][j].toFixed(3));
          diff = Math.max(diff, Math.abs(DATA.map[i][j] - probs[j]));
        }
      });
      result = {token: i + 1, rows: K.length,
                sum: Math.round(probs.reduce(function (a, b) { return a + b; }, 0) * 1e6) / 1e6,
                argmax: probs.indexOf(Math.max.apply(null, probs)) + 1,
                max_diff_captured: DATA.map ? Math.round(diff * 1e6) / 1e6 : null};
    }
    render();
    return {
      selftest: function () {
        var out = {view: "neuron", tokens: {query: queries.length, key: K.length}, D: D,
                   layer: DATA.layer, head: DATA.head, initial: result};
        var next = (state.token + 1) % DATA.L;
        queries[next].dispatchEvent(new MouseEvent("click", {bubbles: true}));
        out.after_click = result;
        out.selected = document.querySelectorAll(".token.selected").length;
        out.strips = right.querySelectorAll("canvas.strip").length;
        return out;
      }
    };
  }

  var hash = parseHash(), root = document.getElementById("view");
  var views = {head: headView, model: modelView, neuron: neuronView};
  var view = views[DATA.view](root, hash);
  if (hash.selftest) {
    var pre = el("pre", "", document.body);
    pre.id = "selftest";
    var out;
    var ready = performance.now();
    try { out = view.selftest(); } catch (e) { out = {error: String(e && e.stack || e)}; }
    out.ms = {ready: Math.round(ready), selftest: Math.round(performance.now() - ready)};
    pre.textContent = JSON.stringify(out);
  }
})();
]==]

-- The page: data (JSON, safe inside <script>), style, script.
local function page(data, title)
  return table.concat({
    '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>', html_escape(title),
    "</title>\n<style>\n", CSS, "</style>\n</head>\n<body>\n<h1>", html_escape(title),
    '</h1>\n<div id="view"></div>\n<script id="attn-data" type="application/json">', json(data),
    "</script>\n<script>\n", JS, "</script>\n</body>\n</html>\n"})
end

-- What head_view and model_view share: checks, then the page's data.
local function map_page(fn, maps, opts, view)
  opts = options(fn, opts)
  local info = check_maps(fn, maps)
  local tokens, source = tokens_of(fn, opts, info.L, info.S)
  local batch = index_option(fn, opts, "batch", info.B, "batches", 1)
  local layer = index_option(fn, opts, "layer", info.layers, "layers", 1)
  local heads = opts.heads
  if heads == nil then
    heads = {}
    for h = 1, info.H do heads[h] = h end
  else
    if type(heads) == "number" then heads = {heads} end
    if type(heads) ~= "table" or is_tensor(heads) then
      error(("%s: option 'heads' must be a list of head numbers (1 to %d) (got %s)"):format(fn, info.H,
        is_tensor(heads) and "a tensor" or type(heads)), 2)
    end
    local out = {}
    for i = 1, #heads do out[i] = index_option(fn, {heads = heads[i]}, "heads", info.H, "heads") end
    heads = out
  end
  heads[LIST] = true
  local names = label_option(fn, opts, "layer_names", info.layers, "layer", nil)
  local data = {view = view, tokens = tokens, source_tokens = source, layers = info.layers, heads = info.H,
                L = info.L, S = info.S, layer = layer, initial_heads = heads, layer_names = names,
                weights = quantized(info, batch)}
  local title = opts.title or (view == "head" and "Attention: head view" or "Attention: model view")
  return write_file(fn, opts.path, page(data, title))
end

--- One self-contained HTML file of the head view: the query tokens on
-- the left, the key tokens on the right and a line from each query to
-- each key per shown head, its opacity the weight; a layer selector;
-- one coloured square per head (click: toggle it; double-click: it
-- alone); hovering a token isolates its lines, clicking it keeps them
-- isolated (a second click frees them).  The URL fragment sets
-- the first state: view.html#layer=2&heads=1,3&token=4.
-- @param maps a list of layers, each a [B, H, L, S] or [H, L, S] float
--   tensor of attention weights (L queries, S keys)
-- @param opts path (required, the file written), tokens (L strings),
--   source_tokens (S strings; default tokens), batch (1-based, default 1),
--   layer (shown first, default 1), heads (list shown first, default
--   all), title, layer_names
-- @return the path
-- @usage
-- local attn = require "attn"
-- local html = require "attn.app.viz_html"
-- attn.manual_seed(0)
-- local maps = {attn.randn(1, 2, 3, 3):softmax(-1), attn.randn(1, 2, 3, 3):softmax(-1)}
-- local base = os.tmpname()                             -- a fresh name (os.tmpname creates it)
-- local path = html.head_view(maps, {path = base .. ".html", tokens = {"the", "cat", "sat"}})
-- print(path)                                            -- open it in a browser
-- os.remove(path); os.remove(base)
function M.head_view(maps, opts) return map_page("head_view", maps, opts, "head") end

--- One self-contained HTML file of the model view: the grid of layers x
-- heads, each map a thumbnail (a heatmap in the head's colour, scaled to
-- its largest weight); clicking one opens it large, with its tokens and
-- lines (Escape or a click beside it closes it).  view.html#open=2,3
-- opens layer 2, head 3 at once.
-- @param maps a list of layers, each a [B, H, L, S] or [H, L, S] float tensor
-- @param opts as head_view's
-- @return the path
-- @usage
-- local attn = require "attn"
-- local html = require "attn.app.viz_html"
-- attn.manual_seed(0)
-- local maps = {attn.randn(2, 4, 4):softmax(-1), attn.randn(2, 4, 4):softmax(-1)}
-- local base = os.tmpname()
-- local path = html.model_view(maps, {path = base .. ".html", layer_names = {"enc 1", "enc 2"}})
-- os.remove(path); os.remove(base)
function M.model_view(maps, opts) return map_page("model_view", maps, opts, "model") end

-- The [L or S, D] rows of head h, batch b of a [B, H, N, D] tensor.
local function head_rows(fn, key, t, b, h, l)
  if not is_tensor(t) then error(("%s: data.%s[%d] must be a [B, H, N, D] tensor (got %s)"):format(fn, key, l,
    type(t)), 3) end
  if not t:is_floating_point() or (t:dim() ~= 4 and t:dim() ~= 3) then
    error(("%s: data.%s[%d] is %s %s: expected a float [B, H, N, D] or [H, N, D] tensor"):format(fn, key, l,
      tostring(t.dtype), shape_of(t)), 3)
  end
  if t:dim() == 3 then t = t:unsqueeze(1) end
  local s = {t:size()}
  if b > s[1] or h > s[2] then
    error(("%s: data.%s[%d] is %s: no batch %d, head %d"):format(fn, key, l, shape_of(t), b, h), 3)
  end
  if s[3] == 0 or s[4] == 0 then
    error(("%s: data.%s[%d] is %s: every dimension must be at least 1"):format(fn, key, l, shape_of(t)), 3)
  end
  return t[b][h]:contiguous():tolist(), s
end

--- One self-contained HTML file of one head's neurons: for the chosen
-- query token (click one on the left), its query vector, each key
-- vector, their elementwise products q * k, the scores q.k / sqrt(D) and
-- the softmax over the keys (and the captured map beside it when
-- data.maps is given).  view.html#token=3 selects query 3 first.
-- @param data {q = list of layers [B, H, L, D], k = list of layers
--   [B, H, S, D], maps = optional list of [B, H, L, S]}
-- @param opts path (required), layer (default 1), head (default 1),
--   token (query selected first, default 1), tokens, source_tokens,
--   batch (default 1), title
-- @return the path
-- @usage
-- local attn = require "attn"
-- local html = require "attn.app.viz_html"
-- attn.manual_seed(0)
-- local q, k = attn.randn(1, 2, 3, 8), attn.randn(1, 2, 4, 8)
-- local base = os.tmpname()
-- local path = html.neuron_view({q = {q}, k = {k}}, {path = base .. ".html", head = 2,
--   tokens = {"a", "b", "c"}, source_tokens = {"w", "x", "y", "z"}})
-- os.remove(path); os.remove(base)
function M.neuron_view(data, opts)
  local fn = "neuron_view"
  opts = options(fn, opts)
  if type(data) ~= "table" or is_tensor(data) then
    error(("%s: data must be a table {q = list of [B, H, L, D], k = list of [B, H, S, D], maps = optional list} "
      .. "(got %s)"):format(fn, is_tensor(data) and "a tensor" or type(data)), 2)
  end
  for _, key in ipairs({"q", "k"}) do
    local v = data[key]
    if type(v) ~= "table" or is_tensor(v) or #v == 0 then
      error(("%s: data.%s must be a non-empty list of [B, H, N, D] tensors, one per layer (got %s)"):format(fn,
        key, is_tensor(v) and "a tensor: wrap it in a list" or (type(v) == "table" and "an empty list" or type(v))),
        2)
    end
  end
  if #data.q ~= #data.k then
    error(("%s: data.q has %d layers but data.k has %d"):format(fn, #data.q, #data.k), 2)
  end
  local layer = index_option(fn, opts, "layer", #data.q, "layers", 1)
  local qt, kt = data.q[layer], data.k[layer]
  local batch = index_option(fn, opts, "batch", is_tensor(qt) and qt:dim() == 4 and qt:size(1) or 1, "batches", 1)
  local nheads = is_tensor(qt) and qt:dim() >= 3 and qt:size(qt:dim() - 2) or 1
  local head = index_option(fn, opts, "head", nheads, "heads", 1)
  local q, qs = head_rows(fn, "q", qt, batch, head, layer)
  local k, ks = head_rows(fn, "k", kt, batch, head, layer)
  if qs[4] ~= ks[4] then
    error(("%s: data.q[%d] is %s but data.k[%d] is %s: q and k must have the same D"):format(fn, layer,
      shape_of(qt), layer, shape_of(kt)), 2)
  end
  local L, S = qs[3], ks[3]
  local map
  if data.maps ~= nil then
    local info = check_maps(fn, data.maps, "data.maps")
    if info.layers ~= #data.q or info.L ~= L or info.S ~= S or info.H ~= nheads or info.B < batch then
      error(("%s: data.maps[1] is %s but q and k give %d layers, %d heads, %d queries and %d keys"):format(fn,
        shape_of(data.maps[1]), #data.q, nheads, L, S), 2)
    end
    local m = data.maps[layer]
    if m:dim() == 4 then m = m[batch] end
    map = m[head]:contiguous():tolist()
  end
  local tokens, source = tokens_of(fn, opts, L, S)
  local token = index_option(fn, opts, "token", L, "query tokens", 1)
  local title = opts.title or ("Attention: layer %d, head %d"):format(layer, head)
  local page_data = {view = "neuron", tokens = tokens, source_tokens = source, L = L, S = S, D = qs[4], q = q, k = k,
                     map = map, layer = layer, head = head, token = token}
  return write_file(fn, opts.path, page(page_data, title))
end

-- The options are keywords read from the options table (path required).
local OPTS = "*, path=nil, tokens=nil, source_tokens=nil, batch=nil, layer=nil, heads=nil, title=nil, layer_names=nil"
require("attn.signature").declare(M, "viz.", {
  head_view = "native: maps, /, " .. OPTS,
  model_view = "native: maps, /, " .. OPTS,
  neuron_view = "native: data, /, *, path=nil, tokens=nil, source_tokens=nil, batch=nil, layer=nil, head=nil, "
    .. "token=nil, title=nil",
})

-- For the spec: the JSON string encoder (escaping) and base64.
M._json_string = json_string
M._base64 = base64

return M
