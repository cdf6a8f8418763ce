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
from p4cc.scale import SCALES, Scale, get_scale
from p4cc.topo.spec import TopoSpec, parse_topo
from p4cc.traffic.cdf import BUILTIN_CDFS, load_cdf
from p4cc.traffic.fields import (
    Ctx,
    err,
    hosts,
    int_range,
    integer,
    load_fraction,
    size_scale,
    time_value,
    windows,
)
from p4cc.traffic.workloads import STORAGE_PATTERNS

BACKENDS = ("sim", "bmv2", "replay")  # replay: replay_backend, for tests only
HOST_CC = ("dcqcn", "rlcc", "fixed", "tcp")
OUTPUTS = ("telemetry", "flows", "hostcc", "int")
CDF_TYPES = (*sorted(BUILTIN_CDFS), "cdf")
WORKLOAD_TYPES = (*CDF_TYPES, "incast", "partition_aggregate", "storage", "bulk")

_COMMON = {"type", "tag", "windows", "size_scale"}
_KEYS: dict[str, set[str]] = {
    **{t: {"load", "senders", "receivers"} for t in sorted(BUILTIN_CDFS)},
    "cdf": {"load", "senders", "receivers", "cdf"},
    "incast": {"load", "senders", "flows_per_sender", "size_bytes", "sizes", "receiver"},
    "partition_aggregate": {"aggregator", "workers", "response_bytes", "query_bytes",
                            "period_s", "load"},
    "storage": {"pattern", "io_depth", "compute", "storage", "max_requests"},
    "bulk": {"pairs"},
}
_TOP = {"name", "description", "backend", "topology", "scale", "duration_s", "seed", "seeds",
        "interval_s", "agents", "host_cc", "workloads", "link_failures", "outputs"}
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_AGENT_RE = re.compile(r"^[a-z0-9_-]+(:\S+)?$")


@dataclass(frozen=True)
class WorkloadSpec:
    type: str
    tag: str
    windows: tuple[tuple[float, float], ...]  # active [t0, t1) intervals, fabric seconds
    size_scale: float  # multiplies every flow size of this workload
    params: tuple[tuple[str, Any], ...] = ()  # the type's own keys, validated

    @property
    def p(self) -> dict[str, Any]:
        return dict(self.params)


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

    @property
    def scale_obj(self) -> Scale:
        return get_scale(self.scale)

    def topo(self) -> TopoSpec:
        return parse_topo(self.topology, self.scale)


