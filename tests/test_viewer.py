"""The browser viewer: server-side state through the in-process API, and the page in Chromium.

Browser tests drive Debian's chromium (/usr/bin/chromium) with Playwright and never download a
browser; they are skipped, with the reason, only when chromium or Playwright is missing.
Screenshots land in artifacts/ (git-ignored).
"""
from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin.viewer import PortInUseError, ViewerApp, ViewerError, demo_app

pytestmark = pytest.mark.slow  # browser viewer servers and Chromium (make test-fast skips them)

pytest.importorskip("viser", reason="the viewer needs the [viewer] extra (viser)")

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
MOCAP = ROOT / "src" / "invkin" / "data" / "mocap"
CHROMIUM = os.environ.get("INVKIN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def started():
    """started(app) starts a viewer and stops it after the test."""
    apps = []

    def start(app):
        apps.append(app)
        return app.start()

    yield start
    for app in apps:
        app.stop()


# ------------------------------------------------------------------ server side, no browser


def test_moving_a_target_solves_on_the_server_and_changes_the_joints(started):
    app = started(ViewerApp("panda", port=free_port()))
    q0 = app.current_q
    p = app.target_position("panda_hand") + (0.05, 0.05, -0.1)
    res = app.set_target(p, "panda_hand")
    assert res.success
    assert np.linalg.norm(app.current_q - q0) > 1e-3
    assert np.linalg.norm(app.frame_position("panda_hand") - p) <= app.position_tolerance
    assert "converged" in app.status and "ms" in app.status


def test_every_method_can_be_picked_and_a_refusal_is_a_status_not_a_crash(started):
    app = started(ViewerApp("planar2", port=0))
    p = app.target_position() + (-0.3, 0.4, 0.0)
    for m in ik.methods():
        app.set_method(m)
        app.set_target(p)
        assert app.method == m
        assert app.status  # converged, another status, or "error: ..." for a method that refuses
    app.set_method("lm")
    assert app.set_target(p).success


def test_the_solver_thread_follows_target_updates(started):
    app = started(ViewerApp("seed8dof", port=0))
    q0 = app.current_q
    p = app.target_position() + (0.3, -0.2, -0.4)
    app.set_target(p, solve=False)
    app._wake.set()  # what a gizmo drag does
    for _ in range(100):
        if np.linalg.norm(app.current_q - q0) > 1e-3:
            break
        time.sleep(0.05)
    assert np.linalg.norm(app.frame_position("effector") - p) < 1e-3


def test_an_unknown_method_or_frame_or_scene_is_refused_before_serving():
    with pytest.raises(ik.SolverError, match="choose one of"):
        ViewerApp("panda", port=0, method="nope")
    with pytest.raises(ik.FrameError, match="closest"):
        ViewerApp("panda", port=0, targets=["panda_hnad"])
    with pytest.raises(ViewerError, match="scene"):
        ViewerApp("panda", port=0, scene="nope")
    with pytest.raises(ViewerError, match="demo"):
        demo_app("nope")


def test_a_bad_target_orientation_is_refused_and_leaves_the_target_as_it_was():
    app = ViewerApp("panda", port=0)
    before = app._target(None).wxyz.copy()
    for wxyz in ([0, 0, 0, 0], [np.nan, 0, 0, 1], [1, 0], "abcd", [[1, 0, 0, 0]] * 2):
        with pytest.raises(ViewerError, match=r"set_target: expected wxyz.*unit quaternion"):
            app.set_target([0.4, 0.1, 0.5], wxyz=wxyz)
        assert np.array_equal(app._target(None).wxyz, before)
    app.set_target([0.4, 0.1, 0.5], wxyz=[2.0, 0.0, 0.0, 0.0])  # normalised
    assert np.allclose(app._target(None).wxyz, [1.0, 0.0, 0.0, 0.0])


def test_one_target_frame_may_be_a_string_and_an_unknown_up_axis_is_refused_for_any_robot():
    app = ViewerApp("panda", port=0, targets="panda_hand")  # was: unknown frame 'p'
    assert app.target_frames == ["panda_hand"]
    with pytest.raises(ViewerError, match="unknown up axis 'w'"):
        ViewerApp("panda", port=0, up="w")  # was: accepted and ignored (up applies to clips)


def test_a_port_in_use_is_a_clear_error_naming_the_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        app = ViewerApp("planar2", port=port)
        with pytest.raises(PortInUseError, match=str(port)):
            app.start()
        app.stop()


def test_the_server_listens_on_localhost_by_default(started):
    app = started(ViewerApp("planar2", port=0))
    assert app.server.get_host() == "127.0.0.1"  # viser, behind the front door
    assert {s.getsockname()[0] for s in app._front.sockets} == {"127.0.0.1"}  # the port the user has
    assert app.url == f"http://127.0.0.1:{app.port}"


def _http(port: int, request: bytes, timeout: float = 20.0, host: str = "127.0.0.1"):
    """(status, {header: value}, body) of the reply to one raw request, read to the close;
    (None, {}, b"") for an empty reply (the connection closed without a status line)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(1 << 16):
            data += chunk
    if not data:
        return None, {}, b""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize("request_bytes, status", [
    (b"nonsense\r\n\r\n", 400),
    (b"GET / HTTP/1.1 extra\r\n\r\n", 400),
    (b"get / HTTP/1.1\r\n\r\n", 400),
    (b"GET nope HTTP/1.1\r\n\r\n", 400),
    (b"GET /%0d%0aSet-Cookie:x HTTP/1.1\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", 400),
    (b"GET / HTTP/2.0\r\n\r\n", 505),
    (b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431),
    (b"GET http://example.org/ HTTP/1.1\r\n\r\n", 200),  # absolute form: the path counts
    (b"OPTIONS * HTTP/1.1\r\n\r\n", 204),
])
def test_a_malformed_or_unusual_request_gets_its_status_and_a_one_line_body(started, request_bytes, status):
    app = started(ViewerApp("planar2", port=0))
    got, headers, body = _http(app.port, request_bytes)
    assert got == status, (got, body[:200])
    if status >= 400:
        assert headers["content-type"] == "text/plain; charset=utf-8" and body.count(b"\n") == 1
        assert int(headers["content-length"]) == len(body) and body.startswith(str(status).encode())


def test_a_request_head_that_never_ends_is_answered_408_not_held_open(started, monkeypatch):
    from invkin.viewer import front

    monkeypatch.setattr(front, "HEAD_TIMEOUT", 0.5)
    app = started(ViewerApp("planar2", port=0))
    status, headers, body = _http(app.port, b"GET / HTTP/1.1\r\nHost: x\r\n")  # no blank line
    assert status == 408 and b"0.5 s" in body


def test_stopping_with_a_page_and_a_half_sent_request_open_frees_the_port_and_its_thread():
    import threading

    port = free_port()
    app = ViewerApp("planar2", port=port).start()
    half = socket.create_connection(("127.0.0.1", port))
    half.sendall(b"GET / HTT")
    page = _ws_open(app)
    assert page is not None
    app.stop()
    assert not any(t.name == "invkin-viewer-http" for t in threading.enumerate())
    page.join(10)
    assert not page.is_alive()  # the page's websocket was closed
    assert half.recv(100) == b""  # closed, not left hanging
    half.close()
    with socket.socket() as s:  # nothing listens there any more (closed connections may linger in TIME_WAIT)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()


def test_missing_viser_is_a_clear_error_with_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "viser", None)
    with pytest.raises(ViewerError, match=r"invkin\[viewer\]"):
        ViewerApp("planar2", port=0).start()


def test_without_trimesh_the_robot_is_a_stick_figure_and_the_note_says_how_to_get_meshes(started, monkeypatch,
                                                                                       tmp_path):
    monkeypatch.setitem(sys.modules, "trimesh", None)
    monkeypatch.setenv("INVKIN_MESH_CACHE_DIR", str(tmp_path))  # nothing cached: the files must be read
    app = started(ViewerApp("panda", port=0, targets=[]))
    assert app._shapes is None and app._skel.bones.visible
    assert "invkin[viewer]" in app.mesh_note and "--sticks" in app.mesh_note


def test_fk_mode_sets_joints_directly_within_limits(started):
    app = started(ViewerApp("panda", port=0))
    q = app.robot.neutral() + 0.2
    app.set_q(q)
    assert np.allclose(app.current_q, q)
    app.set_q(app.robot.upper + 1.0)
    assert np.all(app.current_q <= app.robot.upper)


def test_tentacle_arrow_moves_the_target_and_ccd_follows(started):
    app = started(demo_app("tentacle", port=0))
    assert app.method == "ccd" and app.robot.dof == 12
    p0 = app.target_position("tip")
    res = app.move_target(-0.05, 0.0, 0.0)
    assert np.allclose(app.target_position("tip"), p0 + (-0.05, 0.0, 0.0))
    assert res.success
    assert np.linalg.norm(app.frame_position("tip") - app.target_position("tip")) <= app.position_tolerance
    q = app.sway_q.copy()
    time.sleep(0.3)
    assert not np.allclose(q, app.sway_q)  # the FK tentacle sways by itself


@pytest.mark.parametrize("target", [(0.9, 1.0, 0.0), (1.6, -0.2, 0.0), (2.5, 0.0, 0.0)])
def test_two_bone_elbow_up_and_down_are_mirror_solutions(started, target):
    app = started(demo_app("two-bone", port=0))
    l1, l2 = app.bone_lengths
    app.elbow_up = True
    up = app.set_target(target, "hand")
    app.elbow_up = False
    down = app.set_target(target, "hand")
    b = np.hypot(*target[:2])
    if b <= l1 + l2:
        for q in (up, down):
            app.set_q(q)
            assert np.linalg.norm(app.frame_position("hand") - target) < 1e-9
        assert up[1] <= 0 <= down[1] and np.isclose(up[1], -down[1])
        assert "reachable" in app.status
    else:  # out of reach: both stretch straight toward the target
        assert np.allclose(up, down) and abs(up[1]) < 1e-12
        assert "out of reach" in app.status


def test_two_bone_3d_arm_reaches_its_target(started):
    app = started(demo_app("two-bone", port=0))
    target = app.arm3d_shoulder + (0.8, 0.5, 0.7)
    app.set_target(target, "arm3d")
    assert np.linalg.norm(app.arm3d_points[2] - target) < 1e-9
    assert app.arm3d_points[1][2] > app.arm3d_shoulder[2]  # elbow up: the pole is +z


def test_reach_walks_a_straight_line_and_refuses_out_of_workspace(started):
    app = started(demo_app("reach", port=0))
    assert app.wait_reach(30)  # the demo opens walking toward a target
    target = np.array([0.8, 1.2, 1.6])
    start = app.frame_position("effector")
    app.set_target(target)
    seen = []
    end = time.monotonic() + 30
    while time.monotonic() < end:
        seen.append(app.frame_position("effector"))
        if app.wait_reach(0.05):
            break
    seen.append(app.frame_position("effector"))
    assert np.linalg.norm(seen[-1] - target) <= app.reach_step
    u = (target - start) / np.linalg.norm(target - start)
    off_line = [np.linalg.norm((x - start) - np.dot(x - start, u) * u) for x in seen]
    assert max(off_line) < 0.02
    q = app.current_q
    app.set_target([0.0, 0.0, 3.5])
    assert "out of workspace" in app.status
    assert np.array_equal(app.current_q, q)


def test_a_bvh_clip_plays_and_the_gui_says_whether_it_is_corrected(started):
    app = started(ViewerApp(MOCAP / "cmu_49_04_run_leap.bvh", port=0))
    assert app.bvh and app.playing and app.target_frames == []
    # the heading said "drag a target; the server solves" for a clip with nothing to drag
    assert "no target" in app._gui["head"].content and "drag" not in app._gui["head"].content
    f0 = app.clip_frame
    time.sleep(0.5)
    assert app.clip_frame != f0
    fn = getattr(ik, "correct_clip", None)
    if fn is None and app.corrected_frames is None:
        assert "not available" in app.correction_note or "failed" in app.correction_note
    else:
        assert app.corrected_frames.shape == app.clip.frames.shape
        assert "correct_clip" in app.correction_note


def test_a_corrected_clip_is_drawn_over_the_ghost_of_the_original_or_beside_it(started, monkeypatch):
    calls = []

    def fake_correct_clip(robot, clip, goals=None):
        calls.append(goals)
        return clip, None

    monkeypatch.setattr(ik, "correct_clip", fake_correct_clip, raising=False)
    app = started(ViewerApp(MOCAP / "cmu_49_04_run_leap.bvh", port=0))
    assert calls and app.corrected_frames is not None
    assert app._corr_skel is not None
    assert app.clip_overlay and np.allclose(app._corr_frame.position, app._robot_frame.position)  # overlay
    assert app._skeleton_style()["opacity"] < 1  # the clip as read is its ghost
    app.set_clip_display(overlay=False, follow=False)
    assert np.allclose(app._corr_frame.position - app._robot_frame.position, (0.9 * app.size, 0, 0))
    app.set_target(app.frame_position("LeftHand") + (0.0, 2.0, 0.0), "LeftHand")  # IK on a skeleton
    assert not app.playing


SHAPES = """<robot name="shapes">
  <link name="base"><visual><geometry><box size="0.3 0.3 0.1"/></geometry></visual>
    <collision><geometry><cylinder radius="0.2" length="0.1"/></geometry></collision></link>
  <link name="arm"><visual><geometry><mesh filename="package://nowhere/arm.stl"/></geometry></visual></link>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><origin xyz="0 0 0.1"/>
    <axis xyz="0 0 1"/><limit lower="-1" upper="1"/></joint></robot>"""


def test_a_missing_mesh_is_reported_and_the_other_shapes_are_drawn(started):
    from invkin.model.urdf import parse_urdf

    app = started(ViewerApp(parse_urdf(SHAPES), port=0, targets=[]))
    assert app._shapes is not None and app._shapes.n_faces > 0  # the box
    assert "1 not drawn" in app.mesh_note and "nowhere/arm.stl" in app.mesh_note
    assert not app._skel.bones.visible  # the skeleton is a toggle over meshes


def test_a_floating_humanoid_opens_standing_on_the_ground_in_its_zero_pose(started):
    app = started(ViewerApp("g1", port=0, targets=[]))
    z = app._free_z_index()
    assert z == 2 and app.robot.joint_types_per_dof[z] == "free"
    q = app.current_q
    assert q[z] > 0.5 and np.all(np.delete(q, z) == 0.0)  # zeros: legs straight, arms down
    assert abs(app._shapes.lowest(q)) < 1e-9  # the soles touch z = 0
    assert "35 visual shapes" in app.mesh_note


def test_without_visual_meshes_the_collision_shapes_stand_in(started):
    app = started(ViewerApp("go2", port=0, targets=[]))  # go2's visual DAE files are not bundled
    assert app._shapes is not None and app._shapes.n_faces > 0
    assert "collision shapes stand in" in app.mesh_note
    assert abs(app._shapes.lowest(app.current_q)) < 1e-9


def test_collision_shapes_are_a_toggle_only_where_the_robot_has_them(started):
    from invkin.model.urdf import parse_urdf

    app = started(ViewerApp(parse_urdf(SHAPES), port=0, targets=[]))
    assert app._collision_shapes is None  # built on first use
    app.show_collisions(True)
    assert app._collision_shapes.visible and app._collision_shapes.n_faces > 0
    app.show_collisions(False)
    assert not app._collision_shapes.visible
    bare = started(ViewerApp("planar2", port=0))
    with pytest.raises(ViewerError, match="no collision shapes"):
        bare.show_collisions(True)


def test_fk_mode_has_a_slider_for_every_joint_of_a_large_skeleton(started):
    app = started(ViewerApp(MOCAP / "cmu_02_01_walk.bvh", port=0))
    assert len(app._sliders) == app.robot.dof == 96
    assert {s.label for s in app._sliders} == set(app.robot.joint_names)


def test_an_mjcf_model_is_drawn_with_its_primitive_geoms(started):
    pytest.importorskip("mujoco", reason="MJCF needs the [mujoco] extra")
    robot = ik.load_robot(ROOT / "tests" / "data" / "mjcf" / "arm.xml")
    app = started(ViewerApp(robot, port=0, targets=[]))
    assert app._shapes is not None and app._shapes.n_faces > 0 and not app._shapes.errors
    assert f"{sum(len(v) for v in robot.geoms.values())} visual shapes" in app.mesh_note
    meshes = started(ViewerApp(ROOT / "tests" / "data" / "mjcf" / "meshes.xml", port=0, targets=[]))
    assert meshes._shapes is not None and meshes._shapes.n_faces == 4 + 12 + 12  # mesh geoms, not sticks


def test_a_gltf_clip_plays_in_the_viewer(started):
    gltf = ROOT / "tests" / "data" / "gltf" / "rigged_simple.gltf"
    app = started(ViewerApp(gltf, port=0))
    assert app.bvh and app.clip is not None and app.clip.dof == app.robot.dof
    assert app.up_axis in ("y", "z") and app.playing


def test_ctrl_c_style_stop_is_idempotent_and_frees_the_port():
    port = free_port()
    app = ViewerApp("planar2", port=port).start()
    app.stop()
    app.stop()
    app2 = ViewerApp("planar2", port=port).start()  # the port is free again
    assert app2.port == port
    app2.stop()


# ------------------------------------------------------------------ in the browser


@pytest.fixture(scope="module")
def browser():
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.skip(f"chromium not found at {CHROMIUM} (Debian: apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        yield b
        b.close()


def _open(browser, app):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(app.url)
    page.wait_for_selector("canvas", timeout=30_000)
    for _ in range(300):
        if app.server.get_clients():
            break
        time.sleep(0.05)
    assert app.server.get_clients(), "the page never connected to the viewer's websocket"
    return page


def _shot(page, name: str) -> None:
    """Save a screenshot to artifacts/ without viser's "software WebGL" notice."""
    page.evaluate("""() => { for (const e of document.querySelectorAll('[class*="Notification-root"]'))
                             e.style.visibility = 'hidden'; }""")
    time.sleep(0.3)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name))


