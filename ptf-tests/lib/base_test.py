"""PTF base test: push the pipeline over P4Runtime once, record every write, undo it after each test.

Test parameters (ptf --test-params): grpc_addr, device_id, p4info (text P4Info path), device_config
(program path, the target's JSON). ptf-tests/test_ptf.py passes them; see docs/p4-pipeline.md.
"""

from __future__ import annotations

import atexit
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import finsy as fy
import grpc
import ptf
from finsy.p4entity import P4Entity
from finsy.proto import p4r
from p4runtime_client import P4RuntimeClient
from ptf.base_tests import BaseTest
from ptf.testutils import test_params_get

Match = int | tuple[int, int]
"""An exact value, an (lpm value, prefix length) or a (ternary value, mask) pair (finsy's match values)."""

_shared: dict[str, Any] = {}


def table_entry(table: str, match: Mapping[str, Match], action: str | None = None,
                params: Mapping[str, int] | None = None, *, default: bool = False) -> fy.P4TableEntry:
    """One table entry by names (with its action, or none: a match for Read or Delete); finsy encodes it
    with the P4Info's ids and widths. Tables, actions and fields are named as in P4Info: name or alias."""
    chosen = fy.P4TableAction(action, **(params or {})) if action is not None else None
    return fy.P4TableEntry(table, match=fy.P4TableMatch(match), action=chosen, is_default_action=default)


def _connect(params: Mapping[str, Any]) -> tuple[P4RuntimeClient, fy.P4Schema]:
    """One client per PTF run; the pipeline is pushed only when the device holds a different one."""
    if "client" not in _shared:
        schema = fy.P4Schema(Path(params["p4info"]))
        config = Path(params["device_config"]).read_bytes()
        digest = hashlib.sha256(config + schema.p4info.SerializeToString()).digest()
        cookie = int.from_bytes(digest[:8], "big")
        client = P4RuntimeClient(params["grpc_addr"], int(params.get("device_id", 1)))
        if client.pipeline_cookie() != cookie:
            client.set_pipeline(schema.p4info, config, cookie)
        atexit.register(client.close)
        _shared.update(client=client, schema=schema)
    return _shared["client"], _shared["schema"]


class P4RuntimeTest(BaseTest):
    """Plumbing: writes of finsy entities (encoded with the pipeline's P4Schema) that are undone in
    tearDown, counters, meters, packet I/O."""

    def setUp(self) -> None:
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        self.client, self.schema = _connect(test_params_get())
        self.client.drain_packet_ins()
        self._undo: list[tuple[p4r.Update.Type.ValueType, Any]] = []

    def tearDown(self) -> None:
        self.undo_writes()
        BaseTest.tearDown(self)

    # ---- writes and their undo --------------------------------------------------------------------------

    def insert(self, entity: P4Entity) -> None:
        """INSERT ``entity``; tearDown deletes it."""
        message = entity.encode(self.schema)
        self.client.write(p4r.Update.INSERT, message)
        self._undo.append((p4r.Update.DELETE, message))

    def modify(self, entity: P4Entity, previous: p4r.Entity) -> None:
        """MODIFY to ``entity``; tearDown writes ``previous`` (read before by the caller) back."""
        self.client.write(p4r.Update.MODIFY, entity.encode(self.schema))
        self._undo.append((p4r.Update.MODIFY, previous))

    def undo_writes(self) -> None:
        """Undo every recorded write, newest first (entries before the groups they point to). One failed
        undo does not stop the others, so the next test still starts from a clean switch."""
        failures: list[grpc.RpcError] = []
        while self._undo:
            update_type, entity = self._undo.pop()
            try:
                self.client.write(update_type, entity)
            except grpc.RpcError as err:
                failures.append(err)
        if failures:
            raise failures[0]

    # ---- tables -----------------------------------------------------------------------------------------

    def insert_table_entry(self, table: str, match: Mapping[str, Match], action: str,
                           params: Mapping[str, int] | None = None) -> None:
        """Insert a direct table entry."""
        self.insert(table_entry(table, match, action, params))

    def set_default_action(self, table: str, action: str, params: Mapping[str, int] | None = None) -> None:
        """Change a table's default action; tearDown restores the one it had."""
        (previous,) = self.client.read(fy.P4TableEntry(table, is_default_action=True).encode(self.schema))
        self.modify(table_entry(table, {}, action, params, default=True), previous)

    # ---- counters and meters ----------------------------------------------------------------------------

    def read_counter(self, name: str, index: int) -> int:
        """Packets counted in cell ``index`` of the indexed counter ``name``."""
        (entity,) = self.client.read(fy.P4CounterEntry(name, index=index).encode(self.schema))
        return int(entity.counter_entry.data.packet_count)

    def reset_counter(self, name: str, index: int) -> None:
        """Write zero into one cell of an indexed counter; tearDown writes the old value back."""
        (previous,) = self.client.read(fy.P4CounterEntry(name, index=index).encode(self.schema))
        self.modify(fy.P4CounterEntry(name, index=index, data=fy.P4CounterData()), previous)

    def delete(self, entity: P4Entity) -> None:
        """DELETE ``entity`` (one this test inserted): it is no longer undone in tearDown."""
        message = entity.encode(self.schema)
        self.client.write(p4r.Update.DELETE, message)
        self._undo.remove((p4r.Update.DELETE, message))

    def set_meter(self, name: str, index: int, cir: int, cburst: int, pir: int, pburst: int) -> None:
        """Configure one cell of an indexed meter; tearDown restores its previous configuration."""
        (previous,) = self.client.read(fy.P4MeterEntry(name, index=index).encode(self.schema))
        config = fy.P4MeterConfig(cir=cir, cburst=cburst, pir=pir, pburst=pburst)
        self.modify(fy.P4MeterEntry(name, index=index, config=config), previous)

    # ---- packet I/O -------------------------------------------------------------------------------------

    def send_packet_out(self, payload: bytes, **metadata: int) -> None:
        """A PacketOut with packet_out header fields given by name; the others (padding) are zero."""
        header = self.schema.controller_packet_metadata["packet_out"]
        self.client.packet_out(payload, header.encode({m.name: 0 for m in header.metadata} | metadata))

    def packet_in_metadata(self, packet_in: Any) -> dict[str, int]:
        """The packet_in header fields of a PacketIn, by name."""
        header = self.schema.controller_packet_metadata["packet_in"]
        return {name: int(value) for name, value in header.decode(packet_in.metadata).items()}
