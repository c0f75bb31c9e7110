"""``python -m labs.sm_bench``: how fast the SM turns a trap into a filter, and how many traps it absorbs.

The fabric runs in this process (``labs.sm_fabric``: software switches over real gRPC, host agents
in-process); the SM is the real ``sm run`` in its own process, as in a deployment. Three measurements:

1. trap to filter: an attacker sends one packet with a bad P_Key under a forged source; the victim's agent
   traps; the clock runs from the trap frame entering the victim's switch to the partition-mode entry
   being inserted in the attacker's switch (the filter is active from then on). Each round waits for the
   flush, so every round is a fresh install. Median and p99 over ``--rounds`` (>= 50).
2. trap flood: a host sends 400 distinct traps (half authentic, half forged) round and round as fast as
   this process can for ``--seconds`` (after the first round they are replays), once behind the default
   punt meter and once without it. Reported: traps offered per second, punt meter drops, how many reached
   the SM and how many it handled per second (over the flood and one more second to drain), by outcome,
   and how long ``sm status`` takes meanwhile (median, p99): the SM stays responsive if that stays in
   milliseconds.
3. reconnect: a switch restarts empty ``--restarts`` times; from its port answering again to the SM's
   switch-back event, i.e. reprogrammed (median, max): well under a second if the SM's probe, not gRPC's
   backoff, brings it back.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ibsec import addressing, control, keys, names, rocev2
from ibsec.agent.adapter import Adapter, AgentConfig
from ibsec.polling import poll_until

from labs.sm_fabric import (
    InProcessFabric,
    ca_keys,
    events_of,
    flood_frame,
    inprocess_fabric,
    next_tid,
    sm_process,
    trap_257,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "controller" / "tests" / "data" / "fattree-2x2.json"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class ModeWatch:
    """Timestamps of partition-mode inserts and deletes, hooked into each software switch's engine."""

    def __init__(self, fab: InProcessFabric) -> None:
        self.inserts: queue.Queue[tuple[str, int, float]] = queue.Queue()
        self.deletes: queue.Queue[tuple[str, int, float]] = queue.Queue()
        for name, device in fab.devices.items():
            assert device.switch is not None
            self._hook(name, device.switch)

    def _hook(self, name: str, engine: Any) -> None:
        insert, delete = engine.table_insert, engine.table_delete

        def on_insert(table: str, entry: Any) -> None:
            insert(table, entry)
            if table == names.PARTITION_MODE:
                self.inserts.put((name, entry.match[names.INGRESS_PORT].value, time.perf_counter()))

        def on_delete(table: str, entry: Any) -> None:
            delete(table, entry)
            if table == names.PARTITION_MODE:
                self.deletes.put((name, entry.match[names.INGRESS_PORT].value, time.perf_counter()))

        engine.table_insert, engine.table_delete = on_insert, on_delete


def _agents(fab: InProcessFabric, store: keys.KeyStore, workdir: Path, on_trap: Callable[[], None]
            ) -> dict[str, Adapter]:
    """An in-process agent per host; ``on_trap`` is called when one sends a MAD to the SM."""
    sm_mac = addressing.guid_to_mac(addressing.parse_gid(fab.topo.sm_gid).guid).replace(":", "")
    agents = {}
    for host in fab.topo.hosts:
        store.provision_host(host.guid, workdir / f"{host.name}.keys")
        mac = bytes.fromhex(addressing.guid_to_mac(host.guid).replace(":", ""))
        config = AgentConfig(name=host.name, mac=mac, lid=host.lid, key_file=workdir / f"{host.name}.keys",
                             sm_gid=fab.topo.sm_gid, trap_window=0.05)

        def send(frame: bytes, name: str = host.name) -> None:
            if frame[rocev2.DST_MAC_AT].hex() == sm_mac:
                on_trap()
            fab.send_from_host(name, frame)

        agents[host.name] = Adapter(config, send)
        fab.attach(host.name, agents[host.name].receive)
    return agents


def trap_to_filter(fab: InProcessFabric, workdir: Path, rounds: int) -> dict[str, Any]:
    store = ca_keys(fab.topo)
    trap_times: queue.Queue[float] = queue.Queue()
    _agents(fab, store, workdir, lambda: trap_times.put(time.perf_counter()))
    latencies = []
    hosts = fab.topo.hosts
    with sm_process(fab, workdir, store, "--no-keys", "--quiet-period", "0.2", "--poll-interval", "0.05",
                    "--suppress-window", "0.1"):
        watch = ModeWatch(fab)
        for r in range(rounds):
            attacker, victim, claimed = hosts[r % 4], hosts[(r + 2) % 4], hosts[(r + 1) % 4]
            fab.send_from_host(attacker.name, flood_frame(fab.topo, claimed.name, victim.name, 0x1000 + r))
            sent = trap_times.get(timeout=5)
            switch, port, installed = watch.inserts.get(timeout=10)
            assert (switch, port) == (attacker.switch, attacker.port), (switch, port, attacker)
            latencies.append(1000 * (installed - sent))
            watch.deletes.get(timeout=10)  # flushed after the quiet period: the next round installs afresh
    return {"rounds": rounds, "median_ms": round(statistics.median(latencies), 2),
            "p99_ms": round(_percentile(latencies, 0.99), 2), "min_ms": round(min(latencies), 2),
            "max_ms": round(max(latencies), 2)}


