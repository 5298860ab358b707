"""Device clients: each turns one value into one JSON-ready report, drawing only from the platform CSPRNG.

Every client is a pure function of its scheme, its value and fresh exact random draws (plus, for
RAPPOR, the memoized permanent response). Reports are plain dicts of ints and hex strings
(docs/math/local-collection.md §13.3 lists their shapes); the server validates them strictly.
Guarantees (adjacency: replace one user's input): see each scheme's ``guarantee()`` and
docs/math/local-collection.md §13.4-§13.7.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

from dpsense.device import _exact
from dpsense.device.hashing import (
    bloom_indices,
    cohort_of,
    decode_bits,
    encode_bits,
    hadamard_entry,
    sketch_bucket,
)
from dpsense.device.schemes import (
    PAD,
    CmsScheme,
    HcmsScheme,
    KrrScheme,
    OueScheme,
    PrefixScheme,
    RapporScheme,
)

__all__ = [
    "CmsClient",
    "HcmsClient",
    "KrrClient",
    "OueClient",
    "PrefixClient",
    "RapporClient",
    "UnsupportedValue",
    "prefix_level_of",
]


class UnsupportedValue(ValueError):
    """A value the scheme cannot encode (not a string, not in the dictionary, outside the alphabet)."""


def _flip(bits: list[bool], prob: _exact.OddsProbability) -> list[bool]:
    return [b != f for b, f in zip(bits, _exact.bernoulli(prob, len(bits)), strict=True)]


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise UnsupportedValue(f"a reported value must be a str, got {type(value).__name__}")
    return value


def _sketch_vector(scheme: CmsScheme | PrefixScheme, value: str) -> dict[str, Any]:
    """One count-mean-sketch report of ``value``: hash j uniform, ±1 one-hot at h_j(value), each entry flipped."""
    j = _exact.uniform_below(scheme.num_hashes)
    bucket = sketch_bucket(value, hash_index=j, num_buckets=scheme.num_buckets)
    one_hot = [i == bucket for i in range(scheme.num_buckets)]
    return {"hash": j, "bits": encode_bits(_flip(one_hot, scheme.flip))}


class RapporClient:
    """A RAPPOR client: Bloom filter, permanent randomized response memoized per (client, value), then IRR.

    ``memo`` is the device's persistent store (any MutableMapping of str to str, e.g. a dict saved as
    JSON): the lifetime bound ε∞ holds only while the memo survives (a lost memo draws a new permanent
    response, and the two compose). ``cohort`` defaults to ``cohort_of(client_id)``, a public function
    of the identifier. Guarantee: ε∞-LDP over all reports about one value, ε1-LDP per report
    (Erlingsson-Pihur-Korolova 2014, §3; docs/math/local-collection.md §13.4).
    """

    def __init__(
        self,
        scheme: RapporScheme,
        client_id: str,
        memo: MutableMapping[str, str] | None = None,
        *,
        cohort: int | None = None,
    ) -> None:
        if not isinstance(scheme, RapporScheme):
            raise TypeError("RapporClient needs a RapporScheme")
        self.scheme = scheme
        self.client_id = _text(client_id)
        self.cohort = cohort_of(client_id, scheme.num_cohorts) if cohort is None else cohort
        if type(self.cohort) is not int or not 0 <= self.cohort < scheme.num_cohorts:
            raise ValueError(f"cohort must be an integer in [0, {scheme.num_cohorts})")
        self.memo: MutableMapping[str, str] = {} if memo is None else memo
        self._fingerprint = scheme.fingerprint()

    def _memo_key(self, value: str) -> str:
        return json.dumps(["rappor-prr", self._fingerprint, self.client_id, self.cohort, value])

    def permanent_response(self, value: str) -> list[bool]:
        """The memoized permanent randomized response of ``value`` (drawn and stored on first use)."""
        s = self.scheme
        key = self._memo_key(_text(value))
        stored = self.memo.get(key)
        if stored is not None:
            return decode_bits(stored, s.num_bits)
        bloom = bloom_indices(value, cohort=self.cohort, num_bits=s.num_bits, num_hashes=s.num_hashes)
        prr = _flip([i in bloom for i in range(s.num_bits)], s.prr_flip)
        self.memo[key] = encode_bits(prr)
        return prr

    def report(self, value: str) -> dict[str, Any]:
        """``{"cohort": int, "bits": hex}``: the IRR of the permanent response of ``value``."""
        prr = self.permanent_response(value)
        return {"cohort": self.cohort, "bits": encode_bits(_flip(prr, self.scheme.irr_flip))}


class CmsClient:
    """A count-mean-sketch client: ``{"hash": j, "bits": hex of num_buckets bits}``, ε-LDP per report (§13.5)."""

    def __init__(self, scheme: CmsScheme) -> None:
        if not isinstance(scheme, CmsScheme):
            raise TypeError("CmsClient needs a CmsScheme")
        self.scheme = scheme

    def report(self, value: str) -> dict[str, Any]:
        """One report of ``value``."""
        return _sketch_vector(self.scheme, _text(value))


class HcmsClient:
    """A Hadamard count-mean-sketch client: ``{"hash": j, "coordinate": l, "bit": 0|1}``, ε-LDP per report (§13.6)."""

    def __init__(self, scheme: HcmsScheme) -> None:
        if not isinstance(scheme, HcmsScheme):
            raise TypeError("HcmsClient needs a HcmsScheme")
        self.scheme = scheme

    def report(self, value: str) -> dict[str, Any]:
        """One report of ``value``: bit 1 stands for +1, 0 for -1."""
        s = self.scheme
        j = _exact.uniform_below(s.num_hashes)
        coordinate = _exact.uniform_below(s.num_buckets)
        bucket = sketch_bucket(_text(value), hash_index=j, num_buckets=s.num_buckets)
        positive = hadamard_entry(coordinate, bucket) > 0
        return {"hash": j, "coordinate": coordinate, "bit": int(positive != _exact.bernoulli(s.flip, 1)[0])}


class _DictionaryClient:
    def __init__(self, scheme: KrrScheme | OueScheme) -> None:
        self.scheme = scheme
        self._index = {v: i for i, v in enumerate(scheme.dictionary)}

    def _code(self, value: str) -> int:
        code = self._index.get(_text(value))
        if code is None:
            raise UnsupportedValue("the value is not in the scheme's dictionary; map it to a dictionary entry")
        return code


class KrrClient(_DictionaryClient):
    """A k-ary randomized-response client: ``{"index": i}`` into the dictionary, ε-LDP per report (§13.7)."""

    def __init__(self, scheme: KrrScheme) -> None:
        if not isinstance(scheme, KrrScheme):
            raise TypeError("KrrClient needs a KrrScheme")
        super().__init__(scheme)
        self._lie = scheme.lie

    def report(self, value: str) -> dict[str, Any]:
        """One report of ``value``: keep it w.p. e^ε/(e^ε+K-1), else a uniform other entry."""
        code = self._code(value)
        if _exact.bernoulli(self._lie, 1)[0]:
            other = _exact.uniform_below(len(self.scheme.dictionary) - 1)
            code = other + (other >= code)
        return {"index": code}


class OueClient(_DictionaryClient):
    """An optimized-unary-encoding client: ``{"bits": hex of K bits}``, ε-LDP per report (§13.7)."""

    def __init__(self, scheme: OueScheme) -> None:
        if not isinstance(scheme, OueScheme):
            raise TypeError("OueClient needs an OueScheme")
        super().__init__(scheme)
        self._other = scheme.other_one

    def report(self, value: str) -> dict[str, Any]:
        """One report of ``value``: the true bit is a fair coin, every other bit 1 w.p. 1/(e^ε+1)."""
        code = self._code(value)
        bits = _exact.bernoulli(self._other, len(self.scheme.dictionary))
        bits[code] = _exact.fair_bit()
        return {"bits": encode_bits(bits)}


def prefix_level_of(client_id: str, scheme: PrefixScheme) -> int:
    """The client's level: a public function of its identifier (the cohort hash mod the number of levels)."""
    return cohort_of(client_id, scheme.levels)


