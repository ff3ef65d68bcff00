-- SPDX-License-Identifier: MIT
-- Public functions of this room not declared yet (spec/calling_convention_spec.lua):
-- remove a line when its function is declared.
return {
  ["attn.Tensor.to"] = true,
  ["attn.arange"] = true,
  ["attn.device"] = true,
  ["attn.eye"] = true,
  ["attn.full"] = true,
  ["attn.full_like"] = true,
  ["attn.linspace"] = true,
  ["attn.load"] = true,
  ["attn.rand"] = true,
  ["attn.rand_like"] = true,
  ["attn.randint"] = true,
  ["attn.randn"] = true,
  ["attn.randn_like"] = true,
  ["attn.randperm"] = true,
  ["attn.save"] = true,
  ["attn.to"] = true,
}
