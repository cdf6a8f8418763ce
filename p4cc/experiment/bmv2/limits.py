"""What the BMv2 backend can play on two cores, checked before anything starts.

The limits are measured on the development machine (docs/emulation.md); ``check_spec``
raises ConfigError naming the feature and the backend, or ToolMissingError.
"""

from __future__ import annotations

import shutil

import pandas as pd

from p4cc.errors import ConfigError, ToolMissingError
from p4cc.experiment.spec import ExperimentSpec
from p4cc.hostcc.cc import userspace_cc_names
from p4cc.topo.spec import TopoSpec

#: Size limits on two cores.  Each switch is one simple_switch_grpc process (~30-60 %
#: of a core when its ports carry 10 Mb/s), each host with traffic one or two Python
#: processes (~10-20 % of a core each); beyond these the processes starve each other
#: and BMv2's queue rate stops being the bottleneck (measured: docs/emulation.md).
MAX_SWITCHES = 4
MAX_HOSTS = 10
#: BMv2 forwards ~10-20 kpps per switch on this machine without logging; 1000-byte
#: packets at 20 Mb/s are 2.5 kpps per port, so faster scales are refused.
MAX_LINK_RATE_BPS = 20e6
#: Each ControlLoop poll reads 3 counters (P4Runtime) and 7 registers (Thrift) and
#: resets them: ~10-30 ms per switch here; shorter intervals would overrun.
MIN_INTERVAL_S = 0.05
#: Host CC the p4cc hosts implement (p4cc.hostcc); kernel TCP only through iperf3 bulk.
HOST_CC = userspace_cc_names()  # what p4cc's userspace host transport runs
IPERF_BASE_PORT = 5301
STARTUP_TIMEOUT_S = 60.0
#: lead between the go file and t0, for the senders to see it
GO_LEAD_S = 0.5


def check_budget(spec: ExperimentSpec, seeds: tuple[int, ...] | None = None) -> None:
    """ConfigError if the traffic of any of ``seeds`` (default: every seed of the spec)
    needs more CPU than this machine has (p4cc.experiment.bmv2.budget).  Each seed draws
    its own schedule: one heavy draw of three (89 flows against 57-80) had made every
    agent's run of it unfaithful while the first seed's passed (docs/emulation.md)."""
    from p4cc.experiment.schedule import build_schedule

    topo = spec.topo()
    for seed in spec.seeds if seeds is None else seeds:
        schedule, _events = build_schedule(spec, seed, topo)
        try:
            check_schedule_budget(spec, topo, schedule)
        except ConfigError as exc:
            raise ConfigError(f"seed {seed}: {exc}") from None


def check_schedule_budget(spec: ExperimentSpec, topo: TopoSpec, schedule: pd.DataFrame) -> None:
    """The machine budget (p4cc.experiment.bmv2.budget) of one run's schedule."""
    from p4cc.experiment.bmv2 import budget

    budget.check(topo, schedule, float(spec.duration_s), float(spec.interval_s),
                 host_cc=spec.host_cc, probe_s=run_probe_s(spec.host_cc, topo, schedule),
                 int_watch=run_int_watch(spec, topo, schedule))


def run_int_watch(spec: ExperimentSpec, topo: TopoSpec, schedule: pd.DataFrame
                  ) -> dict[str, bool]:
    """The INT watch a run installs (source host -> with reports), for the budget."""
    from p4cc.experiment.bmv2 import int_watch

    plan = int_watch.spec_plan(spec.outputs, spec.host_cc, topo, schedule)
    return {w.host: w.report for w in plan}


def run_probe_s(host_cc: str, topo: TopoSpec, schedule: pd.DataFrame) -> float:
    """The RTT probe interval a run gives its hosts (``probe_interval_s`` of its sized
    flows' sources), for the machine budget."""
    scale = topo.scale
    sources = schedule.loc[schedule["cls"] != "bulk", "src"].nunique()
    return probe_interval_s(host_cc, sources, scale.pps(scale.link_rate_bps),
                            scale.base_rtt_s)


def check_spec(spec: ExperimentSpec, within_budget: bool = True) -> None:
    """ConfigError naming what BMv2 cannot honour; ToolMissingError for missing tools;
    with ``within_budget``, also the machine budget (check_budget)."""
    if spec.pfc_alpha is not None:
        raise ConfigError("pfc: priority flow control is modelled by the sim backend only "
                          "(BMv2 has no PFC: its queues tail-drop); remove 'pfc' from the "
                          "spec or use --backend sim")
    topo = spec.topo()
    if len(topo.switches) > MAX_SWITCHES or len(topo.hosts) > MAX_HOSTS:
        raise ConfigError(
            f"topology {spec.topology!r} has {len(topo.switches)} switches and "
            f"{len(topo.hosts)} hosts; the bmv2 backend runs at most {MAX_SWITCHES} switches "
            f"and {MAX_HOSTS} hosts (one BMv2 process per switch, Python senders per host, on "
            f"two cores): use a smaller topology, or --backend sim")
    rates = [lk.rate_bps for lk in topo.links]
    if max(rates) > MAX_LINK_RATE_BPS:
        raise ConfigError(
            f"scale {spec.scale!r} runs links at up to {max(rates) / 1e6:g} Mb/s; the bmv2 "
            f"backend supports at most {MAX_LINK_RATE_BPS / 1e6:g} Mb/s per link (BMv2 "
            f"software forwarding): use scale testbed, testbed-5m or testbed-fast, or "
            f"--backend sim")
    if spec.interval_s < MIN_INTERVAL_S:
        raise ConfigError(
            f"interval_s {spec.interval_s:g} s is shorter than the bmv2 backend's minimum "
            f"{MIN_INTERVAL_S:g} s (one telemetry poll per switch takes ~10-30 ms): raise it")
    cc = spec.host_cc.partition(":")[0]
    sized = [w for w in spec.workloads if w.type != "bulk"]
    if sized and cc not in HOST_CC:
        raise ConfigError(
            f"host_cc {spec.host_cc!r} is not available on the bmv2 backend's hosts: sized "
            f"flows run p4cc's userspace transport with {list(HOST_CC)}; kernel TCP is only "
            f"used for bulk workloads (iperf3)")
    from p4cc.experiment.doctor import bmv2_missing

    missing = bmv2_missing()
    if missing:
        raise ToolMissingError(
            "the bmv2 backend needs: " + "; ".join(f"{c.name} ({c.fix or c.detail})"
                                                   for c in missing)
            + " (`p4cc doctor` lists everything); or run with --backend sim")
    if any(w.type == "bulk" for w in spec.workloads):
        if shutil.which("iperf3") is None:
            raise ToolMissingError("bulk workloads on bmv2 need iperf3: apt-get install iperf3")
    if within_budget:
        check_budget(spec)
