r"""Clear answers of goals on several frames (a humanoid's two hands), limb by limb
(solve._solve_lm_collision's general route).

The goals' frames split the joints that move them: the DOFs on every frame's path from the root
(a floating base, a humanoid's waist) are *shared*; those on one frame's path alone (an arm) are
that frame's *limb*; the rest move no goal (the legs under two hand goals). With the shared DOFs
held, a limb's frame is a one-frame goal on a chain of its own, and a colliding arm is a
one-frame problem again: :func:`retry.clear_attempts` (escapes along the goal's null space, then
plain solves from random starts, each checked) runs on the limb's sub-chain (its first joint's
parent frozen where the shared DOFs put it) with a check that measures only the pairs the limb
moves. Each limb is searched alone, so the tries add up instead of multiplying: with both arms
and the waist drawn together (the retries of session 5), a try is clear only when every part
lands in a clear branch at once (0-3 in 40 on G1's hard targets).

:meth:`Limbs.find_clear`, from the plain answer (which meets the goals in collision):

1. the DOFs that move no goal back to the solve's start (the core's restarts draw every DOF, and a
   humanoid's legs drawn at random collide with its pelvis, its head or the table: 12 of the 33
   G1 answers in collision in benchmarks/collision_ik.py);
2. each limb in collision searched alone, ``LIMB_TRIES`` random starts;
3. until the deadline, draws: the shared and limb DOFs drawn uniformly (the base kept), one plain
   attempt of ``DRAW_ITERATIONS`` of the general core, then 1. and 2. (``DRAW_TRIES`` starts
   per limb) on its answer — a new waist for arms that cannot clear around the old one.

It applies to goals of the basic kinds (position, rotation, axis, aim; no posture), whose frames
depend only on the DOFs on their paths (:meth:`Limbs.of` returns None otherwise). The search
uses the robot's unit joint weights. Measured on benchmarks/collision_ik.py's G1 scene (both
hands and the pelvis held, a table, self-collision, 5 mm, 50 ms): 100 % of the 100 targets, 33 of
whose plain answers collide, 0.95-0.98 ms mean, 2.2x plain (the rows, then uniform retries of
waist and arms: 96 %, 4.2-4.7 ms; benchmarks/RESULTS.md, session 6).
"""
from __future__ import annotations

import math
import random
import time

import numpy as np

from ..kinematics.kernels import BALL, CH_PRE, FIXED, _frame_with_z
from ..solvers import lm as _lm
from .retry import ESCAPES, RETRY_ITERATIONS, ST_BEST_D, ST_ITERS, ST_TRIES
from .retry import _entry as _clear_entry
from .retry import _interpreted as _clear_interpreted

__all__ = ["LIMB_TRIES", "DRAW_TRIES", "DRAW_ITERATIONS", "Limbs"]

LIMB_TRIES = 2        # random starts per limb on the plain answer (after its escapes; 4: 3 % more CPU)
DRAW_TRIES = 1        # ... on a draw's answer (the next draw is as cheap)
DRAW_ITERATIONS = 40  # of a draw's one plain attempt (converging ones took 6-39 on G1)