def _pixels(page, path=None) -> np.ndarray:
    from io import BytesIO

    from PIL import Image

    png = page.screenshot(path=None if path is None else str(path))
    return np.asarray(Image.open(BytesIO(png)).convert("RGB"))


def _view(img: np.ndarray) -> np.ndarray:
    """The 3-D view: left of the GUI panel, below viser's notices (top left)."""
    return img[int(0.25 * img.shape[0]):, : int(0.72 * img.shape[1])]


def _robot_pixels(img: np.ndarray) -> int:
    """Pixels of the drawn links (blue-grey) and joints (orange) in the 3-D view."""
    v = _view(img).astype(int)
    r, g, b = v[..., 0], v[..., 1], v[..., 2]
    links = (b > r + 35) & (b > 120)
    joints = (r > 180) & (r > b + 60) & (g > 100)
    return int(np.count_nonzero(links | joints))


def _wait_drawn(page, min_pixels=400, timeout=30.0) -> np.ndarray:
    end = time.monotonic() + timeout
    while True:
        img = _pixels(page)
        if _robot_pixels(img) >= min_pixels or time.monotonic() > end:
            return img
        time.sleep(0.5)


def test_page_loads_draws_the_robot_and_follows_a_moved_target(browser, started):
    app = started(demo_app("panda", port=free_port()))
    page = _open(browser, app)
    try:
        assert page.get_by_text("drag a target").first.is_visible()
        _wait_drawn(page)
        _shot(page, "viewer_panda.png")
        img = _pixels(page)
        view = _view(img).reshape(-1, 3)
        colours = np.unique(view, axis=0)
        background = np.all(view == view[0], axis=1).mean()
        assert len(colours) > 50, f"only {len(colours)} distinct colours: the canvas looks blank"
        assert background < 0.97
        assert _robot_pixels(img) >= 400, "no links or joints drawn"

        q0 = app.current_q  # the server solves for a moved target and the page redraws
        res = app.set_target(app.target_position() + (0.15, -0.25, -0.2))
        assert res.success and np.linalg.norm(app.current_q - q0) > 0.05
        end = time.monotonic() + 20
        while True:
            after = _pixels(page)
            changed = np.any(np.abs(_view(after).astype(int) - _view(img).astype(int)) > 30, axis=2)
            if changed.mean() > 0.002 or time.monotonic() > end:
                break
            time.sleep(0.3)
        _shot(page, "viewer_panda_moved.png")
        assert changed.mean() > 0.002, "the page did not redraw the robot"
    finally:
        page.close()


