# SPDX-License-Identifier: MIT
"""PyTorch 1.13 side of scripts/bench/run.lua (run by /usr/bin/python3).

    OPENBLAS_CORETYPE=SkylakeX OPENBLAS_NUM_THREADS=n python3 torch_bench.py --threads n [--quick] [--cases 1,2,3,4]

Prints one line per measurement: key<TAB>seconds<TAB>peak_bytes<TAB>note.
torch 1.13 has no F.scaled_dot_product_attention, so "SDPA" here is the
explicit composition softmax(q k^T * scale [+ causal mask]) v that 1.13
users write.  Timing and memory follow run.lua: one warm-up call, then the
best of repeated calls; memory is VmHWM minus VmRSS before the case, with
VmHWM reset through /proc/self/clear_refs.
"""
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_hwm():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def bench(fn, budget=1.0, max_reps=40):
    """(best seconds, peak RSS growth in bytes, note)"""
    reset_hwm()
    rss0 = status_kb("VmRSS")
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    note = ""
    if first > 5:
        best, note = first, "1 run"
    else:
        best = math.inf
        reps = max(1, min(max_reps, int(budget / max(first, 1e-9))))
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
    return best, (status_kb("VmHWM") - rss0) * 1024, note


def per_call(fn, target=0.1):
    """microseconds per call of a Python loop, best of 3 loops"""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt > target:
            break
        n *= 4
    best = dt / n
    for _ in range(2):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def emit(key, t, mem, note=""):
    print(f"{key}\t{t:.9g}\t{mem}\t{note}", flush=True)


def sdpa(q, k, v, causal):
    s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        L, S = s.shape[-2], s.shape[-1]
        mask = torch.ones(L, S, dtype=torch.bool).triu(1)
        s = s.masked_fill(mask, float("-inf"))
    return torch.softmax(s, -1) @ v


