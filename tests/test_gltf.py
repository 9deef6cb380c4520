"""glTF 2.0 reader/writer (invkin.read_gltf / write_gltf), checked against an independent evaluation.

The reference here reads the files with pygltflib and NumPy alone: accessors straight from the
buffer, node matrices composed as T·R·S, sampler keys taken as they are (no invkin code).
"""
import base64
import dataclasses
import types
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin.model.gltf import GltfClip, euler_from_matrix, ORDERS, _axis_rot

pg = pytest.importorskip("pygltflib")
from hypothesis import given, settings, strategies as st  # noqa: E402

DATA = Path(__file__).parent / "data" / "gltf"
RIGGED = DATA / "rigged_simple.gltf"
WALKER = DATA / "walker.glb"


def _ref_buffer(doc, path):
    b = doc.buffers[0]
    if b.uri is None:
        return doc.binary_blob()
    return base64.b64decode(b.uri.split(",", 1)[1])


def _ref_accessor(doc, data, i):
    a = doc.accessors[i]
    bv = doc.bufferViews[a.bufferView]
    n = {"SCALAR": 1, "VEC3": 3, "VEC4": 4, "MAT4": 16}[a.type]
    off = (bv.byteOffset or 0) + (a.byteOffset or 0)
    return np.frombuffer(data, "<f4", count=a.count * n, offset=off).reshape(a.count, n).astype(float)


