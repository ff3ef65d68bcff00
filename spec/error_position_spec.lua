-- SPDX-License-Identifier: MIT
-- Issue 15 item 5: an error caused by a bad argument in the user's code
-- is raised from the user's line (this file), however deep inside attn
-- (C binding, lua/attn modules, generated wrappers) it is found, and the
-- messages for predictable torch habits say what to write instead.
local attn = require "attn"
local nn, F = attn.nn, attn.F

local SRC = debug.getinfo(1, "S").short_src

-- Calls f (which must not tail-call: its own line is the user's line),
-- expects an error and returns the message and f's line of the call.
local err_of = require("support.errors").message

local function assert_at(msg, line, body)
  local want = SRC .. ":" .. line .. ": "
  assert(msg:sub(1, #want) == want, ("expected the position %s in: %s"):format(want, msg))
  if body then assert(msg:find(body, 1, true), ("expected %q in: %s"):format(body, msg)) end
  -- positioned once, never at a file of the package
  assert(not msg:sub(#want + 1):find("^[^ ]*:%d+: "), "a second position in: " .. msg)
end

local function here() return debug.getinfo(2, "l").currentline end

describe("errors point at the caller's line", function()
  it("C binding errors, called directly or through lua/attn wrappers", function()
    local line
    local m = err_of(function() line = here(); local r = attn.tensor({{1, 2}, {3}}); return r end)
    assert_at(m, line, "tensor: argument 'data' is not rectangular")
    m = err_of(function() line = here(); local r = attn.ones(2, 3):sum(0); return r end) -- attn/ops.lua wrapper
    assert_at(m, line, "sum: dim 0 out of range")
    m = err_of(function() line = here(); local r = attn.ones(2, 3):softmax(3); return r end)
    assert_at(m, line, "softmax: dim 3 out of range")
    m = err_of(function() line = here(); local r = attn.ones(2, 3):view(4, 2); return r end)
    assert_at(m, line, "view: shape [4,2] is invalid")
  end)

  it("errors met inside modules (nn, F, rnn, transformer, losses, optim)", function()
    local line
    local lin = nn.Linear(3, 4)
    local m = err_of(function() line = here(); local r = lin(attn.ones(2, 5)); return r end)
    assert_at(m, line, "linear: input [2,5]")
    m = err_of(function() line = here(); local r = nn.MultiheadAttention(8, 3); return r end)
    assert_at(m, line, "MultiheadAttention: embed_dim must be divisible by num_heads")
    local gru = nn.GRU(3, 4, {batch_first = true})
    m = err_of(function() line = here(); local r = gru(attn.ones(2, 5, 7)); return r end)
    assert_at(m, line, "GRU: input.size(-1) must be equal to input_size")
    local layer = nn.TransformerEncoderLayer(8, 2, {dim_feedforward = 16, dropout = 0, batch_first = true})
    m = err_of(function() line = here(); local r = layer(attn.ones(2, 3, 6)); return r end)
    assert_at(m, line)
    local crit = nn.NLLLoss()
    m = err_of(function() line = here(); local r = crit(attn.ones(2, 5), attn.tensor({1, 6})); return r end)
    assert_at(m, line, "nll_loss: target 6 is not a class number in 1..5")
    m = err_of(function() line = here(); local r = attn.optim.SGD(lin:parameters(), {lr = -1}); return r end)
    assert_at(m, line)
    m = err_of(function() line = here(); local r = F.pad(attn.ones(2, 3), {1}); return r end)
    assert_at(m, line, "pad")
  end)

  it("a message caught inside attn and raised again carries one position", function()
    local line
    local m = err_of(function() line = here(); local r = attn.bert.BertLayer({hidden_size = "8"}); return r end)
    assert_at(m, line)
  end)
end)

describe("torch habits get a message that says what to write", function()
  it("0-based ids, indices and dims", function()
    local hint = "(ids are 1-based; torch's 0-based ids need +1)"
    local ids0 = attn.tensor({0, 2}, {dtype = "int64"})
    local line
    local m = err_of(function() line = here(); local r = F.cross_entropy(attn.ones(2, 5), ids0); return r end)
    assert_at(m, line, "cross_entropy: target 0 is not a class number in 1..5 " .. hint)
    local emb = nn.Embedding(5, 3)
    m = err_of(function() line = here(); local r = emb(ids0); return r end)
    assert_at(m, line, "embedding: index 0 in 'ids' out of range (expected 1..5) " .. hint)
    m = err_of(function() line = here(); local r = attn.ones(2, 5):gather(2, ids0:view(2, 1)); return r end)
    assert_at(m, line, hint)
    m = err_of(function() line = here(); local r = attn.ones(3, 2)[0]; return r end)
    assert_at(m, line, "(indices are 1-based; torch's x[0] is x[1])")
    m = err_of(function() line = here(); local r = attn.ones(3, 2):transpose(0, 1); return r end)
    assert_at(m, line, "(dims are 1-based; torch's dim=0 is 1, and -1 stays -1)")
    -- not 0: no hint
    m = err_of(function() local r = attn.ones(3, 2)[4]; return r end)
    assert.is_nil(m:find("1-based", 1, true))
  end)

  it("'<' and '<=' on tensors name the method to write", function()
    local x = attn.ones(2)
    assert.has_error(function() return x < 0 end)
    assert.truthy(err_of(function() local r = x < 0; return r end):find("x:gt(0)", 1, true))
    assert.truthy(err_of(function() local r = x <= x; return r end):find("x:le(y)", 1, true))
  end)

  it("x:tile gives torch's x.repeat / torch.tile ('repeat' is a Lua keyword)", function()
    local x = attn.tensor({{1, 2}, {3, 4}})
    assert.are.same({{1, 2, 1, 2}, {3, 4, 3, 4}, {1, 2, 1, 2}, {3, 4, 3, 4}}, x:tile(2, 2):totable())
    assert.are.same({{1, 2, 1, 2}, {3, 4, 3, 4}}, x:tile(2):totable()) -- leading 1s, as torch.tile
    assert.are.same(x:rep(1, 3):totable(), attn.tile(x, {1, 3}):totable())
    assert.are.same({2, 2, 2}, x:tile(2, 1, 1):shape())
  end)

  it("the attn interpreter explains the syntax error of x:repeat(...)", function()
    local bin = os.getenv("ATTN_BIN")
    if not bin then
      pending("ATTN_BIN is not set; run this spec through ctest (spec/tests.cmake sets it)")
      return
    end
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write('local attn = require "attn"\nlocal x = attn.ones(2)\nlocal y = x:repeat(2)\n')
    f:close()
    local p = assert(io.popen(("'%s' '%s' 2>&1"):format(bin, path)))
    local out = p:read("a")
    p:close()
    os.remove(path)
    assert.truthy(out:find(":3: ", 1, true), out)
    assert.truthy(out:find("'repeat' is a Lua keyword: write x:rep(...) or x:tile(...)", 1, true), out)
  end)
end)
