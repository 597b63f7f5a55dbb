"""Sato, "Calibrating the Predictions for Top-N Recommendations" (paper 003): TNF lowers ECE@N."""

from __future__ import annotations

from experiments.ledger.rows import (
    NO_CI,
    Row,
    make_row,
)
from experiments.ledger.sources import (
    load,
)

_RECOMMENDER = {"world": "simulated user x item recommender", "mechanism": "yes"}
#: the rating task's rows (summary keys "ML-100K/<recommender>/<calibrator>"): real ratings
_MOVIELENS = {"world": "MovieLens-100K ratings", "mechanism": "partly"}



def claims_topn() -> list[Row]:
    """Top-N calibration, Sato: TNF lowers ECE@N and RDECE@N (Tables 1-2), on a simulated recommender."""
    rows: list[Row] = []
    src = load("topn_calibration")
    if src is not None and any("/" in k for k in src.summary):
        for k, v in src.summary.items():
            if not isinstance(v, dict) or "ECE@N TNF" not in v:
                continue
            world = _MOVIELENS if k.startswith("ML-100K/") else _RECOMMENDER
            table = ("Tables 1-2 (MovieLens-100K, the rating task of Table 1)" if k.startswith("ML-100K/")
                     else "Tables 1-2 (simulated recommender)")
            for metric in ("ECE@N", "RDECE@N"):  # the paper's second baseline: TNF below VAD too
                pv = v.get(f"{metric} TNF - VAD")
                if pv is not None:
                    rows.append(make_row("003", table, f"TNF below VAD on {metric}: {k}",
                                         f"{metric}(TNF) < {metric}(VAD)", ours=pv["diff"], lo=pv["lo"], hi=pv["hi"],
                                         claimed="< 0", scale=src.scale, **world,
                                         source=src.cite(f"{k}/{metric} TNF - VAD/diff"),
                                         note=f"TNF minus VAD; {metric} {v[f'{metric} TNF']:.4g} vs "
                                              f"{v[f'{metric} VAD']:.4g}; t-interval over {pv['n']} "
                                              "independent splits"))
            d = v["ECE@N TNF"] - v["ECE@N original"]
            rd = v.get("RDECE@N TNF - original")
            if rd is not None:
                rows.append(make_row("003", table, f"TNF lowers RDECE@N: {k}",
                                     "RDECE@N(TNF) < RDECE@N(original)", ours=rd["diff"], lo=rd["lo"], hi=rd["hi"],
                                     claimed="< 0", scale=src.scale,
                                     **world, source=src.cite(f"{k}/RDECE@N TNF - original/diff"),
                                     note=f"TNF minus original; RDECE@N {v['RDECE@N TNF']:.4g} vs "
                                          f"{v['RDECE@N original']:.4g}; t-interval over {rd['n']} independent splits"))
            pt = v.get("ECE@N TNF - original")
            if pt is not None:
                rows.append(make_row("003", table, f"TNF lowers ECE@N: {k}",
                                     "ECE@N(TNF) < ECE@N(original)", ours=pt["diff"], lo=pt["lo"], hi=pt["hi"],
                                     claimed="< 0", scale=src.scale, **world,
                                     source=src.cite(f"{k}/ECE@N TNF - original/diff"),
                                     note=f"TNF minus original (< 0: TNF lower); ECE@N {v['ECE@N TNF']:.4g} vs "
                                          f"{v['ECE@N original']:.4g}; t-interval over {pt['n']} independent "
                                          "splits (split, recommender and calibrators refitted)"))
                continue
            rows.append(make_row("003", table, f"TNF lowers ECE@N: {k}",
                                 "ECE@N(TNF) < ECE@N(original)", ours=v["ECE@N TNF"],
                                 claimed=f"< {v['ECE@N original']:.6g}", scale=src.scale, **world,
                                 source=src.cite(f"{k}/ECE@N TNF"),
                                 why_no_interval=NO_CI.format(study="topn_calibration"),
                                 note=f"original {v['ECE@N original']:.4g} ({d:+.4g})"))
    return rows
