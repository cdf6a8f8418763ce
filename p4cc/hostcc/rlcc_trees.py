"""Gradient-boosted tree policies for RL-CC (NVIDIA RL-CC §5: CatBoost, depth ≤ 4).

Two JSON formats, both evaluated vectorized over N flows:

p4cc trees (``"format": "p4cc-trees"``)::

    {"format": "p4cc-trees", "version": 1, "window": 1, "output": "identity",
     "base": 0.0,
     "trees": [{"nodes": [{"feature": 0, "threshold": 0.0, "left": 1, "right": 2},
                          {"leaf": 0.9}, {"leaf": 1.1}]}]}

  Node 0 is the root; an internal node sends x to ``right`` when
  ``x[feature] > threshold`` and to ``left`` otherwise; children have larger indices
  than their parent.  Prediction = base + Σ leaves.

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
import math
from pathlib import Path
from typing import Any

import numpy as np

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc_policies import (
    OBS_DIM,
    OUTPUTS,
    FloatArray,
    PolicyLoadError,
    PolicyState,
    WindowedPolicy,
    _out,
)


class TreePolicy(WindowedPolicy):
    """A boosted ensemble of binary trees over a window of observations."""

    name = "trees"

    def __init__(self, feat: np.ndarray, thr: np.ndarray, left: np.ndarray,
                 right: np.ndarray, value: np.ndarray, depth: int, window: int,
                 base: float = 0.0, scale: float = 1.0, output: str = "identity") -> None:
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

    @property
    def n_trees(self) -> int:
        return int(self.feat.shape[0])

    def predict(self, x: FloatArray) -> FloatArray:
        n, t = x.shape[0], self.n_trees
        idx = np.zeros((n, t), dtype=np.int64)
        cols = np.arange(t)[None, :]
        rows = np.arange(n)[:, None]
        for _ in range(self.depth):
            leaf = self.left[cols, idx] < 0
            f = np.where(leaf, 0, self.feat[cols, idx])
            go_right = x[rows, f] > self.thr[cols, idx]
            child = np.where(go_right, self.right[cols, idx], self.left[cols, idx])
            idx = np.where(leaf, idx, child)
        return self.base + self.scale * self.value[cols, idx].sum(axis=1)

    def act(self, obs: FloatArray, state: PolicyState) -> tuple[FloatArray, PolicyState]:
        x, new_state = self.features(obs, state)
        return _out(self.predict(x), self.output), new_state


def _num(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{what} must be a finite number, got {v!r}")
    return float(v)


def _from_p4cc(doc: dict[str, Any]) -> TreePolicy:
    window = int(doc.get("window", 1))
    trees = doc.get("trees")
    if not isinstance(trees, list) or not trees:
        raise ConfigError("'trees' must be a non-empty list")
    m = max(len(t.get("nodes", [])) if isinstance(t, dict) else 0 for t in trees)
    shape = (len(trees), max(m, 1))
    feat, thr = np.zeros(shape, np.int64), np.zeros(shape)
    left, right, value = np.full(shape, -1, np.int64), np.full(shape, -1, np.int64), np.zeros(shape)
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
                      output=str(doc.get("output", "identity")))


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


def reference_tree_json(target: float = 0.064, action_max: float = 1.2) -> str:
    """One depth-2 tree on δ_t: four steps of the reference policy's action."""
    lo = 1 / action_max
    doc = {"format": "p4cc-trees", "version": 1, "window": 1, "output": "identity",
           "base": 0.0, "trees": [{"nodes": [
               {"feature": 0, "threshold": 0.0, "left": 1, "right": 2},
               {"feature": 0, "threshold": -target, "left": 3, "right": 4},
               {"feature": 0, "threshold": target / 2, "left": 5, "right": 6},
               {"leaf": lo}, {"leaf": 0.95}, {"leaf": 1.05}, {"leaf": action_max}]}]}
    return json.dumps(doc, indent=1) + "\n"


def reference_catboost_json(target: float = 0.064, action_max: float = 1.2) -> str:
    """A CatBoost-format export (2 oblivious trees, features δ_t and a_{t−1})."""
    lo = 1 / action_max
    borders = [-target / 2, 0.0, target / 2]
    doc = {
        "model_info": {"note": "made by p4cc.hostcc.rlcc_trees.reference_catboost_json"},
        "features_info": {"float_features": [
            {"feature_index": 0, "flat_feature_index": 0, "borders": borders,
             "has_nans": False, "nan_value_treatment": "AsIs"},
            {"feature_index": 1, "flat_feature_index": 1, "borders": [],
             "has_nans": False, "nan_value_treatment": "AsIs"}]},
        "oblivious_trees": [
            {"leaf_values": [lo, 1.0, 0.97, 1.05],
             "leaf_weights": [1, 0, 1, 1],
             "splits": [{"border": 0.0, "float_feature_index": 0, "split_index": 1,
                         "split_type": "FloatFeature"},
                        {"border": -target / 2, "float_feature_index": 0, "split_index": 0,
                         "split_type": "FloatFeature"}]},
            {"leaf_values": [0.0, action_max - 1.05],
             "leaf_weights": [1, 1],
             "splits": [{"border": target / 2, "float_feature_index": 0, "split_index": 2,
                         "split_type": "FloatFeature"}]}],
        "scale_and_bias": [1.0, [0.0]],
    }
    return json.dumps(doc, indent=1) + "\n"
