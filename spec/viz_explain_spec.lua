-- SPDX-License-Identifier: MIT
-- Attention rollout, attention flow (Abnar and Zuidema, 2020) and
-- gradient-weighted relevance (Chefer, Gur and Wolf, 2021) of
-- lua/attn/app/viz_explain.lua (issue 32, section 3), against torch 1.13:
-- spec/fixtures/viz_explain.lua, written by
-- scripts/fixtures/gen_viz_explain.py (rollout and relevance in torch, flow
-- with an Edmonds-Karp max-flow written there).  Every result compares
-- within 1e-5 (absolute); the fixture is committed: no torch needed.
-- Flow is also checked against a plain Edmonds-Karp written below on random
-- graphs (sparse, causal, without the residual), and its time on 12 layers
-- of 12 heads and 64 tokens is printed (not asserted).
local attn = require "attn"
local explain = require "attn.app.viz_explain"
local fx = require "support.fixture"

local FX = fx.load("viz_explain")
local TOL = 1e-5
local worst = {} -- kind -> largest |difference| with the fixture

local function close(t, f, what)
  local got, e = fx.flat(t), f.data
  local d = 0
  for i = 1, #e do d = math.max(d, math.abs(got[i] - e[i])) end
  local kind = what:match("^%a+")
  worst[kind] = math.max(worst[kind] or 0, d)
  assert.are.equal("attn.float32", tostring(t.dtype))
  return fx.assert_close(t, f, TOL, 0, what)
end

local function tensors(list)
  local out = {}
  for i, f in ipairs(list) do out[i] = fx.tensor(f) end
  return out
end

-- the fixture's key ("max_nores", "mean_res_start2", ...) as options
local function key_opts(key)
  local how, res = key:match("^(%a+)_(%a+)")
  return {head_fusion = how, residual = res == "res", start_layer = key:find("start2", 1, true) and 2 or nil,
    normalize = key:find("normalized", 1, true) and true or nil}
end

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

local CASES = {"enc", "dec", "single", "wide"}

