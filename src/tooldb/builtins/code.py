"""Code group: ``analyze_code`` reads Python files of the workspace (read only): their
functions and classes with sizes and cyclomatic complexity (McCabe: 1 + one per
decision point), imports, syntax errors, and ruff's findings when ruff is installed."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..decorators import tool
from ..errors import UsageError
from .common import confined, current_workspace, registry_settings, relative

GROUP = {"builtin": "code"}
MAX_FILES = 200
MAX_FINDINGS = 200
_DECISIONS = (
    ast.If, ast.For, ast.AsyncFor, ast.While, ast.IfExp, ast.ExceptHandler, ast.With,
    ast.AsyncWith, ast.Assert, ast.comprehension, ast.match_case,
)  # fmt: skip


def complexity(node: ast.AST) -> int:
    """McCabe's cyclomatic complexity of a function: 1, plus 1 per branch point (if,
    loop, except, with, assert, conditional expression, comprehension, match case), plus
    one per extra operand of ``and``/``or``; nested functions are counted on their own."""
    score = 1
    stack = list(ast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(child, _DECISIONS):
            score += 1
            if isinstance(child, ast.comprehension):
                score += len(child.ifs)
        elif isinstance(child, ast.BoolOp):
            score += len(child.values) - 1
        stack.extend(ast.iter_child_nodes(child))
    return score


def _definitions(tree: ast.Module) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    functions: list[dict[str, Any]] = []
    classes: list[dict[str, Any]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                functions.append({
                    "name": name, "line": child.lineno,
                    "lines": (child.end_lineno or child.lineno) - child.lineno + 1,
                    "complexity": complexity(child), "args": len(child.args.args),
                })  # fmt: skip
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                name = prefix + child.name
                methods = [c.name for c in child.body
                           if isinstance(c, ast.FunctionDef | ast.AsyncFunctionDef)]  # fmt: skip
                classes.append({
                    "name": name, "line": child.lineno,
                    "lines": (child.end_lineno or child.lineno) - child.lineno + 1,
                    "methods": methods,
                })  # fmt: skip
                visit(child, name + ".")

    visit(tree, "")
    return functions, classes


def _imports(tree: ast.Module) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append("." * node.level + (node.module or ""))
    return sorted(set(found))


def _ruff() -> str | None:
    beside = Path(sys.executable).with_name("ruff")
    return str(beside) if beside.is_file() else shutil.which("ruff")


def _lint(root: Path, files: list[Path]) -> list[dict[str, Any]] | None:
    """ruff's findings (``ruff check``, its default rules), or None without ruff."""
    ruff = _ruff()
    if ruff is None or not files:
        return None
    done = subprocess.run(
        [ruff, "check", "--no-cache", "--isolated", "--output-format", "json", "--",
         *(str(f) for f in files)],
        capture_output=True, timeout=60, cwd=root, check=False,
    )  # fmt: skip
    try:
        items = json.loads(done.stdout or b"[]")
    except ValueError:
        return None
    return [
        {
            "path": relative(root, Path(item["filename"]).resolve()),
            "line": item["location"]["row"],
            "code": item.get("code"),
            "message": item["message"],
        }
        for item in items[:MAX_FINDINGS]
    ]


@tool(category="code", metadata=GROUP, timeout_s=120)
def analyze_code(path: str = ".", lint: bool = True) -> dict[str, Any]:
    """Analyse Python source in the workspace: per file its functions and classes with
    their line counts and cyclomatic complexity, its imports, syntax errors, and lint
    findings from ruff (when installed). Use it to find complex or faulty code before
    changing it. Returns files, a summary and the findings.

    Args:
        path: A .py file or a folder (searched recursively), relative to the workspace root.
        lint: Also run ruff on the files.
    """
    root = current_workspace()
    target = confined(root, path)
    if target.is_file():
        if target.suffix != ".py":
            raise UsageError(f"'path' {path!r} is not a Python (.py) file")
        files = [target]
    elif target.is_dir():
        files = sorted(p for p in target.rglob("*.py") if ".git" not in p.parts)[: MAX_FILES + 1]
    else:
        raise UsageError(f"'path' {path!r} does not exist in the workspace")
    cap = registry_settings()[1].workspace_max_file_bytes
    report: list[dict[str, Any]] = []
    checked: list[Path] = []
    for file in files[:MAX_FILES]:
        real = file.resolve()
        if real != root and root not in real.parents:
            continue  # a symlink out of the workspace
        entry: dict[str, Any] = {"path": relative(root, real)}
        if real.stat().st_size > cap:
            entry["error"] = f"larger than {cap} bytes: skipped"
            report.append(entry)
            continue
        source = real.read_text(encoding="utf-8", errors="replace")
        entry["lines"] = len(source.splitlines())
        try:
            tree = ast.parse(source, filename=entry["path"])
        except SyntaxError as exc:
            entry["error"] = f"syntax error line {exc.lineno}: {exc.msg}"
            report.append(entry)
            continue
        entry["functions"], entry["classes"] = _definitions(tree)
        entry["imports"] = _imports(tree)
        report.append(entry)
        checked.append(real)
    functions = [f for entry in report for f in entry.get("functions", [])]
    findings = _lint(root, checked) if lint else None
    return {
        "files": report,
        "summary": {
            "files": len(report),
            "functions": len(functions),
            "max_complexity": max((f["complexity"] for f in functions), default=0),
            "lint_findings": None if findings is None else len(findings),
        },
        "lint": findings if findings is not None else "ruff is not installed" if lint else [],
        "truncated": len(files) > MAX_FILES,
    }
