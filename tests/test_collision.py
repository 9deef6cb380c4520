"""Collision: obstacle validation, distance kernels against coal, enclosing capsules of meshes,
which pairs are checked, ik.distances and the distance Jacobian (finite differences)."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin.collision import kernels as CK
from invkin.collision.errors import CollisionError, CollisionWarning
from invkin.collision.model import _mesh_vertices_edges, fit_capsules, mesh_capsules

coal = pytest.importorskip("coal")
trimesh = pytest.importorskip("trimesh")

DATA = Path(__file__).parent / "data"
PANDA = DATA / "erd" / "panda_fingers.urdf"   # example-robot-data's Panda with its collision meshes
PANDA_SRDF = DATA / "erd" / "panda.srdf"


def _rot(rng):
    q = rng.normal(size=4)
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _coal_capsule(a, b, r):
    L = np.linalg.norm(b - a)
    z = (b - a) / L if L > 1e-12 else np.array([0.0, 0.0, 1.0])
    x = np.cross(z, [1.0, 0, 0] if abs(z[0]) < 0.9 else [0, 1.0, 0])
    x /= np.linalg.norm(x)
    if L < 1e-12:
        return coal.Sphere(r), coal.Transform3s(np.eye(3), a)
    return coal.Capsule(r, L), coal.Transform3s(np.c_[x, np.cross(z, x), z], (a + b) / 2)


def _coal_distance(g1, t1, g2, t2):
    return coal.distance(g1, t1, g2, t2, coal.DistanceRequest(), coal.DistanceResult())


def _seg_dist(p, a, b):
    e = b - a
    t = np.clip(np.dot(p - a, e) / max(np.dot(e, e), 1e-300), 0, 1)
    return np.linalg.norm(p - (a + t * e))


def _check_witnesses(out, dist_to_A, dist_to_B):
    """d = n·(pB − pA), |n| = 1; each witness point lies on its shape's surface when the shapes
    are apart, and in its shape (the deepest point) when they overlap."""
    d, pA, pB, n = out[0], out[1:4], out[4:7], out[7:10]
    assert np.linalg.norm(n) == pytest.approx(1.0, abs=1e-12)
    assert np.dot(n, pB - pA) == pytest.approx(d, abs=1e-9)
    assert dist_to_B(pB) == pytest.approx(0.0, abs=1e-9)
    if d > 0:
        assert dist_to_A(pA) == pytest.approx(0.0, abs=1e-9)
    else:
        assert dist_to_A(pA) <= 1e-9


# ------------------------------------------------------------------ kernels against coal

@pytest.mark.parametrize("sphere_a,sphere_b", [(True, True), (True, False), (False, False)])
def test_capsule_and_sphere_distances_match_coal(sphere_a, sphere_b):
    rng = np.random.default_rng(1)
    out = np.empty(10)
    n_pen = 0
    for _ in range(200):
        a1, b1, a2, b2 = rng.uniform(-1, 1, (4, 3))
        b1 = a1 if sphere_a else b1
        b2 = a2 if sphere_b else b2
        r1, r2 = rng.uniform(0.01, 0.4, 2)
        d = CK.capsule_capsule(a1, b1, r1, a2, b2, r2, out)
        dc = _coal_distance(*_coal_capsule(a1, b1, r1), *_coal_capsule(a2, b2, r2))
        n_pen += d < 0
        assert d == pytest.approx(dc, abs=1e-7), (a1, b1, r1, a2, b2, r2)
        _check_witnesses(out, lambda p, a=a1, b=b1, r=r1: _seg_dist(p, a, b) - r,
                         lambda p, a=a2, b=b2, r=r2: _seg_dist(p, a, b) - r)
    assert 0 < n_pen < 200  # both separated and penetrating pairs were drawn


def _box_sdf(p, R, c, h):
    q = np.abs(R.T @ (p - c)) - h
    return np.linalg.norm(np.maximum(q, 0)) + min(q.max(), 0)


def test_capsule_box_with_a_reach_measures_in_full_or_says_beyond_only_when_it_is():
    """capsule_box's early stop: with a finite reach the result is the full one (same bits), or inf
    only when the full distance is beyond the reach; within reach it is always measured."""
    rng = np.random.default_rng(4)
    out, full = np.empty(10), np.empty(10)
    stopped = 0
    for _ in range(300):
        a, b = rng.uniform(-1, 1, (2, 3))
        r = rng.uniform(0.01, 0.2)
        box = np.r_[_rot(rng).ravel(), rng.uniform(-0.3, 0.3, 3), rng.uniform(0.05, 0.5, 3)]
        d = CK.capsule_box(a, b, r, box, np.inf, full)
        for reach in (d + 1e-9, d - 0.01, d - 0.2, 0.05):
            got = CK.capsule_box(a, b, r, box, reach, out)
            if got == np.inf:
                assert d > reach
                stopped += 1
            else:
                assert np.array_equal(out, full)
    assert stopped > 100


@pytest.mark.parametrize("sphere", [True, False])
def test_capsule_box_distance_matches_coal_and_never_exceeds_its_depth(sphere):
    rng = np.random.default_rng(2)
    out = np.empty(10)
    n_pen = 0
    for _ in range(200):
        a, b = rng.uniform(-1, 1, (2, 3))
        b = a if sphere else b
        r = rng.uniform(0.01, 0.3)
        R, c, h = _rot(rng), rng.uniform(-0.3, 0.3, 3), rng.uniform(0.05, 0.5, 3)
        d = CK.capsule_box(a, b, r, np.r_[R.ravel(), c, h], np.inf, out)
        dc = _coal_distance(*_coal_capsule(a, b, r), coal.Box(*(2 * h)), coal.Transform3s(R, c))
        if dc > 0:
            assert d == pytest.approx(dc, abs=1e-7)
        else:  # penetrating: same sign; minus the deepest point's depth is >= minus the penetration depth
            n_pen += 1
            assert d <= 1e-9 and d >= dc - 1e-9
        _check_witnesses(out, lambda p, a=a, b=b, r=r: _seg_dist(p, a, b) - r,
                         lambda p, R=R, c=c, h=h: _box_sdf(p, R, c, h))
    assert n_pen > 0


def test_capsule_box_in_closed_form_equals_the_golden_section_search_and_coal():
    """The closed form (pieces between the slab crossings, a quadratic on each; for a segment that
    enters the box, the least of the six excess lines) against the search it replaced and against
    coal, on random pairs: segments of every length, some along a box axis or parallel to a face
    (pieces where an axis' excess is constant), spheres, pairs that penetrate, segments that enter
    the box."""
    rng = np.random.default_rng(5)
    out, ref = np.empty(10), np.empty(10)
    n_apart = n_enter = 0
    for k in range(3000):
        R = _rot(rng) if k % 2 else np.eye(3)
        c, h = rng.uniform(-0.3, 0.3, 3), rng.uniform(0.05, 0.5, 3)
        a = rng.uniform(-1, 1, 3)
        b = a + rng.uniform(-1, 1, 3) * (0.1 if k % 3 == 0 else 1.0)
        if k % 5 == 0:  # along a box axis: two of its coordinates in the box frame stay constant
            b = a + R[:, k % 3] * rng.uniform(-1, 1)
        if k % 7 == 0:
            b = a.copy()
        r = rng.uniform(0.01, 0.2)
        box = np.r_[R.ravel(), c, h]
        d = CK.capsule_box(a, b, r, box, np.inf, out)
        ds = CK.capsule_box_search(a, b, r, box, np.inf, ref)
        n_enter += bool(np.any(a != b) and CK._segment_box_t(a, b, box, np.empty(8)) < 0.0)
        assert d == pytest.approx(ds, abs=1e-12)
        assert d <= ds + 1e-15  # the closed form is the exact minimum: never above the search's
        if d > 0:
            n_apart += 1  # (the witnesses may differ from the search's where the minimum is a flat)
            if k % 10 == 0:
                dc = _coal_distance(*_coal_capsule(a, b, r), coal.Box(*(2 * h)), coal.Transform3s(R, c))
                assert d == pytest.approx(dc, abs=1e-7)
            _check_witnesses(out, lambda p, a=a, b=b, r=r: _seg_dist(p, a, b) - r,
                             lambda p, R=R, c=c, h=h: _box_sdf(p, R, c, h))
    assert n_apart > 1000 and n_enter > 100


def test_capsule_halfspace_distance_matches_coal():
    rng = np.random.default_rng(3)
    out = np.empty(10)
    for _ in range(200):
        a, b = rng.uniform(-1, 1, (2, 3))
        r = rng.uniform(0.01, 0.3)
        n = rng.normal(size=3)
        n /= np.linalg.norm(n)
        c = rng.uniform(-0.5, 0.5)
        d = CK.capsule_halfspace(a, b, r, np.r_[n, c], out)
        dc = _coal_distance(*_coal_capsule(a, b, r), coal.Halfspace(n, c), coal.Transform3s())
        assert d == pytest.approx(dc, abs=1e-9)
        _check_witnesses(out, lambda p, a=a, b=b, r=r: _seg_dist(p, a, b) - r,
                         lambda p, n=n, c=c: np.dot(n, p) - c)


# ------------------------------------------------------------------ obstacles

@pytest.mark.parametrize("make,needle", [
    (lambda: ik.Sphere((0, 0, np.nan), 0.1), "center holds NaN"),
    (lambda: ik.Sphere((0, 0, 0), 0.0), "radius must be a finite number > 0"),
    (lambda: ik.Sphere((0, 0, 0), -1), "got -1"),
    (lambda: ik.Capsule((0, 0, 0), (0, 0, 1), np.inf), "radius"),
    (lambda: ik.Box(np.eye(4), (0.1, 0.0, 0.1)), "size_xyz must be > 0"),
    (lambda: ik.Box(np.diag([1, 1, -1, 1.0]), (0.1, 0.1, 0.1)), "rigid transform"),
    (lambda: ik.HalfSpace((0, 0, 0), 0.0), "non-zero"),
    (lambda: ik.Points(np.zeros((0, 3)), 0.01), "no points"),
    (lambda: ik.Points(np.zeros((4, 2)), 0.01), "shape"),
    (lambda: ik.Points(np.zeros((4, 3)), -0.01), ">= 0"),
    (lambda: ik.World([ik.Sphere((0, 0, 0), 0.1), "table"]), "obstacle 1 is str"),
    (lambda: ik.World(5), "World: obstacles must be a list of obstacles.*got int 5"),
    (lambda: ik.World(None), "World: obstacles must be a list of obstacles.*got NoneType None"),
])
def test_bad_obstacles_raise_a_collision_error_naming_the_value(make, needle):
    with pytest.raises(CollisionError, match=needle):
        make()


def test_a_world_of_a_world_holds_the_same_obstacles():
    inner = ik.World([ik.Sphere((0, 0, 0), 0.1), ik.HalfSpace((0, 0, 1), 0.0)])
    w = ik.World(inner)     # was a raw TypeError: 'World' object is not iterable
    assert w.obstacles == inner.obstacles


def test_distances_refuses_a_self_collision_that_is_not_a_bool():
    """ik.distances read self_collision by truth: 'no' measured the self pairs (solve refuses it)."""
    robot = ik.load_robot(PANDA)
    with pytest.raises(CollisionError, match="self_collision: expected True or False, got 'no'"):
        ik.distances(robot, robot.neutral(), self_collision="no")
    with pytest.raises(CollisionError, match="self_collision: expected True or False, got 'no'"):
        ik.distance_jacobian(robot, robot.neutral(), self_collision="no")
    assert len(ik.distances(robot, robot.neutral(), self_collision=np.bool_(False))) == 0


def test_obstacles_are_frozen_and_their_arrays_read_only():
    c = np.array([0.1, 0.2, 0.3])
    s = ik.Sphere(c, 0.1)
    c[0] = 9.0  # the caller's array is copied
    assert s.center[0] == 0.1
    with pytest.raises(ValueError):
        s.center[0] = 1.0
    h = ik.HalfSpace((0, 0, 2.0), 1.0)  # normalised: the plane z = 0.5
    assert np.allclose(h.normal, (0, 0, 1)) and h.offset == 0.5
    w = ik.World([s, h, ik.Points(np.zeros((5, 3)), 0.01)])
    assert len(w) == 3 and w.tables["caps"].shape == (6, 7) and list(w.tables["cap_obj"]) == [0, 2, 2, 2, 2, 2]


# ------------------------------------------------------------------ enclosing capsules

def _inside_union(P, caps, tol=1e-9):
    d = np.full(len(P), np.inf)
    for c in caps:
        a, b, r = c[0:3], c[3:6], c[6]
        e = b - a
        t = np.clip((P - a) @ e / max(e @ e, 1e-300), 0, 1)
        d = np.minimum(d, np.linalg.norm(P - (a + t[:, None] * e), axis=1) - r)
    return d <= tol


@pytest.mark.parametrize("name", ["link0", "link1", "link3", "link5", "link7", "hand", "finger"])
def test_fitted_capsules_enclose_every_vertex_and_surface_point_of_panda_meshes(name):
    path = DATA / "erd" / "example-robot-data" / "robots" / "panda_description" / "meshes" / "collision" / f"{name}.stl"
    caps = mesh_capsules(str(path))
    assert 1 <= len(caps) <= 3
    V, _ = _mesh_vertices_edges(str(path))
    assert _inside_union(V, caps).all()
    mesh = trimesh.load(str(path), force="mesh")
    pts = trimesh.sample.sample_surface(mesh, 5000, seed=0)[0]
    assert _inside_union(pts, caps).all()
    # conservative but not absurd: the capsules' volume stays within a few times the mesh's hull box
    vol = sum(np.pi * c[6] ** 2 * np.linalg.norm(c[3:6] - c[0:3]) + 4 / 3 * np.pi * c[6] ** 3 for c in caps)
    assert vol < 4.0 * np.prod(V.max(0) - V.min(0))


def test_fitted_capsules_enclose_the_bundled_g1_and_go2_meshes():
    for name in ("g1", "go2"):
        robot = ik.load_robot(name)
        for g in robot.collisions:
            if g.kind == "mesh":
                V, E = _mesh_vertices_edges(g.path)
                V = V * np.asarray(g.size)
                assert _inside_union(V, fit_capsules(V, E)).all(), g.path


def test_slab_split_encloses_the_mesh_edges_between_slabs():
    # a long thin box as a mesh: 2-3 capsules; points along every edge (not only vertices) are inside
    m = trimesh.creation.box(extents=(1.0, 0.1, 0.05))
    caps = fit_capsules(m.vertices, m.edges_unique)
    assert len(caps) >= 1
    lam = np.linspace(0, 1, 101)[:, None, None]
    E = m.vertices[m.edges_unique]
    pts = (E[None, :, 0] * (1 - lam) + E[None, :, 1] * lam).reshape(-1, 3)
    assert _inside_union(pts, caps).all()


def test_mesh_fits_are_cached_per_file(tmp_path, monkeypatch):
    monkeypatch.setenv("INVKIN_CACHE_DIR", str(tmp_path))
    path = DATA / "erd" / "example-robot-data" / "robots" / "panda_description" / "meshes" / "collision" / "link2.stl"
    first = mesh_capsules(str(path))
    files = list((tmp_path / "collision").glob("*.npy"))
    assert len(files) == 1
    np.save(files[0], first + 1.0)  # the second call reads the cache, not the mesh
    assert np.allclose(mesh_capsules(str(path)), first + 1.0)
    V, _ = _mesh_vertices_edges(str(path))
    assert _inside_union(V * (1, 2, 3), mesh_capsules(str(path), scale=(1, 2, 3))).all()  # its own entry
    assert len(list((tmp_path / "collision").glob("*.npy"))) == 2


def test_robot_collision_lists_capsules_per_link_for_urdf_meshes_and_primitives():
    robot = ik.load_robot(str(PANDA))
    cm = robot.collision
    assert cm is robot.collision  # built once per robot
    assert "panda_link3" in cm.link_names and "panda_hand" in cm.link_names
    assert cm.shapes("panda_link3").shape[1] == 7 and len(cm.shapes("nope")) == 0
    assert not cm.exact.any()  # meshes: enclosing capsules
    g1 = ik.load_robot("g1")
    assert any(src.endswith("sphere sphere") for src in g1.collision.sources)
    assert g1.collision.exact.any()


def test_a_missing_mesh_file_warns_and_the_link_keeps_its_primitives(tmp_path):
    urdf = tmp_path / "r.urdf"
    urdf.write_text("""<robot name="r">
  <link name="base"><collision><geometry><mesh filename="gone.stl"/></geometry></collision>
    <collision><geometry><sphere radius="0.1"/></geometry></collision></link>
  <link name="tip"><collision><geometry><box size="0.1 0 0.1"/></geometry></collision></link>
  <joint name="j" type="revolute"><parent link="base"/><child link="tip"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>""")
    robot = ik.load_robot(str(urdf))
    with pytest.warns(CollisionWarning) as rec:
        cm = robot.collision
    msgs = " ".join(str(w.message) for w in rec)
    assert "gone.stl" in msgs and "size [0.1, 0.0, 0.1]" in msgs
    assert cm.link_names == ("base",) and len(cm.caps) == 1 and cm.exact.all()


# ------------------------------------------------------------------ which pairs

def test_srdf_disabled_pairs_are_never_checked():
    robot = ik.load_robot(str(PANDA), srdf=str(PANDA_SRDF))
    names = set(ik.collision.pair_names(robot))
    off = {tuple(p) for p in robot.disabled_collision_pairs}
    assert names and not any((a, b) in off or (b, a) in off for a, b in names)
    cm = robot.collision
    assert len(names) == len(cm.link_names) * (len(cm.link_names) - 1) // 2 - len(
        {frozenset(p) for p in off if p[0] in cm.link_names and p[1] in cm.link_names})


def test_sampled_pairs_drop_adjacent_always_and_never_colliding_links(tmp_path, monkeypatch):
    monkeypatch.setenv("INVKIN_CACHE_DIR", str(tmp_path))
    robot = ik.load_robot(str(PANDA))
    pairs = ik.collision_pairs(robot)
    names = set(ik.collision.pair_names(robot, pairs))
    assert ("panda_link1", "panda_link2") not in names   # adjacent
    assert ("panda_link0", "panda_link1") not in names
    assert ("panda_link0", "panda_hand") in names        # the arm can fold back onto its base
    # no kept pair is in contact at the neutral pose ("default" pairs are dropped)
    d = ik.distances(robot, robot.neutral())
    assert set(d.pairs) == names and d.distance.min() >= 0.0
    # MoveIt's SRDF (from 10 000 samples of the real meshes) keeps most of what we keep
    srdf_names = set(ik.collision.pair_names(ik.load_robot(str(PANDA), srdf=str(PANDA_SRDF))))
    assert len(names & srdf_names) >= 0.7 * len(srdf_names)
    # cached on disk: a fresh Robot reads the same pairs without sampling again
    files = sorted((tmp_path / "collision").glob("pairs-*.npy"))
    again = ik.load_robot(str(PANDA))
    monkeypatch.setattr("invkin.collision.pairs._compute", lambda *a: pytest.fail("sampled again"))
    assert np.array_equal(ik.collision_pairs(again), pairs)
    assert sorted((tmp_path / "collision").glob("pairs-*.npy")) == files


def test_sampling_the_pairs_holds_a_bounded_number_of_contact_flags_and_finds_the_same_pairs(monkeypatch):
    """collision_pairs held (samples, pairs) booleans at once: 0.8 GB for a 400-link chain, a
    MemoryError (42 GiB) for 3,000 links; the samples are now counted in chunks of at most
    _HITS_BYTES flags, with the same pairs."""
    from invkin.collision import pairs as P

    robot = ik.load_robot("g1")
    whole = P._compute(robot, 3000, 0)
    seen = []
    inner = P._in_contact

    def spy(robot, cm, pairs, qs):
        seen.append(len(qs) * len(pairs))
        return inner(robot, cm, pairs, qs)

    monkeypatch.setattr(P, "_in_contact", spy)
    monkeypatch.setattr(P, "_HITS_BYTES", 50_000)
    assert np.array_equal(P._compute(robot, 3000, 0), whole)
    assert len(seen) > 10 and max(seen) <= 50_000


# ------------------------------------------------------------------ distances and their Jacobian

def _shelf_world():
    T = np.eye(4)
    T[:3, 3] = (0.55, 0.0, 0.45)
    return ik.World([ik.HalfSpace((0, 0, 1), -0.01), ik.Box(T, (0.3, 0.8, 0.02)),
                     ik.Sphere((0.3, 0.3, 0.6), 0.08), ik.Capsule((0.2, -0.4, 0.2), (0.5, -0.3, 0.9), 0.04),
                     ik.Points(np.random.default_rng(5).uniform((-0.2, -0.6, 0.0), (0.8, 0.6, 1.0), (300, 3)), 0.01)])


def test_distances_are_sorted_and_their_witnesses_agree_with_coal():
    robot = ik.load_robot(str(PANDA), srdf=str(PANDA_SRDF))
    world = _shelf_world()
    cm = robot.collision
    q = robot.sample(rng=np.random.default_rng(0))
    d = ik.distances(robot, q, world)
    assert np.all(np.diff(d.distance) >= 0) and len(d) > 10
    Ts = robot.fk_all(q)
    for (a, b), dist, pa, pb, n in zip(d.pairs, d.distance, d.points_a, d.points_b, d.normals):
        assert np.dot(n, pb - pa) == pytest.approx(dist, abs=1e-9)
        if b.startswith("obstacle") or dist <= 0:
            continue
        # self pairs: coal on the two links' capsules gives the same minimum
        best = np.inf
        for ca in cm.shapes(a):
            for cb in cm.shapes(b):
                A = [(Ts[a][:3, :3] @ ca[k:k + 3] + Ts[a][:3, 3]) for k in (0, 3)]
                B = [(Ts[b][:3, :3] @ cb[k:k + 3] + Ts[b][:3, 3]) for k in (0, 3)]
                best = min(best, _coal_distance(*_coal_capsule(*A, ca[6]), *_coal_capsule(*B, cb[6])))
        assert dist == pytest.approx(best, abs=1e-7)


def test_cutoff_culls_far_pairs_without_changing_near_ones():
    robot = ik.load_robot(str(PANDA), srdf=str(PANDA_SRDF))
    world = _shelf_world()
    q = robot.sample(rng=np.random.default_rng(1))
    full = ik.distances(robot, q, world)
    near = ik.distances(robot, q, world, cutoff=0.05)
    assert len(near) < len(full)
    got = dict(zip(near.pairs, near.distance))
    want = {p: v for p, v in zip(full.pairs, full.distance) if v <= 0.05}
    assert set(want) <= set(got)
    for p in want:
        assert got[p] == pytest.approx(want[p], abs=1e-12)


@pytest.mark.parametrize("model", ["panda", "g1"])
def test_distance_jacobian_matches_finite_differences(model):
    if model == "panda":
        robot = ik.load_robot(str(PANDA), srdf=str(PANDA_SRDF))
        world = _shelf_world()
    else:  # a floating base: free-joint columns are local increments, as Robot.integrate applies
        robot = ik.load_robot("g1")
        world = ik.World([ik.HalfSpace((0, 0, 1), -0.9), ik.Sphere((0.3, 0.1, 0.0), 0.1),
                          ik.Box(np.eye(4), (0.05, 0.05, 0.05))])
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(4):
        q = robot.sample(rng=rng)
        d, J, info = ik.distance_jacobian(robot, q, world)
        assert J.shape == (len(d), robot.dof) and np.array_equal(d, info.distance)
        h = 1e-6
        Jfd = np.empty_like(J)
        for j in range(robot.dof):
            e = np.zeros(robot.dof)
            e[j] = h
            dp = dict(zip(*_pairs_d(robot, robot.integrate(q, e), world)))
            dm = dict(zip(*_pairs_d(robot, robot.integrate(q, -e), world)))
            Jfd[:, j] = [(dp[p] - dm[p]) / (2 * h) for p in info.pairs]
        # rows whose closest features are unique (not touching or nearly parallel) are smooth
        ok = np.abs(d) > 1e-3
        err = np.abs(J[ok] - Jfd[ok]).max(axis=1)
        assert np.median(err) < 1e-6
        assert np.mean(err < 1e-5) > 0.95, err
        checked += ok.sum()
    assert checked > 20


def _pairs_d(robot, q, world):
    d = ik.distances(robot, q, world)
    return d.pairs, d.distance


def test_bad_arguments_of_distances_raise():
    robot = ik.load_robot(str(PANDA), srdf=str(PANDA_SRDF))
    with pytest.raises(CollisionError, match="cutoff"):
        ik.distances(robot, robot.neutral(), cutoff=-1.0)
    with pytest.raises(CollisionError, match="expected an ik.World"):
        ik.distances(robot, robot.neutral(), world="shelf")
    with pytest.raises(ik.ConfigurationError):
        ik.distances(robot, np.full(robot.dof, np.nan))
    # a list of obstacles is accepted as a World
    assert len(ik.distances(robot, robot.neutral(), [ik.Sphere((2, 0, 0), 0.1)], self_collision=False)) == len(
        robot.collision.link_names)


def test_capsule_distances_never_exceed_coal_on_the_original_meshes():
    """The enclosing capsules are conservative on real configurations: for every checked pair and
    box obstacle, invkin's distance is at most coal's distance between the original shapes (STL
    meshes, the fingers' boxes), and negative whenever those touch."""
    robot = ik.load_robot(str(PANDA), srdf=str(PANDA_SRDF))
    shapes = {}
    for g in robot.collisions:
        s = coal.Box(*g.size) if g.kind == "box" else coal.MeshLoader().load(g.path, np.asarray(g.size))
        shapes.setdefault(g.link, []).append((s, g.T_link_geom))
    rng = np.random.default_rng(11)
    boxes = [ik.Box(np.r_[np.c_[_rot(rng), rng.uniform((0.2, -0.5, 0.1), (0.7, 0.5, 0.9))], [[0, 0, 0, 1]]],
                    rng.uniform(0.03, 0.2, 3)) for _ in range(6)]
    world = ik.World(boxes)

    def tf(T):
        return coal.Transform3s(T[:3, :3].copy(), T[:3, 3].copy())

    def mesh_distance(Ts, link, other, T_other):
        return min(_coal_distance(s, tf(Ts[link] @ T), other, T_other) for s, T in shapes[link])

    compared = touching = 0
    for q in robot.sample(12, rng=rng):
        Ts = robot.fk_all(q)
        d = ik.distances(robot, q, world)
        for (a, b), v in zip(d.pairs, d.distance):
            if b.startswith("obstacle"):
                box = boxes[int(b.split()[1])]
                ref = mesh_distance(Ts, a, coal.Box(*box.size_xyz), tf(box.T_world_box))
            else:
                ref = min(mesh_distance(Ts, a, s, tf(Ts[b] @ T)) for s, T in shapes[b])
            compared += 1
            touching += ref <= 0
            assert (v <= ref + 1e-9) if ref > 0 else (v < 0), ((a, b), v, ref)
    assert compared > 300 and touching > 0


def test_fit_capsules_refuses_vertices_beyond_the_length_bound_instead_of_overflowing():
    from invkin.collision.model import fit_capsules

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow RuntimeWarning on the way
        with pytest.raises(CollisionError, match=r"a vertex lies 1e\+300 m from the origin; expected coordinates "
                                                 r"within ±1e\+09 m"):
            fit_capsules(np.array([[1e300, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))


def test_mjcf_mesh_geoms_are_enclosed_where_mujoco_places_their_vertices(tmp_path, monkeypatch):
    """An MJCF mesh geom was left out with a warning ("MuJoCo's compiled mesh is not kept"): a robot
    of meshes (most of MuJoCo Menagerie's) had no collision shapes. The compiled vertices are now
    enclosed, checked where mj_kinematics puts them (scaled and rotated meshes, moving links)."""
    mujoco = pytest.importorskip("mujoco")
    from invkin.model.mjcf import qpos_from_q

    monkeypatch.setenv("INVKIN_CACHE_DIR", str(tmp_path))
    path = str(DATA / "mjcf" / "meshes.xml")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CollisionWarning)
        robot = ik.load_robot(path)
        cm = robot.collision
    assert cm.link_names == ("base", "link1", "link2") and not cm.exact.any()
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    worst = -np.inf
    for q in robot.sample(20, rng=np.random.default_rng(2)):
        d.qpos[:] = qpos_from_q(robot, q)
        mujoco.mj_kinematics(m, d)
        Ts = robot.fk_all(q)
        for g in range(m.ngeom):
            a, n = m.mesh_vertadr[m.geom_dataid[g]], m.mesh_vertnum[m.geom_dataid[g]]
            W = m.mesh_vert[a:a + n] @ d.geom_xmat[g].reshape(3, 3).T + d.geom_xpos[g]
            T = Ts[mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, m.geom_bodyid[g])]
            P = (W - T[:3, 3]) @ T[:3, :3]  # in the link frame
            caps = cm.shapes(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, m.geom_bodyid[g]))
            worst = max(worst, float(np.min([_point_capsule_gap(P, c) for c in caps], axis=0).max()))
    assert worst <= 1e-9
    assert sorted((tmp_path / "collision").glob("*.npy"))  # the fits are cached like mesh files'


def _point_capsule_gap(P, cap):
    """Signed distance (n,) of the points P (n, 3) from the capsule (7,)."""
    a, b, r = cap[:3], cap[3:6], cap[6]
    ab = b - a
    t = np.clip((P - a) @ ab / max(float(ab @ ab), 1e-300), 0.0, 1.0)
    return np.linalg.norm(P - (a + t[:, None] * ab), axis=1) - r


def test_mjcf_geoms_become_capsules_and_visual_only_geoms_are_skipped():
    pytest.importorskip("mujoco")
    robot = ik.load_robot(str(DATA / "mjcf" / "arm.xml"))
    cm = robot.collision
    assert "hand" not in cm.link_names          # its sphere has contype = conaffinity = 0
    (upper,) = cm.shapes("upper")               # <geom fromto="0 0 0 0.3 0 0"> with the default size 0.02
    assert np.linalg.norm(upper[3:6] - upper[0:3]) == pytest.approx(0.3) and upper[6] == pytest.approx(0.02)
    (head,) = cm.shapes("head")
    assert head[6] == pytest.approx(0.1) and np.allclose(head[0:3], head[3:6])
    assert list(cm.exact) == [False, True, True]  # the base box is enclosed, capsule and sphere exact


def test_humanoid_hand_pushed_into_its_chest_is_reported_in_collision():
    robot = ik.load_robot("g1")
    q0 = robot.neutral()
    d0 = ik.distances(robot, q0)
    assert d0.min_distance >= 0.0                # pairs touching at the neutral pose are not checked
    torso = robot.collision.shapes("torso_link")
    T = robot.fk(q0, "torso_link")
    inside = T[:3, :3] @ (0.5 * (torso[0, 0:3] + torso[0, 3:6])) + T[:3, 3] + (0.08, 0.0, 0.0)
    res = ik.solve(robot, [ik.Position("left_rubber_hand", inside), ik.Pose("pelvis", robot.fk(q0, "pelvis"))],
                   q0=q0, seed=0)
    d = ik.distances(robot, res.q)
    hits = {frozenset(p) for p, v in zip(d.pairs, d.distance) if v < 0}
    assert any("torso_link" in p and any(link.startswith("left_") for link in p) for p in hits), d


def test_the_solver_entry_point_gives_the_rows_of_distance_jacobian():
    from invkin.collision.distance import collision_tables, max_rows
    robot = ik.load_robot(str(PANDA), srdf=str(PANDA_SRDF))
    world = _shelf_world()
    tables = collision_tables(robot, world)
    m = max_rows(tables)
    d, J = np.empty(m), np.empty((m, robot.dof))
    na, nb = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
    for q in robot.sample(5, rng=np.random.default_rng(3)):
        k = CK.collision_rows(robot.node_table, robot.node_params, robot.fk_all_array(q), tables, 0.1, d, J, na, nb)
        d_ref, J_ref, info = ik.distance_jacobian(robot, q, world, cutoff=0.1)
        moving = np.abs(J_ref).max(axis=1) > 0      # rows no joint can change are left out
        assert k == moving.sum() and k > 0
        order = np.lexsort((na[:k], d[:k]))
        ref = np.lexsort((info.node_a[moving], d_ref[moving]))
        assert np.allclose(d[:k][order], d_ref[moving][ref], atol=0)
        assert np.allclose(J[:k][order], J_ref[moving][ref], atol=1e-12)


def test_a_missing_trimesh_names_the_extra(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_trimesh(name, *a, **k):
        if name == "trimesh":
            raise ImportError("No module named 'trimesh'")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_trimesh)
    robot = ik.load_robot(str(PANDA))
    with pytest.raises(CollisionError, match=r'pip install "invkin\[collision\]"'):
        ik.collision_model(robot)


def test_a_robot_without_collision_shapes_says_there_is_nothing_to_measure():
    robot = ik.load_robot("panda")  # the bundled chain carries visuals only
    with pytest.warns(CollisionWarning, match="no collision shapes"):
        d = ik.distances(robot, robot.neutral(), ik.World([ik.Sphere((0.4, 0, 0.4), 0.1)]))
    assert len(d) == 0 and d.min_distance == np.inf and not d.in_collision


@pytest.mark.parametrize("n", [1, 2, 3, 9, 1000])
def test_the_broad_phase_tree_covers_each_cloud_once_under_spheres_that_hold_its_points(n):
    """world._chunks: per obstacle one tree in preorder; the leaves, in order, cover the obstacle's
    capsules once; a node's range is the union of its children's; the skip link is the node past
    the subtree; every node's sphere holds the capsules of its range."""
    xyz = np.random.default_rng(n).uniform(-1, 1, (n, 3))
    world = ik.World([ik.Sphere((0, 0, 2), 0.1), ik.Points(xyz, 0.01), ik.Capsule((0, 0, 0), (0, 1, 0), 0.2)])
    t = world.tables
    rng, bound, caps = t["chunk_range"], t["chunk_bound"], t["caps"]

    def subtree(i):  # checks node i, returns the index past its subtree
        start, end, nxt = rng[i]
        ends = np.r_[caps[start:end, 0:3], caps[start:end, 3:6]]
        r = np.tile(caps[start:end, 6], 2)
        assert np.all(np.linalg.norm(ends - bound[i, :3], axis=1) + r <= bound[i, 3] + 1e-12)
        assert len(set(t["cap_obj"][start:end])) == 1
        if nxt == i + 1:
            return nxt
        j, at = i + 1, start
        while j < nxt:
            assert rng[j, 0] == at
            at = rng[j, 1]
            j = subtree(j)
        assert j == nxt and at == end
        return nxt

    i, at = 0, 0
    while i < len(rng):
        assert rng[i, 0] == at
        at = rng[i, 1]
        i = subtree(i)
    assert i == len(rng) and at == len(caps) == n + 2


@pytest.mark.parametrize("cutoff", [np.inf, 0.05])
def test_a_point_cloud_gives_each_link_its_closest_point_as_the_points_one_by_one_do(cutoff):
    """The cloud's broad phase (a tree over Z-ordered points, per-point bounds) culls only points that cannot be
    the closest: each link's distance to a Points obstacle equals its least distance to the same
    points as separate spheres."""
    robot = ik.load_robot(str(PANDA), srdf=str(PANDA_SRDF))
    xyz = np.random.default_rng(9).uniform((0.2, -0.5, 0.0), (0.8, 0.5, 0.8), (2000, 3))
    cloud = ik.World([ik.Points(xyz, 0.005)])
    spheres = ik.World([ik.Sphere(p, 0.005) for p in xyz])
    measured = 0
    for q in robot.sample(5, rng=np.random.default_rng(2)):
        a = ik.distances(robot, q, cloud, self_collision=False, cutoff=cutoff)
        b = ik.distances(robot, q, spheres, self_collision=False, cutoff=cutoff)
        best = {}
        for (link, _), dist in zip(b.pairs, b.distance):
            best[link] = min(best.get(link, np.inf), dist)
        assert {link: dist for (link, _), dist in zip(a.pairs, a.distance)} == pytest.approx(best, abs=1e-12)
        assert len(a) == len(best)
        measured += len(a)
    assert measured > 0


def test_the_batch_contact_kernel_gives_the_pairs_in_contact_configuration_by_configuration():
    """collision_pairs samples its configurations in one kernel call (CK.contacts); each row must be
    what FK, the world capsules and self_distances give for that configuration alone."""
    from invkin.collision.model import collision_model
    from invkin.kinematics.kernels import fk_all_into

    robot = ik.load_robot("g1")
    cm = collision_model(robot)
    L = len(cm.links)
    pairs = np.array([(a, b) for a in range(L) for b in range(a + 1, L)], dtype=np.int64)
    qs = robot.sample(40, rng=np.random.default_rng(3))
    hits = np.zeros((len(qs), len(pairs)), dtype=np.bool_)
    CK.contacts(robot.node_table, robot.node_params, robot.origin, qs, cm.links, cm.link_caps, cm.caps, cm.bounds,
                pairs, hits)
    Tall = np.empty((robot.n_nodes, 4, 4))
    wcaps, wb, out = np.empty_like(cm.caps), np.empty_like(cm.bounds), np.empty((len(pairs), 10))
    for k, q in enumerate(qs):
        fk_all_into(robot.node_table, robot.node_params, robot.origin, q, Tall)
        CK.world_capsules(Tall, cm.links, cm.link_caps, cm.caps, cm.bounds, wcaps, wb)
        CK.self_distances(wcaps, wb, cm.link_caps, pairs, 0.0, out)
        np.testing.assert_array_equal(hits[k], out[:, 0] < 0.0)
    assert hits.any() and not hits.all()  # the configurations do touch some pairs, not all


@pytest.mark.parametrize("name", ["g1", "panda_erd"])
def test_the_numpy_sampling_of_pairs_gives_the_contact_kernels_answers(name):
    """collision_pairs samples in NumPy (pairs._in_contact_numpy: no kernel to compile on a first
    use): at every configuration, the same pairs in contact as CK.contacts, for a floating
    humanoid (its base fixed at the origin: a pose of the whole robot moves no self pair) and an
    arm with its meshes' capsules."""
    from invkin.collision import pairs as P
    from invkin.collision.model import collision_model

    robot = ik.load_robot("g1") if name == "g1" else ik.load_robot(str(DATA / "erd" / "panda_fingers.urdf"))
    cm = collision_model(robot)
    L = len(cm.links)
    cand = np.array([(a, b) for a in range(L) for b in range(a + 1, L)], dtype=np.int64)
    qs = robot.sample(1500, rng=np.random.default_rng(4))
    hits = np.zeros((len(qs), len(cand)), dtype=np.bool_)
    CK.contacts(robot.node_table, robot.node_params, robot.origin, qs, cm.links, cm.link_caps, cm.caps, cm.bounds,
                cand, hits)
    assert P._numpy_ok(robot)
    np.testing.assert_array_equal(P._in_contact_numpy(robot, cm, cand, qs, chunk=400), hits)
    assert hits.any() and not hits.all()


def test_segment_gaps_equal_the_capsule_kernel_on_every_kind_of_segment_pair():
    """pairs._segment_gaps, elementwise, against CK.capsule_capsule one pair at a time: general,
    parallel and crossing segments, and points (zero-length capsules: spheres)."""
    from invkin.collision.pairs import _segment_gaps

    rng = np.random.default_rng(11)
    n = 3000
    a1, a2 = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    d1, d2 = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    kind = rng.integers(0, 5, n)
    d2[kind == 1] = 0.7 * d1[kind == 1]                      # parallel
    d1[kind == 2] = 0.0                                       # a point and a segment
    d2[kind == 3] = 0.0                                       # a segment and a point
    d1[kind == 4], d2[kind == 4] = 0.0, 0.0                   # two points
    r1, r2 = rng.uniform(0.0, 0.5, n), rng.uniform(0.0, 0.5, n)
    c1 = np.c_[a1, a1 + d1, r1].T
    c2 = np.c_[a2, a2 + d2, r2].T
    got = _segment_gaps(c1, c2)
    out = np.empty(10)
    want = np.array([CK.capsule_capsule(a1[k], a1[k] + d1[k], r1[k], a2[k], a2[k] + d2[k], r2[k], out)
                     for k in range(n)])
    np.testing.assert_allclose(got, want, rtol=0.0, atol=1e-12)
