"""What the runner calls: the backend protocol, the sink backends write through, a registry.

A backend plays one (spec, seed, agent variant): it starts the fabric (BMv2 + Mininet, or
the simulator), runs ``agent_name`` on every switch with interval ``spec.interval_s``,
plays the schedule (``p4cc.traffic.workloads.SCHEDULE_COLUMNS``; ``after`` = start when
that flow completes, ``cls == "bulk"`` = iperf3 until ``stop_s``) and the link events
(``p4cc.experiment.schedule.LINK_EVENT_COLUMNS``), and writes what it measures through the
sink *as it goes* so that an interrupted run keeps its data.  It must stop everything it
started before ``run`` returns or raises.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import pandas as pd

from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError
from p4cc.experiment.spec import ExperimentSpec

#: backend name -> "module:Class" (imported only when asked for); the names a spec's
#: ``backend:`` may use (p4cc.experiment.spec.BACKENDS).  Tests pass their own Backend
#: instances to ``run_spec`` instead of naming them here.
BACKENDS = {
    "sim": "p4cc.experiment.sim_backend:SimBackend",
    "bmv2": "p4cc.experiment.bmv2.backend:Bmv2Backend",
}

Progress = Callable[[float], None]  # called with the run time reached, seconds


@runtime_checkable
class RunSink(Protocol):
    """Where a backend writes results (implemented by ``p4cc.experiment.store.RunWriter``).
    Every call appends to disk immediately."""

    path: Path
    seed: int

    def telemetry(self, records: Iterable[PortTelemetry]) -> None: ...

    def flows(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Flow records, each with exactly p4cc.analysis.runs.FLOW_RECORD_COLUMNS."""

    def hostcc(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Host CC traces: t_s, host, flow_id, rate_bps, plus algorithm state columns."""

    def int_reports(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Decoded INT reports: t_s, switch, flow_id, hop fields."""

    def table(self, name: str, rows: Iterable[Mapping[str, Any]]) -> None:
        """Any other append-only table (e.g. ``bulk`` iperf3 results, ``agent`` actions)."""

    def log(self, message: str) -> None: ...


@runtime_checkable
class Backend(Protocol):
    name: str

    def check(self, spec: ExperimentSpec) -> None:
        """Raise ConfigError naming the unsupported feature and this backend, or a
        ToolMissingError, before anything starts."""

    def run(self, spec: ExperimentSpec, schedule: pd.DataFrame, link_events: pd.DataFrame,
            agent_name: str, sink: RunSink, progress: Progress) -> None: ...


def get_backend(name: str) -> Backend:
    """Instantiate a backend by name, importing its module only now."""
    target = BACKENDS.get(name)
    if target is None:
        raise ConfigError(f"unknown backend {name!r}; choose one of {sorted(BACKENDS)}")
    module_name, _, cls_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, cls_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"backend {name!r} is not available: cannot import {target} ({exc}); "
            f"choose another backend with --backend"
        ) from None
    backend = cls()
    if not isinstance(backend, Backend):
        raise ConfigError(f"{target} does not implement p4cc.experiment.backend.Backend")
    return backend