def _camera(app):
    """(position, wxyz, look_at) of the one connected page's camera, as the client reported it."""
    (client,) = app.server.get_clients().values()
    c = client.camera
    return np.array(c.position), np.array(c.wxyz), np.array(c.look_at)


def test_arrow_keys_in_the_page_move_the_tentacle_target_and_never_the_camera(browser, started):
    app = started(demo_app("tentacle", port=free_port()))
    page = _open(browser, app)
    try:
        _wait_drawn(page)
        page.mouse.click(300, 650)  # focus the 3-D view (an empty spot: no gizmo there)
        time.sleep(0.5)
        p0 = app.target_position("tip")
        cam0 = _camera(app)
        moves = {"ArrowLeft": (-0.05, 0.0, 0.0), "ArrowUp": (0.0, 0.0, 0.05), "ArrowRight": (0.05, 0.0, 0.0),
                 "ArrowDown": (0.0, 0.0, -0.05)}
        expected = p0.copy()
        for key in ["ArrowLeft", "ArrowUp"] * 3 + ["ArrowRight", "ArrowDown"]:  # viser's camera turned
            before = app.target_position("tip")                                 # in ~half of such presses
            page.keyboard.press(key)
            expected = expected + moves[key]
            for _ in range(200):
                if not np.allclose(app.target_position("tip"), before):
                    break
                time.sleep(0.05)
            time.sleep(0.3)  # a camera turn would be reported by now
            assert np.allclose(app.target_position("tip"), expected), key
            cam = _camera(app)
            for a, b, what in zip(cam, cam0, ("position", "orientation", "look-at point")):
                assert np.allclose(a, b, atol=1e-9), f"{key} moved the camera's {what}: {b} -> {a}"
        assert np.linalg.norm(app.frame_position("tip") - app.target_position("tip")) <= app.position_tolerance
        _shot(page, "viewer_tentacle.png")
    finally:
        page.close()


