"""Workload types: one registry entry per ``type:`` of a spec's workload.

Each entry (:class:`WorkloadKind`) has a typed, frozen parameter dataclass (its fields
are the type's own spec keys, with their help), a parser that validates a spec mapping
into it (errors name the field path, ``workloads[1].load: 1.5 is outside (0, 1]``) and
a generator that turns it into flows for one active window (p4cc.traffic.workloads).
p4cc.experiment.spec and p4cc.experiment.schedule look types up here by name
(:func:`get_kind`); the order of ``KINDS`` is the order the spec's errors list them in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import pandas as pd

from p4cc.errors import ConfigError
from p4cc.topo.spec import TopoSpec
from p4cc.traffic import workloads as wl
from p4cc.traffic.cdf import BUILTIN_CDFS, load_cdf
from p4cc.traffic.fields import (
    Ctx,
    err,
    hosts,
    int_range,
    integer,
    load_fraction,
    time_value,
)

Hosts = tuple[str, ...]


def _help(text: str) -> dict[str, str]:
    return {"help": text}


# ------------------------------------------------------------------ parameter types
@dataclass(frozen=True)
class PoissonParams:
    """A built-in flow-size CDF with per-sender Poisson arrivals (REFERENCE §4)."""

    load: float = field(metadata=_help("offered load per sender, (0, 1] of its link"))
    senders: Hosts | None = field(default=None, metadata=_help("sending hosts (default all)"))
    receivers: Hosts | None = field(default=None,
                                    metadata=_help("destinations (default all others)"))


@dataclass(frozen=True)
class CdfFileParams(PoissonParams):
    """As PoissonParams, sizes from a named built-in CDF or a ``.cdf`` file."""

    cdf: str = field(default="", metadata=_help("built-in CDF name or .cdf file path"))


@dataclass(frozen=True)
class IncastParams:
    """ACC §4.4.1 incast bursts: p senders x q flows to one receiver."""

    load: float = field(metadata=_help("the receiver link's average load, (0, 1]"))
    senders: tuple[int, int] = field(metadata=_help("[min, max] senders per burst"))
    flows_per_sender: tuple[int, int] = field(metadata=_help("[min, max] flows per sender"))
    size_bytes: tuple[int, int] | None = field(
        default=None, metadata=_help("[min, max] log-uniform flow size (unless sizes)"))
    sizes: tuple[int, ...] | None = field(default=None,
                                          metadata=_help("flow sizes to pick uniformly from"))
    receiver: str | None = field(default=None,
                                 metadata=_help("fixed receiver (default random per burst)"))


@dataclass(frozen=True)
class PartitionAggregateParams:
    """Synchronised worker responses to one aggregator (DCTCP §2, PET §1)."""

    aggregator: str = field(metadata=_help("the host receiving the responses"))
    workers: Hosts = field(metadata=_help("responding hosts (or their number)"))
    response_bytes: int = field(metadata=_help("bytes of each response"))
    query_bytes: int = field(metadata=_help("bytes of each query; 0 = no query"))
    period_s: float | None = field(default=None, metadata=_help("time between bursts"))
    load: float | None = field(default=None,
                               metadata=_help("aggregator link load, instead of period_s"))


@dataclass(frozen=True)
class StorageParams:
    """fio-style closed-loop IO of ACC Table 1."""

    pattern: str = field(metadata=_help(f"one of {sorted(wl.STORAGE_PATTERNS)}"))
    io_depth: int = field(metadata=_help("outstanding requests per compute node"))
    max_requests: int = field(metadata=_help("cap on the requests generated"))
    compute: Hosts | None = field(default=None,
                                  metadata=_help("compute nodes (default a 3:1 split)"))
    storage: Hosts | None = field(default=None, metadata=_help("storage nodes"))


@dataclass(frozen=True)
class BulkParams:
    """Long-lived background flows (iperf3 on BMv2)."""

    pairs: tuple[tuple[str, str], ...] = field(metadata=_help("[src, dst] host pairs"))


#: what WorkloadSpec.params holds (CdfFileParams is a PoissonParams)
WorkloadParams = (PoissonParams | IncastParams | PartitionAggregateParams | StorageParams
                  | BulkParams)
P = TypeVar("P", bound=WorkloadParams)


@dataclass(frozen=True)
class Window:
    """Where and when a workload generates flows: one of its active windows."""

    hosts: Hosts
    t0: float
    t1: float
    rate_bps: float  # host link rate
    tag: str
    size_scale: float


@dataclass(frozen=True)
class WorkloadKind(Generic[P]):
    """One workload type: its parameters, parser and flow generator."""

    name: str
    params_type: type[P]
    parse: Callable[[Ctx, str, Mapping[str, Any], TopoSpec], P]
    generate: Callable[[np.random.Generator, P, Window], pd.DataFrame]
    #: mean flow size in bytes before size_scale (stored with the resolved spec), or None
    mean_size: Callable[[P], float] | None = None

    @property
    def keys(self) -> frozenset[str]:
        """The type's own spec keys (besides type, tag, windows, size_scale)."""
        return frozenset(f.name for f in fields(self.params_type))

    @property
    def help(self) -> str:
        return (self.params_type.__doc__ or "").strip()


