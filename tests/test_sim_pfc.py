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


def _cfg(pfc: bool) -> SimConfig:
    return SimConfig(cc="line", host_traces=False, telemetry_interval_s=1.0, pfc=pfc)


def test_two_line_rate_senders_lose_nothing_and_the_port_stays_busy() -> None:
    """Two line-rate hosts into one line-rate port: without PFC the queue fills the
    buffer and drops; with it each ingress holds at most alpha·free of the queue, i.e.
    the queue stays near 2·alpha/(1 + 2·alpha) of the buffer (20 % at alpha 1/8) plus a
    step of headroom per ingress, nothing is dropped and the port sends every step."""
    topo = parse_topo("star,hosts=3", "paper")
    buf, qi = topo.scale.buffer_bytes, None
    runs = {}
    for pfc in (False, True):
        eng = Engine(topo, _bulk(["h1", "h2"], "h3", 1.0), _cfg(pfc))
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
    assert 0.2 * buf <= top <= 0.2 * buf + 3 * per_step
    assert eng.pfc is not None
    _, hosts = eng.pfc.pause_seconds(eng.dt)
    assert hosts[0] > 0 and hosts[1] > 0 and hosts[2] == 0  # h3 only receives


def test_a_pause_spreads_upstream_without_losses() -> None:
    """Three hosts of leaf 1 and two of leaf 2 send at line rate to a host of leaf 2:
    leaf 2 pauses the spine, whose queue toward leaf 2 fills and pauses leaf 1's uplink,
    whose queue pauses leaf 1's hosts.  Nothing is dropped anywhere."""
    topo = parse_topo("leafspine,spines=1,leaves=2,hosts=3", "paper")
    hosts = [h.name for h in topo.hosts]
    leaf = {h.name: h.switch for h in topo.hosts}
    far = [h for h in hosts if leaf[h] == leaf[hosts[0]]]
    near = [h for h in hosts if leaf[h] != leaf[hosts[0]]]
    eng = Engine(topo, _bulk(far + near[1:], near[0], 1.0), _cfg(True))
    eng.run(3000 * eng.dt)
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


@pytest.mark.parametrize(("raw", "alpha"), [(True, 0.125), ({"alpha": 0.25}, 0.25),
                                            ({}, 0.125), (False, None), (None, None)])
def test_spec_pfc_values(raw: object, alpha: float | None) -> None:
    spec = parse_spec({**SPEC, "pfc": raw})
    assert spec.pfc_alpha == alpha
    resolved = resolve(spec)
    assert resolved.get("pfc") == (None if alpha is None else {"alpha": alpha})
    assert "pfc_alpha" not in resolved  # (no key when off: older resolved specs match)


@pytest.mark.parametrize(("raw", "where"), [({"alpha": 0}, "pfc.alpha"), (3, "pfc"),
                                            ({"beta": 1}, "pfc"), ("yes", "pfc")])
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
