"""CHAMELEON's fabric-wide controller and how each backend runs it (docs/chameleon.md).

ONE controller per fabric: :class:`ChameleonController` keeps the monitor's reporters
(p4cc.chameleon.server.MonitorState: hosts and switches, expiry by deadline), turns the
hosts' reports into the objective (average receive throughput per host / line rate)
every long period, steps the greedy tuner (p4cc.chameleon.tuner) and produces ONE
settings message for every host (DCQCN RP parameters, the NP's CNP interval) and every
switch (Kmin, Kmax, Pmax): dispatched together.  The per-switch Agent protocol is kept by
proxies (p4cc.controlplane.agents.chameleon: the agent ``chameleon``) that report their
switch's statistics and return the controller's ECN setting.

* ``sim`` (p4cc.experiment.chameleon_sim: ``SimChameleon``): the simulator is one
  process, stepped by one thread; its hosts and switch proxies talk to the controller in
  process (``DirectLink``, the same wire format, encoded and decoded), so a run stays
  deterministic.  Each long period the new host parameters go into the simulator's
  DCQCN hook (DcqcnFlows.set_params) and the CNP interval into the engine, and the
  proxies return the new thresholds in the same interval.
* ``bmv2`` (p4cc.experiment.chameleon_bmv2): a real listener (a Unix socket) beside
  the FabricSession; the ``p4cc host send/recv`` processes and the switch proxies in the
  session's loops connect to it.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from p4cc.chameleon import space
from p4cc.chameleon.server import MonitorState
from p4cc.chameleon.stats import Periods
from p4cc.chameleon.tuner import GreedyTuner, Knob, TunerConfig
from p4cc.chameleon.wire import Message
from p4cc.controlplane.agents.chameleon import controller_links
from p4cc.controlplane.ecn import static_setting
from p4cc.errors import ConfigError
from p4cc.hostcc.dcqcn import dcqcn_params
from p4cc.hostcc.receiver import DEFAULT_CNP_INTERVAL_S
from p4cc.scale import Scale

AGENT = "chameleon"
#: the throughput the objective uses: receive b/s over the short periods with traffic
BUSY_METRIC = "rx_busy_bps"


def default_settings(scale: Scale, host_set: str = "nvidia",
                     ecn: str = "VENDOR") -> dict[str, float]:
    """A full setting: a DCQCN parameter set's tunable values (default: the NIC vendor's,
    NVIDIA), the NP's CNP interval (NVIDIA's 4 µs) and a static ECN setting (VENDOR),
    all at ``scale``."""
    p = dcqcn_params(host_set, scale.link_rate_bps, scale)
    e = static_setting(ecn, scale)
    out = {k: float(getattr(p, k)) for k in space.HOST_PARAMS}
    out.update(cnp_interval_s=scale.time(DEFAULT_CNP_INTERVAL_S),
               kmin_bytes=float(e.kmin_bytes), kmax_bytes=float(e.kmax_bytes), pmax=e.pmax)
    return out


def knobs(scale: Scale, initial: Mapping[str, float],
          names: tuple[str, ...] = space.NAMES) -> list[Knob]:
    """Tuner knobs for ``names`` starting at ``initial`` (clamped into range)."""
    out = []
    for nm in names:
        d = space.BY_NAME[nm]
        lo, hi = d.bounds(scale)
        v = min(hi, max(lo, float(initial[nm])))
        if d.log:
            lo = max(lo, 1e-300)
            out.append(Knob(nm, math.log2(max(v, lo)), math.log2(lo), math.log2(hi), d.step,
                            log=True))
        else:
            out.append(Knob(nm, v, lo, hi, d.step))
    return out


@dataclass(frozen=True)
class ChameleonConfig:
    tuner: TunerConfig = field(default_factory=TunerConfig)
    long_period_s: float | None = None  # None: 100 ms paper time, scaled
    short_period_s: float | None = None  # None: 10 ms paper time, scaled (sim: Δt)
    expiry_periods: float = 3.0  # a reporter silent this many long periods is dropped
    params: tuple[str, ...] = space.NAMES  # tuned, in this order
    initial: str = "nvidia"  # DCQCN parameter set to start from
    ecn: str = "VENDOR"  # static ECN setting to start from
    start: tuple[tuple[str, float], ...] = ()  # values that replace the starting ones
    tune: bool = True  # False: dispatch the starting setting once and never step
    end_run: bool = False  # sim: end the run once the tuner has stopped (a tuning run)
    # long periods whose metric is recorded (param "warmup") but not given to the
    # tuner: the first collective meets an empty fabric and its metric is not the
    # setting's steady state (8 hosts on the simulator: 0.73 against 0.63 +- 0.03 over
    # the next 39 rounds, docs/results.md, CHAMELEON, session 16); as the tuner's first
    # baseline it also stood as the first parameter's "best" value, which no later
    # round could beat
    warmup: int = 1

    def starting(self, scale: Scale) -> dict[str, float]:
        """The first setting: ``initial``'s DCQCN values, ``ecn``'s thresholds, then
        ``start`` (e.g. a setting a tuning run left), each checked against its range."""
        out = default_settings(scale, self.initial, self.ecn)
        for name, value in self.start:
            if name not in space.BY_NAME:
                raise ConfigError(f"chameleon: unknown parameter {name!r} in the starting "
                                  f"setting; choose from {space.NAMES}")
            lo, hi = space.BY_NAME[name].bounds(scale)
            if not (math.isfinite(value) and lo * (1 - 1e-9) <= value <= hi * (1 + 1e-9)):
                raise ConfigError(f"chameleon: starting {name}={value!r} is outside "
                                  f"[{lo:g}, {hi:g}] at scale {scale.name}")
            out[name] = float(value)
        return out

    def periods(self, scale: Scale) -> Periods:
        p = Periods.for_scale(scale)
        return Periods(self.short_period_s or p.short_s, self.long_period_s or p.long_s)


class ChameleonController:
    """The fabric-wide controller, without I/O: reports in, settings out."""

    def __init__(self, scale: Scale, config: ChameleonConfig | None = None,
                 clock: Any = None, state: MonitorState | None = None) -> None:
        self.scale, self.config = scale, config or ChameleonConfig()
        self.periods = self.config.periods(scale)
        kw = {"clock": clock} if clock is not None else {}
        self.state = state or MonitorState(self.expiry_s, **kw)
        self.settings = self.config.starting(scale)
        self.tuner = GreedyTuner(knobs(scale, self.settings, self.config.params),
                                 self.config.tuner)
        self.round = 0
        self.warmed = 0  # warm-up periods seen (ChameleonConfig.warmup)
        self.rows: list[dict[str, Any]] = []  # one per round (the run's chameleon table)

    @property
    def expiry_s(self) -> float:
        return self.config.expiry_periods * self.periods.long_s

    def objective(self, metric: str = BUSY_METRIC) -> float | None:
        """Average receive throughput while receiving (``rx_busy_bps``: short periods in
        which a host received nothing are no samples) per host / line rate, times the
        hosts' mean Jain index of their flows' goodputs when they report one (the tail
        of an all-to-all is set by its slowest flows).  None before any host reported,
        or in a long period in which no host received anything.  Reporters that send
        only ``rx_bps`` (no busy variant) are judged on it; ``metric="rx_bps"`` gives
        the objective with the idle periods in (recorded as ``metric_incl_idle``)."""
        hosts = list(self.state.live("host").values())
        if metric == BUSY_METRIC and not any(BUSY_METRIC in h.metrics for h in hosts):
            metric = "rx_bps"
        thr = _means(hosts, metric)
        if not thr:
            return None
        jain = _means(hosts, "flow_jain")
        return float(np.mean(thr)) / self.scale.link_rate_bps * (
            float(np.mean(jain)) if jain else 1.0)

    def _row(self, t: float, m: float, param: str | None) -> dict[str, Any]:
        return {"t_s": t, "round": self.round, "metric": m,
                "metric_incl_idle": self.objective("rx_bps"), "param": param,
                "done": self.tuner.done, "hosts": len(self.state.live("host")),
                "switches": len(self.state.live("switch")), **self.settings}

    def decide(self, t: float) -> Message | None:
        """One long period: step the tuner on the objective; the settings to dispatch to
        every host and switch, or None (no report yet, or the tuner has stopped)."""
        m = self.objective()
        if m is None or self.tuner.done:
            return None
        if not self.config.tune:  # a fixed setting: the objective is only recorded
            self.rows.append(self._row(t, m, "fixed"))
            return None
        if self.warmed < self.config.warmup:  # recorded, not a round of the tuner
            self.warmed += 1
            self.rows.append(self._row(t, m, "warmup"))
            return None
        param = self.tuner.param
        new = self.tuner.step(m)
        self.rows.append(self._row(t, m, param))
        if new is None:
            return None
        self.settings.update(new)
        self.round += 1
        if self.tuner.done:  # the final setting, in force from now on
            self.rows.append({"t_s": t, "round": self.round, "metric": math.nan,
                              "metric_incl_idle": math.nan, "param": "final",
                              "done": True, "hosts": 0, "switches": 0, **self.settings})
        return self.message()

    def message(self) -> Message:
        return Message("settings", "controller", round=self.round, params=dict(self.settings))


def _means(reps: Any, metric: str) -> list[float]:
    return [r.metrics[metric]["mean"] for r in reps
            if r.metrics.get(metric, {}).get("n", 0) > 0]


def own_controller(agent_name: str) -> str | None:
    """The controller options when the run must start its own controller (the agent is
    ``chameleon`` or ``chameleon:<key>=<value>,...``), else None (another agent, or
    ``chameleon:<address>``: the proxies use a controller running elsewhere)."""
    base, _, arg = agent_name.partition(":")
    if base.lower() != AGENT or (arg and "=" not in arg):
        return None
    return arg


_TUNER_KEYS = {"beta": float, "lam": float, "patience": int, "max_rounds": int,
               "target": float}


def parse_options(arg: str) -> ChameleonConfig:
    """``chameleon:<key>=<value>,...``: ``long``/``short`` (periods, s), ``beta``,
    ``lam``, ``patience``, ``max_rounds`` (per parameter), ``target`` (tuner),
    ``params`` (names joined by ``+``, the tuning order), ``initial`` (DCQCN set),
    ``ecn`` (static ECN setting), ``from`` (a JSON file ``{name: value}`` whose values
    replace the starting ones, e.g. a tuned setting), ``tune`` (0: keep the starting
    setting: evaluate a fixed setting through the same controller), ``end`` (1, sim:
    the run ends once the tuner has stopped instead of lasting its duration),
    ``warmup`` (long periods before the tuner's first round; default 1)."""
    cfg, tkw = ChameleonConfig(), dict[str, Any]()
    for item in filter(None, arg.split(",")):
        key, sep, val = item.partition("=")
        try:
            if not sep:
                raise ValueError("expected key=value")
            if key in ("long", "short"):
                per: dict[str, Any] = {f"{key}_period_s": float(val)}
                cfg = replace(cfg, **per)
            elif key in _TUNER_KEYS:
                tkw["max_rounds_per_param" if key == "max_rounds" else key] = \
                    _TUNER_KEYS[key](val)
            elif key == "params":
                names = tuple(val.split("+"))
                bad = [n for n in names if n not in space.BY_NAME]
                if bad:
                    raise ValueError(f"unknown parameters {bad}; choose from {space.NAMES}")
                cfg = replace(cfg, params=names)
            elif key == "initial":
                dcqcn_params(val, 25e9)  # an unknown set is refused here, by name
                cfg = replace(cfg, initial=val)
            elif key == "ecn":
                static_setting(val, Scale())  # an unknown setting is refused here
                cfg = replace(cfg, ecn=val)
            elif key == "from":
                cfg = replace(cfg, start=_read_setting(val))
            elif key == "warmup":
                if int(val) < 0:
                    raise ValueError("expected a whole number >= 0")
                cfg = replace(cfg, warmup=int(val))
            elif key in ("tune", "end"):
                if val not in ("0", "1"):
                    raise ValueError("expected 0 or 1")
                flag: dict[str, Any] = {"tune" if key == "tune" else "end_run": val == "1"}
                cfg = replace(cfg, **flag)
            else:
                raise ValueError("unknown key")
        except ValueError as exc:
            raise ConfigError(f"agent option {item!r} of chameleon: {exc}; keys: long, "
                              f"short, params, initial, ecn, from, tune, end, warmup, "
                              f"{', '.join(_TUNER_KEYS)}") from None
    return replace(cfg, tuner=TunerConfig(**tkw)) if tkw else cfg


def _read_setting(path: str) -> tuple[tuple[str, float], ...]:
    """``{name: value}`` from a JSON file (ValueError naming the file on any problem)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read a setting from {path}: {exc}") from None
    if not isinstance(doc, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in doc.values()):
        raise ValueError(f"{path} must hold one JSON object of parameter: number")
    return tuple((str(k), float(v)) for k, v in doc.items())


@contextlib.contextmanager
def links(fabric: Any) -> Iterator[None]:
    """While agents are made: plain ``chameleon`` proxies link to ``fabric``'s controller
    (a SimChameleon or a Bmv2Chameleon: anything with a ``link`` factory; None: nothing)."""
    if fabric is None:
        yield
        return
    with controller_links(fabric.link):
        yield
