"""Collision-aware IK: the distances as inequality rows of the LM core (solve(world=...,
self_collision=..., margin=...)), checked against coal on the robots' original meshes."""
from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import invkin as ik
from invkin.collision.errors import CollisionError, CollisionWarning

coal = pytest.importorskip("coal")
pytest.importorskip("trimesh")

DATA = Path(__file__).parent / "data"
PANDA = DATA / "erd" / "panda_fingers.urdf"   # example-robot-data's Panda with its collision meshes
PANDA_SRDF = DATA / "erd" / "panda.srdf"
MARGIN = 0.005


@pytest.fixture(scope="module")
def panda():
    return ik.load_robot(str(PANDA), srdf=str(PANDA_SRDF))


def _box(c, size):
    T = np.eye(4)
    T[:3, 3] = c
    return ik.Box(T, size)


def shelf_world(x=0.45, depth=0.3, width=0.8, boards=(0.0, 0.3, 0.6, 0.9), t=0.02):
    """Four boards, a back and two sides in front of the robot, on a floor at z = 0."""
    mid, height = (boards[0] + boards[-1]) / 2, boards[-1] - boards[0]
    obs = [_box((x + depth / 2, 0, z), (depth, width, t)) for z in boards]
    obs.append(_box((x + depth + t / 2, 0, mid), (t, width, height)))
    obs += [_box((x + depth / 2, s * (width / 2 + t / 2), mid), (depth, t, height)) for s in (-1, 1)]
    return ik.World(obs + [ik.HalfSpace((0, 0, 1), 0.0)])


def _check(robot, world):
    """The Check of robot among world's obstacles with its own pairs, at MARGIN (the warning
    about the base on the floor, a pair no joint moves, silenced)."""
    from invkin.collision.rows import check_for

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CollisionWarning)
        return check_for(robot, world, True, MARGIN)


def shelf_targets(robot, world, n_samples, seed=0):
    """Hand poses inside the shelf from sampled configurations that are collision-free (every
    pair some joint moves at least 1 cm apart): each target has a collision-free solution."""
    from invkin.collision.rows import final_check

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CollisionWarning)  # the base stands on the floor
        for q in robot.sample(n_samples, rng=np.random.default_rng(seed)):
            T = robot.fk(q, "panda_hand")
            if 0.5 < T[0, 3] < 0.72 and abs(T[1, 3]) < 0.35 and final_check(robot, q, world, True, 0.01)["collision_free"]:
                out.append(T)
    return out


def test_panda_reaching_into_a_shelf_succeeds_only_collision_free_by_coal_on_the_original_meshes(panda):
    from invkin.collision.reference import CoalReference

    world = shelf_world()
    targets = shelf_targets(panda, world, 30000)
    assert len(targets) >= 8
    ref = CoalReference(panda, world)
    n_pairs = len(ik.collision_pairs(panda)) + len(panda.collision.link_names) * len(world)
    ok = plain_hits = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CollisionWarning)
        for i, T in enumerate(targets):
            res = ik.solve(panda, ik.Pose("panda_hand", T), world=world, self_collision=True, margin=MARGIN, seed=i,
                           timeout=0.5)
            report = res.info["collision"]
            assert report["pairs"] == n_pairs and report["static"] == (("panda_link0", "obstacle 7 (HalfSpace)"),)
            if res.success:
                ok += 1
                assert report["collision_free"] and report["min_distance"] >= MARGIN - 1e-9
                assert ref.min_distance(res.q) >= MARGIN - 1e-6, i   # the meshes are at least as far as the capsules
            plain = ik.solve(panda, ik.Pose("panda_hand", T), seed=i)
            plain_hits += plain.success and ref.min_distance(plain.q) < 0
    assert ok >= len(targets) - 1
    assert plain_hits > 0   # without the world, some answers go through the shelf: the check can fail


