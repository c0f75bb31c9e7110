"""simple_switch_grpc's command line on p4switch: what each option does, what it refuses as BMv2 does (or,
for a security option, more strictly), the notes for the BMv2 machinery p4switch does not have, the log
file with BMv2's names and rotation, and ports as pcap files (--use-files) with --dump-packet-data."""

from __future__ import annotations

import logging
import re
import struct
import subprocess
import time
from pathlib import Path

import pytest

from p4switch import bmv2json, logs, options
from p4switch.tests.runtime import harness

PORT_SWAP = """#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type_; }
struct headers_t { eth_t eth; }
struct meta_t { }
parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); transition accept; }
}
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { sm.egress_spec = sm.ingress_port == 1 ? (bit<9>) 2 : (bit<9>) 1; }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out pk, in headers_t hdr) { apply { pk.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"""
"""Every frame from port 1 leaves on port 2 and every other frame on port 1: no table to program."""


def parse_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        options.parse(argv)
    assert done.value.code == 2
    return capsys.readouterr().err


# ---------------------------------------------------------------------------------------- parsing


def test_tutorials_command_lines_parse_with_general_then_target_options() -> None:
    """utils/p4runtime_switch.py's and runptf.sh's command lines (p4lang/tutorials), word for word."""
    args = options.parse("-i 1@s1-eth1 -i 2@s1-eth2 --pcap /tmp/pcaps --nanolog ipc:///tmp/bm-0-log.ipc "
                         "--device-id 0 build/basic.json --log-console --thrift-port 9090 -- "
                         "--grpc-server-addr 0.0.0.0:50051 --cpu-port 255 --priority-queues 8".split())
    assert (args.ports, args.pcap, args.device_id, args.program) == (
        [(1, "s1-eth1"), (2, "s1-eth2")], "/tmp/pcaps", 0, "build/basic.json")
    assert (args.grpc_server_addr, args.cpu_port, args.log_console, args.tls) == ("0.0.0.0:50051", 255, True,
                                                                                   None)
    args = options.parse("--log-file ss-log --log-flush --dump-packet-data 10000 -i 0@veth0 --no-p4".split())
    assert (args.log_file, args.log_flush, args.dump_packet_data, args.log_level) == ("ss-log", True, 10000,
                                                                                     "trace")
    assert args.grpc_server_addr == options.DEFAULT_GRPC_ADDR and args.pcap is None
    assert options.parse(["--pcap", "--no-p4"]).pcap == "."  # BMv2's implicit value


def test_every_bmv2_only_option_is_accepted_with_one_note_naming_it() -> None:
    general = ["--thrift-port", "9090", "--nanolog", "ipc:///x", "--notifications-addr", "ipc:///y",
               "--debugger", "--restore-state", "state.bin", "--packet-in", "ipc:///z"]
    target = ["--load-modules", "a.so", "--disable-swap", "--priority-queues", "8", "--dp-grpc-server-addr",
              "0.0.0.0:50052", "--max-mc-groups", "10", "--max-l1-entries", "10", "--max-l2-entries", "10"]
    notes = options.notes(options.parse([*general, "--no-p4", "--", *target]))
    assert len(notes) == len(options.IGNORED)
    for dest in options.IGNORED:
        flag = "--" + dest.replace("_", "-")
        assert sum(note.startswith(f"{flag} ") for note in notes) == 1, flag
    assert all(" ignored: p4switch" in note for note in notes)
    assert options.notes(options.parse(["--no-p4"])) == []


