-- SPDX-License-Identifier: MIT
-- Issue 27 section 4: every misuse is told at the caller's line (this
-- file's line where the misuse is written), with what is wrong and what to
-- write instead.  A catalogue of misuses, then the dot-call check (m.f()
-- for m:f()) run over every method of every class, so that a new method
-- without the guard fails here.
local attn = require "attn"
local nn, F, optim = attn.nn, attn.F, attn.optim

local SRC = debug.getinfo(1, "S").short_src

-- Runs f, which must fail, and returns its message.
local message_of = require("support.errors").message

-- The message starts with this file's position at line, once, and holds
-- both patterns.
local function assert_told(msg, line, what, fix)
  local want = SRC .. ":" .. line .. ": "
  assert(msg:sub(1, #want) == want, ("expected the position %s in: %s"):format(want, msg))
  assert(not msg:sub(#want + 1):find("^[^ ]*:%d+: "), "a second position in: " .. msg)
  assert(msg:find(what), ("expected the cause /%s/ in: %s"):format(what, msg))
  assert(msg:find(fix), ("expected the fix /%s/ in: %s"):format(fix, msg))
end

local x23 = attn.randn(2, 3)
local lin = nn.Linear(3, 2)
local sgd = optim.SGD(lin:parameters(), {lr = 0.1})
local mask = attn.tensor({{true, false, true}, {false, false, true}})
local leaf = attn.zeros(2, {requires_grad = true})

-- {misuse (on one line: that line is where the error must point), the
-- cause, the fix}; patterns.
local CATALOGUE = {
  {function() local y = attn.zeros(2, 3); y[mask] = attn.tensor({1.0, 2.0}) end,
    "cannot be broadcast to indexing result of shape %[3%]", "give one value per selected element"},
  {function() local r = F.pad(attn.zeros(3), {math.mininteger, 0}); return r end,
    "pad%[1%] = %-9223372036854775808 crops more than size 3", "a negative count crops at most"},
  {function() local r = F.cross_entropy(x23, attn.zeros(2, {dtype = "bool"})); return r end,
    "cross_entropy: .*expected scalar type Long but found Bool", "write target:long%(%) %+ 1"},
  {function() local r = F.nll_loss(x23, attn.zeros(2, {dtype = "bool"})); return r end,
    "nll_loss: .*found Bool", "target:long%(%)"},
  {function() local r = nn.utils.rnn.pack_padded_sequence(attn.zeros(3, 4, 2), {"4", 3, 2}, {batch_first = true}); return r end,
    "lengths%[1%] must be an integer %(got the string \"4\"", "write 4, a number"},
  {function() local r = nn.utils.rnn.pad_packed_sequence({data = attn.zeros(3, 2)}); return r end,
    "must be a PackedSequence %(got a plain table", "pack_padded_sequence%(x, lengths%)"},
  {function() local r = nn.GRU(2, 3)({data = attn.zeros(3, 2)}); return r end,
    "GRU: input must be a tensor or a PackedSequence", "pack_padded_sequence%(x, lengths%) or pack_sequence"},
  {function() leaf.grad = attn.zeros(2, {dtype = "int64"}) end,
    "assigned grad has data of a different type: int64", "g:float%(%)"},
  {function() local r = attn.zeros(3)[attn.tensor({1.0, 0.0, 1.0})]; return r end,
    "read as 1%-based ids", "mask:bool%(%)"},
  {function() local r = lin.parameters(); return r end,
    "parameters: call it as m:parameters", "with ':'"},
  {function() sgd.step() end, "step: call it as opt:step", "with ':'"},
  {function() local r = x23.matmul(x23); return r end,
    "matmul: argument 'other' must be a tensor.*got no value", "call it as x:matmul%(%.%.%.%) with ':'"},
  {function() local r = x23:sum().backward(); return r end, "backward: call it as x:backward", "with ':'"},
  {function() local r = x23.view(3, 2); return r end, "view: call it as x:view", "with ':'"},
  {function() local r = nn.Embedding(10, 6, {padding_idx = 0}); return r end,
    "padding_idx must be within 1%.%.10", "torch's padding_idx=0 is padding_idx=1 here"},
  {function() local r = optim.Adam(lin:parameters(), {learning_rate = 1e-3}); return r end,
    "Adam: unknown option 'learning_rate'", "valid options: amsgrad, betas, eps, lr, maximize, weight_decay"},
  {function() local r = optim.SGD(lin:parameters(), {lrr = 1e-3}); return r end,
    "SGD: unknown option 'lrr'", "did you mean 'lr'%?"},
  {function() local r = attn.zeros(3, {requiers_grad = true}); return r end,
    "zeros: unknown option 'requiers_grad'", "did you mean 'requires_grad'%?%); valid options: dtype, requires_grad"},
  {function() local r = attn.ones({2}, {device = "cuda"}); return r end,
    "ones: unknown option 'device'", "valid options: dtype, requires_grad"},
  {function() local r = attn.randn(2, {seed = 1}); return r end,
    "randn: unknown option 'seed'", "valid options: generator, requires_grad"},
  {function() local r = x23:sort({descendng = true}); return r end,
    "sort: unknown option 'descendng'", "did you mean 'descending'%?%); valid options: descending, dim, stable"},
  {function() local r = F.scaled_dot_product_attention(x23, x23, x23, {causal = true}); return r end,
    "unknown option 'causal'", "valid options: attn_mask, .*is_causal"},
  {function() local r = nn.GRU(3, 2, {batchfirst = true}); return r end,
    "GRU: unknown option 'batchfirst'", "did you mean 'batch_first'%?%); valid options: batch_first, bias"},
  {function() local r = F.cross_entropy(x23, attn.tensor({1.0, 2.0}), {reduce_mode = "sum"}); return r end,
    "cross_entropy: unknown option 'reduce_mode'", "valid options: ignore_index, label_smoothing, reduce, reduction, size_average, target, weight"},
  {function() local r = x23:sum({dims = 2}); return r end,
    "sum: unknown option 'dims'", "did you mean 'dim'%?%); valid options: dim, keepdim"},
  {function() local r = attn.full({2}, 1, {requires_grad = "yes"}); return r end,
    "full: requires_grad must be a boolean", "boolean"},
}

describe("misuse catalogue", function()
  for i, entry in ipairs(CATALOGUE) do
    local line = debug.getinfo(entry[1], "S").linedefined
    it(("entry %d (line %d) names the cause and the fix at the caller's line"):format(i, line), function()
      assert_told(message_of(entry[1]), line, entry[2], entry[3])
    end)
  end

  it("the creation functions take torch's requires_grad", function()
    local made = {
      attn.zeros(3, {requires_grad = true}), attn.ones({2}, {requires_grad = true}),
      attn.empty(2, {requires_grad = true}), attn.full({2}, 1.5, {requires_grad = true}),
      attn.tensor({1.0, 2.0}, {requires_grad = true}), attn.arange(4.0, {requires_grad = true}),
      attn.linspace(0, 1, 3, {requires_grad = true}), attn.eye(2, {requires_grad = true}),
      attn.zeros_like(x23, {requires_grad = true}), attn.ones_like(x23, {requires_grad = true}),
      attn.full_like(x23, 2, {requires_grad = true}), attn.empty_like(x23, {requires_grad = true}),
      attn.rand(2, 3, {requires_grad = true}), attn.randn({2}, {requires_grad = true, generator = attn.Generator(1)}),
      attn.rand_like(x23, {requires_grad = true}), attn.randn_like(x23, {requires_grad = true}),
    }
    for i, t in ipairs(made) do
      assert(t.requires_grad == true, "creation " .. i .. " ignored requires_grad")
      assert(t.is_leaf, "creation " .. i .. " is not a leaf")
    end
    assert.is_false(attn.zeros(3, {requires_grad = false}).requires_grad)
    assert.is_false(attn.zeros(3).requires_grad)
    -- torch: only floating point tensors can require gradients
    assert.has_error(function() local _ = attn.zeros(3, {dtype = "int64", requires_grad = true}) end)
    assert.has_error(function() local _ = attn.randint(0, 5, {3}, {requires_grad = true}) end)
    -- the generator in an options table is the one drawn from
    local a = attn.rand(4, {generator = attn.Generator(9)})
    local b = attn.rand(4, attn.Generator(9))
    assert.same(a:totable(), b:totable())
  end)
end)

-- Every method of every class: called with '.' and no self, it says to
-- write ':' at this file's line.  The walk finds the methods itself, so a
-- new one is checked without being listed here.
local function check_dot_calls(cls_name, methods, recv)
  local count, bad = 0, {}
  local names = {}
  for k, f in pairs(methods) do
    if type(k) == "string" and type(f) == "function" and k:sub(1, 2) ~= "__" then names[#names + 1] = k end
  end
  table.sort(names)
  for _, k in ipairs(names) do
    local f = methods[k]
    local plain = attn._misuse.unwrap_method(f)
    -- a method: a C tensor method, a guarded one, or a Lua function whose
    -- first parameter is self (a declared signature's wrapper is neither)
    local inner = require("attn.signature").wrapped[f] or f
    local is_method = plain ~= inner or attn._misuse.takes_self(plain) or debug.getinfo(f, "S").what == "C"
    if is_method then
      count = count + 1
      local line
      local ok, e = pcall(function() line = debug.getinfo(1, "l").currentline; local r = f(); return r end)
      -- the method's name (an alias such as register_module names add_module)
      local want = ("^%s:%d: ([%%w_]+): call it as %s:%%1%%("):format(SRC:gsub("%p", "%%%0"), line, recv)
      if ok or not tostring(e):find(want) then
        bad[#bad + 1] = ("%s.%s: %s"):format(cls_name, k, ok and "no error" or tostring(e))
      end
      -- a value that cannot be self (x.view(3, 2), m.forward(x)): the same
      ok, e = pcall(function() line = debug.getinfo(1, "l").currentline; local r = f(3); return r end)
      want = ("^%s:%d: [%%w_]+: call it as "):format(SRC:gsub("%p", "%%%0"), line)
      if recv ~= "m" and (ok or not tostring(e):find(want)) then -- a module's guard reads a field of self
        bad[#bad + 1] = ("%s.%s(3): %s"):format(cls_name, k, ok and "no error" or tostring(e))
      end
    end
  end
  assert(count > 0, cls_name .. ": no methods found")
  assert(#bad == 0, #bad .. " methods without the dot-call check:\n  " .. table.concat(bad, "\n  "))
  return count
end

-- The module classes: every table whose metatable is the class machinery's,
-- reached from the public modules.
local function module_classes()
  local class_mt = getmetatable(nn.Module)
  local found, seen = {}, {}
  local function walk(prefix, t, depth)
    if seen[t] or depth > 3 then return end
    seen[t] = true
    for k, v in pairs(t) do
      if type(k) == "string" and type(v) == "table" then
        if getmetatable(v) == class_mt then
          if not seen[v] then
            seen[v] = true
            found[#found + 1] = {prefix .. "." .. k, v}
          end
        elseif k:sub(1, 1) ~= "_" and getmetatable(v) == nil then
          walk(prefix .. "." .. k, v, depth + 1)
        end
      end
    end
  end
  for _, m in ipairs({"nn", "attention", "seq2seq", "transformer", "losses", "bert", "rnn", "conv", "activation"}) do
    walk("attn." .. m, attn[m] or require("attn." .. m), 1)
  end
  table.sort(found, function(a, b) return a[1] < b[1] end)
  return found
end

describe("every method detects a call with '.'", function()
  it("tensor methods (C and Lua)", function()
    local n = check_dot_calls("attn.Tensor", attn._methods, "x")
    assert(n > 150, "expected the whole tensor method table, found " .. n)
  end)

  it("nn.Module and every module class (nn, attention, seq2seq, transformer, losses, bert, rnn)", function()
    local classes = module_classes()
    assert(#classes > 40, "expected the module classes, found " .. #classes)
    for _, c in ipairs(classes) do
      local own = {}
      for k, v in pairs(c[2]) do own[k] = v end -- the class's own methods (inherited ones are the parent's)
      -- static functions (extend, from_pretrained, generate_square_subsequent_mask) aside
      local any = false
      for k, v in pairs(own) do
        if type(k) == "string" and attn._misuse.takes_self(attn._misuse.unwrap_method(v)) then any = true end
      end
      if any then check_dot_calls(c[1], own, "m") end
    end
  end)

  it("optimizers and LR schedulers", function()
    check_dot_calls("attn.optim.Optimizer", getmetatable(optim.SGD).__index, "opt")
    for _, name in ipairs({"SGD", "Adam", "AdamW", "RMSprop"}) do
      local own, any = {}, false
      for k, v in pairs(optim[name]) do
        if type(v) == "function" and k ~= "new" and k ~= "_validate" then own[k] = v; any = true end
      end
      if any then check_dot_calls("attn.optim." .. name, own, "opt") end
    end
    check_dot_calls("attn.optim.LRScheduler", optim.LRScheduler, "sched")
    for _, name in ipairs({"StepLR", "LambdaLR", "NoamLR"}) do
      local own, any = {}, false
      for k, v in pairs(optim[name]) do
        if type(v) == "function" and attn._misuse.takes_self(attn._misuse.unwrap_method(v)) then own[k] = v; any = true end
      end
      if any then check_dot_calls("attn.optim." .. name, own, "sched") end
    end
  end)

  it("data, text, attention, rnn and random classes", function()
    local data, text = attn.data, attn.text
    check_dot_calls("attn.data.Vocab", getmetatable(data.Vocab({"a", "b"})), "vocab")
    check_dot_calls("attn.data.CharTable", getmetatable(data.CharTable({"ab"})), "chars")
    local sink = io.open("/dev/null", "w")
    check_dot_calls("attn.data.Progress", getmetatable(data.progress(3, {out = sink})), "progress")
    sink:close()
    check_dot_calls("attn.data.DistributedSampler",
      getmetatable(data.DistributedSampler(10, {num_replicas = 2, rank = 1})), "sampler")
    check_dot_calls("attn.text.WordPiece", getmetatable(text.WordPiece.new({"[UNK]", "a"})), "tok")
    check_dot_calls("attn.attention.KVCache", attn.attention.KVCacheClass, "cache")
    check_dot_calls("PackedSequence", getmetatable(nn.utils.rnn.pack_sequence({attn.zeros(2, 1)})), "packed")
    check_dot_calls("attn.Generator", getmetatable(attn.Generator(1)).__index, "g")
  end)
end)
