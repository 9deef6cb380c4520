r"""Collision distances as inequality rows of the general LM core (solvers/lm_core.py).

Every checked pair ``i`` (self pairs of :func:`~invkin.collision.pairs.collision_pairs`, and every
(link, obstacle) of a :class:`~invkin.collision.world.World`) must keep ``d_i(q) ≥ margin``. At
each point the core evaluates (:func:`ineq_eval`, from the FK of that point) the pairs whose
bounds lie within ``cutoff`` (broad phase), and stores them after the goal rows as

    J_i = ∂d_i/∂q,   e_i = margin + BUFFER − d_i        (rows m0 … m0 + k − 1 of J, e)

so that ``J_i δq = e_i`` is the linearised ``d_i + ∇d_i·δq = margin + BUFFER``. A row joins the
hard rows of a step (:func:`active_rows`) when the step would leave it below that target
(``J_i δq < e_i``: violated now and not repaired by the step, or violated by the step), exactly
as a held joint joins the joint box's active set; the step is then solved again with it.
``BUFFER`` (1 mm) aims the pinned rows a little above the margin, so that the second-order error
of a long step (the rows are linear, the distances are not) seldom takes a trial point below the
margin itself, which is what acceptance demands.

The core reads three numbers per point in its ``errs`` array (slots :data:`E_VIOL`,
:data:`E_DMIN`, :data:`E_ROWS`): ``V = Σ max(0, margin − d_i)²`` (0: every checked pair at least
``margin`` apart; a point with ``V > 0`` is never converged, and a step from it must lower ``V``),
the smallest distance, and the number of rows. Rows no joint can change (a base standing on a
table) are left out by :func:`~invkin.collision.kernels.collision_rows`: no step can move them,
so the driver reports them instead (:func:`final_check`).
"""
from __future__ import annotations

import functools
import math
import threading

import numba
import numpy as np
from numba import njit, types
from numba.extending import overload

from .._compile_clock import setup
from .._tiers import call_interpreted, entry_point
from ..errors import warn_caller
from .errors import CollisionError, CollisionWarning
from .kernels import HeldTables, closest_moving, closest_moving_held, collision_rows
from .world import World

__all__ = ["BUFFER", "CUTOFF", "E_VIOL", "E_DMIN", "E_ROWS", "no_rows", "solve_rows", "ineq_eval", "ineq_size",
           "active_rows", "check_options", "Check", "check_for", "rows_clear", "final_check"]

BUFFER = 1e-3      # [m] pinned rows aim at margin + BUFFER (see above)
CUTOFF = 0.05      # [m] broad phase: pairs whose bounds are farther than margin + CUTOFF are not evaluated
E_VIOL, E_DMIN, E_ROWS = 4, 5, 6  # slots of the core's errs array


def _readonly(a):
    if a.flags.writeable:
        a = a.view()
        a.setflags(write=False)
    return a


def no_rows():
    """The ``coll`` of a problem without collision rows: None. The core's kernels are then compiled
    without any collision code (:func:`ineq_eval` and :func:`ineq_size` resolve to no-ops by type,
    so a plain solve does not pay the collision kernels' compile time)."""
    return None


def check_options(world, self_collision, margin):
    """(world as a World or None, self_collision, margin) validated for solve(); CollisionError
    naming the value otherwise."""
    if (type(world) is World or world is None) and type(self_collision) is bool and type(margin) is float \
            and 0.0 <= margin < math.inf:
        return world, self_collision, margin  # the common call, already valid
    if world is not None and not isinstance(world, World):
        if isinstance(world, (list, tuple)):
            world = World(world)
        else:
            raise CollisionError(f"world: expected an ik.World (or a list of obstacles), got {type(world).__name__}")
    if not isinstance(self_collision, (bool, np.bool_)):
        raise CollisionError(f"self_collision: expected True or False, got {self_collision!r}")
    if isinstance(margin, bool) or not isinstance(margin, (int, float, np.integer, np.floating)) \
            or not (0.0 <= float(margin) < math.inf):
        raise CollisionError(f"margin: expected a finite distance >= 0 [m], got {margin!r}")
    return world, bool(self_collision), float(margin)


