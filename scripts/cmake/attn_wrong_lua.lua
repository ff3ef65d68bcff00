-- SPDX-License-Identifier: MIT
-- Installed as attn.lua for Lua 5.1, 5.2 and 5.3, which cannot load attn
-- (a Lua 5.4 module): `require "attn"` there says what to run instead of
-- "module 'attn' not found".  Debian's plain `busted` runs Lua 5.1.
error(("attn is a Lua 5.4 module and this is %s.  Run scripts with lua5.4 or attn, "
  .. "and specs with `busted --lua=lua5.4` (or put `lua = \"lua5.4\"` in the project's .busted file)")
  :format(_VERSION), 2)
