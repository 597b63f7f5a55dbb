"""False alarms of ``calib-jax apply``'s warnings on what the fit never saw, where nothing changed.

    python -m benchmarks.unseen_alarms [--reps 1000]

Each replication draws a fit log and an applied log of the same distribution, so every warning
is a false alarm:

* a field: levels Zipf-distributed over 2,000 values (the probability of the r-th proportional
  to r^-1.1); the fit keeps its ``max_levels`` most frequent levels (the command's rule,
  ties by name) and records the share of its rows in ``__other__``; the applied log's rows at
  levels the fit did not keep are counted (:class:`calib_jax.logs.unseen.UnseenInputs`, the
  code ``apply`` runs) against the share of new rows the fit expects there
  (:func:`calib_jax.logs.unseen.expected_new_share`, what ``fit`` records, through the fit's own
  vocabulary rule, :func:`calib_jax.logs.params.field_vocabulary`);
* a feature: standard normal values; the fit records its range, and the rows outside it are
  counted against the 2 / (n + 1) expected of n fitted rows.

Either warns more than 10 points and three binomial standard errors above what it expects.

The fit log has 10^3 or 10^5 rows, the applied log 10 to 10^5 (unequal sizes in both
directions). The table gives the share of replications that warned, with its binomial standard
error. Results: ``benchmarks/results/unseen_alarms.{csv,md}``; the command guide
(docs/guide/cli.md) quotes them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.pages import write_page
from calib_jax.logs.params import field_vocabulary
from calib_jax.logs.unseen import UnseenInputs

OUT = Path(__file__).parent / "results" / "unseen_alarms"
LEVELS = 2_000


def _field_alarm(rng: np.random.Generator, p: np.ndarray, n_fit: int, n_apply: int, max_levels: int) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    fit = rng.choice(LEVELS, n_fit, p=p).astype(str)
    vocab, new = field_vocabulary(pa.table({"f": fit}), "f", max_levels)  # the fit's own rule and record
    share = 1.0 - float(np.isin(fit, vocab).mean())
    tally = UnseenInputs({"fields": ["f"], "vocabularies": {"f": vocab}, "other_share": {"f": share},
                         "new_share": {"f": new}, "rows": n_fit})
    text = pa.array(rng.choice(LEVELS, n_apply, p=p).astype(str))
    tally.add("f", text, pc.index_in(text, value_set=pa.array(vocab)))
    tally.rows = n_apply
    return any(warn for _, warn in tally.messages())


def _feature_alarm(rng: np.random.Generator, n_fit: int, n_apply: int) -> bool:
    fit = rng.normal(size=n_fit)
    tally = UnseenInputs({"fields": [], "features": ["x"], "feature_range": [[fit.min(), fit.max()]], "rows": n_fit})
    tally.add_feature("x", rng.normal(size=n_apply))
    tally.rows = n_apply
    return any(warn for _, warn in tally.messages())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1000)
    args = ap.parse_args(argv)
    p = np.arange(1, LEVELS + 1) ** -1.1
    p /= p.sum()
    rows = []
    for n_fit in (1_000, 100_000):
        for n_apply in (10, 100, 1_000, 100_000):
            rng = np.random.default_rng([n_fit, n_apply])
            for what, kept in (("field (50 levels kept)", 50), ("field (1,000 levels kept)", 1_000), ("feature", 0)):
                rate = float(np.mean([_field_alarm(rng, p, n_fit, n_apply, kept) if kept
                                      else _feature_alarm(rng, n_fit, n_apply) for _ in range(args.reps)]))
                rows.append([what, n_fit, n_apply, args.reps, rate, float(np.sqrt(rate * (1 - rate) / args.reps))])
    text = ("# False alarms of apply's warnings on what the fit never saw\n\n"
            "The fit log and the applied log come from one distribution, so every warning is false "
            "(`python -m benchmarks.unseen_alarms`, see its docstring). A field's warning fires when "
            "the applied rows at levels the fit did not keep exceed the share the fit expects on new rows "
            "(its rows in __other__ plus those whose kept level it saw once) by more than 10 points and "
            "three binomial standard errors; a feature's when the rows outside the fit's range exceed "
            "2 / (n + 1) the same way.\n\n")
    write_page(OUT, text, ["input", "fit_rows", "applied_rows", "reps", "false_alarm_rate", "se"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
