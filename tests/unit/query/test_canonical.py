from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

import dpsense.query as q
from dpsense.query import Query, QueryIR, Schema

SCHEMA = Schema(
    {
        "person_id": "unit",
        "hours": "numeric",
        "age": "integer",
        "region": "categorical",
        "code": "categorical",
    },
    bounds={"hours": (0, 24), "age": (0, 120)},
    keys={"region": ["north", "south", "east", "west"]},
)

FILTERS = [
    ("age", ">=", 18),
    ("hours", "<", 12.5),
    ("region", "!=", "west"),
    ("region", "in", ["north", "south", "east"]),
    ("code", "in", [1, "1", True, "b"]),
]
AGGREGATES = {
    "n": q.count(max_rows_per_unit=30),
    "people": q.count_units(),
    "mean_hours": q.mean("hours", bounds=(0, 12)),
    "p90": q.quantile("age", 0.9),
    "codes": q.histogram("code", keys=["z", 2, "a"]),
    "tm": q.trimmed_mean("hours", 0.1),
}


def build(filters: list[tuple[str, str, object]], aggregates: dict[str, q.Aggregate], **group: object) -> QueryIR:
    query = Query("events")
    for column, op, value in filters:
        query = query.filter(column, op, value)  # type: ignore[arg-type]
    if group:
        query = query.group_by("region", keys=group.get("keys"))  # type: ignore[arg-type]
    return query.agg(**aggregates).build(SCHEMA)


BASE = build(FILTERS, AGGREGATES)


@settings(max_examples=60, deadline=None)
@given(
    st.permutations(FILTERS),
    st.permutations(list(AGGREGATES)),
    st.lists(st.sampled_from(FILTERS), max_size=3),
)
def test_reordering_and_repeating_filters_and_aggregates_keeps_the_form(
    filters: list[tuple[str, str, object]], names: list[str], repeats: list[tuple[str, str, object]]
) -> None:
    ir = build([*filters, *repeats], {n: AGGREGATES[n] for n in names})
    assert ir == BASE and hash(ir) == hash(BASE)
    assert ir.canonical() == BASE.canonical() and ir.fingerprint() == BASE.fingerprint()


@settings(max_examples=60, deadline=None)
@given(st.permutations(["north", "south", "east", "north", "south"]), st.permutations([1, "1", True, "b", 1.0]))
def test_in_lists_and_keys_are_sets(regions: list[str], codes: list[object]) -> None:
    a = build([("region", "in", regions), ("code", "in", codes)], {"h": q.histogram("code", keys=codes)})
    b = build(
        [("region", "in", ["east", "north", "south"]), ("code", "in", [True, 1, "1", "b"])],
        {"h": q.histogram("code", keys=["b", "1", 1, True])},
    )
    assert a.canonical() == b.canonical()


SPELLINGS_TENTH = [0.1, "0.1", Fraction(1, 10), Decimal("0.10"), "1e-1"]
SPELLINGS_24 = [24, 24.0, "24", Fraction(48, 2), Decimal("24.000")]


@given(st.sampled_from(SPELLINGS_TENTH), st.sampled_from(SPELLINGS_24), st.sampled_from(SPELLINGS_TENTH))
def test_equivalent_numeric_spellings_share_the_form(tenth: object, day: object, filter_value: object) -> None:
    ir = build(
        [("hours", "<=", filter_value)],
        {"m": q.mean("hours", bounds=(tenth, day)), "t": q.trimmed_mean("hours", tenth), "x": q.quantile("age", tenth)},  # type: ignore[arg-type]
    )
    ref = build(
        [("hours", "<=", Fraction(1, 10))],
        {
            "m": q.mean("hours", bounds=(Fraction(1, 10), 24)),
            "t": q.trimmed_mean("hours", "0.1"),
            "x": q.quantile("age", 0.1),
        },
    )
    assert ir == ref and ir.fingerprint() == ref.fingerprint()


def test_override_equal_to_declared_bounds_is_the_same_query() -> None:
    assert build([], {"m": q.mean("hours")}) == build([], {"m": q.mean("hours", bounds=(0.0, "24"))})


def test_declared_keys_and_explicit_keys_agree() -> None:
    declared = build([], {"n": q.count()}, keys=None)
    explicit = build([], {"n": q.count()}, keys=["west", "east", "south", "north"])
    assert declared == explicit


def test_canonical_text_is_sorted_json_with_exact_numbers() -> None:
    text = BASE.canonical()
    document = json.loads(text)
    assert text == json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert [a["name"] for a in document["aggregates"]] == sorted(AGGREGATES)
    tm = next(a for a in document["aggregates"] if a["name"] == "tm")
    assert tm["trim_fraction"] == "1/10" and tm["bounds"] == [["0/1", "24/1"]]
    codes = next(f for f in document["filters"] if f["column"] == "code")["value"]
    assert codes == [["b", True], ["n", "1/1"], ["s", "1"], ["s", "b"]]  # type-stable: 1, "1", True stay apart
    assert len(BASE.fingerprint()) == 64


VARIANTS = {
    "bounds": build([], {"m": q.mean("hours", bounds=(0, 12))}),
    "bounds2": build([], {"m": q.mean("hours", bounds=(0, 13))}),
    "declared": build([], {"m": q.mean("hours")}),
    "rows30": build([], {"m": q.mean("hours", max_rows_per_unit=30)}),
    "rows31": build([], {"m": q.mean("hours", max_rows_per_unit=31)}),
    "mech": build([], {"m": q.mean("hours", mechanism="laplace")}),
    "q5": build([], {"m": q.quantile("hours", 0.5)}),
    "q6": build([], {"m": q.quantile("hours", 0.6)}),
    "median": build([], {"m": q.median("hours")}),
    "keys": build([], {"m": q.mean("hours")}, keys=["north"]),
    "keys2": build([], {"m": q.mean("hours")}, keys=["south"]),
    "private_keys": build([], {"m": q.histogram("code")}),
    "public_keys": build([], {"m": q.histogram("code", keys=["a"])}),
    "filter": build([("age", ">", 18)], {"m": q.mean("hours")}),
    "filter2": build([("age", ">=", 18)], {"m": q.mean("hours")}),
    "filter_str": build([("code", "==", "1")], {"m": q.mean("hours")}),
    "filter_num": build([("code", "==", 1)], {"m": q.mean("hours")}),
    "filter_bool": build([("code", "==", True)], {"m": q.mean("hours")}),
    "name": build([], {"mm": q.mean("hours")}),
}


def test_different_queries_have_different_forms() -> None:
    texts = {name: ir.canonical() for name, ir in VARIANTS.items()}
    assert len(set(texts.values())) == len(texts)
    assert len({ir.fingerprint() for ir in VARIANTS.values()}) == len(VARIANTS)
    assert len(set(VARIANTS.values())) == len(VARIANTS)  # hashable, and unequal as objects too


def test_ir_is_hashable_and_usable_as_a_key() -> None:
    cache = {BASE: "release-1"}
    assert cache[build(list(reversed(FILTERS)), dict(reversed(AGGREGATES.items())))] == "release-1"


def test_equality_keeps_booleans_numbers_and_strings_apart() -> None:
    # in Python True == 1 == Fraction(1) with one hash; as query literals they are different keys
    as_bool, as_num = VARIANTS["filter_bool"], VARIANTS["filter_num"]
    assert as_bool != as_num and as_bool.filters[0] != as_num.filters[0]
    assert len({as_bool, as_num, VARIANTS["filter_str"]}) == 3
