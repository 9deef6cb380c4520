"""MJCF (MuJoCo XML) → Robot, through MuJoCo's own compiler (the optional ``mujoco`` extra).

invkin parses no MJCF: :func:`load_mjcf` hands the file to ``mujoco.MjModel.from_xml_path``,
whose compiler resolves ``<default>`` classes, ``<include>``, ``<frame>``, ``childclass``,
euler/axis-angle/xyaxes orientations and angle units, and reads the compiled arrays.

Kinematics (as in MuJoCo's ``mj_kinematics``)
---------------------------------------------
Body ``b`` sits at ``T(body_pos[b], body_quat[b])`` in its parent body. Its joints apply in
order, each about its anchor ``jnt_pos`` (body frame): a hinge is ``Trans(a) Rot(axis, θ)
Trans(-a)``, a slide ``Trans(axis θ)``, a ball ``Trans(a) R(quat) Trans(-a)``, with
``θ = qpos - qpos0`` (the joint's ``ref``). Here each joint becomes a node: a body with one joint
anchored at its origin is that joint's node; the joints of a body with several joints, or with an
anchor off the body origin, are internal nodes (not frames) and the body follows them by a fixed
joint ``{body}_fixed``, so that ``base=body`` cuts off every joint of the body, as for a URDF
link (a chain never starts above the body it is asked to start at). ``q`` equals MuJoCo's
``qpos`` entry by entry for hinge and slide joints (``offset = -ref``); a ball joint's 4 quaternion entries are a rotation
vector (3) here, and a free joint's 7 (position, quaternion w x y z) are invkin's free joint
(``j.x j.y j.z j.rx j.ry j.rz``: position + rotation vector, 6); a free joint must hang from the
world body, as MuJoCo's kinematics puts its body at ``qpos`` in world coordinates. :func:`qpos_from_q` and :func:`q_from_qpos` convert. Hinge and slide ranges become limits
where ``jnt_limited``; a ball joint's cone range is not kept (invkin's ball joints are unbounded).

The robot's name is the ``<mujoco model="...">`` attribute, else the file's name without its
extension. Frames: the world body (the root, ``"world"``), every body, and every site (a site
named like a body gets ``"_site"`` appended). Unnamed bodies, joints and sites are named ``body{i}``,
``joint{i}``, ``site{i}`` (``_1``, ``_2``, ... appended where the file gives that name to another of
its kind).

Kept for collision and whole-body work (in :attr:`Robot.extras`)
-----------------------------------------------------------------
* ``robot.geoms`` — {link: (Geom, ...)}: every geom of the body, with its MuJoCo type name
  (sphere, capsule, ellipsoid, cylinder, box, mesh, plane, ...), ``size`` (3,) as MuJoCo stores
  it (sphere: radius; capsule/cylinder: radius, half-length; box: half-sizes; ...), the local pose
  ``T_link_geom`` (4, 4), and ``contype``/``conaffinity``/``group`` (visual-only geoms have
  ``contype == conaffinity == 0``); a mesh geom carries its compiled ``vertices`` (n, 3) and
  ``faces`` (f, 3) in the geom frame (``robot.collision`` encloses them in capsules).
* ``extras["inertials"]`` — {link: (mass [kg], centre of mass (3,) [m] in the link frame)}.

Not kept: ``<equality>`` constraints (coupled joints, welds; a ModelWarning lists the active
ones), tendons, actuators, a ball joint's cone range.
"""
from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigurationError, ModelError, ModelWarning, warn_caller
from ..spatial import matrix_to_quat, quat_to_matrix, so3_exp, so3_log
from .build import RobotBuilder
from .robot import Robot
from .urdf import DEFAULT_MAX_BYTES, _Reader, parse_hardened, read_bounded

__all__ = ["Geom", "load_mjcf", "robot_from_mjmodel", "qpos_from_q", "q_from_qpos"]

_GEOM_TYPES = {0: "plane", 1: "hfield", 2: "sphere", 3: "capsule", 4: "ellipsoid", 5: "cylinder",
               6: "box", 7: "mesh", 8: "sdf"}
_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_MUJOCO_DEFAULT_NAME = "MuJoCo Model"  # what the compiler names a <mujoco> without model=
_COMPILE_LOCK = threading.Lock()  # load_mjcf: MuJoCo's warning handler is process-wide


