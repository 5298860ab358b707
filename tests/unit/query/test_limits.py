"""The YAML limit scanner shared by the CLI and the service: one neutral violation, two wordings."""

from __future__ import annotations

import pytest

from dpsense.query._limits import YamlLimitError, YamlViolation, read_limited_yaml
from dpsense.query._values import MAX_NUMBER_CHARS

pytest.importorskip("yaml")


def _violation(text: str, *, max_depth: int = 32, max_values: int = 1000) -> YamlViolation:
    with pytest.raises(YamlLimitError) as caught:
        read_limited_yaml(text, max_depth=max_depth, max_values=max_values)
    return caught.value.violation


def test_a_document_within_the_limits_is_composed() -> None:
    text = "dataset: events\nepsilon: 0.5\naggregates: {n: {kind: count}}\n"
    assert read_limited_yaml(text, max_depth=3, max_values=11) == {
        "dataset": "events",
        "epsilon": 0.5,
        "aggregates": {"n": {"kind": "count"}},
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: &x 1\nb: *x\n", YamlViolation("anchor", line=1)),
        ("a: 1\nb: *x\n", YamlViolation("anchor", line=2)),
        ("a:\n  b: [[1]]\n", YamlViolation("depth", 3, line=2)),
        ("".join("  " * i + "k:\n" for i in range(200)), YamlViolation("depth", 3, line=4)),
        ("x: [" + "1," * 20 + "1]\n", YamlViolation("values", 10, line=1)),
        ("a: 1\nb: " + "1" * 5000 + "\n", YamlViolation("number", MAX_NUMBER_CHARS, line=2, chars=5000)),
        ("a: 0." + "1" * 200 + "\n", YamlViolation("number", MAX_NUMBER_CHARS, line=1, chars=202)),
        ("a: [\n", YamlViolation("syntax", line=2, column=1)),
        ("a:\n\t- 1\n", YamlViolation("syntax", line=2, column=1)),
    ],
    ids=["anchor", "alias", "depth", "200-deep block", "values", "5000 digits", "long float", "syntax", "tabs"],
)
def test_each_violation_is_named_with_its_place(text: str, expected: YamlViolation) -> None:
    assert _violation(text, max_depth=3 if expected.kind == "depth" else 32, max_values=10) == expected


def test_a_long_string_that_is_no_number_is_a_value() -> None:
    text = "a: '" + "1" * 5000 + "'\nb: " + "x" * 5000 + "\n"
    assert read_limited_yaml(text, max_depth=2, max_values=5) == {"a": "1" * 5000, "b": "x" * 5000}


def test_the_cli_and_the_service_word_every_kind() -> None:
    pytest.importorskip("fastapi")
    from dpsense.cli._errors import SpecError
    from dpsense.cli._yaml import _spec_error, read_yaml
    from dpsense.core.errors import UsageError
    from dpsense.service._body import _yaml_refusal, load_yaml
    from dpsense.service._errors import ApiError

    #: (violation, words of the CLI's error, words of the service's error)
    cases: list[tuple[YamlViolation, str, tuple[str, ...]]] = [
        (YamlViolation("anchor", line=2), "anchors or aliases (line 2)", ("anchors and aliases",)),
        (YamlViolation("depth", 32, line=7), "nests more than 32 levels (line 7)", ("body_too_deep", "(at line 7)")),
        (YamlViolation("depth", 32), "nests more than 32 levels", ("body_too_deep", "(at body)")),
        (YamlViolation("values", 10, line=3), "more than 100000 values", ("body_too_complex", "50000 values")),
        (YamlViolation("number", MAX_NUMBER_CHARS, line=4, chars=5000), "(line 4)", ("invalid_number", "line 4:")),
        (YamlViolation("syntax", line=2, column=5), "not valid YAML at line 2, column 5", ("at line 2, column 5",)),
        (YamlViolation("syntax"), "file is not valid YAML", ("the body is not valid YAML",)),
    ]
    for violation, cli_words, http_words in cases:
        cli = _spec_error(violation, what="release spec", path="spec.yaml")
        assert cli_words in str(cli), (violation, str(cli))
        assert violation.kind == "number" or "release spec file" in str(cli), (violation, str(cli))
        http = _yaml_refusal(violation)
        said = f"{http.code} {http.message}" if isinstance(http, ApiError) else str(http)
        assert isinstance(http, ApiError | UsageError)
        assert all(word in said for word in http_words), (violation, said)
    # and through the front ends' readers
    with pytest.raises(SpecError, match="anchors"):
        read_yaml("a: &x 1\n", what="spec", path="s.yaml")
    with pytest.raises(ApiError) as deep:
        load_yaml(b"a: " + b"[" * 40 + b"]" * 40)
    assert deep.value.code == "body_too_deep"


def test_libyaml_depth_limit_is_a_refusal_too() -> None:
    """2000 flow levels: libyaml's own limit (1000) or the scan's, never a crash."""
    assert _violation("a: " + "[" * 2000 + "]" * 2000, max_depth=32).kind in ("depth", "syntax")
