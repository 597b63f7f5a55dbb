"""Field-aware calibration: Model-1/Model-2 vs post-hoc calibrators (Field-aware Calibration (Pan et al.) §5).

Protocol (Field-aware Calibration (Pan et al.) §5.1), on the ad-auction simulator and on the Open Bandit logs:

* rows in time order, split 60/20/20 into D_train, D_dev and D_test;
* **Model-1**: a field-embedding MLP (``experiments._pipelines.CTRNet``) trained one epoch
  with Adam on D_train (three on the small Open Bandit sample); **Model-2**: Model-1
  trained as many more epochs on D_dev with a fresh optimiser (D_train ∪ D_dev);
* post-hoc calibrators fitted on Model-1's D_dev logits (``calib_jax.calibrators``):
  histogram binning, isotonic regression, Platt scaling, ILPS, Neural Calibration (ILPS
  of the logit + an MLP over all categorical fields, Field-aware Calibration (Pan et al.) eq. 7; its optimisation
  budget is chosen on the last quarter of D_dev, because the library defaults memorise a
  small D_dev), and SAG / VR-SAG
  ("Calibration is Grouping", grouping head on Model-1's penultimate embedding);
* metrics on D_test: Log-loss, Brier, Field-ECE (eq. 5), Field-RCE (eq. 6), AUC, plus the
  oracle Brier score on the simulator (where the true CTR is known).

Intervals (not in the paper): every method's D_test metrics get a 95% paired row bootstrap
(``n_boot`` resamples shared by all methods, ``calib_jax.bootstrap``, first repeat), and each
method is paired with Neural Calibration (the paper's winner) and with VR-SAG, so
"A beats B" is ``A - B`` with its interval (``paired_<data>_<setting>``). The bootstrap
covers test-row noise only. Across the ``repeats`` independent refits (backbone, calibrators
and Neural Calibration's search refitted with fresh keys on the same log), the same pairs get
the paired t-interval of the table's own difference (``refits_<data>_<setting>``; fit noise).
The percentile bootstrap of Field-RCE can exclude its own estimate on a sparse log (it divides
by per-value click counts), so the claims ledger reads the refit interval.

Beyond the paper: **MCGrad** (the optional ``mcgrad`` package) is fitted on D_dev
like the other calibrators, with every categorical field as a segment feature and Model-1's
penultimate embedding as numerical features; it is left out (and the provenance says so)
when the package is absent.

The data-shift ablation (Field-aware Calibration (Pan et al.) Table 6, lower block) swaps the roles of D_train and
D_dev: the base model is trained on D_dev only and the calibrators are fitted on D_train.
Every number is a mean over ``repeats`` seeds (training order and initialisation); the
split is fixed.

Departures from the paper's protocol (§5.1-5.2), each with its reason:

* **Data.** The paper's five logs (Lending Club 2.26M rows, Criteo 45.8M, Avazu 40.4M,
  Porto Seguro 0.6M, a private Tencent stream of 100M) cannot be had here. The stand-ins:
  the ad-auction simulator's log (1M impressions at paper scale, z = the advertiser, 200
  values) and the Open Bandit sample of the "men" campaign (both logging policies, 20,000
  rows in time order, z = the item, 34 values; about 115 clicks, so every interval is
  wide). The simulator's oracle CTR gives the oracle Brier score, which no real log has.
* **Neural Calibration's budget** is chosen from ``nc_grid`` on the last quarter of D_dev
  (see above). The paper trains it with Adam at the base model's learning rate (0.001) and
  states no step budget; the library's defaults memorise a small D_dev. Its field-aware
  network g(x) is the library's small one (``embed_dim`` from ``nc_grid``), where the paper
  gives g the base network's structure. g is fitted on D_dev alone (200,000 rows here), which
  the library's small defaults already memorise (above); a g of the base network's width has
  not been tried.
* **Repeats** (not in the paper, which reports one run): ``repeats`` independent refits, so
  each "A beats B" gets the paired t-interval over refits.

Base network: the paper preset uses the paper's network (every field embedded in 256
dimensions, two 200-unit ReLU layers, Adam at 0.001 for one epoch, minibatches of 256; the
paper states no batch size). The quick and smoke presets embed in 8 (4) dimensions and stack
64 and 32 (8 and 4) units: the paper's network takes 4.3x as long per epoch here (25 s
against 5.8 s on 600,000 rows, 2-core CPU) and widens the penultimate embedding that SAG,
VR-SAG and MCGrad read from 32 to 200 dimensions.

Solver: the quick and paper presets fit SAG and VR-SAG with the lock-step solver
(``sag_solver="lockstep"``, since 2026-12-05; :data:`OPTIONAL_SETTINGS`): a fit's ten
partitions evaluated together, one pass over the embedding per evaluation, the same L-BFGS.
It equals the sequential fits only to float32 rounding, which the non-convex grouping
objective can carry further, so the paper output was redone with it and set beside the
sequential run (``benchmarks/results/field_solver_rerun.md``,
``benchmarks/compare_field_reruns.py``): the SAG and VR-SAG means moved by at most 0.08
standard errors of the test rows, every method the solver does not fit repeated (but for
Platt scaling's Field-ECE and Field-RCE, by up to 2e-8 in a later refit; a second process at
one commit repeats today's values to the bit, and what differs from the run of 2026-12-03 was
not found), 745 of the 748 paired and
refit differences kept their side (the three that turned are SAG - VR-SAG on Brier and
log-loss in the data-shift setting, intervals that touch 0 in one run or the other), and
every ledger verdict held. ``--set sag_solver=sequential`` gives the sequential fits.

Time: the paper preset took 34 min (2,042 s of phases, data loading included: simulator main setting 442 s,
data-shift setting 1,505 s, where SAG, VR-SAG and MCGrad are fitted on the 600,000 D_train
rows of 200-dimensional embeddings; Open Bandit 92 s) on 2 cores of an idle Xeon with AVX-512
(2026-12-05). Refit by refit, ``benchmarks/bench_field_budget.py`` projects 39 min with the
lock-step solver and 50 min with the sequential one on that machine type
(``benchmarks/results/field_budget_xeon_lockstep.md``, ``field_budget_xeon.md``); MCGrad's own
library on the shift setting's 600,000 rows is the largest part (about 12 min). The
sequential run it replaced took 112 min of phases beside another study (2026-12-03). Since
4835f08 the data-shift setting trains and scores no Model-2 (it reports none, and Model-2
fed nothing else there, so no number changes): on the 2-core AMD EPYC that setting's training
and inference project to 121 s in five refits against 239 s, and the preset to 37 min
(``benchmarks/results/field_budget.md``; MCGrad 15.6 min of it).
The provenance records the seconds of each phase (``phase_seconds``: loading, then every
data set and setting). The paper preset checkpoints every finished (data set, setting)
under ``$CALIB_JAX_CHECKPOINTS/field_calibration``, so a stopped run resumes after the last
one finished (the provenance's ``resumed`` names the checkpoints read and their commits).

Run: ``python -m experiments.field_calibration [--smoke | --quick | --paper] [--seed S]
[--out DIR]``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import bootstrap as boot
from calib_jax import calibrators as C
from calib_jax import metrics as M
from experiments import _pipelines as P
from experiments._study import Output, PhaseClock, entry_point

QUICK: dict[str, Any] = {
    "datasets": ("simulator", "open_bandit"),
    "simulator": {"scale": "quick", "max_rows": 60000, "field": "advertiser", "epochs": 1},
    "open_bandit": {"policy": "all", "campaign": "men", "max_rows": None, "field": "item_id",
                    "epochs": 3},
    "model": {"emb_dim": 8, "hidden": (64, 32), "batch_size": 256, "lr": 2e-3},
    # Neural Calibration settings tried; the one with the best log loss on the last quarter
    # of D_dev is refitted on all of D_dev (the calibrator's defaults memorise D_dev)
    "nc_grid": ({"lr": 1e-3, "n_steps": 100},
                {"lr": 3e-3, "n_steps": 50, "embed_dim": 4, "weight_decay": 0.1}),
    "calibrators": ("histogram_binning", "isotonic", "platt", "ilps", "neural_calibration",
                    "sag_ps", "vrsag_ps", "mcgrad"),
    # independent refits (backbone, calibrators, Neural Calibration's search with fresh keys on
    # the same log): the paired t-intervals over them are the ledger's intervals
    "repeats": 5, "shift_ablation": True, "n_boot": 1000,
    "checkpoint": False,  # the paper preset checkpoints every (data set, setting)
}
PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {
        **QUICK,
        "datasets": ("simulator",),
        "simulator": {"scale": "tiny", "max_rows": 4000, "field": "advertiser", "epochs": 1},
        "model": {"emb_dim": 4, "hidden": (8, 4), "batch_size": 128, "lr": 2e-3},
        "nc_grid": ({"lr": 3e-3, "n_steps": 5, "embed_dim": 4, "weight_decay": 0.1},),
        "calibrators": ("platt", "isotonic", "neural_calibration"), "n_boot": 50,
        "repeats": 2,  # two refits: the refit intervals' path, without the quick preset's five
    },
    # the lock-step solver for SAG and VR-SAG (module docstring; the smoke preset fits neither)
    "quick": {**QUICK, "sag_solver": "lockstep"},
    "paper": {
        **QUICK, "sag_solver": "lockstep",
        "simulator": {"scale": "paper", "max_rows": 1_000_000, "field": "advertiser", "epochs": 1},
        # the paper's base network and learning rate (§5.1): 256-dim embeddings, 200-200 ReLU
        "model": {**QUICK["model"], "emb_dim": 256, "hidden": (200, 200), "lr": 1e-3},
        "repeats": 5,
        # every finished (data set, setting) is checkpointed: a stopped run resumes after it
        "checkpoint": True,
    },
}
_HYPER: dict[str, dict[str, Any]] = {"histogram_binning": {"n_bins": 15, "strategy": "quantile"}}
#: settings that are in a configuration only at a value other than this default
#: (``experiments._study.apply_overrides``): ``sag_solver`` is the L-BFGS solver of the SAG and
#: VR-SAG fits (:data:`calib_jax.calibrators.sag.SOLVERS`). ``"sequential"`` fits the P
#: partitions one after another (the smoke preset, and the runs made before 2026-12-05; the
#: library's default until then); ``"lockstep"`` (the quick and paper presets, and the
#: library's default since) evaluates them together,
#: one pass over the embedding per evaluation, equal to the sequential fits up to float32
#: rounding of the batched sums.
OPTIONAL_SETTINGS = {"sag_solver": "sequential"}
_SAG_METHODS = ("sag_ps", "vrsag_ps")
METRICS = ("Log-loss", "Brier", "Field-ECE", "Field-RCE", "AUC")
LABELS = {"histogram_binning": "Hist. Bin", "isotonic": "Isotonic Reg.", "platt": "Platt Scaling",
          "ilps": "ILPS", "neural_calibration": "Neural Calibration", "sag_ps": "SAG",
          "vrsag_ps": "VR-SAG", "mcgrad": "MCGrad"}
#: methods every other one is paired with (A - B intervals)
PAIR_WITH = ("Neural Calibration", "VR-SAG")


def load_dataset(name: str, cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """``fields``, ``dense``, ``y`` (and ``oracle`` on the simulator) in time order."""
    if name == "simulator":
        tab = P.simulator_table(seed=seed, scale=cfg["scale"], max_rows=cfg["max_rows"])
        return {"fields": tab["fields"], "dense": tab["dense"], "y": tab["y"],
                "oracle": tab["oracle"], "cardinalities": tab["cardinalities"],
                "field_names": list(tab["field_names"]), "z_field": cfg["field"],
                "epochs": cfg.get("epochs", 1)}
    from calib_jax.data import open_bandit as obd

    d = obd.load_open_bandit(policy=cfg["policy"], campaign=cfg["campaign"])
    order = np.argsort(d.timestamp, kind="stable")  # both logs interleaved in time order
    n = len(d) if cfg["max_rows"] is None else min(len(d), cfg["max_rows"])
    order = order[:n]
    card = d.cardinalities()
    dense = np.concatenate([d.affinity[order], d.item_numeric[d.item_id[order]][:, None]], axis=1)
    dense = ((dense - dense.mean(0)) / np.maximum(dense.std(0), 1e-6)).astype(np.float32)
    return {"fields": d.fields()[order], "dense": dense, "y": d.click[order].astype(np.float32),
            "oracle": None, "cardinalities": np.asarray([card[f] for f in obd.FIELD_NAMES]),
            "field_names": list(obd.FIELD_NAMES), "z_field": cfg["field"],
            "epochs": cfg.get("epochs", 1)}


@functools.cache
def _compiled_trainer(net: P.CTRNet, n_train: int, batch_size: int, lr: float, epochs: int) -> Any:
    """One compiled CTR trainer per network and split size, shared by every repeat and setting."""
    return jax.jit(P.make_ctr_trainer(net, n_train=n_train, batch_size=batch_size, lr=lr, epochs=epochs))


@functools.cache
def _compiled_init(net: P.CTRNet) -> Any:
    """The jitted initial variables of ``net`` (a fresh model is the trainer continued from them)."""
    return jax.jit(lambda k, h, ff, dd: P.init_ctr_variables(net, k, h, ff, dd))


@functools.cache
def _compiled_infer(net: P.CTRNet) -> Any:
    """The jitted logits and embedding of ``net`` at its default knobs: one program per split
    size, shared by every repeat and setting (a jit made inside each run compiled again in each)."""
    hp = P.default_hp(net)
    return jax.jit(lambda v, ff, dd: P.ctr_logits(net, v, hp, ff, dd, return_embedding=True))


def _split(n: int) -> tuple[slice, slice, slice]:
    a, b = int(0.6 * n), int(0.8 * n)
    return slice(0, a), slice(a, b), slice(b, n)


def _evaluate(p: jax.Array, y: jax.Array, z: jax.Array, k: int, oracle) -> dict[str, float]:
    out = {
        "Log-loss": float(M.nll(p, y)),
        "Brier": float(M.brier(p, y)),
        "Field-ECE": float(M.field_ece(p, y, z, n_groups=k)),
        "Field-RCE": float(M.field_rce(p, y, z, n_groups=k)),
        "AUC": float(M.auc(p, y)),
    }
    if oracle is not None:
        out["Oracle Brier"] = float(M.oracle_brier(p, oracle))
    return out


@functools.lru_cache(maxsize=8)
def _stat(k_field: int, has_oracle: bool):
    """The metrics of :func:`_evaluate` as one weighted, jit-able statistic (for the bootstrap)."""

    def stat(p, y, z, oracle, *, weights):
        out = {"Log-loss": M.nll(p, y, weights=weights), "Brier": M.brier(p, y, weights=weights),
               "Field-ECE": M.field_ece(p, y, z, n_groups=k_field, weights=weights),
               "Field-RCE": M.field_rce(p, y, z, n_groups=k_field, weights=weights),
               "AUC": M.auc(p, y, weights=weights)}
        if has_oracle:
            out["Oracle Brier"] = M.oracle_brier(p, oracle, weights=weights)
        return out

    return stat


def _fit_neural_calibration(o, y, fields, key, grid: Sequence[Mapping[str, Any]]):
    """Pick Neural Calibration's budget on the last quarter of D_dev, refit on all of it."""
    cal = C.get("neural_calibration")
    n = int(o.shape[0])
    cut = int(0.75 * n)
    best, best_ll = grid[0], np.inf
    for hyper in grid:
        prm = cal.fit(o[:cut], y[:cut], key=key, context={"fields": fields[:cut]}, **hyper)
        ll = float(M.nll(cal.predict(prm, o[cut:], context={"fields": fields[cut:]}), y[cut:]))
        if ll < best_ll:
            best, best_ll = hyper, ll
    return cal.fit(o, y, key=key, context={"fields": fields}, **best), dict(best)


