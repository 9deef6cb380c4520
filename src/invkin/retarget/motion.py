"""RobotMotion: a retargeted motion, and its files (.npz, .csv).

The ``.npz`` keys (units in the names' docs, quaternion order in the key)::

    root_position    (F, 3)  [m]   the floating base's position in the world
    root_quat_wxyz   (F, 4)        the floating base's orientation, scalar first
    joint_positions  (F, n)  [rad or m]  the other joints, in the order of joint_names
    joint_names      (n,)    str
    fps              ()      [1/s]
    robot            ()      str   the robot's name (``Robot.name``)
    robot_spec       ()      str   optional: what loads the robot back (a bundled name or a .urdf path)
    clip             ()      str   optional: the source clip's path (``invkin view MOTION.npz`` plays it beside)
    floating_base    ()      str   optional: the floating base joint's name (the prefix of q's first six
                                   names), "" for a fixed-base robot (then root_position and root_quat_wxyz
                                   are the identity); files without it are read as floating ("root_joint")

The CSV has one row per frame: ``frame, time, root_x, root_y, root_z, root_qw, root_qx, root_qy,
root_qz`` and one column per joint (header = joint names).
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass, field

import numpy as np

from .._io import atomic_open, atomic_path, open_regular, read_npz
from ..errors import FileError, ModelError

__all__ = ["RobotMotion", "read_motion", "NPZ_KEYS"]

NPZ_KEYS = ("root_position", "root_quat_wxyz", "joint_positions", "joint_names", "fps", "robot")


def _ro(a):
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class RobotMotion:
    """A robot motion: one configuration per frame.

    Attributes:
        q: (F, dof) read-only, the robot's configurations (floating base first: x y z [m] and a
            rotation vector [rad]; see ``Robot.joint_names``).
        fps: frames per second.
        joint_names: the names of q's entries (the robot's ``joint_names``).
        robot_name: the robot's name.
        report: the :class:`~invkin.retarget.report.RetargetReport` of the retargeting (None for a
            motion read from a file).
        source: where the motion came from (a clip path), for display.
        robot_spec: what :func:`invkin.load_robot` loads the robot from (a bundled name or a URDF
            path; ``""`` when unknown): the viewer loads the robot of a motion file by it.
        clip_path: the source clip's file (``""`` when unknown): the viewer plays it beside the robot.
            ``invkin retarget`` fills both; :func:`invkin.retarget` cannot (a Robot does not keep the
            name it was loaded by, nor a Clip its file), so set them with
            ``dataclasses.replace(motion, robot_spec="g1", clip_path=path)`` before :meth:`save`.
    """

    q: np.ndarray
    fps: float
    joint_names: tuple
    robot_name: str = ""
    report: object = field(default=None, repr=False)
    source: str = ""
    robot_spec: str = ""
    clip_path: str = ""

    def __post_init__(self):
        q = _ro(self.q)
        names = tuple(str(n) for n in self.joint_names)
        if q.ndim != 2 or q.shape[1] != len(names):
            raise ModelError(f"RobotMotion: q must be (F, {len(names)}) for {len(names)} joint names, got {q.shape}")
        if not np.all(np.isfinite(q)):
            raise ModelError("RobotMotion: q must be finite")
        fps = float(self.fps)
        if not (math.isfinite(fps) and fps > 0):
            raise ModelError(f"RobotMotion: fps must be a finite number > 0, got {self.fps!r}")
        object.__setattr__(self, "q", q)
        object.__setattr__(self, "joint_names", names)
        object.__setattr__(self, "fps", fps)

    @property
    def n_frames(self) -> int:
        return int(self.q.shape[0])

    @property
    def floating(self) -> bool:
        return len(self.joint_names) >= 6 and self.joint_names[0].endswith(".x") and self.joint_names[3].endswith(".rx")

    @property
    def base_joint(self) -> str:
        """The floating base joint's name (q's first six names are ``NAME.x`` ... ``NAME.rz``), or ""
        for a fixed-base robot."""
        return self.joint_names[0][:-2] if self.floating else ""

    @property
    def root_position(self) -> np.ndarray:
        """(F, 3) [m] the floating base's position (zeros for a fixed base)."""
        return self.q[:, :3].copy() if self.floating else np.zeros((self.n_frames, 3))

    @property
    def root_quat_wxyz(self) -> np.ndarray:
        """(F, 4) the floating base's orientation as unit quaternions, scalar first."""
        from ..spatial import matrix_to_quat_wxyz, so3_exp

        if not self.floating:
            return np.tile([1.0, 0.0, 0.0, 0.0], (self.n_frames, 1))
        out = np.array([matrix_to_quat_wxyz(so3_exp(r)) for r in self.q[:, 3:6]])
        # one sign for the whole path: no jump between q and -q from frame to frame
        for i in range(1, len(out)):
            if out[i] @ out[i - 1] < 0:
                out[i] = -out[i]
        return out

    @property
    def joint_positions(self) -> np.ndarray:
        """(F, n) the joints other than the floating base."""
        return self.q[:, 6:].copy() if self.floating else self.q.copy()

    @property
    def actuated_names(self) -> tuple:
        return self.joint_names[6:] if self.floating else self.joint_names

    def save(self, path) -> None:
        """Write ``.npz`` or ``.csv`` (by the extension; see the module docstring)."""
        p = str(path)
        if p.lower().endswith(".npz"):
            with atomic_path(p, suffix=".npz") as tmp:
                np.savez(tmp, root_position=self.root_position, root_quat_wxyz=self.root_quat_wxyz,
                         joint_positions=self.joint_positions, joint_names=np.array(self.actuated_names),
                         fps=np.float64(self.fps), robot=np.array(self.robot_name),
                         robot_spec=np.array(self.robot_spec), clip=np.array(self.clip_path),
                         floating_base=np.array(self.base_joint))
        elif p.lower().endswith(".csv"):
            with atomic_open(p, "w", newline="") as f:
                f.write(self.to_csv())
        else:
            raise FileError(f"{p}: expected a .npz or .csv output path")

    def to_csv(self) -> str:
        buf = io.StringIO()
        head = ["frame", "time", "root_x", "root_y", "root_z", "root_qw", "root_qx", "root_qy", "root_qz",
                *self.actuated_names]
        buf.write(",".join(head) + "\n")
        t = np.arange(self.n_frames) / self.fps
        rows = np.column_stack([np.arange(self.n_frames), t, self.root_position, self.root_quat_wxyz,
                                self.joint_positions])
        for r in rows:
            buf.write(f"{int(r[0])}," + ",".join(repr(float(x)) for x in r[1:]) + "\n")
        return buf.getvalue()

    def __repr__(self) -> str:
        return (f"RobotMotion({self.robot_name!r}, {self.n_frames} frames at {self.fps:g} fps, "
                f"{len(self.joint_names)} DOF)")


