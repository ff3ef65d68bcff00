-- SPDX-License-Identifier: MIT
-- attn.plot is kept as a name users require: the module is attn.app.plot
-- (lua/attn/app/plot.lua, the application floor above the framework), and
-- this door returns that same table.  Nothing in the package requires it.
return require "attn.app.plot"
