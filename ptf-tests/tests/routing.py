"""Routing on the destination's subnet id and GUID: exact routes, ECMP per flow, adaptive per packet,
off-site routes and the non-IPv6 policy."""

from __future__ import annotations

from base_test import table_entry
from ibsec_test import IbsecTest, build_non_ipv6, build_rc_send, gid

IN_PORT = 1
SPREAD_PORTS = [2, 3, 4]


class RoutingTest(IbsecTest):
    """Packets enter on a fabric port, so the MF they carry is left alone."""

    def setUp(self) -> None:
        super().setUp()
        self.add_fabric_ports(IN_PORT)

    def ports_used(self, frames: list[bytes]) -> list[int]:
        """Send each frame; the port each one left on (each must leave once, on one of SPREAD_PORTS)."""
        used = []
        for frame in frames:
            self.send(IN_PORT, frame)
            used.append(self.verify_forwarded_any(frame, SPREAD_PORTS))
        self.verify_dropped()
        return used


class ExactRoutes(RoutingTest):
    """/80 routes send each destination GUID to its own port whatever its MF bits; an unknown GUID is
    dropped and counted as unrouted; a shorter prefix catches a whole subnet."""

    def runTest(self) -> None:
        self.add_route(gid(0x20), 2)
        self.add_route(gid(0x21), 3)
        self.add_route(gid(0, subnet=0x0002), 4, prefix_len=16)
        for destination, port in ((gid(0x20), 2), (gid(0x21), 3), (gid(0x20, mf=0x3FF), 2),
                                  (gid(0x99, subnet=0x0002), 4)):
            frame = build_rc_send(dst=destination)
            self.send(IN_PORT, frame)
            self.verify_forwarded(frame, port)
        unrouted = self.drops("NO_ROUTE")
        self.send(IN_PORT, build_rc_send(dst=gid(0x22)))
        self.verify_dropped()
        self.assertEqual(self.drops("NO_ROUTE"), unrouted + 1)


class EcmpSpreadsFlows(RoutingTest):
    """A group of three next hops spreads different flows over all of them and keeps each flow on one."""

    def runTest(self) -> None:
        self.add_group_route(gid(0x20), SPREAD_PORTS)
        flows = [bytes(build_rc_send(dst=gid(0x20), dest_qp=0x200 + n, flow_label=n)) for n in range(24)]
        first = self.ports_used(flows)
        self.assertEqual(set(first), set(SPREAD_PORTS))
        self.assertEqual(self.ports_used(flows), first, "a flow changed path")


class GroupMemberMissing(RoutingTest):
    """A flow whose member of its group has no route_groups_table entry is dropped and counted as
    unrouted; the group's other flows keep their port (the member is the flow's hash, not a fallback)."""

    def runTest(self) -> None:
        group = self.add_group_route(gid(0x20), SPREAD_PORTS)
        flows = [bytes(build_rc_send(dst=gid(0x20), dest_qp=0x200 + n, flow_label=n)) for n in range(24)]
        before = self.ports_used(flows)
        member = {"meta.route_group": group, "meta.route_member": 1}  # SPREAD_PORTS[1]
        self.delete(table_entry("route_groups_table", member, "forward", {"port": SPREAD_PORTS[1]}))
        unrouted = self.drops("NO_ROUTE")
        for frame, port in zip(flows, before, strict=True):
            self.send(IN_PORT, frame)
            if port != SPREAD_PORTS[1]:
                self.verify_forwarded(frame, port)
        self.verify_dropped()
        self.assertEqual(self.drops("NO_ROUTE"), unrouted + before.count(SPREAD_PORTS[1]))
        self.assertGreater(before.count(SPREAD_PORTS[1]), 0)


class AdaptiveSpreadsPackets(RoutingTest):
    """With per-packet spreading on, consecutive packets of ONE flow use every next hop of the group;
    with it off (the default) the same flow stays on one."""

    def runTest(self) -> None:
        self.add_group_route(gid(0x20), SPREAD_PORTS)
        packets = [bytes(build_rc_send(dst=gid(0x20), psn=n)) for n in range(24)]
        self.assertEqual(len(set(self.ports_used(packets))), 1)
        self.set_spread_per_packet()
        self.assertEqual(set(self.ports_used(packets)), set(SPREAD_PORTS))


class NonIpv6Policy(RoutingTest):
    """Other EtherTypes are dropped and counted unless the SM lets one through to a port."""

    def runTest(self) -> None:
        dropped = self.drops("NON_IPV6")
        self.send(IN_PORT, build_non_ipv6(0x0806))
        self.verify_dropped()
        self.assertEqual(self.drops("NON_IPV6"), dropped + 1)
        self.add_non_ipv6_table_entry(0x88B5, 5)
        frame = build_non_ipv6(0x88B5)
        self.send(IN_PORT, frame)
        self.verify_forwarded(frame, 5)
