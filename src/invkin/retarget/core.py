"""``retarget``: a BVH clip onto a robot on a floating base, frame by frame in one kernel call."""
from __future__ import annotations

import math
import time

import numpy as np

from .._checks import count, positive
from ..errors import GoalError, ModelError
from ..model.bvh import need_frames
from .mapping import Mapping, MappingError, bundled_mapping, load_mapping
from .motion import RobotMotion

__all__ = ["retarget", "DEFAULT_ITERATIONS"]

DEFAULT_ITERATIONS = 2
FIRST_ITERATIONS = 200
FALLBACK_ITERATIONS = 6
TOL_P = 1e-3   # [m] hard goals (feet in contact) held within HARD_HOLD x this (0.1 mm)
TOL_R = 1e-2   # [rad]
DAMPING = 1e-3  # the floor of the per-frame step's damping (kernel._track_iterate)
CUTOFF = 0.01  # [m] beyond the margin: collision pairs farther apart are not evaluated (kernel.NEAR)
MIN_FOOT_ROTATION_WEIGHT = 0.1  # a foot always has a rotation row (held flat in contact)


def _goals(robot, bodies, targets):
    """Goal objects (at frame 0's targets), the body and the kind of every goal row."""
    from ..goals import Orientation, Position

    goals, row_body, row_rot = [], [], []
    for i, b in enumerate(bodies):
        wr = max(b.rotation_weight, MIN_FOOT_ROTATION_WEIGHT) if b.role == "foot" else b.rotation_weight
        if b.position_weight > 0 or b.role == "foot":
            goals.append(Position(b.link, targets.p[0, i], weight=max(b.position_weight, 1e-3)))
            row_body.append(i)
            row_rot.append(False)
        if wr > 0:
            goals.append(Orientation(b.link, targets.R[0, i], weight=wr))
            row_body.append(i)
            row_rot.append(True)
    return goals, np.array(row_body, dtype=np.int64), np.array(row_rot, dtype=np.bool_)


def _contact_options(opts) -> dict:
    """``contact_options`` as a dict of :func:`invkin.detect_contacts` keywords (up and foot are
    the retargeting's own): a typo is refused here, not raised as a TypeError from inside."""
    import inspect

    from .._checks import no_unknown_kwargs
    from ..animation.contacts import detect_contacts

    if opts is None:
        return {}
    if not isinstance(opts, dict):
        raise GoalError(f"contact_options: expected a dict of detect_contacts keywords, got {opts!r:.80}")
    known = [k for k, p in inspect.signature(detect_contacts).parameters.items()
             if p.kind is p.KEYWORD_ONLY and k != "up"]
    no_unknown_kwargs("retarget: contact_options", opts, known)
    return dict(opts)


def _start(robot, bodies, targets):
    """Frame 0's start: the rest pose with the floating base at the root's target."""
    from ..spatial import so3_log
    from .scale import robot_rest

    q = robot_rest(robot)
    root = next(i for i, b in enumerate(bodies) if b.role == "root")
    link = bodies[root].link
    T0 = robot.fk(q, link)  # the root link's pose with the base at the origin
    R = targets.R[0, root] @ T0[:3, :3].T
    q[3:6] = so3_log(R)
    q[:3] = targets.p[0, root] - R @ T0[:3, 3]
    return q


