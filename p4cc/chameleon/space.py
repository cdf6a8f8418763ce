"""The parameters CHAMELEON tunes, their ranges and initial tuning steps (poster §2.2).

NIC side: the steps and timers of rate increase and decrease, the α update period and
the CNP generation interval (the receiver's); switch side: the ECN thresholds Kmin,
Kmax, Pmax.  Ranges are given in the papers' domain (25 Gb/s, µs RTTs) and scaled to a
fabric like every DCQCN quantity (REFERENCE §5, p4cc.scale): rates by the rate factor,
times by the time factor, queue thresholds by the BDP factor.  The ranges are wide
(about an order of magnitude either side of the vendor's defaults) and are what the
hosts validate run-time parameters against (:func:`check`).

Steps: a parameter with ``log`` set is tuned on log2 of its value, so the poster's
``v ± s`` is a factor ``2^±s`` (rates, timers and thresholds span decades); the others
(``min_dec_factor``) on the value itself.  Initial steps are our choice (the poster sets
them "based on experience" and gives none).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from p4cc.errors import ConfigError
from p4cc.scale import Scale


@dataclass(frozen=True)
class ParamDef:
    name: str
    side: str  # "host" (sender), "receiver" (host, NP side) or "switch"
    lo: float  # paper domain
    hi: float
    unit: str  # "rate" | "time" | "bytes" | "1": how it scales
    log: bool = True
    step: float = 1.0  # initial tuning step (log2 units if ``log``)
    help: str = ""

    def factor(self, scale: Scale) -> float:
        return {"rate": scale.rate_factor, "time": scale.time_factor,
                "bytes": scale.bdp_factor, "1": 1.0}[self.unit]

    def bounds(self, scale: Scale) -> tuple[float, float]:
        f = self.factor(scale)
        lo, hi = self.lo * f, self.hi * f
        if self.unit == "bytes":  # a threshold is a whole packet at least, inside the buffer
            lo = max(lo, float(scale.pkt_bytes))
            hi = min(hi, float(scale.buffer_bytes))
        return lo, hi


PARAMS: tuple[ParamDef, ...] = (
    ParamDef("rai_bps", "host", 1e6, 1e9, "rate", help="additive increase step R_AI"),
    ParamDef("rhai_bps", "host", 1e6, 5e9, "rate", help="hyper increase step R_HAI"),
    ParamDef("increase_period_s", "host", 5e-6, 1e-3, "time", help="rate increase timer"),
    ParamDef("min_dec_factor", "host", 0.0, 0.9, "1", log=False, step=0.1,
             help="floor of the rate decrease factor (RPG_MIN_DEC_FAC)"),
    ParamDef("decrease_period_s", "host", 1e-6, 100e-6, "time",
             help="rate decrease check period"),
    ParamDef("alpha_period_s", "host", 1e-6, 100e-6, "time", help="α update period"),
    ParamDef("cnp_interval_s", "receiver", 1e-6, 100e-6, "time",
             help="minimum time between CNPs of a flow (NP)"),
    ParamDef("kmin_bytes", "switch", 1e3, 400e3, "bytes", help="ECN Kmin"),
    ParamDef("kmax_bytes", "switch", 5e3, 1e6, "bytes", help="ECN Kmax"),
    ParamDef("pmax", "switch", 0.01, 1.0, "1", help="ECN Pmax"),
)
BY_NAME: dict[str, ParamDef] = {p.name: p for p in PARAMS}
NAMES = tuple(BY_NAME)  # the tuning order
HOST_PARAMS = tuple(p.name for p in PARAMS if p.side == "host")
RECEIVER_PARAMS = tuple(p.name for p in PARAMS if p.side == "receiver")
SWITCH_PARAMS = tuple(p.name for p in PARAMS if p.side == "switch")


def check(params: Mapping[str, float], scale: Scale, sides: tuple[str, ...]) -> dict[str, float]:
    """Validate run-time parameters of ``sides``: ConfigError naming the parameter and its
    range at ``scale`` for an unknown name, a non-number or a value out of range."""
    out: dict[str, float] = {}
    for name, value in params.items():
        d = BY_NAME.get(name)
        if d is None or d.side not in sides:
            known = [p.name for p in PARAMS if p.side in sides]
            raise ConfigError(f"unknown run-time parameter {name!r}; tunable here: {known}")
        lo, hi = d.bounds(scale)
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value)):
            raise ConfigError(f"run-time parameter {name}={value!r} must be a finite number "
                              f"in [{lo:g}, {hi:g}]")
        if not lo * (1 - 1e-9) <= value <= hi * (1 + 1e-9):
            raise ConfigError(f"run-time parameter {name}={value:g} is outside its range "
                              f"[{lo:g}, {hi:g}] ({d.help}; scale {scale.name})")
        out[name] = float(value)
    return out