def test_a_humanoid_reaching_across_its_chest_keeps_its_hand_out_with_self_collision():
    g1 = ik.load_robot("g1")
    q0 = g1.neutral()
    torso = g1.collision.shapes("torso_link")
    T = g1.fk(q0, "torso_link")
    across = T[:3, :3] @ (0.5 * (torso[0, 0:3] + torso[0, 3:6])) + T[:3, 3] + (0.06, -0.08, 0.0)
    goals = [ik.Position("left_rubber_hand", across), ik.Pose("pelvis", g1.fk(q0, "pelvis"), hard=True)]
    plain = ik.solve(g1, goals, q0=q0, seed=0)
    assert plain.success and ik.distances(g1, plain.q).min_distance < 0       # the hand goes into the chest
    # bounded by iterations, not the clock: the same answer on a first call, which compiles the rows
    res = ik.solve(g1, goals, q0=q0, seed=0, self_collision=True, margin=MARGIN, timeout=None)
    d = ik.distances(g1, res.q)
    assert d.min_distance >= MARGIN - 1e-9, d      # no checked pair penetrates, none closer than the margin
    assert res.info["collision"]["collision_free"]
    assert not res.success or res.position_error <= 1e-6
    # the hand gets as close as the chest allows
    assert np.linalg.norm(g1.fk(res.q, "left_rubber_hand")[:3, 3] - across) < 0.15


def _keys(coll, k):
    """Row keys (node a, node b, n-th row with those nodes: the obstacles of one link come in order)."""
    seen, out = {}, []
    for a, b in zip(coll[2][:k].tolist(), coll[3][:k].tolist()):
        seen[(a, b)] = seen.get((a, b), -1) + 1
        out.append((a, b, seen[(a, b)]))
    return out


def test_distance_rows_of_the_solve_path_equal_finite_differences():
    """The rows the core reads (collision/rows.py: ineq_eval on solve_rows' tables) against
    central differences of the distances, through Robot.integrate (the floating G1)."""
    from invkin.collision.rows import E_ROWS, ineq_eval, solve_rows

    g1 = ik.load_robot("g1")
    world = ik.World([ik.Sphere((0.25, 0.1, 0.9), 0.12), ik.Box(np.eye(4), (2.0, 2.0, 0.05)),
                      ik.Points(np.random.default_rng(2).uniform((-0.2, -0.4, 0.2), (0.5, 0.4, 1.2), (400, 3)), 0.01)])
    coll = solve_rows(g1, world, True, MARGIN)
    m = coll[2].shape[0]
    rng = np.random.default_rng(4)
    checked = 0
    for q in g1.sample(4, rng=rng, around=g1.neutral()):
        e, J, errs = np.zeros(m), np.zeros((m, g1.dof)), np.zeros(7)
        ineq_eval(coll, g1.node_table, g1.node_params, g1.fk_all_array(q), 0, e, J, errs)
        k = int(errs[E_ROWS])
        assert k > 5
        d = MARGIN + coll[1][2] - e[:k]           # e = margin + BUFFER - d
        pairs = _keys(coll, k)
        h = 1e-6
        for j in rng.choice(g1.dof, 8, replace=False):
            dq = np.zeros(g1.dof)
            dq[j] = h
            side = []
            for s in (1, -1):
                e2, J2, errs2 = np.zeros(m), np.zeros((m, g1.dof)), np.zeros(7)
                ineq_eval(coll, g1.node_table, g1.node_params, g1.fk_all_array(g1.integrate(q, s * dq)), 0, e2, J2,
                          errs2)
                k2 = int(errs2[E_ROWS])
                side.append(dict(zip(_keys(coll, k2), e2[:k2])))
            for i, p in enumerate(pairs):
                if p in side[0] and p in side[1] and d[i] > 0:   # apart: the distance is smooth there
                    fd = -(side[0][p] - side[1][p]) / (2 * h)    # e = target - d
                    assert J[i, j] == pytest.approx(fd, abs=2e-5), (p, j)
                    checked += 1
    assert checked > 100


def test_bad_collision_options_raise_a_clear_error(panda):
    goal = ik.Position("panda_hand", (0.4, 0.1, 0.5))
    world = shelf_world()
    with pytest.raises(CollisionError, match=r"margin: expected a finite distance >= 0 \[m\], got -0.01"):
        ik.solve(panda, goal, world=world, margin=-0.01)
    with pytest.raises(CollisionError, match="margin"):
        ik.solve(panda, goal, world=world, margin=float("nan"))
    with pytest.raises(CollisionError, match="margin"):
        ik.solve(panda, goal, margin=-1.0)      # checked even when nothing is asked
    with pytest.raises(CollisionError, match="margin"):
        ik.solve(panda, goal, margin=np.array([0.01, 0.02]))
    with pytest.raises(CollisionError, match="expected an ik.World"):
        ik.solve(panda, goal, world="shelf")
    with pytest.raises(CollisionError, match="self_collision: expected True or False"):
        ik.solve(panda, goal, self_collision="yes")
    with pytest.raises(CollisionError, match="center holds NaN"):
        ik.solve(panda, goal, world=[ik.Sphere((np.nan, 0, 0), 0.1)])
    with pytest.raises(CollisionError, match="radius"):
        ik.solve(panda, goal, world=[ik.Sphere((0.5, 0, 0), 0.0)])
    for method in ("dls", "pinv", "ccd", "fabrik", "transpose", "gauss-seidel"):
        with pytest.raises(ik.SolverError, match=f"method '{method}' cannot keep collision distances"):
            ik.solve(panda, goal, method=method, world=world)


