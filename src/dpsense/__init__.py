"""dpsense: differentially private statistics with the least noise that is still provably safe.

Layers (imports point down only): ``core`` and ``noise`` (L0), ``mechanisms``, ``sensitivity`` and
``accounting`` (L1). See docs/ and the README for the guarantees each part states.
"""

from dpsense.core import ZCDP, Adjacency, ApproxDP, DPSenseError, PrivacyUnit, PureDP

__version__ = "0.1.0"

__all__ = ["ZCDP", "Adjacency", "ApproxDP", "DPSenseError", "PrivacyUnit", "PureDP", "__version__"]
