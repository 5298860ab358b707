"""The device side of local-DP collection: randomizers that run on a user's device, standard library only.

Nothing here imports numpy or any other dpsense package (an import-linter contract enforces it);
randomness comes only from ``os.urandom`` (``dpsense.device._entropy``), with exact samplers for
every report probability. A scheme (``RapporScheme``, ``CmsScheme``, ``HcmsScheme``, ``KrrScheme``,
``OueScheme``, ``PrefixScheme``) holds the public parameters and states its guarantee
(``scheme.guarantee()``); a client turns a value into a JSON-ready report. Server-side estimation is
``dpsense.mechanisms.local_collection``. Math and proofs: docs/math/local-collection.md.
"""

from dpsense.device.clients import (
    CmsClient,
    HcmsClient,
    KrrClient,
    OueClient,
    PrefixClient,
    RapporClient,
    UnsupportedValue,
    prefix_level_of,
)
from dpsense.device.hashing import bloom_indices, cohort_of, hadamard_entry, sketch_bucket
from dpsense.device.schemes import (
    CmsScheme,
    HcmsScheme,
    KrrScheme,
    OueScheme,
    PrefixScheme,
    RapporScheme,
    Scheme,
    SchemeError,
    scheme_from_json,
)

__all__ = [
    "CmsClient",
    "CmsScheme",
    "HcmsClient",
    "HcmsScheme",
    "KrrClient",
    "KrrScheme",
    "OueClient",
    "OueScheme",
    "PrefixClient",
    "PrefixScheme",
    "RapporClient",
    "RapporScheme",
    "Scheme",
    "SchemeError",
    "UnsupportedValue",
    "bloom_indices",
    "cohort_of",
    "hadamard_entry",
    "prefix_level_of",
    "scheme_from_json",
    "sketch_bucket",
]
