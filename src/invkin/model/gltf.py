"""glTF 2.0 skins and animations ⇄ a skeleton :class:`Robot` plus a motion :class:`GltfClip`.

Needs the optional ``pygltflib`` (``pip install "invkin[gltf]"``) for the file structure; accessors
are read and written here with NumPy.

Mapping (glTF node ``n`` with local transform ``T_n = Trans(t) · R(q) · S(s)``, spec §3.5.3):

* the clip's nodes are the skin's joints and all their ancestors (so a Z-up → Y-up root matrix or
  an armature node is kept), parents first; each becomes a clip node of the BVH mapping
  (:mod:`invkin.model.bvh`): ``OFFSET`` = the rest translation ``t``; three ``Xposition Yposition
  Zposition`` channels when ``t`` is animated; three rotation channels on every node. The Euler order is picked per node so that the middle angle stays farthest from
  ±90° over the clip (no gimbal lock in the data), e.g. ``R(q) = Rz(a) · Rx(b) · Ry(c)`` for "ZXY".
* samplers are evaluated at the clip's frame times: LINEAR (lerp, slerp for rotations), STEP and
  CUBICSPLINE (Hermite with the stored tangents, spec Appendix C). When every animated channel
  shares one uniformly spaced key array the frames *are* the keys (nothing is re-sampled);
  otherwise the union of keys is used if uniform, else a ``fps`` grid from the first to the last key.
* scale is not a joint of :class:`Robot`: a non-unit scale on a clip node is kept for writing
  but ignored by FK (a warning says so).

:func:`write_gltf` writes a corrected clip back into the structure it was read from (same nodes,
meshes, skins; only the samplers of nodes whose motion changed are replaced, so an unchanged clip
round-trips bit for bit and a changed one to float32 precision), or builds a new skeleton-only glTF
(nodes, one skin, one animation) for a clip from another source such as BVH.
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import math
import os
import pathlib
import urllib.parse
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError, ModelWarning, warn_caller
from .._io import atomic_path
from .axes import convert_clip
from .euler import ORDERS, axis_rot as _axis_rot, euler_from_matrix
from .bvh import Clip, check_skeleton, need_frames, skeleton_robot
from .robot import Robot

__all__ = ["GltfClip", "read_gltf", "write_gltf", "ORDERS"]

_COMPONENTS = {5126: np.float32, 5120: np.int8, 5121: np.uint8, 5122: np.int16, 5123: np.uint16,
               5125: np.uint32}
_NORM = {np.int8: 127.0, np.uint8: 255.0, np.int16: 32767.0, np.uint16: 65535.0}
_WIDTH = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT4": 16}


def _pygltflib():
    try:
        import pygltflib
    except ImportError:
        raise ModelError('reading or writing glTF needs pygltflib: pip install "invkin[gltf]"') from None
    return pygltflib


def _index(value, n: int, what: str, src) -> int:
    """``value`` as an index below ``n``, or a ModelError naming ``what`` (e.g. "skin 0: joint")."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ModelError(f"{src}: {what} {value!r} is not an integer index")
    if not 0 <= int(value) < n:
        raise ModelError(f"{src}: {what} {int(value)} is out of range; the file has {n}")
    return int(value)


def _finite(values, n: int, what: str, src) -> np.ndarray:
    """``values`` as (n,) finite floats, or a ModelError naming ``what``."""
    try:
        a = np.array(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        a = np.zeros(0)
    if a.shape != (n,) or not np.all(np.isfinite(a)):
        raise ModelError(f"{src}: {what} is {values!r}; expected {n} finite numbers")
    return a


@dataclass(frozen=True, eq=False, repr=False)
class GltfClip(Clip):
    """A :class:`Clip` read from glTF, with what :func:`write_gltf` needs to write it back.

    Extra attributes:
        gltf_nodes: glTF node index of each clip node.
        times: (F,) float64, read-only: the time of each frame [s] (the first key need not be 0).
        rest: (dof,) float64, read-only: the nodes' static transforms (the file's rest pose) as a q.
        inverse_bind: (J, 4, 4) float64: the skin's inverse bind matrices, in ``skin_joints`` order.
        skin_joints: clip node index of each skin joint.
        source: path of the file read; skin, animation: indices read (animation None: rest only).
        scale, up: the conversion applied on reading (undone on writing).
        source_frames, source_times: the frames and times as read (after the conversion): nodes
            whose columns still equal them keep their original samplers on writing (while the times
            are those read: a retimed clip rewrites every node).
    """

    gltf_nodes: tuple = ()
    times: np.ndarray = None
    rest: np.ndarray = None
    inverse_bind: np.ndarray = None
    skin_joints: tuple = ()
    source: str = None
    skin: int = 0
    animation: int = None
    scale: float = 1.0
    up: str = "y"
    source_frames: np.ndarray = None
    source_times: np.ndarray = None

    def __post_init__(self):
        super().__post_init__()
        n = self.n_frames
        t = np.arange(n) * self.frame_time if self.times is None else np.asarray(self.times, float)
        if t.shape != (n,):
            raise ModelError(f"GltfClip: times must have shape ({n},) like frames, got {t.shape}")
        t = np.array(t, dtype=float)
        if n > 1 and self.times is not None:  # the frame time is the times' mean spacing (they must agree)
            spacing = (t[-1] - t[0]) / (n - 1)
            if not abs(self.frame_time - spacing) <= 1e-6 * max(abs(spacing), 1e-12):
                raise ModelError(f"GltfClip: frame_time {self.frame_time:g} s disagrees with its times (spacing "
                                 f"{spacing:g} s); the times are what write_gltf writes: retime with "
                                 f"dataclasses.replace(clip, frame_time=dt, times=t0 + np.arange(n) * dt)")
        t.setflags(write=False)
        object.__setattr__(self, "times", t)
        if self.rest is not None:
            rest = np.array(self.rest, dtype=float)
            if rest.shape != (self.dof,):
                raise ModelError(f"GltfClip: rest must be one q of shape ({self.dof},), got {rest.shape}")
            rest.setflags(write=False)
            object.__setattr__(self, "rest", rest)
        if len(self.gltf_nodes) != len(self.names):
            raise ModelError(f"GltfClip: gltf_nodes needs one entry per node ({len(self.names)}), "
                             f"got {len(self.gltf_nodes)}")


# ------------------------------------------------------------------------------- rotation maths
def _channels_rotation(channels, values) -> np.ndarray:
    """(F, 3, 3) product of a node's rotation channels (in channel order) from (F, n) values."""
    F = values.shape[0]
    R = np.broadcast_to(np.eye(3), (F, 3, 3)).copy()
    for c, v in zip(channels, values.T):
        if c.endswith("rotation"):
            R = R @ _axis_rot("XYZ".index(c[0]), v)
    return R


def _quat_to_matrix(q_xyzw: np.ndarray) -> np.ndarray:
    q = np.asarray(q_xyzw, float)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    x, y, z, w = np.moveaxis(q, -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
        np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
        np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1)], -2)


