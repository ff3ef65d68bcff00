-- SPDX-License-Identifier: MIT
-- attn.bert: BertModel from Hugging Face model directories, against the
-- torch 1.13 reference BERT of scripts/fixtures/gen_bert.py (HF's
-- architecture and parameter names, random weights), whose directories
-- and outputs are committed under spec/fixtures/bert*/.  atol 1e-5.
local attn = require "attn"
local bert = require "attn.bert"
local nn = require "attn.nn"
local fx = require "support.fixture"

local SRC = os.getenv("ATTN_SOURCE_DIR") or "."
local DIR = SRC .. "/spec/fixtures/bert"
local PRE = SRC .. "/spec/fixtures/bert/pretraining"
local LEGACY = SRC .. "/spec/fixtures/bert/legacy"
local ATOL = 1e-5

local S1 = fx.load("bert/expected_single")
local SB = fx.load("bert/expected_batch")

local S = require "support.sh"
local tmpdir, rmtree, slurp, spit = S.tmpdir, S.rmtree, S.readfile, S.writefile

local function maxdiff(a, b) return (a - b):abs():max():item() end

-- fixture {shape, data} of a [1, ...] or [B, ...] tensor -> its first row
local function row(f, i)
  local t = fx.tensor(f):select(1, i)
  return t
end

local errmsg = require("support.errors").message

local function sorted(list)
  local t = {}
  for i, v in ipairs(list) do t[i] = v end
  table.sort(t)
  return t
end

