"""The SIF state machine with a fake clock: install, dedupe, flush after quiet, valid-list, back to off."""

from __future__ import annotations

import finsy as fy
from finsy.proto import p4r
from ibsec import names
from ibsm import entries
from ibsm.sif import INVALID_LIST, OFF, VALID_LIST, Action, ActionKind, Sif, SifOptions

PORT = ("s1", 2)
VALID = frozenset({0xFFFF, 0x7FFF, 0x8001})


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _sif(**options: float) -> tuple[Sif, FakeClock]:
    clock = FakeClock()
    return Sif(SifOptions(quiet_period=5.0, **options), lambda port: VALID, clock), clock  # type: ignore[arg-type]


def test_install_then_dedupe() -> None:
    sif, _ = _sif()
    assert sif.on_trap(PORT, 0x1234) == [Action(ActionKind.INSTALL_INVALID, PORT, (0x1234,)),
                                         Action(ActionKind.SET_MODE, PORT, mode=INVALID_LIST)]
    assert sif.on_trap(PORT, 0x1234) == [Action(ActionKind.DEDUPLICATED, PORT, (0x1234,), INVALID_LIST)]
    assert sif.on_trap(PORT, 0x4321) == [Action(ActionKind.INSTALL_INVALID, PORT, (0x4321,))]
    assert sif.watched() == [PORT]
    assert sif.ports[PORT].invalid == {0x1234, 0x4321}


def test_flush_only_after_a_quiet_period() -> None:
    sif, clock = _sif()
    sif.on_trap(PORT, 0x1234)
    for count in (10, 50, 90):  # the attack goes on: the counter moves, nothing is flushed
        clock.now += 4.0
        assert sif.on_counter(PORT, count) == []
    clock.now += 4.9
    assert sif.on_counter(PORT, 90) == []  # quiet for 4.9 s < 5 s
    clock.now += 0.2
    assert sif.on_counter(PORT, 90) == [Action(ActionKind.SET_MODE, PORT, mode=OFF),
                                        Action(ActionKind.REMOVE_INVALID, PORT, (0x1234,)),
                                        Action(ActionKind.RESET_COUNTER, PORT)]
    assert sif.watched() == []
    assert sif.on_counter(PORT, 90) == []
    # a new attack after the flush installs again
    assert sif.on_trap(PORT, 0x1234)[0] == Action(ActionKind.INSTALL_INVALID, PORT, (0x1234,))


def test_switch_to_valid_list_when_invalid_outgrows_valid() -> None:
    sif, clock = _sif()
    for pkey in (0x11, 0x12, 0x13):  # three invalid keys fit beside three valid ones
        assert sif.on_trap(PORT, pkey)[0].kind is ActionKind.INSTALL_INVALID
    actions = sif.on_trap(PORT, 0x14)
    assert actions == [Action(ActionKind.INSTALL_VALID, PORT, tuple(sorted(VALID))),
                       Action(ActionKind.SET_MODE, PORT, mode=VALID_LIST),
                       Action(ActionKind.REMOVE_INVALID, PORT, (0x11, 0x12, 0x13))]
    assert sif.on_trap(PORT, 0x15) == [Action(ActionKind.DEDUPLICATED, PORT, (0x15,), VALID_LIST)]
    clock.now += 5.0
    assert sif.on_counter(PORT, 0) == [Action(ActionKind.SET_MODE, PORT, mode=OFF),
                                       Action(ActionKind.REMOVE_VALID, PORT, tuple(sorted(VALID))),
                                       Action(ActionKind.RESET_COUNTER, PORT)]


def test_max_invalid_option_and_adoption() -> None:
    sif, clock = _sif(max_invalid=1)
    sif.on_trap(PORT, 0x11)
    assert sif.on_trap(PORT, 0x12)[1] == Action(ActionKind.SET_MODE, PORT, mode=VALID_LIST)
    other = ("s2", 1)
    sif.adopt(other, INVALID_LIST, {0x99}, count=40)  # found on a switch after an SM restart
    assert sif.on_trap(other, 0x99)[0].kind is ActionKind.DEDUPLICATED
    clock.now += 6.0
    assert sif.on_counter(other, 40)[1] == Action(ActionKind.REMOVE_INVALID, other, (0x99,))


SCHEMA = fy.P4Schema(names.P4INFO)


def _kinds(updates: list[entries.Update]) -> list[tuple[str, int]]:
    """Each update as the P4Runtime message it becomes: the entity kind and the update type."""
    messages = [u.encode_update(SCHEMA) for u in updates]
    return [(m.entity.WhichOneof("entity"), m.type) for m in messages]


def test_entries_decide_insert_modify_or_delete_for_each_action() -> None:
    """ibsm.entries turns each step into P4Runtime writes: installs insert, removals and a port turned
    off delete, a mode set inserts and modifies when refused, a counter reset modifies, a dedupe writes
    nothing."""
    table, counter = "table_entry", "counter_entry"
    insert, modify, delete = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
    two = (0x11, 0x12)
    cases = {
        Action(ActionKind.INSTALL_INVALID, PORT, two): ([(table, insert)] * 2, []),
        Action(ActionKind.REMOVE_INVALID, PORT, two): ([(table, delete)] * 2, []),
        Action(ActionKind.INSTALL_VALID, PORT, two): ([(table, insert)] * 2, []),
        Action(ActionKind.REMOVE_VALID, PORT, two): ([(table, delete)] * 2, []),
        Action(ActionKind.SET_MODE, PORT, mode=VALID_LIST): ([(table, insert)], [(table, modify)]),
        Action(ActionKind.SET_MODE, PORT, mode=OFF): ([(table, delete)], []),
        Action(ActionKind.RESET_COUNTER, PORT): ([(counter, modify)], []),
        Action(ActionKind.DEDUPLICATED, PORT, two, INVALID_LIST): ([], []),
    }
    for action, (updates, if_refused) in cases.items():
        write = entries.sif_writes(action)
        assert (_kinds(write.updates), _kinds(write.if_refused)) == (updates, if_refused), action
    pkey_tables = {e.table_id for e in entries.sif_writes(Action(ActionKind.REMOVE_VALID, PORT, two)).updates
                   if isinstance(e, fy.P4TableEntry)}
    assert pkey_tables == {entries.VALID_PKEYS}
