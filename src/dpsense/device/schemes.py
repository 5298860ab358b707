"""Scheme descriptors: the public parameters of one local-DP collection, shared by devices and server.

A scheme is a frozen dataclass with ``to_json()``, ``fingerprint()`` and ``guarantee()``;
``scheme_from_json(obj)`` rebuilds one from hostile JSON strictly. Every ε is an exact rational,
written as a decimal string in JSON ("1.0986"); every report probability is ``c/(e^a + c)`` with a
positive integer c and a rational a, sampled exactly (docs/math/local-collection.md §13.2). Sizes are
capped so that no registered scheme makes a server allocate more than a few tens of MiB per summary.

Guarantees (adjacency: replace one user's input; docs/math/local-collection.md §13.4-§13.7):

* ``RapporScheme``: ε∞ over the lifetime of one value (the memoized permanent randomized response),
  ε1 < ε∞ per report (Erlingsson-Pihur-Korolova, CCS 2014, §3: the ε∞ and ε1 bounds).
* ``CmsScheme`` / ``HcmsScheme``: ε per report (Apple Differential Privacy Team 2017, CMS and HCMS).
* ``KrrScheme`` / ``OueScheme``: ε per report (Wang-Blocki-Li-Jha, USENIX Security 2017).
* ``PrefixScheme``: ε per report, one prefix per report through a count-mean sketch (prefix
  extension of Wang-Li-Jha's PEM, IEEE TDSC 2019, and Apple's SFP).

Repeated reports of the non-memoized schemes compose: k reports cost k·ε.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Context, Decimal
from fractions import Fraction
from typing import Any, ClassVar, Union

from dpsense.device._exact import OddsProbability, odds_probability

__all__ = [
    "MAX_EPSILON",
    "CmsScheme",
    "HcmsScheme",
    "KrrScheme",
    "OueScheme",
    "PrefixScheme",
    "RapporScheme",
    "Scheme",
    "SchemeError",
    "scheme_from_json",
]

#: The largest ε (per report or lifetime) a scheme may declare.
MAX_EPSILON = Fraction(20)
#: The largest number of counters (cells) one summary of a scheme may hold.
MAX_CELLS = 1 << 22
#: The most (bit, cohort) pairs of a RAPPOR scheme: the rows of its decoding regression.
MAX_RAPPOR_ROWS = 1 << 16
#: The longest dictionary entry, in characters, and the most characters a dictionary may hold in all.
MAX_VALUE_CHARS = 1024
MAX_DICTIONARY_CHARS = 1 << 22
_DECIMAL = re.compile(r"(0|[1-9][0-9]{0,2})(\.[0-9]{1,18})?")
_VERSION = 1


class SchemeError(ValueError):
    """A scheme parameter breaks a rule; names the field, the rule and the fix (never echoes a large value)."""

    def __init__(self, field: str, rule: str, fix: str) -> None:
        self.field = field
        self.rule = rule
        self.fix = fix
        super().__init__(f"scheme field {field!r}: {rule}. Fix: {fix}")


def describe_value(value: object) -> str:
    """A short, safe description of a bad value: small scalars verbatim, everything else by type and size."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if (isinstance(value, int) and abs(value) < 10**12) or isinstance(value, float):
        return repr(value)
    if isinstance(value, str) and len(value) <= 32:
        return repr(value)
    size = f" of length {len(value)}" if isinstance(value, str | list | tuple | dict) else ""
    return f"a {type(value).__name__}{size}"


def _int(field: str, value: object, lo: int, hi: int) -> int:
    if type(value) is not int or not lo <= value <= hi:
        rule = f"must be an integer in [{lo}, {hi}], got {describe_value(value)}"
        raise SchemeError(field, rule, f"pass {field}={lo}..{hi}")
    return value


def _epsilon(field: str, value: object) -> Fraction:
    """An exact ε from a decimal string (or, in Python, an int or a Fraction with a short decimal expansion)."""
    fix = f'pass {field} as a decimal string with at most 18 decimals, e.g. "1.5", in (0, {MAX_EPSILON}]'
    if (
        (isinstance(value, str) and _DECIMAL.fullmatch(value))
        or type(value) is int
        or (isinstance(value, Fraction) and _decimal_text(value) is not None)
    ):
        eps = Fraction(value)
    else:
        raise SchemeError(field, f"must be a positive decimal string, got {describe_value(value)}", fix)
    if not 0 < eps <= MAX_EPSILON:
        raise SchemeError(field, f"must lie in (0, {MAX_EPSILON}], got {describe_value(value)}", fix)
    return eps


