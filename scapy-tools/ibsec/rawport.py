"""A host interface as an AF_PACKET raw socket: whole Ethernet frames in and out, nothing in between.

The kernel's IP stack never sees our RoCEv2 frames as its own (the GIDs are not configured on the
interface), so the owner of the port is its only consumer, like a NIC that owns the port: the agent
(frames from the wire only) and the attack tools (which sniff what the host sends too) use this one class.
"""

from __future__ import annotations

import socket
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
MAX_FRAME = 65536


class RawPort:
    """One raw socket bound to ``iface``: :meth:`send` puts a frame on the wire, :meth:`recv` returns the
    next one that arrived (and, if asked, one the host itself sent), or None once a poll interval passed."""

    def __init__(self, iface: str, poll_interval: float = 0.2, receive_buffer: int | None = None) -> None:
        self.iface = iface
        self.poll_interval = poll_interval
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self._sock.bind((iface, 0))
        self._timeout: float | None = None  # blocking until the first recv: a flood's sends wait, never fail
        if receive_buffer is not None:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.mac: bytes = self._sock.getsockname()[4]

    def send(self, frame: bytes) -> None:
        """Put one frame on the wire."""
        self._sock.send(frame)

    def recv(self, timeout: float | None = None, outgoing: bool = False) -> bytes | None:
        """The next frame received from the wire (or sent by this host, with ``outgoing``), or None after
        ``timeout`` seconds (the poll interval by default) passed without one."""
        wait = self.poll_interval if timeout is None else timeout
        deadline = time.monotonic() + wait
        self._set_timeout(wait)
        while True:
            try:
                frame, addr = self._sock.recvfrom(MAX_FRAME)
            except TimeoutError:
                return None
            if outgoing or addr[2] != PACKET_OUTGOING:
                return frame
            left = deadline - time.monotonic()  # the host's own frames never stretch the wait
            if left <= 0:
                return None
            self._set_timeout(left)

    def _set_timeout(self, seconds: float) -> None:
        if seconds != self._timeout:  # the receive path sets it once, not per frame
            self._sock.settimeout(seconds)
            self._timeout = seconds

    def close(self) -> None:
        """Release the socket."""
        self._sock.close()
