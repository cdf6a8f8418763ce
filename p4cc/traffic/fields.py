"""Field parsers for experiment specs: each error names the field path.

Used by p4cc.experiment.spec; a *time value* is a number of seconds on this fabric, a string
with a unit ("500ms"), or ``{paper_time: x}`` converted with ``Scale.time``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from p4cc.errors import ConfigError
from p4cc.scale import Scale
from p4cc.topo.spec import TopoSpec

_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


class Ctx:
    """Carries the scale and collects paper-time conversions while parsing."""

    def __init__(self, scale: Scale, base_dir: Path | None = None) -> None:
        self.scale = scale
        self.base_dir = base_dir  # directory of the spec file, for relative CDF paths
        self.paper: list[tuple[str, float, float]] = []


def err(path: str, msg: str) -> ConfigError:
    return ConfigError(f"{path}: {msg}")


def number(path: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise err(path, f"{v!r} is not a number")
    return float(v)


def integer(path: str, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise err(path, f"{v!r} must be an integer in [{lo}, {hi}]")
    return v


def time_value(ctx: Ctx, path: str, v: Any) -> float:
    if isinstance(v, Mapping):
        if set(v) != {"paper_time"}:
            raise err(path, f"{dict(v)!r}: a time mapping takes only 'paper_time'")
        paper = number(f"{path}.paper_time", v["paper_time"])
        used = ctx.scale.time(paper)
        ctx.paper.append((path, paper, used))
        return used
    if isinstance(v, str):
        m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*(s|ms|us|ns)\s*", v)
        if not m:
            raise err(path, f"{v!r} is not a time; write e.g. 2.5, '500ms' or "
                             f"{{paper_time: 4.1}}")
        try:
            seconds = float(m.group(1)) * _UNITS[m.group(2)]
        except ValueError:
            raise err(path, f"{v!r} is not a time") from None
        if not math.isfinite(seconds):
            raise err(path, f"{v!r} is not a finite time")
        return seconds
    return number(path, v)


def load_fraction(path: str, v: Any) -> float:
    x = number(path, v)
    if not 0 < x <= 1:
        raise err(path, f"{x:g} is outside (0, 1]")
    return x


def int_range(path: str, v: Any, lo: int, hi: int) -> tuple[int, int]:
    if isinstance(v, int) and not isinstance(v, bool):
        v = [v, v]
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        raise err(path, f"{v!r} must be an integer or [min, max]")
    a, b = (integer(f"{path}[{i}]", x, lo, hi) for i, x in enumerate(v))
    if a > b:
        raise err(path, f"min {a} > max {b}")
    return a, b


def hosts(path: str, v: Any, topo: TopoSpec) -> list[str]:
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list) or not items:
        raise err(path, f"{v!r} must be a host name or a non-empty list of host names")
    for i, h in enumerate(items):
        if not isinstance(h, str) or not topo.is_host(h):
            names = [x.name for x in topo.hosts]
            raise err(f"{path}[{i}]" if not isinstance(v, str) else path,
                       f"{h!r} is not a host of topology {topo.name} (hosts: "
                       f"{names[0]}..{names[-1]})")
    return list(items)


def size_scale(ctx: Ctx, path: str, v: Any) -> float:
    if v in (None, "none"):
        return 1.0
    if v == "bdp":
        return ctx.scale.bdp_factor
    x = number(path, v)
    if x <= 0:
        raise err(path, f"{x:g} must be > 0 (or 'bdp' / 'none')")
    return x


def windows(ctx: Ctx, path: str, v: Any, duration: float) -> tuple[tuple[float, float], ...]:
    if v is None:
        return ((0.0, duration),)
    if not isinstance(v, list) or not v:
        raise err(path, "must be a list of [start, stop] pairs")
    out = []
    for i, w in enumerate(v):
        if not isinstance(w, list) or len(w) != 2:
            raise err(f"{path}[{i}]", f"{w!r} must be [start, stop]")
        t0 = time_value(ctx, f"{path}[{i}][0]", w[0])
        t1 = duration if w[1] in ("end", None) else time_value(ctx, f"{path}[{i}][1]", w[1])
        if not 0 <= t0 < t1 <= duration + 1e-12:
            raise err(f"{path}[{i}]", f"[{t0:g}, {t1:g}] must satisfy 0 <= start < stop <= "
                                       f"duration_s ({duration:g})")
        out.append((t0, min(t1, duration)))
    return tuple(out)
