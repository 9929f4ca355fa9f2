"""Research group: ``fetch_url`` reads a web page through the HTTP guard (the
``http_allowed_hosts`` setting: public hosts only by default, so no private address,
loopback or cloud metadata; time and size caps) and turns its HTML into readable text
and links with trafilatura; ``web_search`` asks the search provider configured in
settings (a SearxNG instance, Brave or Tavily; the key from ``[secrets]``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urljoin, urlsplit

from ..decorators import tool
from ..errors import ExecutionError, UsageError
from .common import guarded_request, registry_settings, secret

GROUP = {"builtin": "research"}
MAX_LINKS = 200
PROVIDERS = {
    "searxng": ("", ""),
    "brave": ("https://api.search.brave.com/res/v1/web/search", "BRAVE_API_KEY"),
    "tavily": ("https://api.tavily.com/search", "TAVILY_API_KEY"),
}


def _check_url(url: str) -> str:
    if not isinstance(url, str) or not url.strip():
        raise UsageError("'url' must be an http(s) URL")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"'url' {url!r} must be an absolute http:// or https:// URL")
    return url.strip()


def _links(html: str, base: str) -> list[dict[str, str]]:
    import lxml.html

    try:
        document = lxml.html.fromstring(html)
    except Exception:  # not HTML at all: no links, the text still stands
        return []
    found: dict[str, str] = {}
    for anchor in document.iter("a"):
        href = (anchor.get("href") or "").strip()
        if not href or href.startswith(("#", "javascript:", "mailto:")):
            continue
        absolute = urljoin(base, href)
        if urlsplit(absolute).scheme in ("http", "https") and absolute not in found:
            found[absolute] = " ".join(anchor.text_content().split())[:200]
        if len(found) >= MAX_LINKS:
            break
    return [{"url": u, "text": t} for u, t in found.items()]


@tool(category="research", metadata=GROUP, timeout_s=120)
def fetch_url(url: str, max_chars: int = 20_000, links: bool = True) -> dict[str, Any]:
    """Read a web page and return its main text (navigation and boilerplate removed) and
    its links. Use it to read a page you know the address of, e.g. one web_search
    found. Returns url, title, text (cut at max_chars) and links.

    Args:
        url: The page's http(s) address.
        max_chars: Longest text to return (100 to 200000).
        links: Also return the page's links (url and anchor text).
    """
    try:
        import trafilatura
    except ImportError as exc:
        raise ExecutionError(f"fetch_url needs tooldb[builtins] (trafilatura): {exc}") from None
    url = _check_url(url)
    if not 100 <= max_chars <= 200_000:
        raise UsageError(f"'max_chars' must be from 100 to 200000, got {max_chars}")
    registry, _ = registry_settings()
    body = guarded_request(registry, "GET", url, label=f"fetch_url {url!r}", raw=True)
    html = body.decode("utf-8", errors="replace")
    text = trafilatura.extract(html, url=url, include_comments=False, favor_recall=True) or ""
    if not text.strip():  # not an article: fall back on all the page's text
        text = trafilatura.html2txt(html) if "<" in html else html
    metadata = trafilatura.extract_metadata(html)
    title = (metadata.title if metadata is not None else None) or ""
    return {
        "url": url,
        "title": title,
        "text": text[:max_chars],
        "truncated": len(text) > max_chars,
        "links": _links(html, url) if links else [],
    }


@tool(category="research", metadata=GROUP, timeout_s=120)
def web_search(query: str, k: int = 5) -> dict[str, Any]:
    """Search the web and return the top results' titles, addresses and snippets. Use it
    to find pages about something, then read the best with fetch_url. Needs a search
    provider configured by the operator (web_search_provider: searxng, brave, tavily).

    Args:
        query: What to search for.
        k: How many results (1 to 20).
    """
    if not isinstance(query, str) or not query.strip():
        raise UsageError("'query' must be a non-empty search query")
    if not 1 <= k <= 20:
        raise UsageError(f"'k' must be from 1 to 20, got {k}")
    registry, settings = registry_settings()
    provider = settings.web_search_provider.strip().lower()
    if not provider:
        raise ExecutionError(
            "web_search has no search provider configured: set web_search_provider to "
            "searxng (with web_search_url, your instance), brave or tavily (the key in "
            "[secrets], see docs/builtins.md)"
        )
    if provider not in PROVIDERS:
        raise ExecutionError(
            f"web_search_provider {provider!r} is not one of {', '.join(PROVIDERS)}"
        )
    default_url, default_secret = PROVIDERS[provider]
    url = settings.web_search_url or default_url
    if not url:
        raise ExecutionError(f"web_search_provider {provider} needs web_search_url")
    key_name = settings.web_search_key_secret or default_secret
    key = secret(settings, key_name) if key_name else None
    if provider != "searxng" and not key:
        raise ExecutionError(
            f"web_search_provider {provider} needs an API key: put it in [secrets] as "
            f"{key_name} (or the environment variable {key_name})"
        )
    label = f"web_search ({provider})"
    if provider == "searxng":
        base = url.rstrip("/")
        answer = guarded_request(
            registry, "GET", base if base.endswith("/search") else base + "/search",
            label=label, query=[("q", query), ("format", "json")],
        )  # fmt: skip
        items = _field(answer, "results", provider)
        rows = [(i.get("title"), i.get("url"), i.get("content")) for i in items]
    elif provider == "brave":
        answer = guarded_request(
            registry, "GET", url, label=label, query=[("q", query), ("count", str(k))],
            headers=[("X-Subscription-Token", key or "")], secrets=[key or ""],
        )  # fmt: skip
        items = _field(_field(answer, "web", provider), "results", provider)
        rows = [(i.get("title"), i.get("url"), i.get("description")) for i in items]
    else:
        answer = guarded_request(
            registry, "POST", url, label=label,
            json_body={"query": query, "max_results": k},
            headers=[("Authorization", f"Bearer {key}")], secrets=[key or ""],
        )  # fmt: skip
        items = _field(answer, "results", provider)
        rows = [(i.get("title"), i.get("url"), i.get("content")) for i in items]
    results = [
        {"title": str(t or ""), "url": str(u), "snippet": str(s or "")[:500]}
        for t, u, s in rows
        if u
    ]
    return {"provider": provider, "query": query, "results": results[:k]}


def _field(answer: Any, name: str, provider: str) -> Any:
    if not isinstance(answer, dict) or name not in answer:
        raise ExecutionError(f"the {provider} search answer has no {name!r}: {str(answer)[:300]}")
    value = answer[name]
    if name == "results" and not isinstance(value, list):
        raise ExecutionError(f"the {provider} search answer's results are not a list")
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else value
