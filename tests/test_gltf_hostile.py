"""Damaged or odd glTF files: every one reads, or raises a ModelError naming the file and the
place (node, skin, accessor, sampler) and what was expected; never a raw IndexError/ValueError/
RecursionError from deep inside the reader."""
import copy
import json
from pathlib import Path

import numpy as np
import pytest

import invkin as ik

pytest.importorskip("pygltflib")

RIGGED = Path(__file__).parent / "data" / "gltf" / "rigged_simple.gltf"
DOC = json.loads(RIGGED.read_text())
ROT = DOC["animations"][0]["samplers"][1]  # the rotation sampler of node 2


def _set(path, value):
    def mut(d):
        *head, last = path
        for k in head:
            d = d[k]
        d[last] = value
    return mut


BROKEN = {
    "skin joint out of range": (_set(["skins", 0, "joints"], [2, 99]), r"skin 0: joint node 99 is out of range"),
    "skin joint negative": (_set(["skins", 0, "joints"], [2, -1]), r"skin 0: joint node -1 is out of range"),
    "bufferView out of range": (_set(["accessors", 4, "bufferView"], 99), r"accessor 4: bufferView 99"),
    "buffer out of range": (_set(["bufferViews", DOC["accessors"][4]["bufferView"], "buffer"], 7),
                            r"bufferView \d+: buffer 7"),
    "sampler out of range": (_set(["animations", 0, "channels", 0, "sampler"], 99), r"animation 0: channel 0: sampler 99"),
    "channel target node out of range": (_set(["animations", 0, "channels", 0, "target", "node"], 99),
                                         r"animation 0: channel 0: target node 99 is out of range"),
    "node cycle": (_set(["nodes", 3, "children"], [2]), r"node 2 .*cycle|cycle.*node"),
    "node its own child": (_set(["nodes", 3, "children"], [3]), r"node 3 .*cycle|cycle.*node 3"),
    "negative count": (_set(["accessors", 4, "count"], -3), r"accessor 4: count -3"),
    "rotation output VEC3": (_set(["accessors", ROT["output"], "type"], "VEC3"),
                             rf"sampler 1: output \(rotation\): accessor {ROT['output']} has type VEC3; expected VEC4"),
    "output count mismatch": (_set(["accessors", ROT["output"], "count"], 2),
                              rf"sampler 1: output accessor {ROT['output']} has 2 values for 3 key times"),
    "cubicspline with linear counts": (_set(["animations", 0, "samplers", 0, "interpolation"], "CUBICSPLINE"),
                                       r"sampler 0: output accessor \d+ has 3 values for 3 key times; expected 9"),
    "inverse bind matrices VEC3": (_set(["accessors", 4, "type"], "VEC3"), r"inverseBindMatrices.*accessor 4.*MAT4"),
    "too few inverse bind matrices": (_set(["accessors", 4, "count"], 1),
                                      r"inverseBindMatrices.*accessor 4.*1 .*2 joints"),
    "NaN translation": (_set(["nodes", 2, "translation"], [0, float("nan"), 0]), r"node 2 .*translation.*finite"),
    "zero rotation": (_set(["nodes", 2, "rotation"], [0, 0, 0, 0]), r"node 2 .*rotation"),
    "bad base64": (_set(["buffers", 0, "uri"], "data:application/octet-stream;base64,@@@"), r"buffer 0: .*base64"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_gltf_is_a_model_error_naming_the_file_and_the_place(tmp_path, case):
    mut, pattern = BROKEN[case]
    d = copy.deepcopy(DOC)
    mut(d)
    p = tmp_path / "broken.gltf"
    p.write_text(json.dumps(d))
    with pytest.raises(ik.ModelError) as e:
        ik.read_gltf(p)
    msg = str(e.value)
    assert msg.startswith(str(p)), msg
    assert __import__("re").search(pattern, msg), msg


@pytest.mark.parametrize("skin", ["a", 1.5, None, True])
def test_a_skin_or_animation_index_that_is_not_an_integer_is_a_model_error(skin):
    with pytest.raises(ik.ModelError, match="skin"):
        ik.read_gltf(RIGGED, skin=skin)
    with pytest.raises(ik.ModelError, match="animation"):
        ik.read_gltf(RIGGED, animation=skin if skin is not None else "x")


def test_a_deep_node_chain_reads_without_recursion(tmp_path):
    pg = pytest.importorskip("pygltflib")
    n = 3000
    doc = pg.GLTF2(asset=pg.Asset(version="2.0"))
    doc.nodes = [pg.Node(name=f"n{i}", translation=[0.0, 1.0, 0.0], children=[i + 1] if i < n - 1 else None)
                 for i in range(n)]
    doc.skins = [pg.Skin(joints=list(range(n)))]
    doc.scenes = [pg.Scene(nodes=[0])]
    p = tmp_path / "deep.gltf"
    doc.save_json(str(p))
    robot, clip = ik.read_gltf(p)
    assert clip.n_frames == 1 and len(clip.names) == n
    np.testing.assert_allclose(robot.fk(clip.frames[0], f"n{n - 1}")[:3, 3], [0.0, float(n), 0.0])


def test_an_external_buffer_uri_is_percent_decoded(tmp_path):
    """glTF URIs are RFC 3986: a buffer file named 'my data.bin' is written 'my%20data.bin'."""
    import base64
    d = copy.deepcopy(DOC)
    data = base64.b64decode(d["buffers"][0]["uri"].split(",", 1)[1])
    (tmp_path / "my data.bin").write_bytes(data)
    d["buffers"][0]["uri"] = "my%20data.bin"
    p = tmp_path / "external.gltf"
    p.write_text(json.dumps(d))
    _, clip = ik.read_gltf(p)
    np.testing.assert_array_equal(clip.frames, ik.read_gltf(RIGGED)[1].frames)


def test_the_container_is_told_by_its_magic_not_its_extension(tmp_path):
    """A binary glTF saved as .gltf, or a JSON glTF saved as .glb, reads as what it is (the
    extension used to pick the parser: "'utf-8' codec can't decode byte 0xcc")."""
    walker = RIGGED.parent / "walker.glb"
    (tmp_path / "walker.gltf").write_bytes(walker.read_bytes())
    (tmp_path / "rigged.glb").write_bytes(RIGGED.read_bytes())
    np.testing.assert_array_equal(ik.read_gltf(tmp_path / "walker.gltf")[1].frames, ik.read_gltf(walker)[1].frames)
    np.testing.assert_array_equal(ik.read_gltf(tmp_path / "rigged.glb")[1].frames, ik.read_gltf(RIGGED)[1].frames)
    (tmp_path / "text.glb").write_text("HIERARCHY\nROOT a\n")
    with pytest.raises(ik.ModelError, match=r"text\.glb: cannot read the glTF file"):
        ik.read_gltf(tmp_path / "text.glb")


@pytest.mark.parametrize("name", ["x.glb", "x.gltf"])
def test_a_file_that_is_not_gltf_says_so(tmp_path, name):
    # it said "cannot read the glTF file: Expecting value: line 1 column 1 (char 0)"
    p = tmp_path / name
    p.write_bytes(b"garbage, not a model")
    with pytest.raises(ik.ModelError, match=r"not a glTF file: neither the binary header 'glTF' nor a JSON object"):
        ik.read_gltf(p)
