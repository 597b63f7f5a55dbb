"""Tables 1-5 of "Calibration is Grouping": every calibrator on two simulator worlds and on Open Bandit logs.

Protocol ("Calibration is Grouping" §3.1 and App. I.1, and the reference code ThyrixYang/group_calibration
that App. I.1 says the SAG implementation was modified from):

* **Splits.** D_val (10% of the training period) is the backbone's validation split; the
  "standard test set" is the backbone's hold-out and test parts together. Each of
  ``n_splits`` random test splits (the paper's 100) draws a fresh hold-out calibration set
  D_ho (10% of the standard test set) and evaluates on the other 90%.
* **What is fitted where** (the reference code's ``train_set: test_train``): the classic
  calibrators (histogram binning, isotonic, Platt, temperature, beta, ILPS) are refitted on
  every split's D_ho; beyond the paper, Platt and temperature scaling are also fitted on
  D_val (``[D_val]`` rows, the same ``head_fits`` draws as the eq. 8-11 SAG), so the eq. 8-11
  orderings are also tested on equal rows (``claims``' third protocol; in the ledger these
  rows are paper claims whose note says the baseline saw D_val). SAG / VR-SAG under
  ``protocol="reference"`` train their grouping heads on D_val and refit one base calibrator per
  hard group on every split's D_ho; under ``protocol="paper"`` (eq. 8-11) every parameter is
  fitted on D_val. Neural Calibration (Field-aware Calibration (Pan et al.)) is fitted on D_val.
  Table cells are means over the splits, as in the paper.
* **Significance**, never from overlapping resamples of one fit: (a) a paired bootstrap over
  the evaluation rows of split 0 (B = ``n_boot`` resamples shared by all methods, so each
  difference is paired; ``calib_jax.bootstrap``) marks a cell ``**`` when its method is
  significantly best (every paired 95% interval against another method excludes 0) and
  ``*`` when it is best or tied with the best; (b) the method's interval, fits crossed with
  folds: each of ``n_folds`` independent folds is a test set of the standard test set's size
  split as a table split is (a D_ho of the same size, the rest evaluation rows), so a
  fold's calibrators are fitted and evaluated on exactly the amounts of data the table's
  are. On the simulator worlds the folds are fresh impressions of the same world logged after
  the backbone's log (``refit_rows="fresh"``,
  :func:`calib_jax.data.backbone.fresh_impressions`); on a real log (Open Bandit), or with
  ``refit_rows="folds"``, they are the standard test set cut into ``n_folds`` disjoint parts
  (each 1/``n_folds`` of a table split's size: the output's ``info`` says which). Every
  D_ho-fitted calibrator is refitted per fold and
  each of the ``head_fits`` D_val fits of a D_val-fitted method (SAG heads, Neural
  Calibration, MCGrad; each on its own key and its own bootstrap draw of D_val) is
  evaluated on every fold. A claim's difference is paired within fit and fold, and its
  interval (``refit_*``) is the crossed random-effects t-interval with Satterthwaite's
  degrees of freedom (:func:`experiments._pipelines.crossed_t_interval`): fit noise and
  split noise are both inside it; (c) the paper's own test, a paired t over the
  ``n_splits`` random splits (``paper_t_*``; its splits share the H fits, so it leaves out
  most fit noise), is reported beside it, labelled.
* **Four worlds** (``experiments/_datasets.py``, ``WORLD_SCOPE`` says what each can test):
  the default simulator backbone, where the residual miscalibration is by a latent regime
  the embedding does not encode (a null world for grouping); the "grouping world", where
  it is by a regime the embedding carries; and the "AdAuction-like world", where the score
  is the production pCTR that ran the auctions (selection bias, regime distortion carried
  by the embedding), matched to the paper's AdAuction Uncal row; and the "matched
  AdAuction-like world", whose settings a pilot (``experiments/world_match.py``) chose so that
  every baseline row without groups matches the paper's AdAuction column.

Beyond the paper: **MCGrad** (Tax et al., KDD 2026; the optional ``mcgrad``
package, ``calib_jax.calibrators.multicalibration``) joins as a baseline, fitted on D_val
``head_fits`` times like Neural Calibration and the eq. 8-11 SAG (MCGrad's own 5-fold early
stopping needs the rows; one fit costs about a minute on 94k rows), with the Neural Calibration fields as its
segment features and the backbone embedding as its numerical features. Every method also gets
the **multicalibration error** ``MCE`` (Guy et al. 2025, sigma scale) over the grouping field
and the Neural Calibration fields (``table_mce``); MCE sorts every segment, so its marks and
intervals come from the independent refits only. ``vs_mcgrad`` pairs VR-SAG (both protocols)
with MCGrad on oracle Brier, LCCE, MCE, ECE and NLL. Without ``mcgrad`` installed the row is
left out and the provenance says so.

Departures, each a setting (the paper-scale preset is the faithful one where noted):

* SAG heads (and Neural Calibration, MCGrad) are trained ``head_fits`` times per variant
  (keys 0..H-1, each on its own bootstrap draw of D_val as row multiplicities:
  ``head_draw="bootstrap"``; "same" fits every head on all of D_val) and split ``s`` uses
  fit ``s mod H``; the reference code retrains them for every one of its 100 seeds. Their
  D_ho stage is refitted on every split either way. (paper: H = 10; quick: H = 2; smoke: H = 1 on all of D_val.)
* The SAG heads are fitted together (the quick and paper presets, since 2026-12-05):
  ``sag_heads="together"`` steps all H heads' SAG partitions in one lock-step L-BFGS program
  (each head on its own draw; ``"lockstep"``: each head's partitions together, one head after
  another) instead of one partition after another (``"sequential"``, what a configuration
  without the setting means: the smoke preset, and the committed 15M-exposure runs, made
  before the switch). ``nc_heads="batched"`` trains the H Neural Calibration fits as one
  vmapped program instead of one after another; no preset uses it, since on two CPU cores it
  is slower (``benchmarks/results/heads.md``: 0.68x; ``heads_rerun_nc.md``: 83 s against 167 s
  in the matched world). Both batched ways equal the sequential fits only to float32 rounding
  of the batched sums, which a non-convex fit or an early-stopping choice can carry into
  another optimum (``benchmarks/results/sag_heads.md``, ``heads.md``: D_val predictions move
  by up to 1e-2). The paper and quick outputs were redone with the SAG heads together and
  compared with the sequential runs split by split (``benchmarks/results/heads_rerun.md``,
  ``benchmarks/compare_reruns.py``): at paper scale every other method repeats to the bit
  (but for a fix of MCE between the two commits), the changed methods' means move by at most
  0.09 of the 100 splits' standard deviation, and 302 of the 304 orderings keep their verdict
  (two in the null world, whose intervals had touched 0, became inconclusive). The paper
  output was redone once more with Neural Calibration's heads one by one, as the presets now
  fit them (``heads_rerun_nc.md``): every other method repeats to the bit, Neural
  Calibration's means move by at most 4e-4 of the splits' standard deviation, every verdict
  holds, and the phases took 60 min against 74. ``--set sag_heads=sequential`` gives the
  sequential fits; an optional setting (:data:`OPTIONAL_SETTINGS`) at its default stays out
  of the configuration, so such a run keeps the configuration, and the checkpoint folders, of
  the runs made before it existed.
* ``head_rows`` caps the rows of D_val the heads are trained on (quick: 20,000; paper: all).
  The group support checks and the D_ho stage use every row.
* L-BFGS runs at most ``sag_steps`` iterations (paper: 100, the reference's budget) and stops
  by torch.optim.LBFGS's rules as the reference does (``sag_stop="torch"``; ``"none"`` runs
  every iteration, as this study did before 2026-11-25).
* Fail-safe fits (``calib_jax.calibrators._failsafe``): groups or calibrators without
  support fall back; ``fallbacks.csv`` counts the fits with any fallback and the mean share of
  a fit's calibrators (SAG: its partition x group cells) that fell back, per method.

Outputs in ``figures/compare_calibrators[_paper]/``: ``table1`` (ECE, LCCE eq. 12, LCCE-l1 on
the ECE scale, Brier+ = oracle MAE, oracle Brier), ``table3`` (bias, abs_bias by the media /
item field), ``table4`` (AccDiff, AUCDiff), ``table5`` (NLL, AUC), ``table2`` (fit and predict
seconds) as CSV + Markdown + LaTeX; ``intervals`` (split 0 with 95% row-bootstrap
intervals), ``refits`` (per-fold values, mean over the fits), ``refits_crossed.npz``
(fits x folds), ``claims`` (VR-SAG < SAG < TS and the PS
chain with both kinds of interval), ``text_claims`` (the sentences of Tables 4-5 as paired
differences), ``vs_mcgrad``, ``table_mce``, ``fallbacks``, ``per_split.npz``, ``notes.md``
(tables as CSV + Markdown). The paper preset (or ``--resume``) checkpoints every finished data
set (:func:`_run_or_resume`) and the stages inside one (:func:`run_dataset`: the D_val fits of
every method, the splits, the bootstrap of every method, every refit fold), so a paper-scale
run that stops resumes where it stopped, to the same bits.

**The paper's data size.** ``--set sim=paper`` simulates each world at the size of the
paper's AdAuction data (about 15M logged impressions instead of 1.2M; 1.22M D_val rows and a
3.05M-row standard test set in the AdAuction-like world, and 30.5M fresh impressions for its
ten refit folds, kept memory-mapped on disk). The AdAuction-like world alone at that size:

    python -m experiments run compare_calibrators --paper --set sim=paper \
        --set "datasets=['simulator_adauction']" --out figures/compare_calibrators_paper_15m \
        --set sag_heads=sequential

(the last line gives the committed run's configuration, made before the preset fitted the heads
together; without it the same command fits them together, a new run).

That run is about 6.5 hours of compute on two CPU cores, longer than one working session on a
machine that does not keep its files. With ``CALIB_JAX_CHECKPOINTS`` pointing into the
repository (``runs/compare_calibrators_paper_15m``, see ``runs/README.md``) its stages are
committed and a fresh clone resumes them. They are small, except split 0's predictions (200 MB,
not committed), which the resumed run computes again to the same bits. The stages record a
fingerprint of the rows they were computed on and refuse a machine whose simulated log or
backbone differs (:meth:`~experiments._study.StageStore.check_data`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import bootstrap as boot
from calib_jax import metrics as M
from calib_jax._src import mappings
from calib_jax.calibrators import REGISTRY, CalibrationFallbackWarning, multicalibration, sag
from calib_jax.calibrators import neural_calibration as ncal
from experiments._compare_eval import (
    derived_bootstrap,
    derived_metrics,
    evaluate,
    evaluate_backbone,
    metric_function,
)
from experiments._datasets import WORLD_SCOPE, WORLDS, fresh_test_rows, load_dataset
from experiments._pipelines import crossed_t_interval, paired_t_interval
from experiments._study import Output, PhaseClock, StageStore, entry_point

STUDY = "compare_calibrators"


@dataclass(frozen=True)
class Method:
    """A row of the tables: ``fit_on`` is ``"none"`` (the backbone), ``"ho"`` (each split's
    D_ho), ``"val"`` (D_val once) or ``"ref"`` (SAG reference protocol: heads on D_val, the
    group calibrators on each split's D_ho)."""

    name: str
    registry: str | None
    fit_on: str
    hyper: Mapping[str, Any] = field(default_factory=dict)


def _sag_methods(protocol: str, tag: str, fit_on: str) -> tuple[Method, ...]:
    return tuple(Method(f"{label}{tag}", reg, fit_on, {"protocol": protocol})
                 for label, reg in (("SAG+PS", "sag_ps"), ("SAG+TS", "sag_ts"),
                                    ("VR-SAG+PS", "vrsag_ps"), ("VR-SAG+TS", "vrsag_ts")))


METHODS: tuple[Method, ...] = (
    Method("Uncal", None, "none"),
    Method("Histogram binning", "histogram_binning", "ho"),
    Method("Isotonic regression", "isotonic", "ho"),
    Method("Platt scaling", "platt", "ho"),
    Method("Temperature scaling", "temperature", "ho"),
    Method("Beta calibration", "beta", "ho"),
    Method("ILPS", "ilps", "ho"),
    *_sag_methods("reference", "", "ref"),
    *_sag_methods("paper", " [eq. 8-11]", "val"),
    # the global heads of eq. 8-11 fitted on the same D_val rows (and draws) as the eq. 8-11
    # SAG: the comparison without the data-size advantage of D_val over D_ho
    Method("Platt scaling [D_val]", "platt", "val"),
    Method("Temperature scaling [D_val]", "temperature", "val"),
    Method("Neural Calibration", "neural_calibration", "val"),
    # beyond the paper: the production multicalibration method, optional extra
    Method("MCGrad", "mcgrad", "val"),
)
_BY_NAME = {m.name: m for m in METHODS}

#: "lower" / "higher" is better / "abs" (closest to 0)
DIRECTION = {"ECE": "lower", "LCCE": "lower", "LCCE-l1": "lower", "Brier+": "lower",
             "Brier": "lower", "NLL": "lower", "AUC": "higher", "bias": "abs", "abs_bias": "lower",
             "AccDiff": "higher", "AUCDiff": "higher", "MCE": "lower"}
TABLES = {"table1": ("ECE", "LCCE", "LCCE-l1", "Brier+", "Brier"), "table3": ("bias", "abs_bias"),
          "table4": ("AccDiff", "AUCDiff"), "table5": ("NLL", "AUC"), "table_mce": ("MCE",)}
ORACLE = ("Brier+", "Brier")
#: the orderings of "Calibration is Grouping" Table 1 (A < B), per protocol
CHAINS = (("VR-SAG+TS", "SAG+TS"), ("SAG+TS", "Temperature scaling"), ("VR-SAG+TS", "Temperature scaling"),
          ("VR-SAG+PS", "SAG+PS"), ("SAG+PS", "Platt scaling"), ("VR-SAG+PS", "Platt scaling"))
CLAIM_METRICS = ("LCCE", "Brier", "ECE", "NLL")
#: beyond the paper: does VR-SAG beat MCGrad? (A < B on each metric; MCE from refits only)
MCGRAD_CHAINS = (("VR-SAG+TS", "MCGrad"), ("VR-SAG+PS", "MCGrad"), ("VR-SAG+TS [eq. 8-11]", "MCGrad"),
                 ("VR-SAG+PS [eq. 8-11]", "MCGrad"))
MCGRAD_METRICS = ("Brier", "LCCE", "MCE", "ECE", "NLL")

_ALL = tuple(m.name for m in METHODS)
_COMMON: dict[str, Any] = dict(datasets=("simulator", "simulator_grouping", "simulator_adauction", "simulator_matched",
                                         "open_bandit"),
                               sim="default", lcce_restarts=4, nc_steps=300, methods=_ALL,
                               sag_stop="torch", head_draw="bootstrap", refit_rows="fresh")
#: SAG L-BFGS stopping: "torch" = torch.optim.LBFGS's rules (the reference code's); "none" =
#: every one of ``sag_steps`` iterations (this study before 2026-11-25)
_SAG_STOP = {"torch": {}, "none": {"tol_grad": 0.0, "tol_change": 0.0, "max_evals": float("inf")}}

#: settings that are in a configuration only at a value other than this default
#: (``apply_overrides``): the ways of fitting the D_val heads. A configuration without them (the
#: smoke preset, the runs made before they existed) fits the heads one after another.
OPTIONAL_SETTINGS = {"sag_heads": "sequential", "nc_heads": "sequential"}
#: the quick and paper presets' way: every SAG head of a method in one lock-step program (equal
#: to the sequential fits to float32 rounding; the committed runs were redone with it,
#: 2026-12-05). Neural Calibration's heads stay one by one: its batched program is slower on
#: two CPU cores (module docstring).
_HEADS_TOGETHER = {"sag_heads": "together"}
PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {**_COMMON, "datasets": ("simulator",), "sim": "tiny", "n_splits": 2, "head_draw": "same",
              "n_folds": 2, "n_boot": 20, "head_fits": 1, "head_rows": 2000, "sag_steps": 5,
              "nc_steps": 5, "lcce_restarts": 1,
              "methods": ("Uncal", "Platt scaling", "Temperature scaling", "SAG+TS", "SAG+TS [eq. 8-11]")},
    "quick": {**_COMMON, **_HEADS_TOGETHER, "n_splits": 10, "n_folds": 5, "n_boot": 200, "head_fits": 2,
              "head_rows": 20_000, "sag_steps": 50},
    # the paper scale runs the matched world first (each finished world is checkpointed)
    "paper": {**_COMMON, **_HEADS_TOGETHER,
              "datasets": ("simulator_matched", "simulator_grouping", "simulator_adauction", "simulator",
                           "open_bandit"),
              "n_splits": 100, "n_folds": 10, "n_boot": 1000, "head_fits": 10, "head_rows": None,
              "sag_steps": 100, "nc_steps": 500, "checkpoint": True},
}