describe("viz rollout, flow and relevance against torch", function()
  for _, name in ipairs(CASES) do
    local case = FX[name]
    for _, key in ipairs(sorted_keys(case.rollout or {})) do
      it(name .. ": rollout " .. key, function()
        local o = key_opts(key)
        o.normalize = nil
        close(explain.rollout(tensors(case.maps), o), case.rollout[key], "rollout " .. name .. " " .. key)
      end)
    end
    for _, key in ipairs(sorted_keys(case.flow or {})) do
      it(name .. ": flow " .. key, function()
        close(explain.flow(tensors(case.maps), key_opts(key)), case.flow[key], "flow " .. name .. " " .. key)
      end)
    end
    for _, key in ipairs(sorted_keys(case.relevance or {})) do
      it(name .. ": relevance " .. key, function()
        close(explain.relevance(tensors(case.maps), tensors(case.grads),
          {start_layer = key == "start2" and 2 or nil}), case.relevance[key], "relevance " .. name .. " " .. key)
      end)
    end
  end

  -- the fixture's chain rebuilt with attn's autograd: the maps are leaves,
  -- their grads come from a backward of the chosen output
  for _, name in ipairs({"enc", "dec", "single"}) do
    it(name .. ": grads from a backward, then relevance", function()
      local case = FX[name]
      local maps = tensors(case.maps)
      for _, m in ipairs(maps) do m:requires_grad_(true) end
      local x = fx.tensor(case.chain.x)
      local B, L, D = x:shape()[1], x:shape()[2], x:shape()[3]
      local H = maps[1]:shape()[maps[1]:dim() - 2]
      local h = x
      for l, m in ipairs(maps) do
        local m4 = m:dim() == 4 and m or m:unsqueeze(1)
        local xh = h:reshape(B, L, H, D // H):permute(1, 3, 2, 4)
        local o = attn.matmul(m4, xh):permute(1, 3, 2, 4):reshape(B, L, D)
        h = attn.matmul(o, fx.tensor(case.chain.W[l])):tanh()
      end
      local y = (h:select(2, 1) * fx.tensor(case.chain.w)):sum()
      assert.is_true(math.abs(y:item() - case.chain.y.data[1]) <= TOL)
      y:backward()
      local grads = {}
      for l, m in ipairs(maps) do
        grads[l] = m.grad
        close(m.grad, case.grads[l], "grads " .. name .. " " .. l)
      end
      local r = explain.relevance(maps, grads)
      assert.is_false(r.requires_grad)
      close(r, case.relevance.all, "relevance " .. name .. " from attn's grads")
    end)
  end
end)

describe("viz.relevance_cross (encoder-decoder rules) against torch", function()
  local c = FX.cross
  local function pairs_of()
    return {maps = tensors(c.source), grads = tensors(c.source_grads)},
      {maps = tensors(c.target), grads = tensors(c.target_grads)},
      {maps = tensors(c.cross), grads = tensors(c.cross_grads)}
  end
  for _, v in ipairs({{"default", {}}, {"no_normalize", {normalize = false}},
                      {"no_self_in_rule_10", {self_in_rule_10 = false}}}) do
    it(v[1], function()
      local src, tgt, crs = pairs_of()
      local ts, tt, ss = explain.relevance_cross(src, tgt, crs, v[2])
      close(ts, c.results[v[1]].ts, "cross " .. v[1] .. " R_ts")
      close(tt, c.results[v[1]].tt, "cross " .. v[1] .. " R_tt")
      close(ss, c.results[v[1]].ss, "cross " .. v[1] .. " R_ss")
    end)
  end

  it("closed forms: identity self-attention, no encoder", function()
    -- target self map I with grads 1: R_tt = 2 I, norm(R_tt) = 2 I; no
    -- encoder: R_ss = I, norm(I) = I (its zero rows stay 0); the cross map
    -- m with grads 1 gives Abar = m, so R_ts = (2 I)^T m I = 2 m
    local m = attn.rand(2, 1, 3, 5):softmax(-1)
    local eye = attn.eye(3):expand(2, 1, 3, 3):contiguous()
    local ts, tt, ss = explain.relevance_cross({maps = {}, grads = {}}, {maps = {eye}, grads = {attn.ones(2, 1, 3, 3)}},
      {maps = {m}, grads = {attn.ones(2, 1, 3, 5)}})
    assert.is_true((ts - m:squeeze(2) * 2):abs():max():item() <= 1e-6)
    assert.is_true((tt - attn.eye(3) * 2):abs():max():item() == 0)
    assert.is_true((ss - attn.eye(5)):abs():max():item() == 0)
    -- grads of -1 on the cross map: nothing flows, R_ts = 0
    ts = explain.relevance_cross({maps = {}, grads = {}}, {maps = {eye}, grads = {attn.ones(2, 1, 3, 3)}},
      {maps = {m}, grads = {-attn.ones(2, 1, 3, 5)}})
    assert.are.equal(0, ts:abs():max():item())
  end)

  it("argument errors name the function, the argument and the shapes", function()
    local src, tgt, crs = pairs_of()
    local function raises(pattern, ...)
      local ok, err = pcall(explain.relevance_cross, ...)
      assert.is_false(ok)
      assert.matches(pattern, tostring(err), 1, true)
    end
    raises("relevance_cross: source must be a table {maps = {...}, grads = {...}} (got a tensor)", attn.ones(2), tgt,
      crs)
    raises("relevance_cross: target.maps must be a non-empty list of tensors [B, H, L, S], one a layer (got an "
      .. "empty list)", src, {maps = {}, grads = {}}, crs)
    raises("relevance_cross: cross has 2 maps but 1 grads", src, tgt, {maps = crs.maps, grads = {crs.grads[1]}})
    raises("relevance_cross: target has 2 layers but cross has 1", src, tgt,
      {maps = {crs.maps[1]}, grads = {crs.grads[1]}})
    raises("relevance_cross: target.maps[1] has shape [2,2,4,5]: self-attention maps are [B, H, L, L]", src,
      crs, crs)
    raises("relevance_cross: source.maps[1] has shape [2,2,5,5] but cross.maps[1] has [2,2,4,3]", src, tgt,
      {maps = {attn.rand(2, 2, 4, 3), attn.rand(2, 2, 4, 3)}, grads = {attn.rand(2, 2, 4, 3), attn.rand(2, 2, 4, 3)}})
    raises("relevance_cross: cross.grads[2] has shape [2,2,4,4], expected [2,2,4,5] like cross.maps[1]", src, tgt,
      {maps = crs.maps, grads = {crs.grads[1], attn.rand(2, 2, 4, 4)}})
    raises("relevance_cross: target has the key map; it holds maps and grads", src, {map = 1}, crs)
    raises("relevance_cross: unknown option 'normalise'", src, tgt, crs, {normalise = false})
    raises("relevance_cross: self_in_rule_10 must be a boolean (got string)", src, tgt, crs, {self_in_rule_10 = "no"})
  end)
end)

-- A plain Edmonds-Karp on the layered graph, independent of the module's
-- push-relabel: capacities A[k] (k = 1 the bottom layer of edges) as Lua
-- matrices; returns the [L][L] flow values from top node i to bottom node j.
local function reference_flow(A, L)
  local n = #A
  local N = (n + 1) * L
  local function id(l, u) return l * L + u end
  local out = {}
  for i = 1, L do
    out[i] = {}
    for j = 1, L do
      local cap, flow = {}, {}
      for a = 1, N do cap[a], flow[a] = {}, {} end
      for l = 1, n do
        for u = 1, L do
          for v = 1, L do
            cap[id(l, u)][id(l - 1, v)] = A[l][u][v]
          end
        end
      end
      local s, t = id(n, i), id(0, j)
      local function res(a, b) return (cap[a][b] or 0) - (flow[a][b] or 0) end
      local total = 0
      while true do
        local parent = {[s] = s}
        local q, qh = {s}, 1
        while q[qh] and not parent[t] do
          local a = q[qh]; qh = qh + 1
          for b = 1, N do
            if not parent[b] and res(a, b) > 1e-15 then parent[b] = a; q[#q + 1] = b end
          end
        end
        if not parent[t] then break end
        local bott, b = math.huge, t
        while b ~= s do bott = math.min(bott, res(parent[b], b)); b = parent[b] end
        b = t
        while b ~= s do
          local a = parent[b]
          flow[a][b] = (flow[a][b] or 0) + bott
          flow[b][a] = (flow[b][a] or 0) - bott
          b = a
        end
        total = total + bott
      end
      out[i][j] = total
    end
  end
  return out
end

-- the fused, residual-augmented matrices the module uses, in double
local function capacities(maps, b, how, residual)
  local A = {}
  for l, m in ipairs(maps) do
    local t = m:select(1, b)
    local w
    if how == "max" then w = (t:max(1)):totable() elseif how == "min" then w = (t:min(1)):totable()
    else
      local v = t:totable()
      w = {}
      for u = 1, #v[1] do
        w[u] = {}
        for k = 1, #v[1] do
          local s = 0
          for h = 1, #v do s = s + v[h][u][k] end
          w[u][k] = s / #v
        end
      end
    end
    if residual then
      for u = 1, #w do
        local s = 1
        for k = 1, #w do s = s + w[u][k] end
        for k = 1, #w do w[u][k] = (w[u][k] + (u == k and 1 or 0)) / s end
      end
    end
    A[l] = w
  end
  return A
end

-- n maps [B, H, L, L]: softmax of scaled random scores, some keys cut to
-- zero (sparse) or causal
local function random_maps(seed, n, B, H, L, o)
  local g = attn.Generator(seed)
  local maps = {}
  for l = 1, n do
    local s = attn.randn({B, H, L, L}, {generator = g}) * (o.scale or 2)
    if o.causal then s = s:masked_fill(attn.ones(L, L):triu(1):bool(), -math.huge) end
    local m = s:softmax(-1)
    if o.sparse then
      local keep = attn.rand({B, H, L, L}, {generator = g}):gt(o.sparse)
      if o.causal then keep = keep:logical_or(attn.eye(L):bool()) end
      m = m * keep:float()
    end
    maps[l] = m
  end
  return maps
end

describe("viz.flow against a plain Edmonds-Karp", function()
  local configs = {
    {"dense", 3, 6, {}, "mean", true},
    {"peaky, max fusion", 4, 5, {scale = 5}, "max", true},
    {"sparse, no residual", 4, 6, {sparse = 0.6}, "mean", false},
    {"sparse, min fusion", 3, 6, {sparse = 0.4}, "min", true},
    {"causal", 4, 6, {causal = true}, "mean", true},
    {"causal sparse, no residual", 5, 5, {causal = true, sparse = 0.5}, "max", false},
  }
  for c, cfg in ipairs(configs) do
    it(cfg[1], function()
      for seed = 1, 3 do
        local maps = random_maps(100 * c + seed, cfg[2], 2, 2, cfg[3], cfg[4])
        local got = explain.flow(maps, {head_fusion = cfg[5], residual = cfg[6]})
        for b = 1, 2 do
          local want = reference_flow(capacities(maps, b, cfg[5], cfg[6]), cfg[3])
          local g = got:select(1, b):totable()
          for i = 1, cfg[3] do
            for j = 1, cfg[3] do
              local d = math.abs(g[i][j] - want[i][j])
              worst.flow_ek = math.max(worst.flow_ek or 0, d)
              assert(d <= TOL, ("%s seed %d b %d: flow[%d][%d] = %.9g, Edmonds-Karp %.9g"):format(cfg[1], seed, b,
                i, j, g[i][j], want[i][j]))
            end
          end
        end
      end
    end)
  end
end)

local function rows_sum_to_one(t)
  local s = t:sum(-1)
  return (s - 1):abs():max():item() <= 1e-5
end

describe("viz analyses: properties", function()
  it("rollout rows sum to 1 (mean fusion with the residual), causal rollout is lower triangular", function()
    for _, name in ipairs({"enc", "dec", "single"}) do
      local r = explain.rollout(tensors(FX[name].maps))
      assert.is_true(rows_sum_to_one(r), name)
      assert.is_true(r:min():item() >= 0)
    end
    local r = explain.rollout(tensors(FX.dec.maps))
    assert.are.equal(0, r:triu(1):abs():max():item())
  end)

  it("one layer: rollout and flow are the augmented fused map", function()
    local m = random_maps(7, 1, 2, 3, 4, {})[1]
    local want = (m:mean(2) + attn.eye(4)) * 0.5
    assert.is_true((explain.rollout({m}) - want):abs():max():item() <= 1e-6)
    assert.is_true((explain.flow({m}) - want):abs():max():item() <= 1e-6)
    assert.is_true((explain.rollout({m}, {residual = false}) - m:mean(2)):abs():max():item() <= 1e-6)
  end)

  it("flow values lie in [0, 1]; normalised rows sum to 1; the diagonal chain bounds them below", function()
    for _, name in ipairs(CASES) do
      local maps = tensors(FX[name].maps)
      local f = explain.flow(maps)
      assert.is_true(f:min():item() >= 0 and f:max():item() <= 1 + 1e-6, name)
      assert.is_true(rows_sum_to_one(explain.flow(maps, {normalize = true})), name)
    end
    -- with the residual every augmented diagonal entry is at least 0.5, so
    -- the path i -> i -> ... -> i alone carries 0.5: flow[i][i] >= 0.5
    local f = explain.flow(tensors(FX.enc.maps)):totable()
    for b = 1, 2 do
      for i = 1, 5 do assert.is_true(f[b][i][i] >= 0.5 - 1e-6) end
    end
  end)

  it("flow without heads that attend anywhere but themselves is the identity", function()
    local eye = attn.eye(4):expand(1, 2, 4, 4):contiguous()
    local f = explain.flow({eye, eye, eye})
    assert.is_true((f - attn.eye(4)):abs():max():item() == 0)
  end)

  it("relevance of one identity layer: R = I + (grad * I)^+ mean", function()
    local eye = attn.eye(4):expand(2, 3, 4, 4):contiguous()
    local ones = attn.ones(2, 3, 4, 4)
    -- grads 1: Abar = I, R = I + I @ I = 2 I
    assert.is_true((explain.relevance({eye}, {ones}) - attn.eye(4) * 2):abs():max():item() == 0)
    -- grads -1: clamped to 0, R = I
    assert.is_true((explain.relevance({eye}, {-ones}) - attn.eye(4)):abs():max():item() == 0)
    -- 3-d maps give [L, L]
    local r = explain.relevance({eye[1]}, {ones[1] * 3})
    assert.are.same({4, 4}, {r:shape()[1], r:shape()[2]})
    assert.is_true((r - attn.eye(4) * 4):abs():max():item() == 0)
  end)

  it("3-d maps give [L, L]; results carry no grad; the maps are left as they were", function()
    local maps = tensors(FX.single.maps)
    local before = fx.flat(maps[1])
    for _, m in ipairs(maps) do m:requires_grad_(true) end
    for _, r in ipairs({explain.rollout(maps), explain.flow(maps), explain.relevance(maps, maps)}) do
      assert.are.equal(2, r:dim())
      assert.is_false(r.requires_grad)
    end
    assert.are.same(before, fx.flat(maps[1]))
  end)

  it("float64 and non-contiguous maps give the same results", function()
    local maps = tensors(FX.enc.maps)
    local r = explain.rollout(maps)
    local as64, trans = {}, {}
    for l, m in ipairs(maps) do
      as64[l] = m:double()
      trans[l] = m:transpose(1, 2):contiguous():transpose(1, 2) -- [B, H, L, L] with strides of [H, B, L, L]
    end
    assert.is_true((explain.rollout(as64) - r):abs():max():item() <= 1e-6)
    assert.is_true((explain.rollout(trans) - r):abs():max():item() == 0)
    assert.is_true((explain.flow(trans) - explain.flow(maps)):abs():max():item() == 0)
  end)
end)

describe("viz analyses: argument errors", function()
  local m = attn.rand(2, 2, 4, 4):softmax(-1)
  local function raises(pattern, f, ...)
    local ok, err = pcall(f, ...)
    assert.is_false(ok)
    assert.matches(pattern, tostring(err), 1, true)
  end
  it("name the function, the argument and the shapes", function()
    raises("rollout: maps must be a list of tensors, one a layer (got a tensor [2,2,4,4])", explain.rollout, m)
    raises("flow: maps is an empty list", explain.flow, {})
    raises("rollout: maps[2] must be a tensor [B, H, L, L] (got string)", explain.rollout, {m, "x"})
    raises("rollout: maps[2] has shape [2,2,3,3], expected [2,2,4,4] like maps[1]", explain.rollout,
      {m, attn.rand(2, 2, 3, 3)})
    raises("flow: maps[2] has shape [2,2,4,4], expected [2,4,4] like maps[1]", explain.flow, {attn.rand(2, 4, 4), m})
    raises("rollout: maps[1] has shape [4,4]; a map is [B, H, L, L] or [H, L, L]", explain.rollout,
      {attn.rand(4, 4)})
    raises("flow: maps[1] has shape [2,2,4,5]: its queries (4) and keys (5) differ", explain.flow,
      {attn.rand(2, 2, 4, 5)})
    raises("rollout: maps[1] has dtype attn.int64", explain.rollout, {attn.ones(1, 1, 2, 2):long()})
    raises("rollout: maps[1] has shape [0,2,4,4]: every size must be at least 1", explain.rollout,
      {attn.rand(0, 2, 4, 4)})
    raises("rollout: head_fusion must be \"mean\", \"max\" or \"min\" (got \"sum\")", explain.rollout, {m},
      {head_fusion = "sum"})
    raises("rollout: residual must be a boolean (got number)", explain.rollout, {m}, {residual = 1})
    raises("flow: start_layer must be an integer from 1 to 2, the number of maps (got 3)", explain.flow, {m, m},
      {start_layer = 3})
    raises("rollout: start_layer must be an integer from 1 to 1, the number of maps (got 0.5)", explain.rollout,
      {m}, {start_layer = 0.5})
    raises("flow: normalize must be a boolean", explain.flow, {m}, {normalize = "yes"})
    raises("rollout: unknown option 'fusion'", explain.rollout, {m}, {fusion = "max"})
    raises("flow: maps[1] gives -", explain.flow, {m * -1})
    raises("nan at batch 1, query 1, key 1 (heads fused by max)", explain.flow,
      {m, m:masked_fill(attn.eye(4):bool(), 0 / 0)}, {head_fusion = "max"})
    raises("relevance: grads must match maps: 1 grads of shape [2,2,3,3] for 1 maps of shape [2,2,4,4]",
      explain.relevance, {m}, {attn.rand(2, 2, 3, 3)})
    raises("relevance: grads must match maps: 2 grads", explain.relevance, {m}, {m, m})
    raises("relevance: grads must be a list of tensors", explain.relevance, {m}, nil)
    raises("relevance: unknown option 'start'", explain.relevance, {m}, {m}, {start = 1})
  end)
end)

describe("viz.flow timing", function()
  it("12 layers x 12 heads x 64 tokens (printed, not asserted)", function()
    local g = attn.Generator(5)
    local maps = {}
    for l = 1, 12 do maps[l] = (attn.randn({1, 12, 64, 64}, {generator = g}) * 2):softmax(-1) end
    local t0 = os.clock()
    local f = explain.flow(maps)
    local dt = os.clock() - t0
    assert.are.same({1, 64, 64}, {f:shape()[1], f:shape()[2], f:shape()[3]})
    print(("viz.flow: 12 layers x 12 heads x 64 tokens in %.2f s of CPU (4096 exact max-flows)"):format(dt))
  end)

  it("reports the largest differences", function()
    local parts = {}
    for _, k in ipairs(sorted_keys(worst)) do parts[#parts + 1] = ("%s %.3g"):format(k, worst[k]) end
    print("viz_explain: largest |difference| with torch / Edmonds-Karp: " .. table.concat(parts, ", "))
  end)
end)