@dataclass(frozen=True, eq=False)
class Geom:
    """One collision/visual shape of a link, as MuJoCo compiled it (see the module docstring)."""

    name: str
    type: str
    size: np.ndarray  # (3,) [m]
    T_link_geom: np.ndarray  # (4, 4)
    contype: int = 1
    conaffinity: int = 1
    group: int = 0
    vertices: np.ndarray | None = None  # a mesh geom's (n, 3) vertices [m] in the geom frame (else None)
    faces: np.ndarray | None = None  # its (f, 3) triangles, indices into vertices

    def __repr__(self) -> str:
        return f"Geom({self.name!r}, {self.type}, size={np.round(self.size, 4).tolist()})"


def _import_mujoco():
    try:
        import mujoco
    except ImportError:
        raise ModelError('loading MJCF needs the mujoco package: pip install "invkin[mujoco]"') from None
    return mujoco


def load_mjcf(path, max_bytes: int = DEFAULT_MAX_BYTES) -> Robot:
    """Compile an MJCF file with MuJoCo and read it into a :class:`Robot` (see the module docstring).

    Files larger than ``max_bytes`` [bytes] are refused; MuJoCo's compile errors become a
    :class:`ModelError` naming the file, its warnings a :class:`ModelWarning` each (not MuJoCo's
    print and MUJOCO_LOG.TXT in the working folder); a missing ``mujoco`` package names its pip install.
    """
    mujoco = _import_mujoco()
    p, data = read_bounded(path, max_bytes, "MJCF", "load_mjcf")
    _refuse_special_files(p, data, max_bytes)
    said: list = []  # MuJoCo's warnings ("XML contains a 'NaN'"): its own handler prints them and
    set_handler = getattr(mujoco, "set_mju_user_warning", None)  # appends to MUJOCO_LOG.TXT in the working folder
    with _COMPILE_LOCK:  # the handler is global: two threads loading at once must not keep each other's
        previous = mujoco.get_mju_user_warning() if set_handler is not None else None
        if set_handler is not None:
            set_handler(said.append)
        try:
            m = mujoco.MjModel.from_xml_path(p)
        except Exception as e:  # mujoco raises ValueError with the compiler's message (element, line)
            raise ModelError(f"{p}: MuJoCo could not compile the model: {str(e).strip()}") from None
        finally:
            if set_handler is not None:
                set_handler(previous)
    for msg in dict.fromkeys(said):
        warn_caller(f"{p}: MuJoCo: {str(msg).strip()}", ModelWarning)
    return robot_from_mjmodel(m, source=p)


#: Attributes that name a file MuJoCo's compiler opens (<include>, <mesh>, <hfield>, <skin>, <texture>).
_FILE_ATTRS = ("file", "fileback", "filedown", "filefront", "fileleft", "fileright", "fileup")


class _FileScan(_Reader):
    """The file names an MJCF document gives (and its <compiler> folders), from expat events."""

    kind = "MJCF"

    def __init__(self, source: str):
        super().__init__(source)
        self.files: list = []  # (tag, attribute, value, line)
        self.dirs: dict = {}   # <compiler meshdir/texturedir/assetdir>

    def _start(self, tag, attrs):
        self.depth += 1
        if tag == "compiler":
            self.dirs.update({k: v for k, v in attrs.items() if k in ("meshdir", "texturedir", "assetdir")})
        self.files.extend((tag, k, attrs[k], self._line()) for k in _FILE_ATTRS if k in attrs)

    def _end(self, tag):
        self.depth -= 1


