-- SPDX-License-Identifier: MIT
-- The main job: a tour of attn.  Runs every seed script in order, each with
-- a line on what it shows, writing their pictures (and HTML views) under one
-- folder.
--   attn scripts/tour.lua [--out DIR] [--quick]
-- --quick runs the two training scripts in their short modes (seconds
-- instead of about a minute each).
local attn = require "attn"
local S = require "attn.script"

local opts = S.args(arg, {out = "out/tour", quick = false}, "usage: attn scripts/tour.lua [--out DIR] [--quick]")
local out, quick = S.outdir(opts.out), opts.quick
local interp = arg[-1] or "attn"
local here = (arg[0]:match("^(.*)/[^/]*$") or ".")

local function sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local steps = {
  {"demo.lua", "the tensor core: PyTorch's random streams bit for bit, printing, matmul, softmax, BLAS speed"},
  {"one_hot_attention.lua", "notebook 000: dot-product attention over one-hot word vectors, SelfAttention, multi-head"},
  {"self_attention_from_scratch.lua",
   "notebook 001: self-attention from scratch with the notebook's numbers, multi-head, cross and causal attention"},
  {"multi_head_split.lua", "notebook 004: multi-head attention with split_heads/combine_heads = nn.MultiheadAttention"},
  {"bert_attention.lua",
   "notebook 004's BERT cells: WordPiece, a BERT encoder from HF-format files (the small test model), " ..
   "per-head heatmaps"},
  {"attention_views.lua",
   "issue 32: BERT's attention maps captured without touching the model, as HTML head, model and neuron views, "
     .. "a layers x heads grid, rollout, relevance and head importance"},
  {"luong_bahdanau.lua",
   "notebook 002: Luong and Bahdanau attention, then seq2seq models that learn to reverse digit words",
   quick = true},
  {"char_attention_names.lua",
   "notebook 003: character attention on names, then a causal self-attention model that invents names",
   quick = true},
}

local info = attn.info()
print(("attn %s (%s, OpenBLAS %s, %d threads): the tour; pictures go to %s/"):format(info.version, info.lua,
  info.blas_core, info.num_threads, out))

local failed = 0
local t_all = attn.now()
for n, step in ipairs(steps) do
  local script, what = step[1], step[2]
  local dir = out .. "/" .. script:gsub("%.lua$", "")
  print(("\n[%d/%d] %s -- %s"):format(n, #steps, script, what))
  print(("-"):rep(78))
  io.stdout:flush()
  local cmd = ("%s %s --out %s"):format(sh_quote(interp), sh_quote(here .. "/" .. script), sh_quote(dir))
  if script == "demo.lua" then cmd = ("%s %s"):format(sh_quote(interp), sh_quote(here .. "/" .. script)) end
  if quick and step.quick then cmd = cmd .. " --quick" end
  local t0 = attn.now()
  local ok = os.execute(cmd)
  if not ok then failed = failed + 1 end
  print(("-- %s %s in %.1f s"):format(script, ok and "finished" or "FAILED", attn.now() - t0))
end

local pictures = {}
local p = io.popen("find " .. sh_quote(out) .. " -name '*.png' -o -name '*.svg' -o -name '*.pdf' -o -name '*.html' "
  .. "2>/dev/null | sort")
if p then
  for line in p:lines() do pictures[#pictures + 1] = line end
  p:close()
end
print(("\nTour done in %.0f s: %d scripts, %d failed; %d pictures:"):format(attn.now() - t_all, #steps, failed,
  #pictures))
for _, f in ipairs(pictures) do print("  " .. f) end
if failed > 0 then os.exit(1) end
