"""The running SM's control socket: the agents' protocol (:mod:`ibsec.control`), served from the SM's event
loop, one answer per request, any number of requests.

``{"cmd": "status"}`` answers what :meth:`SubnetManager.status` says, ``{"cmd": "partitions"}`` what
:meth:`SubnetManager.partitions_report` says; ``{"cmd": "policy", "policy": "dt"}`` switches the filter
policy at run time. Every request gets exactly one answer line, ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": "..."}``: a request is read and checked by ``ibsec.jsonrequest``, the reader the
agents' sockets use (at most 64 KiB, UTF-8, nesting, an object with a ``"cmd"`` string, every field by
type and range and no unknown one), and a refusal names what is wrong. A client that goes away before its
answer is not an error: it is counted. The socket lives in the run directory (mode 0600: only the user who
runs the SM may change its policy).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import Counter
from pathlib import Path
from typing import Any

from ibsec import control, jsonrequest, names

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
        self._server = await asyncio.start_unix_server(self._connection, path=str(self.path))
        os.chmod(self.path, 0o600)
        self.sm.control_counters = self.counters

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.path.unlink(missing_ok=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.counters["connections"] += 1
        lines = jsonrequest.Lines()
        try:
            while True:
                try:
                    line = await _next_line(reader, lines)
                except jsonrequest.RequestError as err:  # too long: read to its end, answered, go on
                    self.counters["requests"] += 1
                    self.counters["refused"] += 1
                    await self._reply(writer, control.refused(err))
                    continue
                if line is None:
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
                return control.ok(await self.sm.status())
            if cmd == "partitions":
                args.done()
                return control.ok(self.sm.partitions_report())
            if cmd == "policy":
                policy = args.choice("policy", names.POLICIES)
                args.done()
                return control.ok(await self.sm.set_policy(policy))
            raise SmConfigError(f"unknown command {cmd[:64]!r}: expected one of {', '.join(COMMANDS)}")
        except (jsonrequest.RequestError, SmConfigError) as err:
            self.counters["refused"] += 1
            return control.refused(err)

    @staticmethod
    async def _reply(writer: asyncio.StreamWriter, answer: dict[str, Any]) -> None:
        writer.write(control.encode(answer))
        await writer.drain()


async def _next_line(reader: asyncio.StreamReader, lines: jsonrequest.Lines) -> bytes | None:
    """:meth:`jsonrequest.Lines.read` on the event loop: the next request line (at most
    ``jsonrequest.MAX_BYTES``; RequestError for a longer one), None once the client has closed."""
    while (line := lines.next()) is None:
        chunk = await reader.read(lines.CHUNK)
        if not chunk:
            return lines.end()
        lines.feed(chunk)
    return line


async def serve_control(sm: SubnetManager, path: Path) -> ControlServer:
    server = ControlServer(sm, path)
    await server.start()
    return server

