"""What every solver shares: the compiled problem, the task residual/Jacobian kernel, small
linear algebra, and the manifold step with joint-limit clamping.

The goal table (one row per position or rotation goal) is what kernels read:

* ``gnode`` (G,) node index; ``gkind`` (G,) one of the ``KIND_*`` codes of :mod:`invkin.goals`;
* ``gvec`` (G, 3): target point (position, aim) or goal direction (axis);
* ``gR`` (G, 3, 3): target rotation (rotation); ``gaxis`` (G, 3): local axis (axis, aim);
* ``gw`` (G,): weight.

The stacked residual has 3 rows per goal: ``e[3g:3g+3]`` and ``J[3g:3g+3]`` (see goals.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from ..errors import FrameError, GoalError
from ..goals import KIND_AIM, KIND_AXIS, KIND_COM, KIND_POSITION, KIND_REL_POSITION, KIND_ROTATION, \
    BASIC_KINDS, KINDS, METRE_KINDS, Goal, Posture, relative_weights
from ..kinematics.kernels import BALL, NO_RC, fk_all_into, integrate_into, jacobian_from_all
from ..spatial import so3_log_s
from ..kinematics.kernels import difference_into as posture_residual  # noqa: F401 - re-exported: q_rest ⊖ q

# kernel return codes
RUNNING = 0
CONVERGED = 1
STALLED = 2


@dataclass
class Problem:
    """A solve compiled to arrays. ``args`` is the tuple every iteration kernel takes first."""

    robot: object
    goals: tuple
    gnode: np.ndarray
    gkind: np.ndarray
    gvec: np.ndarray
    gR: np.ndarray
    gaxis: np.ndarray
    gw: np.ndarray
    q_rest: np.ndarray
    w_posture: float
    joint_weights: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    balls: np.ndarray
    tol_p: float
    tol_r: float
    scratch: dict = field(default_factory=dict)  # per-solve caches of a method
    glevel: np.ndarray | None = None  # (G,) 0 = hard row, 1 = soft row
    gref: np.ndarray | None = None    # (G,) reference node of a relative row, else -1
    goal_rows: tuple = ()             # rows of each goal in order (Posture left out)
    #: the layout shared by every problem of this robot with the same goal structures (Layout), or
    #: None: then it is derived from gnode, gkind, glevel (a problem built or changed by hand)
    layout: object = None

    @property
    def dof(self) -> int:
        return self.robot.dof

    def __post_init__(self):
        r = self.robot
        self.args = (r.node_table, r.node_params, r.origin, self.lower, self.upper, self.balls, self.gnode, self.gkind,
                self.gvec, self.gR, self.gaxis, self.gw, self.q_rest, self.w_posture, self.joint_weights,
                self.tol_p, self.tol_r)
        if self.layout is None and self.glevel is not None:
            self.layout = Layout(self.gnode, self.gkind, self.glevel, self.gref, self.goal_rows)

    @property
    def goal_frames(self) -> list:
        return [self.robot.node_names[int(n)] for n in self.gnode]

    def is_position_only(self) -> bool:
        return bool(np.all(self.gkind == KIND_POSITION))

    @property
    def has_hard(self) -> bool:
        return self.layout.has_hard

    def basic_kinds_only(self) -> bool:
        """True when every row is of a kind task_eval (the methods other than lm) knows."""
        return self.layout.basic


class Layout:
    """What a compiled problem's solve needs besides its targets and weights, derived once per
    robot and goal structure (Goal.structure) and shared by every problem with that structure:
    the rows' nodes, kinds, levels and reference nodes, rows per goal, the soft and hard residual
    rows (the general LM core's split), the one node every row is on (or -1), whether any row is
    hard, whether every kind is basic, which rows are measured in metres. Its arrays are never
    written (problems with this layout share them)."""

    __slots__ = ("gnode", "gkind", "glevel", "gref", "goal_rows", "soft", "hard", "one_node", "has_hard", "basic",
                 "metres", "metres_list", "mixed", "restart_lims")

    def __init__(self, gnode, gkind, glevel, gref, goal_rows):
        if not _KIND_CODES.issuperset(gkind.tolist()):  # (a problem built by hand; compile_problem checked its own)
            raise GoalError(f"goal row kinds {sorted(set(gkind.tolist()) - _KIND_CODES)} are not among "
                            f"{sorted(KINDS)} (goals.KINDS: the kinds the kernels know)")
        self.gnode, self.gkind, self.glevel, self.gref, self.goal_rows = gnode, gkind, glevel, gref, goal_rows
        rows = np.repeat(glevel, 3)
        idx = np.arange(rows.shape[0], dtype=np.int64)
        self.soft, self.hard = idx[rows != 0], idx[rows == 0]
        G = gnode.shape[0]
        self.one_node = int(gnode[0]) if G and bool(np.all(gnode == gnode[0])) else -1
        self.has_hard = bool(np.any(glevel == 0))
        self.mixed = self.has_hard and not bool(np.all(glevel == 0))  # hard and soft rows
        self.basic = bool(np.all(np.isin(gkind, BASIC_KINDS)))
        self.metres = np.isin(gkind, METRE_KINDS)
        self.metres_list = self.metres.tolist()
        self.restart_lims = None  # solve._restart_lims' cache: (base per-DOF table, the table restarts use)


_KIND_CODES = frozenset(KINDS)
LAYOUTS_KEPT = 64  # layouts cached per robot (a new goal structure beyond them clears the cache)


def compile_problem(robot, goals, position_tolerance: float, rotation_tolerance: float,
                    joint_weights=None) -> Problem:
    """Validate goals against the robot and build the goal table.

    The table's layout (nodes, kinds, levels, the soft/hard split: Layout) depends only on the
    goals' structures (Goal.structure), so it is built once per robot and structure and kept in
    ``robot.cache["layouts"]``; a later problem with the same structures only gathers its goals'
    target and weight columns (about 4 µs for four goals instead of 11 µs)."""
    if type(goals) is list or type(goals) is tuple:
        p = _compile_known(robot, goals, position_tolerance, rotation_tolerance, joint_weights)
        if p is not None:
            return p
    p = _compile(robot, goals, position_tolerance, rotation_tolerance, joint_weights)
    if type(goals) is list or type(goals) is tuple:
        layouts = robot.cache.setdefault("layouts", {})
        if len(layouts) >= LAYOUTS_KEPT:
            layouts.clear()
        layouts[tuple(g.structure() for g in goals)] = p.layout
    return p


def _compile_known(robot, goals, tol_p, tol_r, joint_weights):
    """compile_problem for goals whose structures have a cached Layout; None otherwise (the full
    compile then validates and builds it)."""
    layouts = robot.cache.get("layouts")
    if layouts is None or joint_weights is not None or not (type(tol_p) is float and 0.0 < tol_p < math.inf
                                                            and type(tol_r) is float and 0.0 < tol_r < math.inf):
        return None
    try:
        layout = layouts.get(tuple(g.structure() for g in goals))
    except (AttributeError, TypeError):  # not a goal (a goal class, say): the full compile names it
        return None
    if layout is None:
        return None
    q_rest = robot.q_neutral
    w_post = 0.0
    tables = []
    wmax = 0.0
    for g in goals:
        if isinstance(g, Posture):
            if g.q_rest.shape != (robot.dof,):
                return None
            q_rest, w_post = g.q_rest, g.weight
        else:
            tables.append(g.table())
            r = g._lean
            w = (r if r is not None else g.lean())[2]
            if w > wmax:
                wmax = w
    if not tables:
        return None
    if len(tables) == 1:  # copies: the goal's cached table stays its own
        gvec, gR, gaxis, gw = (a.copy() for a in tables[0][1:])
    else:
        gvec, gR, gaxis, gw = (np.concatenate([t[i] for t in tables]) for i in range(1, 5))
    relative_weights(gw, layout.glevel, wmax)
    return Problem(robot, goals, layout.gnode, layout.gkind, gvec, gR, gaxis, gw, q_rest.copy(), float(w_post),
                   robot.unit_weights,
                   robot.lower, robot.upper, robot.ball_starts, tol_p, tol_r, glevel=layout.glevel, gref=layout.gref,
                   goal_rows=layout.goal_rows, layout=layout)


def _compile(robot, goals, position_tolerance, rotation_tolerance, joint_weights):
    """compile_problem in full: every goal validated against the robot."""
    if isinstance(goals, Goal):
        goals = (goals,)
    elif not isinstance(goals, (list, tuple)):
        try:
            goals = tuple(goals)
        except TypeError:
            raise GoalError(f"goals: expected a goal or a list of goals, got {goals!r}") from None
    tables = []   # each goal's cached row arrays (Goal.table), concatenated below
    kinds = []    # each row's kind, from Goal.rows (checked above): never from a table that could disagree
    nodes = []
    refs = []
    levels = []
    counts = []   # rows per goal (Posture left out): Result.goals_met
    q_rest = robot.q_neutral
    w_post = 0.0
    posture = None
    for g in goals:
        if not isinstance(g, Goal):
            raise GoalError(f"goals: expected Position/Orientation/Pose/Aim/CenterOfMass/Relative/Plane/Posture "
                            f"objects, got {g!r}")
        if isinstance(g, Posture):
            if g.q_rest.shape != (robot.dof,):
                raise GoalError(f"Posture.q_rest: expected shape ({robot.dof},), got {g.q_rest.shape}")
            if posture is not None:  # (the last one was used and the others dropped without a word)
                raise GoalError(f"goals: expected at most one Posture, got two ({posture!r:.80}, {g!r:.80}); "
                                f"one rest configuration is the regulariser (Posture.q_rest, (dof,))")
            posture = g
            q_rest = g.q_rest
            w_post = g.weight
            continue
        rows = g.rows()
        if rows and rows[0][0] == KIND_COM and not robot.link_mass.sum() > 0:
            raise GoalError(f"CenterOfMass: robot {robot.name!r} has no link masses (its model has no "
                            f"<inertial> mass); expected a model with inertials")
        level = g.level
        for r in rows:
            k = r[0]
            # goals.py makes rows of KINDS only; a subclass or a hand-made Goal might not (an int
            # code of KINDS, not True or 1.0, which compare equal to one)
            if type(k) is bool or not isinstance(k, (int, np.integer)) or k not in KINDS:
                raise GoalError(f"{type(g).__name__}: goal row kind {k!r} is not one of {sorted(KINDS)} "
                                f"(goals.KINDS: the kinds the kernels know)")
            kinds.append(int(k))
            nodes.append(0 if r[1] is None else _node(robot, r[1]))
            refs.append(-1 if len(r) < 7 or r[6] is None else _node(robot, r[6]))
            if refs[-1] == nodes[-1]:  # (Relative refuses equal names; a name and an index may still meet)
                from ..goals import _same_frame
                raise GoalError(_same_frame(robot.node_names[nodes[-1]]))
            levels.append(level)
        counts.append(len(rows))
        tables.append(g.table())
    if not tables and w_post == 0.0:
        raise GoalError("goals: expected at least one goal, got none")
    G = len(nodes)
    gnode = np.array(nodes, dtype=np.int64)
    gref = np.array(refs, dtype=np.int64)
    glevel = np.array(levels, dtype=np.int64)
    gkind = np.array(kinds, dtype=np.int64)  # (the rows' kinds: a table's kind column is not read here)
    if len(tables) == 1:  # copies: the goal's cached table stays its own (a copy costs a quarter of a concatenate)
        gvec, gR, gaxis, gw = (a.copy() for a in tables[0][1:])
    elif tables:
        gvec, gR, gaxis, gw = (np.concatenate([t[i] for t in tables]) for i in range(1, 5))
    else:
        gvec, gR, gaxis, gw = np.empty((G, 3)), np.empty((G, 3, 3)), np.empty((G, 3)), np.empty(G)
    if gvec.shape[0] != G:
        raise GoalError(f"goals: their tables (Goal.table) hold {gvec.shape[0]} rows where their rows "
                        f"(Goal.rows) are {G}")
    soft = glevel != 0
    relative_weights(gw, glevel, float(gw[soft].max()) if soft.any() else 0.0)
    for nm, v in (("position_tolerance", position_tolerance), ("rotation_tolerance", rotation_tolerance)):
        if not isinstance(v, (int, float, np.floating, np.integer)) or not v > 0 or not math.isfinite(v):
            raise GoalError(f"{nm}: expected a finite number > 0, got {v!r}")
    if joint_weights is None:
        jw = robot.unit_weights
    else:
        try:
            jw = np.array(joint_weights, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            raise GoalError(f"joint_weights: expected {robot.dof} finite numbers > 0, got {joint_weights!r:.200}") from None
        if jw.shape != (robot.dof,) or not np.all(np.isfinite(jw)) or np.any(jw <= 0):
            raise GoalError(f"joint_weights: expected {robot.dof} finite numbers > 0, got {joint_weights!r}")
    # q_rest is a writable copy: kernels compare it with other writable configurations (gauss-seidel's
    # springs), and Numba compiles a callee once per read-only/writable mix of its arguments
    return Problem(robot, goals, gnode, gkind, gvec, gR, gaxis, gw, q_rest.copy(), float(w_post), jw, robot.lower,
                   robot.upper, robot.ball_starts, float(position_tolerance), float(rotation_tolerance),
                   glevel=glevel, gref=gref, goal_rows=tuple(counts))


def _node(robot, frame) -> int:
    try:
        return robot.frame_index(frame)
    except FrameError as exc:
        raise FrameError(f"goal on frame {frame!r}: {exc}") from None


# --------------------------------------------------------------------------- kernels


@njit(cache=True, **NO_RC)
def _angle_between(a0, a1, a2, b0, b1, b2):
    cx = a1 * b2 - a2 * b1
    cy = a2 * b0 - a0 * b2
    cz = a0 * b1 - a1 * b0
    s = math.sqrt(cx * cx + cy * cy + cz * cz)
    c = a0 * b0 + a1 * b1 + a2 * b2
    return math.atan2(s, c), cx, cy, cz, s


@njit(cache=True, **NO_RC)
def _log_relative(gR, g, T):
    """Rotation vector of R* R^T (R* = gR[g], R = T[:3, :3]) and (theta, sin theta, cos theta)."""
    m00 = gR[g, 0, 0] * T[0, 0] + gR[g, 0, 1] * T[0, 1] + gR[g, 0, 2] * T[0, 2]
    m01 = gR[g, 0, 0] * T[1, 0] + gR[g, 0, 1] * T[1, 1] + gR[g, 0, 2] * T[1, 2]
    m02 = gR[g, 0, 0] * T[2, 0] + gR[g, 0, 1] * T[2, 1] + gR[g, 0, 2] * T[2, 2]
    m10 = gR[g, 1, 0] * T[0, 0] + gR[g, 1, 1] * T[0, 1] + gR[g, 1, 2] * T[0, 2]
    m11 = gR[g, 1, 0] * T[1, 0] + gR[g, 1, 1] * T[1, 1] + gR[g, 1, 2] * T[1, 2]
    m12 = gR[g, 1, 0] * T[2, 0] + gR[g, 1, 1] * T[2, 1] + gR[g, 1, 2] * T[2, 2]
    m20 = gR[g, 2, 0] * T[0, 0] + gR[g, 2, 1] * T[0, 1] + gR[g, 2, 2] * T[0, 2]
    m21 = gR[g, 2, 0] * T[1, 0] + gR[g, 2, 1] * T[1, 1] + gR[g, 2, 2] * T[1, 2]
    m22 = gR[g, 2, 0] * T[2, 0] + gR[g, 2, 1] * T[2, 1] + gR[g, 2, 2] * T[2, 2]
    sx = 0.5 * (m21 - m12)
    sy = 0.5 * (m02 - m20)
    sz = 0.5 * (m10 - m01)
    sn = math.sqrt(sx * sx + sy * sy + sz * sz)
    c = 0.5 * (m00 + m11 + m22 - 1.0)
    th = math.atan2(sn, c)
    if c > -0.99:
        k = 1.0 + th * th / 6.0 if sn < 1e-12 else th / sn
        return k * sx, k * sy, k * sz, th, sn, c
    # near pi: the axis from the symmetric part (see spatial.so3_log_nb)
    r0, r1, r2 = so3_log_s(m00, m01, m02, m10, m11, m12, m20, m21, m22)
    return r0, r1, r2, th, sn, c


_BETA_PI = 1.0 / (math.pi - 1e-3) ** 2 - (1.0 + math.cos(math.pi - 1e-3)) / (
    2.0 * (math.pi - 1e-3) * math.sin(math.pi - 1e-3))


@njit(cache=True, **NO_RC)
def _jr_inv_beta(err, sn, cs):
    """beta of Jr^-1(phi) = I + [phi]x / 2 + beta [phi]x^2 for |phi| = err, sin err = sn, cos err = cs."""
    if err < 1e-4:
        return 1.0 / 12.0 + err * err / 720.0
    if err < math.pi - 1e-3:
        return 1.0 / (err * err) - (1.0 + cs) / (2.0 * err * sn)
    return _BETA_PI  # the Jacobian is unbounded at pi: keep its value just below


@njit(cache=True, **NO_RC)
def rotation_rows(J, r0, w, p0, p1, p2, beta, Jf):
    """The Jacobian rows r0..r0+2 of a rotation goal with residual phi = log(R* R^T) = (p0, p1, p2)
    and weight w: d/dt log(R* R^T) = -Jr^-1(phi) omega, Jr^-1 = I + [phi]x / 2 + beta [phi]x^2
    (beta from _jr_inv_beta), so J = M Jf[3:6] with M = w (I + [phi]x / 2 + beta (phi phi^T -
    |phi|^2 I)); Jf[3:6] is the frame's angular Jacobian."""
    bp2 = beta * (p0 * p0 + p1 * p1 + p2 * p2)
    m00 = w * (1.0 + beta * p0 * p0 - bp2)
    m11 = w * (1.0 + beta * p1 * p1 - bp2)
    m22 = w * (1.0 + beta * p2 * p2 - bp2)
    m01 = w * (beta * p0 * p1 - 0.5 * p2)
    m10 = w * (beta * p0 * p1 + 0.5 * p2)
    m02 = w * (beta * p0 * p2 + 0.5 * p1)
    m20 = w * (beta * p0 * p2 - 0.5 * p1)
    m12 = w * (beta * p1 * p2 - 0.5 * p0)
    m21 = w * (beta * p1 * p2 + 0.5 * p0)
    for c in range(J.shape[1]):
        wx = Jf[3, c]
        wy = Jf[4, c]
        wz = Jf[5, c]
        J[r0, c] = m00 * wx + m01 * wy + m02 * wz
        J[r0 + 1, c] = m10 * wx + m11 * wy + m12 * wz
        J[r0 + 2, c] = m20 * wx + m21 * wy + m22 * wz


@njit(cache=True, inline="always", **NO_RC)
def goal_row(T, Jf, g, kind, gvec, gR, gaxis, gw, e, J, want_jac):
    """Residual rows ``e[3g:3g+3]`` (and, with want_jac, ``J[3g:3g+3]`` from the frame Jacobian
    ``Jf`` (6, dof)) of goal row g, of the frame kind ``kind`` (position, rotation, axis or aim),
    for the frame transform ``T``; returns (kind class, error): class 0 = position error [m],
    1 = rotation error [rad]. See task_eval for the definitions."""
    w = gw[g]
    r0 = 3 * g
    dof = J.shape[1]
    if kind == 0:  # position
        ex = gvec[g, 0] - T[0, 3]
        ey = gvec[g, 1] - T[1, 3]
        ez = gvec[g, 2] - T[2, 3]
        e[r0] = w * ex
        e[r0 + 1] = w * ey
        e[r0 + 2] = w * ez
        if want_jac:
            for c in range(dof):
                J[r0, c] = w * Jf[0, c]
                J[r0 + 1, c] = w * Jf[1, c]
                J[r0 + 2, c] = w * Jf[2, c]
        return 0, math.sqrt(ex * ex + ey * ey + ez * ez)
    if kind == 1:  # full rotation: phi = log(R* R^T)
        p0, p1, p2, err, sn, cs = _log_relative(gR, g, T)
        e[r0] = w * p0
        e[r0 + 1] = w * p1
        e[r0 + 2] = w * p2
        if want_jac:
            rotation_rows(J, r0, w, p0, p1, p2, _jr_inv_beta(err, sn, cs), Jf)
        return 1, err
    # axis (kind 2) or aim (kind 3): residual r = a x d, e = -r
    ga0 = gaxis[g, 0]
    ga1 = gaxis[g, 1]
    ga2 = gaxis[g, 2]
    a0 = T[0, 0] * ga0 + T[0, 1] * ga1 + T[0, 2] * ga2
    a1 = T[1, 0] * ga0 + T[1, 1] * ga1 + T[1, 2] * ga2
    a2 = T[2, 0] * ga0 + T[2, 1] * ga1 + T[2, 2] * ga2
    L = 1.0
    if kind == 2:
        d0 = gvec[g, 0]
        d1 = gvec[g, 1]
        d2 = gvec[g, 2]
    else:
        d0 = gvec[g, 0] - T[0, 3]
        d1 = gvec[g, 1] - T[1, 3]
        d2 = gvec[g, 2] - T[2, 3]
        L = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        if L < 1e-12:
            L = 1e-12
            d0 = a0
            d1 = a1
            d2 = a2
        else:
            d0 /= L
            d1 /= L
            d2 /= L
    err, cx, cy, cz, sn = _angle_between(a0, a1, a2, d0, d1, d2)
    e[r0] = -w * cx
    e[r0 + 1] = -w * cy
    e[r0 + 2] = -w * cz
    if want_jac:
        for c in range(dof):
            wx = Jf[3, c]
            wy = Jf[4, c]
            wz = Jf[5, c]
            tx = a1 * wz - a2 * wy  # a x w
            ty = a2 * wx - a0 * wz
            tz = a0 * wy - a1 * wx
            jx = d1 * tz - d2 * ty  # d x (a x w)
            jy = d2 * tx - d0 * tz
            jz = d0 * ty - d1 * tx
            if kind == 3:
                vx = Jf[0, c] / L
                vy = Jf[1, c] / L
                vz = Jf[2, c] / L
                dv = d0 * vx + d1 * vy + d2 * vz
                vx -= d0 * dv
                vy -= d1 * dv
                vz -= d2 * dv
                jx -= a1 * vz - a2 * vy
                jy -= a2 * vx - a0 * vz
                jz -= a0 * vy - a1 * vx
            J[r0, c] = w * jx
            J[r0 + 1, c] = w * jy
            J[r0 + 2, c] = w * jz
    return 1, err


@njit(cache=True, **NO_RC)
def goal_row_call(T, Jf, g, kind, gvec, gR, gaxis, gw, e, J, want_jac):
    """goal_row as a call (not inlined): for callers that inline their common rows themselves
    and leave the rare kinds (axis, aim) to it."""
    return goal_row(T, Jf, g, kind, gvec, gR, gaxis, gw, e, J, want_jac)


@njit(cache=True, **NO_RC)
def com_row(ni, nf, Tall, mass, com, sub, g, gvec, gaxis, gw, e, J, want_jac):
    """Centre-of-mass rows (KIND_COM) of goal row g: ``c = Σ m_i x_i / M`` with ``x_i = T_i c_i``;
    ``e = w S (p* - c)`` (S = diag(gaxis[g]), the selected world axes) and, with want_jac,
    ``J = w S Jc``: the column of joint k (node i, world axis a at o) is ``m_sub (a x (c_sub - o)) / M``
    (revolute; prismatic ``m_sub a / M``; ball: the three frame columns as revolute axes), with
    ``m_sub``, ``c_sub`` the mass and centre of the subtree below i (one backward pass, ``sub``
    (n, 4) scratch). Returns the position error [m] along the selected axes."""
    n = ni.shape[0]
    for i in range(n):
        m = mass[i]
        T = Tall[i]
        sub[i, 0] = m
        for a in range(3):
            sub[i, 1 + a] = m * (T[a, 0] * com[i, 0] + T[a, 1] * com[i, 1] + T[a, 2] * com[i, 2] + T[a, 3])
    for i in range(n - 1, 0, -1):  # parents precede children: accumulate subtrees into parents
        p = ni[i, 0]
        if p >= 0:
            for a in range(4):
                sub[p, a] += sub[i, a]
    M = 0.0
    cx = 0.0
    cy = 0.0
    cz = 0.0
    for i in range(n):
        if ni[i, 0] < 0:  # roots hold their whole tree
            M += sub[i, 0]
            cx += sub[i, 1]
            cy += sub[i, 2]
            cz += sub[i, 3]
    cx /= M
    cy /= M
    cz /= M
    w = gw[g]
    r0 = 3 * g
    sx = gaxis[g, 0]
    sy = gaxis[g, 1]
    sz = gaxis[g, 2]
    ex = sx * (gvec[g, 0] - cx)
    ey = sy * (gvec[g, 1] - cy)
    ez = sz * (gvec[g, 2] - cz)
    e[r0] = w * ex
    e[r0 + 1] = w * ey
    e[r0 + 2] = w * ez
    if want_jac:
        dof = J.shape[1]
        for c in range(dof):
            J[r0, c] = 0.0
            J[r0 + 1, c] = 0.0
            J[r0 + 2, c] = 0.0
        for i in range(n):
            jt = ni[i, 1]
            ms = sub[i, 0]
            if jt == 0 or ms == 0.0:
                continue
            c = ni[i, 2]
            Tw = Tall[i]
            dx = sub[i, 1] - ms * Tw[0, 3]  # m_sub (c_sub - o)
            dy = sub[i, 2] - ms * Tw[1, 3]
            dz = sub[i, 3] - ms * Tw[2, 3]
            for k in range(3 if jt == BALL else 1):
                if jt == BALL:
                    ax = Tw[0, k]
                    ay = Tw[1, k]
                    az = Tw[2, k]
                    f = w / M
                else:
                    a0 = nf[i, 0]
                    a1 = nf[i, 1]
                    a2 = nf[i, 2]
                    ax = Tw[0, 0] * a0 + Tw[0, 1] * a1 + Tw[0, 2] * a2
                    ay = Tw[1, 0] * a0 + Tw[1, 1] * a1 + Tw[1, 2] * a2
                    az = Tw[2, 0] * a0 + Tw[2, 1] * a1 + Tw[2, 2] * a2
                    f = w * nf[i, 3] / M
                if jt == 2:  # prismatic
                    vx = ax * ms
                    vy = ay * ms
                    vz = az * ms
                else:
                    vx = ay * dz - az * dy
                    vy = az * dx - ax * dz
                    vz = ax * dy - ay * dx
                J[r0, c + k] += f * sx * vx
                J[r0 + 1, c + k] += f * sy * vy
                J[r0 + 2, c + k] += f * sz * vz
    return math.sqrt(ex * ex + ey * ey + ez * ez)


@njit(cache=True, **NO_RC)
def plane_row(T, Jf, g, gvec, gaxis, gw, e, J, want_jac):
    """The plane row (KIND_PLANE) g for the frame transform ``T``: with the unit normal n
    (gaxis[g]) and a point p0 of the plane (gvec[g]), ``e[3g] = w n·(p0 - p)`` and, with want_jac,
    ``J[3g] = w nᵀ Jv`` from the frame Jacobian ``Jf`` (6, dof); the row's other two entries and
    their Jacobian rows are 0. Returns the distance to the plane [m]."""
    w = gw[g]
    r0 = 3 * g
    n0 = gaxis[g, 0]
    n1 = gaxis[g, 1]
    n2 = gaxis[g, 2]
    d = n0 * (gvec[g, 0] - T[0, 3]) + n1 * (gvec[g, 1] - T[1, 3]) + n2 * (gvec[g, 2] - T[2, 3])
    e[r0] = w * d
    e[r0 + 1] = 0.0
    e[r0 + 2] = 0.0
    if want_jac:
        for c in range(J.shape[1]):
            J[r0, c] = w * (n0 * Jf[0, c] + n1 * Jf[1, c] + n2 * Jf[2, c])
            J[r0 + 1, c] = 0.0
            J[r0 + 2, c] = 0.0
    return abs(d)


@njit(cache=True, **NO_RC)
def relative_frame(kind, g, Tref, T, gvec, gR, wvec, wR, Jf, Jr, want_jac):
    """Turn the relative row g (KIND_REL_POSITION / KIND_REL_ROTATION) into a world row: its world
    target (wvec[g] = p_ref + R_ref t, or wR[g] = R_ref R_t) and, with want_jac, the frame
    Jacobian Jf (6, dof) of ``T`` turned in place into the row's effective one, given the
    reference frame's Jacobian Jr: position ``Jv - Jv_ref + [R_ref t]x Jw_ref``; rotation
    ``Jw - R R*^T Jw_ref`` (goals.py). Returns the world kind (position or rotation) for goal_row."""
    dof = Jf.shape[1]
    if kind == KIND_REL_POSITION:
        a0 = Tref[0, 0] * gvec[g, 0] + Tref[0, 1] * gvec[g, 1] + Tref[0, 2] * gvec[g, 2]
        a1 = Tref[1, 0] * gvec[g, 0] + Tref[1, 1] * gvec[g, 1] + Tref[1, 2] * gvec[g, 2]
        a2 = Tref[2, 0] * gvec[g, 0] + Tref[2, 1] * gvec[g, 1] + Tref[2, 2] * gvec[g, 2]
        wvec[g, 0] = Tref[0, 3] + a0
        wvec[g, 1] = Tref[1, 3] + a1
        wvec[g, 2] = Tref[2, 3] + a2
        if want_jac:
            for c in range(dof):
                wx = Jr[3, c]
                wy = Jr[4, c]
                wz = Jr[5, c]
                Jf[0, c] += -Jr[0, c] + a1 * wz - a2 * wy
                Jf[1, c] += -Jr[1, c] + a2 * wx - a0 * wz
                Jf[2, c] += -Jr[2, c] + a0 * wy - a1 * wx
        return KIND_POSITION
    for i in range(3):
        for j in range(3):
            wR[g, i, j] = Tref[i, 0] * gR[g, 0, j] + Tref[i, 1] * gR[g, 1, j] + Tref[i, 2] * gR[g, 2, j]
    if want_jac:
        for i in range(3):  # row i of M^T = R R*^T
            m0 = T[i, 0] * wR[g, 0, 0] + T[i, 1] * wR[g, 0, 1] + T[i, 2] * wR[g, 0, 2]
            m1 = T[i, 0] * wR[g, 1, 0] + T[i, 1] * wR[g, 1, 1] + T[i, 2] * wR[g, 1, 2]
            m2 = T[i, 0] * wR[g, 2, 0] + T[i, 1] * wR[g, 2, 1] + T[i, 2] * wR[g, 2, 2]
            for c in range(dof):
                Jf[3 + i, c] -= m0 * Jr[3, c] + m1 * Jr[4, c] + m2 * Jr[5, c]
    return KIND_ROTATION


@njit(cache=True)
def task_eval(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e, J, errs):
    """Stacked weighted residual ``e`` (3G,) and Jacobian ``J`` (3G, dof) at q; a ``J`` with no
    rows, (0, dof), asks for the residual and the errors only. The basic kinds only (goals.BASIC_KINDS:
    the methods other than lm refuse the others, solve._solve): goal_row reads any other code as an
    axis or aim row, so LM problems are measured by lm_core.problem_rows / problem_errors.

    errs[0] = largest position error [m], errs[1] = largest rotation error [rad] (unweighted,
    over goals with weight > 0). ``Tall`` (n, 4, 4) and ``Jf`` (6, dof) are scratch; ``errs``
    has room for 20 entries (kept for callers; only the first two are written).

    Whether to fill J is read from J's shape, not from a bool argument: kernels passing the
    literal True or False had Numba compile task_eval once per literal (about 1 s each).

    ``e`` is the change wanted (minus the residual r) and ``J = dr/dq`` exactly (finite-difference
    tested): position ``r = p - p*``, ``J = Jv``; rotation ``r = -log(R* R^T)``,
    ``J = Jr^-1(phi) Jw``; axis/aim ``r = a x d``, ``J = [d]x[a]x Jw - [a]x (I - d d^T) Jv / L``.
    """
    fk_all_into(ni, nf, origin, q, Tall)
    want_jac = J.shape[0] > 0
    G = gnode.shape[0]
    perr = 0.0
    rerr = 0.0
    for g in range(G):
        node = gnode[g]
        if want_jac and (g == 0 or gnode[g - 1] != node):  # a Pose's two rows share one Jacobian
            jacobian_from_all(ni, nf, Tall, node, Jf)
        cls, err = goal_row(Tall[node], Jf, g, gkind[g], gvec, gR, gaxis, gw, e, J, want_jac)
        if gw[g] > 0.0:
            if cls == 0:
                if err > perr:
                    perr = err
            elif err > rerr:
                rerr = err
    errs[0] = perr
    errs[1] = rerr


@njit(cache=True, inline="always", **NO_RC)
def ldl_factor(A, n):
    """A[:n, :n] = L D L^T in place (no square roots, one division per column; unit L below the
    diagonal, D on it). False if A is not positive definite."""
    for j in range(n):
        d = A[j, j]
        for k in range(j):
            d -= A[j, k] * A[j, k] * A[k, k]
        if not d > 0.0:
            return False
        A[j, j] = d
        inv = 1.0 / d
        for i in range(j + 1, n):
            t = A[i, j]
            for k in range(j):
                t -= A[i, k] * A[j, k] * A[k, k]
            A[i, j] = t * inv
    return True


@njit(cache=True, inline="always", **NO_RC)
def ldl_apply(A, n, b, x):
    """x = A^-1 b for the factor of ldl_factor (forward, diagonal, backward substitution)."""
    for i in range(n):
        t = b[i]
        for k in range(i):
            t -= A[i, k] * x[k]
        x[i] = t
    for i in range(n):
        x[i] /= A[i, i]
    for i in range(n - 1, -1, -1):
        t = x[i]
        for k in range(i + 1, n):
            t -= A[k, i] * x[k]
        x[i] = t


@njit(cache=True, inline="always", **NO_RC)
def ldl_solve(A, b, x):
    """Solve A x = b for symmetric positive definite A (n x n) by A = L D L^T (about half the time
    of chol_solve at n = 6); A is overwritten with the factor. Returns False if A is not positive
    definite."""
    n = A.shape[0]
    if not ldl_factor(A, n):
        return False
    ldl_apply(A, n, b, x)
    return True


@njit(cache=True, **NO_RC)
def chol_solve(A, b, x):
    """Solve A x = b for symmetric positive definite A (n x n) by Cholesky; A is overwritten.

    Returns False if A is not positive definite (x untouched)."""
    n = A.shape[0]
    for j in range(n):
        s = A[j, j]
        for k in range(j):
            s -= A[j, k] * A[j, k]
        if s <= 0.0:
            return False
        s = math.sqrt(s)
        A[j, j] = s
        for i in range(j + 1, n):
            t = A[i, j]
            for k in range(j):
                t -= A[i, k] * A[j, k]
            A[i, j] = t / s
    for i in range(n):
        t = b[i]
        for k in range(i):
            t -= A[i, k] * x[k]
        x[i] = t / A[i, i]
    for i in range(n - 1, -1, -1):
        t = x[i]
        for k in range(i + 1, n):
            t -= A[k, i] * x[k]
        x[i] = t / A[i, i]
    return True


@njit(cache=True)
def step_and_clamp(q, dq, lower, upper, balls, out):
    """out = clamp(q ⊕ dq): :func:`integrate_into`, then the joint limits [lower, upper]."""
    integrate_into(q, dq, balls, out)
    for i in range(q.shape[0]):
        if out[i] < lower[i]:
            out[i] = lower[i]
        elif out[i] > upper[i]:
            out[i] = upper[i]


@njit(cache=True)
def goal_errors(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw):
    """(largest position error [m], largest rotation error [rad]) at q, for rows of the basic kinds
    (task_eval's: position, rotation, axis, aim); a problem that may hold other kinds goes through
    lm_core.problem_errors."""
    G = gnode.shape[0]
    dof = q.shape[0]
    Tall = np.empty((ni.shape[0], 4, 4))
    Jf = np.empty((6, dof))
    e = np.empty(3 * G)
    errs = np.empty(20)
    task_eval(ni, nf, origin, q, gnode, gkind, gvec, gR, gaxis, gw, Tall, Jf, e, np.empty((0, dof)), errs)
    return errs[0], errs[1]


_ = (KIND_POSITION, KIND_ROTATION, KIND_AXIS, KIND_AIM, BALL)