def _refuse_special_files(path: str, data: bytes, max_bytes: int, root: str | None = None, seen=None) -> None:
    """ModelError when the MJCF at ``path`` (or a file it includes) names a file that exists and is not a
    regular file: MuJoCo's compiler opens it and blocks on a FIFO (a hang, not an error). Names are
    tried as MuJoCo resolves them: absolute, else from the main file's folder (meshes and textures
    also under the <compiler> folders). A document expat cannot read is left to MuJoCo's message."""
    root = root or os.path.dirname(os.path.abspath(path))
    seen = set() if seen is None else seen
    seen.add(os.path.realpath(path))
    rd = _FileScan(path)
    try:
        parse_hardened(rd, data, "load_mjcf")
    except ModelError:
        return  # malformed XML or a DOCTYPE: MuJoCo's compiler says what is wrong
    for tag, attr, value, line in rd.files:
        folders = [""]
        if tag != "include":
            folders += [rd.dirs.get("meshdir" if tag in ("mesh", "skin") else "texturedir", ""), rd.dirs.get("assetdir", "")]
        for folder in folders:
            cand = os.path.join(root, folder, value)
            if not os.path.exists(cand):
                continue
            if not os.path.isfile(cand):
                raise ModelError(f"{path}: <{tag} {attr}={value!r}> line {line}: {cand} is not a regular file (a "
                                 f"FIFO, device or folder); MuJoCo's compiler would block or fail reading it")
            if tag == "include" and os.path.realpath(cand) not in seen:
                try:
                    _, inc = read_bounded(cand, max_bytes, "MJCF", "load_mjcf")
                except ModelError:
                    continue  # MuJoCo reports it
                _refuse_special_files(cand, inc, max_bytes, root, seen)


def _T(pos, quat_wxyz) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = quat_to_matrix(quat_wxyz=quat_wxyz)
    T[:3, 3] = pos
    return T


def _trans(a) -> np.ndarray:
    T = np.eye(4)
    T[:3, 3] = a
    return T


