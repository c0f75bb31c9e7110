"""The SM against in-process software switches wired into a fabric, with real host agents in-process.

Pipeline push and entries read back, keys delivered and acknowledged, a spoofed P_Key flood marked by the
switches, trapped by the victim's agent, traced to the true port, filtered there and flushed after the
quiet period; forged traps install nothing; policy switched at run time; an SM restart writes nothing twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from ibsec import addressing, keys, names
from ibsec.agent.adapter import Adapter, AdapterError, AgentConfig
from ibsec.agent.counters import Drop
from ibsec.agent.qp import Service
from ibsec.polling import poll_until_async
from ibsm import cli, control
from ibsm.core import SmOptions, SubnetManager
from ibsm.events import read_events
from ibsm.partitions import load_partitions
from ibsm.sif import SifOptions
from ibsm.topology import Partition
from ibsm.traps import TrapOptions

from labs.sm_fabric import InProcessFabric, ca_keys, flood_frame, inprocess_fabric, trap_257

from .conftest import DATA

FAST = SmOptions(run_dir=Path("."), sif=SifOptions(quiet_period=2.0, poll_interval=0.1),
                 traps=TrapOptions(suppress_window=0.3))


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[InProcessFabric]:
    with inprocess_fabric(DATA / "fattree-2x2.json", tmp_path) as fab:
        yield fab


def _agents(fab: InProcessFabric, store: keys.KeyStore, tmp: Path) -> dict[str, Adapter]:
    agents = {}
    for host in fab.topo.hosts:
        key_file = tmp / f"{host.name}.keys"
        store.provision_host(host.guid, key_file)
        mac = bytes.fromhex(addressing.guid_to_mac(host.guid).replace(":", ""))
        config = AgentConfig(name=host.name, mac=mac, subnet=1, lid=host.lid, key_file=key_file,
                             sm_gid=fab.topo.sm_gid, trap_window=0.2)
        agent = Adapter(config, lambda frame, h=host.name: fab.send_from_host(h, frame))
        fab.attach(host.name, agent.receive)
        agents[host.name] = agent
    return agents


class Running:
    def __init__(self, sm: SubnetManager, task: asyncio.Task[None]) -> None:
        self.sm, self.task = sm, task

    async def stop(self) -> None:
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task


async def _start(fab: InProcessFabric, store: keys.KeyStore, tmp: Path,
                 partitions: list[Partition] | None = None, **changes: Any) -> Running:
    options = SmOptions(**{**FAST.__dict__, "run_dir": tmp, **changes})
    parts = list(fab.topo.partitions) if partitions is None else partitions
    sm = SubnetManager(fab.topo, parts, store, options)
    task = asyncio.create_task(sm.run())
    await asyncio.wait_for(sm.ready.wait(), 60)  # a hung start, not a slow one
    return Running(sm, task)


@pytest.fixture
async def running(fabric: InProcessFabric, tmp_path: Path
                  ) -> AsyncIterator[tuple[Running, dict[str, Adapter]]]:
    store = ca_keys(fabric.topo)
    agents = _agents(fabric, store, tmp_path)
    run = await _start(fabric, store, tmp_path)
    yield run, agents
    if not run.task.done():
        await run.stop()


async def _until(predicate: Any, timeout: float = 60.0) -> None:
    reached = await poll_until_async(predicate, timeout, interval=0.02)
    assert reached is not None, "condition not reached in time"


def _events(tmp: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_events(tmp / "events.jsonl") if e["event"] == kind]


async def test_pipeline_pushed_and_entries_readable(running: Any, fabric: InProcessFabric) -> None:
    run, _ = running
    s1 = fabric.entries("s1", names.ROUTES)
    assert len(s1) == 3  # h1, h2 and the ECMP default up
    assert len(fabric.entries("s3", names.PORT_ROLES)) == 2
    assert len(fabric.entries("s1", names.SM_PUNT)) == 1
    status = await run.sm.status()
    assert status["switches"] == {"s1": "up", "s2": "up", "s3": "up", "s4": "up"}
    s2 = fabric.devices["s2"].switch
    assert s2 is not None
    meter = s2.meter_get(names.PUNT_METER, 1)  # a host port: what one host may send to the SM
    assert meter is not None and (meter.cir, meter.cburst) == (FAST.punt_rate, FAST.punt_burst)
    assert s2.meter_get(names.PUNT_METER, 3) is None  # up-ports carry no host's traps


async def test_keys_delivered_to_members_only(running: Any, tmp_path: Path) -> None:
    run, agents = running
    await _until(lambda: run.sm.keys.outstanding() == 0)
    delivered = _events(tmp_path, "key-delivered")
    assert len(delivered) == sum(len(d.what) for d in run.sm.keys.deliveries)
    assert not _events(tmp_path, "key-delivery-failed")
    assert agents["h1"].keyring.describe()["partitions"] == ["0x0001", "0x7fff"]
    assert agents["h2"].keyring.describe()["partitions"] == ["0x7fff"]  # not a member of compute
    assert agents["h3"].keyring.sm_sk == run.sm.keys.sm_sk
    compute = agents["h3"].own_partition(0x0001)  # sth-aead in the topology: the SM's table says so
    assert compute is not None and compute.mode == 2
    text = (tmp_path / "events.jsonl").read_text()
    for key in [run.sm.keys.sm_sk, *run.sm.keys.partition_keys.values()]:
        assert key.material.hex() not in text


async def test_spoofed_flood_traced_filtered_and_flushed(running: Any, fabric: InProcessFabric, tmp_path: Path
                                                         ) -> None:
    run, _ = running
    await _until(lambda: run.sm.keys.outstanding() == 0)
    flood = flood_frame(fabric.topo, claimed="h4", victim="h3", pkey=0x1234)
    fabric.send_from_host("h1", flood)  # h1 attacks h3, pretending to be h4
    # emitted once both writes are done: the invalid P_Key is written before the port's mode that checks it
    await _until(lambda: _events(tmp_path, "filter-installed"))
    (entry,) = fabric.entries("s1", names.INVALID_PKEYS)
    assert entry.match[names.INGRESS_PORT].value == 1  # h1's port on s1, not h4's
    (tb,) = _events(tmp_path, "traceback")
    assert (tb["victim"], tb["claimed_host"], tb["traced_host"], tb["traced_switch"], tb["traced_port"]) == \
        ("h3", "h4", "h1", "s1", 1)
    assert tb["packets_needed"] == 1 and tb["scheme"] == "port-marking"
    for _ in range(5):  # the attack goes on: dropped at s1 and counted, no new trap reaches the SM
        fabric.send_from_host("h1", flood)
    device = fabric.devices["s1"]
    assert device.switch is not None
    assert device.switch.counter_read(names.PKEY_VIOLATIONS, 1)[1] == 5
    await _until(lambda: _events(tmp_path, "filter-flushed"))
    assert not fabric.entries("s1", names.PARTITION_MODE)
    assert device.switch.counter_read(names.PKEY_VIOLATIONS, 1)[1] == 0
    (flushed,) = _events(tmp_path, "filter-flushed")
    assert flushed["count"] == 5 and flushed["port"] == 1


async def test_forged_trap_installs_nothing(running: Any, fabric: InProcessFabric, tmp_path: Path) -> None:
    run, _ = running
    victim = fabric.topo.hosts[2]
    wrong = keys.Key.generate(keys.KeyType.CA_SK, (victim.guid,))
    frame = trap_257(fabric.topo, victim, wrong, bad_pkey=0x1234, claimed_gid=fabric.topo.hosts[0].gid,
                     mf=0x3)
    fabric.send_from_host(victim.name, frame)
    await _until(lambda: run.sm.traps.counters["forged"] == 1)
    await asyncio.sleep(0.2)
    assert not any(fabric.entries(s, names.INVALID_PKEYS) for s in ("s1", "s2"))
    (trap,) = [e for e in _events(tmp_path, "trap") if e["status"] == "forged"]
    assert "does not verify" in trap["reason"]


async def test_policy_switch_at_run_time(running: Any, fabric: InProcessFabric, tmp_path: Path) -> None:
    run, _ = running
    await run.sm.set_policy("if")
    modes = fabric.entries("s1", names.PARTITION_MODE)
    assert sorted(e.match[names.INGRESS_PORT].value for e in modes) == [1, 2]  # host ports only
    assert not fabric.entries("s3", names.PARTITION_MODE)
    await run.sm.set_policy("dt")
    assert len(fabric.entries("s3", names.PARTITION_MODE)) == 2
    assert len(fabric.entries("s3", names.VALID_PKEYS)) == 2 * 3  # fabric port: every key in use
    await run.sm.set_policy("sif")
    assert not fabric.entries("s1", names.PARTITION_MODE) and not fabric.entries("s1", names.VALID_PKEYS)
    assert [e["new"] for e in _events(tmp_path, "policy-changed")] == ["if", "dt", "sif"]


async def test_sm_restart_reconciles_without_duplicates(running: Any, fabric: InProcessFabric, tmp_path: Path
                                                        ) -> None:
    run, agents = running
    await _until(lambda: run.sm.keys.outstanding() == 0)
    fabric.send_from_host("h1", flood_frame(fabric.topo, claimed="h2", victim="h3", pkey=0x4321))
    # the whole filter (its invalid P_Key, then the port's mode) is written before the event; stopping
    # the SM between the two writes (a loaded machine widens the gap) would leave half a filter to adopt
    await _until(lambda: _events(tmp_path, "filter-installed"))
    before = {s: len(fabric.entries(s, names.ROUTES)) for s in fabric.devices}
    await run.stop()
    store = run.sm.traps.source.keystore
    again = await _start(fabric, store, tmp_path, sif=SifOptions(quiet_period=30.0, poll_interval=0.1),
                         distribute_keys=False)
    try:
        ready = _events(tmp_path, "switch-ready")[-4:]
        assert all(e["inserted"] == 0 and e["deleted"] == 0 and e["modified"] == 0 for e in ready), ready
        assert {s: len(fabric.entries(s, names.ROUTES)) for s in fabric.devices} == before
        (adopted,) = _events(tmp_path, "filter-adopted")
        assert (adopted["switch"], adopted["port"], adopted["pkeys"]) == ("s1", 1, ["0x4321"])
        assert again.sm.sif.watched() == [("s1", 1)]
        assert len(fabric.entries("s1", names.INVALID_PKEYS)) == 1
    finally:
        await again.stop()


async def test_management_pkey_is_never_filtered(running: Any, fabric: InProcessFabric, tmp_path: Path
                                                 ) -> None:
    """A trap for the default partition's P_Key (two limited members talking): SIF must not cut the
    sender's port off the default partition, where the SM's own MADs travel."""
    run, _ = running
    h2, h4 = fabric.topo.hosts[1], fabric.topo.hosts[3]
    assert run.sm.plan.fat_tree is not None
    mf = run.sm.plan.fat_tree.encode([(0, 1), (1, 0)])  # from h2 (digit 1 on leaf s1, leaf digit 0)
    key = run.sm.traps.source.keystore.ca_key(h4.guid)
    fabric.send_from_host("h4", trap_257(fabric.topo, h4, key, bad_pkey=0x7FFF, claimed_gid=h2.gid, mf=mf))
    await _until(lambda: _events(tmp_path, "filter-refused"))
    (refused,) = _events(tmp_path, "filter-refused")
    assert (refused["switch"], refused["port"], refused["reason"]) == ("s1", 2, "management P_Key")
    assert not fabric.entries("s1", names.INVALID_PKEYS)


@pytest.mark.parametrize("routing", ["deterministic", "adaptive"])
async def test_mesh_flood_traced_by_ddpm(tmp_path: Path, routing: str) -> None:
    """On the 2x2 mesh the switches add DDPM deltas hop by hop (adaptive: spread over both minimal paths)
    and the SM decodes the victim's MF to the attacker's switch and host port."""
    doc = json.loads((DATA / "mesh-2x2.json").read_text())
    doc["routing"] = routing
    source = tmp_path / "mesh.json"
    source.write_text(json.dumps(doc))
    with inprocess_fabric(source, tmp_path) as fab:
        store = ca_keys(fab.topo)
        _agents(fab, store, tmp_path)
        run = await _start(fab, store, tmp_path, distribute_keys=False)
        try:
            members = fab.entries("s1", names.ROUTE_GROUPS)
            assert len(members) == (2 if routing == "adaptive" else 0)  # (0,0) -> (1,1): 2 minimal next hops
            fab.send_from_host("h1", flood_frame(fab.topo, claimed="h2", victim="h4", pkey=0x1234))
            await _until(lambda: _events(tmp_path, "filter-installed"))
            (tb,) = _events(tmp_path, "traceback")
            assert (tb["traced_host"], tb["traced_switch"], tb["traced_port"], tb["scheme"]) == \
                ("h1", "s1", 1, "ddpm")
            assert tb["claimed_host"] == "h2"
        finally:
            await run.stop()


async def test_many_bad_keys_switch_the_port_to_valid_list(running: Any, fabric: InProcessFabric,
                                                           tmp_path: Path) -> None:
    """h2's port may carry 0xFFFF and 0x7FFF: a third invalid P_Key would make the invalid list the longer
    one, so SIF checks the valid list there instead (seed 000 sec. 5.3), and later turns the port off."""
    run, _ = running
    await _until(lambda: run.sm.keys.outstanding() == 0)
    for n, pkey in enumerate((0x0011, 0x0012, 0x0013)):
        fabric.send_from_host("h2", flood_frame(fabric.topo, claimed="h1", victim="h4", pkey=pkey))
        await _until(lambda n=n: len(_events(tmp_path, "traceback")) > n)
    # the switch-over is three writes (valid list, mode, then the invalid list removed): wait for the last
    await _until(lambda: any(e.action.name.endswith("filter_valid_list")
                             for e in fabric.entries("s1", names.PARTITION_MODE))
                 and not fabric.entries("s1", names.INVALID_PKEYS))
    assert sorted(e.match[names.P_KEY].value for e in fabric.entries("s1", names.VALID_PKEYS)) == \
        [0x7FFF, 0xFFFF]
    fabric.send_from_host("h2", flood_frame(fabric.topo, claimed="h1", victim="h4", pkey=0x0099))
    device = fabric.devices["s1"].switch
    assert device is not None
    assert device.counter_read(names.PKEY_VIOLATIONS, 2)[1] == 1  # not in the valid list: dropped
    await _until(lambda: _events(tmp_path, "filter-flushed"))
    assert not fabric.entries("s1", names.PARTITION_MODE) and not fabric.entries("s1", names.VALID_PKEYS)


async def test_trap_flood_is_absorbed(fabric: InProcessFabric, tmp_path: Path) -> None:
    """h3 floods the SM with traps (authentic, forged, replayed): the punt meter drops most at s2, the SM
    counts the rest without acting twice, answers status meanwhile, and still filters a real attack."""
    store = ca_keys(fabric.topo)
    _agents(fabric, store, tmp_path)
    run = await _start(fabric, store, tmp_path, punt_rate=50, punt_burst=10, distribute_keys=False)
    try:
        h1, h3 = fabric.topo.hosts[0], fabric.topo.hosts[2]
        forged = keys.Key.generate(keys.KeyType.CA_SK, (h3.guid,))
        frames = [trap_257(fabric.topo, h3, store.ca_key(h3.guid) if i % 2 else forged, bad_pkey=0x2222,
                           claimed_gid=h1.gid, mf=0) for i in range(100)]
        device = fabric.devices["s2"]
        assert device.switch is not None

        def flood() -> None:
            for _ in range(10):
                for frame in frames:
                    device.process(h3.port, frame)

        flooding = asyncio.get_running_loop().run_in_executor(None, flood)
        fabric.send_from_host("h2", flood_frame(fabric.topo, claimed="h4", victim="h1", pkey=0x5555))
        while not flooding.done():  # answered all along (how fast: labs.sm_bench's trap flood)
            await run.sm.status()
            await asyncio.sleep(0.05)
        await _until(lambda: any(e["pkey"] == "0x5555" for e in _events(tmp_path, "filter-installed")))
        assert device.switch.counter_read(names.DROPS, names.p4_const("DROP_PUNT_METER"))[1] > 500
        counters = run.sm.traps.counters
        assert counters["accepted"] <= 3 and counters["forged"] > 0  # acted on once, the rest counted
    finally:
        await run.stop()


async def test_opensm_partitions_file_drives_the_fabric(fabric: InProcessFabric, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A cluster's partitions.conf written for OpenSM (IPoIB default partition with groups, two storage
    partitions, a compute partition of limited members and a full head node) under policy IF: the SM
    gives each host its table and each host port its valid P_Keys; members talk, limited members only
    with the full one, a non-member's packets are dropped at its own switch port, and `sm partitions`
    reports the multicast groups the SM keeps."""
    store = ca_keys(fabric.topo)
    agents = _agents(fabric, store, tmp_path)
    run = await _start(fabric, store, tmp_path, load_partitions(DATA / "partitions" / "cluster.conf"),
                       policy="if")
    server = await control.serve_control(run.sm, tmp_path / "sm.sock")
    try:
        await _until(lambda: run.sm.keys.outstanding() == 0)
        assert {h: sorted(a.partitions) for h, a in agents.items()} == {
            "h1": [0x8010, 0x8A01, 0xFFFF], "h2": [0x0010, 0x8A02, 0xFFFF],
            "h3": [0x0010, 0x8A01, 0xFFFF], "h4": [0x0010, 0x8A02, 0xFFFF]}
        assert sorted(e.match[names.P_KEY].value for e in fabric.entries("s1", names.VALID_PKEYS)
                      if e.match[names.INGRESS_PORT].value == 2) == [0x0010, 0x7FFF, 0x8A02, 0xFFFF]

        async def talk(a: str, b: str, pkey: int, timeout: float = 60.0) -> bytes | None:
            qp = await asyncio.to_thread(agents[a].cm.connect, agents[b].gid, Service.RC, pkey, None, None,
                                         timeout)
            agents[a].post_send(qp.qpn, f"{a} to {b}".encode())
            return await asyncio.to_thread(agents[b].wait_recv, qp.remote_qpn or 0, 60.0)

        assert await talk("h1", "h3", 0x8A01) == b"h1 to h3"  # storage_a, sth-aead, across the spine
        assert await talk("h2", "h4", 0x8A02) == b"h2 to h4"  # storage_b, icrc-mac
        assert await talk("h2", "h1", 0x0010) == b"h2 to h1"  # compute: a limited member with the head node
        with pytest.raises(AdapterError):
            await talk("h2", "h4", 0x0010, timeout=1.0)  # two limited members may not talk:
        assert agents["h4"].counters.dropped(Drop.BAD_PKEY) > 0  # h4 drops h2's limited P_Key

        s1 = fabric.devices["s1"].switch
        assert s1 is not None
        dropped, refused = s1.counter_read(names.PKEY_VIOLATIONS, 2)[1], agents["h3"].counters.dropped(
            Drop.BAD_PKEY)
        for pkey in (0x8A01, 0x0A01, 0x8010):  # storage_a (not a member), compute claimed as a full member
            fabric.send_from_host("h2", flood_frame(fabric.topo, claimed="h2", victim="h3", pkey=pkey))
        assert s1.counter_read(names.PKEY_VIOLATIONS, 2)[1] == dropped + 3  # all dropped at h2's port
        assert agents["h3"].counters.dropped(Drop.BAD_PKEY) == refused

        assert await asyncio.to_thread(cli.main, ["partitions", str(tmp_path)]) == 0
        out = capsys.readouterr().out
        assert "storage_a 0x0a01: secmode sth-aead, sl 0, ipoib" in out
        assert "  hosts: h1 full, h2 limited, h3 limited, h4 limited" in out  # compute
        assert ("  group ff15:601b:ffff::1:ff00:0: P_Key 0xffff, Q_Key 0x00000b1b, mtu 5, rate 7, sl 0, "
                "scope 5, TClass 0, FlowLabel 0x00000") in out
        assert await asyncio.to_thread(cli.main, ["partitions", str(tmp_path), "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert [len(r["groups"]) for r in rows] == [6, 1, 1, 0]
    finally:
        server.close()
        await run.stop()


async def test_a_task_that_will_not_end_does_not_hold_the_stop(fabric: InProcessFabric, tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """A task that ignores its cancel (what a P4Runtime channel's close did once on a loaded machine,
    holding a test's teardown for 600 s) is named in the log and left; the stop ends and says so."""
    caplog.set_level(logging.WARNING)
    store = ca_keys(fabric.topo)
    released = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await released.wait()  # the first cancel is ignored

    sm = SubnetManager(fabric.topo, list(fabric.topo.partitions), store,
                       SmOptions(**{**FAST.__dict__, "run_dir": tmp_path, "stop_grace": 0.5}))
    sm._sif_loop = stubborn  # type: ignore[method-assign]
    task = asyncio.create_task(sm.run())
    await asyncio.wait_for(sm.ready.wait(), 60)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert _events(tmp_path, "sm-stop")
    assert [r.getMessage() for r in caplog.records if "has not ended" in r.getMessage()] == [
        "stop: task sif has not ended 0.5 s after it was cancelled; left behind"]
    released.set()
