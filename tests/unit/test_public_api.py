"""The public surface of ``import dpsense as dp``: exported, importable, typed (httpx's exported-members test)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types
from pathlib import Path

import mypy.api

import dpsense as dp
from dpsense.core import errors


def test_every_public_member_is_exported_and_every_export_resolves() -> None:
    submodules = {name for name, value in vars(dp).items() if isinstance(value, types.ModuleType)}  # bound on import
    helpers = {"TYPE_CHECKING", "Any", *submodules}
    public = {n for n in vars(dp) if not n.startswith("_") and n not in helpers}
    public.add("__version__")
    assert public <= set(dp.__all__)
    assert len(dp.__all__) == len(set(dp.__all__))
    for name in dp.__all__:
        value = getattr(dp, name)
        module = getattr(value, "__module__", "dpsense") or "dpsense"
        assert name == "__version__" or module.startswith("dpsense"), (name, module)
    assert sorted(dir(dp)) == dir(dp) and set(dp.__all__) <= set(dir(dp))


def test_the_errors_a_user_meets_are_exported_at_the_top_level() -> None:
    raised_on_purpose = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.DPSenseError) and value.__module__ == errors.__name__
    }
    assert raised_on_purpose <= set(dp.__all__)
    assert dp.BudgetExhausted is errors.BudgetExhausted and issubclass(dp.ChargedFailure, dp.DPSenseError)


def test_mypy_sees_the_real_types_not_any(tmp_path: Path) -> None:
    snippet = tmp_path / "user.py"
    snippet.write_text(
        textwrap.dedent(
            """
            import dpsense as dp

            reveal_type(dp.Session.open)
            reveal_type(dp.count)
            dp.median("age", mechanism=3)
            """
        )
    )
    out, _, _ = mypy.api.run(["--strict", "--no-incremental", "--follow-imports=silent", str(snippet)])
    assert 'error: Module "dpsense" does not explicitly export' not in out, out
    assert 'Revealed type is "def (url: str, *, analyst: str' in out, out
    assert "dpsense.query._aggregates.Aggregate" in out, out
    assert 'Argument "mechanism" to "median" has incompatible type "int"' in out, out


def test_importing_the_package_loads_no_engine_or_sql_parser() -> None:
    code = "import sys, dpsense; print(sorted(m for m in ('duckdb', 'sqlglot', 'pandas') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "[]"


def test_the_session_loads_without_the_sql_parser_until_sql_is_asked_for() -> None:
    code = (
        "import sys, dpsense; dpsense.Session; dpsense.count(); print('sqlglot' in sys.modules);"
        " from dpsense.release._session import _parse_sql; print('sqlglot' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.split() == ["False", "False"]
