"""P4Runtime reads of a running fabric's switches, beside the SM: counters and table sizes.

What a filter policy did is in the switches' own counters (``pkey_violations`` per ingress port: frames a
partition check dropped; ``partition_lookups``: what the checks cost), so tests and the evaluation read
those instead of inferring drops from timing. Reads need no arbitration: the SM stays the only writer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import finsy as fy
import grpc
from finsy.proto import p4r, p4r_grpc
from ibsec import names

from . import network, run

READ_TIMEOUT = 30.0  # seconds for one read of a software switch on a loaded machine
Cells = dict[tuple[str, int], int]  # packets per (switch, counter index)


class SwitchReads:
    """Counter cells and table entries of every switch of ``fabric_run``, by P4Info name (finsy's
    P4Schema gives the ids and encodes the wildcard reads)."""

    def __init__(self, fabric_run: run.FabricRun) -> None:
        self.schema = fy.P4Schema(network.build_program(fabric_run.target).p4info)
        doc = json.loads(fabric_run.topology_file.read_text())
        self.switches = {s["name"]: (s["address"], int(s["device_id"])) for s in doc["switches"]}
        self.credentials = None
        if fabric_run.tls is not None:  # the SM's client certificate: reading needs no other identity
            client = fabric_run.tls.clients["sm"]
            self.credentials = grpc.ssl_channel_credentials(
                fabric_run.tls.cacert.read_bytes(), client.key.read_bytes(), client.cert.read_bytes())

    def _channel(self, address: str) -> grpc.Channel:
        if self.credentials is None:
            return grpc.insecure_channel(address)
        return grpc.secure_channel(address, self.credentials)

    def _read(self, switch: str, entity: p4r.Entity) -> Iterator[p4r.Entity]:
        address, device = self.switches[switch]
        with self._channel(address) as channel:
            request = p4r.ReadRequest(device_id=device, entities=[entity])
            for response in p4r_grpc.P4RuntimeStub(channel).Read(request, timeout=READ_TIMEOUT):
                yield from response.entities

    def counter(self, name: str, switch: str | None = None) -> Cells:
        """Packets per (switch, index) of counter ``name``, on ``switch`` or on every switch."""
        entity = fy.P4CounterEntry(name).encode(self.schema)
        return {(sw, e.counter_entry.index.index): int(e.counter_entry.data.packet_count)
                for sw in ([switch] if switch else self.switches) for e in self._read(sw, entity)}

    def entries(self, table: str) -> dict[str, int]:
        """How many entries ``table`` holds, per switch."""
        entity = fy.P4TableEntry(table).encode(self.schema)
        return {sw: sum(1 for _ in self._read(sw, entity)) for sw in self.switches}

    def violations(self) -> Cells:
        """Frames each switch port's partition check dropped (the Ingress P_Key Violation Counter)."""
        return self.counter(names.PKEY_VIOLATIONS)


def moved(before: Cells, after: Cells) -> Cells:
    """The cells that counted something between two reads, and by how much (a reset cell counts from 0)."""
    grown = {cell: count - before.get(cell, 0) if count >= before.get(cell, 0) else count
             for cell, count in after.items()}
    return {cell: n for cell, n in grown.items() if n}
