"""Sweep grids: ``--grid KEY=V1,V2,...`` axes over an experiment spec (docs/sweeps.md).

A grid key names one spec field, in one of three forms:

* a top-level field from :data:`GRID_TOP` (``duration_s``, ``interval_s``, ``host_cc``,
  ``topology``, ``scale``);
* ``workloads[I].KEY``: one workload's own parameter (a field of its kind's parameter
  dataclass, p4cc.traffic.kinds) or its ``size_scale``;
* a bare workload key (``load``, ``size_scale``, ...): that key of *every* workload whose
  type has it (an error if none has).

Values are separated by commas, or by semicolons when the text has any (values with
commas: ``topology=star,hosts=4;star,hosts=8``), each read as a YAML scalar (``0.3`` a
number, ``500ms`` or ``dcqcn:hpcc-ns3`` a string).  The grid is the
cartesian product of its axes in the order given.  Every point's spec is validated by
``p4cc.experiment.spec.parse_spec`` before anything runs; errors name the grid option and
the field path (``--grid load=1.5: workloads[0].load: 1.5 is outside (0, 1]``).
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from p4cc.errors import ConfigError
from p4cc.experiment.spec import ExperimentSpec, parse_spec, read_spec_doc
from p4cc.traffic.kinds import KINDS, get_kind

#: top-level spec fields a grid may sweep (the rest name the experiment or are lists)
GRID_TOP = ("duration_s", "interval_s", "host_cc", "topology", "scale")
_WORKLOAD_KEY_RE = re.compile(r"^workloads\[(\d+)\]\.([A-Za-z_]\w*)$")
_BARE_RE = re.compile(r"^[A-Za-z_]\w*$")
_SLUG_RE = re.compile(r"[^A-Za-z0-9_.=-]+")


@dataclass(frozen=True)
class GridAxis:
    key: str  # as given on the command line
    values: tuple[Any, ...]  # parsed YAML scalars
    texts: tuple[str, ...]  # the values as given (point names use these)
    targets: tuple[tuple[int | None, str], ...]  # (workload index or None = top, field)


@dataclass(frozen=True)
class GridPoint:
    name: str  # directory name under the sweep directory
    values: tuple[tuple[str, Any], ...]  # (axis key, value) in axis order
    doc: Mapping[str, Any]  # the spec mapping with this point's values (spec.yaml)
    spec: ExperimentSpec


def read_doc(path: str | Path) -> tuple[dict[str, Any], str, Path]:
    """The raw spec mapping of a YAML file, its source name and its directory."""
    doc, source, base_dir = read_spec_doc(path)
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: a spec is a YAML mapping")
    return doc, source, base_dir


def _kind_keys(w: Any) -> frozenset[str]:
    kind = w.get("type") if isinstance(w, Mapping) else None
    if kind not in KINDS:
        return frozenset()
    return get_kind(str(kind)).keys | {"size_scale"}


def _targets(key: str, doc: Mapping[str, Any]) -> tuple[tuple[int | None, str], ...]:
    raw = doc.get("workloads")
    workloads: list[Any] = raw if isinstance(raw, list) else []
    if key in GRID_TOP:
        return ((None, key),)
    m = _WORKLOAD_KEY_RE.match(key)
    if m:
        i, field = int(m.group(1)), m.group(2)
        if i >= len(workloads):
            raise ConfigError(f"--grid {key}: workloads[{i}] does not exist (the spec has "
                              f"{len(workloads)} workload(s))")
        if field not in _kind_keys(workloads[i]):
            raise ConfigError(f"--grid {key}: a {workloads[i].get('type')} workload has no "
                              f"key {field!r}; expected one of "
                              f"{sorted(_kind_keys(workloads[i]))}")
        return ((i, field),)
    if key in ("seed", "seeds", "agents", "name", "backend"):
        raise ConfigError(f"--grid {key}: cannot be swept; seeds come from --seeds, agents "
                          f"from the spec, the backend from the spec or --backend")
    if not _BARE_RE.match(key):
        raise ConfigError(f"--grid {key}: not a grid key; use a top-level field "
                          f"{list(GRID_TOP)}, workloads[I].KEY, or a workload key like load")
    hits = tuple((i, key) for i, w in enumerate(workloads) if key in _kind_keys(w))
    if not hits:
        raise ConfigError(f"--grid {key}: no workload of the spec has a {key!r} key and it "
                          f"is not a top-level grid field {list(GRID_TOP)}")
    return hits


def _values(option: str, text: str) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    texts = tuple(t.strip() for t in text.split(";" if ";" in text else ","))
    if not text.strip() or any(not t for t in texts):
        raise ConfigError(f"--grid {option}: empty value; give KEY=V1,V2,...")
    if len(set(texts)) != len(texts):
        raise ConfigError(f"--grid {option}: duplicate values {list(texts)}")
    values = []
    for t in texts:
        try:
            v = yaml.safe_load(t)
        except yaml.YAMLError:
            v = t
        if isinstance(v, (dict, list)) or v is None:
            raise ConfigError(f"--grid {option}: {t!r} is not a scalar value")
        values.append(v)
    return tuple(values), texts


def parse_grid(options: Sequence[str], doc: Mapping[str, Any]) -> tuple[GridAxis, ...]:
    """Parse ``KEY=V1,V2`` options against the raw spec ``doc`` (keys checked here,
    values when each point's spec is parsed)."""
    axes: list[GridAxis] = []
    seen: dict[tuple[int | None, str], str] = {}
    for option in options:
        key, sep, text = option.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--grid {option!r}: expected KEY=V1,V2,...")
        targets = _targets(key, doc)
        for t in targets:
            if t in seen:
                raise ConfigError(f"--grid {key}: sets the same field as --grid {seen[t]}")
            seen[t] = key
        values, texts = _values(option, text)
        axes.append(GridAxis(key, values, texts, targets))
    return tuple(axes)


def _slug(text: str) -> str:
    return _SLUG_RE.sub("_", text)


def point_name(pairs: Sequence[tuple[str, str]]) -> str:
    """``load=0.3`` or ``load=0.3__duration_s=2`` (unsafe characters become ``_``)."""
    return "__".join(f"{_slug(k)}={_slug(v)}" for k, v in pairs) or "base"


def apply_point(doc: Mapping[str, Any], axes: Sequence[GridAxis],
                values: Sequence[Any]) -> dict[str, Any]:
    """A copy of ``doc`` with each axis' field(s) set to its value."""
    out = copy.deepcopy(dict(doc))
    for axis, value in zip(axes, values, strict=True):
        for index, field in axis.targets:
            if index is None:
                out[field] = value
            else:
                out["workloads"][index] = {**out["workloads"][index], field: value}
    return out


def expand(doc: Mapping[str, Any], axes: Sequence[GridAxis], source: str = "<spec>",
           base_dir: Path | None = None,
           seeds: Sequence[int] | None = None) -> tuple[GridPoint, ...]:
    """Every grid point with its validated spec; ``seeds`` replaces the spec's seeds."""
    base = dict(doc)
    if seeds is not None:
        base.pop("seed", None)
        base["seeds"] = list(seeds)
    points: list[GridPoint] = []
    names: set[str] = set()
    combos = itertools.product(*(range(len(a.values)) for a in axes))
    for idx in combos:
        values = [a.values[i] for a, i in zip(axes, idx, strict=True)]
        pairs = [(a.key, a.texts[i]) for a, i in zip(axes, idx, strict=True)]
        point_doc = apply_point(base, axes, values)
        label = ", ".join(f"{k}={t}" for k, t in pairs)
        try:
            spec = parse_spec(point_doc, source, base_dir)
        except ConfigError as exc:
            raise ConfigError(f"--grid {label}: {exc}" if pairs else str(exc)) from None
        name = point_name(pairs)
        if name in names:
            raise ConfigError(f"--grid {label}: point directory {name!r} is not unique")
        names.add(name)
        points.append(GridPoint(name, tuple((a.key, v) for a, v in zip(axes, values,
                                                                        strict=True)),
                                point_doc, spec))
    return tuple(points)


def parse_seeds(text: str | None) -> tuple[int, ...] | None:
    """``--seeds N`` = seeds 1..N; ``--seeds 4,7,9`` = exactly those; None = the spec's."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    try:
        nums = [int(p) for p in parts]
    except ValueError:
        raise ConfigError(f"--seeds {text!r}: give a count (3) or a list (1,5,9)") from None
    if len(nums) == 1:
        if nums[0] < 1:
            raise ConfigError(f"--seeds {text}: the count must be >= 1")
        return tuple(range(1, nums[0] + 1))
    if len(set(nums)) != len(nums) or min(nums) < 0:
        raise ConfigError(f"--seeds {text}: seeds must be distinct and >= 0")
    return tuple(nums)
