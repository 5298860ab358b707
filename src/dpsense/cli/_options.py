"""Parsing the steward's repeatable ``COLUMN=VALUE`` options of ``dpsense dataset add``.

``--bound hours=0:24`` (public clipping bounds), ``--keys region=north,south`` (public keys; a key
that is a whole number is read as an integer), ``--kind location=point`` and ``--policy hours=clamp``.
Each mistake is a ``SpecError`` that names the option and shows the expected form. The number rule
and the typo hints (``dpsense.query``, ``dpsense.interface.spec``: numpy, pydantic) are imported when an
option is parsed, not when the command line starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dpsense.cli._errors import SpecError

KINDS = ("numeric", "integer", "categorical", "point", "edge")
POLICIES = ("refuse", "drop", "clamp")


def _split(option: str, item: str, example: str) -> tuple[str, str]:
    column, sep, value = item.partition("=")
    if not sep or not column.strip() or not value.strip():
        raise SpecError(option, "expected COLUMN=VALUE", item, f"write e.g. {option} {example}")
    return column.strip(), value.strip()


def _once(option: str, parsed: Mapping[str, object], column: str, item: str) -> None:
    if column in parsed:
        raise SpecError(option, "each column is given once", item, f"merge the {option} options for {column!r}")


def _ascii_digits(text: str) -> bool:
    """Only 0-9 (``str.isdigit`` also takes '²', which ``int`` refuses)."""
    return text.isascii() and text.isdigit()


def real_option(option: str, text: str) -> float:
    """A decimal option's value as a float (``--target n=50``): the size rule, then a real number."""
    number_option(option, text)
    try:
        value = float(text)
    except ValueError:
        raise SpecError(option, "expected a decimal number", text, f"write e.g. {option} n=50") from None
    return value


def number_option(option: str, text: str) -> str:
    """``text`` of a numeric option (``--epsilon 0.5``) if it keeps the size rule, else a ``SpecError``."""
    from dpsense.query._values import NUMBER_RULE, number_problem

    problem = number_problem(text)
    if problem is not None:
        raise SpecError(option, NUMBER_RULE, problem, f"write e.g. {option} 0.5")
    return text


def parse_bounds(items: Sequence[str], *, flag: str = "--bound") -> dict[str, tuple[str, str]]:
    """``["hours=0:24"]`` -> ``{"hours": ("0", "24")}`` (decimal strings: kept exact); also ``--typical``."""
    out: dict[str, tuple[str, str]] = {}
    for item in items:
        column, value = _split(flag, item, "hours=0:24")
        low, sep, high = value.partition(":")
        if not sep or not low.strip() or not high.strip():
            raise SpecError(flag, "expected COLUMN=LOWER:UPPER", item, f"write e.g. {flag} hours=0:24")
        _once(flag, out, column, item)
        out[column] = (number_option(flag, low.strip()), number_option(flag, high.strip()))
    return out


def parse_keys(items: Sequence[str]) -> dict[str, list[str | int]]:
    """``["region=north,south"]`` -> ``{"region": ["north", "south"]}``; whole numbers become ints."""
    out: dict[str, list[str | int]] = {}
    for item in items:
        column, value = _split("--keys", item, "region=north,south,east,west")
        keys = [k.strip() for k in value.split(",")]
        if any(not k for k in keys):
            raise SpecError("--keys", "keys must not be empty", item, "separate keys by single commas")
        _once("--keys", out, column, item)
        out[column] = [_key(k) for k in keys]
    return out


def parse_hierarchies(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``["geo=region,district:leaves.csv"]`` -> ``{"geo": {"levels": [...], "keys": [(...), ...]}}``.

    The file holds one leaf a line, its values in the levels' order, separated by commas (whole numbers
    become ints, as in ``--keys``); blank lines are skipped.
    """
    example = "geo=region,district:leaves.csv"
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        name, value = _split("--hierarchy", item, example)
        levels_text, sep, path = value.partition(":")
        levels = [level.strip() for level in levels_text.split(",")]
        if not sep or not path.strip() or any(not level for level in levels):
            raise SpecError("--hierarchy", "takes NAME=LEVEL,LEVEL:LEAVES_FILE", item, f"write e.g. {example}")
        try:
            lines = Path(path.strip()).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            raise SpecError(
                "--hierarchy", "the leaves file must be a readable UTF-8 text file", path, "one leaf a line"
            ) from None
        leaves = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            parts = [part.strip() for part in line.split(",")]
            if len(parts) != len(levels) or any(not part for part in parts):
                raise SpecError(
                    "--hierarchy",
                    f"each leaf holds {len(levels)} comma-separated values (one per level)",
                    f"{path.strip()} line {number}",
                    "write the leaf's value at every level, top level first",
                )
            leaves.append(tuple(_key(part) for part in parts))
        _once("--hierarchy", out, name, item)
        out[name] = {"levels": levels, "keys": leaves}
    return out


def _key(text: str) -> str | int:
    digits = text[1:] if text[:1] in "+-" else text
    return int(text) if _ascii_digits(digits) else text


def parse_choices(option: str, items: Sequence[str], choices: Sequence[str], example: str) -> dict[str, str]:
    """``["hours=clamp"]`` -> ``{"hours": "clamp"}``, each value one of ``choices``."""
    from dpsense.interface.spec import closest

    out: dict[str, str] = {}
    for item in items:
        column, value = _split(option, item, example)
        if value not in choices:
            raise SpecError(option, f"unknown value for {column!r}", value, closest(value, choices))
        _once(option, out, column, item)
        out[column] = value
    return out


def parse_counts(option: str, items: Sequence[str], example: str) -> dict[str, int]:
    """``["region=1"]`` -> ``{"region": 1}``, each value a positive integer."""
    out: dict[str, int] = {}
    for item in items:
        column, value = _split(option, item, example)
        if not _ascii_digits(value) or int(value) < 1:
            raise SpecError(option, f"the value for {column!r} must be an integer >= 1", value, f"write e.g. {example}")
        _once(option, out, column, item)
        out[column] = int(value)
    return out


def parse_steps(items: Sequence[str]) -> dict[str, str]:
    """``["alcohol=0.01"]`` -> ``{"alcohol": "0.01"}`` (a decimal string, kept exact; the schema checks the rule)."""
    out: dict[str, str] = {}
    for item in items:
        column, value = _split("--step", item, "alcohol=0.01")
        _once("--step", out, column, item)
        out[column] = number_option("--step", value.strip())
    return out


def parse_choices_by_value(
    option: str, items: Sequence[str], choices: Sequence[str], example: str
) -> dict[str, list[str]]:
    """``["typical=hours", "bound=age"]`` -> ``{"typical": ["hours"], "bound": ["age"], ...}`` (every choice a key)."""
    from dpsense.interface.spec import closest

    out: dict[str, list[str]] = {choice: [] for choice in choices}
    for item in items:
        what, column = _split(option, item, example)
        if what not in choices:
            raise SpecError(option, "unknown declaration to remove", what, closest(what, choices))
        if column in out[what]:
            raise SpecError(option, f"{what} of {column!r} is named twice", item, "name each once")
        out[what].append(column)
    return out
