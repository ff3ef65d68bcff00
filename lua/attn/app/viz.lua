-- SPDX-License-Identifier: MIT

--- attn.viz: look inside attention.  Capture every attention map of a
-- forward pass (viz.capture), draw them (interactive HTML views; the
-- static layers x heads grid is attn.plot.attention_grid) and analyse them
-- (rollout, flow, gradient-weighted relevance, head importance).
--
--   local viz = require "attn.viz"                  -- or attn.viz
--   local cap <close> = viz.capture(model)
--   model(ids)
--   viz.head_view(cap:maps(), {path = "heads.html", tokens = tokens})
--   local r = viz.rollout(cap:maps())                -- [B, L, L]
--
-- The parts live in lua/attn/app/: viz_capture.lua (capture),
-- viz_html.lua (head_view, model_view, neuron_view), viz_explain.lua
-- (rollout, flow, relevance, relevance_cross) and viz_heads.lua
-- (head_importance; head masks and prune_heads are the modules' own).
-- @module attn.viz
local viz = {}

for _, part in ipairs({"attn.app.viz_capture", "attn.app.viz_html", "attn.app.viz_explain", "attn.app.viz_heads"}) do
  for name, f in pairs(require(part)) do
    if name:sub(1, 1) ~= "_" then viz[name] = f end
  end
end

return viz