def params_dict(params: WorkloadParams) -> dict[str, Any]:
    """The parameters that are set, by key name (the resolved spec's view)."""
    return {f.name: getattr(params, f.name) for f in sorted(fields(params), key=lambda f: f.name)
            if getattr(params, f.name) is not None}


# --------------------------------------------------------------------------- parsers
def _poisson(ctx: Ctx, path: str, w: Mapping[str, Any], topo: TopoSpec,
             cdf_key: bool) -> PoissonParams:
    """PoissonParams; with ``cdf_key`` (type ``cdf``) CdfFileParams with the CDF checked."""
    load = load_fraction(f"{path}.load", w.get("load"))
    cdf = None
    if cdf_key:
        if not isinstance(w.get("cdf"), str):
            raise err(f"{path}.cdf", "must name a built-in CDF or a .cdf file")
        cdf_path = Path(w["cdf"])
        if not cdf_path.is_absolute() and ctx.base_dir and w["cdf"] not in BUILTIN_CDFS:
            cdf_path = ctx.base_dir / cdf_path
        try:
            load_cdf(str(cdf_path) if w["cdf"] not in BUILTIN_CDFS else w["cdf"])
        except ConfigError as exc:
            raise err(f"{path}.cdf", str(exc)) from None
        cdf = str(cdf_path) if w["cdf"] not in BUILTIN_CDFS else w["cdf"]
    ends = {k: tuple(hosts(f"{path}.{k}", w[k], topo)) if k in w else None
            for k in ("senders", "receivers")}
    if cdf is None:
        return PoissonParams(load, ends["senders"], ends["receivers"])
    return CdfFileParams(load, ends["senders"], ends["receivers"], cdf)


def _incast(ctx: Ctx, path: str, w: Mapping[str, Any], topo: TopoSpec) -> IncastParams:
    load = load_fraction(f"{path}.load", w.get("load"))
    senders = int_range(f"{path}.senders", w.get("senders", [2, 64]), 1, 1024)
    per_sender = int_range(f"{path}.flows_per_sender", w.get("flows_per_sender", 1), 1,
                           100_000)
    sizes = size_range = None
    if "sizes" in w:
        if not isinstance(w["sizes"], list) or not w["sizes"]:
            raise err(f"{path}.sizes", "must be a non-empty list of byte sizes")
        sizes = tuple(integer(f"{path}.sizes[{i}]", s, 1, 10**10)
                      for i, s in enumerate(w["sizes"]))
    else:
        size_range = int_range(f"{path}.size_bytes", w.get("size_bytes", [10_000, 10_000_000]),
                               1, 10**10)
    receiver = hosts(f"{path}.receiver", w["receiver"], topo)[0] if "receiver" in w else None
    return IncastParams(load, senders, per_sender, size_range, sizes, receiver)


def _partition_aggregate(ctx: Ctx, path: str, w: Mapping[str, Any],
                         topo: TopoSpec) -> PartitionAggregateParams:
    aggregator = hosts(f"{path}.aggregator", w.get("aggregator"), topo)[0]
    workers = w.get("workers", len(topo.hosts) - 1)
    if isinstance(workers, int) and not isinstance(workers, bool):
        others = [h.name for h in topo.hosts if h.name != aggregator]
        integer(f"{path}.workers", workers, 1, len(others))
        workers = others[:workers]
    chosen = tuple(hosts(f"{path}.workers", workers, topo))
    if aggregator in chosen:
        raise err(f"{path}.workers", f"includes the aggregator {aggregator}")
    response = integer(f"{path}.response_bytes", w.get("response_bytes", 64_000), 1, 10**10)
    query = integer(f"{path}.query_bytes", w.get("query_bytes", 0), 0, 10**9)
    period = load = None
    if "period_s" in w:
        period = time_value(ctx, f"{path}.period_s", w["period_s"])
        if period <= 0:
            raise err(f"{path}.period_s", "must be > 0")
    elif "load" in w:
        load = load_fraction(f"{path}.load", w["load"])
    else:
        raise err(path, "a partition_aggregate workload needs period_s or load")
    return PartitionAggregateParams(aggregator, chosen, response, query, period, load)


def _storage(ctx: Ctx, path: str, w: Mapping[str, Any], topo: TopoSpec) -> StorageParams:
    pattern = w.get("pattern")
    if pattern not in wl.STORAGE_PATTERNS:
        raise err(f"{path}.pattern", f"unknown storage pattern {pattern!r}; choose one "
                                      f"of {sorted(wl.STORAGE_PATTERNS)}")
    io_depth = integer(f"{path}.io_depth", w.get("io_depth", 16), 1, 128)
    max_requests = integer(f"{path}.max_requests", w.get("max_requests", 200_000), 1, 10**8)
    nodes = {k: tuple(hosts(f"{path}.{k}", w[k], topo)) if k in w else None
             for k in ("compute", "storage")}
    if (nodes["compute"] is None) != (nodes["storage"] is None):
        raise err(path, "give both compute and storage host lists, or neither (3:1 "
                         "split of all hosts)")
    if len(topo.hosts) < 4 and nodes["compute"] is None:
        raise err(path, f"topology {topo.name} has {len(topo.hosts)} hosts; the 3:1 "
                         f"compute:storage split needs at least 4")
    return StorageParams(str(pattern), io_depth, max_requests, nodes["compute"],
                         nodes["storage"])


