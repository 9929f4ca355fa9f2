"""The no-model router on the Berkeley Function Calling Leaderboard (BFCL v4, single turn).

Every BFCL function is registered as a tool in a scratch registry (SQLite, the
``hash`` embedder unless ``--embedder``), the router is restricted to the entry's
(``Router(names=...)``) and its plan (no tool runs) is checked against the ground
truth with BFCL's AST rules: the function name, no parameter outside the schema,
every required one present, an omitted optional one allowed only where "" is among the
acceptable values, values compared by type (an int stands for a float; strings
lower-cased without spaces and ``,./-_*^`` as BFCL does; lists and dicts item by
item), any of the listed values accepted; parallel categories match calls in any order.
``irrelevance`` and ``live_irrelevance`` count a decline as right.

Entries are split into two halves by a hash of their id: the extraction rules were
developed looking at the ``dev`` half only; ``held`` is the other. ``--ablate`` turns
each planning technique off in turn. ``--model provider:model`` measures a model's
first turn on the same entries instead (one completion with the entry's tools offered,
its tool calls checked the same way).

``--cache DIR`` keeps each entry's offered tools (the selection step, most of a run's
time) on disk, keyed by what they depend on: the entry's query and functions, the
registered catalogue, the embedder and the source of every module outside
``tooldb/agents`` and ``tooldb/cli`` (selection, registry, stores, embedders); a change to
any of them misses the cache, and ``--no-cache`` computes everything afresh.

    python bench/bfcl.py [--half dev|held|all] [--ablate] [--limit N] [--model p:m]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tooldb
from bfcl_check import check_calls
from tooldb.agents.extraction import Options, Plan, plan_calls
from tooldb.agents.extraction.plan import Offered
from tooldb.agents.extraction.switches import ABLATED, TECHNIQUES
from tooldb.settings import Settings

DATA = Path("/work/shared/data/bfcl")
CATEGORIES = ["simple_python", "multiple", "parallel", "parallel_multiple", "live_simple",
              "live_multiple", "irrelevance", "live_irrelevance"]  # fmt: skip
DECLINE = {"irrelevance", "live_irrelevance"}


def half_of(entry_id: str) -> str:
    return "dev" if hashlib.sha1(entry_id.encode()).digest()[0] % 2 == 0 else "held"


def load(categories: list[str], half: str, limit: int | None) -> list[dict[str, Any]]:
    entries = []
    per: Counter[str] = Counter()
    with (DATA / "entries.jsonl").open() as handle:
        for line in handle:
            entry = json.loads(line)
            if entry["category"] not in categories:
                continue
            if half != "all" and half_of(entry["id"]) != half:
                continue
            if limit and per[entry["category"]] >= limit:
                continue
            per[entry["category"]] += 1
            entries.append(entry)
    return entries


def load_tools() -> dict[str, dict[str, Any]]:
    with (DATA / "tools.jsonl").open() as handle:
        return {t["id"]: t for t in map(json.loads, handle)}


def register(registry: tooldb.Registry, tools: dict[str, dict[str, Any]], ids: set[str]) -> int:
    """Register the functions as tools named by their id; a schema whose defaults do not
    fit it (a few in BFCL) is registered without those defaults. Returns how many."""
    done = 0
    for tool_id in sorted(ids):
        tool = tools[tool_id]
        parameters = tool["parameters"] or {"type": "object", "properties": {}}
        spec = {"name": tool_id, "description": tool["description"] or tool["name"],
                "target": "tooldb.examples.basic:word_count", "parameters": parameters}  # fmt: skip
        try:
            registry.add(spec)
        except Exception:
            for prop in (parameters.get("properties") or {}).values():
                if isinstance(prop, dict):
                    prop.pop("default", None)
            registry.add({**spec, "parameters": parameters})
        done += 1
    return done


def offered_tools(registry: tooldb.Registry, entry: dict[str, Any]) -> list[Offered]:
    """The entry's functions ranked by selection restricted to them, as ``Router.plan``
    offers them to the planner (computed once per entry, shared by the ablation runs)."""
    names = entry["function_ids"]
    selection = registry.select(entry["query"], len(names), names=names, record=False)
    specs = [registry.get(c.name).spec for c in selection.candidates]
    return [Offered(spec.name, spec.description, spec.parameters) for spec in specs]


def _digest(*parts: Any) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def selection_source() -> str:
    """A digest of the code selection runs (everything but the agents and the CLI)."""
    root = Path(tooldb.__file__).resolve().parent
    files = sorted(
        p for p in root.rglob("*.py") if p.relative_to(root).parts[0] not in ("agents", "cli")
    )
    return _digest([(str(p.relative_to(root)), p.read_text()) for p in files])


def cached_offered(
    entries: list[dict[str, Any]], tools: dict[str, dict[str, Any]], embedder: str,
    cache: Path | None,
) -> dict[str, list[Offered]]:  # fmt: skip
    """Every entry's offered tools, from ``cache`` where its key is there; the others
    selected in a scratch registry of the whole catalogue (and stored). The whole one, so
    that an entry is offered the same tools whatever the half, categories or limit run."""
    catalogue = sorted(tools)
    scope = _digest(selection_source(), embedder, [tools[fid] for fid in catalogue])
    path = cache / f"bfcl-offered-{scope[:16]}.json" if cache else None
    stored: dict[str, list[list[Any]]] = {}
    if path is not None and path.exists():
        stored = json.loads(path.read_text())
    keys = {e["id"]: _digest(e["query"], e["function_ids"]) for e in entries}
    todo = [e for e in entries if keys[e["id"]] not in stored]
    if todo:
        with tempfile_registry(embedder) as registry:
            register(registry, tools, set(catalogue))
            for entry in todo:
                offered = offered_tools(registry, entry)
                stored[keys[entry["id"]]] = [[o.name, o.description, o.parameters] for o in offered]
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(stored))
    return {e["id"]: [Offered(*row) for row in stored[keys[e["id"]]]] for e in entries}


def router_calls(
    offered: list[Offered], entry: dict[str, Any], options: Options, timings: list[float]
) -> tuple[list[dict[str, Any]], Plan]:
    """The router's plan for the entry, as BFCL calls ``[{name: {param: value}}]``."""
    started = time.perf_counter()
    plan = plan_calls(entry["query"], offered, options=options)
    timings.append((time.perf_counter() - started) * 1000)
    names = {fid: fid.rsplit("@", 1)[0] for fid in entry["function_ids"]}
    return [{names[c.tool]: c.arguments} for c in plan.calls], plan


