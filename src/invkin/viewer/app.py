"""The browser viewer: a viser server that draws a robot or a BVH skeleton and solves on the server.

A robot with visual shapes (``robot.visuals``, from the URDF's ``<visual>``) is drawn with its
meshes and primitives in their colours (``meshes.py``; ``sticks=True`` / ``--sticks`` keeps the
kinematic drawing); otherwise, and as a Display toggle, drawing is kinematic: every frame origin is
a sphere, each frame is linked to its nearest frame ancestor by a cylinder, and frame axes are
optional. Collision shapes (``robot.collisions``) are a Display toggle when the robot has any; while shown,
links in contact (closer than ``contact_margin``) are drawn red.
It opens in :func:`~invkin.viewer.pose.start_pose` (zeros inside the limits) unless given ``q0``;
a robot whose shapes reach below z = 0 there (a pelvis root) is lifted onto the ground.
Targets are viser transform gizmos; moving
one wakes a solver thread that runs ``ik.solve`` warm-started from the current ``q`` with a small
time budget (default 20 ms, no random restarts, so the pose moves continuously) and redraws.

Scenes (``ViewerApp(scene=...)``):

* ``ik``: any robot or skeleton. Targets on chosen frames, a method picker, tolerances, the
  goal weight, damping (for methods that have a ``damping`` option, and the reach loop), FK mode
  with joint sliders (every DOF). A BVH file also plays its clip, turned from its up axis to the
  viewer's +z, its IK-corrected version (``invkin.correct_clip``) drawn over the ghost of the clip
  as read (``character.py``). A retargeted motion (``motion=``, a ``.npz``) plays on the robot
  with its source clip beside it on the same time slider (``motion.py``).
* ``tentacle``: the tip of a tentacle follows a target moved by the arrow keys (viser commands
  with hotkeys, so the browser page sends them) or buttons; a second tentacle sways by FK alone
  (SEEDS.md §4): ``q_k(t) = A sin(ω t − k φ)``.
* ``two-bone``: the planar arm ``planar2`` solved in closed form by :func:`two_bone_2d` with an
  elbow up/down switch, and a 3-D two-bone arm by :func:`two_bone_3d` with a pole direction.
* ``reach``: the straight-line reach of SEEDS.md §1 on ``seed8dof``: each animation frame steps
  the effector ``Δ`` toward the target, ``δθ = Jᵀ(J Jᵀ + λ² I)⁻¹ δx`` (damped pseudo-inverse), and
  a target beyond the reach radius (3) is refused as "out of workspace".

All state changes go through one re-entrant lock; viser callbacks run in its thread pool.
viser listens on a loopback port of its own; the port the user asked for belongs to
:class:`~invkin.viewer.front.FrontDoor`, which passes websockets to viser and gives every other
HTTP request a proper reply (405 with ``Allow``, 404 with a body, HEAD like GET).
"""
from __future__ import annotations

import contextlib
import io
import math
import os
import threading
import time

import numpy as np

from .. import goals as G
from ..errors import InvkinError
from ..model import load_robot
from ..model.robot import Robot
from .character import CharacterMixin, clip_up_axis, up_rotation
from .draw import DrawMixin
from . import DEMOS
from .errors import PortInUseError, ViewerError, _check_port_free, _import_viser, _quiet_client_errors
from .front import _ADDR_IN_USE, FrontDoor
from .gui import GuiMixin
from .motion import MotionMixin, motion_view
from .pose import start_pose
from .scenes import ScenesMixin
from .targets import TargetsMixin

__all__ = ["ViewerApp", "ViewerError", "PortInUseError", "demo_app", "SCENES", "DEMOS"]

SCENES = ("ik", "tentacle", "two-bone", "reach")

TICK_HZ = 30.0           # animation rate of the background ticker [Hz]


