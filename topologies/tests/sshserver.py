"""A second "server" for the cluster tests: a network namespace joined to the root namespace by a veth, with
an sshd of the test's own running inside it (Debian's openssh-server), and a key pair, host key, known
hosts and ssh client configuration made for the test. It shares the machine's filesystem, as servers that
mount one run directory do (docs/cluster.md).

Everything it starts is stopped by pid, and the namespace and veth are deleted, whatever happened.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SSHD = Path("/usr/sbin/sshd")
READY_TIMEOUT = 120.0
"""Bounds a hung sshd, not a slow one: it returns as soon as sshd says it listens."""


@dataclass(frozen=True)
class SshServer:
    """What a cluster run needs to reach the second server: its address and an ssh client configuration."""

    address: str
    ssh_config: Path
    namespace: str
    sshd_pid: int


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True)


def _client_files(home: Path, address: str) -> Path:
    """Key pairs (the client's and the server's host key), the known hosts file naming the host key, the
    authorized keys file and the client configuration that uses them; the configuration's path."""
    for name in ("id", "host_key"):
        _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"ibsec-fabric cluster test {name}",
            "-f", str(home / name))
    (home / "authorized_keys").write_text((home / "id.pub").read_text())
    (home / "known_hosts").write_text(f"{address} {(home / 'host_key.pub').read_text()}")
    config = home / "ssh_config"
    config.write_text(f"Host {address}\n  User root\n  IdentityFile {home / 'id'}\n  IdentitiesOnly yes\n"
                      f"  UserKnownHostsFile {home / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
                      "  BatchMode yes\n")
    return config


def _sshd_config(home: Path, address: str) -> Path:
    """Root logs in with the test's key only; ssh tunnels (-w, Ethernet) allowed for the cross-server links;
    sessions enough for every node's shell over one multiplexed connection; no DNS lookups."""
    config = home / "sshd_config"
    config.write_text(f"ListenAddress {address}\nHostKey {home / 'host_key'}\n"
                      f"AuthorizedKeysFile {home / 'authorized_keys'}\nPidFile {home / 'sshd.pid'}\n"
                      "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                      "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nUseDNS no\n"
                      "PermitTunnel ethernet\nMaxSessions 1000\nMaxStartups 100\nAllowTcpForwarding yes\n"
                      "AllowStreamLocalForwarding yes\nStreamLocalBindUnlink yes\nLogLevel VERBOSE\n")
    return config


def _wait_listening(proc: subprocess.Popen[str], log: Path) -> None:
    """Until sshd says it listens (its stderr, copied to ``log``); RuntimeError if it exits first."""
    listening = threading.Event()

    def copy() -> None:
        assert proc.stderr is not None
        with open(log, "a") as out:
            for line in proc.stderr:
                out.write(line)
                out.flush()
                if "Server listening on" in line:
                    listening.set()

    threading.Thread(target=copy, name="sshd-log", daemon=True).start()
    while not listening.wait(0.5):
        if proc.poll() is not None or not proc.pid:
            raise RuntimeError(f"sshd exited with {proc.returncode}: {log.read_text()[-2000:]}")


@contextlib.contextmanager
def second_server(home: Path) -> Iterator[SshServer]:
    """The namespace, its veth and its sshd, for the ``with`` block; all gone afterwards."""
    tag = f"ibfcl{os.getpid() % 100000}"
    octet = os.getpid() % 250 + 1
    local, remote = f"10.253.{octet}.1", f"10.253.{octet}.2"
    home.mkdir(parents=True, exist_ok=True)
    sshd: subprocess.Popen[str] | None = None
    try:
        _sh("ip", "netns", "add", tag)
        _sh("ip", "link", "add", f"{tag}a", "type", "veth", "peer", "name", f"{tag}b", "netns", tag)
        _sh("ip", "addr", "add", f"{local}/30", "dev", f"{tag}a")
        _sh("ip", "link", "set", f"{tag}a", "up")
        _sh("ip", "-n", tag, "addr", "add", f"{remote}/30", "dev", f"{tag}b")
        _sh("ip", "-n", tag, "link", "set", f"{tag}b", "up")
        _sh("ip", "-n", tag, "link", "set", "lo", "up")
        config = _client_files(home, remote)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        sshd = subprocess.Popen(["ip", "netns", "exec", tag, str(SSHD), "-D", "-e", "-f",
                                 str(_sshd_config(home, remote))], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _wait_listening(sshd, home / "sshd.log")
        yield SshServer(remote, config, tag, sshd.pid)
    finally:
        if sshd is not None:
            sshd.terminate()
            try:
                sshd.wait(timeout=10)
            except subprocess.TimeoutExpired:
                sshd.kill()
                sshd.wait(timeout=5)
        subprocess.run(["ip", "link", "del", f"{tag}a"], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", tag], capture_output=True, check=False)
