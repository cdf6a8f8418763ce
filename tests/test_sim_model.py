"""Simulator model on hand cases: queue, marking, tail drop, delays, ECMP, link failures."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from p4cc.analysis.metrics import HEADER_BYTES, ideal_fct, slowdown
from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.routes import compute_routes
from p4cc.errors import ConfigError
from p4cc.sim.config import SimConfig
from p4cc.sim.engine import Engine
from p4cc.sim.fabric import Fabric, shortest_next_hops
from p4cc.topo.spec import parse_topo


def _sched(pairs: list[tuple[str, str]], size: int = 0, start: float = 0.0) -> pd.DataFrame:
    return pd.DataFrame({"flow_id": np.arange(len(pairs)), "start_s": start,
                         "src": [p[0] for p in pairs], "dst": [p[1] for p in pairs],
                         "size_bytes": size})


def _line(**kw: object) -> SimConfig:
    return SimConfig(cc="line", host_traces=False, **kw)  # type: ignore[arg-type]


def test_mark_probability_matches_ecnconfig() -> None:
    topo = parse_topo("star,hosts=3", "paper")
    fab = Fabric(topo)
    cfg = EcnConfig(30_000, 270_000, 0.1)
    key = fab.keys[0]
    fab.set_ecn(key, cfg)
    pkt = topo.scale.pkt_bytes
    depths = np.arange(0, 400) * 1000.0
    q = np.zeros((len(depths), fab.n_ports + 1))
    q[:, 0] = depths
    got = np.array([fab.mark_probability(row)[0] for row in q])
    want = np.array([cfg.marking_probability(d / pkt, pkt) for d in depths])
    np.testing.assert_allclose(got, want, atol=1e-12)
    # marking off on the other queues
    assert np.all(fab.mark_probability(np.full(fab.n_ports + 1, 1e6))[1:] == 0)


@pytest.mark.parametrize("mark_depth", ["enqueue", "departure"])
def test_queue_growth_marking_and_tail_drop(mark_depth: str) -> None:
    topo = parse_topo("star,hosts=3", "paper")
    cfg = EcnConfig(20_000, 200_000, 0.5)
    # (selective resending: its conservation law is checked below; go-back-N's receivers
    # discard bytes, tests/test_sim_gobackn.py)
    eng = Engine(topo, _sched([("h1", "h3"), ("h2", "h3")]),
                 _line(telemetry_interval_s=1.0, loss_recovery="selective",
                       mark_depth=mark_depth), ecn=cfg)
    per_step = topo.scale.link_rate_bps * eng.dt / 8  # bytes each host sends per step
    buf = topo.scale.buffer_bytes
    qi = eng.fabric.port(("s1", 3))
    qs = []
    fifo: list[list[float]] = []  # the queue's bytes as [bytes, depth they found], in order
    for _ in range(400):
        q0 = float(eng.b.sum())
        tx0, txm0, dr0 = (eng.counters.tx[qi], eng.counters.txm[qi], eng.counters.drops[qi])
        eng.step()
        tx, txm = eng.counters.tx[qi] - tx0, eng.counters.txm[qi] - txm0
        # 2 line-rate senders into one line-rate port: the queue grows by one host's
        # bytes per step until the buffer, then the excess is tail-dropped
        assert tx == pytest.approx(per_step)
        drops = eng.counters.drops[qi] - dr0
        assert drops == pytest.approx(max(0.0, q0 + per_step - buf), abs=1e-6)
        # the depth this step's departures are marked by: at departure, the depth now;
        # at enqueue (BMv2's enq_qdepth), the depth their first byte found on arrival
        head = fifo[0][1] if fifo and mark_depth == "enqueue" else q0
        fifo.append([2 * per_step - drops, q0])
        left = per_step
        while left > 1e-9:
            take = min(left, fifo[0][0])
            fifo[0][0] -= take
            left -= take
            if fifo[0][0] <= 1e-9:
                fifo.pop(0)
        want_p = cfg.marking_probability(head / topo.scale.pkt_bytes, topo.scale.pkt_bytes)
        assert txm / tx == pytest.approx(want_p, abs=1e-12)
        qs.append(float(eng.b.sum()))
    assert max(qs) == pytest.approx(buf)
    assert qs[0] == pytest.approx(per_step)
    # conservation: sent = delivered + queued + lost (lost bytes are sent again later)
    assert eng.sent.sum() == pytest.approx(eng.delivered.sum() + eng.b.sum()
                                           + eng.prev_dep.sum() + eng.lost.sum())
    assert eng.lost.sum() > 0


def _wire(size: int, pkt_bytes: int) -> int:
    """Payload + HEADER_BYTES per packet: what the flow puts on the wire."""
    return size + max(1, math.ceil(size / (pkt_bytes - HEADER_BYTES))) * HEADER_BYTES


@pytest.mark.parametrize("topo_text,src,dst,hops", [
    ("star,hosts=3", "h1", "h2", 1),
    ("leafspine,spines=2,leaves=2,hosts=2", "h1", "h3", 3),
])
def test_fct_of_a_lone_flow_is_wire_size_over_rate_plus_rtt(topo_text: str, src: str, dst: str,
                                                            hops: int) -> None:
    """FCT ends when the final ACK is back at the sender (as p4cc.hostcc times it)."""
    topo = parse_topo(topo_text, "paper")
    size = 200_000
    eng = Engine(topo, _sched([(src, dst)], size), _line())
    assert eng.run_to_completion(1.0)
    fr = eng.flow_records()
    wire = _wire(size, topo.scale.pkt_bytes)
    want = wire * 8 / topo.scale.link_rate_bps + topo.scale.base_rtt_s
    assert fr.fct_s[0] == pytest.approx(want, rel=1e-9)
    assert fr.bytes_delivered[0] == size and fr.base_rtt_s[0] == topo.scale.base_rtt_s
    # the CNP/loss loop: hop pipeline + lumped delay = one base RTT
    slot = 0
    assert eng.last_hop[slot] + 1 == hops
    assert hops - 1 + eng.dsteps[slot] == round(topo.scale.base_rtt_s / eng.dt)


@pytest.mark.parametrize("size,start", [(100, 0.0), (946, 0.3e-6), (3_000, 0.7e-6),
                                        (40_000, 2.25e-6)])
def test_lone_small_flow_has_slowdown_one(size: int, start: float) -> None:
    """HPCC slowdown (p4cc.analysis.metrics) of a lone flow is 1 before clipping, also for
    flows starting inside a step and shorter than one step."""
    topo = parse_topo("leafspine,spines=2,leaves=2,hosts=2", "paper")
    eng = Engine(topo, _sched([("h1", "h3")], size, start), _line())
    assert eng.run_to_completion(1.0)
    fr = eng.flow_records()
    sc = topo.scale
    ideal = ideal_fct(fr.size_bytes.to_numpy(), sc.link_rate_bps, fr.base_rtt_s.to_numpy(),
                      sc.pkt_bytes)
    assert fr.start_s[0] == pytest.approx(start)
    assert fr.fct_s[0] / ideal[0] == pytest.approx(1.0, rel=1e-9)
    assert slowdown(fr, sc.link_rate_bps, sc.base_rtt_s, sc.pkt_bytes)[0] == pytest.approx(1.0)


def test_fct_includes_reverse_path_queueing() -> None:
    """The final ACK waits behind the data queued toward the sender."""
    topo = parse_topo("star,hosts=3", "paper")
    sched = pd.DataFrame({"flow_id": [0, 1], "start_s": [0.0, 20e-6], "src": ["h3", "h1"],
                          "dst": ["h1", "h2"], "size_bytes": [0, 20_000],
                          "stop_s": [60e-6, math.nan]})
    eng = Engine(topo, sched, _line())
    alone = Engine(topo, sched.iloc[[1]], _line())
    assert eng.run_to_completion(1.0) and alone.run_to_completion(1.0)
    with_q = eng.flow_records().set_index("flow_id").fct_s[1]
    assert with_q == pytest.approx(alone.flow_records().fct_s[0])  # h3 -> h1 alone: no queue
    # now congest the reverse path h2 -> h1 (ACKs of flow 1 go s1 -> h1) with 2 senders
    sched2 = pd.concat([sched, pd.DataFrame({"flow_id": [2], "start_s": [0.0], "src": ["h2"],
                                             "dst": ["h1"], "size_bytes": [0],
                                             "stop_s": [60e-6]})], ignore_index=True)
    eng2 = Engine(topo, sched2, _line())
    assert eng2.run_to_completion(1.0)
    q_fct = eng2.flow_records().set_index("flow_id").fct_s[1]
    assert q_fct > with_q + 5e-6  # ~20 us of queue at s1 port 1 by then


def test_rtt_sample_is_base_rtt_plus_queueing() -> None:
    topo = parse_topo("star,hosts=3", "paper")
    eng = Engine(topo, _sched([("h1", "h3"), ("h2", "h3")]),
                 _line(rtt_probe_interval_s=1e-3, rtt_probes=True))
    base = topo.scale.base_rtt_s
    eng.run(50 * eng.dt)
    # the probe sent in the first step saw an empty queue: RTT = base RTT exactly
    assert eng.rtt_last[0] == pytest.approx(base)
    eng.run(1e-3 + 2 * eng.dt)  # the second probe saw the queue built since
    q_at_probe = topo.scale.link_rate_bps * eng.dt / 8 * round(1e-3 / eng.dt)
    eng.run(eng.t + base + q_at_probe * 8 / topo.scale.link_rate_bps + 2 * eng.dt)
    want = base + min(q_at_probe, topo.scale.buffer_bytes) * 8 / topo.scale.link_rate_bps
    assert eng.rtt_last[0] == pytest.approx(want, rel=0.01)


def test_ecmp_spreads_flows_and_matches_routes() -> None:
    topo = parse_topo("leafspine,spines=4,leaves=2,hosts=4", "paper")
    fab = Fabric(topo)
    uplinks = [fab.path("h1", "h5", fid)[0] for fid in range(4000)]  # type: ignore[index]
    counts = np.bincount(uplinks)[np.unique(uplinks)]
    assert len(counts) == 4
    assert counts.min() > 850 and counts.max() < 1150
    # the same next-hop sets as the control plane installs
    routes = compute_routes(topo)
    ours = shortest_next_hops(topo)
    for sw, table in ours.items():
        for h in topo.hosts:
            r = routes[sw].lookup(h.ip)
            ports = ((r.nhop.port,) if r.nhop else
                     tuple(m.port for m in routes[sw].group(r.group).members))  # type: ignore[arg-type]
            assert table[h.name] == tuple(sorted(ports))


def test_link_failure_reroutes_and_stalls() -> None:
    topo = parse_topo("leafspine,spines=2,leaves=2,hosts=2", "paper")
    pairs = [("h1", "h3"), ("h2", "h4"), ("h1", "h4"), ("h2", "h3")] * 4
    sched = _sched(pairs, 500_000)
    eng = Engine(topo, sched, _line())
    eng.step()
    dead = eng.fabric.port(("leaf1", 3))  # leaf1 -> spine1
    assert (eng.path[eng.active] == dead).any()
    eng.set_link("leaf1", "spine1", up=False)
    assert not (eng.path[eng.active] == dead).any()
    # both uplinks of leaf1 down: leaf1's flows stall without progress
    eng.set_link("leaf1", "spine2", up=False)
    assert eng.stalled[eng.active].all()
    before = eng.delivered.copy()
    eng.run(eng.t + 50e-6)
    assert np.all(eng.delivered[eng.active] - before[eng.active] < 1e-9)
    eng.set_link("leaf1", "spine2", up=True)
    assert not eng.stalled[eng.active].any()
    assert eng.run_to_completion(1.0)
    fr = eng.flow_records()
    assert fr.completed.all()
    assert (fr.bytes_delivered >= 500_000 - 1e-6).all()


def test_link_events_table_is_played() -> None:
    topo = parse_topo("leafspine,spines=2,leaves=2,hosts=2", "paper")
    ev = pd.DataFrame({"t_s": [10e-6, 40e-6], "action": ["down", "up"],
                       "a": ["leaf1", "leaf1"], "b": ["spine1", "spine1"]})
    eng = Engine(topo, _sched([("h1", "h3")] * 8, 100_000), _line(), link_events=ev)
    dead = eng.fabric.port(("leaf1", 3))
    eng.run(20e-6)
    assert not (eng.path == dead).any()
    assert eng.run_to_completion(1.0)


def test_after_dependency_and_bulk_stop() -> None:
    topo = parse_topo("star,hosts=3", "paper")
    sched = pd.DataFrame({"flow_id": [0, 1, 2], "start_s": [0.0, 0.0, 0.0],
                          "src": ["h1", "h1", "h2"], "dst": ["h2", "h2", "h3"],
                          "size_bytes": [100_000, 100_000, 0], "after": [-1, 0, -1],
                          "stop_s": [math.nan, math.nan, 50e-6]})
    eng = Engine(topo, sched, _line())
    assert eng.run_to_completion(1.0)
    fr = eng.flow_records().set_index("flow_id")
    assert fr.start_s[1] >= fr.end_s[0] - 1e-12
    payload = (topo.scale.pkt_bytes - HEADER_BYTES) / topo.scale.pkt_bytes
    assert fr.bytes_delivered[2] == pytest.approx(
        topo.scale.link_rate_bps * 50e-6 / 8 * payload, rel=0.05)


def test_telemetry_counts_senders_flows_and_elephants() -> None:
    topo = parse_topo("star,hosts=5", "paper")
    pairs = [("h1", "h5"), ("h1", "h5"), ("h2", "h5"), ("h3", "h5"), ("h3", "h5"), ("h4", "h1")]
    sched = _sched(pairs, 0)
    sched.loc[5, "size_bytes"] = 2_000  # a short flow that ends inside the interval
    cfg = _line(telemetry_interval_s=100e-6, elephant_bytes=50_000)
    eng = Engine(topo, sched, cfg)
    eng.run(100e-6)
    recs = {r.key: r for r in eng.telemetry}
    to_h5, to_h1 = recs[("s1", 5)], recs[("s1", 1)]
    assert (to_h5.incast_degree, to_h5.active_flows) == (3, 5)
    # each of the 5 flows sent 25 Gb/s x 100 us / 8 = 312.5 KB > 50 KB: all elephants
    assert to_h5.elephant_flows == 5
    assert (to_h1.incast_degree, to_h1.active_flows, to_h1.elephant_flows) == (1, 1, 0)
    assert to_h5.utilization == pytest.approx(1.0, abs=0.02)
    assert to_h5.tx_pkts == pytest.approx(topo.scale.link_rate_bps * 100e-6 / 8 / 1000, abs=2)
    assert to_h5.qlen_max_bytes == pytest.approx(topo.scale.buffer_bytes)
    assert to_h5.drops_pkts > 0


def test_rlcc_policy_names_resolve_like_the_host() -> None:
    """`rlcc:pi-lstm` etc. name the shipped policies in the simulator too, not file paths."""
    from p4cc.hostcc import rlcc_policies, rlcc_trees
    from p4cc.scale import get_scale
    from p4cc.sim.cc import make_hook

    scale = get_scale("testbed")
    for name, kind in (("pi-lstm", rlcc_policies.LstmPolicy),
                       ("pi-mlp", rlcc_policies.MlpPolicy), ("pi-trees", rlcc_trees.TreePolicy),
                       ("pi", rlcc_policies.ReferencePolicy),
                       ("adpg-mlp-long", rlcc_policies.MlpPolicy)):
        hook: Any = make_hook("rlcc", scale, name)  # (an RlccHook: it has a policy)
        assert isinstance(hook.policy, kind)


@pytest.mark.parametrize("tail", ["fifo", "fluid"])
def test_a_mouse_behind_a_standing_queue_leaves_when_a_fifo_would(tail: str) -> None:
    """Two line-rate flows into h4's port build a queue of rate·t (both stop at 40 µs);
    a 3 KB mouse from h3 at t_a = 20 µs waits behind q_a = rate·t_a and the two flows'
    bytes that arrive with it: FIFO FCT ≈ (q_a + 3·wire)·8/rate + base RTT.  Proportional
    service alone (``queue_tail="fluid"``) keeps the mouse's last bytes until the queue
    has drained (p4cc.sim.fifo_tail): more than twice that."""
    topo = parse_topo("star,hosts=4", "paper")
    sc, t_a, size = topo.scale, 20e-6, 3000
    sched = pd.DataFrame({"flow_id": [0, 1, 2], "start_s": [0.0, 0.0, t_a],
                          "src": ["h1", "h2", "h3"], "dst": ["h4"] * 3,
                          "size_bytes": [0, 0, size], "stop_s": [40e-6, 40e-6, math.nan]})
    eng = Engine(topo, sched, _line(queue_tail=tail))
    assert eng.run_to_completion(1.0)
    fct = float(eng.flow_records().set_index("flow_id").fct_s[2])
    wire = size + math.ceil(size / (sc.pkt_bytes - HEADER_BYTES)) * HEADER_BYTES
    fifo = (sc.link_rate_bps / 8 * t_a + 3 * wire) * 8 / sc.link_rate_bps + sc.base_rtt_s
    if tail == "fifo":
        assert fct == pytest.approx(fifo, abs=4 * eng.dt)  # step quantisation
    else:
        assert fct > 2 * fifo


def test_mark_depth_option_is_checked() -> None:
    with pytest.raises(ConfigError, match="mark_depth must be one of enqueue, departure"):
        SimConfig(mark_depth="dequeue")


def test_mark_history_rows_cover_the_drain_time_within_a_cap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import p4cc.sim.engine as engine_mod

    topo = parse_topo("star,hosts=3", "paper")
    eng = Engine(topo, _sched([("h1", "h3")]), _line())
    drain = topo.scale.buffer_bytes / (topo.scale.link_rate_bps * eng.dt / 8)
    assert eng._marks[0].shape == (math.ceil(drain) + 2, eng.fabric.n_ports + 1)
    assert Engine(topo, _sched([("h1", "h3")]), _line(mark_depth="departure")
                  )._marks[0].shape[0] == 0
    monkeypatch.setattr(engine_mod, "MARK_HISTORY_CELLS", 10 * (eng.fabric.n_ports + 1))
    assert Engine(topo, _sched([("h1", "h3")]), _line())._marks[0].shape[0] == 10


def test_queue_tail_option_is_checked() -> None:
    with pytest.raises(ConfigError, match="queue_tail"):
        SimConfig(queue_tail="lifo")


def test_fifo_tail_clock_does_not_drift_over_busy_periods() -> None:
    """The scenario above, repeated: every 200 µs two line-rate flows build a queue for
    40 µs and a 3 KB mouse arrives behind it 20 µs in.  A FIFO serves every mouse alike.
    The tail release must count the bytes it moves as sent by that queue: without that,
    each release left its bytes in the queue's arrivals-minus-departures forever, and
    every later mouse waited for bytes that had long left (session 18: mice 2-3x slower
    than BMv2's late in the default experiment)."""
    topo = parse_topo("star,hosts=4", "paper")
    phases, period, t_a, size = 20, 200e-6, 20e-6, 3000
    rows = []
    for p in range(phases):
        t0 = p * period
        rows += [(3 * p, t0, "h1", 0, t0 + 40e-6), (3 * p + 1, t0, "h2", 0, t0 + 40e-6),
                 (3 * p + 2, t0 + t_a, "h3", size, math.nan)]
    sched = pd.DataFrame(rows, columns=["flow_id", "start_s", "src", "size_bytes", "stop_s"])
    sched["dst"] = "h4"
    eng = Engine(topo, sched, _line(queue_tail="fifo"))
    assert eng.run_to_completion(1.0)
    fct = eng.flow_records().set_index("flow_id").fct_s
    mice = np.array([float(fct[3 * p + 2]) for p in range(phases)])
    assert np.all(np.isfinite(mice))
    assert mice.max() - mice.min() <= 4 * eng.dt, mice  # the same wait in every period


def test_fifo_tail_release_does_not_serve_above_the_link_rate() -> None:
    """Two line-rate flows keep h4's port busy for 400 µs while 20 mice from h3 arrive
    behind them.  Releasing each mouse's tail when a FIFO would have sent it is service
    on top of the step's; the queue pays it back from its next steps (p4cc.sim.fifo_tail
    ``charge``), so over any window the port sends at most its rate plus one mouse.
    Without the pay-back it sent 29.5 KB (ten mice) more than its rate allows here
    (session 21: 6.06 Mb/s in a 0.25 s interval of a 5 Mb/s port on the default
    experiment)."""
    topo = parse_topo("star,hosts=4", "paper")
    size, n = 3000, 20
    rows = [(0, 0.0, "h1", 0, 400e-6), (1, 0.0, "h2", 0, 400e-6)]
    rows += [(2 + i, 10e-6 + 15e-6 * i, "h3", size, math.nan) for i in range(n)]
    sched = pd.DataFrame(rows, columns=["flow_id", "start_s", "src", "size_bytes", "stop_s"])
    sched["dst"] = "h4"
    eng = Engine(topo, sched, _line(queue_tail="fifo"))
    fab = eng.fabric
    h4 = topo.host("h4")
    q = fab.index[(h4.switch, h4.switch_port)]
    assert eng._fifo is not None
    sent = [0.0]
    while eng.t < 2e-3:
        eng.step()
        sent.append(float(eng._fifo.dq[q]))
    c = np.asarray(sent) - eng._serve[q] * np.arange(len(sent))  # sent minus the link's
    excess = float(np.max(c - np.minimum.accumulate(c)))  # worst window
    assert excess <= size
    fct = eng.flow_records().set_index("flow_id").fct_s
    assert all(np.isfinite(float(fct[2 + i])) for i in range(n))
