"""Gradient-boosted tree policies for RL-CC (NVIDIA RL-CC §5: CatBoost, depth ≤ 4).

Two JSON formats, both evaluated vectorized over N flows:

p4cc trees (``"format": "p4cc-trees"``)::

    {"format": "p4cc-trees", "version": 1, "window": 1, "output": "identity",
     "base": 0.0,
     "trees": [{"nodes": [{"feature": 0, "threshold": 0.0, "left": 1, "right": 2},
                          {"leaf": 0.9}, {"leaf": 1.1}]}]}

  Node 0 is the root; an internal node sends x to ``right`` when
  ``x[feature] > threshold`` and to ``left`` otherwise; children have larger indices
  than their parent.  Prediction = base + Σ leaves.  A leaf may be linear
  (LightGBM ``linear_tree``): ``{"leaf": c, "linear": [[feature, weight, lo, hi], ...]}``
  contributes c + Σ weight·clip(x[feature], lo, hi) (:mod:`p4cc.hostcc.rlcc_trees_linear`).
  Optional ``"clip": [[lo, hi], ...]`` (one pair per feature, ``null`` = open) bounds
  the features before the trees see them, so a linear leaf never extrapolates beyond
  the range it was fitted on.

CatBoost JSON export (``model.save_model(path, format="json")``): ``oblivious_trees``
(each with ``splits`` [{``float_feature_index``, ``border``}] and ``leaf_values``
of length 2^depth), ``features_info.float_features``, ``scale_and_bias``.  Bit d of the
leaf index is ``x[feature of split d] > border`` (first split = least significant bit);
prediction = scale·Σ leaves + bias.  Only float features are supported.

Features: the window of the last ``window`` observations, oldest first, each
(δ, previous action); so feature 2k is δ and 2k+1 the previous action of step k.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc_policy_base import (
    OBS_DIM,
    OUTPUTS,
    REF_DELTA_SCALE,
    REF_KI,
    REF_KP,
    FloatArray,
    PolicyLoadError,
    PolicyState,
    WindowedPolicy,
    apply_output,
)
from p4cc.hostcc.rlcc_trees_linear import LinearLeaves
from p4cc.hostcc.rlcc_trees_linear import finite_number as _num


def leaf_index(x: np.ndarray, feat: np.ndarray, thr: np.ndarray, left: np.ndarray,
               right: np.ndarray, depth: int) -> np.ndarray:
    """(n, trees) node index of the leaf each row of ``x`` reaches in each tree: go right
    when x[feature] > threshold; a node with ``left < 0`` is a leaf.  Shared by the float
    trees and their int8 copy (``x`` and ``thr`` then hold bin codes)."""
    n, t = x.shape[0], feat.shape[0]
    idx = np.zeros((n, t), dtype=np.int64)
    cols, rows = np.arange(t)[None, :], np.arange(n)[:, None]
    for _ in range(depth):
        leaf = left[cols, idx] < 0
        f = np.where(leaf, 0, feat[cols, idx])
        go_right = x[rows, f] > thr[cols, idx]
        child = np.where(go_right, right[cols, idx], left[cols, idx])
        idx = np.where(leaf, idx, child)
    return idx


class TreePolicy(WindowedPolicy):
    """A boosted ensemble of binary trees over a window of observations; ``leaves``, if
    given, holds the linear leaves' weights and bounds."""

    name = "trees"

    def __init__(self, feat: np.ndarray, thr: np.ndarray, left: np.ndarray,
                 right: np.ndarray, value: np.ndarray, depth: int, window: int,
                 base: float = 0.0, scale: float = 1.0, output: str = "identity",
                 leaves: LinearLeaves | None = None,
                 clip: np.ndarray | None = None) -> None:
        if output not in OUTPUTS:
            raise ConfigError(f"output={output!r}: choose one of {OUTPUTS}")
        if window < 1:
            raise ConfigError(f"window={window} must be >= 1")
        self.feat, self.thr = feat.astype(np.int64), thr.astype(np.float64)
        self.left, self.right = left.astype(np.int64), right.astype(np.int64)
        self.value, self.depth = value.astype(np.float64), int(depth)
        self.window, self.base, self.scale, self.output = window, base, scale, output
        if self.feat.size and self.feat.max() >= OBS_DIM * window:
            raise ConfigError(f"a split uses feature {int(self.feat.max())} but a window of "
                              f"{window} has {OBS_DIM * window} features")
        dim = OBS_DIM * window
        if leaves is not None and leaves.coef.shape != (*self.value.shape, dim):
            raise ConfigError(f"linear leaves have shape {leaves.coef.shape}, expected "
                              f"{(*self.value.shape, dim)}")
        self.leaves = leaves if leaves is not None and leaves.any else None
        if clip is not None and (clip.shape != (dim, 2) or np.any(clip[:, 0] > clip[:, 1])):
            raise ConfigError(f"clip must hold {dim} [lo, hi] pairs with lo <= hi")
        self.clip = None if clip is None or np.all(np.isinf(clip)) else clip.astype(np.float64)

    @property
    def n_trees(self) -> int:
        return int(self.feat.shape[0])

    @property
    def linear(self) -> bool:
        """True when some leaf is linear."""
        return self.leaves is not None

    @property
    def coef(self) -> np.ndarray | None:
        """(trees, nodes, features) weights of the linear leaves (None: constant leaves)."""
        return None if self.leaves is None else self.leaves.coef

    def ops(self) -> int:
        """Worst-case operations per decision: a comparison per level and an add per tree;
        per linear term a multiply, an add and a comparison per bound (the device budget
        of NVIDIA RL-CC §5.3 is 150); a comparison per ``clip`` bound."""
        lin = 0 if self.leaves is None else int(self.leaves.ops_per_tree().sum())
        clip = 0 if self.clip is None else int(np.isfinite(self.clip).sum())
        return self.depth * self.n_trees + self.n_trees + lin + clip

    def clipped(self, x: FloatArray) -> FloatArray:
        """The features within the file's ``clip`` bounds (unchanged without them)."""
        if self.clip is None:
            return x
        return np.clip(x, self.clip[:, 0], self.clip[:, 1])

    def predict(self, x: FloatArray) -> FloatArray:
        x = self.clipped(x)
        idx = leaf_index(x, self.feat, self.thr, self.left, self.right, self.depth)
        cols = np.arange(self.n_trees)[None, :]
        y = self.value[cols, idx].sum(axis=1)
        if self.leaves is not None:
            y = y + self.leaves.terms(x, idx)
        return self.base + self.scale * y

    def act(self, obs: FloatArray, state: PolicyState) -> tuple[FloatArray, PolicyState]:
        x, new_state = self.features(obs, state)
        return apply_output(self.predict(x), self.output), new_state


