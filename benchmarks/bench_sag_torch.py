"""SAG (reference protocol, TS) against a PyTorch run of the reference code's protocol, on the same rows.

"Calibration is Grouping" (App. I.1) says its SAG was modified from the public code
ThyrixYang/group_calibration (``methods/group_calibration.py`` with
``conf/method/group_calibration_combine_ts.yaml``), which a reader of the paper would time.
That code is written for multi-class logits on a GPU; the anchor here is this benchmark's own
PyTorch program of the same protocol for one binary logit, on the CPU:

* per partition (P = 20), a linear head without bias (K = 2 groups) on the raw embedding and
  K group temperatures initialised at 1.5, fitted jointly by ``torch.optim.LBFGS``
  (``line_search_fn="strong_wolfe"``, ``max_iter=100``, its default tolerances and history)
  on the mean log loss of the soft mixture :math:`\\sum_k q_k \\sigma(o/\\tau_k)` (for two classes
  with logits ``(0, o)`` the reference's log-softmax is this one) plus ``0.1 * mean(W^2)``;
* then every row of the hold-out split is put in its arg-max group and a temperature is fitted
  per group by ``LBFGS(max_iter=50)`` from 1 (the reference's ``temp_scaling``); a test row
  gets its group's temperature, and the P partitions' probabilities are averaged.

``calib_jax.calibrators.sag.fit(protocol="reference", variant="ts")`` is the same protocol;
its second stage fits each group's temperature by exact Newton steps, and its fail-safe is
switched off here (``min_support=0, min_events=0``) as the reference has none. Two runs:
``same init`` starts PyTorch from this library's initial heads (``sag.init_params``), so the
two programs minimise the same function from the same point (they still differ in the
parameterisation of the temperatures, :math:`\\log\\tau` here, :math:`\\tau` in the reference,
which changes the L-BFGS path); ``own init`` lets PyTorch draw its heads as ``torch.nn.Linear``
does (the same distribution). Agreement: the largest and the mean absolute difference of the
test predictions, and each program's test log loss and ECE (15 equal-width bins).

    python -m benchmarks.bench_sag_torch [--n 100000] [--m 64] [--threads 2]

Writes benchmarks/results/sag_torch.{csv,md}. Needs ``torch`` (``make bench`` installs it).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
P, K, STEPS, TAU0, LAM = 20, 2, 100, 1.5, 0.1


def _torch_fit(o, y, z, o_ho, y_ho, z_ho, o_te, z_te, init_W: np.ndarray | None, seed: int) -> np.ndarray:
    """The reference protocol in PyTorch (module docstring); returns the test probabilities."""
    import torch

    torch.manual_seed(seed)
    to = lambda a: torch.as_tensor(np.asarray(a, np.float32))  # noqa: E731
    o_t, y_t, z_t = to(o), to(y), to(z)
    o_h, y_h, z_h, o_e, z_e = to(o_ho), to(y_ho), to(z_ho), to(o_te), to(z_te)
    m = z.shape[1]
    probs = []
    for p in range(P):
        head = torch.nn.Linear(m, K, bias=False)
        if init_W is not None:
            with torch.no_grad():
                head.weight.copy_(torch.as_tensor(np.array(init_W[p].T)))
        tau = torch.nn.Parameter(torch.full((K,), TAU0))
        opt = torch.optim.LBFGS([tau, *head.parameters()], line_search_fn="strong_wolfe", max_iter=STEPS)
        sgn = 2.0 * y_t - 1.0

        def closure(head=head, tau=tau, opt=opt, sgn=sgn):
            opt.zero_grad()
            log_q = torch.log_softmax(head(z_t), dim=1)                                 # (n, K)
            log_lik = torch.nn.functional.logsigmoid(sgn[:, None] * o_t[:, None] / tau[None, :])
            loss = -torch.logsumexp(log_q + log_lik, dim=1).mean() + LAM * torch.mean(head.weight ** 2)
            loss.backward()
            return loss

        opt.step(closure)
        with torch.no_grad():
            g_ho, g_te = head(z_h).argmax(1), head(z_e).argmax(1)
        p_te = torch.zeros_like(o_e)
        for k in range(K):
            t = torch.nn.Parameter(torch.tensor(1.0))
            rows = g_ho == k
            o_k, y_k = o_h[rows], y_h[rows]
            opt_t = torch.optim.LBFGS([t], line_search_fn="strong_wolfe", max_iter=50)

            def closure_t(t=t, o_k=o_k, y_k=y_k, opt_t=opt_t):
                opt_t.zero_grad()
                loss = torch.nn.functional.binary_cross_entropy_with_logits(o_k / t, y_k)
                loss.backward()
                return loss

            if rows.any():
                opt_t.step(closure_t)
            t_k = 1.0 if torch.isnan(t).item() else float(t.detach())
            with torch.no_grad():
                sel = g_te == k
                p_te[sel] = torch.sigmoid(o_e[sel] / t_k)
        probs.append(p_te.numpy())
    return np.mean(probs, axis=0)


def _ece(p: np.ndarray, y: np.ndarray, bins: int = 15) -> float:
    b = np.minimum((p * bins).astype(int), bins - 1)
    w = np.bincount(b, minlength=bins)
    return float(np.abs(np.bincount(b, p, bins) - np.bincount(b, y, bins)).sum() / max(1, w.sum()))


def _nll(p: np.ndarray, y: np.ndarray) -> float:
    q = np.clip(p.astype(np.float64), 1e-12, 1 - 1e-12)
    return float(-np.mean(y * np.log(q) + (1 - y) * np.log1p(-q)))


def run(n: int, m: int, threads: int) -> list[list[Any]]:
    """Time both programs on the same rows at ``n`` rows (D_val) and compare their test predictions."""
    import torch

    from benchmarks.bench_vrsag import make_data
    from calib_jax.calibrators import sag

    torch.set_num_threads(threads)
    o, y, z = make_data(n, m, seed=0)
    o_ho, y_ho, z_ho = make_data(n // 4, m, seed=1)
    o_te, y_te, z_te = make_data(n, m, seed=2)
    key = jax.random.key(0)
    init = sag.init_params(key, m, n_groups=K, n_partitions=P, head_bias=False, tau_init=TAU0)
    kw: dict[str, Any] = dict(key=key, context={"embedding": z}, protocol="reference", variant="ts",
                              min_support=0.0, min_events=0.0,
                              holdout={"logits": o_ho, "labels": y_ho, "embedding": z_ho})
    rows: list[list[Any]] = []
    cfg = f"n={n}, m={m}, P={P}, K={K}, steps={STEPS}, torch threads={threads}"

    def ours(solver: str) -> tuple[np.ndarray, float, float]:
        t0 = time.perf_counter()
        params = jax.block_until_ready(sag.fit(o, y, init=init, solver=solver, **kw))
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        params = jax.block_until_ready(sag.fit(o, y, init=init, solver=solver, **kw))
        again = time.perf_counter() - t0
        return np.asarray(sag.predict(params, o_te, context={"embedding": z_te}), np.float64), first, again

    p_seq, seq_first, seq_s = ours("sequential")
    p_lock, _, lock_s = ours("lockstep")
    _torch_fit(o[:500], y[:500], z[:500], o_ho[:200], y_ho[:200], z_ho[:200], o_te[:10], z_te[:10], None, seed=1)
    t0 = time.perf_counter()  # PyTorch warmed up above (its thread pool, kernels) as this library is compiled
    p_same = _torch_fit(o, y, z, o_ho, y_ho, z_ho, o_te, z_te, np.asarray(init.W), seed=0)
    torch_same_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    p_own = _torch_fit(o, y, z, o_ho, y_ho, z_ho, o_te, z_te, None, seed=0)
    torch_own_s = time.perf_counter() - t0
    rows += [[n, "torch_fit_same_init_s", torch_same_s, cfg], [n, "torch_fit_own_init_s", torch_own_s, cfg],
             [n, "calib_jax_fit_first_s", seq_first, cfg], [n, "calib_jax_fit_s", seq_s, cfg],
             [n, "calib_jax_lockstep_fit_s", lock_s, cfg],
             [n, "ratio_torch_over_calib_jax", torch_same_s / seq_s, cfg],
             [n, "ratio_torch_over_calib_jax_lockstep", torch_same_s / lock_s, cfg]]
    for name, p in (("calib_jax", p_seq), ("calib_jax_lockstep", p_lock), ("torch_same_init", p_same),
                    ("torch_own_init", p_own)):
        rows += [[n, f"{name}_test_nll", _nll(p, y_te), cfg], [n, f"{name}_test_ece", _ece(p, y_te), cfg]]
    for name, p in (("torch_same_init", p_same), ("torch_own_init", p_own), ("calib_jax_lockstep", p_lock)):
        d = np.abs(p - p_seq)
        rows += [[n, f"max_abs_diff_{name}_vs_calib_jax", float(d.max()), cfg],
                 [n, f"mean_abs_diff_{name}_vs_calib_jax", float(d.mean()), cfg]]
    rows.append([n, "uncalibrated_test_nll", _nll(1 / (1 + np.exp(-o_te.astype(np.float64))), y_te), cfg])
    return rows


def main(argv: Sequence[str] | None = None) -> list[list[Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100_000])
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2, help="PyTorch's intra-op threads (the machine's cores)")
    ap.add_argument("--out", default=str(RESULTS / "sag_torch"))
    args = ap.parse_args(argv)
    from calib_jax.io import atomic_write_text, markdown_table, write_csv

    rows = [r for n in args.n for r in run(n, args.m, args.threads)]
    header = ["n", "quantity", "value", "config"]
    out = Path(args.out)
    write_csv(out.with_suffix(".csv"), header, rows)
    text = ("# SAG (reference protocol, TS) against the reference code's protocol in PyTorch\n\n"
            "Same rows (D_val, a hold-out split of a quarter of its size, a test split as large), idle CPU. "
            "`ratio_torch_over_calib_jax`: the PyTorch fit's seconds over this library's (second call, "
            "compiled). Differences are of the test probabilities.\n\n" + markdown_table(header, rows, digits=4)
            + "\n")
    atomic_write_text(out.with_suffix(".md"), text)
    print(text)
    return rows


if __name__ == "__main__":
    main()