def model_calls(
    model: Any, entry: dict[str, Any], tools: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """A model's first turn with the entry's functions offered (names made API-safe)."""
    from tooldb.background_loop import run_sync
    from tooldb.errors import ModelError
    from tooldb.models.base import Message, ToolChoice, ToolSchema

    safe = {}
    schemas = []
    for fid in entry["function_ids"]:
        tool = tools[fid]
        name = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in tool["name"])[:64]
        safe[name] = tool["name"]
        schemas.append(ToolSchema(name=name, description=tool["description"],
                                  parameters=tool["parameters"] or {"type": "object"}))  # fmt: skip
    try:
        turn = run_sync(model.complete([Message.user(entry["query"])], schemas, ToolChoice("auto")))
        return [
            {safe.get(c.name, c.name): json.loads(c.arguments or "{}")} for c in turn.tool_calls
        ]
    except (ModelError, ValueError) as exc:  # unreachable provider, bad JSON: a miss, said why
        print(f"model error on {entry['id']}: {exc}", file=sys.stderr)
        return []


def run(
    args: argparse.Namespace,
    entries: list[dict[str, Any]],
    offered: dict[str, list[Offered]],
    options: Options,
    label: str,
    model: Any = None,
) -> dict[str, Any]:
    tools = load_tools() if model is not None else {}
    results: dict[str, list[tuple[str, bool]]] = defaultdict(list)  # (half, right)
    reasons: dict[str, Counter[str]] = defaultdict(Counter)
    timings: list[float] = []
    for entry in entries:
        category = entry["category"]
        if model is not None:
            calls = model_calls(model, entry, tools)
        else:
            calls, _plan = router_calls(offered[entry["id"]], entry, options, timings)
        if category in DECLINE:
            ok, why = (not calls), "called a tool"
        else:
            ok, why = check_calls(calls, entry["ground_truth"], entry["functions"])
        results[category].append((half_of(entry["id"]), ok))
        if not ok:
            reasons[category][why] += 1
            if args.show_misses in (category, "all"):
                truth = json.dumps(entry["ground_truth"])[:300]
                print(f"MISS {entry['id']}: {why}\n  {entry['query'][:200]}\n"
                      f"  got {json.dumps(calls)[:300]}\n  gt  {truth}")  # fmt: skip
    return {"label": label, "results": results, "reasons": reasons, "timings": timings}


