r"""Clear answers of a one-frame goal in one kernel call: escapes along the goal's null space and
plain retries from random starts, each checked (solve._collision_fast).

A redundant arm (Panda: 7 joints, a 6-row Pose) reaches a target along a family of configurations
(the self-motion); the plain solve returns one of them, and among obstacles it may pass through
one (the forearm through a shelf's board). :func:`clear_attempts` looks for a member of that
family that keeps every checked pair at least ``margin`` apart:

* *Escape.* At an answer q that meets the goal, the collision rows (:func:`kernels.collision_rows`:
  the distances ``d_i`` and ``∇d_i``) of the pairs closer than ``margin + ESCAPE_CLEAR`` ask for
  ``∇d_i · δq = margin + ESCAPE_CLEAR − d_i``; the step solves them in the null space of the goal
  rows ``J`` (``P = I − Jᵀ(JJᵀ + εI)⁻¹J``, ``δq = Aᵀ(AAᵀ + μI)⁻¹e`` with ``A = ∇d P``), so to
  first order it moves the colliding links and not the goal, capped at ESCAPE_STEP rad and
  shortened to stay inside the joint limits (:func:`_inside`; clamping joint by joint would turn
  it out of the null space). The plain solve (one attempt, few iterations: the step left the goal
  only to second order) then brings q back onto the goal, and the check
  (:func:`kernels.closest_moving`, in full: the next escape's rows come from its distances,
  :func:`kernels.measured_rows`, so a colliding answer is measured once) says whether it is clear.
  Up to ``escapes`` such steps per answer; they stop when a joint on its limit blocks the step or
  the attempt comes back to where the step started (Panda in the shelf: plain answers often hold
  joint 6 on its upper limit, and the later steps of such an answer did nothing).
* *Retries.* An answer whose escapes do not clear it is followed by a plain solve from a uniform
  random start (the LM kernel's own restart sampler), checked, then escaped in turn (unless it is
  deeper than ESCAPE_DEEP in collision: the next retry is cheaper).

The loop runs in Numba, so a retry costs the plain solve and the check, with no Python and no
per-call typing between them (the Python loop it replaces spent ~25 µs a retry, ~10 µs of it
outside the kernels). The plain solve is ``solvers/lm.py``'s ``lm_chain_attempts``, called with
the argument types of the fast path (no new specialisation of it); the tables come held
(kernels.HeldTables: one pointer to unbox), and so does everything else that stays the same for
a Check and a goal frame (:class:`RetryTables`). When nothing is clear, the
answer whose least distance was largest (measured in full by the rows) is returned for the
general core's collision rows to start from.
"""
from __future__ import annotations

import math
import time

import numpy as np
from numba import njit, types
from numba.experimental import structref

from ..kinematics.kernels import NO_RC
from ..solvers._common import CONVERGED, ldl_apply, ldl_factor, ldl_solve
from ..solvers._linalg import gram, row_gram
from ..solvers.lm import L_LOWER, L_UPPER, _chain_eval, _chain_eval_jacobian, _restart_sample, lm_chain_attempts, new_chain_state
from .kernels import closest_moving_into, measured_rows_into

__all__ = ["ESCAPE_CLEAR", "ESCAPE_DEEP", "ESCAPE_STEP", "RetryTables", "clear_attempts", "clear_attempts_held",
           "escape_step", "find_clear"]

ESCAPE_CLEAR = 0.01   # [m] an escape step aims the pairs this far beyond the margin
ESCAPE_DEEP = 0.02    # [m] a retry's answer deeper than this in collision is not escaped (the next retry is cheaper)
ESCAPE_STEP = 1.0     # [rad or m] the largest joint change of one escape step
_EPS_TASK = 1e-10     # damping of the goal rows' projector (JJᵀ + εI)
_TINY_STEP = 1e-6    # [rad or m] an escape step smaller than this is none
_MU_ROWS = 1e-6       # damping of the rows' step (AAᵀ + μI), relative to the largest |∇d_i|²

# stats slots of clear_attempts
ST_ITERS, ST_TRIES, ST_ESCAPES, ST_BEST_D, ST_PERR, ST_RERR, ST_D, ST_PAIR, ST_STATIC = range(9)


