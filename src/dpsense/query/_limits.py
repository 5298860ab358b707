"""Reading YAML under limits: the one scanner below the CLI's files and the service's YAML bodies.

``read_limited_yaml`` walks PyYAML's event stream before anything is composed, counting nesting
depth and values as the events arrive, and refuses anchors and aliases and numbers written with
more than ``MAX_NUMBER_CHARS`` characters (the size rule of ``dpsense.query._values``). PyYAML's
scanner is quadratic in the nesting depth, so a deep document is cut off after ``max_depth`` levels
instead of being read to the end. Only a stream within the limits is composed, by a safe loader
(``CSafeLoader`` where libyaml is installed, else ``SafeLoader``).

A refusal is a ``YamlLimitError`` holding a neutral ``YamlViolation`` (what was broken, where, the
limit): each front end words it in its own terms (the CLI names the file and the flag, the service
answers a JSON error with the limit's name). Sizes in bytes or characters are checked by the front
ends before calling, since each counts them its own way.

PyYAML is an optional dependency (the ``cli`` and ``service`` extras): it is imported when a
document is read, and an ``ImportError`` is the caller's to answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from dpsense.query._values import MAX_NUMBER_CHARS

#: What a document broke: ``anchor`` (an anchor or alias), ``depth`` (nesting), ``values`` (too many
#: values), ``number`` (an over-long number), ``syntax`` (not YAML a safe loader reads).
ViolationKind = Literal["anchor", "depth", "values", "number", "syntax"]


@dataclass(frozen=True)
class YamlViolation:
    """Why a YAML document was refused, in no front end's words.

    ``line`` and ``column`` are 1-based where the offending event or syntax error starts; ``line`` is
    0 when PyYAML gave no mark for the event, and both are None when nothing points to a place
    (nesting found too deep by Python's recursion limit, a syntax error without a mark). ``limit`` is
    the bound that was passed (the depth, the value count, ``MAX_NUMBER_CHARS``; 0 for anchors and
    syntax) and ``chars`` the length of an over-long number (0 otherwise).
    """

    kind: ViolationKind
    limit: int = 0
    line: int | None = None
    column: int | None = None
    chars: int = 0


class YamlLimitError(Exception):
    """A YAML document outside the limits or not valid YAML; ``violation`` says which and where."""

    def __init__(self, violation: YamlViolation) -> None:
        super().__init__(violation.kind)
        self.violation = violation


def read_limited_yaml(text: str, *, max_depth: int, max_values: int) -> Any:
    """The document ``text`` composed by a safe loader, or ``YamlLimitError`` (see the module docstring)."""
    import yaml

    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    resolver = yaml.resolver.Resolver()
    try:
        depth = values = 0
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise YamlLimitError(YamlViolation("anchor", line=_line(event)))
            if isinstance(event, yaml.CollectionStartEvent):
                depth, values = depth + 1, values + 1
                if depth > max_depth:
                    raise YamlLimitError(YamlViolation("depth", max_depth, line=_line(event)))
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            elif isinstance(event, yaml.ScalarEvent):
                values += 1
                if event.implicit[0] and len(event.value) > MAX_NUMBER_CHARS:
                    tag = str(resolver.resolve(yaml.ScalarNode, event.value, (True, False)))  # type: ignore[no-untyped-call]
                    if tag.endswith((":int", ":float")):
                        violation = YamlViolation("number", MAX_NUMBER_CHARS, line=_line(event), chars=len(event.value))
                        raise YamlLimitError(violation)
            if values > max_values:
                raise YamlLimitError(YamlViolation("values", max_values, line=_line(event)))
        return yaml.load(text, Loader=loader)  # a safe loader: CSafeLoader or SafeLoader
    except RecursionError:
        raise YamlLimitError(YamlViolation("depth", max_depth)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if mark is None:
            raise YamlLimitError(YamlViolation("syntax")) from None
        raise YamlLimitError(YamlViolation("syntax", line=mark.line + 1, column=mark.column + 1)) from None


def _line(event: Any) -> int:
    """The 1-based line an event starts on (0 when PyYAML gives no mark)."""
    mark = getattr(event, "start_mark", None)
    return int(mark.line) + 1 if mark is not None else 0
