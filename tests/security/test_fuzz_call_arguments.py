"""Issue 20: hypothesis fuzzes ``registry.call`` with JSON-reachable arguments (deep
nesting, lone surrogates in names and values, NaN and infinities, integers of
thousands of digits, 1 MB strings) on both stores. ``ArgumentError`` is the only
exception allowed; every call that ran is in the log with its outcome, and so is
every rejection; the log reads back.

``TOOLDB_FUZZ_EXAMPLES`` sets the examples per store (default 150); the figures
(examples, calls, outcomes per kind) are printed at the end of each run (``-s``).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tooldb
from tooldb import ArgumentError, Registry

EXAMPLES = int(os.environ.get("TOOLDB_FUZZ_EXAMPLES", "150"))


@tooldb.tool
def anything(x: Any = None, y: Any = None) -> str:
    """Take any values."""
    return "ran"


@tooldb.tool
def mapping(x: dict) -> str:  # type: ignore[type-arg]
    """Take an object."""
    return f"{len(x)} keys"


@tooldb.tool
def whole(x: int, y: float = 0.5) -> str:
    """Take an integer; fail on a negative one."""
    if x < 0:
        raise ValueError("negative")
    return str(x % 97)


@tooldb.tool
def text(x: str) -> str:
    """Take a text."""
    return x[:10]


TOOLS = ["anything", "mapping", "whole", "text"]
SURROGATES = st.sampled_from(["\ud800", "a\udfffb", "\udc80\udc81", "ok\ud83d"])
STRINGS = st.one_of(
    st.text(max_size=12),
    st.text(st.characters(exclude_categories=()), max_size=8),  # surrogates included
    SURROGATES,
    st.sampled_from(["", "42", "-7", "2.5", "true", "nul\x00", "x" * 1_000_000]),
)
NUMBERS = st.one_of(
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf]),  # rare in st.floats alone
    # built, not listed: hypothesis reprs a strategy's elements, and Python refuses
    # to write an integer past 4300 digits
    st.builds(
        lambda digits, sign: sign * 10**digits,
        st.sampled_from([3999, 4000, 5000]),
        st.sampled_from([1, -1]),
    ),
)
LEAVES = st.one_of(st.none(), st.booleans(), NUMBERS, STRINGS)
KEYS = st.one_of(st.sampled_from(["x", "y", "k", ""]), SURROGATES, st.text(max_size=6))
TREES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


def _nest(value: Any, depth: int, as_dict: bool) -> Any:
    for _ in range(depth):
        value = {"k": value} if as_dict else [value]
    return value


DEEP = st.builds(_nest, TREES, st.integers(80, 320), st.booleans())
VALUES = st.one_of(LEAVES, LEAVES, TREES, TREES, DEEP)
ARGUMENTS = st.one_of(
    st.fixed_dictionaries({"x": VALUES}),
    st.fixed_dictionaries({"x": VALUES}),
    st.fixed_dictionaries({"x": VALUES, "y": VALUES}),
    st.dictionaries(KEYS, VALUES, max_size=3),
)
AS_TEXT = st.booleans()  # also as JSON text, as a model or an MCP client sends them

REASONS = [
    ("nested too deeply", "deep"),
    ("contains itself", "cycle"),
    ("lone surrogate", "surrogate name"),
    ("finite number", "non-finite"),
    ("digits", "huge int"),
    ("unknown parameter", "unknown parameter"),
    ("missing required", "missing"),
    ("not valid JSON", "bad JSON"),
    ("expected", "wrong type"),
]


def _kind(error: ArgumentError) -> str:
    """The kind of the first problem named."""
    text = error.problems[0] if error.problems else str(error)
    return next((kind for marker, kind in REASONS if marker in text), "other")


@pytest.fixture
def reg(store_url: str) -> Iterator[Registry]:
    with tooldb.open(store_url) as registry:
        for fn in (anything, mapping, whole, text):
            registry.add(fn)
        yield registry


def test_fuzz_registry_call_arguments(reg: Registry, store_url: str) -> None:
    figures: Counter[str] = Counter()
    ran: Counter[str] = Counter()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(name=st.sampled_from(TOOLS), arguments=ARGUMENTS, as_text=AS_TEXT)
    def one_call(name: str, arguments: dict[str, Any], as_text: bool) -> None:
        figures["examples"] += 1
        sent: Any = arguments
        if as_text:
            try:
                sent = json.dumps(arguments)  # NaN as a bare NaN: not JSON, refused
            except ValueError:  # an integer past Python's own 4300-digit limit
                sent = arguments
        figures["calls"] += 1
        try:
            result = reg.call(name, sent)
        except ArgumentError as exc:  # the only exception a caller may get
            figures[f"rejected: {_kind(exc)}"] += 1
            [record] = reg.calls(limit=1)
            assert record.tool_name == name and record.error_kind == "arguments"
            assert not record.success
            return
        ran[name] += 1
        figures["ran: ok" if result.success else "ran: tool failed"] += 1
        assert result.call_id is not None
        [record] = reg.calls(limit=1)  # the call that ran is the newest in the log
        assert record.id == result.call_id and record.success == result.success
        json.dumps(record.arguments, allow_nan=False)  # stored as plain JSON

    one_call()
    for name in TOOLS:  # every call that ran was counted, nothing else was
        assert reg.get(name).stats.usage_count == ran[name]
    assert reg.store.count_calls(reg.tenant) == figures["calls"]
    store = "postgresql" if store_url.startswith("postgresql") else "sqlite"
    lines = [f"{key}: {value}" for key, value in sorted(figures.items())]
    print(f"\nfuzz figures ({store}): " + "; ".join(lines))
    assert (
        figures["ran: ok"] > 0
        and sum(v for k, v in figures.items() if k.startswith("rejected")) > 0
    )
    assert not re.search(r"rejected: other", " ".join(figures))
