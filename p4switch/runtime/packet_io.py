"""Packet I/O on the stream channel (p4lang/PI's packet_io_mgr): a PacketOut from the primary client goes
into the pipeline at the CPU port with its metadata packed as the program's ``packet_out`` controller
header; a frame the pipeline sends to the CPU port goes to every primary as a PacketIn, its
``packet_in`` header unpacked into metadata."""

from __future__ import annotations

import logging

import grpc
from finsy.proto import p4r

from p4switch.runtime import codec
from p4switch.runtime.arbitration import Arbitration
from p4switch.runtime.device import Device
from p4switch.runtime.entity import Pipeline
from p4switch.runtime.errors import P4RuntimeError, invalid


class PacketIO:
    def __init__(self, device: Device, arbitration: Arbitration, log: logging.Logger) -> None:
        self.device = device
        self.arbitration = arbitration
        self.log = log

    def packet_out(self, pipe: Pipeline, packet: p4r.PacketOut) -> None:
        """Run ``packet`` through the pipeline as a frame from the CPU port."""
        if self.device.cpu_port is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                 "no CPU port: start p4switch with --cpu-port N for packet-out")
        fields = pipe.index.packet_out
        given = {m.metadata_id: m.value for m in packet.metadata}
        unknown = set(given) - {f.id for f in fields}
        if unknown:
            raise invalid(f"unknown packet_out metadata ids {sorted(unknown)}")
        header = 0
        for field in fields:
            if field.id not in given:
                raise invalid(f"packet_out metadata {field.name} missing")
            value = codec.decode_uint(given[field.id], field.bitwidth, f"packet_out metadata {field.name}")
            header = (header << field.bitwidth) | value
        nbits = sum(f.bitwidth for f in fields)
        frame = header.to_bytes(nbits // 8, "big") + packet.payload if nbits else packet.payload
        self.log.debug("packet-out of %d bytes", len(packet.payload))
        self.device.process(self.device.cpu_port, frame)

    def packet_in(self, pipe: Pipeline | None, frame: bytes) -> None:
        """A frame the pipeline sent to the CPU port: strip the packet_in header into metadata."""
        fields = pipe.index.packet_in if pipe else ()
        nbytes = sum(f.bitwidth for f in fields) // 8
        if len(frame) < nbytes:
            self.device.stats["packet_in_too_short"] += 1
            return
        packet = p4r.PacketIn(payload=frame[nbytes:])
        header = int.from_bytes(frame[:nbytes], "big")
        shift = nbytes * 8
        for field in fields:
            shift -= field.bitwidth
            value = (header >> shift) & ((1 << field.bitwidth) - 1)
            packet.metadata.add(metadata_id=field.id, value=codec.encode_uint(value))
        primaries = self.arbitration.primaries()
        if not primaries:
            self.device.stats["packet_in_no_client"] += 1
        for conn in primaries:
            conn.send(p4r.StreamMessageResponse(packet=packet), droppable=True)
