"""p4cc.controlplane.grpc_deadline: a response stream drained with a deadline of ours
(a P4Runtime Read whose own deadline never ended it hung the control loop)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import grpc
import pytest

from p4cc.controlplane.grpc_deadline import Draining, StreamStuck, drain


class FakeCall:
    """A response stream: yields ``items``, then raises ``error`` or blocks until
    cancelled (at most ``block_s``; then it raises RuntimeError, so a drain that
    waited for it fails instead of hanging)."""

    def __init__(self, items: list[int], error: Exception | None = None,
                 block_s: float = 0.0) -> None:
        self.items, self.error, self.block_s = items, error, block_s
        self.cancelled = threading.Event()

    def __iter__(self) -> Iterator[int]:
        yield from self.items
        if self.error is not None:
            raise self.error
        if self.block_s and not self.cancelled.wait(self.block_s):
            raise RuntimeError("the drain waited for a stuck stream")

    def cancel(self) -> bool:
        self.cancelled.set()
        return True


class Unavailable(grpc.RpcError):
    pass


def test_a_stream_that_ends_is_returned_whole() -> None:
    assert drain(FakeCall([1, 2, 3]), 1.0) == [1, 2, 3]


def test_a_started_stream_is_drained_before_it_is_collected() -> None:
    """Draining consumes the stream in the background from its start: the caller can
    do other work (the telemetry poll's Thrift calls) and collect the result after."""
    class Watched(FakeCall):
        def __init__(self) -> None:
            super().__init__([4, 5])
            self.ended = threading.Event()

        def __iter__(self) -> Iterator[int]:
            yield from super().__iter__()
            self.ended.set()

    call = Watched()
    pending = Draining(call, 1.0)
    assert call.ended.wait(5.0)  # consumed without anybody asking for the result
    assert pending.result() == [4, 5]


def test_the_stream_s_error_reaches_the_caller() -> None:
    with pytest.raises(Unavailable):
        drain(FakeCall([1], Unavailable()), 1.0)


def test_a_stuck_stream_is_abandoned_and_cancelled() -> None:
    """A stream that neither ends nor fails: StreamStuck after timeout + grace (here
    0.1 s; the stuck stream would block 30 s), and the call is cancelled."""
    call = FakeCall([1], block_s=30.0)
    with pytest.raises(StreamStuck, match=r"0\.1 s"):
        drain(call, 0.05, grace_s=0.05)
    assert call.cancelled.is_set()


def test_a_stuck_read_is_a_switch_error_naming_the_switch() -> None:
    """P4RuntimeClient.read over a stream that never ends: a SwitchError naming the
    switch's address and the wait, which the control loop's fail-safe handles."""
    from p4cc.controlplane.p4runtime import P4RuntimeClient
    from p4cc.errors import SwitchError

    class Stub:
        def __init__(self) -> None:
            self.call = FakeCall([], block_s=30.0)

        def Read(self, req: object, timeout: float) -> FakeCall:  # (gRPC's method name)
            return self.call

    client = P4RuntimeClient("127.0.0.1:1", 0, timeout_s=0.05)
    stub = Stub()
    client._stub = stub  # type: ignore[assignment]
    client._stream_alive.set()
    with pytest.raises(SwitchError, match=r"^127\.0\.0\.1:1: Read: no end of the stream "
                                          r"within 1\.05 s$"):
        list(client.read([]))
    assert stub.call.cancelled.is_set()
