-- SPDX-License-Identifier: MIT
-- Public functions of this room not declared yet (spec/calling_convention_spec.lua):
-- remove a line when its function is declared.
return {
  ["attn.Tensor.bucketize"] = true,
  ["attn.Tensor.scatter_reduce"] = true,
  ["attn.Tensor.scatter_reduce_"] = true,
  ["attn.bucketize"] = true,
  ["attn.causal_mask"] = true,
  ["attn.scaled_dot_product_attention"] = true,
  ["attn.scatter_reduce"] = true,
  ["attn.scatter_reduce_"] = true,
}
