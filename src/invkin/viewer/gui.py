"""The panels: solver settings, targets, scene controls, clip playback, display, FK joint sliders.

Callbacks run in viser's thread pool; each takes the app's lock. ``_sync`` sets a control's value
without running our own callback.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import ViewerError

ARROW_STEP = 0.05        # [m] target move per arrow key press (tentacle demo)

# viser's camera turns while an arrow key is held (its CameraControls read ``event.code``); the
# demos bind the arrows to commands instead. This page script hides ``code`` from the camera for
# the four arrow keys (the command hotkeys match ``event.key``, which it leaves alone), so a press
# moves the target and never the camera. It runs once, from an <img> error handler (HTML inserted
# by React does not run <script> tags); its src, an empty data: URL, fails at once with no request
# (and no console error).
_ARROWS_ONLY_FOR_COMMANDS = (
    "if(!window.__invkinArrows){window.__invkinArrows=1;"
    "const f=e=>{if(e.key&&e.key.startsWith('Arrow')&&e.code&&e.code.startsWith('Arrow'))"
    "Object.defineProperty(e,'code',{value:'invkin'+e.code})};"
    "window.addEventListener('keydown',f,true);window.addEventListener('keyup',f,true);}")


def _in_range(handle, value) -> tuple:
    """(ok, value) for a value a page sent for a control: viser casts it to the control's type
    but checks neither a slider's or number's range nor a dropdown's options, so a page that
    misbehaves could send NaN, a frame past the clip's end or an unknown method. A number is
    clamped into [min, max] (NaN: not ok); a dropdown value must be one of its options."""
    options = getattr(handle, "options", None)
    if options is not None:
        return value in tuple(options), value
    lo, hi = getattr(handle, "min", None), getattr(handle, "max", None)
    if lo is None and hi is None:
        return True, value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return False, value
    if lo is not None:
        value = max(value, type(value)(lo)) if math.isfinite(lo) else value
    if hi is not None:
        value = min(value, type(value)(hi)) if math.isfinite(hi) else value
    return True, value


class GuiMixin:
    """ViewerApp's GUI, built once per start (``_gui`` holds the handles the app updates)."""

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
        if self.scene == "ik" and not self._targets:  # a clip or a motion shown as it is: nothing to drag
            head = "no target: the pose is the clip's"
        self._gui["head"] = gui.add_markdown(f"**invkin** · `{r.name}` · {r.dof} DOF · {head}")
        if self.scene == "tentacle":
            gui.add_html(f'<img src="data:," alt="" style="display:none" onerror="{_ARROWS_ONLY_FOR_COMMANDS}">')
        unit = "clip units" if self.bvh else "m"
        self._gui["status"] = gui.add_markdown("")
        self._show_status()

        guarded = self._guarded

        if self.scene in ("ik", "tentacle"):
            with gui.add_folder("Solver"):
                h = gui.add_dropdown("method", tuple(methods()), initial_value=self.method)
                self._gui["method"] = h

                h.on_update(guarded(self._apply_method))
                h = gui.add_number(f"position tol [{unit}]", self.position_tolerance, min=1e-9, max=1.0, step=1e-5)
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

                b.on_click(lambda _e: self._locked(self._targets_to_frames))
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
                gui.add_markdown(f"Up axis: {self.up_axis} ({self.up_note}); lengths in the file's units.")
                if self.corrected_frames is not None:
                    h = gui.add_checkbox("overlay (else side by side)", self.clip_overlay)
                    h.on_update(guarded(lambda v: self.set_clip_display(overlay=v)))
                for label, key in (("onion skin", "onion_skin"), ("foot trails and contacts", "trails"),
                                   ("camera follows the root", "follow")):
                    attr = {"trails": "show_trails", "follow": "follow_root"}.get(key, key)
                    h = gui.add_checkbox(label, getattr(self, attr))
                    h.on_update(guarded(lambda v, key=key: self.set_clip_display(**{key: v})))
        if self.motion is not None:
            self._build_motion_gui(gui)
        with gui.add_folder("Display", expand_by_default=False):
            if self.mesh_note:
                gui.add_markdown(f"Robot: {self.mesh_note}.")
            h = gui.add_checkbox("frame axes", self._skel.bones.show_axes)
            h.on_update(guarded(lambda v: setattr(self._skel.bones, "show_axes", bool(v))))
            if self._shapes is not None:
                h = gui.add_checkbox("meshes", True)
                h.on_update(guarded(lambda v: (setattr(self._shapes, "visible", bool(v)), self._redraw())))
                h = gui.add_checkbox("skeleton", False)
                h.on_update(guarded(lambda v: setattr(self._skel.bones, "visible", bool(v))))
            from ..model.geometry import collisions_of

            if collisions_of(r):  # robot.collisions (URDF <collision>); none: no toggle
                h = gui.add_checkbox("collision shapes", False)
                h.on_update(guarded(self.show_collisions))
            b = gui.add_button("reset pose")

            def reset(_e):
                with self._lock:
                    self.q = self.q_start.copy() if self.clip is None else self.clip.frames[0].copy()
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
                    self._targets_to_frames()

            h.on_update(self._guarded(set_fk))
            self._gui["fk"] = h
            n = r.dof  # every joint, a ball (or floating base) joint as its three (six) entries
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
                    ok, value = _in_range(e.target, e.target.value)
                    if not ok:
                        return
                    with self._lock:
                        q = self.q.copy()
                        q[i] = float(value)
                        self.q = r.clamp(q)
                        self._redraw()

                s.on_update(moved)
                self._sliders.append(s)

    def _guarded(self, fn):
        """A control's callback: ``fn(value)`` under the lock, skipped while we set the value, and
        for a value the control cannot hold (see :func:`_in_range`)."""
        def cb(event):
            if self._syncing:
                return
            ok, value = _in_range(event.target, event.target.value)
            if not ok:
                return
            with self._lock:
                fn(value)
        return cb

    def _locked(self, fn, *a):
        with self._lock:
            return fn(*a)
