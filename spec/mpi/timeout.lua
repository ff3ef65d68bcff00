-- SPDX-License-Identifier: MIT
-- Run by spec/dist_spec.lua under mpirun -np 2: rank 1 stays alive but
-- never joins the allreduce; rank 0 must fail with a timeout error after
-- about 1 s instead of hanging.
local attn = require "attn"
local dist = attn.dist
dist.init({timeout = 1})
if dist.rank() == 1 then
  local t0 = os.time()
  while os.time() - t0 < 4 do end -- busy, alive, not in the collective
  os.exit(0)
end
local ok, err = pcall(dist.allreduce, attn.ones(4), "sum")
io.stderr:write("rank 0 result: ", tostring(ok), " ", tostring(err), "\n")
os.exit(ok and 0 or 3)
