"""The README's code runs as written and says what it prints.

Its Python blocks run in order in one namespace (as a reader pasting them into one session would),
in a temporary folder that holds the files the README expects the reader to have (``talos.urdf``,
``ur5e.xml``, ``walk.bvh``...; MuJoCo Menagerie's UR5e is stood in for by a small MJCF test model),
with the two placeholders it names (``T_world_shelf``, ``cloud_xyz``); then the claims written next
to the code are checked against the objects. Every ``--flag`` of the command block is an option of
its command.
"""
from __future__ import annotations

import argparse
import re
import shlex
import warnings
from pathlib import Path

import numpy as np
import pytest

import invkin as ik
from invkin import cli
from invkin.collision.errors import CollisionWarning

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DATA = Path(__file__).resolve().parent / "data"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, re.S)


def readme_files(folder: Path) -> None:
    """The files the README's snippets open, as a reader would have them."""
    erd = DATA / "erd"
    links = {"talos.urdf": erd / "talos_reduced.urdf", "talos.srdf": erd / "talos.srdf",
             "panda_fingers.urdf": erd / "panda_fingers.urdf", "panda.srdf": erd / "panda.srdf",
             "example-robot-data": erd / "example-robot-data",  # the meshes' package:// folder
             "ur5e.xml": DATA / "mjcf" / "arm.xml", "head.xml": DATA / "mjcf" / "head.xml",
             "walk.bvh": Path(ik.__file__).parent / "data" / "mocap" / "cmu_02_01_walk.bvh"}
    for name, target in links.items():
        (folder / name).symlink_to(target)


def test_readme_python_blocks_run_in_order_and_print_what_their_comments_say(tmp_path, monkeypatch):
    pytest.importorskip("mujoco")
    blocks = python_blocks()
    assert len(blocks) == 4, "a Python block was added or removed: run it here too"
    readme_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    T_world_shelf = np.eye(4)
    T_world_shelf[:3, 3] = (0.6, 0.0, 0.3)
    ns = {"T_world_shelf": T_world_shelf,
          "cloud_xyz": np.random.default_rng(0).uniform((0.3, -0.5, 0.0), (0.4, -0.4, 0.1), (200, 3))}

    exec(compile(blocks[0], "README.md: quick start", "exec"), ns)  # noqa: S102 - the README's own code
    robot = ns["robot"]
    assert ns["T"].shape == (4, 4) and ns["J"].shape == (6, robot.dof) == (6, 7)
    np.testing.assert_allclose(ns["q"], (robot.lower + robot.upper) / 2)  # "mid-range of the joint limits"
    assert repr(ns["res"]).startswith("Result(converged, method=lm, pos_err=")
    assert ns["batch"].q.shape == (1000, 7)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ik.ModelWarning)  # talos_reduced's mimic joints on fixed joints
        exec(compile(blocks[1], "README.md: whole robots", "exec"), ns)  # noqa: S102
    assert ns["talos"].dof == len(ns["q"]) and ns["arm"].dof == 7
    geoms = next(iter(ns["ur5e"].geoms.values()))
    g = geoms[0]
    assert repr(g).startswith(f"Geom({g.name!r}, {g.type}, size=") and g.T_link_geom.shape == (4, 4)

    with warnings.catch_warnings():
        warnings.simplefilter("error", CollisionWarning)  # the README's world runs clean
        exec(compile(blocks[2], "README.md: collisions", "exec"), ns)  # noqa: S102
    res, info = ns["res"], ns["res"].info["collision"]
    m = re.search(r"res\.info\[\"collision\"\] +# \{'margin': ([\d.]+), 'pairs': (\d+), 'min_distance': ([\d.]+),"
                  r"\s*#\s*'closest': \('(\w+)', '([^']+)'\)", README)
    assert m, "the README's info['collision'] comment changed shape"
    assert res.success and res.status == ik.Status.CONVERGED
    assert info["margin"] == float(m[1]) and info["pairs"] == int(m[2]) and info["static"] == ()
    assert info["min_distance"] == pytest.approx(float(m[3]), abs=5e-4)
    assert info["closest"] == (m[4], m[5])
    assert info["pairs"] == len(ik.collision_pairs(ns["panda"])) + len(ns["panda"].collision.links) * 4

    exec(compile(blocks[3], "README.md: motion retargeting", "exec"), ns)  # noqa: S102
    with np.load(tmp_path / "walk_g1.npz") as f:
        for key in ("root_position", "root_quat_wxyz", "joint_positions", "joint_names", "fps"):
            assert key in f.files


