"""PFC in the fluid engine (p4cc.sim.pfc): lossless incasts, the dynamic threshold,
pauses that spread upstream, and the option's checks."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from p4cc.analysis.metrics import summary
from p4cc.analysis.runs import open_run
from p4cc.errors import ConfigError
from p4cc.experiment.bmv2.limits import check_spec
from p4cc.experiment.runner import run_spec
from p4cc.experiment.sim_backend import SimBackend
from p4cc.experiment.spec import parse_spec, resolve
from p4cc.sim.config import SimConfig
from p4cc.sim.engine import Engine
from p4cc.sim.fabric import Fabric
from p4cc.sim.pfc import Pfc
from p4cc.topo.spec import parse_topo


def _bulk(srcs: list[str], dst: str, stop_s: float) -> pd.DataFrame:
    n = len(srcs)
    return pd.DataFrame({"flow_id": np.arange(n), "start_s": 0.0, "src": srcs,
                         "dst": [dst] * n, "size_bytes": 0, "stop_s": stop_s})


def _cfg(pfc: bool, buffer: str = "shared") -> SimConfig:
    return SimConfig(cc="line", host_traces=False, telemetry_interval_s=1.0, pfc=pfc,
                     pfc_buffer=buffer)


@pytest.mark.parametrize("buffer", ["shared", "per-queue"])
def test_two_line_rate_senders_lose_nothing_and_the_port_stays_busy(buffer: str) -> None:
    """Two line-rate hosts into one line-rate port: without PFC the queue fills the
    buffer and drops; with it each ingress holds at most alpha·free, i.e. the queue
    stays near 2·alpha/(1 + 2·alpha) (20 % at alpha 1/8) of the free space's base -- the
    switch's 10 MB pool (shared) or the queue's own 1 MB (per-queue) -- plus a step of
    headroom per ingress, nothing is dropped and the port sends every step."""
    topo = parse_topo("star,hosts=3", "paper")
    buf, qi = topo.scale.buffer_bytes, None
    base = 10_000_000 if buffer == "shared" else buf
    runs = {}
    for pfc in (False, True):
        eng = Engine(topo, _bulk(["h1", "h2"], "h3", 1.0), _cfg(pfc, buffer))
        qi = eng.fabric.port(("s1", 3))
        per_step = eng._serve[qi]
        depth = []
        for i in range(3000):
            tx0 = eng.counters.tx[qi]
            eng.step()
            depth.append(float(eng.b.sum()))
            if i > 2:
                assert eng.counters.tx[qi] - tx0 == pytest.approx(per_step)
        runs[pfc] = (eng, max(depth[1000:]))
    eng, top = runs[False]
    assert eng.counters.drops.sum() > 0 and top == pytest.approx(buf)
    eng, top = runs[True]
    assert eng.counters.drops.sum() == 0 and eng.lost.sum() == 0
    assert 0.2 * base <= top <= 0.2 * base + 3 * per_step
    assert eng.pfc is not None
    _, hosts = eng.pfc.pause_seconds(eng.dt)
    assert hosts[0] > 0 and hosts[1] > 0 and hosts[2] == 0  # h3 only receives


@pytest.mark.parametrize(("buffer", "steps"), [("shared", 20000), ("per-queue", 3000)])
def test_a_pause_spreads_upstream_without_losses(buffer: str, steps: int) -> None:
    """Three hosts of leaf 1 and two of leaf 2 send at line rate to a host of leaf 2:
    leaf 2 pauses the spine, whose queue toward leaf 2 fills and pauses leaf 1's uplink,
    whose queue pauses leaf 1's hosts.  Nothing is dropped anywhere.  (The shared pools
    take ten times longer to fill.)"""
    topo = parse_topo("leafspine,spines=1,leaves=2,hosts=3", "paper")
    hosts = [h.name for h in topo.hosts]
    leaf = {h.name: h.switch for h in topo.hosts}
    far = [h for h in hosts if leaf[h] == leaf[hosts[0]]]
    near = [h for h in hosts if leaf[h] != leaf[hosts[0]]]
    eng = Engine(topo, _bulk(far + near[1:], near[0], 1.0), _cfg(True, buffer))
    eng.run(steps * eng.dt)
    assert eng.counters.drops.sum() == 0
    assert eng.pfc is not None
    queues, nics = eng.pfc.pause_seconds(eng.dt)
    paused = {eng.fabric.keys[j][0] for j in np.flatnonzero(queues > 0)}
    spine = next(s.name for s in topo.switches if s.name not in leaf.values())
    assert spine in paused and leaf[far[0]] in paused  # the spine and leaf 1's uplink
    assert all(nics[eng.fabric.host_index[h]] > 0 for h in far)
    # the bottleneck still sends at line rate
    j = next(j for j, k in enumerate(eng.fabric.keys)
             if eng.fabric._peer[k] == near[0])
    assert eng.counters.tx[j] == pytest.approx(eng._serve[j] * eng.steps, rel=0.01)


def test_decide_is_the_dynamic_threshold_per_ingress_and_egress() -> None:
    fab = Fabric(parse_topo("star,hosts=3", "paper"))
    pfc = Pfc(fab, alpha=0.5)
    j = fab.port(("s1", 3))
    path = np.array([[j], [j]])
    src = np.array([0, 1])
    buf = fab.buffer_bytes
    depth = np.zeros(fab.n_ports + 1)
    depth[j] = 600.0 + 300.0
    # free = buf - 900; h1 holds 600, h2 300: only an ingress at alpha·free pauses
    free = buf[j] - 900.0
    b = np.array([[600.0], [300.0]])
    small = buf.copy()
    small[j] = 900.0 + 600.0 / 0.5  # h1's 600 = alpha·free exactly
    got = pfc.decide(b, path, src, depth, small)
    assert got[fab.n_ports + 1] and not got[fab.n_ports + 2] and not got[fab.n_ports + 3]
    assert not pfc.decide(b, path, src, depth, buf).any() and free > 1200
    assert list(pfc.serve(np.ones(fab.n_ports + 1))) == [1.0] * (fab.n_ports + 1)


def test_shared_decide_sums_an_ingress_over_its_switch_and_its_pool() -> None:
    """The shared model: an ingress's bytes over every egress queue of its switch
    against alpha x (pool - the switch's bytes).  A host holding 500 KB in one queue
    is paused by the per-queue rule (1/8 of that queue's free 500 KB) but not by a
    10 MB pool's; its 300 KB + 300 KB in two queues add up."""
    fab = Fabric(parse_topo("star,hosts=3", "paper"))
    j, k = fab.port(("s1", 3)), fab.port(("s1", 2))
    depth = np.zeros(fab.n_ports + 1)
    h1 = fab.n_ports + 1
    shared, per_queue = Pfc(fab, 0.125, pool=10e6), Pfc(fab, 0.125)
    b = np.array([[500e3]])
    depth[j] = 500e3
    args = (np.array([[j]]), np.array([0]), depth, fab.buffer_bytes)
    assert per_queue.decide(b, *args)[h1]
    assert not shared.decide(b, *args).any()
    # two queues, 300 KB each from h1; the switch holds 8.6 MB in all: free 1.4 MB,
    # alpha·free = 175 KB < 600 KB -> paused; with 6.6 MB held, 425 KB < 600 KB -> paused;
    # with 4 MB held, 750 KB > 600 KB -> not paused
    b2 = np.array([[300e3], [300e3]])
    path2, src2 = np.array([[j], [k]]), np.array([0, 0])
    for other, paused in ((8.0e6, True), (6.0e6, True), (3.4e6, False)):
        d = np.zeros(fab.n_ports + 1)
        d[j], d[k] = 300e3 + other, 300e3
        got = shared.decide(b2, path2, src2, d, fab.buffer_bytes)
        assert bool(got[h1]) == paused and not got[h1 + 1] and not got[h1 + 2]


def test_the_shared_pool_raises_the_queue_limit() -> None:
    """With the shared model a lossless queue is bounded by its switch's pool, not by
    the per-queue buffer of the lossy fabric."""
    topo = parse_topo("star,hosts=3", "paper")
    shared = Engine(topo, _bulk(["h1"], "h3", 1.0), _cfg(True, "shared"))
    per_queue = Engine(topo, _bulk(["h1"], "h3", 1.0), _cfg(True, "per-queue"))
    lossy = Engine(topo, _bulk(["h1"], "h3", 1.0), _cfg(False))
    assert set(shared.fabric.buffer_bytes[:-1]) == {10e6}
    assert set(per_queue.fabric.buffer_bytes[:-1]) == {topo.scale.buffer_bytes}
    assert set(lossy.fabric.buffer_bytes[:-1]) == {topo.scale.buffer_bytes}


@pytest.mark.parametrize(("buffer", "pool"), [("both", 1e6), ("shared", 0),
                                              ("shared", float("inf")), ("shared", True)])
def test_bad_buffer_is_refused(buffer: str, pool: object) -> None:
    with pytest.raises(ConfigError, match=r"PFC (buffer|pool_bytes)"):
        SimConfig(pfc=True, pfc_buffer=buffer, pfc_pool_bytes=pool)  # type: ignore[arg-type]


@pytest.mark.parametrize("alpha", [0, -1, 17, float("nan"), "x"])
def test_bad_alpha_is_refused(alpha: object) -> None:
    with pytest.raises(ConfigError, match="PFC alpha"):
        SimConfig(pfc=True, pfc_alpha=alpha)  # type: ignore[arg-type]


# -------------------------------------------------------------------- the spec's `pfc`

SPEC: dict[str, object] = {
    "name": "pfc", "backend": "sim", "topology": "star,hosts=4", "duration_s": 0.2,
    "interval_s": 0.05, "agents": ["secn2"], "host_cc": "fixed",
    "workloads": [{"type": "incast", "receiver": "h4", "senders": [3, 3],
                   "sizes": [400_000], "load": 0.9}],
}


def _quiet(label: str, duration: float) -> Callable[[float], None]:
    return lambda t: None


SHARED = {"buffer": "shared", "pool_bytes": 10e6}


@pytest.mark.parametrize(("raw", "resolved_pfc"), [
    (True, {"alpha": 0.125, **SHARED}), ({"alpha": 0.25}, {"alpha": 0.25, **SHARED}),
    ({}, {"alpha": 0.125, **SHARED}), (False, None), (None, None),
    ({"buffer": "per-queue"}, {"alpha": 0.125, "buffer": "per-queue"}),
    ({"pool_bytes": 4e6}, {"alpha": 0.125, "buffer": "shared", "pool_bytes": 4e6})])
def test_spec_pfc_values(raw: object, resolved_pfc: dict[str, object] | None) -> None:
    spec = parse_spec({**SPEC, "pfc": raw})
    assert spec.pfc_alpha == (None if resolved_pfc is None else resolved_pfc["alpha"])
    resolved = resolve(spec)
    assert resolved.get("pfc") == resolved_pfc
    for key in ("pfc_alpha", "pfc_buffer", "pfc_pool_bytes"):
        assert key not in resolved  # (no key when off: older resolved specs match)


@pytest.mark.parametrize(("raw", "where"), [({"alpha": 0}, "pfc.alpha"), (3, "pfc"),
                                            ({"beta": 1}, "pfc"), ("yes", "pfc"),
                                            ({"buffer": "perqueue"}, "pfc.buffer"),
                                            ({"pool_bytes": -1}, "pfc.pool_bytes")])
def test_spec_bad_pfc_names_the_field(raw: object, where: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{re.escape(where)}\b"):
        parse_spec({**SPEC, "pfc": raw})


def test_bmv2_refuses_pfc() -> None:
    spec = parse_spec({**SPEC, "backend": "bmv2", "scale": "testbed", "pfc": True})
    with pytest.raises(ConfigError, match="BMv2 has no PFC"):
        check_spec(spec, within_budget=False)


def test_a_lossless_run_records_its_pauses(tmp_path: Path) -> None:
    """The same incast with and without ``pfc``: drops without, none with, and the run
    writes pfc.csv with the paused senders."""
    drops = {}
    for pfc in (False, True):
        spec = parse_spec({**SPEC, "pfc": pfc})
        path = run_spec(spec, SimBackend(), out=tmp_path / str(pfc), progress=_quiet)[0]
        run = open_run(path)
        drops[pfc] = float(run.telemetry["drops_pkts"].sum())
        assert (path / "pfc.csv").is_file() == pfc
    assert drops[False] > 0 and drops[True] == 0
    paused = pd.read_csv(tmp_path / "True" / "secn2" / "pfc.csv").set_index("node")
    assert paused.loc[["h1", "h2", "h3"], "paused_s"].gt(0).any()
    assert paused.loc["h4", "paused_s"] == 0
    got = summary(open_run(tmp_path / "True" / "secn2"))
    assert got["pfc_host_pause_s"] == pytest.approx(paused.loc[paused.kind == "host",
                                                               "paused_s"].sum())
    assert got["pfc_pause_s"] == 0  # one switch: only the hosts are paused
    assert "pfc_pause_s" not in summary(open_run(tmp_path / "False" / "secn2"))