def _matrix_to_quat(R: np.ndarray) -> np.ndarray:
    """(..., 4) unit quaternions x y z w of rotation matrices (Shepperd's branch on the largest term)."""
    R = np.asarray(R, float)
    tr = R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2]
    cand = np.stack([tr, R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]], -1)
    k = np.argmax(cand, axis=-1)
    q = np.empty(R.shape[:-2] + (4,))
    for br in range(4):
        m = k == br
        if not np.any(m):
            continue
        Rm = R[m]
        if br == 0:
            s = 2.0 * np.sqrt(1.0 + tr[m])
            q[m] = np.stack([(Rm[:, 2, 1] - Rm[:, 1, 2]) / s, (Rm[:, 0, 2] - Rm[:, 2, 0]) / s,
                             (Rm[:, 1, 0] - Rm[:, 0, 1]) / s, 0.25 * s], -1)
        else:
            i = br - 1
            j, l = (i + 1) % 3, (i + 2) % 3
            s = 2.0 * np.sqrt(1.0 + Rm[:, i, i] - Rm[:, j, j] - Rm[:, l, l])
            v = np.empty((len(s), 4))
            v[:, i] = 0.25 * s
            v[:, j] = (Rm[:, j, i] + Rm[:, i, j]) / s
            v[:, l] = (Rm[:, l, i] + Rm[:, i, l]) / s
            v[:, 3] = (Rm[:, l, j] - Rm[:, j, l]) / s
            q[m] = v
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def _slerp(q0, q1, u):
    d = np.sum(q0 * q1, axis=-1, keepdims=True)
    q1 = np.where(d < 0, -q1, q1)
    d = np.abs(d)
    th = np.arccos(np.clip(d, -1.0, 1.0))
    sth = np.sin(th)
    small = sth < 1e-9
    w0 = np.where(small, 1.0 - u, np.sin((1.0 - u) * th) / np.where(small, 1.0, sth))
    w1 = np.where(small, u, np.sin(u * th) / np.where(small, 1.0, sth))
    q = w0 * q0 + w1 * q1
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


# ---------------------------------------------------------------------------------- file access
def _buffers(doc, path) -> list:
    out = []
    for i, b in enumerate(doc.buffers):
        uri = b.uri
        if uri is None:
            blob = doc.binary_blob()
            if blob is None:
                raise ModelError(f"{path}: buffer {i} has no uri and the file has no binary chunk")
            out.append(bytes(blob))
        elif uri.startswith("data:"):
            head, _, data = uri.partition(",")
            try:
                out.append(base64.b64decode(data, validate=True) if head.endswith(";base64")
                           else urllib.parse.unquote_to_bytes(data))
            except (binascii.Error, ValueError):
                raise ModelError(f"{path}: buffer {i}: its data: URI is not valid base64") from None
        else:
            f = os.path.join(os.path.dirname(os.path.abspath(path)), urllib.parse.unquote(uri))
            try:
                with open(f, "rb") as fh:
                    out.append(fh.read())
            except OSError as e:
                raise ModelError(f"{path}: buffer {i}: cannot read {uri!r}: {e.strerror or e}") from None
    return out


