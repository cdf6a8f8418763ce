"""The queue part of an engine step (step 4-5 of p4cc.sim.engine): one model, two forms.

``queues_numpy`` is the reference, whole-array numpy; ``queues_numba`` is the same
arithmetic as loops compiled by numba (``cache=True``: compiled once per machine, then
loaded from ``__pycache__``).  Both take the same arguments, update ``b``, ``seen``,
``delivered`` and the interval counters in place, and return the same values; they run
the same floating-point operations in the same order (the sums over flows in slot, hop
order, as ``np.bincount`` does), so they agree to the bit (tests/test_sim_kernel.py
compares them on random inputs).  ``queue_step`` is the numba form when numba is
installed, else the numpy one.

Each flow first injects ``min(rate·dt, bytes left)`` (``f8`` = the step's seconds / 8
per slot) if it may send.  Per queue (``path`` maps (slot, hop) to a queue; index
``nq - 1`` is the dummy queue of short paths): arrivals = injections (hop 0) and the
last step's departures of the hop before; the ECN probability from the depth the
departing bytes found when they arrived (``marking_depth``; or, with an empty history, the
depth at the start of the step); tail drop above the buffer, charged to flows by their
arrivals;
departures ``min(depth + arrivals, serve)`` shared by the flows in proportion to their
bytes in the queue; the marked fraction leaving a hop is ``1 - (1 - m_in)(1 - p)``.
The last hop's departures are delivered.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import numpy.typing as npt

from p4cc.sim.enqmark import mark_history, marking_depth

FloatArray = npt.NDArray[np.float64]
#: Smallest normal double: the denominator of an empty queue's shares.
TINY = float(np.finfo(np.float64).tiny)

#: (dropped, n_done): whether anything was dropped, and how many slots have delivered
#: their threshold ``thr``.  The arrays are written into the ``out`` arguments (send,
#: dep, mout, q, q_new, dep_q, got_m, lost_f): bytes injected per slot, the hop
#: departures and their marked fraction (the next step's arrivals; the last hop's
#: departures zeroed), depth before and after the step, per-queue departures, marked
#: bytes delivered and bytes lost per slot.
Result = tuple[bool, int]


def queues_numpy(rate: FloatArray, f8: FloatArray, remaining: FloatArray, sent: FloatArray,
                 ok: npt.NDArray[np.bool_], stop: FloatArray, t0: float, thr: FloatArray,
                 b: FloatArray, prev_dep: FloatArray,
                 prev_mout: FloatArray, path: npt.NDArray[np.int64],
                 last_hop: npt.NDArray[np.int64], kmin: FloatArray, kmax: FloatArray,
                 slope: FloatArray, inv_pkt: float, serve: FloatArray, buf: FloatArray,
                 tx: FloatArray, txm: FloatArray, drops_acc: FloatArray, arr: FloatArray,
                 q_arr: FloatArray, qmax: FloatArray, seen: npt.NDArray[np.bool_],
                 delivered: FloatArray, o_send: FloatArray, o_dep: FloatArray,
                 o_mout: FloatArray, o_q: FloatArray, o_q_new: FloatArray,
                 o_dep_q: FloatArray, o_got_m: FloatArray, o_lost: FloatArray,
                 hist_a: FloatArray, hist_q: FloatArray, acum: FloatArray,
                 qptr: npt.NDArray[np.int64], step: int) -> Result:
    """The reference form (see the module docstring)."""
    send = np.where(ok & (stop > t0), np.minimum(rate * f8, remaining), 0.0)
    remaining -= send
    sent += send
    nq = len(serve)
    cap, H = b.shape
    inflow = np.empty_like(b)
    inflow[:, 0] = send
    inflow[:, 1:] = prev_dep[:, :-1]
    pf = path.ravel()
    arrivals = np.bincount(pf, inflow.ravel(), nq)
    q = np.bincount(pf, b.ravel(), nq)
    qm = marking_depth(cast(FloatArray, q), hist_a, hist_q, acum, qptr, step)
    qp = qm * inv_pkt  # the data plane compares the depth in packets
    p = np.where(qp >= kmax, 1.0, np.maximum((qp - kmin) * slope, 0.0))
    avail = q + arrivals
    dep_q = np.minimum(avail, serve)
    drops = np.maximum(avail - dep_q - buf, 0.0)
    if hist_a.shape[0]:  # this step's kept arrivals, for the marking depth of later steps
        acum += arrivals - drops
        hist_a[step % hist_a.shape[0]] = acum
    dropped = bool(np.count_nonzero(drops))
    tot = b + inflow
    if dropped:
        kept = avail - drops
        # a queue drops only what arrived: no arrivals -> no drops -> 0 / tiny = 0
        fdrop = drops / np.maximum(arrivals, TINY)
        drop_fh = inflow * fdrop[path]
        tot = tot - drop_fh
        lost_f = np.add.reduce(drop_fh, axis=1)
    else:
        kept = avail
        lost_f = np.zeros(cap)
    fdep = dep_q / np.maximum(kept, TINY)  # an empty queue sends nothing: 0 / tiny = 0
    dep = tot * fdep[path]
    b[...] = tot - dep
    m_in = np.zeros_like(b)
    m_in[:, 1:] = prev_mout[:, :-1]
    mout = 1.0 - (1.0 - m_in) * (1.0 - p)[path]
    dep_m = dep * mout
    q_new = kept - dep_q
    tx += dep_q
    txm += np.bincount(pf, dep_m.ravel(), nq)
    drops_acc += drops
    arr += arrivals
    q_arr += q * arrivals
    np.maximum(qmax, np.where(arrivals > 0, np.maximum(q, q_new), 0.0), out=qmax)
    seen |= inflow > 0
    lf = np.arange(cap) * H + last_hop
    dflat = dep.reshape(-1)
    got = dflat[lf]
    got_m = dep_m.reshape(-1)[lf]
    dflat[lf] = 0.0
    delivered += got
    n_done = int(np.count_nonzero(delivered >= thr))
    for o, v in ((o_send, send), (o_dep, dep), (o_mout, mout), (o_q, q), (o_q_new, q_new),
                 (o_dep_q, dep_q), (o_got_m, got_m), (o_lost, lost_f)):
        o[...] = v
    return dropped, n_done


def _queues_loops(rate: Any, f8: Any, remaining: Any, sent: Any, ok: Any, stop: Any,
                  t0: Any, thr: Any, b: Any, prev_dep: Any, prev_mout: Any, path: Any,
                  last_hop: Any, kmin: Any, kmax: Any, slope: Any, inv_pkt: Any,
                  serve: Any, buf: Any, tx: Any, txm: Any, drops_acc: Any, arr: Any,
                  q_arr: Any, qmax: Any, seen: Any, delivered: Any, send: Any, dep: Any,
                  mout: Any, q: Any, q_new: Any, dep_q: Any, got_m: Any,
                  lost_f: Any, hist_a: Any, hist_q: Any, acum: Any, qptr: Any,
                  step: Any) -> Any:  # pragma: no cover
    """The loop form of queues_numpy (compiled by numba; same operations, same order)."""
    nq = serve.shape[0]
    cap, H = b.shape
    for s in range(cap):
        if ok[s] and stop[s] > t0:
            x = min(rate[s] * f8[s], remaining[s])
            send[s] = x
            remaining[s] -= x
            sent[s] += x
        else:
            send[s] = 0.0
    arrivals = np.zeros(nq)
    q[:] = 0.0
    for s in range(cap):
        for h in range(H):
            j = path[s, h]
            x = send[s] if h == 0 else prev_dep[s, h - 1]
            arrivals[j] += x
            q[j] += b[s, h]
    p = np.empty(nq)
    drops = np.empty(nq)
    fdrop = np.zeros(nq)
    fdep = np.empty(nq)
    dropped = False
    nh = hist_a.shape[0]
    lo = step - nh + 1
    for j in range(nq):
        qj = q[j]
        if nh:  # marking_depth
            hist_q[step % nh, j] = qj
            head = acum[j] - qj
            ptr = max(qptr[j], lo)
            while ptr < step and hist_a[ptr % nh, j] <= head + 0.5:  # enqmark.HALF_BYTE
                ptr += 1
            qptr[j] = ptr
            qj = hist_q[ptr % nh, j]
        qp = qj * inv_pkt
        if qp >= kmax[j]:
            p[j] = 1.0
        else:
            p[j] = max((qp - kmin[j]) * slope[j], 0.0)
        avail = q[j] + arrivals[j]
        dq = min(avail, serve[j])
        dr = max(avail - dq - buf[j], 0.0)
        dep_q[j] = dq
        drops[j] = dr
        kept = avail
        if dr != 0.0:
            dropped = True
            kept = avail - dr
            fdrop[j] = dr / max(arrivals[j], 2.2250738585072014e-308)  # TINY
        fdep[j] = dq / max(kept, 2.2250738585072014e-308)  # TINY
        q_new[j] = kept - dq
        if nh:
            acum[j] += arrivals[j] - dr
            hist_a[step % nh, j] = acum[j]
    depm_q = np.zeros(nq)
    n_done = 0
    for s in range(cap):
        lost = 0.0
        for h in range(H):
            j = path[s, h]
            x = send[s] if h == 0 else prev_dep[s, h - 1]
            tot = b[s, h] + x
            if dropped:
                dfh = x * fdrop[j]
                tot = tot - dfh
                lost = lost + dfh
            d = tot * fdep[j]
            b[s, h] = tot - d
            m_in = 0.0 if h == 0 else prev_mout[s, h - 1]
            mo = 1.0 - (1.0 - m_in) * (1.0 - p[j])
            mout[s, h] = mo
            dm = d * mo
            depm_q[j] += dm
            dep[s, h] = d
            if x > 0:
                seen[s, h] = True
        lost_f[s] = lost
        lh = last_hop[s]
        delivered[s] += dep[s, lh]
        got_m[s] = dep[s, lh] * mout[s, lh]
        dep[s, lh] = 0.0
        if delivered[s] >= thr[s]:
            n_done += 1
    for j in range(nq):
        tx[j] += dep_q[j]
        txm[j] += depm_q[j]
        drops_acc[j] += drops[j]
        arr[j] += arrivals[j]
        q_arr[j] += q[j] * arrivals[j]
        if arrivals[j] > 0:
            qmax[j] = max(qmax[j], max(q[j], q_new[j]))
        else:
            qmax[j] = max(qmax[j], 0.0)
    return dropped, n_done


# splitmix64 finaliser constants (Steele, Lea & Flood, OOPSLA'14)
_U11, _U27, _U30, _U31 = (np.uint64(v) for v in (11, 27, 30, 31))
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def uniform(hbase: npt.NDArray[np.uint64], step: int) -> FloatArray:
    """Uniform draws in [0, 1) from ``hbase`` (flow id x 0x9E3779B97F4A7C15 + seed mix)
    and the step number alone, so a flow's draws do not depend on the other flows."""
    z = hbase + np.uint64(step)
    z ^= z >> _U30
    z *= _M1
    z ^= z >> _U27
    z *= _M2
    z ^= z >> _U31
    out: FloatArray = (z >> _U11).astype(np.float64) * (1.0 / 2**53)
    return out


