"""The native data plane: the ports of a p4switch process served by one C thread (p4switch/native/c/np_io.c)
that receives through AF_PACKET rings, runs a native pipeline without leaving C and sends in batches; it
blocks in poll() while nothing arrives.

What has to reach Python comes through one event queue, read by one Python thread that also blocks while
the queue is empty: frames for the CPU port (PacketIn), every frame while the running program is a Python
one (the engine fell back, or no program yet), --dump-packet-data lines and port notices. A port whose
interface disappears is logged once, counted and costs nothing afterwards.

Same interface as p4switch.dataplane.Dataplane (``run(stop)``, ``transmit``, ``close``, ``port_stats``)."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from p4switch.native import build

IO_DECLARATIONS = """
typedef struct np_io np_io;
typedef struct np_event { uint32_t kind; uint32_t port; uint32_t len; uint32_t aux; } np_event;
typedef struct np_port_stats {
    uint64_t rx, rx_bytes, tx, tx_bytes, tx_errors, rx_truncated, kernel_drops, errors;
} np_port_stats;
np_io *np_io_new(int cpu_port, uint32_t dump_bytes);
int np_io_add_port(np_io *io, int number, const char *ifname, const char *pcap_dir, char *err, int errlen);
int np_io_start(np_io *io);
void np_io_set_pipeline(np_io *io, const void *pipe);
int np_io_set_bare(np_io *io, int from, int to);
int np_io_send(np_io *io, uint32_t port, const uint8_t *data, uint32_t len);
int np_io_event_fd(np_io *io);
int np_io_next_event(np_io *io, np_event *ev, uint8_t *buf, uint32_t cap);
uint64_t np_io_events_dropped(np_io *io);
int np_io_port_count(np_io *io);
int np_io_port_stats(np_io *io, int index, np_port_stats *out);
int np_io_port_lost(np_io *io, int index);
uint64_t np_io_tx_no_such_port(np_io *io);
uint64_t np_io_wakeups(np_io *io);
void np_io_stop(np_io *io);
void np_io_free(np_io *io);
"""

EV_PACKET_IN, EV_RX_FRAME, EV_DUMP_RX, EV_DUMP_TX, EV_PORT_LOST, EV_PORT_ERROR = range(1, 7)
MAX_EVENT = 65536 + 64
STAT_FIELDS = ("rx", "rx_bytes", "tx", "tx_bytes", "tx_errors", "rx_truncated", "kernel_drops", "errors")


class IoLibrary:
    """The compiled np_io.c and its cffi declarations (built once per process)."""

    _instance: IoLibrary | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(IO_DECLARATIONS)
        path = build.build("np_io", {"np_io.c": build.c_source("np_io.c")})
        self.lib: Any = self.ffi.dlopen(str(path))

    @classmethod
    def get(cls) -> IoLibrary:
        """Raises build.NativeUnavailable."""
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance


@dataclass
class NativePort:
    """A port as the rest of p4switch sees it (its counters: ``NativeDataplane.port_stats``)."""

    number: int
    iface: str
    index: int


class NativeIo:
    """An np_io object: ports opened, the C thread, the event queue. The data planes below own one."""

    def __init__(self, ports: list[tuple[int, str]], cpu_port: int | None, dump_bytes: int,
                 pcap_dir: str | None) -> None:
        """Raises OSError naming the port that cannot be opened, build.NativeUnavailable."""
        self.library = IoLibrary.get()
        ffi, lib = self.library.ffi, self.library.lib
        self.ffi, self.lib = ffi, lib
        self.io = lib.np_io_new(-1 if cpu_port is None else cpu_port, dump_bytes)
        if self.io == ffi.NULL:
            raise OSError("cannot create the native data plane (out of memory or file descriptors)")
        self.ports: dict[int, NativePort] = {}
        err = ffi.new("char[]", 512)
        for number, iface in ports:
            if lib.np_io_add_port(self.io, number, iface.encode(), (pcap_dir or "").encode(), err, 512) < 0:
                message = ffi.string(err).decode(errors="replace")
                lib.np_io_free(self.io)
                self.io = ffi.NULL
                raise OSError(message)
            self.ports[number] = NativePort(number, iface, len(self.ports))
        self.event = ffi.new("np_event *")
        self.buffer = ffi.new("uint8_t[]", MAX_EVENT)

    def start(self) -> None:
        if self.lib.np_io_start(self.io) < 0:
            raise OSError("cannot start the packet I/O thread")

    def events(self) -> list[tuple[int, int, int, bytes]]:
        """Every queued event as (kind, port, aux, data); empty when none (the queue's fd then blocks)."""
        out = []
        ev, buf = self.event, self.buffer
        while self.lib.np_io_next_event(self.io, ev, buf, MAX_EVENT):
            out.append((ev.kind, ev.port, ev.aux, bytes(self.ffi.buffer(buf, min(ev.len, MAX_EVENT)))))
        return out

    def port_stats(self, number: int) -> dict[str, int]:
        out = self.ffi.new("np_port_stats *")
        self.lib.np_io_port_stats(self.io, self.ports[number].index, out)
        return {name: int(getattr(out, name)) for name in STAT_FIELDS}

    def close(self) -> None:
        if self.io != self.ffi.NULL:
            self.lib.np_io_free(self.io)  # stops the thread first
            self.io = self.ffi.NULL


class EventThread:
    """One Python thread blocked in poll() on the event queues' eventfds (and its own wake-up eventfd),
    calling ``handle`` whenever one is readable. ``refresh()`` makes it take the fds again (the running
    program changed), ``stop()`` ends it."""

    def __init__(self, fds: Callable[[], list[int]], handle: Callable[[], None], name: str) -> None:
        self.fds = fds
        self.handle = handle
        self.wake_fd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping:
            poller = select.poll()
            poller.register(self.wake_fd, select.POLLIN)
            for fd in self.fds():
                poller.register(fd, select.POLLIN)
            while True:
                ready = {fd for fd, _ in poller.poll()}
                if self.wake_fd in ready:
                    with contextlib.suppress(BlockingIOError):
                        os.eventfd_read(self.wake_fd)
                    break
                self.handle()
            self.handle()

    def refresh(self) -> None:
        os.eventfd_write(self.wake_fd, 1)

    def stop(self) -> None:
        self.stopping = True
        self.refresh()
        if self.thread.is_alive():
            self.thread.join(timeout=10)
        os.close(self.wake_fd)


class NativeDataplane:
    """The switch's ports served by the native I/O thread (see the module docstring)."""

    def __init__(self, device: Any, ports: list[tuple[int, str]], log: logging.Logger, dump_bytes: int = 0,
                 pcap_dir: str | None = None) -> None:
        """Raises OSError naming the port that cannot be opened, build.NativeUnavailable."""
        self.device = device
        self.log = log
        self.io = NativeIo(ports, device.cpu_port, dump_bytes, pcap_dir)
        self.ports = self.io.ports
        self.stats: Counter[str] = Counter()
        self.io_fd = int(self.io.lib.np_io_event_fd(self.io.io))
        self.switch: Any = None
        """the running native switch (its events come through its own queue)"""
        self.events = EventThread(self._event_fds, self._handle_events, "p4switch-events")
        self.started = False
        device.transmit = self.transmit
        device.on_install.append(self.pipeline_changed)
        self.pipeline_changed(device.switch)
        for port in self.ports.values():
            log.info("port %d on %s, native I/O (receive ring, batched send)", port.number, port.iface)

    def pipeline_changed(self, switch: Any) -> None:
        """The device runs a new program: a native one runs in the I/O thread, any other in Python."""
        native = switch if getattr(switch, "engine", None) == "native" else None
        pipeline = native.native_pipeline if native is not None else self.io.ffi.NULL
        self.io.lib.np_io_set_pipeline(self.io.io, pipeline)  # returns once no burst runs the old one
        old, self.switch = self.switch, native
        self.events.refresh()
        if old is not None:
            old.deliver_events()  # what its last packets made

    def _event_fds(self) -> list[int]:
        switch = self.switch
        return [self.io_fd] + ([switch.event_fd()] if switch is not None else [])

    def transmit(self, number: int, frame: bytes) -> None:
        """Send one frame out of port ``number`` (PacketOut results, a Python pipeline's output)."""
        if self.io.lib.np_io_send(self.io.io, number, frame, len(frame)) < 0:
            self.stats["tx_no_such_port"] += 1
            self.log.debug("frame to port %d dropped: no interface bound to it", number)

    def run(self, stop: threading.Event) -> None:
        """Start the I/O and event threads and serve until ``stop`` is set (the caller's thread sleeps)."""
        self.io.start()
        self.events.start()
        self.started = True
        while not stop.wait(3600):
            pass

    def _handle_events(self) -> None:
        switch = self.switch
        if switch is not None:
            switch.deliver_events()
        for kind, port, aux, data in self.io.events():
            if kind == EV_PACKET_IN:
                self.device.to_cpu(data)
            elif kind == EV_RX_FRAME:
                self._process(port, data)
            elif kind in (EV_DUMP_RX, EV_DUMP_TX):
                verb = "Received" if kind == EV_DUMP_RX else "Sending"
                self.log.info("%s packet of length %d on port %d: %s", verb, aux, port, data.hex())
            elif kind == EV_PORT_LOST:
                self.stats["port_lost"] += 1
                self.log.warning("port %d: interface %s disappeared (%s); it is no longer polled", port,
                                 data.decode(errors="replace"), os.strerror(aux) if aux else "gone")
            elif kind == EV_PORT_ERROR:
                self.stats["port_errors"] += 1
                self.log.warning("port %d (%s): %s", port, data.decode(errors="replace"), os.strerror(aux))

    def _process(self, port: int, frame: bytes) -> None:
        try:
            self.device.process(port, frame)
        except Exception:  # noqa: BLE001 - one bad frame must not stop the switch
            self.stats["process_errors"] += 1
            self.log.exception("pipeline failed on a frame from port %d", port)

    def port_stats(self) -> dict[int, dict[str, int]]:
        """Counters per port number: rx/tx frames and bytes, send errors, the kernel ring's drops."""
        return {number: self.io.port_stats(number) for number in self.ports}

    def wakeups(self) -> int:
        """How often the I/O thread has woken up (it sleeps in poll() while no frame arrives)."""
        return int(self.io.lib.np_io_wakeups(self.io.io))

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            self.device.on_install.remove(self.pipeline_changed)
        self.io.lib.np_io_stop(self.io.io)
        if self.started:
            self.events.stop()
            self._handle_events()  # what the last bursts queued
        for number, port in self.ports.items():
            counts = {k: v for k, v in self.io.port_stats(number).items() if v or k in ("rx", "tx")}
            text = ", ".join(f"{k} {v}" for k, v in counts.items())
            self.log.info("port %d (%s): %s", number, port.iface, text)
        dropped = self.io.lib.np_io_events_dropped(self.io.io)
        if dropped:
            self.log.warning("%d events for Python were dropped (queue full)", dropped)
        self.io.close()
