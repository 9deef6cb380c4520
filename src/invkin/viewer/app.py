"""The browser viewer: a viser server that draws a robot or a BVH skeleton and solves on the server.

Drawing is kinematic: every frame origin is a sphere, each frame is linked to its nearest frame
ancestor by a cylinder, and frame axes are optional. Targets are viser transform gizmos; moving
one wakes a solver thread that runs ``ik.solve`` warm-started from the current ``q`` with a small
time budget (default 20 ms, no random restarts, so the pose moves continuously) and redraws.

Scenes (``ViewerApp(scene=...)``):

* ``ik``: any robot or skeleton. Targets on chosen frames, a method picker, tolerances, the
  goal weight, damping (for methods that have a ``damping`` option, and the reach loop), FK mode
  with joint sliders. A BVH file also plays its clip, beside its IK-corrected version when
  ``invkin.correct_clip`` exists.
* ``tentacle``: the tip of a tentacle follows a target moved by the arrow keys (viser commands
  with hotkeys, so the browser page sends them) or buttons; a second tentacle sways by FK alone
  (SEEDS.md §4): ``q_k(t) = A sin(ω t − k φ)``.
* ``two-bone``: the planar arm ``planar2`` solved in closed form by :func:`two_bone_2d` with an
  elbow up/down switch, and a 3-D two-bone arm by :func:`two_bone_3d` with a pole direction.
* ``reach``: the straight-line reach of SEEDS.md §1 on ``seed8dof``: each animation frame steps
  the effector ``Δ`` toward the target, ``δθ = Jᵀ(J Jᵀ + λ² I)⁻¹ δx`` (damped pseudo-inverse), and
  a target beyond the reach radius (3) is refused as "out of workspace".

All state changes go through one re-entrant lock; viser callbacks run in its thread pool.
"""
from __future__ import annotations

import contextlib
import io
import math
import os
import socket
import threading
import time
from dataclasses import dataclass

import numpy as np

from .. import goals as G
from ..errors import InvkinError
from ..model import load_robot
from ..model.robot import Robot

__all__ = ["ViewerApp", "ViewerError", "PortInUseError", "demo_app", "SCENES", "DEMOS"]

SCENES = ("ik", "tentacle", "two-bone", "reach")
DEMOS = ("panda", "tentacle", "two-bone", "reach")

ARROW_STEP = 0.05        # [m] target move per arrow key press (tentacle demo)
TICK_HZ = 30.0           # animation rate of the background ticker [Hz]
MAX_SLIDERS = 64         # FK mode shows at most this many joint sliders
REACH_MAX_STEPS = 5000   # the straight-line loop gives up after this many steps

_LINK_COLOR = (90, 160, 230)
_JOINT_COLOR = (250, 170, 60)
_ALT_LINK_COLOR = (120, 200, 120)
_ALT_JOINT_COLOR = (230, 90, 90)


class ViewerError(InvkinError):
    """The viewer cannot start or was given a bad setting (viser missing, port in use, ...)."""


class PortInUseError(ViewerError):
    """The requested port is taken by another program."""


def _import_viser():
    try:
        import viser  # noqa: PLC0415 - optional dependency, imported when a viewer starts
    except ImportError as exc:
        raise ViewerError(f"the viewer needs viser, which is not installed ({exc}); install it with "
                          f"pip install 'invkin[viewer]'") from None
    return viser


def _check_port_free(host: str, port: int) -> None:
    """Raise PortInUseError when something already listens on host:port (port 0: any port)."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ViewerError(f"cannot bind the viewer to host {host!r}: {exc.strerror or exc}") from None
    for family, kind, proto, _, addr in infos:
        with socket.socket(family, kind, proto) as s:
            # the server sets SO_REUSEADDR too: only a listening socket makes the bind fail
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(addr)
            except OSError as exc:
                if exc.errno in (98, 48, 10048):  # EADDRINUSE (Linux, macOS, Windows)
                    raise PortInUseError(f"port {port} is already in use on {host}; choose another "
                                         f"with --port") from None
                raise ViewerError(f"cannot bind the viewer to {host}:{port}: {exc.strerror or exc}") from None


# ------------------------------------------------------------------ geometry helpers


def _unit_cylinder(segments: int = 16):
    """Cylinder of radius 1 from z=0 to z=1: vertices (2s+2, 3), faces (4s, 3)."""
    a = np.linspace(0.0, 2.0 * np.pi, segments, endpoint=False)
    ring = np.stack([np.cos(a), np.sin(a), np.zeros_like(a)], axis=1)
    top = ring + (0.0, 0.0, 1.0)
    V = np.vstack([ring, top, [[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]]])
    s = segments
    F = []
    for i in range(s):
        j = (i + 1) % s
        F += [(i, j, s + i), (j, s + j, s + i), (2 * s, j, i), (2 * s + 1, s + i, s + j)]
    return V.astype(np.float32), np.array(F, dtype=np.uint32)


def _unit_sphere(rings: int = 8, segments: int = 12):
    """UV sphere of radius 1: vertices, faces."""
    V = [(0.0, 0.0, 1.0)]
    for k in range(1, rings):
        th = np.pi * k / rings
        for i in range(segments):
            ph = 2.0 * np.pi * i / segments
            V.append((np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)))
    V.append((0.0, 0.0, -1.0))
    last = len(V) - 1

    def idx(k, i):  # ring k (1..rings-1), segment i
        return 1 + (k - 1) * segments + (i % segments)

    F = []
    for i in range(segments):
        F.append((0, idx(1, i), idx(1, i + 1)))
        F.append((last, idx(rings - 1, i + 1), idx(rings - 1, i)))
        for k in range(1, rings - 1):
            a, b, c, d = idx(k, i), idx(k, i + 1), idx(k + 1, i), idx(k + 1, i + 1)
            F += [(a, c, b), (b, c, d)]
    return np.array(V, dtype=np.float32), np.array(F, dtype=np.uint32)


def quats_wxyz(R: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) to unit quaternions (..., 4), w x y z (Shepperd's method)."""
    R = np.asarray(R, dtype=np.float64)
    shape = R.shape[:-2]
    R = R.reshape(-1, 3, 3)
    r00, r11, r22 = R[:, 0, 0], R[:, 1, 1], R[:, 2, 2]
    tr = r00 + r11 + r22
    case = np.argmax(np.stack([tr, r00, r11, r22], axis=1), axis=1)
    q = np.empty((R.shape[0], 4))
    with np.errstate(invalid="ignore", divide="ignore"):
        s0 = 2.0 * np.sqrt(np.maximum(tr + 1.0, 0.0))
        s1 = 2.0 * np.sqrt(np.maximum(1.0 + r00 - r11 - r22, 0.0))
        s2 = 2.0 * np.sqrt(np.maximum(1.0 + r11 - r00 - r22, 0.0))
        s3 = 2.0 * np.sqrt(np.maximum(1.0 + r22 - r00 - r11, 0.0))
        c = [
            (0.25 * s0, (R[:, 2, 1] - R[:, 1, 2]) / s0, (R[:, 0, 2] - R[:, 2, 0]) / s0, (R[:, 1, 0] - R[:, 0, 1]) / s0),
            ((R[:, 2, 1] - R[:, 1, 2]) / s1, 0.25 * s1, (R[:, 0, 1] + R[:, 1, 0]) / s1, (R[:, 0, 2] + R[:, 2, 0]) / s1),
            ((R[:, 0, 2] - R[:, 2, 0]) / s2, (R[:, 0, 1] + R[:, 1, 0]) / s2, 0.25 * s2, (R[:, 1, 2] + R[:, 2, 1]) / s2),
            ((R[:, 1, 0] - R[:, 0, 1]) / s3, (R[:, 0, 2] + R[:, 2, 0]) / s3, (R[:, 1, 2] + R[:, 2, 1]) / s3, 0.25 * s3),
        ]
    for k in range(4):
        m = case == k
        q[m] = np.stack([comp[m] for comp in c[k]], axis=1)
    q *= np.where(q[:, :1] < 0, -1.0, 1.0)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q.reshape(shape + (4,))