def test_the_tentacle_page_loads_without_console_errors_or_failed_requests(browser, started):
    app = started(demo_app("tentacle", port=free_port()))
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    problems = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} ({r.failure})"))
    try:
        page.goto(app.url)
        page.wait_for_selector("canvas", timeout=30_000)
        for _ in range(200):  # the page script that keeps the arrow keys from the camera has run
            if page.evaluate("() => window.__invkinArrows === 1"):
                break
            time.sleep(0.05)
        assert page.evaluate("() => window.__invkinArrows === 1")
        time.sleep(0.5)
        assert not problems, problems
    finally:
        page.close()


def _differs(a: np.ndarray, b: np.ndarray, level: int = 8) -> float:
    """Share of the 3-D view's pixels that differ between two screenshots."""
    return float(np.any(np.abs(_view(a).astype(int) - _view(b).astype(int)) > level, axis=2).mean())


def _settled(page, timeout=40.0, unlike=None) -> np.ndarray:
    """A screenshot once the page has drawn a scene (and differs from ``unlike``, a screenshot
    taken before a change was sent) and stops changing (viser fades a new scene in over seconds;
    a loaded machine delays every message)."""
    end = time.monotonic() + timeout
    prev = _pixels(page)
    while True:
        time.sleep(0.6)
        img = _pixels(page)
        drawn = len(np.unique(_view(img)[::4, ::4].reshape(-1, 3), axis=0)) > 50
        changed = unlike is None or _differs(img, unlike, 25) > 1e-3
        if (drawn and changed and _differs(img, prev) < 5e-4) or time.monotonic() > end:
            return img
        prev = img


