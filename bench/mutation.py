"""Mutation testing of the modules that carry promises (docs/testing.md): which of the
small bugs mutmut plants in them does the test suite catch?

Each module group runs on its own copy of ``src/`` and ``tests/`` (a scratch directory,
so the working tree is never touched) with mutmut 3 configured for that group only:
``only_mutate`` is the group's files, and pytest runs only the group's test files (on
SQLite: ``-k "not postgres"``, since both stores share the SQL code and PostgreSQL
doubles the time). mutmut then runs, for each mutant, only the tests that call the
mutated function. Prints the score per group and every surviving mutant's diff, minus
the survivors accepted in ``mutation_accepted.toml`` (equivalent mutants, each with its
reason, also listed in docs/testing.md).

    .venv/bin/python bench/mutation.py                     # every group (see --list)
    .venv/bin/python bench/mutation.py access http_guard   # chosen groups
    .venv/bin/python bench/mutation.py --list
    .venv/bin/python bench/mutation.py optimize --keep     # keep the scratch directory
                                                           # (then `mutmut show NAME` there)
    .venv/bin/python bench/mutation.py --rescore DIR       # score a kept directory again
                                                           # (after `mutmut run NAME...`)

Not part of .ci/run (too slow). Run it before closing an issue that touches one of these
modules and quote the score in the closing note.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Each group: the files mutated and the test files that hold their promises.
GROUPS: dict[str, tuple[list[str], list[str]]] = {
    "binding": (
        ["src/tooldb/binding/binder.py", "src/tooldb/binding/flat.py"],
        ["tests/test_binding.py", "tests/test_flat_schema.py", "tests/test_binding_messages.py"],
    ),
    "recording": (
        ["src/tooldb/recording.py"],
        ["tests/test_record_calls.py", "tests/test_agent_loop.py", "tests/test_execution.py"],
    ),
    "calls": (
        ["src/tooldb/registry/calls.py", "src/tooldb/execution.py"],
        ["tests/test_execution.py", "tests/test_registry.py", "tests/test_call_results.py"],
    ),
    "http_guard": (
        ["src/tooldb/executors/http_guard.py"],
        ["tests/test_http_tools.py", "tests/test_http_guard.py"],
    ),
    "access": (["src/tooldb/agents/access.py"], ["tests/test_skills.py"]),
    "tenant_filters": (
        ["src/tooldb/stores/provenance_rows.py", "src/tooldb/stores/agent_rows.py"],
        [
            "tests/test_provenance.py",
            "tests/test_stores.py",
            "tests/test_cli_agents.py",
            "tests/test_store_run_rows.py",
            "tests/test_store_catalog_rows.py",
            "tests/test_skills.py",
            "tests/test_run_stats.py",
        ],
    ),
    "ranking": (
        ["src/tooldb/selection/select.py"],
        [
            "tests/test_selection.py",
            "tests/test_selection_ranking.py",
            "tests/test_selection_cache.py",  # the remembered pools and vectors
        ],
    ),
    "hypothesise": (
        ["src/tooldb/ooda/hypothesise.py", "src/tooldb/ooda/significance.py"],
        ["tests/test_ooda.py", "tests/test_significance.py"],
    ),
    "optimize": (
        ["src/tooldb/ooda/optimize.py"],
        ["tests/test_ooda.py", "tests/test_ooda_policy.py"],
    ),
    "limits": (
        ["src/tooldb/agents/limits.py", "src/tooldb/agents/loop.py"],
        [
            "tests/test_agent_loop.py",
            "tests/test_agent_limits.py",
            "tests/test_skills.py",  # the access check
            "tests/test_agent_protocol.py",  # the tool choice the loop enforces
            "tests/test_slow_calls.py",  # a run's slow-call warnings (the run log's settings)
        ],
    ),
    # boundaries added by issue 20 (hardening) and issue 28
    "sql_tenancy": (
        ["src/tooldb/executors/sql_tenancy.py", "src/tooldb/stores/tenant_scope.py"],
        [
            "tests/security/test_sql_tenant_isolation.py",
            "tests/security/test_sql_least_privilege.py",
        ],
    ),
    "sandbox_policy": (
        ["src/tooldb/executors/bwrap.py", "src/tooldb/executors/script_java.py"],
        [
            "tests/test_script_tools.py",
            "tests/security/test_script_sandbox.py",
            "tests/test_script_java.py",
        ],
    ),
    "mcp_guard": (
        ["src/tooldb/executors/mcp_guard.py"],
        ["tests/security/test_mcp_http_hosts.py", "tests/security/test_mcp_imports_and_sizes.py"],
    ),
    "runtime_context": (
        ["src/tooldb/binding/runtime.py"],
        ["tests/test_runtime_context.py", "tests/test_binding.py"],
    ),
    "catalog_integrity": (
        ["src/tooldb/registry/catalog.py", "src/tooldb/ooda/leader.py"],
        [
            "tests/test_catalog_lifecycle.py",
            "tests/test_skill_assignments.py",
            "tests/test_run_stats.py",
            "tests/test_ooda_schedule.py",
        ],
    ),
}

#: Survivors accepted as equivalent, from mutation_accepted.toml: (file, the mutated line
#: as mutmut writes it, stripped) -> why no test can tell it from the original.
ACCEPTED: dict[tuple[str, str], str] = {
    (f"src/tooldb/{entry['file']}", line): entry["why"]
    for entry in tomllib.loads((ROOT / "bench" / "mutation_accepted.toml").read_text())["accepted"]
    for line in entry["lines"]
}

PYTEST_ARGS = ["-p", "no:cacheprovider", "-x", "-q", "-k", "not postgres"]


@dataclass
class Score:
    group: str
    counts: dict[str, int] = field(default_factory=dict)
    survivors: list[tuple[str, str, str]] = field(default_factory=list)  # name, file, diff
    accepted: list[tuple[str, str, str]] = field(default_factory=list)  # name, line, why
    seconds: float = 0.0
    #: mutants mutmut found no test for, run on the group's tests by ``run_explicitly``
    explicit: int = 0

    @property
    def killed(self) -> int:
        return self.counts.get("killed", 0) + self.counts.get("timeout", 0)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def not_run(self) -> int:
        """Mutants a stopped run left unchecked (a partial run scores the others)."""
        return self.counts.get("not checked", 0)

    @property
    def scored(self) -> int:
        """Mutants that count: all but the accepted equivalents, skipped and unrun ones."""
        return self.total - len(self.accepted) - self.counts.get("skipped", 0) - self.not_run

    @property
    def percent(self) -> float:
        return 100.0 * self.killed / self.scored if self.scored else 100.0


def mutmut_config(files: list[str], tests: list[str]) -> str:
    def toml_list(items: list[str]) -> str:
        return "[" + ", ".join(json.dumps(item) for item in items) + "]"

    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["src"]\n'
        f"only_mutate = {toml_list(files)}\n"
        f"pytest_add_cli_args_test_selection = {toml_list(tests)}\n"
        f"pytest_add_cli_args = {toml_list(PYTEST_ARGS)}\n"
        'also_copy = ["examples/"]\n'
        "use_git_change_detection = false\n"
    )


def prepare(work: Path, files: list[str], tests: list[str]) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    shutil.copytree(ROOT / "src", work / "src", ignore=ignore)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
    shutil.copytree(ROOT / "examples", work / "examples", ignore=ignore)  # tests read them
    pyproject = (ROOT / "pyproject.toml").read_text()
    (work / "pyproject.toml").write_text(pyproject + mutmut_config(files, tests))


def mutmut(work: Path, *args: str, check: bool = True) -> str:
    binary = Path(sys.executable).with_name("mutmut")
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run(
        [str(binary), *args], cwd=work, env=env, capture_output=True, text=True, check=False
    )
    if check and done.returncode != 0:
        raise SystemExit(f"mutmut {' '.join(args)} failed:\n{done.stdout[-3000:]}{done.stderr}")
    return done.stdout


def run_group(name: str, work: Path, children: int) -> Score:
    files, tests = GROUPS[name]
    prepare(work, files, tests)
    started = time.perf_counter()
    ran = mutmut(work, "run", "--max-children", str(children), check=False)
    if "failed to collect stats" in ran or "not checked" in mutmut(work, "results"):
        raise SystemExit(f"mutmut could not run the tests of {name}:\n{ran[-3000:]}")
    untested = [
        line.split(":")[0].strip()
        for line in mutmut(work, "results").splitlines()
        if line.rstrip().endswith(": no tests")
    ]
    if untested:
        print(f"   {len(untested)} mutants with no tests: running the group's tests on each",
              flush=True)  # fmt: skip
        run_explicitly(work, tests, untested, children)
    return collect(name, work, time.perf_counter() - started)


def run_explicitly(work: Path, tests: list[str], mutants: list[str], children: int) -> None:
    """Run the group's tests on each mutant mutmut found no test for, and keep the
    outcome in ``explicit.json`` (``collect`` reads it). mutmut picks a mutant's tests
    by tracing which tests called the mutated function while it collected its stats; a
    function that no traced test reached is left untested, whatever the reason (code
    run only in a forked worker, or first reached from a cached object), so here every
    test of the group gets the chance to catch it."""
    mutated = work / "mutants"
    base = {**os.environ, "PYTHONPATH": f"{mutated / 'src'}{os.pathsep}{mutated}"}
    command = [sys.executable, "-m", "pytest", *PYTEST_ARGS, "-p", "no:randomly", *tests]

    def outcome(mutant: str) -> tuple[str, str]:
        try:
            done = subprocess.run(
                command, cwd=mutated, env={**base, "MUTANT_UNDER_TEST": mutant},
                capture_output=True, timeout=900, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return mutant, "timeout"
        return mutant, {0: "survived", 1: "killed"}.get(done.returncode, "suspicious")

    with ThreadPoolExecutor(max(1, children)) as pool:
        found = dict(pool.map(outcome, mutants))
    (work / "explicit.json").write_text(json.dumps(found, indent=1))


def collect(name: str, work: Path, seconds: float = 0.0) -> Score:
    """The score of a group's scratch copy, as mutmut last left it (``--rescore``: after
    re-running chosen mutants there)."""
    files, _ = GROUPS[name]
    score = Score(name, seconds=seconds)
    explicit_file = work / "explicit.json"
    explicit = json.loads(explicit_file.read_text()) if explicit_file.exists() else {}
    for line in mutmut(work, "results", "--all", "true").splitlines():
        match = re.match(r"\s*(\S+): (.+?)\s*$", line)
        if not match:
            continue
        mutant, status = match.groups()
        if status == "no tests" and mutant in explicit:
            status = explicit[mutant]
            score.explicit += 1
        score.counts[status] = score.counts.get(status, 0) + 1
        if status in ("killed", "timeout", "skipped", "not checked"):
            continue
        diff = mutmut(work, "show", mutant, check=False)
        file = next((f for f in files if f"--- {f}" in diff), "?")
        key = _mutated_line(diff)
        why = ACCEPTED.get((file, key)) if key is not None else None
        if why is not None and status == "survived":
            score.accepted.append((mutant, key, why))
        else:
            score.survivors.append((f"{mutant} ({status})", file, diff))
    return score


def _mutated_line(diff: str) -> str | None:
    """The one line a mutant writes (stripped), or ``del: LINE`` for one it deletes."""
    lines = diff.splitlines()
    added = [line[1:].strip() for line in lines if line.startswith("+") and line[:3] != "+++"]
    removed = [line[1:].strip() for line in lines if line.startswith("-") and line[:3] != "---"]
    if len(added) == 1:
        return added[0]
    return f"del: {removed[0]}" if not added and len(removed) == 1 else None


def report(scores: list[Score]) -> None:
    print("\n| group | mutants | killed | accepted equivalent | survived | score | time |")
    print("|---|---|---|---|---|---|---|")
    for s in scores:
        print(
            f"| {s.group} | {s.total} | {s.killed} | {len(s.accepted)} | {len(s.survivors)} "
            f"| {s.percent:.1f}% | {s.seconds / 60:.1f} min |"
        )
    for s in scores:
        if s.not_run:
            print(f"\n{s.group}: a partial run, {s.not_run} of {s.total} mutants not run "
                  "(the score is of those run)")  # fmt: skip
    for s in scores:
        if s.explicit:
            print(f"\n{s.group}: {s.explicit} mutants mutmut found no test for were run on "
                  "the group's tests explicitly (counted above)")  # fmt: skip
    for s in scores:
        if not s.survivors:
            continue
        print(f"\n## {s.group}: {len(s.survivors)} surviving mutants\n")
        for mutant, _, diff in s.survivors:
            body = [
                line
                for line in diff.splitlines()
                if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))
            ]
            print(f"{mutant}\n    " + "\n    ".join(body))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("groups", nargs="*", help="groups to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the groups and exit")
    parser.add_argument("--children", type=int, default=2, help="mutants run in parallel")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directories")
    parser.add_argument("--json", type=Path, help="also write the scores to this file")
    parser.add_argument(
        "--rescore", type=Path, metavar="DIR",
        help="score the groups kept in DIR (by --keep) as they are now, without running",
    )  # fmt: skip
    args = parser.parse_args()
    if args.list:
        for name, (files, tests) in GROUPS.items():
            print(f"{name}: {' '.join(files)}\n    tests: {' '.join(tests)}")
        return
    unknown = [g for g in args.groups if g not in GROUPS]
    if unknown:
        parser.error(f"unknown groups {unknown}: choose from {sorted(GROUPS)}")
    if args.rescore is not None:
        kept = [g for g in args.groups or list(GROUPS) if (args.rescore / g / "mutants").is_dir()]
        report([collect(name, args.rescore / name) for name in kept])
        return
    scores = []
    scratch = Path(tempfile.mkdtemp(prefix="tooldb-mutation-"))
    try:
        for name in args.groups or list(GROUPS):
            print(f"== {name}", flush=True)
            score = run_group(name, scratch / name, args.children)
            print(f"   {score.killed}/{score.scored} killed ({score.percent:.1f}%), "
                  f"{score.seconds:.0f} s", flush=True)  # fmt: skip
            scores.append(score)
    finally:
        if args.keep:
            print(f"scratch directories kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    report(scores)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    s.group: {
                        "counts": s.counts, "score": round(s.percent, 1),
                        "survivors": [m for m, _, _ in s.survivors],
                        "accepted": [{"mutant": m, "line": t, "why": w} for m, t, w in s.accepted],
                    }
                    for s in scores
                },
                indent=2,
            )
        )  # fmt: skip


if __name__ == "__main__":
    main()
