"""Link shapes: the URDF reader's <visual>/<collision> parsing, mesh lookup, and the viewer's
mesh loading (colours, decimation, cache), start pose and clip up axis (no browser here)."""
from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin.model.geometry import resolve_mesh_path, visuals_of
from invkin.model.urdf import load_urdf, parse_urdf

ROOT = Path(__file__).resolve().parents[1]
ROBOTS = ROOT / "src" / "invkin" / "data" / "robots"
MOCAP = ROOT / "src" / "invkin" / "data" / "mocap"

SHAPES_URDF = """<?xml version="1.0"?>
<robot name="shapes">
  <material name="red"><color rgba="1 0 0 1"/></material>
  <link name="base">
    <visual name="plate">
      <origin xyz="0 0 0.05" rpy="0 0 1.5707963267948966"/>
      <geometry><box size="0.4 0.3 0.1"/></geometry>
      <material name="red"/>
    </visual>
    <collision><geometry><box size="0.5 0.4 0.1"/></geometry></collision>
  </link>
  <link name="arm">
    <visual>
      <geometry><cylinder radius="0.05" length="0.6"/></geometry>
      <material name="blue"><color rgba="0 0 1 0.5"/></material>
    </visual>
    <visual><geometry><sphere radius="0.08"/></geometry></visual>
    <visual><geometry><capsule radius="0.03" length="0.2"/></geometry></visual>
    <visual><geometry/></visual>
    <inertial><origin xyz="9 9 9"/></inertial>
  </link>
  <joint name="j1" type="revolute">
    <parent link="base"/><child link="arm"/><origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1"/>
  </joint>
</robot>
"""


def _without_visuals(text: str) -> str:
    return re.sub(r"<visual>.*?</visual>", "", text, flags=re.S)


# ------------------------------------------------------------------ the reader


def test_primitives_origins_and_colours_are_read_per_link():
    r = parse_urdf(SHAPES_URDF)
    vis = visuals_of(r)
    assert [(g.link, g.kind) for g in vis] == [("base", "box"), ("arm", "cylinder"), ("arm", "sphere"),
                                               ("arm", "capsule")]  # the empty <geometry/> is skipped
    box, cyl, sph, cap = vis
    assert box.size == (0.4, 0.3, 0.1) and box.name == "plate"
    assert np.allclose(box.T_link_geom[:3, 3], (0, 0, 0.05))
    assert np.allclose(box.T_link_geom[:3, :3] @ (1, 0, 0), (0, 1, 0))  # yaw pi/2
    assert box.rgba == (1.0, 0.0, 0.0, 1.0) and box.material == "red"   # named top-level material
    assert cyl.size == (0.05, 0.6) and cyl.rgba == (0.0, 0.0, 1.0, 0.5)  # inline colour
    assert sph.size == (0.08,) and sph.rgba is None
    assert cap.size == (0.03, 0.2)
    assert [(g.link, g.kind, g.size) for g in r.collisions] == [("base", "box", (0.5, 0.4, 0.1))]
    assert not box.T_link_geom.flags.writeable


def test_a_cut_chain_keeps_only_its_links_shapes():
    r = parse_urdf(SHAPES_URDF, base="arm")
    assert {g.link for g in r.visuals} == {"arm"} and r.collisions == ()


def test_bad_numbers_in_a_shape_are_located_errors():
    bad = SHAPES_URDF.replace('radius="0.08"', 'radius="big"')
    with pytest.raises(ik.ModelError, match=r"sphere radius='big'.*not a number|'big' is not a number"):
        parse_urdf(bad)
    with pytest.raises(ik.ModelError, match="no filename"):
        parse_urdf(SHAPES_URDF.replace('<sphere radius="0.08"/>', '<mesh/>'))
    with pytest.raises(ik.ModelError, match=r"negative size \(-1.0,\); expected sizes >= 0"):
        parse_urdf(SHAPES_URDF.replace('radius="0.08"', 'radius="-1"'))