def _ref_world(path, key: int):
    """World matrices of every node at key ``key`` of animation 0 (keys shared by all samplers)."""
    doc = pg.GLTF2().load(str(path))
    data = _ref_buffer(doc, path)
    trs = {}
    for i, nd in enumerate(doc.nodes):
        if nd.matrix is not None:
            trs[i] = np.array(nd.matrix).reshape(4, 4).T
            continue
        trs[i] = [np.array(nd.translation or [0, 0, 0], float), np.array(nd.rotation or [0, 0, 0, 1], float),
                  np.array(nd.scale or [1, 1, 1], float)]
    an = doc.animations[0]
    for ch in an.channels:
        s = an.samplers[ch.sampler]
        v = _ref_accessor(doc, data, s.output)
        if s.interpolation == "CUBICSPLINE":
            v = v.reshape(-1, 3, v.shape[1])[:, 1]
        trs[ch.target.node][{"translation": 0, "rotation": 1, "scale": 2}[ch.target.path]] = v[key]

    def local(i):
        m = trs[i]
        if isinstance(m, np.ndarray):
            return m
        t, q, s = m
        x, y, z, w = q / np.linalg.norm(q)
        R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                      [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                      [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
        T = np.eye(4)
        T[:3, :3] = R * s
        T[:3, 3] = t
        return T

    world = {}

    def walk(i, Tp):
        world[i] = Tp @ local(i)
        for c in doc.nodes[i].children or ():
            walk(c, world[i])

    for r in doc.scenes[doc.scene or 0].nodes:
        walk(r, np.eye(4))
    return doc, world


def test_walker_positions_match_an_independent_evaluation_at_every_key():
    robot, clip = ik.read_gltf(WALKER)
    assert isinstance(clip, GltfClip) and clip.n_frames == 60
    for key in (0, 17, 59):
        doc, world = _ref_world(WALKER, key)
        Ts = robot.fk_all(clip.frames[key])
        for k, n in enumerate(clip.gltf_nodes):
            np.testing.assert_allclose(Ts[clip.names[k]], world[n], atol=2e-6)


def test_rigged_simple_keys_match_an_independent_evaluation_and_its_bind_pose():
    robot, clip = ik.read_gltf(RIGGED, fps=1 / (1.041666626930237 - 0.04166661947965622))
    assert clip.names[:2] == ("node0", "node4") and clip.n_frames == 3
    for key in range(2):  # frames at the first two keys (the third frame falls before the last key)
        doc, world = _ref_world(RIGGED, key)
        Ts = robot.fk_all(clip.frames[key])
        for k, n in enumerate(clip.gltf_nodes):
            # scales of 0.99999988 are ignored by FK: positions agree to that factor
            np.testing.assert_allclose(Ts[clip.names[k]][:3, 3], world[n][:3, 3], atol=5e-6)
    # bound in its rest pose: joint (rest) x inverse bind = the skinned mesh node's world matrix,
    # which is the root's (the mesh hangs from node0)
    Ts = robot.fk_all(clip.rest)
    for k, j in enumerate(clip.skin_joints):
        np.testing.assert_allclose(Ts[clip.names[j]] @ clip.inverse_bind[k], Ts["node0"], atol=5e-3)


def test_step_animation_and_resampling_hold_keys():
    robot, step = ik.read_gltf(WALKER, animation=1, fps=30)
    rl, lin = ik.read_gltf(WALKER)
    # STEP keys every other frame: frame 2k+1 holds frame 2k of the full walk (the root does not move)
    def local(r, q, nm):
        return np.linalg.inv(r.fk(q, "Hips")) @ r.fk(q, nm)
    for a, b in ((1, 0), (4, 4), (5, 4)):
        np.testing.assert_allclose(local(robot, step.frames[a], "LeftFoot"), local(rl, lin.frames[b], "LeftFoot"),
                                   atol=1e-6)


def test_unchanged_clip_round_trips_bit_for_bit(tmp_path):
    robot, clip = ik.read_gltf(WALKER)
    for name in ("a.glb", "a.gltf"):
        ik.write_gltf(tmp_path / name, robot, clip)
        r2, c2 = ik.read_gltf(tmp_path / name)
        assert np.array_equal(c2.frames, clip.frames) and c2.channels == clip.channels


def test_corrected_clip_written_back_reads_to_float32_precision(tmp_path):
    robot, clip = ik.read_gltf(WALKER)
    f = np.array(clip.frames)
    rng = np.random.default_rng(0)
    f += rng.normal(0, 0.2, f.shape)
    new = dataclasses.replace(clip, frames=f)
    ik.write_gltf(tmp_path / "b.glb", robot, new)
    r2, c2 = ik.read_gltf(tmp_path / "b.glb")
    T1, T2 = robot.fk_all(new.frames), r2.fk_all(c2.frames)
    for nm in clip.names:
        np.testing.assert_allclose(T2[nm], T1[nm], atol=3e-6)
    # meshes, skins and the other animation are kept
    d1, d2 = pg.GLTF2().load(str(WALKER)), pg.GLTF2().load(str(tmp_path / "b.glb"))
    assert len(d2.meshes) == len(d1.meshes) and len(d2.animations) == len(d1.animations)
    assert d2.skins[0].joints == d1.skins[0].joints
    _, s1 = ik.read_gltf(WALKER, animation=1)
    _, s2 = ik.read_gltf(tmp_path / "b.glb", animation=1)
    assert np.array_equal(s1.frames, s2.frames)


def test_z_up_and_units_are_exact_relabellings():
    robot, clip = ik.read_gltf(WALKER)
    rz, cz = ik.read_gltf(WALKER, up="z", scale=100.0)
    P = np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0]], float)
    for f in (0, 30):
        a, b = robot.fk(clip.frames[f], "Head"), rz.fk(cz.frames[f], "Head")
        np.testing.assert_allclose(b[:3, 3], 100 * P @ a[:3, 3], atol=1e-9)
        np.testing.assert_allclose(b[:3, :3], P @ a[:3, :3] @ P.T, atol=1e-12)


def test_bvh_clip_becomes_a_new_skeleton_gltf(tmp_path):
    rb, cb = ik.read_bvh(ik.model.bvh.__file__.replace("model/bvh.py", "data/mocap/cmu_02_01_walk.bvh"))
    ik.write_gltf(tmp_path / "w.glb", rb, cb, scale=0.01)
    r2, c2 = ik.read_gltf(tmp_path / "w.glb")
    assert c2.n_frames == cb.n_frames
    Ta, Tb = rb.fk_all(cb.frames[::50]), r2.fk_all(c2.frames[::50])
    for nm in cb.names:
        np.testing.assert_allclose(Tb[nm][..., :3, 3], 0.01 * Ta[nm][..., :3, 3], atol=2e-6)
    doc, world = _ref_world(tmp_path / "w.glb", 100)
    Ts = r2.fk_all(c2.frames[100])
    for k, n in enumerate(c2.gltf_nodes):
        np.testing.assert_allclose(Ts[c2.names[k]], world[n], atol=2e-6)


