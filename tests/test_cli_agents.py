"""``agent [switch] acc|pet`` in ``p4cc cli``: swapping in a learned agent live (fake
switches, no root) and ``agents`` naming the agent and its checkpoint per switch."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import pytest
from fake_switch import fake_fabric_controls

from p4cc.bench.agents import random_checkpoint
from p4cc.controlplane.agents.learned import DEFAULT_CHECKPOINTS
from p4cc.experiment.clicmds import CliContext, TestbedCommands
from p4cc.experiment.session import FabricSession, SessionConfig
from p4cc.topo.spec import parse_topo

TOPO = "leafspine,spines=1,leaves=2,hosts=2"


def _wait(cond: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.parametrize("algo", ["acc", "pet"])
def test_swap_in_a_learned_agent_live(tmp_path: Path, algo: str) -> None:
    ckpt = random_checkpoint(tmp_path / f"{algo}.npz", algo)
    with ExitStack() as stack:
        _servers, controls = fake_fabric_controls(stack, parse_topo(TOPO), tmp_path)
        # marking off to start with: the fake switches' queues stay empty, so with SECN1
        # in force ACC would rightly find every queue idle (below Kmin) and keep it
        session = FabricSession(controls, SessionConfig(interval_s=0.02, agent=None))
        stack.callback(session.stop)
        cmds = TestbedCommands(session.open(), parse_topo(TOPO),
                               CliContext(TOPO, "testbed", "dcqcn", tmp_path))
        stack.callback(cmds.close)
        session.start()
        assert cmds.agent(f"leaf1 {algo}:{ckpt}") == f"leaf1: now {algo}"
        lines = cmds.agents().splitlines()
        assert lines == [f"leaf1: {algo} ({ckpt})", "leaf2: hold", "spine1: hold"]
        learned = session.loops["leaf1"].agent
        # from its first interval the learned agent's settings are in force, on leaf1 only
        ctl = controls["leaf1"]
        assert _wait(lambda: len(ctl.ecn) == len(ctl.ports) and set(ctl.ecn.values())
                     <= set(learned.settings), 10.0)  # type: ignore[attr-defined]
        assert set(controls["leaf2"].ecn.values()) <= {None}
        assert all(c.describe() in cmds.thresholds("leaf1")
                   for c in controls["leaf1"].ecn.values() if c is not None)
        other = "pet" if algo == "acc" else "acc"
        assert cmds.agent(f"leaf1 {other}:{random_checkpoint(tmp_path / 'o.npz', other)}") \
            == f"leaf1: now {other}"


def test_default_checkpoints_by_name(tmp_path: Path) -> None:
    missing = [a for a, p in DEFAULT_CHECKPOINTS.items() if not p.is_file()]
    if missing:
        pytest.skip(f"no shipped checkpoint for {missing} (p4cc/data/agents)")
    with ExitStack() as stack:
        _servers, controls = fake_fabric_controls(stack, parse_topo(TOPO), tmp_path)
        session = FabricSession(controls, SessionConfig(interval_s=0.05, agent="secn1"))
        stack.callback(session.stop)
        cmds = TestbedCommands(session.open(), parse_topo(TOPO),
                               CliContext(TOPO, "testbed", "dcqcn", tmp_path))
        stack.callback(cmds.close)
        assert cmds.agent("leaf1 acc") == "leaf1: now acc"
        assert cmds.agent("pet").splitlines() == ["leaf1: now pet", "leaf2: now pet",
                                                  "spine1: now pet"]
        assert cmds.agents().splitlines()[0] == f"leaf1: pet ({DEFAULT_CHECKPOINTS['pet']})"


def test_swap_in_an_online_agent(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    ckpt = random_checkpoint(tmp_path / "pet.npz", "pet")
    with ExitStack() as stack:
        _servers, controls = fake_fabric_controls(stack, parse_topo(TOPO), tmp_path)
        session = FabricSession(controls, SessionConfig(interval_s=0.02, agent="secn1"))
        stack.callback(session.stop)
        cmds = TestbedCommands(session.open(), parse_topo(TOPO),
                               CliContext(TOPO, "testbed", "dcqcn", tmp_path))
        stack.callback(cmds.close)
        session.start()
        assert cmds.agent(f"leaf2 pet:online:{ckpt}") == "leaf2: now pet:online"
        assert cmds.agents().splitlines()[1] == f"leaf2: pet:online ({ckpt})"
        online = session.loops["leaf2"].agent
        # 60 s: with both cores busy the first intervals (torch, a fresh actor-critic)
        # took 14.6 s here; the wait returns as soon as the condition holds
        assert _wait(lambda: online.t >= 3, 60.0)  # type: ignore[attr-defined]
        session.stop()
        paths = session.agents.finish(tmp_path / "out", log=lambda line: None)
        assert [p.name for p in paths] == ["pet-online.npz", "pet-online.json"]
