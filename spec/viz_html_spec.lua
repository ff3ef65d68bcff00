-- SPDX-License-Identifier: MIT
-- attn.app.viz_html: the head, model and neuron views (issue 32, part 2).
-- Each view is written for a small deterministic map set (seeded softmax
-- of randn) and checked as a file: self-contained, escaped, its data
-- decoding to the maps' weights, small (a BERT-size set under 2 MB).
-- Then, where Debian's chromium is installed, each page runs in headless
-- Chromium: #selftest makes the page click through its own controls with
-- DOM events and write what it drew into <pre id="selftest"> (read with
-- --dump-dom), and a screenshot of each view is compared with the
-- committed one in spec/fixtures/viz/ (ATTN_UPDATE_SCREENSHOTS=1 writes
-- them anew).  attn.plot._png_diff, which compares them, is checked here
-- too.
local attn = require "attn"
local plot = require "attn.plot"
local html = require "attn.app.viz_html"
local json = require "attn.app.json"

local S = require "support.sh"
local q = S.q

local tmpdir
local function tmp(name) return tmpdir .. "/" .. name end

setup(function() tmpdir = S.tmpdir() end)

teardown(function()
  if tmpdir then S.rmtree(tmpdir) end
end)

local SOURCE = os.getenv("ATTN_SOURCE_DIR") or "."
local FIXTURES = SOURCE .. "/spec/fixtures/viz"
local CHROMIUM = "/usr/bin/chromium"

-- Tokens that need escaping in HTML, in JSON and in a <script> element.
local TOKENS = {"[CLS]", "</script>", 'say "hi"', "l'été", "<b>&amp;</b>", "日本\u{2028}", "[SEP]"}
local SOURCE_TOKENS = {"le", "chat", "<!--", "noir", "\\n", "[SEP]"}
-- The screenshots' tokens: escaping cases too, in glyphs DejaVu Sans has
-- (a CJK token would be drawn with whatever CJK font a machine has).
local SHOT_TOKENS = {"[CLS]", "</script>", 'say "hi"', "l'été", "<b>&amp;</b>", "Ωμέγα", "[SEP]"}

-- layers maps of [B, H, L, S]: softmax of 2 * randn (seeded), so that
-- weights range from near 0 to near 1.
local function make_maps(layers, B, H, L, S_, seed)
  attn.manual_seed(seed or 42)
  local maps = {}
  for l = 1, layers do maps[l] = (attn.randn(B, H, L, S_) * 2):softmax(-1) end
  return maps
end

