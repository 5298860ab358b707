"""How the CLI prints a released value (issue 17, item 8: "errors shown as ±0.00")."""

from __future__ import annotations

import pytest

from dpsense.cli._output import _cell


@pytest.mark.parametrize(
    ("name", "value", "whole", "shown"),
    [
        ("m_error95", 0.004213, False, "±0.00421"),  # was ±0.00
        ("m", 0.0312, False, "0.0312"),
        ("m", -0.5, False, "-0.5"),
        ("m", 12345.678, False, "12,345.68"),
        ("n", 1234.0, True, "1,234"),
        ("n_error95", 29.96, False, "±29.96"),
        ("m", 0.0, False, "0.00"),
        ("m_noise_dominated", True, False, "True"),
        ("m", None, False, ""),
    ],
)
def test_small_values_and_bounds_keep_three_significant_digits(
    name: str, value: object, whole: bool, shown: str
) -> None:
    assert _cell(name, value, whole) == shown
