"""Ports as pcap files (``--use-files SECONDS``, as BMv2): port ``N@NAME`` reads the frames of
``NAME_in.pcap`` and writes what the switch sends on it to ``NAME_out.pcap``.

After waiting SECONDS (time for a controller to program the switch), the input files of all ports are
replayed merged in timestamp order, as fast as the pipeline takes them (BMv2 does not keep their timing
either); the switch then keeps running, serving P4Runtime, until it is stopped. A test or a user can so
run a program on recorded traffic without interfaces or root."""

from __future__ import annotations

import heapq
import logging
import struct
import threading
from collections import Counter
from collections.abc import Iterator
from typing import BinaryIO

from p4switch.dataplane import MAX_FRAME, PcapFile, dump_packet
from p4switch.runtime.device import Device

LINKTYPE_ETHERNET = 1
MAGICS = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
          b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}
"""pcap magic numbers: byte order and timestamp unit (microseconds or nanoseconds)"""


class PcapError(ValueError):
    """The file is not a pcap file of Ethernet frames."""


def read_pcap(stream: BinaryIO, name: str) -> Iterator[tuple[float, bytes]]:
    """(timestamp, frame) of every record; a truncated last record ends the file, bad headers raise."""
    header = stream.read(24)
    if len(header) < 24 or header[:4] not in MAGICS:
        raise PcapError(f"{name} is not a pcap file")
    order, unit = MAGICS[header[:4]]
    linktype = struct.unpack(order + "I", header[20:24])[0] & 0xFFFF
    if linktype != LINKTYPE_ETHERNET:
        raise PcapError(f"{name} has link type {linktype}, not Ethernet (1)")
    record = struct.Struct(order + "IIII")
    while len(head := stream.read(record.size)) == record.size:
        seconds, fraction, captured, _ = record.unpack(head)
        if captured > MAX_FRAME:
            raise PcapError(f"{name}: a record of {captured} bytes is larger than any frame")
        data = stream.read(captured)
        if len(data) < captured:
            return
        yield seconds + fraction * unit, data


class FileDataplane:
    """The ports of ``--use-files``: pcap input replayed into the device, output appended to pcaps."""

    def __init__(self, device: Device, ports: list[tuple[int, str]], log: logging.Logger, wait: float,
                 dump_bytes: int = 0) -> None:
        self.device, self.log, self.wait, self.dump_bytes = device, log, wait, dump_bytes
        self.inputs: dict[int, BinaryIO] = {}
        self.outputs: dict[int, PcapFile] = {}
        self.stats: Counter[str] = Counter()
        self._out_lock = threading.Lock()
        """PacketOut (gRPC threads) and the replay thread both send: one pcap record at a time"""
        try:
            for number, name in ports:
                self.inputs[number] = open(f"{name}_in.pcap", "rb")  # noqa: SIM115 - closed in close()
                self.outputs[number] = PcapFile(f"{name}_out.pcap")
        except OSError:
            self.close()
            raise
        self.names = dict(ports)
        device.transmit = self.transmit

    def transmit(self, number: int, frame: bytes) -> None:
        out = self.outputs.get(number)
        if out is None:
            self.stats["tx_no_such_port"] += 1
            return
        with self._out_lock:
            out.write(frame)
            self.stats[f"tx_port_{number}"] += 1
        if self.dump_bytes:
            dump_packet(self.log, "Sending", number, frame, self.dump_bytes)

    def _frames(self) -> Iterator[tuple[float, int, bytes]]:
        """All input frames of all ports, merged by timestamp (ties: port order)."""
        def one(number: int) -> Iterator[tuple[float, int, bytes]]:
            for stamp, frame in read_pcap(self.inputs[number], f"{self.names[number]}_in.pcap"):
                yield stamp, number, frame
        return heapq.merge(*(one(number) for number in sorted(self.inputs)), key=lambda item: item[:2])

    def run(self, stop: threading.Event) -> None:
        """Wait, then replay every input frame (returns early when ``stop`` is set)."""
        if stop.wait(self.wait):
            return
        try:
            for _, number, frame in self._frames():
                if stop.is_set():
                    return
                self._process(number, frame)
        except PcapError as err:
            self.log.error("pcap input stopped: %s", err)
        self.log.info("pcap input replayed: %d frames", self.stats["rx"])

    def _process(self, number: int, frame: bytes) -> None:
        self.stats["rx"] += 1
        if self.dump_bytes:
            dump_packet(self.log, "Received", number, frame, self.dump_bytes)
        try:
            self.device.process(number, frame)
        except Exception:  # noqa: BLE001 - one bad frame must not stop the switch
            self.stats["process_errors"] += 1
            self.log.exception("pipeline failed on a frame from port %d", number)

    def close(self) -> None:
        for stream in self.inputs.values():
            stream.close()
        for out in self.outputs.values():
            out.close()
        if self.stats:
            self.log.info("pcap ports: %s", dict(self.stats))
