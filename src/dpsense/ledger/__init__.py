"""Layer 2: the privacy-budget ledger (budgets, reservations, releases, audit chain).

``Ledger.open("sqlite:///ledger.db")`` (embedded default) or ``Ledger.open("postgresql://...")``
(shared deployments, needs ``dpsense[postgres]``). Both backends behave the same; amounts are exact
rationals; a charge is atomic and durable before any data is read (docs/design.md invariant 4).

Lifecycle (``_states``): ``reserve`` -> run the release -> ``commit`` (store the released value) or
``fail``. A retry with the same (analyst, request id) returns the stored release, or completes a
reservation that never committed, never charging twice. A ``cache_key`` (snapshot fingerprint +
canonical query + bounds + mechanism version, built by the caller) returns the stored release at no
new cost. A ``PartitionSpec`` on ``reserve`` declares a release on one part of a public partition of
the privacy units; such charges compose in parallel (``_partitions``, docs/math/composition.md).
The caller stores only released (noised) values; the ledger never sees unnoised ones.
"""

from dpsense.ledger._audit import AuditReport
from dpsense.ledger._collections import CLIENT_BUDGET, MAX_REPORTS_PER_CLIENT, CollectionInfo, IngestOutcome
from dpsense.ledger._ledger import Ledger, SpendPoint
from dpsense.ledger._partitions import PartitionSpec
from dpsense.ledger._profiles import DatasetProfile
from dpsense.ledger._secrets import keyed_fingerprint
from dpsense.ledger._service import MAX_TOKEN_TTL_S, TokenIdentity, TokenInfo
from dpsense.ledger._states import ChargeState
from dpsense.ledger._types import BudgetStatus, ChargeRecord, ReleaseRecord, Reservation, Scope, StoredRelease
from dpsense.ledger._verify import Anchor, checkpoint_document, read_checkpoint

__all__ = [
    "CLIENT_BUDGET",
    "MAX_REPORTS_PER_CLIENT",
    "MAX_TOKEN_TTL_S",
    "Anchor",
    "AuditReport",
    "BudgetStatus",
    "ChargeRecord",
    "ChargeState",
    "CollectionInfo",
    "DatasetProfile",
    "IngestOutcome",
    "Ledger",
    "PartitionSpec",
    "ReleaseRecord",
    "Reservation",
    "Scope",
    "SpendPoint",
    "StoredRelease",
    "TokenIdentity",
    "TokenInfo",
    "checkpoint_document",
    "keyed_fingerprint",
    "read_checkpoint",
]
