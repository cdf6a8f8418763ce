"""The compiled queue/CNP kernels (numba) against their numpy reference, on random
inputs: the same model, to the bit; and the DCQCN hook's lazy state against the core's
public functions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from p4cc.hostcc import dcqcn
from p4cc.sim import enqmark
from p4cc.sim import kernel as K
from p4cc.sim.cc import DcqcnHook

pytest.importorskip("numba", reason="numba is not installed: only the numpy form runs")


def _queue_args(rng: np.random.Generator, cap: int, hops: int, nq: int, heavy: bool
                ) -> list[Any]:
    path = rng.integers(0, nq - 1, (cap, hops))
    last = rng.integers(0, hops, cap)
    for s in range(cap):  # short paths padded with the dummy queue
        path[s, last[s] + 1:] = nq - 1
    scale = 50_000.0 if heavy else 500.0  # heavy: queues overflow their buffers
    kmin = rng.uniform(0, 50, nq)
    kmax = kmin + rng.uniform(1, 200, nq)
    kmin[-1] = kmax[-1] = 1e9  # the dummy queue never marks
    buf = np.append(rng.uniform(2e4, 1e5, nq - 1), 1e30)
    serve = np.append(rng.uniform(1e3, 2e4, nq - 1), 1e30)
    b = rng.uniform(0, scale, (cap, hops)) * (rng.random((cap, hops)) < 0.7)
    b[path == nq - 1] = 0.0
    prev_dep = rng.uniform(0, scale, (cap, hops)) * (rng.random((cap, hops)) < 0.7)
    counters = [rng.uniform(0, 1e6, nq) for _ in range(6)]
    return [rng.uniform(0, 25e9, cap), np.full(cap, 1e-6 / 8), rng.uniform(0, 1e5, cap),
            rng.uniform(0, 1e6, cap), rng.random(cap) < 0.9,
            np.where(rng.random(cap) < 0.1, 0.5e-3, np.inf), 1e-3,
            rng.uniform(0, 2e6, cap), b, prev_dep, rng.random((cap, hops)) * 0.3, path, last,
            kmin, kmax, rng.uniform(0, 0.01, nq), 1 / 1000, serve, buf, *counters,
            rng.random((cap, hops)) < 0.2, rng.uniform(0, 2e6, cap)]


def _mark_history(rng: np.random.Generator, nq: int, rows: int) -> tuple[list[Any], int]:
    """marking_depth's state after ``step`` random steps (kept arrivals, depths), with
    pointers anywhere from before the ring's oldest row to the last step; and ``step``."""
    hist_a, hist_q, acum, qptr = enqmark.mark_history(rows, nq)
    step = int(rng.integers(rows, 3 * rows + 1)) if rows else int(rng.integers(0, 50))
    for k in range(step):
        acum += rng.uniform(0, 3000, nq) * (rng.random(nq) < 0.6)
        if rows:
            hist_a[k % rows] = acum
            hist_q[k % rows] = rng.uniform(0, 2e5, nq)
    if rows:
        qptr[:] = rng.integers(max(step - rows - 5, 0), step, nq)
    return [hist_a, hist_q, acum, qptr], step


@pytest.mark.parametrize("rows", [0, 3, 40])
@pytest.mark.parametrize("heavy", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_queue_kernel_equals_numpy_reference(seed: int, heavy: bool, rows: int) -> None:
    """rows: the marking history (0: marks by the depth at departure)."""
    rng = np.random.default_rng(seed)
    cap, hops, nq = int(rng.integers(1, 300)), int(rng.integers(1, 6)), int(rng.integers(2, 60))
    base = _queue_args(rng, cap, hops, nq, heavy)
    marks, step = _mark_history(rng, nq, rows)
    runs = []
    for fn in (K.queues_numpy, K.queues_numba):
        args: list[Any] = [a.copy() if isinstance(a, np.ndarray) else a for a in base]
        out = K.scratch(cap, hops, nq)
        hist = [a.copy() for a in marks]
        assert fn is not None
        flags = fn(*args, *out, *hist, step)
        runs.append((tuple(flags), [*args, *hist], out))
    (f_ref, a_ref, o_ref), (f_nb, a_nb, o_nb) = runs
    assert (bool(f_ref[0]), int(f_ref[1])) == (bool(f_nb[0]), int(f_nb[1]))
    if heavy:
        assert f_ref[0]  # the heavy case does exercise tail drop
    for x, y in zip([*a_ref, *o_ref], [*a_nb, *o_nb], strict=True):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)


