"""P4Runtime Write errors: one exception carrying the per-update errors.

As p4runtime-shell's ``P4RuntimeWriteException``: a failed Write's
``grpc-status-details-bin`` trailer is a ``google.rpc.Status`` whose ``details`` hold one
``p4.v1.Error`` per update (P4Runtime spec §12.3, "Error reporting").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import grpc
from google.rpc import code_pb2, status_pb2

from p4cc.controlplane.p4rt_proto import p4runtime_pb2
from p4cc.errors import SwitchError


@dataclass(frozen=True)
class UpdateError:
    index: int  # position of the update in the WriteRequest
    code: int  # google.rpc.Code
    message: str

    @property
    def code_name(self) -> str:
        return str(code_pb2.Code.Name(self.code)) if self.code in code_pb2.Code.values() else str(
            self.code)


class P4RuntimeWriteError(SwitchError):
    """A Write failed; ``errors`` lists the updates that failed (code != OK)."""

    def __init__(self, address: str, errors: Sequence[UpdateError], summary: str) -> None:
        self.errors = list(errors)
        detail = "; ".join(f"update {e.index}: {e.code_name} {e.message}" for e in self.errors)
        super().__init__(f"P4Runtime Write to {address} failed: {summary}"
                         + (f" ({detail})" if detail else ""))


def decode_write_error(exc: grpc.RpcError) -> list[UpdateError]:
    """Per-update errors from a failed Write (empty if the server sent none)."""
    trailers = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    for key, value in trailers or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            errors = []
            for i, detail in enumerate(status.details):
                err = p4runtime_pb2.Error()
                if detail.Unpack(err) and err.canonical_code != code_pb2.OK:
                    errors.append(UpdateError(i, err.canonical_code, err.message))
            return errors
    return []
