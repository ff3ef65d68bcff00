-- SPDX-License-Identifier: MIT
-- attn.viz.capture: every attention module of issue 32 (nn.MultiheadAttention
-- with and without need_weights, the Transformer encoder and decoder layers,
-- BERT, Luong and Bahdanau, F.scaled_dot_product_attention inside a user's
-- module) recorded without changing the model's code or its results, the
-- maps checked against what each module returns itself, and the gradients
-- of the maps against an explicit computation.
local attn = require "attn"
local nn, F, viz = attn.nn, attn.F, require "attn.viz"
local bert = require "attn.bert"

-- a tensor's shape as a plain list
local function dims(t)
  local out = {}
  for i = 1, t:dim() do out[i] = t:size(i) end
  return out
end

local function maxdiff(a, b) return (a - b):abs():max():item() end

-- A user's module calling F.scaled_dot_product_attention with opts on the
-- thirds of one projection [d -> 3d]; it keeps its last q, k, v in .seen.
local function user_attention(name, opts)
  local Attn = nn.Module:extend(name)
  function Attn:init(d) self.proj = nn.Linear(d, 3 * d) end
  function Attn:forward(x)
    local q, k, v = self.proj(x):chunk(3, -1)
    self.seen = {q, k, v}
    return F.scaled_dot_product_attention(q, k, v, opts)
  end
  return Attn
end

local function rows_sum_to_one(m)
  local s = m:sum(-1)
  return maxdiff(s, attn.ones_like(s)) < 1e-5
end

