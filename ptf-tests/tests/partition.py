"""Partition enforcement (DESIGN 6 step 2): per-port modes off / invalid-list / valid-list, the Ingress
P_Key Violation Counter read back over P4Runtime to the packet, and no lookup at all in mode off."""

from __future__ import annotations

from base_test import table_entry
from ibsec.marking import DdpmLayout, Kind
from ibsec_test import IbsecTest, build_rc_send, gid

HOST_PORT, FABRIC_PORT, OUT_PORT = 1, 2, 3
GOOD_PKEY, OTHER_GOOD_PKEY, BAD_PKEY = 0xFFFF, 0x8001, 0x8666


class PartitionTest(IbsecTest):
    """A host port (seeding a DDPM mark, as on a mesh) and a fabric port, both routed to OUT_PORT."""

    def setUp(self) -> None:
        super().setUp()
        self.add_host_port(HOST_PORT, DdpmLayout(Kind.MESH, (4, 4)).init(host_port=3))
        self.add_fabric_ports(FABRIC_PORT)
        self.add_route(gid(0x20), OUT_PORT)

    def send_pkeys(self, port: int, pkey: int, count: int, passes: bool) -> None:
        """Send ``count`` packets with ``pkey`` on ``port``; each leaves on OUT_PORT iff ``passes``."""
        for psn in range(count):
            frame = build_rc_send(pkey=pkey, psn=psn)
            self.send(port, frame)
            if passes:
                self.verify_forwarded_any_mark(frame, OUT_PORT)
            else:
                self.verify_dropped()


class InvalidListDropsListedPkeys(PartitionTest):
    """SIF: in invalid-list mode a (port, P_Key) in invalid_pkeys is dropped and counted in the port's
    violation counter, one count per packet; other P_Keys pass uncounted, and other ports are untouched."""

    def runTest(self) -> None:
        self.add_partition_mode_table_entry(HOST_PORT, "invalid")
        self.add_invalid_pkeys_entry(HOST_PORT, BAD_PKEY)
        violations = self.pkey_violations(HOST_PORT)
        fabric_violations = self.pkey_violations(FABRIC_PORT)
        lookups = self.partition_lookups(HOST_PORT)

        self.send_pkeys(HOST_PORT, BAD_PKEY, 5, passes=False)
        self.assertEqual(self.pkey_violations(HOST_PORT), violations + 5)
        self.send_pkeys(HOST_PORT, GOOD_PKEY, 3, passes=True)
        self.assertEqual(self.pkey_violations(HOST_PORT), violations + 5)
        self.send_pkeys(FABRIC_PORT, BAD_PKEY, 2, passes=True)

        self.assertEqual(self.pkey_violations(FABRIC_PORT), fabric_violations)
        self.assertEqual(self.partition_lookups(HOST_PORT), lookups + 8)


class ValidListOnHostPorts(PartitionTest):
    """IF: valid-list on the host-facing port drops every P_Key not in valid_pkeys (counted per packet)
    and passes the listed ones; the fabric port, in mode off, passes anything."""

    def runTest(self) -> None:
        self.add_partition_mode_table_entry(HOST_PORT, "valid")
        for pkey in (GOOD_PKEY, OTHER_GOOD_PKEY):
            self.add_valid_pkeys_entry(HOST_PORT, pkey)
        violations = self.pkey_violations(HOST_PORT)

        self.send_pkeys(HOST_PORT, GOOD_PKEY, 2, passes=True)
        self.send_pkeys(HOST_PORT, OTHER_GOOD_PKEY, 2, passes=True)
        self.send_pkeys(HOST_PORT, BAD_PKEY, 4, passes=False)
        self.send_pkeys(FABRIC_PORT, BAD_PKEY, 2, passes=True)

        self.assertEqual(self.pkey_violations(HOST_PORT), violations + 4)


class ValidListOnEveryPort(PartitionTest):
    """DT: valid-list on every port drops a bad P_Key whichever port it arrives on, and each port counts
    its own violations."""

    def runTest(self) -> None:
        for port in (HOST_PORT, FABRIC_PORT):
            self.add_partition_mode_table_entry(port, "valid")
            self.add_valid_pkeys_entry(port, GOOD_PKEY)
        before = {port: self.pkey_violations(port) for port in (HOST_PORT, FABRIC_PORT)}

        self.send_pkeys(HOST_PORT, BAD_PKEY, 1, passes=False)
        self.send_pkeys(FABRIC_PORT, BAD_PKEY, 3, passes=False)
        self.send_pkeys(FABRIC_PORT, GOOD_PKEY, 1, passes=True)

        self.assertEqual(self.pkey_violations(HOST_PORT), before[HOST_PORT] + 1)
        self.assertEqual(self.pkey_violations(FABRIC_PORT), before[FABRIC_PORT] + 3)


class ModeOffDoesNoLookup(PartitionTest):
    """A port in mode off looks up no partition table: entries for it are ignored, nothing is counted,
    and the lookup counter does not move (SIF costs nothing while there is no attack)."""

    def runTest(self) -> None:
        self.add_invalid_pkeys_entry(HOST_PORT, BAD_PKEY)
        self.add_valid_pkeys_entry(HOST_PORT, GOOD_PKEY)
        lookups = self.partition_lookups(HOST_PORT)
        violations = self.pkey_violations(HOST_PORT)

        self.send_pkeys(HOST_PORT, BAD_PKEY, 3, passes=True)
        self.send_pkeys(HOST_PORT, OTHER_GOOD_PKEY, 3, passes=True)

        self.assertEqual(self.partition_lookups(HOST_PORT), lookups)
        self.assertEqual(self.pkey_violations(HOST_PORT), violations)


class SifFlushEndsFiltering(PartitionTest):
    """What the SM's SIF engine does when an attack stops: delete the port's invalid_pkeys entries and its
    mode entry and reset its violation counter over P4Runtime. The counter reads zero, the port is back
    in mode off (no lookups) and the formerly filtered P_Key passes."""

    def runTest(self) -> None:
        mode = table_entry("partition_mode_table", {"standard_metadata.ingress_port": HOST_PORT},
                           "filter_invalid_list")
        invalid = table_entry("invalid_pkeys", {"standard_metadata.ingress_port": HOST_PORT,
                                                "hdr.bth.p_key": BAD_PKEY}, "reject_pkey")
        self.insert(mode)
        self.insert(invalid)
        self.send_pkeys(HOST_PORT, BAD_PKEY, 3, passes=False)
        self.assertGreaterEqual(self.pkey_violations(HOST_PORT), 3)

        self.delete(invalid)
        self.delete(mode)
        self.reset_counter("pkey_violations", HOST_PORT)
        self.assertEqual(self.pkey_violations(HOST_PORT), 0)
        lookups = self.partition_lookups(HOST_PORT)
        self.send_pkeys(HOST_PORT, BAD_PKEY, 2, passes=True)
        self.assertEqual(self.pkey_violations(HOST_PORT), 0)
        self.assertEqual(self.partition_lookups(HOST_PORT), lookups)
