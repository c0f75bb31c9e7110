"""The running SM's control socket: JSON lines, one answer per request, any number of requests.

``{"cmd": "status"}`` answers what :meth:`SubnetManager.status` says, ``{"cmd": "partitions"}`` what
:meth:`SubnetManager.partitions_report` says; ``{"cmd": "policy", "policy": "dt"}`` switches the filter
policy at run time. Every request gets exactly one answer line, ``{"ok": true, ...}`` or ``{"ok": false,
"error": "..."}``: a request is read and checked by ``ibsec.jsonrequest``, the reader the agents' sockets
use (at most 64 KiB, UTF-8, nesting, an object with a ``"cmd"`` string, every field by type and range and
no unknown one), and a refusal names what is wrong. A client that goes away before its answer is not an
error: it is counted. The socket lives in the run directory (mode 0600: only the user who runs the SM may
change its policy).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections import Counter
from pathlib import Path
from typing import Any

from ibsec import jsonrequest

from . import entries
from .core import SmConfigError, SubnetManager

log = logging.getLogger("ibsm.control")

COMMANDS = ("status", "partitions", "policy")


class ControlServer:
    """Serves ``sm`` on a Unix socket; ``counters`` says how requests went (also in ``status``)."""

    def __init__(self, sm: SubnetManager, path: Path) -> None:
        self.sm = sm
        self.path = path
        self.counters: Counter[str] = Counter()
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        # the reader's limit bounds a line: a longer one ends in ValueError, answered and closed
        self._server = await asyncio.start_unix_server(self._connection, path=str(self.path),
                                                       limit=jsonrequest.MAX_BYTES + 1)
        os.chmod(self.path, 0o600)
        self.sm.control_counters = self.counters

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.path.unlink(missing_ok=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.counters["connections"] += 1
        try:
            while True:
                try:
                    line = await reader.readline()
                except ValueError:  # longer than the limit: nothing of it can be trusted to end a line
                    self.counters["refused"] += 1
                    await self._reply(writer, {"ok": False, "error": f"request longer than "
                                               f"{jsonrequest.MAX_BYTES} bytes"})
                    return
                if not line:
                    return
                await self._reply(writer, await self.answer(line))
        except (ConnectionError, asyncio.IncompleteReadError):
            self.counters["client_gone"] += 1  # the client left before its answer: its business
        except Exception:  # never a traceback from asyncio's callback, and the SM keeps serving
            self.counters["internal_errors"] += 1
            log.exception("control connection failed")
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def answer(self, line: bytes) -> dict[str, Any]:
        """The answer to one request line."""
        self.counters["requests"] += 1
        try:
            cmd, values = jsonrequest.parse(line)
            args = jsonrequest.Args(cmd, values)
            if cmd == "status":
                args.done()
                return {"ok": True, "status": await self.sm.status()}
            if cmd == "partitions":
                args.done()
                return {"ok": True, "partitions": self.sm.partitions_report()}
            if cmd == "policy":
                policy = args.choice("policy", entries.POLICIES)
                args.done()
                return {"ok": True, "result": await self.sm.set_policy(policy)}
            raise SmConfigError(f"unknown command {cmd[:64]!r}: expected one of {', '.join(COMMANDS)}")
        except (jsonrequest.RequestError, SmConfigError) as err:
            self.counters["refused"] += 1
            return {"ok": False, "error": str(err)}

    @staticmethod
    async def _reply(writer: asyncio.StreamWriter, answer: dict[str, Any]) -> None:
        writer.write(json.dumps(answer).encode() + b"\n")
        await writer.drain()


async def serve_control(sm: SubnetManager, path: Path) -> ControlServer:
    server = ControlServer(sm, path)
    await server.start()
    return server


def call(path: Path, request: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    """Send one request to a running SM (raises OSError if none listens at ``path``)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    answer: dict[str, Any] = json.loads(data)
    return answer
