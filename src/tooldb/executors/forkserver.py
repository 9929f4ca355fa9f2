"""The host's side of the script fork server (the server is ``sandbox_launcher.Zygote``).

One server per interpreter, started on first use (``get``) inside bubblewrap's
sandbox (the file system view scripts see, see bwrap.py) with an empty environment
and restarted on the next call after it dies. A call sends it the call's stdin, stdout
and stderr (memfds the call's process 1 fills as it ends) and a memfd holding the
launcher config, which the server passes on without
reading (no call's environment lingers in the memory later calls are forked from). It
answers with a pidfd of the call's process 1 (killing it kills everything the script
started) and later with its exit status. A reader thread dispatches the answers, so
any number of calls from any threads and event loops are in flight at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import Future, InvalidStateError
from pathlib import Path
from typing import Any

_MAX_REPLY = 4096
#: Calls made ready ahead (process 1 and the script's process, forked and waiting), so
#: that a burst of this many calls starts without waiting for process creation.
SPARES = 8


class ForkServerError(RuntimeError):
    """The server could not take the call, or died before the call ended."""


class ForkedCall:
    """One call on the server: its process (once started) and how it ended."""

    def __init__(self) -> None:
        self.exited: Future[int] = Future()  # the exit code, as subprocess gives it
        self._lock = threading.Lock()
        self._pidfd: int | None = None
        self._kill = False

    def kill(self) -> None:
        """SIGKILL the call's process 1 (the whole namespace dies), now or as soon as
        the server says it started; nothing once it has ended."""
        with self._lock:
            self._kill = True
            if self._pidfd is not None:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def _started(self, pidfd: int) -> None:
        with self._lock:
            self._pidfd = pidfd
        if self._kill:
            self.kill()

    def _ended(self, code: int | None, error: str | None) -> None:
        with self._lock:
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        with contextlib.suppress(InvalidStateError):  # a waiter may have cancelled it
            if error is not None:
                self.exited.set_exception(ForkServerError(error))
            else:
                assert code is not None
                self.exited.set_result(code)


class ForkServer:
    """A running server process and the socket to it."""

    def __init__(self, python: str, launcher: str, prefix: list[str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            serve = ["-c", launcher, "--serve", str(theirs.fileno()), str(SPARES)]
            self.process = subprocess.Popen(
                [*prefix, os.path.realpath(python), "-I", "-S", "-X", "utf8", *serve],
                pass_fds=[theirs.fileno()],
                env={},
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # no terminal signals (Ctrl-C) from the host's group
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._socket = ours
        self._wrapped = bool(prefix)
        self._pid: int | None = None
        self._lock = threading.Lock()
        self._calls: dict[int, ForkedCall] = {}
        self._next_id = 0
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="tooldb-forkserver", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        """The server's process: the wrapper's (bwrap's) only child, once it is there."""
        if self._pid is None and self._wrapped:
            path = f"/proc/{self.process.pid}/task/{self.process.pid}/children"
            deadline = time.monotonic() + 5
            while self._pid is None and time.monotonic() < deadline:
                with contextlib.suppress(OSError, ValueError):
                    self._pid = int(Path(path).read_text().split()[0])
                if self._pid is None:
                    time.sleep(0.005)
        return self._pid if self._pid is not None else self.process.pid

    @property
    def alive(self) -> bool:
        return not self._closed

    def spawn(self, request: dict[str, Any], fds: list[int]) -> ForkedCall:
        """Send one call: ``request`` says whether it may use the network, ``fds`` are
        its stdin, stdout and stderr memfds and a memfd with its launcher config (still ours to
        close: the server gets copies)."""
        call = ForkedCall()
        with self._lock:
            if self._closed:
                raise ForkServerError("the script fork server has exited")
            self._next_id += 1
            call_id = self._next_id
            self._calls[call_id] = call
        try:
            socket.send_fds(self._socket, [json.dumps({**request, "id": call_id}).encode()], fds)
        except OSError as exc:
            with self._lock:
                self._calls.pop(call_id, None)
            raise ForkServerError(f"the script fork server did not take the call: {exc}") from None
        return call

    def close(self) -> None:
        """Hang up: the server exits, and the calls still running die with it."""
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        self._reader.join(timeout=10)

    def _read(self) -> None:
        try:
            while self._dispatch():
                pass
        finally:
            self._lost()

    def _dispatch(self) -> bool:
        """Hand one reply to its call; False once the server is gone."""
        try:
            message, fds, _, _ = socket.recv_fds(self._socket, _MAX_REPLY, 1)
        except OSError:
            return False
        if not message:
            return False
        reply = json.loads(message)
        with self._lock:
            call = self._calls.get(reply["id"])
            if call is not None and "pid" not in reply:
                del self._calls[reply["id"]]
        if call is None:  # cannot happen; do not leak what came with it
            for fd in fds:
                os.close(fd)
        elif "pid" in reply:
            call._started(fds[0])
        elif "error" in reply:
            call._ended(None, f"the script fork server could not start the call: {reply['error']}")
        else:
            call._ended(int(reply["status"]), None)
        return True

    def _lost(self) -> None:
        """The server is gone (or we hung up): kill and fail every call it had."""
        with self._lock:
            self._closed = True
            calls, self._calls = list(self._calls.values()), {}
        for call in calls:
            call.kill()
            call._ended(None, "the script fork server exited during the call")
        self._socket.close()
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait()


_servers: dict[str, ForkServer] = {}
_servers_lock = threading.Lock()


def _forget_after_fork() -> None:
    """In a child of this process (multiprocessing, say): the servers and their reader
    threads are the parent's. Close our copies of the sockets (the parent keeps its
    own) and start afresh on first use."""
    global _servers_lock
    _servers_lock = threading.Lock()
    for server in _servers.values():
        server._socket.close()
    _servers.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def get(python: str, launcher: str, prefix: list[str]) -> ForkServer:
    """The running server for ``python``, started (again) if there is none, under
    ``prefix`` (bwrap and its arguments: the sandbox it and its calls run in)."""
    with _servers_lock:
        server = _servers.get(python)
        if server is None or not server.alive:
            server = _servers[python] = ForkServer(python, launcher, prefix)
        return server


def running(python: str) -> ForkServer | None:
    """The server for ``python`` if one is running (tests and diagnostics)."""
    with _servers_lock:
        server = _servers.get(python)
    return server if server is not None and server.alive else None


def shutdown() -> None:
    """Stop every server (their running calls are killed)."""
    with _servers_lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.close()
