"""Binding: turn raw arguments into validated, completed keyword arguments.

Parameters are stored as JSON Schema (Draft 2020-12). The compact form of
DESIGN §2 is normalised here once, at registration, and checked there (valid
schema, resolvable local ``$ref``, defaults that satisfy their own schema), so a
definition mistake is never reported later as the caller's mistake. At call
time the binder:

1. parses the arguments (a JSON text or a mapping) into an object;
2. rejects unknown names (unless the schema sets ``additionalProperties``);
3. coerces strings that hold a value *losslessly* — ``"42"`` for an integer,
   ``"2.5"`` for a number, ``"true"``/``"false"`` for a boolean — and nothing else;
4. fills defaults of missing parameters;
5. validates (formats such as ``uuid`` included), reporting every problem with
   the parameter, the expected type and what was given, so a model can fix its
   call from the message alone.
"""

from __future__ import annotations

from .binder import Binder
from .schema import json_type_name, normalize_parameters

__all__ = ["Binder", "json_type_name", "normalize_parameters"]
