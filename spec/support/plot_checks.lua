-- SPDX-License-Identifier: MIT
-- What the plot specs check drawings with: a PNG's size from its header,
-- colour-map colours in 0..255 and pixels read back through cairo
-- (attn.plot._pixel_stats).
local plot = require "attn.plot"
local S = require "support.sh"

local M = {}

--- Width, height and byte count of the PNG at path, from its signature
-- and IHDR chunk (asserting both).
function M.png_size(path)
  local s = S.readfile(path)
  assert(s:sub(1, 8) == "\137PNG\r\n\26\n", path .. ": not a PNG signature")
  assert(s:sub(13, 16) == "IHDR", path .. ": no IHDR chunk first")
  local w, h = string.unpack(">I4I4", s, 17)
  return w, h, #s
end

--- The colour of map name at t, r, g, b in 0..255.
function M.cmap255(name, t)
  local r, g, b = plot.colormap(name, t)
  return {math.floor(r * 255 + 0.5), math.floor(g * 255 + 0.5), math.floor(b * 255 + 0.5)}
end

--- Asserts that px's r, g, b are within tol (default 1) of expected's.
function M.assert_rgb(expected, px, tol, what)
  tol = tol or 1
  for k = 1, 3 do
    assert(math.abs(px[k] - expected[k]) <= tol,
      ("%s: expected (%d, %d, %d), got (%d, %d, %d)"):format(what or "pixel", expected[1], expected[2],
        expected[3], px[1], px[2], px[3]))
  end
end

--- The pixel r, g, b, a at x, y of the PNG at path.
function M.pixel(path, x, y) return plot._pixel_stats(path, x, y).pixel end

return M
