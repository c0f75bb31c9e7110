"""QP exhaustion by a CM REQ flood (issue 14, defect 5) against agent processes on a bridge: 4,400 keyless
REQs with spoofed GIDs fill nothing a member needs, the member of the authenticated partition connects in
the middle of the flood, and the half-open connections the flood made time out."""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable

from ibsec import cmwire, layers
from ibsec.builder import Builder, gid_bytes, mac_of
from ibsec.cmwire import IBSEC_SERVICE_ID

from labs.agent_lab import SECURE_PKEY, AgentLab, provision, start_agents

from .helpers import Tap, wait_for
from .test_hostile import odd_gids, spoofed

FLOOD = 4400
HALF_OPEN_TIMEOUT = 10.0
"""The daemon's default. At 2 s, a loaded machine (load average 21-24) delayed the member's RTU past the
timeout and its connection was reaped as half-open before the test could use it."""


def test_a_member_connects_during_a_keyless_req_flood(make_fabric: Callable[[int], AgentLab]) -> None:
    fabric = make_fabric(3)
    h0, h1, h2 = fabric.hosts
    member, victim = start_agents(fabric, [h0, h1], provision(fabric, [h0, h1], partition_mode=2), None,
                                  "--half-open-timeout", str(HALF_OPEN_TIMEOUT))
    rng = random.Random(5)
    forger = Builder(mac_of(h2.gid), gid_bytes(h2.gid))
    flood = []
    for gid in odd_gids(FLOOD):  # keyless REQs every agent would take, in the default partition
        mad = cmwire.write(cmwire.Message(layers.CmAttr.REQ, local_comm_id=rng.getrandbits(32),
                                          service_id=IBSEC_SERVICE_ID, qpn=rng.randrange(2, 1 << 24),
                                          pkey=0xFFFF, private=cmwire.pack_private(0, os.urandom(12))))
        flood.append(spoofed(forger.mad_frame(victim.host.gid, 0xFFFF, mad), mac_of(h2.gid), gid))
    tap = Tap(h2)
    halfway = threading.Event()

    def send() -> None:
        for i, frame in enumerate(flood):
            tap.send(frame)
            if i == FLOOD // 2:
                halfway.set()

    flooder = threading.Thread(target=send)
    flooder.start()
    try:
        assert halfway.wait(60)
        qp = member.call("connect", remote_gid=victim.host.gid, pkey=SECURE_PKEY, mode=2, scope="session",
                         timeout=30)  # in the middle of the flood (patient: the machine may be loaded)
        qpn, remote = qp["qpn"], qp["remote_qpn"]
    finally:
        flooder.join()
        tap.close()
    member.call("send", qpn=qpn, data="through the flood")
    assert victim.call("recv", qpn=remote, timeout=10)["data_hex"] == b"through the flood".hex()
    counters = victim.counters()
    assert counters["drops"]["cm_limit"] > 0 and counters["stats"].get("internal_errors", 0) == 0
    assert len(victim.call("qps")) <= 1 + 32  # the member's, and at most the per-source half-open share
    only_the_member = [remote]
    assert wait_for(lambda: [q["qpn"] for q in victim.call("qps")] == only_the_member, 10 * HALF_OPEN_TIMEOUT)
    assert victim.counters()["stats"]["half_open_expired"] >= 1
