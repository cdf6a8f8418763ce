"""Flows that start when another completes (p4cc.hostcc.chain), without a network."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4cc.experiment.bmv2.collect import _started_order
from p4cc.experiment.spec import ExperimentSpec
from p4cc.hostcc.chain import FlowChain
from p4cc.hostcc.flow import FlowSpec


def _spec(ref: int, start: float = 0.0, after: int = -1, stop: float = float("inf")
          ) -> FlowSpec:
    return FlowSpec("10.0.0.2", 1000, start, ref=ref, after=after, stop_s=stop)


def test_local_chain_starts_at_completion() -> None:
    ch = FlowChain([_spec(0), _spec(1, after=0), _spec(2, start=5.0, after=1)])
    assert [s.ref for s in ch.due(0.0)] == [0]
    assert ch.due(1.0) == [] and not ch.exhausted()
    ch.completed(_spec(0), 1.5)
    (s1,) = ch.due(1.5)
    assert s1.ref == 1 and s1.start_s == 1.5  # start = completion time
    ch.completed(s1, 2.0)
    assert ch.due(2.0) == [] and ch.next_start() == 5.0  # its own start_s is later
    assert [s.ref for s in ch.due(5.0)] == [2] and ch.exhausted()


def test_chain_across_senders_through_the_completions_file(tmp_path: Path) -> None:
    shared = tmp_path / "completions"
    a = FlowChain([_spec(10)], shared)  # host A sends the request
    b = FlowChain([_spec(11, after=10), _spec(12, after=99)], shared)  # host B responds
    assert [s.ref for s in a.due(0.0)] == [10]
    assert b.due(0.5) == []
    a.completed(_spec(10), 0.7)
    b.completed(_spec(50), 0.7)  # B's own completions do not confuse what it reads
    (r,) = b.due(0.8)
    assert r.ref == 11 and r.start_s == 0.7  # due at A's completion, read at 0.8
    assert not b.exhausted()  # 12 still waits for a flow someone may complete
    assert sorted(b.not_started(), key=lambda s: s.ref)[0].ref == 12
    a.close()
    b.close()
    assert not (tmp_path / "completions.wake").exists()  # sockets and folder removed


def test_another_senders_start_and_completion_wake_the_waiting_sender(tmp_path: Path
                                                                     ) -> None:
    """B waits for A's flow 10: A's start line lets B set flow 11 up ahead, and A's
    start and completion each make B's wake-up socket readable (a select wakes at once);
    a completion line from the future (clocks a hair apart) releases at the reader's now."""
    import select

    shared = tmp_path / "completions"
    a = FlowChain([_spec(10), _spec(20, after=10)], shared)  # 20 follows 10 on A itself
    b = FlowChain([_spec(11, after=10)], shared)
    assert b.wake_socket is not None and a.wake_socket is not None
    assert b.standing_by(0.0, 0.1) == []  # 10 has not started
    assert [s.ref for s in a.due(0.0)] == [10]  # A writes "s 10": B waits for it
    assert select.select([b.wake_socket], [], [], 1.0)[0] == [b.wake_socket]
    assert b.due(0.1) == []  # (reads the file, drains the wake-up)
    assert select.select([b.wake_socket], [], [], 0.0)[0] == []
    assert [s.ref for s in b.standing_by(0.1, 0.1)] == [11]
    a.completed(_spec(10), 0.5)
    assert [s.ref for s in a.due(0.5)] == [20]  # A's own waiter
    assert select.select([b.wake_socket], [], [], 1.0)[0] == [b.wake_socket]
    (r,) = b.due(0.45)
    assert r.ref == 11 and r.start_s == 0.45
    text = shared.read_text().split("\n")
    assert text[:2] == ["s 10", "10 0.500000"], text
    a.close()
    b.close()


def test_wake_up_under_a_path_too_long_for_a_socket(tmp_path: Path) -> None:
    """A run directory deeper than sun_path allows (a sweep's point folder) still gets
    wake-up sockets, bound through /proc/self/fd/<fd>/<name>: A's start wakes B at once."""
    import os
    import select

    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    shared = deep / "completions"
    a = FlowChain([_spec(10)], shared)
    b = FlowChain([_spec(11, after=10)], shared)
    assert a.wake_socket is not None and b.wake_socket is not None
    assert len(os.fsencode(deep / "completions.wake" / "x")) > 107  # too long as a path
    assert [s.ref for s in a.due(0.0)] == [10]  # "s 10" appended, B woken
    assert select.select([b.wake_socket], [], [], 1.0)[0] == [b.wake_socket]
    a.completed(_spec(10), 0.5)
    (r,) = b.due(0.5)
    assert r.ref == 11
    fds = (a._wake_dirfd, b._wake_dirfd)
    assert None not in fds
    a.close()
    b.close()
    assert not (deep / "completions.wake").exists()  # sockets and folder removed
    for fd in fds:  # and the folder's descriptors closed
        with pytest.raises(OSError):
            os.fstat(fd)  # type: ignore[arg-type]


def test_a_wake_socket_that_cannot_bind_falls_back_to_polling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    monkeypatch.setattr(FlowChain, "_address", lambda self, path: "/nonexistent/dir/sock")
    with caplog.at_level("WARNING", logger="p4cc.hostcc.chain"):
        ch = FlowChain([_spec(1, after=0)], deep / "completions")
    assert "cannot bind a wake-up socket" in caplog.text and "next pass" in caplog.text
    assert ch.wake_socket is None and ch._wake_dirfd is None
    assert not (deep / "completions.wake").exists()
    ch.close()


