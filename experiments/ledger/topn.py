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



def claims_topn() -> list[Row]:
    """Top-N calibration, Sato: TNF lowers ECE@N and RDECE@N (Tables 1-2), on a simulated recommender."""
    rows: list[Row] = []
    src = load("topn_calibration")
    if src is not None and any("/" in k for k in src.summary):
        for k, v in src.summary.items():
            if not isinstance(v, dict) or "ECE@N TNF" not in v:
                continue
            d = v["ECE@N TNF"] - v["ECE@N original"]
            rd = v.get("RDECE@N TNF - original")
            if rd is not None:
                rows.append(make_row("003", "Tables 1-2 (simulated recommender)", f"TNF lowers RDECE@N: {k}",
                                     "RDECE@N(TNF) < RDECE@N(original)", ours=rd["diff"], lo=rd["lo"], hi=rd["hi"],
                                     claimed="< 0", scale=src.scale,
                                     **_RECOMMENDER, source=src.cite(f"{k}/RDECE@N TNF - original/diff"),
                                     note=f"TNF minus original; RDECE@N {v['RDECE@N TNF']:.4g} vs "
                                          f"{v['RDECE@N original']:.4g}; t-interval over {rd['n']} independent splits"))
            pt = v.get("ECE@N TNF - original")
            if pt is not None:
                rows.append(make_row("003", "Tables 1-2 (simulated recommender)", f"TNF lowers ECE@N: {k}",
                                     "ECE@N(TNF) < ECE@N(original)", ours=pt["diff"], lo=pt["lo"], hi=pt["hi"],
                                     claimed="< 0", scale=src.scale, **_RECOMMENDER,
                                     source=src.cite(f"{k}/ECE@N TNF - original/diff"),
                                     note=f"TNF minus original (< 0: TNF lower); ECE@N {v['ECE@N TNF']:.4g} vs "
                                          f"{v['ECE@N original']:.4g}; t-interval over {pt['n']} independent "
                                          "splits (split, recommender and calibrators refitted)"))
                continue
            rows.append(make_row("003", "Tables 1-2 (simulated recommender)", f"TNF lowers ECE@N: {k}",
                                 "ECE@N(TNF) < ECE@N(original)", ours=v["ECE@N TNF"],
                                 claimed=f"< {v['ECE@N original']:.6g}", scale=src.scale, **_RECOMMENDER,
                                 source=src.cite(f"{k}/ECE@N TNF"),
                                 why_no_interval=NO_CI.format(study="topn_calibration"),
                                 note=f"original {v['ECE@N original']:.4g} ({d:+.4g})"))
    return rows
