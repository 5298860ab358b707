"""Output names by meaning: one question is one release, whatever the analyst calls its outputs.

The name an analyst gives a statistic (``agg(n=dp.count())``, a SQL alias, a YAML key) is a label on
the released table, not part of the question: ``agg(n=dp.count())``, ``agg(count_over_50=dp.count())``,
``SELECT COUNT(*) AS c`` and the same spec over HTTP ask the same thing. ``by_meaning`` renames every
aggregate of a built query to a label rendered from what it computes (its kind, columns and every
option that changes the release: q, qs, trim fraction, bounds other than the declared ones, the
contribution bound, the mechanism, PTR's proposed bound, histogram keys other than the declared ones),
and merges aggregates that mean the same. The Session plans, caches and stores the renamed query, so
its canonical form and cache key carry no analyst name; the release it hands back shows the analyst's
names again (``Release``: renaming is post-processing). Labels read like ``count()``, ``mean(hours)``,
``quantile(age, q=9/10)``, ``mean(hours, bounds=[0, 10], mechanism=gaussian)``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from fractions import Fraction

from dpsense.query._aggregates import AggregateKind
from dpsense.query._ir import AggregateIR, QueryIR
from dpsense.query._schema import Schema

#: A label longer than this is shortened to its kind, columns and a digest of the rest.
MAX_LABEL = 120


def by_meaning(ir: QueryIR, schema: Schema) -> tuple[QueryIR, dict[str, str]]:
    """The query with each aggregate named by its meaning (equal meanings merged), and analyst name -> label."""
    labels: dict[str, str] = {}
    merged: dict[str, AggregateIR] = {}
    owners: dict[str, str] = {}  # label -> the meaning (canonical text without the name) that holds it
    groups = {g.column for g in ir.group_by}
    for agg in ir.aggregates:
        meaning = _meaning_text(agg)
        label = meaning_label(agg, schema)
        clash = any(g == label or g.startswith(label + "_") for g in groups)
        if clash or owners.get(label, meaning) != meaning:
            label = f"{label} #{_digest(meaning)}"
        owners[label] = meaning
        labels[agg.name] = label
        merged.setdefault(label, replace(agg, name=label))
    renamed = replace(ir, aggregates=tuple(sorted(merged.values(), key=lambda a: a.name)))
    return renamed, labels


def meaning_label(agg: AggregateIR, schema: Schema) -> str:
    """``kind(columns, option=value, ...)``: the options that differ from the defaults, in a fixed order."""
    options = [f"{key}={text}" for key, text in _options(agg, schema) if text is not None]
    label = f"{agg.kind.value}({', '.join([*agg.columns, *options])})"
    if len(label) > MAX_LABEL or any(not ch.isprintable() for ch in label):
        label = f"{agg.kind.value}(#{_digest(_meaning_text(agg))})"
    return label


def _options(agg: AggregateIR, schema: Schema) -> list[tuple[str, str | None]]:
    """Each option of the label and its text, None where the aggregate leaves it at its default."""
    qs = None if agg.qs is None else f"[{', '.join(_number(q) for q in agg.qs)}]"
    rows = None if agg.max_rows_per_unit is None else str(agg.max_rows_per_unit)
    return [
        ("q", _maybe(agg.q)),
        ("qs", qs),
        ("trim_fraction", _maybe(agg.trim_fraction)),
        ("bounds", _bounds_text(agg, schema)),
        ("max_rows_per_unit", rows),
        ("mechanism", agg.mechanism),
        ("proposed_bound", _maybe(agg.proposed_bound)),
        ("keys", _keys_text(agg, schema)),
        ("split", None if agg.split is None else f"[{', '.join(_number(w) for w in agg.split)}]"),
    ]


def _bounds_text(agg: AggregateIR, schema: Schema) -> str | None:
    """The bounds when they are not the columns' declared ones (one pair, or a digest of several)."""
    if not agg.bounds or agg.bounds == tuple(schema.column(c).bounds for c in agg.columns):
        return None
    if len(set(agg.bounds)) == 1:
        low, high = agg.bounds[0]
        return f"[{_number(low)}, {_number(high)}]"
    return f"per column #{_digest(str(agg.bounds))}"


def _keys_text(agg: AggregateIR, schema: Schema) -> str | None:
    """A histogram's keys when they are not the column's declared ones (as a digest: they may be many)."""
    if agg.kind is not AggregateKind.HISTOGRAM or agg.keys is None or agg.keys == schema.column(agg.columns[0]).keys:
        return None
    return f"#{_digest(json.dumps(agg.to_json()['keys'], sort_keys=True))}"


def _maybe(value: Fraction | None) -> str | None:
    return None if value is None else _number(value)


def _number(value: Fraction) -> str:
    """An exact number as a plain decimal when it has one of at most 30 digits (``0.9``, ``24``), else ``n/d``."""
    if value.denominator == 1:
        return str(value.numerator)
    rest, places = value.denominator, 0
    while rest % 10 == 0 or rest % 2 == 0 or rest % 5 == 0:
        if rest % 10 == 0:
            rest //= 10
        elif rest % 2 == 0:
            rest //= 2
        else:
            rest //= 5
        places += 1
    if rest != 1 or places > 30:
        return f"{value.numerator}/{value.denominator}"
    scaled = value * 10**places  # an integer: the denominator divides 10^places
    digits = str(abs(scaled.numerator)).rjust(places + 1, "0")
    text = f"{digits[:-places]}.{digits[-places:]}".rstrip("0").rstrip(".")
    return ("-" if value < 0 else "") + text


def _meaning_text(agg: AggregateIR) -> str:
    doc = agg.to_json()
    doc.pop("name")
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
