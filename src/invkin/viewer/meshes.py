"""Link shapes as triangle meshes for the viewer: mesh files through trimesh, primitives, a cache.

:func:`geometry_parts` turns one :class:`~invkin.model.geometry.Geometry` into
:class:`MeshPart` s (vertices in the shape's frame, scale applied, faces, an RGB colour and an
opacity): a primitive is built by ``trimesh.creation``; a mesh file (STL, OBJ, DAE, glTF/GLB, PLY,
... whatever ``trimesh.load`` reads; DAE needs ``pycollada``) is read once, its scene graph
flattened, its parts grouped by colour (material base colour, else the mean face/vertex colour,
else the URDF colour, else grey).

Large meshes are decimated (quadric decimation, ``fast_simplification``) to at most
``max_faces`` triangles per file and cached as ``.npz`` in ``$INVKIN_MESH_CACHE_DIR``, else
``$XDG_CACHE_HOME/invkin/meshes``, else ``~/.cache/invkin/meshes``, keyed by the SHA-256 of the
file's bytes and the face budget: a second start reads the cache and skips the parse and the
decimation. A file's own colours win over the URDF's ``<material>`` (as in RViz for DAE files);
the URDF colour paints meshes that have none. A file that cannot be read is reported by
:class:`MeshLoadError` and the viewer draws the rest.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np

from ..errors import InvkinError
from .errors import ViewerError

__all__ = ["MeshPart", "MeshLoadError", "geometry_parts", "cache_dir", "DEFAULT_MAX_FACES"]

#: Triangles kept per mesh file after decimation (G1: 35 files of up to 60k -> 50k in all, which
#: software WebGL still draws).
DEFAULT_MAX_FACES = 1500
_CACHE_VERSION = 2          # bump when the cached arrays change meaning
DEFAULT_GREY = (0.78, 0.78, 0.80)


class MeshLoadError(ViewerError):
    """A mesh file is missing or unreadable."""


@dataclass(frozen=True, eq=False)
class MeshPart:
    """One colour of one shape: ``vertices`` (n, 3) float32 in the shape frame [m], ``faces``
    (m, 3) uint32, ``rgb`` in [0, 1], ``opacity`` in [0, 1]."""

    vertices: np.ndarray
    faces: np.ndarray
    rgb: tuple
    opacity: float = 1.0


def _trimesh():
    try:
        import trimesh  # noqa: PLC0415 - optional dependency of the [viewer] extra
    except ImportError as exc:
        raise ViewerError(f"drawing meshes needs trimesh, which is not installed ({exc}); install it "
                          f"with pip install 'invkin[viewer]' (or start the viewer with --sticks)") from None
    return trimesh


def cache_dir() -> str:
    """The folder of cached, decimated meshes (created on first use)."""
    env = os.environ.get("INVKIN_MESH_CACHE_DIR")
    if env:
        return os.path.expanduser(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "invkin", "meshes")  # beside the kernels' invkin/numba (invkin.cache)


def _color_of(geom) -> tuple | None:
    """A trimesh mesh's colour as (r, g, b, a) in [0, 1], or None when it has none."""
    vis = getattr(geom, "visual", None)
    if vis is None:
        return None
    mat = getattr(vis, "material", None)
    if mat is not None:
        c = getattr(mat, "baseColorFactor", None)
        if c is None:
            c = getattr(mat, "main_color", None)
        if c is not None:
            c = np.asarray(c, dtype=float).ravel()
            return tuple((c / 255.0 if c.max() > 1.0 else c)[:4])
    if getattr(vis, "kind", None) in ("face", "vertex"):
        c = vis.face_colors if vis.kind == "face" else vis.vertex_colors
        return tuple(np.asarray(c, dtype=float).mean(axis=0)[:4] / 255.0)
    return None


def _decimate(V: np.ndarray, F: np.ndarray, keep: int):
    """(V, F) reduced to about ``keep`` faces by quadric decimation (unchanged if already small)."""
    if len(F) <= keep or keep < 16:
        return V, F
    try:
        import fast_simplification  # noqa: PLC0415 - optional dependency of the [viewer] extra
    except ImportError:
        return V, F  # drawn at full size: slower, still right
    Vd, Fd = fast_simplification.simplify(V.astype(np.float32), F.astype(np.int64),
                                          target_reduction=1.0 - keep / len(F))
    if len(Fd) == 0:
        return V, F
    return Vd, Fd


