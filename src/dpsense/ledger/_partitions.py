"""Parallel composition over declared, public partitions (docs/math/composition.md; McSherry 2009, PINQ).

A charge may declare that its release reads only one part of a partition of the privacy units made
by a fixed, public, data-independent rule on the record (``PartitionSpec``). All charges of a dataset
that name the same ``rule`` form one *group*; the first charge stores the declaration (parts, C₀,
adjacency) and every later one must repeat it exactly.

Cost of a group inside a budget scope, with ``spend(p)`` the exact sum of the group's counted charges
on part ``p`` (sequential composition within a part):

* add/remove adjacency: one unit lies in at most C₀ parts (C₀ = ``max_parts_per_unit``, public), so
  adding or removing it changes the data of at most C₀ parts: the cost is the sum of the C₀ largest
  part spends (C₀ = 1: the maximum, McSherry's parallel composition).
* replace adjacency: the replaced unit may leave up to C₀ parts and the new one enter up to C₀
  others, so the cost is the sum of the 2·C₀ largest part spends (C₀ = 1: the two largest).

The largest spends are taken per component: (ε, δ) in basic mode (each changed part contributes its
(εᵢ, δᵢ); Σε and Σδ over any admissible set of parts is bounded by the sums of the largest εᵢ and of
the largest δᵢ), ρ in zCDP mode. A scope's spend is then the sum of its unpartitioned charges plus the
cost of every group, and each debit and refund recomputes the group's cost exactly (Fractions) inside
the locking transaction. PLD-accounted budgets do not implement partitions and refuse them.

The split must not depend on other records or the data distribution: the ledger cannot check that,
and the caller's declaration is a claim it records (in the audit chain) and holds the caller to.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import UnsupportedRequest, UsageError
from dpsense.ledger._amounts import Mode, Pair, canonical_json, in_mode, loss_from_json
from dpsense.ledger._backends import Row, Tx
from dpsense.ledger._types import Scope


@dataclass(frozen=True)
class PartitionSpec:
    """A release's place in a public partition of the privacy units.

    Attributes:
        rule: the name of the public, data-independent partitioning rule (``"region"``); charges
            naming the same rule on a dataset share one declaration and compose in parallel.
        parts: every part the rule can produce (public, e.g. ``("north", "south")``), no duplicates.
        part: the one part this charge's release reads.
        adjacency: ``"add_remove"`` or ``"replace"`` (the ledger does not store a dataset's
            adjacency, so the declaration states it; it decides the composition rule).
        max_parts_per_unit: C₀, the most parts one privacy unit can fall in (public, 1 <= C₀).

    """

    rule: str
    parts: tuple[str, ...]
    part: str
    adjacency: str
    max_parts_per_unit: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.rule, str) or not self.rule:
            raise UsageError("a partition needs a rule name", self.rule, 'name the public rule, e.g. rule="region"')
        parts = self.parts
        if isinstance(parts, str) or not isinstance(parts, Sequence):
            raise UsageError("a partition's parts must be a sequence of names", parts, 'pass parts=("a", "b")')
        parts = tuple(parts)
        if not parts or not all(isinstance(p, str) and p for p in parts) or len(set(parts)) != len(parts):
            raise UsageError(
                "a partition's parts must be distinct non-empty names", parts, "list every part once, by name"
            )
        object.__setattr__(self, "parts", parts)
        if self.part not in parts:
            raise UsageError("the charged part is not one of the declared parts", self.part, f"pick one of {parts}")
        object.__setattr__(self, "adjacency", Adjacency.parse(self.adjacency).value)
        c0 = self.max_parts_per_unit
        if isinstance(c0, bool) or not isinstance(c0, int) or not 1 <= c0 <= len(parts):
            raise UsageError(
                "max_parts_per_unit (C₀) must be an integer between 1 and the number of parts",
                c0,
                "declare how many parts one privacy unit can fall in",
            )

    @property
    def span(self) -> int:
        """How many parts one neighbouring change can touch: C₀ (add/remove) or 2·C₀ (replace)."""
        factor = 2 if self.adjacency == Adjacency.REPLACE.value else 1
        return min(len(self.parts), factor * self.max_parts_per_unit)

    def declaration(self) -> str:
        """The group's declaration as canonical JSON (parts sorted): what later charges must repeat."""
        return canonical_json(
            {
                "rule": self.rule,
                "parts": sorted(self.parts),
                "max_parts_per_unit": self.max_parts_per_unit,
                "adjacency": self.adjacency,
            }
        )


@dataclass(frozen=True)
class GroupCharge:
    """A charge in a partition group: its group id (None while the group is not stored yet), part, span."""

    partition_id: int | None
    part: str
    span: int


def check_partition(partition: object) -> PartitionSpec | None:
    """Refuse anything that is not a ``PartitionSpec`` (or None)."""
    if partition is None or isinstance(partition, PartitionSpec):
        return partition
    raise UsageError(
        "a partition must be a PartitionSpec",
        repr(partition),
        'pass partition=PartitionSpec(rule, parts, part, adjacency="add_remove")',
    )


