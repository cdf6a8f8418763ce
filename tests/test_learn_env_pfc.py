"""The training fabric can be lossless (``EnvConfig.pfc``, ``--set env.pfc=true``): the
papers train and test on PFC fabrics (ACC §5.1, PET §5.1).  Default lossy, as before; on
with it, an incast that overflows the buffer pauses instead of dropping, and the
checkpoint's ``trained_on`` records which fabric it learned on."""

from __future__ import annotations

import numpy as np
import pytest

from p4cc.controlplane.agents.template import ActionTemplate
from p4cc.errors import ConfigError
from p4cc.learn.env import EnvConfig, TrainEnv


def _incast_lost_bytes(pfc: bool) -> tuple[float, TrainEnv]:
    """3 x 10 flows at line rate into one host, no marking below the buffer, 1.6 ms."""
    cfg = EnvConfig(topo="star,hosts=4", intervals=20, scenarios=("incast",), load=(1.0, 1.0),
                    incast_senders=(3, 3), incast_flows=(10, 10), pfc=pfc)
    env = TrainEnv(cfg, "acc", ActionTemplate())
    env.reset(seed=3)
    gentle = np.full(env.n_agents, env.template.n_actions - 1)  # Kmin = Kmax = the buffer
    for _ in range(cfg.intervals):
        env.step(gentle)
    assert env.engine is not None
    return float(env.engine.lost.sum()), env


def test_default_is_lossy_and_recorded() -> None:
    assert EnvConfig().pfc is False
    lost, env = _incast_lost_bytes(pfc=False)
    assert lost > 1e6  # the incast overflows the 1 MB buffer
    assert env.engine is not None and env.engine.pfc is None
    assert env.describe()["pfc"] is False


def test_a_lossless_fabric_pauses_instead_of_dropping() -> None:
    lost, env = _incast_lost_bytes(pfc=True)
    assert lost == 0.0
    assert env.engine is not None and env.engine.pfc is not None
    assert env.describe()["pfc"] is True  # in the checkpoint's trained_on


def test_set_on_the_command_line() -> None:
    pytest.importorskip("torch")
    from p4cc.learn.acc import AccConfig
    from p4cc.learn.cli import apply_overrides

    assert apply_overrides(AccConfig(), ["env.pfc=true"]).env.pfc is True


@pytest.mark.parametrize("item, message", [
    ("env.pfc=maybe", r"--set env\.pfc=maybe: expected true/false"),
    ("env.pfcc=true", r"unknown config field 'env\.pfcc'"),
])
def test_a_bad_value_names_the_full_field(item: str, message: str) -> None:
    pytest.importorskip("torch")
    from p4cc.learn.acc import AccConfig
    from p4cc.learn.cli import apply_overrides

    with pytest.raises(ConfigError, match=message):
        apply_overrides(AccConfig(), [item])
