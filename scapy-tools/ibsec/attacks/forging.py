"""Frames an attacker can make without any key: right headers, right layout, wrong (random) MAC."""

from __future__ import annotations

import os

from ibsec import layers, transport
from ibsec.builder import Builder


def forged(
    builder: Builder,
    mode: int,
    dst_gid: str,
    opcode: str,
    pkey: int,
    dqpn: int,
    psn: int,
    payload: bytes,
    **ext: object,
) -> bytes:
    """A frame in security mode ``mode`` sealed under a random key the receiver cannot know.

    Mode 0 frames are simply valid (ICRC only): that is the attack working where security is off.
    """
    plain = builder.plain(dst_gid, opcode, pkey, dqpn, psn, payload, **ext)  # type: ignore[arg-type]
    if mode == 0:
        return transport.seal(plain, None, transport.Sender(transport.Mode.NONE))
    sender = transport.Sender(transport.Mode(mode), os.urandom(12), 0)
    return transport.seal(plain, os.urandom(16), sender)


def forged_trap(
    builder: Builder, sm_gid: str, accused_gid: str, victim_gid: str, mf: int, pkey: int, tid: int
) -> bytes:
    """Trap 257 claiming ``accused_gid`` sent bad P_Key ``pkey`` to ``victim_gid`` (the forger's claimed
    issuer), with a random authentication trailer: the forger does not hold the victim's CA key."""
    notice = layers.bad_key_notice(layers.TRAP_BAD_PKEY, lid=1, gid=victim_gid, key=pkey, src_gid=accused_gid,
                                   src_qp=0, dst_qp=0x100, mf=mf)
    trailer = os.urandom(layers.MAD_AUTH_NONCE_LEN + layers.MAD_AUTH_TAG_LEN)
    return builder.mad_frame(sm_gid, 0xFFFF, layers.trap_mad(notice, tid) + trailer)
