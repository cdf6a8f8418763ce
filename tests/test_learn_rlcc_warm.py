"""ADPG training options: warm start from an exported MLP, flows rejoining at line rate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from p4cc.errors import ConfigError  # noqa: E402
from p4cc.hostcc.rlcc_policies import MlpPolicy, save_mlp  # noqa: E402
from p4cc.learn import rlcc_adpg as A  # noqa: E402
from p4cc.learn.rlcc_export import probe_decisions  # noqa: E402
from p4cc.learn.rlcc_nets import TorchMlp, mlp_from_policy  # noqa: E402


def _random_mlp(seed: int = 5) -> MlpPolicy:
    torch.manual_seed(seed)
    model = TorchMlp(window=3, hidden=(12, 8))
    with torch.no_grad():  # away from the near-1 initialisation, so decisions differ
        for p in model.parameters():
            p.mul_(4.0)
    return model.export()


def test_warm_start_reproduces_the_exported_policy(tmp_path: Path) -> None:
    pol = _random_mlp()
    path = save_mlp(tmp_path / "start.npz", pol)
    model = A.make_model(A.config_from(arch="mlp", init=str(path)))
    assert isinstance(model, TorchMlp) and model.window == 3
    got, want = probe_decisions(model.export()), probe_decisions(pol)
    assert np.ptp(want) > 0.05  # the probe exercises the policy
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    # a fresh model of the same shape does not decide alike: the weights were loaded
    fresh = A.make_model(A.config_from(arch="mlp", window=3, mlp_hidden=(12, 8)))
    assert np.abs(probe_decisions(fresh.export()) - want).max() > 1e-3


def test_warm_start_rejects_what_it_cannot_continue(tmp_path: Path) -> None:
    path = save_mlp(tmp_path / "start.npz", _random_mlp())
    with pytest.raises(ConfigError):
        A.make_model(A.config_from(arch="lstm", init=str(path)))
    ident = mlp_from_policy(_random_mlp()).export()
    ident.output = "identity"
    with pytest.raises(ConfigError):
        mlp_from_policy(ident)


def _episode(prob: float) -> A.Episode:
    cfg = A.config_from(arch="mlp", scenarios=(2, 4), copies=2, rejoin_prob=prob,
                        start_rate_min=0.02)
    return A.Episode(cfg, TorchMlp().export(), np.random.default_rng(0))


def test_rejoin_restarts_one_flow_per_incast_at_line_rate() -> None:
    ep = _episode(1.0)
    line = ep.scale.link_rate_bps
    n = len(ep.group)
    ep.hook.state.rate[:n] = 0.01 * line
    flows = ep.rejoin()
    assert sorted(ep.group[flows].tolist()) == [0, 1, 2, 3]  # one in each of 4 incasts
    rate = ep.hook.state.rate[:n]
    np.testing.assert_array_equal(rate[flows], line)
    assert np.count_nonzero(rate == line) == 4
    assert np.all(rate[np.setdiff1d(np.arange(n), flows)] == 0.01 * line)


def test_rejoin_happens_in_rollouts_only_when_asked() -> None:
    for prob, joined in ((0.0, False), (1.0, True)):
        ep = _episode(prob)
        ep.rollout(8)  # the first rollout of an episode: no rejoin
        line = ep.scale.link_rate_bps
        n = len(ep.group)
        ep.hook.state.rate[:n] = 0.01 * line
        ep.rollout(1)  # starts with the rejoins, then one base RTT of decisions
        # a flow restarted at line rate is still far above the others one RTT later
        assert bool(ep.hook.state.rate[:n].max() > 0.5 * line) is joined