def _decimal_text(value: Fraction) -> str | None:
    """The exact decimal string of ``value``, or None if it needs more than 18 decimals."""
    for places in range(19):
        scaled = value * 10**places
        if scaled.denominator == 1:
            digits = str(scaled.numerator).rjust(places + 1, "0")
            return digits if places == 0 else f"{digits[:-places]}.{digits[-places:]}"
    return None


def _strings(field: str, value: object, *, lo: int, hi: int) -> tuple[str, ...]:
    fix = f"pass {field} as a list of {lo}..{hi} distinct non-empty strings of at most {MAX_VALUE_CHARS} characters"
    if not isinstance(value, list | tuple) or not lo <= len(value) <= hi:
        raise SchemeError(field, f"must be a list of {lo}..{hi} strings, got {describe_value(value)}", fix)
    for i, item in enumerate(value):
        if not isinstance(item, str) or not 1 <= len(item) <= MAX_VALUE_CHARS:
            raise SchemeError(field, f"entry {i} must be a non-empty string of <= {MAX_VALUE_CHARS} chars", fix)
    if len(set(value)) != len(value):
        raise SchemeError(field, "entries must be distinct", fix)
    if sum(map(len, value)) > MAX_DICTIONARY_CHARS:
        raise SchemeError(field, f"must hold at most {MAX_DICTIONARY_CHARS} characters in all", fix)
    return tuple(value)


def _cells(field: str, cells: int, cap: int = MAX_CELLS) -> None:
    if cells > cap:
        raise SchemeError(field, f"would give {cells} counters or rows, more than {cap}", "use smaller sizes")


def _ceil_decimal(value: Decimal) -> str:
    """``value`` rounded up to 12 decimals, as a string (an upper bound on an irrational ε)."""
    return str(value.quantize(Decimal("1e-12"), rounding=ROUND_CEILING))


