"""Deterministic Distance Packet Marking (DESIGN 2.2, seed 000 Fig. 6) hop by hop: one switch process
plays each switch of the path in turn, with the port table, routes and deltas the SM would install, and
every hop's MF is checked against scapy-tools/ibsec/marking.py."""

from __future__ import annotations

from collections.abc import Sequence

from ibsec.marking import DdpmLayout, Kind
from ibsec_test import IbsecTest, build_rc_send, frame_mf, gid

HOST_PORT, EXIT_PORT = 1, 8
"""The source host's port on the first switch; the destination host's port on the last."""
DESTINATION_GID = gid(0x55)
SOURCE_HOST_INDEX = 5


def link_port(dimension: int, step: int) -> int:
    """Port of the link that moves one step along ``dimension`` (+: even ports 2, 4, 6; -: odd 3, 5, 7)."""
    return 2 + 2 * dimension + (0 if step > 0 else 1)


class DdpmTest(IbsecTest):
    """Walk a path of switch coordinates, one switch at a time."""

    def walk(self, layout: DdpmLayout, path: Sequence[tuple[int, ...]], frame: bytes) -> bytes:
        """Send ``frame`` from the source host along ``path``; return what the destination host gets."""
        expected_mf = layout.init(SOURCE_HOST_INDEX)
        in_port = HOST_PORT
        for here, there in zip(path, [*path[1:], None], strict=True):
            self.undo_writes()
            if in_port == HOST_PORT:
                self.add_host_port(HOST_PORT, layout.init(SOURCE_HOST_INDEX))
            else:
                self.add_fabric_ports(in_port)
            if there is None:
                out_port = EXIT_PORT
            else:
                delta = layout.delta(here, there)
                dimension = next(d for d, v in enumerate(delta) if v)
                out_port = link_port(dimension, delta[dimension])
                self.add_ddpm_delta_table_entry(out_port, layout.kind, layout.port_entry(dimension,
                                                                                         delta[dimension]))
                expected_mf = layout.step(expected_mf, delta)
            self.add_route(DESTINATION_GID, out_port)
            out = self.hop(frame, in_port, out_port)
            self.verify_marked(out, frame, expected_mf, f"at switch {here}")
            frame = out
            in_port = out_port ^ 1 if out_port != EXIT_PORT else HOST_PORT
        return frame

    def check_traceback(self, layout: DdpmLayout, path: Sequence[tuple[int, ...]]) -> None:
        """The destination finds the source switch and host port from one packet."""
        frame = self.walk(layout, path, bytes(build_rc_send(dst=DESTINATION_GID)))
        self.assertEqual(layout.decode(path[-1], frame_mf(frame)), (path[0], SOURCE_HOST_INDEX))


class MeshDetourFig6a(DdpmTest):
    """Seed 000 Fig. 6a: (1,1) to (2,3) on a 4x4 mesh by an adaptive detour that loops back; the
    distance vector ends at (1,2) and the receiver recovers (1,1) and the source's host port."""

    def runTest(self) -> None:
        path = [(1, 1), (2, 1), (3, 1), (3, 0), (2, 0), (2, 1), (2, 2), (2, 3)]
        self.check_traceback(DdpmLayout(Kind.MESH, (4, 4)), path)


class TorusWrapLink(DdpmTest):
    """On a 4x4 torus the wrap link from x=3 to x=0 is a +1 step; the receiver's mod-4 subtraction
    recovers the source."""

    def runTest(self) -> None:
        self.check_traceback(DdpmLayout(Kind.TORUS, (4, 4)), [(2, 3), (3, 3), (0, 3), (0, 0)])


class HypercubeFig6b(DdpmTest):
    """Seed 000 Fig. 6b: (1,1,0) to (0,0,0) on a 3-cube, each link flipping one bit of the vector."""

    def runTest(self) -> None:
        path = [(1, 1, 0), (0, 1, 0), (0, 1, 1), (1, 1, 1), (1, 0, 1), (1, 0, 0), (0, 0, 0)]
        self.check_traceback(DdpmLayout(Kind.HYPERCUBE, (2, 2, 2)), path)


class Mesh3D(DdpmTest):
    """A 3-D mesh: three signed fields, negative steps in two dimensions."""

    def runTest(self) -> None:
        path = [(2, 3, 1), (1, 3, 1), (1, 2, 1), (1, 2, 2), (0, 2, 2)]
        self.check_traceback(DdpmLayout(Kind.MESH, (4, 4, 4)), path)


class HostPreloadedMfIsCleared(DdpmTest):
    """A host that pre-sets MF bits to frame another node gets them replaced by its own host-port index
    and a zero vector on its first switch, so traceback still names it."""

    def runTest(self) -> None:
        layout = DdpmLayout(Kind.MESH, (4, 4))
        forged = layout.pack((-1, 2), host_port=9)
        frame = bytes(build_rc_send(dst=gid(0x55, mf=forged)))
        out = self.walk(layout, [(0, 0), (1, 0)], frame)
        self.assertEqual(layout.decode((1, 0), frame_mf(out)), ((0, 0), SOURCE_HOST_INDEX))


class OffsiteDestinationUnmarked(IbsecTest):
    """A packet to an address outside fe80::/10 and fec0::/10 keeps every bit, even from a host port with
    a seed and out of a port with a DDPM delta."""

    def runTest(self) -> None:
        layout = DdpmLayout(Kind.MESH, (4, 4))
        self.add_host_port(HOST_PORT, layout.init(SOURCE_HOST_INDEX))
        out_port = link_port(0, 1)
        self.add_ddpm_delta_table_entry(out_port, layout.kind, layout.port_entry(0, 1))
        self.add_offsite_routes_table_entry("2001:db8::", 32, out_port)
        frame = bytes(build_rc_send(dst="2001:db8:0:1234:5678::9"))
        self.send(HOST_PORT, frame)
        self.verify_forwarded(frame, out_port)


class UnconfiguredPortClearsMf(IbsecTest):
    """A port the SM has not described is treated as host-facing with a zero seed: a forged MF entering
    there is wiped, never carried into the fabric."""

    def runTest(self) -> None:
        out_port = link_port(0, 1)
        self.add_route(DESTINATION_GID, out_port)
        frame = bytes(build_rc_send(dst=gid(0x55, mf=0x2A_AAAA_AAAA)))
        self.send(HOST_PORT, frame)
        out = self.receive_on(out_port)
        self.verify_marked(out, frame, 0, "unconfigured ingress port")
