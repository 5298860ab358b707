"""Reading a YAML file into a pydantic model, with errors that name the field and suggest the fix.

The models read here are built on ``dpsense.interface.spec.StrictModel``: an unknown field or choice
is reported with the closest valid name (``difflib``), so ``epsilonn:`` says "did you mean 'epsilon'?"
and nothing is guessed; each pydantic error's ``ctx`` carries the fix this module prints.

Files are read under limits (``read_yaml``): at most ``MAX_YAML_BYTES``, ``MAX_DEPTH`` levels of
nesting and ``MAX_VALUES`` values, no anchors or aliases, and numbers within the size rule of
``dpsense.query._values`` (a 5000-digit number or ``.inf`` is an error naming the field, not a
traceback). The limits are checked by the scanner shared with the service
(``dpsense.query._limits.read_limited_yaml``) on PyYAML's event stream as it is read, before anything
is built; this module words its refusals for a file and the command line.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from dpsense.cli._errors import SpecError
from dpsense.query._limits import YamlLimitError, YamlViolation, read_limited_yaml
from dpsense.query._values import NUMBER_RULE

#: The largest YAML file read (a release spec or policy is a few hundred bytes).
MAX_YAML_BYTES = 1 << 20
#: The deepest nesting of lists and mappings in a YAML file.
MAX_DEPTH = 32
#: The most values in a YAML file.
MAX_VALUES = 100_000

ModelT = TypeVar("ModelT", bound=BaseModel)


def load(path: Path, model: type[ModelT], *, what: str, help_hint: str) -> ModelT:
    """Read ``path`` as YAML and validate it as ``model``; any problem is a ``SpecError``.

    ``help_hint`` names where the format is described (e.g. "see `dpsense release --help`").
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError("", f"cannot read the {what} file", str(path), f"check the path ({exc.strerror})") from None
    data = read_yaml(text, what=what, path=str(path))
    return validate(data, model, what=what, help_hint=help_hint)


def read_yaml(text: str, *, what: str, path: str) -> Any:
    """Parse ``text`` with PyYAML's safe loader under the limits of the module docstring."""
    if len(text) > MAX_YAML_BYTES:
        raise SpecError("", f"the {what} file is over {MAX_YAML_BYTES} bytes", path, "write a shorter file")
    try:
        return read_limited_yaml(text, max_depth=MAX_DEPTH, max_values=MAX_VALUES)
    except YamlLimitError as exc:
        raise _spec_error(exc.violation, what=what, path=path) from None


def _spec_error(violation: YamlViolation, *, what: str, path: str) -> SpecError:
    """The CLI's words for a refused YAML file (its name, the line, the fix)."""
    line = violation.line
    if violation.kind == "anchor":
        return SpecError(
            "", f"the {what} file uses YAML anchors or aliases (line {line})", path, "write the values out"
        )
    if violation.kind == "depth":
        if line is None:  # Python's recursion limit, not the scan, found it
            return SpecError("", f"the {what} file nests more than {MAX_DEPTH} levels", path, "flatten the file")
        return SpecError("", f"the {what} file nests more than {MAX_DEPTH} levels (line {line})", path,
                         "flatten the file: a release spec nests 4 levels")  # fmt: skip
    if violation.kind == "number":
        return SpecError("", f"{NUMBER_RULE} (line {line})", f"{violation.chars} characters",
                         "write a number such as 0.5, 30 or '1e-8'")  # fmt: skip
    if violation.kind == "values":
        return SpecError("", f"the {what} file holds more than {MAX_VALUES} values", path, "write a shorter file")
    where = f" at line {line}, column {violation.column}" if line is not None else ""
    return SpecError("", f"the {what} file is not valid YAML{where}", path, "fix the YAML syntax")


def validate(data: object, model: type[ModelT], *, what: str, help_hint: str) -> ModelT:
    """Validate parsed YAML as ``model``; the first problem becomes a ``SpecError``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = errors[0]
        loc = first["loc"]
        ctx = first.get("ctx") or {}
        more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
        if first["type"] == "missing":
            parent = dotted(loc[:-1])
            given = first.get("input")
            value: object = sorted(map(str, given)) if isinstance(given, dict) else given
            raise SpecError(
                f"{what} {parent}".strip(), f"'{loc[-1]}' is required{more}", value, f"add {loc[-1]}: ({help_hint})"
            ) from None
        value = ctx.get("input", first.get("input"))
        fix = str(ctx.get("fix", help_hint))
        raise SpecError(f"{what} {dotted(loc)}".strip(), f"{_lower(first['msg'])}{more}", value, fix) from None


def dotted(loc: Sequence[int | str]) -> str:
    """A pydantic error location as ``aggregates.people.kind`` / ``filters[0].op``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _lower(message: str) -> str:
    return message[:1].lower() + message[1:]
