-- SPDX-License-Identifier: MIT
-- attn.bert is kept as a name users require: the module is attn.app.bert
-- (lua/attn/app/bert.lua, the application floor above the framework), and
-- this door returns that same table.  Nothing in the package requires it.
return require "attn.app.bert"