# ----------------------------------------------------------------------------- data
def _pool(out: Any) -> dict[str, np.ndarray | None]:
    """The standard test set: the backbone's hold-out and test parts, concatenated."""
    parts = (out.holdout, out.test)
    cat = lambda f: None if getattr(parts[0], f) is None else np.concatenate([getattr(q, f) for q in parts])
    return {f: cat(f) for f in ("logits", "labels", "embedding", "fields", "oracle")}


def _rows(data: Mapping[str, Any], rows: Any) -> dict[str, Any]:
    return {k: (None if v is None else v[rows]) for k, v in data.items()}


def _on_device(part: Mapping[str, Any]) -> dict[str, Any]:
    """``part``'s arrays as JAX arrays, converted once: the 19 predictions and evaluations of a
    split (or fold) then read them in place, instead of each copying them again (2.75M rows
    x 64 embedding columns are 0.7 GB; a copy took about 0.5 s per prediction). The values,
    and so every prediction and metric, are the same bits."""
    return {k: (None if v is None else jnp.asarray(v)) for k, v in part.items()}


def _split_parts(source: Mapping[str, Any], g_source: np.ndarray, ho_rows: Any, ev_rows: Any):
    """A split's (or fold's) hold-out rows (NumPy, for the D_ho fits), its evaluation rows and
    their segment codes (JAX arrays, converted once for every method: :func:`_on_device`)."""
    return _rows(source, ho_rows), _on_device(_rows(source, ev_rows)), jnp.asarray(g_source[ev_rows])


