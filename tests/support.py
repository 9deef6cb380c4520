"""Helpers shared by the tests (pytest collects only test_*.py): a finite-difference Jacobian and a
watchdog for calls that must not hang."""
from __future__ import annotations

import threading

import numpy as np

from invkin.spatial import so3_log


def fd_jacobian(robot, q, frame=None, h=1e-6):
    """Central differences of a frame's pose along each increment of ``Robot.integrate``: the
    position change [m] and the rotation log(R+ R-^T) [rad], world-aligned like the geometric
    Jacobian (6, dof)."""
    q = np.asarray(q, dtype=float)
    J = np.zeros((6, robot.dof))
    for k in range(robot.dof):
        d = np.zeros(robot.dof)
        d[k] = h
        Tp = robot.fk(robot.integrate(q, d), frame)
        Tm = robot.fk(robot.integrate(q, -d), frame)
        J[:3, k] = (Tp[:3, 3] - Tm[:3, 3]) / (2 * h)
        J[3:, k] = so3_log(Tp[:3, :3] @ Tm[:3, :3].T) / (2 * h)
    return J


def bounded(fn, seconds):
    """fn() in a watchdog thread: its value, or its exception re-raised here; fails the test if it
    has not returned within ``seconds`` (a hang)."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s: a hang"
    if "error" in box:
        raise box["error"]
    return box.get("value")