class _Laps:
    """Seconds per phase of :func:`one_run` when ``timings`` is given: each phase's results are
    waited for (``jax.block_until_ready``) before its clock stops, so a phase is not charged for
    the asynchronous work of the one before; without ``timings`` nothing waits."""

    def __init__(self, timings: dict[str, float] | None) -> None:
        self.timings, self.last = timings, time.perf_counter()

    def __call__(self, phase: str, value: Any) -> Any:
        if self.timings is not None:
            jax.block_until_ready(value)
            now = time.perf_counter()
            self.timings[phase] = self.timings.get(phase, 0.0) + now - self.last
            self.last = now
        return value


def one_run(data: Mapping[str, Any], mcfg: Mapping[str, Any], calibrators: Sequence[str],
            key: jax.Array, *, shift: bool, nc_grid: Sequence[Mapping[str, Any]] = ({},),
            n_boot: int = 0, timings: dict[str, float] | None = None,
            sag_solver: str = "sequential") -> dict[str, Any]:
    """Model-1, Model-2 (main setting only) and every calibrator for one seed; ``shift`` swaps
    D_train / D_dev.
    ``sag_solver`` is the SAG and VR-SAG fits' solver (:data:`OPTIONAL_SETTINGS`).
    With ``n_boot`` the test predictions are bootstrapped (``"_boots"``, paired resamples).
    With ``timings`` (a dict), the seconds of each phase are added to it: ``train`` (the base
    models), ``infer`` (their logits and embeddings), ``fit <method>`` (fit and predictions),
    ``metrics`` and ``bootstrap`` (``benchmarks/bench_field_budget.py`` reads them)."""
    lap = _Laps(timings)
    n = data["y"].shape[0]
    s_tr, s_dev, s_te = _split(n)
    if shift:
        s_tr, s_dev = s_dev, s_tr
    f, d, y = (jnp.asarray(data[k]) for k in ("fields", "dense", "y"))
    zf = data["field_names"].index(data["z_field"])
    k_field = int(data["cardinalities"][zf])
    net = P.CTRNet(cardinalities=tuple(int(c) for c in data["cardinalities"]),
                   emb_dim=mcfg["emb_dim"], hidden=tuple(mcfg["hidden"]))
    hp = P.default_hp(net)
    k1, k2, k3 = jax.random.split(key, 3)

    def trainer(part):
        return _compiled_trainer(net, int(y[part].shape[0]), int(mcfg["batch_size"]), float(mcfg["lr"]),
                                 int(data.get("epochs", 1)))

    v0 = _compiled_init(net)(k1, hp, f[s_tr], d[s_tr])  # the same trainer fresh or continued
    v1 = trainer(s_tr)(k1, hp, f[s_tr], d[s_tr], y[s_tr], v0)
    # Model-2 (Model-1 continued on D_dev) is a row of the main setting only: the data-shift
    # ablation reports the calibrators, so there it is neither trained nor scored (until
    # 2026-12-05 it was trained on the 600,000 swapped D_dev rows and its logits discarded)
    v2 = None if shift else trainer(s_dev)(k2, hp, f[s_dev], d[s_dev], y[s_dev], v1)
    lap("train", v1 if shift else v2)
    infer = _compiled_infer(net)
    o_dev, e_dev = infer(v1, f[s_dev], d[s_dev])
    o_te, e_te = infer(v1, f[s_te], d[s_te])
    preds = {"Base (Model-1)": jax.nn.sigmoid(o_te)}
    if not shift:
        preds["Base (Model-2)"] = jax.nn.sigmoid(infer(v2, f[s_te], d[s_te])[0])
    lap("infer", (o_dev, e_dev, preds))
    y_dev, y_te, z_te = y[s_dev], y[s_te], f[s_te, zf]
    oracle = None if data["oracle"] is None else jnp.asarray(data["oracle"][s_te])
    chosen_nc: dict[str, Any] = {}
    ctx_dev = {"fields": f[s_dev], "embedding": e_dev}
    ctx_te = {"fields": f[s_te], "embedding": e_te}
    for name in calibrators:
        cal = C.get(name)
        if name == "neural_calibration":
            params, chosen = _fit_neural_calibration(o_dev, y_dev, f[s_dev], k3, nc_grid)
            chosen_nc = {f"nc_{k}": v for k, v in chosen.items()}
        else:
            hyper = {**_HYPER.get(name, {}), **({"solver": sag_solver} if name in _SAG_METHODS else {})}
            params = cal.fit(o_dev, y_dev, key=k3, context=ctx_dev, **hyper)
        preds[LABELS.get(name, name)] = lap(f"fit {name}", jnp.asarray(cal.predict(params, o_te, context=ctx_te),
                                                                       jnp.float32))
    res: dict[str, Any] = lap("metrics", {m: _evaluate(p, y_te, z_te, k_field, oracle) for m, p in preds.items()})
    if chosen_nc:
        res["_chosen"] = chosen_nc
    if n_boot:
        stat = _stat(k_field, oracle is not None)
        orc = jnp.zeros_like(y_te) if oracle is None else oracle
        kb = jax.random.fold_in(key, 7)
        res["_boots"] = {m: boot.bootstrap(stat, p, y_te, z_te, orc, key=kb, n_boot=n_boot)
                         for m, p in preds.items()}
        lap("bootstrap", [b.replicates for b in res["_boots"].values()])
    return res