def _load(pg, src: str):
    """The pygltflib document of ``src``, binary or JSON by the file's first bytes (the GLB magic
    ``glTF``), not by its extension."""
    with open(src, "rb") as f:
        magic = f.read(4)
    if magic == b"glTF":
        return pg.GLTF2.load_binary(src)
    if magic.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] not in (b"{", b""):  # (a JSON glTF is one object)
        raise ValueError(f"not a glTF file: neither the binary header 'glTF' nor a JSON object (it starts "
                         f"with {magic!r})")
    return pg.GLTF2.load_json(src)


def _accessor(doc, bufs, idx: int, path, types=None, what: str = "accessor") -> np.ndarray:
    """(count, width) float64 (or integer) values of accessor ``idx`` (normalised integers scaled).
    ``types``: the accessor types the use allows (e.g. ("VEC4",)); ``what`` names the use."""
    if idx is None or isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < len(doc.accessors):
        raise ModelError(f"{path}: {what}: accessor index {idx!r} is out of range (0..{len(doc.accessors) - 1})")
    a = doc.accessors[idx]
    if types is not None and a.type not in types:
        raise ModelError(f"{path}: {what}: accessor {idx} has type {a.type}; expected {' or '.join(types)}")
    if isinstance(a.count, bool) or not isinstance(a.count, int) or a.count < 0:
        raise ModelError(f"{path}: accessor {idx}: count {a.count!r} is not a count (an integer >= 0)")
    if a.sparse is not None:
        raise ModelError(f"{path}: accessor {idx}: sparse accessors are not supported")
    dt = _COMPONENTS.get(a.componentType)
    width = _WIDTH.get(a.type)
    if dt is None or width is None:
        raise ModelError(f"{path}: accessor {idx}: unsupported componentType {a.componentType} / type {a.type}")
    if a.bufferView is None:
        return np.zeros((a.count, width))
    bv = doc.bufferViews[_index(a.bufferView, len(doc.bufferViews), f"accessor {idx}: bufferView", path)]
    data = bufs[_index(bv.buffer, len(bufs), f"bufferView {a.bufferView}: buffer", path)]
    item = np.dtype(dt).itemsize * width
    stride = bv.byteStride or item
    start = (bv.byteOffset or 0) + (a.byteOffset or 0)
    need = start + stride * (a.count - 1) + item if a.count else start
    if need > len(data) or need > (bv.byteOffset or 0) + bv.byteLength:
        raise ModelError(f"{path}: accessor {idx} reads past the end of its buffer view")
    raw = np.ndarray((a.count, width), dtype=np.dtype(dt).newbyteorder("<"), buffer=data, offset=start,
                     strides=(stride, np.dtype(dt).itemsize))
    out = np.array(raw)
    if a.normalized and dt in _NORM:
        out = np.maximum(out / _NORM[dt], -1.0)
    return out


def _local_trs(node, src="<glTF>", n=None):
    """Translation, unit quaternion (x y z w) and scale of a node; a ModelError naming node ``n``
    for non-finite values, a zero quaternion or a matrix with a zero column."""
    where = f"node {n}" + (f" ({node.name!r})" if node.name else "")
    if node.matrix is not None and any(v != m for v, m in zip(node.matrix, np.eye(4).T.ravel())):
        M = _finite(node.matrix, 16, f"{where}: matrix", src).reshape(4, 4).T  # column-major in the file
        t = M[:3, 3].copy()
        s = np.linalg.norm(M[:3, :3], axis=0)
        if not np.all(s > 1e-12):
            raise ModelError(f"{src}: {where}: matrix has a zero scale column; expected an invertible "
                             f"translation-rotation-scale matrix")
        R = M[:3, :3] / s
        if np.linalg.det(R) < 0:
            s[0], R[:, 0] = -s[0], -R[:, 0]
        return t, _matrix_to_quat(R), s
    t = _finite(node.translation if node.translation is not None else (0.0, 0.0, 0.0), 3,
                f"{where}: translation", src)
    q = _finite(node.rotation if node.rotation is not None else (0.0, 0.0, 0.0, 1.0), 4, f"{where}: rotation", src)
    norm = float(np.linalg.norm(q))
    if not norm > 1e-6:
        raise ModelError(f"{src}: {where}: rotation {node.rotation!r} is not a unit quaternion (x y z w)")
    s = _finite(node.scale if node.scale is not None else (1.0, 1.0, 1.0), 3, f"{where}: scale", src)
    return t, q / norm, s


def _sample(times, values, interp, ts, rotation: bool) -> np.ndarray:
    """Evaluate a sampler at ``ts`` (clamped to its key range); exact at the keys."""
    K = len(times)
    if interp == "CUBICSPLINE":
        v3 = values.reshape(K, 3, -1)
        a_in, p, b_out = v3[:, 0], v3[:, 1], v3[:, 2]
    else:
        p = values
    if K == 1:
        out = np.repeat(p[:1], len(ts), axis=0)
        return out
    i = np.clip(np.searchsorted(times, ts, side="right") - 1, 0, K - 2)
    t0, t1 = times[i], times[i + 1]
    dt = t1 - t0
    u = np.clip((ts - t0) / np.where(dt > 0, dt, 1.0), 0.0, 1.0)[:, None]
    if interp == "STEP":
        out = np.where(u >= 1.0, p[i + 1], p[i])
    elif interp == "CUBICSPLINE":
        u2, u3 = u * u, u * u * u
        out = ((2 * u3 - 3 * u2 + 1) * p[i] + dt[:, None] * (u3 - 2 * u2 + u) * b_out[i]
               + (-2 * u3 + 3 * u2) * p[i + 1] + dt[:, None] * (u3 - u2) * a_in[i + 1])
        if rotation:
            out = out / np.linalg.norm(out, axis=-1, keepdims=True)
    elif rotation:
        out = _slerp(p[i], p[i + 1], u)
    else:
        out = p[i] + u * (p[i + 1] - p[i])
    at0, at1 = u[:, 0] == 0.0, u[:, 0] == 1.0
    out[at0] = p[i[at0]]
    out[at1] = p[i[at1] + 1]
    return out


