"""Start-up of the command line (issue 17): ``--version``, help texts as written, and a light import.

Start time is checked through a load-independent proxy: importing the app, and printing its help, in a
fresh interpreter loads none of the heavy libraries a command needs when it runs (scipy for the audits,
pandas and DuckDB for a Session). No test here measures time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from dpsense._version import __version__
from dpsense.cli import main
from dpsense.cli._app import app

HEAVY = ("scipy", "pandas", "duckdb")


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPSENSE_")} | {"COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def _help(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "200"}, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_version_prints_the_package_version_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    result = CliRunner().invoke(app, ["--version"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"dpsense {__version__}\n"
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"dpsense {__version__}\n"
    assert "--version" in _help()


def test_version_is_answered_before_typer_is_imported() -> None:
    done = _python(
        "import sys\nfrom dpsense.cli import main\ncode = main(['--version'])\n"
        "print(code, 'typer' in sys.modules, file=sys.stderr)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"dpsense {__version__}\n"
    assert done.stderr.split() == ["0", "False"]


@pytest.mark.parametrize(
    ("command", "lines"),
    [
        (
            ["release"],
            [
                "epsilon: 0.5                 # delta: 0, request_id: job-1 optional",
                "max_groups_per_unit: 1",
                "aggregates:",
                "  people: {kind: count_units}",
                "  p90: {kind: quantile, column: age, q: 0.9}",
                "engine: spark                # optional: duckdb (default) or spark",
            ],
        ),
        (
            ["dataset", "add"],
            [
                'protected: "a person: every event they logged"',
                "population: 1000000          # a public upper bound on the privacy units",
                "planned_releases: 12",
                "next_review: 2027-05-29",
            ],
        ),
        (["sql"], ['dpsense sql "SELECT region, COUNT(DISTINCT person_id) FROM events GROUP BY region" --epsilon 0.5']),
    ],
    ids=["release", "dataset add", "sql"],
)
def test_help_shows_the_examples_line_by_line_and_no_paragraph_marker(command: list[str], lines: list[str]) -> None:
    text = _help(*command)
    assert "\\b" not in text and "\b" not in text
    shown = [line.rstrip() for line in text.splitlines()]
    first = next((line for line in shown if line.strip() == lines[0]), None)
    assert first is not None, text  # on a line of its own, not rewrapped into a paragraph
    margin = first[: len(first) - len(first.lstrip())]
    for line in lines:
        assert margin + line in shown, (line, text)  # as written, nested lines keep their indentation


@pytest.mark.parametrize("command", [[], ["dataset"], ["dataset", "verify"], ["budget"], ["verify-log"], ["audit"]])
def test_no_help_text_prints_a_paragraph_marker(command: list[str]) -> None:
    text = _help(*command)
    assert "\\b" not in text and "\b" not in text


def test_importing_the_app_and_printing_help_loads_no_heavy_library() -> None:
    done = _python(
        "import json, sys\n"
        "import dpsense.cli._app\n"
        f"heavy = {HEAVY!r}\n"
        "after_import = [m for m in heavy if m in sys.modules]\n"
        "from dpsense.cli import main\n"
        "codes = [main(args) for args in (['--help'], ['release', '--help'], ['dataset', 'add', '--help'])]\n"
        "import dpsense.release, dpsense.release._progress\n"
        "print(json.dumps([after_import, codes, [m for m in heavy if m in sys.modules]]), file=sys.stderr)\n"
    )
    assert done.returncode == 0, done.stderr
    after_import, codes, after_help = json.loads(done.stderr.strip().splitlines()[-1])
    assert after_import == [] and codes == [0, 0, 0] and after_help == []
    assert "Usage: dpsense" in done.stdout


def test_the_lazy_release_package_still_exports_its_names() -> None:
    done = _python(
        "import sys\nimport dpsense.release as r\n"
        "loaded = 'pandas' in sys.modules\n"
        "names = [getattr(r, n).__name__ for n in ('Session', 'Budget', 'Release', 'SqlRelease', 'Dataset')]\n"
        "print(loaded, r.MECHANISM_VERSION is not None, set(r.__all__) <= set(dir(r)), *names, file=sys.stderr)\n"
        "try:\n    r.NoSuchName\nexcept AttributeError as exc:\n    print(exc, file=sys.stderr)\n"
    )
    assert done.returncode == 0, done.stderr
    first, error = done.stderr.strip().splitlines()[-2:]
    assert first.split() == ["False", "True", "True", "Session", "Budget", "Release", "SqlRelease", "Dataset"]
    assert error == "module 'dpsense.release' has no attribute 'NoSuchName'"


def test_a_session_release_loads_no_scipy() -> None:
    """The release path (Session, planner, engine, mechanisms) stays free of scipy, whose import takes ~1 s.

    The local-DP decoders need scipy; they load only when a collection is used (``Session.estimate_frequencies``).
    """
    done = _python(
        "import sys, tempfile, numpy as np, pandas as pd\n"
        "import dpsense as dp\n"
        "from tests.factories import policy\n"
        "d = tempfile.mkdtemp()\n"
        "frame = pd.DataFrame({'person_id': np.arange(200), 'hours': np.arange(200) % 24 * 1.0})\n"
        "with dp.Session.open(f'sqlite:///{d}/l.db', analyst='s', role='steward') as s:\n"
        "    events = s.register_dataset('e', source=frame, privacy_unit='person_id', bounds={'hours': (0, 24)},"
        " budget=dp.Budget(epsilon=5), policy=policy())\n"
        "    s.release(events.query().agg(n=dp.count(max_rows_per_unit=1), m=dp.mean('hours', max_rows_per_unit=1)),"
        " epsilon=1)\n"
        "print('scipy' in sys.modules, file=sys.stderr)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "False"


def test_a_cli_sql_release_loads_no_pydantic() -> None:
    """``dpsense sql`` answers without pydantic (~50 ms of imports): typer < 0.29 parses options without it.

    typer 0.29 coerces every option through a pydantic TypeAdapter; pyproject pins ``typer<0.29`` for it.
    The registration runs in one process, the release in a fresh one that imports only the CLI.
    """
    setup = _python(
        "import tempfile, numpy as np, pandas as pd\n"
        "import dpsense as dp\n"
        "from tests.factories import policy\n"
        "d = tempfile.mkdtemp()\n"
        "frame = pd.DataFrame({'person_id': np.arange(200), 'hours': np.arange(200) % 24 * 1.0})\n"
        "with dp.Session.open(f'sqlite:///{d}/l.db', analyst='s', role='steward') as s:\n"
        "    s.register_dataset('e', source=frame, privacy_unit='person_id', bounds={'hours': (0, 24)},"
        " max_rows_per_unit=1, budget=dp.Budget(epsilon=5), policy=policy())\n"
        "    s.add_analyst('alice')\n"
        "print(f'sqlite:///{d}/l.db')\n"
    )
    assert setup.returncode == 0, setup.stderr
    url = setup.stdout.strip().splitlines()[-1]
    done = _python(
        "import sys\nfrom dpsense.cli import main\n"
        f"args = ['sql', 'SELECT COUNT(*) FROM e', '--epsilon', '0.5', '--ledger', {url!r}, '--analyst', 'alice']\n"
        "code = main(args)\n"
        "print(code, 'pydantic' in sys.modules, file=sys.stderr)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1].split() == ["0", "False"], done.stderr
