"""The YAML documents the CLI reads: a release spec (-> ``Query``) and a privacy policy (-> ``PrivacyPolicy``).

A release spec::

    dataset: health_events
    snapshot: v1                  # optional: the registered snapshot (default: the latest)
    source: events.parquet        # optional: the data, if not at its registered path (relative to this file)
    epsilon: 0.5
    delta: 0                      # optional, default 0
    request_id: weekly-2026-49    # optional: a retry with the same id never charges twice
    filters:                      # optional
      - {column: age, op: ">=", value: 18}
    group_by: {column: region, keys: [north, south, east, west]}   # optional; keys default to the declared
    # several columns: group_by: {columns: [region, diagnosis], keys: [[north, flu], [south, cold]]}
    max_groups_per_unit: 1        # optional
    aggregates:
      people: {kind: count_units}
      events: {kind: count, max_rows_per_unit: 30}
      mean_hours: {kind: mean, column: hours, bounds: [0, 24]}
      p90_age: {kind: quantile, column: age, q: 0.9}
    engine: spark                 # optional: duckdb (default) or spark
    spark_master: local[2]        # optional, engine spark only: local[N], spark://HOST:PORT, yarn, k8s://...
    spark_collect_limit: 1000000  # optional, engine spark only: a public bound on rows collected to the driver

Aggregate kinds and their fields: ``count`` (max_rows_per_unit, mechanism), ``count_units`` (mechanism),
``sum`` / ``mean`` / ``variance`` / ``median`` (column, bounds, max_rows_per_unit, mechanism),
``quantile`` (+ q), ``quantiles`` (+ qs, a list), ``trimmed_mean`` (+ trim_fraction), ``histogram``
(column, keys, max_rows_per_unit, mechanism), ``min_distance`` (columns, bounds, max_rows_per_unit,
mechanism), ``triangle_count`` (columns, max_rows_per_unit, mechanism). A field a kind does not use is
refused, never ignored. The model and its rules are the service's too (``dpsense.interface.spec``, the
shared release spec); this one adds ``source``, ``request_id``, ``engine`` and ``spark_*``. Everything
is judged here before the ledger is opened; what needs the dataset's schema (unknown columns) and the
privacy rules (ε > 0, δ in [0, 1), the per-release cap) is judged by the Session before it charges.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from pydantic import StrictInt, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from dpsense.cli._engine import ENGINES, MASTER_FORMS, EngineName, EngineSettings, valid_master
from dpsense.cli._yaml import load
from dpsense.interface import spec
from dpsense.interface.spec import Number, StrictModel, Text, unknown_choice
from dpsense.query import Query
from dpsense.release import PrivacyPolicy

RELEASE_HELP = "see the spec format in `dpsense release --help`"
POLICY_HELP = "see the policy format in `dpsense dataset add --help`"


class ReleaseSpec(spec.ReleaseSpec):
    """A release spec as YAML (see the module docstring): the shared spec plus a local file's fields."""

    source: Text | None = None
    request_id: Text | None = None
    engine: EngineName | None = None
    spark_master: Text | None = None
    spark_collect_limit: StrictInt | None = None

    @field_validator("engine", mode="before")
    @classmethod
    def _engine(cls, value: Any) -> Any:
        if value is not None and value not in ENGINES:
            raise unknown_choice("engine", value, ENGINES)
        return value

    @field_validator("spark_master", "spark_collect_limit")
    @classmethod
    def _spark_only(cls, value: Any, info: ValidationInfo) -> Any:
        field = info.field_name
        if value is None:
            return value
        if info.data.get("engine") is not EngineName.SPARK:
            raise PydanticCustomError(
                "spark_only",
                "'{field}' is only valid with engine: spark",
                {"field": field, "fix": f"add engine: spark, or remove {field}:", "input": value},
            )
        if field == "spark_master" and not valid_master(value):
            raise PydanticCustomError(
                "not_a_master", "not a Spark master URL", {"fix": f"use {MASTER_FORMS}", "input": value}
            )
        if field == "spark_collect_limit" and value < 1:
            raise PydanticCustomError(
                "not_positive", "must be an integer >= 1", {"fix": "e.g. 1000000", "input": value}
            )
        return value

    def engine_settings(self) -> EngineSettings:
        """The engine settings this spec states (``None`` where it states none)."""
        return EngineSettings(self.engine, self.spark_master, self.spark_collect_limit)

    def source_path(self, spec_file: Path) -> Path | None:
        """The data source, resolved against the spec file's folder."""
        if self.source is None:
            return None
        path = Path(self.source).expanduser()
        return path if path.is_absolute() else spec_file.parent / path


def load_release_spec(path: Path) -> tuple[ReleaseSpec, Query]:
    """Read and check a release spec; returns it with its query (nothing is opened or charged)."""
    release = load(path, ReleaseSpec, what="release spec", help_hint=RELEASE_HELP)
    return release, release.query()


class PolicySpec(StrictModel):
    """The steward's privacy policy as YAML; every field of ``dpsense.PrivacyPolicy`` is required."""

    protected: str
    population: StrictInt
    planned_releases: StrictInt
    release_window: str
    delta_rationale: str
    per_release_epsilon: Number
    attacker_knowledge: str
    minimum_useful_accuracy: str
    approved_by: str
    approved_on: dt.date
    next_review: dt.date

    def policy(self) -> PrivacyPolicy:
        """The ``PrivacyPolicy`` (checked against the budget at registration)."""
        return PrivacyPolicy(
            protected=self.protected,
            population=self.population,
            planned_releases=self.planned_releases,
            release_window=self.release_window,
            delta_rationale=self.delta_rationale,
            per_release_epsilon=self.per_release_epsilon,
            attacker_knowledge=self.attacker_knowledge,
            minimum_useful_accuracy=self.minimum_useful_accuracy,
            approved_by=self.approved_by,
            approved_on=self.approved_on.isoformat(),
            next_review=self.next_review.isoformat(),
        )


def load_policy(path: Path) -> PrivacyPolicy:
    """Read and check a privacy-policy YAML file."""
    return load(path, PolicySpec, what="privacy policy", help_hint=POLICY_HELP).policy()
