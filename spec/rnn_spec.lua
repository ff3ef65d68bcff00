-- SPDX-License-Identifier: MIT
-- nn.RNN / nn.GRU / nn.LSTM and nn.utils.rnn against torch 1.13 (fixtures
-- from scripts/fixtures/gen_rnn.py): torch's state_dicts load as is; the
-- outputs, final states and the gradients of the input, the initial states
-- and every parameter match.
local attn = require "attn"
local nn = attn.nn
local fx = require "support.fixture"
local U = nn.utils.rnn

local FWD, GRAD = 1e-5, 1e-4
local fix = fx.load("rnn")

local function state_dict(params)
  local sd = {}
  for _, e in ipairs(params) do sd[e[1]] = fx.tensor(e[2]) end
  return sd
end

local function build(c)
  local m = nn[c.kind](c.I, c.H, c.opts)
  m:load_state_dict(state_dict(c.params))
  return m
end

local function leaf(f)
  if f == nil then return nil end
  return fx.tensor(f):requires_grad_(true)
end

-- m(inp, initial state): output, h_n and (an LSTM's) c_n.
local function forward_rnn(m, kind, inp, h0, c0)
  if kind == "LSTM" then
    local out, st = m(inp, h0 and {h0, c0} or nil)
    return out, st[1], st[2]
  end
  local out, hn = m(inp, h0)
  return out, hn, nil
end

local function check_grads(m, c, x, h0, c0, label)
  fx.assert_close(x.grad, c.dx, GRAD, 0, label .. " dx")
  if c.dh0 then fx.assert_close(h0.grad, c.dh0, GRAD, 0, label .. " dh0") end
  if c.dc0 then fx.assert_close(c0.grad, c.dc0, GRAD, 0, label .. " dc0") end
  local params = {}
  for name, p in m:named_parameters() do params[name] = p end
  for _, e in ipairs(c.pgrads) do
    fx.assert_close(params[e[1]].grad, e[2], GRAD, 0, label .. " grad of " .. e[1])
  end
end

describe("nn.RNN / nn.GRU / nn.LSTM", function()
  it("have torch's parameter names, order and init", function()
    for _, c in ipairs(fix.inits) do
      attn.manual_seed(c.seed)
      local m = nn[c.kind](c.I, c.H, c.opts)
      local i = 0
      for name, p in m:named_parameters() do
        i = i + 1
        assert.are.equal(c.params[i][1], name)
        fx.assert_close(p, c.params[i][2], 0, 0, c.kind .. " init " .. name)
      end
      assert.are.equal(#c.params, i)
    end
  end)

  for _, c in ipairs(fix.cases) do
    it("match torch's outputs, final states and gradients: " .. c.name, function()
      local m = build(c)
      if c.name:find("eval") then m:eval() end
      local x, h0, c0 = leaf(c.x), leaf(c.h0), leaf(c.c0)
      local out, hn, cn = forward_rnn(m, c.kind, x, h0, c0)
      fx.assert_close(out, c.out, FWD, 0, c.name .. " output")
      fx.assert_close(hn, c.hn, FWD, 0, c.name .. " h_n")
      if c.cn then fx.assert_close(cn, c.cn, FWD, 0, c.name .. " c_n") end
      local loss = (out * fx.tensor(c.gout)):sum() + (hn * fx.tensor(c.gh)):sum()
      if c.cn then loss = loss + (cn * fx.tensor(c.gc)):sum() end
      loss:backward()
      check_grads(m, c, x, h0, c0, c.name)
    end)
  end

  for _, c in ipairs(fix.packed) do
    it("take a PackedSequence with torch's results: " .. c.name, function()
      local m = build(c)
      local bf = c.opts.batch_first == true
      local x, h0, c0 = leaf(c.x), leaf(c.h0), leaf(c.c0)
      -- lengths as a tensor for one half of the cases, a list for the other
      local lengths = c.enforce_sorted and attn.tensor(c.lengths) or c.lengths
      local packed = U.pack_padded_sequence(x, lengths, {batch_first = bf, enforce_sorted = c.enforce_sorted})
      local out, hn, cn = forward_rnn(m, c.kind, packed, h0, c0)
      assert.is_true(U.is_packed(out))
      assert.are.same(c.batch_sizes, out.batch_sizes:totable())
      if c.sorted_indices then
        assert.are.same(c.sorted_indices, out.sorted_indices:totable())
      else
        assert.is_nil(out.sorted_indices)
      end
      fx.assert_close(out.data, c.out, FWD, 0, c.name .. " packed output")
      fx.assert_close(hn, c.hn, FWD, 0, c.name .. " h_n")
      if c.cn then fx.assert_close(cn, c.cn, FWD, 0, c.name .. " c_n") end
      local padded, lens = U.pad_packed_sequence(out, {batch_first = bf, padding_value = -1.5})
      fx.assert_close(padded, c.padded, FWD, 0, c.name .. " padded output")
      assert.are.same(c.padded_lengths, lens:totable())
      local loss = (out.data * fx.tensor(c.gout)):sum() + (hn * fx.tensor(c.gh)):sum()
      if c.cn then loss = loss + (cn * fx.tensor(c.gc)):sum() end
      loss:backward()
      check_grads(m, c, x, h0, c0, c.name)
    end)
  end

  it("draw torch's dropout masks between layers for the same seed", function()
    for _, c in ipairs(fix.drops) do
      local m = nn[c.kind](3, 4, c.opts)
      m:load_state_dict(state_dict(c.params))
      local x = fx.tensor(c.x)
      local input = x
      if c.lengths then input = U.pack_padded_sequence(x, c.lengths, false, false) end
      attn.manual_seed(c.seed)
      local out = m(input)
      if c.lengths then out = out.data end
      fx.assert_close(out, c.out, FWD, 0, c.kind .. " dropout seed " .. c.seed)
      -- eval mode: no dropout, and the same as a 0-dropout run
      m:eval()
      local a = m(input)
      m.dropout = 0
      m:train()
      local b = m(input)
      if c.lengths then a, b = a.data, b.data end
      assert.are.same(a:totable(), b:totable())
    end
  end)

  it("take num_layers positionally and print like torch", function()
    local m = nn.GRU(3, 4, 2, {batch_first = true, dropout = 0.5, bidirectional = true})
    assert.are.equal(2, m.num_layers)
    assert.are.equal("GRU(3, 4, num_layers=2, batch_first=True, dropout=0.5, bidirectional=True)", tostring(m))
    assert.are.equal("LSTM(3, 5, proj_size=2, bias=False)", tostring(nn.LSTM(3, 5, {proj_size = 2, bias = false})))
    -- torch 1.13 prints no nonlinearity either
    assert.are.equal("RNN(2, 3)", tostring(nn.RNN(2, 3, {nonlinearity = "relu"})))
  end)

  it("pass gradcheck on small shapes", function()
    attn.manual_seed(3)
    for _, kind in ipairs({"RNN", "GRU", "LSTM"}) do
      local m = nn[kind](2, 3, {num_layers = 2, bidirectional = true})
      local x = (attn.randn(3, 2, 2) * 0.5):requires_grad_(true)
      local h0 = (attn.randn(4, 2, 3) * 0.5):requires_grad_(true)
      local function run(xx, hh)
        local out, st = m(xx, kind == "LSTM" and {hh, hh * 0.5} or hh)
        return {out, kind == "LSTM" and st[1] or st}
      end
      assert.is_true(attn.gradcheck(run, {x, h0}))
      -- parameters
      local w = m.weight_hh_l0_reverse
      assert.is_true(attn.gradcheck(function() return run(x, h0) end, {w}))
      -- a packed batch
      local xp = (attn.randn(3, 3, 2) * 0.5):requires_grad_(true)
      assert.is_true(attn.gradcheck(function(v)
        local out, st = m(U.pack_padded_sequence(v, {2, 3, 1}, false, false))
        return {out.data, kind == "LSTM" and st[2] or st}
      end, {xp}))
    end
  end)

  it("check their arguments and point at the caller", function()
    local m = nn.GRU(3, 4, {num_layers = 2})
    local ok, err = pcall(function() local y = m(attn.zeros(2, 5, 4)) return y end)
    assert.is_false(ok)
    assert.matches("rnn_spec.lua:%d+: GRU: input.size%(%-1%) must be equal to input_size. Expected 3, got 4", err)
    ok, err = pcall(function() local y = m(attn.zeros(5, 2, 3), attn.zeros(1, 2, 4)) return y end)
    assert.matches("rnn_spec.lua:%d+: GRU: Expected hidden size %[2, 2, 4%], got %[1, 2, 4%]", err)
    ok, err = pcall(function() local y = m(attn.zeros(5, 2, 3, 1)) return y end)
    assert.matches("GRU: Expected input to be 2%-D or 3%-D but received 4%-D tensor", err)
    ok, err = pcall(function() local y = nn.LSTM(3, 4)(attn.zeros(5, 2, 3), attn.zeros(1, 2, 4)) return y end)
    assert.matches("LSTM: hx must be a table {h0, c0}", err)
    ok, err = pcall(function() local y = nn.LSTM(3, 4)(attn.zeros(5, 2, 3), {attn.zeros(1, 2, 4)}) return y end)
    assert.matches("LSTM: hx%[2%] %(c0%) must be a tensor", err)
    ok, err = pcall(function() local y = nn.GRU(3, 4, {proj_size = 2}) return y end)
    assert.matches("rnn_spec.lua:%d+: GRU: unknown option 'proj_size'", err)
    ok, err = pcall(function() local y = nn.LSTM(3, 4, {proj_size = 4}) return y end)
    assert.matches("LSTM: proj_size %(4%) has to be smaller than hidden_size %(4%)", err)
    ok, err = pcall(function() local y = nn.RNN(3, 4, {nonlinearity = "gelu"}) return y end)
    assert.matches("RNN: unknown nonlinearity 'gelu'", err)
    ok, err = pcall(function() local y = nn.GRU(3, 4, {dropout = 1.5}) return y end)
    assert.matches("GRU: dropout should be a number in range %[0, 1%]", err)
    ok, err = pcall(function() local y = nn.GRU(3, 0) return y end)
    assert.matches("GRU: hidden_size must be at least 1", err)
    ok, err = pcall(function() local y = nn.GRU(3, 4, 2, {num_layers = 2}) return y end)
    assert.matches("GRU: num_layers given twice", err)
  end)

  it("run a zero-step batch and a batch of one", function()
    local m = nn.GRU(3, 4)
    local y, h = m(attn.randn(1, 1, 3))
    assert.are.same({1, 1, 4}, y:shape())
    assert.are.same({1, 1, 4}, h:shape())
    y, h = m(attn.zeros(0, 2, 3))
    assert.are.same({0, 2, 4}, y:shape())
    assert.are.same(attn.zeros(8):totable(), h:reshape(-1):totable())
    assert.are.same({1, 2, 4}, h:shape())
  end)
end)

describe("nn.utils.rnn", function()
  it("pad_sequence pads like torch, time-major or batch-first", function()
    local seqs = {}
    for i, s in ipairs(fix.pads.seqs) do seqs[i] = fx.tensor(s) end
    fx.assert_close(U.pad_sequence(seqs), fix.pads.tm, 0, 0, "pad_sequence")
    fx.assert_close(U.pad_sequence(seqs, true, -2), fix.pads.bf, 0, 0, "pad_sequence batch_first")
    fx.assert_close(U.pad_sequence(seqs, {batch_first = true, padding_value = -2}), fix.pads.bf, 0, 0,
      "pad_sequence with options")
    -- differentiable
    local a = attn.randn(2, 3):requires_grad_(true)
    U.pad_sequence({a, attn.randn(4, 3)}):sum():backward()
    assert.are.same(attn.ones(2, 3):totable(), a.grad:totable())
    assert.has_error(function() U.pad_sequence({attn.zeros(2, 3), attn.zeros(2, 4)}) end,
      "pad_sequence: sequences[2] has shape [2, 4], whose trailing dims differ from sequences[1]'s [2, 3]")
    assert.has_error(function() U.pad_sequence({}) end, "pad_sequence: sequences must be a non-empty list of tensors")
  end)

  it("pack_padded_sequence lays out the data like torch, ties included", function()
    local L = fix.layout
    local p = U.pack_padded_sequence(fx.tensor(L.x), L.lengths, false, false)
    fx.assert_close(p.data, L.data, 0, 0, "packed data")
    assert.are.same(L.batch_sizes, p.batch_sizes:totable())
    assert.are.same(L.sorted_indices, p.sorted_indices:totable())
    assert.are.same(L.unsorted_indices, p.unsorted_indices:totable())
    assert.are.same(L.lengths, p:lengths())
    local padded, lens = U.pad_packed_sequence(p, {total_length = 5})
    fx.assert_close(padded, L.padded_total5, 0, 0, "pad_packed_sequence total_length")
    assert.are.same(L.lengths, lens:totable())
    -- pack_sequence is pad_sequence + pack_padded_sequence
    local seqs = {attn.randn(3, 2), attn.randn(2, 2)}
    local ps = U.pack_sequence(seqs)
    assert.are.same({2, 2, 1}, ps.batch_sizes:totable())
    assert.is_nil(ps.sorted_indices)
  end)

  it("checks lengths", function()
    local x = attn.zeros(3, 2, 1)
    assert.has_error(function() U.pack_padded_sequence(x, {1, 2}) end,
      "pack_padded_sequence: lengths must be sorted in decreasing order when enforce_sorted is true (lengths[2] = 2 > "
      .. "lengths[1] = 1); sort the batch or pass enforce_sorted = false")
    assert.has_error(function() U.pack_padded_sequence(x, {4, 2}) end,
      "pack_padded_sequence: lengths[1] is 4, longer than the input's 3 steps")
    assert.has_error(function() U.pack_padded_sequence(x, {2, 0}) end,
      "pack_padded_sequence: lengths[2] is 0; every sequence must have at least one step")
    assert.has_error(function() U.pack_padded_sequence(x, {2}) end,
      "pack_padded_sequence: expected 2 lengths (the batch size of input [3, 2, 1]), got 1")
    assert.has_error(function() U.pack_padded_sequence(x, {2, 1.5}) end,
      "pack_padded_sequence: lengths[2] must be an integer (got 1.5)")
    assert.has_error(function() U.pack_padded_sequence(x, attn.ones(2, 1)) end,
      "pack_padded_sequence: lengths must be a 1-d tensor or a list, got a tensor of shape [2, 1]")
    assert.has_error(function() U.pad_packed_sequence(x) end,
      "pad_packed_sequence: sequence must be a PackedSequence (got userdata)")
    local p = U.pack_padded_sequence(x, {3, 1})
    assert.has_error(function() U.pad_packed_sequence(p, {total_length = 2}) end,
      "pad_packed_sequence: total_length 2 is shorter than the longest sequence (3)")
  end)
end)
