"""Port marking on a 3-level fat tree (DESIGN 2.1, seed 000 Fig. 5), hop by hop: one switch process plays
each switch in turn, and the frame one switch sends is the frame the next one receives."""

from __future__ import annotations

from ibsec.marking import FatTreeLayout
from ibsec_test import IbsecTest, build_rc_send, frame_mf, gid, with_mf

LAYOUT = FatTreeLayout(ports=4, levels=3)
SOURCE = (0, 1, 2)
"""Node 6 of seed 000 Fig. 5: digits from the top level down to its leaf."""
HOST_PORT, UP_PORTS, DOWN_PORT = 1, [5, 6], 2
"""Per switch: the port the packet arrives on from below, its up-links, the port it leaves on downward."""
DESTINATION_GID = gid(0x77)


class FatTreeTest(IbsecTest):
    """Helpers that program the one switch as one fat-tree switch at a time."""

    def leaf_up(self, frame: bytes, digit: int) -> bytes:
        """The source's leaf: host port ``digit``, ECMP up."""
        self.undo_writes()
        self.add_host_port(HOST_PORT, LAYOUT.mark(0, 0, digit))
        self.add_group_route(DESTINATION_GID, UP_PORTS)
        self.send(HOST_PORT, frame)
        return self.receive_on_any(UP_PORTS)

    def switch_up_or_turn(self, frame: bytes, level: int, digit: int, out_ports: list[int]) -> bytes:
        """A level-``level`` switch receiving on its down-port ``digit`` and sending on ``out_ports``."""
        self.undo_writes()
        self.add_down_port(HOST_PORT, LAYOUT, level, digit)
        self.add_group_route(DESTINATION_GID, out_ports)
        self.send(HOST_PORT, frame)
        return self.receive_on_any(out_ports)

    def switch_down(self, frame: bytes) -> bytes:
        """A switch receiving from above on an up-port: it adds no mark on the way down."""
        self.undo_writes()
        self.add_fabric_ports(UP_PORTS[0])
        self.add_route(DESTINATION_GID, DOWN_PORT)
        return self.hop(frame, UP_PORTS[0], DOWN_PORT)


class MarksUpToTheTop(FatTreeTest):
    """Node 6 to a host under another top-level subtree, with an MF forged by the sender: the leaf
    replaces it, leaf, level 1 and level 2 each write their digit and level, the switches on the way
    down leave the MF alone, and the receiver decodes (0, 1, 2)."""

    def runTest(self) -> None:
        forged = LAYOUT.encode([(0, 3), (1, 3), (2, 3)])
        frame = bytes(build_rc_send(dst=gid(0x77, mf=forged)))
        marks = LAYOUT.marks_of(SOURCE, turn_level=2)
        expected_mf = 0
        for level, digit in marks:
            expected_mf = LAYOUT.mark(expected_mf, level, digit)
            if level == 0:
                out = self.leaf_up(frame, digit)
            else:
                out = self.switch_up_or_turn(frame, level, digit, UP_PORTS if level < 2 else [DOWN_PORT])
            self.verify_marked(out, frame, expected_mf, f"level {level}")
            frame = out
        for _ in range(2):
            frame = self.switch_down(frame)
        self.assertEqual(frame_mf(frame), expected_mf)
        self.assertEqual(LAYOUT.decode(frame_mf(frame), (3, 0, 0)), SOURCE)


class TurnBelowTheTop(FatTreeTest):
    """Node 6 to a host in the same level-1 subtree: the packet turns at level 1, the level field says
    1, and the receiver takes the missing top digit from its own address."""

    def runTest(self) -> None:
        frame = bytes(build_rc_send(dst=DESTINATION_GID))
        frame = self.leaf_up(frame, SOURCE[2])
        frame = self.switch_up_or_turn(frame, 1, SOURCE[1], [DOWN_PORT])
        frame = self.switch_down(frame)
        mf = frame_mf(frame)
        self.assertEqual(LAYOUT.highest_level(mf), 1)
        self.assertEqual(mf, LAYOUT.encode(LAYOUT.marks_of(SOURCE, turn_level=1)))
        self.assertEqual(LAYOUT.decode(mf, (0, 1, 0)), SOURCE)


class EcmpUplinksGiveIdenticalMarks(FatTreeTest):
    """Flows from one host spread over both up-links of its leaf, yet every copy carries the same MF,
    and the level-1 switches behind either up-link (same digit for this leaf) mark it the same way."""

    def runTest(self) -> None:
        self.add_host_port(HOST_PORT, LAYOUT.mark(0, 0, SOURCE[2]))
        self.add_group_route(DESTINATION_GID, UP_PORTS)
        by_port: dict[int, bytes] = {}
        for flow in range(16):
            frame = bytes(build_rc_send(dst=DESTINATION_GID, dest_qp=0x100 + flow, flow_label=flow))
            self.send(HOST_PORT, frame)
            port = self.verify_forwarded_any(with_mf(frame, LAYOUT.mark(0, 0, SOURCE[2])), UP_PORTS)
            by_port.setdefault(port, frame)
        self.verify_dropped()
        self.assertEqual(sorted(by_port), UP_PORTS, "ECMP used one up-link only")

        level1_marks = set()
        for frame in by_port.values():
            leaf_out = with_mf(frame, LAYOUT.mark(0, 0, SOURCE[2]))
            level1_marks.add(frame_mf(self.switch_up_or_turn(leaf_out, 1, SOURCE[1], UP_PORTS)))
        self.assertEqual(level1_marks, {LAYOUT.encode([(0, SOURCE[2]), (1, SOURCE[1])])})