def _context(part: Mapping[str, Any], nc_cols: Sequence[int]) -> dict[str, Any]:
    return {"embedding": part["embedding"], "fields": part["fields"][:, nc_cols]}


def _fallbacks(params: Any) -> int:
    """1 when any fail-safe fallback fired in ``params`` (a ``fallback`` code or mask)."""
    code = getattr(params, "fallback", None)
    return int(code is not None and bool(np.any(np.asarray(code) != 0)))


def _fallback_share(params: Any) -> float:
    """The share of a fit's calibrators that fell back: of the (partition, group) cells of a
    SAG fit, 0 or 1 for a single calibrator. A method whose share is above one half in a
    world could not act there (the ledger's ``not tested``)."""
    code = getattr(params, "fallback", None)
    return 0.0 if code is None else float(np.mean(np.asarray(code) != 0))


# ----------------------------------------------------------------------------- fitting
@dataclass
class Fitted:
    """The fits of one data set that do not depend on the split: SAG heads (``"ref"`` and
    ``"val"`` methods) and the D_val-fitted calibrators."""

    heads: dict[str, list[Any]] = field(default_factory=dict)
    seconds: dict[str, list[float]] = field(default_factory=dict)


def _draw(n: int, key: jax.Array, how: str) -> np.ndarray | None:
    """The row weights of one head fit: None (every row of D_val once, ``how="same"``), or a
    bootstrap draw as multiplicities (``"bootstrap"``: n rows drawn with replacement; row i
    gets weight = how often it was drawn), so that each fit sees its own draw of D_val and
    the fit-to-fit spread estimates the method's spread over data sets. Weights, not
    duplicated rows: a calibrator that holds rows out for early stopping (Neural
    Calibration, MCGrad) would otherwise find copies of its training rows in its stop set."""
    if how == "same":
        return None
    if how != "bootstrap":
        raise ValueError(f"`head_draw` must be 'same' or 'bootstrap', got {how!r}")
    rows = np.asarray(jax.random.randint(key, (n,), 0, n))
    return np.bincount(rows, minlength=n).astype(np.float32)


def _fit_val_methods(methods: Sequence[Method], val: Mapping[str, Any], ho0: Mapping[str, Any],
                     cfg: Mapping[str, Any], nc_cols: Sequence[int], key: jax.Array, *,
                     done: tuple[list[Any], list[float]] | None = None,
                     on_fit: Callable[[list[Any], list[float]], None] | None = None) -> Fitted:
    """The D_val fits: ``head_fits`` fits of every SAG head, Neural Calibration and MCGrad, fit
    ``h`` with key ``fold_in(key, h)`` on its own draw of D_val (:func:`_draw`, key
    ``fold_in(key, 10_000 + h)``). With ``head_draw="same"`` the SAG heads of a method run as
    one program (:func:`calib_jax.calibrators.sag.fit_many`; equal to ``head_fits`` calls of
    ``fit``); with ``nc_heads="batched"`` the Neural Calibration fits run as one vmapped
    program (:func:`calib_jax.calibrators.neural_calibration.fit_many`, one weight row per
    draw; equal to the sequential fits to float32 rounding); with ``sag_heads="lockstep"`` each
    SAG head's partitions step together (``solver="lockstep"``) and with ``"together"`` all H
    heads' partitions step together, each head on its own draw (one ``fit_many`` call with a
    weight row per draw), both equal to the sequential fits to float32 rounding of the
    batched sums; otherwise the fits run one by one,
    and for a single method ``done`` (its first fits and their seconds, from a stopped run)
    resumes after them while ``on_fit`` receives the fits so far after each one but the last
    (for a checkpoint: one MCGrad fit on the paper's data size takes minutes). A method's
    seconds are its mean per fit."""
    fitted = Fitted()
    n_fits = int(cfg["head_fits"])
    how = cfg.get("head_draw", "same")
    sag_heads = cfg.get("sag_heads", "sequential")
    n_val = len(val["labels"])
    draws = [_draw(n_val, jax.random.fold_in(key, 10_000 + h), how) for h in range(n_fits)]
    keys = [jax.random.fold_in(key, h) for h in range(n_fits)]
    for m in methods:
        if m.fit_on not in ("val", "ref"):
            continue
        cal = REGISTRY[m.registry]
        is_sag = m.registry.startswith(("sag", "vrsag"))
        hyper: dict[str, Any] = dict(m.hyper)
        context = _context(val, nc_cols)
        if is_sag:
            hyper.update(n_steps=int(cfg["sag_steps"]), max_rows=cfg["head_rows"],
                         solver="sequential" if sag_heads == "sequential" else "lockstep",
                         **_SAG_STOP[cfg.get("sag_stop", "torch")])
            if m.fit_on == "ref":
                hyper["holdout"] = ho0
            hyper = {**cal.defaults, **hyper}
        elif m.registry == "neural_calibration":
            hyper["n_steps"] = int(cfg["nc_steps"])
        if is_sag and ((how == "same" and sag_heads == "sequential") or (sag_heads == "together" and done is None)):
            # the H heads in one call: one after another (sequential), or all H x P problems
            # evaluated together, each head on its own draw (together)
            t0 = time.perf_counter()
            weights = {} if draws[0] is None else {"weights": np.stack(draws)}
            heads = jax.block_until_ready(sag.fit_many(val["logits"], val["labels"], keys=keys, context=context,
                                                       **weights, **hyper))
            seconds = [time.perf_counter() - t0]
        elif m.registry == "neural_calibration" and cfg.get("nc_heads", "sequential") == "batched" and done is None:
            # the H fits as one vmapped program, each on its own draw of D_val (equal to the
            # sequential fits to float32 rounding of the batched products)
            t0 = time.perf_counter()
            weights = {} if draws[0] is None else {"weights": np.stack(draws)}
            heads = jax.block_until_ready(ncal.fit_many(val["logits"], val["labels"], keys=keys, context=context,
                                                        **weights, **hyper))
            seconds = [time.perf_counter() - t0]
        else:
            heads, seconds = (list(done[0]), list(done[1])) if done is not None else ([], [])
            for h in range(len(heads), n_fits):
                t0 = time.perf_counter()
                weights = {} if draws[h] is None else {"weights": draws[h]}
                if is_sag:
                    one = sag.fit_many(val["logits"], val["labels"], keys=[keys[h]], context=context, **weights,
                                       **hyper)[0]
                else:
                    one = cal.fit(val["logits"], val["labels"], key=keys[h], context=context, **weights, **hyper)
                heads.append(jax.block_until_ready(one))
                seconds.append(time.perf_counter() - t0)
                if on_fit is not None and h + 1 < n_fits:
                    on_fit(heads, seconds)
        fitted.heads[m.name] = heads
        fitted.seconds[m.name] = [sum(seconds) / n_fits] * n_fits
    return fitted