describe("viz.capture", function()
  it("records each encoder layer's map without changing the output", function()
    attn.manual_seed(0)
    local enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, 0, {batch_first = true}), 2)
    enc:eval()
    local x = attn.randn(2, 5, 8)
    local y0 = enc(x)
    local cap <close> = viz.capture(enc)
    local y1 = enc(x)
    assert.is_true(attn.equal(y0, y1)) -- bit for bit: the fused kernel still runs
    assert.same({"layers.0.self_attn", "layers.1.self_attn"}, cap:paths())
    assert.equal(2, #cap)
    local maps = cap:maps()
    assert.same({2, 2, 5, 5}, dims(maps[1]))
    assert.equal("recomputed", cap.records[1].source)
    assert.is_true(rows_sum_to_one(maps[2]))
    -- what the layers' own MultiheadAttention gives with need_weights
    local h = x
    for l = 1, 2 do
      local sa = enc.layers[l].self_attn
      local _, w = sa(h, h, h, {need_weights = true, average_attn_weights = false})
      assert.is_true(maxdiff(maps[l], w) < 1e-6, "layer " .. l)
      h = enc.layers[l](h)
    end
    assert.equal(6, #cap) -- the direct calls of its modules were recorded too
    cap:remove()
    enc(x)
    assert.equal(6, #cap) -- nothing more after remove
  end)

  it("records the decoder's self and cross attention by path", function()
    attn.manual_seed(1)
    local dec = nn.TransformerDecoderLayer(8, 2, 16, 0, {batch_first = true})
    dec:eval()
    local tgt, mem = attn.randn(1, 3, 8), attn.randn(1, 6, 8)
    local cap <close> = viz.capture(dec)
    dec(tgt, mem)
    assert.same({"self_attn", "multihead_attn"}, cap:paths())
    assert.same({1, 2, 3, 3}, dims(cap:map("self_attn")))
    assert.same({1, 2, 3, 6}, dims(cap:map("multihead_attn")))
    assert.equal(1, #cap:maps("^multihead"))
  end)

  it("gives BERT's attention probabilities, asked for or not", function()
    attn.manual_seed(2)
    local model = bert.BertModel({vocab_size = 30, hidden_size = 16, num_hidden_layers = 3,
      num_attention_heads = 4, intermediate_size = 32, max_position_embeddings = 16})
    model:eval()
    local ids = attn.tensor({{2, 9, 4, 17, 3}})
    local cap <close> = viz.capture(model)
    local out = model(ids, {output_attentions = true})
    local returned = cap:maps()
    assert.equal(3, #returned)
    assert.equal("returned", cap.records[1].source)
    for l = 1, 3 do assert.equal(0, maxdiff(returned[l], out.attentions[l])) end
    cap:clear()
    model(ids)
    local recomputed = cap:maps()
    assert.equal("recomputed", cap.records[1].source)
    for l = 1, 3 do assert.is_true(maxdiff(recomputed[l], out.attentions[l]) < 1e-6) end
    assert.matches("encoder%.layer%.0%.attention%.self", cap:paths()[1])
  end)

  it("works on MultiheadAttention called with and without weights, batched or not", function()
    attn.manual_seed(3)
    local mha = nn.MultiheadAttention(8, 2)
    local x = attn.randn(4, 8) -- unbatched [L, E]
    local cap <close> = viz.capture(mha)
    local _, w = mha(x, x, x, {average_attn_weights = false})
    local out2 = mha(x, x, x, {need_weights = false})
    assert.same({"returned", "recomputed"}, {cap.records[1].source, cap.records[2].source})
    assert.same({1, 2, 4, 4}, dims(cap:maps()[1]))
    assert.equal(0, maxdiff(cap:maps()[1][1], w))
    assert.is_true(maxdiff(cap:maps()[2][1], w) < 1e-6)
    cap:remove()
    assert.is_true(attn.equal(out2, mha(x, x, x, {need_weights = false})))
  end)

  it("records Luong and Bahdanau per decoder step and joins the steps", function()
    attn.manual_seed(4)
    local luong = nn.LuongAttention(4, {score = "general"})
    local enc = attn.randn(2, 6, 4)
    local cap <close> = viz.capture(luong)
    local ws = {}
    for t = 1, 3 do
      local _, w = luong(attn.randn(2, 4), enc)
      ws[t] = w
    end
    assert.equal("luong", cap.records[1].kind)
    local m = cap:map("")
    assert.same({2, 1, 3, 6}, dims(m))
    for t = 1, 3 do assert.equal(0, maxdiff(m:select(3, t):squeeze(2), ws[t])) end
    local bah = nn.BahdanauAttention(4, 4, 5)
    local cap2 <close> = viz.capture(bah)
    local _, w = bah(attn.randn(2, 1, 4), enc)
    assert.equal("bahdanau", cap2.records[1].kind)
    assert.equal(0, maxdiff(cap2:maps()[1]:squeeze(2), w))
  end)

  it("finds F.scaled_dot_product_attention inside a user's module, with q and k", function()
    local Attn = user_attention("SpecAttn", {is_causal = true})
    attn.manual_seed(5)
    local model = nn.Sequential(Attn(8), nn.Linear(8, 8))
    local x = attn.randn(2, 5, 8)
    local cap <close> = viz.capture(model, {qk = true})
    model(x)
    local r = cap.records[1]
    assert.equal("0", r.path)
    local q, k, v = table.unpack(model[1].seen)
    local _, w = F.scaled_dot_product_attention(q, k, v, {is_causal = true, need_weights = true})
    assert.is_true(maxdiff(r.weights:squeeze(2), w) < 1e-6)
    assert.equal(0, r.weights[1][1][1][2]) -- causal: the first query sees only itself
    assert.equal(0, maxdiff(r.q:squeeze(2), q))
    assert.equal(0, maxdiff(r.k:squeeze(2), k))
  end)

  it("keeps d output / d map with grads = true", function()
    local Attn = user_attention("SpecAttnG")
    attn.manual_seed(6)
    local model = Attn(6)
    local x = attn.randn(1, 4, 6)
    local fused = model(x)
    local cap <close> = viz.capture(model, {grads = true})
    local y = model(x)
    assert.equal("asked", cap.records[1].source)
    assert.is_true(maxdiff(y, fused) < 1e-6)
    y:select(2, 2):sum():backward() -- the second token's output
    local g = cap:grads()[1]
    -- d sum(out[:, 2, :]) / d w[:, 2, j] = sum_d v[:, j, d]; other rows 0
    local _, _, v = model.proj(x):chunk(3, -1)
    local want = attn.zeros(1, 1, 4, 4)
    want[1][1][2] = v:sum(-1):detach()[1]
    assert.is_true(maxdiff(g, want) < 1e-5)
  end)

  it("leaves the random stream alone when dropout is on", function()
    attn.manual_seed(7)
    local enc = nn.TransformerEncoderLayer(8, 2, 16, 0.5, {batch_first = true})
    enc:train()
    local x = attn.randn(1, 5, 8)
    attn.manual_seed(11)
    local y0, r0 = enc(x), attn.rand(3)
    local cap <close> = viz.capture(enc)
    attn.manual_seed(11)
    local y1, r1 = enc(x), attn.rand(3)
    assert.is_true(attn.equal(y0, y1))
    assert.is_true(attn.equal(r0, r1))
    assert.equal("recomputed", cap.records[1].source)
  end)

  it("stacks, and restores SDPA when the last capture goes", function()
    local mha = nn.MultiheadAttention(4, 1)
    local x = attn.randn(2, 1, 4)
    local a = viz.capture(mha)
    local b = viz.capture(mha)
    mha(x, x, x, {need_weights = false})
    assert.equal(1, #a)
    assert.equal(1, #b)
    a:remove()
    mha(x, x, x, {need_weights = false})
    assert.equal(1, #a)
    assert.equal(2, #b)
    b:remove()
    b:remove() -- twice: nothing
    assert.is_nil(attn._sdpa_observer(nil))
  end)

  it("recovers after a forward that raised", function()
    -- the hooks after a forward that raised never ran: the model's next
    -- call starts afresh
    local Bad = nn.Module:extend("SpecBad")
    function Bad:forward(x, fail)
      if fail then error("boom") end
      return F.scaled_dot_product_attention(x, x, x)
    end
    local m = nn.Sequential(Bad())
    local cap <close> = viz.capture(m)
    assert.has_error(function() m[1](attn.randn(1, 3, 2), true) end)
    m(attn.randn(1, 3, 2))
    assert.equal(1, #cap)
    assert.equal("0", cap.records[1].path)
  end)

  it("says what is wrong", function()
    local lin = nn.Linear(2, 2)
    assert.has_error(function() viz.capture(attn.randn(2)) end, "viz.capture: model must be an nn.Module (got a tensor)")
    assert.has_error(function() viz.capture(lin, {grad = true}) end,
      "viz.capture: unknown option 'grad' (did you mean 'grads'?); valid options: grads, qk")
    assert.has_error(function() viz.capture(lin, {grads = 1}) end, "viz.capture: option 'grads' must be a boolean (got number)")
    local cap <close> = viz.capture(lin)
    assert.has_error(function() cap:grads() end,
      "Capture:grads: this capture keeps no gradients; capture with viz.capture(model, {grads = true})")
    assert.has_error(function() cap:map("nowhere") end, "Capture:map: no map was recorded for 'nowhere' (recorded: none)")
    assert.has_error(function() cap.maps() end, "Capture:maps: call it with a colon, as cap:maps(...)")
    local mha = nn.MultiheadAttention(4, 1)
    local cap2 <close> = viz.capture(mha, {grads = true})
    local x = attn.randn(2, 1, 4)
    mha(x, x, x)
    assert.has_error(function() cap2:grads() end,
      "Capture:grads: the map of '' (call 1) has no gradient yet: run backward from an output first")
  end)
end)
