"""Packet I/O of the p4switch process: one AF_PACKET raw socket per ``-i PORT@IFACE``, one receive loop.

Frames are received into one preallocated buffer (``recvmsg_into``), run through the device's pipeline
and the frames that come out are sent on their egress port's socket. Interfaces are put in promiscuous
mode through a packet-socket membership (undone by the kernel when the socket closes). The kernel is asked
not to loop our own transmissions back (PACKET_IGNORE_OUTGOING); where it cannot, outgoing frames are
recognised by their packet type and skipped. 802.1Q tags, which the kernel strips on receive, are put back
from the PACKET_AUXDATA message. Optionally every frame is written to ``<iface>_in.pcap`` /
``<iface>_out.pcap`` as BMv2's ``--pcap`` does."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import mmap
import os
import select
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from scapy.data import DLT_EN10MB
from scapy.utils import RawPcapWriter

from p4switch.runtime.device import Device

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_IGNORE_OUTGOING = 23
PACKET_QDISC_BYPASS = 20
PACKET_AUXDATA = 8
PACKET_STATISTICS = 6
SIOCGIFFLAGS = 0x8913
IFF_UP = 0x1
IFREQ_FLAGS = struct.Struct("16sH22x")
"""struct ifreq: the interface's name, then its flags (the rest of the 40-byte union unused)"""
TPACKET_STATS = struct.Struct("II")
"""struct tpacket_stats: frames received and frames the kernel dropped (socket or ring full); both
reset on every read"""
AUXDATA = struct.Struct("IIIHHHH")
"""struct tpacket_auxdata: status, len, snaplen, mac, net, vlan_tci, vlan_tpid"""
ANCILLARY_SIZE = socket.CMSG_SPACE(AUXDATA.size)
TP_STATUS_VLAN_VALID, TP_STATUS_VLAN_TPID_VALID = 0x10, 0x40
ETH_P_8021Q = 0x8100
PACKET_OUTGOING = 4
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33
SOCKET_BUFFER = 32 << 20
"""Bytes of kernel queue per port socket: bursts wait there while the pipeline is busy."""
MAX_FRAME = 65536
PACKET_VERSION, TPACKET_V2, PACKET_RX_RING = 10, 1, 5
TP_STATUS_USER = 1
TPACKET2_HDR = struct.Struct("IIIHHIIHH")
"""struct tpacket2_hdr: status, len, snaplen, mac, net, sec, nsec, vlan_tci, vlan_tpid (+4 padding)"""
SLL_PKTTYPE_OFFSET = 32 + 10
"""sockaddr_ll follows the 32-byte tpacket2_hdr; sll_pkttype is its 11th byte"""
RING_BYTES = 1 << 20
"""Receive ring per port (kernel memory, mapped into the process, so counted in the switch's memory):
512 frames at 1500-byte MTU, 64 at the fabric's 9000 (a window of 32 RDMA WRITEs fits twice). It was
8 MiB: 40 of a five-port switch's 70 MiB, more than everything else the switch holds."""
RELEASE = bytes(4)
BURST = 64
"""Frames drained from one ready socket before polling again (keeps ports fair)."""


class PcapFile:
    """One port's capture (pcap, Ethernet link type), written by scapy's RawPcapWriter: the file header at
    once and every record flushed, so a killed switch leaves a readable capture. Not thread-safe: the
    callers serialize the writes to one file (a port's ``tx_lock``, the file ports' lock)."""

    def __init__(self, path: str) -> None:
        self._writer = RawPcapWriter(path, linktype=DLT_EN10MB, endianness="<", snaplen=MAX_FRAME)
        self._writer.write_header(None)
        self._writer.flush()

    def write(self, frame: bytes | memoryview) -> None:
        self._writer.write_packet(bytes(frame))
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


