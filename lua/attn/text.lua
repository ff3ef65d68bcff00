-- SPDX-License-Identifier: MIT
-- attn.text is kept as a name users require: the module is attn.app.text
-- (lua/attn/app/text.lua, the application floor above the framework), and
-- this door returns that same table.  Nothing in the package requires it.
return require "attn.app.text"