def test_a_solve_with_nothing_to_check_says_so(panda):
    goal = ik.Position("panda_hand", (0.4, 0.1, 0.5))
    with pytest.warns(CollisionWarning, match="no collision pair to check"):
        res = ik.solve(panda, goal, world=ik.World([]))
    assert res.success and res.info["collision"]["pairs"] == 0
    plain = ik.solve(panda, goal)               # world None, self_collision False: a plain solve
    assert "collision" not in plain.info


def test_min_distance_is_the_closest_pair_within_the_cutoff_and_inf_beyond_as_documented(panda):
    from invkin.collision.rows import CUTOFF

    q = panda.neutral()
    p_hand = panda.fk(q, "panda_hand")[:3, 3]
    for gap, within in ((CUTOFF + MARGIN + 0.02, False), (CUTOFF + MARGIN - 0.02, True)):
        # a ball beside the hand, roughly ``gap`` from its nearest link, and the hand held where it is
        for r in np.linspace(0.0, 0.5, 501):  # the nearest placement at least ``gap`` away (1 mm steps)
            ball = ik.Sphere(p_hand + (0.0, r + 0.1, 0.0), 0.1)
            d = ik.distances(panda, q, [ball], self_collision=False).min_distance
            if d >= gap:
                break
        res = ik.solve(panda, ik.Position("panda_hand", p_hand), q0=q, world=[ball], self_collision=False)
        report = res.info["collision"]
        assert res.success and np.array_equal(res.q, q)
        if within:
            assert report["min_distance"] == pytest.approx(d, abs=1e-9) and report["closest"] is not None
        else:
            assert report["min_distance"] == np.inf and report["closest"] is None and gap <= d < gap + 0.002
    doc = " ".join(ik.Result.__doc__.split())
    assert f"within ``margin + {CUTOFF:g}`` m" in doc and "``inf`` and None when none is that close" in doc