@pytest.mark.parametrize(("argv", "message"), [
    (["--no-p4", "--", "-i", "1@veth0"], "unrecognized arguments: -i"),  # general option after --
    (["--no-p4", "--drop-port", "64"], "drop port is always 511"),
    (["--no-p4", "--cpu-port", "0"], "--cpu-port must be 1..510"),
    (["--no-p4", "-i", "64@veth0", "--cpu-port", "64"], "also bound to an interface"),
    (["--no-p4", "-i", "1@a", "-i", "2@b", "--max-port-count", "1"], "exceed --max-port-count 1"),
    (["--no-p4", "-i", "1@a", "-i", "1@b"], "a port number is given to two interfaces"),
    (["prog.json", "--no-p4"], "either a PROGRAM.json or --no-p4"),
    (["--no-p4", "-L", "verbose"], "invalid choice: 'verbose'"),
    (["--no-p4", "--use-files", "1", "--stats-file", "s.json"], "--use-files has none"),
    (["--no-p4", "--", "--grpc-server-cert", "c.pem", "--grpc-server-key", "k.pem"],
     "need --grpc-server-ssl"),
    (["--no-p4", "--", "--grpc-server-ssl", "--grpc-server-cert", "c.pem"], "needs --grpc-server-cert and"),
    (["--no-p4", "--", "--grpc-server-ssl", "--grpc-server-cert", "c.pem", "--grpc-server-key", "k.pem",
      "--grpc-server-with-client-auth"], "needs --grpc-server-cacert"),
])
def test_bad_command_lines_are_refused(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    assert message in parse_error(argv, capsys)


def test_tls_options_make_tls_settings() -> None:
    args = options.parse(["--no-p4", "--", "--grpc-server-ssl", "--grpc-server-cert", "c.pem",
                          "--grpc-server-key", "k.pem", "--grpc-server-cacert", "ca.pem",
                          "--grpc-server-with-client-auth"])
    assert args.tls == options.TlsOptions("c.pem", "k.pem", "ca.pem", client_auth=True)


# --------------------------------------------------------------------------------------- log file


def test_log_file_has_bmv2s_names_rotates_and_keeps_max_files(tmp_path: Path) -> None:
    handler = logs.LogFile(str(tmp_path / "ss-log"), max_bytes=400, backups=2, flush_each=True)
    handler.setFormatter(logging.Formatter("%(message)s"))
    for i in range(40):
        text = f"message {i:02d} " + "x" * 40
        handler.handle(logging.LogRecord("p4switch", logging.INFO, __file__, 0, text, None, None))
    handler.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ss-log.1.txt", "ss-log.2.txt", "ss-log.txt"]
    newest, older, oldest = (Path(f"{tmp_path}/ss-log{n}.txt").read_text() for n in ("", ".1", ".2"))
    assert "message 39" in newest and all(len(t.encode()) <= 400 for t in (newest, older, oldest))
    numbers = [int(n) for t in (oldest, older, newest) for n in re.findall(r"message (\d+)", t)]
    assert numbers == list(range(numbers[0], 40))  # in order, nothing lost but the oldest file's


def test_log_file_flushes_each_message_only_with_log_flush(tmp_path: Path) -> None:
    for flush_each in (False, True):
        base = tmp_path / f"flush-{flush_each}"
        handler = logs.LogFile(str(base), max_bytes=1 << 20, backups=1, flush_each=flush_each)
        handler.handle(logging.LogRecord("p4switch", logging.INFO, __file__, 0, "an info line", None, None))
        assert ("an info line" in Path(f"{base}.txt").read_text()) == flush_each
        handler.handle(logging.LogRecord("p4switch", logging.WARNING, __file__, 0, "a warning", None, None))
        assert "a warning" in Path(f"{base}.txt").read_text()  # warnings are never held back
        handler.close()


# -------------------------------------------------------------------------------------- processes


def p4switch(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(harness.VENV_BIN / "p4switch"), *argv], capture_output=True, text=True,
                          timeout=60)


def test_version_and_json_version_print_and_exit() -> None:
    version = p4switch("-v")
    assert version.returncode == 0 and f"simple_switch_grpc {options.BMV2_VERSION}" in version.stdout
    json_version = p4switch("--json-version")  # the BMv2 JSON version the loader follows, as BMv2 prints it
    assert json_version.returncode == 0 and json_version.stdout.strip() == bmv2json.NEWEST_VERSION


def write_pcap(path: Path, frames: list[bytes]) -> None:
    records = b"".join(struct.pack("<IIII", 1700000000, i, len(f), len(f)) + f for i, f in enumerate(frames))
    path.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1) + records)


def read_pcap_frames(path: Path) -> list[bytes]:
    data, frames, at = path.read_bytes(), [], 24
    while at + 16 <= len(data):
        size = struct.unpack_from("<I", data, at + 8)[0]
        frames.append(data[at + 16:at + 16 + size])
        at += 16 + size
    return frames


def test_use_files_replays_pcaps_through_the_program_and_dumps_packet_data(tmp_path: Path) -> None:
    source = tmp_path / "port_swap.p4"
    source.write_text(PORT_SWAP)
    program = harness.compile_program(source, tmp_path / "build")
    to_2 = [bytes.fromhex("020000000002020000000001") + b"\x88\xb5" + bytes([i]) * 50 for i in range(5)]
    to_1 = [bytes.fromhex("020000000001020000000002") + b"\x88\xb5" + b"back"]
    write_pcap(tmp_path / "p1_in.pcap", to_2)
    write_pcap(tmp_path / "p2_in.pcap", to_1)
    ports = ["-i", f"1@{tmp_path / 'p1'}", "-i", f"2@{tmp_path / 'p2'}"]
    argv = [*ports, "--use-files", "0", "--dump-packet-data", "16", str(program.json_path)]
    with harness.switch_process(argv, tmp_path / "sw") as proc:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(read_pcap_frames(tmp_path / "p2_out.pcap")) < len(to_2):
            time.sleep(0.1)
        assert proc.stop() == 0
    assert read_pcap_frames(tmp_path / "p2_out.pcap") == to_2
    assert read_pcap_frames(tmp_path / "p1_out.pcap") == to_1
    log = proc.log_file.read_text()
    assert proc.log_file.name == "sw.txt"
    assert f"Received packet of length {len(to_2[0])} on port 1: {to_2[0][:16].hex()}\n" in log
    assert f"Sending packet of length {len(to_1[0])} on port 1: {to_1[0][:16].hex()}\n" in log
    assert log.count("Received packet of length") == len(to_2) + len(to_1)
