"""`make demo` with P4Runtime over mutual TLS (``python -m topologies.demo --tls``): the run's CA signs every
switch's certificate and the SM's; the demo's traceback and filter work as without TLS; while it runs, a
switch admits the SM's certificate and refuses a plaintext client and a TLS client without a certificate;
after it, no key file is left."""

from __future__ import annotations

import json
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path

import grpc
from finsy.proto import p4r, p4r_grpc
from ibsec.polling import poll_until

from .conftest import needs_root

pytestmark = needs_root

REPO = Path(__file__).resolve().parents[2]
DEMO_TIMEOUT = 600


def capabilities(address: str, creds: grpc.ChannelCredentials | None) -> grpc.StatusCode:
    channel = grpc.insecure_channel(address) if creds is None else grpc.secure_channel(address, creds)
    with channel:
        try:
            p4r_grpc.P4RuntimeStub(channel).Capabilities(p4r.CapabilitiesRequest(), timeout=60)
        except grpc.RpcError as err:
            return err.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def wait_for(path: Path, text: str, proc: subprocess.Popen[str], timeout: float = 300) -> None:
    def appeared() -> bool:
        return path.exists() and text in path.read_text()

    poll_until(lambda: appeared() or proc.poll() is not None, timeout, interval=0.2)
    assert appeared(), f"{text!r} never appeared in {path}"


def probe(run_dir: Path, proc: subprocess.Popen[str]) -> dict[str, grpc.StatusCode]:
    """Who gets into the first switch while the fabric runs (the SM's certificate is read while its files
    exist; the verdicts between two admissions of it are the switch's, not a fabric already gone)."""
    wait_for(run_dir / "events.jsonl", '"fabric-ready"', proc)
    address = json.loads((run_dir / "topology.json").read_text())["switches"][0]["address"]
    keys = run_dir / "keys"
    modes = {stat.S_IMODE(p.stat().st_mode) for p in keys.glob("tls-*.key")}
    ca, cert, key = ((keys / name).read_bytes() for name in ("tls-ca.pem", "tls-sm.pem", "tls-sm.key"))
    sm = grpc.ssl_channel_credentials(ca, key, cert)
    verdicts = {"sm before": capabilities(address, sm), "plaintext": capabilities(address, None),
                "tls without certificate": capabilities(address, grpc.ssl_channel_credentials(ca)),
                "sm after": capabilities(address, sm)}
    assert modes == {0o600}, modes
    return verdicts


def test_the_demo_passes_with_mutual_tls() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "topologies.demo", "--tls"], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    try:
        lines: list[str] = []
        while not (match := re.search(r"fabric up: .* \(P4Runtime over mutual TLS\), run directory (\S+)",
                                      "".join(lines))):
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        run_dir = Path(match.group(1))
        verdicts = probe(run_dir, proc)
        output = "".join(lines) + proc.stdout.read()
        assert proc.wait(timeout=DEMO_TIMEOUT) == 0, output
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # KeyboardInterrupt: the demo's FabricRun tears the fabric down
            proc.wait(timeout=60)
    refused, admitted = grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.OK
    assert verdicts == {"sm before": admitted, "plaintext": refused, "tls without certificate": refused,
                        "sm after": admitted}
    summary = json.loads(output.strip().splitlines()[-1])
    assert summary["p4runtime"] == "mutual-tls"
    assert summary["traced_host"] == summary["attacker"] and summary["packets_to_trace"] == 1
    assert summary["attack_packets_forwarded_after_filter"] == 0 and summary["filter_flushed"]
    assert summary["legit_delivery_ratio"] > 0.9
    switches = {sw["name"] for sw in json.loads((run_dir / "topology.json").read_text())["switches"]}
    assert summary["fidelity"]["busiest_switch"] in switches  # the launcher sampled every local switch
    assert summary["fidelity"]["samples"] >= 2
    assert list((run_dir / "keys").iterdir()) == []  # CA, certificates and keys removed at teardown
    switch_logs = list((run_dir / "logs").glob("s*_*.log"))
    assert switch_logs and all("P4Runtime (mutual TLS) listening" in p.read_text() for p in switch_logs)
