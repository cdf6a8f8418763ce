"""Linear leaves of a tree policy (:mod:`p4cc.hostcc.rlcc_trees`): parsing, evaluation
and their share of the device's operation count.

A linear leaf is ``{"leaf": c, "linear": [[feature, weight, lo, hi], ...]}`` and adds
c + Σ weight·min(max(x[feature], lo), hi).  ``lo``/``hi`` (optional, ``null`` = open)
are the range of the feature over the training rows that reached the leaf
(p4cc.learn.rlcc_distill_fit): the leaf never extrapolates beyond the data it was
fitted on.  Unbounded, a distilled leaf answered "increase" at δ_t = −39 on a flow's
first decision, where the teacher cuts (docs/learning.md "Linear leaves").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from p4cc.errors import ConfigError

#: Terms of one linear leaf: the device counts every multiply-add (NVIDIA RL-CC §5.3:
#: "the resulting number of operations does not exceed 150").
MAX_LINEAR = 8


def finite_number(v: Any, what: str) -> float:
    """``v`` as a float, or a ConfigError naming ``what`` (bools, text, NaN and inf
    refused); the tree file loaders' check of every number they read."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{what} must be a finite number, got {v!r}")
    return float(v)


@dataclass(frozen=True)
class LinearLeaves:
    """(trees, nodes, features) weights and the bounds each leaf clips its inputs to."""

    coef: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def empty(cls, shape: tuple[int, int], dim: int) -> LinearLeaves:
        full = (*shape, dim)
        return cls(np.zeros(full), np.full(full, -np.inf), np.full(full, np.inf))

    @property
    def any(self) -> bool:
        return bool(np.any(self.coef))

    def set_leaf(self, ti: int, ni: int, terms: Any, where: str) -> None:
        """Parse one leaf's ``linear`` list into row (ti, ni)."""
        dim = self.coef.shape[2]
        if not isinstance(terms, list) or len(terms) > MAX_LINEAR:
            raise ConfigError(f"{where}: 'linear' must be a list of ≤ {MAX_LINEAR} "
                              "[feature, weight(, lo, hi)] entries")
        seen: set[int] = set()
        for term in terms:
            if not (isinstance(term, list) and len(term) in (2, 4)
                    and isinstance(term[0], int) and not isinstance(term[0], bool)
                    and 0 <= term[0] < dim):
                raise ConfigError(f"{where}: linear term {term!r} must be [feature, weight"
                                  f"(, lo, hi)] with feature in 0..{dim - 1}")
            f = term[0]
            if f in seen:
                raise ConfigError(f"{where}: feature {f} appears twice in 'linear'")
            seen.add(f)
            self.coef[ti, ni, f] = finite_number(term[1], f"{where} linear weight")
            if len(term) == 4:
                lo = -np.inf if term[2] is None else finite_number(term[2], f"{where} linear lo")
                hi = np.inf if term[3] is None else finite_number(term[3], f"{where} linear hi")
                if lo > hi:
                    raise ConfigError(f"{where}: linear term {term!r} has lo > hi")
                self.lo[ti, ni, f], self.hi[ti, ni, f] = lo, hi

    def terms(self, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """(n,) Σ over trees of the reached leaves' linear terms."""
        cols = np.arange(idx.shape[1])[None, :]
        xb = np.clip(x[:, None, :], self.lo[cols, idx], self.hi[cols, idx])
        return np.einsum("ntf,ntf->n", self.coef[cols, idx], xb)

    def ops_per_tree(self) -> np.ndarray:
        """(trees,) worst-case operations of a tree's linear terms: a multiply and an add
        per term, a comparison per finite bound."""
        used = self.coef != 0
        cost = used * (2 + np.isfinite(self.lo) + np.isfinite(self.hi))
        return np.asarray(cost.sum(axis=2).max(axis=1))
