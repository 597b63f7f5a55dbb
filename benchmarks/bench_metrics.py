"""Side-by-side timing of calib_jax metrics against third-party anchors.

At n = 10^6 (one run, one machine) every calib_jax metric is jitted, warmed up, and timed
as the best of several repeats with ``block_until_ready``; next to it, each anchor
implementation of the same quantity (best of a few repeats, after one warm-up call).
Anchors that are not installed (netcal, mcgrad need torch) are skipped with a note.

Targets: sort-free metrics >= 10x faster than their fastest anchor; sort-based ones (AUC,
Spearman, equal-mass ECE, CORP) no slower than the fastest anchor.

Run:  python -m benchmarks.bench_metrics [--n 1000000] [--repeats 5]
Writes benchmarks/results/metrics.{md,csv}.
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import unchecked

RESULTS = Path(__file__).resolve().parent / "results"


# ------------------------------------------------------------------ timing helpers


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """Best wall time of ``fn()`` over ``repeats`` calls, after one warm-up call."""
    jax.block_until_ready(fn())
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return best


def _optional(module: str):
    try:
        return importlib.import_module(module)
    except Exception as exc:  # missing package or missing torch
        return exc


# ------------------------------------------------------------------ plain-NumPy anchors


def np_ece(p, y, n_bins=15):
    ids = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)
    sp = np.bincount(ids, p, minlength=n_bins)
    sy = np.bincount(ids, y, minlength=n_bins)
    return float(np.sum(np.abs(sp - sy)) / p.size)


def np_ece_quantile(p, y, n_bins=15):
    order = np.argsort(p, kind="stable")
    ids = np.empty(p.size, dtype=np.int64)
    ids[order] = np.arange(p.size) * n_bins // p.size
    sp = np.bincount(ids, p, minlength=n_bins)
    sy = np.bincount(ids, y, minlength=n_bins)
    return float(np.sum(np.abs(sp - sy)) / p.size)


def np_gce(p, y, g, k):
    c = np.bincount(g, minlength=k)
    sp = np.bincount(g, p, minlength=k)
    sy = np.bincount(g, y, minlength=k)
    ok = c > 0
    return float(np.sum((sp[ok] - sy[ok]) ** 2 / c[ok]) / p.size)


def np_field_ece(p, y, f, k):
    return float(np.sum(np.abs(np.bincount(f, y - p, minlength=k))) / p.size)


def np_field_rce(p, y, f, k, eps=0.01):
    nz = np.bincount(f, minlength=k)
    num = np.abs(np.bincount(f, y - p, minlength=k))
    den = np.bincount(f, y + eps, minlength=k)
    ok = nz > 0
    return float(np.sum(nz[ok] * num[ok] / den[ok]) / p.size)


def np_abs_bias(p, y, f, k):
    nz = np.bincount(f, minlength=k)
    sp = np.bincount(f, p, minlength=k)
    sy = np.bincount(f, y, minlength=k)
    ok = sy > 0
    w = nz[ok] / nz[ok].sum()
    return float(np.sum(w * np.abs(sp[ok] / sy[ok] - 1)))


def np_brier_grouping(p, y, g, k):
    c = np.bincount(g, minlength=k).astype(np.float64)
    s = [np.bincount(g, v, minlength=k) for v in (p, y, p * p, p * y)]
    ok = c > 0
    mu, pi = s[0][ok] / c[ok], s[1][ok] / c[ok]
    var = s[2][ok] / c[ok] - mu**2
    cov = s[3][ok] / c[ok] - mu * pi
    w = c[ok] / p.size
    yb = y.mean()
    return (yb * (1 - yb), np.sum(w * (mu - pi) ** 2), np.sum(w * (pi - yb) ** 2),
            np.sum(w * (var - 2 * cov)))


def np_kl(p, o):
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(o > 0, o * np.log(o / p), 0.0)
        b = np.where(o < 1, (1 - o) * np.log((1 - o) / (1 - p)), 0.0)
    return float(np.mean(a + b))


def gce_on_sorted_clusters(z, p, y, cuts):
    ids = np.searchsorted(cuts, z, side="right")
    return np_gce(p, y, ids, len(cuts) + 1)


# ------------------------------------------------------------------ the benchmark


def build_cases(n: int, seed: int = 0):
    from calib_jax import decompositions as D
    from calib_jax import metrics as M

    rng = np.random.default_rng(seed)
    z = rng.normal(-3.0, 1.2, n)
    p = 1.0 / (1.0 + np.exp(-z))
    oracle = 1.0 / (1.0 + np.exp(-(z + rng.normal(0, 0.4, n))))
    y = (rng.uniform(size=n) < oracle).astype(np.float64)
    field = rng.integers(0, 64, n)
    K = 16
    groups = rng.integers(0, K, n)
    p32, y32, z32, o32 = (jnp.asarray(a, dtype=jnp.float32) for a in (p, y, z, oracle))
    f_j, g_j = jnp.asarray(field, dtype=jnp.int32), jnp.asarray(groups, dtype=jnp.int32)
    key = jax.random.key(seed)

    sk_metrics = _optional("sklearn.metrics")
    sk_cluster = _optional("sklearn.cluster")
    scipy_stats = _optional("scipy.stats")
    ckmeans = _optional("ckmeans")
    netcal = _optional("netcal.metrics")
    mcgrad = _optional("mcgrad.metrics")
    mds = _optional("model_diagnostics.scoring")

    def have(mod):
        return not isinstance(mod, Exception)

    def jit(f, *args, **static):
        """The jitted call as users get it (input checks traced in), with ``.unchecked``: the
        same call traced under :func:`calib_jax.unchecked` (checks left out), for the column
        that shows what the checks cost."""
        g = jax.jit(partial(f, **static))
        gu = jax.jit(partial(f, **static))
        with unchecked():
            jax.block_until_ready(gu(*args))  # traced (and compiled) inside the block

        def call():
            return g(*args)

        call.unchecked = lambda: gu(*args)  # type: ignore[attr-defined]
        return call

    cases = []

    def case(name, kind, jax_fn, anchors, *, numpy_is_anchor=False):
        """``numpy_is_anchor``: the hand-written NumPy version is the anchor (field
        and oracle metrics); otherwise it is shown for reference and not used for the target."""
        anchors = [(a + ("" if numpy_is_anchor or not a.startswith("numpy") else " [ref]"), f, ok)
                   for a, f, ok in anchors]
        cases.append(dict(name=name, kind=kind, jax=jax_fn,
                          anchors=[(a, f) for a, f, ok in anchors if ok],
                          missing=[a for a, _, ok in anchors if not ok]))

    case("brier", "sort-free", jit(M.brier, p32, y32), [
        ("sklearn brier_score_loss",
         lambda: sk_metrics.brier_score_loss(y, p), have(sk_metrics)),
        ("numpy", lambda: float(np.mean((y - p) ** 2)), True)])
    case("nll (logits)", "sort-free", jit(M.nll_logits, z32, y32), [
        ("sklearn log_loss", lambda: sk_metrics.log_loss(y, p), have(sk_metrics)),
        ("numpy", lambda: float(np.mean(np.logaddexp(0, z) - y * z)), True)])
    case("ece uniform (15 bins)", "sort-free", jit(M.ece, p32, y32, n_bins=15), [
        ("netcal ECE", lambda: netcal.ECE(bins=15).measure(p, y.astype(np.int64)), have(netcal)),
        ("mcgrad ECE", lambda: mcgrad.expected_calibration_error(y, p, num_bins=15),
         have(mcgrad)),
        ("numpy bincount", lambda: np_ece(p, y), True)])
    case("ece quantile (15 bins)", "sort-based",
         jit(M.ece, p32, y32, n_bins=15, strategy="quantile"), [
             ("mcgrad ACE", lambda: mcgrad.adaptive_calibration_error(y, p, num_bins=15),
              have(mcgrad)),
             ("numpy argsort", lambda: np_ece_quantile(p, y), True)])
    case("gce (16 hard groups)", "sort-free", jit(M.gce, p32, y32, g_j, n_groups=K), [
        ("numpy bincount", lambda: np_gce(p, y, groups, K), True)], numpy_is_anchor=True)

    def sk_lcce():
        km = sk_cluster.KMeans(4, n_init=4, random_state=0).fit(z[:, None])
        c = np.sort(km.cluster_centers_[:, 0])
        return gce_on_sorted_clusters(z, p, y, 0.5 * (c[1:] + c[:-1]))

    def ck_lcce():
        cl = ckmeans.ckmeans(z, 4)
        return gce_on_sorted_clusters(z, p, y, np.array([c.max() for c in cl[:-1]]))

    lcce_anchors = [("sklearn KMeans(k=4, n_init=4) + GCE", sk_lcce, have(sk_cluster)),
                    ("ckmeans (exact DP) + GCE", ck_lcce, have(ckmeans))]
    case("lcce random (k=4, 4 restarts)", "sort-free",
         jit(lambda z, y, k: M.lcce(z, y, key=k, n_clusters=4, n_restarts=4, init="random"),
             z32, y32, key), lcce_anchors)
    case("lcce quantile init (k=4)", "sort-free",
         jit(M.lcce, z32, y32, n_clusters=4, init="quantile"), lcce_anchors)
    case("lcce optimal (k=4)", "sort-free",
         jit(M.lcce, z32, y32, n_clusters=4, init="optimal"), lcce_anchors)
    case("field_ece (64 fields)", "sort-free", jit(M.field_ece, p32, y32, f_j, n_groups=64), [
        ("numpy bincount", lambda: np_field_ece(p, y, field, 64), True)], numpy_is_anchor=True)
    case("field_rce (64 fields)", "sort-free", jit(M.field_rce, p32, y32, f_j, n_groups=64), [
        ("numpy bincount", lambda: np_field_rce(p, y, field, 64), True)], numpy_is_anchor=True)
    case("abs_bias (64 fields)", "sort-free", jit(M.abs_bias, p32, y32, f_j, n_groups=64), [
        ("numpy bincount", lambda: np_abs_bias(p, y, field, 64), True)], numpy_is_anchor=True)
    case("brier_grouping (16 groups)", "sort-free",
         jit(D.brier_grouping, p32, y32, g_j, n_groups=K), [
             ("model-diagnostics decompose (CORP)",
              lambda: mds.decompose(y, p, scoring_function=mds.SquaredError()), have(mds)),
             ("numpy bincount", lambda: np_brier_grouping(p, y, groups, K), True)])
    case("corp (Brier, isotonic)", "sort-based", jit(D.corp, p32, y32), [
        ("model-diagnostics decompose",
         lambda: mds.decompose(y, p, scoring_function=mds.SquaredError()), have(mds))])
    case("auc", "sort-based", jit(M.auc, p32, y32), [
        ("sklearn roc_auc_score", lambda: sk_metrics.roc_auc_score(y, p), have(sk_metrics))])
    case("spearman", "sort-based", jit(M.spearman, p32, o32), [
        ("scipy spearmanr", lambda: scipy_stats.spearmanr(p, oracle).statistic,
         have(scipy_stats))])
    case("pearson", "sort-free", jit(M.pearson, p32, o32), [
        ("scipy pearsonr", lambda: scipy_stats.pearsonr(p, oracle).statistic, have(scipy_stats)),
        ("numpy corrcoef", lambda: np.corrcoef(p, oracle)[0, 1], True)])
    case("oracle_brier", "sort-free", jit(M.oracle_brier, p32, o32), [
        ("numpy", lambda: float(np.mean((oracle - p) ** 2)), True)], numpy_is_anchor=True)
    case("oracle_kl", "sort-free", jit(M.oracle_kl, p32, o32), [
        ("numpy", lambda: np_kl(p, oracle), True)], numpy_is_anchor=True)
    case("oracle_mae", "sort-free", jit(M.oracle_mae, p32, o32), [
        ("numpy", lambda: float(np.mean(np.abs(oracle - p))), True)], numpy_is_anchor=True)
    return cases


def run(n: int, repeats: int, anchor_repeats: int, seed: int = 0):
    """Time every case; returns (all rows, one summary row per metric)."""
    rows, summary = [], []
    for c in build_cases(n, seed):
        t_jax = best_time(c["jax"], repeats)
        t_unc = best_time(c["jax"].unchecked, repeats) if hasattr(c["jax"], "unchecked") else float("nan")
        timed = [(a, best_time(f, anchor_repeats)) for a, f in c["anchors"]]
        counted = [t for t in timed if not t[0].endswith("[ref]")]
        fastest = min(counted, key=lambda t: t[1]) if counted else None
        for a, t in timed:
            rows.append([c["name"], c["kind"], t_jax, a, t, t / t_jax,
                         fastest is not None and a == fastest[0]])
        for a in c["missing"]:
            rows.append([c["name"], c["kind"], t_jax, f"{a} (not installed)", "", "", False])
        if fastest is not None:
            target = 10.0 if c["kind"] == "sort-free" else 1.0
            verdict = "met" if fastest[1] / t_jax >= target else "MISSED"
            summary.append([c["name"], c["kind"], t_jax, fastest[0], fastest[1],
                            fastest[1] / t_jax, f">= {target:g}x", verdict, t_unc])
            print(f"{c['name']:<32} calib_jax {t_jax * 1e3:9.2f} ms (unchecked {t_unc * 1e3:9.2f}) | fastest anchor "
                  f"{fastest[0]:<38} {fastest[1] * 1e3:9.2f} ms | speed-up "
                  f"{fastest[1] / t_jax:7.2f}x (target >= {target:g}x: {verdict})", flush=True)
    return rows, summary



def write_report(out: Path, title: str, intro: str, summary: tuple[list[str], list[list]],
                 everything: tuple[list[str], list[list]], everything_title: str) -> None:
    """Write ``out.{csv,md}`` (the summary table) and ``out_all.csv`` (every row), and a
    Markdown page: title, intro, summary, then every row under ``everything_title``."""
    from calib_jax.io import atomic_write_text, markdown_table, write_table

    out.parent.mkdir(parents=True, exist_ok=True)
    write_table(out.with_name(out.name + "_all"), *everything)
    write_table(out, *summary)
    atomic_write_text(out.with_suffix(".md"), f"{title}\n\n{intro}\n\n## Summary\n\n" + markdown_table(*summary)
                      + f"\n\n## {everything_title}\n\n" + markdown_table(*everything) + "\n")
    print(f"wrote {out.with_suffix('.md')}")

def main(argv: list[str] | None = None) -> list[list]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5, help="calib_jax repeats (best of)")
    ap.add_argument("--anchor-repeats", type=int, default=3, help="anchor repeats (best of)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=RESULTS / "metrics")
    args = ap.parse_args(argv)

    print(f"devices: {jax.devices()}  n = {args.n:,}")
    rows, summary = run(args.n, args.repeats, args.anchor_repeats, args.seed)
    header = ["metric", "kind", "calib_jax (s)", "anchor", "anchor (s)",
              "speed-up (anchor / calib_jax)", "fastest counted anchor"]
    all_rows = [[r[0], r[1], f"{r[2]:.5f}", r[3], r[4] if r[4] == "" else f"{r[4]:.5f}",
                 r[5] if r[5] == "" else f"{r[5]:.2f}", "yes" if r[6] else ""] for r in rows]
    s_header = ["metric", "kind", "calib_jax (s)", "fastest anchor", "anchor (s)", "speed-up",
                "target", "verdict", "calib_jax unchecked (s)"]
    s_rows = [[r[0], r[1], f"{r[2]:.5f}", r[3], f"{r[4]:.5f}", f"{r[5]:.2f}", r[6], r[7], f"{r[8]:.5f}"]
              for r in summary]
    write_report(args.out, f"# calib_jax metrics vs third-party anchors (n = {args.n:,})",
                 f"Devices: {jax.devices()}. calib_jax: jitted with its input checks (as users call it; the "
                 "last column: the same call traced under `calib_jax.unchecked()`), warmed up, best of "
                 f"{args.repeats}; "
                 f"anchors: best of {args.anchor_repeats} after one warm-up call. "
                 "Speed-up = anchor time / calib_jax time. Targets: sort-free >= 10x the "
                 "fastest anchor, sort-based >= 1x. Anchors marked [ref] are hand-written NumPy shown "
                 "for reference and not counted.", (s_header, s_rows), (header, all_rows), "All anchors")
    return rows


if __name__ == "__main__":
    main()