def test_clip_without_frames_or_frame_time_is_refused_and_nothing_written(tmp_path):
    rb, cb = ik.read_bvh(ik.model.bvh.__file__.replace("model/bvh.py", "data/mocap/cmu_02_01_walk.bvh"))
    with pytest.raises(ik.ModelError, match="write_gltf: the clip has no frames"):
        ik.write_gltf(tmp_path / "empty.glb", rb, dataclasses.replace(cb, frames=cb.frames[:0]))
    with pytest.raises(ik.ModelError, match=r"frame time is 0; it must be > 0 to write key times"):
        ik.write_gltf(tmp_path / "still.glb", rb, dataclasses.replace(cb, frame_time=0.0))
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    # one frame needs no frame time: one key time
    ik.write_gltf(tmp_path / "one.glb", rb, dataclasses.replace(cb, frames=cb.frames[5:6], frame_time=0.0))
    r1, c1 = ik.read_gltf(tmp_path / "one.glb")
    assert c1.n_frames == 1
    np.testing.assert_allclose(r1.fk(c1.frames[0], "LeftFoot")[:3, 3], rb.fk(cb.frames[5], "LeftFoot")[:3, 3],
                               atol=1e-4)


def test_robot_of_another_skeleton_is_named_with_the_first_differing_channel(tmp_path):
    rb, cb = ik.read_bvh(ik.model.bvh.__file__.replace("model/bvh.py", "data/mocap/cmu_02_01_walk.bvh"))
    other, _ = ik.read_bvh(ik.model.bvh.__file__.replace("model/bvh.py", "data/mocap/fair1_wave_hello.bvh"))
    a, b = other.joint_names, cb.channel_names
    i = next(k for k, (x, y) in enumerate(zip(a, b)) if x != y)
    want = (f"its {len(a)} joints and the clip's {len(b)} channels first differ at index {i}: "
            f"{a[i]!r} in the robot, {b[i]!r} in the clip")
    with pytest.raises(ik.ModelError) as e:
        ik.write_gltf(tmp_path / "x.glb", other, cb)
    assert want in str(e.value) and str(e.value).startswith("write_gltf: ")
    with pytest.raises(ik.ModelError) as e:
        ik.write_bvh(tmp_path / "x.bvh", other, cb)
    assert want in str(e.value) and str(e.value).startswith("write_bvh: ")
    # joints that stop short: the clip's next channel against nothing
    short = types.SimpleNamespace(name="short", joint_names=cb.channel_names[:6])
    with pytest.raises(ik.ModelError, match=r"its 6 joints and the clip's \d+ channels first differ at index 6: "
                                            r"nothing \(it ends before\) in the robot, 'LHipJoint.Zrotation' in"):
        ik.write_bvh(tmp_path / "x.bvh", short, cb)
    assert list(tmp_path.iterdir()) == []


def test_bad_files_raise_model_errors_naming_the_problem(tmp_path):
    p = tmp_path / "x.glb"
    p.write_bytes(b"not a gltf")
    with pytest.raises(ik.ModelError, match="x.glb"):
        ik.read_gltf(p)
    with pytest.raises(ik.ModelError, match="skin 3 out of range"):
        ik.read_gltf(WALKER, skin=3)
    with pytest.raises(ik.ModelError, match="animation 7 out of range"):
        ik.read_gltf(WALKER, animation=7)
    with pytest.raises(ik.ModelError, match="up axis"):
        ik.read_gltf(WALKER, up="w")


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(ORDERS), st.floats(-3.1, 3.1), st.floats(-1.5707963, 1.5707963), st.floats(-3.1, 3.1))
def test_euler_decomposition_recomposes_every_rotation(order, a, b, c):
    R = _axis_rot("XYZ".index(order[0]), a) @ _axis_rot("XYZ".index(order[1]), b) @ _axis_rot("XYZ".index(order[2]), c)
    x, y, z = euler_from_matrix(R, order)
    R2 = _axis_rot("XYZ".index(order[0]), x) @ _axis_rot("XYZ".index(order[1]), y) @ _axis_rot("XYZ".index(order[2]), z)
    np.testing.assert_allclose(R2, R, atol=1e-9)


