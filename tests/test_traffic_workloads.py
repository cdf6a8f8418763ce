"""Workload generators: samplers, Poisson load, incast, storage, schedules, iperf3 JSON."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from p4cc.errors import ConfigError
from p4cc.experiment.schedule import combine, link_events
from p4cc.experiment.spec import LinkFailureSpec
from p4cc.topo.spec import parse_topo
from p4cc.traffic import workloads as wl
from p4cc.traffic.cdf import load_cdf, parse_cdf
from p4cc.traffic.iperf import Iperf3Error, parse_iperf3_json

HOSTS = [f"h{i}" for i in range(1, 9)]


@pytest.mark.parametrize(("name", "mean", "tol"), [
    ("fbhdp", 120_421, 0.01), ("websearch", 1_711_250, 0.03), ("alistorage", 40_870, 0.01)])
def test_sampler_mean_matches_reference(name: str, mean: float, tol: float) -> None:
    cdf = load_cdf(name)
    assert cdf.mean == pytest.approx(mean, rel=1e-5)  # REFERENCE §4's stated means
    draws = cdf.sample(np.random.default_rng(7), 10**6)
    assert abs(draws.mean() / mean - 1) < tol


def test_datamining_is_the_pfabric_vl2_cdf() -> None:
    cdf = load_cdf("datamining")
    draws = cdf.sample(np.random.default_rng(1), 200_000)
    assert np.mean(draws == 1460) == pytest.approx(0.5, abs=0.01)  # 50 % one packet
    assert cdf.max_bytes == 666_667 * 1460
    assert cdf.mean == pytest.approx(7.47e6, rel=0.01)


def test_cdf_validation_rejects_non_monotone_and_bad_end() -> None:
    with pytest.raises(ConfigError, match="not monotone"):
        parse_cdf("0 0\n100 50\n50 60\n200 100\n", "bad")
    with pytest.raises(ConfigError, match="not 100"):
        parse_cdf("0 0\n100 50\n", "short")
    with pytest.raises(ConfigError, match="line 2"):
        parse_cdf("0 0\nabc 5\n", "junk")
    with pytest.raises(ConfigError, match="unknown flow-size distribution"):
        load_cdf("nosuch")


def test_poisson_offered_load_within_2_percent() -> None:
    fixed = parse_cdf("10000 0\n10000 100\n", "fixed")  # isolates the arrival process
    rate, load, t1 = 10e6, 0.4, 400.0
    df = wl.poisson_flows(np.random.default_rng(3), fixed, HOSTS, load, rate, 0.0, t1, "x")
    offered = df["size_bytes"].sum() * 8 / (len(HOSTS) * rate * t1)
    assert offered == pytest.approx(load, rel=0.02)
    ali = load_cdf("alistorage")
    df = wl.poisson_flows(np.random.default_rng(3), ali, HOSTS, 0.7, 25e9, 0.0, 0.5, "a")
    offered = df["size_bytes"].sum() * 8 / (len(HOSTS) * 25e9 * 0.5)
    assert len(df) > 200_000
    assert offered == pytest.approx(0.7, rel=0.02)
    assert (df["src"] != df["dst"]).all()
    assert set(df["dst"]) == set(HOSTS)
    assert df["start_s"].between(0, 0.5).all()


def test_generators_are_reproducible_from_the_seed() -> None:
    ws = load_cdf("websearch")
    a = wl.poisson_flows(np.random.default_rng(5), ws, HOSTS, 0.5, 1e7, 0, 20, "w")
    b = wl.poisson_flows(np.random.default_rng(5), ws, HOSTS, 0.5, 1e7, 0, 20, "w")
    c = wl.poisson_flows(np.random.default_rng(6), ws, HOSTS, 0.5, 1e7, 0, 20, "w")
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(c)
    assert list(a.columns) == wl.SCHEDULE_COLUMNS


def test_incast_bursts_follow_acc_ranges() -> None:
    df = wl.incast(np.random.default_rng(1), [f"h{i}" for i in range(1, 70)],
                   senders=(2, 64), flows_per_sender=(1, 10), load=0.5, rate_bps=25e9,
                   t0=0, t1=2.0, tag="i", receiver="h1")
    assert (df["dst"] == "h1").all() and (df["src"] != "h1").all()
    assert df["size_bytes"].between(10_000, 10_000_000).all()
    bursts = df.groupby("start_s")["src"].nunique()
    assert bursts.between(2, 64).all() and len(bursts) > 5
    offered = df["size_bytes"].sum() * 8 / (25e9 * 2.0)
    assert 0.3 < offered < 0.8  # exponential gaps: load on average
    sized = wl.incast(np.random.default_rng(1), HOSTS, senders=(2, 2), flows_per_sender=(1, 1),
                      load=0.6, rate_bps=1e7, t0=0, t1=30, tag="e",
                      sizes=[1000, 10000, 100000], size_scale=0.1, receiver="h3")
    assert set(sized["size_bytes"]) <= {100, 1000, 10000}


def test_partition_aggregate_is_synchronised_with_queries() -> None:
    df = wl.partition_aggregate(np.random.default_rng(1), HOSTS, aggregator="h1",
                                workers=HOSTS[1:], response_bytes=20000, query_bytes=200,
                                t0=0, t1=1.0, tag="pa", period_s=0.1)
    resp = df[df["cls"] == "response"]
    assert resp.groupby("start_s").size().eq(7).all()
    queries = df.set_index("flow_id")
    for _, r in resp.iterrows():
        q = queries.loc[r["after"]]
        assert q["cls"] == "query" and q["dst"] == r["src"]


@pytest.mark.parametrize("pattern", sorted(wl.STORAGE_PATTERNS))
def test_storage_patterns_match_table1(pattern: str) -> None:
    read_frac, lo, hi = wl.STORAGE_PATTERNS[pattern]
    compute, storage = wl.storage_split(HOSTS)
    assert len(compute) == 3 * len(storage)
    df = wl.storage(np.random.default_rng(2), pattern=pattern, compute=compute,
                    storage_nodes=storage, io_depth=8, rate_bps=25e9, t0=0, t1=1.0, tag=pattern,
                    max_requests=40_000)
    assert np.mean(df["cls"] == "read") == pytest.approx(read_frac, abs=0.02)
    assert df["size_bytes"].between(lo, hi).all()
    assert df["size_bytes"].min() == lo and df["size_bytes"].max() == hi
    reads = df[df["cls"] == "read"]
    assert reads["src"].isin(storage).all() and reads["dst"].isin(compute).all()
    writes = df[df["cls"] == "write"]
    assert writes["src"].isin(compute).all() and writes["dst"].isin(storage).all()
    # io_depth chains per compute node: that many flows have no predecessor.
    assert (df["after"] == -1).sum() == 8 * len(compute)


def test_combine_renumbers_and_remaps_after() -> None:
    a = wl.frame({"start_s": [2.0, 0.5], "src": ["h1", "h2"], "dst": ["h2", "h1"],
                  "size_bytes": [10, 20], "cls": "flow", "tag": "a", "after": [-1, 0]})
    b = wl.frame({"start_s": [1.0], "src": ["h3"], "dst": ["h1"], "size_bytes": [30],
                  "cls": "flow", "tag": "b"})
    df = combine([a, b])
    assert list(df["start_s"]) == [0.5, 1.0, 2.0]
    assert list(df["flow_id"]) == [0, 1, 2]
    # the 0.5 s flow waited for the 2.0 s flow (old id 0, new id 2)
    assert df.loc[0, "after"] == 2 and df.loc[2, "after"] == -1


def test_link_failures_pick_a_fraction_of_switch_links() -> None:
    topo = parse_topo("leafspine,spines=4,leaves=5,hosts=2")
    ev = link_events(np.random.default_rng(1), (LinkFailureSpec(3.1, 6.1, 0.1),), topo)
    downs = ev[ev["action"] == "down"]
    assert len(downs) == 2 and (ev["action"] == "up").sum() == 2  # 10 % of 20 trunks
    assert not downs["a"].str.startswith("h").any() and not downs["b"].str.startswith("h").any()
    assert list(ev["t_s"]) == [3.1, 3.1, 6.1, 6.1]


IPERF_OK = {
    "start": {"connected": [{"remote_host": "10.0.1.2"}],
              "test_start": {"protocol": "TCP", "duration": 2}},
    "intervals": [{"sum": {"start": 0, "end": 1.0, "bytes": 1_000_000,
                           "bits_per_second": 8e6, "retransmits": 1}},
                  {"sum": {"start": 1.0, "end": 2.0, "bytes": 1_250_000,
                           "bits_per_second": 1e7, "retransmits": 0}}],
    "end": {"sum_sent": {"seconds": 2.0, "bytes": 2_250_000, "bits_per_second": 9e6,
                         "retransmits": 1},
            "sum_received": {"seconds": 2.0, "bytes": 2_200_000, "bits_per_second": 8.8e6}},
}


def test_parse_iperf3_json() -> None:
    r = parse_iperf3_json(json.dumps(IPERF_OK))
    assert r["bytes_sent"] == 2_250_000 and r["bytes_received"] == 2_200_000
    assert r["bps_received"] == 8.8e6 and r["retransmits"] == 1 and r["error"] is None
    assert r["remote_host"] == "10.0.1.2" and len(r["intervals"]) == 2
    assert r["intervals"][1]["bps"] == 1e7
    err = parse_iperf3_json(json.dumps({"start": {}, "intervals": [], "end": {},
                                        "error": "unable to connect to server"}))
    assert err["error"] == "unable to connect to server" and err["bytes_sent"] == 0
    with pytest.raises(Iperf3Error, match="not JSON"):
        parse_iperf3_json("iperf3: error")
    with pytest.raises(Iperf3Error):
        parse_iperf3_json("[1, 2]")


def test_bulk_tcp_segments_are_sized_to_the_packet_the_rate_assumes() -> None:
    from p4cc.errors import ConfigError
    from p4cc.traffic.iperf import MIN_MSS, TCP_WIRE_OVERHEAD, iperf3_client_argv, tcp_mss

    assert TCP_WIRE_OVERHEAD == 54 and tcp_mss(1000) == 946  # 14 + 20 + 20
    argv = iperf3_client_argv("10.0.0.2", 3.0, 5202, mss=tcp_mss(1000))
    assert argv[argv.index("-M") + 1] == "946" and "-M" not in iperf3_client_argv("x", 1.0)
    with pytest.raises(ConfigError, match="at least 142 B"):
        tcp_mss(MIN_MSS + TCP_WIRE_OVERHEAD - 1)
