-- SPDX-License-Identifier: MIT

--- attn.viz's head importance: how much each attention head matters to a
-- loss, from head masks (Michel, Levy and Neubig, "Are Sixteen Heads
-- Really Better than One?", 2019).
--
-- Every head h of layer l gets a gate xi (1.0: the head as it is) that
-- multiplies its output inside the model's computation: the head_mask of
-- nn.MultiheadAttention and of attn.bert.BertModel.  The importance of a
-- head is the mean, over batches, of |d loss / d xi| at xi = 1, the
-- first-order estimate of what the loss would change by if the head were
-- removed.  Unimportant heads can then go for good with prune_heads
-- (nn.MultiheadAttention:prune_heads, BertModel:prune_heads).
--
--   local imp = viz.head_importance(function(mask)
--     local out = model(ids, {head_mask = mask})           -- mask [layers, heads]
--     return loss(out)                                      -- a scalar
--   end, n_layers, n_heads)
-- @module attn.viz
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line

local M = {}

local function check_count(v, fn, name)
  local n = type(v) == "number" and math.tointeger(v) or nil
  if n == nil or n < 1 then
    error(("%s: %s must be a positive integer (got %s)"):format(fn, name, tostring(v)), 3)
  end
  return n
end

local function check_flag(v, fn, name, default)
  if v == nil then return default end
  if type(v) ~= "boolean" then error(("%s: %s must be a boolean (got %s)"):format(fn, name, type(v)), 3) end
  return v
end

--- head_importance(fn, n_layers, n_heads [, opts]) -> importance
-- [n_layers, n_heads], raw [n_layers, n_heads]: Michel et al.'s head
-- importance.  For each batch, fn(mask, item, i) runs the model with
-- mask, a fresh [n_layers, n_heads] tensor of ones that requires grad,
-- as its head mask (BertModel's head_mask = mask; a MultiheadAttention
-- layer l takes head_mask = mask:select(1, l)) and returns a scalar
-- loss; its backward gives d loss / d mask.  raw is the mean over the
-- batches of |d loss / d mask|; importance is raw, each layer divided by
-- its L2 norm (normalize, Michel et al.'s layer-wise normalisation), then
-- scaled to 0..1 over all heads (minmax, as their code's global
-- normalisation; every head 0 when all are equal).
--
-- opts:
--   batches    a count n (fn(mask, i, i) for i = 1..n) or a list (fn(mask,
--              batches[i], i)); default 1
--   normalize  true: divide each layer by its L2 norm (+ 1e-20)
--   minmax     false: scale to 0..1 over all heads after that
--
-- fn runs with gradients on; each batch's backward also adds into the
-- model's parameters' .grad, as a training step would (model:zero_grad()
-- after).  Run the model in eval mode to leave dropout out.  Unlike the
-- bertology script of transformers (run_bertology.py), whose head mask
-- keeps its gradient from batch to batch, each batch gets a fresh mask,
-- so raw is exactly the mean of the per-batch |gradients|; the script's
-- division by the token count is left to fn (a mean loss).
-- @tparam function fn (mask [n_layers, n_heads], item, i) -> scalar loss tensor
-- @tparam int n_layers the mask's rows
-- @tparam int n_heads the mask's columns
-- @tparam[opt] int|table batches a count or a list of batches (1); also
-- in an options table, with normalize and minmax
-- @tparam[opt] boolean normalize divide each layer by its L2 norm (true)
-- @tparam[opt] boolean minmax scale to 0..1 over all heads (false)
-- @treturn Tensor importance [n_layers, n_heads]
-- @treturn Tensor raw: the mean |d loss / d mask|, before normalisation
-- @usage
-- local viz, bert = require "attn.viz", require "attn.bert"
-- local model = bert.BertModel({vocab_size = 30, hidden_size = 8, num_hidden_layers = 2, num_attention_heads = 2,
--   intermediate_size = 16, max_position_embeddings = 16})
-- model:eval()
-- local batches = {attn.tensor({{3, 7, 9, 4}}), attn.tensor({{5, 2, 8, 4}})}
-- local imp = viz.head_importance(function(mask, ids)
--   return model(ids, {head_mask = mask}).pooler_output:sum()     -- a scalar loss of the model's output
-- end, 2, 2, {batches = batches})
-- print(imp.shape)                                                -- attn.Size([2, 2]): layers x heads
-- -- one nn.MultiheadAttention: a single layer, row 1 of the mask
-- local mha, x = attn.nn.MultiheadAttention(8, 4), attn.randn(5, 1, 8)
-- local one = viz.head_importance(function(mask)
--   return mha(x, x, x, {head_mask = mask:select(1, 1)}):pow(2):sum()
-- end, 1, 4)
function M.head_importance(fn, n_layers, n_heads, batches, normalize, minmax)
  local name = "head_importance"
  if type(fn) ~= "function" and not (type(fn) == "table" and getmetatable(fn) and getmetatable(fn).__call) then
    error(("%s: fn must be a function (mask, item, i) -> scalar loss (got %s)"):format(name, type(fn)), 2)
  end
  local L = check_count(n_layers, name, "n_layers")
  local H = check_count(n_heads, name, "n_heads")
  if L > (1 << 24) or H > (1 << 24) or L * H > (1 << 24) then
    error(("%s: n_layers x n_heads = %d x %d is too many heads (at most 2^24)"):format(name, L, H), 2)
  end
  normalize = check_flag(normalize, name, "normalize", true)
  minmax = check_flag(minmax, name, "minmax", false)
  local items, n
  if batches == nil then
    n = 1
  elseif type(batches) == "number" then
    n = check_count(batches, name, "batches")
  elseif type(batches) == "table" and not attn.is_tensor(batches) and getmetatable(batches) == nil then
    items, n = batches, #batches
    if n == 0 then error(("%s: batches is an empty list"):format(name), 2) end
  else
    error(("%s: batches must be a count or a list of batches (got %s)"):format(name,
      attn.is_tensor(batches) and "a tensor: put it in a list, {batch}" or type(batches)), 2)
  end
  local sum = attn.zeros(L, H)
  for i = 1, n do
    local mask = attn.ones(L, H):requires_grad_()
    local item = items and items[i] or i
    local loss = attn.enable_grad(function() return fn(mask, item, i) end)
    if not attn.is_tensor(loss) or loss:numel() ~= 1 then
      error(("%s: fn must return a scalar loss tensor (batch %d gave %s)"):format(name, i,
        attn.is_tensor(loss) and ("a tensor of shape [" .. table.concat(loss:shape(), ", ") .. "]")
        or type(loss)), 2)
    end
    if not loss.requires_grad then
      error(("%s: the loss of batch %d does not depend on the mask (run the model with head_mask = mask, "
        .. "with gradients on)"):format(name, i), 2)
    end
    attn.enable_grad(function() loss:reshape({}):backward() end)
    local g = mask.grad
    if g == nil then
      error(("%s: the loss of batch %d does not depend on the mask (run the model with head_mask = mask)")
        :format(name, i), 2)
    end
    sum = sum + g:abs()
  end
  local raw = sum / n
  local imp = raw
  if normalize then
    imp = imp / (imp:pow(2):sum(2, true):sqrt() + 1e-20)
  end
  if minmax then
    local lo, hi = imp:min():item(), imp:max():item()
    imp = hi > lo and (imp - lo) / (hi - lo) or attn.zeros(L, H)
  end
  return imp, raw
end

-- attn's own (no torch counterpart): the options after the required
-- arguments
local signature = require "attn.signature"
signature.declare(M, "viz.", {
  head_importance = "fn, n_layers, n_heads, batches=1, normalize=true, minmax=false"})

return M
