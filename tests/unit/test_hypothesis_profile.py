"""The Hypothesis profile the suite runs under: deterministic, so a random draw cannot block a landing."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.mark.skipif(os.environ.get("HYPOTHESIS_PROFILE", "ci") != "ci", reason="an explicitly chosen profile")
def test_the_default_profile_is_deterministic() -> None:
    current = settings.default
    assert current.derandomize is True
    assert current.database is None
    assert current.deadline is None
    assert current.print_blob is True


@pytest.mark.skipif(os.environ.get("HYPOTHESIS_PROFILE", "ci") != "ci", reason="an explicitly chosen profile")
def test_a_per_test_max_examples_keeps_the_derandomized_draws() -> None:
    def run() -> list[int]:
        drawn: list[int] = []

        @settings(max_examples=15)
        @given(st.integers())
        def prop(x: int) -> None:
            drawn.append(x)

        prop()
        return drawn

    first, second = run(), run()
    assert len(first) >= 2
    assert first == second