def solve_rows(robot, world, self_collision: bool, margin: float) -> tuple:
    """The ``coll`` tuple the core reads: (tables of
    :func:`~invkin.collision.distance.collision_tables`, (cutoff, margin, BUFFER) [m], node
    scratch).
    Holds scratch: one per solve (not shared between threads)."""
    from .distance import collision_tables, max_rows

    tables = collision_tables(robot, world, self_collision)
    # the static tables read-only, the scratch writable, whatever their source: one compiled core
    tables = tuple(_readonly(a) for a in tables[:11]) + tables[11:15] + tuple(_readonly(a) for a in tables[15:])
    m = max_rows(tables)
    return (tables, np.array([margin + CUTOFF, margin, BUFFER]), np.empty(m, dtype=np.int64),
            np.empty(m, dtype=np.int64))


def ineq_size(coll) -> int:
    """The most collision rows of ``coll`` (0 without collision: None)."""
    return 0 if coll is None else coll[2].shape[0]


def ineq_eval(coll, ni, nf, Tall, m0, e, J, errs):
    """Collision rows at the FK ``Tall`` into rows m0… of ``e`` and ``J`` (see the module
    docstring), and errs[E_VIOL], errs[E_DMIN], errs[E_ROWS]; nothing when ``coll`` is None.
    Inside a kernel the choice is made by type when it compiles (the overloads below)."""
    if coll is not None:
        _ineq_eval(coll, ni, nf, Tall, m0, e, J, errs)


@overload(ineq_size, jit_options={"cache": True})
def _ineq_size_ov(coll):
    if isinstance(coll, types.NoneType):
        return lambda coll: 0
    return lambda coll: coll[2].shape[0]


@overload(ineq_eval, jit_options={"cache": True})
def _ineq_eval_ov(coll, ni, nf, Tall, m0, e, J, errs):
    if isinstance(coll, types.NoneType):
        return lambda coll, ni, nf, Tall, m0, e, J, errs: None
    return lambda coll, ni, nf, Tall, m0, e, J, errs: _ineq_eval(coll, ni, nf, Tall, m0, e, J, errs)


@njit(cache=True)
def _ineq_eval(coll, ni, nf, Tall, m0, e, J, errs):
    """ineq_eval for a ``coll`` tuple."""
    tables, par, na, nb = coll
    errs[E_VIOL] = 0.0
    errs[E_DMIN] = np.inf
    errs[E_ROWS] = 0.0
    if na.shape[0] == 0:
        return
    k = collision_rows(ni, nf, Tall, tables, par[0], e[m0:], J[m0:], na, nb)
    margin = par[1]
    target = margin + par[2]
    v = 0.0
    dmin = np.inf
    for i in range(m0, m0 + k):
        d = e[i]
        if d < dmin:
            dmin = d
        if d < margin:
            v += (margin - d) * (margin - d)
        e[i] = target - d
    errs[E_VIOL] = v
    errs[E_DMIN] = dmin
    errs[E_ROWS] = k


@njit(cache=True)
def active_rows(J, e, m0, k, dq, hardx, n):
    """Append to ``hardx[n:]`` the collision rows (m0 … m0 + k − 1) that the step ``dq`` leaves
    below their target (J_i δq < e_i) and that are not there yet; returns the new count."""
    for i in range(m0, m0 + k):
        s = 0.0
        for j in range(dq.shape[0]):
            s += J[i, j] * dq[j]
        if s < e[i] - 1e-12:
            there = False
            for t in range(n):
                if hardx[t] == i:
                    there = True
                    break
            if not there:
                hardx[n] = i
                n += 1
    return n


