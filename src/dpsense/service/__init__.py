"""Layer 5: the HTTP release service (FastAPI + uvicorn; ``pip install 'dpsense[service]'``).

``python -m dpsense.service serve --ledger postgresql://... --data-dir DIR`` (or ``dpsense serve``)
runs it; ``create_app(ServiceConfig(...))`` returns the ASGI application. Analysts authenticate with
API tokens (stored in the ledger as salted hashes), release through the same ``Session`` and ledger
as the Python API and the CLI, and never see raw data, another analyst's releases or an unnoised
value. The steward registers data from the service's data folder, sets budgets, sees every release,
verifies the audit chain and has a dashboard at ``/dashboard``. See docs/service.md.
"""

from dpsense.service._app import create_app
from dpsense.service._workers import ServiceConfig

__all__ = ["ServiceConfig", "create_app"]
