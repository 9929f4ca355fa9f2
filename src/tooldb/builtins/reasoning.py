"""Reasoning group: structured reasoning strategies on the registry's configured model
(the ``model`` setting), each model request a recorded sub-run of the calling run (its
messages and token use in ``tooldb runs``; ``tooldb trace`` shows them as children):

* ``chain_of_thought``: one request that reasons step by step, then answers;
* ``self_consistency``: n independent chains, the majority answer and its agreement
  (Wang et al. 2022);
* ``tree_of_thought``: a breadth-limited search over candidate thoughts, each level
  scored by the model, the best path answered (Yao et al. 2023);
* ``reflexion``: draft, critique, revise (Shinn et al. 2023), until the critique finds
  no problem or the rounds run out.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..context import current_context
from ..decorators import tool
from ..errors import ExecutionError, UsageError
from .common import registry_settings

GROUP = {"builtin": "reasoning"}
MAX_QUESTION_CHARS = 20_000
_ANSWER = re.compile(r"^\s*(?:final\s+)?answer\s*[:\-]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_SCORE = re.compile(r"^\s*(\d+)\s*[:.)-]\s*(\d+(?:\.\d+)?)", re.MULTILINE)
COT = (
    "Reason step by step about the question, briefly. Then give the final answer on a "
    "last line of its own that starts with 'Answer:'."
)


@dataclass
class _Session:
    """The sub-runs of one reasoning call: their ids and token use."""

    registry: Any
    model: Any
    runs: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0

    async def ask(self, instructions: str, prompt: str) -> str:
        from ..agents.limits import Limits
        from ..agents.loop import AgentLoop

        loop = AgentLoop(
            self.registry, self.model, instructions=instructions, tools=[],
            limits=Limits(max_iterations=1, max_tool_calls=1,
                          timeout_s=self.registry.settings.agent_timeout_s),
        )  # fmt: skip
        result = await loop.arun(prompt, parent=current_context())
        self.runs.append(result.run_id)
        self.input_tokens += result.input_tokens
        self.output_tokens += result.output_tokens
        if not result.success or not result.output.strip():
            why = result.error or result.review_reason or result.status.value
            raise ExecutionError(f"the reasoning sub-run {result.run_id} failed: {why}")
        return result.output

    def report(self, **values: Any) -> dict[str, Any]:
        return {
            **values,
            "sub_runs": self.runs,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


def _session() -> _Session:
    from ..models import load_model

    registry, settings = registry_settings()
    if not settings.model:
        raise ExecutionError(
            "reasoning tools run on the registry's model, and none is configured: set "
            'the model setting (e.g. model = "openai:gpt-4o-mini" in config.toml or '
            "TOOLDB_MODEL)"
        )
    return _Session(registry, load_model(settings.model, settings))


def _question(text: str, name: str = "question") -> str:
    if not isinstance(text, str) or not text.strip():
        raise UsageError(f"'{name}' must be a non-empty string")
    if len(text) > MAX_QUESTION_CHARS:
        raise UsageError(f"'{name}' must be at most {MAX_QUESTION_CHARS} characters")
    return text.strip()


def answer_of(text: str) -> str:
    """The text after the last 'Answer:' line, else the last non-empty line."""
    found = _ANSWER.findall(text)
    if found:
        return str(found[-1]).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _normal(answer: str) -> str:
    return " ".join(answer.lower().strip(" .!\"'`*").split())


@tool(category="reasoning", metadata=GROUP, timeout_s=1800)
async def chain_of_thought(question: str, context: str = "") -> dict[str, Any]:
    """Think a question through step by step with the model before answering: use it for
    problems that need several steps of reasoning (arithmetic, logic, planning).
    Returns the reasoning, the final answer and the sub-run with its token use.

    Args:
        question: The question or problem, self-contained.
        context: Facts the reasoning should use.
    """
    session = _session()
    prompt = _question(question) + (f"\n\nContext:\n{context}" if context else "")
    text = await session.ask(COT, prompt)
    return session.report(answer=answer_of(text), reasoning=text)


@tool(category="reasoning", metadata=GROUP, timeout_s=1800)
async def self_consistency(question: str, n: int = 5) -> dict[str, Any]:
    """Answer a question n times independently (chains of thought) and return the
    majority answer with its agreement: use it when one answer might be a fluke and a
    vote makes it more reliable. Returns answer, agreement (0 to 1) and all answers.

    Args:
        question: The question, self-contained, with one short answer expected.
        n: How many independent samples (2 to 15).
    """
    if not 2 <= n <= 15:
        raise UsageError(f"'n' must be from 2 to 15, got {n}")
    session = _session()
    prompt = _question(question)
    texts = await asyncio.gather(*(session.ask(COT, prompt) for _ in range(n)))
    answers = [answer_of(text) for text in texts]
    votes = Counter(_normal(a) for a in answers if a)
    if not votes:
        raise ExecutionError("no sample gave an answer")
    winner, count = votes.most_common(1)[0]
    shown = next(a for a in answers if _normal(a) == winner)
    return session.report(answer=shown, agreement=round(count / n, 3), answers=answers)


@tool(category="reasoning", metadata=GROUP, timeout_s=1800)
async def tree_of_thought(
    question: str, breadth: int = 3, depth: int = 2, keep: int = 2
) -> dict[str, Any]:
    """Search over alternative lines of reasoning: at each level the model proposes
    `breadth` next thoughts per kept path, scores them, and the best `keep` paths go on;
    the best path is then answered. Use it for puzzles and plans where the first idea
    is often wrong. Returns the answer, the chosen path and the scores.

    Args:
        question: The problem, self-contained.
        breadth: Candidate thoughts proposed per path and level (2 to 5).
        depth: Levels of thoughts (1 to 4).
        keep: Paths kept per level (1 to 3).
    """
    for name, value, top in (("breadth", breadth, 5), ("depth", depth, 4), ("keep", keep, 3)):
        low = 2 if name == "breadth" else 1
        if not low <= value <= top:
            raise UsageError(f"'{name}' must be from {low} to {top}, got {value}")
    session = _session()
    problem = _question(question)
    frontier: list[tuple[float, list[str]]] = [(0.0, [])]
    for _level in range(depth):
        scored: list[tuple[float, list[str]]] = []
        for _, path in frontier:
            so_far = "\n".join(f"{i}. {t}" for i, t in enumerate(path, 1)) or "(none yet)"
            proposal = await session.ask(
                f"Propose exactly {breadth} different next reasoning steps, one per line, "
                "numbered 1., 2., ... Each is one short thought; no answer yet.",
                f"Problem:\n{problem}\n\nSteps so far:\n{so_far}",
            )
            thoughts = _numbered(proposal)[:breadth]
            if not thoughts:
                continue
            listing = "\n".join(f"{i}. {t}" for i, t in enumerate(thoughts, 1))
            rating = await session.ask(
                "Rate how promising each candidate next step is for solving the problem, "
                "from 1 (useless) to 10 (certainly right). One line per candidate: "
                "'NUMBER: SCORE'.",
                f"Problem:\n{problem}\n\nSteps so far:\n{so_far}\n\nCandidates:\n{listing}",
            )
            scores = {int(i): float(s) for i, s in _SCORE.findall(rating)}
            for i, thought in enumerate(thoughts, 1):
                scored.append((scores.get(i, 0.0), [*path, thought]))
        if not scored:
            break
        scored.sort(key=lambda item: -item[0])
        frontier = scored[:keep]
    best_score, best_path = frontier[0]
    steps = "\n".join(f"{i}. {t}" for i, t in enumerate(best_path, 1))
    final = await session.ask(COT, f"Problem:\n{problem}\n\nUse these steps:\n{steps}")
    return session.report(
        answer=answer_of(final), path=best_path, score=best_score,
        kept=[{"score": s, "path": p} for s, p in frontier],
    )  # fmt: skip


def _numbered(text: str) -> list[str]:
    lines = [re.sub(r"^\s*(?:\d+[.)]|[-*])\s*", "", line).strip() for line in text.splitlines()]
    return [line for line in lines if line]


@tool(category="reasoning", metadata=GROUP, timeout_s=1800)
async def reflexion(task: str, rounds: int = 2) -> dict[str, Any]:
    """Write an answer, have the model critique it, and revise it, for up to `rounds`
    rounds (stopping once the critique finds nothing to fix): use it for writing or code
    where a second look catches mistakes. Returns the final answer, the drafts and the
    critiques.

    Args:
        task: What to write or solve, self-contained.
        rounds: Critique-and-revise rounds at most (1 to 4).
    """
    if not 1 <= rounds <= 4:
        raise UsageError(f"'rounds' must be from 1 to 4, got {rounds}")
    session = _session()
    problem = _question(task, "task")
    draft = await session.ask("Do the task well and completely.", problem)
    drafts, critiques = [draft], []
    for _ in range(rounds):
        critique = await session.ask(
            "Critique the answer to the task: list concrete mistakes and omissions. If it "
            "needs no change, reply exactly NO ISSUES.",
            f"Task:\n{problem}\n\nAnswer:\n{draft}",
        )
        critiques.append(critique)
        if critique.strip().upper().startswith("NO ISSUES"):
            break
        draft = await session.ask(
            "Revise the answer to fix every point of the critique. Reply with the revised "
            "answer only.",
            f"Task:\n{problem}\n\nAnswer:\n{draft}\n\nCritique:\n{critique}",
        )
        drafts.append(draft)
    return session.report(answer=draft, drafts=drafts, critiques=critiques)
