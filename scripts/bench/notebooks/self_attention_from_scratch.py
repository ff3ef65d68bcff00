# SPDX-License-Identifier: MIT
"""The self-attention-from-scratch notebook's cells as a plain script: the
Python side of scripts/self_attention_from_scratch.lua for run.lua case 5."""
import torch
import torch.nn as nn

torch.manual_seed(123)
sentence = "Life is short, eat dessert first"
dc = {s: i for i, s in enumerate(sorted(sentence.replace(",", "").split()))}
sentence_int = torch.tensor([dc[s] for s in sentence.replace(",", "").split()])
print(sentence_int)
embed = torch.nn.Embedding(50000, 3)
embedded_sentence = embed(sentence_int).detach()
print(embedded_sentence, embedded_sentence.shape)

d_q, d_k, d_v = 2, 2, 4
d = embedded_sentence.shape[1]
w_query = nn.Parameter(torch.randn(d, d_q))
w_key = nn.Parameter(torch.randn(d, d_k))
w_value = nn.Parameter(torch.randn(d, d_v))
keys = embedded_sentence @ w_key
values = embedded_sentence @ w_value
x_2 = embedded_sentence[1]
query_2 = x_2 @ w_query
omega_2 = query_2 @ keys.T
print(omega_2)
attention_weights_2 = torch.softmax(omega_2 / d_k ** 0.5, dim=0)
print(attention_weights_2)
context_vector_2 = attention_weights_2 @ values
print(context_vector_2, context_vector_2.shape)


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out_kq, d_out_v):
        super().__init__()
        self.d_out_kq = d_out_kq
        self.W_query = nn.Parameter(torch.rand(d_in, d_out_kq))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out_kq))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out_v))

    def forward(self, x):
        keys, queries, values = x @ self.W_key, x @ self.W_query, x @ self.W_value
        attn_weights = torch.softmax(queries @ keys.T / self.d_out_kq ** 0.5, dim=-1)
        return attn_weights @ values


torch.manual_seed(123)
sa = SelfAttention(3, 2, 4)
print(sa(embedded_sentence))


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out_kq, d_out_v, num_heads):
        super().__init__()
        self.heads = nn.ModuleList([SelfAttention(d_in, d_out_kq, d_out_v) for _ in range(num_heads)])

    def forward(self, x):
        return torch.cat([head(x) for head in self.heads], dim=-1)


torch.manual_seed(123)
context_vecs = MultiHeadAttentionWrapper(3, 2, 1, 4)(embedded_sentence)
print(context_vecs, context_vecs.shape)


class CrossAttention(SelfAttention):
    def forward(self, x_1, x_2):
        queries_1 = x_1 @ self.W_query
        keys_2, values_2 = x_2 @ self.W_key, x_2 @ self.W_value
        attn_weights = torch.softmax(queries_1 @ keys_2.T / self.d_out_kq ** 0.5, dim=-1)
        return attn_weights @ values_2


torch.manual_seed(123)
crossattn = CrossAttention(3, 2, 4)
second_input = torch.rand(8, 3)
print(crossattn(embedded_sentence, second_input))

torch.manual_seed(123)
sa = SelfAttention(3, 2, 4)
x = embedded_sentence
queries, keys, values = x @ sa.W_query, x @ sa.W_key, x @ sa.W_value
attn_scores = queries @ keys.T
attn_weights = torch.softmax(attn_scores / d_k ** 0.5, dim=1)
block_size = attn_scores.shape[0]
mask_simple = torch.tril(torch.ones(block_size, block_size))
masked_simple = attn_weights * mask_simple
masked_simple_norm = masked_simple / masked_simple.sum(dim=1, keepdim=True)
mask = torch.triu(torch.ones(block_size, block_size), diagonal=1)
masked = attn_scores.masked_fill(mask.bool(), -torch.inf)
causal_weights = torch.softmax(masked / d_k ** 0.5, dim=1)
print(causal_weights)
print((masked_simple_norm - causal_weights).abs().max())
print(causal_weights @ values)
