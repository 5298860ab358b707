"""Fixtures of the service system tests: a running service over a fresh PostgreSQL schema."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.system.service.support import Service, start_service
from tests.unit.ledger.support import drop_pg_schema, fresh_pg_schema, pg_server

__all__ = ["pg_server"]


@pytest.fixture(scope="module")
def make_service(pg_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Service]]:
    """Start services (each on its own fresh PostgreSQL schema); all are stopped at the module's end."""
    started: list[tuple[Service, str]] = []

    def make(**kw: Any) -> Service:
        schema, url = fresh_pg_schema(pg_server)
        root = tmp_path_factory.mktemp("service")
        try:
            service = start_service(url, root, **kw)
        except BaseException:
            drop_pg_schema(pg_server, schema)
            raise
        started.append((service, schema))
        return service

    yield make
    for service, schema in started:
        service.stop()
        drop_pg_schema(pg_server, schema)


@pytest.fixture(scope="module")
def service(make_service: Callable[..., Service]) -> Service:
    """One service for the module: analysts alice, bob, carol (analyst budget ε=1) and dave; ``events``."""
    return make_service(analyst_epsilon={"carol": 1})


@pytest.fixture
def data_dir(service: Service) -> Path:
    return service.data_dir
