"""The SM under hostile input (issue 14): control-socket abuse, a flood that claims the SM's own GID,
traps replayed after the SM restarted, an agent that restarted and lost its keys.

Against in-process software switches and a real SubnetManager over gRPC, as test_sm_inprocess.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
from pathlib import Path
from typing import Any

import pytest
from ibsec import names
from ibsec.agent.adapter import Adapter
from ibsec.agent.qp import Service
from ibsm import control
from ibsm.keymgr import KeyOptions
from ibsm.sif import SifOptions
from ibsm.traps import TrapOptions, parse_frame

from labs.sm_fabric import InProcessFabric, ca_keys, flood_frame

from .test_sm_inprocess import _agents, _events, _start, _until, fabric  # noqa: F401 - fixture by name

MALFORMED = [
    (b"[1, 2]", 'a request is a JSON object with a "cmd" string'),
    (b"null", 'a request is a JSON object with a "cmd" string'),
    (b"42", 'a request is a JSON object with a "cmd" string'),
    (b'"status"', 'a request is a JSON object with a "cmd" string'),
    (b"{", "request is not JSON: Expecting property name"),
    (b'{"cmd": 7}', 'a request is a JSON object with a "cmd" string'),
    (b'{"cmd": "policy", "policy": Infinity}', "policy: field 'policy' must be one of dt, if, none, sif, "
     "got Infinity"),
    (b'{"cmd": "status", "since": 1e999}', "status: unknown field 'since' (fields: none)"),
    (b'{"cmd": "policy", "policy": ' + b"9" * 5000 + b"}", "policy: field 'policy' must be one of dt, if, "
     "none, sif, got an integer of 5000 digits"),
    (b'{"cmd": "status", "a": ' + b"[" * 40 + b"]" * 40 + b"}", "request nests deeper than 16 levels"),
    (b"\xff\xfe{}", "request is not UTF-8"),
    (b'{"cmd": "reboot"}', "unknown command 'reboot'"),
    (b'{"cmd": "policy", "policy": ["dt"]}', "policy: field 'policy' must be one of dt, if, none, sif"),
    (b'{"cmd": "policy", "policy": "fast"}', "policy: field 'policy' must be one of dt, if, none, sif, "
     'got "fast"'),
    (b'{"cmd": "policy"}', "policy: field 'policy' is required"),
]


async def _ask(path: Path, line: bytes) -> dict[str, Any]:
    reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 22)
    try:
        writer.write(line + b"\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.readline(), 10)
        assert answer, f"connection closed without an answer to {line[:40]!r}"
        result: dict[str, Any] = json.loads(answer)
        return result
    finally:
        writer.close()


async def _vanish(path: Path, line: bytes, reset: bool) -> None:
    """A client that sends a request and leaves without reading the answer (``reset``: with an RST)."""
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(line + b"\n")
    await writer.drain()
    if reset:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()


async def test_control_socket_answers_every_malformed_request(
        fabric: InProcessFabric, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    caplog.set_level(logging.INFO)
    run = await _start(fabric, ca_keys(fabric.topo), tmp_path, distribute_keys=False)
    server = await control.serve_control(run.sm, tmp_path / "sm.sock")
    try:
        path = tmp_path / "sm.sock"
        for line, expected in MALFORMED:
            answer = await _ask(path, line)
            assert answer["ok"] is False and expected in answer["error"], (line[:60], answer)
        too_long = await _ask(path, b'{"cmd": "status", "pad": "' + b"x" * 70_000 + b'"}')
        assert too_long == {"ok": False, "error": "request longer than 65536 bytes"}
        deep = await _ask(path, b"[" * 100_000)
        assert deep["ok"] is False
        for i in range(50):
            await _vanish(path, b'{"cmd": "status"}', reset=bool(i % 2))
        reader, writer = await asyncio.open_unix_connection(str(path))
        for _ in range(3):  # several requests on one connection, each answered in turn
            writer.write(b'{"cmd": "status"}\n')
            assert json.loads(await reader.readline())["ok"] is True
        writer.write(b'{"cmd": "status", "pad": "' + b"x" * 200_000 + b'"}\n{"cmd": "status"}\n')
        too_long = {"ok": False, "error": "request longer than 65536 bytes"}
        assert json.loads(await reader.readline()) == too_long
        assert json.loads(await reader.readline())["ok"] is True  # the line after a refused one is intact
        writer.close()
        status = (await _ask(path, b'{"cmd": "status"}'))["result"]
        assert status["switches"] == {"s1": "up", "s2": "up", "s3": "up", "s4": "up"}
        assert status["control"]["refused"] == len(MALFORMED) + 3
        assert status["control"].get("internal_errors", 0) == 0
    finally:
        server.close()
        await run.stop()
    noisy = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not noisy, [r.getMessage() for r in noisy]


async def test_flood_claiming_the_sms_gid_is_traced_and_filtered(
        fabric: InProcessFabric, tmp_path: Path) -> None:  # noqa: F811
    """The marking field is written by the switches whatever the source claims: h1 pretending to be the
    SM is traced to its own port and filtered there like any other attacker."""
    store = ca_keys(fabric.topo)
    _agents(fabric, store, tmp_path)
    run = await _start(fabric, store, tmp_path, distribute_keys=False)
    try:
        fabric.send_from_host("h1", flood_frame(fabric.topo, claimed="SM", victim="h3", pkey=0x1234))
        await _until(lambda: fabric.entries("s1", names.INVALID_PKEYS))
        (entry,) = fabric.entries("s1", names.INVALID_PKEYS)
        assert entry.match[names.INGRESS_PORT].value == 1 and entry.match[names.P_KEY].value == 0x1234
        await _until(lambda: _events(tmp_path, "filter-installed"))  # written once the switch has the entry
        (tb,) = _events(tmp_path, "traceback")
        assert (tb["claimed_source"], tb["claimed_host"], tb["traced_host"], tb["traced_switch"],
                tb["traced_port"]) == (fabric.topo.sm_gid, None, "h1", "s1", 1)
        (installed,) = _events(tmp_path, "filter-installed")
        assert (installed["switch"], installed["port"], installed["pkey"]) == ("s1", 1, "0x1234")
        fabric.send_from_host("h1", flood_frame(fabric.topo, claimed="SM", victim="h3", pkey=0x1234))
        device = fabric.devices["s1"].switch
        assert device is not None and device.counter_read(names.PKEY_VIOLATIONS, 1)[1] == 1
    finally:
        await run.stop()


async def test_traps_and_acks_replayed_after_an_sm_restart_are_refused(
        fabric: InProcessFabric, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    """Issue 14, defect 9: what the victim's agent sent to the SM before it restarted (its key ACKs, the
    trap about a flood) is refused as a replay afterwards; nothing is traced or filtered again."""
    store = ca_keys(fabric.topo)
    _agents(fabric, store, tmp_path)
    captured = fabric.tap("h3")
    traps = TrapOptions(suppress_window=0.3, replay_state=tmp_path / "sm-replay.state")
    run = await _start(fabric, store, tmp_path, traps=traps,
                       sif=SifOptions(quiet_period=1.0, poll_interval=0.1))
    await _until(lambda: run.sm.keys.outstanding() == 0)
    fabric.send_from_host("h1", flood_frame(fabric.topo, claimed="h2", victim="h3", pkey=0x2345))
    await _until(lambda: _events(tmp_path, "filter-flushed"), timeout=20)
    await run.stop()
    assert run.sm.traps.counters["accepted"] == 1
    assert len(captured) == 1 + len([d for d in run.sm.keys.deliveries if d.host == "h3"])
    again = await _start(fabric, store, tmp_path, traps=traps, distribute_keys=False)
    try:
        replayed = list(captured)
        for frame in replayed:
            fabric.send_from_host("h3", frame)
        await _until(lambda: again.sm.stats["packet_ins"] == len(replayed))
        status = await again.sm.status()
        assert status["traps"] == {"replay": 1}
        assert status["mads"] == {"key-ack-unexpected": len(replayed) - 1}
        acks = sorted(f"{raw.transaction_id:#018x}" for raw in map(parse_frame, replayed) if raw.is_response)
        assert sorted(e["transaction_id"] for e in _events(tmp_path, "key-ack-unexpected")
                      if e["transaction_id"] in acks) == acks  # each replayed ACK, once, by its TransactionID
        assert len(_events(tmp_path, "traceback")) == 1 and len(_events(tmp_path, "filter-installed")) == 1
    finally:
        await again.stop()
    noisy = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not noisy, [r.getMessage() for r in noisy]


def _restart_agent(fab: InProcessFabric, agents: dict[str, Adapter], name: str) -> Adapter:
    """A new agent process on ``name``'s port: same provisioning file, nothing from the SM, no QPs."""
    agents[name] = Adapter(agents[name].config, lambda frame: fab.send_from_host(name, frame))
    fab.attach(name, agents[name].receive)
    return agents[name]


