"""Layer 0: privacy-loss values (exact arithmetic), adjacency and privacy units, the error tree."""

from dpsense.core.adjacency import Adjacency, PrivacyUnit
from dpsense.core.errors import (
    BudgetExhausted,
    ChargedFailure,
    DPSenseError,
    InternalError,
    InvalidBounds,
    InvalidData,
    InvalidPrivacyParameter,
    InvalidSensitivity,
    LedgerBusy,
    LedgerStateError,
    LedgerUnreadable,
    RequestIdConflict,
    UnknownAnalyst,
    UnknownDataset,
    UnsupportedRequest,
    UsageError,
)
from dpsense.core.numbers import NumberLike, to_fraction
from dpsense.core.privacy_loss import ZCDP, ApproxDP, PrivacyLoss, PureDP, check_delta, check_epsilon, check_rho

__all__ = [
    "ZCDP",
    "Adjacency",
    "ApproxDP",
    "BudgetExhausted",
    "ChargedFailure",
    "DPSenseError",
    "InternalError",
    "InvalidBounds",
    "InvalidData",
    "InvalidPrivacyParameter",
    "InvalidSensitivity",
    "LedgerBusy",
    "LedgerStateError",
    "LedgerUnreadable",
    "NumberLike",
    "PrivacyLoss",
    "PrivacyUnit",
    "PureDP",
    "RequestIdConflict",
    "UnknownAnalyst",
    "UnknownDataset",
    "UnsupportedRequest",
    "UsageError",
    "check_delta",
    "check_epsilon",
    "check_rho",
    "to_fraction",
]
