"""The release planner: declare -> allocate -> execute, deciding from public facts only.

``plan(ir, epsilon=..., delta=..., adjacency=...)`` turns a validated ``QueryIR`` into a ``Plan``: one
``PlanStep`` per mechanism the release needs, each with its statistic, mechanism (by name), theorem,
adjacency, global sensitivity and budget share. It never reads data (docs/design.md: choosing a mechanism
by looking at the data is itself a leak); ``release/`` executes the steps and re-checks the loss with
``assert_loss_equals`` before it charges.

Mechanism choice, parts, contribution bound and sensitivity per statistic: one module each in
``dpsense.statistics`` (the registry ``STATISTICS``, passed in as ``rules``); the planner itself is generic:

* count, count_units, sum, histogram: Laplace (pure ε-DP); Gaussian when the analyst asks for it and
  delta > 0; geometric on request for counts.
* mean: under add/remove a noisy centered sum and a noisy count (two steps, ``mean_private_n_plan``);
  under replace with a public n and no grouping, sum/n (one step, ``mean_sensitivity_public_n``);
  under replace without a public n, the two-step form with replace sensitivities.
* variance: three steps, a noisy centered sum S1, a noisy sum of squared centered values S2 and a
  noisy count N (Laplace, or Gaussian on request); the release computes S2/N - (S1/N)^2 (post-processing).
* median / quantile: the EM quantile at every ε under both adjacencies (benchmarks/accuracy.py and
  benchmarks/replace_median.py; docs/planner.md).
* trimmed_mean, min_distance, triangle_count: smooth sensitivity with Cauchy noise (pure ε-DP).
* approx_bounds: a geometric-noise histogram over public log2 bins (L1 sensitivity C, 2C under
  replace), thresholded by post-processing (``dpsense.mechanisms.approx_bounds``; pure ε-DP).

Budget rule (allocated once, exactly): each of the k steps has an even share ε/k, and a statistic
released in several steps redistributes its shares among them by the weights its rule gives
(``budget_weight``: 1 each, except the mean's centred sum against its count, ``statistics.mean``, and an
order statistic's value step against the count that makes its n public); δ is split evenly over the
steps that use it (the Gaussian ones), and a δ > 0 that no step uses is refused rather than silently
charged. Basic composition (Dwork-Roth Thm 3.16) of the steps then equals the request exactly.

Contribution bounds: C is the aggregate's ``max_rows_per_unit``, else the dataset's (``max_rows_per_unit``
argument); grouped queries also use the query's ``max_groups_per_unit``. Global sensitivities are stated
for the unit of C rows. Data-dependent mechanisms (quantiles, smooth, inverse sensitivity) are stated
for one row (or two, smooth under replace), so they run at ε/M and group privacy (Dwork-Roth Thm 2.2)
gives ε for the unit: M = C, except under replace with public groups, where a replaced unit can leave one
group while its replacement enters another (``_planner_rules.unit_record_cost``: 2C for the
exponential-mechanism and inverse-sensitivity quantiles, C plus the odd parts for smooth sensitivity).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from fractions import Fraction

from dpsense.accounting import compose_basic
from dpsense.core.adjacency import Adjacency
from dpsense.core.checks import integer_in
from dpsense.core.errors import InternalError, InvalidPrivacyParameter, UnsupportedRequest, UsageError
from dpsense.core.numbers import NumberLike, ratio_text
from dpsense.core.privacy_loss import ApproxDP, PrivacyLoss, PureDP, check_delta, check_epsilon
from dpsense.query._aggregates import AggregateKind
from dpsense.query._ir import AggregateIR, QueryIR
from dpsense.query._mechanisms import Mechanism, RecordCost, mechanism_named
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import Choice, calibrated_changes, norm_for, unit_record_cost
from dpsense.query._rules import Facts, Rules, StatisticRule, choose
from dpsense.sensitivity import Norm, Sqrt

__all__ = ["Plan", "PlanStep", "StepPart", "assert_loss_equals", "plan"]


@dataclass(frozen=True)
class PlanStep:
    """One mechanism run: public facts only.

    Attributes:
        output: the aggregate's output name.
        part: what the step releases (``VALUE``, or the ``CENTERED_SUM`` / ``COUNT`` of a mean).
        statistic: the aggregate's kind.
        mechanism: the ``Mechanism`` (its value is the name plans serialise).
        noise: the smooth-sensitivity noise family (``"cauchy"``), else ``None``.
        theorem: the guarantee's source.
        chosen_by: ``"default"`` or ``"analyst"``; ``reason`` says why.
        adjacency: the adjacency the sensitivity and the guarantee hold under.
        max_rows_per_unit: C; ``max_groups_per_unit``: C0 of a grouped query, else ``None``.
        sensitivity, norm: the global sensitivity the noise is calibrated to (``None`` for mechanisms
            that calibrate to the data, which the executor bounds with the same public facts).
        loss: the share of the budget charged for this step.
        mechanism_epsilon: the ε the mechanism runs with (``loss`` ε, divided by ``record_cost``
            for row-level data-dependent mechanisms: group privacy).
        record_cost: M for a data-dependent step: a unit's change costs at most M calls of the
            per-group mechanism over all groups (``_planner_rules.unit_record_cost``), so the step
            runs at ε / M; ``None`` for global-sensitivity steps.

    """

    output: str
    part: StepPart
    statistic: AggregateKind
    mechanism: Mechanism
    noise: str | None
    theorem: str
    chosen_by: str
    reason: str
    adjacency: Adjacency
    max_rows_per_unit: int | None
    max_groups_per_unit: int | None
    sensitivity: Fraction | Sqrt | None
    norm: Norm | None
    loss: PureDP | ApproxDP
    mechanism_epsilon: Fraction
    record_cost: int | None = None
    note: str = ""  # the explain report's note after the sensitivity (not serialised: the rule's text)

    @property
    def changes_per_call(self) -> int:
        """k: the record changes one call of a data-dependent mechanism is calibrated for (1 or 2)."""
        return calibrated_changes(self.mechanism, adjacency=self.adjacency)

    @property
    def unit_cost(self) -> int:
        """M of a data-dependent step (``record_cost``); an internal error for a global-sensitivity step."""
        if self.record_cost is None:
            raise InternalError(f"step {self.output!r} is not a data-dependent step")
        return self.record_cost

    def to_json(self) -> dict[str, object]:
        """A JSON object of the step, numbers as exact ``"n/d"`` strings."""
        sens: object = None
        if isinstance(self.sensitivity, Sqrt):
            sens = {"sqrt": _q(self.sensitivity.squared)}
        elif self.sensitivity is not None:
            sens = _q(self.sensitivity)
        extra: dict[str, object] = {} if self.record_cost is None else {"record_cost": self.record_cost}
        return {
            **extra,
            "output": self.output,
            "part": self.part.value,
            "statistic": self.statistic.value,
            "mechanism": self.mechanism,
            "noise": self.noise,
            "theorem": self.theorem,
            "chosen_by": self.chosen_by,
            "adjacency": self.adjacency.value,
            "max_rows_per_unit": self.max_rows_per_unit,
            "max_groups_per_unit": self.max_groups_per_unit,
            "sensitivity": sens,
            "norm": None if self.norm is None else self.norm.value,
            "epsilon": _q(self.loss.epsilon),
            "delta": _q(self.loss.delta) if isinstance(self.loss, ApproxDP) else "0",
            "mechanism_epsilon": _q(self.mechanism_epsilon),
        }


@dataclass(frozen=True)
class Plan:
    """Every mechanism a release needs with its exact budget share; hashable and canonical."""

    dataset: str
    query_fingerprint: str
    adjacency: Adjacency
    requested: PureDP | ApproxDP
    public_n: int | None
    steps: tuple[PlanStep, ...]

    @property
    def total_loss(self) -> PrivacyLoss:
        """The steps' losses by basic composition (Dwork-Roth Thm 3.16), exact."""
        return compose_basic([s.loss for s in self.steps])

    def canonical(self) -> str:
        """Canonical JSON text of the plan (sorted keys, exact numbers)."""
        doc = {
            "dataset": self.dataset,
            "query": self.query_fingerprint,
            "adjacency": self.adjacency.value,
            "epsilon": _q(self.requested.epsilon),
            "delta": _q(self.requested.delta) if isinstance(self.requested, ApproxDP) else "0",
            "public_n": self.public_n,
            "steps": [s.to_json() for s in self.steps],
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def fingerprint(self) -> str:
        """SHA-256 hex digest of ``canonical()``."""
        return hashlib.sha256(self.canonical().encode("utf-8")).hexdigest()

    def explain(self) -> str:
        """Plain-language text: per step the statistic, mechanism, theorem, adjacency, sensitivity, share."""
        return _explain(self)


def plan(
    ir: QueryIR,
    *,
    epsilon: NumberLike,
    delta: NumberLike = 0,
    adjacency: Adjacency | str,
    public_n: int | None = None,
    max_rows_per_unit: int | None = None,
    rules: Rules,
) -> Plan:
    """Plan a release of ``ir`` at exactly (``epsilon``, ``delta``) under the declared adjacency.

    Args:
        ir: the validated query.
        epsilon: the total ε of the release (> 0).
        delta: the total δ; must be 0 unless some step uses it (a Gaussian override).
        adjacency: ``"add_remove"`` or ``"replace"``.
        public_n: the public number of rows averaged by an ungrouped mean (replace adjacency only).
        max_rows_per_unit: the dataset's contribution bound C, used where an aggregate declares none.
        rules: each statistic's rule by kind (``dpsense.statistics.STATISTICS``).

    Raises:
        UsageError: invalid parameters or overrides, an unknown contribution bound, an unused δ.
        UnsupportedRequest: keys that would need private partition selection.

    """
    eps = _representable(check_epsilon(epsilon), "epsilon")
    dlt = _representable(check_delta(delta), "delta")
    adj = Adjacency.parse(adjacency)
    n = _check_public_n(public_n, adj)
    selecting = _keys_to_select(ir, dlt)
    grouped = bool(ir.group_by)
    parts = {a.name: _rule(rules, a).parts(a, adjacency=adj, public_n=n, grouped=grouped) for a in ir.aggregates}
    weights = {a.name: _weights(_rule(rules, a), parts[a.name]) for a in ir.aggregates}
    unit = eps / (sum(len(p) for p in parts.values()) + (1 if selecting else 0))  # ε/k: an even step's share
    drafts: list[tuple[AggregateIR, StepPart, Choice, int | None]] = []
    for agg in ir.aggregates:
        stat = _rule(rules, agg)
        rows = stat.rows(agg, dataset_rows=max_rows_per_unit, groups=ir.max_groups_per_unit, grouped=grouped)
        row_level = stat.data_dependent
        run_eps = unit * weights[agg.name].get(StepPart.VALUE, Fraction(1))  # the value step's share
        if row_level and rows is not None:  # the default quantile is judged on the ε it runs with
            cost = unit_record_cost(
                _costed(agg.mechanism), adjacency=adj, rows=rows, groups=ir.max_groups_per_unit, grouped=grouped
            )
            run_eps = run_eps / cost
        choice = choose(stat, agg, mechanism_epsilon=run_eps, delta=dlt, adjacency=adj)
        drafts.extend(
            (agg, part, _PUBLIC_N_COUNT if _is_public_n_count(stat, part) else stat.part_choice(part, choice), rows)
            for part in parts[agg.name]
        )
    k_delta = sum(1 for _, _, c, _ in drafts if c.uses_delta) + (1 if selecting else 0)
    if dlt > 0 and k_delta == 0:
        raise UsageError(
            "delta > 0 was given but no step of this plan uses it",
            float(dlt),
            "pass delta=0 for a pure ε-DP release, or ask for mechanism='gaussian'",
        )
    steps = []
    if selecting:
        steps.append(_selection_step(ir, adj, ApproxDP(unit, dlt / k_delta)))
    for agg, part, choice, rows in drafts:
        share = unit * weights[agg.name][part]
        loss: PureDP | ApproxDP = ApproxDP(share, dlt / k_delta) if choice.uses_delta else PureDP(share)
        steps.append(_step(_rule(rules, agg), agg, part, choice, rows, ir.max_groups_per_unit, adj, n, grouped, loss))
    requested: PureDP | ApproxDP = ApproxDP(eps, dlt) if dlt > 0 else PureDP(eps)
    result = Plan(ir.dataset, ir.fingerprint(), adj, requested, n, tuple(steps))
    assert_loss_equals(result, requested)
    return result


def _weights(stat: StatisticRule, parts: tuple[StepPart, ...]) -> dict[StepPart, Fraction]:
    """Each part's multiple of ε/k: the statistic's k_s parts share k_s ε/k in proportion to their weights.

    A statistic's total share stays one even share per step, so weights never move budget between
    statistics; with equal weights every step gets ε/k.
    """
    raw = {part: stat.budget_weight(part) for part in parts}
    total = sum(raw.values())
    return {part: len(parts) * w / total for part, w in raw.items()}


#: A release's ε and δ > 0 lie within [1e-300, 1e300]: every mechanism computes with doubles, and a
#: value outside (1e400, 1e-400, a 5000-digit ε) would overflow or vanish in float arithmetic.
_SMALLEST, _LARGEST = Fraction(1, 10**300), Fraction(10**300)


def _representable(value: Fraction, name: str) -> Fraction:
    if value != 0 and not _SMALLEST <= value <= _LARGEST:
        raise InvalidPrivacyParameter(
            f"{name} must lie between 1e-300 and 1e300 (the mechanisms compute with doubles)",
            "outside [1e-300, 1e300]",
            f"pass a {name} such as 0.5" + (" (or 0)" if name == "delta" else ""),
        )
    return value


def _costed(name: str | None) -> Mechanism:
    """The mechanism whose record cost the default quantile is judged with: the analyst's, else the EM's.

    An unknown or global name counts like the EM quantile here (``choose`` refuses it right after).
    """
    named = None if name is None else mechanism_named(name)
    return named if named is not None and named.info.record_cost is not None else Mechanism.EM_QUANTILE


#: The count step that gives a data-dependent statistic its public n (Laplace, global sensitivity C).
_PUBLIC_N_COUNT = Choice(
    Mechanism.LAPLACE, "default", "a noisy count of the present values, used as the public n of the statistic"
)


def _is_public_n_count(rule: StatisticRule, part: StepPart) -> bool:
    return part is StepPart.COUNT and rule.data_dependent


def _rule(rules: Rules, agg: AggregateIR) -> StatisticRule:
    rule = rules.get(agg.kind)
    if rule is None:
        raise InternalError(f"no statistic rule for {agg.kind.value}")
    return rule


def _keys_to_select(ir: QueryIR, delta: Fraction) -> bool:
    """True when the grouping's keys must be released privately first; refusals name the fix."""
    if not ir.needs_partition_selection:
        return False
    histograms = [a.name for a in ir.aggregates if a.needs_partition_selection]
    if histograms:
        raise UnsupportedRequest(
            "a histogram needs public keys",
            histograms,
            "declare the keys, or release group_by(column).agg(n=count()) with delta > 0 to select them privately",
        )
    columns = [g.column for g in ir.group_by if g.keys is None]
    if delta == 0:
        raise UsageError(
            "the keys of a grouping without public keys are released by private partition selection, which "
            "needs delta > 0",
            columns,
            "pass delta > 0 (e.g. 1e-8, well below 1/population), or declare the keys at registration",
        )
    if ir.max_groups_per_unit is None:
        raise UsageError(
            "private partition selection needs a bound on the keys one unit may touch",
            columns,
            "declare it with Query(...).max_groups_per_unit(k), or register the dataset with "
            "max_groups_per_unit={column: k}",
        )
    return True


def _selection_step(ir: QueryIR, adj: Adjacency, loss: ApproxDP) -> PlanStep:
    groups = ir.max_groups_per_unit
    if groups is None:  # _keys_to_select refuses this first
        raise InternalError("partition selection without max_groups_per_unit")
    column = " x ".join(ir.group_columns)
    return PlanStep(
        output=column,
        part=StepPart.KEYS,
        statistic=AggregateKind.COUNT_UNITS,
        mechanism=Mechanism.PARTITION_SELECTION,
        noise=None,
        theorem=Mechanism.PARTITION_SELECTION.theorem,
        chosen_by="default",
        reason=f"the keys of {column!r} are not public: only keys with enough units are released",
        adjacency=adj,
        max_rows_per_unit=None,
        max_groups_per_unit=groups,
        sensitivity=Fraction(2 * groups if adj is Adjacency.REPLACE else groups),
        norm=Norm.L1,
        loss=loss,
        mechanism_epsilon=loss.epsilon,
    )


def assert_loss_equals(plan: Plan, requested: PrivacyLoss) -> None:
    """Raise ``InternalError`` unless the plan's composed loss equals ``requested`` exactly.

    ``PureDP(ε)`` and ``ApproxDP(ε, 0)`` count as equal; anything else must match in kind and value.
    """
    total = plan.total_loss
    if _as_pair(total) != _as_pair(requested):
        raise InternalError(f"the plan composes to {total}, not the requested {requested}")


def _as_pair(loss: PrivacyLoss) -> tuple[str, Fraction, Fraction]:
    if isinstance(loss, PureDP):
        return ("dp", loss.epsilon, Fraction(0))
    if isinstance(loss, ApproxDP):
        return ("dp", loss.epsilon, loss.delta)
    return ("zcdp", loss.rho, Fraction(0))


def _check_public_n(public_n: object, adj: Adjacency) -> int | None:
    if public_n is None:
        return None
    if not integer_in(public_n, 1):
        raise UsageError("public_n must be an integer >= 1", public_n, "pass the public row count, e.g. public_n=1000")
    if adj is not Adjacency.REPLACE:
        raise UsageError(
            "public_n applies only under replace adjacency (under add/remove n is private)",
            public_n,
            "drop public_n, or declare adjacency='replace' if the number of rows is public",
        )
    return public_n


def _step(
    rule: StatisticRule,
    agg: AggregateIR,
    part: StepPart,
    choice: Choice,
    rows: int | None,
    groups: int | None,
    adj: Adjacency,
    n: int | None,
    grouped: bool,
    loss: PureDP | ApproxDP,
) -> PlanStep:
    sensitivity: Fraction | Sqrt | None = None
    norm: Norm | None = None
    run_eps = loss.epsilon
    cost: int | None = None
    if choice.mechanism.is_global:
        norm = norm_for(choice)
        facts = Facts(adjacency=adj, rows=rows, groups=groups, grouped=grouped, public_n=n, norm=norm)
        sensitivity = rule.sensitivity(agg, part, facts)
    elif rows is not None:
        cost = unit_record_cost(choice.mechanism, adjacency=adj, rows=rows, groups=groups, grouped=grouped)
        run_eps = loss.epsilon / cost
    return PlanStep(
        output=agg.name,
        part=part,
        statistic=agg.kind,
        mechanism=choice.mechanism,
        noise=choice.noise,
        theorem=choice.mechanism.theorem,
        chosen_by=choice.chosen_by,
        reason=choice.reason,
        adjacency=adj,
        max_rows_per_unit=rows,
        max_groups_per_unit=groups if grouped else None,
        sensitivity=sensitivity,
        norm=norm,
        loss=loss,
        mechanism_epsilon=run_eps,
        record_cost=cost,
        note=rule.explain_note(agg, part, n) if sensitivity is not None else "",
    )


_q = ratio_text


def _num(value: Fraction | Sqrt) -> str:
    return str(value)


_PART_TEXT = {
    StepPart.VALUE: "",
    StepPart.CENTERED_SUM: ", part 'noisy centered sum'",
    StepPart.COUNT: ", part 'noisy count'",
    StepPart.CENTERED_SQUARES: ", part 'noisy sum of squared centered values' of the variance",
    StepPart.KEYS: " of each key, part 'released keys' (private partition selection)",
    StepPart.CLIP: ", part 'approximate bounds' (the clip of its later steps)",
}


def _explain(p: Plan) -> str:
    adjacency = (
        "add/remove (neighbouring datasets differ by all rows of one privacy unit)"
        if p.adjacency is Adjacency.ADD_REMOVE
        else "replace (same public number of units; all rows of one unit replaced)"
    )
    delta = p.requested.delta if isinstance(p.requested, ApproxDP) else Fraction(0)
    lines = [
        f"Release plan for dataset {p.dataset!r}, decided from public facts only (no data was read).",
        f"Adjacency: {adjacency}.",
        f"Budget: ε = {_num(p.requested.epsilon)}, δ = {_num(delta)}, split over {len(p.steps)} step(s) "
        f"({_split(p)}); basic composition of the steps equals the budget exactly.",
    ]
    lines.extend(_explain_step(s, p.public_n) for s in p.steps)
    return "\n".join(lines)


def _split(p: Plan) -> str:
    """The words "evenly", or the share of ε of each step when the statistics weigh them."""
    shares = [s.loss.epsilon for s in p.steps]
    if len(set(shares)) <= 1:
        return "evenly"
    return "ε " + " + ".join(_num(e) for e in shares) + ", weighted by the statistics' rules"


def _explain_step(s: PlanStep, public_n: int | None) -> str:
    text = f"- {s.output!r}: {s.statistic.value}{_PART_TEXT[s.part]}; mechanism {s.mechanism}"
    if s.noise is not None:
        text += f" ({s.noise} noise)"
    text += f", {s.chosen_by} ({s.reason}); guarantee: {s.theorem}; adjacency {s.adjacency.value}"
    if s.max_rows_per_unit is not None:
        text += f"; at most {s.max_rows_per_unit} row(s) per unit"
    if s.max_groups_per_unit is not None:
        text += f" in at most {s.max_groups_per_unit} group(s)"
    if s.sensitivity is not None and s.norm is not None:
        text += f"; global {s.norm.value.upper()} sensitivity {_num(s.sensitivity)}"
        text += s.note
    else:
        text += "; noise calibrated inside the mechanism from the public bounds, no global sensitivity"
    text += f"; charged ε = {_num(s.loss.epsilon)}"
    if isinstance(s.loss, ApproxDP):
        text += f", δ = {_num(s.loss.delta)}"
    if s.mechanism_epsilon != s.loss.epsilon:
        text += f" (run at ε = {_num(s.mechanism_epsilon)} per row: group privacy over the unit's rows"
        if s.record_cost is not None and s.max_rows_per_unit is not None and s.record_cost > s.max_rows_per_unit:
            why = (
                "each replaced row is a removal and an addition"
                if s.mechanism.record_cost is RecordCost.ONE_CHANGE
                else "a replaced unit can leave one group while its replacement enters another"
            )
            text += f", a unit's change costs {s.record_cost} record changes: {why}"
        text += ")"
    return text + "."
