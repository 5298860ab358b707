from __future__ import annotations

import pytest

from dpsense.query import Schema


@pytest.fixture
def schema() -> Schema:
    return Schema(
        {
            "person_id": "unit",
            "hours": "numeric",
            "age": "integer",
            "income": "numeric",
            "region": "categorical",
            "device": "categorical",
            "x": "point",
            "y": "point",
            "src": "edge",
            "dst": "edge",
        },
        bounds={"hours": (0, 24), "age": (0, 120), "x": (-1, 1), "y": ("-1", "1")},
        keys={"region": ["north", "south", "east", "west"]},
    )
