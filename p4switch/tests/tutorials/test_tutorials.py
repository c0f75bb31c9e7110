"""p4lang/tutorials on p4switch, as their users run them: `p4switch aliases` puts p4switch-cc and p4switch
first on PATH as p4c, p4c-bm2-ss and simple_switch_grpc, the tutorials' client environment comes from
their own setup-client.sh, and no file of the tutorials is changed (checked after every test).

* exercises/basic's PTF test: the steps of its runptf.sh (p4c driver, the switch's command line, ptf);
* exercises/basic on pod-topo: the Makefile's `make run` (run_exercise.py, Mininet, P4Runtime programming
  with the tutorials' p4.tmp.P4DeviceConfig) answers `pingall` with every ping;
* every exercise present: its skeleton builds with the Makefile, and its solution, built with the
  Makefile's compile command, takes each switch's runtime JSON through the tutorials' simple_controller.

Skipped, with the reason, when ../shared/p4lang/tutorials is absent."""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from p4switch import targets
from p4switch.tests.bmv2json.test_bmv2json_p4c import NO_P4C
from p4switch.tests.tutorials import tutorials as tut

pytestmark = pytest.mark.skipif(tut.missing() is not None, reason=tut.missing() or "")

BASIC_SWITCH_PORTS = 8
"""runptf.sh binds ports 0..7 to veth0, veth2, .. veth14 (veth_setup.sh makes the pairs)"""


HANG = 1800
"""pytest-timeout for a tutorial test: it bounds a hang; p4c, veths, a switch and a PTF run took over
600 s at load average 25."""


@pytest.fixture(scope="module")
def client() -> Path:
    return tut.client_env()


@pytest.fixture
def tutorials(tmp_path: Path) -> Iterator[Path]:
    """A copy of the tutorials to run in; after the test, none of their files may differ."""
    copy = tut.copy_tutorials(tmp_path)
    yield copy
    assert tut.changed_files(copy) == []


@pytest.fixture
def env(tmp_path: Path, client: Path) -> dict[str, str]:
    return tut.tool_path(tut.p4switch_aliases(tmp_path / "bin"), client)


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


