"""``python -m dpsense.service serve ...`` (see ``dpsense.service.cli``)."""

import sys

try:
    from dpsense.service.cli import main
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    if (exc.name or "").partition(".")[0] not in {"fastapi", "starlette", "uvicorn", "pydantic", "duckdb", "pandas"}:
        raise
    print("the dpsense service needs the service extra: pip install 'dpsense[service,duckdb]'", file=sys.stderr)
    sys.exit(2)

sys.exit(main())
