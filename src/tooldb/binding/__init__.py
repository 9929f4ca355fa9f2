"""Binding: turn raw arguments into validated, completed keyword arguments.

Parameters are stored as JSON Schema (Draft 2020-12). The compact form of
DESIGN §2 is normalised once, at registration (``schema.py``), and checked there (valid
schema, resolvable local ``$ref``, defaults that satisfy their own schema), so a
definition mistake is never reported later as the caller's mistake. The binder
(``binder.py``) then binds each call: it parses, coerces losslessly, fills
defaults and validates, naming every problem so a model can fix its call.
"""

from __future__ import annotations

from .binder import Binder
from .schema import json_type_name, normalize_parameters

__all__ = ["Binder", "json_type_name", "normalize_parameters"]
