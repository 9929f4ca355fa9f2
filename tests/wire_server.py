"""A real HTTP server on 127.0.0.1 that plays recorded provider responses.

Tests point an SDK at it through its base URL, queue the recorded responses of a
fixture under tests/fixtures/wire/, and assert on the requests it received: the
provider adapters are tested through the SDK's real HTTP stack, with no network.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tooldb.models import ToolSchema

FIXTURES = Path(__file__).parent / "fixtures" / "wire"

#: The tools the recorded requests offer, in the neutral form.
WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather in a city",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
)
TIME = ToolSchema(
    name="get_time",
    description="Local time in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TOOLS = [WEATHER, TIME]


def fixture(provider: str, name: str) -> dict[str, Any]:
    """A recorded exchange: ``request`` (the body expected) and ``response``."""
    data: dict[str, Any] = json.loads((FIXTURES / provider / f"{name}.json").read_text())
    return data


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64  # the default 5 drops concurrent connects (a 1 s SYN retry)


class WireServer:
    """Answers every request with the next queued response (the last one repeats)."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._responses: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def reply(self, *responses: dict[str, Any]) -> None:
        """Queue responses: ``{"status": int, "headers": {...}, "body": json}`` (and
        ``delay_s`` to answer late)."""
        with self._lock:
            self._responses = list(responses)

    def _next(self, received: Received) -> dict[str, Any]:
        with self._lock:
            self.requests.append(received)
            if not self._responses:
                return {"status": 500, "body": {"error": {"message": "no response queued"}}}
            return self._responses.pop(0) if len(self._responses) > 1 else self._responses[0]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real providers do

            def setup(self) -> None:
                super().setup()
                # Headers and body leave in two writes: without this, Nagle's algorithm
                # and delayed ACKs add 40 ms to every answer.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                headers = {k.lower(): v for k, v in self.headers.items()}
                answer = server._next(Received(self.command, self.path, headers, body))
                time.sleep(answer.get("delay_s", 0))
                payload = json.dumps(answer.get("body")).encode()
                self.send_response(answer.get("status", 200))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in answer.get("headers", {}).items():
                    self.send_header(name, value)
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(payload)  # fails when the client gave up (timeouts)

            def log_message(self, *_args: object) -> None:
                return

        return Handler


@contextmanager
def wire_server() -> Iterator[WireServer]:
    server = WireServer()
    try:
        yield server
    finally:
        server.close()