@njit(cache=True, **NO_RC)
def _null_project(J, L, v, g, x, out):
    """out = P v, P = I − Jᵀ (JJᵀ + εI)⁻¹ J, with L the factor (ldl_factor) of JJᵀ + εI (g, x:
    scratch; out may be v)."""
    m, dof = J.shape
    for t in range(m):
        s = 0.0
        for j in range(dof):
            s += J[t, j] * v[j]
        g[t] = s
    ldl_apply(L, m, g, x)
    for j in range(dof):
        s = v[j]
        for t in range(m):
            s -= J[t, j] * x[t]
        out[j] = s


@njit(cache=True)
def escape_step(J, d, Jd, k, target, max_step, dq):
    """The escape step into ``dq`` (dof,): the least-norm δq in the null space of the goal rows
    ``J`` (m, dof) with ``Jd[i] · δq = target − d[i]`` for the rows i < k with ``d[i] < target``
    (damped), scaled so that no entry exceeds ``max_step``. Returns the number of rows it used
    (0: nothing to push, or no null space; dq is zero)."""
    m, dof = J.shape
    dq[:] = 0.0
    if m >= dof:
        return 0  # the goal rows leave no null space to move in
    act = np.empty(k, dtype=np.int64)
    na = 0
    for i in range(k):
        if d[i] < target:
            act[na] = i
            na += 1
    if na == 0:
        return 0
    # the rows projected on the null space of J: A_r = P ∇d_i (JJᵀ + εI factored once for them all)
    L = np.empty((m, m))
    gram(J, m, dof, L)
    for i in range(m):
        L[i, i] += _EPS_TASK
    if not ldl_factor(L, m):
        return 0
    g = np.empty(m)
    x = np.empty(m)
    A = np.empty((na, dof))
    e = np.empty(na)
    for r in range(na):
        e[r] = target - d[act[r]]
        _null_project(J, L, Jd[act[r]], g, x, A[r])
    G = np.empty((na, na))
    row_gram(A, na, dof, G)
    top = 0.0  # the largest |∇d_i|²: the damping's scale (a row the goal pins has a tiny projection)
    for r in range(na):
        s = 0.0
        for j in range(dof):
            s += Jd[act[r], j] * Jd[act[r], j]
        top = max(top, s)
    if not top > 0.0:
        return 0  # no joint moves the pushed pairs
    for r in range(na):
        G[r, r] += _MU_ROWS * top
    y = np.empty(na)
    if not ldl_solve(G, e, y):
        return 0
    for j in range(dof):
        s = 0.0
        for r in range(na):
            s += A[r, j] * y[r]
        dq[j] = s
    # projected once more: A's rows are in the null space only up to ε, and y may be large where
    # two rows nearly agree
    _null_project(J, L, dq, g, x, dq)
    big = 0.0
    for j in range(dof):
        big = max(big, abs(dq[j]))
    if not (_TINY_STEP < big < math.inf):  # (tiny: the goal pins every pushed pair)
        dq[:] = 0.0
        return 0
    if big > max_step:
        dq *= max_step / big
    return na


@njit(cache=True, **NO_RC)
def _max_abs(v):
    big = 0.0
    for j in range(v.shape[0]):
        big = max(big, abs(v[j]))
    return big


@njit(cache=True, **NO_RC)
def _inside(lims, q, dq):
    """The largest a in [0, 1] with q + a·dq inside the limits of ``lims`` (q inside them)."""
    a = 1.0
    for j in range(q.shape[0]):
        if dq[j] > 0.0 and q[j] + dq[j] > lims[L_UPPER, j]:
            a = min(a, max(lims[L_UPPER, j] - q[j], 0.0) / dq[j])
        elif dq[j] < 0.0 and q[j] + dq[j] < lims[L_LOWER, j]:
            a = min(a, min(lims[L_LOWER, j] - q[j], 0.0) / dq[j])
    return a


