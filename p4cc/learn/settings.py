"""Config dataclasses from text: ``field=value`` overrides (``p4cc train --set``, and the
online settings of an ``acc:online,field=value`` agent name, p4cc.learn.online) and the
``--help-config`` listing."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from p4cc.errors import ConfigError

#: the trainable switch agents: module and config class (imported when used: torch)
ALGOS = {"acc": ("p4cc.learn.acc", "AccConfig"), "pet": ("p4cc.learn.pet", "PetConfig")}


#: ranges of the learning configs' numeric fields (AccConfig, PetConfig; checked by their
#: ``__post_init__`` through :func:`check_ranges`, so ``--set`` and ``acc:online,field=value``
#: get the same errors): (low, high, low included).  Counts and rates > 0; probabilities,
#: discounts and decays in [0, 1] (a decay of 0: no exploration after the first step);
#: ACC's explore_hold and PET's decision_hold >= 1; the rest >= 0.
RANGES: dict[str, tuple[float, float, bool]] = {
    **dict.fromkeys(("batch_size", "local_capacity", "global_capacity", "exchange_every",
                     "target_every", "train_every", "online_decay_steps", "lr", "lr_actor",
                     "lr_critic", "rollout", "epochs", "minibatches", "explore_steps", "clip"),
                    (0.0, math.inf, False)),
    **dict.fromkeys(("gamma", "gae_lambda", "online_eps", "online_decay", "explore",
                     "explore_decay"), (0.0, 1.0, True)),
    **dict.fromkeys(("learning_starts", "exchange_push", "exchange_pull", "entropy_coef",
                     "online_priority"), (0.0, math.inf, True)),
    # intervals per PET decision (1 is Alg. 1) / per held ACC exploration (1: ε-greedy)
    **dict.fromkeys(("decision_hold", "explore_hold"), (1.0, math.inf, True)),
}


def check_ranges(cfg: Any) -> None:
    """ConfigError naming the first field of ``cfg`` (a config dataclass) in RANGES whose
    value is not a finite number inside its range."""
    for f in dataclasses.fields(cfg):
        if f.name not in RANGES:
            continue
        value = getattr(cfg, f.name)
        lo, hi, lo_ok = RANGES[f.name]
        above = value >= lo if lo_ok else value > lo
        if not (math.isfinite(value) and above and value <= hi):
            bound = f"{'>=' if lo_ok else '>'} {lo:g}" + (
                f" and <= {hi:g}" if math.isfinite(hi) else "")
            raise ConfigError(f"{f.name}={value:g} is out of range; it must be {bound}")


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
