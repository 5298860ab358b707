"""The service's small rules, without a server: latency padding, the data folder, YAML bodies, tokens text."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from dpsense.core.errors import UsageError
from dpsense.service._body import load_yaml
from dpsense.service._guard import padded_latency
from dpsense.service._spec import ReleaseBody
from dpsense.service._steward import resolve_source


@pytest.mark.parametrize(
    ("elapsed", "expected"),
    [(0.0, 0.25), (0.1, 0.25), (0.25, 0.25), (0.26, 0.5), (0.5, 0.5), (0.74, 0.75), (1.9, 2.0)],
)
def test_release_latency_is_padded_to_the_floor_then_whole_quanta(elapsed: float, expected: float) -> None:
    assert padded_latency(elapsed, minimum=0.25, quantum=0.25) == pytest.approx(expected)


def test_without_a_quantum_only_the_floor_applies() -> None:
    assert padded_latency(0.1, minimum=0.2, quantum=0) == 0.2
    assert padded_latency(0.33, minimum=0.2, quantum=0) == 0.33


def test_sources_must_be_files_inside_the_data_folder(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "ok.csv").write_text("a\n1\n")
    (tmp_path / "secret.csv").write_text("a\n1\n")
    assert resolve_source(data, "ok.csv") == (data / "ok.csv").resolve()
    for bad in ("../secret.csv", str(tmp_path / "secret.csv"), "missing.csv", "."):
        with pytest.raises(UsageError, match="data folder"):
            resolve_source(data, bad)
    (data / "link.csv").symlink_to(tmp_path / "secret.csv")
    with pytest.raises(UsageError, match="data folder"):
        resolve_source(data, "link.csv")


def test_yaml_bodies_refuse_aliases_and_bad_syntax() -> None:
    assert load_yaml(b"dataset: events\nepsilon: 1\n") == {"dataset": "events", "epsilon": 1}
    with pytest.raises(UsageError, match="anchors"):
        load_yaml(b"a: &x [1, 2]\nb: *x\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        load_yaml(b"a: [")
    with pytest.raises(UsageError, match="UTF-8"):
        load_yaml(b"\xff\xfe")


@pytest.mark.parametrize("bad", ["ev\x00ents", "ev\ud800ents"])
def test_text_a_ledger_cannot_store_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError):
        ReleaseBody.model_validate({"dataset": bad, "epsilon": 1, "aggregates": {"n": {"kind": "count"}}})
