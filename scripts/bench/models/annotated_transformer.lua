-- SPDX-License-Identifier: MIT
--- The Annotated Transformer on its copy task, at the benchmark's size,
-- ported line by line from scripts/bench/models/annotated_transformer.py
-- (spec/annotated_transformer_spec.lua loads this file and checks the model
-- against torch's: make_model, subsequent_mask and rate).  Token ids
-- are 1-based, so the padding id 0 is 1 and the start symbol 1 is 2.
-- Submodules are assigned one per line: Lua's multiple assignment
-- (`self.a, self.b = a, b`) assigns right to left, which would register
-- them, and so order parameters and draw initial weights, unlike torch.
local attn = require "attn"
local nn = attn.nn

local M = {}
local V, N_LAYERS, D_MODEL, D_FF, H, BATCH, SEQ, NBATCHES = 11, 2, 128, 512, 4, 80, 10, 20
M.V, M.BATCH, M.NBATCHES = V, BATCH, NBATCHES
local PAD = 1

-- the Annotated Transformer's helper, written as its users would
local function clones(module, N)
  local list = {}
  for i = 1, N do list[i] = attn.deepcopy(module) end
  return nn.ModuleList(list)
end

local EncoderDecoder = nn.Module:extend("EncoderDecoder")
function EncoderDecoder:init(encoder, decoder, src_embed, tgt_embed, generator)
  self.encoder = encoder
  self.decoder = decoder
  self.src_embed = src_embed
  self.tgt_embed = tgt_embed
  self.generator = generator
end
function EncoderDecoder:forward(src, tgt, src_mask, tgt_mask)
  return self:decode(self:encode(src, src_mask), src_mask, tgt, tgt_mask)
end
function EncoderDecoder:encode(src, src_mask) return self.encoder(self.src_embed(src), src_mask) end
function EncoderDecoder:decode(memory, src_mask, tgt, tgt_mask)
  return self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)
end

local Generator = nn.Module:extend("Generator")
function Generator:init(d_model, vocab) self.proj = nn.Linear(d_model, vocab) end
function Generator:forward(x) return attn.F.log_softmax(self.proj(x), -1) end

local LayerNorm = nn.Module:extend("LayerNorm")
function LayerNorm:init(features, eps)
  self.a_2 = nn.Parameter(attn.ones(features))
  self.b_2 = nn.Parameter(attn.zeros(features))
  self.eps = eps or 1e-6
end
function LayerNorm:forward(x)
  local mean = x:mean(-1, true)
  local std = x:std(-1, true, true) -- (dim, unbiased, keepdim) as torch's positional form
  return self.a_2 * (x - mean) / (std + self.eps) + self.b_2
end

local Encoder = nn.Module:extend("Encoder")
function Encoder:init(layer, N)
  self.layers = clones(layer, N)
  self.norm = LayerNorm(layer.size)
end
function Encoder:forward(x, mask)
  for _, layer in ipairs(self.layers) do x = layer(x, mask) end
  return self.norm(x)
end

local SublayerConnection = nn.Module:extend("SublayerConnection")
function SublayerConnection:init(size, dropout)
  self.norm = LayerNorm(size)
  self.dropout = nn.Dropout(dropout)
end
function SublayerConnection:forward(x, sublayer) return x + self.dropout(sublayer(self.norm(x))) end

local EncoderLayer = nn.Module:extend("EncoderLayer")
function EncoderLayer:init(size, self_attn, feed_forward, dropout)
  self.self_attn = self_attn
  self.feed_forward = feed_forward
  self.sublayer = clones(SublayerConnection(size, dropout), 2)
  self.size = size
end
function EncoderLayer:forward(x, mask)
  x = self.sublayer[1](x, function(v) return self.self_attn(v, v, v, mask) end)
  return self.sublayer[2](x, self.feed_forward)
end

local Decoder = nn.Module:extend("Decoder")
function Decoder:init(layer, N)
  self.layers = clones(layer, N)
  self.norm = LayerNorm(layer.size)
end
function Decoder:forward(x, memory, src_mask, tgt_mask)
  for _, layer in ipairs(self.layers) do x = layer(x, memory, src_mask, tgt_mask) end
  return self.norm(x)
end