@njit(cache=True)
def clear_attempts(ch, lims, gkind, gvec, gR, gaxis, gw, tol_p, tol_r, free, buf, solve_iters, attempt_iters,
                   max_attempts, escape_iters, ni, nf, origin, Tall, held, cutoff, moving_self, moving_link,
                   margin, q_first, seed, first_try, tries, escapes, measured, q_out, stats):
    """Look for a clear answer of the one-frame goal (see the module docstring): tries number
    ``first_try`` … ``first_try + tries − 1``; try 0 is ``q_first`` (the plain answer, which meets
    the goal and is known not clear: escapes only), every other one a plain solve from the
    uniform random start number ``try`` of ``seed`` (``solve_iters`` iterations at most, attempts
    of ``attempt_iters``, ``max_attempts`` of them), checked, then escaped (``escapes`` steps,
    each followed by one attempt of ``escape_iters`` iterations). Returns 1 with the clear answer
    in ``q_out``, else 0 with ``q_out`` the answer (meeting the goal) whose least distance was the
    largest when that beats ``stats[ST_BEST_D]`` on entry (q_out unchanged otherwise). Adds to
    ``stats``: iterations, plain solves, escape steps; ``stats[ST_BEST_D]`` the best least
    distance so far [m]; for a clear answer its position and rotation errors (ST_PERR, ST_RERR)
    and its check (``closest_moving``'s three values: ST_D, ST_PAIR, ST_STATIC). ``measured`` 1:
    the caller's last check, in full, was of ``q_first`` (its distances and FK are still in the
    tables' scratch and ``Tall``), so try 0 takes its rows from them; 0: try 0 measures q_first
    itself. Arguments as ``lm_chain_attempts`` (chain), ``closest_moving`` and ``measured_rows``
    (check and rows; the tables held: kernels.HeldTables)."""
    tables = held.t
    dof = q_first.shape[0]
    G = gkind.shape[0]
    m = 3 * G
    stop = margin - 1e-9
    target = margin + ESCAPE_CLEAR
    mr = tables[13].shape[0] + tables[14].shape[0] * tables[14].shape[1]
    d = np.empty(mr)
    Jd = np.empty((mr, dof))
    na = np.empty(mr, dtype=np.int64)
    nb = np.empty(mr, dtype=np.int64)
    F = np.empty((ch.shape[0], 12))
    T = np.empty((4, 4))
    e = np.empty(m)
    aux = np.empty((G, 4))
    Jf = np.empty((6, dof))
    J = np.empty((m, dof))
    q = np.empty(dof)
    qs = np.empty(dof)
    dq = np.empty(dof)
    qb = np.empty(dof)
    tmp = np.empty(10)
    Jl = np.empty((6, dof))
    perr, rerr = 0.0, 0.0
    one = max_attempts - max_attempts + 1  # (an int64 that is not a literal: the fast path's types)
    for t in range(first_try, first_try + tries):
        if t == 0:
            q[:] = q_first
        else:
            _restart_sample(lims, seed, t, qs)
            st = new_chain_state(free)
            code = lm_chain_attempts(ch, lims, gkind, gvec, gR, gaxis, gw, tol_p, tol_r, qs, q, st, solve_iters,
                                     attempt_iters, max_attempts, seed + t, buf)
            stats[ST_ITERS] += st[1]
            stats[ST_TRIES] += 1.0
            if code != CONVERGED:
                continue
            perr, rerr = st[8], st[9]
        dc, ic, nc = np.inf, -1, 0
        for step in range(escapes + 1):
            # the check in full (no stop: its distances give the rows below without measuring again);
            # the plain answer's was made by the caller when ``measured``
            if t + step > 0 or measured == 0:
                dc, ic, nc = closest_moving_into(ni, nf, origin, q, Tall, tables, cutoff, moving_self, moving_link, margin,
                                             -np.inf, tmp)
            if t + step > 0 and dc >= stop:  # (try 0 is the plain answer, known not clear)
                q_out[:] = q
                stats[ST_PERR], stats[ST_RERR] = perr, rerr
                stats[ST_D], stats[ST_PAIR], stats[ST_STATIC] = dc, ic, nc
                return 1
            # the rows within reach of the escape's target (Tall: the FK of q, from the check)
            k = measured_rows_into(ni, nf, Tall, tables, target, d, Jd, na, nb, Jl)
            dmin = np.inf
            for i in range(k):
                dmin = min(dmin, d[i])
            if dmin > stats[ST_BEST_D]:
                stats[ST_BEST_D] = dmin
                q_out[:] = q
            if step == escapes or (t > 0 and dmin < -ESCAPE_DEEP):
                break
            _chain_eval(ch, q, gkind, gvec, gR, gaxis, gw, F, T, e, aux, Jf, J)
            _chain_eval_jacobian(ch, gkind, gvec, gR, gaxis, gw, F, T, e, aux, Jf, J)
            for j in range(dof):  # a DOF without range (held: collision/limbs.py) takes no part in the step
                if lims[L_LOWER, j] == lims[L_UPPER, j]:
                    for i in range(k):
                        Jd[i, j] = 0.0
            if escape_step(J, d, Jd, k, target, ESCAPE_STEP, dq) == 0:
                break
            # the step shortened to stay inside the joint limits (clamping each joint would turn it out of
            # the null space, and the attempt would bring q back); a joint at its limit that the step
            # pushes further blocks this way out
            a = _inside(lims, q, dq)
            if not a * _max_abs(dq) > _TINY_STEP:
                break
            for j in range(dof):
                qs[j] = q[j] + a * dq[j]
                qb[j] = q[j]
            st = new_chain_state(free)
            code = lm_chain_attempts(ch, lims, gkind, gvec, gR, gaxis, gw, tol_p, tol_r, qs, q, st, escape_iters,
                                     attempt_iters, one, seed + t, buf)
            stats[ST_ITERS] += st[1]
            stats[ST_ESCAPES] += 1.0
            if code != CONVERGED:
                break
            perr, rerr = st[8], st[9]
            moved = 0.0
            for j in range(dof):
                moved = max(moved, abs(q[j] - qb[j]))
            if not moved > _TINY_STEP:
                break  # the attempt came back to where the step started: the next step would too
    return 0


