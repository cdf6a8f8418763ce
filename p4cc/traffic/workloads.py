"""Seeded workload generators; each returns a flow schedule as a pandas DataFrame.

Schedule columns (``SCHEDULE_COLUMNS``; documented in docs/traffic.md):

* ``flow_id`` int: 0..n-1 in start order (assigned by ``p4cc.experiment.schedule``);
  generators number their own rows 0..k-1 and ``after`` refers to those numbers.
* ``start_s`` float: earliest start, seconds since the run started.
* ``src``, ``dst`` str: host names (``h1``...).
* ``size_bytes`` int: application bytes; 0 for a ``bulk`` flow (runs until ``stop_s``).
* ``cls`` str: ``flow`` | ``incast`` | ``query`` | ``response`` | ``read`` | ``write`` |
  ``bulk`` (bulk rows are played with iperf3 by the BMv2 backend).
* ``tag`` str: the workload's label in the spec (analysis groups by it).
* ``after`` int: -1, or the flow that must complete before this one starts (closed-loop
  IO depth, partition-aggregate responses).
* ``stop_s`` float: NaN, or no new flow/bytes after this time (bulk: its end time).

Arrival processes follow REFERENCE §4: per host Poisson with mean gap
``mean_size*8/(host_link_rate*load)`` and destination uniform over the other hosts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from p4cc.errors import ConfigError
from p4cc.traffic.cdf import FlowSizeCdf

SCHEDULE_COLUMNS = ["flow_id", "start_s", "src", "dst", "size_bytes", "cls", "tag", "after",
                    "stop_s"]

KIB = 1024

#: ACC Table 1 (ACC §5.3.1, REFERENCE §4): read fraction and block-size range in bytes.
#: fio block sizes are powers of two, so a range "512B-64KB" samples uniformly among
#: 512, 1K, ..., 64K (assumption: the paper gives only the range).
STORAGE_PATTERNS: dict[str, tuple[float, int, int]] = {
    "oltp": (0.5, 512, 64 * KIB),
    "olap": (0.5, 256 * KIB, 4096 * KIB),
    "vdi": (0.2, 1 * KIB, 64 * KIB),
    "exchange": (0.6, 32 * KIB, 512 * KIB),
    "video": (0.2, 64 * KIB, 64 * KIB),
    "backup": (0.4, 16 * KIB, 64 * KIB),
}


def frame(rows: dict[Any, Any] | None = None) -> pd.DataFrame:
    """A schedule DataFrame with the standard columns and dtypes."""
    df = pd.DataFrame(rows or {c: [] for c in SCHEDULE_COLUMNS if c != "flow_id"})
    if "flow_id" not in df:
        df.insert(0, "flow_id", np.arange(len(df), dtype=np.int64))
    if "after" not in df:
        df["after"] = -1
    if "stop_s" not in df:
        df["stop_s"] = np.nan
    df = df[SCHEDULE_COLUMNS]
    return df.astype({"flow_id": "int64", "start_s": "float64", "src": "object",
                      "dst": "object", "size_bytes": "int64", "cls": "object",
                      "tag": "object", "after": "int64", "stop_s": "float64"})


def _other(rng: np.random.Generator, hosts: Sequence[str], src: np.ndarray,
           candidates: Sequence[str] | None = None) -> np.ndarray:
    """Uniform destination per row among ``candidates`` (default: hosts) minus the source."""
    pool = np.asarray(list(candidates) if candidates else list(hosts), dtype=object)
    out = np.empty(len(src), dtype=object)
    for s in np.unique(src):
        mask = src == s
        choices = pool[pool != s]
        if len(choices) == 0:
            raise ConfigError(f"host {s} has no destination to send to")
        out[mask] = choices[rng.integers(0, len(choices), int(mask.sum()))]
    return out


def poisson_arrivals(rng: np.random.Generator, mean_gap_s: float, t0: float,
                     t1: float) -> np.ndarray:
    """Arrival times of a Poisson process of mean gap ``mean_gap_s`` in [t0, t1)."""
    if not (math.isfinite(mean_gap_s) and mean_gap_s > 0):
        raise ConfigError(f"Poisson arrivals need a positive mean gap, got {mean_gap_s!r} s; "
                          f"check the load (0, 1] and the link rate")
    if t1 <= t0:
        return np.empty(0)
    expected = (t1 - t0) / mean_gap_s
    times: list[np.ndarray] = []
    t = t0
    while t < t1:
        n = int(expected * 1.1 + 16 * math.sqrt(expected + 1) + 16)
        chunk = t + np.cumsum(rng.exponential(mean_gap_s, n))
        times.append(chunk[chunk < t1])
        t = float(chunk[-1])
    return np.concatenate(times) if times else np.empty(0)


def poisson_flows(rng: np.random.Generator, cdf: FlowSizeCdf, hosts: Sequence[str],
                  load: float, rate_bps: float, t0: float, t1: float, tag: str,
                  size_scale: float = 1.0, senders: Sequence[str] | None = None,
                  receivers: Sequence[str] | None = None) -> pd.DataFrame:
    """Flow sizes from ``cdf``; per-sender Poisson arrivals at ``load`` of ``rate_bps``."""
    mean_gap = cdf.mean * size_scale * 8.0 / (rate_bps * load)
    parts = []
    for host in senders or hosts:
        t = poisson_arrivals(rng, mean_gap, t0, t1)
        parts.append(pd.DataFrame({"start_s": t, "src": host}))
    df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        {"start_s": [], "src": []})
    src = df["src"].to_numpy(dtype=object)
    return frame({
        "start_s": df["start_s"].to_numpy(float),
        "src": src,
        "dst": _other(rng, hosts, src, receivers),
        "size_bytes": cdf.sample(rng, len(df), size_scale),
        "cls": "flow",
        "tag": tag,
    })


def _sizes(rng: np.random.Generator, n: int, size_range: tuple[int, int] | None,
           choices: Sequence[int] | None, size_scale: float) -> np.ndarray:
    if choices:
        raw = np.asarray(choices, dtype=float)[rng.integers(0, len(choices), n)]
    else:
        assert size_range is not None
        lo, hi = size_range
        raw = np.exp(rng.uniform(math.log(lo), math.log(hi), n))  # log-uniform
    return np.maximum(1, np.rint(raw * size_scale)).astype(np.int64)


def incast(rng: np.random.Generator, hosts: Sequence[str], *, senders: tuple[int, int],
           flows_per_sender: tuple[int, int], load: float, rate_bps: float, t0: float,
           t1: float, tag: str, receiver: str | None = None,
           size_range: tuple[int, int] | None = (10_000, 10_000_000),
           sizes: Sequence[int] | None = None, size_scale: float = 1.0) -> pd.DataFrame:
    """ACC's incast traffic (ACC §4.4.1): bursts of p senders x q flows to one receiver.

    Per burst: p uniform in ``senders`` (ACC: [2, 64]), q uniform in
    ``flows_per_sender`` (ACC: [1, 1000]), sizes log-uniform in ``size_range`` (ACC:
    10 KB-10 MB) or uniform over ``sizes`` (ACC Fig. 7: {1K, 10K, 100K, 1M, 10M}); all
    flows of a burst start together.  The next burst follows after an exponential gap
    of mean ``burst_bytes*8/(rate*load)``, so the receiver's link sees ``load`` on average.
    """
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("start_s", "src", "dst", "size")}
    t = t0
    while t < t1:
        dst = receiver or str(hosts[int(rng.integers(0, len(hosts)))])
        others = [h for h in hosts if h != dst]
        p = min(len(others), int(rng.integers(senders[0], senders[1] + 1)))
        chosen = rng.choice(np.asarray(others, dtype=object), size=p, replace=False)
        q = rng.integers(flows_per_sender[0], flows_per_sender[1] + 1, p)
        src = np.repeat(chosen, q)
        if len(src) == 0:  # no sender or no flow: the gap below would be 0 forever
            raise ConfigError(f"incast toward {dst}: no sender among hosts {list(hosts)} "
                              f"(senders={senders}, flows_per_sender={flows_per_sender}); "
                              f"the topology needs at least two hosts and >= 1 flow each")
        size = _sizes(rng, len(src), size_range, sizes, size_scale)
        cols["start_s"].append(np.full(len(src), t))
        cols["src"].append(src)
        cols["dst"].append(np.full(len(src), dst, dtype=object))
        cols["size"].append(size)
        t += float(rng.exponential(size.sum() * 8.0 / (rate_bps * load)))
    if not cols["src"]:
        return frame()
    return frame({"start_s": np.concatenate(cols["start_s"]),
                  "src": np.concatenate(cols["src"]), "dst": np.concatenate(cols["dst"]),
                  "size_bytes": np.concatenate(cols["size"]), "cls": "incast", "tag": tag})


def partition_aggregate(rng: np.random.Generator, hosts: Sequence[str], *, aggregator: str,
                        workers: Sequence[str], response_bytes: int, t0: float, t1: float,
                        tag: str, period_s: float | None = None, load: float | None = None,
                        rate_bps: float = 0.0, query_bytes: int = 0,
                        size_scale: float = 1.0) -> pd.DataFrame:
    """Synchronised partition-aggregate bursts (the incast of DCTCP §2 / PET §1).

    Every ``period_s`` (or at the period that makes the aggregator's link carry ``load``)
    every worker sends ``response_bytes`` to the aggregator at the same instant; with
    ``query_bytes`` > 0 the aggregator first sends a query to each worker and each
    response starts when its query has completed (``after``).
    """
    resp = max(1, round(response_bytes * size_scale))
    if period_s is None:
        if not load or rate_bps <= 0:
            raise ConfigError("partition_aggregate needs period_s or load")
        period_s = len(workers) * resp * 8.0 / (rate_bps * load)
    if not (math.isfinite(period_s) and period_s > 0):
        raise ConfigError(f"partition_aggregate: period_s must be > 0, got {period_s!r} "
                          f"(workers={list(workers)})")
    rows: dict[str, list[object]] = {k: [] for k in ("start_s", "src", "dst", "size_bytes",
                                                       "cls", "after")}
    qbytes = max(1, round(query_bytes * size_scale)) if query_bytes else 0
    t = t0 + float(rng.uniform(0, period_s))
    while t < t1:
        for w in workers:
            after = -1
            if qbytes:
                after = len(rows["start_s"])
                for k, v in (("start_s", t), ("src", aggregator), ("dst", w),
                             ("size_bytes", qbytes), ("cls", "query"), ("after", -1)):
                    rows[k].append(v)
            for k, v in (("start_s", t), ("src", w), ("dst", aggregator),
                         ("size_bytes", resp), ("cls", "response"), ("after", after)):
                rows[k].append(v)
        t += period_s
    return frame({**rows, "tag": tag}) if rows["start_s"] else frame()


def storage_split(hosts: Sequence[str]) -> tuple[list[str], list[str]]:
    """ACC §5.3.1: compute:storage nodes 3:1; every fourth host is a storage node."""
    storage = [h for i, h in enumerate(hosts) if i % 4 == 3]
    if not storage:
        raise ConfigError(f"storage workloads need at least 4 hosts, topology has {len(hosts)}")
    return [h for h in hosts if h not in storage], storage


def block_sizes(pattern: str) -> np.ndarray:
    _, lo, hi = STORAGE_PATTERNS[pattern]
    return np.asarray([1 << k for k in range(lo.bit_length() - 1, hi.bit_length())
                       if lo <= (1 << k) <= hi], dtype=np.int64)


def storage(rng: np.random.Generator, *, pattern: str, compute: Sequence[str],
            storage_nodes: Sequence[str], io_depth: int, rate_bps: float, t0: float,
            t1: float, tag: str, size_scale: float = 1.0,
            max_requests: int = 200_000) -> pd.DataFrame:
    """fio-style closed-loop IO (ACC Table 1): ``io_depth`` outstanding requests per
    compute node, each the next in a chain that starts when the previous one completes.

    A read flows storage -> compute, a write compute -> storage (ACC footnote 4); the
    small request message of a read is not modelled.  Chains are long enough to keep a
    node busy at full line rate until ``t1``, capped at ``max_requests`` in total.
    """
    if pattern not in STORAGE_PATTERNS:
        raise ConfigError(f"unknown storage pattern {pattern!r}; choose one of "
                          f"{sorted(STORAGE_PATTERNS)}")
    read_frac = STORAGE_PATTERNS[pattern][0]
    choices = block_sizes(pattern)
    mean = float(choices.mean()) * size_scale
    per_chain = math.ceil((t1 - t0) * rate_bps / (8.0 * mean)) + 1
    per_chain = max(1, min(per_chain, max_requests // max(1, len(compute) * io_depth)))
    n_chains = len(compute) * io_depth
    n = n_chains * per_chain
    node = np.repeat(np.asarray(compute, dtype=object), io_depth * per_chain)
    peer = np.asarray(storage_nodes, dtype=object)[rng.integers(0, len(storage_nodes), n)]
    is_read = rng.random(n) < read_frac
    size = np.maximum(1, np.rint(choices[rng.integers(0, len(choices), n)] * size_scale))
    idx = np.arange(n)
    pos = idx % per_chain  # position inside its chain; rows of a chain are contiguous
    after = np.where(pos == 0, -1, idx - 1)
    return frame({"start_s": np.full(n, t0), "src": np.where(is_read, peer, node),
                  "dst": np.where(is_read, node, peer), "size_bytes": size.astype(np.int64),
                  "cls": np.where(is_read, "read", "write"), "tag": tag, "after": after,
                  "stop_s": np.full(n, t1)})


def bulk(pairs: Sequence[tuple[str, str]], t0: float, t1: float, tag: str) -> pd.DataFrame:
    """Long-lived TCP background flows, one per (src, dst) pair, from t0 to t1 (iperf3)."""
    return frame({"start_s": [t0] * len(pairs), "src": [p[0] for p in pairs],
                  "dst": [p[1] for p in pairs], "size_bytes": [0] * len(pairs),
                  "cls": "bulk", "tag": tag, "stop_s": [t1] * len(pairs)})
