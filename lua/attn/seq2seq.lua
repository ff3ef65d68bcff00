-- SPDX-License-Identifier: MIT
-- attn.seq2seq is kept as a name users require: the module is attn.app.seq2seq
-- (lua/attn/app/seq2seq.lua, the application floor above the framework), and
-- this door returns that same table.  Nothing in the package requires it.
return require "attn.app.seq2seq"
