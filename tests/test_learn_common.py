"""ACC/PET shared pieces without torch: action template, features, rewards, NCM expiry,
idle-queue rule, checkpoint format, the deployed agents and their registration."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from p4cc.bench.agents import random_checkpoint, synthetic_records
from p4cc.controlplane.agents.learned import LearnedAgent
from p4cc.controlplane.agents.mlp import forward, load_npz, save_npz
from p4cc.controlplane.agents.state import (
    History,
    IdleRule,
    acc_reward,
    d_of_l,
    features,
    pet_reward,
    unscaled_levels,
)
from p4cc.controlplane.agents.static import make_agent
from p4cc.controlplane.agents.template import ACC_TEMPLATE, PET_TEMPLATE
from p4cc.controlplane.ecn import EcnConfig
from p4cc.errors import ConfigError
from p4cc.scale import get_scale
from p4cc.sim.envs import EcnTuningEnv


def test_action_template_counts_order_and_scaling() -> None:
    assert len(ACC_TEMPLATE.pairs) == 55 and len(ACC_TEMPLATE.pmax_values) == 20
    assert ACC_TEMPLATE.n_actions == 55 * 20
    assert PET_TEMPLATE.n_actions == 45 * 20
    assert ACC_TEMPLATE.pmax_values[0] == pytest.approx(0.05)
    assert ACC_TEMPLATE.pmax_values[-1] == pytest.approx(1.0)
    for name in ("paper", "testbed"):
        sc = get_scale(name)
        levels = ACC_TEMPLATE.levels(sc)
        # α = 20 KB scaled by the BDP factor; E(n) doubles until the buffer clips it
        assert levels[0] == round(sc.bytes(20_000))
        assert levels[3] == round(sc.bytes(160_000))
        assert max(levels) == sc.buffer_bytes
        for tpl in (ACC_TEMPLATE, PET_TEMPLATE):
            cfgs = tpl.configs(sc)
            assert len(cfgs) == tpl.n_actions
            assert all(c.kmin_bytes <= c.kmax_bytes <= sc.buffer_bytes for c in cfgs)
    tb = get_scale("testbed")
    assert tb.bytes(20_000) == pytest.approx(2_000)  # bdp factor 0.1 on the testbed
    assert ACC_TEMPLATE.decode(0) == (0, 0, pytest.approx(0.05))
    assert ACC_TEMPLATE.decode(21) == (0, 1, pytest.approx(0.10))
    kmin_n, kmax_n, _ = PET_TEMPLATE.decode(0)
    assert kmin_n < kmax_n  # PET: strictly below


def test_d_of_l_steps_and_acc_reward() -> None:
    lv = unscaled_levels(20_000)
    assert lv[-1] == 20_000 * 2**9
    got = d_of_l(np.array([0, 20_000, 20_001, 40_000, 40_001, lv[-1], lv[-1] + 1]), lv)
    np.testing.assert_allclose(got, [1.0, 1.0, 0.9, 0.9, 0.8, 0.1, 0.0])
    r = acc_reward(np.array([1.0, 0.5]), np.array([0.0, 100_000.0]), lv, 0.3, 0.7)
    # 100 KB: first E(n) >= L is E(3) = 160 KB -> D = 0.7
    np.testing.assert_allclose(r, [0.3 + 0.7, 0.15 + 0.7 * 0.7])


def test_pet_reward_guards_the_empty_queue() -> None:
    r = pet_reward(np.array([0.5, 0.5, 0.5, 1.0]), np.array([0.0, 10.0, 40_000.0, 80_000.0]),
                   20_000, 0.3, 0.7)
    assert np.all(np.isfinite(r))
    np.testing.assert_allclose(r, [0.15 + 0.7, 0.15 + 0.7, 0.15 + 0.35, 0.3 + 0.175])


def _env_and_records(variant: str) -> tuple[EcnTuningEnv, list]:
    env = EcnTuningEnv(topo="star,hosts=4", intervals=3, variant=variant)
    env.reset(seed=3)
    env.step(env.action_space.sample())
    return env, env._last


@pytest.mark.parametrize("variant", ["acc", "pet"])
def test_features_match_the_training_env(variant: str) -> None:
    env, recs = _env_and_records(variant)
    want = env._features(recs)
    got = np.stack([features(next(r for r in recs if r.key == k), env.scale.buffer_bytes,
                             variant == "pet", float(len(env.topo.hosts))) for k in env.keys])
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_history_window_and_ncm_expiry() -> None:
    h = History(3, 2)
    for t in (1.0, 2.0, 3.0):
        h.push(t, np.full(2, t))
    np.testing.assert_allclose(h.window(3.0, 1.0), [1, 1, 2, 2, 3, 3])
    h.push(4.0, np.full(2, 4.0))  # threshold cleanup: never more than k entries
    assert len(h) == 3
    # two intervals missing: t=2,3 expired at slot 6 (slot t-k and earlier), slot 5 empty
    h.push(6.0, np.full(2, 6.0))
    np.testing.assert_allclose(h.window(6.0, 1.0), [4, 4, 0, 0, 6, 6])
    assert len(h) == 2
    # much later: everything stale is dropped, never reused
    np.testing.assert_allclose(h.window(50.0, 1.0), np.zeros(6))
    assert len(h) == 0


def test_idle_queue_rule() -> None:
    rule = IdleRule()
    assert rule.step(1, qlen_bytes=500, kmin_bytes=1000, reward=0.5)  # below Kmin: idle
    assert rule.step(1, qlen_bytes=900, kmin_bytes=1000, reward=0.6)  # still idle
    assert not rule.step(1, qlen_bytes=2000, kmin_bytes=1000, reward=0.7)  # above: busy
    # busy port whose reward stays flat for three intervals becomes idle
    rule2 = IdleRule()
    states = [rule2.step(2, 5000, 1000, 0.4) for _ in range(4)]
    assert states == [False, False, False, True]
    assert not rule2.step(3, 5000, 1000, 0.4)  # ports are independent
    # marking off (no Kmin): only the reward rule applies
    assert not IdleRule().step(4, 0.0, None, 0.1)


def test_npz_roundtrip_and_errors(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    layers = [(rng.normal(size=(4, 3)).astype(np.float32), np.zeros(4, np.float32)),
              (rng.normal(size=(2, 4)).astype(np.float32), np.ones(2, np.float32))]
    p = save_npz(tmp_path / "x.npz", {"main": layers, "s1:2": layers}, {"algo": "acc"})
    nets, meta = load_npz(p)
    assert meta == {"algo": "acc"} and set(nets) == {"main", "s1:2"}
    x = rng.normal(size=(5, 3)).astype(np.float32)
    want = np.maximum(x @ layers[0][0].T + layers[0][1], 0) @ layers[1][0].T + layers[1][1]
    np.testing.assert_allclose(forward(nets["main"], x), want, rtol=1e-6)
    with pytest.raises(ConfigError, match="not found"):
        load_npz(tmp_path / "missing.npz")
    (tmp_path / "bad.npz").write_text("nope")
    with pytest.raises(ConfigError):
        load_npz(tmp_path / "bad.npz")


@pytest.mark.parametrize("algo", ["acc", "pet"])
def test_deployed_agent_registered_and_acts(tmp_path: Path, algo: str) -> None:
    path = random_checkpoint(tmp_path / f"{algo}.npz", algo)
    scale = get_scale("testbed")
    agent = make_agent(f"{algo}:{path}", scale)
    assert isinstance(agent, LearnedAgent) and agent.name == algo
    agent.reset({p: None for p in range(1, 9)})
    rng = np.random.default_rng(0)
    out = agent.act(synthetic_records("testbed", 8, 0.01, rng))
    assert set(out) <= set(range(1, 9)) and out  # busy queues, marking off: all set
    for cfg in out.values():
        assert isinstance(cfg, EcnConfig) and cfg in agent.settings
        cfg.validate(scale.buffer_bytes)
    with pytest.raises(ConfigError, match="holds a"):
        make_agent(f"{'pet' if algo == 'acc' else 'acc'}:{path}", scale)


def test_acc_agent_skips_idle_queues(tmp_path: Path) -> None:
    agent = LearnedAgent("acc", get_scale("testbed"),
                         random_checkpoint(tmp_path / "a.npz", "acc"))
    rng = np.random.default_rng(0)
    recs = synthetic_records("testbed", 2, 0.01, rng)
    high = EcnConfig(90_000, 100_000, 0.1)
    idle = {p: type(r)(**{**r.__dict__, "qlen_avg_bytes": 10.0, "ecn": high})
            for p, r in recs.items()}
    assert agent.act(idle) == {}  # queues below Kmin: no inference, no change


def test_default_checkpoint_missing_is_a_config_error(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from p4cc.controlplane.agents import learned

    monkeypatch.setitem(learned.DEFAULT_CHECKPOINTS, "acc", tmp_path / "absent.npz")
    with pytest.raises(ConfigError, match="p4cc train"):
        make_agent("acc", get_scale("testbed"))


@pytest.mark.parametrize("name", ["acc", "pet"])
def test_shipped_checkpoints_load_with_their_sidecars(name: str) -> None:
    """The committed p4cc/data/agents/<name>.npz: a trained model whose sidecar names the
    command, seed and commit that produced it, and which the plain name loads."""
    from p4cc.controlplane.agents import learned

    path = learned.DEFAULT_CHECKPOINTS[name]
    side = json.loads(path.with_suffix(".json").read_text())
    assert side["command"].startswith(f"p4cc train {name}") and side["seed"] >= 1
    assert len(side["git_commit"]) == 40 and side["meta"]["algo"] == name
    assert side["final"]["step"] >= 10_000 and path.stat().st_size == side["bytes"]
    agent = make_agent(name, get_scale("testbed"))
    assert agent.name == name


def test_bench_decision_case() -> None:
    from p4cc.bench.agents import decision

    rec = decision("acc", ports=8, reps=30)
    assert rec["case"] == "decision_acc" and rec["actions"] == 1100
    assert 0 < rec["median_us"] < 1e6
    for algo in ("acc", "pet"):
        shipped = decision(algo, ports=8, reps=30, shipped=True)
        agent = make_agent(algo, get_scale("testbed"))
        assert isinstance(agent, LearnedAgent)
        assert shipped["case"] == f"decision_{algo}_shipped"
        assert shipped["actions"] == agent.template.n_actions
        assert shipped["actions"] < (1100 if algo == "acc" else 900)
        assert 0 < shipped["median_us"] < 1e6


def test_bench_decision_shipped_skips_without_checkpoint(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from p4cc.bench import agents as bench

    monkeypatch.setitem(bench.DEFAULT_CHECKPOINTS, "pet", tmp_path / "absent.npz")
    rec = bench.decision("pet", reps=5, shipped=True)
    assert rec["case"] == "decision_pet_shipped" and "absent.npz" in rec["skipped"]


def test_deployment_never_imports_torch() -> None:
    import subprocess
    import sys

    from p4cc.paths import PACKAGE_DIR

    for path in (PACKAGE_DIR / "controlplane").rglob("*.py"):
        text = path.read_text()
        assert "import torch" not in text and "from torch" not in text, path
    code = ("import sys, numpy as np, tempfile, pathlib\n"
            "from p4cc.bench.agents import random_checkpoint, synthetic_records\n"
            "from p4cc.controlplane.agents.static import make_agent\n"
            "from p4cc.scale import get_scale\n"
            "p = random_checkpoint(pathlib.Path(tempfile.mkdtemp()) / 'a.npz', 'pet')\n"
            "a = make_agent(f'pet:{p}', get_scale('testbed'))\n"
            "a.act(synthetic_records('testbed', 8, 0.01, np.random.default_rng(0)))\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
