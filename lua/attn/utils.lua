-- SPDX-License-Identifier: MIT

--- attn.utils: torch.utils's path to the data helpers, so a port can keep
-- `torch.utils.data.DataLoader` as `attn.utils.data.DataLoader`.
local utils = {}

--- attn.data under torch's name: TensorDataset, DataLoader, random_split,
-- Subset, default_collate and the text helpers.
-- @table data
utils.data = require "attn.data"

return utils