def _frame_times(keys: list, fps):
    if not keys:
        return np.zeros(1)
    first = keys[0]
    if all(k.shape == first.shape and np.array_equal(k, first) for k in keys):
        cand = first
    else:
        cand = np.unique(np.concatenate(keys))
    if len(cand) == 1:
        return cand
    d = np.diff(cand)
    # uniform to 0.1 %, or to the float32 precision of the keys (two units in the last place of the
    # largest: 120 fps keys past ~70 s differ by more than 0.1 % in float32)
    tol = 1e-3 * d.mean() + 2.0 * float(np.spacing(np.float32(np.max(np.abs(cand[[0, -1]])))))
    if fps is None and np.all(np.abs(d - d.mean()) <= tol):
        return cand
    rate = 30.0 if fps is None else float(fps)
    # the last key counts as on the grid within 1e-3 frame (float32 key times fall a little short:
    # 60 keys at 30 fps end at 1.96666658 s, which gave 59 frames at fps=30)
    n = int(math.floor((cand[-1] - cand[0]) * rate + 1e-3)) + 1
    return cand[0] + np.arange(n) / rate


def _node_names(doc, order) -> list:
    """The clip names of glTF nodes ``order``: the node's name (``node<i>`` when it has none), made
    unique with ``_2``, ``_3``, ... in that order."""
    names, seen = [], set()
    for n in order:
        nm = doc.nodes[n].name or f"node{n}"
        base, k = nm, 1
        while nm in seen:
            k += 1
            nm = f"{base}_{k}"
        seen.add(nm)
        names.append(nm)
    return names


def _pick_order(R: np.ndarray) -> str:
    best, best_v = ORDERS[0], math.inf
    for order in ORDERS:
        i, _, k = ("XYZ".index(ch) for ch in order)
        v = float(np.max(np.abs(R[:, i, k])))
        if v < best_v - 1e-9:
            best, best_v = order, v
    return best