RETRY_ITERATIONS = 200  # iterations of one retry's plain solve (attempts of the fast path's length)
ESCAPES = 3             # escape steps per answer
CHUNK = 4               # tries per kernel call: the clock is read between calls


def find_clear(check, key, fast, table, tol_p, tol_r, buf, q_first, seed, clock, retries, attempt_iters):
    """Python side of :func:`clear_attempts` for solve._collision_fast: ``check`` (rows.Check),
    ``fast`` (solve._fast_tables of the goal's frame: chain program, lims, free, ...), ``table``
    (the goal's rows: gkind, gvec, gR, gaxis, gw), the plain answer ``q_first`` (the Check's last
    measure, in full: ``check.closest(q_first)`` without a stop, whose distances its rows reuse) and the
    retries' ``clock`` (an invkin._compile_clock.Budget: the kernel's first compile, or its run on
    the interpreter, moves the deadline); up to ``retries`` random starts, CHUNK per call. Returns
    (clear, q, stats of clear_attempts): q the clear answer, else the least close one (q_first
    when nothing beat it); stats are the Check's own array, valid until its next search. ``key``
    names the goal's class and frame: what stays the same between calls with that key (the chain,
    the scratch, the Check's arguments) is held by Numba per key (:class:`RetryTables`, built
    once), so a call unboxes 14 arguments instead of 32 (~0.8 µs)."""
    gkind, gvec, gR, gaxis, gw = table
    q_out = q_first.copy()
    held = check.clear_held.get(key)
    if held is None:
        held = _held_for(check, key, fast, attempt_iters, (gkind, gvec, gR, gaxis, gw, tol_p, tol_r, q_first, seed, 0,
                                                           1, 1, q_out))
    if held is None:  # (its entry point compiles in the background: every argument passed, on the interpreter)
        stats = np.zeros(9)
        stats[ST_BEST_D] = -np.inf
        f = _retry_fields(check, fast, buf, attempt_iters, stats)
        args = [f[0], f[1], gkind, gvec, gR, gaxis, gw, tol_p, tol_r, *f[2:17], q_first, seed, 0, CHUNK, f[17], 1, q_out,
                f[18]]  # (clear_attempts' order: clear_attempts_held reads the same fields from h)
        ep = _entry(check, key, args)
    else:
        h, ep, stats = held
    first = 0
    found = 0
    while first <= retries:
        tries = min(CHUNK, retries + 1 - first)
        if held is not None:
            found = ep(h, gkind, gvec, gR, gaxis, gw, tol_p, tol_r, q_first, seed, first, tries, 1, q_out)
        else:
            args[26], args[27] = first, tries
            found = ep(*args) if ep is not None else _interpreted(args)
        first += CHUNK
        if found:
            break
        clock.update()
        if time.perf_counter() >= clock.deadline:
            break
    return bool(found), q_out, stats


