"""Two or more adapters in this process joined by queues: fast tests of the receive path, no namespaces."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from pathlib import Path

from ibsec import addressing, keys
from ibsec.agent.adapter import Adapter, AgentConfig
from ibsec.agent.qp import Partition, Scope
from ibsec.polling import poll_until

SECURE_PKEY = 0x8001


class Loopback:
    """Adapters whose frames reach each other through one queue each, pumped by a thread each.

    ``frames`` keeps every frame sent (the fuzz corpus); ``mute`` delivers nothing (so a fuzzed adapter's
    answers go nowhere, or a test plays the man in the middle); ``tick`` (seconds) runs each adapter's
    timer as the agent does.
    """

    def __init__(self, tmp: Path, n: int = 2, tick: float | None = None, **config: object) -> None:
        self.frames: list[bytes] = []
        self.mute = False
        self._queues: list[queue.Queue[bytes]] = [queue.Queue() for _ in range(n)]
        self._stop = threading.Event()
        guids = [addressing.host_guid(i) for i in range(n)]
        self.ca_keys = [keys.Key.generate(keys.KeyType.CA_SK, (g,)) for g in guids]
        self.p_sk = keys.Key.generate(keys.KeyType.P_SK, (SECURE_PKEY,))
        pairs = [keys.Key.generate(keys.KeyType.CA_SK_IJ, (a, b)) for a in guids for b in guids if a < b]
        self.adapters: list[Adapter] = []
        for i in range(n):
            key_file = tmp / f"h{i}.keys"
            keys.write_key_file(
                key_file, [self.ca_keys[i], self.p_sk, *(k for k in pairs if guids[i] in k.owner)]
            )
            mac = bytes.fromhex(addressing.host_mac(i).replace(":", ""))
            adapter = Adapter(
                AgentConfig(name=f"h{i}", mac=mac, key_file=key_file, **config),  # type: ignore[arg-type]
                self._sender(mac),
            )
            adapter.set_partitions([Partition(0xFFFF), Partition(SECURE_PKEY, 0, Scope.PARTITION)])
            self.adapters.append(adapter)
        self._threads = [threading.Thread(target=self._pump, args=(i,), daemon=True) for i in range(n)]
        if tick is not None:  # the agent's timer thread: retransmissions, RNR waits, half-open expiry
            self._threads.append(threading.Thread(target=self._tick, args=(tick,), daemon=True))
        for thread in self._threads:
            thread.start()

    def _sender(self, mac: bytes) -> Callable[[bytes], None]:
        def send(frame: bytes) -> None:
            self.frames.append(frame)
            if self.mute:
                return
            for i, adapter in enumerate(self.adapters):
                if frame[:6] == adapter.config.mac:
                    self._queues[i].put(frame)

        return send

    def inject(self, index: int, frame: bytes) -> None:
        """Hand ``frame`` to adapter ``index`` through its queue, in order with what the others send it."""
        self._queues[index].put(frame)

    def idle(self, index: int, timeout: float = 60.0) -> bool:
        """Wait until adapter ``index`` handled everything queued for it."""
        return bool(poll_until(
            lambda: self._queues[index].empty() and self.adapters[index].counters.unaccounted() == 0,
            timeout, interval=0.01))

    def _tick(self, period: float) -> None:
        while not self._stop.wait(period):
            for adapter in self.adapters:
                adapter.tick()

    def _pump(self, i: int) -> None:
        while not self._stop.is_set():
            try:
                frame = self._queues[i].get(timeout=0.05)
            except queue.Empty:
                continue
            self.adapters[i].receive(frame)

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