def retarget(skeleton, clip, robot, mapping=None, *, up=None, iterations: int = DEFAULT_ITERATIONS,
             self_collision: bool = True, margin: float = 0.005, velocity_scale: float = 1.0,
             contact_options=None, progress=None) -> RobotMotion:
    """Carry a BVH clip onto a robot on a floating base: a :class:`RobotMotion` whose ``report``
    is a :class:`RetargetReport`.

    Args:
        skeleton, clip: what :func:`invkin.read_bvh` returned (any length unit: lengths are
            scaled per segment onto the robot's).
        robot: a Robot on a floating base (``load_robot("g1")``; a URDF with ``floating_base=True``).
        mapping: a :class:`Mapping`, a ``.toml``/``.json`` path, or None for the bundled map that
            fits the clip's joint names (see :mod:`invkin.retarget.mapping`).
        up: the clip's up axis ("y" or "z", or "x"; any case), default the map's, else detected
            from the feet.
        iterations: LM iterations per frame after the first (warm-started from the previous
            frame; 2-4 suffice at mocap frame rates).
        self_collision: keep the robot's collision pairs apart by ``margin`` [m] (as inequality
            rows); the floor (z = 0) is always kept.
        velocity_scale: the per-frame joint step bound is velocity_scale × the URDF velocity
            limits × the frame time (hard; a clip whose frame time is 0 is a ModelError).
        contact_options: keyword arguments of :func:`invkin.detect_contacts` for the feet.
        progress: a callable ``progress(done, total)`` called with the frame count (a progress bar).

    Feet (bodies with role "foot") in contact on the source are held flat on the floor where the
    contact began, as hard goals; every other body is soft with the map's weights. See
    docs/architecture.md "Retargeting".
    """
    from ..solve import core_args
    from ..solvers.shared import compile_problem
    from ..collision.distance import collision_tables, max_rows
    from ..animation.contacts import _need_fps, _up_arg
    from ..animation.skeleton import _robot_for
    from .kernel import retarget_frames
    from .report import measure
    from .scale import make_targets, rest_clearance, robot_rest

    skeleton = _robot_for(skeleton, clip)
    if not robot.floating:
        raise ModelError(f"retarget: robot {robot.name!r} has no floating base; load it with "
                         f"load_robot(..., floating_base=True)")
    iterations = count("iterations", iterations, 1)
    if isinstance(margin, bool) or not isinstance(margin, (int, float, np.integer, np.floating)) \
            or not (math.isfinite(margin) and 0.0 <= margin <= 0.1):
        raise MappingError(f"margin: expected a number in [0, 0.1] [m], got {margin!r}")
    margin = float(margin)
    velocity_scale = positive("velocity_scale", velocity_scale)
    up = _up_arg(up)
    contact_options = _contact_options(contact_options)
    if progress is not None and not callable(progress):
        raise GoalError(f"progress: expected a callable progress(done, total) or None, got {progress!r:.80}")
    if mapping is None:
        mapping = bundled_mapping(clip, robot)
    elif not isinstance(mapping, Mapping):
        mapping = load_mapping(mapping)
    mapping.check(clip, robot)
    need_frames(clip, "retarget")
    _need_fps(clip, "retarget")  # the velocity bounds and the contacts need the clip's rate
    bodies = mapping.bodies
    targets = make_targets(skeleton, clip, robot, mapping, up=up, contact_options=contact_options)
    goals, row_body, row_rot = _goals(robot, bodies, targets)
    problem = compile_problem(robot, goals, TOL_P, TOL_R)
    model, table, lims, lo, hi = core_args(problem)
    gnode, gkind, gref, glevel, gvec, gR, gaxis, gw = table[:8]
    dt = clip.frame_time
    vl = robot.velocity_limit
    step = np.where(np.isfinite(vl), vl * dt * velocity_scale, np.inf)
    step[:6] = np.inf  # the floating base follows the source's root
    ctables = collision_tables(robot, None, self_collision=self_collision)
    clearance = rest_clearance(robot)
    sole_node = np.array([robot.frame_index(bodies[i].link) for i, pts in targets.sole.items() for _ in pts],
                         dtype=np.int64)
    sole_local = np.ascontiguousarray(np.concatenate([pts for pts in targets.sole.values()] + [np.zeros((0, 4))]))
    F, G = clip.n_frames, gnode.shape[0]
    out_q = np.empty((F, robot.dof))
    out_err = np.empty((F, G))
    out_flags = np.zeros(F, dtype=np.int64)
    out_iters = np.zeros(F)
    q = _start(robot, bodies, targets)
    B = len(bodies)
    contact = targets.contact
    contact_start = contact & ~np.vstack([np.zeros((1, B), dtype=bool), contact[:-1]])
    body_node = np.array([robot.frame_index(b.link) for b in bodies], dtype=np.int64)
    sole_height = np.array([targets.sole_height.get(i, 0.0) for i in range(B)])
    rest_R = np.ascontiguousarray(np.stack([robot.fk(robot_rest(robot), b.link)[:3, :3] for b in bodies]))
    hold_p = np.zeros((B, 3))
    hold_R = np.tile(np.eye(3), (B, 1, 1))
    landing = np.zeros(B, dtype=np.bool_)
    t0 = time.perf_counter()
    chunk = F if progress is None else max(1, min(F, 256))
    f0 = 0
    while f0 < F:
        f1 = min(F, f0 + chunk)
        retarget_frames(model, gnode, gkind, gref, gaxis, gw, gvec, row_body, row_rot, targets.p[f0:f1],
                        targets.R[f0:f1], contact[f0:f1], contact_start[f0:f1], body_node, sole_height, rest_R,
                        hold_p, hold_R, landing, lims, robot.lower, robot.upper, step, TOL_P,
                        TOL_R, q, iterations, FIRST_ITERATIONS, f0 == 0, DAMPING, FALLBACK_ITERATIONS, ctables, max_rows(ctables), margin,
                        clearance, margin + CUTOFF, sole_node, sole_local, out_q[f0:f1], out_err[f0:f1], out_flags[f0:f1], out_iters[f0:f1])
        f0 = f1
        if progress is not None:
            progress(f0, F)
    seconds = time.perf_counter() - t0
    has_pos = np.zeros(len(bodies), dtype=bool)
    has_rot = np.zeros(len(bodies), dtype=bool)
    has_pos[row_body[~row_rot]] = True
    has_rot[row_body[row_rot]] = True
    report = measure(robot, out_q, 1.0 / dt, bodies, targets, has_pos, has_rot, out_flags, seconds)
    return RobotMotion(out_q, 1.0 / dt, robot.joint_names, robot_name=robot.name, report=report,
                       source=getattr(skeleton, "name", ""))
