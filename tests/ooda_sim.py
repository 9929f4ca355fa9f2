"""A simulated tool population for OODA: known success probabilities and latencies,
some degrading half-way, driven through selection (used by tests/test_ooda_simulation.py
and bench/ooda.py --simulation).

Each call draws a task of a topic, lets selection pick the top-1 tool for it, and
records a call whose outcome follows the chosen tool's planted behaviour in the
current phase; a tool of another topic cannot do the task and fails. Calls are
stamped evenly over two analysis windows ending now, the degradations start at the
window boundary. Records are written in small batches through the store
(``record_calls``: log rows and the tools' counters in one transaction).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

from tooldb import Registry
from tooldb.selection.index import ToolIndex
from tooldb.selection.select import Filters, Selector, Weights
from tooldb.stores import LiveStats, Store, TenantState

WINDOW_S = 86_400.0


@dataclass(frozen=True)
class Planted:
    name: str
    topic: str
    description: str
    success: float
    median_ms: float
    #: After the half-way point (the start of the current window).
    success_after: float | None = None
    median_after_ms: float | None = None
    category: str = "general"
    sigma: float = 0.5

    def p(self, late: bool) -> float:
        return self.success_after if late and self.success_after is not None else self.success

    def median(self, late: bool) -> float:
        return self.median_after_ms if late and self.median_after_ms is not None else self.median_ms


TOOLS = [
    Planted("weather_forecast", "weather",
            "Weather forecast for a city: temperature, rain and wind for the coming days.",
            0.30, 120),
    Planted("weather_backup", "weather", "Backup weather service for a city.", 0.95, 200),
    Planted("send_email", "email",
            "Send an email message to a recipient address with a subject and a body.",
            0.96, 150, success_after=0.40),
    Planted("mail_relay", "email",
            "Relay an email to a recipient address through a mail server.", 0.94, 250),
    Planted("convert_currency", "currency",
            "Convert an amount of money between two currencies at the exchange rate.",
            0.97, 80),
    Planted("exchange_rates", "currency", "Table of exchange rates.", 0.95, 90),
    Planted("geocode_address", "geocode",
            "Geocode a street address into latitude and longitude coordinates.",
            0.97, 60, median_after_ms=300),
    Planted("place_lookup", "geocode", "Look up the coordinates of a place.", 0.95, 100),
    Planted("translate_text", "translate",
            "Translate a text from one language into another language.",
            0.95, 200, success_after=0.62),
    Planted("phrasebook", "translate", "Phrasebook of common language phrases.", 0.93, 150),
    Planted("check_service_health", "health",
            "Check the health of a service endpoint and report its status.",
            0.35, 50, category="diagnostics"),
    Planted("render_report", "report",
            "Render a PDF report document from a template and data.", 0.96, 12_000,
            sigma=0.3),
    Planted("web_search", "search", "Search the web for pages matching a query.", 0.92, 400),
    Planted("fax_document", "fax", "Fax a document to a telephone number.", 0.9, 100),
]  # fmt: skip

TASKS = {
    "weather": [
        "weather forecast for Paris tomorrow",
        "will there be rain or wind in Berlin, what does the weather forecast say",
        "temperature forecast for the city of Oslo",
        "what is the weather forecast in Rome",
    ],
    "email": [
        "send an email to bob@example.com with the subject hello",
        "email the report to the recipient address with a short body",
        "send an email message to the team",
    ],
    "currency": [
        "convert 100 dollars to euros",
        "how much money is 50 pounds in yen at the exchange rate",
        "convert an amount between two currencies",
    ],
    "geocode": [
        "geocode the street address 10 Downing Street",
        "latitude and longitude coordinates of this street address",
        "geocode an address into coordinates",
    ],
    "translate": [
        "translate this text into French",
        "translate a text from English into another language",
        "translate hello world from German",
    ],
    "health": [
        "check the health of the payments service endpoint",
        "report the status of a service endpoint health check",
    ],
    "report": [
        "render a PDF report from the sales template",
        "render the quarterly report document from a template and data",
    ],
    "search": [
        "search the web for pages about tooldb",
        "search the web for pages matching python packaging",
    ],
}

#: What OODA must find and do, and nothing else (default thresholds, 1-day window).
EXPECTED_FINDINGS = {
    ("low_success", "weather_forecast"),
    ("low_success", "send_email"),
    ("low_success", "translate_text"),
    ("low_success", "check_service_health"),
    ("degrading", "send_email"),
    ("degrading", "translate_text"),
    ("degrading", "geocode_address"),
    ("slow", "render_report"),
    ("never_used", "fax_document"),
}
EXPECTED_DISABLED = {"weather_forecast", "send_email"}
EXPECTED_HELD = {"check_service_health"}


class BetweenWrites:
    """The store as selection reads it while nothing writes: the simulation writes only
    when it flushes a batch, so until then ``tenant_state`` and ``live_stats`` would
    return the same rows on every call. They are read once per batch (all the tenant's
    tools) and served from memory: the same answers, without 20,000 x 2 round trips."""

    def __init__(self, store: Store, tool_ids: list[int]) -> None:
        self.store = store
        self.tool_ids = tool_ids
        self.forget()

    def forget(self) -> None:
        """Called after every write: the next read goes to the database."""
        self._state: TenantState | None = None
        self._stats: dict[int, LiveStats] | None = None

    def tenant_state(self, tenant: str) -> TenantState:
        if self._state is None:
            self._state = self.store.tenant_state(tenant)
        return self._state

    def live_stats(self, tenant: str, ids: list[int]) -> dict[int, LiveStats]:
        if self._stats is None:
            self._stats = self.store.live_stats(tenant, self.tool_ids)
        return {i: self._stats[i] for i in ids if i in self._stats}

    def active_stats(self, tenant: str, ids: list[int]) -> dict[int, LiveStats]:
        stats = self.live_stats(tenant, ids)
        return {i: s for i, s in stats.items() if s.usage_count or s.success_count}

    def pool_stats(self, tenant: str, ids: list[int]) -> tuple[dict[int, LiveStats], TenantState]:
        return self.active_stats(tenant, ids), self.tenant_state(tenant)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@dataclass
class Simulation:
    registry: Registry
    seed: int = 7
    calls: int = 20_000
    end: float = 0.0
    rng: random.Random = field(init=False)
    by_name: dict[str, Planted] = field(init=False)
    _vectors: dict[str, Any] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.by_name = {t.name: t for t in TOOLS}

    def register(self) -> None:
        self.registry.add(
            *[
                {
                    "name": t.name,
                    "description": t.description,
                    "category": t.category,
                    "target": "tests.sample_tools:noop",
                }
                for t in TOOLS
            ]
        )
        self.ids = {t.name: t.id for t in self.registry.list(include_disabled=True)}
        self.end = time.time()  # after registration: unused tools are older than the log
        registry = self.registry
        self.reads = BetweenWrites(registry.store, list(self.ids.values()))
        embedder = registry.embedder
        index = ToolIndex(
            self.reads,  # type: ignore[arg-type]
            registry.tenant,
            embedder.id if embedder else None,
            embedder.dim if embedder else 0,
        )
        self.selector = Selector(index, embedder, Weights.from_settings(registry.settings))

    def top1(self, task: str) -> str | None:
        """Selection's choice for a task: tooldb's Selector, configured as the registry's,
        over the store as it stands (query vectors cached: a task embeds the same)."""
        selector = self.selector
        vector = self._vectors.get(task)
        if vector is None and selector.embedder is not None:
            vector = self._vectors[task] = selector.embedder.embed([task])[0]
        chosen = selector.select(task, 1, Filters(), query_vector=vector).candidates
        return chosen[0].name if chosen else None

    def drive(self, batch: int = 20) -> None:
        """Record ``calls`` calls evenly over the two windows before ``end``. Each call's
        tool is selection's top-1 at that moment; the records are written ``batch`` at a
        time (``record_calls``: log rows and counters in one transaction), as if that many
        agents called at once, so selection sees them at most ``batch`` calls late."""
        start = self.end - 2 * WINDOW_S
        topics = sorted(TASKS)
        pending: list[dict[str, Any]] = []
        for i in range(self.calls):
            late = i >= self.calls // 2
            topic = topics[self.rng.randrange(len(topics))]
            task = self.rng.choice(TASKS[topic])
            name = self.top1(task)
            assert name is not None, task
            tool = self.by_name[name]
            ok = tool.topic == topic and self.rng.random() < tool.p(late)
            ms = self.rng.lognormvariate(math.log(tool.median(late)), tool.sigma)
            pending.append(
                {
                    "tenant": self.registry.tenant,
                    "tool_id": self.ids[name],
                    "tool_name": name,
                    "tool_version": 1,
                    "run_id": None,
                    "session_id": "simulation",
                    "arguments": {"task": task},
                    "success": ok,
                    "error_kind": None if ok else "execution",
                    "error": None if ok else "simulated failure",
                    "output_size": 0,
                    "output_preview": None,
                    "duration_ms": ms,
                    "started_at": start + (i + 0.5) * (2 * WINDOW_S / self.calls),
                }
            )
            if len(pending) >= batch:
                self.flush(pending)
                pending = []
        self.flush(pending)

    def flush(self, rows: list[dict[str, Any]]) -> None:
        self.registry.store.record_calls(rows)
        self.reads.forget()

    def expected_top1_success(self) -> float:
        """Mean success probability (late phase) of selection's top-1 over every task,
        each topic weighted equally, as calls are drawn."""
        self.reads.forget()  # OODA may have changed the registry since the last write
        total = 0.0
        for topic, tasks in TASKS.items():
            for task in tasks:
                name = self.top1(task)
                tool = self.by_name[name] if name else None
                ok = tool is not None and tool.topic == topic
                total += (tool.p(True) if ok and tool else 0.0) / len(tasks)
        return total / len(TASKS)

    def choices(self) -> dict[str, str | None]:
        self.reads.forget()
        return {task: self.top1(task) for tasks in TASKS.values() for task in tasks}
