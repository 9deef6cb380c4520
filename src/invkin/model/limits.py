"""Joint limits animators use: a swing cone and a twist range per ball joint, hinge ranges, from a dict
or a small JSON/TOML rig file (:meth:`invkin.Robot.with_limits`).

Swing–twist decomposition about a unit axis ``a`` (the bone's direction in the joint's frame): with the
joint's local rotation as a unit quaternion ``q = (w, v)``,

    q_twist = normalise(w, (v·a) a),      q_swing = q · q_twist⁻¹,      q = q_swing · q_twist

(the twist turns about the bone, then the swing tilts it). The twist angle is ``τ = 2 atan2(v·a, w)``
in (−π, π]; the swing angle ``σ`` is the angle of ``q_swing``, whose axis is perpendicular to ``a``.
A limit ``(σ_max, τ_lo, τ_hi)`` is met when ``σ ≤ σ_max`` and ``τ_lo ≤ τ ≤ τ_hi``;
:func:`clamp_swing_twist` projects a rotation onto it by clamping ``τ`` and scaling the swing's
rotation vector down to ``σ_max`` (the nearest swing on the same great circle).

A limited joint is either a ball joint (``q`` holds its rotation vector) or a BVH/glTF joint of three
rotation channels about x, y and z (its composed rotation is limited; the projection is written back
as the Euler angles nearest the current ones). Limits are kept in ``robot.extras["cone_limits"]``
({frame: (axis (3,), swing_max, twist_lo, twist_hi)}, angles in radians). ``ccd`` and ``fabrik``
honour them inside their updates (:mod:`invkin.solvers._twist`); dls, pinv, transpose, gauss-seidel
and lm (soft goals of the basic kinds) after every iteration (the solve driver projects); for every
method :func:`invkin.solve` projects the returned configuration (:func:`project_limits`, through
:func:`respect_cone_limits`) — the only way analytic, and lm with hard goals, other goal kinds,
``max_joint_step`` or collisions, honour them (``info["cone_limits_projected"]`` says when the
projection moved the result).

Rig files (JSON, or TOML on Python ≥ 3.11) hold the same mapping as the dict, angles in degrees::

    {"LeftUpLeg": {"swing": 80, "twist": [-30, 30], "axis": [0, -1, 0]},
     "LeftLeg.Xrotation": [0, 150],           # a hinge / any single q entry: [lower, upper]
     "units": "deg"}

An entry is a q entry name (a box ``[lower, upper]``) or a joint frame with ``swing``/``twist``
(and ``axis``, default the direction of the joint's first child bone, else +y); ``"units"`` is
``"deg"`` (default) or ``"rad"``.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np

from ..errors import FrameError, ModelError, closest_names
from ..kinematics import kernels as K
from .euler import euler_from_matrix, frame_groups, rot

__all__ = ["swing_twist", "clamp_swing_twist", "project_limits", "limit_violation", "apply_limits",
           "respect_cone_limits", "twist_changes"]


def _quat(R):
    """Unit quaternion (w, x, y, z), w ≥ 0, of a rotation matrix."""
    from ..spatial import matrix_to_quat_wxyz
    q = np.asarray(matrix_to_quat_wxyz(R), dtype=float)
    return q if q[0] >= 0 else -q


def _qmul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def _qmat(q):
    from ..spatial import quat_wxyz_to_matrix
    return np.asarray(quat_wxyz_to_matrix(q / np.linalg.norm(q)), dtype=float)


def swing_twist(R, axis):
    """``(swing_rotvec (3,), twist_angle)`` of rotation ``R`` about unit ``axis`` (module docstring)."""
    a = np.asarray(axis, float)
    a = a / np.linalg.norm(a)
    q = _quat(R)
    w, v = q[0], q[1:]
    p = float(v @ a)
    n = math.hypot(w, p)
    qt = np.array([w, *(p * a)]) / n if n > 1e-15 else np.array([1.0, 0.0, 0.0, 0.0])
    tau = 2.0 * math.atan2(p, w) if n > 1e-15 else 0.0
    tau = math.remainder(tau, 2 * math.pi)
    qs = _qmul(q, qt * np.array([1, -1, -1, -1]))
    if qs[0] < 0:
        qs = -qs
    sv = np.linalg.norm(qs[1:])
    sigma = 2.0 * math.atan2(sv, qs[0])
    rv = qs[1:] / sv * sigma if sv > 1e-15 else np.zeros(3)
    return rv, tau


def clamp_swing_twist(R, axis, swing_max, twist_lo, twist_hi):
    """``R`` projected onto the limit: twist clamped into [twist_lo, twist_hi], swing angle to at most
    ``swing_max`` [rad]; a rotation that meets the limit comes back unchanged (to rounding)."""
    a = np.asarray(axis, float)
    a = a / np.linalg.norm(a)
    rv, tau = swing_twist(R, a)
    sigma = float(np.linalg.norm(rv))
    tau_c = min(max(tau, twist_lo), twist_hi)
    if sigma <= swing_max and tau_c == tau:
        return np.array(R, dtype=float)
    if sigma > swing_max:
        rv = rv * (swing_max / sigma)
        sigma = swing_max
    s = np.linalg.norm(rv)
    qs = np.array([math.cos(s / 2), *(rv / s * math.sin(s / 2))]) if s > 0 else np.array([1.0, 0, 0, 0])
    qt = np.array([math.cos(tau_c / 2), *(a * math.sin(tau_c / 2))])
    return _qmat(_qmul(qs, qt))


def twist_changes(robot, qs, frames=None, axis=(0.0, 0.0, 1.0)) -> np.ndarray:
    """(T − 1, F) [rad]: how far each frame turns about its own bone ``axis`` (in the frame, default
    +z, the bones of :func:`invkin.model.catalog.tentacle`) between consecutive configurations of
    ``qs`` (T, dof): the twist of ``W_tᵀ W_{t+1}`` (swing-twist decomposition, :func:`swing_twist`),
    the candy-wrapper measure of a skinned chain. ``frames``: default every frame with a moving joint."""
    qs = np.asarray(qs, dtype=float)
    if frames is None:
        frames = [f for f in robot.frame_names if robot.qidx[robot.frame_index(f)] >= 0]
    Ts = [robot.fk_all(q) for q in qs]
    out = np.zeros((max(len(qs) - 1, 0), len(frames)))
    for t, (a, b) in enumerate(zip(Ts, Ts[1:])):
        for k, f in enumerate(frames):
            out[t, k] = swing_twist(a[f][:3, :3].T @ b[f][:3, :3], axis)[1]
    return out


def _group(robot, frame: int) -> list:
    return frame_groups(robot, frame)


def _local_rotation(robot, q, nodes) -> np.ndarray:
    if len(nodes) == 1 and robot.joint_type[nodes[0]] == K.BALL:
        from ..spatial import so3_exp
        c = int(robot.qidx[nodes[0]])
        return np.asarray(so3_exp(q[c:c + 3]))
    R = np.eye(3)
    for i in nodes:
        R = R @ rot(robot.axis[i], float(robot.multiplier[i] * q[int(robot.qidx[i])] + robot.offset[i]))
    return R


def _write_rotation(robot, q, nodes, L):
    if len(nodes) == 1 and robot.joint_type[nodes[0]] == K.BALL:
        from ..spatial import so3_log
        c = int(robot.qidx[nodes[0]])
        q[c:c + 3] = so3_log(L)
        return
    axes = [int(np.argmax(np.abs(robot.axis[i]))) for i in nodes]
    sg = np.array([np.sign(robot.axis[i][axes[k]]) for k, i in enumerate(nodes)])
    a = euler_from_matrix(L, "".join("XYZ"[k] for k in axes))
    best = None
    for th in (a, np.array([a[0] + math.pi, math.pi - a[1], a[2] + math.pi])):
        vals = []
        for k, i in enumerate(nodes):
            c = int(robot.qidx[i])
            v = (th[k] * sg[k] - robot.offset[i]) / robot.multiplier[i]
            vals.append(q[c] + math.remainder(v - q[c], 2 * math.pi / abs(robot.multiplier[i])))
        d = sum((v - q[int(robot.qidx[i])]) ** 2 for v, i in zip(vals, nodes))
        if best is None or d < best[0]:
            best = (d, vals)
    for v, i in zip(best[1], nodes):
        q[int(robot.qidx[i])] = v


def _limited(robot):
    return robot.extras.get("cone_limits") or {}


def project_limits(robot, q) -> np.ndarray:
    """``q`` with every cone/twist-limited joint projected onto its limit (:func:`clamp_swing_twist`),
    then clamped into the box limits. Returns a new array; ``q`` unchanged when nothing is limited."""
    q = np.array(q, dtype=float)
    lim = _limited(robot)
    if not lim:
        return q
    batch = q.ndim == 2
    rows = q if batch else q[None]
    for r in rows:
        for frame, (axis, smax, tlo, thi) in lim.items():
            nodes = _group(robot, robot.frame_index(frame))
            L = _local_rotation(robot, r, nodes)
            Lc = clamp_swing_twist(L, axis, smax, tlo, thi)
            if not np.array_equal(Lc, L):
                _write_rotation(robot, r, nodes, Lc)
    np.clip(rows, robot.lower, robot.upper, out=rows)
    return rows if batch else rows[0]


def limit_violation(robot, q) -> float:
    """Largest violation of a cone/twist limit by ``q`` [rad] (0 when every limit holds)."""
    worst = 0.0
    for frame, (axis, smax, tlo, thi) in _limited(robot).items():
        rv, tau = swing_twist(_local_rotation(robot, np.asarray(q, float), _group(robot, robot.frame_index(frame))),
                              axis)
        worst = max(worst, float(np.linalg.norm(rv)) - smax, tlo - tau, tau - thi)
    return worst


def _bone_axis(robot, node: int) -> np.ndarray:
    """The bone of a joint frame, in that frame: toward the first descendant (first children first)
    that is not at the joint's own point (BVH channel nodes and zero-length bones such as CMU's
    Spine1 → Neck are passed over); +y when there is none."""
    kids = {}
    for i in range(robot.n_nodes):
        kids.setdefault(int(robot.parent[i]), []).append(i)
    T = np.eye(4)
    i = node
    while kids.get(i):
        i = kids[i][0]
        T = T @ robot.origin[i]
        if np.linalg.norm(T[:3, 3]) > 1e-12:
            return T[:3, 3].copy()
    return np.array([0.0, 1.0, 0.0])


def _read_rig(path) -> dict:
    src = os.fspath(path)
    try:
        with open(src, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelError(f"{src}: cannot read the rig file: {e.strerror or e}") from None
    if src.lower().endswith(".toml"):
        try:
            import tomllib
        except ImportError:  # Python 3.10
            raise ModelError(f"{src}: TOML rig files need Python >= 3.11 (tomllib); use JSON") from None
        try:
            return tomllib.loads(data.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ModelError(f"{src}: not a valid TOML rig file: {e}") from None
    try:
        out = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelError(f"{src}: not a valid JSON rig file: {e}") from None
    if not isinstance(out, dict):
        raise ModelError(f"{src}: a rig file holds an object {{name: limit}}, got {type(out).__name__}")
    return out


def _num(v, what):
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ModelError(f"with_limits: {what} must be a number, got {v!r}") from None
    if math.isnan(x):
        raise ModelError(f"with_limits: {what} is NaN")
    return x


def apply_limits(robot, spec):
    """The robot with the limits of ``spec`` (a dict or a rig file path); see the module docstring."""
    if isinstance(spec, (str, os.PathLike)):
        spec = _read_rig(spec)
    if not isinstance(spec, dict):
        raise ModelError(f"with_limits: expected a dict {{name: limit}} or a rig file path, got {spec!r:.80}")
    spec = dict(spec)
    units = spec.pop("units", "deg")
    if units not in ("deg", "rad"):
        raise ModelError(f"with_limits: units must be 'deg' or 'rad', got {units!r}")
    k = math.pi / 180.0 if units == "deg" else 1.0
    lower, upper = np.array(robot.lower), np.array(robot.upper)
    cones = dict(_limited(robot))
    for name, lim in spec.items():
        if name in robot.joint_names and not isinstance(lim, dict):
            try:
                lo, hi = lim
            except (TypeError, ValueError):
                raise ModelError(f"with_limits: {name!r}: expected [lower, upper], got {lim!r}") from None
            c = robot.joint_names.index(name)
            rot = not any(robot.joint_type[i] == K.PRISMATIC for i in range(robot.n_nodes) if robot.qidx[i] == c)
            lo, hi = _num(lo, f"{name!r} lower") * (k if rot else 1.0), _num(hi, f"{name!r} upper") * (k if rot else 1.0)
            if lo > hi:
                raise ModelError(f"with_limits: {name!r}: lower {lo} > upper {hi}")
            lower[c], upper[c] = lo, hi
            continue
        if name not in robot.frame_names:
            raise FrameError(f"with_limits: {name!r} is neither a q entry nor a joint frame of robot {robot.name!r}; "
                             f"closest: {closest_names(name, list(robot.frame_names) + list(robot.joint_names))}")
        if not isinstance(lim, dict) or not set(lim) <= {"swing", "twist", "axis"} or not lim:
            raise ModelError(f"with_limits: {name!r}: expected {{'swing': deg, 'twist': [lo, hi], 'axis': [x, y, z]}}, "
                             f"got {lim!r}")
        node = robot.frame_index(name)
        nodes = _group(robot, node)
        ball = len(nodes) == 1 and robot.joint_type[nodes[0]] == K.BALL
        axes = {int(np.argmax(np.abs(robot.axis[i]))) for i in nodes}
        if not ball and not (len(nodes) == 3 and len(axes) == 3):
            raise ModelError(f"with_limits: {name!r}: swing/twist limits need a ball joint or three rotation "
                             f"channels about x, y, z; it has {[robot.node_joint_names[i] for i in nodes]}")
        smax = _num(lim.get("swing", 180.0 if units == "deg" else math.pi), f"{name!r} swing") * k
        tw = lim.get("twist", (-180.0, 180.0) if units == "deg" else (-math.pi, math.pi))
        try:
            tlo, thi = (_num(x, f"{name!r} twist") * k for x in tw)
        except (TypeError, ValueError):
            raise ModelError(f"with_limits: {name!r}: twist must be [lower, upper], got {tw!r}") from None
        if not (0 <= smax and tlo <= thi):
            raise ModelError(f"with_limits: {name!r}: need swing >= 0 and twist lower <= upper")
        if "axis" in lim:
            axis = np.array([_num(x, f"{name!r} axis") for x in lim["axis"]], dtype=float)
        else:
            axis = _bone_axis(robot, node)
        if axis.shape != (3,) or not np.linalg.norm(axis) > 0:
            raise ModelError(f"with_limits: {name!r}: axis must be a non-zero 3-vector, got {axis!r}")
        cones[name] = (axis / np.linalg.norm(axis), smax, tlo, thi)
    extras = dict(robot.extras)
    extras["cone_limits"] = cones
    import dataclasses
    return dataclasses.replace(robot, lower=lower, upper=upper, extras=extras)


def respect_cone_limits(robot, goals, res, position_tolerance: float, rotation_tolerance: float):
    """The result with ``q`` projected onto the robot's swing/twist limits
    (:func:`invkin.model.limits.project_limits`), its errors and status re-measured; unchanged when the
    robot has none or ``q`` meets them. The one hook by which every method honours those limits."""
    if not robot.extras.get("cone_limits"):
        return res
    from dataclasses import replace

    from ..result import Status
    from ..solvers.shared import compile_problem, problem_errors
    q = project_limits(robot, res.q)
    if np.array_equal(q, res.q):
        return res
    p = compile_problem(robot, goals, position_tolerance, rotation_tolerance)
    pe, re_ = problem_errors(p, q)  # (every goal kind: lm's CenterOfMass, Relative, Plane too)
    ok = pe <= position_tolerance and re_ <= rotation_tolerance
    status = Status.CONVERGED if ok else (res.status if res.status != Status.CONVERGED else Status.STALLED)
    info = dict(res.info)
    info["cone_limits_projected"] = True
    return replace(res, q=q, success=bool(ok), status=status, position_error=float(pe), rotation_error=float(re_),
                   info=info)