def read_gltf(path, *, skin: int = 0, animation: int | None = 0, fps=None, scale: float = 1.0,
              up="y") -> tuple[Robot, GltfClip]:
    """Read a glTF 2.0 file (``.gltf`` or ``.glb``): a skin's skeleton and one of its animations.

    Args:
        path: the file.
        skin: index of the skin whose joints make the skeleton.
        animation: index of the animation to read; ``None`` (or a file without animations) gives one
            frame, the rest pose.
        fps: re-sample the animation at this rate [1/s], from its first key to its last (default:
            the keys themselves when they are uniform, else 30).
        scale: multiply lengths by this (e.g. 100 for centimetres).
        up: the up axis of the result (glTF is Y-up; ``"z"`` turns the clip Z-up, exactly).

    Returns:
        ``(robot, clip)`` like :func:`~invkin.read_bvh`: ``robot.fk(clip.frames[i], joint_name)``.

    A damaged file (an index out of range, a node cycle, an accessor of the wrong type or count for
    its use, non-finite transforms or keys, bad base64) raises :class:`~invkin.ModelError` naming the
    file and the place (node, skin, accessor, animation sampler). Sparse accessors are not supported
    (a ModelError says so). External buffer URIs are percent-decoded (``my%20data.bin``).
    """
    pg = _pygltflib()
    from .axes import check_conversion
    scale = check_conversion("read_gltf", scale, up=up)
    if fps is not None:
        if isinstance(fps, (bool, np.bool_)) or not isinstance(fps, (int, float, np.integer, np.floating)) or not (
                math.isfinite(fps) and fps > 0):
            raise ModelError(f"read_gltf: fps must be a number > 0 [frames/s] or None, got {fps!r}")
    src = os.fspath(path)
    from .._io import open_regular

    open_regular(src, "glTF file", ModelError).close()  # a FIFO named x.glb must not block the load
    try:
        doc = _load(pg, src)
    except Exception as e:  # pygltflib raises assorted errors for damaged files
        raise ModelError(f"{src}: cannot read the glTF file: {e}") from None
    if doc is None:
        raise ModelError(f"{src}: cannot read the glTF file")
    if isinstance(skin, (bool, np.bool_)) or not isinstance(skin, (int, np.integer)):
        raise ModelError(f"read_gltf: skin must be an integer index, got {skin!r}")
    if animation is not None and (isinstance(animation, (bool, np.bool_))
                                  or not isinstance(animation, (int, np.integer))):
        raise ModelError(f"read_gltf: animation must be an integer index or None, got {animation!r}")
    if not doc.skins:
        raise ModelError(f"{src}: the file has no skin (a skinned character is expected)")
    if not 0 <= int(skin) < len(doc.skins):
        raise ModelError(f"{src}: skin {skin!r} out of range; the file has {len(doc.skins)} skin(s)")
    sk = doc.skins[int(skin)]
    bufs = _buffers(doc, src)
    nn = len(doc.nodes)
    parent = {}
    for i, nd in enumerate(doc.nodes):
        for c in nd.children or ():
            c = _index(c, nn, f"node {i}: child node", src)
            if c == i:
                raise ModelError(f"{src}: node {i} lists itself among its children (a cycle); glTF nodes "
                                 f"must form trees")
            if c in parent:
                raise ModelError(f"{src}: node {c} is a child of node {parent[c]} and of node {i}; glTF nodes "
                                 f"must form trees (no shared children, no cycles)")
            parent[c] = i
    if not sk.joints:
        raise ModelError(f"{src}: skin {int(skin)} has no joints")
    joints = [_index(j, nn, f"skin {int(skin)}: joint node", src) for j in sk.joints]
    keep = set()
    for j in joints:
        n, path = j, []
        while n is not None and n not in keep:
            if n in path:
                raise ModelError(f"{src}: nodes {path[path.index(n):]} form a cycle (each a child of the next); "
                                 f"glTF nodes must form trees")
            path.append(n)
            n = parent.get(n)
        keep.update(path)
    order = []
    for r in sorted(keep):  # depth first, children in file order, with an explicit stack (any depth)
        if parent.get(r) is None:
            stack = [r]
            while stack:
                n = stack.pop()
                order.append(n)
                stack.extend(c for c in reversed(doc.nodes[n].children or ()) if c in keep)
    index = {n: k for k, n in enumerate(order)}
    names = _node_names(doc, order)

    # animated channels of the kept nodes
    anims = {}
    keys = []
    if animation is not None and doc.animations:
        if not 0 <= int(animation) < len(doc.animations):
            raise ModelError(f"{src}: animation {animation!r} out of range; the file has "
                             f"{len(doc.animations)} animation(s)")
        an = doc.animations[int(animation)]
        for c, ch in enumerate(an.channels):
            n = ch.target.node
            if n is not None:  # (a channel without a node targets an extension: skipped)
                _index(n, nn, f"animation {int(animation)}: channel {c}: target node", src)
            if n not in index or ch.target.path not in ("translation", "rotation", "scale"):
                continue
            where = f"animation {int(animation)}: channel {c}: sampler"
            k = _index(ch.sampler, len(an.samplers), where, src)
            where = f"animation {int(animation)}: sampler {k}"
            smp = an.samplers[k]
            interp = smp.interpolation or "LINEAR"
            if interp not in ("LINEAR", "STEP", "CUBICSPLINE"):
                raise ModelError(f"{src}: sampler {ch.sampler}: unknown interpolation {interp!r}")
            t = _accessor(doc, bufs, smp.input, src, ("SCALAR",), f"{where}: input")[:, 0].astype(float)
            width = "VEC4" if ch.target.path == "rotation" else "VEC3"
            v = _accessor(doc, bufs, smp.output, src, (width,), f"{where}: output ({ch.target.path})").astype(float)
            need = len(t) * (3 if interp == "CUBICSPLINE" else 1)
            if len(v) != need:
                raise ModelError(f"{src}: {where}: output accessor {smp.output} has {len(v)} values for "
                                 f"{len(t)} key times; expected {need}"
                                 + (" (in-tangent, value, out-tangent per key)" if interp == "CUBICSPLINE" else ""))
            if not (np.all(np.isfinite(t)) and np.all(np.isfinite(v))):
                raise ModelError(f"{src}: {where}: key times or values are not finite")
            if len(t) == 0 or np.any(np.diff(t) <= 0):
                raise ModelError(f"{src}: sampler {ch.sampler}: key times must increase")
            anims[(n, ch.target.path)] = (t, v, interp)
            keys.append(t)
    else:
        animation = None
    times = _frame_times(keys, fps)
    F = len(times)

    offsets, channels, cols, rest_cols, scaled = [], [], [], [], []
    for n in order:
        t, q, s = _local_trs(doc.nodes[n], src, n)
        offsets.append(t)
        chs, vals, rest = [], [], []
        if (n, "translation") in anims:
            tt, tv, ti = anims[(n, "translation")]
            chs += ["Xposition", "Yposition", "Zposition"]
            vals.append(_sample(tt, tv, ti, times, False))
            rest += list(t)
        if (n, "rotation") in anims:
            tt, tv, ti = anims[(n, "rotation")]
            Q = _sample(tt, tv, ti, times, True)
        else:
            Q = np.repeat(q[None], F, axis=0)
        R = _quat_to_matrix(Q)
        if True:  # every node turns (one skeleton whatever the animation; IK may turn any joint)
            od = _pick_order(R)
            ang = np.unwrap(euler_from_matrix(R, od), axis=0)
            chs += [f"{c}rotation" for c in od]
            vals.append(ang)
            rest += list(euler_from_matrix(_quat_to_matrix(q), od))
        sv = [s] + ([anims[(n, "scale")][1]] if (n, "scale") in anims else [])
        if any(np.max(np.abs(np.asarray(x) - 1.0)) > 1e-4 for x in sv):
            scaled.append(names[index[n]])
        channels.append(tuple(chs))
        cols.append(np.concatenate(vals, axis=1) if vals else np.zeros((F, 0)))
        rest_cols += rest
    if scaled:
        warn_caller(f"{src}: nodes {scaled[:4]} have a non-unit scale, which FK ignores (positions below them "
                    f"are unscaled)", ModelWarning)
    frames = np.concatenate(cols, axis=1)
    if sk.inverseBindMatrices is not None:
        what = f"skin {int(skin)}: inverseBindMatrices"
        ibm = _accessor(doc, bufs, sk.inverseBindMatrices, src, ("MAT4",), what)
        if len(ibm) < len(joints):
            raise ModelError(f"{src}: {what}: accessor {sk.inverseBindMatrices} holds {len(ibm)} matrices for "
                             f"{len(joints)} joints; expected one per joint")
        ibm = ibm[:len(joints)].reshape(-1, 4, 4).transpose(0, 2, 1)
    else:
        ibm = np.broadcast_to(np.eye(4), (len(joints), 4, 4))
    ft = float(np.mean(np.diff(times))) if F > 1 else 0.0
    try:
        clip = _clip_of(order, index, parent, names, frames, ft, offsets, channels, times, rest_cols, ibm, joints,
                        src, skin, animation, scale, up)
    except ModelError as e:
        raise ModelError(f"{src}: {e}") from None
    try:
        robot = skeleton_robot(clip, name=os.path.splitext(os.path.basename(src))[0])
    except ModelError as e:
        raise ModelError(f"{src}: {e}") from None
    return robot, clip