def _split_params(m: Method, fitted: Fitted, ho: Mapping[str, Any], s: int, key: jax.Array,
                  nc_cols: Sequence[int]) -> tuple[Any, float]:
    """Parameters of method ``m`` for a split (or fold) with hold-out part ``ho``."""
    if m.fit_on == "none":
        return None, 0.0
    t0 = time.perf_counter()
    if m.fit_on == "ho":
        params = REGISTRY[m.registry].fit(ho["logits"], ho["labels"], key=key,
                                          context=_context(ho, nc_cols), **m.hyper)
    else:
        heads = fitted.heads[m.name]
        params = heads[s % len(heads)]
        if m.fit_on == "ref":
            params = sag.refit_groups(params, ho["logits"], ho["labels"],
                                      context={"embedding": ho["embedding"]},
                                      variant=REGISTRY[m.registry].defaults["variant"])
    jax.block_until_ready(params)
    return params, time.perf_counter() - t0


def _predict(m: Method, params: Any, part: Mapping[str, Any], nc_cols: Sequence[int]) -> np.ndarray:
    if m.registry is None:
        return np.asarray(jax.nn.sigmoid(jnp.asarray(part["logits"])), np.float32)
    p = REGISTRY[m.registry].predict(params, part["logits"], context=_context(part, nc_cols))
    return np.clip(np.asarray(p, np.float32), 0.0, 1.0)


def _split_prediction(m: Method, params: Any, fitted: Fitted, pool: Mapping[str, Any], ev: Mapping[str, Any],
                      ev_rows: np.ndarray, s: int, pool_predictions: dict[tuple[str, int], np.ndarray],
                      nc_cols: Sequence[int]) -> np.ndarray:
    """Method ``m``'s predictions of split ``s``'s evaluation rows ``ev`` (row indices ``ev_rows``
    of the standard test set ``pool``). A :data:`ROW_WISE` head predicts the whole set once,
    kept in ``pool_predictions`` by (method, head), and the split reads its rows from that."""
    if m.registry in ROW_WISE and m.fit_on == "val":
        head = (m.name, s % len(fitted.heads[m.name]))
        if head not in pool_predictions:
            pool_predictions[head] = _predict(m, params, pool, nc_cols)
        return pool_predictions[head][ev_rows]
    return _predict(m, params, ev, nc_cols)


#: D_val-fitted methods whose predictions are computed row by row on the host, so that a row's
#: prediction does not depend on the other rows predicted with it (LightGBM's trees): each of
#: their heads predicts the standard test set once, and every split reads its rows from that
#: (one MCGrad prediction of 2.75M rows took about 19 s; a head serves ten of the 100 splits).
#: The JAX calibrators are left out: XLA may round a row differently in another batch shape.
ROW_WISE = ("mcgrad",)


# ----------------------------------------------------------------------------- one data set
#: with checkpoints on, the finished splits are saved at most this often (seconds) and after the last
STAGE_EVERY_S = 300.0


def _elapsed(clock: PhaseClock) -> str:
    """The data set's compute seconds so far (every phase, every run that resumed it)."""
    return f"{sum(clock.seconds.values()):.0f} s"


def _left(started: float, done: int, todo: int) -> str:
    """The time a loop has left at this run's pace so far: ``done`` items took the seconds since
    ``started``, ``todo`` remain (for the progress lines of a run of hours)."""
    return f"about {(time.perf_counter() - started) / max(done, 1) * todo:.0f} s left"


