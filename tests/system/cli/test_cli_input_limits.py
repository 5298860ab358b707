"""The CLI's hostile-input corpus: every input is one clean ``error:`` line and exit code 2, never a traceback.

The same rules as the service (docs/service.md, "Limits"): non-finite and over-long numbers in
options and release specs (JSON-spelled specs too: ``NaN``, ``Infinity``, ``1e309``), SQL past the size
limits, YAML files nested too deep, too large, or with anchors; nothing is charged. The whole corpus
is also run through the real console entry point in a process of its own
(``test_the_corpus_through_the_console_entry_point``): stderr is one ``error:`` line, exit code 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from dpsense.cli._errors import EXIT_REFUSED
from tests.system.cli.support import POLICY, Cli, write_csv, write_yaml

COUNT = "dataset: events\naggregates: {n: {kind: count}}\n"
SQL = "SELECT COUNT(*) FROM events"
WHERE = SQL + " WHERE "
#: A release spec spelled as JSON (YAML reads it too), with ``EPS`` for its epsilon.
JSON_SPEC = '{"dataset": "events", "epsilon": EPS, "aggregates": {"n": {"kind": "count"}}}'

#: (name, arguments, words the error names); ``{dir}`` is the test's folder.
SQL_CASES: list[tuple[str, list[str], list[str]]] = [
    ("--epsilon 1e400", [SQL, "--epsilon", "1e400"], ["--epsilon", "1e300"]),
    ("--epsilon 0.1e99999", [SQL, "--epsilon", "0.1e99999"], ["--epsilon"]),
    ("--epsilon 5000 digits", [SQL, "--epsilon", "1" * 5000], ["--epsilon", "characters"]),
    ("--epsilon NaN", [SQL, "--epsilon", "NaN"], ["--epsilon", "finite"]),
    ("--epsilon Infinity", [SQL, "--epsilon", "Infinity"], ["--epsilon", "finite"]),
    ("--epsilon 1e309", [SQL, "--epsilon", "1e309"], ["--epsilon", "1e300"]),
    ("--epsilon 1e-400", [SQL, "--epsilon", "1e-400"], ["--epsilon"]),
    ("--delta 1e309", [SQL, "--epsilon", "0.5", "--delta", "1e309"], ["--delta"]),
    ("1000-term AND", [WHERE + " AND ".join(["age > 1"] * 1000), "--epsilon", "0.5"], ["operators"]),
    ("1000-term +", ["SELECT " + " + ".join(["COUNT(*)"] * 1000) + " FROM events", "--epsilon", "0.5"], ["at most"]),
    ("3000 parentheses", [WHERE + "(" * 3000 + "age > 1" + ")" * 3000, "--epsilon", "0.5"], ["at most"]),
    ("40 parentheses", [WHERE + "(" * 40 + "age > 1" + ")" * 40, "--epsilon", "0.5"], ["32 levels"]),
    ("0.1e99999 literal", [WHERE + "age > 0.1e99999", "--epsilon", "0.5"], ["significant digits"]),
    ("5000-digit literal", [WHERE + "age > " + "9" * 5000, "--epsilon", "0.5"], ["characters"]),
    ("1e400 literal", ["SELECT COUNT(*) * 1e400 FROM events", "--epsilon", "0.5"], ["1e300"]),
]

SPEC_CASES: list[tuple[str, str, list[str]]] = [
    ("2000-deep flow", "a: " + "[" * 2000 + "]" * 2000, ["YAML"]),
    ("100-deep flow", "a: " + "{b: " * 100 + "1" + "}" * 100, ["nests more than 32 levels"]),
    ("200-deep block", "".join("  " * i + "k:\n" for i in range(200)) + "  " * 200 + "1\n", ["32 levels"]),
    ("120 KB nested", "[" * 60_000 + "]" * 60_000, ["YAML"]),  # libyaml stops at its own depth of 1000
    ("4 KB nested", "[" * 2048 + "]" * 2048, ["YAML"]),
    ("2000-deep block", "".join("  " * i + "k:\n" for i in range(2000)) + "  " * 2000 + "1\n", ["bytes"]),
    ("1 MB flat list", "[" + "1," * 500_000 + "1]", ["values"]),
    ("JSON NaN", JSON_SPEC.replace("EPS", "NaN"), ["epsilon", "finite"]),
    ("JSON Infinity", JSON_SPEC.replace("EPS", "Infinity"), ["epsilon", "finite"]),
    ("JSON 1e309", JSON_SPEC.replace("EPS", "1e309"), ["epsilon", "1e300"]),
    ("JSON 1e400 bound", '{"dataset": "events", "epsilon": 1, "aggregates": {"m": {"kind": "mean", "column": "hours", '
     '"bounds": [0, 1e400]}}}', ["bounds", "1e300"]),
    ("5000-digit epsilon", COUNT + "epsilon: " + "1" * 5000 + "\n", ["significant digits", "line 3"]),
    ("epsilon '1e400'", COUNT + "epsilon: '1e400'\n", ["epsilon", "1e300"]),
    ("epsilon 0.1e99999", COUNT + "epsilon: 0.1e99999\n", ["epsilon"]),
    ("epsilon .inf", COUNT + "epsilon: .inf\n", ["epsilon", "finite"]),
    ("epsilon .nan", COUNT + "epsilon: .nan\n", ["epsilon", "finite"]),
    ("epsilon 1.0e+400", COUNT + "epsilon: 1.0e+400\n", ["epsilon", "finite"]),
    ("bound 1e400", "dataset: events\nepsilon: 1\naggregates: {m: {kind: mean, column: hours, bounds: [0, '1e400']}}\n",
     ["bounds", "1e300"]),
    ("filter .nan", COUNT + "epsilon: 1\nfilters: [{column: age, op: '>', value: .nan}]\n", ["finite"]),
    ("anchors", COUNT + "epsilon: &e 1\ndelta: *e\n", ["anchors"]),
    ("billion laughs", "a: &a [x, x]\nb: &b [*a, *a]\n", ["anchors"]),
    ("python tag", "!!python/object/apply:os.system ['true']\n", ["not valid YAML"]),
    ("over 1 MiB", "#" * ((1 << 20) + 1), ["bytes"]),
    ("200k values", "x: [" + "1," * 200_000 + "1]\n", ["values"]),
    ("tabs", "a:\n\t- 1\n", ["not valid YAML"]),
]  # fmt: skip


def _clean(result: object, words: list[str]) -> None:
    stderr = getattr(result, "stderr", "")
    assert getattr(result, "exit_code", None) == EXIT_REFUSED, stderr
    assert stderr.startswith("error: ") and "Traceback" not in stderr, stderr
    assert len(stderr.strip().splitlines()) <= 3 and len(stderr) < 2_000, stderr  # one line, nothing echoed at length
    for word in words:
        assert word in stderr, (word, stderr)


@pytest.mark.parametrize(("args", "words"), [(a, w) for _, a, w in SQL_CASES], ids=[n for n, _, _ in SQL_CASES])
def test_sql_and_options_past_the_rules_are_clean_errors(registered: Cli, args: list[str], words: list[str]) -> None:
    before = registered.charges()
    _clean(registered("sql", *args), words)
    assert registered.charges() == before


def test_release_specs_past_the_rules_are_clean_errors(registered: Cli, tmp_path: Path) -> None:
    before = registered.charges()
    for i, (name, text, words) in enumerate(SPEC_CASES):
        path = tmp_path / f"case{i}.yaml"
        path.write_text(text, encoding="utf-8")
        for command in ("release", "preview"):
            try:
                _clean(registered(command, str(path)), words)
            except AssertionError as exc:
                raise AssertionError(f"{name} ({command}): {exc}") from None
    assert registered.charges() == before


def test_dataset_add_refuses_over_long_numbers(cli: Cli, tmp_path: Path) -> None:
    source, policy = write_csv(tmp_path / "events.csv"), write_yaml(tmp_path / "policy.yaml", POLICY)
    cases = {"--budget-epsilon": ("1e400", ""), "--budget-delta": ("NaN", ""), "--bound": ("hours=0:1e400", "")}
    for option, (bad, _) in cases.items():
        budget = ["--budget-epsilon", bad if option == "--budget-epsilon" else "1"]
        args = ["dataset", "add", "events", "--source", str(source), "--unit", "person_id", *budget]
        args += ["--privacy-policy", str(policy), "--budget-delta", bad if option == "--budget-delta" else "0"]
        args += ["--bound", bad if option == "--bound" else "hours=0:24"]
        _clean(cli.steward(*args), [option])


#: Runs each case of the corpus through ``dpsense.cli.main`` (the console script's entry point) in a
#: forked child of one fresh interpreter: stdout and stderr go to files, an escaping exception is
#: printed as the interpreter would print it, and the exit code is the child's.
_DRIVER = """
import json, os, sys, traceback
from dpsense.cli import main
import dpsense.cli._app  # imported once, before the forks, with what its commands import when they run
import dpsense.cli._output, dpsense.cli._progress, dpsense.cli._spec, dpsense.interface.documents
from dpsense.release import Session
out = []
for i, args in enumerate(json.load(sys.stdin)):
    err = os.path.join(sys.argv[1], f"err{i}")
    pid = os.fork()
    if pid == 0:
        fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 2)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        sys.stderr = os.fdopen(2, "w", closefd=False)
        try:
            code = main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    out.append([os.waitstatus_to_exitcode(status), open(err, encoding="utf-8", errors="replace").read()])
print(json.dumps(out))
"""


def test_the_corpus_through_the_console_entry_point(registered: Cli, tmp_path: Path) -> None:
    cases: list[tuple[str, list[str], list[str]]] = [(f"sql {n}", ["sql", *a], w) for n, a, w in SQL_CASES]
    for i, (name, text, words) in enumerate(SPEC_CASES):
        path = tmp_path / f"entry{i}.yaml"
        path.write_text(text, encoding="utf-8")
        cases.append((f"release {name}", ["release", str(path)], words))
    before = registered.charges()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPSENSE_")}
    env |= {"DPSENSE_LEDGER": registered.ledger, "DPSENSE_ANALYST": "alice", "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(tmp_path)],
        input=json.dumps([args for _, args, _ in cases]),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads(done.stdout)
    assert len(answers) == len(cases) >= 40
    for (name, _, words), (code, stderr) in zip(cases, answers, strict=True):
        try:
            _clean(SimpleNamespace(exit_code=code, stderr=stderr), words)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None
    assert registered.charges() == before