def read_motion(path) -> RobotMotion:
    """Read a motion written by :meth:`RobotMotion.save` (``.npz``; the ``.csv`` is an export that is
    not read back: a FileError says so). A damaged or truncated file, a key of the wrong shape or
    type, non-finite values, a zero quaternion or an fps <= 0 is a :class:`~invkin.FileError`
    naming the file and the key."""
    from ..spatial import quat_wxyz_to_matrix, so3_log

    p = str(path)
    with open_regular(p, "motion file") as f:
        data = f.read()
    zip_magic = data.startswith((b"PK\x03\x04", b"PK\x05\x06"))
    if not zip_magic and (p.lower().endswith(".csv") or data.startswith(b"frame,time,")):
        raise FileError(f"{p}: read_motion reads the .npz files RobotMotion.save writes; its .csv is an "
                        f"export only (save the motion as .npz to read it back)")
    arrays = read_npz(p, ".npz motion file", FileError, data)  # (the zip archive RobotMotion.save writes)
    missing = [k for k in NPZ_KEYS if k not in arrays]
    if missing:
        raise FileError(f"{p}: not a motion file: missing keys {missing} (has {list(arrays)})")

    def numbers(key, ndim):
        a = arrays[key]
        if a.dtype.kind not in "biuf" or a.ndim != ndim:
            raise FileError(f"{p}: {key} is a {a.ndim}-d array of {a.dtype}; expected a {ndim}-d array of numbers")
        return np.asarray(a, dtype=np.float64)

    def text(key):
        a = arrays[key]
        if a.dtype.kind != "U" or a.ndim != 0:
            raise FileError(f"{p}: {key} is a {a.ndim}-d array of {a.dtype}; expected one string")
        return str(a)

    jn = arrays["joint_names"]
    if jn.ndim != 1 or (jn.dtype.kind != "U" and jn.size):  # (save writes no names as float64 [])
        raise FileError(f"{p}: joint_names is a {arrays['joint_names'].ndim}-d array of "
                        f"{arrays['joint_names'].dtype}; expected a 1-d array of strings")
    names = [str(n) for n in arrays["joint_names"]]
    jp, rp, rq = numbers("joint_positions", 2), numbers("root_position", 2), numbers("root_quat_wxyz", 2)
    fps = float(numbers("fps", 0))
    F = jp.shape[0]
    if jp.shape[1] != len(names) or rp.shape != (F, 3) or rq.shape != (F, 4):
        raise FileError(f"{p}: inconsistent shapes: joint_positions {jp.shape}, {len(names)} joint_names, "
                        f"root_position {rp.shape}, root_quat_wxyz {rq.shape}")
    for key, a in (("joint_positions", jp), ("root_position", rp), ("root_quat_wxyz", rq)):
        if not np.all(np.isfinite(a)):
            raise FileError(f"{p}: {key}: frame {int(np.argmin(np.all(np.isfinite(a), axis=1)))} is not finite")
    norm = np.linalg.norm(rq, axis=1)
    if F and not np.all(norm > 1e-6):
        raise FileError(f"{p}: root_quat_wxyz: frame {int(np.argmin(norm > 1e-6))} is not a unit quaternion "
                        f"(norm {float(norm.min()):g})")
    if not (math.isfinite(fps) and fps > 0):
        raise FileError(f"{p}: fps is {fps!r}; expected a finite number > 0")
    base = text("floating_base") if "floating_base" in arrays else "root_joint"  # (files before the key: floating)
    extra = {k: text(key) for k, key in (("robot_spec", "robot_spec"), ("clip_path", "clip")) if key in arrays}
    if not base:  # a fixed-base robot's motion: its root is the identity in every frame
        if F and (np.any(rp != 0.0) or np.any(np.abs(rq / norm[:, None]) != (1.0, 0.0, 0.0, 0.0))):
            raise FileError(f"{p}: floating_base is \"\" (a fixed-base robot) but root_position / root_quat_wxyz "
                            f"are not the identity in every frame")
        return RobotMotion(jp, fps, tuple(names), robot_name=text("robot"), source=p, **extra)
    rv = np.array([so3_log(quat_wxyz_to_matrix(x / n)) for x, n in zip(rq, norm)]).reshape(F, 3)
    q = np.column_stack([rp, rv, jp])
    axes = (".x", ".y", ".z", ".rx", ".ry", ".rz")
    return RobotMotion(q, fps, tuple([base + a for a in axes] + names), robot_name=text("robot"), source=p, **extra)
