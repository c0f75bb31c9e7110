"""From a program to a running engine: :func:`load` returns an ``api.Switch``.

This is the only module that names an engine back end, so every caller (the runtime, the CLI, the STF
and conformance drivers, the benchmarks, the tests) depends on the interface in api.py alone, and the
interface never imports what implements it. A second back end is added here, chosen by a parameter,
without a caller changing. Today there is one: switch.py's V1Switch, which compiles the program to
Python."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

from p4switch import ir
from p4switch.engine import switch
from p4switch.engine.api import Switch


def load(
    ir_json: bytes | str | ir.Program,
    *,
    log: logging.Logger | None = None,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
) -> Switch:
    """Compile the IR JSON (docs/p4switch-ir.md) into a ready switch. Raises ProgramError.

    The JSON is read once into the typed IR (p4switch.ir); a ``p4switch.ir.Program`` is taken as it
    is. ``clock`` returns seconds (monotonic) for meters and ingress_global_timestamp; ``rng`` feeds
    v1model's ``random()`` (tests pass a seeded one)."""
    return switch.load(ir_json, log=log, clock=clock, rng=rng)
