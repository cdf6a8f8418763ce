"""RL-CC policy files: loaders (good, corrupt, wrong shapes), tree semantics, batching."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from p4cc.errors import ConfigError
from p4cc.hostcc.rlcc_policies import (
    LstmPolicy,
    MlpPolicy,
    PolicyLoadError,
    data_dir,
    load_policy,
    save_lstm,
)
from p4cc.hostcc.rlcc_reference import make_reference_files, reference_lstm
from p4cc.hostcc.rlcc_trees import TreePolicy

GRID = np.linspace(-1.0, 0.064, 41)


def _obs(deltas: np.ndarray, prev: float = 1.0) -> np.ndarray:
    return np.stack([deltas, np.full_like(deltas, prev)], axis=1)


def _run(pol: object, deltas: np.ndarray) -> np.ndarray:
    a, _ = pol.act(_obs(deltas), pol.initial_state(len(deltas)))  # type: ignore[attr-defined]
    return np.asarray(a)


def test_make_reference_files_matches_shipped(tmp_path: Path) -> None:
    made = make_reference_files(tmp_path)
    assert PolicyLoadError.__mro__[1] is ConfigError
    for kind, path in made.items():
        shipped = data_dir() / path.name
        assert shipped.is_file(), f"run make_reference_files({data_dir()}) to ship {kind}"
        np.testing.assert_allclose(_run(load_policy(path), GRID),
                                   _run(load_policy(shipped), GRID), err_msg=kind)


@pytest.mark.parametrize("name", ["rlcc-lstm-ref.npz", "rlcc-mlp-ref.npz",
                                  "rlcc-trees-ref.json", "rlcc-catboost-ref.json"])
def test_shipped_policies_raise_below_target_and_lower_above(name: str) -> None:
    pol = load_policy(data_dir() / name)
    a = np.clip(_run(pol, np.array([-0.5, -0.1, 0.03, 0.064])), 1 / 1.2, 1.2)
    assert a[0] < 1 and a[1] < 1 and a[2] > 1 and a[3] > 1
    assert np.all(np.diff(a) >= 0)


def test_lstm_batch_equals_single_flows() -> None:
    pol = reference_lstm()
    rng = np.random.default_rng(0)
    # random weights so that the hidden state matters
    w = {k: rng.normal(0, 0.5, v.shape) for k, v in pol.w.items()}
    pol = LstmPolicy(w)
    seq = rng.normal(0, 0.3, (20, 5, 2))
    st = pol.initial_state(5)
    singles = [pol.initial_state(1) for _ in range(5)]
    for obs in seq:
        a, st = pol.act(obs, st)
        for i in range(5):
            ai, singles[i] = pol.act(obs[i:i + 1], singles[i])
            assert ai[0] == pytest.approx(a[i], rel=1e-12)
    assert not np.allclose(st[0], 0)


def test_mlp_window_history() -> None:
    w0 = np.zeros((1, 6))
    w0[0, 0] = 1.0  # output = δ of the oldest observation in a window of 3
    pol = MlpPolicy([(w0, np.zeros(1))], window=3)
    st = pol.initial_state(1)
    outs = []
    for dlt in (0.1, 0.2, 0.3, 0.4):
        a, st = pol.act(_obs(np.array([dlt])), st)
        outs.append(float(a[0]))
    assert outs == pytest.approx([0.0, 0.0, 0.1, 0.2])


def test_p4cc_tree_semantics(tmp_path: Path) -> None:
    doc = {"format": "p4cc-trees", "version": 1, "window": 1, "base": 0.5, "trees": [
        {"nodes": [{"feature": 0, "threshold": 0.0, "left": 1, "right": 2},
                   {"leaf": 0.1}, {"feature": 1, "threshold": 1.0, "left": 3, "right": 4},
                   {"leaf": 0.2}, {"leaf": 0.3}]},
        {"nodes": [{"leaf": 0.01}]}]}
    f = tmp_path / "t.json"
    f.write_text(json.dumps(doc))
    pol = load_policy(f)
    assert isinstance(pol, TreePolicy) and pol.n_trees == 2
    obs = np.array([[-1.0, 2.0], [0.0, 2.0], [0.5, 1.0], [0.5, 1.5]])
    a, _ = pol.act(obs, pol.initial_state(4))
    np.testing.assert_allclose(a, [0.61, 0.61, 0.71, 0.81])


def test_catboost_bit_order(tmp_path: Path) -> None:
    # depth 2: split 0 (δ > 0) is bit 0, split 1 (prev action > 1) is bit 1
    doc = {"features_info": {"float_features": [
        {"feature_index": 0, "flat_feature_index": 0, "borders": [0.0]},
        {"feature_index": 1, "flat_feature_index": 1, "borders": [1.0]}]},
        "oblivious_trees": [{"leaf_values": [10.0, 20.0, 30.0, 40.0], "splits": [
            {"border": 0.0, "float_feature_index": 0, "split_type": "FloatFeature"},
            {"border": 1.0, "float_feature_index": 1, "split_type": "FloatFeature"}]}],
        "scale_and_bias": [0.5, [1.0]]}
    f = tmp_path / "cb.json"
    f.write_text(json.dumps(doc))
    pol = load_policy(f)
    obs = np.array([[-1.0, 0.9], [1.0, 0.9], [-1.0, 1.1], [1.0, 1.1]])
    a, _ = pol.act(obs, pol.initial_state(4))
    np.testing.assert_allclose(a, [6.0, 11.0, 16.0, 21.0])  # 0.5·leaf + 1


def _write(tmp_path: Path, name: str, content: bytes | str) -> Path:
    f = tmp_path / name
    f.write_bytes(content if isinstance(content, bytes) else content.encode())
    return f


@pytest.mark.parametrize("name,content,needle", [
    ("x.npz", b"not a zip at all", "not a readable .npz"),
    ("x.json", "{not json", "not valid JSON"),
    ("x.json", "[1, 2]", "top level"),
    ("x.json", '{"hello": 1}', "neither"),
    ("x.json", '{"format": "p4cc-trees", "trees": []}', "non-empty"),
    ("x.json", '{"format": "p4cc-trees", "trees": [{"nodes": [{"feature": 0, '
               '"threshold": 0, "left": 0, "right": 5}]}]}', "child"),
    ("x.json", '{"format": "p4cc-trees", "trees": [{"nodes": [{"feature": 7, '
               '"threshold": 0, "left": 1, "right": 2}, {"leaf": 1}, {"leaf": 2}]}]}',
     "feature 7"),
    ("x.json", '{"format": "p4cc-trees", "trees": [{"nodes": [{"leaf": "x"}]}]}', "finite"),
    ("x.json", '{"features_info": {"float_features": [{"feature_index": 0}, '
               '{"feature_index": 1}]}, "oblivious_trees": [{"leaf_values": [1, 2, 3], '
               '"splits": [{"border": 0, "float_feature_index": 0}]}]}', "leaf_values"),
    ("x.json", '{"features_info": {"float_features": [{"feature_index": 0}]}, '
               '"oblivious_trees": [{"leaf_values": [1], "splits": []}]}', "2 per observation"),
    ("x.onnx", b"whatever", "unsupported suffix"),
])
def test_bad_files_raise_policy_load_error(tmp_path: Path, name: str, content: str,
                                           needle: str) -> None:
    f = _write(tmp_path, name, content)
    with pytest.raises(PolicyLoadError) as err:
        load_policy(f)
    assert str(f) in str(err.value) and needle in str(err.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyLoadError, match="does not exist"):
        load_policy(tmp_path / "nope.npz")


def test_npz_wrong_shapes_and_keys(tmp_path: Path) -> None:
    good = reference_lstm()
    w: dict[str, Any] = dict(good.w)
    w["fc1_w"] = np.zeros((32, 3))  # input must be 2 = (δ, previous action)
    f = tmp_path / "bad_lstm.npz"
    np.savez(f, kind=np.array("lstm"), **w)
    with pytest.raises(PolicyLoadError, match=r"fc1_w.*\(32, 3\).*\(32, 2\)"):
        load_policy(f)
    w = dict(good.w)
    del w["out_b"]
    np.savez(f, kind=np.array("lstm"), **w)
    with pytest.raises(PolicyLoadError, match="out_b"):
        load_policy(f)
    w = dict(good.w)
    w["lstm_b"] = np.full(64, np.nan)
    np.savez(f, kind=np.array("lstm"), **w)
    with pytest.raises(PolicyLoadError, match="NaN"):
        load_policy(f)
    np.savez(f, kind=np.array("transformer"))
    with pytest.raises(PolicyLoadError, match="unknown kind"):
        load_policy(f)
    np.savez(f, weights=np.zeros(3))
    with pytest.raises(PolicyLoadError, match="kind"):
        load_policy(f)
    g = tmp_path / "mlp.npz"
    np.savez(g, kind=np.array("mlp"), window=np.array(2), w0=np.zeros((12, 3)), b0=np.zeros(12),
             w1=np.zeros((1, 12)), b1=np.zeros(1))
    with pytest.raises(PolicyLoadError, match=r"w0.*\(12, 4\)"):
        load_policy(g)
    np.savez(g, kind=np.array("mlp"), window=np.array(2), w0=np.zeros((12, 4)), b0=np.zeros(12))
    with pytest.raises(PolicyLoadError, match="expected 1"):
        load_policy(g)


def test_npz_round_trip(tmp_path: Path) -> None:
    pol = reference_lstm()
    f = save_lstm(tmp_path / "l.npz", pol)
    np.testing.assert_array_equal(_run(load_policy(f), GRID), _run(pol, GRID))
