"""The general collision route limb by limb (collision/limbs.py): a humanoid with both hands at a
table, its pelvis held; every answer checked by the Check and by coal on the meshes."""
from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

import invkin as ik

coal = pytest.importorskip("coal")
pytest.importorskip("trimesh")

MARGIN = 0.005
ARM_WORDS = ("waist", "shoulder", "elbow", "wrist")
HANDS = ("left_rubber_hand", "right_rubber_hand")


@pytest.fixture(scope="module")
def scene():
    """G1, a table in front of its pelvis (benchmarks/collision_ik.py's scene), the Check, and
    the benchmark's first 60 targets: waist and arms drawn (seed 1), the rest neutral, every checked pair
    at least margin + 2 mm apart, so each has a collision-free solution."""
    from invkin.collision.rows import check_for, final_check

    g1 = ik.load_robot("g1")
    T = np.eye(4)
    T[:3, 3] = (0.45, 0.0, -0.15)
    world = ik.World([ik.Box(T, (0.4, 1.2, 0.04))])
    arm = np.array([any(w in n for w in ARM_WORDS) for n in g1.joint_names])
    targets = []
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while len(targets) < 60:
            for q in g1.sample(2000, rng=rng):
                q = np.where(arm, q, g1.neutral())
                if final_check(g1, q, world, True, MARGIN + 0.002)["collision_free"]:
                    targets.append(q)
                    if len(targets) == 60:
                        break
    return g1, world, check_for(g1, world, True, MARGIN), targets


def _goals(g1, q):
    return [ik.Pose("pelvis", g1.fk(q, "pelvis"), hard=True)] + [ik.Pose(h, g1.fk(q, h)) for h in HANDS]


def _limbs(g1, check, goals):
    from invkin.collision.limbs import Limbs
    from invkin.solvers.shared import compile_problem

    solve = importlib.import_module("invkin.solve")
    problem = compile_problem(g1, goals, 1e-6, 1e-6, None)
    return problem, Limbs.of(problem, check, solve._lm_tables(g1), solve._sampler(g1))


def test_limbs_split_a_humanoid_into_its_base_and_waist_two_arms_and_legs_that_move_no_goal(scene):
    g1, world, check, targets = scene
    problem, limbs = _limbs(g1, check, _goals(g1, targets[0]))
    names = g1.joint_names
    arms = {side: sorted(n for n in names if n.startswith(side) and any(w in n for w in ARM_WORDS[1:]))
            for side in ("left", "right")}
    assert [sorted(names[i] for i in own) for _, own, *_ in limbs.limbs] == [arms["left"], arms["right"]]
    assert sorted(names[i] for i in limbs.drawn) == sorted(n for n in names if any(w in n for w in ARM_WORDS))
    assert limbs.idle.size and all(any(w in names[i] for w in ("hip", "knee", "ankle")) for i in limbs.idle)
    # the split needs goals that depend on their frames' paths alone
    from invkin.solvers.shared import compile_problem

    solve = importlib.import_module("invkin.solve")
    com = compile_problem(g1, _goals(g1, targets[0]) + [ik.CenterOfMass(np.zeros(3))], 1e-6, 1e-6, None)
    from invkin.collision.limbs import Limbs

    assert Limbs.of(com, check, solve._lm_tables(g1), solve._sampler(g1)) is None


def test_a_limbs_sub_chain_places_its_frame_where_the_whole_tree_does(scene):
    """The sub-chain of a hand (its arm's rows, the waist and base folded into the first) is the
    chain program of the tree cut above the arm, and its FK at any arm values equals the robot's
    FK with the shared DOFs where the sub-chain was made."""
    from invkin.kinematics import kernels as K

    g1, world, check, targets = scene
    problem, limbs = _limbs(g1, check, _goals(g1, targets[0]))
    rng = np.random.default_rng(3)
    for q in g1.sample(6, rng=rng):
        for node, own, first, _, _ in limbs.limbs:
            ch = limbs.sub_chain(node, first, q)
            parent = g1.parent.copy()
            parent[first] = -1
            origin = g1.origin.copy()
            origin[first] = g1.fk_all_array(q)[int(g1.parent[first])] @ g1.origin[first]
            ref = K.chain_program(parent, g1.joint_type, g1.axis, origin, g1.qidx, g1.multiplier, g1.offset, node)
            np.testing.assert_allclose(ch, ref, rtol=0, atol=1e-12)
            q2 = q.copy()
            q2[own] = g1.sample(1, rng=rng)[0][own]
            T = np.empty((4, 4))
            K.chain_fk_into(ch, q2, T)
            np.testing.assert_allclose(T, g1.fk(q2, node), rtol=0, atol=1e-12)