@structref.register
class RetryTablesType(types.StructRef):
    """Numba type of :class:`RetryTables`."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class RetryTables(structref.StructRefProxy):
    """The arguments of :func:`clear_attempts` that stay the same for one Check and one goal frame
    (chain program, per-DOF table, chain scratch, the retries' settings, the Check's FK and tables,
    the stats array), held by Numba: :func:`clear_attempts_held` unboxes one pointer for them."""


_RETRY_FIELDS = ("ch", "lims", "free", "buf", "solve_iters", "attempt_iters", "max_attempts", "escape_iters", "ni", "nf",
                 "origin", "Tall", "held", "cutoff", "moving_self", "moving_link", "margin", "escapes", "stats")
structref.define_proxy(RetryTables, RetryTablesType, list(_RETRY_FIELDS))


@njit(cache=True)
def _retry_tables(ch, lims, free, buf, solve_iters, attempt_iters, max_attempts, escape_iters, ni, nf, origin, Tall,
                  held, cutoff, moving_self, moving_link, margin, escapes, stats):
    return RetryTables(ch, lims, free, buf, solve_iters, attempt_iters, max_attempts, escape_iters, ni, nf, origin,
                       Tall, held, cutoff, moving_self, moving_link, margin, escapes, stats)


_retry_tables.py_func.compiled_only = True  # a structref exists only in compiled code (invkin._tiers)


@njit(cache=True)
def clear_attempts_held(h, gkind, gvec, gR, gaxis, gw, tol_p, tol_r, q_first, seed, first_try, tries, measured, q_out):
    """:func:`clear_attempts` with the arguments of ``h`` (a :class:`RetryTables`); stats in ``h.stats``
    (cleared when ``first_try`` is 0: a new search)."""
    if first_try == 0:
        h.stats[:] = 0.0
        h.stats[ST_BEST_D] = -np.inf
    return clear_attempts(h.ch, h.lims, gkind, gvec, gR, gaxis, gw, tol_p, tol_r, h.free, h.buf, h.solve_iters,
                          h.attempt_iters, h.max_attempts, h.escape_iters, h.ni, h.nf, h.origin, h.Tall, h.held,
                          h.cutoff, h.moving_self, h.moving_link, h.margin, q_first, seed, first_try, tries, h.escapes,
                          measured, q_out, h.stats)


def _retry_fields(check, fast, buf, attempt_iters, stats) -> tuple:
    """The values of RetryTables' fields (_RETRY_FIELDS, in that order) for a Check and a goal
    frame's fast tables: what clear_attempts takes besides the goal, q_first, seed and the tries."""
    a = check._args
    return (fast[0], fast[1], float(fast[2]), buf, RETRY_ITERATIONS, attempt_iters, 2**62, attempt_iters, a[0], a[1],
            a[2], a[4], check.held, a[6], a[7], a[8], a[9], ESCAPES, stats)


def _held_for(check, key, fast, attempt_iters, args):
    """(RetryTables, clear_attempts_held's entry point for the types of ``args`` (its arguments after
    the first), stats) of ``key`` on the Check, built on its first use (setup: not a solve's time);
    None while clear_attempts_held or the RetryTables constructor compiles in the background. Both
    are asked for by type before anything is built: a compiled-only constructor called while the
    held entry point is not ready would compile in this process (~0.2 s on empty caches) for
    tables the interpreted path cannot use."""
    held = check.clear_held.get(key)
    if held is not None:
        return held
    import numba

    from .._compile_clock import setup
    from .._tiers import entry_point

    stats = np.zeros(9)
    values = _retry_fields(check, fast, np.empty(fast[3]), attempt_iters, stats)
    types_ = [numba.typeof(v) for v in values]
    rest = [numba.typeof(x) for x in args]
    if (entry_point(clear_attempts_held, [RetryTablesType(list(zip(_RETRY_FIELDS, types_)))] + rest) is None
            or entry_point(_retry_tables, types_) is None):
        return None
    with setup():
        h = _retry_tables(*values)
    ep = entry_point(clear_attempts_held, [numba.typeof(h)] + rest)  # the same type: in memory now
    if ep is None:
        return None
    held = check.clear_held[key] = (h, ep, stats)
    return held


def _entry(check, key, args):
    """clear_attempts' compiled entry point for these argument types (kept in the Check's
    ``clear_entries`` per ``key``: its tables' 17-tuple is typed once, not per call); None while
    it compiles in the background."""
    ep = check.clear_entries.get(key)
    if ep is None:
        import numba

        from .._tiers import entry_point

        ep = entry_point(clear_attempts, [numba.typeof(x) for x in args])
        if ep is not None:
            check.clear_entries[key] = ep
    return ep


def _interpreted(args):
    from .._tiers import call_interpreted

    return call_interpreted(clear_attempts, *args)
