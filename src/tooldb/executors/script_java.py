"""Java script tools: one source file run by the JDK's source launcher (``java
Tool.java``, JEP 330) in the same sandbox as Python and JavaScript scripts.

The contract is the other languages': the arguments arrive as one JSON object on
stdin, the result leaves as JSON on stdout (its last line will do). The JVM gets a heap
of half the tool's ``memory_mb`` (the rest is its code, metaspace and threads, all
under the sandbox's data limit) and the serial collector, so one call is one small
process rather than a pool of GC threads.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ..errors import DefinitionError
from ..types import ToolSpec

NO_JDK = (
    "no JDK is installed (java and javac not on PATH): "
    "on Debian, apt-get install default-jdk-headless"
)


_PUBLIC_CLASS = re.compile(
    r"^\s*public\s+(?:(?:final|abstract|sealed)\s+)*(?:class|record|interface|enum)\s+(\w+)",
    re.M,
)


def java_binary() -> str | None:
    """``java`` on PATH, resolved to its real file (a Debian alternatives link points
    into /usr/lib/jvm, which the sandbox shows)."""
    found = shutil.which("java")
    return os.path.realpath(found) if found else None


def check_java(spec: ToolSpec) -> None:
    """Compile the source once at registration (javac), so a syntax or type error is
    reported then, with its line, rather than at every call."""
    javac = shutil.which("javac")
    if javac is None or java_binary() is None:
        raise DefinitionError(f"script tool {spec.name!r} is Java, but {NO_JDK}")
    # javac (unlike the source launcher) wants a public class in a file of its name.
    public = _PUBLIC_CLASS.search(spec.target)
    with tempfile.TemporaryDirectory(prefix="tooldb-check-") as scratch:
        source = Path(scratch) / f"{public.group(1) if public else 'tool'}.java"
        source.write_text(spec.target, encoding="utf-8")
        try:
            done = subprocess.run(
                [javac, "-d", scratch, "-proc:none", "-Xlint:none", str(source)],
                capture_output=True,
                text=True,
                timeout=120,
            )
        except subprocess.TimeoutExpired:
            raise DefinitionError(f"script tool {spec.name!r}: javac timed out") from None
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).replace(str(source), source.name).strip()
        raise DefinitionError(f"script tool {spec.name!r}: Java compile error:\n{detail}")


def java_launch(spec: ToolSpec, tmp: str, memory_mb: int) -> dict[str, Any]:
    """The launcher's instructions: the source as ``tmp/tool.java``, run by ``java``."""
    java = java_binary()
    if java is None:
        raise DefinitionError(f"script tool {spec.name!r} needs a JDK: {NO_JDK}")
    path = f"{tmp}/tool.java"
    heap = max(16, memory_mb // 2)
    flags = [
        f"-Xmx{heap}m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        "-XX:ReservedCodeCacheSize=32m", "-XX:MaxMetaspaceSize=96m",
        "-XX:CICompilerCount=1", "-Xshare:auto", "-Dfile.encoding=UTF-8",
    ]  # fmt: skip
    return {"language": "java", "exec": [java, *flags, path], "source_path": path}
