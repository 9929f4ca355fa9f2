"""GitHub group (dangerous: registered only by name; it acts with the user's token):
issues (list, read, create, comment), pull requests (list, read, diff, comment), file
contents and code search through the REST API, via the HTTP guard (time and size
caps, checked redirects, the token redacted from errors). The token is the secret
named by ``github_token_secret`` (``GITHUB_TOKEN``) in ``[secrets]`` or the
environment; ``github_api_url`` points at GitHub Enterprise (``https://HOST/api/v3``)."""

from __future__ import annotations

import base64
import re
from typing import Any, Literal
from urllib.parse import quote

from ..decorators import tool
from ..errors import ExecutionError, UsageError
from .common import guarded_request, registry_settings, secret

GROUP = {"builtin": "github"}
_REPO = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
API_VERSION = "2022-11-28"
MAX_BODY_CHARS = 65_536


def _repo(repo: str) -> str:
    if not isinstance(repo, str) or not _REPO.match(repo) or ".." in repo:
        raise UsageError(f"'repo' {repo!r} must look like OWNER/NAME, e.g. octocat/hello-world")
    return repo


def _number(number: int) -> int:
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise UsageError(
            f"'number' must be a positive issue or pull request number, got {number!r}"
        )
    return number


def _limit(limit: int) -> int:
    if not 1 <= limit <= 100:
        raise UsageError(f"'limit' must be from 1 to 100, got {limit}")
    return limit


def _api(
    method: str,
    path: str,
    *,
    query: list[tuple[str, str]] | None = None,
    body: Any = None,
    accept: str = "application/vnd.github+json",
    needs_token: bool = False,
    raw: bool = False,
) -> Any:
    registry, settings = registry_settings()
    token = secret(settings, settings.github_token_secret)
    if needs_token and not token:
        raise ExecutionError(
            f"this GitHub tool needs a token: put it in [secrets] as "
            f"{settings.github_token_secret} (or that environment variable)"
        )
    headers = [("Accept", accept), ("X-GitHub-Api-Version", API_VERSION)]
    if token:
        headers.append(("Authorization", f"Bearer {token}"))
    url = settings.github_api_url.rstrip("/") + path
    return guarded_request(
        registry, method, url, label=f"GitHub {method} {path}", query=query, headers=headers,
        json_body=body, secrets=[token] if token else [], raw=raw,
    )  # fmt: skip


def _issue_summary(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "number": item.get("number"),
        "title": item.get("title"),
        "state": item.get("state"),
        "user": (item.get("user") or {}).get("login"),
        "labels": [
            label.get("name") for label in item.get("labels") or [] if isinstance(label, dict)
        ],
        "comments": item.get("comments"),
        "url": item.get("html_url"),
    }


@tool(category="github", metadata=GROUP, timeout_s=120)
def github_list_issues(
    repo: str, state: Literal["open", "closed", "all"] = "open", limit: int = 20
) -> list[dict[str, Any]]:
    """List the issues of a GitHub repository (pull requests left out), newest first.
    Returns number, title, state, author, labels and URL of each.

    Args:
        repo: The repository as OWNER/NAME.
        state: open, closed or all.
        limit: How many at most (1 to 100).
    """
    path = f"/repos/{_repo(repo)}/issues"
    items = _api("GET", path, query=[("state", state), ("per_page", str(_limit(limit)))])
    return [_issue_summary(i) for i in items or [] if "pull_request" not in i][:limit]


@tool(category="github", metadata=GROUP, timeout_s=120)
def github_read_issue(repo: str, number: int, comments: bool = True) -> dict[str, Any]:
    """Read one GitHub issue (or pull request conversation): title, body, state, labels
    and, with comments=true, its comments.

    Args:
        repo: The repository as OWNER/NAME.
        number: The issue number.
        comments: Also read the comments (the first 100).
    """
    base = f"/repos/{_repo(repo)}/issues/{_number(number)}"
    item = _api("GET", base)
    found = {**_issue_summary(item), "body": item.get("body") or ""}
    if comments and item.get("comments"):
        listed = _api("GET", base + "/comments", query=[("per_page", "100")])
        found["comment_list"] = [
            {"user": (c.get("user") or {}).get("login"), "body": c.get("body")} for c in listed
        ]
    return found


def _text(value: str, name: str, *, required: bool) -> str:
    if not isinstance(value, str) or (required and not value.strip()):
        raise UsageError(f"'{name}' must be a non-empty string")
    if len(value) > MAX_BODY_CHARS:
        raise UsageError(f"'{name}' must be at most {MAX_BODY_CHARS} characters")
    return value


@tool(category="github", metadata=GROUP, timeout_s=120)
def github_create_issue(
    repo: str, title: str, body: str = "", labels: list[str] | None = None
) -> dict[str, Any]:
    """Open a new issue in a GitHub repository (needs the token). Use it to report a bug
    or propose work. Returns the new issue's number and URL.

    Args:
        repo: The repository as OWNER/NAME.
        title: The issue's title.
        body: The issue's text (Markdown).
        labels: Label names to put on it.
    """
    payload: dict[str, Any] = {"title": _text(title, "title", required=True)}
    payload["body"] = _text(body, "body", required=False)
    if labels:
        payload["labels"] = [str(label) for label in labels]
    item = _api("POST", f"/repos/{_repo(repo)}/issues", body=payload, needs_token=True)
    return {"number": item.get("number"), "url": item.get("html_url"), "title": item.get("title")}


