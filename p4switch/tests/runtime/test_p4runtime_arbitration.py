"""Primary/backup arbitration over StreamChannel with two clients, as the P4Runtime spec's rules say, and
the same through finsy's client (which must see its primary status and the per-update error details)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator

import finsy
import grpc
import pytest
from finsy.proto import U128, p4r

from p4switch.runtime.arbitration import Arbitration, Connection
from p4switch.tests.runtime import harness
from p4switch.tests.runtime.harness import update
from p4switch.tests.runtime.test_p4runtime_l2 import HOST_MAC, dmac_entry, frame_to

OK, NOT_FOUND, ALREADY_EXISTS = 0, grpc.StatusCode.NOT_FOUND.value[0], grpc.StatusCode.ALREADY_EXISTS.value[0]


Pair = tuple[harness.StreamClient, harness.StreamClient]


@pytest.fixture
def two_clients(switch: harness.InProcessSwitch) -> Iterator[Pair]:
    first, second = harness.StreamClient(switch.address), harness.StreamClient(switch.address)
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def test_highest_election_id_is_primary_and_both_hear_it(two_clients: Pair) -> None:
    low, high = two_clients
    assert low.arbitrate(10).status.code == OK  # alone: primary
    answer = high.arbitrate(20)
    assert answer.status.code == OK and U128.decode(answer.election_id) == 20
    demoted = low.next("arbitration").arbitration
    assert demoted.status.code == ALREADY_EXISTS and U128.decode(demoted.election_id) == 20


def test_backup_is_told_already_exists_and_its_write_is_permission_denied(
        two_clients: Pair, l2fwd: harness.Program) -> None:
    primary, backup = two_clients
    primary.arbitrate(50)
    primary.set_pipeline(l2fwd)
    answer = backup.arbitrate(40)
    assert answer.status.code == ALREADY_EXISTS and U128.decode(answer.election_id) == 50
    with pytest.raises(grpc.RpcError) as err:
        backup.write(update(p4r.Update.INSERT, table_entry=dmac_entry(l2fwd, HOST_MAC, b"\x01")))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as err:
        backup.set_pipeline(l2fwd)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert backup.read(p4r.Entity(table_entry=p4r.TableEntry())) == []  # reads need no primary


def test_failover_when_the_primary_leaves(switch: harness.InProcessSwitch, two_clients: Pair,
                                          l2fwd: harness.Program) -> None:
    primary, backup = two_clients
    primary.arbitrate(50)
    primary.set_pipeline(l2fwd)
    backup.arbitrate(40)
    primary.close()
    notice = backup.next("arbitration").arbitration
    assert notice.status.code == NOT_FOUND and U128.decode(notice.election_id) == 50
    assert backup.arbitrate(50).status.code == OK  # the backup takes over with the highest id seen
    backup.write(update(p4r.Update.INSERT, table_entry=dmac_entry(l2fwd, HOST_MAC, b"\x06")))
    switch.inject(1, frame_to(HOST_MAC))
    assert switch.expect_sent()[0] == 6


def test_primary_stepping_down_leaves_no_primary(two_clients: Pair) -> None:
    primary, backup = two_clients
    primary.arbitrate(30)
    backup.arbitrate(20)
    assert primary.arbitrate(10).status.code == NOT_FOUND
    assert backup.next("arbitration").arbitration.status.code == NOT_FOUND


def test_election_id_in_use_ends_the_stream(two_clients: Pair) -> None:
    first, second = two_clients
    first.arbitrate(7)
    with pytest.raises(grpc.RpcError) as err:
        second.arbitrate(7)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_election_id_of_a_stream_that_ends_meanwhile_is_taken() -> None:
    """A client that ends its stream and opens the next with the same election id at once (the tutorials'
    PTF tests, one stream per test) can arrive before the server has seen the first end: it waits for it
    and becomes primary, where it used to be refused (and the tutorials' client then waited forever)."""
    arbitration = Arbitration(0, logging.getLogger("test"))
    first, second = Connection("first"), Connection("second")
    hello = p4r.MasterArbitrationUpdate(device_id=0, election_id=U128.encode(7))
    arbitration.update(first, hello)
    waiting = threading.Event()
    wait = arbitration._left.wait

    def counted(timeout: float | None = None) -> bool:
        waiting.set()
        return wait(timeout)

    arbitration._left.wait = counted  # type: ignore[method-assign]
    asking = threading.Thread(target=arbitration.update, args=(second, hello))
    asking.start()
    assert waiting.wait(30)  # the second waits for the first to end
    arbitration.remove(first)
    asking.join(timeout=30)
    assert not asking.is_alive()
    update = second.outbox.get_nowait()
    assert isinstance(update, p4r.StreamMessageResponse) and update.arbitration.status.code == OK


def test_wrong_device_id_ends_the_stream(switch: harness.InProcessSwitch) -> None:
    client = harness.StreamClient(switch.address, device_id=99)
    try:
        with pytest.raises(grpc.RpcError) as err:
            client.arbitrate(1)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        client.close()


def test_finsy_client_becomes_primary_programs_and_reads_error_details(
        switch: harness.InProcessSwitch, l2fwd: harness.Program) -> None:
    async def scenario() -> tuple[bool, list[int], list[int]]:
        options = finsy.SwitchOptions(p4info=l2fwd.p4info_path, p4blob=l2fwd.json_path,
                                      device_id=harness.DEVICE_ID)
        async with finsy.Switch("sw1", switch.address, options) as sw:
            primary = sw.is_primary
            entry = finsy.P4TableEntry("L2Ingress.dmac", match=finsy.P4TableMatch(dst_addr=0x020000000001),
                                       action=finsy.P4TableAction("L2Ingress.forward", port=2))
            await sw.insert([entry])
            with pytest.raises(finsy.P4ClientError) as err:
                await sw.insert([entry, finsy.P4TableEntry(
                    "L2Ingress.dmac", match=finsy.P4TableMatch(dst_addr=0x020000000009),
                    action=finsy.P4TableAction("L2Ingress.forward", port=3))])
            failed = sorted(err.value.details)
            codes = [int(d.canonical_code.value) for d in err.value.details.values()]
            return primary, failed, codes

    primary, failed, codes = asyncio.run(asyncio.wait_for(scenario(), 20))
    assert primary
    assert failed == [0] and codes == [grpc.StatusCode.ALREADY_EXISTS.value[0]]
    switch.inject(1, frame_to(HOST_MAC))
    assert switch.expect_sent()[0] == 2
