"""A small pets API on 127.0.0.1 (stdlib only) for the HTTP tool examples and tests.

Run it with ``python -m tooldb.examples.pets_server --port 8765``; it describes itself
at ``/openapi.yaml``. It records every request exactly as received (raw path, headers,
body), so tests can check what went over the wire: encoding, auth, injected headers.
The /private routes want ``Authorization: Bearer <token>`` or the API key (header
``X-API-Key`` or query ``api_key``) given at start (``--token``, ``--api-key``).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SPEC = Path(__file__).with_name("pets_openapi.yaml")


@dataclass
class Seen:
    method: str
    raw_path: str
    headers: dict[str, str]
    body: bytes

    @property
    def path(self) -> str:
        return self.raw_path.split("?", 1)[0]

    @property
    def query(self) -> dict[str, list[str]]:
        return urllib.parse.parse_qs(urllib.parse.urlsplit(self.raw_path).query)

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class PetsState:
    pets: dict[int, dict[str, Any]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    connections: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    token: str = "s3cret-token"
    api_key: str = "k3y-value"

    def reset(self) -> None:
        self.pets = {
            1: {"id": 1, "name": "Rex", "tag": "dog"},
            2: {"id": 2, "name": "Tom", "tag": "cat"},
        }


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *_args: Any) -> None:  # keep test output clean
        pass

    def setup(self) -> None:
        super().setup()
        with self.server.state.lock:
            self.server.state.connections += 1

    def _record(self) -> Seen:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        seen = Seen(self.command, self.path, dict(self.headers.items()), body)
        with self.server.state.lock:
            self.server.state.seen.append(seen)
        return seen

    def _send(self, status: int, value: Any = None, *, kind: str = "application/json") -> None:
        body = b"" if value is None else (
            value if isinstance(value, bytes) else json.dumps(value).encode()
        )  # fmt: skip
        self.send_response(status)
        if value is not None:
            self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._route()

    def do_POST(self) -> None:
        self._route()

    def do_PUT(self) -> None:
        self._route()

    def do_DELETE(self) -> None:
        self._route()

    def _route(self) -> None:
        seen = self._record()
        state = self.server.state
        parts = seen.path.strip("/").split("/")
        if parts[0] == "pets":
            self._pets(seen, parts[1:])
        elif parts[0] == "echo":
            self._send(200, {"method": seen.method, "raw_path": seen.raw_path,
                             "headers": seen.headers,
                             "body": seen.body.decode(errors="replace")})  # fmt: skip
        elif parts[0] == "private":
            via = _credentials(seen, state)
            if via is None:
                self._send(401, {"error": "missing or wrong credentials"})
            else:
                self._send(200, {"ok": True, "via": via})
        elif parts[0] in ("openapi.yaml", "openapi.json"):
            self._send(200, SPEC.read_bytes(), kind="application/yaml")
        elif parts[0] == "text":
            self._send(200, "plain words, ünï".encode(), kind="text/plain; charset=utf-8")
        elif parts[0] == "binary":
            self._send(200, bytes(range(8)), kind="application/octet-stream")
        elif parts[0] == "slow":
            time.sleep(float(seen.query.get("seconds", ["5"])[0]))
            self._send(200, {"slept": True})
        elif parts[0] == "big":
            self._big(int(seen.query.get("size", ["1000"])[0]), "declared" in seen.query)
        elif parts[0] == "redirect":
            self.send_response(302)
            self.send_header("Location", seen.query.get("to", ["/"])[0])
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif parts[0] == "fail":
            self._send(500, {"error": "database on fire", "echo": seen.headers.get("X-Echo")})
        else:
            self._send(404, {"error": f"no route {seen.path}"})

    def _pets(self, seen: Seen, rest: list[str]) -> None:
        state = self.server.state
        if not rest:
            if seen.method == "POST":
                new = {"id": max(state.pets, default=0) + 1, **seen.json()}
                state.pets[new["id"]] = new
                self._send(201, new)
                return
            pets = list(state.pets.values())
            tag = seen.query.get("tag", [None])[0]
            pets = [p for p in pets if tag is None or p["tag"] == tag]
            self._send(200, pets[: int(seen.query.get("limit", ["100"])[0])])
            return
        pet = state.pets.get(int(rest[0])) if rest[0].isdecimal() and len(rest) == 1 else None
        if pet is None:
            self._send(404, {"error": f"no pet {urllib.parse.unquote(rest[0])!r}"})
        elif seen.method == "DELETE":
            del state.pets[pet["id"]]
            self._send(204)
        else:
            self._send(200, pet)

    def _big(self, size: int, declared: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        if declared:
            self.send_header("Content-Length", str(size))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        try:
            while sent < size:
                chunk = b"x" * min(65536, size - sent)
                if declared:
                    self.wfile.write(chunk)
                else:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                sent += len(chunk)
            if not declared:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client stopped reading: that is the point of the test
            pass


def _credentials(seen: Seen, state: PetsState) -> str | None:
    if seen.headers.get("Authorization") == f"Bearer {state.token}":
        return "bearer"
    if seen.headers.get("X-API-Key") == state.api_key:
        return "header key"
    if seen.query.get("api_key") == [state.api_key]:
        return "query key"
    cookies = dict(
        part.strip().split("=", 1)
        for part in seen.headers.get("Cookie", "").split(";")
        if "=" in part
    )
    if cookies.get("session") == state.api_key:
        return "cookie"
    return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: PetsState, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.state = state

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up is fine
            super().handle_error(request, client_address)


class PetsServer:
    """Start with ``with PetsServer() as server:``; ``server.url`` is its base URL."""

    def __init__(
        self, port: int = 0, *, token: str = "s3cret-token", api_key: str = "k3y-value"
    ) -> None:
        self.state = PetsState(token=token, api_key=api_key)
        self.state.reset()
        self._server = _Server(self.state, port)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def seen(self) -> list[Seen]:
        return self.state.seen

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def __enter__(self) -> PetsServer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the example pets API on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--token", default="s3cret-token", help="bearer token /private wants")
    parser.add_argument("--api-key", default="k3y-value", help="API key /private wants")
    args = parser.parse_args()
    server = PetsServer(args.port, token=args.token, api_key=args.api_key)
    print(f"pets API on {server.url} (spec: {server.url}/openapi.yaml)", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
