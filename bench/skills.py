"""Skill selection at 500 skills: is the right skill found, how fast, and what the agent's
skill index saves in prompt tokens.

The skills are written from public tool data sets (../shared/data), grouping related
tools as a skill author would: a ToolBench API family (``tool_name``, e.g. one
weather service's endpoints) or a Seal-Tools field (e.g. ``Science/Geology``) becomes
one skill, its description written from the grouped tools' names and descriptions,
its instructions listing the tools. A query whose relevant tools all sit in one skill
has that skill as its right answer. Half the skills come from each source; the
queries are a fixed-seed sample of those with a right skill among the 500.

Reported per embedder (the bundled MiniLM, the hash embedder, none = BM25 only):
recall@1 and recall@5 of the right skill through ``Registry.select_skills``, its p50
and p95 latency (warm: vectors cached; the store read included), the first selection of
a registry (which embeds every skill) and of a second registry on the same store (a new
process: it loads the stored vectors), and the prompt an
agent holding all 500 skills starts with: every skill listed (``skill_index_k`` above
500) against the top-12 index plus ``search_skills``; tokens counted approximately as
len(text) / 4 over the system prompt and the JSON of the tool schemas.

    .venv/bin/python bench/skills.py                    # local, hash and none
    .venv/bin/python bench/skills.py --embedders hash --queries 100
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import tooldb  # noqa: E402
from _support import temporary_database  # noqa: E402
from tooldb import Settings  # noqa: E402
from tooldb.agents import AgentLoop  # noqa: E402
from tooldb.models import ScriptedModel  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
SEED = 28
SKILLS_PER_SOURCE = 250
DESCRIPTION_CHARS = 300


def _read(path: Path) -> list[dict[str, Any]]:
    with path.open() as lines:
        return [json.loads(line) for line in lines]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "skill"


def _skill(name: str, title: str, tools: list[dict[str, Any]], label: str) -> dict[str, Any]:
    """A skill as an author would write it from its tools."""
    names = [tool[label] for tool in tools]
    summary = "; ".join(
        dict.fromkeys(t["description"].strip().rstrip(".") for t in tools if t["description"])
    )
    description = f"{title}: {', '.join(names)}. {summary}"[:DESCRIPTION_CHARS].strip()
    listing = "\n".join(f"- `{tool[label]}`: {tool['description'].strip()}" for tool in tools)
    instructions = f"# {title}\nUse these tools for {title.lower()} tasks:\n{listing}\n"
    return {"name": name, "description": description, "instructions": instructions}


def _grouped(
    source: str, group_of: str, label: str, title: str
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str]]]:
    """Skills (groups of at least two tools) of one data set, and (query, right skill)
    for the queries whose relevant tools all belong to one of them."""
    tools = _read(DATA / source / "tools.jsonl")
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for tool in tools:
        groups[tool[group_of]].append(tool)
    skill_of_group = {group: f"{source[:4]}-{_slug(group)}" for group in groups}
    skills = {
        skill_of_group[group]: _skill(
            skill_of_group[group], title.format(group=group, tool=members[0]), members, label
        )
        for group, members in groups.items()
        if len(members) >= 2
    }
    group_of_tool = {tool["id"]: tool[group_of] for tool in tools}
    queries = []
    for query in _read(DATA / source / "queries.jsonl"):
        owners = {group_of_tool[r] for r in query["relevant"] if r in group_of_tool}
        if len(owners) == 1 and skill_of_group[owners.pop()] in skills:
            queries.append((query["query"], skill_of_group[group_of_tool[query["relevant"][0]]]))
    return skills, queries


def catalogue(queries_per_source: int) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """500 skills and a sample of queries with their right skill (fixed seed)."""
    rng = random.Random(SEED)
    sources = [
        _grouped("toolbench", "tool_name", "api_name", "{group} API ({tool[category]})"),
        _grouped("sealtools", "field", "name", "{group}"),
    ]
    skills: list[dict[str, Any]] = []
    asked: list[tuple[str, str]] = []
    for found, queries in sources:
        with_queries = sorted({skill for _, skill in queries})
        rng.shuffle(with_queries)
        chosen = with_queries[: SKILLS_PER_SOURCE * 3 // 5]  # most with queries, some without
        rest = sorted(set(found) - set(chosen))
        rng.shuffle(rest)
        chosen += rest[: SKILLS_PER_SOURCE - len(chosen)]
        skills += [found[name] for name in sorted(chosen)]
        kept = [pair for pair in queries if pair[1] in set(chosen)]
        asked += rng.sample(kept, min(queries_per_source, len(kept)))
    return skills, asked


def measure(embedder: str, skills: list[dict[str, Any]], queries: list[tuple[str, str]]) -> dict:
    with temporary_database("sqlite") as url:
        settings = Settings(url=url, embedder=embedder, record_decisions=False)
        with tooldb.open(url, settings=settings) as registry:
            registry.init()
            for skill in skills:
                registry.add_skill(skill)
            started = time.perf_counter()
            registry.select_skills("warm up: embed every skill", 5)
            first_ms = (time.perf_counter() - started) * 1000
            hits1 = hits5 = 0
            times = []
            for query, right in queries:
                started = time.perf_counter()
                names = registry.select_skills(query, 5).names
                times.append((time.perf_counter() - started) * 1000)
                hits1 += names[:1] == [right]
                hits5 += right in names
            tokens = prompt_tokens(registry, [skill["name"] for skill in skills], queries[0][0])
        with tooldb.open(url, settings=settings) as again:  # a new process's registry
            started = time.perf_counter()
            again.select_skills("warm up: the stored vectors are loaded", 5)
            reopened_ms = (time.perf_counter() - started) * 1000
    times.sort()
    return {
        "embedder": embedder,
        "skills": len(skills),
        "queries": len(queries),
        "recall@1": 100 * hits1 / len(queries),
        "recall@5": 100 * hits5 / len(queries),
        "p50_ms": statistics.median(times),
        "p95_ms": times[int(0.95 * (len(times) - 1))],
        "first_ms": first_ms,
        "reopened_ms": reopened_ms,
        **tokens,
    }


def prompt_tokens(registry: Any, names: list[str], task: str) -> dict[str, int]:
    """The opening prompt (system text + tool schemas, ~len/4 tokens) of an agent holding
    every skill: listing them all, then with the default top-12 index."""
    out = {}
    for label, limit in (("tokens_all", len(names)), ("tokens_index", 12)):
        registry.settings = replace(registry.settings, skill_index_k=limit)
        model = ScriptedModel(["done"])
        AgentLoop(registry, model, skills=names).run(task)
        messages, tools, _ = model.requests[0]
        system = messages[0].content
        schemas = json.dumps([tool.model_dump() for tool in tools])
        out[label] = (len(system) + len(schemas)) // 4
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedders", nargs="+", default=["local", "hash", "none"])
    parser.add_argument("--queries", type=int, default=150, help="per source data set")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    skills, queries = catalogue(args.queries)
    rows = [measure(embedder, skills, queries) for embedder in args.embedders]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{len(skills)} skills, {len(queries)} queries (seed {SEED}); tokens ~ len(text)/4")
    print("| embedder | R@1 | R@5 | select_skills p50 ms | p95 ms | first select ms "
          "| first select, reopened ms | prompt tokens, all listed "
          "| prompt tokens, top-12 index |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['embedder']} | {row['recall@1']:.1f} | {row['recall@5']:.1f} "
            f"| {row['p50_ms']:.2f} | {row['p95_ms']:.2f} | {row['first_ms']:,.0f} "
            f"| {row['reopened_ms']:,.0f} "
            f"| {row['tokens_all']:,} | {row['tokens_index']:,} |"
        )


if __name__ == "__main__":
    main()