@dataclass
class Port:
    number: int
    iface: str
    sock: socket.socket
    filter_outgoing: bool
    """True when the kernel could not be told to drop our own transmissions (old kernels)."""
    rx: int = 0
    rx_bytes: int = 0
    tx: int = 0
    tx_bytes: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    pcap_in: PcapFile | None = None
    pcap_out: PcapFile | None = None
    tx_lock: threading.Lock = field(default_factory=threading.Lock)
    """the receive loop and gRPC threads (PacketOut) send on a port at once: its transmit counters and
    ``pcap_out`` records are updated under this lock, one frame at a time"""
    ring: RxRing | None = None
    """the mapped receive ring (None: frames are read with recvmsg, e.g. where rings are refused)"""
    ifindex: int = 0
    lost: bool = False
    """the interface disappeared: the port is no longer polled"""
    down: bool = False
    """a socket error came while the interface was still there: deleting an interface first takes it
    down, and that one error (ENETDOWN) can arrive before the name is gone; no second error follows, so
    the port is looked at again on every wakeup until it is gone or up"""
    kernel_drops: int = 0
    """frames the kernel dropped before this socket could take them (its buffer or ring was full)"""

    def read_kernel_drops(self) -> int:
        """The kernel's drops so far: its counter resets on every read, so each read is added here."""
        if not self.lost:
            with contextlib.suppress(OSError):
                raw = self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, TPACKET_STATS.size)
                self.kernel_drops += TPACKET_STATS.unpack(raw)[1]
        return self.kernel_drops

    def counts(self) -> dict[str, int]:
        return {"rx": self.rx, "rx_bytes": self.rx_bytes, "tx": self.tx, "tx_bytes": self.tx_bytes,
                "kernel_drops": self.read_kernel_drops(), **self.errors}

    def summary(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in self.counts().items())


class RxRing:
    """A TPACKET_V2 receive ring: the kernel writes frames into shared memory, so receiving costs no
    system call per frame, and the frame header carries the VLAN tag and the packet type."""

    def __init__(self, sock: socket.socket, mtu: int) -> None:
        needed = 64 + 18 + mtu  # tpacket2_hdr + sockaddr_ll, Ethernet + VLAN header, payload
        self.frame_size = 1 << (needed - 1).bit_length()
        block_size = max(self.frame_size, 1 << 16)
        blocks = max(1, RING_BYTES // block_size)
        self.frames = blocks * (block_size // self.frame_size)
        sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        sock.setsockopt(SOL_PACKET, PACKET_RX_RING, struct.pack("IIII", block_size, blocks, self.frame_size,
                                                               self.frames))
        self.map = mmap.mmap(sock.fileno(), block_size * blocks, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE)
        self.next = 0

    def close(self) -> None:
        self.map.close()


def with_vlan_tag(frame: bytes, ancillary: list[tuple[int, int, bytes]]) -> bytes:
    """The frame as it was on the wire: the kernel strips an 802.1Q tag on receive and hands it over in
    the PACKET_AUXDATA message; put it back after the MAC addresses (as libpcap does for BMv2)."""
    for level, kind, data in ancillary:
        if level == SOL_PACKET and kind == PACKET_AUXDATA and len(data) >= AUXDATA.size:
            status, _, _, _, _, tci, tpid = AUXDATA.unpack_from(data)
            if status & TP_STATUS_VLAN_VALID:
                tpid = tpid if status & TP_STATUS_VLAN_TPID_VALID else ETH_P_8021Q
                return frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:]
    return frame


def receive_frame(sock: socket.socket) -> tuple[bytes, int]:
    """One frame (VLAN tag restored) and its packet type from a socket with PACKET_AUXDATA on."""
    data, ancillary, _, address = sock.recvmsg(MAX_FRAME, ANCILLARY_SIZE)
    return with_vlan_tag(data, ancillary), address[2]


def dump_packet(log: logging.Logger, verb: str, port: int, frame: bytes, limit: int) -> None:
    """One info line with the frame's first ``limit`` bytes, worded as BMv2's --dump-packet-data."""
    log.info("%s packet of length %d on port %d: %s", verb, len(frame), port, bytes(frame[:limit]).hex())


def parse_interface(spec: str) -> tuple[int, str]:
    """``PORT@IFACE`` (BMv2's -i syntax) as (port number, interface name)."""
    number, sep, iface = spec.partition("@")
    if not sep or not number.isdigit() or not iface:
        raise ValueError(f"bad interface {spec!r}: expected PORT@IFACE, e.g. 1@veth0")
    if int(number) >= 511:
        raise ValueError(f"bad interface {spec!r}: port numbers are 0..510 (511 is the drop port)")
    return int(number), iface


def set_buffer(sock: socket.socket, forced: int, normal: int, size: int) -> None:
    """Set a socket buffer beyond net.core.[rw]mem_max when we may (root), else as large as allowed."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, forced, size)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, normal, size)


def interface_mtu(iface: str) -> int:
    try:
        with open(f"/sys/class/net/{iface}/mtu") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 9000


def open_port(number: int, iface: str, pcap_dir: str | None = None, *, use_ring: bool = True) -> Port:
    """Switch port ``number`` on interface ``iface``: a receive ring where the kernel gives one."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    ring = None
    try:
        try:
            if use_ring:
                ring = RxRing(sock, interface_mtu(iface))
        except OSError:
            pass
        if ring is None:
            sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)  # recvmsg path: VLAN tags come as ancillary data
        sock.bind((iface, 0))
        ifindex = socket.if_nametoindex(iface)
        membership = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
        sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, membership)
        set_buffer(sock, SO_RCVBUFFORCE, socket.SO_RCVBUF, SOCKET_BUFFER)
        set_buffer(sock, SO_SNDBUFFORCE, socket.SO_SNDBUF, SOCKET_BUFFER)
        with contextlib.suppress(OSError):  # transmit straight to the driver (veths have no queue to use)
            sock.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
        try:
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            filter_outgoing = False
        except OSError:
            filter_outgoing = True
        sock.setblocking(False)
    except OSError:
        if ring:
            ring.close()
        sock.close()
        raise
    port = Port(number, iface, sock, filter_outgoing, ring=ring, ifindex=ifindex)
    if pcap_dir:
        port.pcap_in = PcapFile(os.path.join(pcap_dir, f"{iface}_in.pcap"))
        port.pcap_out = PcapFile(os.path.join(pcap_dir, f"{iface}_out.pcap"))
    return port


