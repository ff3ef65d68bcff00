-- SPDX-License-Identifier: MIT
-- gen_reference.lua: the API reference, organised by what users import.
--
--   build/bin/attn scripts/gen_reference.lua [--md DIR] [--html DIR]
--       writes the Markdown pages (default docs/reference) and, with
--       --html, the same pages as HTML (CMake's `reference` target:
--       build/docs/reference, installed to share/doc/attn/reference)
--   build/bin/attn scripts/gen_reference.lua --check
--       exit 1 when docs/reference differs from what the sources make, a
--       public function has no entry or no example, or an example fails
--   build/bin/attn scripts/gen_reference.lua --run-examples
--       runs every example and reports those that fail
--   build/bin/attn scripts/gen_reference.lua --list
--       one line per entry: name, where it is defined, whether it has an example
--
-- Where the text comes from (one place per function):
--   * the walk of the public API and the doc blocks are those of
--     scripts/check_docs.lua (loaded as a library): the `---` block before
--     a Lua function, or the `@function` entry of docs/api/*.luadoc for a C
--     function;
--   * the signature with its defaults is the function's declaration in
--     attn.signature (SIGNATURES, or signature.declare next to the
--     function); a function declared without options shows its parameters;
--   * the example is the block's `@usage` section; it runs with attn, nn,
--     F, optim and data bound (`local attn = require "attn"` and so on) and
--     the random seed set to 0;
--   * the torch name is derived from where the function lives (attn.F.x is
--     torch.nn.functional.x, t:x is torch.Tensor.x, ...) and shown only
--     when docs/reference/torch_names.txt (PyTorch 1.13's names, written by
--     scripts/fixtures/gen_torch_names.py) has it.
-- The C API page comes from the comments of src/attn.h and src/attn_lua.h.

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function script_dir()
  local p = arg and arg[0] or "scripts/gen_reference.lua"
  return p:match("^(.*)/[^/]*$") or "."
end

local lib = assert(loadfile(script_dir() .. "/check_docs.lua"))("--lib")
local ROOT = lib.root
local attn = require "attn"
local signature = require "attn.signature"

local opts = {md = ROOT .. "/docs/reference"}
do
  local a = arg or {}
  local i = 1
  local usage = "usage: gen_reference.lua [--md DIR] [--html DIR] [--check | --run-examples | --list]"
  local flags = {["--check"] = true, ["--run-examples"] = true, ["--list"] = true}
  while i <= #a do
    if a[i] == "--md" or a[i] == "--html" then
      if a[i + 1] == nil or a[i + 1]:match("^%-%-") then
        io.stderr:write(a[i] .. " needs a folder\n" .. usage .. "\n")
        os.exit(2)
      end
      opts[a[i]:sub(3)] = a[i + 1]
      i = i + 2
    elseif flags[a[i]] then
      opts[a[i]:sub(3)] = true
      i = i + 1
    else
      io.stderr:write("unknown argument " .. tostring(a[i]) .. "\n" .. usage .. "\n")
      os.exit(2)
    end
  end
end

---------------------------------------------------------------------------
-- The pages: where a public name is documented, by what users import
---------------------------------------------------------------------------

-- {page, title, prefixes (longest first wins), what the user writes}
local PAGES = {
  {"attn", "attn", {"attn"}, 'local attn = require "attn"',
    "Tensor creation, math, random numbers, autograd switches, weight files and the process settings. "
      .. "Most functions are also tensor methods (see [Tensor](tensor.md))."},
  {"tensor", "Tensor methods", {"attn.Tensor"}, "t = attn.tensor({...}); t:method(...)",
    "The methods of a tensor. A method whose name ends in `_` changes the tensor in place, as in torch."},
  {"nn", "attn.nn", {"attn.nn", "attn.init", "attn.nn_init"}, "local nn = attn.nn",
    "Modules (layers, containers, attention, transformers, recurrent nets), their shared methods and "
      .. "`nn.init`."},
  {"F", "attn.F", {"attn.F", "attn.functional"}, "local F = attn.F",
    "The functional forms of the layers, activations and losses (torch.nn.functional)."},
  {"optim", "attn.optim", {"attn.optim"}, "local optim = attn.optim",
    "Optimisers, learning-rate schedulers and gradient clipping."},
  {"data", "attn.data", {"attn.data", "attn.dataset"}, "local data = attn.data",
    "Vocabularies, character tables, batching, datasets and loaders, the progress bar."},
  {"dist", "attn.dist", {"attn.dist"}, "local dist = attn.dist",
    "Data-parallel training and ring attention over MPI (torch.distributed). Ranks are 0-based."},
  {"plot", "attn.plot", {"attn.plot"}, "local plot = attn.plot",
    "Heatmaps, line and bar charts, histograms (PNG, SVG, PDF) with cairo."},
  {"viz", "attn.viz", {"attn.viz"}, "local viz = attn.viz",
    "Look inside attention: capture every attention map of a forward pass, draw head, model and neuron views "
      .. "(HTML) and layers x heads grids, attention rollout and flow, relevance and head importance."},
  {"text", "attn.text", {"attn.text"}, "local text = attn.text",
    "Tokenizers: whitespace and character splitting, WordPiece (Hugging Face's BertTokenizer)."},
  {"bert", "BERT", {"attn.bert"}, "local bert = attn.bert",
    "BERT from Hugging Face checkpoints (transformers' BertModel), block by block."},
  {"attention", "Attention and seq2seq", {"attn.attention", "attn.seq2seq"}, "local attention = attn.attention",
    "The attention modules of the seed notebooks (self, causal, cross, multi-head, grouped-query), "
      .. "positional encodings, KV caches and the Luong and Bahdanau seq2seq models."},
  {"more", "More modules", {"attn.gradcheck", "attn.script", "attn.device", "attn.utils", "attn.ptfile",
    "attn.signature", "attn.ops", "attn.copy", "attn.rnn", "attn.conv", "attn.activation", "attn.losses",
    "attn.transformer"}, 'require "attn.<name>"',
    "Gradient checking, the script runner, device idioms, `.pt` files and the package's other modules."},
}

-- The prefix order in which a function reached under several names is
-- shown: the name users import wins (attn.nn.TransformerEncoderLayer, not
-- attn.transformer.TransformerEncoderLayer).
local PREFERENCE = {"attn.nn", "attn.F", "attn.optim", "attn.data", "attn.dist", "attn.plot", "attn.viz", "attn.text",
  "attn.bert", "attn.attention", "attn.seq2seq", "attn.Tensor", "attn.init"}

local function page_of(name)
  local best, best_len
  for _, p in ipairs(PAGES) do
    for _, prefix in ipairs(p[3]) do
      if (name == prefix or name:sub(1, #prefix + 1) == prefix .. ".") and #prefix > (best_len or 0) then
        best, best_len = p, #prefix
      end
    end
  end
  -- attn.X where X is no submodule: the attn page
  return best
end

local function rank(name)
  for i, p in ipairs(PREFERENCE) do
    if name:sub(1, #p + 1) == p .. "." then return i end
  end
  if name:match("^attn%.[%w_]+$") then return 0 end -- attn.zeros before attn.Tensor.zeros
  return #PREFERENCE + 1
end

---------------------------------------------------------------------------
-- Signatures
---------------------------------------------------------------------------

local function unwrap(f) return attn._misuse.unwrap_method(f) end

-- function -> declaration key ("add", "F.gelu", "nn.Linear.init", ...)
local function signature_keys()
  local F = require "attn.functional"
  local by_fn = {}
  for key in pairs(signature.SIGNATURES) do
    local t
    if key:match("^F%.") then
      t = F[key:sub(3)]
    else
      t = attn
      for part in key:gmatch("[^%.]+") do
        if type(t) ~= "table" then
          t = nil
          break
        end
        t = rawget(t, part) or t[part]
      end
    end
    if type(t) == "function" then
      t = unwrap(t)
      if by_fn[t] == nil or #key < #by_fn[t] then by_fn[t] = key end
    end
  end
  return by_fn
end

-- The parameters of a Lua function, from its locals.
local function lua_params(fn)
  local info = debug.getinfo(fn, "u")
  if not info or info.what == "C" then return nil end
  local out = {}
  for i = 1, info.nparams do out[#out + 1] = debug.getlocal(fn, i) end
  if info.isvararg then out[#out + 1] = "..." end
  return out
end

-- "input, dim=nil, *, keepdim=false" -> {{name, default}, ...}, with
-- markers "*" and "/" kept as entries (attn.signature's own reading of it).
local function parse_sig(sig)
  local names, _, lead, info = signature.parse(sig)
  local out = {}
  for i, name in ipairs(names) do
    if info.slash and i == lead + 1 then out[#out + 1] = {name = "/"} end
    if info.kwonly == i then out[#out + 1] = {name = "*"} end
    out[#out + 1] = {name = info.varargs == i and "*" .. name or name, default = info.defaults[name]}
  end
  if info.slash and lead == #names then out[#out + 1] = {name = "/"} end
  return out
end

---------------------------------------------------------------------------
-- Doc blocks
---------------------------------------------------------------------------

-- The lines with their common indent taken off (blank lines do not count).
local function dedent(lines)
  local indent
  for _, l in ipairs(lines) do
    if l:match("%S") then
      local n = #l:match("^ *")
      indent = indent and math.min(indent, n) or n
    end
  end
  local out = {}
  for i, l in ipairs(lines) do out[i] = l:sub((indent or 0) + 1) end
  return out
end

-- A block's text: prose and code (lines indented 2+ spaces), its @param
-- and @return lines, and its @usage example.
local function split_block(text)
  local body, params, returns, usage, extra_usage = {}, {}, {}, nil, false
  local mode = "body"
  for line in (text .. "\n"):gmatch("(.-)\n") do
    local tag, rest = line:match("^%s*@([%w_]+)%s?(.*)$")
    if tag == "usage" then
      if usage then extra_usage = true end
      mode, usage = "usage", {}
      if rest:match("%S") then usage[#usage + 1] = rest end
    elseif tag == "param" or tag == "tparam" then
      mode = "param"
      params[#params + 1] = rest
    elseif tag == "return" or tag == "treturn" then
      mode = "return"
      returns[#returns + 1] = rest
    elseif tag then
      mode = "skip" -- @function, @module, @type, @within, @local, ...
    elseif mode == "usage" then
      usage[#usage + 1] = line
    elseif mode == "param" and line:match("%S") then
      params[#params] = params[#params] .. " " .. line:match("^%s*(.-)%s*$")
    elseif mode == "return" and line:match("%S") then
      returns[#returns] = returns[#returns] .. " " .. line:match("^%s*(.-)%s*$")
    elseif mode == "body" then
      body[#body + 1] = line
    end
  end
  while #body > 0 and not body[#body]:match("%S") do body[#body] = nil end
  while #body > 0 and not body[1]:match("%S") do table.remove(body, 1) end
  if usage then
    while #usage > 0 and not usage[#usage]:match("%S") do usage[#usage] = nil end
    usage = table.concat(dedent(usage), "\n")
  end
  return {body = body, params = params, returns = returns, usage = usage, extra_usage = extra_usage}
end

-- Markdown of the prose: indented runs become code blocks.
local function body_markdown(lines)
  local out, code, para = {}, {}, {}
  local function flush_para()
    if #para > 0 then
      out[#out + 1] = table.concat(para, " "):gsub("%s+", " ")
      out[#out + 1] = ""
      para = {}
    end
  end
  local function flush_code()
    if #code > 0 then
      out[#out + 1] = "```"
      for _, l in ipairs(dedent(code)) do out[#out + 1] = l end
      out[#out + 1] = "```"
      out[#out + 1] = ""
      code = {}
    end
  end
  local item_indent -- inside a list item: the indent of its marker
  for _, l in ipairs(lines) do
    local indent = #l:match("^ *")
    local bullet = l:match("^ *[-*] %S")
    if bullet and #code == 0 then
      flush_para()
      item_indent = indent
      para[1] = "- " .. l:match("^ *[-*] (.-)%s*$")
    elseif item_indent and l:match("%S") and indent > item_indent and #code == 0 then
      para[#para + 1] = l:match("^%s*(.-)%s*$") -- the item goes on
    elseif l:match("^  +%S") or (#code > 0 and l:match("%S")) then
      flush_para()
      item_indent = nil
      code[#code + 1] = l
    elseif not l:match("%S") then
      flush_para()
      flush_code()
      item_indent = nil
    else
      flush_code()
      if item_indent then flush_para() end
      item_indent = nil
      para[#para + 1] = l:match("^%s*(.-)%s*$")
    end
  end
  flush_para()
  flush_code()
  while out[#out] == "" do out[#out] = nil end
  return out
end

---------------------------------------------------------------------------
-- torch names
---------------------------------------------------------------------------

local TORCH = {}
for _, l in ipairs(lib.lines_of(ROOT .. "/docs/reference/torch_names.txt") or {}) do
  if not l:match("^#") then TORCH[l] = true end
end

-- Where attn's modules sit in torch (longest prefix first).
local TORCH_PREFIX = {
  {"attn.Tensor.", {"torch.Tensor."}},
  {"attn.nn.Instance.", {"torch.nn.Module."}},
  {"attn.nn.utils.rnn.", {"torch.nn.utils.rnn."}},
  {"attn.nn.utils.", {"torch.nn.utils."}},
  {"attn.nn.init.", {"torch.nn.init."}},
  {"attn.init.", {"torch.nn.init."}},
  {"attn.nn.DistributedDataParallel", {"torch.nn.parallel.DistributedDataParallel"}},
  {"attn.nn.", {"torch.nn."}},
  {"attn.F.", {"torch.nn.functional."}},
  {"attn.optim.Optimizer.", {"torch.optim.Optimizer."}},
  {"attn.optim.LRScheduler.", {"torch.optim.lr_scheduler.LRScheduler.", "torch.optim.lr_scheduler._LRScheduler."}},
  {"attn.optim.", {"torch.optim.", "torch.optim.lr_scheduler.", "torch.nn.utils."}},
  {"attn.data.", {"torch.utils.data."}},
  {"attn.dataset.", {"torch.utils.data."}},
  {"attn.dist.", {"torch.distributed."}},
  {"attn.attention.", {"torch.nn."}},
  {"attn.Generator.", {"torch.Generator."}},
  {"attn.Size", {"torch.Size"}},
  {"attn.", {"torch.", "torch.autograd."}},
}

-- Names whose torch counterpart is not where the rules look.
local TORCH_SPECIAL = {
  ["attn.bert.BertModel"] = "transformers.BertModel",
  ["attn.bert.from_pretrained"] = "transformers.BertModel.from_pretrained",
  ["attn.text.WordPiece"] = "transformers.BertTokenizer",
  ["attn.text.WordPiece.from_pretrained"] = "transformers.BertTokenizer.from_pretrained",
  ["attn.manual_seed"] = "torch.manual_seed",
  ["attn.save"] = "torch.save",
  ["attn.load"] = "torch.load",
}

local function torch_name(name, is_class)
  if TORCH_SPECIAL[name] then return TORCH_SPECIAL[name] end
  local n = name:gsub("%.init$", is_class and "" or ".__init__")
  for _, rule in ipairs(TORCH_PREFIX) do
    local p = rule[1]
    if n:sub(1, #p) == p then
      for _, tp in ipairs(rule[2]) do
        local cand = tp .. n:sub(#p + 1)
        if TORCH[cand] then return cand end
      end
    end
  end
  -- a method inherited from torch's base class (Linear:parameters is Module's)
  local class, method = n:match("^attn%.nn%.([%w_]+)%.([%w_]+)$")
  if class and TORCH["torch.nn.Module." .. method] then return "torch.nn.Module." .. method end
  return nil
end

---------------------------------------------------------------------------
-- The entries
---------------------------------------------------------------------------

local OPERATORS = {
  __add = "a + b", __sub = "a - b", __mul = "a * b", __div = "a / b", __mod = "a % b", __pow = "a ^ b",
  __unm = "-a", __idiv = "a // b", __eq = "a == b (same tensor object; use attn.equal or t:eq for values)",
  __lt = "a < b", __le = "a <= b", __len = "#t (size of dim 1)", __index = "t[i], t.field",
  __newindex = "t[i] = v", __call = "obj(...)", __tostring = "tostring(t), print(t)", __concat = "a .. b",
  __band = "a & b", __bor = "a | b", __bxor = "a ~ b", __bnot = "~a", __shl = "a << b", __shr = "a >> b",
  __close = "local x <close> = ...", __gc = "(collection)", __pairs = "pairs(t)", __name = "", __mul_ = "",
}

local CLASS_DOCS = {}

local function build_entries()
  local names, _, groups = lib.public_api({user_first = true})
  local by_name, by_line = lib.read_docs()
  local sig_of = signature_keys()
  -- "SiLU.init" -> the by_name entries ending so: a class documented in its
  -- own file (attn.activation.SiLU) and reached as attn.nn.SiLU
  local by_suffix = {}
  for qname, doc in pairs(by_name) do
    local suffix = qname:match("([%w_]+%.[%w_]+)$")
    if suffix then
      by_suffix[suffix] = by_suffix[suffix] == nil and doc or false
    end
  end
  -- doc blocks of classes made by assignment (optim.StepLR = scheduler_class(...)):
  -- shown at the head of their class's section when it has no constructor entry
  for _, b in pairs(by_line) do
    local lhs = b.code_text and b.code_text:match("^%s*([%w_.]+)%s*=[^=]")
    local key = lhs and lhs:match("([%w_]+%.%u[%w_]*)$")
    if key then CLASS_DOCS[key] = b end
  end
  local entries, operators = {}, {}
  for fn, group in pairs(groups) do
    table.sort(group, function(a, b)
      local ra, rb = rank(a), rank(b)
      if ra ~= rb then return ra < rb end
      if #a ~= #b then return #a < #b end
      return a < b
    end)
    local main = group[1]
    local method = main:match("%.(__[%w_]+)$")
    if method then
      for _, n in ipairs(group) do
        local owner = n:match("^(.*)%.__[%w_]+$")
        operators[owner] = operators[owner] or {}
        operators[owner][n:match("(__[%w_]+)$")] = true
      end
    else
      local block = type(fn) == "function" and lib.lua_doc_block(fn, by_line)
      local text = block and block.text
      if not text then
        for _, n in ipairs(group) do
          if by_name[n] then
            text = by_name[n].text
            break
          end
        end
      end
      if not text then
        local doc = by_suffix[main:match("([%w_]+%.[%w_]+)$") or ""]
        text = doc and doc.text or nil
      end
      entries[#entries + 1] = {name = main, names = group, fn = fn, text = text, key = sig_of[fn],
        where = (function()
          local p, l = lib.defined_at(fn)
          return p and (p:sub(1, #ROOT + 1) == ROOT .. "/" and p:sub(#ROOT + 2) or p) .. ":" .. l or nil
        end)()}
    end
  end
  table.sort(entries, function(a, b) return a.name < b.name end)
  return entries, operators, #names
end

-- How the entry is called: "attn.softmax(input, dim)", "t:abs()",
-- "nn.Linear(in_features, out_features, bias=true)", "m:forward(x)".
local function call_form(e)
  local name = e.name
  local sig = e.key and signature.SIGNATURES[e.key]
  local params
  if type(sig) == "string" then
    params = parse_sig(sig)
  else
    local ps = type(e.fn) == "function" and lua_params(e.fn)
    if ps then
      params = {}
      for _, p in ipairs(ps) do params[#params + 1] = {name = p} end
    end
  end
  local head, self_form
  local class, member = name:match("^(.-)%.([%w_]+)$")
  local is_ctor = member == "init" and class:match("%.%u[%w_]*$")
  local tensor_method = name:match("^attn%.Tensor%.([%w_]+)$")
  if is_ctor then
    head = class:gsub("^attn%.", "")
  elseif tensor_method then
    head, self_form = "t:" .. tensor_method, true
  elseif class and class:match("%.%u[%w_]*$") and not class:match("^attn%.[%u]") then
    -- a method of a class: obj:method (the receiver is self)
    local cls = class:match("([%w_]+)$")
    local obj = cls == "Instance" and "module" or cls == "Class" and "Class" or cls
    if params and params[1] and params[1].name == "self" then
      head, self_form = obj .. ":" .. member, true
    else
      head = class:gsub("^attn%.", "") .. "." .. member
    end
  else
    head = name
  end
  if not params then return head .. "(...)", nil end
  local parts, optional = {}, {}
  local kwonly = false
  for i, p in ipairs(params) do
    if p.name == "*" then kwonly = true end
    p.kwonly = kwonly
    local skip = (i == 1 and (p.name == "self" or (self_form and tensor_method and p.name ~= "*")))
    if not skip then
      parts[#parts + 1] = p.default and (p.name .. "=" .. p.default) or p.name
      if p.default and p.name ~= "*" and p.name ~= "/" then optional[#optional + 1] = p end
    end
  end
  return head .. "(" .. table.concat(parts, ", ") .. ")", optional, type(sig) == "string"
end

---------------------------------------------------------------------------
-- Examples
---------------------------------------------------------------------------

local function example_env()
  local env = {
    attn = attn, nn = attn.nn, F = attn.F, optim = attn.optim, data = attn.data,
    print = function() end, -- examples print what users would see; the check only runs them
  }
  return setmetatable(env, {__index = _G})
end

local function run_example(e)
  local chunk, err = load(e.usage, "=" .. e.name .. " example", "t", example_env())
  if not chunk then return false, err end
  attn.manual_seed(0)
  local ok, res = pcall(chunk)
  attn.set_grad_enabled(true)
  return ok, res
end

---------------------------------------------------------------------------
-- Markdown
---------------------------------------------------------------------------

local function anchor(name) return name:gsub("[^%w_]", "-"):lower() end
-- the entries' anchors; a class whose name differs from a function's only
-- in case (attn.viz.Capture, attn.viz.capture) gets "-class" after its own
local entry_anchors = {}
local function class_anchor(c)
  local a = anchor(c)
  return entry_anchors[a] and a .. "-class" or a
end

local function write_file(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function read_file(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function entry_markdown(e, out)
  local w = function(s) out[#out + 1] = s end
  local form, optional, declared = call_form(e)
  w(("### `%s`"):format(form))
  w("")
  local other = {}
  for i = 2, #e.names do
    local n = e.names[i]
    local m = n:match("^attn%.Tensor%.([%w_]+)$")
    other[#other + 1] = "`" .. (m and ("t:" .. m .. "(...)") or n) .. "`"
  end
  local facts = {}
  local tn = torch_name(e.name, e.name:match("%.init$") ~= nil)
  facts[#facts + 1] = tn and ("torch: `" .. tn .. "`") or "torch: none (attn's own)"
  if #other > 0 then facts[#facts + 1] = "also " .. table.concat(other, ", ") end
  if optional and #optional > 0 and declared then
    local o, kw, pos = {}, 0, 0
    for _, p in ipairs(optional) do
      if p.kwonly then kw = kw + 1 else pos = pos + 1 end
      o[#o + 1] = p.name .. " = " .. p.default
    end
    local how = kw == 0 and "positionally or by name in a trailing table"
      or pos == 0 and "by name in a trailing table" or "positionally up to `*`, or by name in a trailing table"
    facts[#facts + 1] = "options, " .. how .. ": `{" .. table.concat(o, ", ") .. "}`"
  end
  w("<sub>" .. table.concat(facts, " · ") .. "</sub>")
  w("")
  local parts = e.parts
  for _, l in ipairs(body_markdown(parts.body)) do w(l) end
  if #parts.params > 0 then
    w("")
    w("Parameters:")
    w("")
    for _, p in ipairs(parts.params) do
      local pn, pd = p:match("^(%S+)%s*(.*)$")
      w("- `" .. (pn or p) .. "` " .. (pd or ""))
    end
  end
  if #parts.returns > 0 then
    w("")
    w("Returns: " .. table.concat(parts.returns, "; "))
  end
  if parts.usage then
    w("")
    w("```lua")
    w(parts.usage)
    w("```")
  elseif e.covered then
    w("")
    w("The class's example above calls it.")
  end
  w("")
end

local function group_by_class(page_entries)
  -- functions of the page first, then one section per class
  local free, classes, order = {}, {}, {}
  for _, e in ipairs(page_entries) do
    local class = e.name:match("^(.-%.%u[%w_]*)%.[%w_]+$")
    if class and not e.name:match("^attn%.Tensor%.") and class ~= "attn.Size" then
      if not classes[class] then
        classes[class] = {}
        order[#order + 1] = class
      end
      table.insert(classes[class], e)
    else
      free[#free + 1] = e
    end
  end
  table.sort(order)
  return free, classes, order
end

local CLASS_TITLES = {["attn.nn.Instance"] = "Module (every module's methods)",
  ["attn.nn.Class"] = "Module classes (every class's functions)"}

local function page_markdown(page, page_entries, operators, all_entries)
  local out = {}
  local w = function(s) out[#out + 1] = s end
  w("<!-- Generated by scripts/gen_reference.lua from the sources: do not edit. -->")
  w("# " .. page[2])
  w("")
  w("`" .. page[4] .. "`")
  w("")
  w(page[5])
  w("")
  w("[Index](README.md) · examples assume `local attn = require \"attn\"` and `local nn, F, optim, data = "
    .. "attn.nn, attn.F, attn.optim, attn.data`; dims, indices and ids are 1-based.")
  w("")
  local free, classes, order = group_by_class(page_entries)
  -- contents
  w("## Contents")
  w("")
  local toc = {}
  for _, e in ipairs(free) do
    toc[#toc + 1] = "[" .. e.name:gsub("^attn%.Tensor%.", "t:") .. "](#" .. e.anchor .. ")"
  end
  if #toc > 0 then
    w(table.concat(toc, " · "))
    w("")
  end
  for _, c in ipairs(order) do
    w("- [" .. (CLASS_TITLES[c] or c) .. "](#" .. class_anchor(c) .. ")")
  end
  w("")
  if #free > 0 then
    w("## Functions")
    w("")
    for _, e in ipairs(free) do
      w('<a id="' .. e.anchor .. '"></a>')
      w("")
      entry_markdown(e, out)
    end
  end
  for _, c in ipairs(order) do
    w('<a id="' .. class_anchor(c) .. '"></a>')
    w("")
    w("## " .. (CLASS_TITLES[c] or c))
    w("")
    local ops = operators[c]
    if ops then
      local list = {}
      for mm in pairs(ops) do
        if OPERATORS[mm] and OPERATORS[mm] ~= "" then list[#list + 1] = "`" .. OPERATORS[mm] .. "`" end
      end
      table.sort(list)
      if #list > 0 then
        w("Operators: " .. table.concat(list, ", "))
        w("")
      end
    end
    local has_ctor = false
    for _, e in ipairs(classes[c]) do
      if e.name:match("%.init$") or e.name:match("%.new$") then has_ctor = true end
    end
    local cdoc = not has_ctor and CLASS_DOCS[c:match("([%w_]+%.[%w_]+)$") or ""]
    if cdoc then
      local parts = split_block(cdoc.text)
      w("### `" .. c:gsub("^attn%.", "") .. "`")
      w("")
      local tn = torch_name(c, true)
      w("<sub>" .. (tn and ("torch: `" .. tn .. "`") or "torch: none (attn's own)") .. "</sub>")
      w("")
      for _, l in ipairs(body_markdown(parts.body)) do w(l) end
      if parts.usage then
        w("")
        w("```lua")
        w(parts.usage)
        w("```")
      end
      w("")
    end
    -- the constructor first
    table.sort(classes[c], function(a, b)
      local ia, ib = a.name:match("%.init$") and 0 or 1, b.name:match("%.init$") and 0 or 1
      if ia ~= ib then return ia < ib end
      return a.name < b.name
    end)
    for _, e in ipairs(classes[c]) do
      w('<a id="' .. e.anchor .. '"></a>')
      w("")
      entry_markdown(e, out)
    end
  end
  if page[1] == "tensor" then
    -- every method, also those documented as attn.name on the attn page
    local list = {}
    for _, e in ipairs(all_entries) do
      for _, n in ipairs(e.names) do
        local m = n:match("^attn%.Tensor%.([%w_]+)$")
        if m and not m:match("^__") then
          local where = e.name:match("^attn%.Tensor%.") and "" or "attn.md"
          list[#list + 1] = {m, "[`t:" .. m .. "`](" .. where .. "#" .. e.anchor .. ")"}
        end
      end
    end
    table.sort(list, function(a, b) return a[1] < b[1] end)
    local links = {}
    for _, l in ipairs(list) do links[#links + 1] = l[2] end
    w("## All methods")
    w("")
    w("Most methods are also functions of attn (`t:softmax(2)` is `attn.softmax(t, 2)`) and are documented "
      .. "there once: " .. table.concat(links, " · "))
    w("")
  end
  if page[1] == "tensor" and operators["attn.Tensor"] then
    local list = {}
    for mm in pairs(operators["attn.Tensor"]) do
      if OPERATORS[mm] and OPERATORS[mm] ~= "" then list[#list + 1] = "`" .. OPERATORS[mm] .. "`" end
    end
    table.sort(list)
    w("## Operators")
    w("")
    w("Tensors take Lua's operators, broadcasting like the methods: " .. table.concat(list, ", ") .. ".")
    w("")
  end
  return table.concat(out, "\n")
end

---------------------------------------------------------------------------
-- The C API page
---------------------------------------------------------------------------

local problems_c = {}

local function c_header_markdown(path, out)
  local lines = lib.lines_of(ROOT .. "/" .. path) or {}
  local w = function(s) out[#out + 1] = s end
  w("## `" .. path:match("[^/]+$") .. "`")
  w("")
  -- the file comment: the first /* ... */ after the SPDX line
  local i = 1
  while i <= #lines and not lines[i]:match("^/%*%s*$") do i = i + 1 end
  local intro = {}
  if i <= #lines then
    i = i + 1
    while i <= #lines and not lines[i]:match("%*/") do
      intro[#intro + 1] = (lines[i]:gsub("^ %* ?", ""):gsub("^ %*$", ""))
      i = i + 1
    end
  end
  for _, l in ipairs(body_markdown(intro)) do w(l) end
  w("")
  -- the rest, paragraph by paragraph (blank lines apart): its comments
  -- are the text, its declarations the code; a paragraph of comments only
  -- is a section's text
  local decls, undocumented = 0, {}
  local para = {}
  local function flush()
    if #para == 0 then return end
    local text, code_lines, in_comment, commented = {}, 0, false, false
    for _, l in ipairs(para) do
      if in_comment or l:match("^%s*/%*") then
        local body = l:gsub("^%s*/%*+%s?", ""):gsub("^%s*%*+/?%s?", ""):gsub("%s*%*/%s*$", "")
        if body:match("%S") and not body:match("^%-+$") then text[#text + 1] = body end
        in_comment = not l:match("%*/")
      elseif l:match("^%s*//") then
        text[#text + 1] = l:gsub("^%s*//%s?", "")
      else
        code_lines = code_lines + 1
        if l:match("/%*") or l:match("//") then commented = true end
      end
    end
    if code_lines == 0 then -- a section's title or text
      if #para >= 2 and para[1]:match("^/%* %-%-%-") and #text == 1 then
        w("### " .. text[1]:match("^%s*(.-)%s*$"))
      else
        for _, l in ipairs(body_markdown(text)) do w(l) end
      end
    else -- declarations, shown as the header has them, comments and all
      local joined = table.concat(para, "\n")
      local api = {}
      for name in joined:gmatch("(attn_[%w_]+)%s*%(") do api[#api + 1] = name end
      w("```c")
      w(joined)
      w("```")
      decls = decls + #api
      if #text == 0 and not commented and #api > 0 then undocumented[#undocumented + 1] = api[1] end
    end
    w("")
    para = {}
  end
  -- the include guard, extern "C" and #include lines are left out
  local skip = {}
  for j = 1, #lines do
    local l = lines[j]
    if l:match("^#%s*include") or l:match("^#ifndef ATTN_[%u_]*H$") or l:match("^#define ATTN_[%u_]*H$")
      or l:match("^extern \"C\"") or l:match("^#ifdef __cplusplus") then
      skip[j] = true
      if l:match("^#ifdef __cplusplus") then
        skip[j + 1], skip[j + 2] = true, true
      end
    end
  end
  for j = #lines, 1, -1 do -- the guard's #endif: the last one
    if lines[j]:match("^#endif") then
      skip[j] = true
      break
    end
  end
  for j = i + 1, #lines do
    local l = lines[j]
    if l:match("^%s*$") then
      flush()
    elseif not skip[j] then
      para[#para + 1] = l
    end
  end
  flush()
  if #undocumented > 0 then
    problems_c[#problems_c + 1] = path .. ": declarations without a comment: " .. table.concat(undocumented, ", ")
  end
  return decls
end

---------------------------------------------------------------------------
-- HTML (the Markdown above, rendered for the installed copy)
---------------------------------------------------------------------------

local function html_escape(s) return (s:gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;")) end

local function inline_html(s)
  -- keep the few raw tags the pages use (<sub>, <a id>)
  local keep = {}
  s = s:gsub("(</?sub>)", function(t)
    keep[#keep + 1] = t
    return "\1" .. #keep .. "\1"
  end)
  s = html_escape(s)
  s = s:gsub("`([^`]+)`", "<code>%1</code>")
  s = s:gsub("%[([^%]]+)%]%(([^%)]+)%)", function(text, href)
    if not href:match("^%.%./") then href = href:gsub("%.md$", ".html"):gsub("%.md#", ".html#") end
    return '<a href="' .. href .. '">' .. text .. "</a>"
  end)
  s = s:gsub("\1(%d+)\1", function(n) return keep[tonumber(n)] end)
  return s
end

local CSS = [[
body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;line-height:1.45;color:#222}
code,pre{font-family:ui-monospace,monospace;font-size:.92em}pre{background:#f5f5f5;padding:.6rem;overflow-x:auto}
h3{margin-top:2rem;border-top:1px solid #ddd;padding-top:.8rem}h3 code{font-size:1em}sub{color:#555}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2rem .5rem}]]

local function to_html(md, title)
  local out = {"<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
    "<title>" .. html_escape(title) .. "</title><style>" .. CSS .. "</style></head><body>"}
  local in_code, in_list, para = false, false, {}
  local function flush()
    if #para > 0 then
      out[#out + 1] = "<p>" .. inline_html(table.concat(para, " ")) .. "</p>"
      para = {}
    end
    if in_list then
      out[#out + 1] = "</ul>"
      in_list = false
    end
  end
  for line in (md .. "\n"):gmatch("(.-)\n") do
    if in_code then
      if line:match("^```") then
        out[#out + 1] = "</code></pre>"
        in_code = false
      else
        out[#out + 1] = html_escape(line)
      end
    elseif line:match("^```") then
      flush()
      out[#out + 1] = "<pre><code>"
      in_code = true
    elseif line:match("^<!%-%-") then
      out[#out + 1] = line
    elseif line:match('^<a id="') then
      flush()
      out[#out + 1] = line
    elseif line:match("^#+ ") then
      flush()
      local hashes, text = line:match("^(#+) (.*)$")
      out[#out + 1] = ("<h%d>%s</h%d>"):format(#hashes, inline_html(text), #hashes)
    elseif line:match("^%- ") then
      if #para > 0 then
        out[#out + 1] = "<p>" .. inline_html(table.concat(para, " ")) .. "</p>"
        para = {}
      end
      if not in_list then
        out[#out + 1] = "<ul>"
        in_list = true
      end
      out[#out + 1] = "<li>" .. inline_html(line:sub(3)) .. "</li>"
    elseif line:match("^|") then
      flush()
      if not line:match("^|%-") then
        local cells = {}
        for c in line:gmatch("|%s*([^|]-)%s*%f[|]") do cells[#cells + 1] = "<td>" .. inline_html(c) .. "</td>" end
        out[#out + 1] = "<table><tr>" .. table.concat(cells) .. "</tr></table>"
      end
    elseif not line:match("%S") then
      flush()
    else
      para[#para + 1] = line
    end
  end
  flush()
  out[#out + 1] = "</body></html>"
  local s = table.concat(out, "\n")
  -- adjacent one-row tables into one
  s = s:gsub("</table>\n<table>", "\n")
  return s
end

---------------------------------------------------------------------------
-- Main
---------------------------------------------------------------------------

-- docs/reference/examples_pending.txt: entries whose example is still to
-- write (one name a line).  It may only shrink: a listed name that has an
-- example, or is no entry, is a problem.
local PENDING = {}
for _, l in ipairs(lib.lines_of(ROOT .. "/docs/reference/examples_pending.txt") or {}) do
  local name = l:gsub("#.*$", ""):match("^%s*(%S+)")
  if name then PENDING[name] = true end
end

-- A module class's forward, extra_repr and reset_parameters are shown by
-- the class's example (its constructor's @usage), as torch documents them.
local CLASS_COVERED = {forward = true, extra_repr = true, reset_parameters = true}
local ctor_usage = {}
local function covered(e)
  local class, method = e.name:match("^(.*)%.([%w_]+)$")
  return CLASS_COVERED[method] and ctor_usage[class] ~= nil
end

local function main()
  local entries, operators, total = build_entries()
  for _, e in ipairs(entries) do
    local class = e.name:match("^(.*)%.init$")
    if class then ctor_usage[class] = split_block(e.text or "").usage end
  end
  local pages = {}
  for _, p in ipairs(PAGES) do pages[p[1]] = {} end
  local problems = {}
  local anchors = {}
  for _, e in ipairs(entries) do
    e.parts = split_block(e.text or "")
    e.usage = e.parts.usage
    local p = page_of(e.name) or PAGES[1]
    if not e.name:match("^attn%.[%w_]+%.") and not e.name:match("^attn%.Tensor") then p = PAGES[1] end
    local a = anchor(e.name)
    while anchors[a] do a = a .. "-" end
    anchors[a] = true
    entry_anchors[a] = true
    e.anchor = a
    table.insert(pages[p[1]], e)
    if e.parts.extra_usage then
      problems[#problems + 1] = "two @usage sections (the reference shows one): " .. e.name .. " ("
        .. (e.where or "C") .. ")"
    end
    if not e.text then problems[#problems + 1] = "no doc entry: " .. e.name .. " (" .. (e.where or "C") .. ")" end
    e.covered = not e.usage and covered(e)
    if not e.usage and not e.covered then
      if PENDING[e.name] then
        PENDING[e.name] = "used"
      else
        problems[#problems + 1] = "no example (@usage): " .. e.name .. " (" .. (e.where or "C") .. ")"
      end
    elseif PENDING[e.name] then
      problems[#problems + 1] = "examples_pending.txt: " .. e.name .. " has an example now; remove the line"
      PENDING[e.name] = "used"
    end
  end

  for name, state in pairs(PENDING) do
    if state ~= "used" then
      problems[#problems + 1] = "examples_pending.txt: " .. name .. " is not a public function's entry; remove the line"
    end
  end
  if opts.list then -- NAME <tab> file:line (C: docs/api) <tab> example? for tools
    for _, e in ipairs(entries) do print(e.name .. "\t" .. (e.where or "C") .. "\t" .. (e.usage and "yes" or "no")) end
    return 0
  end
  local files = {}
  local index = {"<!-- Generated by scripts/gen_reference.lua from the sources: do not edit. -->",
    "# attn API reference", "",
    "Every public function and class of attn, by what you import: its call with the optional arguments and "
      .. "their defaults (positional in torch's order, or in a trailing options table), what it does, an "
      .. "example that runs (CI runs every one), and the PyTorch 1.13 name it mirrors.", "",
    "Conventions: `local attn = require \"attn\"` returns one table and sets no globals; dims, indices and "
      .. "token ids are 1-based and negative dims count from the end; dtypes, broadcasting and masks follow "
      .. "torch. The [guide from PyTorch](../guide-from-pytorch.md) maps idioms line by line.", "",
    "| page | import | entries |", "|---|---|---|"}
  for _, p in ipairs(PAGES) do
    if #pages[p[1]] > 0 then
      files[p[1] .. ".md"] = page_markdown(p, pages[p[1]], operators, entries)
      index[#index + 1] = ("| [%s](%s.md) | `%s` | %d |"):format(p[2], p[1], p[4], #pages[p[1]])
    end
  end
  local capi = {"<!-- Generated by scripts/gen_reference.lua from the sources: do not edit. -->", "# C API", "",
    "[Index](README.md) · `#include <attn.h>` (`pkg-config --cflags --libs attn`, CMake `attn::attn_shared`) "
      .. "and `#include <attn_lua.h>` (`pkg-config --cflags --libs attn-lua`, CMake `attn::attn_lua`). "
      .. "Indices are 0-based in C. [Embedding guide](../embedding.md).", ""}
  local ndecl = c_header_markdown("src/attn.h", capi) + c_header_markdown("src/attn_lua.h", capi)
  files["capi.md"] = table.concat(capi, "\n")
  for _, p in ipairs(problems_c) do problems[#problems + 1] = p end
  index[#index + 1] = ("| [C API](capi.md) | `#include <attn.h>`, `<attn_lua.h>` | %d |"):format(ndecl)
  index[#index + 1] = ""
  index[#index + 1] = ("%d public Lua functions in %d entries (one per function; other names are listed in "
    .. "it), %d C declarations."):format(total, #entries, ndecl)
  index[#index + 1] = ""
  files["README.md"] = table.concat(index, "\n")
  for k, v in pairs(files) do files[k] = v:gsub("\n*$", "\n") end

  local status = 0
  if opts["run-examples"] or opts.check then
    -- examples write files under os.tmpname(), never into the working folder
    local function listing()
      local set, h = {}, io.popen("ls -A 2>/dev/null")
      for f in h:lines() do set[f] = true end
      h:close()
      return set
    end
    local before = listing()
    -- the entries' examples, then those of the class blocks shown at the
    -- head of their sections (optim.StepLR)
    local examples = {}
    for _, e in ipairs(entries) do
      if e.usage then examples[#examples + 1] = e end
    end
    local keys = {}
    for key in pairs(CLASS_DOCS) do keys[#keys + 1] = key end
    table.sort(keys)
    for _, key in ipairs(keys) do
      local usage = split_block(CLASS_DOCS[key].text).usage
      if usage then examples[#examples + 1] = {name = key, usage = usage} end
    end
    local failed = 0
    for _, e in ipairs(examples) do
      local ok, err = run_example(e)
      if not ok then
        failed = failed + 1
        problems[#problems + 1] = "example fails: " .. e.name .. ": " .. tostring(err)
      end
    end
    for f in pairs(listing()) do
      if not before[f] then
        problems[#problems + 1] = "an example wrote " .. f .. " into the working folder (use os.tmpname())"
      end
    end
    print(("gen_reference: %d examples ran, %d failed"):format(#examples, failed))
  end
  if opts.check then
    for name, text in pairs(files) do
      if read_file(opts.md .. "/" .. name) ~= text then
        problems[#problems + 1] = "docs/reference/" .. name .. " is stale: run build/bin/attn scripts/gen_reference.lua"
      end
    end
  else
    os.execute("mkdir -p " .. shell_quote(opts.md))
    for name, text in pairs(files) do write_file(opts.md .. "/" .. name, text) end
    if opts.html then
      os.execute("mkdir -p " .. shell_quote(opts.html))
      for name, text in pairs(files) do
        local title = (text:match("\n# ([^\n]+)") or name) .. " - attn"
        write_file(opts.html .. "/" .. (name == "README.md" and "index.html" or name:gsub("%.md$", ".html")),
          to_html(text, title))
      end
    end
  end
  local noexample = 0
  for _, p in ipairs(problems) do if p:match("^no example") then noexample = noexample + 1 end end
  print(("gen_reference: %d public functions, %d entries on %d pages, %d C declarations, %d without an example"):format(
    total, #entries, #PAGES + 1, ndecl, noexample))
  if opts.check or opts["run-examples"] then
    for _, p in ipairs(problems) do print(p) end
    if #problems > 0 then status = 1 end
  end
  return status
end

os.exit(main())