def cnps_numpy(got_m: FloatArray, last_cnp: FloatArray, cnps: npt.NDArray[np.int64],
               hbase: npt.NDArray[np.uint64], step: int, t0: float, gap: float,
               pkt: float, dsteps: npt.NDArray[np.int64], fb_cnp: npt.NDArray[np.bool_],
               n_cnp: npt.NDArray[np.bool_]) -> int:
    """The NP's CNP draw (reference form): a flow that received ``k`` marked packets'
    worth of bytes sends a CNP with probability 1 - exp(-k), at most one per ``gap``;
    it is queued ``dsteps`` steps ahead in the ring ``fb_cnp``.  Returns the count."""
    fire = (got_m > 0) & (t0 - last_cnp >= gap)
    if not np.count_nonzero(fire):
        return 0
    idx = fire.nonzero()[0]
    lam = got_m[idx] / pkt
    idx = idx[uniform(hbase[idx], step) < -np.expm1(-lam)]
    if len(idx):
        last_cnp[idx] = t0
        cnps[idx] += 1
        when = (step + dsteps[idx]) % fb_cnp.shape[0]
        fb_cnp[when, idx] = True
        n_cnp[when] = True
    return len(idx)


def _cnps_loops(got_m: Any, last_cnp: Any, cnps: Any, hbase: Any, step: Any, t0: Any,
                gap: Any, pkt: Any, dsteps: Any, fb_cnp: Any,
                n_cnp: Any) -> Any:  # pragma: no cover
    """The loop form of cnps_numpy (compiled by numba; uint64 arithmetic wraps)."""
    n = 0
    D = fb_cnp.shape[0]
    for s in range(got_m.shape[0]):
        if got_m[s] > 0 and t0 - last_cnp[s] >= gap:
            # (the constants written out: numba would unpickle global numpy scalars
            # on every call)
            z = hbase[s] + np.uint64(step)
            z ^= z >> np.uint64(30)
            z *= np.uint64(0xBF58476D1CE4E5B9)
            z ^= z >> np.uint64(27)
            z *= np.uint64(0x94D049BB133111EB)
            z ^= z >> np.uint64(31)
            u = np.float64(z >> np.uint64(11)) * (1.0 / 2**53)
            if u < -np.expm1(-(got_m[s] / pkt)):
                last_cnp[s] = t0
                cnps[s] += 1
                w = (step + dsteps[s]) % D
                fb_cnp[w, s] = True
                n_cnp[w] = True
                n += 1
    return n


