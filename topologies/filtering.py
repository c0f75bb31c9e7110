"""What a filter did to a flood, read from the switches' pcaps: frames in, frames on, frames at the victim.

A switch writes a frame to its ``<port>_in.pcap`` before its pipeline sees it and to ``<port>_out.pcap``
after it sent it, one frame at a time, so each pcap is in processing order. The SM writes its
``filter-installed`` event after the switch acknowledged the filter's entries. Hence a frame that entered
the attacker's switch after that event met the filter, however slow the machine: if it still left, the
filter let it through. Comparing arrival times with the SM's event, never departure times, keeps the
account free of races between the switch and the SM (a frame already in the pipeline when the entries
land may leave just after the event, and rightly so).

Each forwarded frame is matched to its arrival in order by PSN (the flood tool numbers its frames; one
switch handles one port's frames in order), which skips frames the switch dropped or failed to send.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ibsec import rocev2
from scapy.utils import RawPcapReader

PCAP_HEADER = 24  # a pcap the switch has not written a frame to yet may be shorter


@dataclass(frozen=True)
class Frame:
    """One captured attack frame: when the switch wrote it, and its PSN."""

    wall: float
    psn: int


def attack_frames(pcap: Path, pkey: int, window: tuple[float, float] = (0.0, float("inf"))) -> list[Frame]:
    """The RoCEv2 frames with P_Key ``pkey`` in one pcap, captured within ``window`` (wall times)."""
    frames: list[Frame] = []
    if not pcap.exists() or pcap.stat().st_size < PCAP_HEADER:
        return frames
    for data, meta in RawPcapReader(str(pcap)):
        if len(data) >= rocev2.PSN_AT.stop and rocev2.to_rocev2_port(data) \
                and int.from_bytes(data[rocev2.PKEY_AT], "big") == pkey:
            wall = meta.sec + meta.usec / 1e6
            if window[0] <= wall < window[1]:
                frames.append(Frame(wall, int.from_bytes(data[rocev2.PSN_AT], "big")))
    return frames


def merged(streams: Iterable[list[Frame]]) -> list[Frame]:
    """Frames of several pcaps of one switch in the order it wrote them."""
    return sorted((f for stream in streams for f in stream), key=lambda f: f.wall)


def match(later: Sequence[Frame], earlier: Sequence[Frame]) -> list[int]:
    """For each frame of ``later`` (in order), the index in ``earlier`` of the same frame: the next one
    with its PSN (FIFO, so frames that went missing in between are skipped). -1 where none is left."""
    found, at = [], 0
    for frame in later:
        while at < len(earlier) and earlier[at].psn != frame.psn:
            at += 1
        found.append(at if at < len(earlier) else -1)
        at += 1
    return found


@dataclass(frozen=True)
class FilterAccount:
    """A flood between its entry into the attacker's switch and the victim's port."""

    received: int  # attack frames into the attacker's switch on the attacker's port
    first_arrival: float | None  # wall times of the first and the last of them
    last_arrival: float | None
    forwarded: int  # attack frames it sent on toward the victim
    reached: int  # attack frames its last switch delivered to the victim
    received_after_filter: int  # arrived at the attacker's switch after the filter was acknowledged
    passed_after_filter: int  # of those, forwarded all the same: 0 when the filter holds
    reached_after_filter: int  # attack frames at the victim beyond those let on before the filter: 0


def account(received: list[Frame], forwarded: list[Frame], reached: list[Frame],
            filter_wall: float | None) -> FilterAccount:
    """Split the flood at ``filter_wall`` (the SM's filter-installed event; None: no filter went up)."""
    cutoff = float("inf") if filter_wall is None else filter_wall
    arrivals = match(forwarded, received)
    leaked = sum(1 for at in arrivals if at < 0 or received[at].wall > cutoff)
    return FilterAccount(
        received=len(received),
        first_arrival=received[0].wall if received else None,
        last_arrival=received[-1].wall if received else None,
        forwarded=len(forwarded),
        reached=len(reached),
        received_after_filter=sum(1 for f in received if f.wall > cutoff),
        passed_after_filter=leaked,
        # paths may reorder frames but never create them: whatever reached the victim beyond what left
        # the attacker's switch before the filter got through after it
        reached_after_filter=max(0, len(reached) - (len(forwarded) - leaked)),
    )


@dataclass(frozen=True)
class Capture:
    """Where a flood's frames show up: the pcaps of the attacker's port, of its switch's other ports (the
    way on), and of the victim's port."""

    received: Path
    onward: list[Path]
    reached: Path

    def account(self, pkey: int, filter_wall: float | None,
                window: tuple[float, float] = (0.0, float("inf"))) -> FilterAccount:
        frames = [attack_frames(p, pkey, window) for p in (self.received, self.reached)]
        onward = merged(attack_frames(p, pkey, window) for p in self.onward)
        return account(frames[0], onward, frames[1], filter_wall)
