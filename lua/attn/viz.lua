-- SPDX-License-Identifier: MIT
-- attn.viz is kept as a name users require: the module is attn.app.viz
-- (lua/attn/app/viz.lua, the application floor above the framework), and
-- this door returns that same table.  Nothing in the package requires it.
return require "attn.app.viz"
