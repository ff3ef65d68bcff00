-- SPDX-License-Identifier: MIT

--- attn.nn.layers: the layers of attn.nn that need no other attn file:
-- Linear, Embedding, LayerNorm, Dropout, the activations and the recurrent
-- cells.  They add to the table of attn.nn.module.
-- @submodule attn.nn
local attn = require "attn.base"
local error = require("attn.core")._error -- raises at the user's line (the first caller outside attn)
local init = require "attn.nn_init"
local nn = require "attn.nn.module"
local signature = require "attn.signature"

local Module = nn.Module
local is_tensor = attn.is_tensor
local pyrepr = nn._pyrepr
local U = nn._util
local is_module, type_name, opt_bool, fmt_shape = U.is_module, U.type_name, U.opt_bool, U.fmt_shape

local function pybool(b) return b and "True" or "False" end

--------------------------------------------------------------------------
-- Helpers for the layers
-- @section helpers_for_the

local function check_size(v, fn, name)
  -- math.tointeger refuses inf, NaN and floats past 2^63 as well as fractions
  local i = type(v) == "number" and math.tointeger(v)
  if not i then error(("%s: %s must be an integer (got %s)"):format(fn, name, tostring(v)), 3) end
  if i < 0 then error(("%s: %s must be non-negative (got %s)"):format(fn, name, tostring(v)), 3) end
  -- no tensor holds more than 2^56 elements; refusing larger sizes here
  -- also keeps products such as 4 * hidden_size from wrapping around
  if i > (1 << 56) then error(("%s: %s = %d is too large"):format(fn, name, i), 3) end
  return i
end

-- A tensor input of a layer's forward.
local function check_input(x, fn)
  if not is_tensor(x) then error(("%s: input must be a tensor (got %s)"):format(fn, type_name(x)), 3) end
  return x
end

local function check_options(opts, fn, known) return attn._misuse.check_options(fn, opts, known) end

-- x [..., in] @ w[out, in]^T + b[out] (b may be nil): one C op, one node.
local linear = attn.linear

--------------------------------------------------------------------------
-- Linear
-- @section linear

local Linear = Module:extend("Linear")
nn.Linear = Linear

--- Linear(in_features, out_features [, bias = true]): y = x W^T + b with
-- W [out, in] and b [out]; torch's init (kaiming_uniform_(a = sqrt(5)) on
-- W, then b ~ U(-1/sqrt(in), 1/sqrt(in))).
-- @usage
-- local lin = nn.Linear(4, 2)                           -- weight [2, 4], bias [2]; torch's init
-- print(lin(attn.randn(3, 4)).shape, lin)               -- attn.Size([3, 2]) Linear(in_features=4, ...)
function Linear:init(in_features, out_features, bias)
  self.in_features = check_size(in_features, "Linear", "in_features")
  self.out_features = check_size(out_features, "Linear", "out_features")
  bias = opt_bool(bias, true, "Linear", "bias")
  self.weight = nn.Parameter(attn.empty(self.out_features, self.in_features))
  if bias then
    self.bias = nn.Parameter(attn.empty(self.out_features))
  else
    self:register_parameter("bias", nil)
  end
  self:reset_parameters()
end

--- reset_parameters(): redraws weight ~ kaiming_uniform_(a = sqrt(5)) and
-- bias ~ U(-1/sqrt(in), 1/sqrt(in)) in place, as torch.nn.Linear does.
function Linear:reset_parameters()
  init.kaiming_uniform_(self.weight, math.sqrt(5))
  if self.bias ~= nil then
    local fan_in = init.calculate_fan_in_and_fan_out(self.weight)
    local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
    init.uniform_(self.bias, -bound, bound)
  end
end

--- forward(x): x [..., in_features] -> [..., out_features], x W^T + b
-- (attn.linear: one op).  torch.nn.Linear.forward.
-- @tparam Tensor x float32 [..., in_features]
-- @treturn Tensor [..., out_features]
function Linear:forward(x)
  return linear(x, self.weight, self.bias)
end

--- extra_repr(): "in_features=I, out_features=O, bias=True|False".
function Linear:extra_repr()
  return ("in_features=%d, out_features=%d, bias=%s"):format(self.in_features, self.out_features,
    pybool(self.bias ~= nil))