def _place_camera(app, position, look_at, timeout: float = 20.0) -> None:
    """Move every client's camera and wait until the page reports it back (on a loaded machine the
    page's own camera updates can race a move sent from the server: it is sent again until it holds)."""
    end = time.monotonic() + timeout
    while True:
        clients = list(app.server.get_clients().values())
        for client in clients:
            client.camera.position = position
            client.camera.look_at = look_at
        time.sleep(0.8)
        held = all(np.allclose(client.camera.position, position, atol=1e-3) for client in clients)
        if (clients and held) or time.monotonic() > end:
            return


def _robot_mask(app, page) -> tuple:
    """(pixels the robot covers in the 3-D view, the screenshot): the view with the robot drawn
    compared with the same view with everything under /robot hidden."""
    with_robot = _settled(page)
    app.set_robot_visible(False)
    try:
        without = _settled(page, unlike=with_robot)
    finally:
        app.set_robot_visible(True)
    mask = np.any(np.abs(_view(with_robot).astype(int) - _view(without).astype(int)) > 25, axis=2)
    return mask, with_robot


def _dark_grey(img: np.ndarray, mask: np.ndarray) -> int:
    """Pixels of the mask that are dark and colourless (Panda's dark grey parts, shaded)."""
    v = _view(img).astype(int)
    spread = v.max(axis=2) - v.min(axis=2)
    return int(np.count_nonzero(mask & (v.max(axis=2) < 110) & (spread < 20)))