def main():
    args = sys.argv[1:]
    threads, quick, cases = 1, False, {1, 2, 3, 4}
    i = 0
    while i < len(args):
        if args[i] == "--threads":
            threads = int(args[i + 1]); i += 2
        elif args[i] == "--quick":
            quick = True; i += 1
        elif args[i] == "--cases":
            cases = {int(c) for c in args[i + 1].split(",")}; i += 2
        else:
            sys.exit("usage: torch_bench.py --threads n [--quick] [--cases 1,2,3,4]")
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    lengths = [128, 512, 1024] if quick else [128, 512, 1024, 2048, 4096, 8192]
    H, E = 8, 64

    if 1 in cases:
        for L in lengths:
            for causal in (False, True):
                c = int(causal)
                q, k, v = (torch.randn(1, H, L, E) for _ in range(3))
                with torch.no_grad():
                    t, m, note = bench(lambda: sdpa(q, k, v, causal), 1.5, 1000)
                emit(f"sdpa_fwd_L{L}_c{c}", t, m, note)
                if t * 3.5 > 60:
                    emit(f"sdpa_fwdbwd_L{L}_c{c}", float("nan"), 0, "skipped: over a minute")
                    continue
                qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))

                def fb():
                    sdpa(qg, kg, vg, causal).sum().backward()
                t, m, note = bench(fb, 1.5, 1000)
                emit(f"sdpa_fwdbwd_L{L}_c{c}", t, m, note)
                del q, k, v, qg, kg, vg
        # issue 16's small-sequence shape: B = 4, forward + backward
        for L in (x for x in lengths if x <= 512):
            qg, kg, vg = (torch.randn(4, H, L, E).requires_grad_() for _ in range(3))

            def fb4():
                sdpa(qg, kg, vg, False).sum().backward()
            t, m, note = bench(fb4, 3.0, 1000)
            emit(f"sdpa_fwdbwd_B4_L{L}", t, m, note)
            del qg, kg, vg

    if 2 in cases:
        mha = nn.MultiheadAttention(512, 8, batch_first=True)
        for L in lengths:
            x = torch.randn(1, L, 512)
            with torch.no_grad():
                t, m, note = bench(lambda: mha(x, x, x, need_weights=False), 1.0, 1000)
            emit(f"mha_fwd_L{L}", t, m, note)
            xg = x.clone().requires_grad_()

            def fb():
                mha(xg, xg, xg, need_weights=False)[0].sum().backward()
            t, m, note = bench(fb, 1.0, 1000)
            emit(f"mha_fwdbwd_L{L}", t, m, note)
        for L in (x for x in lengths if x <= 512):  # issue 16's shape: B = 4
            xg = torch.randn(4, L, 512).requires_grad_()

            def fb4():
                mha(xg, xg, xg, need_weights=False)[0].sum().backward()
            t, m, note = bench(fb4, 3.0, 1000)
            emit(f"mha_fwdbwd_B4_L{L}", t, m, note)

    if 3 in cases:
        a, b = torch.randn(6, 3), torch.randn(3, 2)
        emit("tiny_matmul", per_call(lambda: a @ b), 0)
        s = torch.randn(1, 6)
        emit("tiny_softmax", per_call(lambda: torch.softmax(s, -1)), 0)
        lin, x = nn.Linear(8, 4), torch.randn(10, 8)
        emit("tiny_linear", per_call(lambda: lin(x)), 0)
        emb, ids = nn.Embedding(50000, 3), torch.tensor([0, 1, 2, 3, 4, 5])
        emit("tiny_embedding", per_call(lambda: emb(ids)), 0)
        ag, bg = a.clone().requires_grad_(), b.clone().requires_grad_()

        def mb():
            (ag @ bg).sum().backward()
        emit("tiny_matmul_backward", per_call(mb), 0)

    if 4 in cases:
        V, D, T, B = 28, 32, 16, 32

        class CharAttn(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok = nn.Embedding(V, D)
                self.pos = nn.Embedding(T, D)
                self.q = nn.Linear(D, D, bias=False)
                self.k = nn.Linear(D, D, bias=False)
                self.v = nn.Linear(D, D, bias=False)
                self.out = nn.Linear(D, V)
                self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1))

            def forward(self, ids):
                x = self.tok(ids) + self.pos(torch.arange(T))
                q, k, v = self.q(x), self.k(x), self.v(x)
                s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
                s = s.masked_fill(self.mask, float("-inf"))
                return self.out(torch.softmax(s, -1) @ v + x)

        model = CharAttn()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        ids = torch.randint(0, V, (B, T))
        tgt = torch.randint(0, V, (B, T))

        def step():
            opt.zero_grad()
            loss = F.cross_entropy(model(ids).reshape(B * T, V), tgt.reshape(B * T))
            loss.backward()
            opt.step()
        t, m, note = bench(step, budget=1.0, max_reps=200)
        emit("train_step", t, m, note)

    if 8 in cases:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "models"))
        import char_gpt as gpt
        model, opt, xb, yb = gpt.setup(0)
        emit("char_gpt_loss0", gpt.step(model, opt, xb, yb).item(), 0)
        t, m, note = bench(lambda: gpt.step(model, opt, xb, yb), budget=2.0, max_reps=200)
        emit("char_gpt_step", t, m, note)

    if 9 in cases:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "models"))
        import annotated_transformer as at
        model, crit, opt, sched = at.setup(0)
        batch = next(at.data_gen(at.V, at.BATCH, 1))
        emit("annotated_loss0", at.step(model, crit, opt, sched, batch).item(), 0)
        t, m, note = bench(lambda: at.step(model, crit, opt, sched, batch), budget=2.0, max_reps=100)
        emit("annotated_step", t, m, note)

    if 10 in cases:
        # elementwise and row ops, forward + backward on [720, 512] (run.lua's case 10)
        nnf = torch.nn.functional  # not F: a local F would shadow the module-level one for the whole of main
        x0, g = torch.randn(720, 512), torch.randn(720, 512)
        ln = torch.nn.LayerNorm(512)
        tgt = torch.randint(0, 512, (720,))
        bias = torch.randn(512, requires_grad=True)
        ops = [("relu", lambda t: t.relu()), ("gelu", lambda t: nnf.gelu(t)),
               ("gelu_tanh", lambda t: nnf.gelu(t, approximate="tanh")), ("silu", lambda t: nnf.silu(t)),
               ("tanh", lambda t: t.tanh()), ("sigmoid", lambda t: t.sigmoid()), ("layer_norm", lambda t: ln(t)),
               ("softmax", lambda t: t.softmax(-1)), ("log_softmax", lambda t: t.log_softmax(-1)),
               ("add_bias", lambda t: t + bias), ("mul", lambda t: t * t)]
        for name, f in ops:
            xg = x0.clone().requires_grad_()
            def fb(f=f, xg=xg):
                f(xg).backward(g)
            t, m, note = bench(fb, 1.0, 1000)
            emit(f"ew_{name}", t, m, note)
        xg = x0.clone().requires_grad_()
        t, m, note = bench(lambda: nnf.cross_entropy(xg, tgt).backward(), 1.0, 1000)
        emit("ew_cross_entropy", t, m, note)

    if 11 in cases:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "models"))
        import nanogpt as ng
        model, opt, xb, yb = ng.setup(0)
        emit("nanogpt_loss0", ng.step(model, opt, xb, yb).item(), 0)
        t, m, note = bench(lambda: ng.step(model, opt, xb, yb), budget=3.0, max_reps=200)
        emit("nanogpt_step", t, m, note)

    if 12 in cases:
        # fresh allocations: x.grad = None before each step (run.lua's case 12)
        nnf = torch.nn.functional
        x0, g = torch.randn(720, 512), torch.randn(720, 512)
        ln = torch.nn.LayerNorm(512)
        for name, f in [("relu", lambda t: t.relu()), ("gelu", lambda t: nnf.gelu(t)), ("layer_norm", lambda t: ln(t))]:
            xg = x0.clone().requires_grad_()
            def fb(f=f, xg=xg):
                xg.grad = None
                f(xg).backward(g)
            t, m, note = bench(fb, 1.0, 1000)
            emit(f"fresh_{name}", t, m, note)
            xn = x0.clone().requires_grad_()
            times = []
            for _ in range(200):
                t0 = time.perf_counter()
                xn.grad = None
                f(xn).backward(g)
                times.append(time.perf_counter() - t0)
            steady = sorted(times[100:])[49]
            first = sum(times[:10]) / 10
            emit(f"first10_{name}", first, 0, "torch: %.2fx its steady state (%.1f us)" % (first / steady, steady * 1e6))

    if 6 in cases:
        n = 2048
        a, b = torch.rand(n, n), torch.rand(n, n)
        t, m, note = bench(lambda: a @ b, max_reps=5)
        emit("sgemm_2048", t, m, note)


if __name__ == "__main__":
    main()