def _workload(ctx: Ctx, path: str, w: Any, topo: TopoSpec, duration: float,
              index: int) -> WorkloadSpec:
    if not isinstance(w, Mapping):
        raise err(path, "must be a mapping with a 'type'")
    kind = w.get("type")
    if kind not in WORKLOAD_TYPES:
        raise err(f"{path}.type", f"unknown workload {kind!r}; choose one of "
                                   f"{list(WORKLOAD_TYPES)}")
    allowed = _COMMON | _KEYS[kind]
    for key in w:
        if key not in allowed:
            raise err(f"{path}.{key}", f"unknown key for a {kind} workload; expected one "
                                        f"of {sorted(allowed)}")
    p: dict[str, Any] = {}
    if kind in CDF_TYPES:
        p["load"] = load_fraction(f"{path}.load", w.get("load"))
        if kind == "cdf":
            if not isinstance(w.get("cdf"), str):
                raise err(f"{path}.cdf", "must name a built-in CDF or a .cdf file")
            cdf_path = Path(w["cdf"])
            if not cdf_path.is_absolute() and ctx.base_dir and w["cdf"] not in BUILTIN_CDFS:
                cdf_path = ctx.base_dir / cdf_path
            try:
                load_cdf(str(cdf_path) if w["cdf"] not in BUILTIN_CDFS else w["cdf"])
            except ConfigError as exc:
                raise err(f"{path}.cdf", str(exc)) from None
            p["cdf"] = str(cdf_path) if w["cdf"] not in BUILTIN_CDFS else w["cdf"]
        for key in ("senders", "receivers"):
            if key in w:
                p[key] = hosts(f"{path}.{key}", w[key], topo)
    elif kind == "incast":
        p["load"] = load_fraction(f"{path}.load", w.get("load"))
        p["senders"] = int_range(f"{path}.senders", w.get("senders", [2, 64]), 1, 1024)
        p["flows_per_sender"] = int_range(f"{path}.flows_per_sender",
                                       w.get("flows_per_sender", 1), 1, 100_000)
        if "sizes" in w:
            if not isinstance(w["sizes"], list) or not w["sizes"]:
                raise err(f"{path}.sizes", "must be a non-empty list of byte sizes")
            p["sizes"] = [integer(f"{path}.sizes[{i}]", s, 1, 10**10)
                          for i, s in enumerate(w["sizes"])]
        else:
            p["size_bytes"] = int_range(f"{path}.size_bytes",
                                     w.get("size_bytes", [10_000, 10_000_000]), 1, 10**10)
        if "receiver" in w:
            p["receiver"] = hosts(f"{path}.receiver", w["receiver"], topo)[0]
    elif kind == "partition_aggregate":
        p["aggregator"] = hosts(f"{path}.aggregator", w.get("aggregator"), topo)[0]
        workers = w.get("workers", len(topo.hosts) - 1)
        if isinstance(workers, int) and not isinstance(workers, bool):
            others = [h.name for h in topo.hosts if h.name != p["aggregator"]]
            integer(f"{path}.workers", workers, 1, len(others))
            workers = others[:workers]
        p["workers"] = hosts(f"{path}.workers", workers, topo)
        if p["aggregator"] in p["workers"]:
            raise err(f"{path}.workers", f"includes the aggregator {p['aggregator']}")
        p["response_bytes"] = integer(f"{path}.response_bytes", w.get("response_bytes", 64_000),
                                   1, 10**10)
        p["query_bytes"] = integer(f"{path}.query_bytes", w.get("query_bytes", 0), 0, 10**9)
        if "period_s" in w:
            p["period_s"] = time_value(ctx, f"{path}.period_s", w["period_s"])
            if p["period_s"] <= 0:
                raise err(f"{path}.period_s", "must be > 0")
        elif "load" in w:
            p["load"] = load_fraction(f"{path}.load", w["load"])
        else:
            raise err(path, "a partition_aggregate workload needs period_s or load")
    elif kind == "storage":
        pattern = w.get("pattern")
        if pattern not in STORAGE_PATTERNS:
            raise err(f"{path}.pattern", f"unknown storage pattern {pattern!r}; choose one "
                                          f"of {sorted(STORAGE_PATTERNS)}")
        p["pattern"] = pattern
        p["io_depth"] = integer(f"{path}.io_depth", w.get("io_depth", 16), 1, 128)
        p["max_requests"] = integer(f"{path}.max_requests", w.get("max_requests", 200_000), 1,
                                 10**8)
        for key in ("compute", "storage"):
            if key in w:
                p[key] = hosts(f"{path}.{key}", w[key], topo)
        if ("compute" in p) != ("storage" in p):
            raise err(path, "give both compute and storage host lists, or neither (3:1 "
                             "split of all hosts)")
        if len(topo.hosts) < 4 and "compute" not in p:
            raise err(path, f"topology {topo.name} has {len(topo.hosts)} hosts; the 3:1 "
                             f"compute:storage split needs at least 4")
    elif kind == "bulk":
        pairs = w.get("pairs")
        if not isinstance(pairs, list) or not pairs:
            raise err(f"{path}.pairs", "must be a list of [src, dst] host pairs")
        p["pairs"] = []
        for i, pair in enumerate(pairs):
            if not isinstance(pair, list) or len(pair) != 2 or pair[0] == pair[1]:
                raise err(f"{path}.pairs[{i}]", f"{pair!r} must be [src, dst], two hosts")
            p["pairs"].append(tuple(hosts(f"{path}.pairs[{i}]", pair, topo)))
    tag = w.get("tag", f"{kind}{index}" if index else kind)
    if not isinstance(tag, str) or not _NAME_RE.match(tag):
        raise err(f"{path}.tag", f"{tag!r} must be a word of letters, digits, '_', '-', '.'")
    return WorkloadSpec(kind, tag, windows(ctx, f"{path}.windows", w.get("windows"), duration),
                        size_scale(ctx, f"{path}.size_scale", w.get("size_scale")),
                        tuple(sorted(p.items())))


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
    if len(set(agents)) != len(agents):
        raise err("agents", f"{agents} has duplicates")
    host_cc = doc.get("host_cc", "dcqcn")
    if not isinstance(host_cc, str) or host_cc.partition(":")[0] not in HOST_CC:
        raise err("host_cc", f"{host_cc!r}; choose one of {list(HOST_CC)} (optionally "
                              f"':variant', e.g. 'dcqcn:hpcc-ns3', 'rlcc:model.json')")
    if host_cc.partition(":")[0] != "tcp":
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
                          description.strip(), source, tuple(ctx.paper))


def load_spec(path: str | Path) -> ExperimentSpec:
    """Read and validate a YAML spec file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"spec file {p} does not exist")
    try:
        doc = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}") from None
    return parse_spec(doc, str(p), p.resolve().parent)


def resolve(spec: ExperimentSpec) -> dict[str, Any]:
    """The full resolved configuration, as stored in ``spec.resolved.yaml``."""
    scale = spec.scale_obj
    topo = spec.topo()
    out = asdict(spec)
    out["workloads"] = [{"type": w.type, "tag": w.tag, "windows": [list(x) for x in w.windows],
                         "size_scale": w.size_scale,
                         **{k: (list(v) if isinstance(v, tuple) else v) for k, v in w.params}}
                        for w in spec.workloads]
    for w in out["workloads"]:
        if "pairs" in w:
            w["pairs"] = [list(x) for x in w["pairs"]]
        if w["type"] in CDF_TYPES:
            w["mean_size_bytes"] = load_cdf(w.get("cdf", w["type"])).mean * w["size_scale"]
    out["link_failures"] = [asdict(f) | {"links": list(f.links)} for f in spec.link_failures]
    out["seeds"] = list(spec.seeds)
    out["agents"] = list(spec.agents)
    out["outputs"] = list(spec.outputs)
    out["paper_values"] = [{"field": f, "paper_s": p, "used_s": u} for f, p, u in
                           spec.paper_values]
    out["scale"] = {**scale.to_dict(), "rate_factor": scale.rate_factor,
                    "time_factor": scale.time_factor, "bdp_factor": scale.bdp_factor}
    out["topology"] = {"text": spec.topology, "name": topo.name, "hosts": len(topo.hosts),
                       "switches": len(topo.switches), "links": len(topo.links)}
    return out
