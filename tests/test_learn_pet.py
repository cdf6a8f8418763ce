"""PET (p4cc.learn.pet): GAE, the clipped policy objective, the value loss, exploration,
one update on a fixed batch, the training env's reward, and a smoke run on the sim."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from p4cc.controlplane.agents.learned import LearnedAgent  # noqa: E402
from p4cc.controlplane.agents.template import PET_TEMPLATE  # noqa: E402
from p4cc.errors import ConfigError  # noqa: E402
from p4cc.learn import pet  # noqa: E402
from p4cc.learn.env import EnvConfig, TrainEnv  # noqa: E402
from p4cc.learn.nets import GroupMLP  # noqa: E402
from p4cc.scale import get_scale  # noqa: E402


def test_gae_by_hand_and_episode_boundaries() -> None:
    r = torch.tensor([1.0, 0.0, 2.0])
    v = torch.tensor([0.5, 1.0, 0.0])
    nv = torch.tensor([1.0, 0.0, 3.0])
    g, lam = 0.9, 0.5
    d = r + g * nv - v  # δ = [1.4, -1.0, 4.7]
    adv, ret = pet.gae(r, v, nv, torch.zeros(3), g, lam)
    a2 = d[2]
    a1 = d[1] + g * lam * a2
    a0 = d[0] + g * lam * a1
    torch.testing.assert_close(adv, torch.stack([a0, a1, a2]))
    torch.testing.assert_close(ret, adv + v)
    # a truncation after step 1 stops the advantage from flowing back across it,
    # while δ_1 still bootstraps from V(s_2) of the old episode
    adv_b, _ = pet.gae(r, v, nv, torch.tensor([0.0, 1.0, 0.0]), g, lam)
    torch.testing.assert_close(adv_b, torch.stack([d[0] + g * lam * d[1], d[1], d[2]]))
    # PET's λ = 0.01 is nearly the one-step TD error
    adv_p, _ = pet.gae(r, v, nv, torch.zeros(3), g, 0.01)
    assert torch.allclose(adv_p, d, atol=0.06)
    # batched over agents: time is the last axis
    adv2, _ = pet.gae(torch.stack([r, r]), torch.stack([v, v]), torch.stack([nv, nv]),
                      torch.zeros(2, 3), g, lam)
    torch.testing.assert_close(adv2[1], adv)


def test_ppo_clipped_objective() -> None:
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0])
    old = torch.zeros(4)
    logp = torch.log(torch.tensor([1.5, 0.9, 0.5, 1.1]))  # ratios
    loss = pet.policy_loss(logp, old, adv, clip=0.2)
    # min(ρA, clip(ρ)A): 1.2 (clipped), 0.9, -0.8 (clipped), -1.1
    assert loss.item() == pytest.approx(-(1.2 + 0.9 - 0.8 - 1.1) / 4)
    # no gradient through the clipped side
    lp = logp.clone().requires_grad_(True)
    pet.policy_loss(lp, old, adv, 0.2).backward()
    assert lp.grad is not None
    assert lp.grad[0] == 0 and lp.grad[2] == 0 and lp.grad[1] != 0 and lp.grad[3] != 0
    assert pet.value_loss(torch.tensor([1.0, 3.0]), torch.tensor([0.0, 1.0])).item() == 2.5


def test_exploration_decay_and_mixed_policy() -> None:
    cfg = pet.PetConfig()
    assert pet.exploration(0, cfg) == pytest.approx(0.2)
    assert pet.exploration(50, cfg) == pytest.approx(0.2)  # eq. 13 applies when t > T
    assert pet.exploration(500, cfg) == pytest.approx(0.2 * 0.99**10)
    logits = torch.tensor([[2.0, 0.0, -1.0, 0.5]])
    p = torch.softmax(logits, -1)
    for eps in (0.0, 0.3):
        lp = pet.mixed_log_prob(logits, torch.tensor([2]), torch.tensor([eps]))
        assert lp.exp().item() == pytest.approx(((1 - eps) * p[0, 2] + eps / 4).item())


def test_update_on_a_fixed_batch_lowers_the_losses() -> None:
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    actor, critic = GroupMLP(1, (3, 16, 4)), GroupMLP(1, (3, 16, 1))
    obs = torch.randn(1, 64, 3)
    act = torch.randint(0, 4, (1, 64), generator=gen)
    eps = torch.full((1, 64), 0.1)
    with torch.no_grad():
        logp = pet.mixed_log_prob(actor(obs), act, eps)
    ret = obs[..., 0] * 2.0 + 1.0  # a learnable value target
    adv = torch.where(act == 1, 1.0, -1.0)  # action 1 is the good one
    b = {"obs": obs, "act": act, "logp": logp, "eps": eps, "adv": adv, "ret": ret}
    cfg = pet.PetConfig(epochs=10, minibatches=2, lr_critic=1e-2)
    opt_a = torch.optim.Adam(actor.parameters(), lr=cfg.lr_actor)
    opt_c = torch.optim.Adam(critic.parameters(), lr=cfg.lr_critic)
    v0 = pet.value_loss(critic(obs).squeeze(-1), ret).item()
    p0 = torch.softmax(actor(obs), -1)[..., 1].mean().item()
    pet.update(actor, critic, opt_a, opt_c, b, cfg, gen)
    assert pet.value_loss(critic(obs).squeeze(-1), ret).item() < 0.5 * v0
    assert torch.softmax(actor(obs), -1)[..., 1].mean().item() > p0


def test_train_env_uses_template_mix_and_pet_reward() -> None:
    cfg = EnvConfig(topo="leafspine,spines=1,leaves=2,hosts=2", intervals=4,
                    scenarios=("incast", "storage", "datamining"), load=(0.5, 0.5))
    env = TrainEnv(cfg, "pet", PET_TEMPLATE)
    assert env.action_space.nvec.tolist() == [PET_TEMPLATE.n_actions] * env.n_agents
    seen = set()
    for seed in range(6):
        obs, _ = env.reset(seed=seed)
        seen.add(env.scenario)
        assert obs.shape == (env.n_agents, 3 * 8)
    assert seen <= {"incast", "storage", "datamining"} and len(seen) >= 2
    _, _, _, _, info = env.step(np.zeros(env.n_agents, np.int64))
    r = info["agent_rewards"]
    assert r.shape == (env.n_agents,) and np.all(np.isfinite(r))
    assert np.all((r >= 0) & (r <= 1.0 + 1e-9))  # β1 + β2 = 1, T and L_a in [0, 1]
    first = PET_TEMPLATE.configs(env.scale)[0]
    assert all(rec.ecn == first for rec in env._last)  # action 0 is in force


def test_smoke_training_value_loss_falls(tmp_path: Path) -> None:
    env = EnvConfig(topo="star,hosts=4", intervals=50, scenarios=("websearch",),
                    load=(0.7, 0.7))
    cfg = pet.PetConfig(seed=3, steps=320, online_steps=64, env=env, rollout=32)
    res = pet.train(cfg, tmp_path, progress=False, command=["p4cc", "train", "pet"])
    vl = [r["value_loss"] for r in res["rows"] if r["phase"] == "offline"]
    assert np.mean(vl[-3:]) < vl[0]
    side = json.loads(res["sidecar"].read_text())
    assert side["meta"]["algo"] == "pet" and side["final"]["phase"] == "online"
    agent = LearnedAgent("pet", get_scale("testbed"), res["checkpoint"])
    assert agent.template.n_actions == 900 and "s1:1" in agent.nets


def test_p4cc_train_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from p4cc.cli import main

    rc = main(["train", "pet", "--steps", "40", "--topo", "star,hosts=3", "--intervals", "20",
               "--scenarios", "websearch", "--set", "rollout=20", "--quiet",
               "--out", str(tmp_path), "--name", "t"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert Path(out["checkpoint"]).is_file() and Path(out["plot"]).is_file()
    side = json.loads((tmp_path / "t" / "pet.json").read_text())
    assert side["config"]["steps"] == 40 and side["config"]["rollout"] == 20


def test_without_extra_features_the_ablation_trains_and_deploys_on_six(tmp_path: Path) -> None:
    """PET without incast degree and mice/elephant ratio (issue 9's ablation): the env
    observes ACC's six features, the checkpoint says so, the deployed agent feeds six."""
    env = EnvConfig(topo="star,hosts=3", intervals=20, scenarios=("websearch",),
                    load=(0.6, 0.6))
    cfg = pet.PetConfig(seed=2, steps=40, env=env, rollout=20, extra_features=False)
    res = pet.train(cfg, tmp_path, progress=False, command=["p4cc", "train", "pet"])
    side = json.loads(res["sidecar"].read_text())
    assert side["meta"]["n_feat"] == 6 and side["config"]["extra_features"] is False
    agent = LearnedAgent("pet", get_scale("testbed"), res["checkpoint"])
    assert agent.n_feat == 6 and agent.nets["main"][0][0].shape[1] == 3 * 6
    full = pet.train(pet.PetConfig(seed=2, steps=40, env=env, rollout=20), tmp_path / "f",
                     progress=False, command=["p4cc", "train", "pet"])
    assert LearnedAgent("pet", get_scale("testbed"), full["checkpoint"]).n_feat == 8


def test_entropy_bonus_in_the_actor_loss() -> None:
    uniform = torch.zeros(2, 4)
    assert pet.entropy(uniform).item() == pytest.approx(np.log(4))
    peaked = torch.tensor([[20.0, 0.0, 0.0, 0.0]])
    assert pet.entropy(peaked).item() < 1e-6
    act, eps = torch.tensor([0]), torch.tensor([0.0])
    logits = torch.tensor([[1.0, 0.0, -1.0, 0.5]], requires_grad=True)
    old = pet.mixed_log_prob(logits, act, eps).detach()
    adv = torch.tensor([1.0])
    base = pet.actor_loss(logits, act, eps, old, adv, 0.2, 0.0)
    assert base.item() == pytest.approx(pet.policy_loss(old, old, adv, 0.2).item())
    with_h = pet.actor_loss(logits, act, eps, old, adv, 0.2, 0.5)
    assert with_h.item() == pytest.approx(base.item() - 0.5 * pet.entropy(logits).item())
    # with no advantage the bonus alone pushes the policy towards uniform
    loss = pet.actor_loss(logits, act, eps, old, torch.zeros(1), 0.2, 0.5)
    loss.backward()
    assert logits.grad is not None
    assert logits.grad[0, 0] > 0 > logits.grad[0, 2]  # lowers the top, raises the bottom
    assert pet.PetConfig().entropy_coef > 0


def test_pet_reward_shift_guard_tells_short_queues_apart() -> None:
    from p4cc.controlplane.agents.state import pet_reward

    q = np.array([0.0, 5_000.0, 20_000.0, 200_000.0])
    floor = pet_reward(np.zeros(4), q, 20_000, 0.3, 0.7)
    shift = pet_reward(np.zeros(4), q, 20_000, 0.3, 0.7, guard="shift")
    assert floor[0] == floor[1] == floor[2]  # the floor is flat below one unit
    np.testing.assert_allclose(shift, 0.7 / (1.0 + q / 20_000))
    assert shift[0] > shift[1] > shift[2] > shift[3] > 0
    with pytest.raises(Exception, match="guard"):
        pet_reward(0.5, 0.0, 20_000, 0.3, 0.7, guard="none")


def test_train_env_features_use_the_configured_scaling() -> None:
    from p4cc.controlplane.agents.state import features

    for scaling in ("log", "linear"):
        cfg = EnvConfig(topo="star,hosts=4", intervals=3, scenarios=("websearch",),
                        load=(0.8, 0.8), feature_scaling=scaling)
        env = TrainEnv(cfg, "pet", PET_TEMPLATE)
        env.reset(seed=2)
        obs, *_ = env.step(np.full(env.n_agents, 5))
        want = np.stack([features(next(r for r in env._last if r.key == k),
                                  env.scale.buffer_bytes, True, env.incast_norm, scaling)
                         for k in env.keys])
        np.testing.assert_allclose(obs[:, -8:], want, rtol=1e-6)


def test_factored_head_sums_component_logits_and_exports_as_a_plain_layer() -> None:
    """actor_head = 'factored': logit(Kmin n, Kmax m, Pmax j) = a_n + b_m + c_j; the
    exported 900-row layer gives the deployed numpy agent the same logits."""
    from p4cc.controlplane.agents.mlp import forward

    m = pet.head_expansion(PET_TEMPLATE)
    assert m.shape == (900, 40) and torch.all(m.sum(1) == 3)
    h = torch.randn(40)
    for a in (0, 19, 20, 457, 899):
        kmin_n, kmax_n, pmax = PET_TEMPLATE.decode(a)
        j = PET_TEMPLATE.pmax_values.index(pmax)
        want = h[kmin_n] + h[10 + kmax_n] + h[20 + j]
        assert (m[a] @ h).item() == pytest.approx(want.item(), abs=1e-5)
    torch.manual_seed(4)
    actor = pet.make_actor(pet.PetConfig(actor_head="factored"), 24)
    assert isinstance(actor, pet.FactoredActor) and actor.trunk.sizes[-1] == 40
    with torch.no_grad():  # a non-trivial last layer (the init's logits are ~0)
        actor.trunk.weights[-1].normal_()
        actor.trunk.biases[-1].normal_()
    x = np.random.default_rng(0).random((50, 24)).astype(np.float32)
    with torch.no_grad():
        want_t = actor(torch.as_tensor(x)[None])[0].numpy()
    got = forward(actor.layers(0), x)
    assert got.shape == (50, 900)
    np.testing.assert_allclose(got, want_t, rtol=1e-4, atol=1e-4)
    two = actor.replicate(2)
    np.testing.assert_allclose(forward(two.layers(1), x), got, rtol=1e-4, atol=1e-4)
    with pytest.raises(Exception, match="actor_head"):
        pet.PetConfig(actor_head="tree")


def test_factored_head_trains_and_deploys(tmp_path: Path) -> None:
    env = EnvConfig(topo="star,hosts=3", intervals=20, scenarios=("websearch",),
                    load=(0.6, 0.6))
    cfg = pet.PetConfig(seed=2, steps=40, env=env, rollout=20, actor_head="factored")
    res = pet.train(cfg, tmp_path, progress=False, command=["p4cc", "train", "pet"])
    side = json.loads(res["sidecar"].read_text())
    assert side["meta"]["actor_head"] == "factored"
    agent = LearnedAgent("pet", get_scale("testbed"), res["checkpoint"])
    assert agent.nets["main"][-1][0].shape[0] == 900


def test_gae_with_a_discount_per_step() -> None:
    """Held decisions (``decision_hold``): step t's δ and its advantage's carry use its
    own discount γ_t = γ^k_t, k_t the intervals the decision was held."""
    r = torch.tensor([1.0, 0.0, 2.0])
    v = torch.tensor([0.5, 1.0, 0.0])
    nv = torch.tensor([1.0, 0.0, 3.0])
    g = torch.tensor([0.9**3, 0.9**3, 0.9])  # the last decision was cut to 1 interval
    lam = 0.5
    d = r + g * nv - v
    adv, ret = pet.gae(r, v, nv, torch.zeros(3), g, lam)
    a2 = d[2]
    a1 = d[1] + g[1] * lam * a2
    a0 = d[0] + g[0] * lam * a1
    torch.testing.assert_close(adv, torch.stack([a0, a1, a2]))
    torch.testing.assert_close(ret, adv + v)
    # a constant tensor is the float
    same, _ = pet.gae(r, v, nv, torch.zeros(3), torch.full((3,), 0.9), lam)
    torch.testing.assert_close(same, pet.gae(r, v, nv, torch.zeros(3), 0.9, lam)[0])


def _hold_env(intervals: int) -> TrainEnv:
    cfg = EnvConfig(topo="star,hosts=4", intervals=intervals, scenarios=("websearch",),
                    load=(0.8, 0.8))
    return TrainEnv(cfg, "pet", PET_TEMPLATE)


def test_hold_step_plays_k_intervals_and_discounts_their_rewards() -> None:
    gamma = 0.9
    a_env, b_env = _hold_env(5), _hold_env(5)
    a_env.reset(seed=4)
    b_env.reset(seed=4)
    act = np.full(a_env.n_agents, 17, np.int64)
    rs = []
    for _ in range(3):
        nxt, _, _, _, info = b_env.step(act)
        rs.append(np.asarray(info["agent_rewards"]))
    assert any(r.max() > 0 for r in rs)  # the test sees traffic
    step = pet.hold_step(a_env, act, 3, gamma)
    np.testing.assert_allclose(step["rew"], rs[0] + gamma * rs[1] + gamma**2 * rs[2])
    np.testing.assert_allclose(step["r1"], (rs[0] + rs[1] + rs[2]) / 3)
    np.testing.assert_array_equal(step["next"], nxt)
    assert step["disc"] == pytest.approx(gamma**3)
    assert step["intervals"] == 3 and not step["trunc"]
    # the episode (5 intervals) ends after 2 more: the hold is cut there
    cut = pet.hold_step(a_env, act, 3, gamma)
    assert cut["intervals"] == 2 and cut["trunc"]
    assert cut["disc"] == pytest.approx(gamma**2)
    # k = 1 is one plain interval: its reward exactly
    b_env.reset(seed=4)
    one = pet.hold_step(b_env, act, 1, gamma)
    np.testing.assert_array_equal(one["rew"], rs[0])


def test_decision_hold_trains_one_decision_per_k_intervals(tmp_path: Path) -> None:
    env = EnvConfig(topo="star,hosts=4", intervals=50, scenarios=("websearch",),
                    load=(0.7, 0.7))
    cfg = pet.PetConfig(seed=3, steps=400, env=env, rollout=8, decision_hold=5)
    res = pet.train(cfg, tmp_path, progress=False)
    # 8 decisions of 5 intervals per update: a curve row every 40 intervals
    assert [r["step"] for r in res["rows"]] == list(range(40, 401, 40))
    side = json.loads(res["sidecar"].read_text())
    assert side["config"]["decision_hold"] == 5
    with pytest.raises(ConfigError, match="decision_hold"):
        pet.PetConfig(decision_hold=0)