def test_bvh_units_and_up_axis_options_are_exact_and_invert(tmp_path):
    path = ik.model.bvh.__file__.replace("model/bvh.py", "data/mocap/cmu_02_01_walk.bvh")
    r, c = ik.read_bvh(path)
    rz, cz = ik.read_bvh(path, scale=0.0254, up="z")
    P = np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0]], float)
    a, b = r.fk(c.frames[10], "LeftFoot"), rz.fk(cz.frames[10], "LeftFoot")
    np.testing.assert_allclose(b[:3, 3], 0.0254 * P @ a[:3, 3], atol=1e-12)
    np.testing.assert_allclose(b[:3, :3], P @ a[:3, :3] @ P.T, atol=1e-12)
    ik.write_bvh(tmp_path / "back.bvh", rz, cz, scale=1 / 0.0254, up="z")
    r2, c2 = ik.read_bvh(tmp_path / "back.bvh")
    assert c2.channels == c.channels
    np.testing.assert_allclose(c2.frames, c.frames, atol=1e-9)


def test_a_planted_gltf_clip_writes_back_into_its_file(tmp_path):
    robot, clip = ik.read_gltf(WALKER)
    new, rep = ik.correct_clip(robot, clip, [ik.FootPlant("LeftFoot"), ik.FootPlant("RightFoot")])
    assert isinstance(new, GltfClip) and rep.count("missed") == 0
    assert rep.sliding_after["LeftFoot"] < 0.01 * rep.sliding_before["LeftFoot"]
    ik.write_gltf(tmp_path / "planted.glb", robot, new)
    r2, c2 = ik.read_gltf(tmp_path / "planted.glb")
    for foot in ("LeftFoot", "RightToeBase"):
        np.testing.assert_allclose(r2.fk(c2.frames, foot)[:, :3, 3], robot.fk(new.frames, foot)[:, :3, 3], atol=2e-6)