local DecoderLayer = nn.Module:extend("DecoderLayer")
function DecoderLayer:init(size, self_attn, src_attn, feed_forward, dropout)
  self.size = size
  self.self_attn = self_attn
  self.src_attn = src_attn
  self.feed_forward = feed_forward
  self.sublayer = clones(SublayerConnection(size, dropout), 3)
end
function DecoderLayer:forward(x, memory, src_mask, tgt_mask)
  local m = memory
  x = self.sublayer[1](x, function(v) return self.self_attn(v, v, v, tgt_mask) end)
  x = self.sublayer[2](x, function(v) return self.src_attn(v, m, m, src_mask) end)
  return self.sublayer[3](x, self.feed_forward)
end

local function subsequent_mask(size)
  return attn.ones(1, size, size):triu(1):eq(0)
end

local function attention(query, key, value, mask, dropout)
  local d_k = query:size(-1)
  local scores = attn.matmul(query, key:transpose(-2, -1)) / math.sqrt(d_k)
  if mask ~= nil then scores = scores:masked_fill(mask:eq(0), -1e9) end
  local p_attn = scores:softmax(-1)
  if dropout ~= nil then p_attn = dropout(p_attn) end
  return attn.matmul(p_attn, value), p_attn
end

local MultiHeadedAttention = nn.Module:extend("MultiHeadedAttention")
function MultiHeadedAttention:init(h, d_model, dropout)
  assert(d_model % h == 0)
  self.d_k = d_model // h
  self.h = h
  self.linears = clones(nn.Linear(d_model, d_model), 4)
  self.dropout = nn.Dropout(dropout or 0.1)
end
function MultiHeadedAttention:forward(query, key, value, mask)
  if mask ~= nil then mask = mask:unsqueeze(2) end
  local nbatches = query:size(1)
  local proj = {}
  for i, x in ipairs({query, key, value}) do
    proj[i] = self.linears[i](x):view(nbatches, -1, self.h, self.d_k):transpose(2, 3)
  end
  local x
  x, self.attn = attention(proj[1], proj[2], proj[3], mask, self.dropout)
  x = x:transpose(2, 3):contiguous():view(nbatches, -1, self.h * self.d_k)
  return self.linears[-1](x)
end

local PositionwiseFeedForward = nn.Module:extend("PositionwiseFeedForward")
function PositionwiseFeedForward:init(d_model, d_ff, dropout)
  self.w_1 = nn.Linear(d_model, d_ff)
  self.w_2 = nn.Linear(d_ff, d_model)
  self.dropout = nn.Dropout(dropout)
end
function PositionwiseFeedForward:forward(x) return self.w_2(self.dropout(self.w_1(x):relu())) end

local Embeddings = nn.Module:extend("Embeddings")
function Embeddings:init(d_model, vocab)
  self.lut = nn.Embedding(vocab, d_model)
  self.d_model = d_model
end
function Embeddings:forward(x) return self.lut(x) * math.sqrt(self.d_model) end

local PositionalEncoding = nn.Module:extend("PositionalEncoding")
function PositionalEncoding:init(d_model, dropout, max_len)
  self.dropout = nn.Dropout(dropout)
  local position = attn.arange(0, max_len):unsqueeze(2)
  local div_term = (attn.arange(0, d_model, 2) * -(math.log(10000.0) / d_model)):exp()
  local angles = position * div_term -- [max_len, d_model / 2]
  -- pe[:, 0::2] = sin, pe[:, 1::2] = cos: interleave along a new last dim
  local pe = attn.stack({angles:sin(), angles:cos()}, 3):reshape(max_len, d_model)
  self:register_buffer("pe", pe:unsqueeze(1))
end
function PositionalEncoding:forward(x)
  x = x + self.pe:narrow(2, 1, x:size(2))
  return self.dropout(x)
end

