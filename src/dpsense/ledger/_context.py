"""What the parts of one ledger share: its backend connection, its clock and the id caches.

``Ledger`` (``_ledger``) makes one ``LedgerContext`` and passes it to each of its components
(``Stewardship`` in ``_steward``, ``Profiles`` in ``_profiles``, ``Tokens`` in ``_service``) and
uses it for the reserve -> commit | fail lifecycle itself. The context owns this state; the
components only read it through the context, so no part of the ledger sets another part's attributes.
"""

from __future__ import annotations

from collections.abc import Callable

from dpsense.core.errors import UnknownAnalyst
from dpsense.ledger._backends import Backend, Tx
from dpsense.ledger._rows import dataset_id as dataset_id_of


class LedgerContext:
    """One backend connection, the ledger clock, and the ids already looked up through them.

    Datasets and analysts are never deleted and their ids never change, so a known one skips its
    lookup: ``dataset_id`` and ``check_analyst`` read the database only the first time.
    """

    def __init__(self, backend: Backend, clock: Callable[[], float]) -> None:
        self.backend = backend
        self.clock = clock
        self._dataset_ids: dict[str, int] = {}
        self._analysts: set[str] = set()

    def dataset_id(self, tx: Tx, dataset: str) -> int:
        """The id of ``dataset`` (read in ``tx`` the first time).

        Raises:
            UnknownDataset: the dataset is not registered.

        """
        return self._dataset_ids.get(dataset) or self._dataset_ids.setdefault(dataset, dataset_id_of(tx, dataset))

    def known_dataset_id(self, dataset: str) -> int | None:
        """The id of ``dataset`` when it was looked up before (no read), else ``None``."""
        return self._dataset_ids.get(dataset)

    def check_analyst(self, tx: Tx, analyst: str) -> None:
        """Refuse an analyst that was never added (read in ``tx`` until it is found once).

        Raises:
            UnknownAnalyst: the analyst was never added (``add_analyst``).

        """
        if analyst not in self._analysts:
            if not tx.execute("SELECT 1 FROM analysts WHERE name = ?", (analyst,)):
                raise UnknownAnalyst(analyst)
            self._analysts.add(analyst)
