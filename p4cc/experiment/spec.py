"""Experiment specs: YAML -> frozen dataclasses, validated before anything starts.

Every error names the exact field path (``workloads[1].load: 1.5 is outside (0, 1]``).
A *time value* is a number of seconds on this fabric, a string with a unit (``"500ms"``,
``"20us"``, ``"2s"``), or ``{paper_time: 4.1}``: seconds at the papers' scale, converted
with ``Scale.time`` (REFERENCE §5); the paper value and the value used are both kept
(``ExperimentSpec.paper_values``) and stored with every run.  The format is described in
docs/traffic.md; examples/*.yaml are complete specs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from p4cc.controlplane.agents.static import agent_names
from p4cc.errors import ConfigError
from p4cc.experiment.agents import online_items
from p4cc.hostcc.cc import host_cc_kind, host_cc_names
from p4cc.scale import SCALES, Scale, get_scale
from p4cc.topo.spec import TopoSpec, parse_topo
from p4cc.traffic.fields import Ctx, err, integer, load_fraction, size_scale, time_value, windows
from p4cc.traffic.kinds import KINDS, WorkloadKind, WorkloadParams, get_kind, params_dict

#: backends a spec may name (their classes: p4cc.experiment.backend.BACKENDS)
BACKENDS = ("sim", "bmv2")
HOST_CC = host_cc_names()  # the registry p4cc.hostcc.cc.HOST_CC_KINDS
OUTPUTS = ("telemetry", "flows", "hostcc", "int")
#: keys every workload takes; its type's own keys are the fields of its parameter
#: dataclass (p4cc.traffic.kinds)
_COMMON = frozenset({"type", "tag", "windows", "size_scale"})
_TOP = {"name", "description", "backend", "topology", "scale", "duration_s", "seed", "seeds",
        "interval_s", "agents", "host_cc", "workloads", "link_failures", "outputs", "pfc"}
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_AGENT_RE = re.compile(r"^[a-z0-9_-]+(:\S+)?$")


@dataclass(frozen=True)
class WorkloadSpec:
    type: str  # a p4cc.traffic.kinds.KINDS name
    tag: str
    windows: tuple[tuple[float, float], ...]  # active [t0, t1) intervals, fabric seconds
    size_scale: float  # multiplies every flow size of this workload
    params: WorkloadParams  # the type's validated parameters (its kind's params_type)

    @property
    def kind(self) -> WorkloadKind[Any]:
        return get_kind(self.type)

    @property
    def p(self) -> dict[str, Any]:
        """The parameters that are set, by key (as in the resolved spec)."""
        return params_dict(self.params)


@dataclass(frozen=True)
class LinkFailureSpec:
    at_s: float
    until_s: float | None  # None: the links stay down
    fraction: float | None  # of switch-to-switch links (PET §5.5.5: 10 %)
    links: tuple[str, ...] = ()  # or explicit "nodeA:nodeB" pairs


@dataclass(frozen=True)
class ExperimentSpec:
    name: str
    backend: str
    topology: str
    scale: str
    duration_s: float
    seeds: tuple[int, ...]
    interval_s: float
    agents: tuple[str, ...]
    host_cc: str
    workloads: tuple[WorkloadSpec, ...]
    link_failures: tuple[LinkFailureSpec, ...] = ()
    outputs: tuple[str, ...] = OUTPUTS
    description: str = ""
    source: str = ""
    paper_values: tuple[tuple[str, float, float], ...] = field(default=())  # path, paper, used
    pfc_alpha: float | None = None  # PFC on (sim only; p4cc.sim.pfc) with this alpha, or off
    pfc_buffer: str = "shared"  # with PFC: one pool per switch, or a buffer per queue
    pfc_pool_bytes: float = 10_000_000  # with PFC shared: each switch's pool (paper bytes)

    @property
    def scale_obj(self) -> Scale:
        return get_scale(self.scale)

    def topo(self) -> TopoSpec:
        return parse_topo(self.topology, self.scale)


def _workload(ctx: Ctx, path: str, w: Any, topo: TopoSpec, duration: float,
              index: int) -> WorkloadSpec:
    if not isinstance(w, Mapping):
        raise err(path, "must be a mapping with a 'type'")
    kind_name = w.get("type")
    if not isinstance(kind_name, str) or kind_name not in KINDS:
        raise err(f"{path}.type", f"unknown workload {kind_name!r}; choose one of "
                                   f"{list(KINDS)}")
    kind = get_kind(kind_name)
    allowed = _COMMON | kind.keys
    for key in w:
        if key not in allowed:
            raise err(f"{path}.{key}", f"unknown key for a {kind_name} workload; expected "
                                        f"one of {sorted(allowed)}")
    params = kind.parse(ctx, path, w, topo)
    tag = w.get("tag", f"{kind_name}{index}" if index else kind_name)
    if not isinstance(tag, str) or not _NAME_RE.match(tag):
        raise err(f"{path}.tag", f"{tag!r} must be a word of letters, digits, '_', '-', '.'")
    return WorkloadSpec(kind_name, tag,
                        windows(ctx, f"{path}.windows", w.get("windows"), duration),
                        size_scale(ctx, f"{path}.size_scale", w.get("size_scale")), params)


def _failure(ctx: Ctx, path: str, f: Any, topo: TopoSpec, duration: float) -> LinkFailureSpec:
    if not isinstance(f, Mapping):
        raise err(path, "must be a mapping with 'at' and 'fraction' or 'links'")
    for key in f:
        if key not in {"at", "until", "fraction", "links"}:
            raise err(f"{path}.{key}", "unknown key; expected at, until, fraction, links")
    at = time_value(ctx, f"{path}.at", f.get("at"))
    until = None if f.get("until") is None else time_value(ctx, f"{path}.until", f["until"])
    if not 0 <= at < duration:
        raise err(f"{path}.at", f"{at:g} must be in [0, duration_s={duration:g})")
    if until is not None and until <= at:
        raise err(f"{path}.until", f"{until:g} must be after at={at:g}")
    fraction = None
    links: tuple[str, ...] = ()
    if "links" in f:
        if not isinstance(f["links"], list) or not f["links"]:
            raise err(f"{path}.links", "must be a list of 'nodeA:nodeB' strings")
        for i, name in enumerate(f["links"]):
            a, _, b = str(name).partition(":")
            if not any({a, b} == {lk.a, lk.b} for lk in topo.links):
                raise err(f"{path}.links[{i}]", f"{name!r} is not a link of topology "
                                                 f"{topo.name}")
        links = tuple(str(x) for x in f["links"])
    else:
        fraction = load_fraction(f"{path}.fraction", f.get("fraction"))
        if not any(not topo.is_host(lk.a) and not topo.is_host(lk.b) for lk in topo.links):
            raise err(f"{path}.fraction", f"topology {topo.name} has no switch-to-switch "
                                           f"links; name links explicitly with 'links'")
    return LinkFailureSpec(at, until, fraction, links)


def _pfc(raw: Any) -> tuple[float | None, str, float]:
    """``pfc: true`` / ``pfc: {alpha: A, buffer: shared|per-queue, pool_bytes: N}`` (a
    lossless fabric; the bmv2 backend refuses it) -> (alpha or None, buffer, pool)."""
    from p4cc.sim.pfc import (
        DEFAULT_ALPHA,
        DEFAULT_POOL_BYTES,
        check_alpha,
        check_buffer,
        check_pool,
    )

    off = (None, "shared", float(DEFAULT_POOL_BYTES))
    if raw is None or raw is False:
        return off
    if raw is True:
        raw = {}
    if not isinstance(raw, Mapping) or not set(raw) <= {"alpha", "buffer", "pool_bytes"}:
        raise err("pfc", f"{raw!r}; write 'pfc: true' or 'pfc: {{alpha: 0.125, buffer: "
                         f"shared, pool_bytes: 10000000}}' (any of the three keys)")
    try:
        alpha = check_alpha(raw.get("alpha", DEFAULT_ALPHA))
    except ConfigError as exc:
        raise err("pfc.alpha", str(exc)) from None
    try:
        buffer = check_buffer(raw.get("buffer", "shared"))
    except ConfigError as exc:
        raise err("pfc.buffer", str(exc)) from None
    try:
        pool = check_pool(raw.get("pool_bytes", DEFAULT_POOL_BYTES))
    except ConfigError as exc:
        raise err("pfc.pool_bytes", str(exc)) from None
    return alpha, buffer, pool


def parse_spec(doc: Any, source: str = "<spec>", base_dir: Path | None = None) -> ExperimentSpec:
    """Validate a spec mapping (as loaded from YAML) into an ExperimentSpec."""
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{source}: a spec is a YAML mapping")
    for key in doc:
        if key not in _TOP:
            raise err(str(key), f"unknown key; expected one of {sorted(_TOP)}")
    name = doc.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise err("name", f"{name!r} must be a word of letters, digits, '_', '-', '.'")
    backend = doc.get("backend", "sim")
    if backend not in BACKENDS:
        raise err("backend", f"{backend!r}; choose one of {list(BACKENDS)}")
    scale_name = doc.get("scale", "testbed")
    if scale_name not in SCALES:
        raise err("scale", f"unknown scale {scale_name!r}; choose one of {sorted(SCALES)}")
    ctx = Ctx(get_scale(scale_name), base_dir)
    if not isinstance(doc.get("topology"), str):
        raise err("topology", "must be a topology string, e.g. 'star,hosts=5'")
    try:
        topo = parse_topo(doc["topology"], ctx.scale)
    except ConfigError as exc:
        raise err("topology", str(exc)) from None
    if len(topo.hosts) < 2:
        raise err("topology", f"{doc['topology']!r} has {len(topo.hosts)} host; traffic needs "
                              f"at least two (e.g. leafspine,leaves=2,hosts=1)")
    duration = time_value(ctx, "duration_s", doc.get("duration_s"))
    if duration <= 0:
        raise err("duration_s", f"{duration:g} must be > 0")
    seeds_raw = doc.get("seeds", [doc.get("seed", 1)])
    if not isinstance(seeds_raw, list) or not seeds_raw:
        raise err("seeds", "must be a non-empty list of integers")
    seeds = tuple(integer(f"seeds[{i}]", s, 0, 2**32 - 1) for i, s in enumerate(seeds_raw))
    if len(set(seeds)) != len(seeds):
        raise err("seeds", f"{list(seeds)} has duplicates")
    interval = time_value(ctx, "interval_s", doc.get("interval_s", {"paper_time": 500e-6}))
    if not 0 < interval <= duration:
        raise err("interval_s", f"{interval:g} must be in (0, duration_s={duration:g}]")
    agents = doc.get("agents", ["secn1"])
    if isinstance(agents, str):
        agents = [agents]
    if not isinstance(agents, list) or not agents:
        raise err("agents", "must be a non-empty list of agent names")
    for i, a in enumerate(agents):
        if not isinstance(a, str) or not _AGENT_RE.match(a):
            raise err(f"agents[{i}]", f"{a!r} is not an agent name like 'secn1' or 'acc:file'")
        if a.partition(":")[0].lower() not in agent_names():
            raise err(f"agents[{i}]", f"unknown agent {a!r}; choose one of {agent_names()}")
        try:  # acc:online,field=value: the items' form here, their fields when it runs
            online_items(a)
        except ConfigError as exc:
            raise err(f"agents[{i}]", str(exc)) from None
    if len(set(agents)) != len(agents):
        raise err("agents", f"{agents} has duplicates")
    host_cc = doc.get("host_cc", "dcqcn")
    if not isinstance(host_cc, str) or host_cc.partition(":")[0] not in HOST_CC:
        raise err("host_cc", f"{host_cc!r}; choose one of {list(HOST_CC)} (optionally "
                              f"':variant', e.g. 'dcqcn:hpcc-ns3', 'rlcc:model.json')")
    if host_cc_kind(host_cc).make is not None:  # a userspace controller, not kernel TCP
        from p4cc.hostcc.cc import make_controller

        try:  # an unknown DCQCN set or a policy file that does not load fails here
            make_controller(host_cc, ctx.scale)
        except ConfigError as exc:
            raise err("host_cc", str(exc)) from None
    workloads_raw = doc.get("workloads")
    if not isinstance(workloads_raw, list) or not workloads_raw:
        raise err("workloads", "must be a non-empty list")
    workloads = tuple(_workload(ctx, f"workloads[{i}]", w, topo, duration, i)
                      for i, w in enumerate(workloads_raw))
    tags = [w.tag for w in workloads]
    if len(set(tags)) != len(tags):
        raise err("workloads", f"tags {tags} are not unique; set 'tag' on each")
    failures_raw = doc.get("link_failures", []) or []
    if not isinstance(failures_raw, list):
        raise err("link_failures", "must be a list")
    failures = tuple(_failure(ctx, f"link_failures[{i}]", f, topo, duration)
                     for i, f in enumerate(failures_raw))
    outputs = doc.get("outputs", list(OUTPUTS))
    if not isinstance(outputs, list) or any(o not in OUTPUTS for o in outputs):
        raise err("outputs", f"{outputs!r}; choose from {list(OUTPUTS)}")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise err("description", "must be a string")
    return ExperimentSpec(name, backend, doc["topology"], scale_name, duration, seeds, interval,
                          tuple(agents), host_cc, workloads, failures, tuple(outputs),
                          description.strip(), source, tuple(ctx.paper),
                          *_pfc(doc.get("pfc")))


def read_spec_doc(path: str | Path) -> tuple[Any, str, Path]:
    """The raw YAML document of a spec file, its source name and its directory (not yet
    validated: ``parse_spec`` does that)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"spec file {p} does not exist")
    try:
        doc = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}") from None
    return doc, str(p), p.resolve().parent


