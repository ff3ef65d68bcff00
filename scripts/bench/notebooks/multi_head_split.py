# SPDX-License-Identifier: MIT
"""The multi-head split notebook's cells as a plain script: the Python side
of scripts/multi_head_split.lua for scripts/bench/run.lua case 5.  Its
functions are also scripts/fixtures/gen_seeds.py's (seed 004)."""
import math

import torch
import torch.nn as nn


def split_heads(x, num_heads, d_k):
    return x.view(x.size(0), x.size(1), num_heads, d_k).permute(0, 2, 1, 3)


def combine_heads(x, num_heads, d_k):
    x = x.permute(0, 2, 1, 3).contiguous()
    return x.view(x.size(0), x.size(1), num_heads * d_k)


def attention(query, key, value, d_k):
    scores = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(d_k)
    return torch.matmul(torch.softmax(scores, -1), value)


def multi_head_attention(d_model, num_heads, query_tensor, key_tensor, value_tensor):
    d_k = d_model // num_heads
    key_layer = nn.Linear(d_model, num_heads * d_k)
    value_layer = nn.Linear(d_model, num_heads * d_k)
    query_layer = nn.Linear(d_model, num_heads * d_k)
    key = split_heads(key_layer(key_tensor), num_heads, d_k)
    value = split_heads(value_layer(value_tensor), num_heads, d_k)
    query = split_heads(query_layer(query_tensor), num_heads, d_k)
    out = attention(query, key, value, d_k)
    return combine_heads(out, num_heads, d_k), (query_layer, key_layer, value_layer)


def main():
    d_model, num_heads = 256, 8
    d_k = d_model // num_heads
    torch.manual_seed(0)
    query_tensor = torch.randn(4, 5, d_model)
    key_tensor = torch.randn(4, 7, d_model)
    value_tensor = torch.randn(4, 7, d_model)
    heads = split_heads(query_tensor, num_heads, d_k)
    print(heads.shape, (combine_heads(heads, num_heads, d_k) - query_tensor).abs().max())
    attention_output, (ql, kl, vl) = multi_head_attention(d_model, num_heads, query_tensor, key_tensor, value_tensor)
    print(attention_output.shape, attention_output[0][0][:6], attention_output.mean())

    mha = nn.MultiheadAttention(d_model, num_heads, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([ql.weight, kl.weight, vl.weight], 0))
        mha.in_proj_bias.copy_(torch.cat([ql.bias, kl.bias, vl.bias], 0))
        mha.out_proj.weight.copy_(torch.eye(d_model))
        mha.out_proj.bias.zero_()
    mha_output, mha_weights = mha(query_tensor, key_tensor, value_tensor)
    print((mha_output - attention_output).abs().max())
    print(mha_weights[0])


if __name__ == "__main__":
    main()
