"""The release request the service reads (JSON body or YAML document): the shared release spec.

``ReleaseBody`` is ``dpsense.interface.spec.ReleaseSpec``, the model the CLI reads too, plus
``family`` (the query family of the steward's family sub-budgets). The fields of a spec file on the
analyst's own machine are refused with the fix:

* ``source``: an analyst never names data. The service reads the snapshot the steward registered.
* ``request_id``: the idempotency key travels in the ``Idempotency-Key`` header of every release.
* ``engine``, ``spark_master``, ``spark_collect_limit``: the operator chooses the service's engine.

A field the model refuses is a 422 naming the field and the fix; values the query layer judges are a
400 naming the rule and the fix (``dpsense.interface.spec``).
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from dpsense.interface.spec import Name, Number, ReleaseSpec, StrictModel, Text

_ENGINE_FIX = "remove '{}': the service runs the engine its operator configured"

#: Fields of a CLI spec the service refuses, with the fix.
CLI_ONLY = {
    "source": "remove 'source': the service reads the snapshot the steward registered",
    "request_id": "remove 'request_id' and send it as the Idempotency-Key header",
    **{name: _ENGINE_FIX.format(name) for name in ("engine", "spark_master", "spark_collect_limit")},
}

#: A frozen request model that refuses unknown fields, naming the closest valid one.
Body = StrictModel


class ReleaseBody(ReleaseSpec):
    """A release request: the dataset, the privacy loss to spend, and what to compute."""

    WHAT: ClassVar[str] = "release request"
    REFUSED: ClassVar[dict[str, str]] = CLI_ONLY

    family: Name | None = None


class SqlBody(Body):
    """A SQL question (the DP subset of ``dpsense.query.sql``) and the privacy loss to spend."""

    sql: Annotated[Text, Field(min_length=1, max_length=20_000)]
    epsilon: Number
    delta: Number = 0
    family: Name | None = None
