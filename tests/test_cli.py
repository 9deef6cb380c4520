"""The ``invkin`` command, run as a user runs it: a subprocess, exit codes 0/1/2, one-line errors."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import invkin as ik

pytestmark = pytest.mark.slow  # every test runs the `invkin` command in a subprocess (make test-fast skips them)

ROOT = Path(__file__).resolve().parents[1]
INVKIN = [sys.executable, "-m", "invkin.cli"]  # the same entry point as the console script
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def run(*args, timeout=120):
    return subprocess.run(INVKIN + [str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=ENV)


def assert_one_line_error(p, code=2):
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("invkin: error: "), p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    return lines[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ commands


def test_console_script_and_module_are_the_same_command():
    script = Path(sys.executable).with_name("invkin")
    if not script.exists():
        pytest.skip(f"no console script next to {sys.executable}")
    p = subprocess.run([str(script), "methods"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout == run("methods").stdout


def test_python_m_invkin_is_the_same_command():
    p = subprocess.run([sys.executable, "-m", "invkin", "methods"], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, env=ENV)
    assert p.returncode == 0 and p.stdout == run("methods").stdout and "lm" in p.stdout.split()
    bad = subprocess.run([sys.executable, "-m", "invkin", "fk", "panda", "--frame", "panda_hnd"], capture_output=True,
                         text=True, timeout=120, cwd=ROOT, env=ENV)
    assert "panda_hand" in assert_one_line_error(bad)  # the exit code of main() reaches the shell


def test_info_prints_the_tree_and_json_lists_joints_and_frames():
    p = run("info", "panda")
    assert p.returncode == 0 and "panda_joint1" in p.stdout and "panda_hand" in p.stdout
    d = json.loads(run("info", "panda", "--json").stdout)
    assert d["dof"] == 7 and len(d["joint_names"]) == 7 and "panda_hand" in d["frames"]


def test_info_gives_the_mass_and_the_centre_of_mass_or_says_there_is_none():
    g1 = ik.load_robot("g1")
    d = json.loads(run("info", "g1", "--json").stdout)
    assert d["mass"] == pytest.approx(g1.link_mass.sum()) and d["mass"] > 30
    assert np.allclose(d["center_of_mass_at_neutral"], g1.center_of_mass(g1.neutral()), atol=1e-12)
    c = d["center_of_mass_at_neutral"]
    assert f"mass: {d['mass']:.4g} kg over 35 links; centre of mass at the neutral q: ({c[0]:.4f}," in run("info", "g1").stdout
    p = run("info", "planar2")
    assert p.returncode == 0 and "mass: none (no <inertial> masses" in p.stdout
    d = json.loads(run("info", "planar2", "--json").stdout)
    assert d["mass"] == 0.0 and d["center_of_mass_at_neutral"] is None


def test_fk_json_gives_the_frame_pose():
    p = run("fk", "planar2", "--q", 0, 0, "--frame", "hand", "--json")
    assert p.returncode == 0
    T = np.array(json.loads(p.stdout)["T"])
    assert np.allclose(T[:3, 3], [1.8, 0.0, 0.0])


def test_solve_json_reports_q_names_status_and_errors():
    p = run("solve", "planar2", "--frame", "hand", "--xyz", 1.0, 0.8, 0.0, "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    for key in ("q", "joint_names", "success", "status", "position_error", "rotation_error"):
        assert key in d
    assert d["success"] is True and d["status"] == "converged"
    assert d["joint_names"] == ["shoulder", "elbow"] and len(d["q"]) == 2
    robot = ik.load_robot("planar2")
    assert np.linalg.norm(robot.fk(np.array(d["q"]), "hand")[:3, 3] - [1.0, 0.8, 0.0]) <= 1e-6
    assert d["position_error"] <= 1e-6


def test_solve_of_an_unreachable_target_exits_1_with_the_stretched_pose():
    p = run("solve", "planar2", "--frame", "hand", "--xyz", 5.0, 0.0, 0.0, "--json")
    assert p.returncode == 1, p.stderr
    d = json.loads(p.stdout)
    assert d["success"] is False and d["status"] == "unreachable"
    assert abs(d["position_error"] - (5.0 - 1.8)) < 1e-3


def test_methods_lists_every_registered_method():
    p = run("methods")
    assert p.returncode == 0 and p.stdout.split() == ik.methods()


def test_demo_tour_prints_the_panda_tour():
    p = run("demo", "--tour")
    assert p.returncode == 0, p.stderr
    assert "Franka Panda" in p.stdout and "Jacobian" in p.stdout and "converged" in p.stdout


def test_a_reader_that_closes_the_pipe_is_not_an_error():
    """`invkin info g1 | head -1`: exit 141 (as SIGPIPE), nothing on stderr, never 'invkin: error: Broken pipe'."""
    p = subprocess.Popen(INVKIN + ["info", "g1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=ENV)
    p.stdout.close()  # before the command writes a byte: its every write meets a closed pipe
    _, err = p.communicate(timeout=120)
    assert p.returncode == 141, (p.returncode, err)
    assert err.decode().strip() == ""


@pytest.mark.parametrize("command", ["info", "fk", "solve", "methods", "demo", "view"])
def test_every_command_has_help(command):
    p = run(command, "--help")
    assert p.returncode == 0 and p.stdout.startswith("usage: invkin " + command)


def test_view_and_demo_help_name_host_port_and_defaults():
    view = run("view", "--help").stdout
    assert "ROBOT|CLIP.bvh|CLIP.glb|MOTION.npz" in view and "none for a clip or a motion" in view and "--port" in view and "--host" in view and "127.0.0.1" in view
    demo = run("demo", "--help").stdout
    for word in ("panda", "tentacle", "two-bone", "reach", "--tour", "8080"):
        assert word in demo


# ------------------------------------------------------------------ bad input: exit 2, one line


def test_unknown_robot_is_one_line_naming_close_models():
    line = assert_one_line_error(run("info", "pandaa"))
    assert "'pandaa'" in line and "panda" in line


def test_malformed_bvh_is_one_line_with_the_line_number(tmp_path):
    f = tmp_path / "broken.bvh"
    f.write_text("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0\n")
    for cmd in (("info", f), ("view", f, "--port", 0)):
        line = assert_one_line_error(run(*cmd))
        assert "broken.bvh" in line


def test_unknown_method_is_one_line_listing_the_methods():
    line = assert_one_line_error(run("solve", "planar2", "--frame", "hand", "--xyz", 1, 0, 0, "--method", "ccdd"))
    assert "'ccdd'" in line and "lm" in line and "ccd" in line


def test_unknown_frame_is_one_line_naming_close_frames():
    line = assert_one_line_error(run("solve", "panda", "--frame", "panda_hnad", "--xyz", 0.4, 0, 0.4))
    assert "'panda_hnad'" in line and "panda_hand" in line
    assert_one_line_error(run("fk", "panda", "--frame", "nope"))
    assert_one_line_error(run("view", "panda", "--frame", "nope", "--port", 0))


def test_wrong_q_count_is_one_line_with_the_expected_count():
    line = assert_one_line_error(run("fk", "panda", "--q", 0, 0, 0))
    assert "expected 7 values" in line and "got 3" in line


def test_view_with_an_unknown_method_is_one_line():
    assert "'nope'" in assert_one_line_error(run("view", "planar2", "--method", "nope", "--port", 0))


def test_demo_tour_of_another_demo_is_refused():
    assert_one_line_error(run("demo", "tentacle", "--tour"))


def test_article_ccd_is_an_option_of_the_tentacle_demo_only():
    assert "--article-ccd" in run("demo", "--help").stdout
    assert "tentacle demo only" in assert_one_line_error(run("demo", "panda", "--article-ccd", "--port", 0))


@pytest.mark.parametrize("command", [("view", "planar2"), ("demo",), ("demo", "tentacle")])
def test_a_port_in_use_exits_2_naming_the_port(command):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        line = assert_one_line_error(run(*command, "--port", port))
    assert str(port) in line and "in use" in line


# ------------------------------------------------------------------ serving


def _serve(*args):
    """Start `invkin ARGS`, wait for the URL line; returns (process, url)."""
    p = subprocess.Popen(INVKIN + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=ROOT, env=ENV)
    end = time.monotonic() + 90
    line = ""
    while time.monotonic() < end:
        line = p.stdout.readline()
        if "http://" in line or p.poll() is not None:
            break
    if "http://" not in line:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"no URL printed: {line!r} {out!r} {err!r}")
    return p, line.split("http://", 1)[1].split()[0]


def _stop(p, sig=signal.SIGINT):
    p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("the viewer did not stop on the signal")
    return p.returncode, out, err


@pytest.mark.parametrize("args", [("view", "planar2"), ("demo", "tentacle")])
def test_serving_prints_the_url_serves_only_the_app_and_ctrl_c_stops_cleanly(args):
    pytest.importorskip("viser", reason="the viewer needs the [viewer] extra (viser)")
    port = free_port()
    p, hostport = _serve(*args, "--port", port)
    try:
        assert hostport == f"127.0.0.1:{port}"
        with urllib.request.urlopen(f"http://{hostport}/", timeout=10) as r:
            assert r.status == 200 and b"<html" in r.read(4096).lower()
        for path in ("/../../../pyproject.toml", "/%2e%2e/%2e%2e/_viser.py", "/etc/passwd"):
            try:
                with urllib.request.urlopen(f"http://{hostport}{path}", timeout=10) as r:
                    body = r.read()
            except urllib.error.HTTPError:
                continue
            assert b"[project]" not in body and b"import " not in body and b"root:" not in body
    finally:
        code, out, err = _stop(p)
    assert code == 0, err
    assert "stopped" in out and "Traceback" not in err


def test_sigterm_stops_the_viewer_cleanly_too():
    pytest.importorskip("viser", reason="the viewer needs the [viewer] extra (viser)")
    p, _ = _serve("view", "planar2", "--port", free_port())
    code, out, err = _stop(p, signal.SIGTERM)
    assert code == 0 and "stopped" in out and "Traceback" not in err


def _raw_http(hostport: str, request: bytes, timeout: float = 20.0):
    """test_viewer._http on a "host:port" string."""
    from test_viewer import _http

    host, port = hostport.rsplit(":", 1)
    return _http(int(port), request, timeout, host)


def test_every_http_method_gets_a_status_line_and_a_sized_body_never_an_empty_reply():
    """`curl -X POST` on the viewer printed "Empty reply from server": websockets' HTTP parser takes
    only GET, so HEAD, POST, DELETE, OPTIONS were cut off without a status line."""
    pytest.importorskip("viser", reason="the viewer needs the [viewer] extra (viser)")
    p, hostport = _serve("view", "planar2", "--port", 0)
    try:
        get = _raw_http(hostport, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert get[0] == 200 and get[1]["content-type"] == "text/html; charset=utf-8"
        assert int(get[1]["content-length"]) == len(get[2]) > 1000 and get[1]["connection"] == "close"
        status, headers, body = _raw_http(hostport, b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (status, body) == (200, b"")  # GET's headers, no body
        assert headers["content-length"] == get[1]["content-length"]
        assert headers["content-type"] == get[1]["content-type"]
        for method in ("POST", "PUT", "DELETE", "PATCH", "TRACE"):
            status, headers, body = _raw_http(hostport, f"{method} / HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            assert status == 405, (method, status)
            assert headers["allow"] == "GET, HEAD, OPTIONS"
            assert headers["content-type"] == "text/plain; charset=utf-8"
            assert int(headers["content-length"]) == len(body) and method.encode() in body
        status, headers, body = _raw_http(hostport, b"OPTIONS / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (status, headers["allow"], body) == (204, "GET, HEAD, OPTIONS", b"")
        for method in ("GET", "POST", "DELETE"):  # an unknown path is 404 whatever the method
            status, headers, body = _raw_http(hostport, f"{method} /nope HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            assert status == 404 and body == b"404 Not Found: /nope\n", (method, status, body)
            assert int(headers["content-length"]) == len(body) and headers["content-type"].startswith("text/plain")
        # a POST with a 4 MB body: the whole 405 arrives (no reset for the body left unread)
        status, headers, body = _raw_http(hostport, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4000000\r\n\r\n"
                                          + b"x" * 4_000_000)
        assert status == 405 and int(headers["content-length"]) == len(body)
        # HTTP/1.0 and a GET with a body were cut off too
        assert _raw_http(hostport, b"GET / HTTP/1.0\r\n\r\n")[0] == 200
        assert _raw_http(hostport, b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")[0] == 200
    finally:
        code, out, err = _stop(p)
    assert code == 0 and "stopped" in out
    assert err == "", err  # nothing in the server log: no traceback, no "opening handshake failed"


def test_a_long_clip_says_it_is_being_corrected_before_the_url(tmp_path):
    """A 100 000-frame BVH kept `invkin view` silent for 62 s (the clip is corrected before serving)."""
    pytest.importorskip("viser", reason="the viewer needs the [viewer] extra (viser)")
    from invkin.viewer.cli import LONG_CLIP

    head, _, motion = (ROOT / "tests" / "data" / "two_joints.bvh").read_text().partition("MOTION")
    frames = [" ".join(str(0.01 * (i % 50)) for _ in range(9)) for i in range(LONG_CLIP)]
    clip = tmp_path / "long.bvh"
    clip.write_text(head + f"MOTION\nFrames: {LONG_CLIP}\nFrame Time: 0.0333333\n" + "\n".join(frames) + "\n")
    p = subprocess.Popen(INVKIN + ["view", str(clip), "--port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT, env=ENV)
    try:
        first = p.stdout.readline()
        assert first.startswith(f"invkin viewer: correcting the clip ({LONG_CLIP} frames)"), first
        assert "http://" in p.stdout.readline()
    finally:
        code, out, err = _stop(p)
    assert code == 0 and "Traceback" not in err