def _clip_of(order, index, parent, names, frames, ft, offsets, channels, times, rest_cols, ibm, joints, src, skin,
             animation, scale, up) -> GltfClip:
    clip = GltfClip(frames=frames, frame_time=ft, names=tuple(names),
                    parents=tuple(index.get(parent.get(n), -1) for n in order),
                    offsets=np.array(offsets), channels=tuple(channels), end_site=(False,) * len(order),
                    gltf_nodes=tuple(order), times=times, rest=np.array(rest_cols),
                    inverse_bind=np.array(ibm), skin_joints=tuple(index[j] for j in joints),
                    source=os.path.abspath(src), skin=int(skin), animation=animation)
    clip = convert_clip(clip, scale=scale, up_from="y", up_to=up)
    return dataclasses.replace(clip, scale=float(scale), up=str(up).lower(), source_frames=np.array(clip.frames),
                               source_times=np.array(clip.times))


# --------------------------------------------------------------------------------------- writing
class _Blob:
    """Appends float32 arrays to a binary buffer as new buffer views and accessors."""

    def __init__(self, pg, doc, data: bytes):
        self.pg, self.doc, self.data = pg, doc, bytearray(data)

    def add(self, arr: np.ndarray, type_: str, minmax: bool = False) -> int:
        pg, doc = self.pg, self.doc
        a = np.ascontiguousarray(arr, dtype="<f4")
        self.data += b"\0" * (-len(self.data) % 4)
        off = len(self.data)
        self.data += a.tobytes()
        doc.bufferViews.append(pg.BufferView(buffer=0, byteOffset=off, byteLength=a.nbytes))
        acc = pg.Accessor(bufferView=len(doc.bufferViews) - 1, componentType=5126, count=len(a), type=type_)
        if minmax:
            flat = a.reshape(len(a), -1)
            acc.min = [float(x) for x in flat.min(axis=0)]
            acc.max = [float(x) for x in flat.max(axis=0)]
        doc.accessors.append(acc)
        return len(doc.accessors) - 1


def _node_motion(clip, node: int, col0: int):
    """Local translation (F, 3) or None, and rotation (F, 3, 3) or None, of a clip node."""
    chs = clip.channels[node]
    vals = np.asarray(clip.frames[:, col0:col0 + len(chs)])
    t = None
    if any(c.endswith("position") for c in chs):
        t = np.repeat(np.asarray(clip.offsets[node], float)[None], clip.n_frames, axis=0)
        for c, v in zip(chs, vals.T):
            if c.endswith("position"):
                t[:, "XYZ".index(c[0])] = v
    R = _channels_rotation(chs, vals) if any(c.endswith("rotation") for c in chs) else None
    return t, R


def _quats(R: np.ndarray, ref=None) -> np.ndarray:
    """Quaternions (x y z w) of (F, 3, 3) rotations, signs continuous (frame 0 next to ``ref``)."""
    Q = _matrix_to_quat(R)
    if len(Q) == 0:
        return Q
    # a sign flip wherever a quaternion turns against the one before; flips accumulate (vectorised:
    # a loop over frames took 0.15 s per node per 100k frames)
    flip = np.concatenate([[ref is not None and float(np.dot(Q[0], ref)) < 0],
                           np.sum(Q[1:] * Q[:-1], axis=1) < 0])
    odd = (np.cumsum(flip) % 2).astype(bool)
    Q[odd] = -Q[odd]
    return Q


