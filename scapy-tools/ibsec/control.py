"""The control-socket protocol of the agent and the SM: JSON lines over a Unix stream socket in the run
directory.

Request: one line ``{"cmd": "<name>", ...arguments}``. Reply: zero or more ``{"progress": {...}}`` lines
(the agent's long traffic runs report as they go), then exactly one ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": "<message>"}`` (:func:`ok`, :func:`refused`). A connection may carry any number of
requests in turn. A request is read and checked by :mod:`ibsec.jsonrequest` (size, nesting, numbers, every
field's type and range) before anything runs; a refused one is answered and the connection goes on.

Both ends speak it with the same code: :class:`ControlClient` talks to either; :class:`ControlServer`
serves the agent from threads; the SM, an asyncio program, serves it from its event loop (ibsm.control)
with the same replies. The socket file is created mode 0600: whoever can talk to it can connect QPs and
write memory (agent) or change the filter policy (SM).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import socketserver
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from ibsec import jsonrequest

log = logging.getLogger("ibsec.control")

Progress = Callable[[dict[str, Any]], None]
MAX_REQUEST = 1 << 22  # bytes of one request line: 2 MiB of data in hex, and a bound on what a client costs


class CommandError(Exception):
    """A request the server refuses (unknown command, bad argument); the message goes back to the client."""


def ok(result: Any) -> dict[str, Any]:
    """The final reply to a request that ran."""
    return {"ok": True, "result": result}


def refused(error: Exception | str) -> dict[str, Any]:
    """The final reply to a request that was refused (the message says why, for the client)."""
    return {"ok": False, "error": str(error)}


def encode(message: dict[str, Any]) -> bytes:
    """One message as the line it travels as."""
    return json.dumps(message).encode() + b"\n"


class Handler(Protocol):
    """What the control server dispatches to."""

    def dispatch(self, cmd: str, args: dict[str, Any], progress: Progress) -> Any:
        """Run one command; raise :class:`CommandError` to refuse it."""


class _Connection(socketserver.StreamRequestHandler):
    server: ControlServer

    def handle(self) -> None:
        lines = jsonrequest.Lines(MAX_REQUEST)
        while True:
            try:
                line = lines.read(self.rfile.read1)
            except jsonrequest.RequestError as exc:
                self._reply(refused(exc))
                continue
            except OSError:  # the client went away mid-line: nothing to answer
                return
            if line is None:
                return
            try:
                self._reply(self._answer(line))
            except OSError:
                return

    def _answer(self, line: bytes) -> dict[str, Any]:
        try:
            cmd, args = jsonrequest.parse(line, max_bytes=MAX_REQUEST)
            result = self.server.handler.dispatch(cmd, args, lambda p: self._reply({"progress": p}))
            return ok(result)
        except (CommandError, jsonrequest.RequestError) as exc:
            return refused(exc)
        except OSError:
            raise
        except Exception as exc:  # the agent must survive any request; the log has the traceback
            log.exception("control command failed")
            return refused(f"internal error: {type(exc).__name__}")

    def _reply(self, message: dict[str, Any]) -> None:
        self.wfile.write(encode(message))
        self.wfile.flush()


class ControlServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """Serves :class:`Handler` on ``path`` in a background thread until :meth:`stop`."""

    daemon_threads = True

    def __init__(self, path: Path, handler: Handler) -> None:
        path.unlink(missing_ok=True)
        self.handler = handler
        self.path = path
        old = os.umask(0o177)
        try:
            super().__init__(str(path), _Connection)
        finally:
            os.umask(old)
        self._thread = threading.Thread(target=self.serve_forever, name="control", daemon=True)

    def start(self) -> None:
        """Start answering requests."""
        self._thread.start()

    def stop(self) -> None:
        """Stop answering and remove the socket file."""
        self.shutdown()
        self.server_close()
        self.path.unlink(missing_ok=True)


class ControlClient:
    """A connection to an agent's or the SM's control socket (``ibsec-agentctl``, ``sm status``, the
    launcher, the tests, the fuzzers and the benches)."""

    def __init__(self, path: Path | str, timeout: float | None = 30.0) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        self._sock.connect(str(path))
        self._file = self._sock.makefile("rwb")

    def stream(self, cmd: str, **args: Any) -> Iterator[dict[str, Any]]:
        """Send one request; yield every reply line, the final one last."""
        self._file.write(encode({"cmd": cmd, **args}))
        self._file.flush()
        while True:
            line = self._file.readline()
            if not line:
                raise ConnectionError("the server closed the control connection")
            message: dict[str, Any] = json.loads(line)
            yield message
            if "progress" not in message:
                return

    def raw(self, line: bytes) -> bytes:
        """Send ``line`` as it is (it need not be JSON) and return the answer line: for the fuzz suite."""
        self._file.write(line + b"\n")
        self._file.flush()
        return self._file.readline()

    def call(self, cmd: str, **args: Any) -> Any:
        """Send one request and return its result; raise :class:`CommandError` if the server refused it."""
        final: dict[str, Any] = {}
        for message in self.stream(cmd, **args):
            final = message
        if not final.get("ok"):
            raise CommandError(final.get("error", "no reply"))
        return final.get("result")

    def close(self) -> None:
        """Close the connection."""
        self._file.close()
        self._sock.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def call(path: Path | str, cmd: str, timeout: float | None = 30.0, **args: Any) -> Any:
    """One request on a connection of its own, its result: CommandError if the server refused it, OSError
    if no server listens at ``path``."""
    with ControlClient(path, timeout) as client:
        return client.call(cmd, **args)


def call_raw(path: Path | str, line: bytes, timeout: float | None = 30.0) -> dict[str, Any]:
    """Send ``line`` as it is on a connection of its own (the fuzzers send malformed ones) and return the
    first answer (a line that holds two requests gets two)."""
    with ControlClient(path, timeout) as client:
        answer: dict[str, Any] = json.loads(client.raw(line))
        return answer
