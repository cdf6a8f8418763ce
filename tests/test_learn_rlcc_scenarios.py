"""RL-CC evaluation scenarios (p4cc.learn.rlcc_scenarios) and their one-command CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc import MIN_RATE_FRAC
from p4cc.learn import rlcc_scenarios as sc
from p4cc.learn.rlcc_scenario_cli import cc_names, runs, table


def test_plan_of_operating_points_and_names() -> None:
    assert cc_names("pi,dcqcn,rlcc:adpg-mlp") == ["rlcc:pi", "dcqcn", "rlcc:adpg-mlp"]
    plan = runs("operating-points", ["rlcc:pi", "dcqcn"], [64], "paper", 0, None)
    targets = [kw.get("target") for _, kw in plan]
    assert targets == [0.032, 0.064, 0.64, 0.064]
    assert [kw["point"] for _, kw in plan] == ["strict", "standard", "loose", "standard"]
    assert {fn for fn, _ in plan} == {"many_to_one"}
    ls = runs("long-short", ["dcqcn"], [2, 8], "paper", 0, None)
    assert [kw["shorts"] for _, kw in ls] == [1, 7]


def test_all_to_all_counts_flows_and_ports() -> None:
    r = sc.all_to_all("dcqcn", 3, rtts=300)
    assert r["flows"] == 3 * 2 * 2  # every host to both others, 2 flows each
    assert 50 < r["su_pct"] <= 100.0 + 1e-6 and r["lost_bytes"] == 0.0
    assert 0 < r["fr_pct"] <= 100 and r["ql_us"] > 0
    with pytest.raises(ConfigError):
        sc.all_to_all("dcqcn", 1)
    with pytest.raises(ConfigError, match="rlcc:<policy>"):
        sc.all_to_all("swift", 2)


def test_long_short_long_flow_yields_and_recovers() -> None:
    r = sc.long_short("rlcc:pi", shorts=1, short_bytes=200_000, join_rtts=200,
                      after_rtts=400)
    assert r["long_bw_before"] > 0.95  # alone on the link
    assert r["long_bw_during"] < 0.9  # it made room for the short flow
    # the long flow's sender has to climb back from its share during the burst (~0.6 of
    # the line) to 0.9: at most ×1.2 per decision, one decision per 2 base RTTs, so at
    # least 3 decisions = 48 µs.  Measured on what arrives, this read 8 µs (one RTT) for
    # every CC: the queue the short flow left drains at the line rate.
    assert r["recovery_us"] is not None and r["recovery_us"] >= 48.0
    assert r["short_fct_max_us"] >= 200_000 * 8 / 25e9 * 1e6  # not faster than the line
    assert r["lost_bytes"] == 0.0


def test_target_moves_the_operating_point() -> None:
    # the PI baseline drives δ to 0: a looser target must hold more queue
    # (target·√2 + β − 1 base RTTs of queue: 4.4 µs strict, 11 µs loose; measured 4.2, 16)
    strict = sc.many_to_one("rlcc:pi", 2, rtts=2000, target=0.032)
    loose = sc.many_to_one("rlcc:pi", 2, rtts=2000, target=0.64)
    assert 3.0 < strict["ql_us"] < 6.0
    assert loose["ql_us"] > 2 * strict["ql_us"]
    assert strict["target"] == 0.032


def test_table_formats_missing_values() -> None:
    md = table("long-short", [{"flows": 2, "cc": "dcqcn", "recovery_us": None,
                               "long_bw_during": float("nan"), "lost_bytes": 0.0}])
    assert "| 2 | dcqcn |" in md and "—" in md


def test_cli_writes_rows_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")  # p4cc train imports the trainer's config
    from p4cc.cli import main

    rc = main(["train", "rlcc", "--evaluate", "all-to-all", "--eval-ns", "2", "--rtts", "200",
               "--compare", "dcqcn", "--out", str(tmp_path), "--name", "e"])
    assert rc == 0
    rows = [json.loads(x) for x in (tmp_path / "e" / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["cc"] == "dcqcn" and rows[0]["hosts"] == 2
    assert (tmp_path / "e" / "table.md").read_text().startswith("| hosts | CC |")
    assert "| 2 | dcqcn |" in capsys.readouterr().out


def test_jittered_starts_are_seeded_and_inside_the_window() -> None:
    pairs = [("h1", "h2")] * 50
    a = sc._long_flows(pairs, 1e-3, seed=4)
    b = sc._long_flows(pairs, 1e-3, seed=4)
    assert (a.start_s == b.start_s).all() and a.start_s.nunique() == 50
    assert a.start_s.min() >= 0 and a.start_s.max() < 1e-3
    assert (sc._long_flows(pairs).start_s == 0).all()
    plan = runs("all-to-all", ["dcqcn"], [4], "paper", 0, None, jitter_rtts=100)
    assert plan[0][1]["jitter_rtts"] == 100


def test_rate_floor_and_dcqcn_parameter_set() -> None:
    from p4cc.topo.spec import parse_topo

    topo = parse_topo("star,hosts=3", "paper")
    flows = sc._long_flows([("h1", "h3"), ("h2", "h3")])
    eng = sc.build("rlcc:pi", topo, flows, floor_frac=1e-5)
    assert eng.cc.params.floor_bps == pytest.approx(25e9 * 1e-5)  # type: ignore[attr-defined]
    # the default floor: NVIDIA's 1 Mb/s NIC minimum at 25 Gb/s (session 6; line/1000
    # before, which made 1,024 flows offer 102 % of a port whatever the policy did)
    assert sc.build("rlcc:pi", topo, flows).cc.params.floor_bps == pytest.approx(  # type: ignore[attr-defined]
        25e9 * MIN_RATE_FRAC)
    assert sc.build("dcqcn:nvidia", topo, flows).config.cc_params == "nvidia"
    assert cc_names("dcqcn:nvidia,pi") == ["dcqcn:nvidia", "rlcc:pi"]
    plan = runs("many-to-one", ["rlcc:pi"], [1024], "paper", 0, 4000, floor_frac=1e-5)
    assert plan[0][1]["floor_frac"] == 1e-5


def test_buffer_option_and_start_up_loss_kept_apart() -> None:
    # 4 flows start at the line rate into a 200 kB buffer: the first half of the run
    # overflows it (counted apart), the second half (the measured window) loses nothing
    r = sc.many_to_one("rlcc:pi", 4, rtts=600, buffer_bytes=200_000)
    assert r["buffer_bytes"] == 200_000
    assert r["startup_lost_bytes"] > 100_000 and r["lost_bytes"] == 0.0
    assert sc.many_to_one("dcqcn", 2, rtts=200)["buffer_bytes"] == 1_000_000  # paper scale
    assert sc.long_short("dcqcn", 1, 50_000, join_rtts=150, after_rtts=50,
                         buffer_bytes=5_000_000)["buffer_bytes"] == 5_000_000
    with pytest.raises(ConfigError, match="below one packet"):
        sc.star(3, "paper", buffer_bytes=10)
    md = table("many-to-one", [r])
    assert "lost 1st half" in md.splitlines()[0] and "| 4 | rlcc:pi |" in md