_STEP_ARGS = """rate f8 remaining sent ok stop t0 thr b prev_dep prev_mout path last_hop kmin kmax
slope inv_pkt serve buf tx txm drops_acc arr q_arr qmax seen delivered o_send o_dep o_mout
o_q o_q_new o_dep_q o_got_m o_lost hist_a hist_q acum qptr last_cnp cnps hbase step gap
pkt dsteps fb_cnp n_cnp""".split()


def fabric_numpy(*args: Any) -> tuple[bool, int, int]:
    """queues_numpy then cnps_numpy (on the step's marked deliveries): the arguments of
    both in ``_STEP_ARGS`` order; returns (dropped, n_done, CNPs drawn)."""
    last_cnp, cnps, hbase, step, gap, pkt, dsteps, fb_cnp, n_cnp = args[39:]
    dropped, n_done = cast(Any, queues_numpy)(*args[:39], step)  # (mypy cannot count *args)
    fired = cnps_numpy(args[33], last_cnp, cnps, hbase, step, args[6], gap, pkt, dsteps,
                       fb_cnp, n_cnp)
    return dropped, n_done, fired


def _fabric_loops(rate: Any, f8: Any, remaining: Any, sent: Any, ok: Any, stop: Any,
                  t0: Any, thr: Any, b: Any, prev_dep: Any, prev_mout: Any, path: Any,
                  last_hop: Any, kmin: Any, kmax: Any, slope: Any, inv_pkt: Any,
                  serve: Any, buf: Any, tx: Any, txm: Any, drops_acc: Any, arr: Any,
                  q_arr: Any, qmax: Any, seen: Any, delivered: Any, send: Any, dep: Any,
                  mout: Any, q: Any, q_new: Any, dep_q: Any, got_m: Any, lost_f: Any,
                  hist_a: Any, hist_q: Any, acum: Any, qptr: Any,
                  last_cnp: Any, cnps: Any, hbase: Any, step: Any, gap: Any, pkt: Any,
                  dsteps: Any, fb_cnp: Any, n_cnp: Any) -> Any:  # pragma: no cover
    """fabric_numpy's compiled form: one call per step (numba's per-call cost is per
    argument, so the two kernels share one call)."""
    dropped, n_done = queues_numba(
        rate, f8, remaining, sent, ok, stop, t0, thr, b, prev_dep, prev_mout, path,
        last_hop, kmin, kmax, slope, inv_pkt, serve, buf, tx, txm, drops_acc, arr, q_arr,
        qmax, seen, delivered, send, dep, mout, q, q_new, dep_q, got_m, lost_f, hist_a,
        hist_q, acum, qptr, step)
    fired = cnps_numba(got_m, last_cnp, cnps, hbase, step, t0, gap, pkt, dsteps, fb_cnp,
                       n_cnp)
    return dropped, n_done, fired


