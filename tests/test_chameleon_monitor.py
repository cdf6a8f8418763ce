"""CHAMELEON's runtime metric monitor: format, filtered statistics, the controller's
listener (garbage counted, a silent reporter dropped without stalling)."""

from __future__ import annotations

import json
import math
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from p4cc.chameleon.client import MonitorClient, ReportBuilder
from p4cc.chameleon.server import MonitorServer, MonitorState
from p4cc.chameleon.stats import Periods, Window, summarize
from p4cc.chameleon.wire import VERSION, Message, ProtocolError, decode, encode
from p4cc.scale import get_scale


def wait_for(cond: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    """Poll ``cond`` until it holds or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)  # poll interval of the condition
    return cond()


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="p4cc-mon-"))  # short: AF_UNIX paths <= 108 B
    yield d
    shutil.rmtree(d, ignore_errors=True)


# -- format ------------------------------------------------------------------------------
def test_roundtrip_and_version() -> None:
    m = Message("report", "h1", t=1.5, metrics={"rx_bps": {"mean": 3.0, "n": 2.0}})
    line = encode(m)
    assert line.endswith(b"\n") and json.loads(line)["v"] == VERSION
    assert decode(line) == m
    s = Message("settings", "controller", round=3, params={"rai_bps": 5e6})
    assert decode(encode(s)) == s


@pytest.mark.parametrize("line, why", [
    (b"not json", "not JSON"),
    (b"[1, 2]", "JSON object"),
    (b'{"v": 2, "type": "hello", "id": "h1", "role": "host"}', "version"),
    (b'{"v": 1, "type": "shout", "id": "h1"}', "unknown type"),
    (b'{"v": 1, "type": "hello", "id": "", "role": "host"}', "id must"),
    (b'{"v": 1, "type": "hello", "id": "h1", "role": "nic"}', "role"),
    (b'{"v": 1, "type": "report", "id": "h1", "t": 0, "metrics": {"x": {"mean": "a"}}}',
     "finite number"),
    (b'{"v": 1, "type": "settings", "id": "c", "round": -1, "params": {}}', "round"),
])
def test_garbage_is_refused_with_a_reason(line: bytes, why: str) -> None:
    with pytest.raises(ProtocolError, match=why):
        decode(line)


# -- statistics ----------------------------------------------------------------------------
def test_summarize_filters_missing_and_outliers() -> None:
    t = np.arange(8, dtype=float)
    x = np.array([1.0, 1.1, math.nan, 0.9, 1.0, 50.0, 1.05, 0.95])
    s = summarize(t, x)
    assert s["n"] == 6 and s["dropped"] == 2  # the NaN and the outlier 50
    assert s["mean"] == pytest.approx(1.0, abs=0.01) and s["max"] == 1.1
    assert summarize(t, np.full(8, math.nan)) == {"n": 0.0, "dropped": 8.0}
    up = summarize(t, 2.0 * t)
    assert up["slope"] == pytest.approx(2.0)


def test_window_and_builder_periods() -> None:
    p = Periods.for_scale(get_scale("paper"))
    assert (p.short_s, p.long_s) == pytest.approx((10e-3, 100e-3))  # the poster's
    assert Periods.for_scale(get_scale("testbed")).long_s == pytest.approx(25.0)  # ×250
    b = ReportBuilder("s1", Periods(0.01, 0.05))
    for k in range(5):
        b.sample(k * 0.01, {"q": float(k), "pfc": None})
        assert not b.due(k * 0.01)
    b.sample(0.05, {"q": 5.0})
    assert b.due(0.05)
    rep = b.report(0.05)
    assert rep.metrics["q"]["n"] == 6 and rep.metrics["pfc"]["n"] == 0
    assert len(b.window) == 0
    w = Window()
    w.add(0.0, {"a": 1.0})
    assert w.flush()["a"]["mean"] == 1.0


# -- the listener ----------------------------------------------------------------------------
def test_state_counts_garbage_and_expires_by_deadline() -> None:
    now = [0.0]
    st = MonitorState(expiry_s=1.0, clock=lambda: now[0])
    st.handle_line(encode(Message("hello", "h1", role="host")))
    st.handle_line(encode(Message("report", "h1", t=0.0, metrics={})))
    with pytest.raises(ProtocolError):
        st.handle_line(b"garbage")
    with pytest.raises(ProtocolError, match="may not send"):
        st.handle_line(encode(Message("settings", "h1", params={})))
    assert st.counters.garbage == 2 and st.counters.reports == 1
    now[0] = 0.9
    assert set(st.live()) == {"h1"}
    now[0] = 1.01
    assert st.live() == {} and st.counters.expired == 1


def test_silent_reporter_dropped_without_stalling_the_controller(sock_dir: Path) -> None:
    got: list[Message] = []
    with MonitorServer(f"unix:{sock_dir}/m.sock", expiry_s=0.4) as srv:
        live = MonitorClient(srv.address, "h1", "host", got.append)
        silent = MonitorClient(srv.address, "h2", "host", lambda m: None)
        for c in (live, silent):
            assert c.send(Message("report", c.id, t=0.0, metrics={"rx_bps": {"mean": 1.0}}))
        assert wait_for(lambda: set(srv.state.live()) == {"h1", "h2"})
        # a third peer that stalls mid-line (no newline) must not hold the loop either
        stall = socket.socket(socket.AF_UNIX)
        stall.connect(str(srv.sockaddr))
        stall.sendall(b'{"v": 1, "type": "rep')
        t0 = time.monotonic()
        # h1 keeps reporting; h2 stays connected but silent
        while time.monotonic() - t0 < 0.8:
            live.send(Message("report", "h1", t=time.monotonic() - t0, metrics={}))
            live.poll(0.05)
        assert set(srv.state.live()) == {"h1"}
        assert srv.state.counters.expired >= 1
        # the controller still answers at once
        t1 = time.monotonic()
        assert srv.broadcast(Message("settings", "controller", round=1,
                                     params={"rai_bps": 1e6})) == 1
        assert wait_for(lambda: live.poll(0.02) >= 0 and bool(got), 2.0)
        assert time.monotonic() - t1 < 1.0
        assert got[0].params == {"rai_bps": 1e6}
        stall.close()
        live.close()
        silent.close()


def test_garbage_over_the_connection_is_answered_and_counted(sock_dir: Path) -> None:
    with MonitorServer(f"unix:{sock_dir}/m.sock", expiry_s=5.0) as srv:
        raw = socket.socket(socket.AF_UNIX)
        raw.connect(str(srv.sockaddr))
        raw.settimeout(2.0)
        raw.sendall(b"hello there\n" + b'{"v": 9, "type": "hello", "id": "x", "role": "host"}\n')
        buf = b""
        while buf.count(b"\n") < 2:
            buf += raw.recv(4096)
        errs = [decode(line) for line in buf.splitlines()]
        assert [e.type for e in errs] == ["error", "error"]
        assert "not JSON" in errs[0].error and "version" in errs[1].error
        assert srv.state.counters.garbage == 2
        # the same connection may go on with valid messages
        raw.sendall(encode(Message("hello", "s1", role="switch")))
        assert wait_for(lambda: "s1" in srv.state.live("switch"))
        # an endless line is garbage too: that connection is closed, the server lives on
        raw.sendall(b"x" * (70_000))
        assert wait_for(lambda: srv.state.counters.garbage == 3)
        raw.close()
        ok = MonitorClient(srv.address, "h9", "host", lambda m: None)
        assert ok.send(Message("report", "h9", t=0.0, metrics={}))
        assert wait_for(lambda: "h9" in srv.state.live())
        ok.close()


def test_tcp_listener_on_localhost() -> None:
    with MonitorServer("tcp:127.0.0.1:0", expiry_s=5.0) as srv:
        assert srv.address.startswith("tcp:127.0.0.1:")
        c = MonitorClient(srv.address, "s1", "switch", lambda m: None)
        assert c.send(Message("report", "s1", t=0.0, metrics={}))
        assert wait_for(lambda: "s1" in srv.state.live("switch"))
        c.close()


def test_client_survives_a_missing_controller(sock_dir: Path) -> None:
    c = MonitorClient(f"unix:{sock_dir}/nobody.sock", "h1", "host", lambda m: None)
    assert not c.send(Message("report", "h1", t=0.0, metrics={}))
    assert c.poll(0.0) == 0 and c.errors >= 1 and "connect" in c.last_error
