"""The student's fit: a LightGBM regressor within the device limits, exported to the
runtime's ``p4cc-trees`` JSON (:mod:`p4cc.hostcc.rlcc_trees`).

Device limits of NVIDIA RL-CC §5.3/§6 (ConnectX-6Dx): ≤ 10 boosting trees of depth ≤ 4,
and "the resulting number of operations does not exceed 150".  With ``linear=True`` each
leaf holds a linear model of the features split on along its path (LightGBM
``linear_tree``, Shi, Li & Li, "Gradient Boosting with Piece-Wise Linear Regression
Trees", IJCAI 2019): depth 4 gives ≤ 4 terms per leaf, so 10 trees cost at most
10·(4 comparisons + 1 add) + 10·4·(1 multiply + 1 add) = 130 operations, inside the
paper's 150 (a bounded term costs a comparison more: ``TreePolicy.ops`` counts it).  The
paper's student has constant leaves (CatBoost); linear leaves are a p4cc choice
(docs/learning.md "Linear leaves").  A linear leaf would extrapolate: each δ term is
bounded to the range of δ among the training rows that reached its leaf, widened by a
margin on each side.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from p4cc.errors import ConfigError

#: Device limits of NVIDIA RL-CC §6 (ConnectX-6Dx): ≤ 10 trees, depth ≤ 4.
MAX_TREES, MAX_DEPTH = 10, 4
#: The paper's operation budget per decision (§5.3).
MAX_OPS = 150


def fit(x: np.ndarray, y: np.ndarray, trees: int = MAX_TREES, depth: int = MAX_DEPTH,
        learning_rate: float = 0.5, seed: int = 0, weight: np.ndarray | None = None,
        min_data_in_leaf: int = 20, max_bin: int = 255, lambda_l2: float = 0.0,
        monotone: tuple[int, ...] = (), linear: bool = False,
        linear_lambda: float = 0.0) -> Any:
    """A LightGBM regressor within the device limits (squared error, ``weight``ed if
    given; ``monotone``: one constraint per feature, +1 non-decreasing, −1 non-increasing,
    0 free; ``linear``: linear leaves, ridge penalty ``linear_lambda``)."""
    import lightgbm as lgb

    params: dict[str, Any] = {
        "objective": "regression", "max_depth": depth, "num_leaves": 2 ** depth,
        "learning_rate": learning_rate, "min_data_in_leaf": min_data_in_leaf,
        "max_bin": max_bin, "lambda_l2": lambda_l2,
        "seed": seed, "deterministic": True, "verbose": -1, "num_threads": 1}
    if any(monotone):
        if len(monotone) != x.shape[1]:
            raise ConfigError(f"monotone has {len(monotone)} entries for {x.shape[1]} features")
        if linear:
            raise ConfigError("LightGBM's linear leaves do not take monotone constraints")
        params["monotone_constraints"] = list(monotone)
    if linear:
        params.update(linear_tree=True, linear_lambda=linear_lambda)
    return lgb.train(params, lgb.Dataset(x, y, weight=weight), num_boost_round=trees)


def _leaf(nd: dict[str, Any], box: tuple[np.ndarray, np.ndarray] | None,
          margin: float, margin_high: float) -> dict[str, Any]:
    """A LightGBM leaf: constant, or linear (``leaf_const`` + Σ ``leaf_coeff``·x), each δ
    term bounded to ``box`` (the leaf's training rows; None: unbounded) less ``margin``
    below and plus ``margin_high`` above.  Only δ needs it: a_{t−1} lies in the bounded
    action range, but δ has no floor (−39 at a flow's first decision in an incast) and
    reaches past the training target at another operating point (0.64 at "loose")."""
    if "leaf_const" not in nd:
        return {"leaf": float(nd["leaf_value"])}
    terms: list[list[Any]] = []
    for f, c in zip(nd.get("leaf_features", []), nd.get("leaf_coeff", []), strict=True):
        if float(c) == 0.0:
            continue
        term: list[Any] = [int(f), float(c)]
        if box is not None and int(f) % 2 == 0:  # δ: bounded on both sides
            term += [float(box[0][int(f)]) - margin, float(box[1][int(f)]) + margin_high]
        terms.append(term)
    return {"leaf": float(nd["leaf_const"]), "linear": terms} if terms else \
        {"leaf": float(nd["leaf_const"])}


def leaf_boxes(model: Any, x: np.ndarray) -> list[dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Per tree, LightGBM leaf index → (min, max) of the rows of ``x`` reaching it."""
    ids = np.asarray(model.predict(x, pred_leaf=True)).reshape(len(x), -1)
    out = []
    for t in range(ids.shape[1]):
        boxes = {}
        for leaf in np.unique(ids[:, t]):
            rows = x[ids[:, t] == leaf]
            boxes[int(leaf)] = (rows.min(axis=0), rows.max(axis=0))
        out.append(boxes)
    return out


def clip_bounds(window: int, clip_delta: float) -> list[list[float | None]] | None:
    """The file's ``clip``: every δ feature ≥ −``clip_delta`` (0: no clip)."""
    if clip_delta <= 0:
        return None
    return [[-clip_delta, None], [None, None]] * window


def clip_rows(x: np.ndarray, clip: list[list[float | None]] | None) -> np.ndarray:
    """Feature rows within ``clip`` (as the runtime bounds them)."""
    if clip is None:
        return x
    lo = np.array([-np.inf if p[0] is None else p[0] for p in clip])
    hi = np.array([np.inf if p[1] is None else p[1] for p in clip])
    return np.clip(x, lo, hi)


def to_p4cc_trees(model: Any, window: int, output: str = "bounded",
                  clip: list[list[float | None]] | None = None,
                  fitted_on: np.ndarray | None = None,
                  margin: float = 0.0, margin_high: float = 0.0) -> dict[str, Any]:
    """LightGBM's dump as the runtime's ``p4cc-trees`` JSON (x <= threshold: left;
    ``clip``: the features' bounds the model was fitted within; ``fitted_on``: the
    training rows, whose smallest δ per leaf, less ``margin``, bounds its δ terms)."""
    dump = model.dump_model()
    boxes = None if fitted_on is None else leaf_boxes(model, fitted_on)
    trees = []
    for ti, info in enumerate(dump["tree_info"]):
        nodes: list[dict[str, Any]] = []

        def walk(nd: dict[str, Any], nodes: list[dict[str, Any]] = nodes,
                 ti: int = ti) -> int:
            i = len(nodes)
            nodes.append({})
            if "leaf_value" in nd:
                box = None if boxes is None else boxes[ti].get(int(nd.get("leaf_index", 0)))
                nodes[i] = _leaf(nd, box, margin, margin_high)
                return i
            if nd.get("decision_type", "<=") != "<=":
                raise ValueError(f"unsupported LightGBM split {nd.get('decision_type')}")
            left, right = walk(nd["left_child"]), walk(nd["right_child"])
            nodes[i] = {"feature": int(nd["split_feature"]), "threshold": float(nd["threshold"]),
                        "left": left, "right": right}
            return i

        walk(info["tree_structure"])
        trees.append({"nodes": nodes})
    doc = {"format": "p4cc-trees", "version": 1, "window": window, "output": output,
           "base": 0.0, "trees": trees}
    return doc if clip is None else {**doc, "clip": clip}
