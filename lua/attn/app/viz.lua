-- SPDX-License-Identifier: MIT

--- attn.viz: look inside attention.  Capture every attention map of a
-- forward pass (viz.capture), draw them (interactive HTML views, a static
-- layers x heads grid) and analyse them (rollout, flow, gradient-weighted
-- relevance, head importance).
--
--   local viz = require "attn.viz"                  -- or attn.viz
--   local cap <close> = viz.capture(model)
--   model(ids)
--   viz.head_view(cap:maps(), {path = "heads.html", tokens = tokens})
--   local r = viz.rollout(cap:maps())                -- [B, L, L]
-- @module attn.viz
local capture = require "attn.app.viz_capture"

local viz = {}

viz.capture = capture.capture
viz.Capture = capture.Capture

return viz
