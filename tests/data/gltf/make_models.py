"""Make the skinned, animated glTF test models in this folder (run from the repository root).

Written with pygltflib and NumPy only (no invkin code touches the glTF side), so that the tests can
check invkin's reader and writer against files it did not make:

* ``rigged_simple.gltf``: the skeleton, inverse bind matrices and animation of the Khronos sample
  model RiggedSimple (© Cesium, CC BY 4.0; values copied from its buffer, see NOTICE.md): a Z-up →
  Y-up root matrix, an empty group node, two joints with translation/rotation/scale samplers (three
  LINEAR keys, scales of 0.99999988), with a generated skinned cylinder in place of its mesh.
* ``walker.glb``: the bundled CMU 02_01 walk (invkin/data/mocap, CMU licence) in metres, Y-up, as a
  humanoid skin (one node per BVH joint, quaternions computed here from the BVH Euler channels),
  with a skinned box per bone; root translation as a CUBICSPLINE sampler (zero tangents), the rest
  LINEAR; a second animation ("step") holds every other frame as STEP keys.
"""
import base64
import sys

import numpy as np
import pygltflib as pg

F32 = np.float32


class Buf:
    def __init__(self, doc):
        self.doc, self.data = doc, bytearray()

    def add(self, arr, type_, ctype=5126, minmax=False):
        a = np.ascontiguousarray(arr)
        self.data += b"\0" * (-len(self.data) % 4)
        off = len(self.data)
        self.data += a.tobytes()
        self.doc.bufferViews.append(pg.BufferView(buffer=0, byteOffset=off, byteLength=a.nbytes))
        acc = pg.Accessor(bufferView=len(self.doc.bufferViews) - 1, componentType=ctype,
                          count=len(a), type=type_)
        if minmax:
            flat = a.reshape(len(a), -1)
            acc.min = [float(x) for x in flat.min(0)]
            acc.max = [float(x) for x in flat.max(0)]
        self.doc.accessors.append(acc)
        return len(self.doc.accessors) - 1


def cylinder_mesh(buf, doc, n_joints, seg_z, radius, segs=8):
    """A skinned prism: ring k at height seg_z[k] bound to joint k (rigid weights)."""
    pos, jnt, wts, idx = [], [], [], []
    rings = len(seg_z)
    for k, z in enumerate(seg_z):
        for s in range(segs):
            a = 2 * np.pi * s / segs
            pos.append(z(a) if callable(z) else (radius * np.cos(a), radius * np.sin(a), z))
            jnt.append((min(k, n_joints - 1), 0, 0, 0))
            wts.append((1.0, 0, 0, 0))
    for k in range(rings - 1):
        for s in range(segs):
            a, b = k * segs + s, k * segs + (s + 1) % segs
            c, d = a + segs, b + segs
            idx += [a, b, c, b, d, c]
    pos = np.array(pos, F32)
    prim = pg.Primitive(attributes=pg.Attributes(
        POSITION=buf.add(pos, "VEC3", minmax=True), JOINTS_0=buf.add(np.array(jnt, np.uint16), "VEC4", 5123),
        WEIGHTS_0=buf.add(np.array(wts, F32), "VEC4")), indices=buf.add(np.array(idx, np.uint16), "SCALAR", 5123))
    doc.meshes.append(pg.Mesh(primitives=[prim]))
    return len(doc.meshes) - 1


def finish(doc, buf, path, binary):
    doc.buffers = [pg.Buffer(byteLength=len(buf.data))]
    if binary:
        doc.set_binary_blob(bytes(buf.data))
        doc.save_binary(path)
    else:
        doc.buffers[0].uri = "data:application/octet-stream;base64," + base64.b64encode(bytes(buf.data)).decode()
        doc.save_json(path)