def test_rest_pose_and_inverse_bind_matrices_follow_the_reading_conversion():
    """``clip.rest`` is a q of the returned robot and ``inverse_bind`` the skin's matrices in the
    clip's world: read with up="z", scale=100 they were left in the file's Y-up metres (FK of the
    rest pose put Bone.001 8.4 units off)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ik.ModelWarning)  # RiggedSimple's 0.99999988 scales
        r0, c0 = ik.read_gltf(RIGGED)
        r, c = ik.read_gltf(RIGGED, up="z", scale=100.0)
    A = np.eye(4)
    A[:3, :3] = [[1, 0, 0], [0, 0, -1], [0, 1, 0]]
    S = np.diag([100.0, 100.0, 100.0, 1.0])

    def conv(T):
        return S @ A @ T @ A.T @ np.linalg.inv(S)

    T0, T = r0.fk_all(c0.rest), r.fk_all(c.rest)
    for n in c.names:
        np.testing.assert_allclose(T[n], conv(T0[n]), atol=1e-9)
    for k, j in enumerate(c.skin_joints):
        n = c.names[j]
        np.testing.assert_allclose(T[n] @ c.inverse_bind[k], conv(T0[n] @ c0.inverse_bind[k]), atol=1e-9)
    assert not c.rest.flags.writeable  # read-only, as documented


def test_scale_or_up_on_writing_into_the_source_file_is_refused_not_ignored(tmp_path):
    """A clip read by read_gltf is written into its file in the file's own units: write_gltf's scale=
    and up= (for new files) were silently ignored there (the file came out unchanged)."""
    robot, clip = ik.read_gltf(WALKER)
    for kw in ({"scale": 100.0}, {"up": "z"}, {"scale": 1.0}):
        with pytest.raises(ik.ModelError, match=r"write_gltf: (scale|up)=.* drop"):
            ik.write_gltf(tmp_path / "w.glb", robot, clip, **kw)
        assert not (tmp_path / "w.glb").exists()


def test_a_corrected_node_given_as_a_matrix_is_written_as_trs(tmp_path):
    """A joint stored as a ``matrix`` (unanimated in the file) that the correction turns got rotation
    samplers while keeping its matrix: glTF 2.0 forbids a matrix on an animated node (§3.7.2.1)."""
    from invkin.model.gltf import _quat_to_matrix
    doc = pg.GLTF2().load(str(WALKER))
    k = [n.name for n in doc.nodes].index("LeftLeg")
    for an in doc.animations:
        an.channels = [c for c in an.channels if c.target.node != k]
    n = doc.nodes[k]
    M = np.eye(4)
    M[:3, :3] = _quat_to_matrix(np.array(n.rotation or [0, 0, 0, 1.0]))
    M[:3, 3] = n.translation or [0, 0, 0]
    n.matrix, n.rotation, n.translation, n.scale = [float(x) for x in M.T.ravel()], None, None, None
    doc.save(str(tmp_path / "matrix.glb"))
    robot, clip = ik.read_gltf(tmp_path / "matrix.glb")
    new, rep = ik.correct_clip(robot, clip, ik.FootPlant("LeftFoot", contacts=[(10, 30)], toe=False))
    assert np.any(new.frames != clip.frames)
    ik.write_gltf(tmp_path / "out.glb", robot, new)
    out = pg.GLTF2().load(str(tmp_path / "out.glb"))
    animated = {c.target.node for an in out.animations for c in an.channels}
    assert k in animated
    assert all(out.nodes[i].matrix is None for i in animated)
    r2, c2 = ik.read_gltf(tmp_path / "out.glb")
    np.testing.assert_allclose(r2.fk(c2.frames, "LeftFoot")[:, :3, 3], robot.fk(new.frames, "LeftFoot")[:, :3, 3],
                               atol=2e-6)


def test_a_texture_beside_the_source_stays_found_when_written_elsewhere(tmp_path):
    """Image URIs are relative to the glTF file: written into another folder, the corrected file
    pointed at textures that are not there (the URI was copied as it was)."""
    import urllib.parse
    doc = pg.GLTF2().load(str(WALKER))
    doc.images = [pg.Image(uri="textures/skin%20a.png"), pg.Image(uri="data:image/png;base64,AAAA")]
    (tmp_path / "assets" / "textures").mkdir(parents=True)
    (tmp_path / "assets" / "textures" / "skin a.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    doc.save(str(tmp_path / "assets" / "char.glb"))
    robot, clip = ik.read_gltf(tmp_path / "assets" / "char.glb")
    for dst in (tmp_path / "out" / "char.glb", tmp_path / "assets" / "same.gltf",
                tmp_path / "assets" / "textures" / "deep" / "x.glb"):
        dst.parent.mkdir(parents=True, exist_ok=True)
        ik.write_gltf(dst, robot, clip)
        images = pg.GLTF2().load(str(dst)).images
        assert (dst.parent / urllib.parse.unquote(images[0].uri)).resolve() == \
            (tmp_path / "assets" / "textures" / "skin a.png").resolve()
        assert images[1].uri == "data:image/png;base64,AAAA"
    assert pg.GLTF2().load(str(tmp_path / "assets" / "same.gltf")).images[0].uri == "textures/skin%20a.png"


def test_writing_into_a_file_of_another_skeleton_is_refused(tmp_path):
    """source= naming a file whose nodes are not the clip's gave a raw IndexError (walker into
    RiggedSimple) or wrote the motion onto other nodes without a word (RiggedSimple into walker)."""
    import warnings
    robot, clip = ik.read_gltf(WALKER)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ik.ModelWarning)
        r_rig, c_rig = ik.read_gltf(RIGGED)
    for r, c, other, msg in ((robot, clip, RIGGED, "'LeftToeBase' \\(glTF node 5\\) is not there"),
                             (r_rig, c_rig, WALKER, "'node0' \\(glTF node 0\\) is 'Hips' there")):
        new = dataclasses.replace(c, frames=c.frames + 0.01)
        with pytest.raises(ik.ModelError, match=f"does not hold this clip's skeleton: the clip's node {msg}"):
            ik.write_gltf(tmp_path / "x.glb", r, new, source=other)
        assert not (tmp_path / "x.glb").exists()
    copy = tmp_path / "moved.glb"
    copy.write_bytes(WALKER.read_bytes())
    ik.write_gltf(tmp_path / "ok.glb", robot, clip, source=copy)  # the same file moved: fine
    np.testing.assert_array_equal(ik.read_gltf(tmp_path / "ok.glb")[1].frames, clip.frames)


def test_quaternion_signs_are_continuous():
    """_quats flips each quaternion to the sign nearest the previous one (the first nearest ``ref``);
    it did so in a Python loop over frames, most of write_gltf's time on long clips (5.4 of 8.5 s
    for 100k frames of the walk; vectorised, 1.8 s). The result is checked here; speed belongs to
    benchmarks, not tests."""
    from invkin.model.gltf import _matrix_to_quat, _quats
    rng = np.random.default_rng(0)
    ang = np.cumsum(rng.normal(0, 0.4, (3000, 3)), axis=0)
    R = _axis_rot(2, ang[:, 0]) @ _axis_rot(0, ang[:, 1]) @ _axis_rot(1, ang[:, 2])
    for ref in (None, np.array([0.0, 0.0, 0.0, 1.0]), np.array([0.0, 0.0, 0.0, -1.0])):
        Q = _quats(R, ref)
        np.testing.assert_allclose(np.abs(Q), np.abs(_matrix_to_quat(R)))
        assert np.all(np.sum(Q[1:] * Q[:-1], axis=1) >= 0)
        if ref is not None:
            assert Q[0] @ ref >= 0


def test_a_long_clip_keeps_its_frames_through_float32_key_times(tmp_path):
    """A 120 fps clip of 20,000 frames (167 s) written by write_gltf read back as 5,000 frames at
    30 fps: its float32 key times past ~70 s are uniform only to float32 precision, more than the
    0.1 % the reader allowed, so it re-sampled them without a word."""
    rb, cb = ik.read_bvh(Path(ik.__file__).parent / "data" / "mocap" / "cmu_02_01_walk.bvh")
    n = 20000
    long = dataclasses.replace(cb, frames=np.resize(cb.frames, (n, cb.dof)), frame_time=1 / 120)
    ik.write_gltf(tmp_path / "long.glb", rb, long)
    r2, c2 = ik.read_gltf(tmp_path / "long.glb")
    assert c2.n_frames == n
    assert c2.frame_time == pytest.approx(1 / 120, rel=1e-6)
    for f in (0, 9999, n - 1):
        np.testing.assert_allclose(r2.fk(c2.frames[f], "LeftFoot")[:3, 3], rb.fk(long.frames[f], "LeftFoot")[:3, 3],
                                   atol=1e-4)


@pytest.mark.parametrize("fps", ["abc", [30], True, -5, float("nan"), 0])
def test_a_bad_fps_is_a_model_error_whatever_the_keys(fps):
    """read_gltf(fps="abc") raised a raw ValueError (a list: TypeError), fps=True read as 1 fps, and a
    file whose keys needed no re-sampling (or no animation) took any fps without a look."""
    for animation in (0, None):
        with pytest.raises(ik.ModelError, match="read_gltf: fps must be a number > 0"):
            ik.read_gltf(WALKER, fps=fps, animation=animation)


def test_bad_scale_or_up_names_the_argument_the_caller_gave(tmp_path):
    """read_gltf(up="w") said "up_to: up axis must be ...", write_gltf(up="w") "up_from: ..." and a bad
    scale "convert_clip: scale: ...": names the caller never wrote (and read_gltf parsed the whole
    file first)."""
    rb, cb = ik.read_bvh(Path(ik.__file__).parent / "data" / "mocap" / "cmu_02_01_walk.bvh")
    for fn, call in (("read_gltf", lambda **kw: ik.read_gltf(WALKER, **kw)),
                     ("write_gltf", lambda **kw: ik.write_gltf(tmp_path / "w.glb", rb, cb, **kw))):
        with pytest.raises(ik.ModelError, match=f"^{fn}: up: up axis must be one of .* got 'w'"):
            call(up="w")
        with pytest.raises(ik.ModelError, match=f"^{fn}: scale: expected a finite number > 0, got 'abc'"):
            call(scale="abc")
    assert not (tmp_path / "w.glb").exists()


def test_resampling_at_the_files_own_rate_keeps_the_last_key():
    """read_gltf(fps=30) of the walker (60 keys at 30 fps) gave 59 frames, fps=60 118: float32 key
    times end a little short of the grid (1.96666658 s), and the grid stopped one frame early."""
    _, ref = ik.read_gltf(WALKER)
    for fps, n in ((30, 60), (60, 119)):
        _, c = ik.read_gltf(WALKER, fps=fps)
        assert c.n_frames == n
        np.testing.assert_allclose(c.frames[-1], ref.frames[-1], atol=1e-12)  # the last key, clamped


@pytest.mark.parametrize("name", ["walk_fixed.bvh", "walk_fixed", "walk.glb.txt"])
def test_a_path_that_is_not_glb_or_gltf_is_refused(tmp_path, name):
    """write_gltf("walk_fixed.bvh", ...) wrote a JSON glTF under a .bvh name (any suffix but .glb gave
    JSON): the suffix picks the format, so anything else is a ModelError and nothing is written."""
    robot, clip = ik.read_gltf(WALKER)
    with pytest.raises(ik.ModelError, match=r"expected a \.glb \(binary\) or \.gltf \(JSON\) path"):
        ik.write_gltf(tmp_path / name, robot, clip)
    assert not list(tmp_path.iterdir())
    ik.write_gltf(tmp_path / "ok.GLTF", robot, clip)  # the suffix in any case
    np.testing.assert_array_equal(ik.read_gltf(tmp_path / "ok.GLTF")[1].frames, clip.frames)


def test_a_retimed_clip_is_written_with_its_new_times_everywhere(tmp_path):
    """dataclasses.replace(clip, frame_time=dt / 2) of a GltfClip was written at the file's old key
    times (duration unchanged) without a word; and with new times, the nodes the correction left
    alone kept their old samplers at the old times (the legs at double speed, the rest not). Now the
    frame time must agree with the times, and a retimed clip rewrites every node."""
    robot, clip = ik.read_gltf(WALKER)
    new, _ = ik.correct_clip(robot, clip, ik.FootPlant("LeftFoot"), max_iterations=10)
    dt = clip.frame_time / 2
    with pytest.raises(ik.ModelError, match="frame_time .* disagrees with its times"):
        dataclasses.replace(new, frame_time=dt)
    fast = dataclasses.replace(new, frame_time=dt, times=clip.times[0] + np.arange(new.n_frames) * dt)
    ik.write_gltf(tmp_path / "fast.glb", robot, fast)
    r2, c2 = ik.read_gltf(tmp_path / "fast.glb")
    assert c2.n_frames == fast.n_frames and c2.duration == pytest.approx(fast.duration, rel=1e-6)
    for name in ("Head", "LeftFoot", "RightHand"):  # moved by the correction or not: all on the new times
        np.testing.assert_allclose(r2.fk(c2.frames, name)[:, :3, 3], robot.fk(fast.frames, name)[:, :3, 3], atol=2e-6)