class PrefixClient:
    """A prefix heavy-hitter client: ``{"level": t, "hash": j, "bits": hex}``, ε-LDP per report (§13.9).

    The client reports the prefix of its padded value at its level (``prefix_level_of(client_id)``
    unless ``level`` is given) through a count-mean sketch.
    """

    def __init__(self, scheme: PrefixScheme, client_id: str, *, level: int | None = None) -> None:
        if not isinstance(scheme, PrefixScheme):
            raise TypeError("PrefixClient needs a PrefixScheme")
        self.scheme = scheme
        self.level = prefix_level_of(_text(client_id), scheme) if level is None else level
        if type(self.level) is not int or not 0 <= self.level < scheme.levels:
            raise ValueError(f"level must be an integer in [0, {scheme.levels})")
        self._alphabet = frozenset(scheme.alphabet)

    def report(self, value: str) -> dict[str, Any]:
        """One report of the level's prefix of ``value``."""
        s = self.scheme
        if len(_text(value)) > s.max_length or not self._alphabet.issuperset(value):
            raise UnsupportedValue(f"a value must have at most {s.max_length} characters of the scheme's alphabet")
        prefix = (value + PAD * s.max_length)[: s.prefix_length(self.level)]
        return {"level": self.level, **_sketch_vector(s, prefix)}
