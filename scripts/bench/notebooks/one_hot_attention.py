# SPDX-License-Identifier: MIT
"""Notebook 000's cells (one-hot attention) as a plain script: the Python
side of scripts/one_hot_attention.lua for scripts/bench/run.lua case 5.
Its functions and classes are also scripts/fixtures/gen_seeds.py's (seed
000)."""
import math

import torch
import torch.nn as nn

corpus_a = ["one is one", "two is two", "three is three", "four is four", "five is five",
            "six is six", "seven is seven", "eight is eight", "nine is nine"]
corpus_b = ["1 la 1", "2 la 2", "3 la 3", "4 la 4", "5 la 5", "6 la 6", "7 la 7", "8 la 8", "9 la 9"]


def one_hot_dict(words):
    return {w: [1.0 if j == i else 0 for j in range(len(words))] for i, w in enumerate(words)}


embed_a = one_hot_dict(["is", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])
embed_b = one_hot_dict(["9", "8", "7", "6", "5", "4", "3", "2", "1", "la"])


def sentence_embed(s, d):
    return [d[w] for w in s.split()]


def dot_attention(x, dk):
    d_in = x.shape[-1]
    wq, wk, wv = (torch.rand(d_in, dk, requires_grad=True) for _ in range(3))
    q, k, v = x @ wq, x @ wk, x @ wv
    weight = torch.softmax(q @ k.T / math.sqrt(dk), -1)
    return weight, weight @ v


class SelfAttention(nn.Module):
    def __init__(self, d_in, dk):
        super().__init__()
        self.dk = dk
        self.wq = nn.Parameter(torch.rand(d_in, dk))
        self.wk = nn.Parameter(torch.rand(d_in, dk))
        self.wv = nn.Parameter(torch.rand(d_in, dk))

    def forward(self, x):
        q, k, v = x @ self.wq, x @ self.wk, x @ self.wv
        return torch.softmax(q @ k.T / math.sqrt(self.dk), -1) @ v


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, dk, nh):
        super().__init__()
        self.layers = nn.ModuleList([SelfAttention(d_in, dk) for _ in range(nh)])
        self.out = nn.Parameter(torch.rand(dk * nh, dk))

    def forward(self, x):
        ccat = torch.cat([layer(x) for layer in self.layers], 1)
        return ccat @ self.out, ccat


def main():
    torch.manual_seed(0)
    print(sentence_embed("one is one", embed_a))
    inp = torch.tensor(sentence_embed("one is one", embed_a))
    out = torch.tensor(sentence_embed("1 la 1", embed_b))
    print(inp.shape, out.shape)
    weights, result = dot_attention(inp, 8)
    print(weights)
    print(result)
    dk = 8
    satten = SelfAttention(inp.shape[-1], dk)
    print(satten(inp))
    mul_head = MultiHeadAttention(inp.shape[-1], dk, 6)
    res, ccat = mul_head(inp)
    print(ccat.shape, mul_head.out.shape)
    print(res)


if __name__ == "__main__":
    main()
