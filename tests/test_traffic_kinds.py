"""The workload-type registry (p4cc.traffic.kinds): typed parameters, one entry per type."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from p4cc.errors import ConfigError
from p4cc.experiment.spec import parse_spec
from p4cc.traffic.cdf import BUILTIN_CDFS
from p4cc.traffic.kinds import (
    KINDS,
    BulkParams,
    IncastParams,
    PartitionAggregateParams,
    PoissonParams,
    StorageParams,
    Window,
    get_kind,
)

BASE: dict[str, Any] = {"name": "k", "topology": "star,hosts=5", "duration_s": 1}


def test_registry_order_and_lookup() -> None:
    assert list(KINDS) == [*sorted(BUILTIN_CDFS), "cdf", "incast", "partition_aggregate",
                           "storage", "bulk"]
    with pytest.raises(ConfigError, match="unknown workload 'nope'; choose one of"):
        get_kind("nope")


@pytest.mark.parametrize("name", list(KINDS))
def test_params_are_frozen_typed_dataclasses_with_help(name: str) -> None:
    kind = get_kind(name)
    assert dataclasses.is_dataclass(kind.params_type)
    assert kind.params_type.__dataclass_params__.frozen  # type: ignore[attr-defined]
    fields = dataclasses.fields(kind.params_type)
    assert kind.keys == {f.name for f in fields}
    for f in fields:
        assert f.metadata.get("help"), f"{name}.{f.name} has no help"
        assert f.type, f"{name}.{f.name} has no type"
    assert kind.help


def test_spec_holds_typed_params() -> None:
    spec = parse_spec({**BASE, "workloads": [
        {"type": "websearch", "load": 0.3, "senders": "h1"},
        {"type": "incast", "load": 0.2, "sizes": [1000, 2000], "receiver": "h5"},
        {"type": "partition_aggregate", "aggregator": "h1", "workers": 2, "load": 0.1},
        {"type": "storage", "pattern": "vdi"},
        {"type": "bulk", "pairs": [["h1", "h2"]]}]})
    web, inc, pa, sto, bulk = (w.params for w in spec.workloads)
    assert web == PoissonParams(0.3, ("h1",), None)
    assert inc == IncastParams(0.2, (2, 64), (1, 1), None, (1000, 2000), "h5")
    assert pa == PartitionAggregateParams("h1", ("h2", "h3"), 64_000, 0, None, 0.1)
    assert sto == StorageParams("vdi", 16, 200_000, None, None)
    assert bulk == BulkParams((("h1", "h2"),))
    with pytest.raises(dataclasses.FrozenInstanceError):
        inc.load = 0.5  # type: ignore[misc]
    assert spec.workloads[1].p == {"flows_per_sender": (1, 1), "load": 0.2,
                                   "receiver": "h5", "senders": (2, 64),
                                   "sizes": (1000, 2000)}


def test_generator_is_looked_up_by_name() -> None:
    kind = get_kind("bulk")
    df = kind.generate(np.random.default_rng(1), BulkParams((("h1", "h2"), ("h3", "h2"))),
                       Window(("h1", "h2", "h3"), 0.5, 2.0, 1e7, "bg", 1.0))
    assert list(df["src"]) == ["h1", "h3"] and set(df["stop_s"]) == {2.0}
    assert set(df["tag"]) == {"bg"} and set(df["cls"]) == {"bulk"}
    assert get_kind("fbhdp").mean_size is not None and kind.mean_size is None
