"""The package's shape, read from the code (docs/architecture.md): every module sits in a
layer, imports point down, no circle between packages, modules stay under 600 lines, and
``import tooldb`` leaves the interfaces and the providers' SDKs unloaded.

Imports are read with ``ast`` (nothing is imported). An import inside a function counts
like any other; one under ``if TYPE_CHECKING:`` does not (it never runs).
"""

from __future__ import annotations

import ast
import graphlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
MAX_LINES = 600

STAGES = (
    "decorators", "selection", "executors", "ooda", "provenance", "execution", "recording",
    "tools",
)  # fmt: skip
#: Bottom to top. A module may import its own layer and the layers below it, never above.
#: The longest matching prefix places a module: ``tooldb.mcp.server`` is an interface,
#: the rest of ``tooldb.mcp`` (the client) an adapter.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("types", "errors", "settings", "context", "background_loop")),
    ("adapters", ("binding", "stores", "embedders", "models", "mcp")),
    ("stages", STAGES),
    ("registry", ("registry", "openapi")),
    ("agents", ("agents", "builtins")),
    ("workers", ("workers",)),  # submitted runs on DBOS: above the loop it makes durable
    ("public API", ("", "examples", "packs")),  # "" is tooldb/__init__.py itself
    ("interfaces", ("cli", "mcp.server", "__main__", "server")),
    # The framework adapters use the Registry, like the interfaces (docs/integrations.md).
    ("integrations", ("integrations",)),
]


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int | None:
    """The index in LAYERS of ``module`` (``tooldb.x.y``), by its longest placed prefix."""
    inner = module.split(".")[1:]
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            parts = prefix.split(".") if prefix else []
            matches = inner[: len(parts)] == parts if parts else not inner
            if matches and (best is None or len(parts) > best[0]):
                best = (len(parts), index)
    return None if best is None else best[1]


def unit_of(module: str) -> str:
    """What circles are counted between: a top-level package or module of tooldb."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "tooldb"


def imports_of(path: Path, module: str) -> set[str]:
    """The tooldb modules ``path`` imports when it runs (type-checking imports left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for statement in block.body
        for node in ast.walk(statement)
    }
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            elif node.module:
                target = node.module
            else:
                continue
            if target.split(".")[0] != "tooldb":
                continue
            # `from . import x` names a submodule when x is one: count the submodule
            for alias in node.names:
                sub = target + "." + alias.name
                found.add(sub if _is_module(sub, path) else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "tooldb")
    return found


def _is_module(module: str, path: Path) -> bool:
    src = path
    while src.name != "tooldb":
        src = src.parent
    relative = Path(*module.split(".")[1:])
    return (src / relative).with_suffix(".py").exists() or (src / relative).is_dir()


def shape_problems(src: Path) -> list[str]:
    """Every breach of the rules in the tree under ``src`` (which holds ``tooldb/``)."""
    problems: list[str] = []
    graph: dict[str, set[str]] = {}
    for path in sorted((src / "tooldb").rglob("*.py")):
        module = module_name(path, src)
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and "migrations" not in path.parts:
            problems.append(f"{module} has {lines} lines (at most {MAX_LINES})")
        layer = layer_of(module)
        if layer is None:
            problems.append(f"{module} is in no layer: place it in LAYERS (docs/architecture.md)")
            continue
        for target in imports_of(path, module):
            target_layer = layer_of(target)
            if target_layer is not None and target_layer > layer:
                problems.append(
                    f"{module} ({LAYERS[layer][0]}) imports {target} ({LAYERS[target_layer][0]}):"
                    " a lower layer may not import a higher one; hand it what it needs instead"
                )
            if unit_of(target) != unit_of(module):
                graph.setdefault(unit_of(module), set()).add(unit_of(target))
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        problems.append(f"packages import each other in a circle: {' -> '.join(exc.args[1])}")
    return problems


def test_the_tree_keeps_its_shape() -> None:
    assert shape_problems(SRC) == []


def test_the_check_catches_an_executor_importing_agents(tmp_path: Path) -> None:
    shutil.copytree(SRC / "tooldb", tmp_path / "tooldb")
    agent = tmp_path / "tooldb" / "executors" / "agent.py"
    agent.write_text(
        agent.read_text() + "\n\ndef _runner():\n    from ..agents import RUNTIME\n\n"
        "    return RUNTIME\n"
    )
    problems = shape_problems(tmp_path)
    assert any("tooldb.executors.agent (stages) imports tooldb.agents" in p for p in problems)
    assert any("in a circle" in p and "agents" in p and "executors" in p for p in problems)


def test_the_check_catches_a_long_module_and_an_unplaced_one(tmp_path: Path) -> None:
    shutil.copytree(SRC / "tooldb", tmp_path / "tooldb")
    (tmp_path / "tooldb" / "stray.py").write_text("x = 1\n" * (MAX_LINES + 1))
    problems = shape_problems(tmp_path)
    assert "tooldb.stray has 601 lines (at most 600)" in problems
    assert any(p.startswith("tooldb.stray is in no layer") for p in problems)


@pytest.mark.parametrize(
    ("module", "layer"),
    [("tooldb.mcp.server", "interfaces"), ("tooldb.mcp.sessions", "adapters"),
     ("tooldb", "public API"), ("tooldb.selection.ann", "stages"), ("tooldb.types", "core")],
)  # fmt: skip
def test_the_longest_prefix_places_a_module(module: str, layer: str) -> None:
    index = layer_of(module)
    assert index is not None and LAYERS[index][0] == layer


#: The agent frameworks tooldb.integrations adapts (their top-level modules).
FRAMEWORKS = ("langchain_core", "langgraph", "agents", "pydantic_ai")


def test_a_bare_import_leaves_the_interfaces_and_the_sdks_unloaded() -> None:
    script = (
        f"import sys, tooldb\nFRAMEWORKS = {FRAMEWORKS!r}\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'tooldb', 'mcp', 'openai', 'anthropic', 'typer', 'rich', 'neo4j', 'dbos', *FRAMEWORKS})))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "tooldb.registry" in loaded  # the probe sees tooldb's modules at all
    forbidden = [
        m
        for m in loaded
        if m.startswith(
            (
                "tooldb.cli",
                "tooldb.mcp",
                "tooldb.openapi",
                "tooldb.integrations",
                "tooldb.workers.worker",
            )
        )
        or m.split(".")[0]
        in {"mcp", "openai", "anthropic", "typer", "rich", "neo4j", "dbos", *FRAMEWORKS}
    ]
    assert forbidden == []
