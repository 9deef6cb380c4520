"""A BVH character in the viewer: its up axis, the ghost of the clip as read under the corrected
clip, onion skin, foot contacts and trails, and a view that follows the root (the character, its
trails and its floor shift so that the root stays put; each page's camera stays the user's).

Up axis: ``ViewerApp(up=...)`` / ``invkin view clip.bvh --up z``, else :func:`invkin.detect_up_axis`
(the axis along which the root lies above the feet), else y (the BVH convention). The skeleton is
turned so that this axis is the viewer's +z.

Everything is drawn in the clip's own length units (the viewer shows them as "clip units").
"""
from __future__ import annotations

import numpy as np

from .draw import _ALT_LINK_COLOR, _Skeleton
from .errors import ViewerError

__all__ = ["UP_AXES", "up_rotation", "clip_up_axis"]

#: Accepted up axes (``--up``).
UP_AXES = ("x", "y", "z", "-x", "-y", "-z")

GHOST_OPACITY = 0.35
ONION_COUNT = 4           # onion skin: this many earlier frames ...
ONION_SPACING = 0.1       # ... this far apart [s]
_TRAIL_COLOR = (150, 90, 200)
_CONTACT_COLOR = (230, 40, 40)
_CORRECTED_JOINT_COLOR = (40, 130, 60)
GHOST_COLOR = (80, 140, 235)


def up_rotation(up: str) -> np.ndarray:
    """R (3, 3) turning the clip's ``up`` axis onto +z (a quarter or half turn)."""
    c, s = 0.0, 1.0
    Rx = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])   # +90° about x: y -> z
    Ry = np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])   # +90° about y: z -> x
    table = {"z": np.eye(3), "-z": np.diag([1.0, -1.0, -1.0]), "y": Rx, "-y": Rx.T, "x": Ry.T, "-x": Ry}
    if up not in table:
        raise ViewerError(f"unknown up axis {up!r}; choose one of: {', '.join(UP_AXES)}")
    return table[up]


def clip_up_axis(robot, clip) -> tuple:
    """(up, how): the clip's up axis from :func:`invkin.detect_up_axis`, else ``"y"``."""
    from ..errors import InvkinError

    try:
        from ..animation import detect_up_axis
    except ImportError:  # pragma: no cover - the animation module ships with invkin
        return "y", "BVH default"
    try:
        return detect_up_axis(robot, clip), "detected: root above the feet"
    except InvkinError as exc:
        return "y", f"BVH default ({exc})"


