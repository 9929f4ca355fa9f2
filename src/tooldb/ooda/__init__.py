"""OODA: the registry watches its tools' call log and acts on the ones that fail.

``optimize.py`` analyses and acts, ``hypothesise.py`` turns figures into findings,
``significance.py`` holds the statistical tests, ``types.py`` the value types,
``scheduler.py`` runs a cycle every N seconds beside a server. It reads the call
log through the store and reaches the registry only through the object handed to it.
"""

from __future__ import annotations

from .optimize import Optimizer, Policy
from .types import Act, Finding, FindingKind, OodaReport

__all__ = ["Act", "Finding", "FindingKind", "OodaReport", "Optimizer", "Policy"]