def run_dataset(name: str, config: Mapping[str, Any], out: Output, key: jax.Array,
                stages: StageStore | None = None) -> dict[str, Any] | None:
    """Fit and evaluate every method on data set ``name``; returns its raw results.

    With a :class:`~experiments._study.StageStore`, the stages inside the data set are saved
    as they finish: the D_val fits after every fit (after every method where its heads run as
    one program, ``head_draw="same"``); the splits so far (at most every :data:`STAGE_EVERY_S`
    seconds, and after the last); the row bootstrap after every method; the refits after every
    fold. A rerun resumes at the last saved stage and gives the
    uninterrupted run's bits (every key is folded from the split, fold or fit index). The phase
    seconds add up across runs, and ``info["stage_history"]`` lists the commit of every
    process that saved a stage (:meth:`~experiments._study.StageStore.history`)."""
    from calib_jax.data.splits import random_test_splits

    data = load_dataset(name, seed=int(config["seed"]), sim=config["sim"])
    if data is None:
        return None
    methods = [m for m in METHODS if m.name in config["methods"]]
    skipped = [m.name for m in methods if m.registry == "mcgrad" and not multicalibration.available()]
    if skipped:
        print(f"[{STUDY}] the optional `mcgrad` package is not installed: {skipped} left out "
              "(pip install 'calib_jax[mcgrad]')")
        methods = [m for m in methods if m.name not in skipped]
    nc_cols = data["nc_cols"]
    val = {f: getattr(data["out"].val, f) for f in ("logits", "labels", "embedding", "fields", "oracle")}
    pool = _pool(data["out"])
    n = len(pool["labels"])
    # column 0: the Table 3 grouping field; all columns: the multicalibration segments
    seg_cols = [data["group_col"], *(c for c in nc_cols if c != data["group_col"])]
    g_all = pool["fields"][:, seg_cols].astype(np.int32)
    n_groups = int(max(g_all[:, 0].max(), data["out"].val.fields[:, data["group_col"]].max())) + 1
    mce_levels = int(g_all.max()) + 1
    S, R = int(config["n_splits"]), int(config["n_folds"])
    splits = random_test_splits(jax.random.fold_in(key, 1), n, n_splits=S, holdout_frac=0.1)
    k_fit, k_metric, k_boot = (jax.random.fold_in(key, i) for i in (2, 3, 4))
    stat = metric_function(n_groups, int(config["lcce_restarts"]), data["has_oracle"], False,
                           tuple(int(x) for x in np.asarray(jax.random.key_data(k_metric)).ravel()), mce_levels)

    store = stages if stages is not None else StageStore(None)
    # the stages must be of these rows (another machine simulates them again)
    store.check_data({**{f"val.{k}": v for k, v in val.items()},
                      **{f"pool.{k}": pool[k] for k in ("logits", "labels", "fields", "oracle")}})
    clock = PhaseClock()
    saved = store.load("fits") or {"heads": {}, "seconds": {}, "clock": clock.seconds}
    clock.seconds.update(saved["clock"])
    fitted = Fitted(heads=saved["heads"], seconds=saved["seconds"])
    fits_phase = "D_val fits (SAG heads, Neural Calibration, MCGrad)"
    for m in methods:  # one method at a time (each is independent of the others), saved after each
        if m.fit_on not in ("val", "ref") or m.name in fitted.heads:
            continue
        started = time.perf_counter()

        def save_partial(heads: list[Any], seconds: list[float], name: str = m.name, started: float = started) -> None:
            # a method's first fits (their phase seconds included: the clock adds them only at the end)
            clk = {**clock.seconds, fits_phase: clock.seconds.get(fits_phase, 0.0) + time.perf_counter() - started}
            store.save("fits", {"heads": fitted.heads, "seconds": fitted.seconds, "partial": {name: (heads, seconds)},
                                "clock": clk})

        with clock(fits_phase):
            one = _fit_val_methods([m], val, _rows(pool, splits.holdout[0]), config, nc_cols, k_fit,
                                   done=saved.get("partial", {}).get(m.name), on_fit=save_partial)
        fitted.heads.update(one.heads)
        fitted.seconds.update(one.seconds)
        store.save("fits", {"heads": fitted.heads, "seconds": fitted.seconds, "clock": clock.seconds})
        if out.progress:
            print(f"[{STUDY}] {name}: D_val fits of {m.name} ({_elapsed(clock)})", flush=True)
    state = store.load("splits") or {
        "done": 0, "per_split": {m.name: {} for m in methods}, "fit_s": {m.name: [] for m in methods},
        "fallbacks": {m.name: 0 for m in methods}, "fallback_share": {m.name: 0.0 for m in methods},
        "clock": clock.seconds}
    clock.seconds.update(state["clock"])
    per_split: dict[str, dict[str, list[float]]] = state["per_split"]
    fit_s: dict[str, list[float]] = state["fit_s"]
    fallbacks, fallback_share = state["fallbacks"], state["fallback_share"]
    # split 0's predictions (the bootstrap's input) are saved once, not with every save of the splits
    split0: dict[str, np.ndarray] = store.load("split0") or {}
    last_save = started = time.perf_counter()
    first = state["done"]
    pool_predictions: dict[tuple[str, int], np.ndarray] = {}  # (method, head) -> its ROW_WISE scores of the pool
    for s in range(first, S):
        mappings.release_compiled_if_near_limit()  # between splits: XLA:CPU segfaults at the mapping cap
        ho, ev, g_ev = _split_parts(pool, g_all, splits.holdout[s], splits.evaluation[s])
        with clock("split metrics"):
            base = evaluate_backbone(stat, ev, g_ev)
        for m in methods:
            with clock("split fits (D_ho)"):
                params, secs = _split_params(m, fitted, ho, s, jax.random.fold_in(k_fit, 1000 + s), nc_cols)
            fit_s[m.name].append(secs)
            fallbacks[m.name] += _fallbacks(params)
            fallback_share[m.name] += _fallback_share(params) / S
            with clock("split predictions"):
                p = _split_prediction(m, params, fitted, pool, ev, splits.evaluation[s], s, pool_predictions, nc_cols)
            with clock("split metrics"):  # the uncalibrated row is the backbone's, already evaluated
                res = dict(base) if m.registry is None else {
                    k: float(v) for k, v in jax.device_get(evaluate(stat, p, ev, g_ev)).items()}
            for k, v in derived_metrics(res, base).items():
                per_split[m.name].setdefault(k, []).append(v)
            if s == 0:
                split0[m.name] = p
        if s == 0:
            store.save("split0", split0)
        if s + 1 == S or time.perf_counter() - last_save >= STAGE_EVERY_S:
            state.update(done=s + 1, clock=clock.seconds)
            store.save("splits", state)
            last_save = time.perf_counter()
        if out.progress:
            print(f"[{STUDY}] {name}: split {s + 1}/{S} ({_elapsed(clock)}; "
                  f"{_left(started, s + 1 - first, S - s - 1)} in the splits)", flush=True)

    # (a) paired row bootstrap on split 0 (shared resamples: replicate b is the same rows
    # for every method; each method's rows are sorted once for the presorted AUC)
    ev0 = _rows(pool, splits.evaluation[0])
    g0 = g_all[splits.evaluation[0]]
    sorted_stat = metric_function(n_groups, int(config["lcce_restarts"]), data["has_oracle"], True,
                                  tuple(int(x) for x in np.asarray(jax.random.key_data(k_metric)).ravel()))
    saved = store.load("boots") or {"boots": {}, "clock": clock.seconds}
    boots: dict[str, Any] = saved["boots"]
    clock.seconds.update(saved["clock"])
    # split 0's predictions of the methods still to bootstrap, computed again when their stage
    # was not kept (a run carried to another machine leaves it behind: 200 MB at 15M exposures)
    missing = [m for m in methods if m.name not in boots and m.name not in split0]
    if missing:
        ho, ev, _ = _split_parts(pool, g_all, splits.holdout[0], splits.evaluation[0])
        with clock("split predictions"):
            for m in missing:
                params, _ = _split_params(m, fitted, ho, 0, jax.random.fold_in(k_fit, 1000), nc_cols)
                split0[m.name] = _split_prediction(m, params, fitted, pool, ev, splits.evaluation[0], 0, {}, nc_cols)
        store.save("split0", split0)
        del ho, ev
    counts = None  # every method's resamples are the same rows: drawn once (uint8: 2.75 GB at 15M exposures)
    first, started = len(boots), time.perf_counter()
    for m in methods:
        if m.name in boots:
            continue
        if counts is None:
            with clock("row bootstrap (split 0)"):
                counts = boot.resample_counts(k_boot, len(g0), int(config["n_boot"]), dtype=jnp.uint8)
        p = split0[m.name]
        order = np.argsort(p, kind="stable")
        oracle = ev0["oracle"] if ev0["oracle"] is not None else p
        with clock("row bootstrap (split 0)"):
            boots[m.name] = boot.bootstrap(sorted_stat, p[order], ev0["logits"][order], ev0["labels"][order],
                                           g0[order], oracle[order], key=k_boot, n_boot=int(config["n_boot"]),
                                           row_order=order, counts=counts)
        store.save("boots", {"boots": boots, "clock": clock.seconds})
        if out.progress:
            print(f"[{STUDY}] {name}: row bootstrap of {m.name}, {len(boots)}/{len(methods)} methods "
                  f"({_elapsed(clock)}; {_left(started, len(boots) - first, len(methods) - len(boots))} "
                  "in the bootstrap)", flush=True)
    del counts, ev0, g0, split0  # 2.75 GB of counts and 0.9 GB of rows at 15M exposures: not held through the refits
    base_b = boots.get("Uncal")
    if base_b is not None:
        boots = {k: derived_bootstrap(b, base_b) for k, b in boots.items()}
    ranks = {metric: boot.rank_methods(boots, metric, better=DIRECTION[metric])
             for metric in DIRECTION if metric in next(iter(boots.values())).estimate}

    # (b) independent refits on independent folds, crossed with the H fits of every D_val-fitted
    # method (fit h on fold r); a D_ho-fitted method is refitted once per fold
    refit_rows = config.get("refit_rows", "fresh")
    if refit_rows not in ("fresh", "folds"):
        raise ValueError(f"`refit_rows` must be 'fresh' or 'folds', got {refit_rows!r}")
    refits = store.load("refits") or {"done": 0, "crossed": {m.name: {} for m in methods},
                                      "fallback_share": {m.name: 0.0 for m in methods}, "clock": clock.seconds}
    clock.seconds.update(refits["clock"])
    use_fresh = refit_rows == "fresh" and name in WORLDS  # else: folds (a data set that is not simulated)
    with clock("fresh impressions for the refits (simulate, score)"):
        fresh = (fresh_test_rows(name, seed=int(config["seed"]), n_rows=R * n, sim=config["sim"])
                 if use_fresh and refits["done"] < R else None)
    if use_fresh:  # R test sets of the table's size, each split as a table split
        source = None if fresh is None else {f: getattr(fresh, f) for f in ("logits", "labels", "embedding", "fields",
                                                                            "oracle")}
        g_source = None if source is None else source["fields"][:, seg_cols].astype(np.int32)
        size, n_ho = n, len(splits.holdout[0])
    else:  # the standard test set cut into R disjoint folds
        source, g_source = pool, g_all
        size = n // R
        n_ho = int(round(0.1 * size))
        perm = np.asarray(jax.random.permutation(jax.random.fold_in(key, 5), n))
    crossed: dict[str, dict[str, np.ndarray]] = refits["crossed"]
    # the fallbacks of the fits that give the verdicts (the ledger's "not tested" gate reads these)
    refit_fallback_share = refits["fallback_share"]
    first, started = refits["done"], time.perf_counter()
    for r in range(first, R):
        assert source is not None and g_source is not None
        if use_fresh:
            block = r * size + np.asarray(jax.random.permutation(jax.random.fold_in(key, 50 + r), size))
            ho_rows, ev_rows = np.sort(block[:n_ho]), np.sort(block[n_ho:])
        else:
            block = np.sort(perm[r * size:(r + 1) * size])
            ho_rows, ev_rows = block[:n_ho], block[n_ho:]
        ho, ev, g_ev = _split_parts(source, g_source, ho_rows, ev_rows)
        with clock("refits (folds x fits)"):
            base = evaluate_backbone(stat, ev, g_ev)
        for m in methods:
            n_h = len(fitted.heads[m.name]) if m.name in fitted.heads else 1
            for h in range(n_h):
                with clock("refits (folds x fits)"):
                    params, _ = _split_params(m, fitted, ho, h, jax.random.fold_in(k_fit, 5000 + r), nc_cols)
                    refit_fallback_share[m.name] += _fallback_share(params) / (R * n_h)
                    res = dict(base) if m.registry is None else {
                        k: float(v) for k, v in jax.device_get(evaluate(stat, _predict(m, params, ev, nc_cols), ev,
                                                                        g_ev)).items()}
                for k, v in derived_metrics(res, base).items():
                    crossed[m.name].setdefault(k, np.full((n_h, R), np.nan))[h, r] = v
        refits.update(done=r + 1, clock=clock.seconds)
        store.save("refits", refits)
        if out.progress:
            print(f"[{STUDY}] {name}: refit fold {r + 1}/{R} ({_elapsed(clock)}; "
                  f"{_left(started, r + 1 - first, R - r - 1)} in the refits)", flush=True)
    # per-fold values (the mean over the fits): the refit marks and refits.csv
    folds = {m: {k: [float(x) for x in np.mean(v, axis=0)] for k, v in mv.items()} for m, mv in crossed.items()}

    if any("MCE" in f for f in folds.values()):
        ranks["MCE"] = refit_ranks({m: f["MCE"] for m, f in folds.items() if "MCE" in f})
    info = dict(n_val=len(val["labels"]), n_standard_test=n, skipped_methods=skipped,
                mce_fields=[data["out"].field_names[c] for c in seg_cols], n_ho=len(splits.holdout[0]),
                n_eval=len(splits.evaluation[0]), clicks_standard_test=int(pool["labels"].sum()),
                has_oracle=data["has_oracle"], group_field=data["group_field"], n_splits=S, n_folds=R,
                phase_seconds=clock.seconds, stage_history=store.history(),
                fold_rows=size, refit_ho_rows=n_ho,
                refit_rows="fresh impressions of the same world" if use_fresh else
                "disjoint folds of the standard test set",
                backbone_auc_test=float(M.auc(1 / (1 + np.exp(-pool["logits"])), pool["labels"])))
    times = {m.name: {"fit_s": float(np.median(fitted.seconds.get(m.name, [0.0]) or [0.0])
                                     + np.median(fit_s[m.name]))} for m in methods}
    return dict(per_split=per_split, boots=boots, ranks=ranks, folds=folds, crossed=crossed,
                fallbacks=fallbacks, fallback_share=fallback_share, refit_fallback_share=refit_fallback_share,
                times=times, info=info)