def trap_flood(fab: InProcessFabric, workdir: Path, seconds: float, punt_rate: int | None) -> dict[str, Any]:
    """Authentic, forged and replayed traps from one host as fast as this process can send them."""
    store = ca_keys(fab.topo)
    victim, other = fab.topo.hosts[2], fab.topo.hosts[0]
    forged_key = keys.Key.generate(keys.KeyType.CA_SK, (victim.guid,))
    frames = []
    for i in range(400):  # built before the clock starts; TIDs are fresh, so none is a replay
        key = store.ca_key(victim.guid) if i % 2 else forged_key
        frames.append(trap_257(fab.topo, victim, key, bad_pkey=0x2222, claimed_gid=other.gid, mf=0,
                               tid=next_tid()))
    unlimited = ("--punt-rate", "1000000", "--punt-burst", "1000000")
    extra = ("--punt-rate", str(punt_rate)) if punt_rate else unlimited
    sock = workdir / "sm.sock"
    with sm_process(fab, workdir, store, "--no-keys", *extra):
        device = fab.devices[victim.switch]
        assert device.switch is not None
        drops_before = device.switch.counter_read(names.DROPS, names.p4_const("DROP_PUNT_METER"))[1]
        before = control.call(sock, "status")
        stop = time.monotonic() + seconds
        sent = [0]

        def flood() -> None:
            i = 0
            while time.monotonic() < stop and i < 200_000:
                device.process(victim.port, frames[i % len(frames)])
                i += 1
            sent[0] = i

        thread = threading.Thread(target=flood)
        started = time.monotonic()
        thread.start()
        status_ms = []
        while thread.is_alive():
            t0 = time.perf_counter()
            control.call(sock, "status", timeout=30)
            status_ms.append(1000 * (time.perf_counter() - t0))
            time.sleep(0.1)
        thread.join()
        elapsed = time.monotonic() - started
        time.sleep(1.0)  # let the SM drain what reached it
        after = control.call(sock, "status")
        drops = device.switch.counter_read(names.DROPS, names.p4_const("DROP_PUNT_METER"))[1] - drops_before
    handled = sum(after["traps"].values()) - sum(before["traps"].values())
    return {"punt_meter": f"{punt_rate}/s per port" if punt_rate else "off", "seconds": round(elapsed, 2),
            "offered_per_s": round(sent[0] / elapsed), "meter_drops": drops,
            "reached_sm": after["packet_ins"] - before["packet_ins"], "handled": handled,
            "handled_per_s": round(handled / (elapsed + 1.0)),
            "traps": {k: after["traps"].get(k, 0) - before["traps"].get(k, 0) for k in after["traps"]},
            "status_median_ms": round(statistics.median(status_ms), 1),
            "status_p99_ms": round(_percentile(status_ms, 0.99), 1)}


def reconnect(fab: InProcessFabric, workdir: Path, rounds: int) -> dict[str, Any]:
    """A switch restarts empty, ``rounds`` times: seconds from its port answering again to the SM's
    switch-back event (every entry written again). The SM probes the port instead of waiting out gRPC's
    reconnect backoff, so this stays far below that backoff's seconds."""
    store = ca_keys(fab.topo)
    name = fab.topo.switches[0].name
    events = workdir / "events.jsonl"
    seconds = []
    with sm_process(fab, workdir, store, "--no-keys"):
        for _ in range(rounds):
            answering = fab.restart(name, partial(_wait_event, events, "switch-lost", time.time()))
            back = _wait_event(events, "switch-back", answering)
            seconds.append(back["wall"] - answering)
    return {"rounds": rounds, "median_s": round(statistics.median(seconds), 3),
            "max_s": round(max(seconds), 3)}


def _wait_event(path: Path, kind: str, since: float, timeout: float = 60.0) -> dict[str, Any]:
    found = poll_until(lambda: [e for e in events_of(path) if e["event"] == kind and e["wall"] >= since],
                       timeout, interval=0.02)
    if found is None:
        raise RuntimeError(f"no {kind} event within {timeout} s")
    return found[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs.sm_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60, help="trap-to-filter rounds (>= 50 for the p99)")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each trap flood")
    parser.add_argument("--restarts", type=int, default=10, help="switch restarts to time")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ibsm-bench-") as tmp:
        for name, run in (("trap_to_filter", lambda f, d: trap_to_filter(f, d, args.rounds)),
                          ("flood_metered", lambda f, d: trap_flood(f, d, args.seconds, 200)),
                          ("flood_unmetered", lambda f, d: trap_flood(f, d, args.seconds, None)),
                          ("reconnect", lambda f, d: reconnect(f, d, args.restarts))):
            workdir = Path(tmp) / name
            workdir.mkdir(mode=0o700)
            with inprocess_fabric(EXAMPLE, workdir) as fab:
                results[name] = run(fab, workdir)
            print(f"{name}: {json.dumps(results[name])}", flush=True)
    ttf = results["trap_to_filter"]
    print(f"trap -> filter active: median {ttf['median_ms']} ms, p99 {ttf['p99_ms']} ms "
          f"over {ttf['rounds']} traps")
    for name in ("flood_metered", "flood_unmetered"):
        r = results[name]
        print(f"trap flood, punt meter {r['punt_meter']}: {r['offered_per_s']} traps/s offered, "
              f"{r['reached_sm']} reached the SM, {r['handled_per_s']} handled/s; sm status median "
              f"{r['status_median_ms']} ms, p99 {r['status_p99_ms']} ms")
    r = results["reconnect"]
    print(f"switch restarted {r['rounds']} times: reprogrammed {r['median_s']} s after its port answered "
          f"(median), at most {r['max_s']} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    sys.exit(main())