class CharacterMixin:
    """ViewerApp's clip display: ghost, onion skin, contacts, trails, follow camera."""

    def _build_character(self, sc, size: float, wxyz) -> None:
        self._onion = []
        self._corr_skel = None
        if self.corrected_frames is not None:
            self._corr_frame = sc.add_frame("/corrected", show_axes=False, wxyz=wxyz,
                                            position=self._corrected_offset())
            self._corr_skel = _Skeleton(sc, "/corrected/skeleton", self.robot, size, link_color=_ALT_LINK_COLOR,
                                        joint_color=_CORRECTED_JOINT_COLOR, axes=False)
        for k in range(ONION_COUNT):
            sk = _Skeleton(sc, f"/robot/onion{k}", self.robot, 0.8 * size, link_color=(150, 150, 160),
                           joint_color=(150, 150, 160), axes=False,
                           opacity=GHOST_OPACITY * (1.0 - k / (ONION_COUNT + 1)))
            sk.bones.visible = self.onion_skin
            sk.bones.show_axes = False
            self._onion.append(sk)
        self._feet_nodes, self._contact_mask, self._contact_handles, self._trail_handles = [], [], [], []
        frames = self.clip.frames
        for foot, mask in self._foot_contacts().items():
            node = self.robot.node_names.index(foot)
            P = self.robot.fk_all_array(frames)[:, node, :3, 3]
            seg = np.stack([P[:-1], P[1:]], axis=1)
            colors = np.where(mask[1:, None, None], _CONTACT_COLOR, _TRAIL_COLOR).repeat(2, axis=1)
            self._trail_handles.append(sc.add_line_segments(
                f"/robot/trail_{len(self._feet_nodes)}", seg, colors.astype(np.uint8), thickness=0.004 * size,
                visible=self.show_trails))
            self._contact_handles.append(sc.add_icosphere(
                f"/robot/contact_{len(self._feet_nodes)}", radius=0.04 * size, color=_CONTACT_COLOR,
                visible=False))
            self._feet_nodes.append(node)
            self._contact_mask.append(mask)

    def _skeleton_style(self) -> dict:
        """How the clip as read is drawn: a ghost under its corrected version (overlay), else plain."""
        if self.corrected_frames is None or not self.clip_overlay:
            return {}
        return dict(opacity=GHOST_OPACITY, link_color=GHOST_COLOR, joint_color=GHOST_COLOR)

    def _corrected_offset(self):
        return (0.0, 0.0, 0.0) if self.clip_overlay else (0.9 * self.size, 0.0, 0.0)

    def _foot_contacts(self) -> dict:
        """{foot frame: (F,) bool contact mask} from correct_clip's report, else detect_contacts."""
        from .scenes import _feet

        out = {}
        rep = getattr(self, "_clip_report", None)
        contacts = getattr(rep, "contacts", None)
        feet = list(contacts) if isinstance(contacts, dict) else _feet(self.robot.frame_names)
        for foot in feet:
            if foot not in self.robot.node_names:
                continue
            cs = contacts.get(foot, ()) if isinstance(contacts, dict) else None
            if cs is None:
                try:
                    from ..animation import detect_contacts

                    cs = detect_contacts(self.robot, self.clip, foot, up=self.up_axis.lstrip("-"))
                except Exception:  # no contacts to show; the clip still plays
                    cs = ()
            mask = np.zeros(self.clip.n_frames, dtype=bool)
            for c in cs:
                mask[c.start:c.stop] = True
            out[foot] = mask
        return out

    def set_clip_display(self, *, overlay: bool | None = None, onion_skin: bool | None = None,
                         trails: bool | None = None, follow: bool | None = None) -> None:
        """Corrected clip over its ghost (``overlay``) or beside it; onion skin; foot trails;
        camera following the root."""
        with self._lock:
            if overlay is not None:
                self.clip_overlay = bool(overlay)
                if self._corr_skel is not None:
                    self._corr_frame.position = self._corrected_offset()
            if onion_skin is not None:
                self.onion_skin = bool(onion_skin)
                for sk in self._onion:
                    sk.bones.visible = self.onion_skin
            if trails is not None:
                self.show_trails = bool(trails)
                for h in self._trail_handles:
                    h.visible = self.show_trails
            if follow is not None:
                self.follow_root = bool(follow)
            self._redraw()

    def _redraw_character(self) -> None:
        f = self.clip_frame % self.clip.n_frames
        if self._corr_skel is not None:
            self._corr_skel.update(self.corrected_frames[f % len(self.corrected_frames)])
        if self.onion_skin:
            step = max(1, int(round(ONION_SPACING / max(self.clip.frame_time, 1e-6))))
            for k, sk in enumerate(self._onion):
                sk.update(self.clip.frames[max(f - (k + 1) * step, 0)])
        if self._feet_nodes:
            P = self.robot.fk_all_array(self.q)[self._feet_nodes, :3, 3]
            for h, p, mask in zip(self._contact_handles, P, self._contact_mask):
                h.visible = bool(mask[f]) and self.show_trails
                h.position = p
        self._follow()

    def root_display_position(self) -> np.ndarray:
        """Where the root is drawn (3,): the viewer's world, z up, the follow shift included."""
        root = int(np.flatnonzero(self.robot.is_frame)[0])
        return self._R_display @ self.robot.fk_all_array(self.q)[root, :3, 3] + np.asarray(self._robot_frame.position)

    def _follow(self) -> None:
        """Keep the root where it started (horizontally) by shifting the character, its trails and
        the floor under it: what a camera following the root sees, whatever each page's camera
        does (a server-side camera move races the page's own camera reports)."""
        root = int(np.flatnonzero(self.robot.is_frame)[0])
        P = self._R_display @ self.robot.fk_all_array(np.stack([self.clip.frames[0], self.q]))[:, root, :3, 3].T
        shift = np.array([P[0, 0] - P[0, 1], P[1, 0] - P[1, 1], 0.0]) if self.follow_root else np.zeros(3)
        self._robot_frame.position = shift
        self._grid.position = self._grid_at + shift
        if self._corr_skel is not None:
            self._corr_frame.position = np.asarray(self._corrected_offset()) + shift
