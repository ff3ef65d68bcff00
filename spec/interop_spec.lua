-- SPDX-License-Identifier: MIT
-- Weight-file interop with PyTorch: a model trained in torch 1.13 and
-- exported to safetensors with its state_dict names loads into the same
-- architecture built with attn.nn and gives torch's outputs; a model trained
-- in attn and saved loads into torch (live, where torch is installed) and
-- gives attn's outputs.
local attn = require "attn"
local nn = attn.nn
local fx = require "support.fixture"

local src = os.getenv("ATTN_SOURCE_DIR") or "."

-- The architecture of scripts/fixtures/interop_model.py, same names.
local CharModel = nn.Module:extend("CharModel")
function CharModel:init(vocab, dim, hidden)
  vocab, dim, hidden = vocab or 28, dim or 16, hidden or 32
  self.embed = nn.Embedding(vocab, dim)
  self.norm = nn.LayerNorm(dim)
  self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
  self.head = nn.Linear(dim, vocab)
end
function CharModel:forward(ids)
  local h = self.norm(self.embed(ids))
  return self.head(h + self.mlp(h))
end

local function have_torch() return require("support.sh").python_has("torch") end

describe("torch -> attn", function()
  local F = fx.load("interop/char_model")
  it("loads torch's safetensors export strictly and reproduces its outputs", function()
    local model = CharModel()
    local keys = {}
    for k in pairs(model:state_dict()) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.same(F.keys, keys)
    model:load(src .. "/spec/fixtures/interop/char_model.safetensors")
    model:eval()
    local out = attn.no_grad(function() return model(fx.tensor(F.ids)) end)
    fx.assert_close(out, F.out, 1e-5, 1e-5, "outputs")
  end)
end)

describe("attn -> torch", function()
  it("a model trained in attn loads into torch and gives the same outputs", function()
    attn.manual_seed(1)
    local model = CharModel()
    local opt = attn.optim.Adam(model:parameters(), {lr = 1e-2})
    local ids = attn.randint(1, 29, {8, 12})
    local targets = attn.randint(1, 29, {8, 12})
    local first, last
    for step = 1, 30 do
      opt:zero_grad()
      local loss = attn.F.cross_entropy(model(ids):reshape(-1, 28), targets:reshape(-1))
      loss:backward()
      opt:step()
      if step == 1 then first = loss:item() end
      last = loss:item()
    end
    assert.is_true(last < first, "training lowered the loss")
    model:eval()
    local path = os.tmpname() .. ".safetensors"
    model:save(path)
    -- the file round-trips inside attn
    local again = CharModel()
    again:load(path)
    local x = attn.randint(1, 29, {3, 12})
    local want = attn.no_grad(function() return model(x) end)
    local got = attn.no_grad(function() return again(x) end)
    assert.same(want:totable(), got:totable())
    if not have_torch() then
      os.remove(path)
      return pending("torch is not installed for /usr/bin/python3: live attn -> torch check skipped")
    end
    local ids_path = os.tmpname()
    local f = assert(io.open(ids_path, "w"))
    for _, row in ipairs(x:totable()) do
      local r = {}
      for i, v in ipairs(row) do r[i] = ("%d"):format(v) end
      f:write(table.concat(r, " "), "\n")
    end
    f:close()
    local p = assert(io.popen(("/usr/bin/python3 %s/scripts/fixtures/interop_torch_eval.py %s %s 2>&1"):format(
      src, path, ids_path)))
    local text = p:read("a")
    p:close()
    os.remove(path)
    os.remove(ids_path)
    local chunk = load(text, "torch", "t", {})
    assert.is_function(chunk, text)
    local vals = chunk()
    fx.assert_close(want, {shape = want:shape(), data = vals}, 1e-5, 1e-5, "torch outputs")
  end)
end)