def _read_file(path: str, max_faces: int):
    """[(V (n,3) float32, F (m,3) uint32, rgba or None)] of a mesh file, decimated, grouped by colour."""
    trimesh = _trimesh()
    try:
        scene = trimesh.load(path, force="scene")  # process: merged vertices, which decimation needs
    except Exception as exc:  # trimesh raises many kinds: a missing loader, a corrupt file
        hint = " (DAE files need pycollada: pip install pycollada)" if path.lower().endswith(".dae") else ""
        raise MeshLoadError(f"cannot read mesh {path}: {type(exc).__name__}: {exc}{hint}") from None
    groups: dict = {}
    for g in scene.dump() if hasattr(scene, "dump") else [scene]:
        if not hasattr(g, "faces") or len(g.faces) == 0:
            continue
        c = _color_of(g)
        key = None if c is None else tuple(np.round(c, 3))
        groups.setdefault(key, []).append((np.asarray(g.vertices, dtype=np.float64), np.asarray(g.faces)))
    total = sum(len(F) for parts in groups.values() for _, F in parts)
    out = []
    for key, parts in groups.items():
        offs = np.cumsum([0] + [len(V) for V, _ in parts[:-1]])
        V = np.vstack([V for V, _ in parts])
        F = np.vstack([F + o for (_, F), o in zip(parts, offs)])
        # one vertex per position (files often split vertices by normal or UV): decimation needs
        # the connectivity, and the browser's smooth normals need shared vertices
        m = trimesh.Trimesh(V, F, process=False)
        m.merge_vertices(merge_tex=True, merge_norm=True)
        keep = max(16, int(round(max_faces * len(F) / max(total, 1))))
        V, F = _decimate(np.asarray(m.vertices), np.asarray(m.faces), keep)
        out.append((np.asarray(V, dtype=np.float32), np.asarray(F, dtype=np.uint32), key))
    if not out:
        raise MeshLoadError(f"mesh {path} holds no triangles")
    return out


def _load_cached(path: str, max_faces: int):
    """:func:`_read_file`, through the cache (a cache that cannot be written is skipped)."""
    try:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except OSError as exc:
        raise MeshLoadError(f"cannot read mesh {path}: {exc.strerror or exc}") from None
    folder = cache_dir()
    fn = os.path.join(folder, f"{digest[:32]}-{max_faces}-v{_CACHE_VERSION}.npz")
    if os.path.isfile(fn):
        try:
            with np.load(fn) as z:
                n = int(z["n"])
                return [(z[f"V{k}"], z[f"F{k}"], None if np.isnan(z[f"C{k}"]).any() else tuple(z[f"C{k}"]))
                        for k in range(n)]
        except Exception:  # a truncated or foreign file: read the mesh again
            pass
    parts = _read_file(path, max_faces)
    arrays = {"n": np.array(len(parts))}
    for k, (V, F, c) in enumerate(parts):
        arrays[f"V{k}"], arrays[f"F{k}"] = V, F
        arrays[f"C{k}"] = np.full(4, np.nan) if c is None else np.asarray(c, dtype=float)
    try:
        os.makedirs(folder, exist_ok=True)
        from .._io import atomic_path

        with atomic_path(fn, suffix=".npz") as tmp:  # the suffix keeps savez from appending one
            np.savez_compressed(tmp, **arrays)
    except (OSError, InvkinError):  # a cache that cannot be written is only slower next time
        pass
    return parts


def _primitive(kind: str, size: tuple):
    trimesh = _trimesh()
    c = trimesh.creation
    if kind == "box":
        m = c.box(extents=np.maximum(size, 1e-6))
    elif kind == "cylinder":
        m = c.cylinder(radius=max(size[0], 1e-6), height=max(size[1], 1e-6), sections=24)
    elif kind == "sphere":
        m = c.icosphere(subdivisions=2, radius=max(size[0], 1e-6))
    elif kind == "capsule":
        m = c.capsule(height=max(size[1], 0.0), radius=max(size[0], 1e-6), count=(16, 16))
    else:
        raise ViewerError(f"unknown geometry kind {kind!r}")
    return np.asarray(m.vertices, dtype=np.float32), np.asarray(m.faces, dtype=np.uint32)


def geometry_parts(g, max_faces: int = DEFAULT_MAX_FACES) -> list:
    """The :class:`MeshPart` s of one Geometry (raises MeshLoadError for a missing/bad file)."""
    urdf_rgba = g.rgba
    if g.kind != "mesh":
        V, F = _primitive(g.kind, g.size)
        c = urdf_rgba or DEFAULT_GREY + (1.0,)
        return [MeshPart(V, F, tuple(c[:3]), float(c[3]))]
    if getattr(g, "vertices", None) is not None:  # an MJCF mesh geom: MuJoCo's compiled arrays
        V, F = _decimate(np.asarray(g.vertices, dtype=np.float32), np.asarray(g.faces, dtype=np.int64), max_faces)
        c = urdf_rgba or DEFAULT_GREY + (1.0,)
        return [MeshPart(np.asarray(V, dtype=np.float32) * np.asarray(g.size, dtype=np.float32),
                         np.asarray(F, dtype=np.uint32), tuple(c[:3]), float(c[3]))]
    if g.path is None:
        raise MeshLoadError(f"mesh {g.filename!r} of link {g.link!r} was not found (package:// names are "
                            f"searched above the robot file and in ROS_PACKAGE_PATH)")
    out = []
    scale = np.asarray(g.size, dtype=np.float32)
    for V, F, c in _load_cached(g.path, max_faces):
        c = c or urdf_rgba or DEFAULT_GREY + (1.0,)
        out.append(MeshPart(V * scale, F, tuple(float(x) for x in c[:3]), float(c[3]) if len(c) > 3 else 1.0))
    return out
