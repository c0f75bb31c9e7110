"""The running SM's control socket: one JSON request per connection, one JSON answer.

``{"cmd": "status"}`` answers what :meth:`SubnetManager.status` says, ``{"cmd": "partitions"}`` what
:meth:`SubnetManager.partitions_report` says; ``{"cmd": "policy", "policy": "dt"}`` switches the filter
policy at run time. The socket lives in the run directory (mode 0600: only the user
who runs the SM may change its policy).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from pathlib import Path
from typing import Any

from .core import SmConfigError, SubnetManager


async def serve_control(sm: SubnetManager, path: Path) -> asyncio.AbstractServer:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = json.loads(await reader.readline())
            if request.get("cmd") == "status":
                answer: dict[str, Any] = {"ok": True, "status": await sm.status()}
            elif request.get("cmd") == "partitions":
                answer = {"ok": True, "partitions": sm.partitions_report()}
            elif request.get("cmd") == "policy":
                answer = {"ok": True, "result": await sm.set_policy(str(request.get("policy")))}
            else:
                answer = {"ok": False, "error": f"unknown command {request.get('cmd')!r}"}
        except (ValueError, SmConfigError) as err:
            answer = {"ok": False, "error": str(err)}
        writer.write(json.dumps(answer).encode() + b"\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_unix_server(handle, path=str(path))
    os.chmod(path, 0o600)
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
