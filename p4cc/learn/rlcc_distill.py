"""Distil a trained windowed RL-CC policy (the teacher) into a few boosted trees.

NVIDIA RL-CC §5.3: a student g imitates the fixed teacher f on the teacher's inputs and
outputs over states gathered from the teacher's own rollouts; CatBoost with ≤ 10 trees
of depth ≤ 4 on ConnectX-6Dx (§6).  Here: LightGBM (the ``train`` extra) with the same
limits, exported to the p4cc tree JSON the runtime loads
(:mod:`p4cc.hostcc.rlcc_trees`), output ``bounded`` like the teacher, so the student
predicts the teacher's pre-tanh output y from the same window of (δ, a_{t−1}).

States: rollouts of the teacher through the deployed rule on the training incasts
(2→1, 4→1, 8→1) and on 16→1 and 32→1 (unseen by the teacher's training, but the
teacher's own behaviour), every flow starting at its own random rate.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from p4cc.hostcc.rlcc_policies import MlpPolicy
from p4cc.hostcc.rlcc_policy_base import BOUNDED_M
from p4cc.hostcc.rlcc_trees import TreePolicy, load_tree_policy
from p4cc.learn.rlcc_adpg import AdpgConfig, Episode

#: Device limits of NVIDIA RL-CC §6 (ConnectX-6Dx): ≤ 10 trees, depth ≤ 4.
MAX_TREES, MAX_DEPTH = 10, 4


def teacher_y(action: np.ndarray) -> np.ndarray:
    """The pre-tanh output y of a ``bounded`` action (inverse of apply_output)."""
    a = np.asarray(action, dtype=np.float64)
    u = np.where(a >= 1.0, (a - 1.0) / BOUNDED_M, (1.0 - 1.0 / a) / BOUNDED_M)
    return np.arctanh(np.clip(u, -0.999, 0.999))


def gather(teacher: MlpPolicy, seed: int = 7, episodes: int = 2, rtts: int = 2048,
           scenario_sets: tuple[tuple[int, ...], ...] = ((2, 4, 8), (16, 32))
           ) -> tuple[np.ndarray, np.ndarray]:
    """(features, teacher y) of every decision of the teacher's rollouts."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for scen in scenario_sets:
        cfg = AdpgConfig(scenarios=scen, copies=1, episode_rtts=rtts)
        for _ in range(episodes):
            ep = Episode(cfg, teacher, rng)
            ep.rollout(rtts)
            for _ids, _k, obs, st in ep.recorder.log:
                feats = np.concatenate([st[0].reshape(len(obs), -1), obs], axis=1)
                xs.append(feats)
                ys.append(teacher_y(teacher.act(obs, st)[0]))
    return np.concatenate(xs), np.concatenate(ys)


def fit(x: np.ndarray, y: np.ndarray, trees: int = MAX_TREES, depth: int = MAX_DEPTH,
        learning_rate: float = 0.5, seed: int = 0) -> Any:
    """A LightGBM regressor within the device limits."""
    import lightgbm as lgb

    params = {"objective": "regression", "max_depth": depth, "num_leaves": 2 ** depth,
              "learning_rate": learning_rate, "min_data_in_leaf": 20, "seed": seed,
              "deterministic": True, "verbose": -1, "num_threads": 1}
    return lgb.train(params, lgb.Dataset(x, y), num_boost_round=trees)


def to_p4cc_trees(model: Any, window: int, output: str = "bounded") -> dict[str, Any]:
    """LightGBM's dump as the runtime's ``p4cc-trees`` JSON (x <= threshold: left)."""
    dump = model.dump_model()
    trees = []
    for info in dump["tree_info"]:
        nodes: list[dict[str, Any]] = []

        def walk(nd: dict[str, Any], nodes: list[dict[str, Any]] = nodes) -> int:
            i = len(nodes)
            nodes.append({})
            if "leaf_value" in nd:
                nodes[i] = {"leaf": float(nd["leaf_value"])}
                return i
            if nd.get("decision_type", "<=") != "<=":
                raise ValueError(f"unsupported LightGBM split {nd.get('decision_type')}")
            left, right = walk(nd["left_child"]), walk(nd["right_child"])
            nodes[i] = {"feature": int(nd["split_feature"]), "threshold": float(nd["threshold"]),
                        "left": left, "right": right}
            return i

        walk(info["tree_structure"])
        trees.append({"nodes": nodes})
    return {"format": "p4cc-trees", "version": 1, "window": window, "output": output,
            "base": 0.0, "trees": trees}


def distill(teacher: MlpPolicy, out: Path, seed: int = 7, **fit_kw: Any
            ) -> tuple[TreePolicy, dict[str, float]]:
    """Gather, fit on 80 % of the states, export; held-out agreement figures."""
    x, y = gather(teacher, seed=seed)
    rng = np.random.default_rng(seed)
    test = rng.random(len(y)) < 0.2
    model = fit(x[~test], y[~test], **fit_kw)
    out.write_text(json.dumps(to_p4cc_trees(model, teacher.window)) + "\n")
    student = load_tree_policy(out)
    a_t = teacher_action(y[test])
    a_s = teacher_action(student.predict(x[test]))
    stats = {"states": len(y), "held_out": int(test.sum()),
             "action_mae": float(np.mean(np.abs(a_s - a_t))),
             "action_max_err": float(np.max(np.abs(a_s - a_t))),
             "sign_agreement": float(np.mean(np.sign(a_s - 1) == np.sign(a_t - 1))),
             "trees": student.n_trees, "max_depth": fit_kw.get("depth", MAX_DEPTH)}
    return student, stats


def teacher_action(y: np.ndarray) -> np.ndarray:
    u = np.tanh(y)
    return np.where(u >= 0, 1.0 + BOUNDED_M * u, 1.0 / (1.0 - BOUNDED_M * u))


def fit_config() -> dict[str, Any]:
    return dataclasses.asdict(AdpgConfig())