def test_panda_meshes_cover_more_of_the_view_than_the_stick_figure_in_their_colours(browser, started):
    ready = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
    seen = {}
    for sticks in (False, True):
        app = started(ViewerApp("panda", port=free_port(), q0=ready, targets=[], sticks=sticks))
        assert (app._shapes is None) == sticks
        page = _open(browser, app)
        try:
            _place_camera(app, (1.1, -1.45, 0.85), (0.15, 0.0, 0.4))  # one camera for both views
            mask, img = _robot_mask(app, page)
            if not sticks:
                _shot(page, "viewer_panda_meshes.png")
            seen[sticks] = (int(mask.sum()), _dark_grey(img, mask))
        finally:
            page.close()
            app.stop()
    (mesh_px, mesh_dark), (stick_px, stick_dark) = seen[False], seen[True]
    print(f"robot pixels: meshes {mesh_px}, sticks {stick_px}; dark grey: meshes {mesh_dark}, sticks {stick_dark}")
    assert stick_px > 500, "the stick figure was not drawn"
    # "clearly larger": quiet runs give ~3x (9205 against 3036 px); a loaded machine caught the thin
    # sticks mid fade-in at up to 3946 px, so the bound leaves room for that
    assert mesh_px > 1.8 * stick_px, f"meshes cover {mesh_px} px, sticks {stick_px} px"
    assert mesh_dark > 0.03 * mesh_px and mesh_dark > 10 * max(stick_dark, 1), \
        f"Panda's dark grey parts: {mesh_dark} px of {mesh_px} (sticks: {stick_dark})"


def test_urdf_primitives_are_drawn_in_their_material_colours(browser, started, tmp_path):
    from invkin.model.urdf import parse_urdf

    urdf = """<robot name="prims">
      <link name="base"><visual><geometry><box size="0.6 0.6 0.3"/></geometry>
        <material name="red"><color rgba="0.9 0.05 0.05 1"/></material></visual></link>
      <link name="arm"><visual><origin xyz="0 0 0.4"/><geometry><cylinder radius="0.12" length="0.8"/></geometry>
        <material name="green"><color rgba="0.05 0.8 0.05 1"/></material></visual></link>
      <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><origin xyz="0 0 0.15"/>
        <axis xyz="0 0 1"/><limit lower="-1" upper="1"/></joint></robot>"""
    app = started(ViewerApp(parse_urdf(urdf), port=free_port(), targets=[]))
    page = _open(browser, app)
    try:
        mask, img = _robot_mask(app, page)
        v = _view(img).astype(int)
        r, g, b = v[..., 0], v[..., 1], v[..., 2]
        red = mask & (r > g + 60) & (r > b + 60)
        green = mask & (g > r + 60) & (g > b + 60)
        assert red.sum() > 2000 and green.sum() > 2000, (red.sum(), green.sum())
    finally:
        page.close()


def _project(app, points: np.ndarray) -> np.ndarray:
    """Pixel rows (N,) of world points in the page's camera (OpenCV convention: +z forward, +y down)."""
    (client,) = app.server.get_clients().values()
    c = client.camera
    from invkin.spatial import quat_wxyz_to_matrix

    R_world_cam = quat_wxyz_to_matrix(np.array(c.wxyz))
    p_cam = (np.asarray(points) - np.array(c.position)) @ R_world_cam
    assert np.all(p_cam[:, 2] > 0), "a point is behind the camera"
    f = 0.5 * c.image_height / np.tan(0.5 * c.fov)
    return 0.5 * c.image_height + f * p_cam[:, 1] / p_cam[:, 2]


def test_a_z_up_clip_stands_upright_in_the_page_with_its_ghost(browser, started):
    app = started(ViewerApp(MOCAP / "fair1_wave_hello.bvh", port=free_port()))
    assert app.up_axis == "z"
    page = _open(browser, app)
    try:
        _settled(page)
        app.playing = False
        app.set_q(app.clip.frames[0])
        names = [n.lower() for n in app.robot.node_names]
        head = next(i for i, n in enumerate(names) if n == "head")
        feet = [i for i, n in enumerate(names) if "foot" in n and not n.endswith("_end")]
        P = app.robot.fk_all_array(app.current_q)[:, :3, 3] @ app._R_display.T  # what /robot shows
        rows = _project(app, P[[head] + feet])
        assert rows[0] < rows[1:].min() - 100, f"head at row {rows[0]:.0f}, feet at {rows[1:]}"
        _shot(page, "viewer_clip_fair1.png")
    finally:
        page.close()


