"""Drawing: skeletons as batched meshes (cylinder links, sphere joints, frame axes), link shapes,
and the scene.

:class:`_Bones` draws points joined by cylinders with one batched mesh per kind; :class:`_Skeleton`
draws a robot kinematically (each frame linked to its nearest frame ancestor); :class:`_LinkShapes`
draws the robot's own visual (or collision) shapes, one scene frame per link with its meshes as
children, moved by FK. :class:`DrawMixin` gives :class:`~invkin.viewer.ViewerApp` its scene (grid,
camera, the skeletons and shapes of each scene) and the redraw.
"""
from __future__ import annotations

import math

import numpy as np

from ..model.robot import Robot

_LINK_COLOR = (90, 160, 230)
_JOINT_COLOR = (250, 170, 60)
_ALT_LINK_COLOR = (120, 200, 120)
_ALT_JOINT_COLOR = (230, 90, 90)
_CONTACT_COLOR = (235, 30, 30)   # collision shapes of links closer than the contact margin


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


class _Bones:
    """Cylinders between points, spheres on the points, optional axes: one batched mesh each."""

    def __init__(self, scene, name: str, n_points: int, segments, size: float, link_color, joint_color,
                 axes: bool = True, opacity: float | None = None):
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
                cast_shadow=False, receive_shadow=False, opacity=opacity)
        V, F = _unit_sphere()
        self._joints = scene.add_batched_meshes_simple(
            f"{name}/joints", V, F, batched_wxyzs=ident[:n], batched_positions=np.zeros((n, 3)),
            batched_scales=np.full(n, self.r_joint), batched_colors=joint_color, side="double", lod="off",
            cast_shadow=False, receive_shadow=False, opacity=opacity)
        self._axes = scene.add_batched_axes(f"{name}/axes", ident[:n], np.zeros((n, 3)),
                                            axes_length=0.07 * size, axes_radius=0.004 * size, visible=axes)

    @property
    def visible(self) -> bool:
        return bool(self._joints.visible)

    @visible.setter
    def visible(self, v: bool) -> None:
        for h in (self._links, self._joints):
            if h is not None:
                h.visible = bool(v)

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
                 joint_color=_JOINT_COLOR, axes: bool = True, opacity: float | None = None):
        self.robot = robot
        self.nodes = np.flatnonzero(robot.is_frame)
        index = {int(i): k for k, i in enumerate(self.nodes)}
        fp = robot.frame_parent
        segs = [(index[int(fp[i])], k) for k, i in enumerate(self.nodes) if fp[i] >= 0]
        self.bones = _Bones(scene, name, len(self.nodes), segs, size, link_color, joint_color, axes, opacity)

    def update(self, q) -> np.ndarray:
        Ts = self.robot.fk_all_array(q)[self.nodes]
        self.bones.update(Ts[:, :3, 3], Ts[:, :3, :3])
        return Ts


class _LinkShapes:
    """A robot's link shapes (:class:`~invkin.model.geometry.Geometry`), each link a scene frame
    moved by FK with its meshes below it. ``errors`` lists the shapes that could not be drawn."""

    def __init__(self, scene, name: str, robot: Robot, geoms, max_faces: int, visible: bool = True,
                 opacity: float | None = None):
        from .meshes import MeshLoadError, geometry_parts

        self.robot = robot
        self.errors = []
        self.n_faces = 0
        by_link = {}
        for g in geoms:
            by_link.setdefault(g.link, []).append(g)
        self.nodes = np.array([robot.node_names.index(link) for link in by_link], dtype=np.int64)
        self.root = scene.add_frame(name, show_axes=False, visible=visible)
        self._frames = []
        self._corners = []  # (link k, (8, 3) bounding-box corners of a part in the link frame)
        self.links = tuple(by_link)
        self._meshes = [[] for _ in by_link]  # per link: (handle, its own colour)
        self.marked = frozenset()
        for k, (link, gs) in enumerate(by_link.items()):
            self._frames.append(scene.add_frame(f"{name}/{k}", show_axes=False))
            for j, g in enumerate(gs):
                try:
                    parts = geometry_parts(g, max_faces)
                except MeshLoadError as exc:
                    self.errors.append(str(exc))
                    continue
                T = g.T_link_geom
                for m, part in enumerate(parts):
                    self.n_faces += len(part.faces)
                    lo, hi = part.vertices.min(axis=0), part.vertices.max(axis=0)
                    box = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
                    self._corners.append((k, box @ T[:3, :3].T + T[:3, 3]))
                    alpha = part.opacity if opacity is None else opacity * part.opacity
                    rgb = tuple(int(round(255 * c)) for c in part.rgb)
                    h = scene.add_mesh_simple(
                        f"{name}/{k}/{j}_{m}", part.vertices, part.faces,
                        color=rgb,
                        opacity=None if alpha >= 1.0 else alpha, side="double",
                        position=tuple(T[:3, 3]), wxyz=tuple(quats_wxyz(T[:3, :3])),
                        cast_shadow=False, receive_shadow=False)
                    self._meshes[k].append((h, rgb))

    @property
    def visible(self) -> bool:
        return bool(self.root.visible)

    @visible.setter
    def visible(self, v: bool) -> None:
        self.root.visible = bool(v)

    def mark(self, links) -> None:
        """Draw the shapes of ``links`` (names) in the contact colour, every other link in its own."""
        links = frozenset(links)
        if links == self.marked:
            return
        for name, meshes in zip(self.links, self._meshes):
            if (name in links) != (name in self.marked):
                for h, rgb in meshes:
                    h.color = _CONTACT_COLOR if name in links else rgb
        self.marked = links

    def points(self, q) -> np.ndarray:
        """The corners (8·parts, 3) of the shapes' bounding boxes at configuration q (robot frame)."""
        if not self._corners:
            return np.zeros((0, 3))
        Ts = self.robot.fk_all_array(q)[self.nodes]
        return np.vstack([c @ Ts[k, :3, :3].T + Ts[k, :3, 3] for k, c in self._corners])

    def lowest(self, q) -> float:
        """The lowest z of the shapes' bounding boxes at configuration q (in the robot's frame)."""
        P = self.points(q)
        return float(P[:, 2].min()) if len(P) else float("inf")

    def update(self, q) -> None:
        if not len(self.nodes):
            return
        Ts = self.robot.fk_all_array(q)[self.nodes]
        W = quats_wxyz(Ts[:, :3, :3])
        for h, T, w in zip(self._frames, Ts, W):
            h.position = T[:3, 3]
            h.wxyz = w


