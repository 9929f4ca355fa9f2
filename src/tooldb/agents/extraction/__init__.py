"""Arguments from plain language without a model, and the router's plan of calls.

``values`` finds typed values in a sentence, ``assign`` gives them to a schema's
parameters (each with the reason), ``plan`` decides which tools to call how often, or
declines naming what is missing. Pure functions of text and schemas: no registry.
"""

from .assign import Extraction, extract_arguments
from .plan import Offered, Options, Plan, PlannedCall, plan_calls
from .values import Span, find_spans

__all__ = [
    "Extraction",
    "Offered",
    "Options",
    "Plan",
    "PlannedCall",
    "Span",
    "extract_arguments",
    "find_spans",
    "plan_calls",
]