def test_a_target_inside_an_obstacle_is_in_collision_never_success(panda):
    p = np.array([0.5, 0.1, 0.4])
    res = ik.solve(panda, ik.Position("panda_hand", p), world=[ik.Sphere(p, 0.05)], timeout=0.05)
    assert not res.success
    # either the hand stays out of the sphere (the goal unmet) or it reached it in collision, and says so
    if res.status == ik.Status.IN_COLLISION:
        assert res.position_error <= 1e-6 and not res.info["collision"]["collision_free"]
    else:
        assert res.position_error > 1e-6 and res.info["collision"]["collision_free"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(x=st.floats(0.35, 0.7), y=st.floats(-0.5, 0.5), z=st.floats(0.05, 0.9), r=st.floats(0.03, 0.2),
       seed=st.integers(0, 1000))
def test_every_successful_solve_keeps_the_margin_to_a_random_obstacle(panda, x, y, z, r, seed):
    rng = np.random.default_rng(seed)
    world = ik.World([ik.Sphere((x, y, z), r)])
    target = ik.Position("panda_hand", rng.uniform((0.2, -0.5, 0.1), (0.7, 0.5, 0.9)))
    res = ik.solve(panda, target, world=world, self_collision=True, seed=seed, timeout=0.05)
    assert np.all(np.isfinite(res.q)) and np.all(res.q >= panda.lower) and np.all(res.q <= panda.upper)
    if res.success:
        assert ik.distances(panda, res.q, world).min_distance >= MARGIN - 1e-9


def test_solve_many_with_a_world_returns_only_collision_free_successes(panda):
    world = shelf_world()
    targets = np.array(shelf_targets(panda, world, 8000, seed=1))[:5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CollisionWarning)
        batch = ik.solve_many(panda, "panda_hand", targets, world=world, self_collision=True, timeout=0.3)
    assert batch.success.sum() >= len(targets) - 1
    for q, ok in zip(batch.q, batch.success):
        if ok:
            assert ik.distances(panda, q, world).distance[ik.distances(panda, q, world).node_a > 1].min() >= MARGIN - 1e-9


def test_solve_many_with_a_world_reports_each_targets_collision_check(panda):
    """solve_many with a world ran solve per target but dropped its info["collision"]: batch[i].info
    was {} (no pairs, no closest pair, no min_distance); now each target's report is kept."""
    from invkin.collision.rows import CUTOFF

    sphere = np.array([0.5, 0.1, 0.4])
    world = ik.World([ik.Sphere(sphere, 0.05)])
    targets = np.array([[0.4, -0.2, 0.5], sphere])          # the second one inside the sphere
    batch = ik.solve_many(panda, "panda_hand", targets, world=world, self_collision=True, timeout=0.05)
    assert len(batch.collision) == 2
    for b in range(2):
        report = batch[b].info["collision"]
        assert report == batch.collision[b] and report["margin"] == MARGIN and report["pairs"] > 0
        d = ik.distances(panda, batch.q[b], world).min_distance
        assert report["min_distance"] == (pytest.approx(d, abs=1e-9) if d < MARGIN + CUTOFF else np.inf)
        assert report["collision_free"] == (d >= MARGIN)
    assert batch[0].success and not batch[1].success
    plain = ik.solve_many(panda, "panda_hand", targets)
    assert plain.collision is None and "collision" not in plain[0].info


def test_a_tracker_whose_world_checks_nothing_says_so():
    """solve warns when its collision options check no pair (a robot without collision shapes); the
    Tracker took the same world silently and its updates reported converged as if kept clear."""
    bare = ik.load_robot("panda")                       # the bundled Panda: no <collision> elements
    world = ik.World([ik.Sphere((0.5, 0.2, 0.4), 0.05)])
    with pytest.warns(CollisionWarning, match="no collision pair to check on robot 'panda'.*did nothing"):
        ik.Tracker(bare, "panda_hand", world=world)
    with pytest.warns(CollisionWarning, match="no collision pair to check on robot 'panda'.*did nothing"):
        ik.Tracker(bare, "panda_hand", self_collision=True)


def test_tracker_with_a_world_never_enters_an_obstacle_on_the_path(panda):
    """The hand follows a line through a sphere: without the world it goes through, with it every
    update stays at least the margin away (each update starts from a clear q and accepts only
    clear steps)."""
    q0 = panda.neutral()
    p0 = panda.fk(q0, "panda_hand")[:3, 3]
    sphere = ik.Sphere(p0 + (0.08, 0.15, -0.15), 0.06)   # beside the line: the hand can go around
    path = [p0 + s * np.array([0.0, 0.3, -0.3]) for s in np.linspace(0, 1, 40)]
    plain = ik.Tracker(panda, "panda_hand", max_joint_step=0.1, q0=q0)
    safe = ik.Tracker(panda, "panda_hand", max_joint_step=0.1, q0=q0, world=[sphere], margin=MARGIN)
    d_plain, d_safe = [], []
    for p in path:
        d_plain.append(ik.distances(panda, plain.update(p).q, [sphere], self_collision=False).min_distance)
        step = safe.update(p)
        d_safe.append(ik.distances(panda, step.q, [sphere], self_collision=False).min_distance)
        assert step.status != ik.Status.IN_COLLISION
    assert min(d_plain) < 0 and min(d_safe) >= MARGIN - 1e-9
    assert step.status == ik.Status.CONVERGED      # past the sphere it reaches the end of the line



def test_a_tracker_held_by_its_bound_says_iteration_limit_with_or_without_a_world(panda):
    """tracking's docstring: iteration_limit when "the update bound held the robot while the target was
    still ahead", stalled for no progress. With world= / self_collision=True (the general LM core)
    an update that moved the whole bound toward a target 0.25 m away said stalled; a world that
    never binds must not change the verdict."""
    far = ik.World([ik.Sphere((2.0, 2.0, 2.0), 0.05)])
    target = np.array([0.4, 0.1, 0.5])
    for kw in (dict(), dict(world=far), dict(self_collision=True), dict(method="lm", world=far)):
        tr = ik.Tracker(panda, "panda_hand", max_joint_step=0.1, **kw)
        steps = [tr.update(target) for _ in range(3)]
        for s in steps:
            assert s.jump == pytest.approx(0.1) and s.flagged, kw
            assert s.status == ik.Status.ITERATION_LIMIT, (kw, s.status)
        assert steps[-1].position_error < steps[0].position_error - 0.05, kw  # it was making progress

def test_correct_clip_takes_the_collision_options():
    robot, clip = ik.read_bvh(DATA / "two_joints.bvh")
    with pytest.raises(CollisionError, match="margin"):
        ik.correct_clip(robot, clip, [], margin=-0.1)
    with pytest.raises(CollisionError, match="expected an ik.World"):
        ik.correct_clip(robot, clip, [], world=3)


def test_a_check_with_a_stop_distance_ends_early_only_on_a_pair_that_is_that_close(panda):
    """Check.closest(q, stop): where the full measure's least distance is >= stop, the same answer;
    otherwise a pair closer than stop, with its own distance as the full measure gives it."""

    xyz = np.random.default_rng(5).uniform((0.2, -0.5, 0.0), (0.8, 0.5, 0.8), (300, 3))
    world = ik.World(list(shelf_world().obstacles) + [ik.Points(xyz, 0.005)])
    check = _check(panda, world)
    out_self, out_world = check.coll[0][13], check.coll[0][14]
    early_exits = 0
    for q in panda.sample(200, rng=np.random.default_rng(6)):
        full = check.closest(q)
        d_pair = np.r_[out_self[:, 0], out_world[:, :, 0].ravel()]  # every pair's distance, in index order
        for stop in (MARGIN, 0.03, -np.inf):
            got = check.closest(q, stop)
            if full[0] >= stop:
                assert got == full
            else:
                assert got[0] < stop and got[0] == d_pair[got[1]] and got[0] >= full[0]
                early_exits += got != full
    assert early_exits > 10


def test_clear_attempts_give_answers_that_meet_the_goal_and_pass_the_check(panda):
    """The fused kernel of solve._collision_fast (collision/retry.py): from plain answers that are
    in the shelf, every answer it calls clear meets the goal and is clear by the Check (and by
    coal on the meshes), and its reported check is the Check's own."""
    import importlib

    from invkin._compile_clock import Budget
    from invkin.collision.reference import CoalReference
    from invkin.collision.retry import find_clear
    from invkin.collision.rows import check_for

    solve_mod = importlib.import_module("invkin.solve")
    world = shelf_world()
    ref = CoalReference(panda, world)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CollisionWarning)
        check = check_for(panda, world, True, MARGIN)
        tried = found = 0
        for i, T in enumerate(shelf_targets(panda, world, 30000, seed=3)):
            goal = ik.Pose("panda_hand", T)
            plain = ik.solve(panda, goal, seed=i, timeout=0.05)
            if not plain.success or check.clear(plain.q):
                continue
            tried += 1
            fast = panda.cache["lm_fast"]["panda_hand"]
            ok, q, st = find_clear(check, ik.Pose, fast, goal.table(), 1e-6, 1e-6, solve_mod._scratch(fast[3]),
                                   plain.q, i, Budget(time.perf_counter() + 1.0), 32, 30)
            if not ok:
                assert q.shape == plain.q.shape and np.all(np.isfinite(q))  # the least close answer, for the rows
                continue
            found += 1
            err = panda.fk(q, "panda_hand")
            assert np.linalg.norm(err[:3, 3] - T[:3, 3]) <= 1e-6 + 1e-12
            assert st[4] <= 1e-6 and st[5] <= 1e-6
            assert check.clear(q) and check.closest(q)[:2] == (st[6], int(st[7]))
            assert ref.min_distance(q) >= MARGIN - 1e-6
    assert tried >= 3 and found >= tried - 1