def command_lines() -> list[list[str]]:
    """The invkin command lines of the README's bash blocks, continuation lines joined."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("invkin "):
                out.append(shlex.split(line.replace("[", " ").replace("]", " "))[1:])
    return out


def test_every_flag_of_the_readme_commands_is_an_option_of_that_command(capsys):
    lines = command_lines()
    assert len(lines) >= 15
    nested = {"clip", "bench"}
    for words in lines:
        cmd = words[:2] if words[0] in nested else words[:1]
        assert cli.main([*cmd, "--help"]) == 0, cmd
        helptext = capsys.readouterr().out
        for flag in (w for w in words if w.startswith("--")):
            assert re.search(rf"(^|[\s\[,]){re.escape(flag)}\b", helptext), f"invkin {' '.join(cmd)} has no {flag}"


def _parsers(parser, prefix=()):
    """(argv prefix, parser) of every command and subcommand."""
    for action in parser._actions:
        if isinstance(getattr(action, "choices", None), dict):
            for name, sub in action.choices.items():
                yield (*prefix, name), sub
                yield from _parsers(sub, (*prefix, name))


def test_every_command_has_help_as_the_readme_says_and_it_reads_as_written(capsys):
    cmds = dict(_parsers(cli.build_parser()))
    assert {("clip", "fix-feet"), ("bench", "accuracy"), ("warmup",), ("retarget",)} <= set(cmds)
    for cmd in cmds:
        assert cli.main([*cmd, "--help"]) == 0, cmd
        helptext = capsys.readouterr().out
        assert helptext.startswith("usage: invkin " + " ".join(cmd)), cmd
        assert "%%" not in helptext and "%(" not in helptext, (cmd, helptext)  # a description is not %-formatted


def test_the_readme_names_every_exit_code_the_commands_use():
    """The README's "Exit codes" said 0, 1, 2 and 141, while `invkin clip fix-feet` exits 3 when it
    finds no contact, Ctrl-C gives 130 and SIGTERM gives `invkin batch` 143: a script that reads the
    code needs every one of them."""
    import inspect
    import signal

    from invkin import cli_clip, cli_retarget
    from invkin.jobs import cli as jobs_cli

    codes = {cli.EXIT_OK, cli.EXIT_NOT_CONVERGED, cli.EXIT_BAD_INPUT, cli.EXIT_BROKEN_PIPE}
    for mod in (cli_clip, cli_retarget, jobs_cli):
        codes |= {v for k, v in vars(mod).items() if k.startswith("EXIT_") and isinstance(v, int)}
    assert "return 130" in inspect.getsource(cli.main)  # Ctrl-C
    assert "128 + int(signal.SIGTERM)" in inspect.getsource(jobs_cli)
    codes |= {130, 128 + int(signal.SIGTERM)}
    paragraph = README.split("Exit codes:")[1].split("\n\n")[0]
    named = {int(n) for n in re.findall(r"(?<![\w.-])(\d{1,3})(?![\w.])", paragraph)}
    assert codes <= named, f"exit codes the commands use but the README does not name: {sorted(codes - named)}"


def test_every_argument_of_every_command_has_help_text_and_every_command_a_description():
    """`invkin solve --help` listed `robot` and `--seed` without a word (as did fk's robot and
    --json, fix-feet's IN.bvh/OUT.bvh, retarget's input), and `invkin methods --help` had no description."""
    missing = []
    for cmd, parser in _parsers(cli.build_parser()):
        if not parser.description:
            missing.append(f"invkin {' '.join(cmd)}: no description")
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not action.help:
                missing.append(f"invkin {' '.join(cmd)} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, missing