class ViewerApp(TargetsMixin, ScenesMixin, CharacterMixin, MotionMixin, DrawMixin, GuiMixin):
    """A viser server showing one robot (or BVH skeleton) and solving IK for dragged targets.

    Args:
        robot: a :class:`Robot`, a bundled name, a ``.urdf`` path, a ``.bvh`` path (which also
            gives the clip to play) or a motion ``.npz`` (as ``motion=``); default ``panda``, or
            with ``motion``, the robot the motion file records.
        host, port: where the server listens (default localhost:8080; port 0 picks a free one).
        scene: one of :data:`SCENES`.
        clip: a BVH :class:`Clip` to play (default: the one read with a ``.bvh`` robot).
        method: solver name (default ``lm``; ``ccd`` for the tentacle).
        targets: frames that get a draggable target, or one frame name (default: the last frame;
            none for a BVH).
        timeout: time budget of one interactive solve [s].
        title: the panel's title.
        q0: (dof,) start configuration (default: :func:`start_pose`, or the clip's first frame).
        method_options: ``{method: {option: value}}`` passed to that method's solves (e.g.
            ``{"ccd": {"variant": "simple", "threshold": "article"}}``, the article's CCD).
        sticks: draw the kinematic stick figure even when the robot has visual shapes.
        motion: a :class:`~invkin.retarget.motion.RobotMotion` or its ``.npz`` to play on the robot.
        source: the motion's source clip (a BVH/glTF path or a (skeleton, Clip) pair) to play beside
            it (default: the clip the file records, when it exists).
        up: a clip's up axis (one of :data:`~invkin.viewer.character.UP_AXES`, checked for any robot and
            used only with a clip; default: detected).
        max_faces: triangles kept per mesh file (default
            :data:`~invkin.viewer.meshes.DEFAULT_MAX_FACES`; larger files are decimated once and
            cached).

    In-process API (used by the tests): :meth:`start`, :meth:`stop`, :attr:`url`,
    :attr:`current_q`, :meth:`set_target`, :meth:`move_target`, :meth:`target_position`,
    :meth:`set_method`, :meth:`set_q`, :attr:`last_result`, :attr:`status`.
    """

    def __init__(self, robot=None, host: str = "127.0.0.1", port: int = 8080, *, scene: str = "ik",
                 clip=None, method: str | None = None, targets=None, timeout: float = 0.02,
                 title: str | None = None, q0=None, method_options: dict | None = None,
                 sticks: bool = False, max_faces: int | None = None, up: str | None = None,
                 motion=None, source=None):
        from ..solvers import get_method

        if scene not in SCENES:
            raise ViewerError(f"unknown viewer scene {scene!r}; choose one of: {', '.join(SCENES)}")
        if isinstance(port, bool) or not isinstance(port, (int, np.integer)) or not 0 <= int(port) <= 65535:
            raise ViewerError(f"port must be an integer in [0, 65535], got {port!r}")
        if not isinstance(host, str) or not host:
            raise ViewerError(f"host must be a host name or address, got {host!r}")
        self.bvh = False
        if isinstance(robot, (str, os.PathLike)) and os.fspath(robot).lower().endswith(".npz"):
            motion, robot = robot if motion is None else motion, None
        self.motion = None
        if motion is not None:
            if clip is not None or scene != "ik":
                raise ViewerError("a motion plays in the 'ik' scene without a clip (its source goes in source=)")
            self.motion = motion_view(motion, robot, source)
            robot = self.motion.robot
            targets = [] if targets is None else targets
        elif source is not None:
            raise ViewerError("source= is the source clip of a motion; give the motion too (motion=)")
        if robot is None:
            robot = "panda"
        if isinstance(robot, (str, os.PathLike)) and os.fspath(robot).lower().endswith(".bvh"):
            from ..model.bvh import read_bvh

            robot, file_clip = read_bvh(robot)
            clip = file_clip if clip is None else clip
            self.bvh = True
        elif isinstance(robot, (str, os.PathLike)) and os.fspath(robot).lower().endswith((".gltf", ".glb")):
            robot, file_clip = _read_gltf(robot)
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
        self.sticks = bool(sticks)
        if max_faces is None:
            from .meshes import DEFAULT_MAX_FACES as max_faces
        if isinstance(max_faces, bool) or not isinstance(max_faces, (int, np.integer)) or max_faces < 16:
            raise ViewerError(f"max_faces must be an integer >= 16, got {max_faces!r}")
        self.max_faces = int(max_faces)
        self._shapes = self._collision_shapes = None
        self.contacts = ()            # links in contact, while the collision shapes are shown
        self.contact_margin = 0.005   # [m]
        self.world = None             # an ik.World whose obstacles count for contacts
        self.mesh_note = ""
        self.up_axis, self.up_note = "z", ""
        if up is not None:
            up_rotation(up)  # unknown names fail here, listing the valid ones (a robot ignores a valid one)
        if self.bvh:
            if up is not None:
                self.up_axis, self.up_note = up, "given (--up)"
            else:
                self.up_axis, self.up_note = clip_up_axis(robot, clip)
        self._R_display = up_rotation(self.up_axis) if self.bvh else np.eye(3)  # clip up -> viewer +z
        self.clip_overlay = True     # the corrected clip over the ghost of the clip as read
        self.onion_skin = False
        self.show_trails = True
        self.follow_root = False
        self._clip_report = None
        self.scene = scene
        self.host = host
        self.requested_port = int(port)
        self.title = title or f"invkin · {robot.name}"
        if method is None:
            method = "ccd" if scene == "tentacle" else "lm"
        get_method(method)  # unknown names fail here, listing the valid ones
        self.method = method
        self.method_options = dict(method_options or {})
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
        self.playing = clip is not None or self.motion is not None
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
        self._front = None            # front.FrontDoor on the public port, while serving
        self._syncing = False
        self._gui = {}
        self._sliders = []
        self._gizmo_count = 0

        if self.motion is not None:
            self.q = self.motion.frames[0].copy()
        else:
            self.q = clip.frames[0].copy() if clip is not None else start_pose(robot)
        if q0 is not None:
            self.q = robot.clamp(robot.check_q(q0, "q0"))
        self.q_start = self.q.copy()  # "reset pose" returns here
        if scene == "two-bone":
            self._init_two_bone()
        if scene == "reach":
            self._init_reach()
        if targets is None:
            targets = [] if self.bvh else [robot.frame_names[-1]]
        elif isinstance(targets, str):
            targets = [targets]  # one frame name
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
        return self._front.port if self._front is not None else self.requested_port

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

    def frame_position(self, frame: str) -> np.ndarray:
        """Where ``frame`` is at the current configuration (3,)."""
        with self._lock:
            return self.robot.fk(self.q, frame)[:3, 3].copy()

    def start(self) -> "ViewerApp":
        """Compile the kernels, then start serving; returns self. Raises ViewerError."""
        viser = _import_viser()
        _check_port_free(self.host, self.requested_port)
        _quiet_client_errors()  # a page sending a bad message: one line on stderr, not a traceback
        with self._lock:
            self._warm_up(self.method)
            self._initial_solve()
        with contextlib.redirect_stdout(io.StringIO()):  # viser prints a banner; the CLI prints the URL
            # viser on a loopback port of its own; the front door owns the one asked for and
            # gives every HTTP request a proper reply (front.py: websockets answers only GET)
            server = viser.ViserServer(host="127.0.0.1", port=0, label=self.title, verbose=False)
        server.request_share_url = lambda *a, **k: None  # never open a public tunnel
        try:
            self._front = FrontDoor(self.host, self.requested_port, server.get_port()).start()
        except OSError as exc:
            with contextlib.redirect_stdout(io.StringIO()):
                server.stop()
            if exc.errno in _ADDR_IN_USE:
                raise PortInUseError(f"port {self.requested_port} is already in use on {self.host}; choose "
                                     f"another with --port") from None
            raise ViewerError(f"cannot bind the viewer to {self.host}:{self.requested_port}: "
                              f"{exc.strerror or exc}") from None
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
        front, self._front = self._front, None
        if front is not None:
            front.stop()
        server, self.server = self.server, None
        if server is not None:
            with contextlib.redirect_stdout(io.StringIO()):
                server.stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until :meth:`stop` (or the timeout [s]); True when stopped."""
        return self._stop.wait(timeout)

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

    # ------------------------------------------------------------------ solving

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
        opts.update(self.method_options.get(self.method, {}))
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
                    if self.motion is not None and self.playing:
                        self._tick_motion(dt)
                    if self.scene == "reach" and self._reaching:
                        self._tick_reach(dt)
            except Exception as exc:
                self.status = f"error: {type(exc).__name__}: {exc}"
                self._show_status()


def _read_gltf(path):
    """(skeleton, clip) of a glTF file through ``invkin.read_gltf``, when this invkin has it."""
    try:
        from ..model.gltf import read_gltf  # noqa: PLC0415 - the glTF reader may be absent
    except ImportError:
        raise ViewerError(f"{os.fspath(path)}: glTF clips need invkin.read_gltf, which this version of "
                          f"invkin does not have; convert the clip to BVH") from None
    return read_gltf(path)


def demo_app(name: str = "panda", host: str = "127.0.0.1", port: int = 8080, *,
             article_ccd: bool = False) -> ViewerApp:
    """The viewer for one of :data:`DEMOS` (not started). ``article_ccd``: the tentacle follows its
    target with the article's CCD (SEEDS.md §4: simple variant, 0.001 rad skip threshold)."""
    if name == "panda":
        ready = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]  # the panda's usual "ready" pose [rad]
        return ViewerApp("panda", host, port, targets=["panda_hand"], title="invkin demo · panda", q0=ready)
    if name == "tentacle":
        article = {"ccd": {"variant": "simple", "threshold": "article"}} if article_ccd else None
        return ViewerApp(load_robot("tentacle", n=12), host, port, scene="tentacle", method="ccd",
                         targets=["tip"], title="invkin demo · tentacle", method_options=article)
    if name == "two-bone":
        return ViewerApp("planar2", host, port, scene="two-bone", targets=["hand"], title="invkin demo · two-bone")
    if name == "reach":
        return ViewerApp("seed8dof", host, port, scene="reach", targets=["effector"],
                         title="invkin demo · straight-line reach")
    raise ViewerError(f"unknown demo {name!r}; choose one of: {', '.join(DEMOS)}")
