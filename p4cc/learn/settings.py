"""Config dataclasses from text: ``field=value`` overrides (``p4cc train --set``, and the
online settings of an ``acc:online,field=value`` agent name, p4cc.learn.online) and the
``--help-config`` listing."""

from __future__ import annotations

import dataclasses
from typing import Any

from p4cc.errors import ConfigError

#: the trainable switch agents: module and config class (imported when used: torch)
ALGOS = {"acc": ("p4cc.learn.acc", "AccConfig"), "pet": ("p4cc.learn.pet", "PetConfig")}


def cast_value(text: str, like: Any) -> Any:
    """``text`` as the type of ``like`` (a config field's default)."""
    if isinstance(like, bool):
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ConfigError(f"expected true/false, got {text!r}")
        return text.lower() in ("true", "1", "yes")
    if isinstance(like, tuple):
        parts = [p for p in text.split(",") if p]
        if like and isinstance(like[0], tuple):  # (("websearch", 0.3), ...): name=value
            pairs = [p.split("=", 1) for p in parts]
            return tuple((k, type(like[0][1])(v)) for k, v in pairs)
        kind = type(like[0]) if like else str
        return tuple(kind(p) for p in parts)
    return type(like)(text)


def apply_overrides(cfg: Any, items: list[str], prefix: str = "") -> Any:
    """``field=value`` / ``env.field=value`` onto a frozen config dataclass; errors name
    the field with its full path (``prefix``: the path of ``cfg`` itself, e.g. "env.")."""
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects field=value, got {prefix + item!r}")
        head, _, sub = key.partition(".")
        names = {f.name for f in dataclasses.fields(cfg)}
        if head not in names:
            raise ConfigError(f"unknown config field {prefix + head!r}; see --help-config")
        if sub:
            inner = apply_overrides(getattr(cfg, head), [f"{sub}={text}"], f"{prefix}{head}.")
            cfg = dataclasses.replace(cfg, **{head: inner})
            continue
        try:
            value = cast_value(text, getattr(cfg, head))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"--set {prefix}{item}: {exc}") from exc
        cfg = dataclasses.replace(cfg, **{head: value})
    return cfg


def config_help(cfg: Any, prefix: str = "") -> list[str]:
    out = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value) and f.name == "env":
            out += config_help(value, prefix="env.")
            continue
        out.append(f"  {prefix}{f.name} = {value!r}\n      {f.metadata.get('help', '')}")
    return out
