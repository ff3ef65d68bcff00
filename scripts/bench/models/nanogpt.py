# SPDX-License-Identifier: MIT
"""nanoGPT (Karpathy, github.com/karpathy/nanoGPT) at its README's CPU
recipe: train.py config/train_shakespeare_char.py --device=cpu --compile=False
--block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128
--dropout=0.0 (bias False, vocab 65, AdamW lr 1e-3, betas (0.9, 0.99),
weight decay 0.1 on matrices, grad clip 1.0).  model.py and train.py's
inner loop, written again for the benchmark; torch 1.13 has no
F.scaled_dot_product_attention, so attention takes model.py's explicit
path.  scripts/bench/models/nanogpt.lua is the same program in attn; built
after the same seed, both hold the same weights and batch and print the
same first loss."""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F

vocab_size, block_size, batch_size = 65, 64, 12
n_layer, n_head, n_embd = 4, 4, 128
learning_rate, weight_decay, betas, grad_clip = 1e-3, 1e-1, (0.9, 0.99), 1.0


class LayerNorm(nn.Module):
    """LayerNorm without a bias (torch 1.13's nn.LayerNorm cannot drop it)."""

    def __init__(self, ndim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, None, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=False)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(n_embd, dim=2)
        k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
        q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
        v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=False)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=False)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd)
        self.attn = CausalSelfAttention()
        self.ln_2 = LayerNorm(n_embd)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block() for _ in range(n_layer)]),
            ln_f=LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


def flops_per_step():
    """nanoGPT's estimate_mfu: 6 N + 12 L H Q T per token, N without wpe."""
    n = 4 * n_layer * 3 * n_embd * n_embd + (2 * n_layer + 1) * n_embd + vocab_size * n_embd
    return (6 * n + 12 * n_layer * n_head * (n_embd // n_head) * block_size) * block_size * batch_size


def setup(seed=0):
    """model, optimizer and one batch (x, y), all from the seed"""
    torch.manual_seed(seed)
    model = GPT()
    params = [p for p in model.parameters()]
    decay = [p for p in params if p.dim() >= 2]
    nodecay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                             {"params": nodecay, "weight_decay": 0.0}], lr=learning_rate, betas=betas)
    data = torch.randint(0, vocab_size, (batch_size, block_size + 1))
    return model, opt, data[:, :block_size].contiguous(), data[:, 1:].contiguous()


def step(model, opt, x, y):
    """one iteration of train.py's loop (gradient_accumulation_steps 1)"""
    for group in opt.param_groups:
        group["lr"] = learning_rate
    loss = model(x, y) / 1
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss
