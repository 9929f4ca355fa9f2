"""Java script tools (issue 28.6): one source file run by the JDK's source launcher in
the same sandbox as Python and JavaScript scripts, with the same contract (JSON on
stdin, JSON on stdout) and the same limits. `.ci/run` installs the JDK when missing."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import tooldb
from tooldb import DefinitionError, Registry, Settings
from tooldb.executors.script_java import java_binary, java_launch

ROOT = Path(__file__).resolve().parent.parent

ECHO = """
import java.nio.charset.StandardCharsets;

public class Echo {
    public static void main(String[] args) throws Exception {
        String json = new String(System.in.readAllBytes(), StandardCharsets.UTF_8);
        System.out.println("starting");  // earlier lines are allowed: the last is the result
        System.out.println("{\\"received\\": " + json + "}");
    }
}
"""


@pytest.fixture
def reg(sqlite_url: str) -> Iterator[Registry]:
    registry = tooldb.open(sqlite_url, settings=Settings(url=sqlite_url, embedder="hash"))
    yield registry
    registry.close()


def add_java(registry: Registry, name: str, source: str, **metadata: object) -> None:
    registry.add(
        {
            "name": name,
            "kind": "script",
            "target": source,
            "timeout_s": 30,
            "metadata": {"language": "java", **metadata},
            "parameters": {"type": "object", "additionalProperties": True},
        }
    )


def test_a_java_tool_gets_json_arguments_and_returns_json(reg: Registry) -> None:
    add_java(reg, "java_echo", ECHO)
    result = reg.call("java_echo", {"city": "Zürich", "n": 3})
    assert result.success, result.error
    assert result.data == {"received": {"city": "Zürich", "n": 3}}
    (recorded,) = reg.calls(tool="java_echo")
    assert recorded.success


def test_a_compile_error_is_refused_at_registration_with_its_line(reg: Registry) -> None:
    broken = ECHO.replace("readAllBytes()", "readAllBites()")
    with pytest.raises(DefinitionError, match=r"Java compile error:\nEcho.java:6: error"):
        add_java(reg, "java_broken", broken)
    with pytest.raises(tooldb.NotFound):
        reg.get("java_broken")


def program(body: str) -> str:
    return (
        "public class Limits {\n    public static void main(String[] a) throws Exception {\n"
        f'        {body}\n        System.out.println("null");\n    }}\n}}\n'
    )


def test_java_tools_keep_the_sandbox_limits(reg: Registry) -> None:
    add_java(reg, "java_spin", program("long n = 0; while (n >= 0) { n = (n + 1) % 7; }"), cpu_s=2)
    result = reg.call("java_spin", {})
    assert not result.success
    assert "CPU time limit of 2 s (metadata.cpu_s)" in (result.error or "")

    hog = "byte[][] b = new byte[64][]; for (int i = 0; i < 64; i++) b[i] = new byte[32_000_000];"
    add_java(reg, "java_hog", program(hog), memory_mb=256)
    result = reg.call("java_hog", {})
    assert not result.success
    assert "out of memory: the limit is 256 MB" in (result.error or "")

    add_java(reg, "java_dial", program('new java.net.Socket("1.1.1.1", 80);'))
    result = reg.call("java_dial", {})
    assert not result.success
    assert "Network is unreachable" in (result.error or "")


def test_without_a_jdk_registration_says_how_to_install_one(
    reg: Registry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    add_java(reg, "java_before", ECHO)
    javac = shutil.which("javac")
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no java and no javac
    assert java_binary() is None
    with pytest.raises(DefinitionError, match=r"no JDK is installed.*default-jdk-headless"):
        add_java(reg, "java_echo", ECHO)
    assert javac is not None
    (tmp_path / "javac").symlink_to(javac)  # javac alone will not do: calls need java
    with pytest.raises(DefinitionError, match=r"no JDK is installed"):
        add_java(reg, "java_echo", ECHO)
    gone = reg.call("java_before", {})  # registered while a JDK was there
    assert not gone.success
    assert "script tool 'java_before' needs a JDK: no JDK is installed" in (gone.error or "")
    with pytest.raises(DefinitionError, match=r"'java_before' needs a JDK: no JDK is installed"):
        java_launch(reg.get("java_before").spec, "/scratch", 512)  # the launcher's own check


def test_the_example_java_tool_of_the_readme(reg: Registry) -> None:
    reg.add_manifest(ROOT / "examples" / "java_tools.yaml", strict=True)
    result = reg.call("count_vowels", {"text": "Java in a sandbox"})
    assert result.success, result.error
    assert result.data == {"vowels": 6}


def test_the_jvm_gets_half_the_memory_limit_as_heap_and_at_least_16_mb(reg: Registry) -> None:
    add_java(reg, "java_echo", ECHO)
    spec = reg.get("java_echo").spec
    launch = java_launch(spec, "/scratch", 512)
    assert launch["language"] == "java" and launch["source_path"] == "/scratch/tool.java"
    java, *flags, source = launch["exec"]
    assert (java, source) == (java_binary(), "/scratch/tool.java")
    assert flags[0] == "-Xmx256m" and "-XX:+UseSerialGC" in flags
    assert "-Dfile.encoding=UTF-8" in flags  # whatever the sandbox's locale
    assert java_launch(spec, "/scratch", 34)["exec"][1] == "-Xmx17m"
    assert java_launch(spec, "/scratch", 20)["exec"][1] == "-Xmx16m"


def test_a_source_without_a_public_class_is_checked_and_runs(reg: Registry) -> None:
    add_java(reg, "java_plain", 'class Main {\n    public static void main(String[] a) {\n'
             '        System.out.println("{\\"ok\\": true}");\n    }\n}\n')  # fmt: skip
    result = reg.call("java_plain", {})
    assert result.success, result.error
    assert result.data == {"ok": True}