class Check:
    """One robot's collision check against one world at one margin, built once and cached
    (:func:`check_for`): the solve's rows (:func:`solve_rows`), which pairs some joint moves
    (q-independent: a joint on the tree path between the two links, or above the link for an
    obstacle), and their labels. :meth:`closest` measures a configuration in one kernel call
    (:func:`~invkin.collision.kernels.closest_moving`: FK, broad phase at ``margin + CUTOFF``,
    the distances), so a solve whose first answer is already clear pays little more than that
    call. Holds scratch: one per thread (check_for keys it by thread)."""

    def __init__(self, robot, world, self_collision: bool, margin: float):
        from .model import collision_model

        self.robot, self.world, self.self_collision, self.margin = robot, world, self_collision, margin
        self.thread = threading.get_ident()  # (its scratch is this thread's: check_for)
        self.coll = solve_rows(robot, world, self_collision, margin)
        tables = self.coll[0]
        cm = collision_model(robot)
        moves = robot.qidx >= 0
        anc = [set(robot.ancestors(int(n))) for n in cm.links]
        pairs = tables[4]
        self.moving_self = np.array([any(moves[i] for i in anc[a] ^ anc[b]) for a, b in pairs], dtype=np.bool_)
        self.moving_link = np.array([any(moves[i] for i in a) for a in anc], dtype=np.bool_)
        self.n_obj = tables[14].shape[1]
        self.link_names = cm.link_names
        self.pair_links = [(int(a), int(b)) for a, b in pairs]
        self.n_pairs = len(pairs) + len(cm.links) * (len(world) if world is not None else 0)
        self._labels = {-1: None}  # pair index -> label, as report meets them (index −1: no pair)
        self.Tall = np.empty((robot.n_nodes, 4, 4))
        self.cutoff = margin + CUTOFF
        r = robot
        self._args = (r.node_table, r.node_params, r.origin, r.neutral(), self.Tall, tables, self.cutoff,
                      self.moving_self, self.moving_link, margin)
        self.held = HeldTables(tables)  # what the compiled calls take instead of the tuple (one pointer to unbox)
        self._ep = None
        self.measure = self._measure  # q -> closest(q), every argument but q bound once compiled (see _measure)
        self.clear_entries = {}  # compiled entry points of collision/retry.py's clear_attempts, per goal class
        self.clear_held = {}  # retry.RetryTables with clear_attempts_held's entry point, per goal class and frame
        # pairs no joint moves keep their distance at every q: measured once, warned about once
        self.static = self._static() if self.closest(robot.neutral())[2] else ()
        self._warned = False

    def label(self, index: int) -> tuple:
        """(link, link or obstacle label) of a pair index of :meth:`closest`."""
        P = len(self.pair_links)
        if index < P:
            a, b = self.pair_links[index]
            return self.link_names[a], self.link_names[b]
        ell, o = divmod(index - P, self.n_obj)
        return self.link_names[ell], f"obstacle {o} ({type(self.world.obstacles[o]).__name__})"

    def closest(self, q, stop: float = -math.inf) -> tuple:
        """(d_min [m], pair index, number of unmovable pairs closer than the margin) at q (dof,)
        float64: the closest pair some joint moves within ``margin + CUTOFF`` ((inf, −1, n)
        when none). With ``stop`` [m], the measure ends at the first such pair found closer than
        ``stop`` (kernels.closest_moving: then d_min is that pair's, not the least; a d_min ≥
        stop is exact): enough to tell a configuration in collision."""
        return self.closest_among(q, self.moving_self, self.moving_link, stop)

    def closest_among(self, q, moving_self, moving_link, stop: float = -math.inf) -> tuple:
        """:meth:`closest` over the pairs of the masks ``moving_self`` (P,) and ``moving_link``
        (L,) bool (subsets of the Check's own: collision/limbs.py measures one limb's pairs)."""
        a = self._args
        ep = self._entry()
        if ep is None:  # compiling in the background (invkin._tiers): on the interpreter this time
            return call_interpreted(closest_moving, a[0], a[1], a[2], q, a[4], a[5], a[6], moving_self, moving_link,
                                    a[9], stop)
        return ep(a[0], a[1], a[2], a[4], self.held, a[6], moving_self, moving_link, a[9], stop, q)

    def _entry(self):
        """The compiled closest_moving_held for the Check's argument types, q typed as any 1-D float64
        vector, called without Numba's per-call dispatch (every other argument is the Check's own, fixed
        when it is built; the tables held: kernels.HeldTables). None while it compiles in the background
        (invkin._tiers.entry_point). Once it exists, :attr:`measure` is it with every argument but q
        bound (functools.partial: ~0.2 µs less Python than :meth:`closest` per call)."""
        ep = self._ep
        if ep is None:
            a = self._args
            sig = [numba.typeof(x) for x in (a[0], a[1], a[2], a[4], self.held, a[6], a[7], a[8], a[9], -math.inf)]
            ep = self._ep = entry_point(closest_moving_held, sig + [types.Array(types.float64, 1, "A")])
            if ep is not None:
                self.measure = functools.partial(ep, a[0], a[1], a[2], a[4], self.held, a[6], a[7], a[8], a[9],
                                                 -math.inf)
        return ep

    def _measure(self, q) -> tuple:
        """:attr:`measure` until the entry point exists: :meth:`closest` in full."""
        return self.closest(q)

    def clear(self, q) -> bool:
        """Every pair some joint moves at least ``margin`` apart at q."""
        return self.closest(q)[0] >= self.margin - 1e-9

    def report(self, q, closest=None) -> dict:
        """final_check's report at q (``closest``: a result of :meth:`closest` at q, reused)."""
        dmin, i, _ = self.closest(q) if closest is None else closest
        static = self.static
        if static and not self._warned:
            self._warned = True
            warn_caller(f"{len(static)} pair(s) closer than margin={self.margin} m that no joint can move (not "
                          f"part of the solve): {', '.join(f'{a} – {b}' for a, b in static[:4])}", CollisionWarning)
        label = self._labels.get(i)
        if label is None and i >= 0:
            label = self._labels[i] = self.label(i)
        return {"margin": self.margin, "pairs": self.n_pairs, "min_distance": float(dmin), "closest": label,
                "collision_free": dmin >= self.margin - 1e-9, "static": static}

    def _static(self) -> tuple:
        """The unmovable pairs closer than the margin at the configuration last measured."""
        out_self, out_world = self.coll[0][13], self.coll[0][14]
        idx = [p for p in range(len(self.pair_links)) if not self.moving_self[p] and out_self[p, 0] < self.margin]
        idx += [len(self.pair_links) + ell * self.n_obj + o for ell, o in zip(*np.nonzero(out_world[:, :, 0] < self.margin))
                if not self.moving_link[ell]]
        return tuple(self.label(i) for i in idx)


