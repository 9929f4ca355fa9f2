"""Send one HTTP tool request: redirects re-checked hop by hop, a deadline over the whole
exchange, a size cap enforced while streaming, and the response turned into a value.

Kept apart from ``http.py`` so that httpx is imported only when an HTTP tool runs.
"""

from __future__ import annotations

import base64
import codecs
import json
import time
from typing import Any

import httpx

from ..errors import ExecutionError, ToolTimeout
from .http_guard import HostNotAllowed, HostUnresolved
from .http_plan import Outgoing

MAX_REDIRECTS = 5
ERROR_BODY_BYTES = 65_536
EXCERPT_CHARS = 500
_TEXT_TYPES = ("application/xml", "application/javascript", "application/x-www-form-urlencoded",
               "application/yaml", "application/x-yaml", "application/x-ndjson")  # fmt: skip


class Transfer:
    """One call's state, shared by the sync and async send loops."""

    def __init__(
        self, label: str, outgoing: Outgoing, timeout_s: float, max_bytes: int, *, raw: bool = False
    ) -> None:
        self.label = label  # "tool 'name'" or what else is being fetched
        self.raw = raw  # return the body's bytes as they are
        self.outgoing = outgoing
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.deadline = time.monotonic() + timeout_s
        self.url = outgoing.url
        self.hops = 0
        self.chunks: list[bytes] = []
        self.size = 0
        self.limit = max_bytes

    # -- requests ------------------------------------------------------------
    def first_request(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        out = self.outgoing
        url = (
            httpx.URL(out.url).copy_merge_params(tuple(out.query))
            if out.query
            else httpx.URL(out.url)
        )
        request = client.build_request(
            out.method,
            url,
            headers=out.headers,
            json=out.json_body if out.has_body and out.form_body is None else None,
            data=out.form_body,
            files=out.files or None,
            timeout=self.remaining(),
        )
        self.url = str(request.url)
        return request

    def redirect(self, response: httpx.Response) -> httpx.Request | None:
        """The next hop's request, or None when the response is the answer."""
        following = response.next_request
        if not response.is_redirect or following is None:
            return None
        self.hops += 1
        if self.hops > MAX_REDIRECTS:
            raise ExecutionError(f"{self._where()}: more than {MAX_REDIRECTS} redirects")
        if _origin(following.url) != _origin(response.request.url):
            for name in ("Authorization", self.outgoing.auth_header):
                if name:
                    following.headers.pop(name, None)
        following.extensions["timeout"] = httpx.Timeout(self.remaining()).as_dict()
        self.url = str(following.url)
        return following

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.timed_out()
        return left

    # -- response ------------------------------------------------------------
    def start(self, response: httpx.Response) -> None:
        """Before reading the body: refuse an announced oversize body at once."""
        self.limit = self.max_bytes if response.is_success else ERROR_BODY_BYTES
        length = response.headers.get("content-length", "")
        if response.is_success and length.isdigit() and int(length) > self.max_bytes:
            raise self._too_large(int(length))

    def add(self, chunk: bytes) -> bool:
        """Keep a body chunk; False once enough of an error body has been read."""
        self.remaining()
        self.size += len(chunk)
        if self.size > self.limit:
            if self.limit == self.max_bytes:
                raise self._too_large(self.size)
            return False
        self.chunks.append(chunk)
        return True

    def value(self, response: httpx.Response) -> Any:
        body = b"".join(self.chunks)
        if not response.is_success:
            excerpt = self.outgoing.redact(_decode(body, response)[:EXCERPT_CHARS])
            raise ExecutionError(
                f"{self._where()} returned {response.status_code} {response.reason_phrase}"
                + (f": {excerpt}" if excerpt.strip() else "")
            )
        if self.raw:
            return body
        if not body:
            return None
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "application/json" or kind.endswith("+json"):
            try:
                return self._redacted(json.loads(body))
            except ValueError:  # claims JSON, is not: still show it
                return self._redacted(_decode(body, response))
        if not kind or kind.startswith("text/") or kind.endswith("+xml") or kind in _TEXT_TYPES:
            return self._redacted(_decode(body, response))
        return {"content_type": kind, "size": len(body), "base64": base64.b64encode(body).decode()}

    def _redacted(self, value: Any) -> Any:
        """The response with every secret this call sent replaced by ``***``: a server
        that echoes a credential (a debug endpoint, an error page) must not put it in
        the result a model reads or in the call log."""
        if not self.outgoing.secrets:
            return value
        if isinstance(value, str):
            return self.outgoing.redact(value)
        if isinstance(value, list):
            return [self._redacted(item) for item in value]
        if isinstance(value, dict):
            return {self._redacted(k): self._redacted(v) for k, v in value.items()}
        return value

    # -- errors --------------------------------------------------------------
    def error(self, exc: Exception) -> ExecutionError:
        """Map an exception from httpx or the guard to the tool's error."""
        if isinstance(exc, HostNotAllowed | HostUnresolved):
            text = str(exc)
            if self.hops:
                text = f"redirect to {self._shown_url()}: {text}"
            return type(exc)(f"{self.label}: {text}")
        if isinstance(exc, httpx.TimeoutException):
            return self.timed_out()
        if isinstance(exc, ExecutionError):
            return exc
        detail = self.outgoing.redact(str(exc)) or type(exc).__name__
        return ExecutionError(f"{self._where()}: {detail}")

    def timed_out(self) -> ToolTimeout:
        return ToolTimeout(f"{self.label} timed out after {self.timeout_s:g} s "
                           f"({self.outgoing.method} {self._shown_url()})")  # fmt: skip

    def _too_large(self, size: int) -> ExecutionError:
        return ExecutionError(
            f"{self._where()}: response is larger than {self.max_bytes} bytes "
            f"(read {size}; setting http_max_response_bytes)"
        )

    def _where(self) -> str:
        return f"{self.label}: {self.outgoing.method} {self._shown_url()}"

    def _shown_url(self) -> str:
        return self.outgoing.redact(self.url)


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port


def _decode(body: bytes, response: httpx.Response) -> str:
    encoding = response.charset_encoding or "utf-8"
    try:
        codecs.lookup(encoding)
    except LookupError:
        encoding = "utf-8"
    return body.decode(encoding, errors="replace")


def send(client: httpx.Client, transfer: Transfer) -> Any:
    """Send with the synchronous client, following checked redirects."""
    try:
        request = transfer.first_request(client)
        while True:
            response = client.send(request, stream=True)
            try:
                following = transfer.redirect(response)
                if following is None:
                    transfer.start(response)
                    for chunk in response.iter_bytes():
                        if not transfer.add(chunk):
                            break
                    return transfer.value(response)
            finally:
                response.close()
            request = following
    except (httpx.HTTPError, httpx.InvalidURL, ExecutionError) as exc:
        raise transfer.error(exc) from None


async def asend(client: httpx.AsyncClient, transfer: Transfer) -> Any:
    """``send`` for the asynchronous client."""
    try:
        request = transfer.first_request(client)
        while True:
            response = await client.send(request, stream=True)
            try:
                following = transfer.redirect(response)
                if following is None:
                    transfer.start(response)
                    async for chunk in response.aiter_bytes():
                        if not transfer.add(chunk):
                            break
                    return transfer.value(response)
            finally:
                await response.aclose()
            request = following
    except (httpx.HTTPError, httpx.InvalidURL, ExecutionError) as exc:
        raise transfer.error(exc) from None
