"""SessionSight: agents over therapy session notes (extractor, Q&A, summarizer), their
clinical tools, a skill, and the pack's own database seeded with a synthetic data set.

``tooldb add pack sessionsight [--database URL]`` installs it; docs/sessionsight.md
shows a session extracted, the partial result at the tool-call limit and a cited answer.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import UsageError
from .. import PackReport, default_database, register_contents
from . import codes, store

if TYPE_CHECKING:
    from ...registry import Registry

DESCRIPTION = (
    "therapy session notes: risk (ConText), ICD-10-CM codes, schema, history tools; "
    "extractor, Q&A and summarizer agents"
)
HERE = Path(__file__).parent
TOOL_MODULES = [
    f"{__name__}.risk",
    f"{__name__}.codes",
    f"{__name__}.extraction",
    f"{__name__}.history",
    f"{__name__}.search",
]


def install(registry: Registry, database_url: str | None) -> PackReport:
    """Create (or upgrade) the pack's tables, seed the synthetic patients for this
    tenant when it has none, and register the tools, the skill and the three agents."""
    url = database_url or default_database("sessionsight")
    store.prepare(url, registry.tenant)
    with contextlib.suppress(UsageError):  # without the clinical extra: the tool says so
        codes.billable()  # the ICD-10-CM table, parsed once (slow) and kept beside the data
    return register_contents(
        registry,
        "sessionsight",
        url,
        tool_modules=TOOL_MODULES,
        skills=HERE / "skills",
        agents=HERE / "agents",
    )
