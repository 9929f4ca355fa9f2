"""A local server on 127.0.0.1 for the built-in web tools' tests: a web page, a SearxNG,
Brave and Tavily search API, and the GitHub REST endpoints the github group uses,
answering with the shapes GitHub documents (docs.github.com/rest: issues, pulls,
contents, search). Writes need ``Authorization: Bearer TOKEN``, as on GitHub."""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "ghp-test-token-123"
SEARCH_KEY = "search-key-456"
PAGE = """<!doctype html><html><head><title>Deploy guide</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>Deploy guide</h1>
<p>The release checklist has three steps. First run the test suite with python3 -m
unittest. Then bump the version number in version.txt. Finally tag the commit.</p>
<p>The staging host is called zephyr-3 and deploys happen on Tuesdays only.</p>
<p>See <a href="https://example.org/runbook">the runbook</a> for rollbacks.</p>
</article><footer>Copyright footer text</footer></body></html>"""
DIFF = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"


class State:
    def __init__(self) -> None:
        self.issues: dict[int, dict[str, Any]] = {
            1: self.issue(1, "Crash on empty input", "It crashes.", "octocat"),
        }
        self.comments: dict[int, list[dict[str, Any]]] = {1: []}
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.lock = threading.Lock()

    def issue(self, number: int, title: str, body: str, user: str) -> dict[str, Any]:
        return {
            "id": 1000 + number, "number": number, "title": title, "body": body,
            "state": "open", "user": {"login": user}, "labels": [], "comments": 0,
            "html_url": f"https://github.example/acme/app/issues/{number}",
        }  # fmt: skip


class Handler(BaseHTTPRequestHandler):
    state: State

    def log_message(self, *args: Any) -> None:
        """Quiet: the tests read the server's state, not its access log."""

    def _send(self, status: int, body: Any, kind: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def _authorised(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {TOKEN}":
            return True
        self._send(401, {"message": "Requires authentication"})
        return False

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.state.requests.append(("GET", self.path, dict(self.headers)))
        path = url.path
        if path == "/page.html":
            return self._send(200, PAGE.encode(), "text/html; charset=utf-8")
        if path == "/big.html":
            return self._send(200, b"<p>" + b"x" * 3_000_000 + b"</p>", "text/html")
        if path == "/searx/search":
            return self._send(200, {"query": query.get("q"), "results": [
                {"title": "Deploy guide", "url": "http://127.0.0.1/page.html",
                 "content": "The release checklist"},
            ]})  # fmt: skip
        if path == "/brave/res/v1/web/search":
            if self.headers.get("X-Subscription-Token") != SEARCH_KEY:
                return self._send(401, {"error": "bad key"})
            return self._send(200, {"web": {"results": [
                {"title": "Brave hit", "url": "https://b.example/", "description": "about"},
            ]}})  # fmt: skip
        m = re.fullmatch(r"/api/repos/acme/app/issues", path)
        if m:
            items = [i for i in self.state.issues.values() if query.get("state", "open")
                     in ("all", i["state"])]  # fmt: skip
            pr = {**self.state.issue(99, "A pull", "", "x"), "pull_request": {"url": "u"}}
            return self._send(200, [*reversed(items), pr])
        m = re.fullmatch(r"/api/repos/acme/app/issues/(\d+)(/comments)?", path)
        if m:
            issue = self.state.issues.get(int(m.group(1)))
            if issue is None:
                return self._send(404, {"message": "Not Found"})
            if m.group(2):
                return self._send(200, self.state.comments.get(issue["number"], []))
            return self._send(200, issue)
        if path == "/api/repos/acme/app/pulls":
            return self._send(200, [{"number": 7, "title": "Bump", "state": "open",
                                     "user": {"login": "dev"}, "head": {"ref": "bump"},
                                     "base": {"ref": "main"}, "html_url": "u7"}])  # fmt: skip
        if path == "/api/repos/acme/app/pulls/7":
            if "diff" in self.headers.get("Accept", ""):
                return self._send(200, DIFF.encode(), "application/vnd.github.diff; charset=utf-8")
            return self._send(200, {"number": 7, "title": "Bump", "state": "open", "body": "b",
                                    "merged": False, "additions": 1, "deletions": 1,
                                    "changed_files": 1, "head": {"ref": "bump"},
                                    "base": {"ref": "main"}, "user": {"login": "dev"}})  # fmt: skip
        if path == "/api/repos/acme/app/contents/src/x.py":
            text = base64.b64encode(b"a = 2\n").decode()
            found = {"type": "file", "path": "src/x.py", "size": 6, "sha": "abc"}
            return self._send(200, {**found, "encoding": "base64", "content": text})
        if path == "/api/search/code":
            return self._send(200, {"total_count": 1, "items": [
                {"path": "src/x.py", "html_url": "u", "repository": {"full_name": "acme/app"}},
            ]})  # fmt: skip
        return self._send(404, {"message": "Not Found"})

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        self.state.requests.append(("POST", self.path, dict(self.headers)))
        if url.path == "/tavily/search":
            if self.headers.get("Authorization") != f"Bearer {SEARCH_KEY}":
                return self._send(401, {"detail": "bad key"})
            body = self._body()
            return self._send(200, {"query": body["query"], "results": [
                {"title": "Tavily hit", "url": "https://t.example/", "content": "snippet"},
            ]})  # fmt: skip
        if url.path == "/api/repos/acme/app/issues":
            if not self._authorised():
                return None
            body = self._body()
            if not body.get("title"):
                return self._send(422, {"message": "Validation Failed"})
            with self.state.lock:
                number = max(self.state.issues) + 1
                issue = self.state.issue(number, body["title"], body.get("body", ""), "agent")
                issue["labels"] = [{"name": n} for n in body.get("labels", [])]
                self.state.issues[number] = issue
                self.state.comments[number] = []
            return self._send(201, issue)
        m = re.fullmatch(r"/api/repos/acme/app/issues/(\d+)/comments", url.path)
        if m:
            if not self._authorised():
                return None
            number = int(m.group(1))
            if number not in self.state.issues:
                return self._send(404, {"message": "Not Found"})
            comment = {"id": 5000 + number, "body": self._body()["body"],
                       "user": {"login": "agent"}, "html_url": f"c{number}"}  # fmt: skip
            self.state.comments[number].append(comment)
            self.state.issues[number]["comments"] += 1
            return self._send(201, comment)
        return self._send(404, {"message": "Not Found"})


class LocalServer:
    """``with LocalServer() as server``: serving on ``server.url`` from a thread."""

    def __enter__(self) -> LocalServer:
        self.state = State()
        handler = type("BoundHandler", (Handler,), {"state": self.state})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
