"""Online fine-tuning during a deployment run (``acc:online``, ``pet:online``):
resolution by name in p4cc.experiment.agents, learning from the run's transitions, the
weights written to the run directory, and the error without torch."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from p4cc.bench.agents import random_checkpoint, synthetic_records
from p4cc.controlplane.agents.learned import LearnedAgent
from p4cc.controlplane.agents.mlp import load_npz
from p4cc.controlplane.agents.static import make_agent
from p4cc.errors import ConfigError
from p4cc.experiment.agents import RunAgents, online_items, online_parts
from p4cc.scale import get_scale

SCALE = get_scale("testbed")


def _changed(before: list, after: list) -> bool:
    return any(not np.allclose(w0, w1) or not np.allclose(b0, b1)
               for (w0, b0), (w1, b1) in zip(before, after, strict=True))


def test_online_names() -> None:
    assert online_parts("acc:online") == ("acc", None)
    assert online_parts("PET:online:/x/pet.npz") == ("pet", "/x/pet.npz")
    assert online_parts("acc") is None and online_parts("acc:/x/online.npz") is None
    assert online_parts("secn1:online") is None
    assert online_parts("acc:online:/x/a.npz,online_priority=0") == ("acc", "/x/a.npz")
    assert online_items("acc:online:/x/a.npz,online_priority=0, learning_starts=20") == [
        "online_priority=0", "learning_starts=20"]
    assert online_items("acc:online") == []
    assert online_items("static:20000,640000,0.1") == []  # a static agent's own commas
    for bad in ("acc:online,online_priority", "acc:online,=1", "pet:online,rollout="):
        with pytest.raises(ConfigError, match="is not field=value"):
            online_items(bad)


def test_online_settings_are_checked_before_a_run() -> None:
    pytest.importorskip("torch")
    agents = RunAgents()
    agents.check("acc:online,online_priority=0.5,learning_starts=20")
    for name, why in (("acc:online,foo=1", "'foo' is not an online setting of acc"),
                      ("pet:online,online_priority=1", "not an online setting of pet"),
                      ("acc:online,online_priority=-1", "out of range; it must be >= 0"),
                      ("acc:online,batch_size=0", "batch_size=0 is out of range"),
                      ("acc:online,gamma=1.5", "must be >= 0 and <= 1"),
                      ("pet:online,clip=nan", "clip=nan is out of range"),
                      ("acc:online,learning_starts=2.5", "learning_starts=2.5: invalid"),
                      ("acc:online,lr=fast", "lr=fast: could not convert")):
        with pytest.raises(ConfigError, match=re.escape(f"agent {name!r}")) as exc:
            agents.check(name)
        assert why in str(exc.value)
        with pytest.raises(ConfigError, match=re.escape(why)):
            agents.make(name, SCALE)
    assert agents.online == {}


def test_a_spec_refuses_online_items_that_are_not_field_value() -> None:
    from p4cc.experiment.spec import parse_spec

    doc = {"name": "x", "backend": "sim", "topology": "star,hosts=4", "scale": "testbed",
           "duration_s": 1.0, "agents": ["secn1", "acc:online,online_priority"],
           "workloads": [{"type": "websearch", "load": 0.5}]}
    with pytest.raises(ConfigError, match=r"agents\[1\].*is not field=value"):
        parse_spec(doc)
    doc["agents"] = ["acc:online,online_priority=0", "static:20000,640000,0.1"]
    assert parse_spec(doc).agents == tuple(doc["agents"])


@pytest.mark.parametrize("priority", [None, 0.0, 0.5])
def test_online_settings_from_the_name_reach_the_learner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, priority: float | None) -> None:
    pytest.importorskip("torch")
    from p4cc.learn.online import OnlineConfig
    from p4cc.learn.replay import ReplayMemory

    drawn: list[float] = []
    sample = ReplayMemory.sample

    def spy(self: ReplayMemory, rng: np.random.Generator, batch: int,
            prio: float = 0.0) -> object:
        drawn.append(prio)
        return sample(self, rng, batch, prio)

    monkeypatch.setattr(ReplayMemory, "sample", spy)
    base = random_checkpoint(tmp_path / "acc.npz", "acc")
    name = f"acc:online:{base},learning_starts=3"
    if priority is not None:
        name += f",online_priority={priority}"
    # the caller's settings come first, the name's override them
    agents = RunAgents(config=OnlineConfig(seed=2, settings=(("learning_starts", 50),
                                                             ("batch_size", 8))))
    agent = agents.make(name, SCALE)
    agent.reset({p: None for p in range(1, 3)})
    rng = np.random.default_rng(0)
    for k in range(8):
        agent.act(synthetic_records("testbed", 2, 0.01 * (k + 1), rng))
    cfg = agent.cfg  # type: ignore[attr-defined]
    assert cfg.learning_starts == 3 and cfg.batch_size == 8
    want = 1.0 if priority is None else priority  # AccConfig's default: 1
    assert cfg.online_priority == want
    assert len(drawn) == agent.updates > 0  # type: ignore[attr-defined]
    assert set(drawn) == {want}


def test_without_torch_a_clear_config_error(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    agents = RunAgents()
    for name in ("acc:online", "pet:online"):
        with pytest.raises(ConfigError, match=r"pip install -e '\.\[train\]'"):
            agents.check(name)
        with pytest.raises(ConfigError, match=r"train extra"):
            agents.make(f"{name}:{random_checkpoint(tmp_path / 'a.npz', name[:3])}", SCALE)
    agents.check("acc")  # the deployed agents need no torch
    assert agents.online == {}


@pytest.mark.parametrize("algo", ["acc", "pet"])
def test_online_agent_learns_from_its_transitions(tmp_path: Path, algo: str) -> None:
    pytest.importorskip("torch")
    from p4cc.learn.online import OnlineConfig

    base = random_checkpoint(tmp_path / f"{algo}.npz", algo)
    agents = RunAgents(config=OnlineConfig(seed=3, settings=(
        ("learning_starts", 4), ("batch_size", 8)) if algo == "acc" else (("rollout", 8),)))
    agent = agents.make(f"{algo}:online:{base}", SCALE)
    assert agent.name == f"{algo}:online"
    other = agents.make(f"{algo}:online:{base}", SCALE)  # a second switch, same run
    assert len(agents.online) == 1 and len(agents.online[f"{algo}:online:{base}"].agents) == 2
    agent.reset({p: None for p in range(1, 5)})
    rng = np.random.default_rng(0)
    assert agent.act({}) == {}
    n_changes = 0
    for k in range(20):
        recs = synthetic_records("testbed", 4, 0.01 * (k + 1), rng)
        out = agent.act(recs)
        n_changes += len(out)
        assert all(cfg in agent.base.settings for cfg in out.values())  # type: ignore[attr-defined]
    assert n_changes > 0 and agent.updates > 0  # type: ignore[attr-defined]
    main = load_npz(base)[0]["main"]
    tuned = agent.layers()  # type: ignore[attr-defined]
    assert sorted(tuned) == [f"s1:{p}" for p in range(1, 5)]
    assert all(_changed(main, layers) for layers in tuned.values())
    assert other.layers() == {}  # type: ignore[attr-defined]  # never acted
    paths = agents.finish(tmp_path / "run", log=lambda line: None)
    assert [p.name for p in paths] == [f"{algo}-online.npz", f"{algo}-online.json"]
    side = json.loads(paths[1].read_text())
    assert side["base_checkpoint"] == str(base) and side["seed"] == 3 and side["command"]
    assert side["agents"][0]["updates"] == agent.updates  # type: ignore[attr-defined]
    # the fine-tuned file is a checkpoint the deployed (numpy) agent loads
    deployed = make_agent(f"{algo}:{paths[0]}", SCALE)
    assert isinstance(deployed, LearnedAgent) and "s1:1" in deployed.nets
    assert not _changed(deployed.nets["s1:1"], tuned["s1:1"])


@pytest.mark.slow
def test_sim_run_with_acc_online_writes_fine_tuned_weights(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from p4cc.experiment.runner import run_spec
    from p4cc.experiment.spec import parse_spec

    base = random_checkpoint(tmp_path / "acc.npz", "acc")
    doc = {"name": "online", "backend": "sim", "topology": "star,hosts=4",
           "scale": "testbed", "duration_s": 1.5, "interval_s": 0.01, "seed": 2,
           "agents": [f"acc:online:{base}"],
           "workloads": [{"type": "websearch", "load": 0.7, "size_scale": "bdp"}]}
    (path,) = run_spec(parse_spec(doc), out=tmp_path / "run",
                       progress=lambda label, d: (lambda t: None))
    npz, side = path / "acc-online.npz", path / "acc-online.json"
    assert npz.is_file() and side.is_file()
    doc_side = json.loads(side.read_text())
    assert doc_side["seed"] == 2 and doc_side["agents"][0]["updates"] > 0
    nets, meta = load_npz(npz)
    assert meta["online"]["tuned"] == [f"s1:{p}" for p in range(1, 5)]
    main = load_npz(base)[0]["main"]
    assert all(_changed(main, nets[f"s1:{p}"]) for p in range(1, 5))
    assert "fine-tuned weights" in (path / "log.txt").read_text()


def _with_idle_port(recs: dict, idle: int) -> dict:
    """``recs`` with port ``idle`` empty and silent for the interval."""
    import dataclasses

    r = recs[idle]
    recs[idle] = dataclasses.replace(r, qlen_avg_bytes=0.0, qlen_max_bytes=0.0, tx_bps=0.0,
                                     tx_marked_bps=0.0, tx_pkts=0, tx_marked_pkts=0,
                                     utilization=0.0, incast_degree=0, active_flows=0,
                                     elephant_flows=0)
    return recs


@pytest.mark.parametrize("algo", ["acc", "pet"])
@pytest.mark.parametrize("learn_idle", [False, True])
def test_online_agent_weighs_idle_ports_as_training_does(tmp_path: Path, algo: str,
                                                         learn_idle: bool) -> None:
    """Training (``run_phase`` of acc.py / pet.py) gives an idle port's transition loss
    weight 0 unless ``learn_idle``; the online agent stores the same weights."""
    pytest.importorskip("torch")
    from p4cc.learn.online import OnlineConfig

    base = random_checkpoint(tmp_path / f"{algo}.npz", algo)
    big = ("learning_starts", 1000) if algo == "acc" else ("rollout", 1000)
    agents = RunAgents(config=OnlineConfig(seed=1, settings=(big,)))
    name = f"{algo}:online:{base}" + (",learn_idle=true" if learn_idle else "")
    agent = agents.make(name, SCALE)
    agent.reset({p: None for p in range(1, 4)})
    rng = np.random.default_rng(0)
    for k in range(6):
        agent.act(_with_idle_port(synthetic_records("testbed", 3, 0.01 * (k + 1), rng), 2))
    if algo == "acc":
        loc = agent.mem.local  # type: ignore[attr-defined]
        w = loc.weight[:, :loc.size]
    else:
        w = np.stack(agent.buf["w"], axis=1)  # type: ignore[attr-defined]
    assert w.shape == (3, 5)  # 3 ports, 6 intervals -> 5 transitions
    assert np.all(w[[0, 2]] == 1.0)
    assert np.all(w[1] == (1.0 if learn_idle else 0.0))


@pytest.mark.parametrize(("every", "updates"), [(1, 6), (3, 2)])
def test_online_acc_steps_every_train_every_intervals(tmp_path: Path, every: int,
                                                      updates: int) -> None:
    pytest.importorskip("torch")
    from p4cc.learn.online import OnlineConfig

    base = random_checkpoint(tmp_path / "acc.npz", "acc")
    agents = RunAgents(config=OnlineConfig(seed=1, settings=(("batch_size", 4),)))
    agent = agents.make(f"acc:online:{base},learning_starts=2,train_every={every}", SCALE)
    agent.reset({p: None for p in range(1, 3)})
    rng = np.random.default_rng(0)
    for k in range(8):  # transitions at t = 1..7; steps at t = 2, 2 + every, ... <= 7
        agent.act(synthetic_records("testbed", 2, 0.01 * (k + 1), rng))
    assert agent.updates == updates  # type: ignore[attr-defined]


def test_run_and_sweep_refuse_a_bad_online_setting_before_writing(tmp_path: Path) -> None:
    """``p4cc run`` / ``p4cc sweep``: an online setting out of range stops them before any
    run directory (the first agent is fine, so a late check would have run it)."""
    pytest.importorskip("torch")
    import yaml

    from p4cc.experiment.runner import run_spec
    from p4cc.experiment.spec import parse_spec
    from p4cc.experiment.sweep import plan_sweep

    doc = {"name": "bad", "backend": "sim", "topology": "star,hosts=4", "scale": "testbed",
           "duration_s": 1.0, "agents": ["secn1", "acc:online,train_every=0"],
           "workloads": [{"type": "websearch", "load": 0.5}]}
    with pytest.raises(ConfigError, match=r"'acc:online,train_every=0'.*train_every=0 is "
                                          r"out of range"):
        run_spec(parse_spec(doc), out=tmp_path / "run")
    assert not (tmp_path / "run").exists()
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=r"train_every=0 is out of range"):
        plan_sweep(path, ["load=0.5,0.6"])


@pytest.mark.parametrize("algo", ["acc", "pet"])
def test_learn_idle_that_is_not_a_bool_is_refused(algo: str) -> None:
    pytest.importorskip("torch")
    name = f"{algo}:online,learn_idle=maybe"
    with pytest.raises(ConfigError) as exc:
        RunAgents().check(name)
    assert str(exc.value) == (f"agent {name!r}: learn_idle=maybe: expected true/false, "
                              f"got 'maybe'")
