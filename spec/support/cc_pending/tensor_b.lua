-- SPDX-License-Identifier: MIT
-- Public functions of this room not declared yet (spec/calling_convention_spec.lua):
-- remove a line when its function is declared.
return {
  ["attn.save"] = true, -- its metadata argument is a string-keyed table: an options table would shadow it
}
