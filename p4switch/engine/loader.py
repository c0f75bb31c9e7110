"""From a program to a running engine: :func:`load` returns an ``api.Switch``.

This is the only module that names an engine back end, so every caller (the runtime, the CLI, the STF
and conformance drivers, the benchmarks, the tests) depends on the interface in api.py alone, and the
interface never imports what implements it. There are two back ends, chosen by ``engine``: switch.py's
V1Switch, which compiles the program to Python, and native.py's NativeSwitch, which compiles it to C
(built with the system C compiler, loaded through cffi). A program the native back end cannot run (no C
compiler, a construct it does not support) runs on the Python one, with the reason logged once and kept
in the switch's ``engine_note``."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

from p4switch import ir
from p4switch.engine import switch
from p4switch.engine.api import ProgramError, Switch

ENGINES = ("python", "native")


def load(
    ir_json: bytes | str | ir.Program,
    *,
    log: logging.Logger | None = None,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
    engine: str = "python",
) -> Switch:
    """Compile the IR JSON (docs/p4switch-ir.md) into a ready switch on ``engine`` ("python" or
    "native"). Raises ProgramError.

    The JSON is read once into the typed IR (p4switch.ir); a ``p4switch.ir.Program`` is taken as it
    is. ``clock`` returns seconds (monotonic) for meters and ingress_global_timestamp; ``rng`` feeds
    v1model's ``random()`` (tests pass a seeded one; both back ends draw from it alike)."""
    if engine not in ENGINES:
        raise ProgramError(f"unknown engine {engine!r} (one of {', '.join(ENGINES)})")
    program = ir_json if isinstance(ir_json, ir.Program) else switch.read_program(ir_json)
    rng = rng or random.Random()
    if engine == "python":
        return switch.load(program, log=log, clock=clock, rng=rng)
    from p4switch.engine import native  # the C back end (and cffi) is only imported when asked for

    def python() -> Switch:
        return switch.load(program, log=log, clock=clock, rng=rng)

    python()  # the Python engine's checks first: a program it refuses is refused on both back ends
    return native.load_or_fallback(program, log, clock, rng, python)