class Limbs:
    """The split of one robot's DOFs by a goal structure's frames (see the module docstring),
    with each limb's masks of the check's pairs; cached per (robot, frames, check) by :meth:`of`."""

    def __init__(self, robot, nodes, check, lims, sampler):
        from .model import collision_model

        self.robot, self.check = robot, check
        paths = [set(int(c) for c in robot.dofs_of(int(n))) for n in nodes]
        shared = set(int(c) for c in robot.base_dofs)
        for i in range(len(paths)):
            for j in range(i + 1, len(paths)):
                shared |= paths[i] & paths[j]
        moving = set().union(*paths)
        self.idle = np.array(sorted(set(range(robot.dof)) - moving), dtype=np.int64)  # moves no goal
        self.drawn = np.array(sorted(moving - set(int(c) for c in robot.base_dofs)), dtype=np.int64)
        links = collision_model(robot).links
        self.limbs = []
        self._chains = {}  # node -> (its chain program, the row of its limb's first joint, that joint's axis frame)
        for n, path in zip(nodes, paths):
            own = sorted(path - shared)
            if not own:
                continue
            path_nodes = robot.ancestors(int(n))[::-1]  # root first
            first = next(i for i in path_nodes if int(robot.qidx[i]) in set(own))
            moved = np.array([bool(set(int(c) for c in robot.dofs_of(int(ell))) & set(own)) for ell in links],
                             dtype=np.bool_)  # (a robot without collision shapes: empty, still bool)
            ms = check.moving_self & np.array([moved[a] or moved[b] for a, b in check.pair_links], dtype=np.bool_)
            ml = check.moving_link & moved
            self.limbs.append((int(n), np.array(own, dtype=np.int64), int(first), ms, ml))
            ch = robot.chain_program(int(n))
            # the row of ``first``: one per moving node on the path before it (kernels.chain_program)
            s = sum(1 for i in path_nodes[:path_nodes.index(first)]
                    if int(robot.joint_type[i]) != FIXED and int(robot.qidx[i]) >= 0)
            P = np.eye(4)
            if int(robot.joint_type[first]) != BALL:
                P[:3, :3] = _frame_with_z(robot.axis[first])
            self._chains[int(n)] = (ch, s, P)
        self.lims, self.buf = lims[0], np.empty(lims[2])
        self.lo, self.span = sampler[0][self.drawn], sampler[1][self.drawn]

    @classmethod
    def of(cls, problem, check, lims, sampler):
        """The Limbs of ``problem``'s goal frames on ``check``'s pairs, or None when its goals
        are not all of the basic kinds, it has a posture term, or no frame has a limb. ``lims``:
        the robot's chain LM tables (lims, free, scratch size; solve._lm_tables), ``sampler``:
        its restart box (lo, span; solve._sampler)."""
        if problem.w_posture != 0.0 or not problem.basic_kinds_only():
            return None
        robot = problem.robot
        nodes = tuple(sorted(set(int(n) for n in problem.gnode.tolist())))
        if not nodes or nodes[0] < 0:
            return None
        memo = robot.cache.setdefault("collision_limbs", {})
        key = (nodes, id(check))
        limbs = memo.get(key)
        if limbs is None or limbs.check is not check:
            if len(memo) >= 16:
                memo.clear()
            limbs = memo[key] = cls(robot, nodes, check, lims, sampler)
        return limbs if limbs.limbs else None

    def find_clear(self, problem, q_first, q_start, clock, max_iterations, seed, solve_plain):
        """A configuration that meets the goals with every checked pair at least ``margin``
        apart, from the plain answer ``q_first`` (None: it did not meet them; the draws only),
        or None once the draws reach the deadline of ``clock`` (an invkin._compile_clock.Budget:
        a first call's compile moves it; None: no clock) or ``max_iterations``. The DOFs that
        move no goal are set to ``q_start``'s. ``solve_plain(start, max_iterations, seed)`` runs
        one plain attempt of the general core and returns its Result. Returns (q or None,
        iterations, plain solves)."""
        stats = [0, 0]
        check = self.check
        if q_first is not None:
            q = self._tidy(q_first, q_start)
            if check.clear(q):
                return q, 0, 0
            q = self.clear_limbs(problem, q, seed, LIMB_TRIES, stats)
            if q is not None:
                return q, stats[0], stats[1]
        rnd = random.Random(seed)
        base = q_start if q_first is None else q_first
        lo, span = self.lo, self.span
        while stats[0] < max_iterations:
            if clock.deadline is not None:
                clock.update()
                if time.perf_counter() >= clock.deadline:
                    break
            start = base.copy()
            start[self.drawn] = lo + span * np.array([rnd.random() for _ in range(self.drawn.shape[0])])
            r = solve_plain(start, min(DRAW_ITERATIONS, max_iterations - stats[0]), rnd.randrange(1 << 31))
            stats[0] += r.iterations
            stats[1] += 1
            if not r.success:
                continue
            q = self._tidy(r.q, q_start)
            if check.clear(q):
                return q, stats[0], stats[1]
            q = self.clear_limbs(problem, q, rnd.randrange(1 << 31), DRAW_TRIES, stats)
            if q is not None:
                return q, stats[0], stats[1]
        return None, stats[0], stats[1]

    def clear_limbs(self, problem, q, seed, tries, stats):
        """q (meeting the goals) with each limb in collision searched alone for a clear
        configuration of its own DOFs (retry.clear_attempts on its sub-chain: escapes, then
        ``tries`` random starts); the clear q, or None when a limb stays in collision or a pair
        no limb moves does. Adds the iterations and plain solves to stats."""
        check = self.check
        stop = check.margin - 1e-9
        for n, own, first, ms, ml in self.limbs:
            if check.closest_among(q, ms, ml, stop)[0] >= stop:
                continue
            rows = np.nonzero(problem.gnode == n)[0]
            table = (problem.gkind[rows], problem.gvec[rows], problem.gR[rows], problem.gaxis[rows], problem.gw[rows])
            ok, q, st = self._clear_limb(problem, n, own, first, ms, ml, table, q, seed, tries)
            stats[0] += int(st[ST_ITERS])
            stats[1] += int(st[ST_TRIES])
            if not ok:
                return None
        return q if check.clear(q) else None

    def _clear_limb(self, problem, node, own, first, ms, ml, table, q, seed, tries):
        """retry.clear_attempts on the limb's sub-chain and lims (every other DOF held at q)."""
        check = self.check
        robot = self.robot
        ch = self.sub_chain(node, first, q)
        lims = self.lims.copy()
        held = np.ones(robot.dof, dtype=np.bool_)
        held[own] = False
        for row in (_lm.L_LOWER, _lm.L_UPPER, _lm.L_SAMPLE_LO):
            lims[row, held] = q[held]
        lims[_lm.L_SAMPLE_SPAN, held] = 0.0
        lims.setflags(write=False)  # (the types of the one-frame route's call: one compiled kernel)
        a = check._args
        q_out = q.copy()
        stats = np.zeros(9)
        stats[ST_BEST_D] = -math.inf
        at = _lm.ATTEMPT_ITERATIONS
        args = [ch, lims, *table, problem.tol_p, problem.tol_r, 0.0, self.buf, RETRY_ITERATIONS, at, 2**62, at,
                a[0], a[1], a[2], a[4], check.held, a[6], ms, ml, a[9], q.copy(), seed & 0x7FFFFFFF, 0, tries + 1,
                ESCAPES, 0, q_out, stats]
        ep = _clear_entry(check, "limb", args)
        found = ep(*args) if ep is not None else _clear_interpreted(args)
        return bool(found), (q_out if found else q), stats

    def sub_chain(self, node, first, q):
        """The chain program of ``node`` from the joint ``first`` on: the rows of the robot's
        chain program from ``first``'s, the first one's fixed transform replaced by its world
        placement at q, ``T_world_parent(q) @ origin[first] @ P`` (P: the row's axis frame, as
        kernels.chain_program builds it), so that the shared DOFs' motion is folded in."""
        r = self.robot
        ch, s, P = self._chains[node]
        out = ch[s:].copy()
        pre = r.fk_all_array(q)[int(r.parent[first])] @ r.origin[first] @ P
        out[0, CH_PRE:] = pre[:3].ravel()
        out.setflags(write=False)
        return out

    def _tidy(self, q, q_start):
        q = q.copy()
        q[self.idle] = q_start[self.idle]
        return q
