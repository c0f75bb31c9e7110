"""p4switch-cc called as p4c (the driver: -o is a directory) and as p4c-bm2-ss (-o is the program file),
with their P4Info options, and `p4switch aliases`, which makes those names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from finsy.proto import p4i
from google.protobuf import json_format, text_format

from p4switch.frontend.cli import main
from p4switch.tests.frontend.conftest import TEMPLATE

VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "src" / "basic.p4"
    path.parent.mkdir()
    body = "    table t { key = { hdr.eth.dst: exact; } actions = { NoAction; } }\n    apply { t.apply(); }"
    path.write_text(TEMPLATE.replace("{BODY}", body))
    return path


def aliases(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VENV_BIN / "p4switch"), "aliases", str(directory)], capture_output=True,
                          text=True, timeout=60)


def p4info_text(path: Path) -> p4i.P4Info:
    return text_format.Parse(path.read_text(), p4i.P4Info())


def test_p4c_driver_writes_name_json_into_the_output_directory(program: Path, tmp_path: Path) -> None:
    """exercises/basic/runptf.sh's compile line."""
    build = tmp_path / "build"  # created by the driver, as p4c does
    argv = ["--target", "bmv2", "--arch", "v1model", "--std", "p4-16", "--p4runtime-files",
            str(tmp_path / "basic.p4info.txtpb"), "-o", str(build), str(program)]
    assert main(argv, prog="p4c") == 0
    assert json.loads((build / "basic.json").read_text())["format"] == "p4switch-ir"
    assert "control I" in (build / "basic.p4i").read_text()  # the preprocessed source, as p4c writes it
    assert [t.preamble.name for t in p4info_text(tmp_path / "basic.p4info.txtpb").tables] == ["I.t"]
    assert main(["-b", "bmv2", "-o", str(tmp_path / "second"), str(program)], prog="p4c") == 0
    assert (tmp_path / "second" / "basic.json").is_file()


def test_p4c_driver_refuses_other_targets_and_architectures(program: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-b", "tofino", "-o", str(tmp_path), str(program)], prog="p4c") == 1
    assert "target tofino" in capsys.readouterr().err
    assert main(["--arch", "psa", "-o", str(tmp_path), str(program)], prog="p4c") == 1
    assert "only --arch v1model" in capsys.readouterr().err


def test_p4c_bm2_ss_writes_every_p4runtime_file_in_its_format(program: Path, tmp_path: Path) -> None:
    """The tutorials' utils/Makefile line, with several comma-separated P4Info files."""
    files = [tmp_path / n for n in ("a.p4.p4info.txtpb", "b.json", "c.bin")]
    argv = ["--p4v", "16", "--p4runtime-files", ",".join(map(str, files)), "-o", str(tmp_path / "basic.json"),
            str(program)]
    assert main(argv, prog="p4c-bm2-ss") == 0
    text = p4info_text(files[0])
    assert json_format.Parse(files[1].read_text(), p4i.P4Info()) == text
    assert p4i.P4Info.FromString(files[2].read_bytes()) == text
    assert json.loads((tmp_path / "basic.json").read_text())["format"] == "p4switch-ir"


def test_deprecated_p4runtime_file_takes_its_format_from_the_flag(program: Path, tmp_path: Path) -> None:
    out = tmp_path / "info.txt"
    assert main([str(program), "-o", str(tmp_path / "p.json"), "--p4runtime-file", str(out),
                 "--p4runtime-format", "json"]) == 0
    assert json_format.Parse(out.read_text(), p4i.P4Info()).tables[0].preamble.name == "I.t"
    assert main([str(program), "-o", str(tmp_path / "p.json"), "--p4runtime-file", str(out)]) == 0
    assert p4i.P4Info.FromString(out.read_bytes()).tables[0].preamble.name == "I.t"  # binary: p4c's default


def test_undefine_removes_an_earlier_define(tmp_path: Path) -> None:
    source = tmp_path / "d.p4"
    guard = "#ifdef WITH_T\n#error WITH_T is defined\n#endif\n"
    source.write_text(guard + TEMPLATE.replace("{BODY}", "apply {}"))
    assert main([str(source), "-o", str(tmp_path / "d.json"), "-DWITH_T", "-UWITH_T"]) == 0
    assert main([str(source), "-o", str(tmp_path / "d.json"), "-DWITH_T"]) == 1


def test_aliases_run_the_tools_under_bmv2s_names(program: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    made = aliases(bin_dir)
    assert made.returncode == 0, made.stderr
    assert {p.name: p.readlink().name for p in bin_dir.iterdir()} == {
        "p4c": "p4switch-cc", "p4c-bm2-ss": "p4switch-cc", "simple_switch_grpc": "p4switch"}
    driver = subprocess.run([str(bin_dir / "p4c"), "-o", str(tmp_path / "out"), str(program)],
                            capture_output=True, text=True, timeout=60)
    assert driver.returncode == 0 and (tmp_path / "out" / "basic.json").is_file(), driver.stderr
    backend = subprocess.run([str(bin_dir / "p4c-bm2-ss"), "-o", str(tmp_path / "x.json"), str(program)],
                             capture_output=True, text=True, timeout=60)
    assert backend.returncode == 0 and (tmp_path / "x.json").is_file(), backend.stderr
    switch = subprocess.run([str(bin_dir / "simple_switch_grpc"), "-v"], capture_output=True, text=True,
                            timeout=60)
    assert "simple_switch_grpc" in switch.stdout and "p4switch" in switch.stdout
    assert aliases(bin_dir).returncode == 0  # its own links are renewed


def test_aliases_leave_other_files_alone(tmp_path: Path) -> None:
    (tmp_path / "p4c").write_text("#!/bin/sh\necho the real p4c\n")
    made = aliases(tmp_path)
    assert made.returncode == 1 and "is not a p4switch alias" in made.stderr
    assert (tmp_path / "p4c").read_text().endswith("the real p4c\n")