def test_the_view_follows_a_walking_root(browser, started):
    app = started(ViewerApp(MOCAP / "cmu_02_01_walk.bvh", port=free_port()))
    page = _open(browser, app)
    try:
        _settled(page)
        app.set_clip_display(onion_skin=True)
        time.sleep(1.0)
        _shot(page, "viewer_clip_walk_ghost.png")
        assert app.follow_root  # on by default: the root walks farther than the figure is tall
        root = int(np.flatnonzero(app.robot.is_frame)[0])

        def walked(q0, q1):  # horizontal distance the clip's root covers between two poses
            P = app.robot.fk_all_array(np.stack([q0, q1]))[:, root, :3, 3] @ app._R_display.T
            return float(np.linalg.norm(P[1, :2] - P[0, :2]))

        for follow in (True, False):
            app.set_clip_display(follow=follow)
            q0, shown0 = app.current_q, app.root_display_position()
            time.sleep(0.8)
            q1, shown1 = app.current_q, app.root_display_position()
            moved = float(np.linalg.norm(shown1[:2] - shown0[:2]))
            if follow:
                assert walked(q0, q1) > 0.05 * app.size and moved < 1e-6 * app.size
            else:
                assert moved == pytest.approx(walked(q0, q1), rel=1e-6, abs=1e-9 * app.size)
        cam = _camera(app)
        time.sleep(0.5)
        for a, b in zip(cam, _camera(app)):
            assert np.allclose(a, b)  # the page's camera is never moved by the server
    finally:
        page.close()


def test_the_reach_demo_draws_in_the_page(browser, started):
    app = started(demo_app("reach", port=free_port()))
    page = _open(browser, app)
    try:
        img = _wait_drawn(page, min_pixels=150)
        _shot(page, "viewer_reach.png")
        assert _robot_pixels(img) >= 150
    finally:
        page.close()


def _g1_hand_in_chest():
    """(g1, q): the G1 with its left hand pushed into its chest (a plain solve, no self-collision)."""
    g1 = ik.load_robot("g1")
    q0 = g1.neutral()
    torso = g1.collision.shapes("torso_link")
    T = g1.fk(q0, "torso_link")
    inside = T[:3, :3] @ (0.5 * (torso[0, 0:3] + torso[0, 3:6])) + T[:3, 3] + (0.08, 0.0, 0.0)
    res = ik.solve(g1, [ik.Position("left_rubber_hand", inside), ik.Pose("pelvis", g1.fk(q0, "pelvis"))], q0=q0)
    return g1, res.q


def test_links_in_contact_are_coloured_while_the_collision_shapes_are_shown(started):
    g1, q_in = _g1_hand_in_chest()
    app = started(ViewerApp(g1, port=0, targets=[]))
    app.show_collisions(True)
    app.set_q(g1.neutral())
    assert app.contacts == ()                          # the neutral pose touches nothing checked
    app.set_q(q_in)
    assert "torso_link" in app.contacts and any(link.startswith("left_") for link in app.contacts)
    red = [h for name, ms in zip(app._collision_shapes.links, app._collision_shapes._meshes) for h, _ in ms
           if name in app.contacts]
    assert red and all(tuple(h.color) == (235, 30, 30) for h in red)
    app.set_q(g1.neutral())
    assert app.contacts == () and all(tuple(h.color) != (235, 30, 30) for h in red)


def test_the_page_draws_links_in_contact_red(browser, started):
    g1, q_in = _g1_hand_in_chest()
    app = started(ViewerApp(g1, port=free_port(), targets=[]))
    page = _open(browser, app)
    try:
        _place_camera(app, (1.6, -0.9, 0.4), (0.0, 0.0, 0.1))
        app.set_q(g1.neutral())
        app.show_collisions(True)
        before = _settled(page)
        app.set_q(q_in)
        after = _settled(page, unlike=before)
        _shot(page, "viewer_g1_contact.png")

        def red(img):
            v = _view(img).astype(int)
            return int(np.count_nonzero((v[..., 0] > v[..., 1] + 80) & (v[..., 0] > v[..., 2] + 80)))
        assert red(after) > 500 and red(after) > 5 * max(red(before), 1), (red(before), red(after))
    finally:
        page.close()


def test_a_retargeted_motion_plays_on_the_time_slider_beside_its_clip(browser, started, tmp_path):
    sk, clip = ik.read_bvh(MOCAP / "cmu_02_01_walk.bvh")
    motion = ik.retarget(sk, clip, ik.load_robot("g1"))
    motion = type(motion)(motion.q, motion.fps, motion.joint_names, robot_name=motion.robot_name,
                          robot_spec="g1", clip_path=str(MOCAP / "cmu_02_01_walk.bvh"))
    motion.save(tmp_path / "walk.npz")
    app = started(ViewerApp(tmp_path / "walk.npz", port=free_port()))  # robot and clip from the file
    assert app.motion.clip is not None and app.playing
    f0 = app.clip_frame
    time.sleep(0.6)
    assert app.clip_frame != f0, "the motion does not play"
    page = _open(browser, app)
    try:
        app.set_motion_frame(0)
        mask0, img0 = _robot_mask(app, page)
        # the page's own time slider (Mantine: role=slider) to its last frame, by the keyboard
        sliders = page.get_by_role("slider")
        last = str(len(app.motion.frames) - 1)
        frame = next(sliders.nth(i) for i in range(sliders.count())
                     if sliders.nth(i).get_attribute("aria-valuemax") == last)
        frame.focus()
        frame.press("End")
        end = time.monotonic() + 20
        while app.clip_frame != int(last) and time.monotonic() < end:
            time.sleep(0.2)
        assert app.clip_frame == int(last) and not app.playing, "the page's slider did not seek the motion"
        np.testing.assert_allclose(app.current_q, app.motion.frames[-1])
        mask1, img1 = _robot_mask(app, page)
        _shot(page, "viewer_motion_g1_walk.png")
        assert mask0.sum() > 500 and mask1.sum() > 500, "the robot is not drawn"
        # the robot walked: where it is drawn at the last frame is not where it was at the first
        overlap = np.count_nonzero(mask0 & mask1) / min(mask0.sum(), mask1.sum())
        assert overlap < 0.5, f"the robot's drawing barely moved ({overlap:.0%} overlap)"
        def source_px(img, mask):  # the source skeleton: green (shaded pale), outside the robot's pixels
            v = _view(img).astype(int)
            return (v[..., 1] > v[..., 0] + 20) & (v[..., 1] > v[..., 2] + 10) & ~mask

        s0, s1 = source_px(img0, mask0), source_px(img1, mask1)
        assert s0.sum() > 100 and s1.sum() > 100, "the source skeleton is not drawn beside the robot"
        assert np.count_nonzero(s0 & s1) < 0.5 * min(s0.sum(), s1.sum())
    finally:
        page.close()


