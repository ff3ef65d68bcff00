-- SPDX-License-Identifier: MIT
-- Public functions of this room not declared yet (spec/calling_convention_spec.lua):
-- remove a line when its function is declared.
return {
}
