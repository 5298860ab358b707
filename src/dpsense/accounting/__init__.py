"""Layer 1: composition and privacy accounting (pure math; no randomness, no data).

* ``compose_basic``: basic composition of ``PureDP`` / ``ApproxDP`` / ``ZCDP`` losses, exact.
* ``advanced_composition``, ``optimal_homogeneous_composition``, ``best_homogeneous_composition``:
  k identical (ε, δ)-DP mechanisms (Dwork-Rothblum-Vadhan 2010; Kairouz-Oh-Viswanath 2015).
* ``zcdp_to_approx_tight``, ``approx_delta_of_zcdp``: the tight zCDP -> (ε, δ) conversion (CKS 2020).
* ``RdpCurve`` and the RDP curves of the Gaussian, Laplace, randomized-response and pure-DP
  mechanisms, with Mironov and CKS conversions to (ε, δ) (Mironov 2017).
* ``pld_epsilon``, ``pld_delta`` with ``LaplaceEvent`` / ``GaussianEvent``: numerical PLD
  accounting through Google's ``dp_accounting`` (optional extra ``dpsense[accounting]``).
* ``balle_wang_delta``, ``balle_wang_sigma``, ``discrete_gaussian_delta``,
  ``discrete_gaussian_sigma2``: exact Gaussian curves and calibration (Balle-Wang 2018; CKS 2020).

Every budget returned is a ``dpsense.core`` loss type rounded *up* when inexact. The formulas and
their sources are in docs/math/composition.md and in each function's docstring.
"""

from dpsense.accounting.advanced import (
    advanced_composition,
    best_homogeneous_composition,
    optimal_homogeneous_composition,
)
from dpsense.accounting.basic import compose_basic
from dpsense.accounting.gaussian_exact import (
    balle_wang_delta,
    balle_wang_sigma,
    discrete_gaussian_delta,
    discrete_gaussian_sigma2,
)
from dpsense.accounting.pld import GaussianEvent, LaplaceEvent, PldEvent, pld_delta, pld_epsilon
from dpsense.accounting.rdp import (
    DEFAULT_ORDERS,
    RdpCurve,
    gaussian_rdp,
    laplace_rdp,
    pure_dp_rdp,
    randomized_response_rdp,
)
from dpsense.accounting.zcdp import approx_delta_of_zcdp, zcdp_to_approx_tight

__all__ = [
    "DEFAULT_ORDERS",
    "GaussianEvent",
    "LaplaceEvent",
    "PldEvent",
    "RdpCurve",
    "advanced_composition",
    "approx_delta_of_zcdp",
    "balle_wang_delta",
    "balle_wang_sigma",
    "best_homogeneous_composition",
    "compose_basic",
    "discrete_gaussian_delta",
    "discrete_gaussian_sigma2",
    "gaussian_rdp",
    "laplace_rdp",
    "optimal_homogeneous_composition",
    "pld_delta",
    "pld_epsilon",
    "pure_dp_rdp",
    "randomized_response_rdp",
    "zcdp_to_approx_tight",
]
