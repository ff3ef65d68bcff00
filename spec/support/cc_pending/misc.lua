-- SPDX-License-Identifier: MIT
-- Public functions of this room not declared yet (spec/calling_convention_spec.lua):
-- remove a line when its function is declared.
return {
  ["attn.data.Progress.update"] = true,
  ["attn.plot.heatmap"] = true,
  ["attn.plot.histogram"] = true,
  ["attn.plot.lines"] = true,
  ["attn.text.WordPiece.convert_ids_to_tokens"] = true,
  ["attn.text.WordPiece.decode"] = true,
  ["attn.text.WordPiece.decode_batch"] = true,
  ["attn.text.WordPiece.encode"] = true,
  ["attn.text.WordPiece.encode_batch"] = true,
  ["attn.text.WordPiece.from_file"] = true,
  ["attn.text.WordPiece.from_pretrained"] = true,
  ["attn.text.WordPiece.new"] = true,
}
