-- SPDX-License-Identifier: MIT

--- attn.nn.parallel: DistributedDataParallel and nn.utils (gradient
-- clipping).  They add to the table of attn.nn.module.
-- @submodule attn.nn
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
local nn = require "attn.nn.module"

local Module = nn.Module
local is_tensor = attn.is_tensor
local U = nn._util
local is_module, type_name = U.is_module, U.type_name

--------------------------------------------------------------------------
-- Data parallelism
-- @section data_parallelism

--- nn.DistributedDataParallel(module [, opts]): torch's DDP over attn.dist.
-- Every rank builds the same model and wraps it; the wrapper
--  - at construction broadcasts rank 0's parameters and buffers, so a
--    different initialisation on the other ranks does not matter;
--  - forward (ddp(...)) broadcasts rank 0's buffers first when
--    opts.broadcast_buffers (default true), then calls module;
--  - during backward, averages the gradients over the ranks: parameters go
--    into buckets of about opts.bucket_mb (default 25) MiB in reverse
--    order, and each parameter's gradient hook (C, attn.dist's reducer; no
--    Lua runs inside backward) starts the non-blocking allreduce of its
--    bucket as soon as the bucket's last gradient is in, while backward
--    goes on with the earlier layers; the last hook waits for every bucket
--    and writes the averages into .grad, so after loss:backward() each
--    rank holds the average gradient and optimizer:step() needs no call.
--    A parameter that got no gradient in a pass (unused in the forward)
--    leaves its bucket waiting: call ddp:sync_gradients() before the step
--    then (the missing gradients count as zeros); otherwise the next
--    forward raises an error, as torch's DDP does;
--  - ddp:no_sync(fn, ...) runs fn with the averaging off (gradient
--    accumulation: the next synchronised backward averages the sum), or
--    `local g <close> = ddp:no_sync()` for a block;
--  - ddp.module is the wrapped model (save its state_dict from rank 0).
-- With one rank (no mpirun) it is a thin wrapper that does nothing extra.
local DDP = Module:extend("DistributedDataParallel")
nn.DistributedDataParallel = DDP

--- init(module [, opts]): wraps module (see above); opts: bucket_mb (a
-- positive number, default 25), broadcast_buffers (default true).  Calls
-- attn.dist.init() and, with more than one rank, broadcasts rank 0's
-- parameters and buffers.
-- @usage
-- local model = nn.Linear(4, 2)
-- local ddp = nn.DistributedDataParallel(model, {bucket_mb = 25})   -- one rank without mpirun
-- local loss = ddp(attn.randn(8, 4)):pow(2):mean()
-- loss:backward()                                 -- gradients averaged over the ranks
-- print(ddp.module == model, model.weight.grad.shape)
function DDP:init(module, opts)
  if opts == nil and type(module) == "table" and getmetatable(module) == nil and module.module ~= nil then
    opts = {} -- DistributedDataParallel({module = m, ...}): torch's keywords, module among them
    for k, v in pairs(module) do if k ~= "module" then opts[k] = v end end
    module = module.module
  end
  if not is_module(module) then
    error("DistributedDataParallel: expected a module, got " .. type_name(module), 3)
  end
  if opts == nil then opts = {} end
  if type(opts) ~= "table" or is_tensor(opts) then
    error("DistributedDataParallel: opts must be a table, got " .. type_name(opts), 3)
  end
  for k, v in pairs(opts) do
    if k == "bucket_mb" then
      if type(v) ~= "number" or not (v > 0) or v == math.huge then -- luacheck: ignore 581 (NaN must fail)
        error("DistributedDataParallel: bucket_mb must be a positive finite number, got " .. tostring(v), 3)
      end
    elseif k == "broadcast_buffers" then
      if type(v) ~= "boolean" then
        error("DistributedDataParallel: broadcast_buffers must be a boolean, got " .. type_name(v), 3)
      end
    else
      error(attn._misuse.unknown_option("DistributedDataParallel", k, {"broadcast_buffers", "bucket_mb"}), 3)
    end
  end
  local dist = require "attn.dist"
  local bucket_mb = opts.bucket_mb or 25
  self.module = module
  self.broadcast_buffers = opts.broadcast_buffers ~= false
  self.bucket_mb = bucket_mb
  dist.init()
  local params = {}
  for _, p in ipairs(module:parameters()) do
    if p.requires_grad then params[#params + 1] = p end
  end
  if dist.size() > 1 then
    attn.no_grad(function()
      for _, p in ipairs(module:parameters()) do dist.broadcast(p, 0) end
      for _, b in ipairs(module:buffers()) do dist.broadcast(b, 0) end
    end)
  end
  self._reducer = dist._reducer(params, math.max(1, math.floor(math.min(bucket_mb, 2 ^ 40) * 1024 * 1024)))
end

--- forward(...): broadcasts rank 0's buffers (with broadcast_buffers and
-- more than one rank), then returns self.module(...).  Raises when the last
-- backward left a bucket open (call ddp:sync_gradients() in such steps).
function DDP:forward(...)
  local dist = require "attn.dist"
  if self._reducer:pending() then
    error("DistributedDataParallel: the previous backward did not give every parameter a gradient (parameters "
      .. "unused in the forward?), so its averaging is still open; call ddp:sync_gradients() after backward "
      .. "in such steps", 2)
  end
  if self.broadcast_buffers and dist.size() > 1 then
    local bufs = self.module:buffers()
    if #bufs > 0 then
      attn.no_grad(function()
        for _, b in ipairs(bufs) do dist.broadcast(b, 0) end
      end)
    end
  end
  return self.module(...)
