"""The SIF state machine with a fake clock: install, dedupe, flush after quiet, valid-list, back to off."""

from __future__ import annotations

from ibsm.sif import INVALID_LIST, OFF, VALID_LIST, Action, Sif, SifOptions

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
    assert sif.on_trap(PORT, 0x1234) == [Action("install-invalid", PORT, (0x1234,)),
                                         Action("set-mode", PORT, mode=INVALID_LIST)]
    assert sif.on_trap(PORT, 0x1234) == [Action("deduplicated", PORT, (0x1234,), INVALID_LIST)]
    assert sif.on_trap(PORT, 0x4321) == [Action("install-invalid", PORT, (0x4321,))]
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
    assert sif.on_counter(PORT, 90) == [Action("set-mode", PORT, mode=OFF),
                                        Action("remove-invalid", PORT, (0x1234,)),
                                        Action("reset-counter", PORT)]
    assert sif.watched() == []
    assert sif.on_counter(PORT, 90) == []
    # a new attack after the flush installs again
    assert sif.on_trap(PORT, 0x1234)[0] == Action("install-invalid", PORT, (0x1234,))


def test_switch_to_valid_list_when_invalid_outgrows_valid() -> None:
    sif, clock = _sif()
    for pkey in (0x11, 0x12, 0x13):  # three invalid keys fit beside three valid ones
        assert sif.on_trap(PORT, pkey)[0].kind == "install-invalid"
    actions = sif.on_trap(PORT, 0x14)
    assert actions == [Action("install-valid", PORT, tuple(sorted(VALID))),
                       Action("set-mode", PORT, mode=VALID_LIST),
                       Action("remove-invalid", PORT, (0x11, 0x12, 0x13))]
    assert sif.on_trap(PORT, 0x15) == [Action("deduplicated", PORT, (0x15,), VALID_LIST)]
    clock.now += 5.0
    assert sif.on_counter(PORT, 0) == [Action("set-mode", PORT, mode=OFF),
                                       Action("remove-valid", PORT, tuple(sorted(VALID))),
                                       Action("reset-counter", PORT)]


def test_max_invalid_option_and_adoption() -> None:
    sif, clock = _sif(max_invalid=1)
    sif.on_trap(PORT, 0x11)
    assert sif.on_trap(PORT, 0x12)[1] == Action("set-mode", PORT, mode=VALID_LIST)
    other = ("s2", 1)
    sif.adopt(other, INVALID_LIST, {0x99}, count=40)  # found on a switch after an SM restart
    assert sif.on_trap(other, 0x99)[0].kind == "deduplicated"
    clock.now += 6.0
    assert sif.on_counter(other, 40)[1] == Action("remove-invalid", other, (0x99,))