@pytest.mark.parametrize("shape, says", [
    ('<box size="1e300 1 1"/>', r"<box> \(line 1\): size \(1e\+300, 1.0, 1.0\) exceeds 1e\+09"),
    ('<sphere radius="2e9"/>', r"<sphere> \(line 1\): size \(2000000000.0,\) exceeds 1e\+09"),
    ('<mesh filename="m.stl" scale="1 1e300 1"/>', r"<mesh> \(line 1\): scale \(1.0, 1e\+300, 1.0\) exceeds 1e\+09"),
])
def test_a_shape_beyond_the_length_bound_is_a_located_error_not_an_overflow(shape, says):
    # a 1e300 box reached the capsule fit, which overflowed (RuntimeWarnings) and raised a raw TypeError
    with pytest.raises(ik.ModelError, match=says + r"; expected a shape within ±1e\+09 m"):
        parse_urdf(f'<robot name="r"><link name="a"><collision><geometry>{shape}</geometry></collision></link></robot>')


def test_a_collision_shape_of_an_unknown_kind_is_left_out_with_one_warning_naming_it():
    # pybullet_data's plane_implicit.urdf (<plane>) and toys/concave_box.urdf (<cdf>): left out in
    # silence, a collision check passed through them
    text = ('<robot name="r"><link name="a"><collision><geometry><plane normal="0 0 1"/></geometry></collision>\n'
            '<collision><geometry><box size="1 1 1"/></geometry></collision>\n'
            '<collision><origin xyz="0 0 1"/></collision>\n'
            '<visual><geometry><cone/></geometry></visual></link></robot>')
    with pytest.warns(ik.ModelWarning) as rec:
        r = parse_urdf(text)
    assert len(rec) == 1 and str(rec[0].message) == (
        "<string>: 2 <collision> element(s) left out, with no box, cylinder, sphere, capsule or mesh inside "
        "<geometry>: link 'a' (line 1): <plane>; link 'a' (line 3): no <geometry>")
    assert [g.kind for g in r.collisions] == ["box"] and r.visuals == ()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ik.ModelWarning)
        parse_urdf(SHAPES_URDF)  # every shape known: nothing said


def test_bundled_panda_carries_its_meshes_and_the_same_kinematics():
    r = ik.load_robot("panda")
    assert [g.link for g in r.visuals] == [f"panda_link{k}" for k in range(8)] + ["panda_hand"]
    assert all(g.kind == "mesh" and g.path and g.path.endswith(".glb") for g in r.visuals)
    bare = parse_urdf(_without_visuals((ROBOTS / "panda.urdf").read_text()))
    assert bare.visuals == () and bare.node_names == r.node_names
    q = r.sample(20, rng=np.random.default_rng(0))
    assert np.array_equal(r.fk_all_array(q), bare.fk_all_array(q))


def test_package_urls_resolve_from_the_file_tree_then_ros_package_path(tmp_path, monkeypatch):
    pkg = tmp_path / "ws" / "my_robot"
    (pkg / "meshes").mkdir(parents=True)
    (pkg / "urdf").mkdir()
    (pkg / "meshes" / "a.stl").write_text("solid a\nendsolid a\n")
    urdf_dir = str(pkg / "urdf")
    assert resolve_mesh_path("package://my_robot/meshes/a.stl", urdf_dir) == str(pkg / "meshes" / "a.stl")
    assert resolve_mesh_path("package:///my_robot/meshes/a.stl", urdf_dir) == str(pkg / "meshes" / "a.stl")
    assert resolve_mesh_path("../meshes/a.stl", urdf_dir) == str(pkg / "meshes" / "a.stl")
    assert resolve_mesh_path(f"file://{pkg}/meshes/a.stl", None) == str(pkg / "meshes" / "a.stl")
    elsewhere = str(tmp_path / "other")
    assert resolve_mesh_path("package://my_robot/meshes/a.stl", elsewhere) is None
    monkeypatch.setenv("ROS_PACKAGE_PATH", str(tmp_path / "ws"))
    assert resolve_mesh_path("package://my_robot/meshes/a.stl", elsewhere) == str(pkg / "meshes" / "a.stl")
    assert resolve_mesh_path("package://my_robot/meshes/missing.stl", elsewhere) is None


