"""Empirical privacy audits: statistical lower bounds on a mechanism's privacy loss (``dpsense audit``)."""

from dpsense.audit.empirical import AuditResult, epsilon_lower_bound

__all__ = ["AuditResult", "epsilon_lower_bound"]
