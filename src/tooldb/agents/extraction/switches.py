"""The router's techniques by name, and the set switched off (bench/bfcl.py --ablate)."""

from __future__ import annotations

TECHNIQUES = (
    "choices",
    "names",
    "units",
    "relations",
    "kinds",
    "lists",
    "order",
    "phrases",
    "flags",
    "restated",
    "places",
    "weak_fit",
    "makers",
    "ordinals",
    "whole_lists",
    "text_tail",
    "calendar",
    "place_shape",
    "place_case",
    "questions",
    "anchored",
    "labels",
    "choice_lists",
    "tuples",
    "roles",
    "intros",
    "commands",
    "id_shape",
    "enum_only",
    "addresses",
)
ABLATED: set[str] = set()
"""Techniques switched off, for the ablation in bench/bfcl.py only (all on in normal use)."""