def _save(pg, doc, blob: bytearray, dst: str):
    doc.buffers = [pg.Buffer(byteLength=len(blob))]
    binary = dst.lower().endswith(".glb")
    if binary:
        doc.set_binary_blob(bytes(blob))
    else:
        doc.buffers[0].uri = "data:application/octet-stream;base64," + base64.b64encode(bytes(blob)).decode()
    with atomic_path(dst, suffix=".glb" if binary else ".gltf") as tmp:
        ok = doc.save_binary(tmp) if binary else doc.save_json(tmp)
        if ok is False:
            raise ModelError(f"{dst}: pygltflib could not write the file")


def write_gltf(path, robot: Robot | None, clip: Clip, *, source=None, scale: float | None = None,
               up=None) -> None:
    """Write ``clip`` as glTF (``.glb`` binary or ``.gltf`` with an embedded buffer), atomically.

    A :class:`GltfClip` is written into the structure of the file it was read from (``source=``
    names that file where it has moved; a file whose nodes differ is a ModelError): nodes, meshes,
    skins and other animations are kept (buffers are embedded; relative image URIs are rewritten for
    the new file's folder); in the clip's animation, every node whose frames differ from those read gets new translation/rotation samplers
    at the clip's frame times (LINEAR); unchanged nodes keep their samplers bit for bit. The reading
    conversion (``scale``, ``up``) is undone first; ``scale=`` / ``up=`` here are then a ModelError
    (the file keeps its own units and axes).

    Any other clip (e.g. from :func:`~invkin.read_bvh`) becomes a new skeleton-only file: one node per
    clip node, one skin over them (inverse bind matrices of the zero pose) and one animation.
    ``scale`` multiplies lengths (e.g. 0.01 for a centimetre BVH) and ``up`` names the clip's up axis
    (turned onto glTF's +Y); its key times are ``i × frame_time``, so a clip of two or more frames
    needs ``frame_time > 0``. A clip of no frames is a ModelError (nothing is written).
    """
    pg = _pygltflib()
    if not isinstance(clip, Clip):
        raise ModelError(f"write_gltf: expected a Clip, got {type(clip).__name__}")
    if robot is not None:
        check_skeleton(robot, clip, "write_gltf: ")
    need_frames(clip, "write_gltf")
    dst = os.fspath(path)
    if os.path.splitext(str(dst))[1].lower() not in (".glb", ".gltf"):
        raise ModelError(f"write_gltf: {dst!r}: expected a .glb (binary) or .gltf (JSON) path; the suffix picks "
                         f"the format (a BVH file: write_bvh)")
    src = source if source is not None else getattr(clip, "source", None)
    if src is not None and isinstance(clip, GltfClip):
        if scale is not None or up is not None:  # they would be ignored: the file keeps its own units and axes
            given = ", ".join(f"{k}={v!r}" for k, v in (("scale", scale), ("up", up)) if v is not None)
            raise ModelError(f"write_gltf: {given} applies to a new file; this clip was read from {src!r} and is "
                             f"written into that file's structure in the file's own units and axes (the reading "
                             f"conversion, scale={clip.scale:g} up={clip.up!r}, is undone); drop {given}")
        _write_into(pg, dst, clip, os.fspath(src))
    elif src is not None:
        raise ModelError(f"write_gltf: source={src!r} needs a clip read by read_gltf (a GltfClip), "
                         f"got a {type(clip).__name__}")
    else:
        from .axes import check_conversion
        scale = check_conversion("write_gltf", 1.0 if scale is None else scale, up=up)
        _write_new(pg, dst, clip, scale, "y" if up is None else up)


def _relocate_images(doc, src: str, dst: str) -> None:
    """Image URIs relative to ``src``'s folder made relative to ``dst``'s (a texture beside the source
    file stays found when the corrected file is written elsewhere); data: and absolute URIs are kept."""
    a, b = os.path.dirname(os.path.abspath(src)), os.path.dirname(os.path.abspath(dst))
    if a == b:
        return
    for img in doc.images or ():
        uri = img.uri
        if not uri or uri.startswith("data:") or urllib.parse.urlsplit(uri).scheme or uri.startswith("/"):
            continue
        target = os.path.join(a, urllib.parse.unquote(uri))
        try:
            rel = os.path.relpath(target, b)
        except ValueError:  # another drive (Windows): an absolute file URI
            img.uri = pathlib.Path(target).as_uri()
            continue
        img.uri = urllib.parse.quote(rel.replace(os.sep, "/"))


