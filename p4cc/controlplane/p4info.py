"""P4Info lookups by unique name suffix, and value encoding for P4Runtime.

Names in a P4Info are fully qualified (``MyIngress.ipv4_lpm``); p4cc code refers to
them by the short names of docs/architecture.md.  A lookup accepts the full name or any
suffix that starts after a ``.``; it fails with the list of candidates when the suffix
matches nothing or more than one object.

Values are sent as P4Runtime *canonical* bytestrings (P4Runtime spec §8.4: big-endian,
no leading zero bytes, a zero value is one zero byte) after a range check against
the field's bitwidth.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from p4cc.controlplane.p4rt_proto import p4info_pb2, parse_p4info
from p4cc.errors import ConfigError

Value = int | str | bytes

#: entity kind -> field of the P4Info message holding them
KINDS = ("tables", "actions", "counters", "direct_counters", "registers", "meters",
         "controller_packet_metadata", "digests")


def _suffix_match(names: Iterable[str], wanted: str) -> list[str]:
    names = list(names)
    if wanted in names:
        return [wanted]
    return [n for n in names if n.endswith("." + wanted)]


def pick(kind: str, names: Iterable[str], wanted: str) -> str:
    """The one name in ``names`` equal to or ending in ``.wanted``; ConfigError otherwise."""
    names = list(names)
    found = _suffix_match(names, wanted)
    if len(found) == 1:
        return found[0]
    if not found:
        raise ConfigError(
            f"no {kind} named {wanted!r} in the P4Info; it has {sorted(names)} "
            "(is the P4 program up to date? run `make p4`)"
        )
    raise ConfigError(
        f"{kind} name {wanted!r} is ambiguous: it matches {sorted(found)}; use a longer suffix"
    )


def encode_value(value: Value, bitwidth: int, what: str = "value") -> bytes:
    """Encode ``value`` (int, IPv4 ``"a.b.c.d"``, MAC ``"aa:bb:.."``, or bytes) canonically."""
    if isinstance(value, bool):
        raise ConfigError(f"{what}: booleans are not field values ({value!r})")
    if isinstance(value, int):
        number = value
    elif isinstance(value, bytes):
        number = int.from_bytes(value, "big")
    elif isinstance(value, str):
        number = _parse_str(value, bitwidth, what)
    else:
        raise ConfigError(f"{what}: cannot encode {value!r} (use an int, IPv4/MAC string or bytes)")
    if number < 0 or number >= (1 << bitwidth):
        raise ConfigError(f"{what}: {value!r} does not fit in {bitwidth} bits")
    return canonical(number)


def canonical(number: int) -> bytes:
    """Big-endian bytes without leading zeros (one zero byte for 0)."""
    return number.to_bytes(max(1, (number.bit_length() + 7) // 8), "big")


def decode_value(data: bytes) -> int:
    return int.from_bytes(data, "big")


def _parse_str(text: str, bitwidth: int, what: str) -> int:
    text = text.strip()
    try:
        if text.count(".") == 3 and bitwidth == 32:
            return int(ipaddress.IPv4Address(text))
        if ":" in text and bitwidth == 48:
            parts = text.split(":")
            if len(parts) != 6 or not all(1 <= len(p) <= 2 for p in parts):
                raise ValueError(text)
            return int("".join(p.zfill(2) for p in parts), 16)
        return int(text, 0)
    except ValueError:
        raise ConfigError(
            f"{what}: cannot parse {text!r} as a {bitwidth}-bit value "
            "(IPv4 for 32-bit fields, MAC for 48-bit fields, or an integer)"
        ) from None


def prefix_mask(prefix_len: int, bitwidth: int) -> int:
    if not 0 <= prefix_len <= bitwidth:
        raise ConfigError(f"prefix length {prefix_len} out of range for a {bitwidth}-bit field")
    return ((1 << prefix_len) - 1) << (bitwidth - prefix_len)


class P4Info:
    """A parsed P4Info with lookups by name suffix."""

    def __init__(self, msg: Any) -> None:
        self.msg = msg
        self._by_kind: dict[str, dict[str, Any]] = {}
        for kind in KINDS:
            self._by_kind[kind] = {e.preamble.name: e for e in getattr(msg, kind)}
        self._by_id: dict[int, Any] = {}
        for kind in KINDS:
            for e in getattr(msg, kind):
                self._by_id[e.preamble.id] = e

    @classmethod
    def from_file(cls, path: str | Path) -> P4Info:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"P4Info file {p} not found; build the P4 program with `make p4`")
        if p.suffix in (".bin", ".pb"):
            return cls(p4info_pb2.P4Info.FromString(p.read_bytes()))
        try:
            return cls(parse_p4info(p.read_text(encoding="utf-8")))
        except Exception as exc:  # text_format.ParseError and friends
            raise ConfigError(f"cannot parse P4Info {p}: {exc}") from exc

    # -- entities --------------------------------------------------------------------
    def entity(self, kind: str, name: str) -> Any:
        table = self._by_kind[kind]
        return table[pick(kind.rstrip("s").replace("_", " "), table, name)]

    def table(self, name: str) -> Any:
        return self.entity("tables", name)

    def action(self, name: str) -> Any:
        return self.entity("actions", name)

    def counter(self, name: str) -> Any:
        return self.entity("counters", name)

    def register(self, name: str) -> Any:
        return self.entity("registers", name)

    def by_id(self, entity_id: int) -> Any:
        try:
            return self._by_id[entity_id]
        except KeyError:
            raise ConfigError(f"no P4Info entity with id {entity_id}") from None

    def names(self, kind: str) -> list[str]:
        return sorted(self._by_kind[kind])

    def table_id(self, name: str) -> int:
        return int(self.table(name).preamble.id)

    def action_id(self, name: str) -> int:
        return int(self.action(name).preamble.id)

    def counter_id(self, name: str) -> int:
        return int(self.counter(name).preamble.id)

    # -- fields ----------------------------------------------------------------------
    def match_field(self, table: str, field: str) -> Any:
        t = self.table(table)
        fields = {mf.name: mf for mf in t.match_fields}
        return fields[pick(f"match field of {t.preamble.name}", fields, field)]

    def action_param(self, action: str, param: str) -> Any:
        a = self.action(action)
        params = {p.name: p for p in a.params}
        return params[pick(f"parameter of {a.preamble.name}", params, param)]

    def table_actions(self, table: str) -> list[str]:
        return [self.by_id(ref.id).preamble.name for ref in self.table(table).action_refs]

    def check_action_of(self, table: str, action: str) -> None:
        full = self.action(action).preamble.name
        allowed = self.table_actions(table)
        if full not in allowed:
            raise ConfigError(
                f"action {full} is not an action of table {self.table(table).preamble.name}; "
                f"it takes {allowed}"
            )

    def packet_metadata(self, direction: str) -> dict[int, tuple[str, int]]:
        """``packet_in``/``packet_out`` header fields: id -> (name, bitwidth)."""
        for cpm in self.msg.controller_packet_metadata:
            if cpm.preamble.name == direction:
                return {m.id: (m.name, m.bitwidth) for m in cpm.metadata}
        return {}