local function keys_of(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

describe("attn.bert.from_pretrained on the test model directory", function()
  local model, info = bert.from_pretrained(DIR)

  it("is reachable as attn.bert", function()
    assert.are.equal(bert, attn.bert)
  end)

  it("reads config.json with BertConfig's fields", function()
    local c = info.config
    assert.are.equal(64, c.hidden_size)
    assert.are.equal(2, c.num_hidden_layers)
    assert.are.equal(4, c.num_attention_heads)
    assert.are.equal(128, c.intermediate_size)
    assert.are.equal(302, c.vocab_size)
    assert.are.equal(32, c.max_position_embeddings)
    assert.are.equal("gelu", c.hidden_act)
    assert.are.equal(1e-12, c.layer_norm_eps)
    assert.are.equal(0, c.pad_token_id)
    assert.are.equal(DIR .. "/model.safetensors", info.path)
    assert.are.same({}, info.unused_keys)
    assert.are.same({}, info.missing_keys)
  end)

  it("returns a model in eval mode", function()
    for _, m in ipairs(model:modules()) do assert.is_false(m.training) end
  end)

  it("has exactly the checkpoint's (Hugging Face's) parameter names and shapes", function()
    local file = attn.safetensors_info(DIR .. "/model.safetensors")
    local sd = model:state_dict()
    assert.are.same(keys_of(file), keys_of(sd))
    for k, v in pairs(file) do assert.are.same(v.shape, sd[k]:shape(), k) end
    assert.truthy(sd["encoder.layer.1.attention.self.query.weight"])
    assert.truthy(sd["embeddings.LayerNorm.weight"])
    assert.truthy(sd["pooler.dense.bias"])
  end)

  it("uses the padding row [PAD] = id 1 and 1-based ids", function()
    assert.are.equal(1, model.embeddings.word_embeddings.padding_idx)
    assert.are.equal("[PAD]", slurp(DIR .. "/vocab.txt"):match("^[^\n]*"))
  end)

  describe("the notebook's sentence", function()
    local ids = fx.tensor(S1.input_ids)
    local out = attn.no_grad(function()
      return model(ids, {output_attentions = true, output_hidden_states = true})
    end)

    it("matches last_hidden_state and pooler_output", function()
      fx.assert_close(out.last_hidden_state, S1.last_hidden_state, ATOL, 0, "last_hidden_state")
      fx.assert_close(out.pooler_output, S1.pooler_output, ATOL, 0, "pooler_output")
    end)

    it("matches every hidden state (embeddings first)", function()
      assert.are.equal(3, #out.hidden_states)
      fx.assert_close(out.hidden_states[1], S1.hidden_states[1], ATOL, 0, "hidden_states[1] (embeddings)")
      fx.assert_close(out.hidden_states[2], S1.hidden_states[2], ATOL, 0, "hidden_states[2]")
      assert.are.equal(0, maxdiff(out.hidden_states[3], out.last_hidden_state))
    end)

    it("matches every layer's attention probabilities [B, H, T, T], rows summing to 1", function()
      assert.are.equal(2, #out.attentions)
      for l = 1, 2 do
        fx.assert_close(out.attentions[l], S1.attentions[l], ATOL, 0, "attentions[" .. l .. "]")
        assert.is_true(maxdiff(out.attentions[l]:sum(-1), attn.ones(1, 4, 12)) < 1e-5)
      end
      -- the random weights give peaked, not uniform, attention
      assert.is_true(out.attentions[1]:max():item() > 0.5)
    end)

    it("gives only what was asked for", function()
      local o = attn.no_grad(function() return model(ids) end)
      assert.is_nil(o.attentions)
      assert.is_nil(o.hidden_states)
      -- without weights SDPA takes its fused path: the same up to rounding
      assert.is_true(maxdiff(o.last_hidden_state, out.last_hidden_state) < 1e-5)
    end)

    it("reads default token types, a full mask and default positions as HF does", function()
      local T = ids:shape()[2]
      local o = attn.no_grad(function()
        return model(ids, {token_type_ids = attn.ones(1, T), attention_mask = attn.ones(1, T),
                           position_ids = attn.arange(1, T + 1):unsqueeze(1)})
      end)
      fx.assert_close(o.last_hidden_state, S1.last_hidden_state, ATOL, 0, "explicit defaults")
      fx.assert_close(o.pooler_output, S1.pooler_output, ATOL, 0, "explicit defaults")
    end)

    it("takes a 1-d id tensor or a Lua table as a batch of one", function()
      local o1 = attn.no_grad(function() return model(ids:select(1, 1)) end)
      local o2 = attn.no_grad(function() return model(fx.flat(ids)) end)
      assert.are.same({1, 12, 64}, o1.last_hidden_state:shape())
      fx.assert_close(o1.last_hidden_state, S1.last_hidden_state, ATOL, 0, "1-d ids")
      fx.assert_close(o2.last_hidden_state, S1.last_hidden_state, ATOL, 0, "table ids")
    end)
  end)

  describe("a padded batch of two (a sentence pair, a shorter sentence)", function()
    local ids, types, mask = fx.tensor(SB.input_ids), fx.tensor(SB.token_type_ids), fx.tensor(SB.attention_mask)
    local out = attn.no_grad(function()
      return model(ids, {token_type_ids = types, attention_mask = mask, output_attentions = true})
    end)

    it("matches HF's outputs with its extended attention mask (pad positions included)", function()
      fx.assert_close(out.last_hidden_state, SB.last_hidden_state, ATOL, 0, "last_hidden_state")
      fx.assert_close(out.pooler_output, SB.pooler_output, ATOL, 0, "pooler_output")
      fx.assert_close(out.attentions[2], SB.attentions_last, ATOL, 0, "attentions[2]")
    end)

    it("gives padded keys zero attention", function()
      local n = #SB.tokens[2]
      local T = ids:shape()[2]
      for l = 1, 2 do
        local pads = out.attentions[l]:select(1, 2):narrow(3, n + 1, T - n)
        assert.are.equal(0, pads:abs():max():item())
      end
    end)

    it("gives the short sentence the outputs it has alone, unpadded", function()
      local n = #SB.tokens[2]
      local alone = attn.no_grad(function() return model(ids:select(1, 2):narrow(1, 1, n)) end)
      local padded = out.last_hidden_state:select(1, 2):narrow(1, 1, n)
      assert.is_true(maxdiff(alone.last_hidden_state:select(1, 1), padded) < ATOL)
      assert.is_true(maxdiff(alone.pooler_output:select(1, 1), out.pooler_output:select(1, 2)) < ATOL)
    end)

    it("uses the token types (1-based: second segment = 2)", function()
      local o = attn.no_grad(function() return model(ids, {attention_mask = mask}) end)
      assert.is_true(maxdiff(o.last_hidden_state:select(1, 1), row(SB.last_hidden_state, 1)) > 1e-3)
      -- the short sentence is all first segment: unchanged
      assert.is_true(maxdiff(o.last_hidden_state:select(1, 2), row(SB.last_hidden_state, 2)) < ATOL)
    end)
  end)

  it("applies dropout in training mode only", function()
    local ids = fx.tensor(S1.input_ids)
    attn.manual_seed(1)
    model:train()
    local a = attn.no_grad(function() return model(ids) end)
    local b = attn.no_grad(function() return model(ids) end)
    model:eval()
    local c = attn.no_grad(function() return model(ids) end)
    assert.is_true(maxdiff(a.last_hidden_state, b.last_hidden_state) > 1e-3)
    fx.assert_close(c.last_hidden_state, S1.last_hidden_state, ATOL, 0, "eval again")
  end)

  it("records autograd through the parameters when grad is enabled", function()
    local o = model(fx.tensor(S1.input_ids))
    o.pooler_output:sum():backward()
    local g = model.encoder.layer[1].attention.self.query.weight.grad
    assert.truthy(g)
    assert.is_true(g:abs():max():item() > 0)
    model:zero_grad()
  end)
end)

describe("checkpoint styles", function()
  local function check(dir, act, unused, fixture)
    local X = fx.load((fixture or ("bert/" .. dir:match("[^/]+$"))) .. "/expected")
    local model, info = bert.from_pretrained(dir)
    assert.are.equal(act, info.config.hidden_act)
    assert.are.same(unused, info.unused_keys)
    local out = attn.no_grad(function()
      return model(fx.tensor(X.input_ids), {token_type_ids = fx.tensor(X.token_type_ids),
        attention_mask = fx.tensor(X.attention_mask), output_attentions = true})
    end)
    fx.assert_close(out.last_hidden_state, X.last_hidden_state, ATOL, 0, dir .. " last_hidden_state")
    fx.assert_close(out.pooler_output, X.pooler_output, ATOL, 0, dir .. " pooler_output")
    fx.assert_close(out.attentions[1], X.attentions[1], ATOL, 0, dir .. " attentions[1]")
    return model, info, X
  end

  it("bert-base-uncased's: 'bert.' prefix, cls.* heads, an I64 position_ids buffer (gelu_new)", function()
    local X = fx.load("bert/pretraining/expected")
    local unused = {}
    for _, k in ipairs(X.keys) do
      if k:sub(1, 4) == "cls." or k == "bert.embeddings.position_ids" then unused[#unused + 1] = k end
    end
    assert.are.equal(9, #unused)
    local st = attn.safetensors_info(PRE .. "/model.safetensors")
    assert.are.equal("I64", st["bert.embeddings.position_ids"].dtype)
    check(PRE, "gelu_new", unused)
  end)

  it("old TF-port names: LayerNorm.gamma / .beta (gelu_pytorch_tanh)", function()
    local X = fx.load("bert/legacy/expected")
    local unused = {}
    for _, k in ipairs(X.keys) do
      if k:sub(1, 4) == "cls." then unused[#unused + 1] = k end
    end
    assert.truthy(attn.safetensors_info(LEGACY .. "/model.safetensors")["bert.embeddings.LayerNorm.gamma"])
    local model = check(LEGACY, "gelu_pytorch_tanh", unused)
    assert.truthy(model:state_dict()["embeddings.LayerNorm.weight"])
  end)

  it("keeps one copy of the weights: the parameters are the loaded tensors, the unused heads are freed", function()
    collectgarbage()
    collectgarbage()
    local before = attn.debug_counts()
    local model = bert.from_pretrained(PRE)
    collectgarbage()
    collectgarbage()
    local after = attn.debug_counts()
    local params = model:parameters()
    local bytes = 0 -- storages are rounded up to 64 bytes
    for _, p in ipairs(params) do bytes = bytes + (p:numel() * 4 + 63) // 64 * 64 end
    assert.are.equal(bytes, after.storage_bytes - before.storage_bytes)
    assert.are.equal(#params, after.storages - before.storages)
    assert.are.equal(#params, after.tensors - before.tensors)
  end)

  it("reads sharded checkpoints (model.safetensors.index.json)", function()
    local d = tmpdir()
    spit(d .. "/config.json", slurp(PRE .. "/config.json"))
    local all = attn.load(PRE .. "/model.safetensors")
    local a, b, map = {}, {}, {}
    for k, v in pairs(all) do
      if k:find("encoder", 1, true) then b[k] = v; map[k] = "model-00002-of-00002.safetensors"
      else a[k] = v; map[k] = "model-00001-of-00002.safetensors" end
    end
    attn.save(a, d .. "/model-00001-of-00002.safetensors")
    attn.save(b, d .. "/model-00002-of-00002.safetensors")
    local parts = {}
    for _, k in ipairs(keys_of(map)) do parts[#parts + 1] = ('"%s": "%s"'):format(k, map[k]) end
    spit(d .. "/model.safetensors.index.json",
      '{"metadata": {"total_size": 1}, "weight_map": {' .. table.concat(parts, ", ") .. "}}")
    local ok, err = pcall(check, d, "gelu_new", (function()
      local X = fx.load("bert/pretraining/expected")
      local u = {}
      for _, k in ipairs(X.keys) do
        if k:sub(1, 4) == "cls." or k == "bert.embeddings.position_ids" then u[#u + 1] = k end
      end
      return u
    end)(), "bert/pretraining")
    rmtree(d)
    assert(ok, err)
  end)
end)

describe("BertModel built from a config", function()
  local c = bert.read_config(DIR .. "/config.json")

  it("has the checkpoint's names, HF's init, and loads the checkpoint with load_state_dict", function()
    attn.manual_seed(0)
    local m = bert.BertModel(c)
    assert.is_true(m.training)
    local file = attn.safetensors_info(DIR .. "/model.safetensors")
    assert.are.same(keys_of(file), sorted(nn.state_dict_keys(m:state_dict())))
    local w = m.encoder.layer[2].intermediate.dense.weight
    assert.is_true(math.abs(w:std():item() - 0.02) < 0.002)
    assert.are.equal(0, m.encoder.layer[2].intermediate.dense.bias:abs():max():item())
    assert.are.equal(0, m.embeddings.word_embeddings.weight:select(1, 1):abs():max():item())
    assert.are.equal(1, m.embeddings.LayerNorm.weight:min():item())
    m:load(DIR .. "/model.safetensors")
    m:eval()
    local out = attn.no_grad(function() return m(fx.tensor(S1.input_ids)) end)
    fx.assert_close(out.last_hidden_state, S1.last_hidden_state, ATOL, 0, "load_state_dict")
  end)

  it("round-trips through save + from_pretrained", function()
    local m = bert.from_pretrained(DIR)
    local d = tmpdir()
    spit(d .. "/config.json", slurp(DIR .. "/config.json"))
    m:save(d .. "/model.safetensors")
    local m2 = bert.from_pretrained(d)
    rmtree(d)
    local out = attn.no_grad(function() return m2(fx.tensor(S1.input_ids)) end)
    fx.assert_close(out.pooler_output, S1.pooler_output, ATOL, 0, "round trip")
  end)

  it("can leave out the pooler", function()
    local m = bert.BertModel(c, {add_pooling_layer = false})
    assert.is_nil(m.pooler)
    assert.is_nil(m:state_dict()["pooler.dense.weight"])
    local m2 = bert.from_pretrained(DIR, {add_pooling_layer = false})
    local out = attn.no_grad(function() return m2(fx.tensor(S1.input_ids)) end)
    assert.is_nil(out.pooler_output)
    fx.assert_close(out.last_hidden_state, S1.last_hidden_state, ATOL, 0, "no pooler")
  end)

  it("fills BertConfig's defaults (bert-base-uncased's sizes)", function()
    local d = bert.config({})
    assert.are.equal(768, d.hidden_size)
    assert.are.equal(12, d.num_hidden_layers)
    assert.are.equal(12, d.num_attention_heads)
    assert.are.equal(3072, d.intermediate_size)
    assert.are.equal(30522, d.vocab_size)
    assert.are.equal(512, d.max_position_embeddings)
    assert.are.equal(1e-12, d.layer_norm_eps)
  end)

  it("rejects configs it cannot build", function()
    assert.matches("not a multiple of num_attention_heads", errmsg(bert.config, {hidden_size = 10, num_attention_heads = 3}))
    assert.matches("hidden_act swiglu is not supported", errmsg(bert.config, {hidden_act = "swiglu"}))
    assert.matches("position_embedding_type relative_key is not supported",
      errmsg(bert.config, {position_embedding_type = "relative_key"}))
    assert.matches("vocab_size must be an integer", errmsg(bert.config, {vocab_size = "many"}))
    assert.matches("num_attention_heads must be positive", errmsg(bert.config, {num_attention_heads = 0}))
    assert.matches("hidden_dropout_prob must be a number in %[0, 1%]", errmsg(bert.config, {hidden_dropout_prob = 2}))
  end)
end)

describe("errors", function()
  local model = bert.from_pretrained(DIR)
  local ids = fx.tensor(S1.input_ids)

  it("names the missing directory or file", function()
    assert.matches("no config.json in '/nonexistent/bert'", errmsg(bert.from_pretrained, "/nonexistent/bert"))
    local d = tmpdir()
    spit(d .. "/config.json", slurp(DIR .. "/config.json"))
    local e = errmsg(bert.from_pretrained, d)
    assert.matches("has no model.safetensors", e)
    spit(d .. "/pytorch_model.bin", "not really")
    e = errmsg(bert.from_pretrained, d)
    rmtree(d)
    assert.matches("only pytorch_model.bin, which attn cannot read; convert it with torch", e)
    assert.matches("save_file", e)
  end)

  it("names config.json when it is not valid JSON", function()
    local d = tmpdir()
    spit(d .. "/config.json", '{"hidden_size": 64,\n "vocab_size": }')
    local e = errmsg(bert.from_pretrained, d)
    rmtree(d)
    assert.matches("config.json': invalid JSON at line 2", e)
  end)

  it("reports weights that do not fit config.json", function()
    local d = tmpdir()
    spit(d .. "/config.json", (slurp(DIR .. "/config.json"):gsub('"vocab_size": 302', '"vocab_size": 300')))
    spit(d .. "/model.safetensors", slurp(DIR .. "/model.safetensors"))
    local e = errmsg(bert.from_pretrained, d)
    rmtree(d)
    assert.matches("embeddings.word_embeddings.weight has shape %[302, 64%], expected %[300, 64%]", e)
  end)

  it("reports missing weights by name, and a checkpoint without a pooler gives a model without one", function()
    local d = tmpdir()
    spit(d .. "/config.json", slurp(DIR .. "/config.json"))
    local all = attn.load(DIR .. "/model.safetensors")
    all["encoder.layer.1.output.dense.bias"] = nil
    attn.save(all, d .. "/model.safetensors")
    local e = errmsg(bert.from_pretrained, d)
    assert.matches("missing encoder.layer.1.output.dense.bias", e)
    all = attn.load(DIR .. "/model.safetensors")
    all["pooler.dense.weight"], all["pooler.dense.bias"] = nil, nil
    attn.save(all, d .. "/model.safetensors")
    local m, info = bert.from_pretrained(d)
    rmtree(d)
    assert.is_nil(m.pooler)
    assert.are.same({"pooler.dense.weight", "pooler.dense.bias"}, info.missing_keys)
    local out = attn.no_grad(function() return m(ids) end)
    assert.is_nil(out.pooler_output)
    fx.assert_close(out.last_hidden_state, S1.last_hidden_state, ATOL, 0, "pooler-less")
  end)

  it("rejects a checkpoint holding both gamma and weight of one LayerNorm", function()
    local d = tmpdir()
    spit(d .. "/config.json", slurp(DIR .. "/config.json"))
    local all = attn.load(DIR .. "/model.safetensors")
    all["embeddings.LayerNorm.gamma"] = all["embeddings.LayerNorm.weight"]
    attn.save(all, d .. "/model.safetensors")
    local e = errmsg(bert.from_pretrained, d)
    rmtree(d)
    assert.matches("holds both embeddings.LayerNorm.gamma and embeddings.LayerNorm.weight", e)
  end)

  it("explains 1-based ids and token types", function()
    assert.matches("input_ids must lie in 1..302 %(found 0%).*1%-based",
      errmsg(model.forward, model, attn.tensor({{3, 0, 4}})))
    assert.matches("input_ids must lie in 1..302 %(found 303%)", errmsg(model.forward, model, attn.tensor({{303}})))
    assert.matches("token_type_ids must lie in 1..2 %(found 0%).*first segment is 1",
      errmsg(model.forward, model, ids, {token_type_ids = attn.zeros(1, 12)}))
  end)

  it("checks shapes, lengths and options", function()
    assert.matches("token_type_ids has shape %[1, 11%], expected %[1, 12%]",
      errmsg(model.forward, model, ids, {token_type_ids = attn.ones(1, 11)}))
    assert.matches("attention_mask has shape %[2, 12%]",
      errmsg(model.forward, model, ids, {attention_mask = attn.ones(2, 12)}))
    assert.matches("input_ids must be %[batch, seq_len%], got %[1, 1, 12%]",
      errmsg(model.forward, model, ids:unsqueeze(1)))
    assert.matches("sequence length 33 exceeds max_position_embeddings 32",
      errmsg(model.forward, model, attn.ones(1, 33)))
    assert.matches("unknown option 'output_attention'",
      errmsg(model.forward, model, ids, {output_attention = true}))
    assert.matches("unknown option 'strict'", errmsg(bert.from_pretrained, DIR, {strict = true}))
  end)
end)

describe("bert.json_decode", function()
  local J = bert.json_decode

  it("reads objects, arrays, strings with escapes, numbers, literals", function()
    local v = J(' { "a": [1, -2, 3.5, 1e3, -0.25E-2, 0], "b": {"c": true, "d": false, "e": null},'
      .. ' "s": "q\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00", "empty": {}, "list": [] } ')
    assert.are.same({1, -2, 3.5, 1000.0, -0.0025, 0}, v.a)
    assert.are.equal("integer", math.type(v.a[1]))
    assert.are.equal("float", math.type(v.a[4]))
    assert.is_true(v.b.c)
    assert.is_false(v.b.d)
    assert.is_nil(v.b.e)
    assert.are.equal('q"\\/\b\f\n\r\té😀', v.s)
    assert.are.same({}, v.empty)
    assert.are.same({}, v.list)
    assert.are.equal("x", J('"x"'))
    assert.are.equal(1e-12, J("1e-12"))
  end)

  it("rejects what is not JSON, naming the source and position", function()
    local cases = {
      ['{"a": 1,}'] = "expected a string key",
      ["[1, 2"] = "unexpected end of text",
      ["[1 2]"] = "expected ',' or ']'",
      ["01"] = "bad number",
      ["1."] = "bad number",
      ["1e"] = "bad number",
      ['"abc'] = "unterminated string",
      ['"a\nb"'] = "control character",
      ['"\\x"'] = "bad escape",
      ['"\\ud800"'] = "unpaired surrogate",
      ["{} x"] = "unexpected text after the value",
      ["nul"] = "unexpected 'n'",
      [""] = "unexpected end of text",
      [("["):rep(300)] = "nested too deeply",
    }
    for text, msg in pairs(cases) do
      local e = errmsg(J, text, "t.json")
      assert.truthy(e:find("t.json: invalid JSON at line 1 (byte ", 1, true), e)
      assert.truthy(e:find(msg, 1, true), ("%q: %s"):format(text, e))
    end
  end)
end)
