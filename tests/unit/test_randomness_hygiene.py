"""Randomness only from dpsense.noise (OS CSPRNG): no other RNG appears anywhere in product code."""

from __future__ import annotations

import re
from pathlib import Path

import dpsense

SRC = Path(dpsense.__file__).parent
FORBIDDEN = re.compile(
    r"\bnp\.random\b|\bnumpy\.random\b|^\s*import random\b|^\s*from random\b|\bsecrets\.[a-z_]", re.M
)


def test_no_rng_outside_the_noise_layer() -> None:
    offenders = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if FORBIDDEN.search(p.read_text())]
    assert offenders == []


def test_noise_layer_reads_only_the_os_csprng() -> None:
    entropy = (SRC / "noise" / "entropy.py").read_text()
    assert "os.urandom" in entropy
    assert not FORBIDDEN.search(entropy)
