"""The account of a flood from pcaps (topologies.filtering) and counter deltas (topologies.counters), on
frames and readings made up here: a filter that holds, one that leaks, frames lost on the way, a frame in
the pipeline when the filter lands, pcaps with other traffic, outside the window, or no frame yet."""

from __future__ import annotations

from pathlib import Path

from scapy.utils import RawPcapWriter

from p4switch.dataplane import PcapFile
from topologies import counters, filtering
from topologies.filtering import Frame

PKEY = 0x7BAD


def frames(*walls: float) -> list[Frame]:
    """Frames numbered as the flood tool numbers them, one per wall time."""
    return [Frame(wall, psn % 256) for psn, wall in enumerate(walls)]


def test_a_filter_that_holds_lets_on_only_frames_that_arrived_before_it() -> None:
    received = frames(1.0, 1.1, 1.2, 1.3, 1.4)
    forwarded = [Frame(1.05, 0), Frame(1.15, 1), Frame(1.55, 2)]  # frame 2 was in the pipeline at 1.5
    got = filtering.account(received, forwarded, forwarded[:2], filter_wall=1.25)
    assert (got.received, got.forwarded, got.reached) == (5, 3, 2)
    assert got.received_after_filter == 2 and got.passed_after_filter == 0
    assert got.reached_after_filter == 0 and (got.first_arrival, got.last_arrival) == (1.0, 1.4)


def test_a_frame_that_arrived_after_the_filter_and_left_is_a_leak_and_so_is_what_it_brings() -> None:
    received = frames(1.0, 1.1, 1.2, 1.3)
    forwarded = [Frame(1.05, 0), Frame(1.35, 3)]  # frames 1 and 2 dropped, 3 let on: the filter leaked
    got = filtering.account(received, forwarded, forwarded, filter_wall=1.15)
    assert got.passed_after_filter == 1 and got.reached_after_filter == 1


def test_frames_lost_on_the_way_are_skipped_not_mistaken_for_leaks() -> None:
    received = frames(1.0, 1.1, 1.2, 1.3)
    forwarded = [Frame(1.05, 0), Frame(1.25, 2)]  # frame 1 failed to send
    got = filtering.account(received, forwarded, [Frame(1.3, 2)], filter_wall=1.28)
    assert got.passed_after_filter == got.reached_after_filter == 0


def test_without_a_filter_nothing_counts_as_after_it() -> None:
    received = frames(1.0, 1.1)
    got = filtering.account(received, received, received, filter_wall=None)
    assert got.received_after_filter == got.passed_after_filter == got.reached_after_filter == 0


def test_a_capture_reads_the_flood_from_pcaps_within_its_window(tmp_path: Path) -> None:
    def frame(pkey: int, psn: int) -> bytes:
        eth_ipv6_udp = bytearray(62)
        eth_ipv6_udp[56:58] = (4791).to_bytes(2, "big")
        bth = bytearray(12)
        bth[2:4], bth[9:12] = pkey.to_bytes(2, "big"), psn.to_bytes(3, "big")
        return bytes(eth_ipv6_udp + bth)

    def pcap(name: str, rows: list[tuple[float, int, int]]) -> Path:
        path = tmp_path / name
        writer = RawPcapWriter(str(path), linktype=1)
        writer.write_header(None)
        for wall, pkey, psn in rows:
            sec = int(wall)
            writer.write_packet(frame(pkey, psn), sec=sec, usec=round((wall - sec) * 1e6))
        writer.close()
        return path

    received = pcap("in.pcap", [(10.0, PKEY, 0), (10.1, 0x8001, 7), (10.2, PKEY, 1), (20.0, PKEY, 2)])
    PcapFile(str(tmp_path / "quiet.pcap")).close()  # a port the switch opened and never sent a frame on
    onward = [pcap("up.pcap", [(10.05, PKEY, 0)]), tmp_path / "quiet.pcap", tmp_path / "no-such.pcap"]
    reached = pcap("out.pcap", [(10.07, PKEY, 0)])
    got = filtering.Capture(received, onward, reached).account(PKEY, 10.15, window=(9.0, 15.0))
    assert (got.received, got.forwarded, got.reached, got.received_after_filter) == (2, 1, 1, 1)
    assert got.passed_after_filter == got.reached_after_filter == 0


def test_counter_cells_that_moved_and_a_reset_one_counts_from_zero() -> None:
    before = {("s1", 1): 5, ("s1", 2): 7, ("s2", 1): 3}
    after = {("s1", 1): 5, ("s1", 2): 9, ("s2", 1): 1, ("s2", 2): 4}
    assert counters.moved(before, after) == {("s1", 2): 2, ("s2", 1): 1, ("s2", 2): 4}
