-- SPDX-License-Identifier: MIT
-- Samples for spec/calling_convention_spec.lua (its header says the form).
local attn = require "attn"
local M = {}

M["dataset.random_split"] = {
  args = function() return {require("attn.dataset").TensorDataset(attn.arange(6)), {4, 2}, attn.Generator(3)} end,
  call = function(...) return require("attn.dataset").random_split(...) end,
  view = function(...)
    local t = {}
    for i, s in ipairs({...}) do t[i] = s.indices end
    return t
  end,
}

-- torch.device(type, index=None)
M["device.device"] = {
  args = function() return {"cpu", 1} end,
  call = function(...) return require("attn.device").device(...) end,
  view = function(d) return tostring(d) end,
}
local function optim_sample(name, args)
  return {
    args = function() return {{attn.ones(2)}, table.unpack(args)} end,
    call = function(...) return require("attn.optim")[name].new(...) end,
    view = function(o) return o.defaults end,
  }
end
M["optim.SGD.new"] = optim_sample("SGD", {0.1, 0.9, 0, 0.01, true, true})
M["optim.Adam.new"] = optim_sample("Adam", {0.01, {0.8, 0.9}, 1e-6, 0.1, true, true})
M["optim.AdamW.new"] = optim_sample("AdamW", {0.01, {0.8, 0.9}, 1e-6, 0.1, true, true})
M["optim.RMSprop.new"] = optim_sample("RMSprop", {0.01, 0.9, 1e-6, 0.1, 0.5, true, true})
M["optim.clip_grad_norm_"] = {
  args = function()
    local p = attn.ones(3)
    p.grad = attn.tensor({3.0, -4.0, 12.0})
    return {{p}, 1.5, 1, true}
  end,
  call = function(...) return require("attn.optim").clip_grad_norm_(...) end,
}
local function sgd()
  local p = attn.ones(2)
  p.grad = attn.tensor({1.5, 2.5})
  return require("attn.optim").SGD({p}, 0.1), p
end
M["optim.Optimizer.zero_grad"] = {
  args = function() local o = sgd(); return {o, false} end,
  view = function() return {} end,
}
M["optim.Optimizer.step"] = {
  args = function() local o = sgd(); return {o, function() return 2.5 end} end,
}
M["optim.LRScheduler.step"] = {
  args = function() return {require("attn.optim").StepLR(sgd(), 2), 3} end,
}
M["optim.CosineAnnealingWarmRestarts.step"] = {
  args = function() return {require("attn.optim").CosineAnnealingWarmRestarts(sgd(), 2), 3} end,
}
M["optim.ReduceLROnPlateau.step"] = {
  args = function() return {require("attn.optim").ReduceLROnPlateau((sgd())), 1.5, 3} end,
}
-- attn.script.int(default, min)
M["script.int"] = {
  args = function() return {5, 0} end,
  call = function(...) return require("attn.script").int(...) end,
  view = function(d) return {d.default, d.min} end,
}
-- dist's i-forms in a 1-rank world: the handle is waited on, the tensor compared
local function dist_sample(name, extra)
  local t
  return {
    args = function()
      t = attn.tensor({1.0, 2.0, 3.0})
      local a = {t}
      for i, v in ipairs(extra) do a[i + 1] = v end
      return a
    end,
    call = function(...) return require("attn.dist")[name](...) end,
    view = function(h) if type(h) == "table" or type(h) == "userdata" then h:wait() end return t end,
  }
end
M["dist.iallreduce"] = dist_sample("iallreduce", {"max"})
M["dist.allreduce"] = dist_sample("allreduce", {"max", true, true})
M["dist.broadcast"] = dist_sample("broadcast", {0, true, true})
M["dist.reduce_scatter"] = dist_sample("reduce_scatter", {"max", true, true})
M["dist.allgather"] = {args = function() return {attn.tensor({{5.0}}), true, true} end,
  call = function(...) return require("attn.dist").allgather(...) end, view = function(h) return h:wait() end}
M["dist.ibroadcast"] = dist_sample("ibroadcast", {0})
M["dist.ireduce_scatter"] = dist_sample("ireduce_scatter", {"max"})
-- isend/irecv: a 1-rank world has no peer, so every form raises the same message
local function dist_fn(name) return function(...) return require("attn.dist")[name](...) end end
M["dist.init"] = {args = function() return {300} end, call = dist_fn("init")}
M["dist.ring_attention"] = {args = function()
  local g = attn.Generator(2)
  return {attn.randn({2, 4, 3}, g), attn.randn({2, 4, 3}, g), attn.randn({2, 4, 3}, g), true, 0.5, true}
end, call = dist_fn("ring_attention")}
M["dist.ring_shard"] = {args = function() return {attn.arange(8):reshape({1, 8, 1}):float(), true, true, 0, 1} end,
  call = dist_fn("ring_shard")}
M["dist.ring_unshard"] = {args = function() return {attn.arange(8):reshape({1, 8, 1}):float(), true, true} end,
  call = dist_fn("ring_unshard")}
M["dist.barrier"] = {args = function() return {true, true} end,
  call = function(...) return require("attn.dist").barrier(...) end, view = function(h) return h:wait() end}
for _, name in ipairs({"isend", "irecv", "send", "recv"}) do
  M["dist." .. name] = {
    args = function() return name:sub(1, 1) == "i" and {attn.ones(2), 0, 7} or {attn.ones(2), 0, 7, true, true} end,
    call = function(...)
      local ok, err = pcall(require("attn.dist")[name], ...)
      if not tostring(err):find("no peer", 1, true) then error(err, 0) end -- an unknown option
      return ok, (tostring(err):gsub("^[^:]*:%d+: ", ""))
    end,
  }
