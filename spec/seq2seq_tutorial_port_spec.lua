-- SPDX-License-Identifier: MIT
-- The PyTorch seq2seq tutorial ("NLP From Scratch: Translation with a
-- Sequence to Sequence Network and Attention", batched, with Bahdanau
-- attention) ported line by line: EncoderRNN with nn.GRU, AttnDecoderRNN
-- with nn.BahdanauAttention in the tutorial's form, teacher forcing,
-- greedy decoding with topk, nn.NLLLoss, two Adam optimizers, dropout 0.1.
-- Against torch 1.13 (fixture from scripts/fixtures/gen_s2s_tutorial_port.py:
-- the same model, torch's state_dicts loaded as they are): the first
-- step's log-probabilities and gradients, the losses of a few training
-- steps (dropout masks drawn after the same seeds), and the greedy decode
-- before and after training.  The only changes from the tutorial are the
-- ones Lua needs: ids are 1-based (SOS 1, EOS 2: torch's + 1), dims too.
local attn = require "attn"
local fx = require "support.fixture"
local nn, F, optim = attn.nn, attn.F, attn.optim

local fix = fx.load("seq2seq_tutorial_port")

local SOS_token, EOS_token = 1, 2 -- torch's 0 and 1
local MAX_LENGTH = fix.sizes.max_length
assert(EOS_token == 2)

local EncoderRNN = nn.Module:extend("EncoderRNN")
function EncoderRNN:init(input_size, hidden_size, dropout_p)
  self.hidden_size = hidden_size
  self.embedding = nn.Embedding(input_size, hidden_size)
  self.gru = nn.GRU(hidden_size, hidden_size, {batch_first = true})
  self.dropout = nn.Dropout(dropout_p or 0.1)
end
function EncoderRNN:forward(input)
  local embedded = self.dropout(self.embedding(input))
  local output, hidden = self.gru(embedded)
  return output, hidden
end

local AttnDecoderRNN = nn.Module:extend("AttnDecoderRNN")
function AttnDecoderRNN:init(hidden_size, output_size, dropout_p)
  self.embedding = nn.Embedding(output_size, hidden_size)
  self.attention = nn.BahdanauAttention(hidden_size, {tutorial = true}) -- Wa, Ua, Va
  self.gru = nn.GRU(2 * hidden_size, hidden_size, {batch_first = true})
  self.out = nn.Linear(hidden_size, output_size)
  self.dropout = nn.Dropout(dropout_p or 0.1)
end
function AttnDecoderRNN:forward(encoder_outputs, encoder_hidden, target_tensor)
  local batch_size = encoder_outputs:size(1)
  local decoder_input = attn.empty(batch_size, 1, {dtype = "int64"}):fill_(SOS_token)
  local decoder_hidden = encoder_hidden
  local decoder_outputs, attentions = {}, {}
  for i = 1, MAX_LENGTH do
    local decoder_output, attn_weights
    decoder_output, decoder_hidden, attn_weights = self:forward_step(decoder_input, decoder_hidden, encoder_outputs)
    decoder_outputs[#decoder_outputs + 1] = decoder_output
    attentions[#attentions + 1] = attn_weights
    if target_tensor ~= nil then
      decoder_input = target_tensor[{{}, i}]:unsqueeze(2) -- teacher forcing
    else
      local _, topi = decoder_output:topk(1)
      decoder_input = topi:squeeze(-1):detach()
    end
  end
  local outputs = attn.cat(decoder_outputs, 2)
  outputs = F.log_softmax(outputs, -1)
  return outputs, decoder_hidden, attn.cat(attentions, 2)
end
function AttnDecoderRNN:forward_step(input, hidden, encoder_outputs)
  local embedded = self.dropout(self.embedding(input))
  local query = hidden:permute(2, 1, 3)
  local context, attn_weights = self.attention(query, encoder_outputs)
  local input_gru = attn.cat({embedded, context}, 3)
  local output
  output, hidden = self.gru(input_gru, hidden)
  output = self.out(output)
  return output, hidden, attn_weights
end

local function load_state(module, state)
  local sd = {}
  for _, p in ipairs(state) do sd[p[1]] = fx.tensor(p[2]) end
  module:load_state_dict(sd) -- strict: torch's names, every one
end

local function ids(rows) return attn.tensor(rows, {dtype = "int64"}) + 1 end -- torch's 0-based ids

local function greedy(encoder, decoder, input_tensor)
  encoder:eval()
  decoder:eval()
  local decoder_outputs, attentions, decoded = attn.no_grad(function()
    local encoder_outputs, encoder_hidden = encoder(input_tensor)
    local outputs, _, att = decoder(encoder_outputs, encoder_hidden)
    local _, topi = outputs:topk(1)
    return outputs, att, topi:squeeze(-1)
  end)
  encoder:train()
  decoder:train()
  return decoder_outputs, attentions, decoded
end

describe("the seq2seq tutorial ported to attn", function()
  it("loads torch's state_dicts, trains a few steps and decodes as torch does", function()
    local s = fix.sizes
    local encoder = EncoderRNN(s.in_vocab, s.hidden)
    local decoder = AttnDecoderRNN(s.hidden, s.out_vocab)
    load_state(encoder, fix.enc_state)
    load_state(decoder, fix.dec_state)
    local input_tensor, target_tensor = ids(fix.input_ids), ids(fix.target_ids)

    local logp0, _, decoded0 = greedy(encoder, decoder, input_tensor)
    fx.assert_close(logp0, fix.init_logp, 1e-5, 1e-5, "greedy log-probabilities before training")
    assert.are.same(ids(fix.init_decoded):totable(), decoded0:totable())
    assert.are.equal(attn.int64, decoded0.dtype)

    local encoder_optimizer = optim.Adam(encoder:parameters(), {lr = 0.01})
    local decoder_optimizer = optim.Adam(decoder:parameters(), {lr = 0.01})
    local criterion = nn.NLLLoss()
    for step = 1, s.steps do
      attn.manual_seed(s.seed + step - 1) -- attn's dropout masks are torch's after the same seed
      encoder_optimizer:zero_grad()
      decoder_optimizer:zero_grad()
      local encoder_outputs, encoder_hidden = encoder(input_tensor)
      local decoder_outputs = decoder(encoder_outputs, encoder_hidden, target_tensor)
      local loss = criterion(decoder_outputs:view(-1, decoder_outputs:size(-1)), target_tensor:view(-1))
      loss:backward()
      if step == 1 then
        fx.assert_close(decoder_outputs, fix.logp_first, 1e-5, 1e-5, "first step's log-probabilities")
        local params = {}
        for name, p in encoder:named_parameters() do params["encoder." .. name] = p end
        for name, p in decoder:named_parameters() do params["decoder." .. name] = p end
        for _, g in ipairs(fix.grads_first) do
          fx.assert_close(params[g[1]].grad, g[2], 1e-4, 1e-4, "grad " .. g[1])
        end
      end
      encoder_optimizer:step()
      decoder_optimizer:step()
      assert(math.abs(loss:item() - fix.losses[step]) <= 1e-5 + 1e-5 * math.abs(fix.losses[step]),
        ("step %d: loss %.9g, torch %.9g"):format(step, loss:item(), fix.losses[step]))
    end

    local logp, attentions, decoded = greedy(encoder, decoder, input_tensor)
    fx.assert_close(logp, fix.eval_logp, 1e-4, 1e-4, "greedy log-probabilities after training")
    fx.assert_close(attentions, fix.eval_attentions, 1e-4, 1e-4, "attention weights after training")
    assert.are.same(ids(fix.decoded):totable(), decoded:totable())
  end)
end)