class DrawMixin:
    """ViewerApp's scene: built once per start, redrawn after every change (under the lock)."""

    def _display_points(self, qs) -> np.ndarray:
        """Frame origins (B·n, 3) in the display frame for configurations qs (B, dof)."""
        P = self.robot.fk_all_array(np.atleast_2d(qs))[:, self.robot.is_frame, :3, 3].reshape(-1, 3)
        return P @ self._R_display.T

    def _build_scene(self) -> None:
        sc = self.server.scene
        # the viewer is z-up; a clip is turned from its own up axis (_R_display, set by the app)
        wxyz = quats_wxyz(self._R_display)
        self._robot_frame = sc.add_frame("/robot", show_axes=False, wxyz=wxyz)
        self._build_shapes(sc)
        P = self._display_points(self.q)
        if self._shapes is not None:  # the figure is its shapes' extent (a box is wider than its frames)
            P = np.vstack([P, self._shapes.points(self.q)])
        size = float(np.max(P.max(axis=0) - P.min(axis=0)))  # the figure: sets radii and gizmo sizes
        if self.scene == "reach":
            size = max(size, self.reach_radius)
        if self.scene == "two-bone":
            size = max(size, sum(self.bone_lengths))
        size = self.size = max(size, 1e-3)
        if self.clip is not None:  # the camera frames the whole clip (a walk leaves its start) ...
            Pc = self._display_points(self.clip.frames[:: max(1, self.clip.n_frames // 40)])
            travel = float(np.max(np.ptp(Pc[:, :2], axis=0)))
            self.follow_root = self.follow_root or travel > 1.5 * size  # ... or follows a long walk
            P = np.vstack([P, Pc]) if not self.follow_root else P
            ground_z = float(Pc[:, 2].min())
        if self.motion is not None:  # the camera frames the robot's path and the source beside it
            P = np.vstack([P, self._motion_points()])
        lo, hi = P.min(axis=0), P.max(axis=0)
        center, view = 0.5 * (lo + hi), max(size, float(np.max(hi - lo)))
        ground = -0.05 * size if self.scene == "two-bone" else 0.0  # the planar arm lies in z = 0
        if self.bvh:
            ground = min(float(lo[2]), ground_z)
        cell = 10.0 ** math.floor(math.log10(size / 4.0))
        width = 4.0 * (view + size) + (2.0 * travel if self.clip is not None else 0.0)
        self._grid_at = np.array([center[0], center[1], ground])
        self._grid = sc.add_grid("/grid", width=width, height=width, cell_size=cell, section_size=10 * cell,
                                 fade_distance=30.0 * view, position=tuple(self._grid_at))
        show_axes = self.robot.n_nodes <= 24 and self.scene in ("ik", "reach") and not self.bvh
        if self.clip is not None:
            self._correct_clip()
        style = self._skeleton_style() if self.clip is not None else {}  # the ghost of a corrected clip
        self._skel = _Skeleton(sc, "/robot/skeleton", self.robot, size, axes=show_axes, **style)
        if self._shapes is not None:  # skeleton and frame axes stay a Display toggle
            self._skel.bones.visible = False
            self._skel.bones.show_axes = False
        if self.scene == "ik" and not self.bvh and self.motion is None:  # a floating robot (a pelvis root) stands on the ground
            low = min(float(P[:, 2].min()), self._shapes.lowest(self.q) if self._shapes is not None else np.inf)
            if low < -0.02 * size:
                z = self._free_z_index()
                if z is not None and np.array_equal(self.q, self.q_start):  # the free joint's z
                    self.q[z] -= low
                    self.q_start = self.q.copy()
                    for t in self._targets:
                        t.position = t.position + (0.0, 0.0, -low)
                else:  # a fixed root below its shapes (a chain cut at the pelvis): lift the drawing
                    self._robot_frame.position = (0.0, 0.0, -low)
                center = center + (0.0, 0.0, -low)
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
            self._build_character(sc, size, wxyz)
        if self.motion is not None:
            self._build_motion(sc, size)
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

    def _build_shapes(self, sc) -> None:
        """The robot's visual meshes (unless ``sticks``); its skeleton becomes a Display toggle."""
        from ..model.geometry import collisions_of, visuals_of
        from .errors import ViewerError

        self._shapes = self._collision_shapes = None
        self.mesh_note = ""
        vis = visuals_of(self.robot)
        if self.sticks or not vis:
            self.mesh_note = "stick figure (--sticks)" if vis else "stick figure (the model has no visual shapes)"
            return
        try:
            self._shapes = _LinkShapes(sc, "/robot/visual", self.robot, vis, self.max_faces)
        except ViewerError as exc:  # trimesh missing: the stick figure, and how to get the meshes
            self.mesh_note = f"stick figure: {exc}"
            return
        what = "visual"
        if self._shapes.n_faces == 0 and collisions_of(self.robot):  # no visual mesh found (go2: not
            self._shapes.visible = False                             # bundled): its collision shapes
            self._shapes = _LinkShapes(sc, "/robot/visual_from_collision", self.robot,
                                       collisions_of(self.robot), self.max_faces)
            what = "collision"
            vis = collisions_of(self.robot)
        if self._shapes.n_faces == 0:
            self._shapes.visible = False
            self._shapes = None
            self.mesh_note = f"stick figure (no visual shape could be drawn: {vis[0].filename or vis[0].kind}, ...)"
            return
        self.mesh_note = f"{len(vis)} {what} shapes, {self._shapes.n_faces} triangles"
        if what == "collision":
            self.mesh_note += " (no visual mesh was found: the collision shapes stand in)"
        if self._shapes.errors:
            self.mesh_note += f"; {len(self._shapes.errors)} not drawn: " + "; ".join(self._shapes.errors[:3])

    def _free_z_index(self):
        """Index in q of the z of a free root joint (a floating base), or None."""
        r = self.robot
        root_children = [i for i in range(r.n_nodes) if r.parent[i] == 0 or (r.parent[i] < 0 and r.qidx[i] >= 0)]
        types = r.joint_types_per_dof
        for i in root_children:
            c = int(r.qidx[i])
            if c >= 0 and types[c] == "free":
                return c + 2
        return None

    def show_collisions(self, on: bool = True) -> None:
        """Draw the robot's collision shapes (half transparent), built on first use; a robot without
        any (``robot.collisions`` empty) raises ViewerError. While they are shown, the links of every
        checked self pair (and, with ``self.world``, every link near an obstacle) closer than
        ``self.contact_margin`` [m] are drawn red (:attr:`contacts`; ik.distances on the capsules,
        which enclose the shapes)."""
        from ..model.geometry import collisions_of
        from .errors import ViewerError

        col = collisions_of(self.robot)
        if not col:
            raise ViewerError(f"robot {self.robot.name!r} has no collision shapes")
        with self._lock:
            if self._collision_shapes is None and on and self.server is not None:
                self._collision_shapes = _LinkShapes(self.server.scene, "/robot/collision", self.robot, col,
                                                     self.max_faces, opacity=0.5)
            if self._collision_shapes is not None:
                self._collision_shapes.visible = on
            self._redraw()

    def _mark_contacts(self) -> None:
        """self.contacts: the links closer than contact_margin to another checked link or an
        obstacle of self.world, drawn red."""
        from ..collision.distance import distances
        from ..collision.errors import CollisionError

        try:
            d = distances(self.robot, self.q, self.world, self_collision=True, cutoff=self.contact_margin)
        except CollisionError:  # shapes the collision model cannot read (e.g. trimesh missing)
            d = None
        links = set()
        if d is not None:
            for (a, b), v in zip(d.pairs, d.distance):
                if v < self.contact_margin:
                    links.add(a)
                    if not b.startswith("obstacle "):
                        links.add(b)
        self.contacts = tuple(sorted(links))
        self._collision_shapes.mark(links)

    def set_robot_visible(self, on: bool) -> None:
        """Show or hide everything drawn for the robot (its skeleton, shapes and targets)."""
        with self._lock:
            self._robot_frame.visible = bool(on)

    def _redraw(self) -> None:
        if self.server is None:
            return
        with self.server.atomic():
            self._skel.update(self.q)
            for sh in (self._shapes, self._collision_shapes):
                if sh is not None and sh.visible:
                    sh.update(self.q)
            if self._collision_shapes is not None and self._collision_shapes.visible:
                self._mark_contacts()
            if self.clip is not None:
                self._redraw_character()
            if self.motion is not None:
                self._redraw_motion()
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
