"""The agents of one run or session, by name: the registry's plus online fine-tuning.

``RunAgents.make(name, scale)`` gives every switch its own agent object.  Names are those
of p4cc.controlplane.agents.static.make_agent (``secn1``, ``acc``, ``acc:<path>``, ...)
and the online variants ``acc:online[:<checkpoint>]`` / ``pet:online[:<checkpoint>]``
(p4cc.learn.online: the deployed agent keeps learning during the run).  Those live in
p4cc.learn, which p4cc.controlplane must not import (the layer contract), so they are
resolved here; every switch's online agent of the same name joins one OnlineRun, and
``finish`` writes the fine-tuned weights into the run directory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from p4cc.controlplane.agents.base import Agent
from p4cc.controlplane.agents.static import make_agent
from p4cc.scale import Scale

ONLINE = "online"


def online_parts(name: str) -> tuple[str, str | None] | None:
    """``("acc", path or None)`` for ``acc:online[:<path>]`` (or pet), else None."""
    base, _, arg = name.partition(":")
    head, _, path = arg.partition(":")
    if base.lower() in ("acc", "pet") and head.lower() == ONLINE:
        return base.lower(), path or None
    return None


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
            from p4cc.learn.online import require_torch

            require_torch(name)

    def make(self, name: str, scale: Scale) -> Agent:
        parts = online_parts(name)
        if parts is None:
            return make_agent(name, scale)
        run = self.online.get(name)
        if run is None:
            from p4cc.learn.online import OnlineConfig, OnlineRun

            run = OnlineRun(parts[0], parts[1], self.config or OnlineConfig(seed=self.seed))
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
