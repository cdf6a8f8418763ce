"""The training environment's host CC (``EnvConfig.host_cc``, ``--set env.host_cc=...``):
the default is the simulator's default (DCQCN, hpcc-ns3 set), a spec's ``host_cc`` string
reaches the engine, and a bad one is refused by name."""

from __future__ import annotations

import pytest

from p4cc.controlplane.agents.template import ActionTemplate
from p4cc.errors import ConfigError
from p4cc.learn.cli import apply_overrides
from p4cc.learn.env import EnvConfig, TrainEnv
from p4cc.sim.cc import DcqcnHook, sim_cc
from p4cc.sim.config import SimConfig

FLOOR = "dcqcn:hpcc-ns3,min_rate_bps=1e8"
SMALL = {"topo": "star,hosts=4", "intervals": 2, "scenarios": ("websearch",)}


def test_default_is_the_simulators_default_dcqcn() -> None:
    cfg = EnvConfig()
    assert cfg.host_cc == "dcqcn"
    env = TrainEnv(EnvConfig(**SMALL), "acc", ActionTemplate())
    assert (env.cfg.cc, env.cfg.cc_params) == (SimConfig().cc, SimConfig().cc_params)
    assert env.describe()["host_cc"] == "dcqcn"
    env.reset(seed=1)
    assert env.engine is not None and isinstance(env.engine.cc, DcqcnHook)
    assert env.engine.cc.params.min_rate_bps == pytest.approx(1e9)  # hpcc-ns3's floor


@pytest.mark.parametrize("algo", ["acc", "pet"])
def test_a_specs_host_cc_reaches_the_engine(algo: str) -> None:
    env = TrainEnv(EnvConfig(**SMALL, host_cc=FLOOR), algo, ActionTemplate())
    assert (env.cfg.cc, env.cfg.cc_params) == ("dcqcn", "hpcc-ns3,min_rate_bps=1e8")
    assert env.describe()["host_cc"] == FLOOR  # recorded in the checkpoint's trained_on
    env.reset(seed=1)
    env.step(env.action_space.sample() * 0)
    assert env.engine is not None and isinstance(env.engine.cc, DcqcnHook)
    assert env.engine.cc.params.min_rate_bps == pytest.approx(1e8)


def test_the_same_split_as_the_sim_backend() -> None:
    assert sim_cc("dcqcn") == ("dcqcn", "hpcc-ns3")
    assert sim_cc(FLOOR) == ("dcqcn", "hpcc-ns3,min_rate_bps=1e8")
    assert sim_cc("fixed:5G") == ("fixed", "5G")


def test_set_on_the_command_line_keeps_the_comma() -> None:
    pytest.importorskip("torch")
    from p4cc.learn.acc import AccConfig

    cfg = apply_overrides(AccConfig(), [f"env.host_cc={FLOOR}"])
    assert cfg.env.host_cc == FLOOR


@pytest.mark.parametrize("bad", ["tcp", "cubic", "line", "dcqcn:no-such-set",
                                 "dcqcn:hpcc-ns3,no_such_field=1",
                                 "dcqcn:hpcc-ns3,min_rate_bps=fast"])
def test_a_bad_host_cc_is_refused_by_name(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"env\.host_cc"):
        EnvConfig(host_cc=bad)
