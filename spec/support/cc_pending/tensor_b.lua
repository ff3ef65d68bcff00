-- SPDX-License-Identifier: MIT
-- Public functions of this room not declared yet (spec/calling_convention_spec.lua):
-- remove a line when its function is declared.
return {
  ["attn.Tensor.to"] = true,
  ["attn.device"] = true,
  ["attn.load"] = true,
  ["attn.save"] = true,
  ["attn.to"] = true,
}