def load_spec(path: str | Path) -> ExperimentSpec:
    """Read and validate a YAML spec file."""
    return parse_spec(*read_spec_doc(path))


def _plain(v: Any) -> Any:
    """Tuples (nested too) as lists, for YAML."""
    return [_plain(x) for x in v] if isinstance(v, (tuple, list)) else v


def _resolved_workload(w: WorkloadSpec) -> dict[str, Any]:
    out = {"type": w.type, "tag": w.tag, "windows": [list(x) for x in w.windows],
           "size_scale": w.size_scale, **{k: _plain(v) for k, v in w.p.items()}}
    if w.kind.mean_size is not None:
        out["mean_size_bytes"] = w.kind.mean_size(w.params) * w.size_scale
    return out


def resolve(spec: ExperimentSpec) -> dict[str, Any]:
    """The full resolved configuration, as stored in ``spec.resolved.yaml``."""
    scale = spec.scale_obj
    topo = spec.topo()
    out = asdict(spec)
    out["workloads"] = [_resolved_workload(w) for w in spec.workloads]
    out["link_failures"] = [asdict(f) | {"links": list(f.links)} for f in spec.link_failures]
    out["seeds"] = list(spec.seeds)
    out["agents"] = list(spec.agents)
    out["outputs"] = list(spec.outputs)
    out["paper_values"] = [{"field": f, "paper_s": p, "used_s": u} for f, p, u in
                           spec.paper_values]
    out["scale"] = {**scale.to_dict(), "rate_factor": scale.rate_factor,
                    "time_factor": scale.time_factor, "bdp_factor": scale.bdp_factor}
    alpha, buffer, pool = out.pop("pfc_alpha"), out.pop("pfc_buffer"), out.pop("pfc_pool_bytes")
    if alpha is not None:  # (absent when off: the resolved specs of before session 12;
        # 'buffer' since session 26: before it, every lossless run was per-queue)
        out["pfc"] = {"alpha": alpha, "buffer": buffer}
        if buffer == "shared":
            out["pfc"]["pool_bytes"] = pool
    out["topology"] = {"text": spec.topology, "name": topo.name, "hosts": len(topo.hosts),
                       "switches": len(topo.switches), "links": len(topo.links)}
    return out