-- The page's data (the JSON in <script id="attn-data">).
local function page_data(text)
  local body = text:match('<script id="attn%-data" type="application/json">(.-)</script>')
  assert(body, "no data element")
  return json.decode(body, "attn-data")
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function unbase64(s)
  local idx = {}
  for i = 1, 64 do idx[B64:sub(i, i)] = i - 1 end
  local out = {}
  for i = 1, #s, 4 do
    local c = {}
    for k = 0, 3 do c[k] = idx[s:sub(i + k, i + k)] end
    local v = (c[0] << 18) | (c[1] << 12) | ((c[2] or 0) << 6) | (c[3] or 0)
    out[#out + 1] = v >> 16
    if c[2] then out[#out + 1] = (v >> 8) & 255 end
    if c[3] then out[#out + 1] = v & 255 end
  end
  return out
end

-- The bytes the page should hold for batch b of maps.
local function expected_bytes(maps, b)
  local out = {}
  for _, m in ipairs(maps) do
    for _, x in ipairs(m[b]:contiguous():reshape(-1):tolist()) do out[#out + 1] = math.floor(x * 255 + 0.5) end
  end
  return out
end

-- Lines the head view draws for layer l (1-based), heads (list, 1-based):
-- the weights whose byte is not 0.
local function expected_lines(maps, l, heads, b)
  local m = maps[l][b or 1]
  local n = 0
  for _, h in ipairs(heads) do
    for _, x in ipairs(m[h]:contiguous():reshape(-1):tolist()) do
      if math.floor(x * 255 + 0.5) > 0 then n = n + 1 end
    end
  end
  return n
end

local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, "expected an error matching " .. pattern)
  assert(type(err) == "string" and err:find(pattern), ("expected /%s/, got: %s"):format(pattern, tostring(err)))
end

describe("viz_html files", function()
  local maps = make_maps(2, 2, 3, #TOKENS, #TOKENS)

  it("head_view writes one self-contained page whose data are the weights", function()
    local path = html.head_view(maps, {path = tmp("head.html"), tokens = TOKENS, batch = 2, layer = 2,
      heads = {1, 3}, layer_names = {"enc 1", "enc 2"}})
    assert.are.equal(tmp("head.html"), path)
    local text = S.readfile(path)
    assert.are.equal("<!DOCTYPE html>", text:sub(1, 15))
    assert.truthy(utf8.len(text), "the page is valid UTF-8")
    -- no network: nothing fetched (no src/href attribute, no URL, no import)
    assert.is_nil(text:find("src=", 1, true))
    assert.is_nil(text:find("href=", 1, true))
    assert.is_nil(text:find("https?://"))
    assert.is_nil(text:find("@import", 1, true))
    -- the two script elements only: the token "</script>" is escaped
    local closes = 0
    for _ in text:gmatch("</script>") do closes = closes + 1 end
    assert.are.equal(2, closes)
    assert.is_nil(text:find("<!--", 1, true))
    local d = page_data(text)
    assert.are.same(TOKENS, d.tokens)            -- escaping is lossless
    assert.are.same(TOKENS, d.source_tokens)
    assert.are.same({"enc 1", "enc 2"}, d.layer_names)
    assert.are.same({1, 3}, d.initial_heads)
    assert.are.equal("head", d.view)
    assert.are.equal(2, d.layer)
    assert.are.equal(2, d.layers)
    assert.are.equal(3, d.heads)
    local bytes = unbase64(d.weights)
    assert.are.same(expected_bytes(maps, 2), bytes)
  end)

  it("model_view and 3-d maps: [H, L, S] is B = 1", function()
    local three = {maps[1][1], maps[2][1]}
    local a = S.readfile(html.model_view(three, {path = tmp("m3.html"), tokens = TOKENS}))
    local b = S.readfile(html.model_view(maps, {path = tmp("m4.html"), tokens = TOKENS, batch = 1}))
    assert.are.equal(a, b)
    assert.are.equal("model", page_data(a).view)
    assert.are.same(expected_bytes(maps, 1), unbase64(page_data(a).weights))
  end)

  it("cross attention: source tokens for the keys", function()
    local cross = make_maps(1, 1, 2, 4, #SOURCE_TOKENS, 7)
    local tokens = {"the", "black", "cat", "</script>"}
    local d = page_data(S.readfile(html.head_view(cross, {path = tmp("x.html"), tokens = tokens,
      source_tokens = SOURCE_TOKENS})))
    assert.are.same(tokens, d.tokens)
    assert.are.same(SOURCE_TOKENS, d.source_tokens)
    assert.are.equal(4, d.L)
    assert.are.equal(#SOURCE_TOKENS, d.S)
    raises("head_view: there are 6 keys but 4 query tokens: give source_tokens", html.head_view, cross,
      {path = tmp("x.html"), tokens = tokens})
  end)

  it("escapes the title and cleans invalid UTF-8", function()
    local text = S.readfile(html.head_view({maps[1]}, {path = tmp("t.html"),
      title = '<script>alert("x")</script> & co', tokens = {"a", "b\255c", "c", "d", "e", "f", "g"}}))
    assert.truthy(text:find("<title>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co</title>", 1, true))
    assert.truthy(utf8.len(text))
    assert.are.equal("b\u{FFFD}c", page_data(text).tokens[2])
    -- the JSON string encoder: nothing that ends a script or a line
    local s = html._json_string("</script><!--\u{2028}\u{2029}\0\"\\&")
    assert.are.equal('"\\u003c/script\\u003e\\u003c!--\\u2028\\u2029\\u0000\\"\\\\\\u0026"', s)
    assert.are.equal("TWFu", html._base64({77, 97, 110}))
    assert.are.equal("TWE=", html._base64({77, 97}))
    assert.are.equal("TQ==", html._base64({77}))
  end)

  it("quantizes NaN to 0 and clamps out-of-range weights", function()
    local m = attn.tensor({{{0 / 0, 2, -1, 0.5}}}) -- [1, 1, 4]: H = 1, L = 1, S = 4
    local d = page_data(S.readfile(html.head_view({m}, {path = tmp("nan.html")})))
    assert.are.same({0, 255, 0, 128}, unbase64(d.weights))
    assert.are.same({"1"}, d.tokens)
    assert.are.same({"1", "2", "3", "4"}, d.source_tokens)
  end)

  it("neuron_view holds one head's q and k", function()
    attn.manual_seed(3)
    local qs, ks = {attn.randn(1, 2, 3, 4), attn.randn(1, 2, 3, 4)}, {attn.randn(1, 2, 5, 4), attn.randn(1, 2, 5, 4)}
    local d = page_data(S.readfile(html.neuron_view({q = qs, k = ks}, {path = tmp("n.html"), layer = 2, head = 2,
      source_tokens = {"a", "b", "c", "d", "e"}})))
    assert.are.equal("neuron", d.view)
    assert.are.equal(4, d.D)
    assert.are.equal(3, #d.q)
    assert.are.equal(5, #d.k)
    local want = qs[2][1][2]:tolist()
    for i = 1, 3 do
      for j = 1, 4 do assert.near(want[i][j], d.q[i][j], 1e-3 * math.max(1, math.abs(want[i][j]))) end
    end
    assert.are.same({"1", "2", "3"}, d.tokens)
    raises("neuron_view: data.q has 2 layers but data.k has 1", html.neuron_view, {q = qs, k = {ks[1]}},
      {path = tmp("n.html")})
    raises("neuron_view: option 'head' is 3: it must be from 1 to 2 %(the number of heads%)", html.neuron_view, {q = qs, k = ks},
      {path = tmp("n.html"), head = 3, source_tokens = {"a", "b", "c", "d", "e"}})
    raises("q and k must have the same D", html.neuron_view, {q = {qs[1]}, k = {attn.randn(1, 2, 5, 3)}},
      {path = tmp("n.html")})
  end)

  it("says what is wrong with the arguments", function()
    local p = tmp("e.html")
    raises("head_view: unknown option 'colour'", html.head_view, maps, {path = p, colour = 1})
    raises("head_view: option 'path' must name the HTML file", html.head_view, maps, {tokens = TOKENS})
    raises("model_view: expected an options table", html.model_view, maps, 3)
    raises("head_view: option 'tokens' has 2 entries but there are 7 querys?", html.head_view, maps,
      {path = p, tokens = {"a", "b"}})
    raises("head_view: option 'batch' is 3: it must be from 1 to 2 %(the number of batches%)", html.head_view, maps, {path = p, batch = 3})
    raises("head_view: option 'layer' is 0", html.head_view, maps, {path = p, layer = 0})
    raises("head_view: option 'heads' is 4: it must be from 1 to 3", html.head_view, maps, {path = p, heads = {1, 4}})
    raises("head_view: option 'layer' must be an integer", html.head_view, maps, {path = p, layer = 1.5})
    raises("model_view: maps%[2%] is %[2, 3, 7, 6%] but maps%[1%] is %[2, 3, 7, 7%]", html.model_view,
      {maps[1], maps[2][{{}, {}, {}, {1, 6}}]}, {path = p})
    raises("head_view: maps must be a list .* wrap it in a list", html.head_view, maps[1], {path = p})
    raises("head_view: maps is an empty list", html.head_view, {}, {path = p})
    raises("head_view: maps%[1%] must be a floating%-point tensor", html.head_view, {attn.ones(1, 2, 2):long()},
      {path = p})
    raises("head_view: maps%[1%] is %[2, 2%]", html.head_view, {attn.ones(2, 2)}, {path = p})
    raises("head_view: cannot write '/nonexistent%-dir/v.html'", html.head_view, maps, {path = "/nonexistent-dir/v.html"})
    assert.is_false(S.exists(p))
  end)

  it("keeps a BERT-size map set (12 layers, 12 heads, 64 tokens) under 2 MB", function()
    local big = make_maps(12, 1, 12, 64, 64, 1)
    local tokens = {}
    for i = 1, 64 do tokens[i] = "token" .. i end
    for _, view in ipairs({"head_view", "model_view"}) do
      local t0 = os.clock()
      local path = html[view](big, {path = tmp("bert_" .. view .. ".html"), tokens = tokens})
      local size = S.file_size(path)
      print(("%s: 12x12x64 BERT maps -> %d bytes in %.2f s"):format(view, size, os.clock() - t0))
      assert(size < 2 * 1024 * 1024, view .. ": " .. size .. " bytes")
      assert(size > 12 * 12 * 64 * 64, "one byte per weight at least") -- the weights are all there
    end
  end)
end)

describe("attn.plot._png_diff", function()
  it("gives 0 for a file and itself, the cell's share for two colours", function()
    local a, b = tmp("a.png"), tmp("b.png")
    local _, lay = plot.heatmap({{0}}, {path = a, colorbar = false, vmin = 0, vmax = 1, width = 120, height = 100})
    plot.heatmap({{1}}, {path = b, colorbar = false, vmin = 0, vmax = 1, width = 120, height = 100})
    local same = plot._png_diff(a, a)
    assert.are.same(0, same.mean_abs)
    assert.are.same(0, same.differing)
    local d = plot._png_diff(a, b)
    local st = plot._pixel_stats(a)
    assert.are.equal(st.width, d.width)
    assert.are.equal(st.height, d.height)
    -- the one cell differs: viridis at 0 against viridis at 1
    local c0, c1 = {plot.colormap("viridis", 0)}, {plot.colormap("viridis", 1)}
    local per_pixel = 0
    for k = 1, 3 do per_pixel = per_pixel + math.abs(math.floor(c0[k] * 255 + 0.5) - math.floor(c1[k] * 255 + 0.5)) end
    -- the cell's pixels differ, its antialiased edge rows and columns may not
    local n = d.differing * d.width * d.height
    assert(n >= (lay.w - 2) * (lay.h - 2) and n <= (lay.w + 2) * (lay.h + 2),
      ("%g pixels differ; the cell is %gx%g"):format(n, lay.w, lay.h))
    -- each by the two colours' difference over r, g, b (alpha is equal), the
    -- partly covered edge pixels by less
    local full = d.differing * per_pixel / 4
    assert(d.mean_abs >= full and d.mean_abs <= full + (2 * lay.w + 2 * lay.h) * per_pixel / 4 / (d.width * d.height),
      ("mean_abs %g for %g fully different pixels"):format(d.mean_abs, n))
    local back = plot._png_diff(b, a)
    assert.are.equal(d.mean_abs, back.mean_abs)
    assert.are.equal(d.differing, back.differing)
  end)

  it("refuses images of different sizes and files that are not PNGs", function()
    local a, c = tmp("a.png"), tmp("c.png")
    plot.heatmap({{0}}, {path = a, colorbar = false, width = 120, height = 100})
    plot.heatmap({{0}}, {path = c, colorbar = false, width = 130, height = 100})
    raises("png_diff: '.-a.png' is %d+x100 but '.-c.png' is %d+x100", plot._png_diff, a, c)
    S.writefile(tmp("x.png"), "not a png")
    raises("png_diff: '.-x.png' is not a PNG file", plot._png_diff, a, tmp("x.png"))
    raises("png_diff: cannot open", plot._png_diff, tmp("missing.png"), a)
  end)
end)

-- Headless Chromium, with a profile of its own (runs in parallel do not
-- share one).  Returns its stdout.
local function chromium(args, url)
  local cmd = ("timeout 120 %s --headless=new --no-sandbox --disable-gpu --user-data-dir=%s %s %s 2>/dev/null")
    :format(CHROMIUM, q(tmp("profile")), args, q(url))
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return out
end

-- The page's self-test report: the JSON in <pre id="selftest">.
local function selftest(path, fragment)
  local t0 = os.clock()
  local dom = chromium("--dump-dom", "file://" .. path .. "#" .. (fragment and (fragment .. "&") or "") .. "selftest")
  local body = dom:match('<pre id="selftest">(.-)</pre>')
  assert(body, "no self-test report in the page's DOM (" .. #dom .. " bytes dumped)")
  body = body:gsub("&lt;", "<"):gsub("&gt;", ">"):gsub("&nbsp;", "\u{a0}"):gsub("&amp;", "&")
  local r = json.decode(body, "selftest")
  assert(r.error == nil, "the page's self-test failed: " .. tostring(r.error))
  return r, os.clock() - t0
end

describe("viz_html in headless Chromium", function()
  local have = S.exists(CHROMIUM)
  local maps = make_maps(2, 1, 3, #TOKENS, #TOKENS)

  it("head view: tokens, layers, heads; clicks change what is drawn", function()
    if not have then return pending("chromium not installed") end
    local path = html.head_view(maps, {path = tmp("head.html"), tokens = TOKENS})
    local r = selftest(path)
    assert.are.equal("head", r.view)
    assert.are.same({query = #TOKENS, key = #TOKENS}, r.tokens)
    assert.are.same({query = TOKENS, key = TOKENS}, r.token_text) -- drawn as text, not markup
    assert.are.equal(2, r.layers)
    assert.are.equal(3, r.heads)
    assert.are.equal(1, r.initial.layer)
    assert.are.equal(3, r.initial.heads_on)
    assert.are.equal(expected_lines(maps, 1, {1, 2, 3}), r.initial.lines)
    assert(r.initial.ink > 1000, "the lines are visible: " .. r.initial.ink .. " pixels")
    -- clicking head 1's square hides its lines
    assert.are.equal(2, r.after_head_click.heads_on)
    assert.are.equal(expected_lines(maps, 1, {2, 3}), r.after_head_click.lines)
    assert.are_not.equal(r.initial.checksum, r.after_head_click.checksum)
    assert(r.after_head_click.ink < r.initial.ink)
    assert.are.same(r.initial, r.after_second_click) -- and clicking again brings them back
    -- the layer selector
    assert.are.equal(2, r.after_layer_change.layer)
    assert.are.equal(expected_lines(maps, 2, {1, 2, 3}), r.after_layer_change.lines)
    assert.are_not.equal(r.initial.checksum, r.after_layer_change.checksum)
    -- hovering a token isolates its lines
    assert(r.hover_query.lines > 0 and r.hover_query.lines <= 3 * #TOKENS)
    assert(r.hover_query.ink < r.after_layer_change.ink)
    assert.are.equal(1, r.hover_active)
    assert(r.hover_key.lines > 0 and r.hover_key.lines <= 3 * #TOKENS)
    assert.are.same(r.after_layer_change, r.after_leave)
    -- clicking a token pins its lines; clicking again frees them
    assert.are.same(r.hover_query, r.pinned_query)
    assert.are.same(r.after_layer_change, r.unpinned)
    -- a double click on a head's square shows that head alone
    assert.are.equal(1, r.after_dblclick.heads_on)
    assert.are.equal(expected_lines(maps, 2, {3}), r.after_dblclick.lines)
  end)

  it("head view: the URL fragment sets layer, heads and token", function()
    if not have then return pending("chromium not installed") end
    local path = html.head_view(maps, {path = tmp("head.html"), tokens = TOKENS})
    local r = selftest(path, "layer=2&heads=1,3&token=4")
    assert.are.equal(2, r.initial.layer)
    assert.are.equal(2, r.initial.heads_on)
    local row = 0 -- the pinned query token 4: its lines only
    for _, h in ipairs({1, 3}) do
      for _, x in ipairs(maps[2][1][h][4]:tolist()) do
        if math.floor(x * 255 + 0.5) > 0 then row = row + 1 end
      end
    end
    assert.are.equal(row, r.initial.lines)
  end)

  it("head view of cross attention: different source tokens", function()
    if not have then return pending("chromium not installed") end
    local cross = make_maps(1, 1, 2, 4, #SOURCE_TOKENS, 7)
    local tokens = {"the", "black", "cat", "</script>"}
    local r = selftest(html.head_view(cross, {path = tmp("cross.html"), tokens = tokens,
      source_tokens = SOURCE_TOKENS}))
    assert.are.same({query = 4, key = #SOURCE_TOKENS}, r.tokens)
    assert.are.same({query = tokens, key = SOURCE_TOKENS}, r.token_text)
    assert.are.equal(1, r.layers)
    assert.are.equal(expected_lines(cross, 1, {1, 2}), r.initial.lines)
    assert(r.hover_key.lines > 0 and r.hover_key.lines <= 2 * 4)
  end)

  it("model view: a thumbnail per layer and head; a click opens it large", function()
    if not have then return pending("chromium not installed") end
    local r = selftest(html.model_view(maps, {path = tmp("model.html"), tokens = TOKENS}))
    assert.are.equal("model", r.view)
    assert.are.equal(2 * 3, r.thumbnails)
    assert.are.equal(2, r.layers)
    assert.are.equal(3, r.heads)
    assert.is_false(r.open_before)
    assert.is_true(r.open_after_click)
    assert.are.same({layer = 2, head = 3}, r.opened)
    assert.are.equal("Layer 2, head 3", r.caption)
    assert.are.same({query = #TOKENS, key = #TOKENS}, r.overlay_tokens)
    assert.are.equal(expected_lines(maps, 2, {3}), r.overlay_lines)
    assert(r.overlay_ink > 500)
    assert.are.equal(#TOKENS * #TOKENS, r.thumb_ink) -- one pixel per weight
    assert.are.same({layer = 1, head = 1}, {layer = r.second.layer, head = r.second.head})
    assert.are_not.equal(r.overlay_checksum, r.second.checksum)
    assert.is_false(r.open_after_close)
  end)

  it("neuron view: scores and softmax for the clicked query token", function()
    if not have then return pending("chromium not installed") end
    attn.manual_seed(5)
    local D = 8
    local qs, ks, ms = {}, {}, {}
    for l = 1, 2 do
      qs[l], ks[l] = attn.randn(1, 3, 4, D), attn.randn(1, 3, #SOURCE_TOKENS, D)
      ms[l] = (qs[l]:matmul(ks[l]:transpose(-1, -2)) / math.sqrt(D)):softmax(-1)
    end
    local r = selftest(html.neuron_view({q = qs, k = ks, maps = ms}, {path = tmp("neuron.html"), layer = 2,
      head = 3, tokens = {"the", "black", "cat", "sat"}, source_tokens = SOURCE_TOKENS}))
    assert.are.equal("neuron", r.view)
    assert.are.same({query = 4, key = #SOURCE_TOKENS}, r.tokens)
    assert.are.equal(D, r.D)
    assert.are.equal(1, r.initial.token)
    assert.are.equal(2, r.after_click.token)
    assert.are.equal(1, r.selected)
    assert.are.equal(1 + 2 * #SOURCE_TOKENS, r.strips) -- q, then k and q*k per key
    for _, s in ipairs({r.initial, r.after_click}) do
      assert.are.equal(#SOURCE_TOKENS, s.rows)
      assert.near(1, s.sum, 1e-5)
      assert(s.max_diff_captured < 1e-3, "softmax against the captured map: " .. s.max_diff_captured)
      local row = ms[2][1][3][s.token]
      local _, arg = row:max(1)
      assert.are.equal(arg:item(), s.argmax)
    end
  end)

  it("keeps BERT-size head and model views usable", function()
    if not have then return pending("chromium not installed") end
    local big = make_maps(12, 1, 12, 64, 64, 1)
    local r = selftest(html.head_view(big, {path = tmp("bert_head.html")}))
    print(("head view, 12x12x64 BERT maps: %d lines drawn in %.0f ms; page ready after %d ms, self-test %d ms")
      :format(r.initial.lines, r.draw_ms, r.ms.ready, r.ms.selftest))
    assert.are.same({query = 64, key = 64}, r.tokens)
    assert.are.equal(12, r.layers)
    assert.are.equal(12, r.heads)
    assert.are.equal(expected_lines(big, 1, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), r.initial.lines)
    r = selftest(html.model_view(big, {path = tmp("bert_model.html")}))
    print(("model view, 12x12x64 BERT maps: page ready after %d ms, self-test %d ms"):format(r.ms.ready,
      r.ms.selftest))
    assert.are.equal(144, r.thumbnails)
    assert.are.same({query = 64, key = 64}, r.overlay_tokens)
    assert.are.equal(expected_lines(big, 12, {12}), r.overlay_lines)
  end)

  -- Screenshots against the committed ones, 900x700 pixels.  Identical
  -- here (the same Chromium and fonts give the same pixels); elsewhere
  -- font rasterisation (hinting, antialiasing, subpixel positioning) and
  -- canvas antialiasing may differ.  They move the edges of glyphs and
  -- lines: text covers about 1.3% of the head view's pixels (measured:
  -- 28331 non-white pixels, 19950 of them in the lines' canvas), so even
  -- every glyph pixel changing stays near 1%.  A wrong drawing changes
  -- more: another layer 2.3% of the pixels, another map set 2.6%, the
  -- model view's overlay 83%.  Hence differing < 1% of the pixels (a
  -- channel more than 32 apart) and a mean absolute difference under 2
  -- (of 255; a mostly white page keeps it small, so it only catches gross
  -- changes); the last test checks that the different drawings fail it.
  local TOL_DIFFERING, TOL_MEAN = 0.01, 2
  local SHOTS = {
    {"head", function() return html.head_view(maps, {path = tmp("s_head.html"), tokens = SHOT_TOKENS}) end, ""},
    {"head_layer2", function() return html.head_view(maps, {path = tmp("s_head.html"), tokens = SHOT_TOKENS}) end,
     "#layer=2&heads=2&token=3"},
    {"cross", function()
      return html.head_view(make_maps(1, 1, 2, 4, #SOURCE_TOKENS, 7), {path = tmp("s_cross.html"),
        tokens = {"the", "black", "cat", "</script>"}, source_tokens = SOURCE_TOKENS})
    end, ""},
    {"model", function() return html.model_view(maps, {path = tmp("s_model.html"), tokens = SHOT_TOKENS}) end, ""},
    {"model_open", function() return html.model_view(maps, {path = tmp("s_model.html"), tokens = SHOT_TOKENS}) end,
     "#open=1,2"},
    {"neuron", function()
      attn.manual_seed(5)
      local qs, ks = {attn.randn(1, 2, 4, 16)}, {attn.randn(1, 2, 6, 16)}
      return html.neuron_view({q = qs, k = ks}, {path = tmp("s_neuron.html"), head = 2,
        tokens = {"the", "black", "cat", "sat"}, source_tokens = SOURCE_TOKENS})
    end, "#token=3"},
  }
  local shots = {}
  for _, shot in ipairs(SHOTS) do
    it("screenshot " .. shot[1] .. " matches spec/fixtures/viz/" .. shot[1] .. ".png", function()
      if not have then return pending("chromium not installed") end
      local png = tmp("shot_" .. shot[1] .. ".png")
      chromium("--hide-scrollbars --window-size=900,700 --screenshot=" .. q(png), "file://" .. shot[2]() .. shot[3])
      assert(S.exists(png), "chromium wrote no screenshot")
      shots[shot[1]] = png
      local ref = FIXTURES .. "/" .. shot[1] .. ".png"
      if os.getenv("ATTN_UPDATE_SCREENSHOTS") == "1" then
        os.execute("mkdir -p " .. q(FIXTURES))
        S.writefile(ref, S.readfile(png))
        print("wrote " .. ref)
        return
      end
      assert(S.exists(ref), ref .. " is missing: run this spec with ATTN_UPDATE_SCREENSHOTS=1 to write it")
      local d = plot._png_diff(ref, png)
      assert.are.same({900, 700}, {d.width, d.height})
      print(("screenshot %s: %.5f of the pixels differ, mean difference %.4f"):format(shot[1], d.differing,
        d.mean_abs))
      assert(d.differing < TOL_DIFFERING and d.mean_abs < TOL_MEAN,
        ("%s: %.4f of the pixels differ, mean difference %.3f (tolerance %g, %g); the new one: %s"):format(
          shot[1], d.differing, d.mean_abs, TOL_DIFFERING, TOL_MEAN, png))
    end)
  end

  it("the tolerance tells different drawings apart", function()
    if not have then return pending("chromium not installed") end
    assert(shots.head and shots.head_layer2 and shots.cross and shots.model_open, "the screenshots above were taken")
    for _, pair in ipairs({{"head", "head_layer2"}, {"head", "cross"}, {"model", "model_open"}}) do
      local d = plot._png_diff(shots[pair[1]], shots[pair[2]])
      print(("%s against %s: %.4f of the pixels differ, mean difference %.3f"):format(pair[1], pair[2], d.differing,
        d.mean_abs))
      assert(d.differing >= 2 * TOL_DIFFERING or d.mean_abs >= 2 * TOL_MEAN,
        ("%s against %s: %.4f, %.3f"):format(pair[1], pair[2], d.differing, d.mean_abs))
    end
  end)
end)