class _SchemeBase:
    """JSON, fingerprint and the guarantee record shared by every scheme."""

    kind: ClassVar[str]
    _EPSILON_FIELDS: ClassVar[tuple[str, ...]] = ("epsilon",)
    _LIST_FIELDS: ClassVar[tuple[str, ...]] = ()
    _THEOREM: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        """The scheme as a JSON-ready dict: ``{"scheme": kind, "version": 1, <fields>}``."""
        out: dict[str, Any] = {"scheme": self.kind, "version": _VERSION}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]  # every subclass is a dataclass
            value = getattr(self, f.name)
            if isinstance(value, Fraction):
                value = _decimal_text(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    def fingerprint(self) -> str:
        """SHA-256 (hex) of the canonical JSON of the scheme: summaries carry it so that no two schemes mix."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(text.encode("ascii")).hexdigest()

    def _epsilon_report_text(self) -> str:
        epsilon: Fraction = getattr(self, "epsilon")  # noqa: B009  # every scheme but RAPPOR has this field
        return str(_decimal_text(epsilon))

    def _epsilon_lifetime_text(self) -> str | None:
        return None

    def guarantee(self) -> dict[str, Any]:
        """The local guarantee: ε per report, ε over a lifetime (memoized schemes) or None, theorem."""
        lifetime = self._epsilon_lifetime_text()
        return {
            "model": "local",
            "adjacency": "replace one user's input (local DP: any two inputs of one user)",
            "epsilon_per_report": self._epsilon_report_text(),
            "epsilon_lifetime": lifetime,
            "repeated_reports": (
                "all reports about one value cost at most epsilon_lifetime; each new value costs its own"
                if lifetime is not None
                else "each report costs epsilon_per_report; reports compose additively"
            ),
            "theorem": self._THEOREM,
        }


@dataclass(frozen=True)
class RapporScheme(_SchemeBase):
    """RAPPOR: Bloom filter of ``num_hashes`` hashes into ``num_bits`` bits, per cohort; PRR then IRR.

    The permanent randomized response (PRR) flips each Bloom bit w.p. 1/(e^(ε∞/2h) + 1) once per
    (client, value) and is memoized; the instantaneous one (IRR) flips each PRR bit w.p.
    1/(e^(ε_irr/2h) + 1) per report. A value change moves at most 2h Bloom bits, so the PRR is
    ε∞-LDP (the lifetime bound) and one report is ε1-LDP with ε1 = 4h·artanh(tanh(ε∞/4h)·tanh(ε_irr/4h))
    < min(ε∞, ε_irr) (Erlingsson-Pihur-Korolova, CCS 2014, §3 (the ε∞ and ε1 bounds), with a symmetric IRR, p = 1 - q).
    """

    num_bits: int
    num_hashes: int
    num_cohorts: int
    epsilon_lifetime: Fraction
    epsilon_irr: Fraction

    kind: ClassVar[str] = "rappor"
    _EPSILON_FIELDS: ClassVar[tuple[str, ...]] = ("epsilon_lifetime", "epsilon_irr")
    _THEOREM: ClassVar[str] = (
        "RAPPOR (Erlingsson, Pihur, Korolova, CCS 2014, section 3, the eps_inf and eps_1 bounds): the memoized "
        "permanent randomized response of a Bloom filter with h hashes is eps_lifetime-LDP for one value over "
        "any number of reports, and one report is eps_per_report-LDP; docs/math/local-collection.md §13.4"
    )

    def __post_init__(self) -> None:
        _int("num_bits", self.num_bits, 1, 4096)
        _int("num_hashes", self.num_hashes, 1, min(16, self.num_bits))
        _int("num_cohorts", self.num_cohorts, 1, 1024)
        _cells("num_bits x num_cohorts", self.num_bits * self.num_cohorts, MAX_RAPPOR_ROWS)
        object.__setattr__(self, "epsilon_lifetime", _epsilon("epsilon_lifetime", self.epsilon_lifetime))
        object.__setattr__(self, "epsilon_irr", _epsilon("epsilon_irr", self.epsilon_irr))

    @property
    def prr_flip(self) -> OddsProbability:
        """P[a PRR bit differs from the Bloom bit] = 1/(e^(ε∞/2h) + 1)."""
        return odds_probability(1, self.epsilon_lifetime / (2 * self.num_hashes))

    @property
    def irr_flip(self) -> OddsProbability:
        """P[a reported bit differs from the PRR bit] = 1/(e^(ε_irr/2h) + 1)."""
        return odds_probability(1, self.epsilon_irr / (2 * self.num_hashes))

    def _epsilon_report_text(self) -> str:
        ctx = Context(prec=50)
        h = self.num_hashes

        def tanh_quarter(eps: Fraction) -> Decimal:  # tanh(eps/4h) = (e^(eps/2h) - 1)/(e^(eps/2h) + 1)
            e = ctx.exp(ctx.divide(Decimal(eps.numerator), Decimal(eps.denominator * 2 * h)))
            return ctx.divide(e - 1, e + 1)

        x = ctx.multiply(tanh_quarter(self.epsilon_lifetime), tanh_quarter(self.epsilon_irr))
        return _ceil_decimal(ctx.multiply(2 * h, ctx.ln(ctx.divide(1 + x, 1 - x))))

    def _epsilon_lifetime_text(self) -> str | None:
        return _decimal_text(self.epsilon_lifetime)


@dataclass(frozen=True)
class _SketchScheme(_SchemeBase):
    """The fields of a count-mean sketch: ``num_hashes`` hash functions into ``num_buckets`` buckets, ε."""

    num_hashes: int
    num_buckets: int
    epsilon: Fraction

    def __post_init__(self) -> None:
        _int("num_hashes", self.num_hashes, 1, 1 << 16)
        _int("num_buckets", self.num_buckets, 2, 1 << 16)
        _cells("num_hashes x num_buckets", self.num_hashes * self.num_buckets)
        object.__setattr__(self, "epsilon", _epsilon("epsilon", self.epsilon))


@dataclass(frozen=True)
class CmsScheme(_SketchScheme):
    """Apple's count-mean sketch: one of ``num_hashes`` hash functions, a ±1 vector of ``num_buckets`` entries.

    The client picks j uniformly, encodes +1 at bucket h_j(value) and -1 elsewhere, and flips each entry
    w.p. 1/(e^(ε/2) + 1). A value change moves two entries: ε-LDP per report (Apple Differential Privacy
    Team, "Learning with Privacy at Scale", 2017, the CMS privacy theorem).
    """

    kind: ClassVar[str] = "cms"
    _THEOREM: ClassVar[str] = (
        "Count Mean Sketch (Apple Differential Privacy Team, Learning with Privacy at Scale, 2017, its CMS "
        "privacy theorem): each report is eps-LDP; docs/math/local-collection.md §13.5"
    )

    @property
    def flip(self) -> OddsProbability:
        """P[an entry is flipped] = 1/(e^(ε/2) + 1)."""
        return odds_probability(1, self.epsilon / 2)


@dataclass(frozen=True)
class HcmsScheme(_SketchScheme):
    """Apple's Hadamard count-mean sketch: one bit per report, a Hadamard coefficient of the one-hot sketch row.

    The client picks j and a coordinate l uniformly, takes H[l, h_j(value)] in {-1, +1} and flips it
    w.p. 1/(e^ε + 1): ε-LDP per report (Apple Differential Privacy Team 2017, its HCMS privacy theorem).
    ``num_buckets`` is a power of two (the Hadamard order).
    """

    kind: ClassVar[str] = "hcms"
    _THEOREM: ClassVar[str] = (
        "Hadamard Count Mean Sketch (Apple Differential Privacy Team, Learning with Privacy at Scale, 2017, "
        "its HCMS privacy theorem): each one-bit report is eps-LDP; docs/math/local-collection.md §13.6"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_buckets & (self.num_buckets - 1):
            raise SchemeError("num_buckets", "must be a power of two (a Hadamard order)", "pass e.g. 1024")

    @property
    def flip(self) -> OddsProbability:
        """P[the bit is flipped] = 1/(e^ε + 1)."""
        return odds_probability(1, self.epsilon)


@dataclass(frozen=True)
class _DictionaryScheme(_SchemeBase):
    """The fields of a frequency oracle over a public dictionary of K distinct strings, ε."""

    dictionary: tuple[str, ...]
    epsilon: Fraction

    _LIST_FIELDS: ClassVar[tuple[str, ...]] = ("dictionary",)
    _MAX_ENTRIES: ClassVar[int]

    def __post_init__(self) -> None:
        entries = _strings("dictionary", self.dictionary, lo=2, hi=self._MAX_ENTRIES)
        object.__setattr__(self, "dictionary", entries)
        object.__setattr__(self, "epsilon", _epsilon("epsilon", self.epsilon))


@dataclass(frozen=True)
class KrrScheme(_DictionaryScheme):
    """k-ary randomized response over a public dictionary of K values (GRR, Wang et al. 2017): ε-LDP per report."""

    kind: ClassVar[str] = "krr"
    _MAX_ENTRIES: ClassVar[int] = 1 << 16
    _THEOREM: ClassVar[str] = (
        "Generalized randomized response (Wang, Blocki, Li, Jha, USENIX Security 2017): P[true] = e^eps/(e^eps+K-1), "
        "each other value 1/(e^eps+K-1); eps-LDP per report; docs/math/local-dp.md"
    )

    @property
    def lie(self) -> OddsProbability:
        """P[report another value] = (K-1)/(e^ε + K-1)."""
        return odds_probability(len(self.dictionary) - 1, self.epsilon)


@dataclass(frozen=True)
class OueScheme(_DictionaryScheme):
    """Optimized unary encoding over a public dictionary (Wang et al. 2017): ε-LDP per report."""

    kind: ClassVar[str] = "oue"
    _MAX_ENTRIES: ClassVar[int] = 1 << 14
    _THEOREM: ClassVar[str] = (
        "Optimized unary encoding (Wang, Blocki, Li, Jha, USENIX Security 2017): true bit 1 w.p. 1/2, others "
        "w.p. 1/(e^eps+1); eps-LDP per report; docs/math/local-dp.md"
    )

    @property
    def other_one(self) -> OddsProbability:
        """P[a bit other than the true one is 1] = 1/(e^ε + 1)."""
        return odds_probability(1, self.epsilon)


#: The padding symbol of prefix values (never in an alphabet).
PAD = "\x00"


@dataclass(frozen=True)
class PrefixScheme(_SchemeBase):
    """Prefix extension for heavy hitters over an unknown domain of strings over a public ``alphabet``.

    Values (at most ``max_length`` symbols of ``alphabet``) are padded with NUL to ``max_length``.
    Level t = 0..T-1 (T = ceil(max_length / segment_length)) is the prefix of length
    min((t+1)·segment_length, max_length). Each client belongs to one level (a public function of its
    identifier) and reports its prefix at that level through a count-mean sketch (``CmsScheme`` law
    with ``num_hashes``, ``num_buckets``, ε): ε-LDP per report. The server extends the top prefixes
    level by level (Wang-Li-Jha PEM, IEEE TDSC 2019; Apple's SFP, 2017); docs/math/local-collection.md §13.9.
    """

    alphabet: str
    max_length: int
    segment_length: int
    num_hashes: int
    num_buckets: int
    epsilon: Fraction

    kind: ClassVar[str] = "prefix"
    _THEOREM: ClassVar[str] = (
        "Prefix extension through a Count Mean Sketch (Wang, Li, Jha, PEM, IEEE TDSC 2019; Apple Differential "
        "Privacy Team 2017, SFP): each client reports one prefix once, eps-LDP per report (the CMS privacy theorem); "
        "docs/math/local-collection.md §13.9"
    )

    def __post_init__(self) -> None:
        a = self.alphabet
        if not isinstance(a, str) or not 1 <= len(a) <= 128 or len(set(a)) != len(a) or PAD in a:
            rule = f"must be 1..128 distinct characters without NUL, got {describe_value(a)}"
            raise SchemeError("alphabet", rule, 'pass e.g. alphabet="abcdefghijklmnopqrstuvwxyz"')
        _int("max_length", self.max_length, 1, 64)
        _int("segment_length", self.segment_length, 1, self.max_length)
        if (len(a) + 1) ** self.segment_length > 4096:
            rule = "(len(alphabet) + 1)^segment_length must be <= 4096"
            raise SchemeError("segment_length", rule, "use shorter segments (e.g. 1)")
        _int("num_hashes", self.num_hashes, 1, 1 << 12)
        _int("num_buckets", self.num_buckets, 2, 1 << 16)
        _cells("levels x num_hashes x num_buckets", self.levels * self.num_hashes * self.num_buckets)
        object.__setattr__(self, "epsilon", _epsilon("epsilon", self.epsilon))

    @property
    def levels(self) -> int:
        """The number of levels T."""
        return -(-self.max_length // self.segment_length)

    def prefix_length(self, level: int) -> int:
        """The prefix length of ``level`` (0-based)."""
        return min((level + 1) * self.segment_length, self.max_length)

    @property
    def flip(self) -> OddsProbability:
        """P[a sketch entry is flipped] = 1/(e^(ε/2) + 1)."""
        return odds_probability(1, self.epsilon / 2)


Scheme = Union[RapporScheme, CmsScheme, HcmsScheme, KrrScheme, OueScheme, PrefixScheme]  # noqa: UP007  # a runtime alias
_CLASSES = (RapporScheme, CmsScheme, HcmsScheme, KrrScheme, OueScheme, PrefixScheme)
_KINDS: dict[str, type[Any]] = {c.kind: c for c in _CLASSES}


def scheme_from_json(obj: object) -> Scheme:
    """Rebuild a scheme from JSON, strictly.

    Refuses (``SchemeError``, a ``ValueError`` naming the field and the fix) anything but a dict with
    exactly the scheme's fields: unknown or missing fields, a wrong version, bools for integers, floats
    or NaN for ε (ε travels as a decimal string), sizes beyond the caps.
    """
    if not isinstance(obj, Mapping):
        raise SchemeError("(scheme)", f"must be a JSON object, got {describe_value(obj)}", "pass the dict of to_json()")
    kind = obj.get("scheme")
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        rule = f"must be one of {sorted(_KINDS)}, got {describe_value(kind)}"
        raise SchemeError("scheme", rule, "name a known scheme")
    if obj.get("version") != _VERSION or type(obj.get("version")) is not int:
        rule = f"must be {_VERSION}, got {describe_value(obj.get('version'))}"
        raise SchemeError("version", rule, f"pass version={_VERSION}")
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(str(k)[:40] for k in obj if k not in {"scheme", "version", *names})
    if unknown:
        raise SchemeError(unknown[0], f"is not a field of the {kind} scheme", f"use only {names}")
    missing = [n for n in names if n not in obj]
    if missing:
        raise SchemeError(missing[0], f"is required by the {kind} scheme", f"pass all of {names}")
    for name in cls._EPSILON_FIELDS:
        if not isinstance(obj[name], str):
            rule = f"must be a decimal string, got {describe_value(obj[name])}"
            raise SchemeError(name, rule, f'pass e.g. {name}="1.5"')
    for name in cls._LIST_FIELDS:
        if not isinstance(obj[name], list):
            raise SchemeError(name, f"must be a JSON list, got {describe_value(obj[name])}", "pass a list of strings")
    scheme: Scheme = cls(**{n: obj[n] for n in names})
    return scheme