def _from_p4cc(doc: dict[str, Any]) -> TreePolicy:
    window = int(doc.get("window", 1))
    trees = doc.get("trees")
    if not isinstance(trees, list) or not trees:
        raise ConfigError("'trees' must be a non-empty list")
    m = max(len(t.get("nodes", [])) if isinstance(t, dict) else 0 for t in trees)
    shape = (len(trees), max(m, 1))
    feat, thr = np.zeros(shape, np.int64), np.zeros(shape)
    left, right, value = np.full(shape, -1, np.int64), np.full(shape, -1, np.int64), np.zeros(shape)
    leaves = LinearLeaves.empty(shape, OBS_DIM * window)
    depth = 0
    for ti, tree in enumerate(trees):
        nodes = tree.get("nodes") if isinstance(tree, dict) else None
        if not isinstance(nodes, list) or not nodes:
            raise ConfigError(f"tree {ti}: 'nodes' must be a non-empty list")
        node_depth = [0] * len(nodes)
        for ni, node in enumerate(nodes):
            where = f"tree {ti} node {ni}"
            if not isinstance(node, dict):
                raise ConfigError(f"{where}: must be an object")
            if "leaf" in node:
                value[ti, ni] = _num(node["leaf"], f"{where} leaf")
                leaves.set_leaf(ti, ni, node.get("linear", []), where)
                continue
            kids = (node.get("left"), node.get("right"))
            for c in kids:
                if not isinstance(c, int) or not ni < c < len(nodes):
                    raise ConfigError(f"{where}: child {c!r} must be a node index after {ni}")
            lc, rc = int(kids[0]), int(kids[1])  # type: ignore[arg-type]
            f = node.get("feature")
            if not isinstance(f, int) or f < 0:
                raise ConfigError(f"{where}: feature {f!r} must be an index >= 0")
            feat[ti, ni], left[ti, ni], right[ti, ni] = f, lc, rc
            thr[ti, ni] = _num(node.get("threshold"), f"{where} threshold")
            for c in (lc, rc):
                node_depth[c] = node_depth[ni] + 1
        depth = max(depth, max(node_depth))
    return TreePolicy(feat, thr, left, right, value, depth, window,
                      base=_num(doc.get("base", 0.0), "base"),
                      output=str(doc.get("output", "identity")), leaves=leaves,
                      clip=_clip(doc.get("clip"), OBS_DIM * window))


