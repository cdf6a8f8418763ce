"""Distil a trained windowed RL-CC policy (the teacher) into a few boosted trees.

NVIDIA RL-CC §5.3: a student g imitates the fixed teacher f on the teacher's inputs and
outputs over states gathered from the teacher's own rollouts; CatBoost with ≤ 10 trees
of depth ≤ 4 on ConnectX-6Dx (§6).  Here: LightGBM (the ``train`` extra) with the same
limits, exported to the p4cc tree JSON the runtime loads
(:mod:`p4cc.hostcc.rlcc_trees`), output ``bounded`` like the teacher, so the student
predicts the teacher's pre-tanh output y from the same window of (δ, a_{t−1}).

States (:class:`DistillConfig`; gathered and labelled by
:mod:`p4cc.learn.rlcc_distill_states`): rollouts of the teacher through the deployed rule
on the training incasts (2→1, 4→1, 8→1) and on 16→1 and 32→1 (unseen by the teacher's
training, but the teacher's own behaviour), every flow starting at its own random rate,
with the executed action jittered by a small log-normal noise (σ 0.005) whose labels stay
the teacher's clean outputs (DART, ``_Jitter``): along the teacher's exact path δ_t,
δ_{t−1} and a_{t−1} move together, and the trees cannot tell apart the terms of its
near-linear law there (y ≈ 13.2·δ_t − 7.1·δ_{t−1} − 4.0·(a_{t−1} − 1) at the crossing,
measured on ``adpg-mlp-long``).  Optional and off by default (they made the closed-loop
queue worse in session 7): states of large incasts (:func:`incast_states`) and sample
weights at the teacher's crossing (:func:`operating_weights`).  Leaves are linear by
default (session 17, :mod:`p4cc.learn.rlcc_distill_fit`).  The LightGBM settings
(min_data_in_leaf 500, max_bin 1023) were picked by a random search on the closed-loop
queue at 256 and 1,536 flows (docs/hostcc-cc.md "Distilled trees").  Also optional and
off by default (session 8, docs/learning.md "Distillation into ≤ 10 trees"): monotone
constraints per feature, and a constant output offset calibrated on the closed loop at
validation incasts (:mod:`p4cc.learn.rlcc_distill_calib`, needs the teacher's file).
Opt-in since session 9: DAgger rounds on the student's own rollouts
(:mod:`p4cc.learn.rlcc_distill_dagger`, ``dagger_*``; docs/learning.md).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc_policies import MlpPolicy
from p4cc.hostcc.rlcc_policy_base import BOUNDED_M
from p4cc.hostcc.rlcc_trees import TreePolicy, load_tree_policy
from p4cc.learn import rlcc_distill_dagger as D
from p4cc.learn.rlcc_adpg import AdpgConfig
from p4cc.learn.rlcc_distill_calib import VALIDATION_NS
from p4cc.learn.rlcc_distill_dagger import Mixture
from p4cc.learn.rlcc_distill_fit import (
    MAX_DEPTH,
    MAX_TREES,
    clip_bounds,
    clip_rows,
    fit,
    to_p4cc_trees,
)
from p4cc.learn.rlcc_distill_states import gather, incast_states, label, teacher_y

__all__ = ["MAX_DEPTH", "MAX_TREES", "DistillConfig", "distill", "fit", "gather",
           "gather_all", "incast_states", "label", "operating_weights", "teacher_action",
           "teacher_crossing", "teacher_y", "to_p4cc_trees"]


@dataclass(frozen=True)
class DistillConfig:
    """What states the student is fitted on, and how."""

    seed: int = field(default=7, metadata={"help": "seeds the rollouts and the held-out split"})
    scenario_sets: tuple[tuple[int, ...], ...] = field(default=((2, 4, 8), (16, 32)), metadata={
        "help": "incasts of the training episodes (one host per flow, ≤ 63 hosts), "
                "one episode set per tuple"})
    episodes: int = field(default=2, metadata={"help": "episodes per scenario set"})
    rtts: int = field(default=2048, metadata={"help": "base RTTs per episode"})
    large: tuple[int, ...] = field(default=(), metadata={
        "help": "large N→1 incasts (flows spread over ≤ 63 senders) rolled out once each"})
    large_rtts: int = field(default=2000, metadata={"help": "base RTTs per large incast"})
    large_keep: float = field(default=0.05, metadata={
        "help": "fraction of the large incasts' decisions kept (a random subset)"})
    noise: float = field(default=0.005, metadata={
        "help": "σ of the log-normal jitter on the teacher's executed action while "
                "gathering (labels stay the teacher's clean outputs; 0: none)"})
    weight_width: float = field(default=0.0, metadata={
        "help": "δ width of the sample-weight bump at the teacher's crossing (0: unweighted)"})
    weight_gain: float = field(default=10.0, metadata={
        "help": "height of the weight bump over the base weight 1"})
    learning_rate: float = field(default=0.5, metadata={"help": "LightGBM shrinkage"})
    min_data_in_leaf: int = field(default=500, metadata={"help": "LightGBM min_data_in_leaf"})
    max_bin: int = field(default=1023, metadata={"help": "LightGBM max_bin (feature bins)"})
    lambda_l2: float = field(default=0.0, metadata={"help": "LightGBM L2 leaf penalty"})
    monotone: tuple[int, ...] = field(default=(0, 0, 0, 0), metadata={
        "help": "LightGBM monotone_constraints, one per feature (δ_{t−1}, a_{t−2}, δ_t, "
                "a_{t−1}; +1 non-decreasing, −1 non-increasing, 0 free; all 0: none).  "
                "The teacher's own signs are −1,−1,1,−1; 1,−1,1,−1 makes the output "
                "non-decreasing along the steady diagonal δ_{t−1} = δ_t.  Free by default: "
                "neither brought the closed-loop queue closer (session 8)"})
    linear_leaves: bool = field(default=True, metadata={
        "help": "LightGBM linear_tree: each leaf is a linear model of the features split "
                "on along its path (≤ 4 terms at depth 4; 10 trees then cost ≤ 130 "
                "operations, inside NVIDIA RL-CC §5.3's 150).  On by default since "
                "session 17 (the only students within 2 % of the teacher); false: the "
                "paper's constant leaves (p4cc.learn.rlcc_distill_fit)"})
    clip_delta: float = field(default=0.0, metadata={
        "help": "the student sees every δ feature clipped to >= −clip_delta, in the fit "
                "and in the exported file (its 'clip'); the labels stay the teacher's "
                "output at the true state (0: no clip, the default).  With 12 (the int8 δ "
                "range) two of three seeds missed the 2 % bar at 1,024-2,048 flows "
                "(session 17); the linear terms are bounded per leaf instead"})
    leaf_margin: float = field(default=1.0, metadata={
        "help": "a linear leaf's δ terms are bounded below at the smallest δ of the "
                "training rows that reached the leaf, less this margin (δ units); "
                "negative: unbounded (LightGBM's own leaves, which extrapolate)"})
    leaf_margin_high: float = field(default=0.0, metadata={
        "help": "... and bounded above at the largest δ of those rows plus this margin "
                "(0: the rows' own largest δ; without it the student held a 190 µs queue "
                "and dropped at the loose operating point, where the teacher holds 51)"})
    linear_lambda: float = field(default=0.0, metadata={
        "help": "LightGBM linear_lambda: ridge penalty of the linear leaves"})
    trees: int = field(default=MAX_TREES, metadata={"help": "boosting rounds (≤ 10)"})
    depth: int = field(default=MAX_DEPTH, metadata={"help": "tree depth (≤ 4)"})
    calibrate: bool = field(default=False, metadata={
        "help": "after the fit, add a constant output offset chosen so that the student's "
                "closed-loop queue matches the teacher's at calibrate_ns "
                "(p4cc.learn.rlcc_distill_calib; needs the teacher's file).  Off by "
                "default: it did not make the students robust (session 8)"})
    calibrate_ns: tuple[int, ...] = field(default=VALIDATION_NS, metadata={
        "help": "validation N→1 incasts of the calibration (not the Table-2 N)"})
    calibrate_rtts: int = field(default=4000, metadata={
        "help": "base RTTs per calibration run (second half measured)"})
    calibrate_span: float = field(default=0.02, metadata={
        "help": "the offset is searched in [−span, span] (units of the pre-tanh output)"})
    calibrate_steps: int = field(default=4, metadata={
        "help": "bisection steps of the offset search (resolution span / 2^steps)"})
    dagger_rounds: int = field(default=0, metadata={
        "help": "DAgger rounds after the first fit (p4cc.learn.rlcc_distill_dagger): roll "
                "out the student (mixed with the teacher, dagger_beta), label the states "
                "it visits with the teacher's output, add them to the data, refit.  0 "
                "(default): off, the paper's distillation on the teacher's rollouts only"})
    dagger_beta: float = field(default=0.0, metadata={
        "help": "DAgger mixture: in round i the executed action is the teacher's with "
                "probability dagger_beta^i per decision and flow, else the student's "
                "(0: the student alone from round 1 on)"})
    dagger_episodes: int = field(default=1, metadata={
        "help": "DAgger: episodes per scenario set per round (the scenario_sets, rtts)"})
    dagger_large: tuple[int, ...] = field(default=(), metadata={
        "help": "DAgger: large N→1 incasts also rolled out by the mixture each round "
                "(large_rtts base RTTs, large_keep of the decisions kept)"})
    dagger_weight: float = field(default=1.0, metadata={
        "help": "DAgger: sample weight of the student-visited states (the teacher's "
                "rollouts weigh 1; times the operating weights if weight_width > 0)"})

    def __post_init__(self) -> None:
        for name in ("large", "dagger_large"):  # ``--set large=128,512`` parses as text
            object.__setattr__(self, name, tuple(int(n) for n in getattr(self, name)))
        if not (1 <= self.trees <= MAX_TREES and 1 <= self.depth <= MAX_DEPTH):
            raise ConfigError(f"trees={self.trees}, depth={self.depth}: the device allows "
                              f"≤ {MAX_TREES} trees of depth ≤ {MAX_DEPTH}")
        if self.linear_leaves and any(self.monotone):
            raise ConfigError("monotone constraints need constant leaves (LightGBM): "
                              "set linear_leaves=false before monotone")
        if self.leaf_margin_high < 0:
            raise ConfigError(f"leaf_margin_high={self.leaf_margin_high} must be >= 0 (the "
                              "upper bound is off only with leaf_margin < 0)")
        if self.clip_delta < 0:
            raise ConfigError(f"clip_delta={self.clip_delta} must be >= 0 (0: no clip)")
        if self.linear_lambda < 0:
            raise ConfigError(f"linear_lambda={self.linear_lambda} must be >= 0")
        if not 0.0 < self.large_keep <= 1.0 or self.weight_width < 0 or self.weight_gain < 0:
            raise ConfigError("large_keep in (0, 1], weight_width >= 0, weight_gain >= 0")
        if self.calibrate_span <= 0 or self.calibrate_steps < 0 or self.calibrate_rtts < 2 \
                or not self.calibrate_ns or any(n < 1 for n in self.calibrate_ns):
            raise ConfigError("calibrate_span > 0, calibrate_steps >= 0, calibrate_rtts >= 2, "
                              "calibrate_ns: one or more N >= 1")
        if self.dagger_rounds < 0 or not 0.0 <= self.dagger_beta <= 1.0 \
                or self.dagger_episodes < 0 or self.dagger_weight <= 0 \
                or any(n < 1 for n in self.dagger_large):
            raise ConfigError("dagger_rounds >= 0, dagger_beta in [0, 1], dagger_episodes "
                              ">= 0, dagger_weight > 0, dagger_large: N >= 1")


def gather_all(teacher: MlpPolicy, cfg: DistillConfig) -> tuple[np.ndarray, np.ndarray]:
    """(features, teacher y): the training episodes' decisions, then the large incasts'."""
    x, _ = gather(teacher, cfg.seed, cfg.episodes, cfg.rtts, cfg.scenario_sets, cfg.noise)
    rng = np.random.default_rng([cfg.seed, 1])
    xs = [x] + [incast_states(teacher, n, cfg.large_rtts, cfg.large_keep, rng,
                              noise=cfg.noise)
                for n in cfg.large]
    x = np.concatenate(xs)
    return x, label(teacher, x)


def teacher_crossing(teacher: MlpPolicy, lo: float = -1.0, hi: float = 0.064) -> float:
    """δ* where the teacher's steady-state action a(δ, a_{t−1} = 1, same window) crosses 1
    (bisection; the closed loop's fixed point sits there)."""
    def y_at(d: float) -> float:
        return float(label(teacher, np.tile([d, 1.0], teacher.window)[None, :])[0])

    if y_at(lo) * y_at(hi) > 0:
        raise ConfigError(f"the teacher's action does not cross 1 for δ in [{lo}, {hi}]")
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if y_at(mid) * y_at(hi) > 0 else (mid, hi)
    return 0.5 * (lo + hi)


def operating_weights(x: np.ndarray, center: float, width: float, gain: float) -> np.ndarray:
    """Sample weights 1 + gain·exp(−½((δ_t − center)/width)²) on the latest δ (the
    second-last feature): squared error counts most around the crossing, where the
    closed loop operates and the trees' splits decide the queue (width 0: all 1)."""
    if width <= 0 or gain <= 0:
        return np.ones(len(x))
    return 1.0 + gain * np.exp(-0.5 * ((x[:, -2] - center) / width) ** 2)


def distill(teacher: MlpPolicy, out: Path, cfg: DistillConfig | None = None,
            teacher_file: Path | None = None) -> tuple[TreePolicy, dict[str, Any]]:
    """Gather, fit on 80 % of the states, export; with ``teacher_file`` (the teacher's
    policy file) and ``cfg.calibrate``, calibrate the output offset on the closed loop
    (:mod:`p4cc.learn.rlcc_distill_calib`).  Held-out agreement figures of the exported
    student (all held-out states, and those within ±0.01 of the teacher's crossing δ*)."""
    cfg = cfg or DistillConfig()
    x, y = gather_all(teacher, cfg)
    center = teacher_crossing(teacher)
    rng = np.random.default_rng(cfg.seed)
    data = D.Aggregate(x, y, operating_weights(x, center, cfg.weight_width, cfg.weight_gain),
                       rng.random(len(y)) < 0.2, np.zeros(len(y), dtype=np.int64))
    docs: list[dict[str, Any]] = []
    clip = clip_bounds(teacher.window, cfg.clip_delta)

    def refit(d: D.Aggregate) -> TreePolicy:
        train = ~d.test
        w = d.w[train]
        x_fit = clip_rows(d.x[train], clip)
        model = fit(x_fit, d.y[train], cfg.trees, cfg.depth, cfg.learning_rate,
                    weight=None if np.all(w == 1.0) else w,
                    min_data_in_leaf=cfg.min_data_in_leaf, max_bin=cfg.max_bin,
                    lambda_l2=cfg.lambda_l2, monotone=cfg.monotone,
                    linear=cfg.linear_leaves, linear_lambda=cfg.linear_lambda)
        docs.append(to_p4cc_trees(model, teacher.window, clip=clip,
                                  fitted_on=x_fit if cfg.leaf_margin >= 0 else None,
                                  margin=max(cfg.leaf_margin, 0.0),
                                  margin_high=cfg.leaf_margin_high))
        out.write_text(json.dumps(docs[-1]) + "\n")
        return load_tree_policy(out)

    vrng = np.random.default_rng([cfg.seed, 4])

    def visit(actor: Mixture, i: int) -> np.ndarray:
        xs = [gather(teacher, (cfg.seed, 2, i), cfg.dagger_episodes, cfg.rtts,
                     cfg.scenario_sets, actor=actor)[0]] if cfg.dagger_episodes else []
        xs += [incast_states(actor, n, cfg.large_rtts, cfg.large_keep, vrng)
               for n in cfg.dagger_large]
        return np.concatenate(xs) if xs else np.zeros((0, 2 * teacher.window))

    def weigh(xn: np.ndarray) -> np.ndarray:
        return cfg.dagger_weight * operating_weights(xn, center, cfg.weight_width,
                                                     cfg.weight_gain)

    D.run(data, cfg.dagger_rounds, cfg.dagger_beta, refit, visit,
          lambda xn: label(teacher, xn), weigh, np.random.default_rng([cfg.seed, 3]), teacher)
    x, y, test, doc = data.x, data.y, data.test, docs[-1]
    calib = None
    if teacher_file is not None and cfg.calibrate:
        from p4cc.learn import rlcc_distill_calib as C

        calib = C.calibrate_offset(doc, teacher_file, cfg.calibrate_ns,
                                   C.many_to_one_queue(cfg.calibrate_rtts),
                                   out.parent / f"{out.stem}-calibration",
                                   cfg.calibrate_span, cfg.calibrate_steps)
        doc = C.with_offset(doc, calib.offset)
    out.write_text(json.dumps(doc) + "\n")
    student = load_tree_policy(out)
    a_t = teacher_action(y[test])
    a_s = teacher_action(student.predict(x[test]))
    near = np.abs(x[test][:, -2] - center) < 0.01
    err = np.abs(a_s - a_t)
    stats: dict[str, Any] = {
        "states": len(y), "held_out": int(test.sum()), "action_mae": float(np.mean(err)),
        "action_max_err": float(np.max(err)),
        "sign_agreement": float(np.mean(np.sign(a_s - 1) == np.sign(a_t - 1))),
        "held_out_near_crossing": int(near.sum()),
        "action_mae_near_crossing": float(np.mean(err[near])) if near.any() else None,
        "teacher_crossing": center, "trees": student.n_trees, "max_depth": cfg.depth,
        "linear_leaves": student.linear, "ops_per_decision": student.ops(),
        "offset": calib.offset if calib else 0.0}
    if data.history:
        stats["dagger"] = data.history
    if calib is not None:
        stats["calibration"] = calib.summary()
    return student, stats


def teacher_action(y: np.ndarray) -> np.ndarray:
    u = np.tanh(y)
    return np.where(u >= 0, 1.0 + BOUNDED_M * u, 1.0 / (1.0 - BOUNDED_M * u))


def fit_config() -> dict[str, Any]:
    return dataclasses.asdict(AdpgConfig())