def test_an_escape_step_moves_the_colliding_links_and_not_the_goal(panda):
    """escape_step: δq lies in the null space of the goal rows (J δq = 0 up to the damping) and
    raises each pushed row's distance to first order (∇d_i · δq > 0)."""
    from invkin.collision import kernels as CK
    from invkin.collision.retry import ESCAPE_CLEAR, escape_step

    world = shelf_world()
    check = _check(panda, world)
    tables = check.coll[0]
    m = check.coll[2].shape[0]
    d, Jd = np.empty(m), np.empty((m, panda.dof))
    na, nb = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
    dq = np.empty(panda.dof)
    steps = 0
    for q in panda.sample(300, rng=np.random.default_rng(8)):
        target = MARGIN + ESCAPE_CLEAR
        k = CK.collision_rows(panda.node_table, panda.node_params, panda.fk_all_array(q), tables, target, d, Jd, na, nb)
        J = panda.jacobian(q, "panda_hand")
        if np.linalg.svd(J, compute_uv=False)[-1] < 1e-2:
            continue  # near a singularity the damped projector leaks into the goal (the solve after it corrects)
        used = escape_step(J, d, Jd, k, target, 10.0, dq)
        if used == 0:
            assert not np.any(d[:k] < target) or np.allclose(dq, 0.0)
            continue
        steps += 1
        scale = np.linalg.norm(Jd[:k]) * np.linalg.norm(dq)
        assert np.linalg.norm(J @ dq) <= 1e-6 * np.linalg.norm(J) * np.linalg.norm(dq)  # (ε = 1e-10 in JJᵀ + εI)
        pushed = d[:k] < target
        assert np.all(Jd[:k][pushed] @ dq >= -1e-9 * max(scale, 1.0)) or used > 1
        assert np.max(Jd[:k][pushed] @ dq) > 0.0
    assert steps > 20