async def _talk(a: Adapter, b: Adapter, pkey: int, message: bytes) -> bytes | None:
    """An RC connection a -> b in ``pkey`` (the partition's mode), one SEND; what b received."""
    qp = await asyncio.to_thread(a.cm.connect, b.gid, Service.RC, pkey, None, None, 5.0)
    await asyncio.to_thread(a.post_send, qp.qpn, message)
    return await asyncio.to_thread(b.wait_recv, qp.remote_qpn or 0, 5.0)


def _provisioned(agent: Adapter, pkey: int, peer: Adapter) -> bool:
    held = agent.keyring.describe()
    partition = agent.own_partition(pkey)
    return (partition is not None and partition.mode == 2 and f"{pkey & 0x7FFF:#06x}" in held["partitions"]
            and f"{peer.guid:#018x}" in held["pairwise_peers"])


async def test_restarted_agent_is_provisioned_again(fabric: InProcessFabric, tmp_path: Path) -> None:  # noqa: F811
    """Issue 14, defect 10: an agent that restarted lost its keys and P_Key table. Its port-up notice
    makes the SM provision it again; without one, the first trap it sends about its own partition does;
    the partition (sth-aead, 0x8001) works again and no member is ever filtered."""
    store = ca_keys(fabric.topo)
    agents = _agents(fabric, store, tmp_path)
    run = await _start(fabric, store, tmp_path)
    try:
        await _until(lambda: run.sm.keys.outstanding() == 0)
        assert await _talk(agents["h1"], agents["h3"], 0x8001, b"before") == b"before"

        h3 = _restart_agent(fabric, agents, "h3")
        assert not _provisioned(h3, 0x8001, agents["h1"])
        h3.tick()  # its timer's first round: the port-up notice
        await _until(lambda: _provisioned(h3, 0x8001, agents["h1"]))
        (hello,) = _events(tmp_path, "agent-hello")
        assert (hello["host"], hello["boot_id"], hello["action"]) == ("h3", f"{h3.mads.boot_id:#018x}",
                                                                       "provision")
        (again,) = _events(tmp_path, "host-reprovision")
        assert (again["host"], again["reason"], again["action"]) == ("h3", "port up", "re-provisioning")
        await _until(lambda: run.sm.keys.outstanding() == 0)  # the SM has every ACK, the table's last
        delivered = [e for e in _events(tmp_path, "key-delivered") if e["wall"] >= again["wall"]]
        assert {(e["host"], e["key"]) for e in delivered} == \
            {("h3", what) for d in run.sm.keys.deliveries if d.host == "h3" for what in d.what}
        assert await _talk(agents["h1"], h3, 0x8001, b"after the restart") == b"after the restart"
        h3.tick()
        assert h3.counters.stat("hellos_sent") == 1  # provisioned: it stops saying hello

        await asyncio.sleep(run.sm.options.keys.timeout)  # past the re-provisioning rate limit
        h3 = _restart_agent(fabric, agents, "h3")  # restarted again, and its notice gets lost
        assert await _talk(agents["h1"], h3, 0x8001, b"no hello") == b"no hello"  # a CM retry gets in
        refused = _events(tmp_path, "filter-refused")
        assert refused and {(e["switch"], e["port"], e["pkey"]) for e in refused} == {("s1", 1, "0x8001")}
        assert "stale" in refused[0]["reason"]
        assert [e["reason"] for e in _events(tmp_path, "host-reprovision")][1:] == ["stale P_Key table"]
        assert not _events(tmp_path, "filter-installed")
        assert not any(fabric.entries(s, names.INVALID_PKEYS) for s in fabric.devices)
    finally:
        await run.stop()