def robot_from_mjmodel(m, source: str = "<mjmodel>", name: str | None = None) -> Robot:
    """A :class:`Robot` of a compiled ``mujoco.MjModel`` (see the module docstring)."""
    mujoco = _import_mujoco()

    def nm(obj, i, prefix):
        s = mujoco.mj_id2name(m, obj, i)
        return s if s else f"{prefix}{i}"

    def fresh(s, used):
        base, k = s, 1
        while s in used:
            s = f"{base}_{k}"
            k += 1
        used.add(s)
        return s

    def names(obj, n, prefix):
        """The n objects' names: the file's, else ``prefix{i}``, kept clear of the file's own names (an
        unnamed body 2 beside a body named "body2" becomes "body2_1")."""
        given = [mujoco.mj_id2name(m, obj, i) or "" for i in range(n)]
        used = set(given)
        return [s if s else fresh(f"{prefix}{i}", used) for i, s in enumerate(given)]

    bodies = names(mujoco.mjtObj.mjOBJ_BODY, m.nbody, "body")
    joint_names = names(mujoco.mjtObj.mjOBJ_JOINT, m.njnt, "joint")
    taken = set(bodies)  # node names
    taken_joints = set(joint_names)  # joint names: the file's, and the fixed joints added below

    def unique(s):
        return fresh(s, taken)

    given = bytes(m.names).split(b"\0", 1)[0].decode("utf-8", "replace")
    if given == _MUJOCO_DEFAULT_NAME:  # <mujoco> without model=: MuJoCo's placeholder, not a name
        given = ""
    model_name = name or given or (
        os.path.splitext(os.path.basename(source))[0] if not source.startswith("<") else "mjcf")
    b = RobotBuilder(model_name, source)
    b.add_root(bodies[0])
    offsets = {}  # node -> -ref of its hinge/slide joint
    joints = []  # (joint name, kind, qpos address) in q order
    for i in range(1, m.nbody):
        body = bodies[i]
        parent = bodies[int(m.body_parentid[i])]
        pending = _T(m.body_pos[i], m.body_quat[i])
        prev = parent
        j0, nj = int(m.body_jntadr[i]), int(m.body_jntnum[i])
        for k, j in enumerate(range(j0, j0 + nj)):
            t = int(m.jnt_type[j])
            jn = joint_names[j]
            adr = int(m.jnt_qposadr[j])
            if t == _FREE:
                if int(m.body_parentid[i]) != 0:
                    raise ModelError(f"{source}: free joint {jn!r} of body {body!r} is not on a child of the "
                                     f"world body; invkin's tree cannot hold a nested free joint")
                child = body if k == nj - 1 else unique(f"{body}/{jn}")
                b.add_joint(jn, prev, child, "free", np.eye(4), frame=child == body)
                joints.append((jn, "free", adr))
                prev, pending = child, np.eye(4)
                continue
            a = np.array(m.jnt_pos[j], dtype=np.float64)
            pending = pending @ _trans(a)
            last = k == nj - 1
            child = body if last and nj == 1 and not np.any(a) else unique(f"{body}/{jn}")
            limited = bool(m.jnt_limited[j])
            lo, hi = (float(m.jnt_range[j, 0]), float(m.jnt_range[j, 1])) if limited else (-math.inf, math.inf)
            if t == _BALL:
                b.add_joint(jn, prev, child, "ball", pending, frame=child == body)
                joints.append((jn, "ball", adr))
            else:
                jtype = ("revolute" if limited else "continuous") if t == _HINGE else "prismatic"
                b.add_joint(jn, prev, child, jtype, pending, m.jnt_axis[j], lo, hi, frame=child == body)
                offsets[child] = -float(m.qpos0[adr])
                joints.append((jn, jtype, adr))
            prev, pending = child, _trans(-a)
        if prev != body:
            b.add_joint(fresh(f"{body}_fixed", taken_joints), prev, body, "fixed", pending)
    sites = names(mujoco.mjtObj.mjOBJ_SITE, m.nsite, "site")
    for s in range(m.nsite):
        site = sites[s]
        site = unique(site + "_site" if site in taken else site)
        b.add_joint(fresh(f"{site}_joint", taken_joints), bodies[int(m.site_bodyid[s])], site, "fixed",
                    _T(m.site_pos[s], m.site_quat[s]))
    robot = b.build()
    off = robot.offset.copy()
    for node, v in offsets.items():
        off[robot.frame_index(node)] = v
    geoms: dict = {}
    for g in range(m.ngeom):
        link = bodies[int(m.geom_bodyid[g])]
        size = np.array(m.geom_size[g], dtype=np.float64)
        T = _T(m.geom_pos[g], m.geom_quat[g])
        size.setflags(write=False)
        T.setflags(write=False)
        V = F = None
        mesh = int(m.geom_dataid[g]) if int(m.geom_type[g]) == 7 else -1
        if mesh >= 0:  # the compiled mesh: vertices in the geom frame (MuJoCo moved them to it), scale applied
            va, vn = int(m.mesh_vertadr[mesh]), int(m.mesh_vertnum[mesh])
            fa, fn = int(m.mesh_faceadr[mesh]), int(m.mesh_facenum[mesh])
            V = np.array(m.mesh_vert[va:va + vn], dtype=np.float64)
            F = np.array(m.mesh_face[fa:fa + fn], dtype=np.int64)
            V.setflags(write=False)
            F.setflags(write=False)
        geoms.setdefault(link, []).append(Geom(
            nm(mujoco.mjtObj.mjOBJ_GEOM, g, "geom"), _GEOM_TYPES.get(int(m.geom_type[g]), str(int(m.geom_type[g]))),
            size, T, int(m.geom_contype[g]), int(m.geom_conaffinity[g]), int(m.geom_group[g]), V, F))
    inertials = {bodies[i]: (float(m.body_mass[i]), np.array(m.body_ipos[i], dtype=np.float64))
                 for i in range(m.nbody)}
    qpos0 = np.array(m.qpos0, dtype=np.float64)
    qpos0.setflags(write=False)
    robot = robot.replace(offset=off)
    _warn_equalities(mujoco, m, source, bodies, joint_names)
    return robot.with_extras(geoms={k: tuple(v) for k, v in geoms.items()}, inertials=inertials,
                             mjcf_joints=tuple(joints), mjcf_qpos0=qpos0)


def _warn_equalities(mujoco, m, source: str, bodies, joint_names) -> None:
    """One ModelWarning listing the active <equality> constraints, which the Robot does not keep: a
    gripper's coupled fingers, a weld to a mocap body. Its joints move independently of them."""
    active = getattr(m, "eq_active0", np.ones(m.neq, dtype=bool))
    said = []
    for e in range(m.neq):
        if not active[e]:
            continue
        kind = mujoco.mjtEq(int(m.eq_type[e])).name.removeprefix("mjEQ_").lower()
        a, b = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        names = joint_names if kind == "joint" else bodies if kind in ("connect", "weld") else None
        what = (f" {names[a]!r}" + (f"-{names[b]!r}" if b >= 0 else "")) if names is not None and a >= 0 else ""
        said.append(f"{kind}{what}")
    if said:
        warn_caller(f"{source}: {len(said)} <equality> constraint(s) not kept, the joints move independently of "
                    f"them: {', '.join(said[:6])}{', ...' if len(said) > 6 else ''}", ModelWarning)


