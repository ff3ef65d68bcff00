-- SPDX-License-Identifier: MIT
-- attn.nn's transformer layers (lua/attn/transformer.lua) against torch
-- 1.13 (fixtures from scripts/fixtures/gen_transformer.py): torch's
-- state_dicts load as is, and outputs, input gradients and parameter
-- gradients match in train mode (dropout 0, and dropout > 0 with the same
-- seed: attn draws torch's dropout masks) and eval mode, post-norm and
-- norm_first, relu / gelu / a function, with float and bool masks; and
-- attn.manual_seed(s) gives torch's initial weights.
local attn = require "attn"
local fx = require "support.fixture"
local nn = attn.nn

local fix = fx.load("transformer_layers")

local function activation(a)
  if a == "tanh_fn" then return function(x) return x:tanh() end end
  return a
end

local function build(c)
  local a = c.args
  if c.cls == "TransformerEncoder" or c.cls == "TransformerDecoder" then
    local Layer = c.cls == "TransformerEncoder" and nn.TransformerEncoderLayer or nn.TransformerDecoderLayer
    local layer = Layer(4, 2, 6, a.dropout or 0, activation(a.activation or "relu"),
      {batch_first = a.batch_first or false, norm_first = a.norm_first or false})
    local Stack = nn[c.cls]
    return Stack(layer, 2, a.norm and nn.LayerNorm(4) or nil)
  end
  local opts = {}
  for k, v in pairs(a) do opts[k] = v end
  opts.activation = activation(opts.activation)
  if c.cls == "Transformer" then return nn.Transformer(opts) end
  local d_model, nhead = opts.d_model, opts.nhead
  opts.d_model, opts.nhead = nil, nil
  return nn[c.cls](d_model, nhead, opts)
end

local function state_of(list)
  local sd = {}
  for _, p in ipairs(list) do sd[p[1]] = fx.tensor(p[2]) end
  return sd
end

-- a fixture mask -> what the module gets: float masks as tensors (read as
-- additive), bool masks as Lua boolean tables or as 0/1 tensors with
-- <name>_kind = "bool" (alternating, so both forms are covered)
local function masks_of(c, opts, as_table)
  for name, m in pairs(c.masks) do
    local t = fx.tensor(m.t)
    if m.bool then
      if as_table then
        local function conv(v)
          if type(v) == "table" then
            local out = {}
            for i, x in ipairs(v) do out[i] = conv(x) end
            return out
          end
          return v ~= 0
        end
        opts[name] = conv(t:totable())
      else
        opts[name] = t
        opts[name .. "_kind"] = "bool"
      end
    else
      opts[name] = t
    end
  end
  return opts
end

local function call(c, m, xs, opts)
  if c.cls == "TransformerEncoderLayer" or c.cls == "TransformerEncoder" then
    return m(xs[1], opts)
  end
  return m(xs[1], xs[2], opts)
end

local function label(c, i)
  local parts = {}
  for k, v in pairs(c.args) do parts[#parts + 1] = k .. "=" .. tostring(v) end
  table.sort(parts)
  return ("case %d %s(%s) %s"):format(i, c.cls, table.concat(parts, ","), c.train and "train" or "eval")
end

describe("nn transformer layers against torch", function()
  it("load torch's state_dicts and match outputs and gradients", function()
    local n = 0
    for i, c in ipairs(fix.cases) do
      local what = label(c, i)
      local m = build(c)
      local sd = state_of(c.state)
      -- torch's names, all of them and no others
      local res = m:load_state_dict(sd)
      assert.are.equal(0, #res.missing_keys, what)
      m:train(c.train)
      local xs = {}
      for k, x in ipairs(c.inputs) do xs[k] = fx.tensor(x):requires_grad_(true) end
      local opts = masks_of(c, {}, i % 2 == 0)
      -- dropout > 0 in train mode: attn draws torch's masks after the same seed
      if c.seed then attn.manual_seed(c.seed) end
      local out = call(c, m, xs, opts)
      fx.assert_close(out, c.out, 1e-5, 1e-5, what .. " out")
      m:zero_grad()
      ;(out * fx.tensor(c.gout)):sum():backward()
      for k, g in ipairs(c.grads.inputs) do
        fx.assert_close(xs[k].grad, g, 1e-4, 1e-4, what .. " input " .. k .. " grad")
      end
      local params = {}
      for name, p in m:named_parameters() do params[name] = p end
      local count = 0
      for _, pg in ipairs(c.grads.params) do
        local p = params[pg[1]]
        assert(p, what .. ": no parameter " .. pg[1])
        fx.assert_close(p.grad, pg[2], 1e-4, 1e-4, what .. " grad " .. pg[1])
        count = count + 1
      end
      local total = 0
      for _ in pairs(params) do total = total + 1 end
      assert.are.equal(count, total, what .. ": parameter count")
      n = n + 1
    end
    assert.is_true(n >= 21)
  end)

  it("initialise as torch does: attn.manual_seed(s) gives torch's weights", function()
    local n = 0
    for i, c in ipairs(fix.cases) do
      -- the generator seeded torch with index + 6 before building each module
      if c.cls ~= "TransformerEncoder" and c.cls ~= "TransformerDecoder" then
        attn.manual_seed(i + 6)
        local sd = build(c):state_dict()
        for _, p in ipairs(c.state) do fx.assert_close(sd[p[1]], p[2], 0, 0, label(c, i) .. " init " .. p[1]) end
        n = n + 1
      end
    end
    assert.is_true(n >= 15)
  end)

  it("take masks positionally as torch does", function()
    local c
    for _, cc in ipairs(fix.cases) do
      if cc.cls == "TransformerDecoderLayer" and cc.masks.memory_mask then c = cc break end
    end
    local m = build(c)
    m:load_state_dict(state_of(c.state))
    m:train(c.train)
    local tgt, mem = fx.tensor(c.inputs[1]), fx.tensor(c.inputs[2])
    local function bool_table(f)
      local t = fx.tensor(f.t):totable()
      for _, row in ipairs(t) do for j, v in ipairs(row) do row[j] = v ~= 0 end end
      return t
    end
    local out = m(tgt, mem, fx.tensor(c.masks.tgt_mask.t), fx.tensor(c.masks.memory_mask.t),
      bool_table(c.masks.tgt_key_padding_mask), bool_table(c.masks.memory_key_padding_mask))
    fx.assert_close(out, c.out, 1e-5, 1e-5, "positional masks")
  end)

  it("generate_square_subsequent_mask gives torch's float -inf/0 mask", function()
    local m = nn.Transformer.generate_square_subsequent_mask(fix.square.sz)
    fx.assert_close(m, fix.square.mask, 0, 0, "square mask")
    local t = nn.Transformer({d_model = 4, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1,
                              dim_feedforward = 6})
    fx.assert_close(t:generate_square_subsequent_mask(fix.square.sz), fix.square.mask, 0, 0, "method form")
    assert.are.same({0, 0}, nn.Transformer.generate_square_subsequent_mask(0):shape())
  end)
end)

describe("nn transformer layers", function()
  it("name and shape parameters as torch does", function()
    local l = nn.TransformerDecoderLayer(8, 2, {dim_feedforward = 16})
    local names = nn.state_dict_keys(l:state_dict())
    assert.are.same({"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
      "self_attn.out_proj.bias", "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias",
      "multihead_attn.out_proj.weight", "multihead_attn.out_proj.bias", "linear1.weight", "linear1.bias",
      "linear2.weight", "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias",
      "norm3.weight", "norm3.bias"}, names)
    local t = nn.Transformer(8, 2, 1, 1, 16)
    local keys = nn.state_dict_keys(t:state_dict())
    assert.are.equal("encoder.layers.0.self_attn.in_proj_weight", keys[1])
    assert.are.equal("decoder.norm.bias", keys[#keys])
    assert.is_true(nn.isinstance(t.encoder.layers[1], nn.TransformerEncoderLayer))
    assert.are.equal(0.1, t.encoder.layers[1].dropout.p)
  end)

  it("keep the stacked layers independent (deep copies of the given layer)", function()
    local layer = nn.TransformerEncoderLayer(4, 2, 6, 0)
    local enc = nn.TransformerEncoder(layer, 3)
    assert.are.equal(3, #enc.layers)
    local a, b = enc.layers[1].linear1.weight, enc.layers[2].linear1.weight
    assert.is_false(rawequal(a, b))
    assert.is_false(rawequal(a, layer.linear1.weight))
    assert.are.equal(0, (a - layer.linear1.weight):abs():max():item())
    local before = b:clone()
    attn.no_grad(function() a:add_(1) end)
    assert.are.equal(0, (b - before):abs():max():item()) -- b has storage of its own
    assert.is_true(math.abs((a - b):abs():min():item() - 1) < 1e-5)
  end)

  it("take an activation module as torch's child 'activation'", function()
    local l = nn.TransformerEncoderLayer(4, 2, 6, 0, nn.GELU())
    local g = nn.TransformerEncoderLayer(4, 2, 6, 0, "gelu")
    g:load_state_dict(l:state_dict())
    local x = attn.randn(3, 2, 4)
    fx.assert_close(l(x), {shape = {3, 2, 4}, data = fx.flat(g(x))}, 1e-6, 0, "module activation")
    local kids = {}
    for name in l:named_children() do kids[#kids + 1] = name end
    assert.are.equal("activation", kids[#kids])
  end)

  it("take custom encoders and decoders as torch does", function()
    attn.manual_seed(9)
    local enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 6, 0), 1)
    local Plain = nn.Module:extend("PlainEncoder")
    local seen
    function Plain.forward(_, src, opts) seen = opts; return src * 2 end
    local t = nn.Transformer({d_model = 4, nhead = 2, num_decoder_layers = 1, dim_feedforward = 6, dropout = 0,
                              custom_encoder = Plain()})
    assert.is_nil(t:state_dict()["encoder.layers.0.linear1.weight"])
    local src, tgt = attn.randn(3, 2, 4), attn.randn(2, 2, 4)
    local mask = nn.Transformer.generate_square_subsequent_mask(3)
    local out = t(src, tgt, {src_mask = mask})
    assert.are.same({2, 2, 4}, out:shape())
    assert.is_true(rawequal(seen.mask, mask)) -- torch's call: encoder(src, mask=, src_key_padding_mask=)
    local direct = t.decoder(tgt, src * 2)
    assert.is_true((out - direct):abs():max():item() < 1e-6)
    local t2 = nn.Transformer({d_model = 4, nhead = 2, num_decoder_layers = 1, dim_feedforward = 6, dropout = 0,
                               custom_encoder = enc})
    assert.is_true(rawequal(t2.encoder, enc))
    local o2 = t2(src, tgt)
    assert.is_true((o2 - t2.decoder(tgt, enc(src))):abs():max():item() < 1e-6)
  end)

  it("accept a float 0/1 mask only with its kind", function()
    local l = nn.TransformerEncoderLayer(4, 2, 6, 0)
    local x = attn.randn(3, 2, 4)
    local pad = attn.tensor({{0.0, 0.0, 1.0}, {0.0, 0.0, 0.0}})
    assert.has_error(function() l(x, {src_key_padding_mask = pad}) end)
    local ok, err = pcall(l, x, {src_key_padding_mask = pad})
    assert.is_false(ok)
    assert.matches("src_key_padding_mask holds only 0s and 1s", err)
    local a = l(x, {src_key_padding_mask = pad, src_key_padding_mask_kind = "bool"})
    local b = l(x, {src_key_padding_mask = {{false, false, true}, {false, false, false}}})
    assert.are.equal(0, (a - b):abs():max():item())
    -- additive masks of 0 and -inf are read as such
    local c = l(x, {src_key_padding_mask = attn.tensor({{0.0, 0.0, -math.huge}, {0.0, 0.0, 0.0}})})
    assert.is_true((a - c):abs():max():item() < 1e-6)
  end)

  it("raise errors that point at the caller and name the argument", function()
    local l = nn.TransformerEncoderLayer(4, 2, 6, 0)
    local ok, err = pcall(function() local r = l(attn.randn(3, 2, 5)); return r end)
    assert.is_false(ok)
    assert.matches("transformer_spec.lua:%d+: TransformerEncoderLayer: src has 5 features, expected d_model = 4", err)
    ok, err = pcall(function() local r = l(attn.randn(3, 2, 4), attn.zeros(2, 2)); return r end)
    assert.matches("transformer_spec.lua:%d+: TransformerEncoderLayer: src_mask has shape %[2, 2%], expected %[3, 3%]",
      err)
    ok, err = pcall(function() local r = nn.TransformerEncoderLayer(6, 4); return r end)
    assert.matches("transformer_spec.lua:%d+: TransformerEncoderLayer: d_model must be divisible by nhead", err)
    ok, err = pcall(function() local r = nn.TransformerEncoderLayer(4, 2, {activation = "swish"}); return r end)
    assert.matches("transformer_spec.lua:%d+: TransformerEncoderLayer: activation should be", err)
    ok, err = pcall(function() local r = nn.TransformerEncoderLayer(4, 2, {dim_feedforwad = 3}); return r end)
    assert.matches("transformer_spec.lua:%d+: TransformerEncoderLayer: unknown option 'dim_feedforwad'", err)
    ok, err = pcall(function() local r = nn.TransformerEncoder(l, 1.5); return r end)
    assert.matches("transformer_spec.lua:%d+: TransformerEncoder: num_layers must be an integer", err)
    local t = nn.Transformer({d_model = 4, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1})
    ok, err = pcall(function() local r = t(attn.randn(3, 2, 4), attn.randn(3, 1, 4)); return r end)
    assert.matches("transformer_spec.lua:%d+: Transformer: the batch number of src", err)
    ok, err = pcall(function() local r = t(attn.randn(3, 2, 4), attn.randn(3, 2, 4), {tgt_mask = attn.zeros(2, 2)}); return r end)
    assert.matches("transformer_spec.lua:%d+: Transformer: tgt_mask has shape", err)
    ok, err = pcall(function() local r = nn.Transformer({d_model = 6, nhead = 4}); return r end)
    assert.matches("transformer_spec.lua:%d+: TransformerEncoderLayer: d_model must be divisible by nhead", err)
  end)

  it("pass gradchecks on small shapes", function()
    attn.manual_seed(5)
    for _, norm_first in ipairs({false, true}) do
      local l = nn.TransformerEncoderLayer(4, 2, 6, 0, "gelu", {norm_first = norm_first})
      local x = attn.randn(3, 2, 4):requires_grad_(true)
      local mask = nn.Transformer.generate_square_subsequent_mask(3)
      local params = l:parameters()
      assert.is_true(attn.gradcheck(function(v) return l(v, mask) end, {x, table.unpack(params)}))
    end
    local d = nn.TransformerDecoderLayer(4, 2, 6, 0, "relu", {batch_first = true})
    local tgt = attn.randn(2, 3, 4):requires_grad_(true)
    local mem = attn.randn(2, 2, 4):requires_grad_(true)
    assert.is_true(attn.gradcheck(function(a, b) return d(a, b, {tgt_key_padding_mask = {{false, false, true},
      {false, false, false}}}) end, {tgt, mem}))
  end)
end)
