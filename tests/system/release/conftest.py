from tests.unit.ledger.support import ledger_url, pg_server

__all__ = ["ledger_url", "pg_server"]