def _mjcf_map(robot: Robot):
    joints = robot.extras.get("mjcf_joints")
    if joints is None:
        raise ModelError(f"robot {robot.name!r} was not loaded from MJCF: it has no qpos layout")
    return joints, robot.extras["mjcf_qpos0"]


def _entries(robot: Robot, jn: str, kind: str):
    """First q index of MuJoCo joint ``jn`` in ``robot``, or None where the robot lacks it (locked by
    :meth:`Robot.lock`, or cut off by ``base``/``tip``)."""
    name = jn + ".x" if kind in ("ball", "free") else jn
    try:
        return robot.joint_index(name) if name in robot.joint_names else None
    except ModelError:
        return None


def _set_qpos(qpos, kind, adr, v) -> None:
    if kind == "ball":
        qpos[adr:adr + 4] = matrix_to_quat(so3_exp(v[:3]), "wxyz")
    elif kind == "free":
        qpos[adr:adr + 3] = v[:3]
        qpos[adr + 3:adr + 7] = matrix_to_quat(so3_exp(v[3:6]), "wxyz")
    else:
        qpos[adr] = v[0]


def qpos_from_q(robot: Robot, q) -> np.ndarray:
    """MuJoCo ``qpos`` (nq,) of an invkin configuration ``q`` (dof,) of an MJCF-loaded robot
    (ball and free joints: rotation vector → quaternion w x y z). A joint the robot no longer
    has gets the value :meth:`Robot.lock` fixed it at, or MuJoCo's ``qpos0`` where it was cut off
    by ``base``/``tip``."""
    joints, qpos0 = _mjcf_map(robot)
    q = robot.check_q(q)
    if q.ndim != 1:
        raise ModelError(f"qpos_from_q: expected q of shape ({robot.dof},), got {q.shape}")
    qpos = qpos0.copy()
    locked = robot.extras.get("locked_values", {})
    for jn, kind, adr in joints:
        i = _entries(robot, jn, kind)
        if i is not None:
            _set_qpos(qpos, kind, adr, q[i:])
        elif jn in locked:
            _set_qpos(qpos, kind, adr, np.asarray(locked[jn], dtype=np.float64))
    return qpos


def q_from_qpos(robot: Robot, qpos) -> np.ndarray:
    """The invkin configuration (dof,) of a MuJoCo ``qpos`` (nq,) (inverse of :func:`qpos_from_q`;
    the entries of joints the robot no longer has, locked or cut off, are not read)."""
    from .._checks import real_array

    joints, qpos0 = _mjcf_map(robot)
    qpos = real_array("q_from_qpos: qpos", qpos, ConfigurationError)
    if qpos.shape != qpos0.shape:
        raise ModelError(f"q_from_qpos: expected qpos of shape {qpos0.shape}, got {qpos.shape}")
    q = robot.neutral()
    for jn, kind, adr in joints:
        i = _entries(robot, jn, kind)
        if i is None:
            continue
        if kind in ("ball", "free"):
            a = adr + (3 if kind == "free" else 0)
            quat = qpos[a:a + 4]
            big = float(np.max(np.abs(quat)))  # scaled first: no overflow near the float maximum
            if not big > 0.0:
                raise ConfigurationError(f"q_from_qpos: joint {jn!r}: qpos[{a}:{a + 4}] = {quat.tolist()} is not a "
                                         f"rotation; expected a nonzero quaternion w x y z")
            quat = quat / big
            r = so3_log(quat_to_matrix(quat_wxyz=quat / np.linalg.norm(quat)))
            if kind == "free":
                q[i:i + 3] = qpos[adr:adr + 3]
                q[i + 3:i + 6] = r
            else:
                q[i:i + 3] = r
        else:
            q[i] = qpos[adr]
    return q
