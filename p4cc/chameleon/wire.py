"""The monitor's messages: newline-delimited JSON objects with a version field.

Every message is one line of UTF-8 JSON, at most :data:`MAX_LINE` bytes, an object with
``v`` (:data:`VERSION`), ``type`` (one of :data:`TYPES`) and ``id`` (the reporter: a host
or switch name).  Reporter -> controller: ``hello`` (``role``: host | switch), ``report``
(``t``: reporter time, ``metrics``: name -> statistics, see p4cc.chameleon.stats),
``nack`` (``error``: a setting the reporter refused).  Controller -> reporter:
``settings`` (``round``, ``params``: name -> value), ``error`` (``error``: why a line
was refused).  :func:`decode` raises :class:`ProtocolError` with a clear reason for
anything else; the server counts those and answers with an ``error`` line.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from p4cc.errors import P4ccError

VERSION = 1
MAX_LINE = 1 << 16
TYPES = ("hello", "report", "nack", "settings", "error")
ROLES = ("host", "switch")


class ProtocolError(P4ccError):
    """A monitor line that is not a valid message."""


@dataclass(frozen=True)
class Message:
    type: str
    id: str
    role: str = ""
    t: float = 0.0
    round: int = 0
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    params: dict[str, float] = field(default_factory=dict)
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"v": VERSION, "type": self.type, "id": self.id}
        if self.type == "hello":
            d["role"] = self.role
        elif self.type == "report":
            d.update(t=self.t, metrics=self.metrics)
        elif self.type == "settings":
            d.update(round=self.round, params=self.params)
        else:
            d["error"] = self.error
        return d


def encode(msg: Message) -> bytes:
    line = json.dumps(msg.to_dict(), separators=(",", ":"), allow_nan=False).encode() + b"\n"
    if len(line) > MAX_LINE:
        raise ProtocolError(f"message of {len(line)} B exceeds the {MAX_LINE} B line limit")
    return line


def _num(path: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ProtocolError(f"{path} must be a finite number, got {v!r}")
    return float(v)


def decode(line: bytes | str) -> Message:
    """One line (without or with its newline) -> a Message; ProtocolError says why not."""
    if len(line) > MAX_LINE:
        raise ProtocolError(f"line of {len(line)} B exceeds the {MAX_LINE} B limit")
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"expected a JSON object, got {type(obj).__name__}")
    if obj.get("v") != VERSION:
        raise ProtocolError(f"unsupported version v={obj.get('v')!r}; this end speaks "
                            f"v={VERSION}")
    kind, rid = obj.get("type"), obj.get("id")
    if kind not in TYPES:
        raise ProtocolError(f"unknown type {kind!r}; expected one of {list(TYPES)}")
    if not isinstance(rid, str) or not rid or len(rid) > 64:
        raise ProtocolError(f"id must be a non-empty string of <= 64 characters, got {rid!r}")
    if kind == "hello":
        if obj.get("role") not in ROLES:
            raise ProtocolError(f"hello.role must be one of {list(ROLES)}, "
                                f"got {obj.get('role')!r}")
        return Message(kind, rid, role=obj["role"])
    if kind == "report":
        metrics = obj.get("metrics")
        if not isinstance(metrics, dict):
            raise ProtocolError("report.metrics must be an object of name -> statistics")
        out: dict[str, dict[str, float]] = {}
        for name, st in metrics.items():
            if not isinstance(st, dict):
                raise ProtocolError(f"report.metrics.{name} must be an object of numbers")
            out[str(name)] = {str(k): _num(f"report.metrics.{name}.{k}", v)
                              for k, v in st.items()}
        return Message(kind, rid, t=_num("report.t", obj.get("t")), metrics=out)
    if kind == "settings":
        params = obj.get("params")
        rnd = obj.get("round")
        if not isinstance(params, dict):
            raise ProtocolError("settings.params must be an object of name -> number")
        if isinstance(rnd, bool) or not isinstance(rnd, int) or rnd < 0:
            raise ProtocolError(f"settings.round must be an integer >= 0, got {rnd!r}")
        return Message(kind, rid, round=rnd, params={
            str(k): _num(f"settings.params.{k}", v) for k, v in params.items()})
    err = obj.get("error")
    if not isinstance(err, str):
        raise ProtocolError(f"{kind}.error must be a string")
    return Message(kind, rid, error=err)