def paired_rows(boots: Mapping[str, boot.BootstrapResult]) -> list[list[Any]]:
    """``A - B`` with its paired 95% interval for every method A and each B of
    :data:`PAIR_WITH` present, on every metric."""
    rows = []
    for b in PAIR_WITH:
        if b not in boots:
            continue
        for a, ra in boots.items():
            if a == b:
                continue
            for metric in ra.estimate:
                d = boot.difference(ra, boots[b], metric)
                rows.append([a, b, metric, d.diff, d.lo, d.hi, d.share_a_lower])
    return rows


def refit_rows(runs: Sequence[Mapping[str, Mapping[str, float]]]) -> list[list[Any]]:
    """``A - B`` over independent refits for every method A and each B of :data:`PAIR_WITH`:
    the mean of the per-refit differences (the table's own difference, its values being the
    means over the refits) with the paired t-interval over them
    (:func:`experiments._pipelines.paired_t_interval`). The log and its test rows are the
    same in every refit, so the interval holds the noise of fitting, not of the test rows
    (that is the row bootstrap's). Empty with fewer than two refits."""
    if len(runs) < 2:
        return []
    rows = []
    for b in PAIR_WITH:
        if b not in runs[0]:
            continue
        for a in runs[0]:
            if a == b:
                continue
            for metric in runs[0][a]:
                t = P.paired_t_interval([r[a][metric] for r in runs], [r[b][metric] for r in runs])
                rows.append([a, b, metric, t["diff"], t["lo"], t["hi"], t["n"]])
    return rows


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Run the study; write the tables and the figure through ``out``."""
    import calib_jax.calibrators.neural_calibration  # noqa: F401  (registers)
    import calib_jax.calibrators.sag  # noqa: F401  (registers)

    calibrators = list(config["calibrators"])
    if "mcgrad" in calibrators and not C.multicalibration.available():
        print("[field_calibration] the optional `mcgrad` package is not installed: MCGrad left out")
        calibrators.remove("mcgrad")
        out.record["skipped_methods"] = ["MCGrad"]
    seed = int(config["seed"])
    key = jax.random.key(seed)
    summary: dict[str, Any] = {}
    clock = PhaseClock()
    out.record["phase_seconds"] = clock.seconds
    for di, ds in enumerate(config["datasets"]):
        with clock(f"{ds}/data"):
            data = load_dataset(ds, config[ds], seed)
        settings = [("main", False)] + ([("shift", True)] if config["shift_ablation"] else [])
        for label, shift in settings:
            def compute(di=di, data=data, shift=shift) -> dict[str, Any]:
                t0 = time.perf_counter()
                runs = [one_run(data, config["model"], calibrators,
                                jax.random.fold_in(key, 100 * di + r), shift=shift,
                                nc_grid=config["nc_grid"], n_boot=int(config["n_boot"]) if r == 0 else 0,
                                sag_solver=config.get("sag_solver", OPTIONAL_SETTINGS["sag_solver"]))
                        for r in range(config["repeats"])]
                return {"runs": runs, "info": {"seconds": time.perf_counter() - t0}}

            # keyed by the configuration without the data-set list, the data set, its position
            # (its PRNG keys) and the methods fitted (MCGrad only where the package is installed)
            done = out.checkpointed(config, "settings", "datasets", f"{ds}-{label}",
                                    [ds, di, label, calibrators], compute)
            assert done is not None
            runs = done["runs"]
            # a resumed setting's seconds are those of the run that computed it
            clock.seconds[f"{ds}/{label}"] = done["info"]["seconds"]
            if "resumed_from_checkpoint" in done["info"]:
                out.record.setdefault("resumed", {})[f"{ds}/{label}"] = {
                    k: done["info"][k] for k in ("resumed_from_checkpoint", "git_commit")}
            boots = runs[0].pop("_boots", None)
            for r in runs[1:]:
                r.pop("_boots", None)
            summary[f"{ds}/{label}/neural_calibration_choice"] = [r.pop("_chosen", {})
                                                                  for r in runs]
            methods = list(runs[0])
            cols = list(runs[0][methods[0]])
            rows = []
            for m in methods:
                tag = ("D_dev -> D_train" if m not in ("Base (Model-1)", "Base (Model-2)")
                       else "D_dev") if shift else (
                    "D_train" if m == "Base (Model-1)" else
                    "D_train + D_dev" if m == "Base (Model-2)" else "D_train -> D_dev")
                rows.append([m, tag] + [float(np.mean([r[m][c] for r in runs])) for c in cols])
            out.table(f"{ds}_{label}", ["method", "training data", *cols], rows)
            summary[f"{ds}/{label}"] = {r[0]: dict(zip(cols, r[2:])) for r in rows}
            if boots:
                out.table(f"intervals_{ds}_{label}", ["method", "metric", "estimate", "ci_low", "ci_high"],
                          [[m, k, b.estimate[k], b.lo[k], b.hi[k]] for m, b in boots.items() for k in b.estimate],
                          digits=6)
                pr = paired_rows(boots)
                out.table(f"paired_{ds}_{label}", ["method_a", "method_b", "metric", "a_minus_b", "ci_low",
                                                   "ci_high", "share_a_lower"], pr, digits=6)
                summary[f"{ds}/{label}/paired"] = {f"{a} - {b}": {} for a, b, *_ in pr}
                for a, b, k, d, lo, hi, share in pr:
                    summary[f"{ds}/{label}/paired"][f"{a} - {b}"][k] = {"diff": d, "lo": lo, "hi": hi,
                                                                       "share_a_lower": share}
            rr = refit_rows(runs)
            if rr:
                out.table(f"refits_{ds}_{label}", ["method_a", "method_b", "metric", "a_minus_b", "ci_low",
                                                   "ci_high", "refits"], rr, digits=6)
                summary[f"{ds}/{label}/refits"] = {f"{a} - {b}": {} for a, b, *_ in rr}
                for a, b, k, d, lo, hi, n in rr:
                    summary[f"{ds}/{label}/refits"][f"{a} - {b}"][k] = {"diff": d, "lo": lo, "hi": hi, "n": n}
    out.figure(_plot({k: v for k, v in summary.items() if not k.endswith(("_choice", "/paired", "/refits"))}),
               "field_rce_auc")
    return summary


def report(summary: Mapping[str, Any]) -> str:
    parts = []
    for k, res in summary.items():
        if k.endswith("/main"):
            best = min((m for m in res if not m.startswith("Base")),
                       key=lambda m: res[m]["Field-RCE"], default=None)
            if best is not None:
                parts.append(f"{k.split('/')[0]}: {best} (Field-RCE {res[best]['Field-RCE']:.4f})")
    return "lowest Field-RCE: " + "; ".join(parts)


def _plot(fig_data: Mapping[str, Mapping[str, Mapping[str, float]]]):
    from calib_jax.plotting import plt

    keys = list(fig_data)
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.4), squeeze=False)
    for ax, k in zip(axes[0], keys):
        for m, vals in fig_data[k].items():
            ax.scatter(vals["Field-RCE"], vals["AUC"], s=25)
            ax.annotate(m.replace("Base ", ""), (vals["Field-RCE"], vals["AUC"]), fontsize=7)
        ax.set_xlabel("Field-RCE (lower is better)")
        ax.set_ylabel("AUC (higher is better)")
        ax.set_title(k, fontsize=9)
    fig.tight_layout()
    return fig


main = entry_point(__name__)

if __name__ == "__main__":
    main()
