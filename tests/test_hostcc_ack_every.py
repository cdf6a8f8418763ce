"""ACK coalescing (``--ack-every``): from ``host send`` through the bmv2 backend's hosts
to the AckReq bit on the wire, and its range check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from p4cc.cli import build_parser, main
from p4cc.errors import ConfigError
from p4cc.experiment.bmv2.launch import HostProcesses
from p4cc.experiment.default import DEFAULT_SPEC
from p4cc.experiment.schedule import build_schedule
from p4cc.experiment.spec import load_spec
from p4cc.hostcc import cc, wire
from p4cc.hostcc.cli_config import sender_config
from p4cc.hostcc.flow import Flow, FlowSpec
from p4cc.hostcc.sender_config import MAX_ACK_EVERY, SenderConfig
from p4cc.scale import get_scale

PAYLOAD = 1000 - wire.data_overhead()


def _asked(ack_every: int, packets: int = 40) -> list[int]:
    """PSNs whose AckReq bit is set when a flow of ``packets`` packets is sent."""
    f = Flow(1, FlowSpec("10.0.0.2", packets * PAYLOAD), cc.FixedController(1e6), 1000, 0.04,
             ack_every=ack_every)
    out = []
    for i in range(packets):
        buf = f.next_datagram(i * 1e-3)
        f.sent(i * 1e-3, len(buf))
        if wire.decode_bth(buf).ackreq:
            out.append(wire.decode_bth(buf).psn)
    return out


def test_ack_every_sets_the_ackreq_period_on_the_wire() -> None:
    assert _asked(16) == [15, 31, 39]  # every 16th packet and the last one
    assert _asked(4) == [3, 7, 11, 15, 19, 23, 27, 31, 35, 39]
    assert _asked(1) == list(range(40))


def _send_args(ack_every: int | None, tmp_path: Path) -> list[str]:
    spec = load_spec(DEFAULT_SPEC)
    topo = spec.topo()
    schedule, _events = build_schedule(spec, 1, topo)
    hosts = HostProcesses(None, spec, topo, schedule, tmp_path, lambda line: None,
                          ack_every=ack_every)
    return hosts._send_args("h1", tmp_path, "dcqcn", 0.016)


@pytest.mark.parametrize("ack_every", [None, 1, 4])
def test_the_bmv2_hosts_pass_ack_every_to_their_senders(ack_every: int | None,
                                                        tmp_path: Path) -> None:
    argv = ["host", "send", *_send_args(ack_every, tmp_path), "--scale", "testbed-5m"]
    assert ("--ack-every" in argv) == (ack_every is not None)
    args = build_parser().parse_args(argv)
    cfg = sender_config(args, get_scale("testbed-5m"))
    assert cfg.ack_every == (SenderConfig().ack_every if ack_every is None else ack_every)


@pytest.mark.parametrize("bad", [0, -3, MAX_ACK_EVERY + 1])
def test_ack_every_out_of_range_is_a_clear_error(bad: int,
                                                 capsys: pytest.CaptureFixture[Any]) -> None:
    with pytest.raises(ConfigError, match="ack_every"):
        SenderConfig(ack_every=bad)
    assert main(["host", "send", "--dst", "127.0.0.1", "--size", "10",
                 "--ack-every", str(bad)]) == 2
    assert "ack_every" in capsys.readouterr().err


def test_bench_testbed_refuses_ack_every_off_bmv2() -> None:
    from p4cc.bench import testbed

    with pytest.raises(ConfigError, match="--ack-every"):
        list(testbed.run(["--backend", "sim", "--ack-every", "1"]))


@pytest.mark.parametrize("bad", [0, MAX_ACK_EVERY + 1])
def test_bmv2_backend_refuses_a_bad_ack_every_before_any_run(bad: int) -> None:
    from p4cc.experiment.bmv2.backend import Bmv2Backend

    with pytest.raises(ConfigError, match="ack_every"):
        Bmv2Backend(ack_every=bad)
    assert Bmv2Backend(ack_every=1).ack_every == 1