def test_retries_that_reuse_the_plain_answers_check_do_what_they_do_measuring_it_again(panda):
    """clear_attempts with ``measured`` = 1 (the caller's last full check was of q_first: its
    rows come from the tables' scratch) gives the answers and statistics of ``measured`` = 0,
    bit for bit, from plain answers in the shelf."""
    import importlib

    from invkin.collision import retry as R
    from invkin.collision.rows import check_for

    solve_mod = importlib.import_module("invkin.solve")
    world = shelf_world()
    compared = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CollisionWarning)
        check = check_for(panda, world, True, MARGIN)
        for i, T in enumerate(shelf_targets(panda, world, 30000, seed=3)):
            goal = ik.Pose("panda_hand", T)
            plain = ik.solve(panda, goal, seed=i, timeout=0.05)
            if not plain.success or check.clear(plain.q):
                continue
            fast = panda.cache["lm_fast"]["panda_hand"]
            a = check._args
            out = []
            for measured in (0, 1):
                check.closest(plain.q)  # (the full check of q_first, in the scratch)
                q_out, stats = plain.q.copy(), np.zeros(9)
                stats[R.ST_BEST_D] = -np.inf
                args = [fast[0], fast[1], *goal.table(), 1e-6, 1e-6, float(fast[2]), solve_mod._scratch(fast[3]),
                        R.RETRY_ITERATIONS, 30, 2**62, 30, a[0], a[1], a[2], a[4], check.held, a[6], a[7], a[8], a[9],
                        plain.q, i, 0, 3, R.ESCAPES, measured, q_out, stats]
                found = R._entry(check, ik.Pose, args)(*args)
                out.append((found, q_out, stats))
            assert out[0][0] == out[1][0]
            np.testing.assert_array_equal(out[0][1], out[1][1])
            np.testing.assert_array_equal(out[0][2], out[1][2])
            compared += 1
    assert compared >= 3


def _held_args(panda, goal):
    q = panda.neutral()
    return (*goal.table(), 1e-6, 1e-6, q, 0, 0, 1, 1, q.copy())


def test_the_retry_tables_are_not_built_while_their_entry_point_compiles(panda, monkeypatch):
    """retry._held_for asks for clear_attempts_held's and the RetryTables constructor's machine code
    by type before it builds anything: while either compiles in the background it builds nothing
    (a compiled-only constructor would compile in the calling process, for tables the interpreted
    path does not use) and the caller takes the path with every argument passed."""
    from invkin import _tiers
    from invkin.collision import retry as R

    goal = ik.Pose("panda_hand", panda.fk(panda.neutral(), "panda_hand"))
    ik.solve(panda, goal, timeout=0.05)  # the goal frame's fast tables
    fast = panda.cache["lm_fast"]["panda_hand"]
    check = _check(panda, shelf_world())
    asked = []
    monkeypatch.setattr(_tiers, "entry_point", lambda d, types: asked.append(d.py_func.__name__))

    def built(*_):
        raise AssertionError("RetryTables built while its entry point compiles")

    monkeypatch.setattr(R, "_retry_tables", built)
    assert R._held_for(check, ("test", "panda_hand"), fast, 30, _held_args(panda, goal)) is None
    assert asked and asked[0] == "clear_attempts_held"
    assert ("test", "panda_hand") not in check.clear_held