# ----------------------------------------------------------------------------- claims
def refit_ranks(values: Mapping[str, Sequence[float]], level: float = 0.95) -> dict[str, dict[str, str]]:
    """Marks for a lower-is-better metric from independent refits (used for MCE, which is
    not in the row bootstrap): the method with the lowest mean is ``"significantly best"``
    when its paired fold t-interval against every other method lies below 0, else
    ``"best"``; a method whose interval against the best contains 0 is ``"tie"``. A method
    infinite in some refit (MCE divides by sigma = 0 on predictions of exactly 0 or 1) is
    worse than a finite best, with no interval (the t-interval of an infinite difference is
    NaN, which used to read as a tie)."""
    means = {m: float(np.mean(v)) for m, v in values.items()}
    best = min(means, key=means.__getitem__)
    marks = {m: {"mark": ""} for m in values}
    sig = True
    for m, v in values.items():
        if m == best:
            continue
        if np.all(np.isfinite(values[best])) and not np.all(np.isfinite(v)):
            continue  # infinite in some refit (MCE with sigma = 0): worse than the finite best
        f = paired_t_interval(values[best], v, level)
        if not f["hi"] < 0:
            sig = False
            marks[m]["mark"] = "tie"
    marks[best]["mark"] = "significantly best" if sig else "best"
    return marks


def method_difference(r: Mapping[str, Any], a: str, b: str, metric: str) -> dict[str, float]:
    """A - B on ``metric`` over the folds crossed with the fits: the fits of two D_val-fitted
    methods are paired by index (fit h of both sees the same draw of D_val), a method refitted
    per fold only is broadcast over the other's fits; the interval is
    :func:`experiments._pipelines.crossed_t_interval` (fit and split noise)."""
    va, vb = np.asarray(r["crossed"][a][metric]), np.asarray(r["crossed"][b][metric])
    if va.shape[0] != vb.shape[0] and 1 not in (va.shape[0], vb.shape[0]):
        raise ValueError(f"{a} has {va.shape[0]} fits and {b} {vb.shape[0]}: cannot pair them")
    return crossed_t_interval(va - vb)


#: the methods of "Calibration is Grouping" Table 1 (the rivals of "VR-SAG is best"; Beta, ILPS, Neural
#: Calibration and MCGrad are ours, not the paper's)
PAPER_METHODS = ("Uncal", "Histogram binning", "Isotonic regression", "Platt scaling", "Temperature scaling",
                 *(m.name for m in METHODS if m.name.startswith(("SAG", "VR-SAG"))))
#: where "Calibration is Grouping" names VR-SAG the best method: metric -> place
BEST_CLAIMS = {"ECE": "Table 1", "LCCE": "Table 1", "Brier+": "Table 1", "Brier": "Table 1",
               "bias": "Table 3", "abs_bias": "Table 3", "NLL": "Table 5"}
#: "Calibration is Grouping" §3.1 / App. E.1: calibrated outputs change Acc and AUC by at most this (relative)
ACC_BOUND = 0.005


def _crossed(r: Mapping[str, Any], m: str, metric: str) -> np.ndarray:
    v = np.asarray(r["crossed"][m][metric], np.float64)
    return np.abs(v) if DIRECTION[metric] == "abs" else -v if DIRECTION[metric] == "higher" else v