def _quats_z_to(d: np.ndarray) -> np.ndarray:
    """Quaternions (N, 4) turning +z onto the unit directions d (N, 3): (1 + z·d, z × d), normalised."""
    q = np.stack([1.0 + d[:, 2], -d[:, 1], d[:, 0], np.zeros(len(d))], axis=1)
    flip = q[:, 0] < 1e-9  # d = -z: any half turn about a horizontal axis
    q[flip] = (0.0, 1.0, 0.0, 0.0)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def _rot_x(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


class _Bones:
    """Cylinders between points, spheres on the points, optional axes: one batched mesh each."""

    def __init__(self, scene, name: str, n_points: int, segments, size: float, link_color, joint_color,
                 axes: bool = True):
        self.segments = np.asarray(segments, dtype=np.int64).reshape(-1, 2)
        self.r_link = 0.018 * size
        self.r_joint = 0.032 * size
        n, m = int(n_points), len(self.segments)
        ident = np.tile([1.0, 0.0, 0.0, 0.0], (max(n, m), 1))
        self._links = None
        if m:
            V, F = _unit_cylinder()
            self._links = scene.add_batched_meshes_simple(
                f"{name}/links", V, F, batched_wxyzs=ident[:m], batched_positions=np.zeros((m, 3)),
                batched_scales=np.ones((m, 3)), batched_colors=link_color, side="double", lod="off",
                cast_shadow=False, receive_shadow=False)
        V, F = _unit_sphere()
        self._joints = scene.add_batched_meshes_simple(
            f"{name}/joints", V, F, batched_wxyzs=ident[:n], batched_positions=np.zeros((n, 3)),
            batched_scales=np.full(n, self.r_joint), batched_colors=joint_color, side="double", lod="off",
            cast_shadow=False, receive_shadow=False)
        self._axes = scene.add_batched_axes(f"{name}/axes", ident[:n], np.zeros((n, 3)),
                                            axes_length=0.07 * size, axes_radius=0.004 * size, visible=axes)

    @property
    def show_axes(self) -> bool:
        return bool(self._axes.visible)

    @show_axes.setter
    def show_axes(self, v: bool) -> None:
        self._axes.visible = bool(v)

    def update(self, P: np.ndarray, R: np.ndarray | None = None) -> None:
        """P (n, 3) point positions, R (n, 3, 3) frame rotations (for the axes)."""
        if self._links is not None:
            a, b = P[self.segments[:, 0]], P[self.segments[:, 1]]
            d = b - a
            L = np.linalg.norm(d, axis=1)
            u = np.where(L[:, None] > 1e-12, d / np.maximum(L, 1e-12)[:, None], (0.0, 0.0, 1.0))
            self._links.batched_positions = a
            self._links.batched_wxyzs = _quats_z_to(u)
            self._links.batched_scales = np.stack([np.full_like(L, self.r_link), np.full_like(L, self.r_link),
                                                   np.maximum(L, 1e-9)], axis=1)
        self._joints.batched_positions = P
        if R is not None:
            self._axes.batched_positions = P
            self._axes.batched_wxyzs = quats_wxyz(R)


class _Skeleton:
    """A robot drawn kinematically: each frame linked to its nearest frame ancestor."""

    def __init__(self, scene, name: str, robot: Robot, size: float, link_color=_LINK_COLOR,
                 joint_color=_JOINT_COLOR, axes: bool = True):
        self.robot = robot
        self.nodes = np.flatnonzero(robot.is_frame)
        index = {int(i): k for k, i in enumerate(self.nodes)}
        segs = []
        for k, i in enumerate(self.nodes):
            p = int(robot.parent[i])
            while p >= 0 and not robot.is_frame[p]:
                p = int(robot.parent[p])
            if p >= 0:
                segs.append((index[p], k))
        self.bones = _Bones(scene, name, len(self.nodes), segs, size, link_color, joint_color, axes)

    def update(self, q) -> np.ndarray:
        Ts = self.robot.fk_all_array(q)[self.nodes]
        self.bones.update(Ts[:, :3, 3], Ts[:, :3, :3])
        return Ts


@dataclass
class _Target:
    frame: str
    position: np.ndarray        # (3,) in the robot's base frame
    wxyz: np.ndarray            # (4,) orientation in the base frame
    weight: float = 1.0
    handle: object = None       # viser TransformControlsHandle


def _clip_frames(out, robot: Robot):
    """Frames (F, dof) from whatever correct_clip returned: a Clip, (Clip, ...), an array, .frames/.q."""
    cands = [out] + (list(out) if isinstance(out, tuple) else [])
    for c in cands:
        for attr in ("frames", "q"):
            v = getattr(c, attr, None)
            if isinstance(v, np.ndarray) and v.ndim == 2 and v.shape[1] == robot.dof:
                return v
        if isinstance(c, np.ndarray) and c.ndim == 2 and c.shape[1] == robot.dof:
            return c
    raise ViewerError(f"correct_clip returned {type(out).__name__}, not frames of {robot.dof} joint values")


def _clip_correction_api():
    """(correct_clip, FootPlant) from invkin (or invkin.animation), or (None, None)."""
    import invkin as _ik

    fn, plant = getattr(_ik, "correct_clip", None), getattr(_ik, "FootPlant", None)
    if fn is None:
        try:
            from .. import animation  # noqa: PLC0415 - optional module, written alongside
        except ImportError:
            return None, None
        fn, plant = getattr(animation, "correct_clip", None), getattr(animation, "FootPlant", None)
    return fn, plant


def _feet(frames) -> list:
    """Foot frames of a skeleton by name: "...foot" (else "...ankle"), End Sites excluded; at most 2."""
    for word in ("foot", "ankle"):
        feet = [f for f in frames if word in f.lower() and not f.lower().endswith("_end")]
        if feet:
            return feet[:2]
    return []


def _path_frames(out, dof: int):
    """Configurations (K, dof) from whatever ik.reach returned (array, object with a path)."""
    for c in [out] + (list(out) if isinstance(out, tuple) else []):
        for attr in ("qs", "path", "trajectory", "q"):
            v = getattr(c, attr, None)
            if isinstance(v, np.ndarray) and v.ndim == 2 and v.shape[1] == dof:
                return v
        if isinstance(c, np.ndarray) and c.ndim == 2 and c.shape[1] == dof:
            return c
    return None


# ------------------------------------------------------------------ the app


class ViewerApp:
    """A viser server showing one robot (or BVH skeleton) and solving IK for dragged targets.

    Args:
        robot: a :class:`Robot`, a bundled name, a ``.urdf`` path or a ``.bvh`` path (which also
            gives the clip to play).
        host, port: where the server listens (default localhost:8080; port 0 picks a free one).
        scene: one of :data:`SCENES`.
        clip: a BVH :class:`Clip` to play (default: the one read with a ``.bvh`` robot).
        method: solver name (default ``lm``; ``ccd`` for the tentacle).
        targets: frames that get a draggable target (default: the last frame; none for a BVH).
        timeout: time budget of one interactive solve [s].
        title: the panel's title.
        q0: (dof,) start configuration (default: neutral, or the clip's first frame).

    In-process API (used by the tests): :meth:`start`, :meth:`stop`, :attr:`url`,
    :attr:`current_q`, :meth:`set_target`, :meth:`move_target`, :meth:`target_position`,
    :meth:`set_method`, :meth:`set_q`, :attr:`last_result`, :attr:`status`.
    """

    def __init__(self, robot="panda", host: str = "127.0.0.1", port: int = 8080, *, scene: str = "ik",
                 clip=None, method: str | None = None, targets=None, timeout: float = 0.02,
                 title: str | None = None, q0=None):
        from ..solvers import get_method

        if scene not in SCENES:
            raise ViewerError(f"unknown viewer scene {scene!r}; choose one of: {', '.join(SCENES)}")
        if isinstance(port, bool) or not isinstance(port, (int, np.integer)) or not 0 <= int(port) <= 65535:
            raise ViewerError(f"port must be an integer in [0, 65535], got {port!r}")
        if not isinstance(host, str) or not host:
            raise ViewerError(f"host must be a host name or address, got {host!r}")
        self.bvh = False
        if isinstance(robot, (str, os.PathLike)) and os.fspath(robot).lower().endswith(".bvh"):
            from ..model.bvh import read_bvh

            robot, file_clip = read_bvh(robot)
            clip = file_clip if clip is None else clip
            self.bvh = True
        elif not isinstance(robot, Robot):
            robot = load_robot(robot)
        if clip is not None:
            self.bvh = True
            if clip.dof != robot.dof:
                raise ViewerError(f"clip has {clip.dof} channels but robot {robot.name!r} has {robot.dof} DOF")
        self.robot = robot
        self.clip = clip
        self.scene = scene
        self.host = host
        self.requested_port = int(port)
        self.title = title or f"invkin · {robot.name}"
        if method is None:
            method = "ccd" if scene == "tentacle" else "lm"
        get_method(method)  # unknown names fail here, listing the valid ones
        self.method = method
        if not (isinstance(timeout, (int, float)) and timeout > 0 and math.isfinite(timeout)):
            raise ViewerError(f"timeout must be > 0 [s], got {timeout!r}")
        self.timeout = float(timeout)
        self.position_tolerance = 1e-4   # [m]
        self.rotation_tolerance = 1e-3   # [rad]
        self.damping = 0.1               # dls damping and the reach loop's λ
        self.match_orientation = False
        self.restarts = False
        self.fk_mode = False
        self.elbow_up = True
        self.reach_step = 0.01           # Δ [m] (SEEDS.md §1)
        self.reach_rate = 120.0          # straight-line steps per second
        self.sway = True
        self.playing = clip is not None
        self.clip_speed = 1.0
        self.clip_frame = 0
        self.corrected_frames = None
        self.correction_note = ""
        self.last_result = None
        self.status = "ready"
        self._solve_times = []
        self._warm = set()
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads = []
        self.server = None
        self._syncing = False
        self._gui = {}
        self._sliders = []
        self._gizmo_count = 0

        self.q = clip.frames[0].copy() if clip is not None else robot.neutral()
        if q0 is not None:
            self.q = robot.clamp(robot.check_q(q0, "q0"))
        if scene == "two-bone":
            self._init_two_bone()
        if scene == "reach":
            self._init_reach()
        if targets is None:
            targets = [] if self.bvh else [robot.frame_names[-1]]
        self._targets = []
        for f in targets:
            robot.frame_index(f)  # FrameError names close frames
            self._targets.append(self._new_target(f))
        if scene == "tentacle":
            self._init_tentacle()

    # ------------------------------------------------------------------ public API

    @property
    def port(self) -> int:
        """The port the server listens on (the requested one until started)."""
        return self.server.get_port() if self.server is not None else self.requested_port

    @property
    def url(self) -> str:
        host = self.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.server is not None and not self._stop.is_set()

    @property
    def current_q(self) -> np.ndarray:
        """A copy of the configuration shown (dof,)."""
        with self._lock:
            return self.q.copy()

    @property
    def target_frames(self) -> list:
        with self._lock:
            return [t.frame for t in self._targets]

    def target_position(self, frame: str | None = None) -> np.ndarray:
        """Position (3,) of the target on ``frame`` (default: the first target) in the base frame."""
        with self._lock:
            return self._target(frame).position.copy()

    def frame_position(self, frame: str) -> np.ndarray:
        """Where ``frame`` is at the current configuration (3,)."""
        with self._lock:
            return self.robot.fk(self.q, frame)[:3, 3].copy()

    def start(self) -> "ViewerApp":
        """Compile the kernels, then start serving; returns self. Raises ViewerError."""
        viser = _import_viser()
        _check_port_free(self.host, self.requested_port)
        with self._lock:
            self._warm_up(self.method)
            self._initial_solve()
        with contextlib.redirect_stdout(io.StringIO()):  # viser prints a banner; the CLI prints the URL
            server = viser.ViserServer(host=self.host, port=self.requested_port, label=self.title, verbose=False)
        if self.requested_port and server.get_port() != self.requested_port:
            server.stop()  # viser moves to the next port when the one asked for is taken
            raise PortInUseError(f"port {self.requested_port} is already in use on {self.host}; choose "
                                 f"another with --port")
        server.request_share_url = lambda *a, **k: None  # never open a public tunnel
        self.server = server
        self._gui, self._sliders, self._gizmo_count = {}, [], 0  # a restarted app builds its GUI again
        for t in self._targets:
            t.handle = None
        try:
            server.gui.configure_theme(show_share_button=False, show_logo=False, control_width="medium")
            with self._lock:
                self._build_scene()
                self._build_gui()
                self._redraw()
            self._stop.clear()
            for fn, nm in ((self._solver_loop, "solver"), (self._ticker_loop, "ticker")):
                t = threading.Thread(target=fn, name=f"invkin-viewer-{nm}", daemon=True)
                t.start()
                self._threads.append(t)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the threads and the server (idempotent)."""
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            t.join(timeout=5.0)
        self._threads = []
        server, self.server = self.server, None
        if server is not None:
            with contextlib.redirect_stdout(io.StringIO()):
                server.stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until :meth:`stop` (or the timeout [s]); True when stopped."""
        return self._stop.wait(timeout)

    def set_target(self, position, frame: str | None = None, wxyz=None, solve: bool = True):
        """Move (or create) the target on ``frame`` to ``position`` (3,) [m, base frame].

        Solves at once (in the caller's thread) and returns the :class:`Result`; the two-bone
        scene returns ``(theta1, theta2)``; the reach scene starts the straight-line motion and
        returns None (see :meth:`wait_reach`).
        """
        p = np.array(position, dtype=float) if not isinstance(position, str) else np.zeros(0)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            raise ViewerError(f"set_target: expected a finite point of shape (3,) [m], got {position!r}")
        with self._lock:
            if self.scene == "two-bone" and frame == "arm3d":
                self.arm3d_target = p.copy()
                if self.server is not None:
                    self._arm3d_gizmo.position = p
                return self._solve_two_bone()
            t = self._target(frame, create=True)
            t.position = p.copy()
            if wxyz is not None:
                w = np.asarray(wxyz, dtype=float).reshape(4)
                t.wxyz = w / np.linalg.norm(w)
            if t.handle is not None:
                t.handle.position = t.position
                t.handle.wxyz = t.wxyz
            self._pause()
            if not solve:
                return None
            return self._on_target_moved()

    def move_target(self, dx: float = 0.0, dy: float = 0.0, dz: float = 0.0, frame: str | None = None):
        """Shift a target by (dx, dy, dz) [m] (the arrow keys) and solve."""
        with self._lock:
            p = self._target(frame).position + (dx, dy, dz)
            return self.set_target(p, frame)

    def set_method(self, name: str) -> None:
        from ..solvers import get_method

        get_method(name)
        with self._lock:
            if self._gui.get("method") is not None:
                self._sync(self._gui["method"], name)
            self._apply_method(name)

    def set_q(self, q) -> None:
        """Show configuration q (clamped into the limits); targets stay where they are."""
        with self._lock:
            self.q = self.robot.clamp(q)
            self._sync_sliders()
            self._redraw()

    def add_target(self, frame: str) -> None:
        with self._lock:
            self._target(frame, create=True)

    def remove_target(self, frame: str) -> None:
        with self._lock:
            t = self._target(frame)
            if t.handle is not None:
                t.handle.remove()
            self._targets.remove(t)
            self._redraw()

    def wait_reach(self, timeout: float = 10.0) -> bool:
        """Reach scene: wait until the straight-line motion stops; True when it did."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if not self._reaching:
                    return True
            time.sleep(0.02)
        return False

    # ------------------------------------------------------------------ targets and solving

    def _apply_method(self, name: str) -> None:
        from ..solvers import get_method

        self.method = name
        if self._gui.get("damping") is not None:  # only dls has a damping option
            self._gui["damping"].disabled = "damping" not in get_method(name).defaults
        self._wake.set()

    def _pause(self) -> None:
        """Stop the clip (a dragged target or FK mode takes over the pose)."""
        self.playing = False
        if self._gui.get("play") is not None:
            self._sync(self._gui["play"], False)

    def _new_target(self, frame: str, offset=None) -> _Target:
        T = self.robot.fk(self.q, frame)
        p = T[:3, 3].copy() if offset is None else T[:3, 3] + offset
        return _Target(frame, p, quats_wxyz(T[:3, :3]))

    def _target(self, frame: str | None, create: bool = False) -> _Target:
        if frame is None:
            if not self._targets:
                if not create:
                    raise ViewerError("there is no target; add one on a frame first")
                frame = self.robot.frame_names[-1]
            else:
                return self._targets[0]
        for t in self._targets:
            if t.frame == frame:
                return t
        if not create:
            raise ViewerError(f"no target on frame {frame!r}; targets: {[t.frame for t in self._targets]}")
        self.robot.frame_index(frame)
        t = self._new_target(frame)
        self._targets.append(t)
        if self.server is not None:
            self._add_gizmo(t)
        return t

    def _warm_up(self, method: str) -> None:
        """Compile a method's kernels once, so the first drag does not spend its budget in Numba."""
        if method in self._warm or self.scene in ("two-bone", "reach"):
            return
        from ..solve import solve

        frame = self._targets[0].frame if self._targets else self.robot.frame_names[-1]
        goal = G.Position(frame, self.robot.fk(self.q, frame)[:3, 3])
        try:
            solve(self.robot, [goal], q0=self.q, method=method, timeout=None, max_iterations=3, restarts=False)
        except InvkinError:
            pass  # the real solve reports it
        self._warm.add(method)

    def _initial_solve(self) -> None:
        if self.scene == "two-bone":
            self._solve_two_bone()
        elif self.scene == "tentacle":
            self._solve_ik()
        elif self.scene == "reach" and self._targets:
            t = self._targets[0]
            t.position = np.array([1.2, -0.9, 1.6])  # the demo opens walking toward a target
            self._start_reach()

    def _goals(self, method) -> list:
        rot_ok = "rotation" in method.goal_kinds
        goals = []
        for t in self._targets:
            if self.match_orientation and rot_ok:
                T = np.eye(4)
                from ..spatial import quat_wxyz_to_matrix

                T[:3, :3] = quat_wxyz_to_matrix(t.wxyz)
                T[:3, 3] = t.position
                goals.append(G.Pose(t.frame, T, weight=t.weight))
            else:
                goals.append(G.Position(t.frame, t.position, weight=t.weight))
        return goals

    def _on_target_moved(self):
        if self.scene == "two-bone":
            return self._solve_two_bone()
        if self.scene == "reach":
            self._start_reach()
            return None
        if self.fk_mode:
            return None
        return self._solve_ik()

    def _solve_ik(self):
        """One solve toward the current targets, warm-started from q (under the lock)."""
        from ..solve import solve
        from ..solvers import get_method

        if not self._targets:
            return None
        m = get_method(self.method)
        if self.method not in self._warm:
            self.status = f"compiling {self.method} (first use)…"
            self._show_status()
            self._warm_up(self.method)
        opts = {"damping": self.damping} if "damping" in m.defaults else {}
        try:
            res = solve(self.robot, self._goals(m), q0=self.q, method=self.method,
                        position_tolerance=self.position_tolerance, rotation_tolerance=self.rotation_tolerance,
                        timeout=self.timeout, seed=0, restarts=self.restarts, **opts)
        except InvkinError as exc:
            self.status = f"error: {exc}"
            self._show_status()
            return None
        self.q = res.q.copy()
        self.last_result = res
        self._solve_times = (self._solve_times + [res.time])[-50:]
        note = ""
        if self.match_orientation and "rotation" not in m.goal_kinds:
            note = f" (orientation ignored: {m.name} takes position goals only)"
        self.status = (f"{res.status.value}: position error {res.position_error:.2e} m, rotation error "
                       f"{res.rotation_error:.2e} rad, {res.iterations} iterations, {1e3 * res.time:.2f} ms "
                       f"(mean {1e3 * float(np.mean(self._solve_times)):.2f} ms){note}")
        self._redraw()
        self._show_status()
        return res

    def _solver_loop(self) -> None:
        while not self._stop.is_set():
            if not self._wake.wait(0.2):
                continue
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                with self._lock:
                    if self.scene in ("ik", "tentacle") and not self.fk_mode:
                        self._solve_ik()
            except Exception as exc:  # keep serving; show what went wrong
                self.status = f"error: {type(exc).__name__}: {exc}"
                self._show_status()

    def _ticker_loop(self) -> None:
        t0 = time.monotonic()
        dt = 1.0 / TICK_HZ
        while not self._stop.wait(dt):
            try:
                with self._lock:
                    now = time.monotonic() - t0
                    if self.scene == "tentacle" and self.sway:
                        self._tick_sway(now)
                    if self.clip is not None and self.playing:
                        self._tick_clip(dt)
                    if self.scene == "reach" and self._reaching:
                        self._tick_reach(dt)
            except Exception as exc:
                self.status = f"error: {type(exc).__name__}: {exc}"
                self._show_status()

    # ------------------------------------------------------------------ scenes

    def _init_tentacle(self) -> None:
        self.sway_robot = self.robot
        self.sway_q = np.zeros(self.robot.dof)
        if self._targets:  # start bent: the target off to the side and lower
            self._targets[0].position = self._targets[0].position + (0.35, 0.0, -0.35)

    def _tick_sway(self, t: float) -> None:
        k = np.arange(self.sway_robot.dof)
        self.sway_q = 0.35 * np.sin(1.6 * t - 0.45 * k) * (0.4 + 0.6 * k / max(len(k) - 1, 1))
        if self.server is not None:
            self._sway_skel.update(self.sway_q)

    def _init_two_bone(self) -> None:
        from ..solvers.analytic import two_bone_lengths

        r = self.robot
        names = set(r.frame_names)
        if r.dof != 2 or not {"upper", "lower", "hand"} <= names:
            raise ViewerError(f"the two-bone scene needs the planar2 arm (frames upper, lower, hand), "
                              f"not {r.name!r}")
        q0 = np.zeros(2)
        rest = np.stack([r.fk(q0, f)[:3, 3] for f in ("upper", "lower", "hand")])
        l1, l2 = two_bone_lengths(rest)
        self.bone_lengths = (float(l1), float(l2))
        self.shoulder = rest[0].copy()
        self.arm3d_shoulder = np.array([0.0, 0.0, 0.0]) + (0.0, -2.4 * (l1 + l2) / 1.8, 0.0)
        self.arm3d_target = self.arm3d_shoulder + (1.1, 0.3, 0.6)
        self.arm3d_points = np.stack([self.arm3d_shoulder] * 3)
        self.two_bone_q = None
        self.q = np.array([0.6, -1.0])

    def _solve_two_bone(self):
        from ..solvers.analytic import two_bone_2d, two_bone_3d

        l1, l2 = self.bone_lengths
        if self._targets:
            t = self._targets[0].position - self.shoulder
            th1, th2 = two_bone_2d(l1, l2, t[:2], elbow_up=self.elbow_up)
            self.q = np.array([float(th1), float(th2)])
            b = float(np.hypot(t[0], t[1]))
            reach = ("reachable" if abs(l1 - l2) <= b <= l1 + l2 else
                     "out of reach: stretched toward it" if b > l1 + l2 else "too close: folded")
        else:
            th1 = th2 = float("nan")
            reach = "no target"
        pole = np.array([0.0, 0.0, 1.0 if self.elbow_up else -1.0])
        elbow, hand = two_bone_3d(self.arm3d_shoulder, l1, l2, self.arm3d_target, pole)
        self.arm3d_points = np.stack([self.arm3d_shoulder, elbow, hand])
        self.status = (f"2-D (two_bone_2d, elbow {'up' if self.elbow_up else 'down'}): θ1 = {float(th1):.3f}, "
                       f"θ2 = {float(th2):.3f} rad, {reach}; 3-D (two_bone_3d, pole {pole.tolist()}): "
                       f"hand error {np.linalg.norm(hand - self.arm3d_target):.2e} m")
        self._redraw()
        self._show_status()
        return self.q.copy()

    def _init_reach(self) -> None:
        from ..solve import reach_bound

        frame = self.robot.frame_names[-1]
        node, radius = reach_bound(self.robot, self.robot.frame_index(frame))
        self.reach_frame = frame
        self.reach_center = np.zeros(3) if node is None else self.robot.fk(self.robot.neutral(), node)[:3, 3]
        self.reach_radius = float(radius)
        self._reaching = False
        self._reach_path = None
        self._reach_steps = 0
        self._reach_fn = None
        try:
            import invkin as _ik

            self._reach_fn = getattr(_ik, "reach", None)
        except ImportError:  # pragma: no cover
            pass
        self.q = np.array([0.3, -0.4, 0.2, 0.5, 0.3, 0.0, 0.6, 0.2])[: self.robot.dof]
        if len(self.q) < self.robot.dof:
            self.q = self.robot.neutral()
        self.reach_start = self.robot.fk(self.q, frame)[:3, 3].copy()
        self._reaching = False

    def _start_reach(self) -> None:
        t = self._targets[0]
        x = self.robot.fk(self.q, t.frame)[:3, 3]
        self.reach_start = x.copy()
        self._reach_steps = 0
        self._reach_path = None
        if np.linalg.norm(t.position - self.reach_center) > self.reach_radius:
            self._reaching = False
            self.status = (f"out of workspace: the target is {np.linalg.norm(t.position - self.reach_center):.3f} "
                           f"from the base, beyond the reach radius {self.reach_radius:g}")
            self._redraw()
            self._show_status()
            return
        self._reach_result = None
        if self._reach_fn is not None:  # the library's own loop (invkin.reach), when present
            try:
                try:
                    out = self._reach_fn(self.robot, t.frame, t.position, step=self.reach_step, q0=self.q,
                                         damping=self.damping)
                except TypeError:
                    out = self._reach_fn(self.robot, t.frame, t.position, step=self.reach_step, q0=self.q)
                self._reach_path = _path_frames(out, self.robot.dof)
                self._reach_result = out
            except Exception as exc:  # another module's API: fall back to the viewer's own loop
                self._reach_fn = None
                self.status = f"ik.reach failed ({type(exc).__name__}: {exc}); using the viewer's own loop"
        self._reaching = True
        self._redraw()

    def _reach_iter(self) -> bool:
        """One straight-line step (SEEDS.md §1); False when the loop stops."""
        t = self._targets[0]
        if self._reach_path is not None:
            if self._reach_steps >= len(self._reach_path):
                r = self._reach_result
                st = getattr(getattr(r, "status", None), "value", getattr(r, "status", "done"))
                self.status = (f"ik.reach: {st} after {self._reach_steps} frames of Δ = {self.reach_step:g}, "
                               f"error {getattr(r, 'position_error', float('nan')):.2e} m, largest "
                               f"deviation from the line {getattr(r, 'max_deviation', float('nan')):.2e} m")
                return False
            self.q = self.robot.clamp(self._reach_path[self._reach_steps])
            self._reach_steps += 1
            return True
        T, J = self.robot.fk_jacobian(self.q, t.frame)
        e = t.position - T[:3, 3]
        d = float(np.linalg.norm(e))
        if d < 0.5 * self.reach_step:
            self.status = f"reached: error {d:.2e} m after {self._reach_steps} steps of Δ = {self.reach_step:g}"
            return False
        if self._reach_steps >= REACH_MAX_STEPS:
            self.status = f"stopped after {REACH_MAX_STEPS} steps, {d:.3f} from the target (singular posture?)"
            return False
        dx = self.reach_step * e / d
        Jv = J[:3]
        lam2 = self.damping ** 2
        dq = Jv.T @ np.linalg.solve(Jv @ Jv.T + lam2 * np.eye(3), dx)
        self.q = self.robot.clamp(self.q + dq)
        self._reach_steps += 1
        return True

    def _tick_reach(self, dt: float) -> None:
        n = max(1, int(round(self.reach_rate * dt)))
        for _ in range(n):
            if not self._reach_iter():
                self._reaching = False
                break
        else:
            d = np.linalg.norm(self._targets[0].position - self.robot.fk(self.q, self._targets[0].frame)[:3, 3])
            self.status = f"reaching: step {self._reach_steps}, {d:.3f} to go"
        self._redraw()
        self._show_status()

    def _correct_clip(self) -> None:
        """The clip corrected by ``invkin.correct_clip`` with its feet planted, when it exists."""
        fn, plant = _clip_correction_api()
        if fn is None:
            self.correction_note = ("**IK-corrected clip:** `invkin.correct_clip` is not available in this "
                                    "version, so the clip plays alone.")
            return
        feet = _feet(self.robot.frame_names)
        try:
            if plant is None or not feet:
                out = fn(self.robot, self.clip)
            else:
                out = fn(self.robot, self.clip, [plant(f) for f in feet])
            self.corrected_frames = _clip_frames(out, self.robot)
        except Exception as exc:  # another module's API: report, keep playing the original
            self.corrected_frames = None
            self.correction_note = (f"**IK-corrected clip:** `correct_clip` failed ({type(exc).__name__}: "
                                    f"{exc}); the clip plays alone.")
            return
        report = out[1] if isinstance(out, tuple) and len(out) > 1 else None
        before = getattr(report, "sliding_before", None)
        after = getattr(report, "sliding_after", None)
        sliding = ""
        if isinstance(before, dict) and isinstance(after, dict):
            sliding = " Foot sliding: " + ", ".join(
                f"{k} {before[k]:.3g} → {after.get(k, float('nan')):.3g}" for k in before) + " (units/s)."
        self.correction_note = (f"**Blue:** the clip as read. **Green, beside it:** `invkin.correct_clip` "
                                f"with {', '.join(feet) or 'no'} planted.{sliding}")

    def _tick_clip(self, dt: float) -> None:
        n = self.clip.n_frames
        step = self.clip_speed * dt / max(self.clip.frame_time, 1e-6)
        self._clip_pos = (getattr(self, "_clip_pos", float(self.clip_frame)) + step) % n
        self.clip_frame = int(self._clip_pos)
        self.q = self.clip.frames[self.clip_frame].copy()
        if self._gui.get("frame") is not None:
            self._sync(self._gui["frame"], self.clip_frame)
        self._redraw()

    # ------------------------------------------------------------------ drawing

    def _display_points(self, qs) -> np.ndarray:
        """Frame origins (B·n, 3) in the display frame for configurations qs (B, dof)."""
        P = self.robot.fk_all_array(np.atleast_2d(qs))[:, self.robot.is_frame, :3, 3].reshape(-1, 3)
        return P @ self._R_display.T

    def _build_scene(self) -> None:
        sc = self.server.scene
        # BVH files are y-up; the viewer is z-up
        self._R_display = _rot_x(math.pi / 2) if self.bvh else np.eye(3)
        wxyz = quats_wxyz(self._R_display)
        P = self._display_points(self.q)
        size = float(np.max(P.max(axis=0) - P.min(axis=0)))  # the figure: sets radii and gizmo sizes
        if self.scene == "reach":
            size = max(size, self.reach_radius)
        if self.scene == "two-bone":
            size = max(size, sum(self.bone_lengths))
        size = self.size = max(size, 1e-3)
        if self.clip is not None:  # the camera frames the whole clip (a walk leaves its start)
            P = np.vstack([P, self._display_points(self.clip.frames[:: max(1, self.clip.n_frames // 40)])])
        lo, hi = P.min(axis=0), P.max(axis=0)
        center, view = 0.5 * (lo + hi), max(size, float(np.max(hi - lo)))
        ground = -0.05 * size if self.scene == "two-bone" else 0.0  # the planar arm lies in z = 0
        if self.bvh:
            ground = float(lo[2])
        cell = 10.0 ** math.floor(math.log10(size / 4.0))
        width = 4.0 * (view + size)
        sc.add_grid("/grid", width=width, height=width, cell_size=cell, section_size=10 * cell,
                    fade_distance=30.0 * view, position=(center[0], center[1], ground))
        sc.add_frame("/robot", show_axes=False, wxyz=wxyz)
        show_axes = self.robot.n_nodes <= 24 and self.scene in ("ik", "reach") and not self.bvh
        self._skel = _Skeleton(sc, "/robot/skeleton", self.robot, size, axes=show_axes)
        for t in self._targets:
            self._add_gizmo(t)
        cam = self.server.initial_camera
        cam.near = 0.01 * size
        cam.far = 200.0 * view
        cam.look_at = tuple(center)
        if self.scene == "two-bone":  # above both arms: the planar one and the 3-D one beside it
            mid = 0.5 * (self.shoulder + self.arm3d_shoulder) + (0.5 * size, 0.0, 0.0)
            cam.look_at = tuple(mid)
            cam.position = tuple(mid + np.array([0.0, -1.3, 1.9]) * size)
        elif self.scene == "tentacle":  # both tentacles bend in x-z planes: look along +y
            cam.look_at = tuple(center + (-0.45 * size, 0.0, 0.0))
            cam.position = tuple(center + np.array([-0.2, -1.9, 0.45]) * size)
        else:
            cam.position = tuple(center + np.array([0.95, -1.25, 0.65]) * 0.5 * (view + size))
        if self.clip is not None:
            self._correct_clip()
            if self.corrected_frames is not None:
                sc.add_frame("/corrected", show_axes=False, wxyz=wxyz, position=(0.9 * size, 0.0, 0.0))
                self._corr_skel = _Skeleton(sc, "/corrected/skeleton", self.robot, size,
                                            link_color=_ALT_LINK_COLOR, joint_color=_ALT_JOINT_COLOR, axes=False)
        if self.scene == "tentacle":
            sc.add_frame("/sway", show_axes=False, position=(-1.0 * size, 0.0, 0.0))
            self._sway_skel = _Skeleton(sc, "/sway/skeleton", self.sway_robot, size,
                                        link_color=_ALT_LINK_COLOR, joint_color=_ALT_JOINT_COLOR, axes=False)
            sc.add_label("/sway/label", "FK: swaying", position=(0.0, 0.0, 1.15 * size))
            sc.add_label("/robot/label", "IK: arrow keys move the target", position=(0.0, 0.0, 1.15 * size))
        if self.scene == "two-bone":
            l1, l2 = self.bone_lengths
            self._arm3d = _Bones(sc, "/arm3d", 3, [(0, 1), (1, 2)], size, _ALT_LINK_COLOR, _ALT_JOINT_COLOR,
                                 axes=False)
            self._arm3d_gizmo = sc.add_transform_controls("/arm3d_target", scale=0.25 * size,
                                                          disable_rotations=True, position=self.arm3d_target)

            def moved3d(_event):
                with self._lock:
                    self.arm3d_target = np.array(self._arm3d_gizmo.position, dtype=float)
                    self._solve_two_bone()

            self._arm3d_gizmo.on_update(moved3d)
            sc.add_label("/labels/arm2d", "2-D: two_bone_2d (planar2)", position=(0.0, 0.0, 0.3 * size))
            sc.add_label("/labels/arm3d", "3-D: two_bone_3d (pole ±z)",
                         position=tuple(self.arm3d_shoulder + (0.0, 0.0, 0.3 * size)))
        if self.scene == "reach":
            self._reach_line_key = None
            sc.add_icosphere("/reach_center", radius=0.02 * size, color=(150, 150, 150),
                             position=tuple(self.reach_center))

    def _add_gizmo(self, t: _Target) -> None:
        sc = self.server.scene
        k = self._gizmo_count
        self._gizmo_count += 1
        kw = {}
        if self.scene == "tentacle":
            kw = dict(active_axes=(True, False, True), disable_rotations=True)
        elif self.scene in ("two-bone",):
            kw = dict(active_axes=(True, True, False), disable_rotations=True)
        elif self.scene == "reach":
            kw = dict(disable_rotations=True)
        h = sc.add_transform_controls(f"/robot/targets/{k}", scale=0.22 * self.size, position=t.position,
                                      wxyz=t.wxyz, depth_test=False, **kw)
        t.handle = h

        def moved(_event, t=t):
            with self._lock:
                t.position = np.array(h.position, dtype=float)
                t.wxyz = np.array(h.wxyz, dtype=float)
                self._pause()
                if self.scene in ("two-bone", "reach"):
                    self._on_target_moved()
                    return
            self._wake.set()

        h.on_update(moved)

    def _redraw(self) -> None:
        if self.server is None:
            return
        with self.server.atomic():
            self._skel.update(self.q)
            if getattr(self, "_corr_skel", None) is not None and self.corrected_frames is not None:
                self._corr_skel.update(self.corrected_frames[self.clip_frame % len(self.corrected_frames)])
            if self.scene == "two-bone":
                self._arm3d.update(self.arm3d_points)
            if self.scene == "reach" and self._targets:
                key = (tuple(self.reach_start), tuple(self._targets[0].position))
                if key != self._reach_line_key:
                    self._reach_line_key = key
                    seg = np.array([[self.reach_start, self._targets[0].position]])
                    self.server.scene.add_line_segments("/reach_line", seg, (200, 80, 200),
                                                        thickness=0.006 * self.size)

    def _show_status(self) -> None:
        h = self._gui.get("status")
        if h is not None:
            h.content = f"**{self.method if self.scene in ('ik', 'tentacle') else self.scene}** — {self.status}"

    # ------------------------------------------------------------------ GUI

    def _sync(self, handle, value) -> None:
        """Set a GUI value without running our own callbacks."""
        self._syncing = True
        try:
            handle.value = value
        finally:
            self._syncing = False

    def _sync_sliders(self) -> None:
        for i, s in enumerate(self._sliders):
            self._sync(s, float(np.clip(self.q[i], s.min, s.max)))

    def _build_gui(self) -> None:
        from ..solvers import get_method, methods

        gui = self.server.gui
        r = self.robot
        head = {"ik": "drag a target; the server solves", "tentacle": "arrow keys move the target",
                "two-bone": "closed-form two-bone IK", "reach": "straight-line reach (SEEDS §1)"}[self.scene]
        gui.add_markdown(f"**invkin** · `{r.name}` · {r.dof} DOF · {head}")
        self._gui["status"] = gui.add_markdown("")
        self._show_status()

        def guarded(fn):
            def cb(event):
                if self._syncing:
                    return
                with self._lock:
                    fn(event.target.value)
            return cb

        if self.scene in ("ik", "tentacle"):
            with gui.add_folder("Solver"):
                h = gui.add_dropdown("method", tuple(methods()), initial_value=self.method)
                self._gui["method"] = h

                h.on_update(guarded(self._apply_method))
                h = gui.add_number("position tol [m]", self.position_tolerance, min=1e-9, max=1.0, step=1e-5)
                h.on_update(guarded(lambda v: (setattr(self, "position_tolerance", max(float(v), 1e-9)),
                                               self._wake.set())))
                h = gui.add_number("rotation tol [rad]", self.rotation_tolerance, min=1e-9, max=1.0, step=1e-4)
                h.on_update(guarded(lambda v: (setattr(self, "rotation_tolerance", max(float(v), 1e-9)),
                                               self._wake.set())))
                h = gui.add_slider("weight", 0.1, 10.0, 0.1, 1.0,
                                   hint="goal weight of the target on the selected frame")
                self._gui["weight"] = h

                def set_weight(v):
                    try:
                        self._target(self._gui["frame_pick"].value).weight = float(v)
                    except ViewerError:
                        return
                    self._wake.set()

                h.on_update(guarded(set_weight))
                h = gui.add_slider("damping", 0.001, 1.0, 0.001, self.damping,
                                   disabled="damping" not in get_method(self.method).defaults,
                                   hint="λ of damped least squares (dls)")
                self._gui["damping"] = h
                h.on_update(guarded(lambda v: (setattr(self, "damping", float(v)), self._wake.set())))
                h = gui.add_number("time budget [ms]", 1e3 * self.timeout, min=1.0, max=1000.0, step=1.0)
                h.on_update(guarded(lambda v: setattr(self, "timeout", max(float(v), 1.0) * 1e-3)))
                h = gui.add_checkbox("match orientation", self.match_orientation,
                                     hint="Pose goals (position + the gizmo's orientation)")
                h.on_update(guarded(lambda v: (setattr(self, "match_orientation", bool(v)), self._wake.set())))
                h = gui.add_checkbox("random restarts", self.restarts,
                                     hint="off: the pose moves continuously from the current q")
                h.on_update(guarded(lambda v: (setattr(self, "restarts", bool(v)), self._wake.set())))
            with gui.add_folder("Targets"):
                frames = tuple(r.frame_names)
                init = self._targets[0].frame if self._targets else frames[-1]
                h = gui.add_dropdown("frame", frames, initial_value=init)
                self._gui["frame_pick"] = h

                def pick(v):
                    for t in self._targets:
                        if t.frame == v:
                            self._sync(self._gui["weight"], float(np.clip(t.weight, 0.1, 10.0)))

                h.on_update(guarded(pick))
                b = gui.add_button("add target on frame")
                b.on_click(lambda _e: (self.add_target(self._gui["frame_pick"].value), self._wake.set()))
                b = gui.add_button("remove target on frame")

                def remove(_e):
                    try:
                        self.remove_target(self._gui["frame_pick"].value)
                    except ViewerError as exc:
                        self.status = str(exc)
                        self._show_status()

                b.on_click(remove)
                b = gui.add_button("targets to the frames")

                def snap(_e):
                    with self._lock:
                        for t in self._targets:
                            T = self.robot.fk(self.q, t.frame)
                            t.position, t.wxyz = T[:3, 3].copy(), quats_wxyz(T[:3, :3])
                            t.handle.position, t.handle.wxyz = t.position, t.wxyz

                b.on_click(snap)
            self._build_fk_gui()
        if self.scene == "tentacle":
            with gui.add_folder("Tentacle"):
                gui.add_markdown("Arrow keys (click the 3-D view first) or the buttons move the target "
                                 f"by {ARROW_STEP} m in the bending (x–z) plane.")
                keys = {"left": (-ARROW_STEP, 0.0, 0.0), "right": (ARROW_STEP, 0.0, 0.0),
                        "up": (0.0, 0.0, ARROW_STEP), "down": (0.0, 0.0, -ARROW_STEP)}
                g = gui.add_button_group("move target", ("←", "→", "↑", "↓"))
                arrows = dict(zip(("←", "→", "↑", "↓"), keys.values()))
                g.on_click(lambda e: self.move_target(*arrows[e.target.value]))
                for k, d in keys.items():
                    c = gui.add_command(f"Move the target {k}", hotkey=f"arrow{k}",
                                        description=f"tentacle target {d} m")
                    c.on_trigger(lambda _e, d=d: self.move_target(*d))
                h = gui.add_checkbox("sway (FK tentacle)", self.sway)
                h.on_update(guarded(lambda v: setattr(self, "sway", bool(v))))
        if self.scene == "two-bone":
            with gui.add_folder("Two-bone"):
                gui.add_markdown("Drag the targets. Left arm: `two_bone_2d` on `planar2` (target in the "
                                 "x–y plane); right arm: `two_bone_3d` with the pole along ±z.")
                h = gui.add_dropdown("elbow", ("up", "down"), initial_value="up" if self.elbow_up else "down")

                def elbow(v):
                    self.elbow_up = v == "up"
                    self._solve_two_bone()

                h.on_update(guarded(elbow))
        if self.scene == "reach":
            with gui.add_folder("Reach"):
                src = "`invkin.reach`" if self._reach_fn is not None else "the viewer's loop"
                gui.add_markdown(f"Drag the target: the effector walks a straight line in steps of Δ "
                                 f"(damped pseudo-inverse, {src}). Beyond radius {self.reach_radius:g}: "
                                 f"out of workspace.")
                h = gui.add_slider("step Δ", 0.002, 0.1, 0.001, self.reach_step)
                h.on_update(guarded(lambda v: setattr(self, "reach_step", float(v))))
                h = gui.add_slider("steps per second", 10, 600, 10, int(self.reach_rate))
                h.on_update(guarded(lambda v: setattr(self, "reach_rate", float(v))))
                h = gui.add_slider("damping λ", 0.001, 1.0, 0.001, self.damping)
                h.on_update(guarded(lambda v: setattr(self, "damping", float(v))))
        if self.clip is not None:
            with gui.add_folder("Clip"):
                gui.add_markdown(f"{self.clip.n_frames} frames at {self.clip.fps:.1f} fps. "
                                 f"{self.correction_note}")
                h = gui.add_checkbox("play", self.playing)
                self._gui["play"] = h
                h.on_update(guarded(lambda v: setattr(self, "playing", bool(v))))
                h = gui.add_slider("frame", 0, max(self.clip.n_frames - 1, 1), 1, 0)
                self._gui["frame"] = h

                def seek(v):
                    self._pause()
                    self.clip_frame = int(v)
                    self._clip_pos = float(v)
                    self.q = self.clip.frames[self.clip_frame].copy()
                    self._redraw()

                h.on_update(guarded(seek))
                h = gui.add_slider("speed", 0.1, 3.0, 0.1, 1.0)
                h.on_update(guarded(lambda v: setattr(self, "clip_speed", float(v))))
        with gui.add_folder("Display", expand_by_default=False):
            h = gui.add_checkbox("frame axes", self._skel.bones.show_axes)
            h.on_update(guarded(lambda v: setattr(self._skel.bones, "show_axes", bool(v))))
            b = gui.add_button("reset pose")

            def reset(_e):
                with self._lock:
                    self.q = self.robot.neutral() if self.clip is None else self.clip.frames[0].copy()
                    self._sync_sliders()
                    self._redraw()
                self._wake.set()

            b.on_click(reset)

    def _build_fk_gui(self) -> None:
        gui = self.server.gui
        r = self.robot
        with gui.add_folder("FK mode", expand_by_default=False):
            h = gui.add_checkbox("FK mode (joint sliders)", False,
                                 hint="move joints directly; targets stop solving")

            def set_fk(v):
                self.fk_mode = bool(v)
                if v:
                    self._pause()
                for s in self._sliders:
                    s.disabled = not v
                for t in self._targets:
                    if t.handle is not None:
                        t.handle.visible = not v
                if v:
                    self._sync_sliders()
                else:  # back to IK: the targets start where the frames are
                    for t in self._targets:
                        T = r.fk(self.q, t.frame)
                        t.position, t.wxyz = T[:3, 3].copy(), quats_wxyz(T[:3, :3])
                        if t.handle is not None:
                            t.handle.position, t.handle.wxyz = t.position, t.wxyz

            h.on_update(lambda e: None if self._syncing else self._locked(set_fk, e.target.value))
            self._gui["fk"] = h
            n = min(r.dof, MAX_SLIDERS)
            if r.dof > n:
                gui.add_markdown(f"(first {n} of {r.dof} joints)")
            types = r.joint_types_per_dof
            span = self.size if self.bvh else 1.0
            for i in range(n):
                lo, hi = float(r.lower[i]), float(r.upper[i])
                if not math.isfinite(lo) or not math.isfinite(hi):
                    lo, hi = (-span, span) if types[i] == "prismatic" else (-math.pi, math.pi)
                s = gui.add_slider(r.joint_names[i], lo, hi, (hi - lo) / 1000.0,
                                   float(np.clip(self.q[i], lo, hi)), disabled=True)

                def moved(e, i=i):
                    if self._syncing or not self.fk_mode:
                        return
                    with self._lock:
                        q = self.q.copy()
                        q[i] = float(e.target.value)
                        self.q = r.clamp(q)
                        self._redraw()

                s.on_update(moved)
                self._sliders.append(s)

    def _locked(self, fn, *a):
        with self._lock:
            return fn(*a)


def demo_app(name: str = "panda", host: str = "127.0.0.1", port: int = 8080) -> ViewerApp:
    """The viewer for one of :data:`DEMOS` (not started)."""
    if name == "panda":
        ready = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]  # the panda's usual "ready" pose [rad]
        return ViewerApp("panda", host, port, targets=["panda_hand"], title="invkin demo · panda", q0=ready)
    if name == "tentacle":
        return ViewerApp(load_robot("tentacle", n=12), host, port, scene="tentacle", method="ccd",
                         targets=["tip"], title="invkin demo · tentacle")
    if name == "two-bone":
        return ViewerApp("planar2", host, port, scene="two-bone", targets=["hand"], title="invkin demo · two-bone")
    if name == "reach":
        return ViewerApp("seed8dof", host, port, scene="reach", targets=["effector"],
                         title="invkin demo · straight-line reach")
    raise ViewerError(f"unknown demo {name!r}; choose one of: {', '.join(DEMOS)}")