def rigged_simple(path):
    doc = pg.GLTF2(asset=pg.Asset(version="2.0", generator="invkin tests/data/gltf/make_models.py"))
    buf = Buf(doc)
    # RiggedSimple's values (float32, from its buffer and accessor bounds)
    ibm = np.array([[1.0, 0.0, 0.0, 0.0, 0.0, 0.006681859, -0.9999778, 0.0, 0.0, 0.9999777, 0.00668174, 0.0,
                     0.0, 4.180237, 0.02793174, 1.0],
                    [0.9999999, -0.00058274, 1.39481e-06, 0.0, 2.89692e-06, 0.002577662, -0.9999967, 0.0,
                     0.000582735, 0.9999966, 0.002577602, 0.0, -4.01262e-06, -0.00681883, 0.02795994, 1.0]], F32)
    t2, s2 = [0.0, -3.156060017772689e-7, -4.1803297996521], [1.0, 0.9999998807907105, 0.9999998807907105]
    q2 = [-0.7047404050827026, -0.0, -0.0, -0.7094652056694031]
    t3, s3 = [0.0, 4.18717098236084, 0.0], [1.0, 1.0, 1.0000001192092896]
    q3 = [[-0.0020521103870123626, -9.947898149675895e-8, -0.00029137087403796613, -0.999997854232788],
          [0.2933785021305084, -0.00008614854596089572, -0.0002783441450446844, -0.9559963345527648],
          [-0.0020521103870123626, -9.947898149675895e-8, -0.00029137087403796613, -0.999997854232788]]
    times = np.array([0.04166661947965622, 1.041666626930237, 2.083333015441895], F32)
    doc.nodes = [pg.Node(children=[4, 1], matrix=[1, 0, 0, 0, 0, 0, -1, 0, 0, 1, 0, 0, 0, 0, 0, 1]),
                 pg.Node(mesh=0, skin=0),
                 pg.Node(name="Bone", children=[3], translation=t2, rotation=q2, scale=s2),
                 pg.Node(name="Bone.001", translation=t3, rotation=q3[0], scale=s3),
                 pg.Node(children=[2])]
    cylinder_mesh(buf, doc, 2, [-4.575, -2.3, 0.0, 2.3, 4.575], 1.0)
    # rings 0-1 follow joint 0, rings 2-4 joint 1: fix the joint indices of the mesh built above
    doc.scenes = [pg.Scene(nodes=[0])]
    doc.scene = 0
    doc.skins = [pg.Skin(name="Armature", joints=[2, 3], skeleton=2, inverseBindMatrices=buf.add(ibm, "MAT4"))]
    ti = buf.add(times, "SCALAR", minmax=True)
    smp, chans = [], []
    for node, path_, vals, typ in ((2, "translation", [t2] * 3, "VEC3"), (2, "rotation", [q2] * 3, "VEC4"),
                                   (2, "scale", [s2] * 3, "VEC3"), (3, "translation", [t3] * 3, "VEC3"),
                                   (3, "rotation", q3, "VEC4"), (3, "scale", [s3] * 3, "VEC3")):
        smp.append(pg.AnimationSampler(input=ti, output=buf.add(np.array(vals, F32), typ), interpolation="LINEAR"))
        chans.append(pg.AnimationChannel(sampler=len(smp) - 1, target=pg.AnimationChannelTarget(node=node, path=path_)))
    doc.animations = [pg.Animation(samplers=smp, channels=chans)]
    finish(doc, buf, path, binary=False)


def _euler_quat(axis, deg):
    h = np.deg2rad(deg) / 2
    q = np.zeros(deg.shape + (4,))
    q[..., "XYZ".index(axis)] = np.sin(h)
    q[..., 3] = np.cos(h)
    return q


def _qmul(a, b):
    ax, ay, az, aw = np.moveaxis(a, -1, 0)
    bx, by, bz, bw = np.moveaxis(b, -1, 0)
    return np.stack([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz], -1)


