"""The agents of one run or session, by name: the registry's plus online fine-tuning.

``RunAgents.make(name, scale)`` gives every switch its own agent object.  Names are those
of p4cc.controlplane.agents.static.make_agent (``secn1``, ``acc``, ``acc:<path>``, ...)
and the online variants ``acc:online[:<checkpoint>][,field=value...]`` /
``pet:online[...]`` (p4cc.learn.online: the deployed agent keeps learning during the
run; ``field=value`` overrides a field of AccConfig / PetConfig for the online phase,
e.g. ``acc:online,online_priority=0``; a checkpoint path may not contain a comma).  Those live in
p4cc.learn, which p4cc.controlplane must not import (the layer contract), so they are
resolved here; every switch's online agent of the same name joins one OnlineRun, and
``finish`` writes the fine-tuned weights into the run directory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from p4cc.controlplane.agents.base import Agent
from p4cc.controlplane.agents.static import make_agent
from p4cc.errors import ConfigError
from p4cc.scale import Scale

ONLINE = "online"


def online_parts(name: str) -> tuple[str, str | None] | None:
    """``("acc", path or None)`` for ``acc:online[:<path>][,field=value...]`` (or pet),
    else None."""
    base, _, arg = name.split(",", 1)[0].partition(":")
    head, _, path = arg.partition(":")
    if base.lower() in ("acc", "pet") and head.lower() == ONLINE:
        return base.lower(), path or None
    return None


def online_items(name: str) -> list[str]:
    """The ``field=value`` items of an online agent's name (``[]`` for other names, whose
    commas are their own: ``static:20000,640000,0.1``).  ConfigError for an item that is
    not ``field=value``; the fields themselves are checked by
    p4cc.learn.online.online_overrides (it needs torch)."""
    if online_parts(name) is None:
        return []
    items = [x.strip() for x in name.split(",")[1:]]
    for item in items:
        key, sep, value = item.partition("=")
        if not (sep and key.strip() and value.strip()):
            raise ConfigError(f"agent {name!r}: {item!r} is not field=value (online "
                              f"settings: acc:online[:<checkpoint>],field=value,...)")
    return items


def check_agents(names: list[str] | tuple[str, ...]) -> None:
    """ConfigError now, before any run directory is written, for an agent of ``names``
    that could not be made: an online agent without torch or with a setting out of
    range (``acc:online,train_every=0``).  The spec has checked the names' form."""
    agents = RunAgents()
    for name in names:
        agents.check(name)


class RunAgents:
    """Makes the agents of one run (or one CLI session), one object per switch."""

    def __init__(self, seed: int = 1, config: Any = None) -> None:
        """``config``: a p4cc.learn.online.OnlineConfig for online agents (default: its
        defaults with ``seed``)."""
        self.seed, self.config = seed, config
        self.online: dict[str, Any] = {}  # name -> p4cc.learn.online.OnlineRun

    def check(self, name: str) -> None:
        """ConfigError now (before a fabric starts) if ``name`` cannot be made, for the
        online variants: torch missing (the train extra)."""
        parts = online_parts(name)
        if parts is not None:
            from p4cc.learn.online import online_overrides, require_torch

            require_torch(name)
            online_overrides(parts[0], online_items(name), name)

    def make(self, name: str, scale: Scale) -> Agent:
        parts = online_parts(name)
        if parts is None:
            return make_agent(name, scale)
        run = self.online.get(name)
        if run is None:
            from p4cc.learn.online import OnlineConfig, OnlineRun, online_overrides

            config = self.config or OnlineConfig(seed=self.seed)
            items = online_items(name)
            if items:  # the name's settings after the caller's
                over = online_overrides(parts[0], items, name)
                config = dataclasses.replace(config, settings=(*config.settings, *over))
            run = OnlineRun(parts[0], parts[1], config)
            self.online[name] = run
        agent: Agent = run.make(scale)
        return agent

    def finish(self, out_dir: str | Path, log: Callable[[str], None] = print) -> list[Path]:
        """Write every online run's fine-tuned weights into ``out_dir``; their paths."""
        paths: list[Path] = []
        for name, run in self.online.items():
            saved = run.save(out_dir)
            if saved is not None:
                paths += list(saved)
                updates = sum(a.updates for a in run.agents)
                log(f"{name}: fine-tuned weights ({updates} updates over "
                    f"{len(run.agents)} switches) written to {saved[0]}")
        return paths