def _write_into(pg, dst: str, clip: GltfClip, src: str):
    try:
        doc = _load(pg, src)
    except Exception as e:
        raise ModelError(f"{src}: cannot read the glTF file to write into: {e}") from None
    nn = len(doc.nodes)
    if any(not 0 <= n < nn for n in clip.gltf_nodes) or _node_names(doc, clip.gltf_nodes) != list(clip.names):
        bad = next((i for i, n in enumerate(clip.gltf_nodes) if not 0 <= n < nn), None)
        if bad is None:
            got = _node_names(doc, clip.gltf_nodes)
            bad = next(i for i, (a, b) in enumerate(zip(got, clip.names)) if a != b)
            there = f"is {got[bad]!r} there"
        else:
            there = f"is not there (the file has {nn} nodes)"
        raise ModelError(f"write_gltf: {src} does not hold this clip's skeleton: the clip's node {clip.names[bad]!r} "
                         f"(glTF node {clip.gltf_nodes[bad]}) {there}; write into the file the clip was read from")
    if clip.animation is not None and not clip.animation < len(doc.animations):
        raise ModelError(f"write_gltf: {src} has {len(doc.animations)} animation(s); the clip was read from "
                         f"animation {clip.animation}; write into the file the clip was read from")
    bufs = _buffers(doc, src)
    # one buffer: the old buffers back to back, views shifted
    blob, base = bytearray(), []
    for b in bufs:
        blob += b"\0" * (-len(blob) % 8)
        base.append(len(blob))
        blob += b
    for bv in doc.bufferViews:
        bv.byteOffset = (bv.byteOffset or 0) + base[bv.buffer]
        bv.buffer = 0
    store = _Blob(pg, doc, bytes(blob))
    _relocate_images(doc, src, dst)
    same_times = clip.source_times is None or (clip.source_times.shape == clip.times.shape
                                               and np.array_equal(clip.source_times, clip.times))
    changed = np.any(clip.frames != clip.source_frames, axis=0) if (
        same_times and clip.source_frames is not None and clip.source_frames.shape == clip.frames.shape) else \
        np.ones(clip.dof, dtype=bool)
    undo = convert_clip(clip, scale=1.0 / clip.scale, up_from=clip.up, up_to="y")
    if clip.animation is None:
        doc.animations.append(pg.Animation(channels=[], samplers=[], name="invkin"))
        an = doc.animations[-1]
    else:
        an = doc.animations[clip.animation]
    t_acc = None
    col = 0
    for i, n in enumerate(clip.gltf_nodes):
        k = len(clip.channels[i])
        if k and np.any(changed[col:col + k]):
            if t_acc is None:
                t_acc = store.add(clip.times[:, None], "SCALAR", minmax=True)
            t, R = _node_motion(undo, i, col)
            old = {c.target.path: c for c in an.channels if c.target.node == n}
            node = doc.nodes[n]
            t0, ref, s0 = _local_trs(node)
            if node.matrix is not None:  # an animated node may not have a matrix (glTF 2.0 §3.7.2.1): TRS
                node.translation, node.rotation, node.scale = ([float(v) for v in x] for x in (t0, ref, s0))
                node.matrix = None
            out = []
            if t is not None:
                out.append(("translation", store.add(t, "VEC3")))
            if R is not None:
                out.append(("rotation", store.add(_quats(R, ref), "VEC4")))
            for p, acc in out:
                an.samplers.append(pg.AnimationSampler(input=t_acc, output=acc, interpolation="LINEAR"))
                if p in old:
                    old[p].sampler = len(an.samplers) - 1
                else:
                    an.channels.append(pg.AnimationChannel(
                        sampler=len(an.samplers) - 1, target=pg.AnimationChannelTarget(node=n, path=p)))
        col += k
    _save(pg, doc, store.data, dst)


def _write_new(pg, dst: str, clip: Clip, scale: float, up):
    if clip.n_frames > 1 and not clip.frame_time > 0:  # glTF key times must increase
        raise ModelError(f"write_gltf: the clip's frame time is {clip.frame_time:g}; it must be > 0 to write "
                         f"key times for its {clip.n_frames} frames")
    c = convert_clip(clip, scale=scale, up_from=up, up_to="y")
    doc = pg.GLTF2(asset=pg.Asset(version="2.0", generator="invkin"))
    store = _Blob(pg, doc, b"")
    kids = [[] for _ in c.names]
    for i, p in enumerate(c.parents):
        if p >= 0:
            kids[p].append(i)
    rob = skeleton_robot(c)
    Ts = rob.fk_all(np.zeros(rob.dof))
    for i, nm in enumerate(c.names):
        doc.nodes.append(pg.Node(name=nm, children=kids[i] or None,
                                 translation=[float(v) for v in c.offsets[i]]))
    doc.scenes = [pg.Scene(nodes=[i for i, p in enumerate(c.parents) if p < 0])]
    doc.scene = 0
    ibm = np.empty((len(c.names), 4, 4))
    for i, nm in enumerate(c.names):
        ibm[i] = np.linalg.inv(Ts[nm])
    acc = store.add(ibm.transpose(0, 2, 1).reshape(-1, 16), "MAT4")
    doc.skins = [pg.Skin(joints=list(range(len(c.names))), inverseBindMatrices=acc, name=rob.name)]
    an = pg.Animation(channels=[], samplers=[], name="invkin")
    t_acc = store.add((np.arange(c.n_frames) * c.frame_time)[:, None], "SCALAR", minmax=True)
    col = 0
    for i in range(len(c.names)):
        k = len(c.channels[i])
        if k:
            t, R = _node_motion(c, i, col)
            for p, arr, ty in (("translation", t, "VEC3"), ("rotation", None if R is None else _quats(R), "VEC4")):
                if arr is None:
                    continue
                an.samplers.append(pg.AnimationSampler(input=t_acc, output=store.add(arr, ty),
                                                       interpolation="LINEAR"))
                an.channels.append(pg.AnimationChannel(sampler=len(an.samplers) - 1,
                                                       target=pg.AnimationChannelTarget(node=i, path=p)))
        col += k
    doc.animations = [an]
    _save(pg, doc, store.data, dst)
