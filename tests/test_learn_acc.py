"""ACC (p4cc.learn.acc): DDQN target and loss, update, replay exchange, exploration,
numpy = torch inference, a smoke training run on the simulator, the train CLI."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from p4cc.controlplane.agents.learned import LearnedAgent  # noqa: E402
from p4cc.controlplane.agents.mlp import save_npz  # noqa: E402
from p4cc.learn import acc  # noqa: E402
from p4cc.learn.env import EnvConfig  # noqa: E402
from p4cc.learn.nets import GroupMLP  # noqa: E402
from p4cc.learn.replay import ReplayMemory  # noqa: E402
from p4cc.scale import get_scale  # noqa: E402


def test_ddqn_target_selects_with_online_and_evaluates_with_target() -> None:
    q_online = torch.tensor([[1.0, 5.0, 2.0], [0.0, 0.0, 9.0]])
    q_target = torch.tensor([[10.0, 3.0, 7.0], [4.0, 8.0, 1.0]])
    y = acc.ddqn_target(q_online, q_target, torch.tensor([1.0, 0.5]), gamma=0.5)
    # online argmax: a=1 then a=2; evaluated by the target net: 3 and 1 (not max 10 / 8)
    torch.testing.assert_close(y, torch.tensor([1.0 + 0.5 * 3.0, 0.5 + 0.5 * 1.0]))


def test_ddqn_loss_on_a_fixed_batch() -> None:
    torch.manual_seed(0)
    qnet, target = GroupMLP(1, (2, 4, 3)), GroupMLP(1, (2, 4, 3))
    b = {"obs": torch.randn(1, 5, 2), "next_obs": torch.randn(1, 5, 2),
         "act": torch.tensor([[0, 1, 2, 1, 0]]), "rew": torch.rand(1, 5)}
    loss = acc.ddqn_loss(qnet, target, b, gamma=0.9)
    with torch.no_grad():
        q = qnet(b["obs"])[0, torch.arange(5), b["act"][0]]
        a_star = qnet(b["next_obs"])[0].argmax(-1)
        y = b["rew"][0] + 0.9 * target(b["next_obs"])[0, torch.arange(5), a_star]
    assert loss.item() == pytest.approx(((y - q) ** 2).mean().item(), rel=1e-6)
    # gradient steps on the fixed batch (target frozen) drive the loss down
    opt = torch.optim.Adam(qnet.parameters(), lr=1e-2)
    losses = [acc.update(qnet, target, opt, b, 0.9) for _ in range(100)]
    assert losses[-1] < 0.1 * losses[0]


def test_replay_local_and_global_exchange() -> None:
    rng = np.random.default_rng(0)
    mem = ReplayMemory(n_agents=3, obs_dim=2, local_capacity=50, global_capacity=100)
    for t in range(10):
        obs = np.stack([np.full(2, 100 * i + t, np.float32) for i in range(3)])
        mem.add(obs, np.arange(3) + t, np.arange(3, dtype=np.float32), obs + 1)
    b = mem.sample(rng, 8)
    assert b.obs.shape == (3, 8, 2) and b.act.shape == (3, 8)
    assert np.all(b.agent == np.arange(3)[:, None])  # before: only own experience
    mem.exchange(rng, push=6, pull=20)
    assert mem.glob.size == 18
    assert set(mem.glob.agent[:18].tolist()) == {0, 1, 2}
    assert len(mem) == 30  # each local memory received 20 transitions
    received = mem.local.agent[:, 10:30]
    for i in range(3):
        assert (received[i] != i).any()  # experience of other agents arrived
    # transitions stay intact across the exchange: obs encodes the producing agent
    for i in range(3):
        rows = mem.local.obs[i, :30, 0]
        np.testing.assert_array_equal(rows // 100, mem.local.agent[i, :30])
        np.testing.assert_array_equal(mem.local.next_obs[i, :30, 0], rows + 1)


def test_exploration_schedules_and_greedy_choice() -> None:
    cfg = acc.AccConfig(steps=1000, eps_fraction=0.5)
    assert acc.offline_epsilon(0, cfg) == pytest.approx(1.0)
    assert acc.offline_epsilon(500, cfg) == pytest.approx(0.05)
    assert acc.online_epsilon(0, cfg) == pytest.approx(0.2)
    assert acc.online_epsilon(500, cfg) == pytest.approx(0.2 * 0.99**10)
    torch.manual_seed(0)
    qnet = GroupMLP(1, (4, 8, 6))
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    rng = np.random.default_rng(0)
    greedy = acc.select_actions(qnet, obs, 0.0, 6, rng)
    with torch.no_grad():
        want = qnet(torch.as_tensor(obs)[None])[0].argmax(-1).numpy()
    np.testing.assert_array_equal(greedy, want)
    per_port = qnet.replicate(5)  # online copies start equal to the offline model
    np.testing.assert_array_equal(acc.select_actions(per_port, obs, 0.0, 6, rng), want)


@pytest.mark.parametrize("algo", ["acc", "pet"])
def test_numpy_and_torch_decide_the_same(tmp_path: Path, algo: str) -> None:
    from p4cc.controlplane.agents.template import ACC_TEMPLATE, PET_TEMPLATE

    template = ACC_TEMPLATE if algo == "acc" else PET_TEMPLATE
    n_feat = 6 if algo == "acc" else 8
    torch.manual_seed(3)
    net = GroupMLP(1, (3 * n_feat, 20, 40, 40, 20, template.n_actions))
    meta = {"algo": algo, "template": template.to_dict(), "history": 3, "n_feat": n_feat,
            "reward": {"w1": 0.3, "w2": 0.7}}
    path = save_npz(tmp_path / "m.npz", {"main": net.layers(0)}, meta)
    agent = LearnedAgent(algo, get_scale("testbed"), path)
    x = np.random.default_rng(7).random((2000, 3 * n_feat), dtype=np.float32)
    with torch.no_grad():
        scores = net(torch.as_tensor(x)[None])[0].numpy()
    np.testing.assert_array_equal(agent.decide(x), scores.argmax(-1))
    from p4cc.controlplane.agents.mlp import forward

    np.testing.assert_allclose(forward(agent.nets["main"], x), scores, rtol=1e-4, atol=1e-5)


SMOKE_ENV = EnvConfig(topo="star,hosts=4", intervals=50, scenarios=("websearch",),
                      load=(0.7, 0.7))


def test_smoke_training_loss_falls_and_writes_a_checkpoint(tmp_path: Path) -> None:
    cfg = acc.AccConfig(seed=3, steps=300, online_steps=60, env=SMOKE_ENV, log_every=50,
                        learning_starts=50, exchange_every=25)
    res = acc.train(cfg, tmp_path, progress=False, command=["p4cc", "train", "acc"])
    losses = [r["loss"] for r in res["rows"] if r["phase"] == "offline" and r["loss"]]
    assert losses[-1] < losses[0]
    assert res["curves_csv"].read_text().startswith("step,phase,epsilon,reward,loss")
    assert res["curves_png"].stat().st_size > 1000
    side = json.loads(res["sidecar"].read_text())
    assert side["command"] == "p4cc train acc" and side["seed"] == 3
    assert side["final"]["phase"] == "online" and "git_commit" in side
    assert res["checkpoint"].stat().st_size < 2_000_000
    agent = LearnedAgent("acc", get_scale("testbed"), res["checkpoint"])
    assert "s1:1" in agent.nets  # per-port online copies exported beside "main"


def test_train_cli_overrides() -> None:
    from p4cc.errors import ConfigError
    from p4cc.learn.cli import apply_overrides, config_help

    cfg = acc.AccConfig()
    cfg = apply_overrides(cfg, ["gamma=0.5", "online_per_port=false", "env.intervals=7",
                                "env.scenarios=incast,storage",
                                "env.w_throughput=websearch=0.1,incast=0.9"])
    assert cfg.gamma == 0.5 and cfg.online_per_port is False
    assert cfg.env.intervals == 7 and cfg.env.scenarios == ("incast", "storage")
    assert cfg.env.weight("incast") == pytest.approx(0.9)
    assert dataclasses.is_dataclass(cfg)
    with pytest.raises(ConfigError):
        apply_overrides(cfg, ["nope=1"])
    assert any("gamma" in line for line in config_help(cfg))


def test_idle_ports_weigh_nothing_in_the_ddqn_loss() -> None:
    from p4cc.learn.env import busy

    obs = np.zeros((3, 2 * 6), np.float32)
    obs[0, 6] = 0.3  # queue in the latest interval
    obs[1, 7] = 0.5  # traffic in the latest interval
    obs[2, 0:2] = 0.9  # only an older interval was busy: idle now
    assert busy(obs, 6).tolist() == [True, True, False]
    torch.manual_seed(0)
    qnet, target = GroupMLP(1, (2, 4, 3)), GroupMLP(1, (2, 4, 3))
    b = {"obs": torch.randn(1, 4, 2), "next_obs": torch.randn(1, 4, 2),
         "act": torch.tensor([[0, 1, 2, 1]]), "rew": torch.rand(1, 4)}
    w = torch.tensor([[1.0, 1.0, 0.0, 0.0]])
    first_two = {k: v[:, :2] for k, v in b.items()}
    weighted = acc.ddqn_loss(qnet, target, {**b, "w": w}, 0.9)
    assert weighted.item() == pytest.approx(acc.ddqn_loss(qnet, target, first_two, 0.9).item())
    # replay keeps the weight through sampling and the global exchange
    rng = np.random.default_rng(0)
    mem = ReplayMemory(n_agents=2, obs_dim=2, local_capacity=20, global_capacity=40)
    for t in range(10):
        o = np.full((2, 2), t, np.float32)
        mem.add(o, np.zeros(2, np.int64), np.zeros(2, np.float32), o, np.array([1.0, 0.0]))
    s = mem.sample(rng, 16)
    assert s.weight is not None
    np.testing.assert_array_equal(s.weight, np.repeat([[1.0], [0.0]], 16, axis=1))
    mem.exchange(rng, push=5, pull=10)
    np.testing.assert_array_equal(mem.local.weight[:, :20] == 1.0,
                                  mem.local.agent[:, :20] == 0)
    t = acc.to_tensors(s, 1)
    assert t["w"].shape == t["rew"].shape == (1, 32)


def test_replay_is_prioritised_online_only() -> None:
    """§4.3: online training prioritises transitions by reward; offline samples uniformly."""
    cfg = acc.AccConfig()
    assert cfg.online_priority > 0
    assert acc.sample_priority("offline", cfg) == 0.0
    assert acc.sample_priority("online", cfg) == cfg.online_priority
    off = dataclasses.replace(cfg, online_priority=0.0)
    assert acc.sample_priority("online", off) == 0.0
    from p4cc.errors import ConfigError

    with pytest.raises(ConfigError, match="online_priority"):
        dataclasses.replace(cfg, online_priority=-0.5)


@pytest.mark.parametrize("every", [1, 5])
def test_train_every_spaces_the_ddqn_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           every: int) -> None:
    calls: list[int] = []
    step = acc.update

    def counted(*args: object, **kw: object) -> float:
        calls.append(1)
        return step(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(acc, "update", counted)
    cfg = acc.AccConfig(seed=1, steps=60, env=dataclasses.replace(SMOKE_ENV, intervals=30),
                        log_every=30, learning_starts=10, train_every=every, batch_size=4)
    acc.train(cfg, tmp_path, progress=False, command=["p4cc", "train", "acc"])
    assert len(calls) == len(range(10, 60, every))  # steps at t = 10, 10 + every, ...


def test_train_every_is_checked() -> None:
    from p4cc.errors import ConfigError

    with pytest.raises(ConfigError, match=r"train_every=0 is out of range; it must be > 0"):
        acc.AccConfig(train_every=0)
