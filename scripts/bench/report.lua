-- SPDX-License-Identifier: MIT
--- Writes docs/benchmarks.md from bench runs' CSV files, so that every
-- number on that page traces to a CSV in scripts/bench/results/.
--
--   lua5.4 scripts/bench/report.lua [--out docs/benchmarks.md] RUN.csv [RUN.csv ...]
--   lua5.4 scripts/bench/report.lua --check docs/benchmarks.md
--
-- Each RUN.csv is what `attn scripts/bench/run.lua` wrote; RUN.csv.meta
-- beside it (also written by run.lua) gives the date, CPU, kernel family,
-- BLAS core and load of the run.  --check regenerates the page from the
-- CSVs its header names and fails if the page differs (a spec runs it).
-- Plain Lua 5.4: no attn needed.

local out_path, check_path, csvs = nil, nil, {}
do
  local i = 1
  while i <= #arg do
    local a = arg[i]
    if a == "--out" and arg[i + 1] then
      out_path, i = arg[i + 1], i + 2
    elseif a == "--check" and arg[i + 1] then
      check_path, i = arg[i + 1], i + 2
    elseif a:sub(1, 2) == "--" then
      io.stderr:write("usage: lua5.4 scripts/bench/report.lua [--out FILE] RUN.csv ... | --check FILE\n")
      os.exit(2)
    else
      csvs[#csvs + 1] = a
      i = i + 1
    end
  end
end

local function read(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local s = f:read("a")
  f:close()
  return s
end

-- one CSV line: fields, quoted ones may hold commas ("" is a quote)
local function split_csv(line)
  local fields, pos = {}, 1
  while pos <= #line + 1 do
    if line:sub(pos, pos) == '"' then
      local buf, j = {}, pos + 1
      while true do
        local q = line:find('"', j, true)
        if not q then error("unterminated quote in: " .. line) end
        buf[#buf + 1] = line:sub(j, q - 1)
        if line:sub(q + 1, q + 1) == '"' then
          buf[#buf + 1] = '"'
          j = q + 2
        else
          pos = q + 2
          break
        end
      end
      fields[#fields + 1] = table.concat(buf)
    else
      local c = line:find(",", pos, true) or (#line + 1)
      fields[#fields + 1] = line:sub(pos, c - 1)
      pos = c + 1
    end
  end
  return fields
end

local function load_run(path)
  local text = assert(read(path))
  local rows, header = {}, nil
  for line in text:gmatch("[^\n]+") do
    local f = split_csv(line)
    if not header then
      header = f
    else
      local r = {}
      for k, name in ipairs(header) do r[name] = f[k] end
      rows[#rows + 1] = r
    end
  end
  local meta = {}
  local m = read(path .. ".meta")
  if m then
    for k, v in m:gmatch("([%w_]+):%s*([^\n]*)") do meta[k] = v end
  end
  return rows, meta
end

local function num(s) return s and s ~= "" and tonumber(s) or nil end

local function fmt_time(s)
  if not s then return "" end
  if s < 1e-3 then return ("%.2f us"):format(s * 1e6) end
  if s < 1 then return ("%.2f ms"):format(s * 1e3) end
  return ("%.3f s"):format(s)
end

local function fmt_mb(b)
  if not b then return "" end
  return ("%.1f MB"):format(b / 2 ^ 20)
end

local function fmt(x, f) return x and (f):format(x) or "" end

local function section(path, rows, meta)
  local out = {}
  local function w(s) out[#out + 1] = s end
  w("## " .. (meta.date or "undated run") .. ": " .. path:match("[^/]+$"))
  w("")
  if next(meta) then
    w(("- machine: %s, %s cores; kernel family %s (available: %s); BLAS core %s"):format(meta.cpu or "?",
      meta.cores or "?", meta.isa or "?", meta.isa_available or "?", meta.blas_core or "?"))
    w(("- BLAS: %s"):format(meta.blas_config or "?"))
    w(("- attn %s (commit %s), torch %s; threads %s%s"):format(meta.attn_version or "?",
      meta.commit ~= "" and meta.commit or "?", meta.torch ~= "" and meta.torch or "not installed",
      meta.threads or "?", meta.quick == "true" and ", --quick" or ""))
    w(("- load average (1, 5, 15 min) at the start: %s; at the end: %s"):format(meta.load_at_start or "?",
      meta.load_at_end or "?"))
    local cores = tonumber(meta.cores or "")
    local l1 = math.max(tonumber((meta.load_at_start or ""):match("^(%S+)")) or 0,
      tonumber((meta.load_at_end or ""):match("^(%S+)")) or 0)
    if cores and l1 > cores then
      w(("- **the machine was busy** (load %.1f on %d cores): other jobs shared the cores, so wall times, the " ..
        "2-thread rows and torch's side most of all, are noisy; compare ratios with care"):format(l1, cores))
    end
  else
    w("- no .meta file beside this CSV: machine, BLAS core and load were not recorded")
  end
  w("")
  w("| case | name | threads | family | attn | torch | torch / attn | attn GFLOP/s | % of FMA peak |" ..
    " torch GFLOP/s | peak RSS growth attn / torch | note |")
  w("|---|---|---|---|---|---|---|---|---|---|---|---|")
  for _, r in ipairs(rows) do
    local am, tm = num(r.attn_peak_bytes), num(r.torch_peak_bytes)
    local mem = (am or tm) and (fmt_mb(am) .. " / " .. fmt_mb(tm)) or ""
    w(("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |"):format(r.case or "", r.name or "",
      r.threads or "", r.isa or "", fmt_time(num(r.attn_s)), fmt_time(num(r.torch_s)), fmt(num(r.ratio), "%.2fx"),
      fmt(num(r.attn_gflops), "%.1f"), fmt(num(r.pct_of_peak), "%.0f%%"), fmt(num(r.torch_gflops), "%.1f"), mem,
      (r.note or ""):gsub("|", "/")))
  end
  w("")
  return table.concat(out, "\n")
end

local function render(list)
  local parts = {
    "# Benchmarks beside PyTorch 1.13",
    "",
    "<!-- generated by scripts/bench/report.lua from: " .. table.concat(list, " ") ..
      " (do not edit: rerun the benchmark and the report) -->",
    "",
    "Made by `attn scripts/bench/run.lua` (method and cases: " ..
      "[scripts/bench/README.md](../scripts/bench/README.md)), which writes a CSV and its `.meta` under " ..
      "`scripts/bench/results/`; this page is `lua5.4 scripts/bench/report.lua --out docs/benchmarks.md " ..
      "CSV...` over them.  Ratios are torch time / attn time (above 1: attn is faster), both measured in the " ..
      "same run on the same machine with the same threads.  torch 1.13 has no fused SDPA: its \"sdpa\" " ..
      "is the explicit softmax(q k^T * scale) v.  Times are the best of repeated calls; the load average " ..
      "says how busy the machine was.",
    "",
  }
  for _, path in ipairs(list) do
    local rows, meta = load_run(path)
    parts[#parts + 1] = section(path, rows, meta)
  end
  return table.concat(parts, "\n")
end

if check_path then
  local page = assert(read(check_path))
  local names = page:match("<!%-%- generated by scripts/bench/report.lua from: (.-) %(do not edit")
  if not names then
    io.stderr:write(check_path .. ": no generated-from header\n")
    os.exit(1)
  end
  local list = {}
  for p in names:gmatch("%S+") do list[#list + 1] = p end
  if render(list) ~= page then
    io.stderr:write(check_path .. " differs from what report.lua makes of its CSVs; regenerate it\n")
    os.exit(1)
  end
  print(check_path .. ": up to date with " .. #list .. " CSV file(s)")
  os.exit(0)
end

if #csvs == 0 then
  io.stderr:write("report.lua: name at least one CSV\n")
  os.exit(2)
end
local page = render(csvs)
if out_path then
  local f = assert(io.open(out_path, "wb"))
  f:write(page)
  f:close()
else
  io.write(page)
end