@tool(category="github", metadata=GROUP, timeout_s=120)
def github_comment(repo: str, number: int, body: str) -> dict[str, Any]:
    """Add a comment to a GitHub issue or pull request (needs the token). Returns the
    comment's id and URL.

    Args:
        repo: The repository as OWNER/NAME.
        number: The issue or pull request number.
        body: The comment (Markdown).
    """
    path = f"/repos/{_repo(repo)}/issues/{_number(number)}/comments"
    payload = {"body": _text(body, "body", required=True)}
    item = _api("POST", path, body=payload, needs_token=True)
    return {"id": item.get("id"), "url": item.get("html_url")}


@tool(category="github", metadata=GROUP, timeout_s=120)
def github_list_pulls(
    repo: str, state: Literal["open", "closed", "all"] = "open", limit: int = 20
) -> list[dict[str, Any]]:
    """List the pull requests of a GitHub repository. Returns number, title, state,
    author, head and base branches and URL of each.

    Args:
        repo: The repository as OWNER/NAME.
        state: open, closed or all.
        limit: How many at most (1 to 100).
    """
    path = f"/repos/{_repo(repo)}/pulls"
    items = _api("GET", path, query=[("state", state), ("per_page", str(_limit(limit)))])
    return [_pull_summary(p) for p in items or []][:limit]


def _pull_summary(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "number": item.get("number"),
        "title": item.get("title"),
        "state": item.get("state"),
        "user": (item.get("user") or {}).get("login"),
        "head": (item.get("head") or {}).get("ref"),
        "base": (item.get("base") or {}).get("ref"),
        "url": item.get("html_url"),
    }


@tool(category="github", metadata=GROUP, timeout_s=120)
def github_read_pull(repo: str, number: int) -> dict[str, Any]:
    """Read one pull request: title, body, branches, whether it is merged, and its
    change counts. Use github_pull_diff for the changes themselves.

    Args:
        repo: The repository as OWNER/NAME.
        number: The pull request number.
    """
    item = _api("GET", f"/repos/{_repo(repo)}/pulls/{_number(number)}")
    return {
        **_pull_summary(item),
        "body": item.get("body") or "",
        "merged": item.get("merged"),
        "additions": item.get("additions"),
        "deletions": item.get("deletions"),
        "changed_files": item.get("changed_files"),
    }


@tool(category="github", metadata=GROUP, timeout_s=120)
def github_pull_diff(repo: str, number: int) -> str:
    """The changes of a pull request as a unified diff (text): use it to review what a
    pull request changes, line by line.

    Args:
        repo: The repository as OWNER/NAME.
        number: The pull request number.
    """
    path = f"/repos/{_repo(repo)}/pulls/{_number(number)}"
    body = _api("GET", path, accept="application/vnd.github.diff", raw=True)
    return bytes(body).decode("utf-8", errors="replace")


@tool(category="github", metadata=GROUP, timeout_s=120)
def github_get_file(repo: str, path: str, ref: str = "") -> dict[str, Any]:
    """Read a file of a GitHub repository (at a branch, tag or commit). Returns its
    path, size, sha and text.

    Args:
        repo: The repository as OWNER/NAME.
        path: The file's path in the repository, e.g. "src/app.py".
        ref: Branch, tag or commit (default: the default branch).
    """
    if not isinstance(path, str) or not path.strip("/") or ".." in path.split("/"):
        raise UsageError(f"'path' {path!r} must be a file path in the repository, without '..'")
    quoted = quote(path.strip("/"), safe="/")
    item = _api(
        "GET", f"/repos/{_repo(repo)}/contents/{quoted}", query=[("ref", ref)] if ref else None
    )
    if not isinstance(item, dict) or item.get("type") != "file":
        raise UsageError(f"'path' {path!r} is not a file in {repo} (a folder?)")
    content = item.get("content") or ""
    text = base64.b64decode(content).decode("utf-8", errors="replace") if content else ""
    return {
        "path": item.get("path"),
        "size": item.get("size"),
        "sha": item.get("sha"),
        "text": text,
    }


@tool(category="github", metadata=GROUP, timeout_s=120)
def github_search_code(query: str, repo: str = "", limit: int = 20) -> list[dict[str, Any]]:
    """Search code on GitHub (GitHub's code search syntax), optionally in one
    repository. Returns each match's repository, path and URL.

    Args:
        query: What to look for, e.g. "def load_model language:python".
        repo: Only this repository (OWNER/NAME).
        limit: How many results (1 to 100).
    """
    if not isinstance(query, str) or not query.strip():
        raise UsageError("'query' must be a non-empty search query")
    q = query.strip() + (f" repo:{_repo(repo)}" if repo else "")
    found = _api("GET", "/search/code", query=[("q", q), ("per_page", str(_limit(limit)))])
    items = found.get("items", []) if isinstance(found, dict) else []
    return [
        {
            "repo": (i.get("repository") or {}).get("full_name"),
            "path": i.get("path"),
            "url": i.get("html_url"),
        }
        for i in items[:limit]
    ]
