-- SPDX-License-Identifier: MIT
-- docs/benchmarks.md is generated (scripts/bench/report.lua) from the bench
-- runs' CSVs in scripts/bench/results/: the page must be exactly what the
-- report makes of the CSVs its header names, so no number on it is typed.

local SRC = os.getenv("ATTN_SOURCE_DIR") or "."
local LUA = "lua5.4"

local function run(cmd)
  local p = assert(io.popen("cd '" .. SRC .. "' && " .. cmd .. " 2>&1; echo \"rc=$?\""))
  local out = p:read("a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return rc, out
end

describe("scripts/bench/report.lua", function()
  it("docs/benchmarks.md is up to date with its CSVs", function()
    local rc, out = run(LUA .. " scripts/bench/report.lua --check docs/benchmarks.md")
    assert.are.equal(0, rc, out)
  end)

  it("turns a CSV and its .meta into a table with units and ratios", function()
    local csv = os.tmpname()
    local f = assert(io.open(csv, "w"))
    f:write("case,name,threads,isa,attn_s,attn_cpu_s,torch_s,ratio,attn_gflops,pct_of_peak,torch_gflops," ..
      "attn_peak_bytes,torch_peak_bytes,note\n")
    f:write('1,"sdpa fwd L=1024, x",1,avx2,0.0253,0.0253,0.483,19.09,85.1,81.2,4.4,1048576,67108864,"a ""b"""\n')
    f:close()
    f = assert(io.open(csv .. ".meta", "w"))
    f:write("date: 2026-11-25 10:40 UTC\ncpu: Test CPU\ncores: 2\nisa: avx2\nblas_core: Haswell\n")
    f:close()
    local rc, out = run(LUA .. " scripts/bench/report.lua '" .. csv .. "'")
    os.remove(csv)
    os.remove(csv .. ".meta")
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("## 2026-11-25 10:40 UTC", 1, true))
    assert.truthy(out:find("Test CPU, 2 cores; kernel family avx2", 1, true))
    assert.truthy(out:find("BLAS core Haswell", 1, true))
    assert.truthy(out:find("| 1 | sdpa fwd L=1024, x | 1 | avx2 | 25.30 ms | 483.00 ms | 19.09x | 85.1 | 81% | 4.4 |" ..
      " 1.0 MB / 64.0 MB | a \"b\" |", 1, true), out)
  end)
end)