def resolve(tx: Tx, dataset_id: int, spec: PartitionSpec | None) -> GroupCharge | None:
    """The stored group of ``spec``'s rule, checking that the declaration matches (nothing written)."""
    if spec is None:
        return None
    rows = tx.execute(
        "SELECT id, declaration FROM partitions WHERE dataset_id = ? AND rule = ?", (dataset_id, spec.rule)
    )
    if rows and rows[0][1] != spec.declaration():
        raise UsageError(
            f"partition rule {spec.rule!r} is already declared differently on this dataset",
            spec.declaration(),
            f"repeat the stored declaration {rows[0][1]} or name a different rule",
        )
    return GroupCharge(int(rows[0][0]) if rows else None, spec.part, spec.span)


def store(tx: Tx, dataset_id: int, spec: PartitionSpec, group: GroupCharge, now: float) -> GroupCharge:
    """Store the group's declaration if it is new (inside the charging transaction)."""
    if group.partition_id is not None:
        return group
    new_id = tx.execute(
        "INSERT INTO partitions (dataset_id, rule, declaration, created_at) VALUES (?, ?, ?, ?) RETURNING id",
        (dataset_id, spec.rule, spec.declaration(), now),
    )[0][0]
    return GroupCharge(int(new_id), group.part, group.span)


def group_key(group: GroupCharge | None) -> tuple[int | None, str | None]:
    """(group id, part) of a charge, as stored on its row; (None, None) outside any group."""
    return (None, None) if group is None else (group.partition_id, group.part)


def payload_json(partition: PartitionSpec | None) -> dict[str, object] | None:
    """The declaration and part as recorded in the audit chain."""
    if partition is None:
        return None
    declared: dict[str, object] = json.loads(partition.declaration())
    return declared | {"part": partition.part}


def spans(tx: Tx, dataset_id: int) -> dict[int, int]:
    """The span of every stored group of a dataset, by group id."""
    out: dict[int, int] = {}
    for pid, text in tx.execute("SELECT id, declaration FROM partitions WHERE dataset_id = ?", (dataset_id,)):
        decl = json.loads(text)
        factor = 2 if decl["adjacency"] == Adjacency.REPLACE.value else 1
        out[int(pid)] = min(len(decl["parts"]), factor * int(decl["max_parts_per_unit"]))
    return out


def group_cost(spends: dict[str, Pair], span: int) -> Pair:
    """The sum of the ``span`` largest part spends, per component (exact)."""
    a = sorted((s[0] for s in spends.values()), reverse=True)[:span]
    b = sorted((s[1] for s in spends.values()), reverse=True)[:span]
    return sum(a, Fraction(0)), sum(b, Fraction(0))


def part_spends(rows: list[Row], mode: Mode) -> dict[str, Pair]:
    """Per-part sums of ``rows`` (``part, loss JSON``) in ``mode``."""
    spends: dict[str, Pair] = {}
    for part, loss in rows:
        amount = in_mode(loss_from_json(json.loads(loss)), mode)
        old = spends.get(part, (Fraction(0), Fraction(0)))
        spends[part] = (old[0] + amount[0], old[1] + amount[1])
    return spends


def add(spends: dict[str, Pair], part: str, amount: Pair, sign: int = 1) -> dict[str, Pair]:
    """A copy of ``spends`` with ``sign * amount`` added to ``part``."""
    old = spends.get(part, (Fraction(0), Fraction(0)))
    return spends | {part: (old[0] + sign * amount[0], old[1] + sign * amount[1])}


def refuse_pld(scope: Scope) -> UnsupportedRequest:
    """The refusal for a partitioned charge on a PLD-accounted scope."""
    return UnsupportedRequest(
        f"the {scope} budget is accounted with PLD, which does not implement parallel composition",
        "partition=...",
        "charge without partition= (sequential composition), or account this budget in basic (ε, δ) or zCDP",
    )


def scoped_cost(spent: Pair, old: dict[str, Pair], new: dict[str, Pair], span: int) -> Pair:
    """A scope's spend after one group's part spends change from ``old`` to ``new``."""
    before, after = group_cost(old, span), group_cost(new, span)
    return spent[0] - before[0] + after[0], spent[1] - before[1] + after[1]


def composed(charges: list[tuple[Pair, int | None, str | None]], span_of: dict[int, int]) -> Pair:
    """Spend of a set of charges (amount, group id, part): unpartitioned ones summed, groups composed."""
    total: Pair = (Fraction(0), Fraction(0))
    groups: dict[int, dict[str, Pair]] = {}
    for amount, pid, part in charges:
        if pid is None or part is None:
            total = (total[0] + amount[0], total[1] + amount[1])
        else:
            groups[pid] = add(groups.get(pid, {}), part, amount)
    for pid, spends in groups.items():
        cost = group_cost(spends, span_of[pid])
        total = (total[0] + cost[0], total[1] + cost[1])
    return total
