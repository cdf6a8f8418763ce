"""Analysis on hand-made records: slowdown, 5 % groups, percentiles, Jain, FCT classes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from p4cc.analysis import metrics as an


def test_slowdown_uses_headers_and_clips_at_one() -> None:
    # pkt 1000 B with 54 B of headers -> 946 B payload per packet.
    flows = pd.DataFrame({"size_bytes": [946, 1892, 947], "fct_s": [0.0056, 0.0018, 0.01]})
    sd = an.slowdown(flows, rate_bps=1e7, base_rtt_s=0.002, pkt_bytes=1000, header_bytes=54)
    # 946 B = 1 packet = 1000 B on the wire: ideal 2 ms + 0.8 ms
    assert sd.iloc[0] == pytest.approx(0.0056 / 0.0028)
    assert sd.iloc[1] == 1.0  # faster than ideal -> clipped
    # 947 B needs 2 packets: 947 + 108 B on the wire
    assert sd.iloc[2] == pytest.approx(0.01 / (0.002 + (947 + 108) * 8 / 1e7))
    per_flow = flows.assign(base_rtt_s=[0.001, 0.001, 0.001])
    assert an.slowdown(per_flow, 1e7, 0.002, 1000, 54).iloc[0] == pytest.approx(0.0056 / 0.0018)
    assert an.HEADER_BYTES == 66  # Ethernet + IPv4 + UDP + BTH + data header + ICRC


def test_slowdown_groups_are_5_percent_by_count() -> None:
    n = 40
    flows = pd.DataFrame({"size_bytes": np.arange(n, 0, -1)})  # unsorted on purpose
    sd = pd.Series(flows["size_bytes"].astype(float).to_numpy())  # slowdown = size
    g = an.slowdown_groups(flows, sd)
    assert len(g) == 20 and (g["count"] == 2).all()
    assert list(g["size_min"]) == list(range(1, 41, 2))
    assert g.loc[0, "p50"] == 1.5 and g.loc[19, "p99"] == pytest.approx(39.99)
    odd = pd.DataFrame({"size_bytes": np.arange(1, 31)})
    g = an.slowdown_groups(odd, pd.Series(np.ones(30)))
    assert g["count"].sum() == 30 and set(g["count"]) <= {1, 2} and len(g) == 20
    assert (g["size_min"].diff().dropna() > 0).all()


def test_percentile_and_jain() -> None:
    assert an.percentile(np.arange(1, 101), 99) == pytest.approx(99.01)
    assert an.percentile([1.0, np.nan, 3.0], 50) == 2.0
    assert np.isnan(an.percentile([], 50))
    assert an.jain([5, 5, 5, 5]) == pytest.approx(1.0)
    assert an.jain([1, 0, 0, 0]) == pytest.approx(0.25)
    assert an.jain([1, 2, 3]) == pytest.approx(36 / 42)
    assert np.isnan(an.jain([]))


def test_fct_by_class() -> None:
    flows = pd.DataFrame({"size_bytes": [1_000, 50_000, 500_000, 20_000_000, 30_000_000],
                          "fct_s": [1.0, 3.0, 10.0, 100.0, 200.0]})
    t = an.fct_by_class(flows, an.MICE_BYTES, an.ELEPHANT_BYTES)
    assert t.loc["mice", "count"] == 2 and t.loc["mice", "avg_s"] == 2.0
    assert t.loc["medium", "count"] == 1
    assert t.loc["elephant", "avg_s"] == 150.0 and t.loc["elephant", "p50_s"] == 150.0
    assert t.loc["all", "count"] == 5 and t.loc["all", "p99_s"] == pytest.approx(196.0)
    scaled = an.fct_by_class(flows, an.MICE_BYTES * 0.1, an.ELEPHANT_BYTES * 0.1)
    assert scaled.loc["mice", "count"] == 1 and scaled.loc["elephant", "count"] == 2


def test_queue_stats() -> None:
    tel = pd.DataFrame({"switch": ["s1"] * 4, "port": [1, 1, 2, 2],
                        "qlen_avg_bytes": [1000.0, 3000.0, 0.0, 0.0],
                        "qlen_max_bytes": [2000.0, 5000.0, 0.0, 0.0],
                        "utilization": [0.5, 0.7, 0.0, 0.0], "tx_pkts": [10, 10, 0, 0],
                        "tx_marked_pkts": [1, 3, 0, 0], "drops_pkts": [0, 1, 0, 0]})
    q = an.queue_stats(tel)
    assert q.loc[("s1", 1), "qlen_avg_bytes"] == 2000.0
    assert q.loc[("s1", 1), "qlen_std_bytes"] == 1000.0
    assert q.loc[("s1", 1), "mark_fraction"] == 0.2 and q.loc[("s1", 1), "drops_pkts"] == 1
    assert q["mark_fraction"].isna().tolist() == [False, True]


def test_fct_by_size_for_fixed_message_sizes() -> None:
    flows = pd.DataFrame({"size_bytes": [1000, 1000, 10000], "fct_s": [1.0, 3.0, 5.0]})
    t = an.fct_by_size(flows)
    assert list(t.index) == [1000, 10000] and t.loc[1000, "avg_s"] == 2.0
    many = pd.DataFrame({"size_bytes": range(20), "fct_s": [1.0] * 20})
    assert an.fct_by_size(many).empty