def _clip(pairs: Any, dim: int) -> np.ndarray | None:
    """``"clip"``: one [lo, hi] pair per feature, ``null`` for an open end."""
    if pairs is None:
        return None
    if not isinstance(pairs, list) or len(pairs) != dim:
        raise ConfigError(f"'clip' must hold {dim} [lo, hi] pairs (one per feature)")
    out = np.empty((dim, 2))
    for f, pair in enumerate(pairs):
        if not isinstance(pair, list) or len(pair) != 2:
            raise ConfigError(f"clip of feature {f}: {pair!r} must be [lo, hi]")
        for k, (v, open_end) in enumerate(zip(pair, (-np.inf, np.inf), strict=True)):
            out[f, k] = open_end if v is None else _num(v, f"clip of feature {f}")
    return out


def _from_catboost(doc: dict[str, Any]) -> TreePolicy:
    info = doc.get("features_info", {})
    if info.get("categorical_features") or info.get("ctrs"):
        raise ConfigError("categorical features are not supported (float features only)")
    floats = info.get("float_features")
    if not isinstance(floats, list) or not floats:
        raise ConfigError("features_info.float_features is missing or empty")
    flat = {int(ff.get("feature_index", k)): int(ff.get("flat_feature_index",
                                                         ff.get("feature_index", k)))
            for k, ff in enumerate(floats)}
    n_feat = max(flat.values()) + 1
    if n_feat % OBS_DIM:
        raise ConfigError(f"{n_feat} features: expected 2 per observation in the window")
    trees = doc.get("oblivious_trees")
    if not isinstance(trees, list) or not trees:
        raise ConfigError("'oblivious_trees' must be a non-empty list")
    dmax = max(len(t.get("splits", [])) for t in trees)
    # Expand each oblivious tree (depth D) into a complete binary tree of 2^(D+1)-1 nodes.
    size = 2 ** (dmax + 1) - 1
    shape = (len(trees), size)
    feat, thr = np.zeros(shape, np.int64), np.zeros(shape)
    left, right, value = np.full(shape, -1, np.int64), np.full(shape, -1, np.int64), np.zeros(shape)
    for ti, tree in enumerate(trees):
        splits, leaves = tree.get("splits", []), tree.get("leaf_values")
        d = len(splits)
        if not isinstance(leaves, list) or len(leaves) != 2 ** d:
            raise ConfigError(f"tree {ti}: leaf_values must have 2^{d} = {2 ** d} entries "
                              f"(single-output regression), got "
                              f"{len(leaves) if isinstance(leaves, list) else leaves!r}")
        for si, s in enumerate(splits):
            if s.get("split_type", "FloatFeature") != "FloatFeature":
                raise ConfigError(f"tree {ti} split {si}: only FloatFeature splits supported")
            ffi = s.get("float_feature_index")
            if ffi not in flat:
                raise ConfigError(f"tree {ti} split {si}: unknown float_feature_index {ffi!r}")
        # Level l of the expanded tree tests split l; the path bits give the leaf index.
        for node in range(2 ** d - 1):
            level = (node + 1).bit_length() - 1
            s = splits[level]
            feat[ti, node] = flat[s["float_feature_index"]]
            thr[ti, node] = _num(s.get("border"), f"tree {ti} border")
            left[ti, node], right[ti, node] = 2 * node + 1, 2 * node + 2
        for leaf in range(2 ** d):
            node = 2 ** d - 1 + leaf
            # Path bits from the root: bit for level l is (leaf >> (d-1-l)) & 1 in heap
            # order; CatBoost's index puts split l at bit l, so reverse the bits.
            cb_index = int(format(leaf, f"0{d}b")[::-1], 2) if d else 0
            value[ti, node] = _num(leaves[cb_index], f"tree {ti} leaf")
    sb = doc.get("scale_and_bias", [1.0, [0.0]])
    scale = _num(sb[0], "scale")
    bias_raw = sb[1]
    bias = _num(bias_raw[0] if isinstance(bias_raw, list) else bias_raw, "bias")
    return TreePolicy(feat, thr, left, right, value, dmax, n_feat // OBS_DIM,
                      base=bias, scale=scale)