@pytest.mark.timeout(HANG)
def test_basic_ptf_test_passes_with_runptf_steps(tutorials: Path, env: dict[str, str], client: Path) -> None:
    basic = tutorials / "exercises" / "basic"
    (basic / "logs").mkdir()  # `make test` runs `dirs` first; the test logs its P4Runtime requests there
    (basic / "build").mkdir()
    run(["p4c", "--target", "bmv2", "--arch", "v1model", "--p4runtime-files", "build/basic.p4info.txtpb",
         "-o", "build", "solution/basic.p4"], basic, env)
    assert (basic / "build" / "basic.json").is_file() and (basic / "build" / "basic.p4info.txtpb").is_file()
    switch_ports = [arg for p in range(BASIC_SWITCH_PORTS) for arg in ("-i", f"{p}@veth{2 * p}")]
    ptf_ports = [arg for p in range(BASIC_SWITCH_PORTS) for arg in ("-i", f"{p}@veth{2 * p + 1}")]
    with tut.namespace("p4tut") as ns:
        run(tut.in_namespace(ns, ["bash", str(tutorials / "bin" / "veth_setup.sh")]), basic, env)
        with open(basic / "switch.out", "w") as out:
            switch = subprocess.Popen(tut.in_namespace(ns, [
                "simple_switch_grpc", "--log-file", "ss-log", "--log-flush", "--dump-packet-data", "10000",
                *switch_ports, "--no-p4"]), cwd=basic, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            tut.wait_for_output(switch, basic / "switch.out", "listening", 60)
            params = "grpcaddr='localhost:9559';p4info='build/basic.p4info.txtpb';config='build/basic.json'"
            output = run(tut.in_namespace(ns, [str(client / "bin" / "ptf"), *ptf_ports,
                                               f"--test-params={params}", "--test-dir", "ptf"]), basic, env)
        finally:
            assert tut.stop(switch) == 0
    tests = len(re.findall(r"def runTest", (basic / "ptf" / "basic_fwd.py").read_text()))
    assert f"Ran {tests} tests" in output and re.search(r"^OK\s*$", output, re.M), output
    log = (basic / "ss-log.txt").read_text()  # BMv2's name for --log-file ss-log
    assert re.search(r"Received packet of length \d+ on port \d: [0-9a-f]{28}", log)  # --dump-packet-data
    assert re.search(r"Sending packet of length \d+ on port \d: [0-9a-f]{28}", log)


@pytest.fixture(params=["p4switch-cc", "real p4c-bm2-ss"])
def make_env(request: pytest.FixtureRequest, tmp_path: Path, client: Path) -> dict[str, str]:
    """The tutorials' Makefile compiling with p4switch-cc, and with the real p4c-bm2-ss (on PATH or in
    ../shared/p4lang/bin) whose BMv2 JSON p4switch loads; that one is skipped, with the reason, without it."""
    tools = tut.p4switch_aliases(tmp_path / "bin")
    if request.param != "p4switch-cc":
        real = tut.real_p4c_bm2_ss()
        if real is None:
            print(f"SKIP: {NO_P4C}")
            pytest.skip(NO_P4C)
        (tools / "p4c-bm2-ss").unlink()
        (tools / "p4c-bm2-ss").symlink_to(real)
    return tut.tool_path(tools, client)


@pytest.mark.timeout(HANG)
def test_basic_pod_topo_make_run_pings_every_host(tutorials: Path, make_env: dict[str, str]) -> None:
    env = make_env
    basic = tutorials / "exercises" / "basic"
    topo, _ = tut.run_command(basic, env)
    hosts = len(re.findall(r'"h\d+":', (basic / topo).read_text()))
    (basic / "build").mkdir()
    for command in tut.solution_builds(basic, env):
        run(["sh", "-c", command], basic, env)
    sudo_env = " ".join(f"{k}={v}" for k, v in tut.PROTOBUF_ENV.items())  # sudo keeps only these
    with tut.namespace("p4run") as ns:
        # the Makefile's own `run` (the solution is built: nothing to compile), fed the CLI's commands
        make_run = ["make", "run", "compiled_json=", f"P4_EXTRA_SUDO_OPTS={sudo_env}"]
        done = subprocess.run(tut.contained(ns, make_run), cwd=basic, env=env, input="pingall\nexit\n",
                              capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    result = re.search(r"Results: (\d+)% dropped \((\d+)/(\d+) received\)", output)
    assert result, output[-6000:]
    assert (int(result.group(2)), int(result.group(3))) == (hosts * (hosts - 1),) * 2, output[-6000:]
    for switch in re.findall(r'"(s\d+)":', (basic / topo).read_text()):
        requests = (basic / "logs" / f"{switch}-p4runtime-requests.txt").read_text()
        assert "SetForwardingPipelineConfig" in requests  # programmed with the tutorials' own client
        assert (basic / "pcaps" / f"{switch}-eth1_in.pcap").stat().st_size > 24  # --pcap DIR, frames in it


def exercises(tutorials: Path) -> list[Path]:
    return sorted(p for p in (tutorials / "exercises").iterdir() if (p / "Makefile").is_file())


@pytest.mark.timeout(HANG)
def test_every_exercise_builds_and_its_solution_takes_its_runtime_config(
        tutorials: Path, env: dict[str, str], client: Path, tmp_path: Path) -> None:
    found = exercises(tutorials)
    assert found
    plan = []
    for exercise in found:
        run(["make", "build"], exercise, env)  # the exercise as shipped, TODOs and all
        for command in tut.solution_builds(exercise, env):
            run(["sh", "-c", command], exercise, env)
        topo, _ = tut.run_command(exercise, env)
        in_topology = sorted(json.loads((exercise / topo).read_text())["switches"].items())
        plan += [{"exercise": str(exercise), "switch": name, "device": device, "conf": params["runtime_json"],
                  "cpu_port": params.get("cpu_port")}
                 for device, (name, params) in enumerate(in_topology) if "runtime_json" in params]
    with Switches(env, tmp_path) as switches:
        for step in plan:
            step["addr"] = switches.address(int(step["device"]), step["cpu_port"])
        switches.wait_ready()
        output = run([str(client / "bin" / "python"), "-c", CONTROLLER, str(tutorials / "utils"),
                      json.dumps(plan)], tutorials, env, timeout=600)
    assert "ERROR" not in output, output
    read = [json.loads(line[5:]) for line in output.splitlines() if line.startswith("READ ")]
    assert len(read) == len(plan), output
    for step, tables in zip(plan, read, strict=True):
        conf = json.loads((Path(str(step["exercise"])) / str(step["conf"])).read_text())
        wanted = Counter(e["table"] for e in conf.get("table_entries", []) if not e.get("default_action"))
        assert {t: tables.get(t, 0) for t in wanted} == dict(wanted), f"{step['exercise']} {step['conf']}"


CONTROLLER = """
import collections, json, os, sys
sys.path.insert(0, sys.argv[1])
import p4runtime_lib.bmv2, p4runtime_lib.helper
import p4runtime_lib.simple_controller as controller
for step in json.loads(sys.argv[2]):
    os.chdir(step["exercise"])
    with open(step["conf"]) as conf:
        controller.program_switch(addr=step["addr"], device_id=step["device"], sw_conf_file=conf, workdir=".",
                                  proto_dump_fpath=f"logs/{step['switch']}-p4runtime-requests.txt",
                                  runtime_json=step["conf"])
    info = p4runtime_lib.helper.P4InfoHelper(json.load(open(step["conf"]))["p4info"])
    reader = p4runtime_lib.bmv2.Bmv2SwitchConnection(address=step["addr"], device_id=step["device"])
    tables = collections.Counter(info.get_tables_name(e.table_entry.table_id)
                                 for r in reader.ReadTableEntries() for e in r.entities)
    reader.shutdown()
    print("READ", json.dumps(tables), flush=True)
"""
"""run_exercise.py's programming of each switch (its program_switch_p4runtime), then every table read
back with the tutorials' own client; one process for every exercise"""


class Switches:
    """simple_switch_grpc processes, one per device id and CPU port, reused from exercise to exercise (each
    SetForwardingPipelineConfig replaces the program and its entries); stopped by pid."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env, self.logs = env, logs
        self.running: dict[tuple[int, int | None], tuple[subprocess.Popen[bytes], str, Path]] = {}

    def address(self, device: int, cpu_port: int | None) -> str:
        """The P4Runtime address of the switch with this device id and CPU port (started if new)."""
        if (device, cpu_port) not in self.running:
            port = targets.free_port()
            argv = ["simple_switch_grpc", "--device-id", str(device), "--no-p4", "--",
                    "--grpc-server-addr", f"127.0.0.1:{port}"]
            argv += ["--cpu-port", str(cpu_port)] if cpu_port is not None else []
            log = self.logs / f"switch-{device}-{cpu_port}.out"
            with open(log, "w") as out:
                proc = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT)
            self.running[device, cpu_port] = proc, f"127.0.0.1:{port}", log
        return self.running[device, cpu_port][1]

    def wait_ready(self) -> None:
        for proc, _, log in self.running.values():
            tut.wait_for_output(proc, log, "listening", 60)

    def __enter__(self) -> Switches:
        return self

    def __exit__(self, *exc: object) -> None:
        assert [tut.stop(proc) for proc, _, _ in self.running.values()] == [0] * len(self.running)