end

-- torch's signatures (attn/signature.lua: a trailing options table)
signature.declare(Linear, "nn.Linear.", {
  init = "self, in_features, out_features, bias=true",
  forward = false, reset_parameters = false, extra_repr = false,
})

--------------------------------------------------------------------------
-- Embedding
-- @section embedding

local Embedding = Module:extend("Embedding")
nn.Embedding = Embedding


--- Embedding(num_embeddings, embedding_dim [, {padding_idx=, max_norm=,
-- norm_type = 2}]): a lookup table, weight ~ N(0, 1) with the padding row
-- zeroed.  Ids and padding_idx are 1-based (a negative padding_idx counts
-- from the end).  With max_norm, the rows looked up are rescaled in place
-- to norm at most max_norm before the lookup (torch's embedding_renorm_).
-- @usage
-- local emb = nn.Embedding(100, 16, {padding_idx = 1})   -- 100 ids, 16 features; id 1 is padding
-- local ids = attn.tensor({{5, 9, 1}})                  -- 1-based ids
-- print(emb(ids).shape)                                 -- attn.Size([1, 3, 16])
function Embedding:init(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                        weight)
  -- torch's order (a trailing options table is expanded into it, attn/signature.lua)
  local opts = {padding_idx = padding_idx, max_norm = max_norm, norm_type = norm_type, _weight = weight}
  opt_bool(sparse, false, "Embedding", "sparse")
  opt_bool(scale_grad_by_freq, false, "Embedding", "scale_grad_by_freq")
  if sparse or scale_grad_by_freq then
    error("Embedding: sparse gradients and scale_grad_by_freq are not supported (attn's gradients are dense)", 2)
  end
  self.num_embeddings = check_size(num_embeddings, "Embedding", "num_embeddings")
  self.embedding_dim = check_size(embedding_dim, "Embedding", "embedding_dim")
  local pad = opts.padding_idx
  if pad ~= nil then
    pad = type(pad) == "number" and math.tointeger(pad) or pad
    if math.type(pad) ~= "integer" or pad == 0 or pad > self.num_embeddings or pad < -self.num_embeddings then
      error(("Embedding: padding_idx must be within 1..%d or -%d..-1 (got %s)%s")
        :format(self.num_embeddings, self.num_embeddings, tostring(pad),
          pad == 0 and " (ids are 1-based: torch's padding_idx=0 is padding_idx=1 here)" or ""), 2)
    end
    if pad < 0 then pad = self.num_embeddings + 1 + pad end
  end
  self.padding_idx = pad
  if opts.max_norm ~= nil and type(opts.max_norm) ~= "number" then
    error("Embedding: max_norm must be a number", 2)
  end
  if opts.norm_type ~= nil and type(opts.norm_type) ~= "number" then
    error("Embedding: norm_type must be a number", 2)
  end
  if opts._weight ~= nil and not is_tensor(opts._weight) then
    error(("Embedding: _weight must be a tensor (got %s)"):format(type_name(opts._weight)), 2)
  end
  self.max_norm = opts.max_norm
  self.norm_type = opts.norm_type or 2.0
  if opts._weight ~= nil then
    local s = opts._weight:shape()
    if #s ~= 2 or s[1] ~= self.num_embeddings or s[2] ~= self.embedding_dim then
      error(("Embedding: _weight has shape %s, expected [%d, %d]")
        :format(fmt_shape(s), self.num_embeddings, self.embedding_dim), 2)
    end
    self.weight = nn.is_parameter(opts._weight) and opts._weight or nn.Parameter(opts._weight)
  else
    self.weight = nn.Parameter(attn.empty(self.num_embeddings, self.embedding_dim))
    self:reset_parameters()
  end
end

--- reset_parameters(): weight ~ N(0, 1), then the padding_idx row (if
-- any) zeroed, as torch.nn.Embedding.
function Embedding:reset_parameters()
  init.normal_(self.weight)
  if self.padding_idx ~= nil then
    local guard <close> = attn.no_grad()
    self.weight:select(1, self.padding_idx):fill_(0)
  end
end

--- Embedding.from_pretrained(weight [, {freeze = true, padding_idx=,
-- max_norm=, norm_type=}]): an Embedding using weight's storage.
-- @usage
-- local vectors = attn.randn(5, 3)
-- local emb = nn.Embedding.from_pretrained(vectors)     -- frozen (freeze = true)
-- print(emb(attn.tensor({2})), emb.weight.requires_grad)
function Embedding.from_pretrained(weight, freeze, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
  local opts = {freeze = freeze, padding_idx = padding_idx, max_norm = max_norm, norm_type = norm_type}
  if sparse or scale_grad_by_freq then
    error("Embedding.from_pretrained: sparse gradients and scale_grad_by_freq are not supported", 2)
  end
  if not is_tensor(weight) or weight:dim() ~= 2 then
    error("Embedding.from_pretrained: embeddings parameter is expected to be 2-dimensional", 2)
  end
  opt_bool(opts.freeze, true, "Embedding.from_pretrained", "freeze")
  local s = weight:shape()
  local m = Embedding(s[1], s[2], {padding_idx = opts.padding_idx, max_norm = opts.max_norm,
    norm_type = opts.norm_type, _weight = weight})
  m.weight.requires_grad = opts.freeze == false
  return m
end

-- Flat list of the 1-based ids in a tensor or nested table.
local function flat_ids(ids)
  local t = is_tensor(ids) and ids or attn.tensor(ids)
  local v = t:reshape(t:numel()):totable()
  if type(v) == "number" then v = {v} end
  return v
end

-- torch's embedding_renorm_: each distinct row looked up whose norm
-- exceeds max_norm is scaled by max_norm / (norm + 1e-7), in place.
local function embedding_renorm_(weight, ids, max_norm, norm_type)
  local guard <close> = attn.no_grad()
  local n = weight:shape()[1]
  local seen = {}
  for _, id in ipairs(flat_ids(ids)) do
    if math.type(id) ~= "integer" and id ~= math.floor(id) then
      error(("Embedding: ids must be integers (got %s)"):format(tostring(id)), 3)
    end
    if id < 1 or id > n then
      error(("Embedding: id %s out of range 1..%d"):format(tostring(id), n), 3)
    end
    if not seen[id] then
      seen[id] = true
      local row = weight:select(1, math.tointeger(id))
      local norm = row:norm(norm_type):item()
      if norm > max_norm then row:mul_(max_norm / (norm + 1e-7)) end
    end
  end
end

--- forward(ids): the weight rows of 1-based ids, shape ids' shape followed
-- by embedding_dim (attn.embedding).  With max_norm, the rows looked up are
-- first renormalised in place as torch does.  torch: ids + 1.
-- @param ids int64 (or float32 integer) tensor or Lua list of ids in
--   1..num_embeddings
-- @treturn Tensor [..., embedding_dim]
function Embedding:forward(ids)
  -- options are plain attributes; reading _attrs directly skips the class
  -- lookup that an unset (nil) option would otherwise walk
  local a = self._attrs
  if a.max_norm ~= nil then embedding_renorm_(self.weight, ids, a.max_norm, a.norm_type) end
  return attn.embedding(self.weight, ids, a.padding_idx)
end

--- extra_repr(): "num_embeddings, embedding_dim" then padding_idx (1-based),
-- max_norm and norm_type where set, as torch prints them.
function Embedding:extra_repr()
  local s = ("%d, %d"):format(self.num_embeddings, self.embedding_dim)
  if self.padding_idx ~= nil then s = s .. ", padding_idx=" .. self.padding_idx end
  if self.max_norm ~= nil then s = s .. ", max_norm=" .. pyrepr(self.max_norm) end
  if self.norm_type ~= 2 then s = s .. ", norm_type=" .. pyrepr(self.norm_type) end
  return s
end

--------------------------------------------------------------------------
-- LayerNorm
-- @section layernorm

local LayerNorm = Module:extend("LayerNorm")
nn.LayerNorm = LayerNorm

--- LayerNorm(normalized_shape [, eps = 1e-5 [, elementwise_affine = true]])
-- or LayerNorm(shape, {eps=, elementwise_affine=}): normalises over the
-- last #normalized_shape dims with the biased variance, then scales by
-- weight (ones) and shifts by bias (zeros).
-- @usage
-- local ln = nn.LayerNorm(16)                           -- over the last dim; weight and bias learned
-- local y = ln(attn.randn(2, 5, 16))
-- print(y.shape, #ln:parameters())                      -- attn.Size([2, 5, 16]) 2
function LayerNorm:init(normalized_shape, eps, elementwise_affine)
  if type(eps) == "table" then
    local o = check_options(eps, "LayerNorm", {eps = true, elementwise_affine = true})
    eps, elementwise_affine = o.eps, o.elementwise_affine
  end
  local shape = type(normalized_shape) == "table" and normalized_shape or {normalized_shape}
  if type(shape) ~= "table" or #shape == 0 then
    error("LayerNorm: normalized_shape must be a size or a non-empty list of sizes", 2)
  end
  local norm_shape = {}
  for i, v in ipairs(shape) do norm_shape[i] = check_size(v, "LayerNorm", "normalized_shape") end
  self.normalized_shape = norm_shape
  if eps ~= nil and (type(eps) ~= "number" or not (eps >= 0)) then -- luacheck: ignore 581 (NaN must fail)
    error(("LayerNorm: eps must be a non-negative number (got %s)"):format(tostring(eps)), 2)
  end
  self.eps = eps or 1e-5
  self.elementwise_affine = opt_bool(elementwise_affine, true, "LayerNorm", "elementwise_affine")
  if self.elementwise_affine then
    self.weight = nn.Parameter(attn.empty(norm_shape))
    self.bias = nn.Parameter(attn.empty(norm_shape))
    self:reset_parameters()
  else
    self:register_parameter("weight", nil)
    self:register_parameter("bias", nil)
  end
end

--- reset_parameters(): weight = 1 and bias = 0 (with elementwise_affine).
function LayerNorm:reset_parameters()
  if self.elementwise_affine then
    init.ones_(self.weight)
    init.zeros_(self.bias)
  end
end

--- forward(x): normalises over the trailing dims named by normalized_shape
-- (biased variance, eps added), then y * weight + bias.  x [..., *normalized_shape].
-- torch.nn.LayerNorm.forward.
-- @tparam Tensor x
-- @treturn Tensor of x's shape
function LayerNorm:forward(x)
  check_input(x, "LayerNorm")
  local ns = self.normalized_shape
  local shape = x:shape()
  local k = #ns
  local ok = #shape >= k
  for i = 1, k do ok = ok and shape[#shape - k + i] == ns[i] end
  if not ok then
    error(("LayerNorm: normalized_shape %s does not match the trailing dims of the input %s")
      :format(fmt_shape(ns), fmt_shape(shape)), 2)
  end
  -- one fused op forward and backward (src/core/norm.c)
  return require("attn.core")._layer_norm(x, k, self.weight, self.bias, self.eps)
end

local function pytuple(t)
  local parts = {}
  for i, v in ipairs(t) do parts[i] = pyrepr(v) end
  if #parts == 1 then return "(" .. parts[1] .. ",)" end
  return "(" .. table.concat(parts, ", ") .. ")"
end

--- extra_repr(): "(normalized_shape,), eps=1e-05, elementwise_affine=True".
function LayerNorm:extra_repr()
  return ("%s, eps=%s, elementwise_affine=%s"):format(pytuple(self.normalized_shape), pyrepr(self.eps),
    pybool(self.elementwise_affine))
end

--------------------------------------------------------------------------
-- Dropout
-- @section dropout

local Dropout = Module:extend("Dropout")
nn.Dropout = Dropout

--- Dropout([p = 0.5 [, inplace = false]]): in training, zeroes each
-- element with probability p and scales the rest by 1 / (1 - p); the
-- identity in eval mode.  The mask is drawn as torch 1.13 does on the CPU
-- (noise = empty_like(x):bernoulli_(1 - p) / (1 - p); x * noise), so the
-- same seed gives torch's output.
-- @usage
-- local drop = nn.Dropout(0.1)
-- local y = drop(attn.ones(4, 4))                 -- scaled by 1/0.9 where kept
-- drop:eval()
-- print(attn.equal(drop(attn.ones(2)), attn.ones(2)))   -- true: off in eval mode
function Dropout:init(p, inplace)
  if p == nil then p = 0.5 end
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    error(("Dropout: dropout probability has to be between 0 and 1, but got %s"):format(tostring(p)), 2)
  end
  self.p = p
  self.inplace = opt_bool(inplace, false, "Dropout", "inplace")
end

local function dropout(x, p, training, inplace)
  if p == 0 or not training or x:numel() == 0 then return x end
  if p == 1 then
    if inplace then return x:mul_(0) end
    return x * 0
  end
  local noise = attn.empty_like(x):bernoulli_(1 - p)
  noise:div_(1 - p)
  if inplace then return x:mul_(noise) end
  return x * noise
end
nn._dropout = dropout

--- forward(x): in training mode zeroes elements with probability p and
-- scales the rest by 1 / (1 - p) (torch's draws); in eval mode returns x.
-- With inplace, x itself is changed and returned.
-- @tparam Tensor x any shape
-- @treturn Tensor
function Dropout:forward(x)
  check_input(x, "Dropout")
  return dropout(x, self.p, self.training, self.inplace)
end

--- extra_repr(): "p=0.5, inplace=False".
function Dropout:extra_repr()
  return ("p=%s, inplace=%s"):format(pyrepr(self.p), pybool(self.inplace))
end

--------------------------------------------------------------------------
-- Activations
-- @section activations

local function activation(name, fn, extra)
  local cls = Module:extend(name)
  cls.forward = function(self, x) return fn(self, check_input(x, name)) end
  if extra then cls.extra_repr = extra end
  nn[name] = cls
  return cls
end

--- nn.ReLU([inplace = false]): max(x, 0) elementwise.  torch.nn.ReLU.
-- @table ReLU
activation("ReLU", function(self, x)
  if self.inplace then return x:relu_() end
  return x:relu()
end, function(self) return self.inplace and "inplace=True" or "" end)
--- ReLU:init([inplace = false]): stores inplace (a boolean).
-- @usage
-- local act = nn.ReLU()
-- print(act(attn.tensor({-1.0, 2.0})))                  -- tensor([0., 2.])
function nn.ReLU:init(inplace) self.inplace = opt_bool(inplace, false, "ReLU", "inplace") end

--- nn.GELU([approximate = "none"]): x * Phi(x) elementwise, with Phi the
-- exact normal CDF ("none", erf) or its "tanh" approximation.  torch.nn.GELU.
-- @table GELU
activation("GELU", function(self, x) return attn.gelu(x, self.approximate) end,
  function(self) return ("approximate='%s'"):format(self.approximate) end)
--- GELU:init([approximate = "none"]): stores approximate ("none" or "tanh";
-- anything else raises).
-- @usage
-- local act = nn.GELU("tanh")                           -- or nn.GELU() for the exact form
-- print(act(attn.tensor({-1.0, 0.0, 1.0})))              -- tensor([-0.1588,  0.0000,  0.8412])
function nn.GELU:init(approximate)
  if approximate == nil then approximate = "none" end
  if approximate ~= "none" and approximate ~= "tanh" then
    error(("GELU: approximate must be 'none' or 'tanh' (got %s)"):format(tostring(approximate)), 2)
  end
  self.approximate = approximate
end

activation("Tanh", function(_, x) return x:tanh() end)
activation("Sigmoid", function(_, x) return x:sigmoid() end)

local function dim_init(name)
  return function(self, dim)
    dim = type(dim) == "number" and math.tointeger(dim) or dim
    if math.type(dim) ~= "integer" then
      error(("%s: dim must be an integer (1-based, negative from the end; got %s)"):format(name, tostring(dim)), 3)
    end
    self.dim = dim
  end
end
local function dim_repr(self) return "dim=" .. self.dim end

--- nn.Softmax(dim), nn.LogSoftmax(dim): softmax / log_softmax along dim,
-- 1-based (negative from the end).  torch.nn.Softmax(dim + 1) for dim >= 0.
-- @table Softmax
activation("Softmax", function(self, x) return x:softmax(self.dim) end, dim_repr)
nn.Softmax.init = dim_init("Softmax")
activation("LogSoftmax", function(self, x) return x:log_softmax(self.dim) end, dim_repr)
nn.LogSoftmax.init = dim_init("LogSoftmax")

--- ReLU:forward(x): x:relu(), or x:relu_() (x changed and returned) with
-- inplace.
-- @tparam Tensor x any shape
-- @treturn Tensor of x's shape
-- @function ReLU:forward

--- ReLU:extra_repr(): "inplace=True" or "".
-- @function ReLU:extra_repr

--- GELU:forward(x): attn.gelu(x, self.approximate).
-- @tparam Tensor x any shape
-- @treturn Tensor of x's shape
-- @function GELU:forward

--- GELU:extra_repr(): "approximate='none'" (or 'tanh').
-- @function GELU:extra_repr

--- nn.Tanh(): x:tanh() as a module; Tanh:forward(x) computes it.
-- torch.nn.Tanh.
-- @tparam Tensor x any shape
-- @treturn Tensor of x's shape
-- @usage
-- print(nn.Tanh()(attn.tensor({0.0, 1.0})))              -- tensor([0.0000, 0.7616])
-- @function Tanh:forward

--- nn.Sigmoid(): x:sigmoid() as a module; Sigmoid:forward(x) computes it.
-- torch.nn.Sigmoid.
-- @tparam Tensor x any shape
-- @treturn Tensor of x's shape
-- @usage
-- local m = nn.Sigmoid()
-- print(m(attn.tensor({0.0})))                          -- tensor([0.5000])
-- @function Sigmoid:forward

--- Softmax:init(dim): stores dim, an integer (1-based, negative from the
-- end); anything else raises.
-- @usage
-- local m = nn.Softmax(-1)
-- print(m(attn.tensor({{1.0, 2.0, 3.0}})))               -- tensor([[0.0900, 0.2447, 0.6652]])
-- @function Softmax:init

--- Softmax:forward(x): x:softmax(self.dim).
-- @tparam Tensor x
-- @treturn Tensor of x's shape, summing to 1 along dim
-- @function Softmax:forward

--- Softmax:extra_repr(): "dim=D" with the 1-based dim as given.
-- @function Softmax:extra_repr

--- LogSoftmax:init(dim): stores dim, as Softmax:init.
-- @usage
-- local m = nn.LogSoftmax(-1)
-- print(m(attn.randn(2, 3)):exp():sum(-1))               -- tensor([1., 1.]): log-probabilities
-- @function LogSoftmax:init

--- LogSoftmax:forward(x): x:log_softmax(self.dim).
-- @tparam Tensor x
-- @treturn Tensor of x's shape
-- @function LogSoftmax:forward

--- LogSoftmax:extra_repr(): "dim=D" with the 1-based dim as given.
-- @function LogSoftmax:extra_repr

--- Identity(...): returns its input (whatever it is); arguments are
-- ignored like torch's.
nn.Identity = Module:extend("Identity")
--- Identity:forward(x): returns x itself (any value).
-- @usage
-- local id = nn.Identity()
-- local x = attn.ones(2)
-- print(id(x) == x)                                     -- true: returns its input
function nn.Identity.forward(_, x) return x end

--------------------------------------------------------------------------
-- Recurrent cells
-- @section recurrent_cells

local function cell_init(self, name, input_size, hidden_size, bias, gates)
  self.input_size = check_size(input_size, name, "input_size")
  self.hidden_size = check_size(hidden_size, name, "hidden_size")
  self.bias = opt_bool(bias, true, name, "bias")
  self.weight_ih = nn.Parameter(attn.empty(gates * self.hidden_size, self.input_size))
  self.weight_hh = nn.Parameter(attn.empty(gates * self.hidden_size, self.hidden_size))
  if self.bias then
    self.bias_ih = nn.Parameter(attn.empty(gates * self.hidden_size))
    self.bias_hh = nn.Parameter(attn.empty(gates * self.hidden_size))
  else
    self:register_parameter("bias_ih", nil)
    self:register_parameter("bias_hh", nil)
  end
  self:reset_parameters()
end

-- Every parameter ~ U(-1/sqrt(hidden), 1/sqrt(hidden)), in registration order.
local function cell_reset(self)
  local stdv = self.hidden_size > 0 and 1.0 / math.sqrt(self.hidden_size) or 0
  for _, p in ipairs(self:parameters()) do init.uniform_(p, -stdv, stdv) end
end

--- GRUCell:reset_parameters(): every parameter ~ U(-1/sqrt(hidden_size),
-- 1/sqrt(hidden_size)) in registration order, as torch.nn.GRUCell.
-- @function GRUCell:reset_parameters

--- LSTMCell:reset_parameters(): every parameter ~ U(-1/sqrt(hidden_size),
-- 1/sqrt(hidden_size)) in registration order, as torch.nn.LSTMCell.
-- @function LSTMCell:reset_parameters

--- GRUCell:extra_repr(): "input_size, hidden_size" and ", bias=False"
-- without biases.
-- @function GRUCell:extra_repr

--- LSTMCell:extra_repr(): "input_size, hidden_size" and ", bias=False"
-- without biases.
-- @function LSTMCell:extra_repr

local function cell_repr(self)
  local s = ("%d, %d"):format(self.input_size, self.hidden_size)
  if not self.bias then s = s .. ", bias=False" end
  return s
end

-- Checks input [B, in] or [in] and a state [B, hidden] or [hidden];
-- returns the batched input, whether it was batched, and a checker for
-- states (nil gives zeros).
local function cell_inputs(self, name, x)
  if not is_tensor(x) then error(("%s: input must be a tensor"):format(name), 3) end
  local d = x:dim()
  if d ~= 1 and d ~= 2 then
    error(("%s: Expected input to be 1-D or 2-D but received %d-D tensor"):format(name, d), 3)
  end
  local shape = x:shape()
  if shape[d] ~= self.input_size then
    error(("%s: input has inconsistent input_size: got %d expected %d"):format(name, shape[d], self.input_size), 3)
  end
  local batched = d == 2
  if not batched then x = x:unsqueeze(1) end
  local batch = x:shape()[1]
  local function state(h, what)
    if h == nil then return attn.zeros(batch, self.hidden_size) end
    if not is_tensor(h) then error(("%s: %s must be a tensor"):format(name, what), 4) end
    if h:dim() ~= d then
      error(("%s: Expected %s to be %d-D for a %d-D input but received %d-D tensor")
        :format(name, what, d, d, h:dim()), 4)
    end
    if not batched then h = h:unsqueeze(1) end
    local hs = h:shape()
    if hs[1] ~= batch or hs[2] ~= self.hidden_size then
      error(("%s: %s has shape %s, expected %s"):format(name, what, fmt_shape(hs),
        fmt_shape({batch, self.hidden_size})), 4)
    end
    return h
  end
  return x, batched, state
end

-- nn[name], a cell class with `gates` stacked gates: init(input_size,
-- hidden_size [, bias]) by cell_init; reset_parameters and extra_repr shared
local function cell_class(name, gates)
  local C = Module:extend(name)
  nn[name] = C
  function C:init(input_size, hidden_size, bias)
    cell_init(self, name, input_size, hidden_size, bias, gates)
  end
  C.reset_parameters = cell_reset
  C.extra_repr = cell_repr
  return C
end

--- GRUCell(input_size, hidden_size [, bias = true]); cell(x [, h]) -> h'
-- with x [B, in] or [in], h [B, hidden] or [hidden] (zeros if nil):
--   r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)
--   z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
--   n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
--   h' = (1 - z) * n + z * h          (gates stacked r, z, n like torch)
-- @usage
-- local cell = nn.GRUCell(4, 8)
-- local h = attn.zeros(2, 8)
-- for _ = 1, 3 do h = cell(attn.randn(2, 4), h) end     -- one step at a time
-- print(h.shape)                                        -- attn.Size([2, 8])
-- @function GRUCell:init
local GRUCell = cell_class("GRUCell", 3)

--- forward(x [, h]): one GRU step (the formulas above).  torch.nn.GRUCell.
-- @tparam Tensor x [B, input_size] or [input_size]
-- @tparam[opt] Tensor hx h, [B, hidden_size] or [hidden_size]; zeros if nil
-- @treturn Tensor h' of h's shape
function GRUCell:forward(x, hx)
  local batched, state
  x, batched, state = cell_inputs(self, "GRUCell", x)
  local h = state(hx, "hx")
  local gi_r, gi_z, gi_n = linear(x, self.weight_ih, self.bias_ih):chunk(3, 2)
  local gh_r, gh_z, gh_n = linear(h, self.weight_hh, self.bias_hh):chunk(3, 2)
  local r = (gh_r + gi_r):sigmoid()
  local z = (gh_z + gi_z):sigmoid()
  local n = (gi_n + gh_n * r):tanh()
  local hy = (h - n) * z + n -- torch's form of (1 - z) * n + z * h
  if not batched then hy = hy:squeeze(1) end
  return hy
end

--- LSTMCell(input_size, hidden_size [, bias = true]);
-- cell(x [, {h, c}]) -> h', c' (zeros for a nil state), gates stacked
-- i, f, g, o like torch:
--   c' = sigmoid(f) * c + sigmoid(i) * tanh(g);  h' = sigmoid(o) * tanh(c')
-- @usage
-- local cell = nn.LSTMCell(4, 8)
-- local h, c = attn.zeros(2, 8), attn.zeros(2, 8)
-- h, c = cell(attn.randn(2, 4), {h, c})                 -- returns the new h and c
-- print(h.shape, c.shape)                              -- attn.Size([2, 8]) attn.Size([2, 8])
-- @function LSTMCell:init
local LSTMCell = cell_class("LSTMCell", 4)

--- forward(x [, {h, c}]): one LSTM step (the formulas above).
-- torch.nn.LSTMCell (which takes and returns the tuple (h, c)).
-- @tparam Tensor x [B, input_size] or [input_size]
-- @tparam[opt] table hx {h, c}, each [B, hidden_size] or [hidden_size]; zeros if nil
-- @treturn Tensor h'
-- @treturn Tensor c'
function LSTMCell:forward(x, hx)
  local batched, state
  x, batched, state = cell_inputs(self, "LSTMCell", x)
  if hx ~= nil and (type(hx) ~= "table" or is_module(hx)) then
    error("LSTMCell: the state must be a table {h, c} or nil", 2)
  end
  local h = state(hx and hx[1], "hx[1] (h)")
  local c = state(hx and hx[2], "hx[2] (c)")
  local gi, gf, gg, go = (linear(x, self.weight_ih, self.bias_ih) + linear(h, self.weight_hh, self.bias_hh)):chunk(4, 2)
  local i = gi:sigmoid()
  local f = gf:sigmoid()
  local g = gg:tanh()
  local o = go:sigmoid()
  local cy = f * c + i * g
  local hy = o * cy:tanh()
  if not batched then
    hy, cy = hy:squeeze(1), cy:squeeze(1)
  end
  return hy, cy
end

-- torch's signatures (attn/signature.lua: a trailing options table is
-- expanded into torch's positional order)
signature.declare(Embedding, "nn.Embedding.", {
  init = "self, num_embeddings, embedding_dim, padding_idx=nil, max_norm=nil, norm_type=2.0, "
    .. "scale_grad_by_freq=false, sparse=false, _weight=nil",
  from_pretrained = "embeddings, freeze=true, padding_idx=nil, max_norm=nil, norm_type=2.0, "
    .. "scale_grad_by_freq=false, sparse=false",
  forward = false, reset_parameters = false, extra_repr = false,
})
signature.declare(nn.LayerNorm, "nn.LayerNorm.", {init = "self, normalized_shape, eps=1e-05, elementwise_affine=true",
  forward = false, reset_parameters = false, extra_repr = false})
signature.declare(nn.Dropout, "nn.Dropout.", {init = "self, p=0.5, inplace=false", forward = false, extra_repr = false})
signature.declare(nn.ReLU, "nn.ReLU.", {init = "self, inplace=false", forward = false, extra_repr = false})
signature.declare(nn.GELU, "nn.GELU.", {init = "self, approximate='none'", forward = false, extra_repr = false})
for _, name in ipairs({"Softmax", "LogSoftmax"}) do
  signature.declare(nn[name], "nn." .. name .. ".", {init = "self, dim=nil", forward = false, extra_repr = false})
end
for _, name in ipairs({"Tanh", "Sigmoid", "Identity"}) do
  signature.declare(nn[name], "nn." .. name .. ".", {forward = false})
end
signature.declare(nn.GRUCell, "nn.GRUCell.", {init = "self, input_size, hidden_size, bias=true",
  forward = "self, input, hx=nil", reset_parameters = false, extra_repr = false})
signature.declare(nn.LSTMCell, "nn.LSTMCell.", {init = "self, input_size, hidden_size, bias=true",
  forward = "self, input, hx=nil", reset_parameters = false, extra_repr = false})

return nn
