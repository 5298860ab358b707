"""The parts a statistic is released in: one plan step per part (a private-n mean has two)."""

from __future__ import annotations

from enum import Enum


class StepPart(str, Enum):
    """Which part of its statistic a step releases (a private-n mean has two)."""

    VALUE = "value"
    CENTERED_SUM = "centered_sum"
    CENTERED_SQUARES = "centered_squares"
    COUNT = "count"
    KEYS = "keys"  # private partition selection of a grouping's keys
    CLIP = "clip"  # private approximate bounds a later step of the same statistic clips to