async def test_packet_outs_written_at_once_keep_the_stream_primary(
        fabric: InProcessFabric, tmp_path: Path) -> None:  # noqa: F811
    """Found by ibsec.fuzz.sm: two tasks writing PacketOuts to one switch at once (key retries and a
    re-provisioning) broke the gRPC stream; finsy then sent on a new stream that was never primary, so
    every later PacketOut was refused and every PacketIn lost. 30 at once (15 times h1's key batch and
    P_Key table), then the stream still works."""
    store = ca_keys(fabric.topo)
    agents = _agents(fabric, store, tmp_path)
    # no retry of a delivery whose ACK is late (a loaded machine): exactly these 30 MADs go out
    run = await _start(fabric, store, tmp_path, distribute_keys=False, keys=KeyOptions(timeout=3600.0))
    try:
        deliveries = [d for _ in range(15) for d in run.sm.keys.replan("h1")]
        await asyncio.gather(*(run.sm._send_delivery(d) for d in deliveries))
        # every PacketOut was written (gather returned); on a loaded machine the in-process switch and agent
        # take a while to carry 30 of them, so the wait bounds a hang, not their speed
        await _until(lambda: agents["h1"].counters.stat("keys_received") >= 6 * 15, timeout=180.0)
        assert agents["h1"].counters.stat("keys_received") == 6 * 15
        fabric.send_from_host("h2", flood_frame(fabric.topo, claimed="h3", victim="h1", pkey=0x2468))
        await _until(lambda: fabric.entries("s1", names.INVALID_PKEYS))  # a PacketIn from s1 got through
    finally:
        await run.stop()