def load_tree_policy(path: Path) -> TreePolicy:
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PolicyLoadError(f"policy file {path}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise PolicyLoadError(f"policy file {path}: top level must be a JSON object")
    try:
        if doc.get("format") == "p4cc-trees":
            return _from_p4cc(doc)
        if "oblivious_trees" in doc:
            return _from_catboost(doc)
    except (ConfigError, TypeError, KeyError, ValueError, AttributeError, IndexError) as exc:
        raise PolicyLoadError(f"policy file {path}: {exc}") from None
    raise PolicyLoadError(f"policy file {path}: neither a p4cc tree file (\"format\": "
                          "\"p4cc-trees\") nor a CatBoost JSON export (\"oblivious_trees\")")


#: Thresholds (in units of δ_s) of the reference tree ensembles' staircase on δ: dense
#: near the operating point δ = 0, two bins above it (δ ≤ target = 0.064 by definition).
#: Chosen on the queue toy of tests/test_hostcc_rlcc.py (2–8 flows, random start rates,
#: k_i = 0.125..0.5): with steps this fine near 0 the rates stay within 3 % of a fair
#: share; coarser steps near 0 left up to 1.4× between flows.
REF_STAIR = (-1.5, -1.0, -0.8, -0.6, -0.5, -0.4, -0.325, -0.25, -0.2, -0.15, -0.115, -0.08,
             -0.06, -0.04, -0.025, -0.01, -0.005, 0.0, 0.015, 0.03)
#: The outer bins' fitting ranges (δ_s units): below −3 tanh is flat; δ ≤ 0.064 = target.
REF_STAIR_OUTER = (-3.0, 0.064)


def reference_stair(delta_scale: float = REF_DELTA_SCALE) -> tuple[FloatArray, FloatArray]:
    """Thresholds t (20) and bin values s (21) of a staircase S ≈ e = δ_s·tanh(δ/δ_s):
    S(δ) = s[j] for t[j−1] < δ ≤ t[j].  Each value is the middle of e over its bin (the
    outer bins fitted on REF_STAIR_OUTER), so |S − e| ≤ half a step (≤ 0.12·δ_s)."""
    t = np.array(REF_STAIR)
    edges = np.concatenate([[REF_STAIR_OUTER[0]], t, [REF_STAIR_OUTER[1]]])
    s = 0.5 * (np.tanh(edges[:-1]) + np.tanh(edges[1:]))
    return delta_scale * t, delta_scale * s


def _stumps(ki: float, kp: float,
            delta_scale: float) -> tuple[float, list[tuple[float, float, float]]]:
    """base and (threshold, jump on δ_t, jump on δ_{t−1}) of
    y = (k_i + k_p)·S(δ_t) − k_p·S(δ_{t−1}) = base + Σ jumps where δ > threshold."""
    t, s = reference_stair(delta_scale)
    step = np.diff(s)
    return float(ki * s[0]), [(float(tj), float((ki + kp) * d), float(-kp * d))
                              for tj, d in zip(t, step, strict=True)]


def reference_tree_json(ki: float = REF_KI, kp: float = REF_KP,
                        delta_scale: float = REF_DELTA_SCALE) -> str:
    """p4cc trees, window 2, output ``exp``: log a = (k_i + k_p)·S(δ_t) − k_p·S(δ_{t−1})
    with the 21-level staircase S ≈ δ_s·tanh(δ/δ_s) of :func:`reference_stair`.  20 trees
    of depth 2; tree j is two stumps at threshold t_j, one on feature 2 (δ_t) and one on
    feature 0 (δ_{t−1}), written as one tree (NVIDIA RL-CC distils into ≤ 20 trees of
    depth ≤ 4).  Error in log a ≈ half a step on each term: measured (after the core's
    clip, k_i = 0.125..0.5) ≤ 0.095 for δ ∈ [−0.5, target], ≤ 0.15 below.  First
    decision: the window's padding δ_0 = 0 falls in the bin (−0.005, 0], so
    log a_1 = (k_i + k_p)·S(δ_1) + 0.0025·k_p (ReferencePolicy: k_i·e(δ_1); the windowed
    formats act as if e_0 = 0)."""
    base, stumps = _stumps(ki, kp, delta_scale)

    def tree(thr: float, a: float, b: float) -> dict[str, Any]:
        return {"nodes": [{"feature": 2, "threshold": thr, "left": 1, "right": 2},
                          {"feature": 0, "threshold": thr, "left": 3, "right": 4},
                          {"feature": 0, "threshold": thr, "left": 5, "right": 6},
                          {"leaf": 0.0}, {"leaf": b}, {"leaf": a}, {"leaf": a + b}]}

    doc = {"format": "p4cc-trees", "version": 1, "window": 2, "output": "exp",
           "base": base, "trees": [tree(*st) for st in stumps]}
    return json.dumps(doc, indent=1) + "\n"


def reference_catboost_json(ki: float = REF_KI, kp: float = REF_KP,
                            delta_scale: float = REF_DELTA_SCALE) -> str:
    """A CatBoost-format export, window 2 (float features 0..3 = δ_{t−1}, a_{t−2}, δ_t,
    a_{t−1}): the 20 trees of :func:`reference_tree_json` as oblivious trees of depth 2
    (split 0: δ_t > t_j, split 1: δ_{t−1} > t_j).  A CatBoost export has no output
    transform, so the prediction is the action itself: a = 1 + y with y the trees' log a
    (exp(y) − 1 − y ≤ 0.017 inside the core's clip [1/1.2, 1.2], |y| ≤ 0.18; outside it
    both are clipped alike).  First decision as in :func:`reference_tree_json`."""
    base, stumps = _stumps(ki, kp, delta_scale)
    split = {"split_type": "FloatFeature"}
    trees = [{"leaf_values": [0.0, a, b, a + b],  # bit 0: δ_t > t, bit 1: δ_{t−1} > t
              "leaf_weights": [1, 1, 1, 1],
              "splits": [{"border": t, "float_feature_index": 2, **split},
                         {"border": t, "float_feature_index": 0, **split}]}
             for t, a, b in stumps]
    borders = [t for t, _, _ in stumps]
    doc = {
        "model_info": {"note": "made by p4cc.hostcc.rlcc_trees.reference_catboost_json"},
        "features_info": {"float_features": [
            {"feature_index": k, "flat_feature_index": k,
             "borders": borders if k % 2 == 0 else [],
             "has_nans": False, "nan_value_treatment": "AsIs"} for k in range(4)]},
        "oblivious_trees": trees,
        "scale_and_bias": [1.0, [1.0 + base]],
    }
    return json.dumps(doc, indent=1) + "\n"