def check_for(robot, world, self_collision: bool, margin: float) -> Check:
    """The :class:`Check` of (robot, world, self_collision, margin) for this thread, cached on the
    robot (a few per robot; the world by identity: World is immutable). Building one is first-call
    setup (invkin._compile_clock.setup: a solve's Budget does not count it). The last one asked for
    is looked at first (half the cost of the keyed look-up, in every collision solve)."""
    memo = robot.cache
    thread = threading.get_ident()
    c = memo.get("collision_check")
    if c is not None and c.world is world and c.self_collision is self_collision and c.margin == margin \
            and c.thread == thread:
        return c
    key = (id(world), self_collision, margin, thread)
    cache = memo.setdefault("collision_checks", {})
    c = cache.get(key)
    if c is None or c.world is not world:
        if len(cache) >= 16:
            cache.clear()
        with setup():  # (the robot's collision model and pairs, the tables: not a solve's time)
            c = cache[key] = Check(robot, world, self_collision, margin)
    memo["collision_check"] = c
    return c


def rows_clear(robot, q, coll) -> bool:
    """True when every row of ``coll`` (pairs some joint moves) is at least ``margin`` apart at q
    (the core's own test: errs[E_VIOL] == 0)."""
    tables, par, na, nb = coll
    m = na.shape[0]
    if m == 0:
        return True
    d = np.empty(m)
    J = np.empty((m, robot.dof))
    k = collision_rows(robot.node_table, robot.node_params, robot.fk_all_array(q), tables, par[1], d, J, na, nb)
    return bool(np.all(d[:k] >= par[1]))


def final_check(robot, q, world, self_collision: bool, margin: float) -> dict:
    """What a solve reports about its final q (``Result.info["collision"]``): every checked pair is
    measured again with the distance kernels (broad phase at margin + CUTOFF). Keys: ``margin`` [m],
    ``pairs`` (pairs checked: self pairs plus links × obstacles), ``min_distance`` [m] and
    ``closest`` (a, b) over the pairs some joint can move (inf and None when no pair lies within
    margin + CUTOFF, however near beyond it: pairs farther than that are never measured;
    :func:`~invkin.collision.distance.distances` measures them all), ``collision_free`` (every such pair at least ``margin`` apart, up to
    1e-9 m), ``static`` (pairs no joint moves that are closer than ``margin``: the solve cannot
    change them; warned about once per robot, world and margin)."""
    if world is not None and not isinstance(world, World):
        world = check_options(world, self_collision, margin)[0]
    q = np.ascontiguousarray(robot.check_q(q), dtype=np.float64)
    return check_for(robot, world, bool(self_collision), float(margin)).report(q)