def _fire(handle, value) -> None:
    """Run a control's update callbacks as viser does when a page sends ``value`` for it (viser
    casts the value to the control's type but checks no range or option)."""
    from types import SimpleNamespace

    handle._impl.value = value  # what viser's _handle_gui_updates does, after its cast
    for cb in handle._impl.update_cb:
        cb(SimpleNamespace(target=handle, client=None))


def test_a_control_value_outside_its_range_or_options_is_clamped_or_ignored(started):
    app = started(ViewerApp(MOCAP / "fair1_wave_hello.bvh", port=0, targets=["Head"]))
    n = app.clip.n_frames
    g = app._gui
    for value, frame in ((10 * n, n - 1), (-3, 0), (float("nan"), 0), (float("inf"), n - 1)):
        _fire(g["frame"], value)  # was: IndexError, ValueError, or -3 showing frame n - 3
        assert app.clip_frame == frame and np.array_equal(app.current_q, app.clip.frames[frame]), value
    _fire(g["method"], "nope")  # was: SolverError in the callback; the method stays
    assert app.method == "lm"
    weight = app._target("Head").weight
    _fire(g["weight"], float("nan"))  # was: a NaN goal weight, every later solve an error
    assert app._target("Head").weight == weight
    _fire(g["fk"], True)
    q = app.current_q
    _fire(app._sliders[3], float("nan"))  # was: ConfigurationError in the callback
    assert np.array_equal(app.current_q, q)
    _fire(app._sliders[3], 1e9)
    assert app.current_q[3] == app._sliders[3].max


def _ws_open(app):
    """Open a websocket to the viewer as a page would and hold it in a daemon thread until the
    server closes it; returns that thread once the connection is open (None if it never opens)."""
    import asyncio
    import threading

    import viser
    import websockets

    opened = threading.Event()

    async def hold():
        async with websockets.connect(f"ws://127.0.0.1:{app.port}",
                                      subprotocols=[f"viser-v{viser.__version__}"]) as ws:
            opened.set()
            await ws.wait_closed()

    thread = threading.Thread(target=lambda: asyncio.run(hold()), daemon=True)
    thread.start()
    return thread if opened.wait(20) else None


def _ws_send(app, payload) -> bool:
    """Connect to the viewer's websocket as a page would, send one message, wait; True if the
    server left the connection open."""
    import asyncio

    import viser
    import websockets

    async def go():
        async with websockets.connect(f"ws://127.0.0.1:{app.port}",
                                      subprotocols=[f"viser-v{viser.__version__}"]) as ws:
            await ws.send(payload)
            await asyncio.sleep(0.5)
            return ws.state.name == "OPEN"

    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # Playwright's sync API holds this thread's loop
        return pool.submit(asyncio.run, go()).result(timeout=30)


def test_a_malformed_websocket_message_is_one_line_not_a_traceback(started, caplog):
    from msgspec.msgpack import encode  # viser's own message codec

    app = started(ViewerApp("planar2", port=free_port()))
    for payload in (b"garbage", encode({"type": "NoSuchMessage"}), "a text frame",
                    encode({"type": "TransformControlsUpdateMessage", "name": "x"})):
        assert not _ws_send(app, payload)  # the bad client is dropped
    time.sleep(0.3)
    records = [r for r in caplog.records if r.name == "websockets.server" and r.levelname == "ERROR"]
    assert len(records) == 4, [r.getMessage() for r in records]
    for r in records:  # what stderr shows (logging's last-resort handler): the line, no traceback
        assert r.exc_info is None and "\n" not in r.getMessage(), r.getMessage()
        assert r.getMessage().startswith("invkin viewer: dropped a client that sent a message"), r.getMessage()
    msgs = " ".join(r.getMessage() for r in records)
    assert "NoSuchMessage" in msgs and "not a binary" in msgs and "AssertionError" not in msgs
    res = app.set_target([0.5, 0.6, 0.0])  # and the viewer still serves
    assert res.success
