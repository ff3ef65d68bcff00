-- SPDX-License-Identifier: MIT
-- For the example host's test (scripts/cmake/host.cmake): a user script that
-- tries to read a file.  attn_viz runs scripts in a sandbox without io, so
-- it must fail (the test expects a non-zero exit).
return function(x, weights)
  local f = io.open("/etc/passwd")
  weights:fill_(1 / x:size(1))
  return f and x or nil
end