def best_claims(results: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """"VR-SAG is best" as one paired comparison per data set and metric: the VR-SAG variant
    with the best mean against the best of the paper's other methods (:data:`PAPER_METHODS`),
    ``A - B`` on the loss scale (``|bias|`` for bias, ``-AUC``), crossed fits x folds interval.
    Beating the best rival with the interval implies beating each; ``fallback_share_a`` tells
    whether VR-SAG could act."""
    rows = []
    for ds, r in results.items():
        for metric, place in BEST_CLAIMS.items():
            have = [m for m in PAPER_METHODS if m in r["crossed"] and metric in r["crossed"][m]]
            vr = [m for m in have if m.startswith("VR-SAG")]
            rivals = [m for m in have if not m.startswith("VR-SAG")]
            if not vr or not rivals:
                continue
            mean = {m: float(np.mean(_crossed(r, m, metric))) for m in have}
            a, b = min(vr, key=mean.__getitem__), min(rivals, key=mean.__getitem__)
            va, vb = _crossed(r, a, metric), _crossed(r, b, metric)
            f = crossed_t_interval(va - vb)
            rows.append({"dataset": ds, "place": place, "metric": metric, "claim": f"{a} < {b}",
                         "scale": "abs" if DIRECTION[metric] == "abs" else "loss", "mean_a": mean[a],
                         "mean_b": mean[b], "diff": f["diff"], "lo": f["lo"], "hi": f["hi"],
                         "fits": f["n_fits"], "folds": f["n_splits"],
                         "fallback_share_a": r["fallback_share"][a], "fallback_share_b": r["fallback_share"][b],
                         "refit_fallback_share_a": r["refit_fallback_share"][a],
                         "refit_fallback_share_b": r["refit_fallback_share"][b]})
    return rows


def accuracy_claims(results: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """"Calibration is Grouping" §3.1: VR-SAG changes accuracy and AUC by at most ``ACC_BOUND`` (relative,
    AccDiff / AUCDiff of App. E.1): the mean of each VR-SAG variant with its crossed
    fits x folds interval."""
    rows = []
    for ds, r in results.items():
        for m in (m for m in PAPER_METHODS if m.startswith("VR-SAG") and m in r["crossed"]):
            for metric in ("AccDiff", "AUCDiff"):
                if metric not in r["crossed"][m]:
                    continue
                f = crossed_t_interval(r["crossed"][m][metric])
                rows.append({"dataset": ds, "method": m, "metric": metric, "bound": ACC_BOUND,
                             "mean": f["diff"], "lo": f["lo"], "hi": f["hi"],
                             "fallback_share": r["fallback_share"][m],
                             "refit_fallback_share": r["refit_fallback_share"][m]})
    return rows


def mcgrad_claims(results: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Beyond the paper: VR-SAG against MCGrad (A < B), paired over the independent refits
    (every metric) and, where the metric is in the row bootstrap, over the rows of split 0."""
    rows = []
    for ds, r in results.items():
        for a, b in MCGRAD_CHAINS:
            if a not in r["folds"] or b not in r["folds"]:
                continue
            for metric in MCGRAD_METRICS:
                if metric not in r["folds"][a]:
                    continue
                f = method_difference(r, a, b, metric)
                d = (boot.difference(r["boots"][a], r["boots"][b], metric)
                     if metric in r["boots"][a].estimate else None)
                rows.append({
                    "dataset": ds, "claim": f"{a} < {b}", "metric": metric,
                    "mean_a": float(np.mean(r["per_split"][a][metric])),
                    "mean_b": float(np.mean(r["per_split"][b][metric])),
                    # MCE has no row bootstrap (it sorts every segment): null, not NaN
                    "rows_diff": d.diff if d else None, "rows_lo": d.lo if d else None,
                    "rows_hi": d.hi if d else None,
                    "refit_diff": f["diff"], "refit_lo": f["lo"], "refit_hi": f["hi"],
                    "verdict": ("A better" if f["hi"] < 0 and (d is None or d.hi < 0) else
                                "B better" if f["lo"] > 0 and (d is None or d.lo > 0) else "tie")})
    return rows


#: (SAG tag, tag of the global baseline, protocol label): the reference protocol against the
#: D_ho-fitted baselines; eq. 8-11 against the same baselines (the paper's comparison: its
#: SAG sees D_val, 4x the rows of a D_ho) and against the baselines fitted on D_val (same rows)
PROTOCOLS = (("", "", "reference"), (" [eq. 8-11]", "", "paper (eq. 8-11)"),
             (" [eq. 8-11]", " [D_val]", "paper (eq. 8-11), baselines on D_val"))
_GLOBAL = ("Temperature scaling", "Platt scaling")


#: the sentences of "Calibration is Grouping" Tables 4-5 read as paired comparisons: (claim, metric,
#: A, B) with B chosen per data set ("best baseline": the paper's global calibrator with the lowest mean
#: NLL / highest mean AUC; "next lowest": the method with the next lowest mean AUCDiff)
TEXT_CLAIMS = (("histogram binning degrades the AUC the most", "AUCDiff", "Histogram binning", "next lowest"),
               ("VR-SAG+TS's NLL is within 0.0006 of the best baseline", "NLL", "VR-SAG+TS", "best baseline"),
               ("VR-SAG+TS keeps a competitive AUC", "AUC", "VR-SAG+TS", "best baseline"))
_BASELINES = ("Histogram binning", "Isotonic regression", "Platt scaling", "Temperature scaling")


def text_claims(results: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The claims of :data:`TEXT_CLAIMS` as paired differences A - B over the crossed fits x
    folds (:func:`method_difference`), with the means over the table splits beside them."""
    rows = []
    for ds, r in results.items():
        mean = {m: {k: float(np.mean(v)) for k, v in mv.items()} for m, mv in r["per_split"].items()}
        for claim, metric, a, how in TEXT_CLAIMS:
            if a not in r["crossed"] or metric not in r["crossed"][a]:
                continue
            if how == "next lowest":
                pool = [m for m in mean if m not in ("Uncal", a) and metric in mean[m]]
                pick = min
            else:
                pool = [m for m in _BASELINES if m in mean and metric in mean[m]]
                pick = min if DIRECTION[metric] == "lower" else max
            if not pool:
                continue
            b = pick(pool, key=lambda m: mean[m][metric])
            f = method_difference(r, a, b, metric)
            rows.append({"dataset": ds, "claim": claim, "metric": metric, "a": a, "b": b,
                         "mean_a": mean[a][metric], "mean_b": mean[b][metric], "diff": f["diff"],
                         "lo": f["lo"], "hi": f["hi"], "fits": f["n_fits"], "folds": f["n_splits"]})
    return rows


def claims(results: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The orderings of :data:`CHAINS` under every protocol of :data:`PROTOCOLS`, with the row
    bootstrap of split 0, the crossed fits x folds interval and the paper's paired t."""
    rows = []
    for ds, r in results.items():
        for tag, base_tag, protocol in PROTOCOLS:
            for a0, b0 in CHAINS:
                if base_tag and b0 not in _GLOBAL:
                    continue  # SAG against VR-SAG does not involve a baseline
                a = a0 + tag
                b = b0 + base_tag if b0 in _GLOBAL else b0 + tag
                if a not in r["boots"] or b not in r["boots"]:
                    continue
                for metric in CLAIM_METRICS:
                    if metric not in r["boots"][a].estimate:
                        continue
                    d = boot.difference(r["boots"][a], r["boots"][b], metric)
                    f = method_difference(r, a, b, metric)
                    t = paired_t_interval(r["per_split"][a][metric], r["per_split"][b][metric])
                    mean_a = float(np.mean(r["per_split"][a][metric]))
                    mean_b = float(np.mean(r["per_split"][b][metric]))
                    rows.append({
                        "dataset": ds, "protocol": protocol,
                        "claim": f"{a} < {b}", "metric": metric, "mean_a": mean_a, "mean_b": mean_b,
                        "rows_diff": d.diff, "rows_lo": d.lo, "rows_hi": d.hi,
                        "rows_share_a_better": d.share_a_lower,
                        "refit_diff": f["diff"], "refit_lo": f["lo"], "refit_hi": f["hi"],
                        "refit_fits": f["n_fits"], "refit_folds": f["n_splits"], "refit_df": f["df"],
                        "refit_share_fit": f["share_fit"],
                        "paper_t_diff": t["diff"], "paper_t_lo": t["lo"], "paper_t_hi": t["hi"],
                        "fallback_share_a": r["fallback_share"][a], "fallback_share_b": r["fallback_share"][b],
                        "refit_fallback_share_a": r["refit_fallback_share"][a],
                        "refit_fallback_share_b": r["refit_fallback_share"][b],
                        "holds_rows": bool(d.hi < 0), "holds_refits": bool(f["hi"] < 0)})
    return rows


# ----------------------------------------------------------------------------- driver
def _run_or_resume(ds: str, i: int, config: Mapping[str, Any], out: Output) -> dict[str, Any] | None:
    """:func:`run_dataset` for data set ``ds`` (the ``i``-th; its key is ``fold_in(seed, i)``),
    or its checkpoint: with checkpoints on (the paper preset, or ``--resume``) each finished
    data set is pickled under the study's checkpoint folder, keyed by the configuration
    (every setting but the data-set list) and ``(ds, i)``, so a rerun of the same command
    skips the data sets already done. Each data set's ``info`` records the commit it ran at
    (``git_commit``): a resumed run may join data sets computed at different commits.

    Inside a data set, the stages are checkpointed too (:func:`run_dataset`), under the same
    key; they are removed once the data set's result is saved."""
    stages = out.stage_store(config, "datasets", "datasets", ds, [ds, i])
    r = out.checkpointed(config, "datasets", "datasets", ds, [ds, i], lambda: run_dataset(
        ds, config, out, jax.random.fold_in(jax.random.key(int(config["seed"])), i), stages))
    stages.clear()
    return r


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Run every data set of ``config["datasets"]``; write the tables; return the summary."""
    results: dict[str, dict[str, Any]] = {}
    with warnings.catch_warnings():  # fallbacks are counted (fallbacks.csv), not printed
        warnings.simplefilter("ignore", CalibrationFallbackWarning)
        for i, ds in enumerate(config["datasets"]):
            r = _run_or_resume(ds, i, config, out)
            if r is not None:
                results[ds] = r
    out.record["datasets"] = {ds: r["info"] for ds, r in results.items()}
    _write_tables(out, results)
    cl = claims(results)
    header = list(cl[0]) if cl else ["dataset"]
    out.table("claims", header, [[c[h] for h in header] for c in cl], digits=6)
    best, acc = best_claims(results), accuracy_claims(results)
    for name, rows in (("best", best), ("accuracy", acc)):
        if rows:
            out.table(name, list(rows[0]), [list(c.values()) for c in rows], digits=6)
    tc = text_claims(results)
    if tc:
        out.table("text_claims", list(tc[0]), [list(c.values()) for c in tc], digits=6)
    mg = mcgrad_claims(results)
    if mg:
        out.table("vs_mcgrad", list(mg[0]), [list(c.values()) for c in mg], digits=6)
    out.npz("refits_crossed.npz", **{f"{ds}/{m}/{k}": v for ds, r in results.items()
                                     for m, mv in r["crossed"].items() for k, v in mv.items()})
    out.npz("per_split.npz", **{f"{ds}/{m}/{k}": np.asarray(v) for ds, r in results.items()
                                for m, mv in r["per_split"].items() for k, v in mv.items()})
    out.text("notes.md", _notes(results, config))
    return {
        "means": {ds: {m: {k: float(np.mean(v)) for k, v in mv.items()} for m, mv in r["per_split"].items()}
                  for ds, r in results.items()},
        "intervals": {ds: {m: {k: [b.estimate[k], b.lo[k], b.hi[k]] for k in b.estimate}
                           for m, b in r["boots"].items()} for ds, r in results.items()},
        "marks": {ds: {metric: {m: v["mark"] for m, v in rk.items()} for metric, rk in r["ranks"].items()}
                  for ds, r in results.items()},
        "claims": cl,
        "best": best,
        "accuracy": acc,
        "vs_mcgrad": mg,
        "text_claims": tc,
        "world_scope": {ds: WORLD_SCOPE.get(ds, "") for ds in results},
        "fallbacks": {ds: r["fallbacks"] for ds, r in results.items()},
        "fallback_share": {ds: r["fallback_share"] for ds, r in results.items()},
        "refit_fallback_share": {ds: r["refit_fallback_share"] for ds, r in results.items()},
        "fit_times": {ds: {m: t["fit_s"] for m, t in r["times"].items()} for ds, r in results.items()},
        "info": {ds: r["info"] for ds, r in results.items()},
    }


def report(summary: Mapping[str, Any]) -> str:
    parts = []
    for ds in summary["means"]:
        lcce = summary["marks"][ds].get("LCCE", {})
        best = [m for m, mk in lcce.items() if mk in ("best", "significantly best")]
        held = [c for c in summary["claims"] if c["dataset"] == ds and c["metric"] in ("LCCE", "Brier")]
        ok = sum(c["holds_rows"] and c["holds_refits"] for c in held)
        parts.append(f"{ds}: lowest LCCE {best[0] if best else '-'}; {ok}/{len(held)} orderings hold "
                     "(both intervals below 0)")
    return "; ".join(parts)


def _fmt(v: float) -> str:
    return f"{v:.4f}" if v == 0.0 or abs(v) >= 1e-3 else f"{v:.3e}"


def _write_tables(out: Output, results: Mapping[str, Mapping[str, Any]]) -> None:
    names = [m.name for m in METHODS if any(m.name in r["per_split"] for r in results.values())]
    for table, metrics in TABLES.items():
        cols = [(ds, k) for ds, r in results.items() for k in metrics
                if any(k in mv for mv in r["per_split"].values())]
        rows = []
        for m in names:
            row = [m]
            for ds, k in cols:
                r = results[ds]
                if m not in r["per_split"]:
                    row.append("-")
                    continue
                mark = r["ranks"].get(k, {}).get(m, {}).get("mark", "")
                sym = "**" if mark == "significantly best" else "*" if mark in ("best", "tie") else ""
                row.append(_fmt(float(np.mean(r["per_split"][m][k]))) + sym)
            rows.append(row)
        out.table(table, ["Method"] + [f"{ds} {k}" for ds, k in cols], rows, latex=True)
    out.table("table2", ["Method"] + [f"{ds} fit (s)" for ds in results],
              [[m] + [results[ds]["times"].get(m, {}).get("fit_s", float("nan")) for ds in results]
               for m in names], digits=2, latex=True)
    rows = [[ds, m, k, float(np.mean(r["per_split"][m][k])), b.estimate[k], b.lo[k], b.hi[k],
             r["ranks"].get(k, {}).get(m, {}).get("mark", "")]
            for ds, r in results.items() for m, b in r["boots"].items() for k in b.estimate]
    out.table("intervals", ["dataset", "method", "metric", "mean_over_splits", "split0", "ci_low",
                            "ci_high", "mark"], rows, digits=6)
    rows = [[ds, m, k, float(np.mean(v)), _spread(v), *v]
            for ds, r in results.items() for m, mv in r["folds"].items() for k, v in mv.items()]
    width = max((len(r) for r in rows), default=6) - 5
    out.table("refits", ["dataset", "method", "metric", "mean", "std"] + [f"fold{i}" for i in range(width)],
              rows, digits=6)
    out.table("fallbacks", ["dataset", "method", "fits_with_a_fallback", "splits", "mean_share_fallen_back"],
              [[ds, m, c, r["info"]["n_splits"], r["fallback_share"][m]]
               for ds, r in results.items() for m, c in r["fallbacks"].items()], digits=4)


def _spread(v: Any) -> float | None:
    """Standard deviation (ddof = 1) over the refits; None (an empty cell) when a refit is
    infinite (MCE on predictions of exactly 0 or 1 divides by sigma = 0): no NaN in tables."""
    v = np.asarray(v, np.float64)
    if v.size < 2:
        return 0.0
    return float(np.std(v, ddof=1)) if np.all(np.isfinite(v)) else None


def _notes(results: Mapping[str, Mapping[str, Any]], config: Mapping[str, Any]) -> str:
    lines = ["# Calibrator comparison: protocol notes (generated)", "",
             f"Splits: {config['n_splits']} random test splits (D_ho = 10% of the standard test set, "
             f"evaluation = 90%); independent refits: {config['n_folds']} folds (per data set below); row bootstrap: "
             f"B = {config['n_boot']} on split 0. SAG heads: {config['head_fits']} fit(s) per variant, "
             f"{config['sag_steps']} L-BFGS steps, head rows "
             f"{'all of D_val' if config['head_rows'] is None else config['head_rows']}.", ""]
    for ds, r in results.items():
        i = r["info"]
        lines.append(f"* `{ds}`: D_val {i['n_val']:,} rows, standard test set {i['n_standard_test']:,} rows "
                     f"({i['clicks_standard_test']:,} clicks), backbone test AUC {i['backbone_auc_test']:.3f}.")
        if "refit_rows" in i:
            lines.append(f"  Refits: {i['refit_rows']}, {i['fold_rows']:,} rows per fold, D_ho {i['refit_ho_rows']:,} "
                         f"rows (the table splits' D_ho: {i['n_ho']:,}).")
        if ds == "open_bandit":
            lines.append(f"  This is a low-signal log: each D_ho has {i['n_ho']:,} rows and about "
                         f"{i['clicks_standard_test'] * i['n_ho'] / i['n_standard_test']:.0f} clicks, and the "
                         "backbone barely ranks (AUC near 0.5). The intervals in `intervals.csv` are wide; "
                         "the fail-safe counts in `fallbacks.csv` show how often a fit was not supported.")
    return "\n".join(lines) + "\n"


main = entry_point(__name__)

if __name__ == "__main__":
    main()