def test_a_urdf_file_finds_its_meshes_through_package_urls(tmp_path):
    pkg = tmp_path / "shapes_description"
    (pkg / "urdf").mkdir(parents=True)
    (pkg / "meshes").mkdir()
    (pkg / "meshes" / "m.stl").write_text("solid a\nendsolid a\n")
    text = SHAPES_URDF.replace('<sphere radius="0.08"/>',
                               '<mesh filename="package://shapes_description/meshes/m.stl" scale="2 2 2"/>')
    (pkg / "urdf" / "shapes.urdf").write_text(text)
    g = [v for v in load_urdf(pkg / "urdf" / "shapes.urdf").visuals if v.kind == "mesh"][0]
    assert g.filename == "package://shapes_description/meshes/m.stl"
    assert g.path == str(pkg / "meshes" / "m.stl") and g.size == (2.0, 2.0, 2.0)


def test_mjcf_primitive_geoms_become_shapes_with_full_lengths():
    pytest.importorskip("mujoco", reason="MJCF needs the [mujoco] extra")
    from invkin.model.geometry import collisions_of

    r = ik.load_robot(ROOT / "tests" / "data" / "mjcf" / "arm.xml")
    vis = {g.name: g for g in visuals_of(r)}
    geoms = {g.name: (link, g) for link, gs in r.geoms.items() for g in gs}
    assert set(vis) == set(geoms)
    for name, g in vis.items():
        link, m = geoms[name]
        assert g.link == link and np.allclose(g.T_link_geom, m.T_link_geom)
        full = {"box": 2 * m.size[:3], "capsule": (m.size[0], 2 * m.size[1]), "sphere": m.size[:1]}[m.type]
        assert g.kind == m.type and np.allclose(g.size, full)
    colliding = {g.name for gs in r.geoms.values() for g in gs if g.contype or g.conaffinity}
    assert {g.name for g in collisions_of(r)} == colliding != set(vis)


def test_mjcf_mesh_geoms_are_drawn_from_mujocos_compiled_vertices():
    # mesh geoms were skipped: an MJCF robot of meshes was a stick figure ("no visual shapes")
    mujoco = pytest.importorskip("mujoco", reason="MJCF needs the [mujoco] extra")
    from invkin.model.geometry import collisions_of
    from invkin.viewer.meshes import geometry_parts

    path = ROOT / "tests" / "data" / "mjcf" / "meshes.xml"
    r = ik.load_robot(path)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    vis = visuals_of(r)
    assert [(g.link, g.kind) for g in vis] == [("base", "mesh"), ("link1", "mesh"), ("link2", "mesh")]
    assert len(collisions_of(r)) == 3
    Ts = r.fk_all(r.neutral())
    for g, geom in zip(vis, range(m.ngeom)):
        (part,) = geometry_parts(g)
        a, n = m.mesh_vertadr[m.geom_dataid[geom]], m.mesh_vertnum[m.geom_dataid[geom]]
        assert part.vertices.shape == (n, 3) and part.faces.max() < n
        world = (Ts[g.link] @ g.T_link_geom)[:3] @ np.c_[part.vertices, np.ones(n)].T
        mj = m.mesh_vert[a:a + n] @ d.geom_xmat[geom].reshape(3, 3).T + d.geom_xpos[geom]
        assert np.allclose(world.T, mj, atol=1e-6)  # float32 vertices


def test_mjcf_visuals_are_the_groups_mujoco_shows_not_the_collision_geoms_over_them(tmp_path):
    # Menagerie's layout: a visual mesh in group 2, a collision capsule in group 3 (hidden by
    # MuJoCo's viewer); both were drawn, one inside the other
    pytest.importorskip("mujoco", reason="MJCF needs the [mujoco] extra")
    from invkin.model.geometry import collisions_of

    p = tmp_path / "groups.xml"
    p.write_text('<mujoco><asset><mesh name="bar" vertex="0 0 0 1 0 0 0 1 0 0 0 1"/></asset><worldbody>'
                 '<body name="l1"><joint name="j1" type="hinge"/>'
                 '<geom type="mesh" mesh="bar" group="2" contype="0" conaffinity="0"/>'
                 '<geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" group="3"/></body></worldbody></mujoco>')
    r = ik.load_robot(p)
    assert [g.kind for g in visuals_of(r)] == ["mesh"] and [g.kind for g in collisions_of(r)] == ["capsule"]
    assert len(visuals_of(ik.load_robot(ROOT / "tests" / "data" / "mjcf" / "arm.xml"))) == 4  # groups 0: all


