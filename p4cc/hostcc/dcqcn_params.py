"""DCQCN RP parameters and the named parameter sets of REFERENCE §2.

Re-exported by :mod:`p4cc.hostcc.dcqcn`; see that module for the semantics.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property

from p4cc.errors import ConfigError
from p4cc.scale import PAPER_LINK_RATE_BPS, Scale


def to_ns(t_s: float) -> int:
    """Seconds -> integer nanoseconds (rounded), the internal time unit."""
    return round(float(t_s) * 1e9)


def check_run_time_change(old: DcqcnParams, new: DcqcnParams) -> None:
    """What a running flow's parameters may not change (CHAMELEON's run-time tuning): the
    line rate, and whether decreases are checked periodically.  ConfigError otherwise."""
    if new.line_rate_bps != old.line_rate_bps:
        raise ConfigError(f"DCQCN parameter line_rate_bps cannot change at run time "
                          f"({old.line_rate_bps} -> {new.line_rate_bps})")
    if (new.decrease_period_s is None) != (old.decrease_period_s is None):
        raise ConfigError("DCQCN parameter decrease_period_s cannot switch between None "
                          "(cut on each CNP) and a period at run time")


@dataclass(frozen=True)
class DcqcnParams:
    """DCQCN RP parameters, shared by all flows of one call (SI units)."""

    line_rate_bps: float = field(metadata={"help": "default line rate (clamp and start rate)"})
    rai_bps: float = field(metadata={"help": "additive increase R_AI"})
    rhai_bps: float = field(metadata={"help": "hyper increase R_HAI"})
    min_rate_bps: float = field(metadata={"help": "rate floor"})
    g: float = field(default=1 / 256, metadata={"help": "α gain"})
    alpha_init: float = field(default=1.0, metadata={"help": "α set by a flow's first CNP"})
    alpha_period_s: float = field(default=1e-6, metadata={"help": "α update period"})
    decrease_period_s: float | None = field(
        default=4e-6, metadata={"help": "decrease-check period; None = cut on each CNP"}
    )
    increase_period_s: float = field(default=300e-6, metadata={"help": "increase timer T"})
    byte_counter_bytes: int | None = field(
        default=None, metadata={"help": "byte counter B; None = off"}
    )
    fast_recovery_stages: int = field(default=1, metadata={"help": "F"})
    hai_grows: bool = field(default=False, metadata={"help": "R_HAI × (min stage - F)"})
    clamp_target: bool = field(default=False, metadata={"help": "always Rt = Rc on a cut"})
    min_dec_factor: float = field(default=0.0, metadata={"help": "floor of the cut factor"})
    rate_on_first_cnp: float = field(default=1.0, metadata={"help": "Rc=Rt=f·Rc, first CNP"})
    name: str = field(default="custom", metadata={"help": "parameter-set name"})

    def __post_init__(self) -> None:
        def bad(what: str, value: object, rule: str) -> ConfigError:
            return ConfigError(f"DCQCN parameter {what}={value!r} is invalid: {rule}")

        for nm in ("line_rate_bps", "rai_bps", "rhai_bps", "min_rate_bps",
                   "alpha_period_s", "increase_period_s"):
            v = getattr(self, nm)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise bad(nm, v, "must be a positive finite number")
        if self.min_rate_bps > self.line_rate_bps:
            raise bad("min_rate_bps", self.min_rate_bps,
                      f"must not exceed line_rate_bps={self.line_rate_bps}")
        if not 0 < self.g <= 1:
            raise bad("g", self.g, "must be in (0, 1]")
        if not 0 <= self.alpha_init <= 1:
            raise bad("alpha_init", self.alpha_init, "must be in [0, 1]")
        if not 0 <= self.min_dec_factor < 1:
            raise bad("min_dec_factor", self.min_dec_factor, "must be in [0, 1)")
        if not 0 < self.rate_on_first_cnp <= 1:
            raise bad("rate_on_first_cnp", self.rate_on_first_cnp, "must be in (0, 1]")
        if self.fast_recovery_stages < 0:
            raise bad("fast_recovery_stages", self.fast_recovery_stages, "must be >= 0")
        if self.decrease_period_s is not None and not self.decrease_period_s > 0:
            raise bad("decrease_period_s", self.decrease_period_s, "must be > 0 or None")
        if self.byte_counter_bytes is not None and self.byte_counter_bytes < 1:
            raise bad("byte_counter_bytes", self.byte_counter_bytes, "must be >= 1 or None")
        for nm in ("alpha_period_s", "increase_period_s", "decrease_period_s"):
            v = getattr(self, nm)
            if v is not None and to_ns(v) < 1:
                raise bad(nm, v, "must be at least 1 ns (the time resolution)")

    @cached_property
    def alpha_ns(self) -> int:
        return to_ns(self.alpha_period_s)

    @cached_property
    def decrease_ns(self) -> int | None:
        return None if self.decrease_period_s is None else to_ns(self.decrease_period_s)

    @cached_property
    def increase_ns(self) -> int:
        return to_ns(self.increase_period_s)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


# -- named parameter sets (REFERENCE §2), in the paper domain (25 Gb/s fabric) ---------
def _paper_sets(paper_line_bps: float) -> dict[str, dict[str, object]]:
    bw = paper_line_bps / PAPER_LINK_RATE_BPS
    return {
        # HPCC ns-3 "dcqcn" config: R_AI/R_HAI proportional to bandwidth.
        "hpcc-ns3": dict(g=1 / 256, alpha_period_s=1e-6, decrease_period_s=4e-6,
                         increase_period_s=300e-6, fast_recovery_stages=1,
                         rai_bps=5e6 * bw, rhai_bps=50e6 * bw, min_rate_bps=1e9),
        # The golden-trace set (REFERENCE §2): hpcc-ns3 evaluated at 100 Gb/s.
        "golden": dict(g=1 / 256, alpha_period_s=1e-6, decrease_period_s=4e-6,
                       increase_period_s=300e-6, fast_recovery_stages=1,
                       rai_bps=20e6, rhai_bps=200e6, min_rate_bps=1e9),
        # DCQCN paper's code: cut on CNP, 55 µs timers, 10 MB byte counter, F=5,
        # R_HAI growing with the stage.  The paper names no floor: 10 Mb/s (assumption).
        "dcqcn-paper": dict(g=1 / 256, alpha_period_s=55e-6, decrease_period_s=None,
                            increase_period_s=55e-6, byte_counter_bytes=10 * 1024 * 1024,
                            fast_recovery_stages=5, rai_bps=40e6, rhai_bps=400e6,
                            hai_grows=True, min_rate_bps=10e6),
        # NVIDIA firmware defaults: DCE_TCP_G 1019 in 1/1024 units weights the old α,
        # so g = (1024-1019)/1024; INITIAL_ALPHA_VALUE 1023/1024; RPG_MIN_DEC_FAC 50 %;
        # RPG_BYTE_RESET 32767 B; RPG_THRESHOLD 1; RPG_AI 5 Mb/s; RPG_HAI 50 Mb/s.
        # RPG_GD (11) is not modelled (see docs/hostcc-cc.md).
        "nvidia": dict(g=5 / 1024, alpha_init=1023 / 1024, alpha_period_s=1e-6,
                       decrease_period_s=4e-6, increase_period_s=300e-6,
                       byte_counter_bytes=32767, fast_recovery_stages=1, rai_bps=5e6,
                       rhai_bps=50e6, min_rate_bps=1e6, min_dec_factor=0.5),
    }


DCQCN_PARAM_SETS = ("hpcc-ns3", "golden", "dcqcn-paper", "nvidia")
#: what ``set,key=value`` may change (the rest is the host's or the set's identity)
_CHANGEABLE = {f.name: f.type for f in fields(DcqcnParams)
               if f.name not in ("line_rate_bps", "name")}


def _value(key: str, text: str) -> object:
    kind = str(_CHANGEABLE[key])
    low = text.strip().lower()
    if "bool" in kind:
        if low not in ("true", "false", "1", "0"):
            raise ValueError("not a boolean (true/false)")
        return low in ("true", "1")
    if "None" in kind and low == "none":
        return None
    num = float(low)
    if "int" in kind:
        if not num.is_integer():
            raise ValueError("not a whole number")
        return int(num)
    return num


def split_set_name(name: str) -> tuple[str, dict[str, object]]:
    """``"hpcc-ns3,min_rate_bps=1e8,g=0.01"`` -> ("hpcc-ns3", {min_rate_bps: 1e8, g: 0.01}):
    a named set and the paper-domain values it changes (a DcqcnParams field each; ``none``
    turns off the byte counter or the decrease check).  ConfigError names what is wrong."""
    base, *items = [x.strip() for x in str(name).split(",")]
    if base not in DCQCN_PARAM_SETS:
        raise ConfigError(f"unknown DCQCN parameter set {base!r}; choose one of "
                          f"{list(DCQCN_PARAM_SETS)} (optionally with changes: "
                          f"{DCQCN_PARAM_SETS[0]},min_rate_bps=1e8)")
    changed: dict[str, object] = {}
    for item in items:
        key, eq, text = item.partition("=")
        key = key.strip()
        if not eq or key not in _CHANGEABLE:
            raise ConfigError(f"DCQCN parameter change {item!r} in {name!r}: write key=value "
                              f"with key one of {sorted(_CHANGEABLE)}")
        try:
            changed[key] = _value(key, text)
        except ValueError as exc:
            raise ConfigError(f"DCQCN parameter change {item!r} in {name!r}: {exc}") from None
    return base, changed


def dcqcn_params(name: str, line_rate_bps: float, scale: Scale | None = None,
                 **overrides: object) -> DcqcnParams:
    """The named REFERENCE §2 parameter set for a host with ``line_rate_bps``.

    ``name`` may change some of the set's values, in the paper domain:
    ``hpcc-ns3,min_rate_bps=1e8`` (see :func:`split_set_name`).  With ``scale`` the set
    is taken at the paper-domain line rate ``line_rate_bps / scale.rate_factor``; then
    rates (R_AI, R_HAI, min rate) are multiplied by ``scale.rate_factor``, times (α
    period, decrease check, increase timer) by ``scale.time_factor`` and the byte counter
    by ``scale.bdp_factor``.  ``overrides`` are taken as they are (host units).
    """
    base, changed = split_set_name(name)
    rf = scale.rate_factor if scale is not None else 1.0
    tf = scale.time_factor if scale is not None else 1.0
    bf = scale.bdp_factor if scale is not None else 1.0
    values = {**_paper_sets(line_rate_bps / rf)[base], **changed}
    for k in ("rai_bps", "rhai_bps", "min_rate_bps"):
        values[k] = float(values[k]) * rf  # type: ignore[arg-type]
    values["min_rate_bps"] = min(float(values["min_rate_bps"]), line_rate_bps)  # type: ignore[arg-type]
    for k in ("alpha_period_s", "decrease_period_s", "increase_period_s"):
        if values.get(k) is not None:
            values[k] = float(values[k]) * tf  # type: ignore[arg-type]
    if values.get("byte_counter_bytes") is not None:
        values["byte_counter_bytes"] = max(1, round(int(values["byte_counter_bytes"]) * bf))  # type: ignore[call-overload]
    values.update(overrides)
    try:
        return DcqcnParams(line_rate_bps=line_rate_bps, name=name, **values)  # type: ignore[arg-type]
    except TypeError as exc:
        raise ConfigError(f"bad DCQCN parameter override: {exc}") from None
