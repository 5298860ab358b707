"""The SQL front end's refusals: each names the construct and the supported alternative."""

from __future__ import annotations

from dpsense.core.errors import UnsupportedRequest, UsageError


def unsupported(construct: str, fix: str) -> UnsupportedRequest:
    """A construct outside the DP subset of SQL (nothing is charged)."""
    return UnsupportedRequest(f"SQL construct not supported in a DP query: {construct}", construct, fix)


def invalid(rule: str, value: object, fix: str) -> UsageError:
    """SQL that breaks a rule of the subset (unknown column, wrong literal type, ...)."""
    return UsageError(rule, value, fix)


#: Clauses of a SELECT that a DP release refuses, with the alternative.
CLAUSE_FIXES: dict[str, tuple[str, str]] = {
    "joins": ("JOIN", "register the joined data as one dataset (joins of private tables are not supported)"),
    "limit": ("LIMIT", "LIMIT on private rows is refused; release the aggregate and cut the returned table"),
    "offset": ("OFFSET", "release the aggregate and cut the returned table"),
    "having": ("HAVING", "filter the returned (noisy) table instead; it is free post-processing"),
    "order": ("ORDER BY", "sort the returned table instead; it is free post-processing"),
    "with": ("WITH (common table expression)", "query the registered dataset directly"),
    "distinct": ("SELECT DISTINCT", "use GROUP BY with public keys"),
    "qualify": ("QUALIFY", "window functions are not supported; use GROUP BY"),
    "windows": ("WINDOW", "window functions are not supported; use GROUP BY"),
    "laterals": ("LATERAL", "query the registered dataset directly"),
    "pivots": ("PIVOT", "use GROUP BY with public keys"),
}
