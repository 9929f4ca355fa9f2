"""Built-in research and github groups against a real local server on 127.0.0.1
(tests/builtins_server.py), through the HTTP guard."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import tooldb
from tooldb import Registry, Settings
from tooldb.builtins import add_builtins

from .builtins_server import SEARCH_KEY, TOKEN, LocalServer


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer() as running:
        yield running


def open_registry(url: str, server: LocalServer, **settings: Any) -> Registry:
    values: dict[str, Any] = {
        "embedder": "hash", "url": url, "http_allowed_hosts": ("127.0.0.1",),
        "github_api_url": server.url + "/api", "secrets": {"GITHUB_TOKEN": TOKEN},
        **settings,
    }  # fmt: skip
    registry = tooldb.open(url, settings=Settings(**values))
    add_builtins(registry, ["research", "github"])
    return registry


def ok(registry: Registry, tool: str, arguments: dict[str, Any]) -> Any:
    result = registry.call(tool, arguments)
    assert result.success, result.error
    return result.data


def error(registry: Registry, tool: str, arguments: dict[str, Any]) -> str:
    result = registry.call(tool, arguments)
    assert not result.success and result.error
    return result.error


def test_fetch_url_reads_the_page(sqlite_url: str, server: LocalServer) -> None:
    with open_registry(sqlite_url, server) as registry:
        page = ok(registry, "fetch_url", {"url": server.url + "/page.html"})
    assert page["title"] == "Deploy guide"
    assert "zephyr-3" in page["text"] and "Copyright footer" not in page["text"]
    assert {"url": "https://example.org/runbook", "text": "the runbook"} in page["links"]
    assert {"url": server.url + "/about", "text": "About"} in page["links"]


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:{port}/page.html", "http://169.254.169.254/latest/meta-data/",
     "http://10.0.0.1/", "http://[::1]:{port}/page.html", "http://localhost:{port}/page.html"],
)  # fmt: skip
def test_fetch_url_refuses_private_addresses_by_default(
    sqlite_url: str, server: LocalServer, url: str
) -> None:
    port = server.url.rsplit(":", 1)[1]
    with open_registry(sqlite_url, server, http_allowed_hosts=("public",)) as registry:
        message = error(registry, "fetch_url", {"url": url.format(port=port)})
    assert "not allowed" in message
    assert not server.state.requests


def test_fetch_url_bad_input_and_caps(sqlite_url: str, server: LocalServer) -> None:
    with open_registry(sqlite_url, server, http_max_response_bytes=1_000_000) as registry:
        assert "'url'" in error(registry, "fetch_url", {"url": "file:///etc/passwd"})
        assert "'url'" in error(registry, "fetch_url", {"url": "/page.html"})
        assert "larger than" in error(registry, "fetch_url", {"url": server.url + "/big.html"})


def test_web_search_says_when_no_provider(sqlite_url: str, server: LocalServer) -> None:
    with open_registry(sqlite_url, server) as registry:
        assert "no search provider configured" in error(registry, "web_search", {"query": "x"})
    with open_registry(sqlite_url, server, web_search_provider="brave") as registry:
        assert "BRAVE_API_KEY" in error(registry, "web_search", {"query": "x"})


@pytest.mark.parametrize(
    ("provider", "path", "title"),
    [("searxng", "/searx", "Deploy guide"), ("brave", "/brave/res/v1/web/search", "Brave hit"),
     ("tavily", "/tavily/search", "Tavily hit")],
)  # fmt: skip
def test_web_search_providers(
    sqlite_url: str, server: LocalServer, provider: str, path: str, title: str
) -> None:
    settings = {"web_search_provider": provider, "web_search_url": server.url + path,
                "secrets": {f"{provider.upper()}_API_KEY": SEARCH_KEY}}  # fmt: skip
    with open_registry(sqlite_url, server, **settings) as registry:
        found = ok(registry, "web_search", {"query": "release checklist", "k": 3})
    assert found["results"][0]["title"] == title and found["provider"] == provider


def test_github_issues_and_pulls(store_url: str, server: LocalServer) -> None:
    with open_registry(store_url, server) as registry:
        issues = ok(registry, "github_list_issues", {"repo": "acme/app"})
        assert [i["number"] for i in issues] == [1]  # the pull request is left out
        wanted = {"repo": "acme/app", "title": "Add a flag", "body": "Please", "labels": ["x"]}
        created = ok(registry, "github_create_issue", wanted)
        assert created["number"] == 2
        ok(registry, "github_comment", {"repo": "acme/app", "number": 2, "body": "On it"})
        issue = ok(registry, "github_read_issue", {"repo": "acme/app", "number": 2})
        assert issue["title"] == "Add a flag" and issue["labels"] == ["x"]
        assert issue["comment_list"] == [{"user": "agent", "body": "On it"}]
        assert ok(registry, "github_list_pulls", {"repo": "acme/app"})[0]["head"] == "bump"
        assert ok(registry, "github_read_pull", {"repo": "acme/app", "number": 7})["additions"] == 1
        assert "+a = 2" in ok(registry, "github_pull_diff", {"repo": "acme/app", "number": 7})
        file = ok(registry, "github_get_file", {"repo": "acme/app", "path": "src/x.py"})
        assert file["text"] == "a = 2\n"
        hits = ok(registry, "github_search_code", {"query": "a = 2", "repo": "acme/app"})
        assert hits == [{"repo": "acme/app", "path": "src/x.py", "url": "u"}]
        assert "404" in error(registry, "github_read_issue", {"repo": "acme/app", "number": 50})
    sent = [h for m, p, h in server.state.requests if m == "POST"]
    assert all(h["Authorization"] == f"Bearer {TOKEN}" for h in sent)


def test_github_refuses_bad_input_and_hides_the_token(sqlite_url: str, server: LocalServer) -> None:
    with open_registry(sqlite_url, server) as registry:
        for repo in ("acme", "../etc/passwd", "acme/app; rm -rf /", "a/$(id)"):
            assert "'repo'" in error(registry, "github_list_issues", {"repo": repo})
        assert "'number'" in error(registry, "github_read_issue", {"repo": "acme/app", "number": 0})
        assert "'path'" in error(registry, "github_get_file", {"repo": "acme/app", "path": "../x"})
        assert "'title'" in error(
            registry, "github_create_issue", {"repo": "acme/app", "title": ""}
        )
    with open_registry(sqlite_url, server, secrets={"GITHUB_TOKEN": "wrong-token-789"}) as registry:
        message = error(registry, "github_create_issue", {"repo": "acme/app", "title": "t"})
        assert "401" in message and "wrong-token-789" not in message
    with open_registry(sqlite_url, server, secrets={}) as registry:
        message = error(registry, "github_comment", {"repo": "acme/app", "number": 1, "body": "b"})
        assert "needs a token" in message and "GITHUB_TOKEN" in message
