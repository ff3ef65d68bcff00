-- SPDX-License-Identifier: MIT
-- Head masks in the computation, head importance (Michel, Levy and Neubig,
-- 2019) and prune_heads (issue 32, section 3), against torch 1.13:
-- spec/fixtures/viz_heads.lua, written by scripts/fixtures/gen_viz_heads.py
-- (nn.MultiheadAttention with each head's output times its gate, written
-- out in torch and checked there against nn.MultiheadAttention; Hugging
-- Face's BERT with head_mask on the probabilities and its pruning).
-- Outputs, gradients and importances compare within 1e-5 (the gradients
-- with 1e-5 relative as well: they reach about 10).  The fixture is
-- committed: no torch needed.
local attn = require "attn"
local nn = require "attn.nn"
local bert = require "attn.bert"
local viz_heads = require "attn.app.viz_heads"
local fx = require "support.fixture"

local FX = fx.load("viz_heads")
local TOL = 1e-5
local worst = {} -- what -> largest |difference| seen

local function close(t, f, what, rtol)
  local e = fx.tensor(f)
  local d = (t:detach() - e):abs():max():item()
  local key = what:match("^[^:]+")
  worst[key] = math.max(worst[key] or 0, d)
  return fx.assert_close(t:detach(), f, TOL, rtol or 0, what)
end

local function state_of(list)
  local sd = {}
  for _, e in ipairs(list) do sd[e.name] = fx.tensor(e.value) end
  return sd
end

describe("MultiheadAttention head_mask and prune_heads", function()
  for _, case in ipairs(FX.mha) do
    local function build(opts)
      local m = nn.MultiheadAttention(case.embed_dim, case.num_heads, {add_bias_kv = case.add_bias_kv,
        kdim = case.kdim, vdim = case.vdim, batch_first = opts and opts.batch_first})
      m:load_state_dict(state_of(case.state))
      m:eval()
      return m
    end
    local q, k, v = fx.tensor(case.query), fx.tensor(case.key), fx.tensor(case.value)
    local kpm = case.key_padding_mask and fx.tensor(case.key_padding_mask):ne(0) or nil

    describe(case.name, function()
      it("without a mask: torch's output", function()
        local out = build()(q, k, v, {key_padding_mask = kpm, need_weights = false})
        close(out, case.out, "mha out: " .. case.name)
      end)

      it("head_mask [H] and [N, H] multiply the heads' outputs", function()
        local m = build()
        close(m(q, k, v, {key_padding_mask = kpm, head_mask = fx.tensor(case.head_mask_h)}), case.out_h,
          "mha head_mask: [H]")
        close(m(q, k, v, {key_padding_mask = kpm, head_mask = fx.tensor(case.head_mask_nh)}), case.out_nh,
          "mha head_mask: [N, H]")
        -- torch's positional order, head_mask last
        local out = m(q, k, v, kpm, false, nil, true, false, nil, nil, fx.tensor(case.head_mask_h))
        close(out, case.out_h, "mha head_mask: positional")
        -- batch first and unbatched give the same numbers
        local bf = build({batch_first = true})
        local o2 = bf(q:transpose(1, 2), k:transpose(1, 2), v:transpose(1, 2), {key_padding_mask = kpm,
          head_mask = fx.tensor(case.head_mask_nh)})
        close(o2:transpose(1, 2), case.out_nh, "mha head_mask: batch_first")
        local one = m(q:select(2, 1), k:select(2, 1), v:select(2, 1), {key_padding_mask = kpm and kpm[1],
          head_mask = fx.tensor(case.head_mask_h)})
        close(one, {shape = {case.out_h.shape[1], case.out_h.shape[3]},
          data = fx.flat(fx.tensor(case.out_h):select(2, 1))}, "mha head_mask: unbatched")
      end)

      it("leaves the returned weights as they are", function()
        local m = build()
        local _, w0 = m(q, k, v, {key_padding_mask = kpm, average_attn_weights = false})
        local out, w1 = m(q, k, v, {key_padding_mask = kpm, average_attn_weights = false,
          head_mask = fx.tensor(case.head_mask_h)})
        assert.is_true(attn.equal(w0, w1))
        close(out, case.out_h, "mha head_mask: with need_weights")
      end)

      it("gives d loss / d head_mask", function()
        local m = build()
        local R = fx.tensor(case.R)
        local mask = attn.ones(1, case.num_heads):requires_grad_()
        local out = m(q, k, v, {key_padding_mask = kpm, head_mask = mask:select(1, 1), need_weights = false})
        ;(out * R):sum():backward()
        close(mask.grad, case.grad, "mha grad", TOL)
        local imp, raw = viz_heads.head_importance(function(hm)
          return (m(q, k, v, {key_padding_mask = kpm, head_mask = hm:select(1, 1)}) * R):sum()
        end, 1, case.num_heads, {normalize = false})
        close(raw, {shape = case.grad.shape, data = fx.flat(fx.tensor(case.grad):abs())}, "mha importance: raw",
          TOL)
        assert.is_true(attn.equal(imp, raw))
      end)

      it("prune_heads equals zero gates; pruning again is a no-op", function()
        local zeroed = build()(q, k, v, {key_padding_mask = kpm, need_weights = false,
          head_mask = attn.tensor({1, 0, 1, 0})})
        local m = build()
        assert.equal(m, m:prune_heads(case.prune))
        assert.equal(2, m.num_heads)
        assert.equal(case.embed_dim, m.embed_dim)
        local hd = case.embed_dim // case.num_heads
        assert.same({case.embed_dim, 2 * hd}, m.out_proj.weight:shape())
        if m.in_proj_weight ~= nil then
          assert.same({6 * hd, case.embed_dim}, m.in_proj_weight:shape())
        else
          assert.same({2 * hd, case.kdim}, m.k_proj_weight:shape())
        end
        assert.same({[2] = true, [4] = true}, m.pruned_heads)
        local out = m(q, k, v, {key_padding_mask = kpm, need_weights = false})
        close(out, case.pruned, "mha pruned")
        assert.is_true((out - zeroed):abs():max():item() < TOL)
        -- indices stay the original ones: 2 and 4 are gone already
        m:prune_heads({4, 2})
        assert.equal(2, m.num_heads)
        close(m(q, k, v, {key_padding_mask = kpm, need_weights = false}), case.pruned, "mha pruned: twice")
        -- the remaining heads keep their gates, and need_weights still works
        local o, w = m(q, k, v, {key_padding_mask = kpm, head_mask = attn.tensor({1, 1}),
          average_attn_weights = false})
        close(o, case.pruned, "mha pruned: head_mask of ones")
        assert.equal(2, w:shape()[2])
        -- one step at a time gives the same module
        local m2 = build()
        m2:prune_heads({4})
        m2:prune_heads({2})
        close(m2(q, k, v, {key_padding_mask = kpm, need_weights = false}), case.pruned, "mha pruned: stepwise")
        -- the gradient reaches the pruned parameters
        m2(q, k, v, {key_padding_mask = kpm, need_weights = false}):sum():backward()
        assert.same(m2.out_proj.weight:shape(), m2.out_proj.weight.grad:shape())
        -- a pruned state_dict loads into a module pruned the same way, not into a whole one
        local m3 = nn.MultiheadAttention(case.embed_dim, case.num_heads, {add_bias_kv = case.add_bias_kv,
          kdim = case.kdim, vdim = case.vdim})
        m3:eval()
        assert.has_error(function() m3:load_state_dict(m:state_dict()) end)
        m3:prune_heads({2, 4})
        m3:load_state_dict(m:state_dict())
        close(m3(q, k, v, {key_padding_mask = kpm, need_weights = false}), case.pruned, "mha pruned: reloaded")
      end)

      it("refuses bad head masks and prune lists", function()
        local m = build()
        assert.has_error(function() m(q, k, v, {head_mask = attn.ones(3)}) end,
          "MultiheadAttention: head_mask must be [num_heads] = [4] or [N, num_heads] = [2, 4] (one gate per "
          .. "head), got [3]")
        assert.error_matches(function() m(q, k, v, {head_mask = attn.ones(3, 4)}) end, "head_mask must be")
        assert.error_matches(function() m(q, k, v, {head_mask = "x"}) end, "head_mask must be a tensor")
        assert.error_matches(function() m:prune_heads({5}) end,
          "MultiheadAttention:prune_heads: head 5 is out of range 1..4")
        assert.error_matches(function() m:prune_heads({0}) end, "head 0 is out of range")
        assert.error_matches(function() m:prune_heads({1.5}) end, "must be an integer head index")
        assert.error_matches(function() m:prune_heads(2) end, "heads must be a list")
        assert.error_matches(function() m:prune_heads({1, 2, 3, 4}) end, "would leave none")
        assert.equal(4, m.num_heads) -- nothing changed
        m:prune_heads({1, 2, 3})
        assert.error_matches(function() m:prune_heads({4}) end, "would leave none of the 1 remaining")
        assert.error_matches(function() m(q, k, v, {head_mask = attn.ones(4)}) end, "%[num_heads%] = %[1%]")
      end)
    end)
  end
end)

describe("BERT head_mask and prune_heads", function()
  local B = FX.bert
  local function build()
    local model = bert.BertModel(B.config)
    model:load_state_dict(state_of(B.state))
    model:eval()
    return model
  end
  local b1 = B.batches[1]
  local ids, types, am = fx.tensor(b1.input_ids), fx.tensor(b1.token_type_ids), fx.tensor(b1.attention_mask)
  local function run(model, extra)
    local opts = {token_type_ids = types, attention_mask = am}
    for k, v in pairs(extra or {}) do opts[k] = v end
    return model(ids, opts)
  end

  it("without a mask: the reference's output", function()
    close(run(build()).last_hidden_state, B.last_hidden_state, "bert out")
  end)

  it("head_mask [L, H] and [H] multiply every layer's probabilities", function()
    local model = build()
    local out = run(model, {head_mask = fx.tensor(B.head_mask_lh), output_attentions = true})
    close(out.last_hidden_state, B.last_hidden_state_lh, "bert head_mask: [L, H]")
    close(out.pooler_output, B.pooler_output_lh, "bert head_mask: pooler")
    for l = 1, 2 do close(out.attentions[l], B.attentions_lh[l], "bert head_mask: attentions " .. l) end
    close(run(model, {head_mask = fx.tensor(B.head_mask_h)}).last_hidden_state, B.last_hidden_state_h,
      "bert head_mask: [H]")
    -- a table, an int64 tensor and a list of one tensor per layer are the same mask
    local rows = {fx.tensor(B.head_mask_lh)[1], fx.tensor(B.head_mask_lh)[2]}
    close(run(model, {head_mask = rows}).last_hidden_state, B.last_hidden_state_lh, "bert head_mask: list")
    close(run(model, {head_mask = {1, 1, 0, 1}}).last_hidden_state, B.last_hidden_state_h,
      "bert head_mask: table")
    close(run(model, {head_mask = attn.tensor({1, 1, 0, 1}):long()}).last_hidden_state, B.last_hidden_state_h,
      "bert head_mask: int64")
  end)

  it("refuses a head_mask of the wrong shape", function()
    local model = build()
    assert.has_error(function() run(model, {head_mask = attn.ones(3)}) end,
      "BertModel: head_mask must be [num_heads] = [4] or [num_layers, num_heads] = [2, 4], got [3]")
    assert.error_matches(function() run(model, {head_mask = attn.ones(3, 4)}) end, "got %[3, 4%]")
    assert.error_matches(function() run(model, {head_mask = "x"}) end, "head_mask must be")
  end)

  it("gives d loss / d head_mask per batch, and head_importance from them", function()
    local model = build()
    local function loss(mask, b)
      local out = model(fx.tensor(b.input_ids), {token_type_ids = fx.tensor(b.token_type_ids),
        attention_mask = fx.tensor(b.attention_mask), head_mask = mask})
      return (out.last_hidden_state * fx.tensor(b.R)):sum()
    end
    for i, b in ipairs(B.batches) do
      local mask = attn.ones(2, 4):requires_grad_()
      loss(mask, b):backward()
      close(mask.grad, B.grads[i], "bert grad: batch " .. i, TOL)
    end
    local imp, raw = viz_heads.head_importance(loss, 2, 4, {batches = B.batches})
    close(raw, B.raw, "bert importance: raw", TOL)
    close(imp, B.importance, "bert importance: normalized")
    close(viz_heads.head_importance(loss, 2, 4, {batches = B.batches, minmax = true}), B.importance_minmax,
      "bert importance: minmax")
    close(viz_heads.head_importance(loss, 2, 4, B.batches, false), B.importance_plain, "bert importance: plain",
      TOL)
    -- normalised per layer: each row has L2 norm 1
    local norms = imp:pow(2):sum(2):sqrt()
    assert.is_true((norms - 1):abs():max():item() < 1e-6)
    -- a count: fn(mask, i, i)
    local seen = {}
    viz_heads.head_importance(function(mask, item, i)
      seen[#seen + 1] = item .. "/" .. i
      return loss(mask, B.batches[i])
    end, 2, 4, 2)
    assert.same({"1/1", "2/2"}, seen)
  end)

  it("head_importance refuses what it cannot use", function()
    local model = build()
    assert.error_matches(function() viz_heads.head_importance(nil, 2, 4) end, "head_importance: fn must be")
    assert.error_matches(function() viz_heads.head_importance(function() return attn.ones(2) end, 2, 4) end,
      "must return a scalar loss tensor")
    assert.error_matches(function() viz_heads.head_importance(function() return 1 end, 2, 4) end,
      "must return a scalar loss tensor")
    assert.error_matches(function()
      viz_heads.head_importance(function() return run(model).last_hidden_state:sum() end, 2, 4)
    end, "does not depend on the mask")
    assert.error_matches(function() viz_heads.head_importance(function() end, 0, 4) end, "n_layers must be")
    assert.error_matches(function() viz_heads.head_importance(function() end, 2, 4, {}) end, "empty list")
    assert.error_matches(function() viz_heads.head_importance(function() end, 2, 4, {batches = 1.5}) end,
      "batches must be")
    assert.error_matches(function() viz_heads.head_importance(function() end, 2, 4, {normalize = 1}) end,
      "normalize must be a boolean")
    -- under no_grad the mask still gets its gradient
    local imp = attn.no_grad(function()
      return viz_heads.head_importance(function(mask)
        return (run(model, {head_mask = mask}).last_hidden_state * fx.tensor(B.batches[1].R)):sum()
      end, 2, 4, {normalize = false})
    end)
    close(imp, {shape = {2, 4}, data = fx.flat(fx.tensor(B.grads[1]):abs())}, "bert importance: no_grad", TOL)
  end)

  it("prune_heads equals zero gates (HF's semantics)", function()
    local model = build()
    local spec = {}
    for _, p in ipairs(B.prune) do spec[p[1]] = p[2] end -- {[1] = {2}, [2] = {1, 4}}
    assert.equal(model, model:prune_heads(spec))
    local sa1, sa2 = model.encoder.layer[1].attention.self, model.encoder.layer[2].attention.self
    assert.equal(3, sa1.num_attention_heads)
    assert.equal(2, sa2.num_attention_heads)
    assert.equal(8, sa2.all_head_size)
    assert.same({8, 16}, sa2.query.weight:shape())
    assert.same({16, 8}, model.encoder.layer[2].attention.output.dense.weight:shape())
    assert.same({[1] = {2}, [2] = {1, 4}}, model.config.pruned_heads)
    local out = run(model, {output_attentions = true})
    close(out.last_hidden_state, B.pruned, "bert pruned")
    close(out.pooler_output, B.pruned_pooler_output, "bert pruned: pooler")
    for l = 1, 2 do close(out.attentions[l], B.pruned_attentions[l], "bert pruned: attentions " .. l) end
    -- the same heads again: nothing changes
    model:prune_heads({[2] = {4, 1}, [1] = {2}})
    assert.equal(2, sa2.num_attention_heads)
    close(run(model).last_hidden_state, B.pruned, "bert pruned: twice")
    -- a head mask now has one entry per remaining head, layer by layer
    local after = {fx.tensor(B.head_mask_after[1]), fx.tensor(B.head_mask_after[2])}
    close(run(model, {head_mask = after}).last_hidden_state, B.pruned_masked, "bert pruned: head_mask")
    assert.error_matches(function() run(model, {head_mask = attn.ones(2, 4)}) end,
      "a list of one %[num_heads%] tensor per layer")
    -- step by step, original numbers throughout
    local m2 = build()
    m2:prune_heads({[2] = {1}})
    m2:prune_heads({[2] = {4}, [1] = {2}})
    close(run(m2).last_hidden_state, B.pruned, "bert pruned: stepwise")
    -- and it still trains: gradients reach the pruned parameters
    run(m2).last_hidden_state:sum():backward()
    assert.same({8, 16}, m2.encoder.layer[2].attention.self.key.weight.grad:shape())
    -- a pruned state_dict loads into a model pruned the same way
    local m3 = bert.BertModel(B.config)
    m3:eval()
    assert.has_error(function() m3:load_state_dict(model:state_dict()) end)
    m3:prune_heads(spec)
    m3:load_state_dict(model:state_dict())
    close(run(m3).last_hidden_state, B.pruned, "bert pruned: reloaded")
  end)

  it("config.pruned_heads: BertModel(config) and from_pretrained prune as HF does", function()
    -- Hugging Face's config.json form (0-based strings and heads) becomes attn's 1-based one
    local c = bert.config({num_attention_heads = 4, hidden_size = 16, num_hidden_layers = 2,
      pruned_heads = {["0"] = {1}, ["1"] = {3, 0, 0}}})
    assert.same({[1] = {2}, [2] = {1, 4}}, c.pruned_heads)
    assert.same(c.pruned_heads, bert.config(c).pruned_heads) -- 1-based integer keys stay
    assert.error_matches(function() bert.config({num_hidden_layers = 2, pruned_heads = {[3] = {1}}}) end,
      "pruned_heads: layer 3 is not in 1..2")
    assert.error_matches(function() bert.config({num_attention_heads = 4, hidden_size = 16,
      pruned_heads = {["0"] = {4}}}) end, "the heads are 0..3 in Hugging Face's form")
    assert.error_matches(function() bert.config({num_attention_heads = 2, hidden_size = 16,
      pruned_heads = {[1] = {1, 2}}}) end, "layer 1 would have no head left")
    assert.error_matches(function() bert.config({pruned_heads = {x = {1}}}) end, "pruned_heads has the key x")
    assert.error_matches(function() bert.config({pruned_heads = 3}) end, "pruned_heads must be a table")

    local pruned = build()
    pruned:prune_heads({[1] = {2}, [2] = {1, 4}})
    local cfg = {}
    for k, v in pairs(B.config) do cfg[k] = v end
    cfg.pruned_heads = {[1] = {2}, [2] = {1, 4}}
    local m = bert.BertModel(cfg)
    assert.equal(3, m.encoder.layer[1].attention.self.num_attention_heads)
    assert.same({[2] = true}, m.encoder.layer[1].attention.pruned_heads)
    m:load_state_dict(pruned:state_dict())
    m:eval()
    close(run(m).last_hidden_state, B.pruned, "bert pruned: from a config")

    -- a Hugging Face folder whose config.json lists the pruned heads
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    local fields = {}
    for k, v in pairs(B.config) do
      fields[#fields + 1] = ("%q: %s"):format(k, type(v) == "string" and ("%q"):format(v) or ("%.17g"):format(v))
    end
    fields[#fields + 1] = '"pruned_heads": {"0": [1], "1": [0, 3]}'
    local f = assert(io.open(dir .. "/config.json", "w"))
    f:write("{" .. table.concat(fields, ", ") .. "}")
    f:close()
    pruned:save(dir .. "/model.safetensors")
    local loaded, info = bert.from_pretrained(dir)
    os.execute("rm -rf " .. dir)
    assert.same({}, info.missing_keys)
    assert.same({}, info.unused_keys)
    assert.same({[1] = {2}, [2] = {1, 4}}, info.config.pruned_heads)
    assert.equal(2, loaded.encoder.layer[2].attention.self.num_attention_heads)
    close(run(loaded).last_hidden_state, B.pruned, "bert pruned: from_pretrained")
  end)

  it("prune_heads refuses bad layers and heads, changing nothing", function()
    local model = build()
    assert.has_error(function() model:prune_heads({[3] = {1}}) end,
      "BertModel:prune_heads: layer 3 is not a layer number in 1..2")
    assert.error_matches(function() model:prune_heads({[1] = {5}}) end,
      "BertModel:prune_heads: layer 1: head 5 is out of range 1..4")
    assert.error_matches(function() model:prune_heads({[1] = {1}, [2] = {1, 2, 3, 4}}) end,
      "layer 2: pruning these heads would leave none")
    assert.equal(4, model.encoder.layer[1].attention.self.num_attention_heads) -- layer 1 untouched
    assert.error_matches(function() model:prune_heads({1, 2}) end, "heads of layer 1 must be a list")
    assert.error_matches(function() model:prune_heads("x") end, "expected a table")
    assert.error_matches(function() model.encoder.layer[1].attention:prune_heads({9}) end,
      "BertAttention:prune_heads: head 9 is out of range 1..4")
  end)

  it("reports the largest differences from torch", function()
    local keys = {}
    for k in pairs(worst) do keys[#keys + 1] = k end
    table.sort(keys)
    local parts = {}
    for _, k in ipairs(keys) do parts[#parts + 1] = ("%s %.2g"):format(k, worst[k]) end
    print("viz_heads max |diff| vs torch: " .. table.concat(parts, ", "))
    assert.is_true(#keys > 0)
  end)
end)
