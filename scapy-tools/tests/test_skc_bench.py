"""The SKC benchmark runs end to end on a short trace and writes its figure."""

from pathlib import Path

import pytest

from labs import skc_bench


def test_bench_prints_table_and_writes_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results" / "bench"
    skc_bench.main(["--out", str(out), "--packets", "1500"])
    printed = capsys.readouterr().out
    png = out / "skc-hit-rate.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert f"figure: {png}" in printed
    table = [line.split() for line in printed.splitlines() if line.strip()[:2].strip().isdigit()]
    sizes = [int(row[0]) for row in table if len(row) == 8]
    assert sizes == skc_bench.CACHE_SIZES
    assert "store/hit =" in printed
