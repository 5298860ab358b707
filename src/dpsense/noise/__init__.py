"""Layer 0: the only place randomness is drawn.

* ``entropy``: the OS CSPRNG (batched ``os.urandom`` reads); a deterministic source only through
  the test-only hook ``dpsense.noise.testing``.
* ``exact``: exact integer samplers (CKS 2020): Bernoulli(exp(-gamma)), discrete Laplace,
  discrete Gaussian, vectorised with active-lane masks.
* ``grid``: float-safe snapping of real values to a public power-of-two grid.
* ``pool``: noise drawn ahead of single releases, so release time does not depend on the noise.
* ``categorical``: exact sampling of an index with weights m_i exp(-a e_i) (exponential mechanism).
* ``lazy_bernoulli``: exact Bernoulli(c/(e^eps + c)) by lazy comparison (randomized response).
"""

from dpsense.noise.entropy import is_test_source_active, random_bytes, words
from dpsense.noise.exact import (
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
    geometric_exp_one,
    uniform_below,
    uniform_below_scalar,
)
from dpsense.noise.pool import pooled_discrete_gaussian, pooled_discrete_laplace

__all__ = [
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_laplace",
    "geometric_exp_one",
    "is_test_source_active",
    "pooled_discrete_gaussian",
    "pooled_discrete_laplace",
    "random_bytes",
    "uniform_below",
    "uniform_below_scalar",
    "words",
]