end
local function data_fn(name) return function(...) return require("attn.data")[name](...) end end
M["data.Vocab"] = {args = function() return {{"b", "a"}, "?"} end, call = data_fn("Vocab"),
  view = function(v) return v.words end}
M["data.CharTable"] = {args = function() return {{"ab"}, "<", ">"} end, call = data_fn("CharTable"),
  view = function(c) return c.chars end}
M["data.pad"] = {args = function() return {{{1, 2}, {3}}, -1, 3} end, call = data_fn("pad")}
M["data.batches"] = {args = function() return {{1, 2, 3}, 2, true, attn.Generator(1), true} end,
  call = data_fn("batches"), view = function(it) local t = {}; for b in it do t[#t + 1] = b end; return t end}
M["data.progress"] = {
  args = function()
    return {3, "x", 10, io.stderr, false, 0, 5, function() return 0 end}
  end,
  call = data_fn("progress"), view = function(p) return p.total end}
M["data.shuffle"] = {args = function() return {{1, 2, 3, 4}, attn.Generator(2)} end, call = data_fn("shuffle")}
M["data.split"] = {args = function() return {{1, 2, 3, 4}, 0.5, attn.Generator(2)} end, call = data_fn("split")}
M["dataset.DataLoader"] = {
  args = function()
    return {require("attn.dataset").TensorDataset(attn.arange(5)), 2, true, nil, nil, 0, nil, false, true, 0, nil, nil,
      attn.Generator(4), nil, false, "", n = 16}
  end,
  call = function(...) return require("attn.dataset").DataLoader(...) end,
  view = function(loader)
    local t = {}
    for b in loader:iter() do t[#t + 1] = b end
    return t
  end,
}
M["data.DistributedSampler"] = {args = function() return {10, 3, 1, true, 5, true} end,
  call = function(...) return require("attn.data").DistributedSampler(...) end, view = function(d) return d:indices() end}

-- text.WordPiece (Hugging Face's tokenizer options, keywords)
local text = require "attn.text"
local VOCAB = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", "a"}
local function wp() return text.WordPiece.new(VOCAB) end
local NEW_OPTS = {false, nil, false, true, 16, nil, 20, "[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"}
local function with_new(first)
  local t = {first, n = 13}
  for i = 1, 12 do t[i + 1] = NEW_OPTS[i] end
  return t
end
local scratch = (os.getenv("ATTN_BUILD_DIR") or "/tmp")
M["text.WordPiece.new"] = function() return with_new(VOCAB) end
M["text.WordPiece.from_file"] = function()
  local path = scratch .. "/cc_vocab.txt"
  local f = assert(io.open(path, "w"))
  f:write(table.concat(VOCAB, "\n"), "\n")
  f:close()
  return with_new(path)
end
M["text.WordPiece.from_pretrained"] = function()
  return with_new((os.getenv("ATTN_SOURCE_DIR") or ".") .. "/spec/fixtures/bert")
end
M["text.WordPiece.convert_ids_to_tokens"] = function() return {wp(), {3, 6, 7, 4}, true} end
M["text.WordPiece.decode"] = function() return {wp(), {3, 6, 8, 7, 4, 1}, true, false} end
M["text.WordPiece.decode_batch"] = function() return {wp(), {{3, 6, 4}, {3, 7, 8, 4}}, true, true} end
M["text.WordPiece.encode"] = function() return {wp(), "hello worlds", "a world", 8, "max_length", true, true, 4} end
M["text.WordPiece.encode_batch"] = function()
  return {wp(), {"hello", {"hello worlds", "a"}}, 8, "longest", true, true, 2}
end

-- plot (the image lands in the build directory; the layout is compared)
local function png(name) return scratch .. "/cc_" .. name .. ".png" end
M["plot.heatmap"] = function()
  return {attn.tensor({{0.1, 0.9}, {0.6, 0.4}}), png("heatmap"), "weights", "key", "query", 200, 160, "ab", "xy",
    "viridis", true, true, 0.0, 1.0}
end
M["plot.histogram"] = function()
  return {attn.tensor({0.1, 0.2, 0.2, 0.7, 0.9}), png("histogram"), "values", "x", "count", 200, 160, 4, {0, 1},
    false}
end
M["plot.lines"] = function()
  return {{{y = {1, 2, 4}, label = "a"}, {y = {3, 1, 2}, label = "b"}}, png("lines"), "loss", "step", "value", 200,
    160, true}
end
M["plot.attention_grid"] = function()
  local maps = {attn.tensor({{{0.2, 0.8}, {0.5, 0.5}}, {{1, 0}, {0.3, 0.7}}}), attn.rand(1, 2, 2, 2)}
  return {maps, png("attention_grid"), "maps", "key", "query", {"a", "b"}, {"x", "y"}, {2, 1}, {2}, {"l1", "l2"}, 1,
    "magma", true, 0.0, 1.0, 12}
end

-- viz (a capture of one MultiheadAttention call; the capture is taken off)
local function viz_cap(grads)
  local viz = require "attn.viz"
  local mha = attn.nn.MultiheadAttention(4, 1)
  local c = viz.capture(mha, {grads = grads})
  local x = attn.ones(2, 1, 4)
  local y = mha(x, x, x, {need_weights = false})
  if grads then y:sum():backward() end
  c:remove()
  return c
end
M["viz.capture"] = function() return {attn.nn.MultiheadAttention(4, 1), true, true} end
M["viz.Capture.maps"] = function() return {viz_cap(false), "^$"} end
M["viz.Capture.grads"] = function() return {viz_cap(true), "^$"} end

return M