end

--- ddp:sync_gradients(): completes the gradient averaging of the last
-- backward (only needed when some parameter got no gradient).
-- @usage
-- local model = nn.ModuleDict({{"used", nn.Linear(2, 2)}, {"unused", nn.Linear(2, 2)}})
-- local ddp = nn.DistributedDataParallel(model)
-- model.used(attn.randn(3, 2)):sum():backward()    -- "unused" got no gradient
-- ddp:sync_gradients()                             -- complete the averaging before the step
-- print(model.used.weight.grad.shape)              -- attn.Size([2, 2]), averaged over the ranks
function DDP:sync_gradients()
  self._reducer:finish()
end

--- ddp:bucket_count(): how many gradient buckets the reducer made.
-- @usage
-- local ddp = nn.DistributedDataParallel(nn.Linear(4, 2))
-- print(ddp:bucket_count())                       -- how many gradient buckets
function DDP:bucket_count() return self._reducer:buckets() end

--- ddp:no_sync([fn, ...]): see nn.DistributedDataParallel.
-- @usage
-- local ddp = nn.DistributedDataParallel(nn.Linear(4, 2))
-- local x = attn.ones(2, 4)
-- ddp:no_sync(function()                          -- accumulate without averaging
--   ddp(x):sum():backward()
-- end)
-- ddp(x):sum():backward()                         -- this backward averages the sum
-- print(ddp.module.bias.grad)                     -- tensor([4., 4.]): both passes' gradients
function DDP:no_sync(fn, ...)
  local r = self._reducer
  if fn ~= nil and type(fn) ~= "function" then
    error("DistributedDataParallel:no_sync: expected a function or nothing, got " .. type_name(fn), 2)
  end
  if fn == nil then
    r:enable(false)
    return setmetatable({}, {__close = function() r:enable(true) end})
  end
  r:enable(false)
  local res = table.pack(pcall(fn, ...))
  r:enable(true)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

--- extra_repr(): "bucket_mb=25, broadcast_buffers=true".
function DDP:extra_repr()
  return ("bucket_mb=%g, broadcast_buffers=%s"):format(self.bucket_mb, tostring(self.broadcast_buffers))
end

--- nn.utils: torch.nn.utils' gradient clipping (implemented in attn.optim).
nn.utils = {
  clip_grad_norm_ = function(...) return require("attn.optim").clip_grad_norm_(...) end,
  clip_grad_value_ = function(...) return require("attn.optim").clip_grad_value_(...) end,
}

--- utils.clip_grad_norm_(parameters, max_norm [, norm_type = 2 [,
-- error_if_nonfinite = false]]): attn.optim.clip_grad_norm_, scales every
-- .grad in place so that their total norm is at most max_norm; returns the
-- total norm (0-d tensor).  torch.nn.utils.clip_grad_norm_.
-- @usage
-- local model = nn.Linear(4, 1)
-- model(attn.randn(8, 4)):sum():backward()
-- local total = nn.utils.clip_grad_norm_(model:parameters(), 0.5)   -- the norm before clipping
-- print(total)                                     -- tensor(10.3219); the grads' total norm is now 0.5
-- @function utils.clip_grad_norm_

--- utils.clip_grad_value_(parameters, clip_value): attn.optim.clip_grad_value_,
-- clamps every .grad in place to [-clip_value, clip_value].
-- torch.nn.utils.clip_grad_value_.
-- @usage
-- local w = nn.Parameter(attn.ones(2))
-- w:mul(3):sum():backward()
-- nn.utils.clip_grad_value_({w}, 1.0)
-- print(w.grad)                                     -- tensor([1., 1.]): 3 clamped to 1
-- @function utils.clip_grad_value_

-- torch's signatures (attn/signature.lua); DDP reads its options itself
-- (attn's bucket_mb, torch's bucket_cap_mb; torch's device_ids and
-- process_group have no meaning here)
local signature = require "attn.signature"
signature.declare(DDP, "nn.DistributedDataParallel.", {
  init = "native: self, module, *, broadcast_buffers=true, bucket_mb=25",
  forward = false, sync_gradients = false, bucket_count = false, no_sync = false, extra_repr = false,
})
signature.declare(nn.utils, "nn.utils.", {
  clip_grad_norm_ = "native: parameters, max_norm, norm_type=2.0, error_if_nonfinite=false",
  clip_grad_value_ = false,
})

return nn