class Dataplane:
    """The switch's ports and the receive loop that feeds them to the device."""

    def __init__(self, device: Device, ports: list[Port], log: logging.Logger, dump_bytes: int = 0) -> None:
        self.device = device
        self.ports = {p.number: p for p in ports}
        self._by_fd = {p.sock.fileno(): p for p in ports}
        self.log = log
        self.dump_bytes = dump_bytes
        """--dump-packet-data: log this many bytes of every frame received and sent (0: none)"""
        self.stats: Counter[str] = Counter()
        device.transmit = self.transmit
        for port in ports:
            how = f"ring of {port.ring.frames} x {port.ring.frame_size} bytes" if port.ring else "recvmsg"
            log.info("port %d on %s, receiving through a %s", port.number, port.iface, how)

    def transmit(self, number: int, frame: bytes) -> None:
        """Send one frame out of port ``number``. Called by the receive loop and, for PacketOut, by gRPC
        threads at the same time: the send, the counters and the pcap record of one frame go together
        under the port's lock, so records never interleave and the capture keeps the order of the wire."""
        port = self.ports.get(number)
        if port is None:
            self.stats["tx_no_such_port"] += 1
            self.log.debug("frame to port %d dropped: no interface bound to it", number)
            return
        with port.tx_lock:
            try:
                port.sock.send(frame)
            except OSError as err:
                port.errors["tx_errors"] += 1
                self.log.debug("send on %s failed: %s", port.iface, err)
                return
            port.tx += 1
            port.tx_bytes += len(frame)
            if port.pcap_out:
                port.pcap_out.write(frame)
        if self.dump_bytes:
            dump_packet(self.log, "Sending", number, frame, self.dump_bytes)

    def run(self, stop: threading.Event) -> None:
        """Receive until ``stop`` is set (checked at least every 200 ms)."""
        poller = select.poll()
        for fd in self._by_fd:
            poller.register(fd, select.POLLIN)
        buf = bytearray(MAX_FRAME)
        view = memoryview(buf)
        while not stop.is_set():
            for fd, events in poller.poll(200):
                port = self._by_fd[fd]
                if events & (select.POLLERR | select.POLLHUP | select.POLLNVAL) and self._port_error(port):
                    poller.unregister(fd)
                    continue
                self._drain(port, buf, view)
            for port in self.ports.values():
                if port.down and self._recheck(port):
                    poller.unregister(port.sock.fileno())

    def _port_error(self, port: Port) -> bool:
        """A socket error (poll keeps reporting it until it is read, which would spin the loop): read it,
        and tell whether the interface is gone for good (then True: logged once, counted, not polled)."""
        err = port.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        port.errors["socket_errors"] += 1
        if not _present(port):
            self._lost(port, err)
            return True
        port.down = True
        if port.errors["socket_errors"] == 1:
            self.log.warning("port %d (%s): %s", port.number, port.iface, os.strerror(err))
        return False

    def _recheck(self, port: Port) -> bool:
        """A port that went down: True once its interface is gone (the kernel rebinds the socket by itself
        when it comes up again)."""
        if not _present(port):
            self._lost(port, 0)
            return True
        port.down = not _up(port)
        return False

    def _lost(self, port: Port, err: int) -> None:
        port.lost, port.down = True, False
        self.stats["port_lost"] += 1
        self.log.warning("port %d: interface %s disappeared (%s); it is no longer polled", port.number,
                         port.iface, os.strerror(err) if err else "gone")

    def _drain_ring(self, port: Port, ring: RxRing) -> None:
        """Process up to BURST frames the kernel put in the port's ring: per frame one header unpack,
        one copy out of the ring (the slot goes straight back to the kernel) and the pipeline call."""
        mapped, unpack, process, number = ring.map, TPACKET2_HDR.unpack_from, self.device.process, port.number
        frame_size, frames, slot = ring.frame_size, ring.frames, ring.next
        count = total = 0
        for _ in range(BURST):
            offset = slot * frame_size
            if not mapped[offset] & TP_STATUS_USER:
                break
            status, length, snaplen, mac, _, _, _, tci, tpid = unpack(mapped, offset)
            frame = mapped[offset + mac:offset + mac + snaplen]
            outgoing = mapped[offset + SLL_PKTTYPE_OFFSET] == PACKET_OUTGOING
            mapped[offset:offset + 4] = RELEASE
            slot = (slot + 1) % frames
            if outgoing and port.filter_outgoing:
                continue
            if snaplen < length:
                port.errors["rx_truncated"] += 1
                continue
            if status & TP_STATUS_VLAN_VALID:
                tpid = tpid if status & TP_STATUS_VLAN_TPID_VALID else ETH_P_8021Q
                frame = frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:]
            count += 1
            total += len(frame)
            self._process_one(port, process, number, frame)
        ring.next = slot
        port.rx += count
        port.rx_bytes += total

    def _process_one(self, port: Port, process: Callable[[int, bytes], None], number: int,
                     frame: bytes) -> None:
        if port.pcap_in:
            port.pcap_in.write(frame)
        if self.dump_bytes:
            dump_packet(self.log, "Received", number, frame, self.dump_bytes)
        try:
            process(number, frame)
        except Exception:  # noqa: BLE001 - one bad frame must not stop the switch
            port.errors["process_errors"] += 1
            self.log.exception("pipeline failed on a frame from port %d", number)

    def _drain(self, port: Port, buf: bytearray, view: memoryview) -> None:
        """Without a ring: receive and process up to BURST frames of one port, each with one
        recvmsg_into into the preallocated buffer, one copy to bytes and the pipeline call."""
        if port.ring is not None:
            self._drain_ring(port, port.ring)
            return
        process, number, filter_outgoing = self.device.process, port.number, port.filter_outgoing
        recvmsg_into, buffers = port.sock.recvmsg_into, [view]
        count = total = 0
        try:
            for _ in range(BURST):
                size, ancillary, _, address = recvmsg_into(buffers, ANCILLARY_SIZE)
                if filter_outgoing and address[2] == PACKET_OUTGOING:
                    continue
                frame = with_vlan_tag(bytes(view[:size]), ancillary)
                count += 1
                total += len(frame)
                self._process_one(port, process, number, frame)
        except BlockingIOError:
            pass
        except OSError as err:
            port.errors["rx_errors"] += 1
            self.log.warning("receive on %s failed: %s", port.iface, err)
        port.rx += count
        port.rx_bytes += total

    def port_stats(self) -> dict[int, dict[str, int]]:
        """Counters per port number: rx/tx frames and bytes, errors, the kernel's drops."""
        return {number: port.counts() for number, port in self.ports.items()}

    def close(self) -> None:
        for port in self.ports.values():
            if port.ring:
                port.ring.close()
            port.sock.close()
            for pcap in (port.pcap_in, port.pcap_out):
                if pcap:
                    pcap.close()
            self.log.info("port %d (%s): %s", port.number, port.iface, port.summary())


def _present(port: Port) -> bool:
    try:
        return socket.if_nametoindex(port.iface) == port.ifindex
    except OSError:
        return False


def _up(port: Port) -> bool:
    request = IFREQ_FLAGS.pack(port.iface.encode(), 0)
    try:
        flags = IFREQ_FLAGS.unpack(fcntl.ioctl(port.sock.fileno(), SIOCGIFFLAGS, request))[1]
    except OSError:
        return False
    return bool(flags & IFF_UP)
