"""The BMv2 device config p4cc pushes: the compiled JSON without its source info, and
with p4c's temporaries folded (p4cc.controlplane.bmv2opt).

p4c records a ``source_info`` object (file, line, column, source fragment) on every
primitive, table, action and condition of the BMv2 JSON.  BMv2 uses it only in trace
log messages, but a BMv2 built with logging macros (the build users get, see
docs/dataplane.md) builds those messages' arguments for every primitive of every packet
before it tests the log level, including ``SourceInfo::to_string()``
(``BMLOG_TRACE_SI_PKT`` in ``bm_sim/logger.h``; ``ActionFnEntry::execute`` in
``bm_sim/actions.cpp``).  Without the source info that argument is an empty string:
~6 us less BMv2 CPU per packet with p4cc.p4 at 10 kpps on the reference machine
(docs/benchmarks.md "dataplane").  The committed artifact keeps it (``p4build --check``
compares against a fresh compile); switches that log (``FabricOptions.bmv2_log``) get
it too, for trace logs that name the source line.

The same push also runs ``bmv2opt.optimize``: p4c's single-use temporaries, repeated
register indices and hash-input copies cost a primitive and a PHV field each per packet
on BMv2 (p4cc.p4: 28 primitives and 28 fields fewer, ~18 % fewer instructions per
forwarded packet; docs/dataplane.md "Session 41").  A logging switch gets p4c's JSON
exactly as compiled.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from p4cc.controlplane.bmv2opt import optimize
from p4cc.errors import ConfigError

SOURCE_INFO = "source_info"


def strip_source_info(node: Any) -> int:
    """Remove every ``source_info`` key below ``node`` in place; the number removed."""
    removed = 0
    if isinstance(node, dict):
        if SOURCE_INFO in node:
            del node[SOURCE_INFO]
            removed += 1
        for value in node.values():
            removed += strip_source_info(value)
    elif isinstance(node, list):
        for value in node:
            removed += strip_source_info(value)
    return removed


def device_config(json_path: str | Path, *, source_info: bool = False) -> bytes:
    """The bytes of the BMv2 JSON at ``json_path`` to push as the P4Runtime device
    config: unchanged with ``source_info``, else without any ``source_info`` and
    optimized (``bmv2opt.optimize``)."""
    path = Path(json_path)
    if not path.is_file():
        raise ConfigError(f"BMv2 JSON {path} not found; build it with `make p4`")
    raw = path.read_bytes()
    if source_info:
        return raw
    try:
        program = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"BMv2 JSON {path} is not valid JSON: {exc}") from None
    strip_source_info(program)
    optimize(program)
    return json.dumps(program, separators=(",", ":")).encode()
