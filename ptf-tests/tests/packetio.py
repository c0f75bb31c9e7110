"""Packet I/O with the SM: punt to the CPU port with packet_in metadata, the punt meter, PacketOut."""

from __future__ import annotations

import math
import time

from ibsec_test import IbsecTest, build_mad, build_rc_send, gid

SM_GID = gid(0xFE)
HOST_PORT, OTHER_PORT = 3, 4
PACKET_IN_TIMEOUT = 30.0  # seconds to wait for an expected PacketIn (it comes in milliseconds)
SETTLE_TIMEOUT = 30.0


class PuntToSm(IbsecTest):
    """A MAD addressed to the SM's GID becomes a PacketIn carrying the ingress port and the whole frame;
    nothing leaves on a data port. The MF bits do not hide the SM's address."""

    def runTest(self) -> None:
        self.add_host_port(HOST_PORT)
        self.add_sm_punt_table_entry(SM_GID)
        for mf in (0, 0x15):
            frame = bytes(build_mad(dst=gid(0xFE, mf=mf)))
            self.send(HOST_PORT, frame)
            packet_in = self.client.get_packet_in(PACKET_IN_TIMEOUT)
            assert packet_in is not None, "no PacketIn for a MAD to the SM"
            self.assertEqual(packet_in.payload, frame)
            self.assertEqual(self.packet_in_metadata(packet_in)["ingress_port"], HOST_PORT)
            self.verify_dropped()


class PuntMeterCapsFlood(IbsecTest):
    """A flood of traps from one port is capped by that port's punt meter: what exceeds the burst (plus
    what the rate refills while the flood is sent) is dropped and counted, and every packet is either
    punted or counted."""

    def runTest(self) -> None:
        flood, burst, rate = 40, 4, 1
        self.add_host_port(HOST_PORT)
        self.add_sm_punt_table_entry(SM_GID)
        self.set_punt_meter(HOST_PORT, rate=rate, burst=burst)
        dropped = self.drops("PUNT_METER")
        start = time.monotonic()
        for psn in range(flood):
            self.send(HOST_PORT, build_mad(dst=SM_GID, psn=psn))
        punted = 0
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while punted + self.drops("PUNT_METER") - dropped < flood and time.monotonic() < deadline:
            while self.client.get_packet_in(0.1) is not None:
                punted += 1
        # the meter refills while the switch works through the flood, which on a loaded machine lasts
        # longer than sending it: the bound is over the time until every packet was accounted for
        refill = math.ceil((time.monotonic() - start) * rate)
        self.assertEqual(punted + self.drops("PUNT_METER") - dropped, flood)
        self.assertGreaterEqual(punted, 1)
        self.assertLessEqual(punted, burst + refill + 1)


class PacketOutToChosenPort(IbsecTest):
    """A PacketOut leaves, unchanged, on the port its packet_out header names, without routing."""

    def runTest(self) -> None:
        for port in (HOST_PORT, OTHER_PORT):
            frame = bytes(build_rc_send(dst=gid(0x99)))
            self.send_packet_out(frame, egress_port=port)
            self.verify_forwarded(frame, port)