def test_the_check_among_a_limbs_pairs_is_the_least_distance_of_the_pairs_with_a_link_of_that_limb(scene):
    from invkin.collision.model import collision_model
    from invkin.collision.rows import CUTOFF

    g1, world, check, targets = scene
    problem, limbs = _limbs(g1, check, _goals(g1, targets[0]))
    cm = collision_model(g1)
    for q in g1.sample(20, rng=np.random.default_rng(4)):
        q = np.where([any(w in n for w in ARM_WORDS) for n in g1.joint_names], q, g1.neutral())
        assert check.closest_among(q, check.moving_self, check.moving_link) == check.closest(q)
        d = ik.distances(g1, q, world, cutoff=MARGIN + CUTOFF)
        for _, own, _, ms, ml in limbs.limbs:
            mine = {cm.link_names[e] for e in range(len(cm.link_names)) if ml[e] or any(
                ms[p] and e in pair for p, pair in enumerate(check.pair_links))}
            moved = {n for n in mine if set(g1.dofs_of(n).tolist()) & set(own.tolist())}
            want = min((float(x) for (a, b), x in zip(d.pairs, d.distance) if a in moved or b in moved),
                       default=np.inf)
            got = check.closest_among(q, ms, ml)[0]
            assert got == pytest.approx(want, abs=1e-9) or (got == np.inf and want > MARGIN + CUTOFF - 1e-9)


def _colliding_answers(scene):
    """(i, goals, problem, limbs, q1) for each target whose plain answer meets the goals and, with
    the idle DOFs back at the start (Limbs._tidy), still collides (q1)."""
    g1, world, check, targets = scene
    for i, q in enumerate(targets):
        goals = _goals(g1, q)
        plain = ik.solve(g1, goals, seed=i, timeout=None)
        problem, limbs = _limbs(g1, check, goals)
        q1 = limbs._tidy(plain.q, g1.neutral())
        if plain.success and not check.clear(q1):
            yield i, goals, problem, limbs, q1


def test_a_limb_search_moves_only_that_arms_joints_and_keeps_every_goal(scene):
    """From plain answers with an arm in collision, clear_limbs changes only the joints of the
    arms that collided, meets every goal, and is clear by the Check and by coal."""
    from invkin.collision.reference import CoalReference

    g1, world, check, targets = scene
    ref = CoalReference(g1, world)
    searched = 0
    for i, goals, problem, limbs, q1 in _colliding_answers(scene):
        hit = [k for k, (_, _, _, ms, ml) in enumerate(limbs.limbs) if check.closest_among(q1, ms, ml)[0] < MARGIN]
        q2 = limbs.clear_limbs(problem, q1, i, 4, [0, 0])
        if q2 is None:
            continue
        searched += 1
        moved = np.nonzero(q2 != q1)[0]
        assert set(moved.tolist()) <= set(np.concatenate([limbs.limbs[k][1] for k in hit]).tolist())
        for g in goals:
            T = g1.fk(q2, g.frame)
            assert np.abs(T[:3, 3] - g.T[:3, 3]).max() < 1e-5 and np.abs(T[:3, :3] - g.T[:3, :3]).max() < 1e-5
        assert check.clear(q2) and ref.min_distance(q2) >= MARGIN - 1e-6
    assert searched >= 3


def test_a_target_the_rows_could_not_clear_in_their_iterations_is_solved_clear(scene):
    """The benchmark's first G1 target: plain solves stopped at a false "unreachable" verdict here
    (the core's near restarts stayed in the start's basin) or, with a clock, put the left shoulder
    12 cm into the torso; the rows from that answer, then redraws, ended at max_iterations (1000)
    in collision (before collision/limbs.py). Draws of waist and arms, each arm then searched
    alone, answer clear within the same iterations. (Since session 16's whole-body core changes (the
    held joints in the reduced step, MIXED_LAMBDA_INIT) the plain solve converges clear too, after 2 restarts.)"""
    from invkin.collision.reference import CoalReference

    g1, world, check, targets = scene
    goals = _goals(g1, targets[0])
    res = ik.solve(g1, goals, seed=0, timeout=None, world=world, self_collision=True, margin=MARGIN)
    assert res.success and res.info["collision"]["collision_free"] and res.iterations <= 1000
    assert res.position_error <= 1e-6 and res.rotation_error <= 1e-6
    assert check.clear(res.q) and CoalReference(g1, world).min_distance(res.q) >= MARGIN - 1e-6


