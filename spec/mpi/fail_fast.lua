-- SPDX-License-Identifier: MIT
-- Run by spec/dist_spec.lua under mpirun -np 2: rank 1 raises an error
-- while rank 0 waits in a collective.  The job must end quickly with a
-- non-zero status and rank 1's message (attn aborts the MPI job when a
-- rank's script fails).
local attn = require "attn"
local dist = attn.dist
dist.init()
if dist.rank() == 1 then
  error(("rank %d: deliberate failure"):format(dist.rank()))
end
local t = attn.ones(4)
dist.allreduce(t, "sum") -- never completes: rank 1 is gone
print("unreachable")
