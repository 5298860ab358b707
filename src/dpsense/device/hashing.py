"""The public hash functions and bit encodings that device and server share (docs/math/local-collection.md §13.1).

All are deterministic, unkeyed and public: the server evaluates them on its candidate dictionary.
A value is hashed as its UTF-8 bytes, after a domain tag and big-endian indices.

* ``cohort_of(client_id, m)``: SHA-256("dpsense/cohort/v1" 0x00 client_id) as a big-endian integer mod m.
* ``bloom_indices(value, cohort, k, h)``: SHAKE-256("dpsense/rappor/v1" 0x00 cohort(4 bytes) value),
  4h bytes, split in h big-endian 32-bit words, each mod k (RAPPOR's Bloom filter; equal indices
  merge, so a value may set fewer than h bits).
* ``sketch_bucket(value, j, m)``: the first 8 bytes of SHA-256("dpsense/sketch/v1" 0x00 j(4 bytes)
  value) as a big-endian integer mod m (hash function j of the count-mean sketches).
* ``hadamard_entry(row, col)``: (-1)^popcount(row AND col), the Sylvester-Hadamard matrix entry.
* Bit vectors travel as lowercase hex of ceil(n/8) bytes; bit i is bit (i mod 8) of byte i div 8
  (little-endian bit order, numpy's ``unpackbits(bitorder="little")``); padding bits are 0.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

__all__ = ["bloom_indices", "cohort_of", "decode_bits", "encode_bits", "hadamard_entry", "sketch_bucket"]

_LOWER_HEX = re.compile(r"[0-9a-f]*")
_COHORT_TAG = b"dpsense/cohort/v1\x00"
_BLOOM_TAG = b"dpsense/rappor/v1\x00"
_SKETCH_TAG = b"dpsense/sketch/v1\x00"


def cohort_of(client_id: str, num_cohorts: int) -> int:
    """The client's RAPPOR cohort, derived from its identifier only (public, independent of any value)."""
    digest = hashlib.sha256(_COHORT_TAG + client_id.encode("utf-8")).digest()
    return int.from_bytes(digest, "big") % num_cohorts


def bloom_indices(value: str, *, cohort: int, num_bits: int, num_hashes: int) -> frozenset[int]:
    """The Bloom-filter bits of ``value`` in ``cohort`` (at most ``num_hashes`` of ``num_bits``)."""
    digest = hashlib.shake_256(_BLOOM_TAG + cohort.to_bytes(4, "big") + value.encode("utf-8")).digest(4 * num_hashes)
    return frozenset(int.from_bytes(digest[4 * i : 4 * i + 4], "big") % num_bits for i in range(num_hashes))


def sketch_bucket(value: str, *, hash_index: int, num_buckets: int) -> int:
    """The bucket of ``value`` under the sketch's hash function ``hash_index``."""
    digest = hashlib.sha256(_SKETCH_TAG + hash_index.to_bytes(4, "big") + value.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % num_buckets


def hadamard_entry(row: int, col: int) -> int:
    """Entry (row, col) of the Sylvester-Hadamard matrix: +1 or -1."""
    return -1 if (row & col).bit_count() & 1 else 1


def encode_bits(bits: Sequence[bool]) -> str:
    """Lowercase hex of the bit vector (little-endian bit order within each byte)."""
    out = bytearray((len(bits) + 7) // 8)
    for i, bit in enumerate(bits):
        if bit:
            out[i >> 3] |= 1 << (i & 7)
    return out.hex()


def decode_bits(text: str, num_bits: int) -> list[bool]:
    """The inverse of ``encode_bits``; ValueError unless ``text`` is exactly its output for ``num_bits`` bits."""
    width = (num_bits + 7) // 8
    raw = bytes.fromhex(text) if len(text) == 2 * width and _LOWER_HEX.fullmatch(text) else None
    if raw is None or len(raw) != width:
        raise ValueError(f"expected {2 * ((num_bits + 7) // 8)} lowercase hex digits for {num_bits} bits")
    bits = [bool(raw[i >> 3] >> (i & 7) & 1) for i in range(8 * len(raw))]
    if any(bits[num_bits:]):
        raise ValueError("padding bits beyond the vector's length must be 0")
    return bits[:num_bits]
