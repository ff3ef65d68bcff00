-- SPDX-License-Identifier: MIT

--- attn.viz's analyses of a stack of attention maps: attention rollout and
-- attention flow (Abnar and Zuidema, "Quantifying Attention Flow in
-- Transformers", 2020) and gradient-weighted relevance (Chefer, Gur and
-- Wolf, "Generic Attention-model Explainability for Interpreting Bi-Modal
-- and Encoder-Decoder Transformers", 2021, the self-attention rule).
--
-- maps is a Lua list, first layer first, of float tensors [B, H, L, L]
-- (a 3-d [H, L, L] map is one batch item: the results are then [L, L]);
-- rows are queries, columns keys, each row sums to 1 (masked keys 0).
-- Encoder stacks and decoder self-attention stacks (causal maps) are
-- handled alike.  Every result is a float32 tensor [B, L, L] whose row i
-- tells how much output position i draws on (rollout, flow) or owes to
-- (relevance) each input position; for classification, the row of the
-- [CLS] token.  The results carry no gradient.
--
--   local viz = require "attn.viz"
--   local r = viz.rollout(maps)                          -- [B, L, L]
--   local f = viz.flow(maps, {head_fusion = "max"})
--   local rel = viz.relevance(maps, grads)               -- grads: d output / d maps
-- @module attn.viz
local attn = require "attn.base"
local core = require "attn.core"
local error = core._error -- raises at the user's line
local is_tensor = core.is_tensor

local M = {}

local FUSIONS = {mean = true, max = true, min = true}

local function fmt_shape(s) return "[" .. table.concat(s, ",") .. "]" end

-- opts checked against the names fn knows; nil is no options.
local check_options = attn._misuse.check_options

local function check_flag(fn, v, name, default)
  if v == nil then return default end
  if type(v) ~= "boolean" then error(("%s: %s must be a boolean (got %s)"):format(fn, name, type(v)), 3) end
  return v
end

local function check_fusion(fn, v)
  if v == nil then return "mean" end
  if type(v) ~= "string" or not FUSIONS[v] then
    error(("%s: head_fusion must be \"mean\", \"max\" or \"min\" (got %s)"):format(fn,
      type(v) == "string" and ("%q"):format(v) or type(v)), 3)
  end
  return v
end

local function check_start(fn, v, n)
  if v == nil then return 1 end
  local k = type(v) == "number" and math.tointeger(v) or nil
  if k == nil or k < 1 or k > n then
    error(("%s: start_layer must be an integer from 1 to %d, the number of maps (got %s)"):format(fn, n,
      tostring(v)), 3)
  end
  return k
end

-- The list of maps: a non-empty list of floating tensors of one shape,
-- [B, H, L, L] or [H, L, L], every size at least 1.  Returns the shape
-- {B, H, L} and whether the maps are 3-d.
local function check_maps(fn, maps, name)
  name = name or "maps"
  if is_tensor(maps) then
    error(("%s: %s must be a list of tensors, one a layer (got a tensor %s); for one layer write {map}"):format(
      fn, name, fmt_shape(maps:shape())), 3)
  end
  if type(maps) ~= "table" then
    error(("%s: %s must be a list of tensors [B, H, L, L], one a layer (got %s)"):format(fn, name, type(maps)), 3)
  end
  local n = #maps
  if n == 0 then error(("%s: %s is an empty list (give one map a layer)"):format(fn, name), 3) end
  for k in pairs(maps) do
    if math.type(k) ~= "integer" or k < 1 or k > n then
      error(("%s: %s must be a list (it has the key %s)"):format(fn, name, tostring(k)), 3)
    end
  end
  local first
  for l = 1, n do
    local m = maps[l]
    if not is_tensor(m) then
      error(("%s: %s[%d] must be a tensor [B, H, L, L] (got %s)"):format(fn, name, l, type(m)), 3)
    end
    local s = m:shape()
    local d = #s
    if d ~= 3 and d ~= 4 then
      error(("%s: %s[%d] has shape %s; a map is [B, H, L, L] or [H, L, L]"):format(fn, name, l, fmt_shape(s)), 3)
    end
    if not m:is_floating_point() then
      error(("%s: %s[%d] has dtype %s; maps are floating (float32)"):format(fn, name, l, tostring(m.dtype)), 3)
    end
    if s[d] ~= s[d - 1] then
      error(("%s: %s[%d] has shape %s: its queries (%d) and keys (%d) differ; %s needs self-attention maps "
        .. "(L = S), not cross attention"):format(fn, name, l, fmt_shape(s), s[d - 1], s[d], fn), 3)
    end
    for i = 1, d do
      if s[i] < 1 then
        error(("%s: %s[%d] has shape %s: every size must be at least 1"):format(fn, name, l, fmt_shape(s)), 3)
      end
    end
    if first == nil then
      first = s
    elseif #s ~= #first or s[1] ~= first[1] or s[2] ~= first[2] or s[3] ~= first[3] or s[4] ~= first[4] then
      error(("%s: %s[%d] has shape %s, expected %s like %s[1]"):format(fn, name, l, fmt_shape(s),
        fmt_shape(first), name), 3)
    end
  end
  local d = #first
  if d == 3 then return {1, first[1], first[2]}, true end
  return {first[1], first[2], first[3]}, false
end

-- The map as a float32 [B, H, L, L] tensor without a graph.
local function as4(m, three)
  m = m:detach()
  if m.dtype ~= attn.float32 then m = m:float() end
  if three then m = m:unsqueeze(1) end
  return m
end

-- The fused heads of a [B, H, L, L] map: [B, L, L].
local function fuse(m, how)
  if how == "mean" then return m:mean(2) end
  if how == "max" then return (m:max(2)) end
  return (m:min(2))
end

-- The residual-augmented matrix (W + I) / rowsum(W + I), which is
-- 0.5 W + 0.5 I renormalised; W itself without the residual.
local function augment(w, residual, L)
  if not residual then return w end
  local a = w + attn.eye(L)
  return a / a:sum(3, true)
end

--- rollout(maps [, opts]) -> [B, L, L]: attention rollout (Abnar and
-- Zuidema 2020).  Each layer's heads are fused (opts.head_fusion: "mean",
-- the default, "max" or "min"); with the residual connection (opts.residual,
-- default true) the layer's matrix is A = 0.5 W + 0.5 I, rows renormalised
-- ((W + I) / rowsum(W + I), as their compute_joint_attention), without it
-- A = W.  The rollout is the product R = A_L ... A_s, the first layer
-- applied first, from opts.start_layer = s (1-based, default 1).  Row i is
-- output position i's attribution over the input positions; with the
-- residual and mean fusion each row sums to 1.  Causal (decoder) maps work
-- the same way: R is then lower triangular.
-- @tparam {Tensor,...} maps [B, H, L, L] or [H, L, L] maps, first layer first
-- @tparam[opt] table opts head_fusion ("mean" | "max" | "min"), residual (boolean), start_layer (1-based)
-- @treturn Tensor float32 [B, L, L] ([L, L] for 3-d maps)
-- @usage
-- local viz = require "attn.viz"
-- local maps = {attn.rand(1, 2, 4, 4):softmax(-1), attn.rand(1, 2, 4, 4):softmax(-1)}
-- local r = viz.rollout(maps, {head_fusion = "max"})
-- print(r.shape, r[1]:sum(2))                                     -- attn.Size([1, 4, 4]), rows sum to 1
function M.rollout(maps, opts)
  local fn = "rollout"
  local s, three = check_maps(fn, maps)
  opts = check_options(fn, opts, {"head_fusion", "residual", "start_layer"})
  local how = check_fusion(fn, opts.head_fusion)
  local residual = check_flag(fn, opts.residual, "residual", true)
  local start = check_start(fn, opts.start_layer, #maps)
  local L = s[3]
  local r = attn.no_grad(function()
    local acc
    for l = start, #maps do
      local a = augment(fuse(as4(maps[l], three), how), residual, L)
      acc = acc and attn.matmul(a, acc) or a
    end
    return acc:contiguous()
  end)
  if three then r = r:squeeze(1) end
  return r
end

-- The layers' augmented fused matrices for batch item b as flat Lua
-- arrays of doubles: A[k][(u - 1) * L + v], u the query (upper node), v the
-- key (lower node); k = 1 is the first layer used.  Read once from the
-- tensors; the fusion and the residual are computed in double precision.
local function flow_capacities(fn, maps, start, how, residual, three)
  local layers = {}
  for l = start, #maps do
    local m = as4(maps[l], three):contiguous()
    local s = m:shape()
    local B, H, L = s[1], s[2], s[3]
    local v = m:reshape(-1):totable()
    local per = {}
    local LL = L * L
    for b = 1, B do
      local a = {}
      local base = (b - 1) * H * LL
      for e = 1, LL do
        local x = v[base + e]
        if how == "mean" then
          for h = 2, H do x = x + v[base + (h - 1) * LL + e] end
          x = x / H
        elseif how == "max" then
          for h = 2, H do
            local y = v[base + (h - 1) * LL + e]
            if y > x then x = y end
          end
        else
          for h = 2, H do
            local y = v[base + (h - 1) * LL + e]
            if y < x then x = y end
          end
        end
        if not (x >= 0 and x < math.huge) then
          error(("%s: maps[%d] gives %s at batch %d, query %d, key %d (heads fused by %s): attention flow needs "
            .. "finite, non-negative weights"):format(fn, l, tostring(x), b, (e - 1) // L + 1, (e - 1) % L + 1, how), 3)
        end
        a[e] = x
      end
      if residual then
        for u = 1, L do
          local row = (u - 1) * L
          local sum = 1.0
          for k = 1, L do sum = sum + a[row + k] end
          for k = 1, L do
            local x = a[row + k]
            if k == u then x = x + 1.0 end
            a[row + k] = x / sum
          end
        end
      end
      per[b] = a
    end
    layers[#layers + 1] = per
  end
  return layers
end

local EPS = 1e-13 -- residual capacities and excesses below this count as 0

-- Maximum-flow values from top node src to every bottom node of the
-- layered graph whose n layers of edges have the capacities C (the bottom
-- layer first), into out[src][j].
--
-- Push-relabel (highest label first, with the gap heuristic), phase one
-- only: the value is the excess that reaches the sink.  The sinks are taken
-- one after the other on one preflow: when the sink moves from j to j', the
-- flow into j is taken back (it becomes excess of the layer-1 nodes, as
-- Hao and Orlin turn a finished sink into a source), the source's edges
-- stay saturated, and the labels restart at each node's layer, which is a
-- valid labelling for any bottom sink (every residual edge runs one layer
-- down, or up).  The other bottom nodes hold no flow and get a label that
-- no push can reach.
-- C holds the capacities, flat over the layers: edge (l, u) -> (l - 1, v)
-- at (l - 1) * L * L + (u - 1) * L + v; work holds the arrays it reuses.
local function flows_from(C, n, L, src, out, work)
  local V = n * L + 1 -- the nodes that can hold flow: layers 0 .. n-1 and the source
  local UNREACH = V + 1
  -- node ids: layer l (0 = bottom) position u (1..L) -> l * L + u
  local F = work.F -- the flow, laid out as C
  local LL = L * L
  for e = 1, n * LL do F[e] = 0.0 end
  local nodes = n * L -- ids 1 .. n * L: layers 0 .. n-1
  local ex, d, cur, nxt = work.ex, work.d, work.cur, work.nxt
  for id = 1, nodes do ex[id] = 0.0; d[id] = 0; cur[id] = 1; nxt[id] = 0 end
  -- saturate the source's edges (top layer n, row src)
  local top = (n - 1) * LL + (src - 1) * L
  local base_below = (n - 1) * L
  for v = 1, L do
    local c = C[top + v]
    F[top + v] = c
    ex[base_below + v] = ex[base_below + v] + c
  end
  local bucket, count = work.bucket, work.count
  local row_out = out[src]
  local out_cap = 0.0
  for v = 1, L do out_cap = out_cap + C[top + v] end
  local prev = nil
  for sink = 1, L do
    if prev then
      -- the flow into the last sink goes back to its layer-1 senders
      for u = 1, L do
        local e = (u - 1) * L + prev
        local f = F[e]
        if f > 0 then
          F[e] = 0.0
          ex[L + u] = ex[L + u] + f
        end
      end
      ex[prev] = 0.0
    end
    prev = sink
    -- labels: the layer; the sink 0; the other bottom nodes out of reach
    for id = 1, L do d[id] = UNREACH; ex[id] = 0.0 end
    d[sink] = 0
    for l = 1, n - 1 do
      local b = l * L
      for u = 1, L do d[b + u] = l; cur[b + u] = 1 end
    end
    for k = 0, V do bucket[k] = 0; count[k] = 0 end
    for l = 1, n - 1 do count[l] = L end
    local maxd = 0
    for id = L + 1, nodes do
      if ex[id] > EPS then
        local k = d[id]
        nxt[id] = bucket[k]; bucket[k] = id
        if k > maxd then maxd = k end
      end
    end
    -- discharge the highest active node until none is left below V
    -- the flow cannot pass the source's capacity nor the sink's
    local into = 0.0
    for k = 1, L do into = into + C[(k - 1) * L + sink] end
    local limit = (into < out_cap and into or out_cap) - EPS
    local done = false
    while maxd > 0 and not done do
      local u = bucket[maxd]
      if u == 0 then
        maxd = maxd - 1
      else
        bucket[maxd] = nxt[u]
      end
      if u ~= 0 and d[u] < V then -- a node lifted to V by a gap waits in its old bucket: skip it
        local l = (u - 1) // L -- its layer (1 .. n-1)
        local pos = u - l * L
        local down_off = (l - 1) * LL + (pos - 1) * L -- edges to layer l - 1
        local below = (l - 1) * L
        local up_off = l * LL + pos -- edge (l + 1, w) -> (l, pos) at up_off + (w - 1) * L
        local above = (l + 1) * L
        local has_up = l + 1 < n -- edges back to the source are not used in phase one
        local e_u = ex[u]
        local du = d[u]
        local L2 = 2 * L
        -- arcs 1..L: up to node w of layer l + 1 (the reverse of its flow
        -- into u); arcs L+1..2L: down to node v of layer l - 1
        while true do
          local arc = cur[u]
          local target = du - 1
          if arc <= L then
            -- the nodes above are labelled at least l + 1: none is admissible below du = l + 2
            if has_up and du >= l + 2 then
              while arc <= L do
                if d[above + arc] == target then
                  local e = up_off + (arc - 1) * L
                  local r = F[e]
                  if r > EPS then
                    local delta = e_u < r and e_u or r
                    F[e] = r - delta
                    e_u = e_u - delta
                    local v = above + arc
                    local xv = ex[v]
                    if xv <= EPS then
                      nxt[v] = bucket[target]; bucket[target] = v
                      if target > maxd then maxd = target end
                    end
                    ex[v] = xv + delta
                    if e_u <= EPS then break end
                  end
                end
                arc = arc + 1
              end
            else
              arc = L + 1
            end
          end
          if e_u > EPS then
            -- layer 1: of the bottom nodes only the sink can take flow
            if l == 1 and arc < L + sink then arc = L + sink end
            local last = l == 1 and L + sink or L2
            while arc <= last do
              local k = arc - L
              local v = below + k
              if d[v] == target then
                local e = down_off + k
                local r = C[e] - F[e]
                if r > EPS then
                  local delta = e_u < r and e_u or r
                  F[e] = F[e] + delta
                  e_u = e_u - delta
                  local xv = ex[v]
                  if v > L and xv <= EPS then
                    nxt[v] = bucket[target]; bucket[target] = v
                    if target > maxd then maxd = target end
                  end
                  ex[v] = xv + delta
                  if v == sink and xv + delta >= limit then
                    done = true -- the sink's edges or the source's are full: no more can come
                    break
                  end
                  if e_u <= EPS then break end
                end
              end
              arc = arc + 1
            end
          end
          cur[u] = arc
          if e_u <= EPS or done then break end
          -- no admissible arc is left: relabel, one more than the lowest
          -- residual neighbour.  Every label below V has its layer's parity
          -- (the labels start at the layer, edges join adjacent layers) and
          -- no residual neighbour has du - 1, so du + 1 is the lowest there
          -- can be: the scan stops when it finds it.  The scan follows the
          -- arcs' order and keeps the first lowest, so the arcs before it are
          -- not admissible: the current arc moves there.
          local low = du + 1
          local best, at = UNREACH, L2 + 1
          if has_up then
            for w = 1, L do
              local dw = d[above + w]
              if dw < best and F[up_off + (w - 1) * L] > EPS then
                best, at = dw, w
                if dw <= low then break end
              end
            end
          end
          if best > low then
            for k = l == 1 and sink or 1, l == 1 and sink or L do
              local dv = d[below + k]
              if dv < best and C[down_off + k] - F[down_off + k] > EPS then
                best, at = dv, L + k
                if dv <= low then break end
              end
            end
          end
          local old = du
          du = best + 1
          if du > V then du = V end
          count[old] = count[old] - 1
          if count[old] == 0 and old < V then
            -- gap: nothing above old can reach the sink any more
            for id = L + 1, nodes do
              local k = d[id]
              if k > old and k < V then
                count[k] = count[k] - 1
                d[id] = V
              end
            end
            du = V
          end
          d[u] = du
          if du >= V then break end
          count[du] = count[du] + 1
          cur[u] = at
        end
        ex[u] = e_u
        if e_u > EPS and du < V then
          -- still active (left the loop with a relabel below V): back into its bucket
          nxt[u] = bucket[du]; bucket[du] = u
          if du > maxd then maxd = du end
        end
      end
    end
    row_out[sink] = ex[sink]
  end
end

--- flow(maps [, opts]) -> [B, L, L]: attention flow (Abnar and Zuidema
-- 2020).  The maps make a layered graph: L + 1 layers of L nodes (the
-- input tokens at the bottom, one layer above each map), the edge from
-- node u of layer l down to node v of layer l - 1 with capacity A_l[u, v],
-- the layer's fused, residual-augmented matrix of rollout (same
-- head_fusion, residual and start_layer options; as the authors' code, the
-- residual-added, row-normalised matrices are the capacities).  Entry
-- [b, i, j] is the value of the maximum flow from output node i (top
-- layer) to input node j (bottom layer), computed exactly (a push-relabel
-- max-flow per pair, in double precision).  Values lie in [0, 1] when the
-- rows of A sum to 1.  opts.normalize = true divides each row by its sum,
-- as the authors' compute_flows does (default false: the flow values).
-- The work grows with L^2 max-flows on n L^2 edges, for each batch item:
-- 12 layers of 12 heads and 64 tokens took 2.3 s of CPU when it was
-- written (spec/viz_explain_spec.lua prints the time); Lua code, so a
-- sandbox's instruction budget stops it like any loop.
-- @tparam {Tensor,...} maps [B, H, L, L] or [H, L, L] maps, first layer first
-- @tparam[opt] table opts head_fusion, residual, start_layer (as rollout), normalize (boolean)
-- @treturn Tensor float32 [B, L, L] ([L, L] for 3-d maps)
-- @usage
-- local viz = require "attn.viz"
-- local maps = {attn.rand(2, 4, 4):softmax(-1), attn.rand(2, 4, 4):softmax(-1)}
-- local f = viz.flow(maps)
-- print(f.shape, f:max())                                         -- attn.Size([4, 4]), at most 1
function M.flow(maps, opts)
  local fn = "flow"
  local s, three = check_maps(fn, maps)
  opts = check_options(fn, opts, {"head_fusion", "residual", "start_layer", "normalize"})
  local how = check_fusion(fn, opts.head_fusion)
  local residual = check_flag(fn, opts.residual, "residual", true)
  local start = check_start(fn, opts.start_layer, #maps)
  local normalize = check_flag(fn, opts.normalize, "normalize", false)
  local B, L = s[1], s[3]
  local layers = flow_capacities(fn, maps, start, how, residual, three)
  local n = #layers
  local data = {}
  for b = 1, B do
    local caps = {}
    for k = 1, n do caps[k] = layers[k][b] end
    local out = {}
    for i = 1, L do out[i] = {} end
    if n == 1 then
      local a = caps[1]
      for i = 1, L do
        for j = 1, L do out[i][j] = a[(i - 1) * L + j] end
      end
    else
      local C, LL = {}, L * L
      for k = 1, n do
        local c, off = caps[k], (k - 1) * LL
        for e = 1, LL do C[off + e] = c[e] end
      end
      local work = {F = {}, ex = {}, d = {}, cur = {}, nxt = {}, bucket = {}, count = {}}
      for i = 1, L do flows_from(C, n, L, i, out, work) end
    end
    for i = 1, L do
      local row = out[i]
      local sum = 1.0
      if normalize then
        sum = 0.0
        for j = 1, L do sum = sum + row[j] end
        if sum <= 0 then sum = 1.0 end
      end
      local base = ((b - 1) * L + (i - 1)) * L
      for j = 1, L do data[base + j] = row[j] / sum end
    end
  end
  local r = attn.tensor(data, {dtype = attn.float32})
  if three then return r:reshape(L, L) end
  return r:reshape(B, L, L)
end

--- relevance(maps, grads [, opts]) -> [B, L, L]: gradient-weighted
-- attention relevance (Chefer, Gur and Wolf 2021, the rule for
-- self-attention, their eq. 5-6).  grads are d(chosen output)/d(map), the
-- same shapes as maps (a capture records them after a backward of the
-- output; or make the maps leaves that require grad, or call retain_grad
-- on them, before the backward).  R starts as the identity; for each layer
-- from opts.start_layer (1-based, default 1) to the last, Abar =
-- mean over heads of (grad * map) clamped at 0 (clamped before the mean),
-- and R = R + Abar @ R.  Row i of R is the relevance of each token for
-- token i (for classification, the row of the [CLS] token); decoder
-- self-attention stacks use the same rule.
-- @tparam {Tensor,...} maps [B, H, L, L] or [H, L, L] maps, first layer first
-- @tparam {Tensor,...} grads d(output)/d(map), one a map, the same shapes
-- @tparam[opt] table opts start_layer (1-based)
-- @treturn Tensor float32 [B, L, L] ([L, L] for 3-d maps)
-- @usage
-- local viz = require "attn.viz"
-- local scores = attn.randn(1, 2, 3, 3):requires_grad_()
-- local map = scores:softmax(-1)
-- map:retain_grad()
-- local v = attn.randn(1, 2, 3, 1)
-- attn.matmul(map, v):select(3, 1):sum():backward()           -- the chosen output: token 1's values
-- local rel = viz.relevance({map}, {map.grad})
-- print(rel.shape)                                                -- attn.Size([1, 3, 3])
function M.relevance(maps, grads, opts)
  local fn = "relevance"
  local s, three = check_maps(fn, maps)
  local gs = check_maps(fn, grads, "grads")
  if #grads ~= #maps or gs[1] ~= s[1] or gs[2] ~= s[2] or gs[3] ~= s[3]
      or grads[1]:dim() ~= maps[1]:dim() then
    error(("%s: grads must match maps: %d grads of shape %s for %d maps of shape %s"):format(fn, #grads,
      fmt_shape(grads[1]:shape()), #maps, fmt_shape(maps[1]:shape())), 2)
  end
  opts = check_options(fn, opts, {"start_layer"})
  local start = check_start(fn, opts.start_layer, #maps)
  local B, L = s[1], s[3]
  local r = attn.no_grad(function()
    local acc = attn.eye(L):expand(B, L, L):contiguous()
    for l = start, #maps do
      local cam = (as4(grads[l], three) * as4(maps[l], three)):clamp(0):mean(2)
      acc = acc + attn.matmul(cam, acc)
    end
    return acc
  end)
  if three then r = r:squeeze(1) end
  return r
end

-- A {maps = list, grads = list} argument of relevance_cross: the lists
-- checked (same length, maps and grads of one shape, 4-d); nil when empty
-- and allowed.  Returns the maps' shape.
local function check_pair(fn, p, name, square, allow_empty)
  if type(p) ~= "table" or is_tensor(p) or getmetatable(p) ~= nil then
    error(("%s: %s must be a table {maps = {...}, grads = {...}} (got %s)"):format(fn, name,
      is_tensor(p) and "a tensor" or type(p)), 3)
  end
  for k in pairs(p) do
    if k ~= "maps" and k ~= "grads" then
      error(("%s: %s has the key %s; it holds maps and grads"):format(fn, name, tostring(k)), 3)
    end
  end
  local maps, grads = p.maps, p.grads
  if allow_empty and type(maps) == "table" and not is_tensor(maps) and next(maps) == nil
      and type(grads) == "table" and not is_tensor(grads) and next(grads) == nil then
    return nil
  end
  local where = name .. ".maps"
  for _, x in ipairs({{maps, where}, {grads, name .. ".grads"}}) do
    local list, what = x[1], x[2]
    if is_tensor(list) or type(list) ~= "table" or #list == 0 then
      error(("%s: %s must be a non-empty list of tensors [B, H, L, S], one a layer (got %s)"):format(fn, what,
        is_tensor(list) and "a tensor" or (type(list) == "table" and "an empty list" or type(list))), 3)
    end
  end
  if #grads ~= #maps then
    error(("%s: %s has %d maps but %d grads"):format(fn, name, #maps, #grads), 3)
  end
  local first
  for l = 1, #maps do
    for _, x in ipairs({{maps[l], where}, {grads[l], name .. ".grads"}}) do
      local m, what = x[1], x[2]
      if not is_tensor(m) then
        error(("%s: %s[%d] must be a tensor [B, H, L, S] (got %s)"):format(fn, what, l, type(m)), 3)
      end
      local s = m:shape()
      if #s ~= 4 then
        error(("%s: %s[%d] has shape %s; relevance_cross takes [B, H, L, S] maps"):format(fn, what, l,
          fmt_shape(s)), 3)
      end
      if not m:is_floating_point() then
        error(("%s: %s[%d] has dtype %s; maps are floating (float32)"):format(fn, what, l, tostring(m.dtype)), 3)
      end
      for i = 1, 4 do
        if s[i] < 1 then
          error(("%s: %s[%d] has shape %s: every size must be at least 1"):format(fn, what, l, fmt_shape(s)), 3)
        end
      end
      if square and s[3] ~= s[4] then
        error(("%s: %s[%d] has shape %s: self-attention maps are [B, H, L, L]"):format(fn, what, l,
          fmt_shape(s)), 3)
      end
      if first == nil then
        first = s
      elseif s[1] ~= first[1] or s[2] ~= first[2] or s[3] ~= first[3] or s[4] ~= first[4] then
        error(("%s: %s[%d] has shape %s, expected %s like %s[1]"):format(fn, what, l, fmt_shape(s),
          fmt_shape(first), where), 3)
      end
    end
  end
  return first
end

-- Chefer et al.'s handle_residual (eq. 8-9): (R - I) with each row
-- divided by its sum, then + I; a row of R - I that sums to 0 stays 0.
local function normalized(r, L)
  local eye = attn.eye(L)
  local h = r - eye
  local s = h:sum(3, true)
  s = s:masked_fill(s:eq(0), 1)
  return h / s + eye
end

-- mean over heads of (grad * map)^+ : [B, L, S]
local function cam(m, g)
  return (g:detach():float() * m:detach():float()):clamp(0):mean(2)
end

--- relevance_cross(source, target, cross [, opts]) -> R_ts [B, T, S],
-- R_tt [B, T, T], R_ss [B, S, S]: gradient-weighted relevance of an
-- encoder-decoder transformer (Chefer, Gur and Wolf 2021, the rules of
-- their eq. 6-10 as their DETR code applies them).  source = {maps =,
-- grads =} holds the encoder's self-attention maps [B, H, S, S] and their
-- grads (empty lists: no encoder, R_ss = I); target = {maps =, grads =} the
-- decoder's self-attention [B, H, T, T]; cross = {maps =, grads =} the
-- decoder's cross attention [B, H, T, S] (queries the target tokens, keys
-- the source tokens), one of each per decoder layer, first layer first.
-- grads are d(chosen output)/d(map).
--
-- R_ss follows the self-attention rule over the encoder (relevance).  Then
-- R_tt = I, R_ts = 0 and, for each decoder layer, its self-attention
-- (Abar = mean_h (grad * map)^+): R_tt = R_tt + Abar R_tt, R_ts = R_ts +
-- Abar R_ts; then its cross attention (Abar of the cross map, [T, S]):
-- R_ts = R_ts + norm(R_tt)^T Abar norm(R_ss) (eq. 10), where norm(R) =
-- (R - I) with rows divided by their sums, + I (eq. 8-9; a row summing to
-- 0 stays 0 where torch gives NaN).  opts.normalize = false uses R_tt and
-- R_ss as they are; opts.self_in_rule_10 = false adds Abar alone.  Row t of
-- R_ts is the relevance of each source token for target token t.
-- Eq. 11 (co-attention, where the source also attends to the target, as in
-- LXMERT) is not covered: in an encoder-decoder it adds nothing.
-- @tparam table source {maps = {...}, grads = {...}}: encoder self-attention [B, H, S, S] (may be empty)
-- @tparam table target {maps = {...}, grads = {...}}: decoder self-attention [B, H, T, T]
-- @tparam table cross {maps = {...}, grads = {...}}: decoder cross attention [B, H, T, S]
-- @tparam[opt] table opts normalize (default true), self_in_rule_10 (default true)
-- @treturn Tensor R_ts float32 [B, T, S]
-- @treturn Tensor R_tt float32 [B, T, T]
-- @treturn Tensor R_ss float32 [B, S, S]
-- @usage
-- local viz = require "attn.viz"
-- local function pair(L, S) return {maps = {attn.rand(1, 2, L, S):softmax(-1)}, grads = {attn.randn(1, 2, L, S)}} end
-- local r_ts, r_tt = viz.relevance_cross(pair(5, 5), pair(3, 3), pair(3, 5))
-- print(r_ts.shape, r_tt.shape)                                   -- attn.Size([1, 3, 5]) attn.Size([1, 3, 3])
function M.relevance_cross(source, target, cross, opts)
  local fn = "relevance_cross"
  local ss = check_pair(fn, source, "source", true, true)
  local ts = check_pair(fn, target, "target", true, false)
  local cs = check_pair(fn, cross, "cross", false, false)
  opts = check_options(fn, opts, {"normalize", "self_in_rule_10"})
  local normalize = check_flag(fn, opts.normalize, "normalize", true)
  local rule10 = check_flag(fn, opts.self_in_rule_10, "self_in_rule_10", true)
  local B, T, S = cs[1], cs[3], cs[4]
  if #target.maps ~= #cross.maps then
    error(("%s: target has %d layers but cross has %d (one self-attention and one cross attention a decoder "
      .. "layer)"):format(fn, #target.maps, #cross.maps), 2)
  end
  if ts[1] ~= B or ts[3] ~= T then
    error(("%s: target.maps[1] has shape %s but cross.maps[1] has %s: the batch and the target length T must "
      .. "agree"):format(fn, fmt_shape(ts), fmt_shape(cs)), 2)
  end
  if ss and (ss[1] ~= B or ss[3] ~= S) then
    error(("%s: source.maps[1] has shape %s but cross.maps[1] has %s: the batch and the source length S must "
      .. "agree"):format(fn, fmt_shape(ss), fmt_shape(cs)), 2)
  end
  return attn.no_grad(function()
    local r_ss = attn.eye(S):expand(B, S, S):contiguous()
    if ss then
      for l = 1, #source.maps do
        r_ss = r_ss + attn.matmul(cam(source.maps[l], source.grads[l]), r_ss)
      end
    end
    local r_tt = attn.eye(T):expand(B, T, T):contiguous()
    local r_ts = attn.zeros(B, T, S)
    for l = 1, #target.maps do
      local a = cam(target.maps[l], target.grads[l])
      r_tt, r_ts = r_tt + attn.matmul(a, r_tt), r_ts + attn.matmul(a, r_ts)
      a = cam(cross.maps[l], cross.grads[l])
      if rule10 then
        local tt, sn = r_tt, r_ss
        if normalize then tt, sn = normalized(r_tt, T), normalized(r_ss, S) end
        r_ts = r_ts + attn.matmul(tt:transpose(2, 3), attn.matmul(a, sn))
      else
        r_ts = r_ts + a
      end
    end
    return r_ts, r_tt, r_ss
  end)
end

-- the signatures (attn/signature.lua): the options are keywords the
-- functions read themselves
require("attn.signature").declare(M, "viz.", {
  rollout = "native: maps, /, *, head_fusion='mean', residual=true, start_layer=1",
  flow = "native: maps, /, *, head_fusion='mean', residual=true, start_layer=1, normalize=false",
  relevance = "native: maps, grads, /, *, start_layer=1",
  relevance_cross = "native: source, target, cross, /, *, normalize=true, self_in_rule_10=true",
})

return M
