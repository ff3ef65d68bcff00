-- luacheck configuration (Debian: lua-check).  scripts/lint.sh runs
--   luacheck -q lua scripts spec
std = "lua54"
max_line_length = 120

-- A method keeps its implicit self (`function M:f()`) even when its body
-- does not read it, so that every method is called the same way (obj:f());
-- an unused implicit self is not a finding.  Explicit arguments are still
-- checked.
self = false

-- Ignored everywhere, each for a reason:
ignore = {
  -- A to-be-closed guard (`local guard <close> = attn.no_grad()`) does its
  -- work when it is closed; luacheck 1.1 does not count that as a use.
  "211/guard",
  "211/inner_guard",
}

files["spec"] = {
  std = "+busted",
  -- Specs are tables of cases and expected messages, one case per line;
  -- wrapping them would split a case from its message.
  max_line_length = false,
  ignore = {
    -- `ok, err = pcall(...)` followed by a match on err: a call that did
    -- not raise leaves err nil and fails the match, so ok is not needed.
    "311/ok",
  },
}
