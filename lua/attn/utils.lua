-- SPDX-License-Identifier: MIT

--- attn.utils: torch.utils's path to the data helpers, so a port can keep
-- `torch.utils.data.DataLoader` as `attn.utils.data.DataLoader`.
--   attn.utils.data      is attn.data (TensorDataset, DataLoader, random_split, Subset, ...)
local utils = {}

utils.data = require "attn.data"

return utils
