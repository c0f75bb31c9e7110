"""One switch device: the running engine program and where the frames it emits go.

The data plane (AF_PACKET ports) and the P4Runtime server (PacketOut) both feed frames in through
``process``; frames for the CPU port go to ``to_cpu`` (the server turns them into PacketIn), all others to
``transmit`` (the data plane sends them on the port's interface)."""

from __future__ import annotations

import ctypes
import gc
import logging
from collections import Counter
from collections.abc import Callable

from p4switch import program as programs
from p4switch.engine import api as engine


def _discard(*_: object) -> None:
    """Default sink until the data plane / the server plug in."""


def release_free_memory() -> None:
    """Collect what loading a program left behind and give the C heap's free pages back to the kernel
    (glibc's malloc_trim; nothing where the C library has none). A native program's load runs the Python
    engine's checks first (loader.load) and throws that switch away, leaving objects in cycles and freed
    heap that would stay the process's own: about 3.5 MiB of each switch of a fabric forked from a zygote
    (evaluation.scale at torus:8x8)."""
    gc.collect()
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)


class Device:
    """The engine program of one device (None until a pipeline is loaded) and its frame routing."""

    def __init__(self, device_id: int, cpu_port: int | None, log: logging.Logger,
                 back_end: str = "python", release_memory: bool = False) -> None:
        self.device_id = device_id
        self.release_memory = release_memory
        """after each install, collect and trim (release_free_memory): a switch process does it; a process
        that installs many programs (the tests, the conformance runner) would pay a full collection each"""
        self.back_end = back_end
        """the engine programs are loaded on ("python" or "native", loader.load)"""
        self.cpu_port = cpu_port
        self.log = log
        self.switch: engine.Switch | None = None
        self.device_config = b""
        """the program JSON the running switch was loaded from"""
        self.transmit: Callable[[int, bytes], None] = _discard
        self.to_cpu: Callable[[bytes], None] = _discard
        self.on_install: list[Callable[[engine.Switch], None]] = []
        """called with every program installed (the native data plane runs a native one itself)"""
        self.stats: Counter[str] = Counter()

    def load(self, program: bytes) -> engine.Switch:
        """A new engine switch for ``program`` in any format p4switch runs (not yet running). Raises
        engine.ProgramError."""
        return programs.load(program, self.log.getChild("engine"), self.back_end)

    def install(self, switch: engine.Switch, program: bytes) -> None:
        """Make ``switch`` the running program: frames from now on go through it. The old one stays
        referenced until every listener has switched over (a native one may still run a burst)."""
        old = self.switch
        self.switch = switch
        self.device_config = program
        for listener in list(self.on_install):
            listener(switch)
        del old
        if self.release_memory:
            release_free_memory()
        self.log.info("pipeline installed (%d bytes of program JSON)", len(program))

    def process(self, port: int, frame: bytes) -> None:
        """Run one frame that arrived on ``port`` through the pipeline and send what comes out."""
        switch = self.switch
        if switch is None:
            self.stats["no_pipeline"] += 1
            return
        for out_port, data in switch.process(port, frame):
            if out_port == self.cpu_port:
                self.to_cpu(data)
            else:
                self.transmit(out_port, data)