#: RTT probes (p4cc.hostcc: default every 4 x base RTT per flow) are small packets, but
#: BMv2's egress queue rate is in *packets*/s (REFERENCE §1), so each probe costs as
#: much of the bottleneck as a full data packet: four flows at 8 ms took 500 of the
#: 1250 pps of a 10 Mb/s port (measured: utilisation 0.65 with a full queue).  The
#: backend spaces probes so that all sources' probes stay within this fraction of one
#: host link's packet rate; DCQCN does not use RTT samples, so it probes rarely.
PROBE_PPS_BUDGET = 0.05
#: A flow is probed only after this long without an ACK RTT sample (p4cc.hostcc.
#: rtt_samples); DCQCN asks an ACK every 16 packets, so behind a standing queue (~50
#: pps per flow when a dozen share a 625 pps port) its flows went >100 ms without one
#: and probed: 12 % of the bottleneck's packets in the default experiment's busiest
#: intervals were 64-B probes (the byte_rate check failed in 8 of 12 runs).  At 0.5 s,
#: 15 flows probing stay within PROBE_PPS_BUDGET of a 5 Mb/s port.
DCQCN_PROBE_INTERVAL_S = 0.5


def probe_interval_s(host_cc: str, sources: int, link_pps: float, base_rtt_s: float) -> float:
    """``p4cc host send --probe-interval`` for this run (see PROBE_PPS_BUDGET)."""
    floor = 4 * base_rtt_s  # the hostcc default
    if host_cc.partition(":")[0] == "dcqcn":
        return max(floor, DCQCN_PROBE_INTERVAL_S)
    return max(floor, max(1, sources) / (PROBE_PPS_BUDGET * link_pps))


def probe_max_pps(sources: int, link_pps: float) -> float:
    """``p4cc host send --probe-max-pps``: each source's share of PROBE_PPS_BUDGET, a cap
    on all its flows' probes together (``probe_interval_s`` assumes one probed flow per
    source; overlapping incast bursts left 12 flows on one RL-CC host, and 12 % of the
    bottleneck's packets were probes: session 8, docs/emulation.md)."""
    return PROBE_PPS_BUDGET * link_pps / max(1, sources)

#: The switches are what is measured: on two shared cores a starved simple_switch_grpc
#: drained a full 10 Mb/s queue at ~200 pps instead of 1250 (measured), so the backend
#: raises every BMv2 thread's priority by this much (nice value); the hosts' Python
#: processes then absorb the CPU shortage, as slower hosts would.
SWITCH_NICE = -10
#: Host processes run in their own sessions (Mininet's ``mnexec -d``), so with the
#: kernel's autogroup scheduling each is one group sharing the CPU equally with every
#: other session on the machine (p4cc.experiment.bmv2.control.set_autogroup_nice): the
#: backend raises their groups too, below the switches.  Measured (load ~8 from other
#: sessions): hosts sent 3 of the 7 Mb/s their CC asked for at group nice 0.
HOST_NICE = -5
#: Host processes ask for a 0.1 ms EEVDF slice (p4cc.hostcc.sched), so that a
#: process waking for a flow's start or a reply preempts a switch instead of waiting
#: for its slice to end: at the default slice (1.4 ms on two cores) 6.4 % of the
#: default experiment's flows started more than 4 ms late (session 13).
HOST_SLICE_S = 1e-4
#: > 0: host processes run SCHED_RR at this real-time priority instead (sched.py).
#: Off: on the default experiment every flow then started on time, but the switches
#: starved in 12-17 % of their CPU windows (session 14, docs/emulation.md)
HOST_RT_PRIO = 0
#: a sender's thread runs SCHED_RR at this priority only while it waits for a flow's
#: start (SenderConfig.start_rt_prio, p4cc.hostcc.sched.StartBoost)
HOST_START_RT_PRIO = 1
#: ...from this long before the start (SenderConfig.start_rt_lead_s)
HOST_START_RT_LEAD_S = 0.02
#: Python's GIL switch interval in host processes: the sending loop waits at most this
#: long for the pacer's thread to release the GIL (Python's default is 5 ms; 21 % of the
#: late flows of session 13 had another flow's HTB class made in the 12 ms before)
HOST_SWITCH_INTERVAL_S = 5e-4
