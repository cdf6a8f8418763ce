"""One real simple_switch_grpc with p4cc's program, connected and set up, for the
`bmv2` tests (no interfaces, no root): skips with the reason when BMv2, its Thrift
modules or the compiled program are missing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from p4cc.bench.controlloop import connected_switch, skip_reason
from p4cc.controlplane.ecn import EcnConfig
from p4cc.controlplane.switch import SwitchControl
from p4cc.errors import P4ccError
from p4cc.topo.spec import parse_topo


@contextmanager
def live_switch(topo_text: str, switch: str | None = None,
                setting: EcnConfig | None = None) -> Iterator[SwitchControl]:
    """``switch`` of the topology (default its first), set up with ``setting``."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    pytest.importorskip("thrift")
    from p4cc.controlplane.thrift import load_runtime_modules

    try:
        load_runtime_modules()
    except P4ccError as exc:
        pytest.skip(str(exc))
    topo = parse_topo(topo_text)
    spec = topo.switch(switch) if switch else topo.switches[0]
    with connected_switch(spec, topo) as control:
        control.setup(setting) if setting is not None else control.setup()
        yield control
