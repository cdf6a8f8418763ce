"""Read a gRPC response stream with a deadline of our own, in case the call's is lost.

Seen in session 26 (grpcio 1.85.3): after the switch's gRPC server stopped, a P4Runtime
``Read`` (a unary-stream call) with a 0.5 s deadline sometimes never returned.  The
caller waited on the call's condition for a message the core never delivered; cancelling
the call did not wake it either (its status was already set, and the stream's iterator
waits for the pending message).  Under CPU load this hung 5-9 of 20 runs of
``tests/test_controlplane_loop.py::test_loop_fail_safe``, and once a whole CI run, with
the control loop stuck in its telemetry poll.  So the stream is drained by a daemon
thread, and the caller waits for that thread with a deadline: the control loop always
gets its answer or an error, and a stuck thread is abandoned (it holds no lock of ours).
"""

from __future__ import annotations

import threading
from typing import Any

#: how long after the call's own deadline the caller stops waiting (s)
GRACE_S = 1.0


class StreamStuck(Exception):
    """The stream neither ended nor failed within its deadline plus the grace."""


class Draining:
    """A response stream being drained by its daemon thread; :meth:`result` waits for it
    (with the deadline of :func:`drain`).  Lets a caller start a read and do other work
    -- the telemetry poll reads its Thrift registers meanwhile -- before it collects."""

    def __init__(self, call: Any, timeout_s: float, grace_s: float = GRACE_S) -> None:
        self.call = call
        self.wait_s = float(timeout_s) + grace_s
        self._box: dict[str, Any] = {}
        self._worker = threading.Thread(target=self._run, name="grpc-stream", daemon=True)
        self._worker.start()

    def _run(self) -> None:
        try:
            self._box["out"] = list(self.call)
        except BaseException as exc:  # handed to the caller by result()
            self._box["err"] = exc

    def result(self) -> list[Any]:
        """Every response, the ``grpc.RpcError`` the stream raised, or StreamStuck if the
        stream has not ended within the deadline plus the grace of this call (the call
        is then cancelled)."""
        self._worker.join(self.wait_s)
        if self._worker.is_alive():
            self.call.cancel()
            raise StreamStuck(f"no end of the stream within {self.wait_s:g} s")
        if "err" in self._box:
            raise self._box["err"]
        out: list[Any] = self._box["out"]
        return out


def drain(call: Any, timeout_s: float, grace_s: float = GRACE_S) -> list[Any]:
    """Every response of the response stream ``call``, the ``grpc.RpcError`` it raised,
    or StreamStuck after ``timeout_s + grace_s`` (the call is then cancelled)."""
    return Draining(call, timeout_s, grace_s).result()