def _bulk(ctx: Ctx, path: str, w: Mapping[str, Any], topo: TopoSpec) -> BulkParams:
    pairs = w.get("pairs")
    if not isinstance(pairs, list) or not pairs:
        raise err(f"{path}.pairs", "must be a list of [src, dst] host pairs")
    out: list[tuple[str, str]] = []
    for i, pair in enumerate(pairs):
        if not isinstance(pair, list) or len(pair) != 2 or pair[0] == pair[1]:
            raise err(f"{path}.pairs[{i}]", f"{pair!r} must be [src, dst], two hosts")
        src, dst = hosts(f"{path}.pairs[{i}]", pair, topo)
        out.append((src, dst))
    return BulkParams(tuple(out))


# ------------------------------------------------------------------------ generators
def _poisson_kind(name: str) -> WorkloadKind[PoissonParams]:
    def cdf_of(p: PoissonParams) -> str:
        return p.cdf if isinstance(p, CdfFileParams) else name

    def generate(rng: np.random.Generator, p: PoissonParams, win: Window) -> pd.DataFrame:
        return wl.poisson_flows(rng, load_cdf(cdf_of(p)), win.hosts, p.load, win.rate_bps,
                                win.t0, win.t1, win.tag, win.size_scale, p.senders,
                                p.receivers)

    def parse(ctx: Ctx, path: str, w: Mapping[str, Any], topo: TopoSpec) -> PoissonParams:
        return _poisson(ctx, path, w, topo, cdf_key=name == "cdf")

    params_type = CdfFileParams if name == "cdf" else PoissonParams
    return WorkloadKind(name, params_type, parse, generate,
                        lambda p: load_cdf(cdf_of(p)).mean)


def _gen_incast(rng: np.random.Generator, p: IncastParams, win: Window) -> pd.DataFrame:
    return wl.incast(rng, win.hosts, senders=p.senders, flows_per_sender=p.flows_per_sender,
                     load=p.load, rate_bps=win.rate_bps, t0=win.t0, t1=win.t1, tag=win.tag,
                     receiver=p.receiver, size_range=p.size_bytes, sizes=p.sizes,
                     size_scale=win.size_scale)


def _gen_partition_aggregate(rng: np.random.Generator, p: PartitionAggregateParams,
                             win: Window) -> pd.DataFrame:
    return wl.partition_aggregate(rng, win.hosts, aggregator=p.aggregator, workers=p.workers,
                                  response_bytes=p.response_bytes, t0=win.t0, t1=win.t1,
                                  tag=win.tag, period_s=p.period_s, load=p.load,
                                  rate_bps=win.rate_bps, query_bytes=p.query_bytes,
                                  size_scale=win.size_scale)


def _gen_storage(rng: np.random.Generator, p: StorageParams, win: Window) -> pd.DataFrame:
    if p.compute is not None and p.storage is not None:
        compute, storage = list(p.compute), list(p.storage)
    else:
        compute, storage = wl.storage_split(win.hosts)
    return wl.storage(rng, pattern=p.pattern, compute=compute, storage_nodes=storage,
                      io_depth=p.io_depth, rate_bps=win.rate_bps, t0=win.t0, t1=win.t1,
                      tag=win.tag, size_scale=win.size_scale, max_requests=p.max_requests)


def _gen_bulk(rng: np.random.Generator, p: BulkParams, win: Window) -> pd.DataFrame:
    return wl.bulk(p.pairs, win.t0, win.t1, win.tag)


#: name -> kind, in the order errors list them (built-in CDFs, cdf, then the others).
KINDS: dict[str, WorkloadKind[Any]] = {
    **{name: _poisson_kind(name) for name in (*sorted(BUILTIN_CDFS), "cdf")},
    "incast": WorkloadKind("incast", IncastParams, _incast, _gen_incast),
    "partition_aggregate": WorkloadKind("partition_aggregate", PartitionAggregateParams,
                                        _partition_aggregate, _gen_partition_aggregate),
    "storage": WorkloadKind("storage", StorageParams, _storage, _gen_storage),
    "bulk": WorkloadKind("bulk", BulkParams, _bulk, _gen_bulk),
}


def get_kind(name: str) -> WorkloadKind[Any]:
    """The registered workload type ``name`` (ConfigError if there is none)."""
    kind = KINDS.get(name)
    if kind is None:
        raise ConfigError(f"unknown workload {name!r}; choose one of {list(KINDS)}")
    return kind
