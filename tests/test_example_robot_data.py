"""Every URDF and SRDF of example-robot-data (when the package is installed) loads.

Pinocchio's side of the comparison, and FK against it, is ``benchmarks/robots_pinocchio.py``;
this test keeps the loading part from regressing without Pinocchio.
"""
from __future__ import annotations

import glob
import os
import sysconfig
import warnings

import pytest

import invkin as ik

ROBOTS = os.path.join(sysconfig.get_paths()["purelib"], "cmeel.prefix", "share", "example-robot-data", "robots")
URDFS = sorted(glob.glob(os.path.join(ROBOTS, "**", "*.urdf"), recursive=True))
SRDFS = sorted(glob.glob(os.path.join(ROBOTS, "*", "srdf", "*.srdf")))
# refused by Pinocchio too: an unexpanded xacro file without a robot name
REFUSED = {"ur_description/urdf/ur3.urdf": "xacro"}

pytestmark = pytest.mark.skipif(not URDFS, reason="example-robot-data is not installed")


def test_every_urdf_that_pinocchio_loads_loads():
    loaded, failed = 0, []
    for f in URDFS:
        rel = os.path.relpath(f, ROBOTS)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ik.ModelWarning)
            try:
                robot = ik.load_robot(f)
                loaded += 1
                assert robot.dof >= 0 and robot.frame_names
            except ik.InvkinError as e:
                if rel not in REFUSED:
                    failed.append(f"{rel}: {e}")
                else:
                    assert REFUSED[rel] in str(e)
    assert not failed, "\n".join(failed)
    assert loaded == len(URDFS) - len(REFUSED)


def _urdf_for(srdf):
    """The URDF of the same description folder whose name matches the SRDF's best."""
    folder = os.path.dirname(os.path.dirname(srdf))
    urdfs = sorted(glob.glob(os.path.join(folder, "*", "*.urdf")))
    stem = os.path.splitext(os.path.basename(srdf))[0]
    exact = [u for u in urdfs if os.path.splitext(os.path.basename(u))[0] == stem]
    prefix = [u for u in urdfs if os.path.basename(u).startswith(stem.split("_")[0])]
    return (exact or prefix or urdfs or [None])[0]


def test_every_srdf_loads_on_its_urdf_keeping_what_matches():
    checked = 0
    for s in SRDFS:
        u = _urdf_for(s)
        if u is None or os.path.relpath(u, ROBOTS) in REFUSED:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ik.ModelWarning)
            robot = ik.load_robot(u, srdf=s, srdf_strict=False)  # some name links of other variants
        for nm in robot.named_configurations:
            q = robot.named_configuration(nm)
            assert q.shape == (robot.dof,)
        checked += 1
    assert checked >= 30
