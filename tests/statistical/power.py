"""One power check for every distribution test: the true parameter passes, a parameter 30 % off is rejected.

A distribution test without power proves little (a sampler at the wrong scale also "passes" a weak
test), so each test runs its goodness-of-fit statistic on the same draws against the law at the
true parameter (must not reject) and at the parameter times each wrong factor (must reject).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tests.statistical.gof import P_THRESHOLD

#: The wrong factors every test rejects: the true scale (or ε) off by 30 % in either direction.
WRONG = (0.7, 1.3)


def assert_calibrated(
    pvalue_at: Callable[[float], float],
    *,
    wrong: Sequence[float] = WRONG,
    alpha: float = P_THRESHOLD,
    what: str = "scale",
) -> None:
    """``pvalue_at(1.0) > alpha`` and ``pvalue_at(f) < alpha`` for each ``f`` in ``wrong``.

    ``pvalue_at(f)`` is the p-value of the test's fixed draws against the law whose ``what`` is the
    true one times ``f``; it must compute exactly the true law at ``f = 1.0`` (multiply by ``f``,
    never rebuild the parameter). Every p-value is computed before any is checked, and the assertion
    message lists them all.
    """
    factors = (1.0, *wrong)
    pvalues = {f: pvalue_at(f) for f in factors}
    report = ", ".join(
        f"{what} x {f:g}: p = {p:.3g} (must be {'>' if f == 1.0 else '<'} {alpha:g})" for f, p in pvalues.items()
    )
    assert pvalues[1.0] > alpha, f"the true {what} is rejected; {report}"
    for f in wrong:
        assert pvalues[f] < alpha, f"a {what} off by x {f:g} is not rejected (no power); {report}"