def test_released_after_stop_is_skipped() -> None:
    ch = FlowChain([_spec(0), _spec(1, after=0, stop=1.0)])
    ch.due(0.0)
    ch.completed(_spec(0), 2.0)
    assert ch.due(2.0) == [] and ch.skipped == 1


def test_collect_maps_flows_by_their_ref() -> None:
    fct = [{"flow_id": "1", "ref": "7"}, {"flow_id": "2", "ref": "3"},
           {"flow_id": "", "ref": "9"}]  # started out of schedule order; 9 never started
    assert _started_order(fct, [3, 7, 9]) == [7, 3]
    assert _started_order([{"flow_id": "1"}], [4, 5]) == [4, 5]  # older senders: no ref


def test_flows_standing_by_for_a_running_local_flow_are_handed_out_once() -> None:
    """A waiting flow is handed out for set-up ahead once the flow it waits for (this
    sender's) has started and its own start is within the lead; not for another
    sender's flow, not before the one it waits for has started."""
    ch = FlowChain([_spec(0), _spec(1, start=0.5, after=0), _spec(2, start=9.0, after=0),
                    _spec(3, after=1), _spec(4, after=77)])
    assert ch.standing_by(0.0, 0.1) == []  # 0 has not started yet
    assert [s.ref for s in ch.due(0.0)] == [0]
    assert ch.standing_by(0.0, 0.1) == []  # 1 starts at 0.5 at the earliest
    assert [s.ref for s in ch.standing_by(0.45, 0.1)] == [1]
    assert ch.standing_by(0.46, 0.1) == []  # once
    assert ch.standing_by(5.0, 0.1) == []  # 2 (at 9.0) not yet; 3 waits for 1, not started
    ch.completed(_spec(0), 1.0)
    assert [s.ref for s in ch.due(1.0)] == [1]
    assert [s.ref for s in ch.standing_by(1.0, 0.1)] == [3]  # 4 waits for another sender


def test_a_flow_stands_by_from_its_hand_out_until_it_starts() -> None:
    """``standing`` (what keeps a sender's boost on, SenderConfig.chain_rt) holds from
    the moment ``standing_by`` hands a waiting flow out until ``due`` starts it, or
    skips it because it was released after its stop."""
    ch = FlowChain([_spec(0), _spec(1, after=0), _spec(2, after=1, stop=0.5)])
    assert not ch.standing()
    assert [s.ref for s in ch.due(0.0)] == [0]
    assert not ch.standing()  # not handed out yet
    assert [s.ref for s in ch.standing_by(0.0, 0.1)] == [1]
    assert ch.standing()
    ch.completed(_spec(0), 0.2)
    assert ch.standing()  # released, not started
    assert [s.ref for s in ch.due(0.2)] == [1]
    assert [s.ref for s in ch.standing_by(0.2, 0.1)] == [2]
    assert ch.standing()
    ch.completed(_spec(1), 0.6)
    assert ch.due(0.6) == [] and ch.skipped == 1  # after its stop
    assert not ch.standing()


def test_released_flows_with_a_later_start_are_handed_out_ahead_of_it() -> None:
    """A chained flow released long before its own start (its predecessor completed
    early: a closed-loop all-to-all whose collectives fit their period) is handed out
    within the lead of that start, once -- it was not before: set up only when due."""
    ch = FlowChain([_spec(0), _spec(1, start=2.5, after=0)])
    ch.due(0.0)
    ch.completed(_spec(0), 0.3)  # released; due at 2.5
    assert ch.standing_by(0.3, 0.05) == [] and ch.next_start() == 2.5
    assert [s.ref for s in ch.standing_by(2.46, 0.05)] == [1]
    assert ch.standing_by(2.47, 0.05) == []
    assert [s.ref for s in ch.due(2.5)] == [1]


def _bmv2_send_args(spec: ExperimentSpec, tmp_path: Path) -> list[str]:
    from p4cc.experiment.bmv2.launch import HostProcesses
    from p4cc.experiment.schedule import build_schedule

    topo = spec.topo()
    schedule, _events = build_schedule(spec, 1, topo)
    hosts = HostProcesses(None, spec, topo, schedule, tmp_path, lambda line: None)
    src = str(schedule["src"].iloc[0])
    return hosts._send_args(src, tmp_path, "dcqcn", 0.016)


def test_bmv2_senders_share_a_completions_file_only_when_flows_are_chained(tmp_path: Path
                                                                          ) -> None:
    """The completions file (and its wake-ups) costs every completion a write and a
    datagram per sender: a schedule without ``after`` runs without it."""
    from p4cc.experiment.default import DEFAULT_SPEC
    from p4cc.experiment.spec import load_spec, parse_spec

    assert "--completions" not in _bmv2_send_args(load_spec(DEFAULT_SPEC), tmp_path)
    storage = parse_spec({"name": "st", "backend": "bmv2", "scale": "testbed-5m",
                          "topology": "star,hosts=4", "duration_s": 2, "seed": 1,
                          "agents": ["secn1"], "host_cc": "dcqcn",
                          "workloads": [{"type": "storage", "tag": "vdi", "pattern": "vdi",
                                         "io_depth": 2}]})
    argv = _bmv2_send_args(storage, tmp_path)
    assert argv[argv.index("--completions") + 1] == str(tmp_path / "completions")