class tempfile_registry:
    def __init__(self, embedder: str) -> None:
        import tempfile

        self.directory = tempfile.TemporaryDirectory(prefix="tooldb-bfcl-")
        self.embedder = embedder

    def __enter__(self) -> tooldb.Registry:
        url = f"sqlite:///{self.directory.name}/registry.db"
        settings = Settings(embedder=self.embedder, url=url, record_decisions=False)
        self.registry = tooldb.open(url, settings=settings)
        return self.registry

    def __exit__(self, *exc: object) -> None:
        self.registry.close()
        self.directory.cleanup()


def percent(values: list[tuple[str, bool]], half: str | None = None) -> str:
    chosen = [ok for h, ok in values if half is None or h == half]
    return f"{100 * sum(chosen) / len(chosen):.1f}" if chosen else "-"


def count(values: list[tuple[str, bool]], half: str) -> int:
    return sum(1 for h, _ in values if h == half)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--half", choices=["dev", "held", "all"], default="all")
    parser.add_argument("--categories", nargs="+", default=CATEGORIES)
    parser.add_argument("--limit", type=int, default=None, help="at most N entries a category")
    parser.add_argument("--embedder", default="hash", help="hash (default) or local (MiniLM)")
    parser.add_argument("--model", default=None, help="provider:model: measure a model instead")
    parser.add_argument("--ablate", action="store_true", help="also run with each technique off")
    parser.add_argument("--show-misses", default=None, help="print misses of a category (or all)")
    parser.add_argument("--cache", default="~/.cache/tooldb-bench",
                        help="directory of the offered-tools cache")  # fmt: skip
    parser.add_argument("--no-cache", action="store_true", help="select every entry afresh")
    args = parser.parse_args()
    started = time.perf_counter()
    entries = load(args.categories, args.half, args.limit)
    model = None
    offered: dict[str, list[Offered]] = {}
    if args.model:
        from tooldb.models import load_model

        model = load_model(args.model, Settings())
    else:
        cache = None if args.no_cache else Path(args.cache).expanduser()
        offered = cached_offered(entries, load_tools(), args.embedder, cache)
    prepared = time.perf_counter() - started
    runs = [run(args, entries, offered, Options(), args.model or "router", model)]
    if args.ablate and not args.model:
        for switch in ("fit_gate", "several_tools", "several_calls"):
            off = Options(**{switch: False})
            runs.append(run(args, entries, offered, off, f"-{switch}"))
        for technique in TECHNIQUES:
            ABLATED.clear()
            ABLATED.add(technique)
            runs.append(run(args, entries, offered, Options(), f"-{technique}"))
        ABLATED.clear()
    main_run = runs[0]
    total = sum(len(v) for v in main_run["results"].values())
    print(f"BFCL v4, half={args.half}, embedder={args.embedder}, {total} entries; "
          "% right (irrelevance: % declined); rules developed on the dev half only")  # fmt: skip
    print("| category | dev n | dev % | held n | held % | all % |\n|---|---|---|---|---|---|")
    for category in args.categories:
        values = main_run["results"].get(category, [])
        dev, held = (f"{count(values, h)} | {percent(values, h)}" for h in ("dev", "held"))
        print(f"| {category} | {dev} | {held} | {percent(values)} |")
    if len(runs) > 1:
        print("\nablation (% right dev / held; each column one technique off):")
        print("| category | " + " | ".join(r["label"] for r in runs) + " |")
        print("|" + "---|" * (1 + len(runs)))
        for category in args.categories:
            cells = " | ".join(
                "/".join(percent(r["results"].get(category, []), h) for h in ("dev", "held"))
                for r in runs
            )
            print(f"| {category} | {cells} |")
    print(f"\nmain reasons for misses ({main_run['label']}):")
    for category in args.categories:
        common = main_run["reasons"][category].most_common(4)
        print(f"  {category}: " + "; ".join(f"{why} ({n})" for why, n in common))
    if main_run["timings"]:
        timings = main_run["timings"]
        p95 = sorted(timings)[int(0.95 * len(timings))]
        print(f"\nplanning (extraction) per task: p50 {statistics.median(timings):.2f} ms, "
              f"p95 {p95:.2f} ms over {len(timings)} tasks")  # fmt: skip
    print(f"total {time.perf_counter() - started:.0f} s ({prepared:.0f} s registering and "
          "selecting, or reading the cache; 2 cores, loaded by parallel work)")  # fmt: skip


if __name__ == "__main__":
    main()
