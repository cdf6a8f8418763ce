"""The emulated fabric for real: Mininet + BMv2 + the control plane (root needed).

Star incast h1..h4 -> h5: BMv2's egress queue toward h5 (not the veth) is the
bottleneck, it fills, marks appear and stay bounded by the configured depth; a new
EcnConfig shows in the next poll interval; teardown leaves no process or interface.
The control plane is the fabric's FabricSession (its loops poll; no agent).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from p4cc.controlplane.ecn import EcnConfig, static_setting
from p4cc.controlplane.records import PortTelemetry
from p4cc.topo.build import P4_JSON, P4INFO, Fabric, FabricOptions
from p4cc.topo.spec import TopoSpec, parse_topo

pytestmark = [pytest.mark.mininet, pytest.mark.bmv2, pytest.mark.root, pytest.mark.slow]


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs)"
    for tool in ("simple_switch_grpc", "mnexec", "iperf3", "ethtool"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (see `p4cc doctor`)"
    if importlib.util.find_spec("mininet") is None:
        return "Mininet's Python module is not importable (apt-get install mininet)"
    if not (P4_JSON.is_file() and P4INFO.is_file()):
        return "compiled P4 program missing in p4cc/data/p4 (run `make p4`)"
    try:
        from p4cc.controlplane.thrift import load_runtime_modules

        load_runtime_modules()
    except Exception as exc:
        return f"BMv2 Thrift runtime modules missing: {exc}"
    return None


_REASON = _skip_reason()
if _REASON:
    pytest.skip(_REASON, allow_module_level=True)

from iperf_incast import Incast  # noqa: E402

from p4cc.experiment.incast import incast_plan  # noqa: E402
from p4cc.experiment.session import FabricSession, SessionConfig  # noqa: E402

INTERVAL = 0.5


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fabric, FabricSession]]:
    topo = parse_topo("star,hosts=5")
    out = tmp_path_factory.mktemp("fabric")
    fab = Fabric(topo, FabricOptions(out_dir=out, auto_ports=True))
    fab.start()
    ctl = FabricSession.for_fabric(fab, SessionConfig(interval_s=INTERVAL))
    try:
        ctl.start()
        yield fab, ctl
    finally:
        ctl.stop()
        fab.stop()


def _bottleneck(topo: TopoSpec) -> tuple[str, int]:
    h = topo.hosts[-1]
    return h.switch, h.switch_port


def _records_after(ctl: FabricSession, key: tuple[str, int], t: float,
                   count: int, timeout_s: float = 10.0) -> list[PortTelemetry]:
    """The first ``count`` records of ``key`` whose interval started at or after ``t``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = [r for r in ctl.records_between(t, 1e9)
               if r.key == key and r.t_s - r.interval_s >= t - 1e-3]
        if len(got) >= count:
            return got[:count]
        ctl.check()
        time.sleep(INTERVAL / 5)  # poll interval of the condition
    raise AssertionError(f"no {count} telemetry records for {key} within {timeout_s} s")


def test_incast_fills_bmv2_queue_and_marks(fabric: tuple[Fabric, FabricSession]) -> None:
    fab, ctl = fabric
    topo = fab.topo
    secn1 = static_setting("SECN1", topo.scale)
    ctl.set_ecn_all(secn1)
    rx, senders, rate, payload = incast_plan(topo, topo.scale, 1.5)
    key = _bottleneck(topo)
    incast = Incast(fab, rx, senders, rate, payload, duration_s=8)
    try:
        incast.start()
        t = ctl.now() + 1.0  # skip the ramp-up
        recs = _records_after(ctl, key, t, 4)
        veth = subprocess.run(["tc", "-s", "qdisc", "show", "dev", f"{key[0]}-eth{key[1]}"],
                              capture_output=True, text=True).stdout
    finally:
        incast.stop()
    link = topo.link_at(*key)
    depth_bytes = link.queue_pkts * topo.scale.pkt_bytes
    q_avg = sum(r.qlen_avg_bytes for r in recs) / len(recs)
    tx = sum(r.tx_bps for r in recs) / len(recs)
    print(f"bottleneck {key}: q avg {q_avg:.0f} B, max {max(r.qlen_max_bytes for r in recs):.0f}"
          f" B, tx {tx / 1e6:.2f} Mb/s, marked {sum(r.tx_marked_pkts for r in recs)}"
          f"/{sum(r.tx_pkts for r in recs)} pkts, drops {sum(r.drops_pkts for r in recs)}")
    # BMv2's queue is the bottleneck: it runs at the link rate and holds the backlog
    assert 0.7 * link.rate_bps <= tx <= 1.15 * link.rate_bps
    assert q_avg > secn1.kmin_bytes
    assert all(r.qlen_max_bytes <= depth_bytes for r in recs)  # bounded by the depth
    assert sum(r.tx_marked_pkts for r in recs) > 0
    # ... and not the veth's (no shaping qdisc, nothing backlogged there)
    assert "htb" not in veth and "tbf" not in veth


def test_new_ecn_setting_shows_within_one_interval(fabric: tuple[Fabric, FabricSession]) -> None:
    fab, ctl = fabric
    topo = fab.topo
    key = _bottleneck(topo)
    rx, senders, rate, payload = incast_plan(topo, topo.scale, 1.5)
    incast = Incast(fab, rx, senders, rate, payload, duration_s=10)
    pkt = topo.scale.pkt_bytes
    try:
        incast.start()
        ctl.set_ecn(*key, EcnConfig(pkt, pkt, 1.0))  # mark everything queued >= 1 pkt
        t1 = ctl.now()
        all_marked = _records_after(ctl, key, t1, 1)[0]
        ctl.set_ecn(*key, None)  # marking off
        t2 = ctl.now()
        none_marked = _records_after(ctl, key, t2, 1)[0]
    finally:
        incast.stop()
    assert all_marked.tx_pkts > 0 and none_marked.tx_pkts > 0
    assert all_marked.tx_marked_pkts / all_marked.tx_pkts > 0.8
    assert none_marked.tx_marked_pkts == 0


def test_teardown_leaves_nothing(fabric: tuple[Fabric, FabricSession]) -> None:
    fab, ctl = fabric
    pids = [fab.bmv2(s.name).pid for s in fab.topo.switches]
    ctl.stop()
    fab.stop()
    assert fab.leftovers() == []
    for pid in pids:
        assert pid is not None and not Path(f"/proc/{pid}").exists()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    for name in ("s1-eth", "h1-eth"):
        assert name not in links
    fab.stop()  # idempotent
