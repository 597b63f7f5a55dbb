"""An AdAuction-like ad-auction simulator with oracle click-through rates.

The simulator stands in for the proprietary one behind the AdAuction dataset of
"Calibration is Grouping" (VR-SAG; anonymous authors, under review; §3 "Dataset with
ground-truth CTR", Appendix H.2, Table 7).  It keeps the
mechanism that matters for calibration studies: auto-bidding agents bid
``value x pCTR x pacing`` with a *noisy production pCTR*, second-price auctions pick the
winners, and only winners are logged.  Ads whose production pCTR is over-estimated bid
too high, win more often and are over-represented in the log (sample selection bias), so
the logged production pCTR over-estimates the logged click rate although it is nearly
unbiased over all candidates (compare ``exposure="auction"`` with ``exposure="random"``).

Generative model (all parameters drawn once per world from the key, see
:func:`make_world`).  For request ``r`` (user ``u``, cohort ``c(u)``, media ``m``,
placement ``l``, hour ``h``, latent regime ``g``) and candidate ad ``a`` (advertiser
``v(a)``, creative ``k(a)``) shown in slot ``s``, the oracle logit is

.. math::

    \\eta = b + \\alpha_{c} + \\beta_u + w\\,x_u + q_a + \\alpha_{v} + \\alpha_{k}
          + \\alpha_m + \\alpha_l + \\alpha_h + \\rho_s
          + \\delta_g + \\kappa_g \\, \\lambda \\, \\frac{U_u^\\top V_a}{\\sqrt{d}},
    \\qquad \\pi = \\sigma(\\eta),

with main effects, a user x ad latent interaction and regime-specific terms
(shift ``delta_g``, interaction strength ``kappa_g``).  The production model knows every
main effect but not the regime: it uses the regime-averaged shift and interaction
strength, plus a persistent per-ad error ``e_a`` and per-impression noise ``eps``,

.. math::

    \\ell = b' + (\\text{main effects}) + \\tilde\\delta_g
          + \\bar\\kappa \\, \\lambda \\, \\frac{U_u^\\top V_a}{\\sqrt{d}} + e_a + \\varepsilon,
    \\qquad \\hat p = \\sigma(\\ell),

where the intercept ``b'`` is set on a pilot sample so that the mean production pCTR
matches the mean oracle CTR over all candidates (the production model is calibrated on
average before the auction; this also absorbs the Jensen inflation of the noise) and
``tilde-delta_g`` is an optional extra regime distortion (default 0).  Regimes with
``delta_g > bar-delta`` are under-estimated and the others over-estimated, so the
production model's miscalibration differs in sign across regimes.

Bidding and auctions: advertiser ``v`` bids ``value_v * m_v * hat-p`` (position-free
pCTR); the ``n_slots`` highest bids above the reserve win slots 0, 1, ... (generalised
second price: the winner of slot ``s`` pays the next-highest bid, at least the reserve).
After every chunk of requests each pacing multiplier moves towards spending the
advertiser's budget evenly over the chunks,
``m_v <- clip(m_v * exp(eta_p * (B_v - spend_v) / B_v), m_min, m_max)``.

Everything is vectorised JAX; a chunk of requests is one jitted call, chunks run in a
Python loop carrying the pacing state, and every chunk's key is ``fold_in(key, chunk)``,
so results are deterministic per key.  :func:`simulate_to_disk` streams chunks to
``.npz`` files with a manifest (atomic writes, resumable) for the paper scale.

Layout (private modules, one idea each; import everything from
:mod:`calib_jax.data.simulator`):

* ``_config`` — :class:`SimulatorConfig`, the standard scales, column names and
  cardinalities, :func:`config_hash`, and :class:`World` (the persistent parameters' layout).
* ``_world`` — :func:`make_world` (draws the persistent parameters, pilot intercept), the
  world and request keys; imports ``_traffic``, which does not import it back.
* ``_traffic`` — request draws, contexts, candidates, oracle and production logits.
* ``_auction`` — one chunk: bidding, pacing, second-price auction or random exposure.
* ``_log`` — :class:`Impressions`, :func:`iter_chunks`, :func:`simulate`,
  :func:`summary_stats`.
* ``_disk`` — :func:`simulate_to_disk` and :func:`load_from_disk`.
* ``_full_matrix`` — :class:`FullMatrix` and :func:`simulate_full_matrix`.
* ``_table`` — :func:`simulate_log`, :func:`log_table` and :func:`write_log`: the impressions
  as a production-shaped log (Arrow table, Parquet or CSV file) with the true CTR.
"""

from calib_jax.data.simulator._config import DENSE_NAMES as DENSE_NAMES
from calib_jax.data.simulator._config import FIELD_NAMES as FIELD_NAMES
from calib_jax.data.simulator._config import SimulatorConfig as SimulatorConfig
from calib_jax.data.simulator._config import World as World
from calib_jax.data.simulator._config import config_hash as config_hash
from calib_jax.data.simulator._config import default_config as default_config
from calib_jax.data.simulator._config import field_cardinalities as field_cardinalities
from calib_jax.data.simulator._config import paper_config as paper_config
from calib_jax.data.simulator._config import tiny_config as tiny_config
from calib_jax.data.simulator._disk import load_from_disk as load_from_disk
from calib_jax.data.simulator._disk import simulate_to_disk as simulate_to_disk
from calib_jax.data.simulator._full_matrix import FullMatrix as FullMatrix
from calib_jax.data.simulator._full_matrix import simulate_full_matrix as simulate_full_matrix
from calib_jax.data.simulator._log import Impressions as Impressions
from calib_jax.data.simulator._log import iter_chunks as iter_chunks
from calib_jax.data.simulator._log import simulate as simulate
from calib_jax.data.simulator._log import summary_stats as summary_stats
from calib_jax.data.simulator._table import LOG_SUFFIXES as LOG_SUFFIXES
from calib_jax.data.simulator._table import log_table as log_table
from calib_jax.data.simulator._table import simulate_log as simulate_log
from calib_jax.data.simulator._table import write_log as write_log
from calib_jax.data.simulator._world import make_world as make_world

__all__ = [
    "SimulatorConfig",
    "default_config",
    "tiny_config",
    "paper_config",
    "World",
    "Impressions",
    "FullMatrix",
    "FIELD_NAMES",
    "DENSE_NAMES",
    "field_cardinalities",
    "config_hash",
    "make_world",
    "iter_chunks",
    "simulate",
    "simulate_to_disk",
    "load_from_disk",
    "simulate_full_matrix",
    "simulate_log",
    "log_table",
    "write_log",
    "LOG_SUFFIXES",
    "summary_stats",
]
