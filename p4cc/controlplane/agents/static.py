"""Static marking (SECN0/SECN1/SECN2/VENDOR, or ``static:KMIN,KMAX,PMAX``) as an agent,
and the registry of agents.

A static agent sets the paper's setting (p4cc.controlplane.ecn.static_setting, scaled to
the testbed by the BDP factor, REFERENCE §2 and §5) on every port once and then never
changes it, so static and learning schemes run through the same control loop.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

from p4cc.controlplane.agents.base import Agent
from p4cc.controlplane.ecn import (
    PAPER_SETTINGS,
    EcnConfig,
    scaled_threshold,
    static_setting,
)
from p4cc.controlplane.records import PortTelemetry
from p4cc.errors import ConfigError
from p4cc.scale import Scale


class StaticAgent:
    """Sets one EcnConfig on every port whose setting differs, then stays quiet."""

    def __init__(self, name: str, setting: EcnConfig) -> None:
        self.name = name
        self.setting = setting
        self._current: dict[int, EcnConfig | None] = {}

    def reset(self, ports: Mapping[int, EcnConfig | None]) -> None:
        self._current = dict(ports)

    def act(self, obs: Mapping[int, PortTelemetry]) -> Mapping[int, EcnConfig]:
        ports = set(obs) | set(self._current)
        todo = {p: self.setting for p in sorted(ports) if self._current.get(p) != self.setting}
        self._current.update(todo)
        return todo


class HoldAgent:
    """Never changes a setting: the loop still polls (``p4cc cli``, a session without an
    agent) and whatever the operator sets stays in force."""

    name = "hold"

    def reset(self, ports: Mapping[int, EcnConfig | None]) -> None:
        pass

    def act(self, obs: Mapping[int, PortTelemetry]) -> Mapping[int, EcnConfig]:
        return {}


AgentFactory = Callable[..., Agent]  # factory(scale) or factory(scale, arg)


def _static(name: str) -> AgentFactory:
    return lambda scale: StaticAgent(name.lower(), static_setting(name, scale))


def make_custom_static(scale: Scale, arg: str = "") -> StaticAgent:
    """``static:KMIN,KMAX,PMAX``: one setting of your own on every port, thresholds in
    bytes at paper scale (like PAPER_SETTINGS: scaled by the BDP factor, REFERENCE §2),
    e.g. ``static:80000,160000,0.75``, the one setting session 10's ACC held
    (docs/results.md, session 19)."""
    parts = [x.strip() for x in arg.split(",")] if arg else []
    if len(parts) != 3:
        raise ConfigError(f"agent 'static' needs static:KMIN,KMAX,PMAX (bytes at paper "
                          f"scale, and Pmax in (0, 1]), got {arg!r}")
    try:
        kmin, kmax, pmax = float(parts[0]), float(parts[1]), float(parts[2])
    except ValueError:
        raise ConfigError(f"agent 'static:{arg}': KMIN, KMAX and PMAX must be numbers") \
            from None
    if not (kmin > 0 and kmax > 0):
        raise ConfigError(f"agent 'static:{arg}': KMIN and KMAX must be > 0 bytes")
    setting = EcnConfig(scaled_threshold(kmin, scale), scaled_threshold(kmax, scale), pmax)
    try:
        setting.validate(scale.buffer_bytes)
    except ConfigError as exc:
        raise ConfigError(f"agent 'static:{arg}' at scale {scale.name!r}: {exc}") from None
    return StaticAgent(f"static:{arg}", setting)


#: name -> factory(scale) or "module:function" for agents that load lazily (ACC, PET, ...)
AGENTS: dict[str, AgentFactory | str] = {n.lower(): _static(n) for n in PAPER_SETTINGS}
_STATIC = frozenset(AGENTS)
AGENTS.update(acc="p4cc.controlplane.agents.learned:make_acc",  # ACC/PET (docs/learning.md)
              pet="p4cc.controlplane.agents.learned:make_pet",
              # one fabric-wide controller, per-switch proxies (docs/chameleon.md)
              chameleon="p4cc.controlplane.agents.chameleon:make_chameleon",
              # a setting of your own: static:KMIN,KMAX,PMAX
              static=make_custom_static)


def register_agent(name: str, factory: AgentFactory | str) -> None:
    """Add an agent under ``name`` (a factory taking the Scale, or ``"module:function"``)."""
    AGENTS[name.lower()] = factory


def agent_names() -> list[str]:
    return sorted(AGENTS)


def make_agent(name: str, scale: Scale) -> Agent:
    """``make_agent("secn1", scale)``; ``name:arg`` (e.g. ``acc:model.npz``) is looked up by
    ``name`` and, for agents that take one, ``arg`` is passed on (static agents take none)."""
    base, _, arg = name.partition(":")
    try:
        factory = AGENTS[base.lower()]
    except KeyError:
        raise ConfigError(f"unknown agent {name!r}; choose one of {agent_names()}") from None
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    if arg and base.lower() in _STATIC:
        raise ConfigError(f"agent {base!r} is a static setting and takes no argument "
                          f"(got {name!r})")
    agent = factory(scale, arg) if arg else factory(scale)
    if not isinstance(agent, Agent):
        raise ConfigError(f"agent factory for {name!r} did not return an Agent")
    return agent
