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

import grpc
import ptf
from finsy.proto import p4r
from p4info_helper import Match, P4InfoHelper, decode, encode
from p4runtime_client import P4RuntimeClient
from ptf.base_tests import BaseTest
from ptf.testutils import test_params_get

_shared: dict[str, Any] = {}


def _connect(params: Mapping[str, Any]) -> tuple[P4RuntimeClient, P4InfoHelper]:
    """One client per PTF run; the pipeline is pushed only when the device holds a different one."""
    if "client" not in _shared:
        p4info = P4InfoHelper.from_file(params["p4info"])
        config = Path(params["device_config"]).read_bytes()
        digest = hashlib.sha256(config + p4info.p4info.SerializeToString()).digest()
        cookie = int.from_bytes(digest[:8], "big")
        client = P4RuntimeClient(params["grpc_addr"], int(params.get("device_id", 1)))
        if client.pipeline_cookie() != cookie:
            client.set_pipeline(p4info.p4info, config, cookie)
        atexit.register(client.close)
        _shared.update(client=client, p4info=p4info)
    return _shared["client"], _shared["p4info"]


class P4RuntimeTest(BaseTest):
    """Plumbing: entity builders by name, writes that are undone in tearDown, counters, packet I/O."""

    def setUp(self) -> None:
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        self.client, self.p4info = _connect(test_params_get())
        self.client.drain_packet_ins()
        self._undo: list[tuple[p4r.Update.Type.ValueType, Any]] = []

    def tearDown(self) -> None:
        self.undo_writes()
        BaseTest.tearDown(self)

    # ---- writes and their undo --------------------------------------------------------------------------

    def insert(self, entity: Any) -> None:
        """INSERT ``entity``; tearDown deletes it."""
        self.client.write(p4r.Update.INSERT, entity)
        self._undo.append((p4r.Update.DELETE, entity))

    def modify(self, entity: Any, previous: Any) -> None:
        """MODIFY to ``entity``; tearDown writes ``previous`` (read before by the caller) back."""
        self.client.write(p4r.Update.MODIFY, entity)
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
        self.insert(self.p4info.table_entry(table, match, action, params))

    def set_default_action(self, table: str, action: str, params: Mapping[str, int] | None = None) -> None:
        """Change a table's default action; tearDown restores the one it had."""
        wildcard = p4r.Entity(table_entry=p4r.TableEntry(
            table_id=self.p4info.id("tables", table), is_default_action=True))
        (previous,) = self.client.read(wildcard)
        self.modify(self.p4info.table_entry(table, {}, action, params, default=True), previous)

    # ---- counters and meters ----------------------------------------------------------------------------

    def read_counter(self, name: str, index: int) -> int:
        """Packets counted in cell ``index`` of the indexed counter ``name``."""
        (entity,) = self.client.read(self.p4info.counter_cell(name, index))
        return int(entity.counter_entry.data.packet_count)

    def reset_counter(self, name: str, index: int) -> None:
        """Write zero into one cell of an indexed counter; tearDown writes the old value back."""
        (previous,) = self.client.read(self.p4info.counter_cell(name, index))
        zero = p4r.Entity()
        zero.CopyFrom(self.p4info.counter_cell(name, index))
        zero.counter_entry.data.CopyFrom(p4r.CounterData(byte_count=0, packet_count=0))
        self.modify(zero, previous)

    def delete(self, entity: Any) -> None:
        """DELETE ``entity`` (one this test inserted): it is no longer undone in tearDown."""
        self.client.write(p4r.Update.DELETE, entity)
        self._undo.remove((p4r.Update.DELETE, entity))

    def set_meter(self, name: str, index: int, cir: int, cburst: int, pir: int, pburst: int) -> None:
        """Configure one cell of an indexed meter; tearDown restores its previous configuration."""
        cell = p4r.MeterEntry(meter_id=self.p4info.id("meters", name), index=p4r.Index(index=index))
        (previous,) = self.client.read(p4r.Entity(meter_entry=cell))
        config = p4r.MeterEntry()
        config.CopyFrom(cell)
        config.config.CopyFrom(p4r.MeterConfig(cir=cir, cburst=cburst, pir=pir, pburst=pburst))
        self.modify(p4r.Entity(meter_entry=config), previous)

    # ---- packet I/O -------------------------------------------------------------------------------------

    def send_packet_out(self, payload: bytes, **metadata: int) -> None:
        """A PacketOut with packet_out header fields given by name; the others (padding) are zero."""
        header = self.p4info.entity("controller_packet_metadata", "packet_out")
        unknown = set(metadata) - {m.name for m in header.metadata}
        if unknown:
            raise KeyError(f"packet_out has no fields {sorted(unknown)}")
        self.client.packet_out(payload, [
            p4r.PacketMetadata(metadata_id=m.id, value=encode(metadata.get(m.name, 0), m.bitwidth))
            for m in header.metadata])

    def packet_in_metadata(self, packet_in: Any) -> dict[str, int]:
        """The packet_in header fields of a PacketIn, by name."""
        header = self.p4info.entity("controller_packet_metadata", "packet_in")
        fields = {m.id: m.name for m in header.metadata}
        return {fields[m.metadata_id]: decode(m.value) for m in packet_in.metadata}