local function make_model(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout, max_len)
  local c = attn.deepcopy
  local attn_ = MultiHeadedAttention(h, d_model)
  local ff = PositionwiseFeedForward(d_model, d_ff, dropout)
  local position = PositionalEncoding(d_model, dropout, max_len)
  local model = EncoderDecoder(
    Encoder(EncoderLayer(d_model, c(attn_), c(ff), dropout), N),
    Decoder(DecoderLayer(d_model, c(attn_), c(attn_), c(ff), dropout), N),
    nn.Sequential(Embeddings(d_model, src_vocab), c(position)),
    nn.Sequential(Embeddings(d_model, tgt_vocab), c(position)),
    Generator(d_model, tgt_vocab))
  for _, p in ipairs(model:parameters()) do
    if p:dim() > 1 then attn.init.xavier_uniform_(p) end
  end
  return model
end

local LabelSmoothing = nn.Module:extend("LabelSmoothing")
function LabelSmoothing:init(size, padding_idx, smoothing)
  self.criterion = nn.KLDivLoss({reduction = "sum"})
  self.padding_idx = padding_idx
  self.confidence = 1.0 - smoothing
  self.smoothing = smoothing
  self.size = size
end
function LabelSmoothing:forward(x, target)
  assert(x:size(2) == self.size)
  local true_dist = attn.full(x:shape(), self.smoothing / (self.size - 2))
  true_dist = attn.where(attn.one_hot(target, self.size), self.confidence, true_dist)
  -- true_dist[:, padding_idx] = 0, and the rows whose target is padding
  local keep_col = 1 - attn.one_hot(attn.tensor({self.padding_idx}), self.size)
  true_dist = true_dist * keep_col * target:ne(self.padding_idx):unsqueeze(2)
  self.true_dist = true_dist
  return self.criterion(x, true_dist:detach())
end

local function rate(step, model_size, factor, warmup)
  if step == 0 then step = 1 end
  return factor * (model_size ^ -0.5 * math.min(step ^ -0.5, step * warmup ^ -1.5))
end


local function make_batch(src, tgt)
  local b = {src = src}
  b.src_mask = src:ne(PAD):unsqueeze(-2)
  b.tgt = tgt:narrow(2, 1, tgt:size(2) - 1)
  b.tgt_y = tgt:narrow(2, 2, tgt:size(2) - 1)
  b.tgt_mask = b.tgt:ne(PAD):unsqueeze(-2) * subsequent_mask(b.tgt:size(-1))
  b.ntokens = b.tgt_y:ne(PAD):sum():item()
  return b
end

--- the copy task's batches: nbatches of [batch, SEQ] ids in 2..V, first id 2
function M.data_gen(batch_size, nbatches)
  local i = 0
  return function()
    i = i + 1
    if i > nbatches then return nil end
    local data = attn.randint(2, V + 1, batch_size, SEQ)
    data:narrow(2, 1, 1):fill_(2)
    return make_batch(data:clone(), data:clone())
  end
end

function M.setup(seed)
  attn.manual_seed(seed or 0)
  local model = make_model(V, V, N_LAYERS, D_MODEL, D_FF, H, M.dropout or 0.1, 64)
  model:train()
  local criterion = LabelSmoothing(V, PAD, 0.0)
  local optimizer = attn.optim.Adam(model:parameters(), {lr = 0.5, betas = {0.9, 0.98}, eps = 1e-9})
  local scheduler = attn.optim.LambdaLR(optimizer, function(step) return rate(step, D_MODEL, 1.0, 400) end)
  return model, criterion, optimizer, scheduler
end

function M.step(model, criterion, optimizer, scheduler, batch)
  local out = model(batch.src, batch.tgt, batch.src_mask, batch.tgt_mask)
  local x = model.generator(out)
  local loss = criterion(x:contiguous():view(-1, x:size(-1)), batch.tgt_y:contiguous():view(-1)) / batch.ntokens
  loss:backward()
  optimizer:step()
  optimizer:zero_grad(true)
  scheduler:step()
  return loss
end

-- the model code, for spec/annotated_transformer_spec.lua
M.make_model, M.subsequent_mask, M.rate, M.LabelSmoothing = make_model, subsequent_mask, rate, LabelSmoothing

--- the copy task's training: epochs x NBATCHES steps; returns the last loss
function M.train(epochs, seed)
  local model, criterion, optimizer, scheduler = M.setup(seed)
  local loss
  for _ = 1, epochs or 3 do
    for batch in M.data_gen(BATCH, NBATCHES) do loss = M.step(model, criterion, optimizer, scheduler, batch) end
  end
  return loss:item()
end

return M