# ------------------------------------------------------------------ meshes for the viewer

trimesh = pytest.importorskip("trimesh", reason="mesh loading needs the [viewer] extra (trimesh)")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INVKIN_MESH_CACHE_DIR", str(tmp_path / "meshes"))
    return tmp_path / "meshes"


def test_panda_link_meshes_load_with_their_material_colours(cache):
    from invkin.viewer.meshes import geometry_parts

    g = ik.load_robot("panda").visuals[0]
    parts = geometry_parts(g)
    colours = {tuple(round(c, 2) for c in p.rgb) for p in parts}
    assert (0.25, 0.25, 0.25) in colours and (1.0, 1.0, 1.0) in colours  # dark grey and white parts
    for p in parts:
        assert p.vertices.dtype == np.float32 and p.faces.max() < len(p.vertices)
    lo, hi = np.vstack([p.vertices for p in parts]).min(0), np.vstack([p.vertices for p in parts]).max(0)
    assert 0.1 < hi[2] - lo[2] < 0.4  # link0 is about 0.33 m tall: metres, not millimetres


def test_a_large_mesh_is_decimated_once_and_read_back_from_the_cache(cache, tmp_path, monkeypatch):
    pytest.importorskip("fast_simplification", reason="decimation needs fast-simplification")
    from invkin.model.geometry import Geometry
    from invkin.viewer import meshes

    big = trimesh.creation.icosphere(subdivisions=6, radius=0.5)  # 81920 triangles
    path = tmp_path / "big.stl"
    big.export(path)
    g = Geometry("l", "mesh", (1.0, 1.0, 1.0), np.eye(4), "big.stl", str(path), (0.2, 0.6, 0.2, 1.0))
    parts = meshes.geometry_parts(g, max_faces=2000)
    n = sum(len(p.faces) for p in parts)
    assert 1500 <= n <= 2100
    r = np.linalg.norm(np.vstack([p.vertices for p in parts]), axis=1)
    assert np.all(np.abs(r - 0.5) < 0.02)  # still the sphere
    assert parts[0].rgb == (0.2, 0.6, 0.2)  # an STL has no colour: the URDF's paints it
    assert len(list(cache.glob("*.npz"))) == 1

    def no_parse(*_a, **_k):
        raise AssertionError("parsed again instead of reading the cache")

    monkeypatch.setattr(meshes, "_read_file", no_parse)
    again = meshes.geometry_parts(g, max_faces=2000)
    assert sum(len(p.faces) for p in again) == n


def test_a_missing_or_broken_mesh_is_a_clear_error(cache, tmp_path):
    from invkin.model.geometry import Geometry
    from invkin.viewer.meshes import MeshLoadError, geometry_parts

    with pytest.raises(MeshLoadError, match="not found.*ROS_PACKAGE_PATH"):
        geometry_parts(Geometry("l", "mesh", (1, 1, 1), np.eye(4), "package://nope/a.stl", None))
    bad = tmp_path / "bad.obj"
    bad.write_text("this is not a mesh\n")
    with pytest.raises(MeshLoadError, match="bad.obj"):
        geometry_parts(Geometry("l", "mesh", (1, 1, 1), np.eye(4), "bad.obj", str(bad)))


# ------------------------------------------------------------------ start pose and up axis


def test_start_pose_is_zero_inside_the_limits_and_mid_range_elsewhere():
    from invkin.viewer.pose import start_pose

    r = ik.load_robot("panda")
    q = start_pose(r)
    j4 = r.joint_names.index("panda_joint4")  # limits [-3.07, -0.07]: 0 is outside
    assert q[j4] == pytest.approx(0.5 * (r.lower[j4] + r.upper[j4]))
    assert np.all(q[np.arange(r.dof) != j4] == 0.0)
    assert np.all((r.lower <= q) & (q <= r.upper))


