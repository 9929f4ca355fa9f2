"""Learning from use (a mixin of Registry): the tasks a tool served become evidence.

A successful call made for a task (``call(..., task=...)``, an agent or router run,
``feedback(decision_id, tool, good=True)``) stores the task, embedded, as evidence for
the tool; a failure or bad feedback stores it against. Selection reads the evidence
(selection/evidence.py); ``evidence`` lists it, ``forget_evidence`` erases it,
``prune_evidence`` (run by each OODA cycle) drops stale and contradicted rows.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..errors import NotFound, UsageError
from ..selection.evidence import EvidenceIndex, EvidenceWeights
from ..selection.select import Selector, check_request
from ..settings import Settings
from ..stores import EvidenceRow, Store
from ..types import RunResult

if TYPE_CHECKING:
    from ..embedders import Embedder


class Learning:
    store: Store
    settings: Settings
    tenant: str

    if TYPE_CHECKING:

        @property
        def selector(self) -> Selector: ...

        @property
        def embedder(self) -> Embedder | None: ...

    def _attach_evidence(self, selector: Selector) -> None:
        """Give a new selector the tenant's evidence (not without an embedder: evidence
        is compared by meaning, or when ``select_learning`` is off)."""
        settings = self.settings
        if not settings.select_learning or selector.embedder is None or not selector.index.dim:
            return
        selector.evidence = EvidenceIndex(
            self.store, self.tenant, selector.embedder.id, selector.index.dim,
            ann_min=settings.select_evidence_ann_min or None,
        )  # fmt: skip
        selector.evidence_weights = EvidenceWeights(
            weight=settings.select_evidence_weight,
            min_cosine=settings.select_evidence_min_cosine,
            neighbours=max(1, settings.select_evidence_neighbours),
            merge_cosine=settings.select_evidence_merge_cosine,
            cap_per_tool=max(1, settings.select_evidence_cap),
        )

    def learn(self, task: str, tool: str, *, good: bool = True) -> bool:
        """Store ``task`` as evidence for (``good``) or against ``tool``; False when this
        registry does not learn (no embedder, or ``select_learning`` off)."""
        return self._learn(task, tool, good, None)

    def _learn(self, task: str, tool: str, good: bool, once: tuple[str, str] | None) -> bool:
        """``learn``; with ``once`` (run id, step) only if that run has not learned it yet
        (marked in the evidence's transaction: False when it had)."""
        task = check_request(task, 1)
        if not isinstance(tool, str) or self.store.tool_head(self.tenant, tool) is None:
            raise NotFound(f"no tool named {tool!r} in tenant {self.tenant!r}")
        selector = self.selector
        evidence = selector.evidence
        if evidence is None:
            return False
        vector = selector.task_vector(task)
        with evidence.lock:
            evidence.refresh()
            write = evidence.plan(
                tool, task, vector, 1.0 if good else 0.0, 0.0 if good else 1.0,
                selector.evidence_weights, time.time(),
            )  # fmt: skip
            written = self.store.write_evidence(self.tenant, write, once=once)
            if written is None:
                return False
            evidence.apply(write, *written)
        return True

    def feedback(self, decision_id: int, tool: str, *, good: bool = True) -> bool:
        """Tell selection how ``tool`` did for the task of a recorded selection (its
        ``decision_id``): good feedback is evidence for it, bad against."""
        if isinstance(decision_id, bool) or not isinstance(decision_id, int):
            raise UsageError(f"decision id must be a whole number, got {decision_id!r}")
        decision = self.store.get_decision(self.tenant, decision_id)
        if decision is None:
            raise NotFound(f"no decision {decision_id} in tenant {self.tenant!r}")
        return self.learn(str(decision["task"]), tool, good=good)

    def learn_from_run(self, result: RunResult, *, once: bool = False) -> int:
        """Evidence from a finished run: each registry tool it called, for (any call
        succeeded) or against (every call failed) the run's task. Returns rows written.
        ``once``: a run that may be executed again (a submitted run, resumed by another
        worker) teaches each tool once, whatever the number of executions."""
        if not result.task.strip() or self.selector.evidence is None:
            return 0
        outcomes: dict[str, bool] = {}
        for use in result.tool_calls:
            outcomes[use.tool] = outcomes.get(use.tool, False) or use.success
        known = self.store.tool_heads(self.tenant, list(outcomes))
        learned = 0
        for tool, good in outcomes.items():
            if tool in known:  # not the loop's built-ins (search_tools, load_skill ...)
                mark = (result.run_id, f"learn:{tool}") if once else None
                learned += self._learn(result.task, tool, good, mark)
        return learned

    def evidence(self, *, tool: str | None = None, limit: int = 50) -> list[EvidenceRow]:
        """The tenant's stored evidence, most recently seen first (without vectors)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise UsageError(f"limit must be a whole number, 0 or more, got {limit!r}")
        return self.store.list_evidence(self.tenant, tool=tool, limit=limit)

    def forget_evidence(self, *, tool: str | None = None, ids: list[int] | None = None) -> int:
        """Erase evidence: of one tool, the given rows, or (neither) all of the tenant's.
        Returns how many rows were deleted."""
        deleted = self.store.forget_evidence(self.tenant, tool=tool, ids=ids)
        self._evidence_changed()
        return deleted

    def prune_evidence(
        self, *, max_age_s: float | None = None, now: float | None = None
    ) -> dict[str, int]:
        """Drop evidence not seen for ``max_age_s`` (default: ``evidence_max_age_s``; 0
        keeps it), contradicted rows (failures caught up with their successes) and rows
        of removed tools (``now``: the OODA cycle's clock); returns how many of each."""
        age = self.settings.evidence_max_age_s if max_age_s is None else max_age_s
        cutoff = (time.time() if now is None else now) - age if age > 0 else None
        counts = self.store.prune_evidence(self.tenant, seen_before=cutoff)
        self._evidence_changed()
        return counts

    def _evidence_changed(self) -> None:
        selector: Any = getattr(self, "_selector", None)
        if selector is not None and selector.evidence is not None:
            selector.evidence.refresh(force=True)