def test_the_retry_tables_type_is_known_before_they_are_built(panda):
    """The RetryTables type _held_for computes from the fields' values is the type of the tables it
    then builds: one machine code of clear_attempts_held serves both look-ups."""
    import numba

    from invkin.collision import retry as R

    goal = ik.Pose("panda_hand", panda.fk(panda.neutral(), "panda_hand"))
    ik.solve(panda, goal, timeout=0.05)
    fast = panda.cache["lm_fast"]["panda_hand"]
    check = _check(panda, shelf_world())
    args = _held_args(panda, goal)
    h, ep, _ = R._held_for(check, ("test", "panda_hand"), fast, 30, args)
    rest = tuple(numba.typeof(x) for x in args)
    sigs = [sig for sig in R.clear_attempts_held.signatures if sig[1:] == rest]
    assert sigs == [(numba.typeof(h),) + rest]


def test_rows_from_a_full_check_are_the_rows_measured_again(panda):
    """kernels.measured_rows after a full closest_moving (no stop) at q: the same rows as
    collision_rows at q (count, distances, gradients, nodes), for cutoffs below the check's."""
    from invkin.collision import kernels as CK

    world = shelf_world()
    check = _check(panda, world)
    tables = check.coll[0]
    m = check.coll[2].shape[0]
    a = check._args
    seen = 0
    for q in panda.sample(200, rng=np.random.default_rng(12)):
        for cutoff in (MARGIN + 0.01, MARGIN + 0.03):
            d1, J1, na1, nb1 = np.empty(m), np.empty((m, panda.dof)), np.empty(m, np.int64), np.empty(m, np.int64)
            k1 = CK.collision_rows(panda.node_table, panda.node_params, panda.fk_all_array(q), tables, cutoff, d1, J1,
                                   na1, nb1)
            CK.closest_moving(a[0], a[1], a[2], q, a[4], tables, a[6], a[7], a[8], a[9], -np.inf)
            d2, J2, na2, nb2 = np.empty(m), np.empty((m, panda.dof)), np.empty(m, np.int64), np.empty(m, np.int64)
            k2 = CK.measured_rows(a[0], a[1], a[4], tables, cutoff, d2, J2, na2, nb2)
            assert k1 == k2
            np.testing.assert_array_equal(d1[:k1], d2[:k2])
            np.testing.assert_array_equal(J1[:k1], J2[:k2])
            np.testing.assert_array_equal(na1[:k1], na2[:k2])
            np.testing.assert_array_equal(nb1[:k1], nb2[:k2])
            seen += k1
    assert seen > 50


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_an_escape_step_is_shortened_to_stay_inside_the_joint_limits(seed):
    """retry._inside: q + a·δq stays inside the limits, and a is the largest such fraction (a = 1,
    or one joint ends on its bound); a joint on its bound that δq pushes further gives a = 0 (the
    escape is blocked that way: clear_attempts stops escaping rather than clamp the step out of
    the goal's null space)."""
    from invkin.collision.retry import _inside
    from invkin.solvers.lm import L_LOWER, L_UPPER, N_LIMS

    rng = np.random.default_rng(seed)
    dof = 7
    lims = np.zeros((N_LIMS, dof))
    lims[L_LOWER] = rng.uniform(-3.0, 0.0, dof)
    lims[L_UPPER] = lims[L_LOWER] + rng.uniform(0.1, 4.0, dof)
    q = rng.uniform(lims[L_LOWER], lims[L_UPPER])
    j = rng.integers(dof)
    if rng.random() < 0.3:  # a joint on its bound
        q[j] = lims[L_UPPER, j] if rng.random() < 0.5 else lims[L_LOWER, j]
    dq = rng.normal(0.0, rng.choice([0.1, 1.0, 5.0]), dof)
    a = _inside(lims, q, dq)
    assert 0.0 <= a <= 1.0
    p = q + a * dq
    tol = 1e-12 * (1.0 + np.abs(p))
    assert np.all(p >= lims[L_LOWER] - tol) and np.all(p <= lims[L_UPPER] + tol)
    gap = np.minimum(np.abs(p - lims[L_LOWER]), np.abs(lims[L_UPPER] - p))
    assert a == 1.0 or np.min(gap[dq != 0.0]) <= 1e-9
    if (q[j] == lims[L_UPPER, j] and dq[j] > 0.0) or (q[j] == lims[L_LOWER, j] and dq[j] < 0.0):
        assert a == 0.0


