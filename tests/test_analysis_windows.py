"""FCT by flow start window, pooled over seeds (p4cc.analysis.windows, `p4cc report
--windows`)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from p4cc.analysis.runs import find_runs
from p4cc.analysis.windows import fct_by_window, parse_edges, run_windows, windows_markdown
from p4cc.errors import ConfigError


def _run(root: Path, name: str, fcts: list[tuple[float, int, float]]) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "spec.resolved.yaml").write_text(yaml.safe_dump(
        {"run": {"variant": name}, "workloads": [{"type": "websearch"}]}))
    rows = [{"flow_id": i, "src": "h1", "dst": "h2", "size_bytes": size, "cls": "flow",
             "tag": "w", "start_s": start, "end_s": start + fct, "fct_s": fct,
             "bytes_rx": size, "retransmissions": 0, "completed": True, "base_rtt_s": 8e-6,
             "cnps": 0} for i, (start, size, fct) in enumerate(fcts)]
    pd.DataFrame(rows).to_csv(d / "flows.csv", index=False)
    return d


def test_windows_split_by_start_and_pool_seeds(tmp_path: Path) -> None:
    # seed 1: mice 10 us before 1 s, 30 us after; seed 2: 20 and 50 us; one elephant
    _run(tmp_path, "acc_seed1", [(0.1, 1000, 10e-6), (0.5, 20_000_000, 0.01),
                                 (1.5, 1000, 30e-6)])
    _run(tmp_path, "acc_seed2", [(0.2, 1000, 20e-6), (1.2, 1000, 50e-6)])
    one = run_windows(find_runs([tmp_path / "acc_seed1"])[0], (1.0,))
    assert one["flows"].tolist() == [2.0, 1.0]
    assert one.loc[0, "elephant_avg_s"] == pytest.approx(0.01)
    assert math.isnan(one.loc[1, "elephant_avg_s"])
    table = fct_by_window(find_runs([tmp_path]), (1.0,))
    assert table["variant"].tolist() == ["acc", "acc"] and table["seeds"].tolist() == [2, 2]
    assert table["mice_avg_s"].tolist() == pytest.approx([15e-6, 40e-6])
    # 95 % CI of {10, 20} us: t(0.975, 1) = 12.706 times s/sqrt(2) = 5 us
    assert table.loc[0, "mice_avg_s_ci"] == pytest.approx(12.706 * 5e-6, rel=1e-3)
    md = windows_markdown(table)
    assert "| [0, 1) | acc | 2 | 15 ± 64 |" in md and "[1, end)" in md


@pytest.mark.parametrize("text", ["", "0.3,0.2", "-1", "a,b", "0.2,0.2"])
def test_bad_edges_are_config_errors(text: str) -> None:
    with pytest.raises(ConfigError, match="--windows"):
        parse_edges(text)


def test_report_windows_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from p4cc.cli import main

    _run(tmp_path, "secn1", [(0.1, 1000, 10e-6), (0.3, 1000, 12e-6)])
    assert main(["report", str(tmp_path), "--windows", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "| [0, 0.2) | secn1 | 1 | 10 |" in out and "| [0.2, end) | secn1 | 1 | 12 |" in out