def walker(path, bvh, scale=0.056444):
    """BVH → glTF, independent of invkin: a minimal BVH reader for the CMU file layout."""
    toks = open(bvh).read().split()
    names, parents, offsets, channels, stack, i = [], [], [], [], [], 0
    while toks[i] != "MOTION":
        t = toks[i]
        if t in ("ROOT", "JOINT"):
            names.append(toks[i + 1]); parents.append(stack[-1] if stack else -1); i += 2
        elif t == "End":
            names.append(names[stack[-1]] + "_End"); parents.append(stack[-1]); channels.append([]); i += 2
        elif t == "{":
            stack.append(len(names) - 1); i += 1
        elif t == "}":
            stack.pop(); i += 1
        elif t == "OFFSET":
            offsets.append([float(x) for x in toks[i + 1:i + 4]]); i += 4
        elif t == "CHANNELS":
            n = int(toks[i + 1]); channels.append(toks[i + 2:i + 2 + n]); i += 2 + n
        else:
            i += 1
    nf = int(toks[i + 2]); ft = float(toks[i + 5]); vals = np.array(toks[i + 6:], float).reshape(nf, -1)
    vals = vals[::4][:60]  # 30 fps, 2 s
    ft *= 4
    doc = pg.GLTF2(asset=pg.Asset(version="2.0", generator="invkin tests/data/gltf/make_models.py"))
    buf = Buf(doc)
    kids = [[] for _ in names]
    for k, p in enumerate(parents):
        if p >= 0:
            kids[p].append(k)
    for k, nm in enumerate(names):
        doc.nodes.append(pg.Node(name=nm, children=kids[k] or None,
                                 translation=[float(v * scale) for v in offsets[k]]))
    times = (np.arange(len(vals)) * ft).astype(F32)
    ti = buf.add(times, "SCALAR", minmax=True)
    ti2 = buf.add(times[::2], "SCALAR", minmax=True)
    smp, chans, smp2, chans2, col = [], [], [], [], 0
    for k, chs in enumerate(channels):
        if not chs:
            continue
        v = vals[:, col:col + len(chs)]
        col += len(chs)
        q = np.tile([0.0, 0.0, 0.0, 1.0], (len(v), 1))
        pos = np.tile(np.array(offsets[k]) * scale, (len(v), 1))
        for c, x in zip(chs, v.T):
            if c.endswith("rotation"):
                q = _qmul(q, _euler_quat(c[0], x))
            else:
                pos[:, "XYZ".index(c[0])] = x * scale
        for f in range(1, len(q)):
            if np.dot(q[f], q[f - 1]) < 0:
                q[f] = -q[f]
        outs = [("rotation", q.astype(F32), "VEC4", "LINEAR")]
        if any(c.endswith("position") for c in chs):
            cub = np.zeros((len(pos), 3, 3), F32)
            cub[:, 1] = pos
            outs.append(("translation", cub.reshape(-1, 3), "VEC3", "CUBICSPLINE"))
        for p, arr, typ, interp in outs:
            smp.append(pg.AnimationSampler(input=ti, output=buf.add(arr, typ), interpolation=interp))
            chans.append(pg.AnimationChannel(sampler=len(smp) - 1, target=pg.AnimationChannelTarget(node=k, path=p)))
            if interp == "LINEAR":
                smp2.append(pg.AnimationSampler(input=ti2, output=buf.add(arr[::2], typ), interpolation="STEP"))
                chans2.append(pg.AnimationChannel(sampler=len(smp2) - 1,
                                                  target=pg.AnimationChannelTarget(node=k, path=p)))
    doc.animations = [pg.Animation(name="walk", samplers=smp, channels=chans),
                      pg.Animation(name="step", samplers=smp2, channels=chans2)]
    # bind pose = all rotations zero: world = sum of offsets
    world = np.zeros((len(names), 3))
    for k, p in enumerate(parents):
        world[k] = (world[p] if p >= 0 else 0) + np.array(offsets[k]) * scale
    ibm = np.tile(np.eye(4, dtype=F32), (len(names), 1, 1))
    ibm[:, :3, 3] = -world  # row-major here; column-major in the file
    mesh_root = len(doc.nodes)
    doc.nodes.append(pg.Node(name="body", mesh=0, skin=0))
    pos, jnt, idx = [], [], []
    for k, p in enumerate(parents):  # a thin box from parent to child, bound to the parent
        if p < 0:
            continue
        a, b = world[p], world[k]
        base = len(pos)
        for corner in range(8):
            d = np.array([(corner & 1) - 0.5, ((corner >> 1) & 1) - 0.5, 0.0]) * 0.04
            pos.append((a if corner < 4 else b) + d)
            jnt.append((p, 0, 0, 0))
        idx += [base + x for x in (0, 1, 4, 1, 5, 4, 2, 3, 6, 3, 7, 6, 0, 2, 4, 2, 6, 4, 1, 3, 5, 3, 7, 5)]
    prim = pg.Primitive(attributes=pg.Attributes(
        POSITION=buf.add(np.array(pos, F32), "VEC3", minmax=True),
        JOINTS_0=buf.add(np.array(jnt, np.uint16), "VEC4", 5123),
        WEIGHTS_0=buf.add(np.tile(np.array([1, 0, 0, 0], F32), (len(pos), 1)), "VEC4")),
        indices=buf.add(np.array(idx, np.uint16), "SCALAR", 5123))
    doc.meshes = [pg.Mesh(primitives=[prim])]
    doc.skins = [pg.Skin(name="walker", joints=list(range(len(names))), skeleton=0,
                         inverseBindMatrices=buf.add(ibm.transpose(0, 2, 1).reshape(-1, 16), "MAT4"))]
    doc.scenes = [pg.Scene(nodes=[0, mesh_root])]
    doc.scene = 0
    finish(doc, buf, path, binary=True)


if __name__ == "__main__":
    here = "tests/data/gltf"
    rigged_simple(f"{here}/rigged_simple.gltf")
    walker(f"{here}/walker.glb", "src/invkin/data/mocap/cmu_02_01_walk.bvh")
    print("wrote", here, file=sys.stderr)
