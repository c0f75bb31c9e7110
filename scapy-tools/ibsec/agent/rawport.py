"""The host interface as an AF_PACKET raw socket: whole Ethernet frames in and out, nothing in between.

The kernel's IP stack never sees our RoCEv2 frames as its own (the GIDs are not configured on the
interface), so the agent is the only consumer, exactly like a NIC that owns the port.
"""

from __future__ import annotations

import socket

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
MAX_FRAME = 65536


class RawPort:
    """One raw socket bound to ``iface``; :meth:`recv` returns frames that arrived from the wire only."""

    def __init__(self, iface: str, poll_interval: float = 0.2) -> None:
        self.iface = iface
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self._sock.bind((iface, 0))
        self._sock.settimeout(poll_interval)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.mac: bytes = self._sock.getsockname()[4]

    def send(self, frame: bytes) -> None:
        """Put one frame on the wire."""
        self._sock.send(frame)

    def recv(self) -> bytes | None:
        """The next frame received from the wire, or None after the poll interval passed without one."""
        while True:
            try:
                frame, addr = self._sock.recvfrom(MAX_FRAME)
            except TimeoutError:
                return None
            if addr[2] != PACKET_OUTGOING:
                return frame

    def close(self) -> None:
        """Release the socket."""
        self._sock.close()