def test_every_sampled_two_hand_target_is_solved_clear_by_the_check_and_by_coal(scene):
    """Twenty targets with a collision-free solution, bounded by iterations (the same answers on
    a loaded machine): every one solved, clear; some plain answers collide (the route runs)."""
    from invkin.collision.reference import CoalReference

    g1, world, check, targets = scene
    ref = CoalReference(g1, world)
    plain_hits = 0
    for i, q in enumerate(targets[:20]):
        goals = _goals(g1, q)
        plain = ik.solve(g1, goals, seed=i, timeout=None)
        plain_hits += not check.clear(plain.q)
        res = ik.solve(g1, goals, seed=i, timeout=None, world=world, self_collision=True, margin=MARGIN)
        assert res.success, (i, res)
        assert res.info["collision"]["collision_free"] and check.clear(res.q)
        assert ref.min_distance(res.q) >= MARGIN - 1e-6, i
    assert plain_hits >= 4


INTERPRETED = r"""
import json, sys, warnings
import numpy as np
import invkin as ik
from invkin import _compile_clock
from invkin.collision.rows import final_check

warnings.simplefilter("ignore")
g1 = ik.load_robot("g1")
world = ik.World([ik.Box(np.array(TABLE), (0.4, 1.2, 0.04))])
out = []
for i, q in TARGETS:
    q = np.array(q)
    goals = [ik.Pose("pelvis", g1.fk(q, "pelvis"), hard=True)] + [ik.Pose(h, g1.fk(q, h)) for h in HANDS]
    plain = ik.solve(g1, goals, seed=i, timeout=5.0)
    res = ik.solve(g1, goals, world=world, self_collision=True, seed=i, timeout=5.0)
    out.append(dict(plain_clear=bool(plain.success and final_check(g1, plain.q, world, True, 0.005)["collision_free"]),
                    success=bool(res.success), clear=bool(final_check(g1, res.q, world, True, 0.005)["collision_free"])))
print(json.dumps(dict(out=out, interpreted=_compile_clock.interpreted_seconds())))
"""


@pytest.mark.slow  # a fresh process on empty caches, its kernels on the interpreter
def test_the_limb_search_runs_on_the_interpreter_from_empty_caches(scene, tmp_path):
    """INVKIN_COMPILE=interpret: the limb search's kernels (retry.clear_attempts on a sub-chain,
    the Check among a limb's pairs) run on the interpreter; two targets whose plain answers
    collide (both an arm into the torso) are answered clear (a 5 s budget: the
    interpreter's pace on a loaded machine decides nothing)."""
    import json
    import os
    import subprocess
    import sys

    g1, world, check, targets = scene
    picked = [(i, targets[i].tolist()) for i in (17, 11)]
    script = (INTERPRETED.replace("TABLE", repr(world.obstacles[0].T_world_box.tolist())).replace("TARGETS", repr(picked))
              .replace("HANDS", repr(HANDS)))
    env = {**os.environ, "INVKIN_QUIET": "1", "INVKIN_COMPILE": "interpret", "INVKIN_CACHE_DIR": str(tmp_path / "c"),
           "NUMBA_CACHE_DIR": str(tmp_path / "n")}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    res = json.loads(run.stdout.strip().splitlines()[-1])
    assert res["interpreted"] > 0.0
    for r in res["out"]:
        assert not r["plain_clear"] and r["success"] and r["clear"], r


def test_a_limbs_escapes_clear_it_with_the_other_joints_held(scene):
    """The escapes of retry.clear_attempts (no random start: tries = 0) clear arms of plain answers
    in collision: the step's distance gradients leave out the held DOFs (lower = upper), whose
    share of a least-norm step would otherwise be cut off at the limits and stop every escape."""
    g1, world, check, targets = scene
    escaped = 0
    for i, goals, problem, limbs, q1 in _colliding_answers(scene):
        stats = [0, 0]
        q2 = limbs.clear_limbs(problem, q1, i, 0, stats)
        if q2 is not None:
            assert stats[1] == 0 and check.clear(q2)  # no random start was solved
            escaped += 1
    assert escaped >= 2
