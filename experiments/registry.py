"""The one list of studies: what each reproduces, how to run it, how long it takes.

``python -m experiments list`` prints it; ``experiments.main`` (the main job), the smoke
tests (``tests/test_studies.py``) and the claims ledger read it. Adding a study is one file
in ``experiments/``, one line here and the domain of each new setting in
``experiments._study.SETTINGS`` (checked before any run; ``docs/ARCHITECTURE.md``).

Expected times are wall seconds on the 2-core CPU (idle unless marked ``~``: measured under
load, or projected from a smaller run); ``paper_s=None`` means the study has no larger scale.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StudyEntry:
    """One registered study.

    Attributes:
      name: registry name; names the output folder ``figures/<name>[_paper]``.
      reproduces: the paper place (``'"Calibration is Grouping" Fig 3'``) or ``"beyond the papers"``.
      title: one line saying what the study measures.
      quick_s / paper_s: expected wall time in seconds on the 2-core CPU.
      module: the module in ``experiments/`` that holds the study (default: ``name``).
      defaults: settings that this entry fixes on top of the module's presets (one module
        can serve several entries, e.g. Fig 3 on synthetic and on simulator populations).
      main_job: part of ``make run`` (the main job, quick scale).
      approx: the expected times were measured under load or projected (shown as ``~``).
    """

    name: str
    reproduces: str
    title: str
    quick_s: float
    paper_s: float | None
    module: str = ""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    main_job: bool = False
    approx: bool = False

    def __post_init__(self) -> None:
        if not self.module:
            object.__setattr__(self, "module", self.name)

    def command(self, scale: str = "quick") -> str:
        """The shell command that runs this study at ``scale``."""
        return f"python -m experiments run {self.name} --{scale}"


STUDIES: tuple[StudyEntry, ...] = (
    # ---- the library on a synthetic population
    StudyEntry("metrics_demo", "the library itself (no paper)",
               "every metric and decomposition on one synthetic population", 22, None,
               main_job=True),
    # ---- data
    StudyEntry("simulator_stats", '"Calibration is Grouping" §3.1, Table 7',
               "the ad-auction simulator's dataset statistics and the backbone's quality",
               30, 1800, main_job=True, approx=True),
    StudyEntry("world_match", '"Calibration is Grouping" Table 1 (AdAuction), Tables 5 and 7',
               "pilot: the simulator settings whose baseline calibrators match the AdAuction column",
               250, 700, approx=True),
    StudyEntry("world_match_rows", '"Calibration is Grouping" Table 1 (AdAuction), Tables 5 and 7',
               "pre-registered pilot: a world matched on every baseline cell of the AdAuction column",
               60, 900, approx=True),
    StudyEntry("textbook_lab", "calibration textbook chapter, §6 lab",
               "the textbook lab table (temperature, Platt, ECE, Brier) to 4 decimals", 9, None,
               main_job=True),
    # ---- Monte Carlo metric studies ("Calibration is Grouping" §3.2 and Appendix C)
    StudyEntry("mc_spearman", '"Calibration is Grouping" Fig 1, Fig 3',
               "Spearman of every metric with the oracle Brier, fixed and pooled designs, with CIs",
               83, 300, main_job=True, approx=True),  # paper: 295 s idle (2026-11-24)
    StudyEntry("mc_spearman_simulator", '"Calibration is Grouping" Fig 3 (simulator logs)',
               "Fig 3 on trials resampled from the ad-auction simulator's logs", 34, 160,  # paper: 157 s
               module="mc_spearman", defaults={"designs": ["simulator"]}, approx=True),
    StudyEntry("mc_ctr_sweep", 'beyond the papers ("Calibration is Grouping" §2.5 argument)',
               "Spearman of ECE, LCCE variants and oracle metrics with the oracle Brier vs base CTR",
               100, 250, approx=True),  # paper: 248 s idle (2026-11-24)
    StudyEntry("metric_atlas", 'beyond the papers ("Calibration is Grouping" §3.2 question, modern metrics)',
               "Spearman with the oracle Brier of the paper's metrics and the modern ones (smECE, CCE, "
               "multicalibration, SKCE, debiased ECE, ECE-sweep, ICI) by design, CTR and n, with CIs",
               600, 280, approx=True),  # paper: 273 s idle, 2 host devices (2026-11-24)
    StudyEntry("mc_std", '"Calibration is Grouping" Fig 4',
               "Spearman across configurations of the metrics' standard deviations, fixed and pooled "
               "designs, with CIs", 79, 210, approx=True),  # paper: 205 s idle (2026-11-24)
    StudyEntry("mc_improvement", '"Calibration is Grouping" Fig 5',
               "Spearman of metric improvements after temperature / Platt scaling, per calibrator "
               "and pooled, with CIs", 92, 260, approx=True),  # paper: 252 s idle (2026-11-24)
    StudyEntry("mc_sample_size", '"Calibration is Grouping" Fig 6a',
               "Spearman of ECE and LCCE with the oracle Brier against sample size (10^3 to 10^6), "
               "with CIs", 141, 160, approx=True),  # paper: 151 s idle (2026-11-24)
    StudyEntry("mc_lcce_sensitivity", '"Calibration is Grouping" Fig 6b, Table 6',
               "LCCE sensitivity to clusters, restarts and the clustering subsample; Table 6 on both "
               "scales", 94, 250, approx=True),  # paper: 247 s idle (2026-11-24)
    StudyEntry("metric_accuracy", '"Calibration-then-Calculation" Def. 3, Eq. 8',
               "metric accuracy for pipeline comparisons, Calibrated Log Loss vs Log Loss",
               50, 40, approx=True),  # paper: 38 s idle (2026-11-24)
    # ---- the calibrator comparison ("Calibration is Grouping" §4)
    StudyEntry("printed_tables", "the five papers' printed tables and text",
               "relations that hold by definition between the printed tables' numbers, every number printed "
               "twice and every ratio printed beside its parts, and where they break",
               3, None, main_job=True),
    StudyEntry("interval_coverage", "beyond the papers",
               "coverage of the report's intervals for ECE, LCCE and a reliability bin with few clicks; "
               "size and power of the calibration tests", 123, 503, approx=True),  # beside another run
    StudyEntry("compare_calibrators", '"Calibration is Grouping" Tables 1-5',
               "every calibrator on four simulator worlds and Open Bandit, fits crossed with folds", 580, 3710,
               approx=True),  # on 2 cores of an Intel Xeon with AVX-512, 2026-12-05: quick 580 s wall (b8458b7, idle);
    # paper 3,600 s of phases at 15a4b79 with the presets' heads (SAG together, Neural
    # Calibration one by one; matched 879 s, grouping 903, AdAuction-like 924, null 798, Open Bandit 75), over two
    # sessions, plus about 110 s of simulating and backbones as the run before it
    StudyEntry("ablation", '"Calibration is Grouping" Fig 2',
               "VR-SAG ablations (partitions, groups, the variance weight) in three worlds: independent fits "
               "crossed with test folds, paired differences with intervals", 95, 980,
               approx=True),  # the lock-step SAG solver, 2 cores of an AMD EPYC without AVX-512 (2026-12-05):
    # quick 92 s beside the paper run's sequential control; paper 976 s idle, 60-80 s per (world, repeat),
    # 15 repeats checkpointed one by one (sequential on an Intel Xeon, 2026-11-27: 2,468 s)
    StudyEntry("grouping", '"Calibration is Grouping" Fig 7',
               "within-group variance of VR-SAG, SAG and field grouping in three worlds: independent fits "
               "crossed with test folds, paired differences with intervals", 100, 455,
               approx=True),  # the lock-step SAG solver, 2 cores of an AMD EPYC without AVX-512 (2026-12-05):
    # quick 99 s beside ablation's paper run; paper 452 s beside light tests, 10 fits x 10 folds per world,
    # fits 86-122 s per world (sequential on the same machine, idle: 530 s; on an Intel Xeon 2026-11-27: 504 s)
    # ---- neighbouring papers
    StudyEntry("field_calibration", "Pan et al., Field-aware Calibration, Tables 1-6",
               "Neural Calibration against field-blind calibrators (Field-ECE, Field-RCE)",
               156, 2045),  # quick: 156 s with MCGrad and 5 refits; paper: 2,045 s wall with the
    # paper's base network (256-dim embeddings, 200-200 units) and the lock-step SAG solver, idle Xeon with
    # AVX-512 (2026-12-05: simulator shift setting 1,505 s, main 442 s); checkpointed per (data, setting)
    StudyEntry("calibrated_logloss", '"Calibration-then-Calculation" Tables 1-12, Fig 1',
               "Calibrated Log Loss against Log Loss: metric accuracy on pipelines", 60, 2460),
    # quick: 60 s beside one job (2026-12-03, warm compilation cache; 140 s cold beside two);
    # paper: 2458 s beside one job (2026-12-03: the 270 CTR runs 711 s, the 120 architecture runs
    # 1,600 s); checkpointed per part, so a stopped run resumes after the last one finished
    StudyEntry("topn_calibration", "Sato, top-N calibration, Tables 1-2, Figs 3-6",
               "ECE@N and RDECE@N: Original, VAD and top-N calibration (TNF)", 140, 12440),
    # quick: 141 s beside one light job (2026-12-02: five recommenders, each fitted three times a
    # split for VAD); paper: 12,440 s beside another job (2026-12-03: ItemKNN, MF, BPR and NCF
    # 1,980 s for their 10 splits, LightGCN 840-1,140 s a split (20 epochs x 3 fits), the
    # MovieLens task 63 s); checkpointed per (recommender, split)
)

_BY_NAME = {s.name: s for s in STUDIES}


def get(name: str) -> StudyEntry:
    """The entry called ``name`` (``KeyError`` listing the known names otherwise)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown study {name!r}; known: {sorted(_BY_NAME)}") from None


def main_job() -> list[StudyEntry]:
    """The studies of ``make run``, in registry (dependency) order."""
    return [s for s in STUDIES if s.main_job]