def test_cnp_kernel_equals_numpy_reference() -> None:
    rng = np.random.default_rng(7)
    cap, D = 500, 13
    got_m = rng.uniform(0, 3000, cap) * (rng.random(cap) < 0.5)
    base: list[Any] = [got_m, np.where(rng.random(cap) < 0.5, -np.inf, 0.99e-3),
            rng.integers(0, 5, cap), rng.integers(0, 2**63, cap).astype(np.uint64), 1234,
            1e-3, 4e-6 - 1e-12, 1000.0, rng.integers(1, D, cap),
            np.zeros((D, cap), np.bool_), np.zeros(D, np.bool_)]
    res = []
    for fn in (K.cnps_numpy, K.cnps_numba):
        args: list[Any] = [a.copy() if isinstance(a, np.ndarray) else a for a in base]
        assert fn is not None
        res.append((int(fn(*args)), args))
    assert res[0][0] == res[1][0] > 0
    for x, y in zip(res[0][1], res[1][1], strict=True):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)


def test_fabric_step_compiled_equals_numpy() -> None:
    """The engine's one call per step (queues, then the CNP draw) in both forms."""
    rng = np.random.default_rng(11)
    cap, hops, nq, D = 200, 4, 40, 9
    marks, step = _mark_history(rng, nq, 30)
    base = [*_queue_args(rng, cap, hops, nq, False), *K.scratch(cap, hops, nq), *marks,
            np.full(cap, -np.inf), rng.integers(0, 5, cap),
            rng.integers(0, 2**63, cap).astype(np.uint64), step, 4e-6, 1000.0,
            rng.integers(1, D, cap), np.zeros((D, cap), np.bool_), np.zeros(D, np.bool_)]
    assert len(base) == len(K._STEP_ARGS)
    res = []
    for fn in (K.fabric_numpy, K.fabric_numba):
        args: list[Any] = [a.copy() if isinstance(a, np.ndarray) else a for a in base]
        res.append((tuple(int(x) for x in fn(*args)), args))
    assert res[0][0] == res[1][0] and res[0][0][2] > 0  # some CNPs were drawn
    for x, y in zip(res[0][1], res[1][1], strict=True):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
    K.warm_up()  # the engine's argument types compile
    assert K.fabric_numba(*K.tiny_args()) is not None


def test_marking_depth_is_the_depth_the_head_byte_found() -> None:
    """A queue that gets 1000 B and serves 500 B per step: at the start of step k it
    holds 500k B, and its head byte arrived in step k // 2, when the depth was
    500 (k // 2) B: enqueue marking sees half the depth departure marking sees."""
    for rows in (100, 20):  # 100: every head's step is in the ring; 20: not after k 40
        hist_a, hist_q, acum, qptr = enqmark.mark_history(rows, 1)
        for k in range(150):  # more steps than rows: the ring wraps
            q = np.array([500.0 * k])
            qm = enqmark.marking_depth(q, hist_a, hist_q, acum, qptr, k)
            # a head older than the ring is marked by its oldest row (step k - rows + 1)
            assert qm[0] == 500.0 * max(k // 2, k - rows + 1), (rows, k)
            acum += 1000.0
            hist_a[k % rows] = acum
    # no history: the depth now
    empty = enqmark.mark_history(0, 1)
    assert enqmark.marking_depth(np.array([7.0]), *empty, 5)[0] == 7.0


def test_uniform_draws_match_the_kernel_hash() -> None:
    hb = np.array([0, 1, 2**64 - 1, 0x9E3779B97F4A7C15], dtype=np.uint64)
    u = K.uniform(hb, 99)
    assert np.all((u >= 0) & (u < 1))


def test_dcqcn_hook_lazy_state_equals_public_core() -> None:
    """The hook's in-place lazy steps give the state the public functions give (after
    the lazy α updates and idle checks are applied), within float rounding of α."""
    p = dcqcn.dcqcn_params("hpcc-ns3", 25e9)
    hook = DcqcnHook(p)
    hook.grow(16, 0.0)
    hook.reset_slots(np.arange(16), 0.0, np.full(16, 25e9))
    pub = dcqcn.init_state(16, p)
    rng = np.random.default_rng(3)
    for step in range(1, 3000):
        t = step * 1e-6
        if rng.random() < 0.3:
            m = rng.random(16) < 0.2
            hook.on_cnp(t, m)
            if m.any():
                pub = dcqcn.on_cnp(pub, p, t, m)
        rate = hook.rate(t)
        pub = dcqcn.advance(pub, p, t)
        np.testing.assert_allclose(rate, pub.rc, rtol=1e-12)
    st = dcqcn.advance(hook.state, p, pub.t)
    for f in ("rc", "rt", "alpha"):
        np.testing.assert_allclose(getattr(st, f), getattr(pub, f), rtol=1e-12, err_msg=f)
    for f in ("t_stage", "next_alpha", "next_dec", "next_inc", "active", "dec_cnp"):
        np.testing.assert_array_equal(getattr(st, f), getattr(pub, f), err_msg=f)