def test_a_humanoid_with_both_hands_at_a_table_succeeds_only_collision_free():
    """The general route (pelvis hard, two hands): the rows, then plain retries that redraw the
    goals' chains (waist and arms, solve._goal_chain_dofs); every success is clear by the Check
    and by coal on the meshes."""
    import importlib

    from invkin.collision.reference import CoalReference
    from invkin.collision.rows import check_for, final_check

    g1 = ik.load_robot("g1")
    T = np.eye(4)
    T[:3, 3] = (0.45, 0.0, -0.15)
    world = ik.World([ik.Box(T, (0.4, 1.2, 0.04))])
    arm = np.array([any(k in n for k in ("waist", "shoulder", "elbow", "wrist")) for n in g1.joint_names])
    ref = CoalReference(g1, world)
    check = check_for(g1, world, True, MARGIN)
    targets = []
    for q in g1.sample(400, rng=np.random.default_rng(2)):
        q = np.where(arm, q, g1.neutral())
        if final_check(g1, q, world, True, MARGIN + 0.002)["collision_free"]:
            targets.append(q)
        if len(targets) == 10:
            break
    ok = 0
    for i, q in enumerate(targets):
        goals = [ik.Pose("pelvis", g1.fk(q, "pelvis"), hard=True), ik.Pose("left_rubber_hand", g1.fk(q, "left_rubber_hand")),
                 ik.Pose("right_rubber_hand", g1.fk(q, "right_rubber_hand"))]
        res = ik.solve(g1, goals, world=world, self_collision=True, margin=MARGIN, seed=i, timeout=0.1)
        if res.success:
            ok += 1
            assert check.clear(res.q) and res.info["collision"]["collision_free"]
            assert ref.min_distance(res.q) >= MARGIN - 1e-6
    assert ok >= 8
    problem_dofs = importlib.import_module("invkin.solve")._goal_chain_dofs
    from invkin.solvers.shared import compile_problem

    dofs = problem_dofs(g1, compile_problem(g1, goals, 1e-6, 1e-6, None))
    assert sorted(g1.joint_names[i] for i in dofs) == sorted(n for n, a in zip(g1.joint_names, arm) if a)


def test_the_checks_held_tables_give_the_tuples_result(panda):
    """kernels.closest_moving_held (the Check's entry: the tables as one structref) against
    closest_moving on the 17-tuple itself, on random configurations and stop distances."""
    from invkin.collision import kernels as CK

    check = _check(panda, shelf_world())
    a = check._args
    for q in panda.sample(50, rng=np.random.default_rng(9)):
        for stop in (-np.inf, MARGIN):
            want = CK.closest_moving(a[0], a[1], a[2], q, a[4], a[5], a[6], a[7], a[8], a[9], stop)
            assert check.closest(q, stop) == want
            assert CK.closest_moving_held(a[0], a[1], a[2], a[4], check.held, a[6], a[7], a[8], a[9], stop, q) == want
            if stop == -np.inf:
                assert check.measure(q) == want


def test_collision_warnings_point_at_the_callers_line():
    """'no collision pair to check' from solve_many, and a robot without shapes from distances, were
    attributed to lines inside invkin (solve.py) or to sys:1; they name the caller's line now."""
    import warnings

    from invkin.collision import CollisionWarning

    panda = ik.load_robot("panda")  # no <collision> elements: nothing to check
    Ts = panda.fk(panda.sample(2, rng=3), "panda_hand")
    world = ik.World([ik.Sphere((2.0, 2.0, 2.0), 0.1)])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ik.solve_many(panda, "panda_hand", Ts, world=world)
        ik.distances(panda, panda.neutral(), world)
    ours = [w for w in seen if issubclass(w.category, CollisionWarning)]
    assert ours and all(w.filename == __file__ for w in ours), [(w.filename, w.lineno) for w in ours]
