"""The agent's byte-level CM codec against the Scapy layers that define the formats, both ways."""

from __future__ import annotations

import ipaddress
import os
import random

import pytest
from ibsec import cmwire, layers
from scapy.packet import Packet

RNG = random.Random(12)
SCAPY_NAMES = {  # our field name -> the Scapy field, per attribute where they differ
    layers.CmAttr.REQ: {"qpn": "local_qpn", "psn": "starting_psn", "pkey": "partition_key",
                        "local_lid": "primary_local_lid", "local_gid": "primary_local_gid",
                        "remote_gid": "primary_remote_gid"},
    layers.CmAttr.REP: {"qpn": "local_qpn", "psn": "starting_psn"},
    layers.CmAttr.REJ: {"status": "reason"},
    layers.CmAttr.DREQ: {"qpn": "remote_qpn_eecn"},
    layers.CmAttr.SIDR_REQ: {"local_comm_id": "request_id", "pkey": "partition_key"},
    layers.CmAttr.SIDR_REP: {"local_comm_id": "request_id"},
}


def random_values(attr: int) -> dict[str, object]:
    values: dict[str, object] = {}
    for name, (_, size) in cmwire.FIELDS[attr].items():
        if name in ("local_gid", "remote_gid"):
            values[name] = os.urandom(16)
        elif name == "private":
            values[name] = os.urandom(size)
        else:
            values[name] = RNG.getrandbits(8 * size)
    return values


def scapy_name(attr: int, name: str) -> str:
    return "private_data" if name == "private" else SCAPY_NAMES.get(attr, {}).get(name, name)


def scapy_value(packet: Packet, attr: int, name: str) -> object:
    value = getattr(packet, scapy_name(attr, name))
    if name in ("local_gid", "remote_gid"):
        return ipaddress.IPv6Address(value).packed
    return bytes(value) if name == "private" else value


@pytest.mark.parametrize("attr", list(cmwire.FIELDS))
def test_written_messages_dissect_with_the_scapy_layers_to_the_same_fields(attr: int) -> None:
    for _ in range(20):
        values = random_values(attr)
        tid = RNG.getrandbits(64)
        mad = layers.MAD(cmwire.write(cmwire.Message(attr, tid, **values)))  # type: ignore[arg-type]
        assert (mad.mgmt_class, mad.method, mad.attribute_id, mad.transaction_id) == (
            layers.MgmtClass.CM, layers.Method.SEND, attr, tid)
        body = mad.payload
        assert isinstance(body, layers.CM_LAYERS[layers.CmAttr(attr)])
        for name, value in values.items():
            assert scapy_value(body, attr, name) == value, name


@pytest.mark.parametrize("attr", list(cmwire.FIELDS))
def test_messages_built_by_scapy_read_to_the_same_fields(attr: int) -> None:
    for _ in range(20):
        values = random_values(attr)
        fields = {scapy_name(attr, name): value for name, value in values.items()}
        for name in ("primary_local_gid", "primary_remote_gid"):
            if name in fields:
                fields[name] = str(ipaddress.IPv6Address(fields[name]))  # type: ignore[arg-type]
        private = fields.pop("private_data", None)
        body = layers.CM_LAYERS[layers.CmAttr(attr)](**fields)
        if private is not None:
            body.private_data = private
        message = cmwire.read(bytes(layers.MAD(mgmt_class=layers.MgmtClass.CM, attribute_id=attr) / body))
        assert message is not None and message.attr == attr
        for name, value in values.items():
            assert getattr(message, name) == value, name


def test_our_private_data_reads_as_scapy_writes_it() -> None:
    n0, wrapped = os.urandom(12), os.urandom(64)
    raw = bytes(layers.IbsecPrivateData(secmode=3, n0=n0, wrapped_key=wrapped))
    assert cmwire.private(raw) == cmwire.Private(3, n0, wrapped)
    assert cmwire.pack_private(3, n0, wrapped) == raw


def test_what_is_not_a_cm_message_we_know_reads_as_none() -> None:
    assert cmwire.read(bytes(layers.MAD(mgmt_class=layers.MgmtClass.CM, attribute_id=0x11))) is None  # MRA
    assert cmwire.read(bytes(layers.MAD(mgmt_class=layers.MgmtClass.PERF, attribute_id=0x10))) is None
    assert cmwire.read(b"\x01\x07" + bytes(100)) is None