queues_numba: Any
cnps_numba: Any
fabric_numba: Any


def _jit(fn: Any) -> Any:
    try:
        return numba.njit(cache=True, nogil=True)(fn)
    except RuntimeError:  # pragma: no cover (no writable cache location: compile per run)
        return numba.njit(nogil=True)(fn)


try:  # numba is a dependency; the numpy form keeps the simulator usable without it
    import numba
except ImportError:  # pragma: no cover
    queues_numba = cnps_numba = fabric_numba = None
else:
    queues_numba = _jit(_queues_loops)
    cnps_numba = _jit(_cnps_loops)
    fabric_numba = _jit(_fabric_loops)


def fabric_step(*args: Any) -> tuple[bool, int, int]:
    """One step of every queue and the CNP draw (``_STEP_ARGS``): compiled with numba."""
    if fabric_numba is not None:
        dropped, n_done, fired = fabric_numba(*args)
        return bool(dropped), int(n_done), int(fired)
    return fabric_numpy(*args)


def scratch(cap: int, hops: int, nq: int) -> tuple[FloatArray, ...]:
    """Output arrays for queue_step: (send, dep, mout, q, q_new, dep_q, got_m, lost_f)."""
    return (np.zeros(cap), np.zeros((cap, hops)), np.zeros((cap, hops)), np.zeros(nq),
            np.zeros(nq), np.zeros(nq), np.zeros(cap), np.zeros(cap))


def tiny_args() -> list[Any]:
    """A one-slot, two-queue fabric_step input with the engine's argument types."""
    f1, f2 = np.zeros(2), np.zeros((1, 2))
    return [np.zeros(1), np.zeros(1), np.zeros(1), np.zeros(1), np.zeros(1, np.bool_),
            np.zeros(1), 0.0, np.zeros(1), f2.copy(), f2.copy(), f2.copy(),
            np.ones((1, 2), np.int64), np.zeros(1, np.int64), f1, f1 + 1.0, f1, 1.0,
            f1 + 1.0, f1 + 1.0, *(f1.copy() for _ in range(6)), np.zeros((1, 2), np.bool_),
            np.zeros(1), *scratch(1, 2, 2), *mark_history(2, 2), np.zeros(1),
            np.zeros(1, np.int64),
            np.zeros(1, np.uint64), 0, 1.0, 1.0, np.ones(1, np.int64),
            np.zeros((2, 1), np.bool_), np.zeros(2, np.bool_)]


def warm_up() -> None:
    """Compile (or load from numba's cache) the kernel now, on a tiny input of the
    engine's argument types, so the first step does not pay for it."""
    if fabric_numba is not None:
        fabric_numba(*tiny_args())