def test_q_and_state_options_refuse_bad_input_clearly(capsys):
    from invkin.viewer import ViewerError
    from invkin.viewer.pose import named_pose, parse_q

    r = ik.load_robot("panda")
    assert np.allclose(parse_q(r, "0, -0.78 0 -2.36 0 1.57 0.78"), [0, -0.78, 0, -2.36, 0, 1.57, 0.78])
    with pytest.raises(ViewerError, match="7 DOF.*got 2 values"):
        parse_q(r, "0 1")
    with pytest.raises(ViewerError, match="expected 7 numbers"):
        parse_q(r, "0 a 0 0 0 0 0")
    # a command-line user is told the option, not the Python call (was: 'load an SRDF: ik.load_srdf(robot,
    # path)'), and --help no longer promises a bundled SRDF: no bundled model carries one
    with pytest.raises(ViewerError, match="--state 'half_sitting'.*no SRDF group states; give its SRDF with --srdf"):
        named_pose(r, "half_sitting")
    from invkin.cli import main
    from invkin.model.catalog import bundled_names

    assert not any(ik.load_robot(n).named_configurations for n in bundled_names())
    assert main(["view", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    state = help_text.split("--state NAME")[-1].split(" --up ")[0]
    assert "bundled SRDF" not in state and "needs --srdf" in state


def test_state_starts_in_the_srdf_group_state():
    import warnings

    from invkin.viewer import ViewerError
    from invkin.viewer.pose import named_pose

    erd = ROOT / "tests" / "data" / "erd"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ik.ModelWarning)  # the gripper mimics on fixed joints
        talos = ik.load_robot(erd / "talos_reduced.urdf", srdf=erd / "talos.srdf")
    q = named_pose(talos, "half_sitting")
    assert np.array_equal(q, talos.clamp(talos.named_configuration("half_sitting")))
    assert q[talos.joint_names.index("leg_left_4_joint")] == 0.859395  # the knee bent
    with pytest.raises(ViewerError, match="closest: 'half_sitting'"):
        named_pose(talos, "half_sittin")


@pytest.mark.parametrize("up", ["x", "y", "z", "-x", "-y", "-z"])
def test_up_rotation_turns_the_up_axis_onto_plus_z(up):
    from invkin.viewer.character import up_rotation

    R = up_rotation(up)
    a = np.zeros(3)
    a["xyz".index(up[-1])] = -1.0 if up.startswith("-") else 1.0
    assert np.allclose(R @ a, (0, 0, 1)) and np.allclose(R @ R.T, np.eye(3)) and np.isclose(np.linalg.det(R), 1)


@pytest.mark.parametrize("clip, up", [("fair1_wave_hello.bvh", "z"), ("cmu_02_01_walk.bvh", "y")])
def test_a_clip_stands_upright_in_the_viewer_whatever_its_up_axis(clip, up):
    from invkin.viewer import ViewerApp
    from invkin.viewer.character import up_rotation

    app = ViewerApp(MOCAP / clip, port=0)
    assert app.up_axis == up
    r = app.robot
    P = r.fk_all_array(app.clip.frames[0])[:, :3, 3] @ up_rotation(app.up_axis).T
    names = [n.lower() for n in r.node_names]
    head = P[next(i for i, n in enumerate(names) if "head" in n)]
    feet = P[[i for i, n in enumerate(names) if "foot" in n and not n.endswith("_end")]]
    assert head[2] > feet[:, 2].max() + 0.5 * (P[:, 2].max() - P[:, 2].min())


def test_an_unknown_up_axis_is_refused_with_the_choices():
    from invkin.viewer import ViewerApp, ViewerError

    with pytest.raises(ViewerError, match="choose one of: x, y, z"):
        ViewerApp(MOCAP / "fair1_wave_hello.bvh", port=0, up="w")


def test_view_command_refuses_a_wrong_q_before_serving():
    p = subprocess.run([sys.executable, "-m", "invkin.cli", "view", "panda", "--q", "0 1", "--port", "0"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "7 DOF" in p.stderr and "Traceback" not in p.stderr
