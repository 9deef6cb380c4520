r"""A robot's collision shapes as capsules per link: :func:`collision_model` (``robot.collision``).

Every link shape becomes one or more *capsules* (segment ``a``–``b`` in the link frame and radius
``r``; a sphere is a capsule with ``a = b``) that **enclose** it, so a distance the kernels report
is never larger than the distance between the real shapes:

* URDF / MJCF ``sphere`` and ``capsule``: exact;
* ``cylinder`` (radius ρ, length ℓ): the capsule of radius ρ on the axis segment of length ℓ
  (encloses the cylinder; the caps add at most ρ at each end);
* ``box`` (and an MJCF ``ellipsoid``, through its bounding box): the capsule fitted to its 8
  corners (below);
* ``mesh`` (STL, OBJ, DAE, ... read by ``trimesh``, the ``[collision]`` extra; ``package://`` and
  relative names resolved by the URDF reader): 1–3 capsules fitted by :func:`fit_capsules`,
  computed once per file and cached in ``<user cache>/invkin/collision/`` (:func:`cache_folder`) keyed by the SHA-256 of the
  file's bytes, the scale and the fit's version. A mesh file that is missing or unreadable is
  skipped with a :class:`~invkin.collision.errors.CollisionWarning` naming it (the link keeps its
  other shapes). An MJCF mesh geom: its vertices as MuJoCo compiled them (scale applied, in the
  geom frame), fitted and cached the same way (:func:`vertex_capsules`).

Fitting (:func:`fit_capsules`). For a point set ``P`` and a unit axis ``u`` through a centre ``c``
(the centre of the points' projection on the plane ⟂ ``u``: bounding-box centre or a few
Bădoiu–Clarkson steps towards the minimal enclosing circle, whichever is smaller), the capsule
radius is ``r = maxᵢ ρᵢ`` (``ρᵢ`` the distance of ``pᵢ`` from the axis) and the segment
``[t₀, t₁]`` along ``u`` is the shortest that keeps every point inside:
``t₁ = maxᵢ (tᵢ − √(r² − ρᵢ²))``, ``t₀ = minᵢ (tᵢ + √(r² − ρᵢ²))`` (a point beyond an end
must lie in the end's hemisphere). When ``t₀ > t₁`` a sphere is used. Axes tried: the three
principal axes and the three coordinate axes; the smallest volume wins. A capsule encloses the
convex hull of what it encloses, so enclosing the vertices encloses the mesh. A mesh may be cut
into ``k ∈ {1, 2, 3}`` slabs along its principal axis; each slab's capsule encloses the mesh's
vertices inside the slab *and the points where mesh edges cross the slab's two planes*, which
are the vertices of the mesh clipped to the slab, so the union still encloses the whole mesh
(and, for a closed mesh, the solid: each clipped piece lies in the convex hull of its boundary).
``k`` is chosen by the smallest total volume with a 10 % charge per extra capsule.

Tables for the kernels (:class:`CollisionModel`): ``links`` (L,) node indices of the links that
have shapes, ``link_caps`` (L + 1,) offsets into ``caps`` (m, 7) = ``a, b, r`` in the link frame,
``bounds`` (L, 4) a sphere (centre in the link frame, radius) holding every capsule of the link
(the broad phase).
"""
from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass

import numpy as np

from .._io import atomic_path
from ..errors import InvkinError, warn_caller
from .errors import CollisionError, CollisionWarning

__all__ = ["CollisionModel", "collision_model", "fit_capsules", "mesh_capsules", "vertex_capsules"]

_FIT_VERSION = 1           # bump when the fit changes (cache keys)
_PAD = 1e-9                # [m] added to every fitted radius: enclosure survives rounding
MAX_SLABS = 3


@dataclass(frozen=True, eq=False)
class CollisionModel:
    """A robot's collision capsules (see the module docstring); arrays are read-only.

    Attributes:
        link_names: (L,) names of the links that have shapes.
        links: (L,) int64 node index of each.
        link_caps: (L + 1,) int64 offsets: link ``ℓ`` owns ``caps[link_caps[ℓ]:link_caps[ℓ + 1]]``.
        caps: (m, 7) float64 ``a (3), b (3), r`` [m] in the link frame.
        exact: (m,) bool, True where the capsule is the shape itself (sphere, capsule).
        sources: (m,) where each capsule comes from (``"panda_link3: mesh link3.stl"``).
        bounds: (L, 4) float64 centre (link frame) and radius [m] of a sphere holding the link's capsules.
    """

    link_names: tuple
    links: np.ndarray
    link_caps: np.ndarray
    caps: np.ndarray
    exact: np.ndarray
    sources: tuple
    bounds: np.ndarray

    def shapes(self, link: str) -> np.ndarray:
        """The (k, 7) capsules of ``link`` (empty when it has none)."""
        if link not in self.link_names:
            return np.zeros((0, 7))
        ell = self.link_names.index(link)
        return self.caps[self.link_caps[ell]:self.link_caps[ell + 1]]

    def __len__(self) -> int:
        return len(self.link_names)

    def __repr__(self) -> str:
        return f"CollisionModel({len(self.link_names)} links, {len(self.caps)} capsules)"


# ------------------------------------------------------------------ fitting

def _perp_basis(u):
    v = np.cross(u, (1.0, 0.0, 0.0) if abs(u[0]) < 0.9 else (0.0, 1.0, 0.0))
    v /= np.linalg.norm(v)
    return v, np.cross(u, v)


def _circle_centres(y, z):
    """Centres (a, 2) of small circles holding the 2-D points (y[i], z[i]) ((a, n) each, one set
    per row): for each, the better of the bounding-box centre and 40 Bădoiu–Clarkson steps (the
    rows in one pass: a mesh's six candidate axes cost one loop instead of six)."""
    rows = np.arange(y.shape[0])
    c_box = np.stack([(y.max(axis=1) + y.min(axis=1)) / 2, (z.max(axis=1) + z.min(axis=1)) / 2], axis=1)
    c = c_box.copy()
    for k in range(1, 41):
        far = np.argmax((y - c[:, :1]) ** 2 + (z - c[:, 1:]) ** 2, axis=1)
        c += (np.stack([y[rows, far], z[rows, far]], axis=1) - c) / (k + 1)
    r_box = np.max((y - c_box[:, :1]) ** 2 + (z - c_box[:, 1:]) ** 2, axis=1)
    r_bc = np.max((y - c[:, :1]) ** 2 + (z - c[:, 1:]) ** 2, axis=1)
    return np.where((r_bc < r_box)[:, None], c, c_box)


def _fit_one(P):
    """(capsule (7,), volume) of the smallest capsule found that holds every point of ``P`` (n, 3)."""
    c0 = P.mean(axis=0)
    X = P - c0
    _, U = np.linalg.eigh(X.T @ X)
    best, best_vol = None, np.inf
    axes = []
    for u in list(U.T) + list(np.eye(3)):
        u = u / np.linalg.norm(u)
        v, w = _perp_basis(u)
        axes.append((u, v, w, X @ u, X @ v, X @ w))
    centres = _circle_centres(np.array([a[4] for a in axes]), np.array([a[5] for a in axes]))
    for (u, v, w, t, y, z), (cy, cz) in zip(axes, centres):
        rho = np.hypot(y - cy, z - cz)
        r = float(rho.max())
        base = c0 + cy * v + cz * w
        s = np.sqrt(np.maximum(r * r - rho * rho, 0.0))
        t1, t0 = float(np.max(t - s)), float(np.min(t + s))
        if t0 <= t1:
            a, b = base + t0 * u, base + t1 * u
        else:
            a = b = base + 0.5 * (t0 + t1) * u
            r = float(np.max(np.linalg.norm(P - a, axis=1)))
        r += _PAD + 1e-9 * r
        vol = math.pi * r * r * float(np.linalg.norm(b - a)) + 4.0 / 3.0 * math.pi * r ** 3
        if vol < best_vol:
            best, best_vol = np.r_[a, b, r], vol
    return best, best_vol


def _crossings(V, E, t, tau):
    """Points where the edges E (k, 2) of vertices V cross the plane t = tau."""
    s = t[E] - tau
    m = s[:, 0] * s[:, 1] < 0
    if not np.any(m):
        return np.zeros((0, 3))
    e, s = E[m], s[m]
    lam = (s[:, 0] / (s[:, 0] - s[:, 1]))[:, None]
    return V[e[:, 0]] + lam * (V[e[:, 1]] - V[e[:, 0]])


def fit_capsules(vertices, edges=None, max_capsules: int = MAX_SLABS) -> np.ndarray:
    """Capsules (k, 7) = ``a, b, r`` [m] whose union encloses the points ``vertices`` (n, 3) and, given
    the mesh ``edges`` (e, 2), the whole mesh (see the module docstring); ``k ≤ max_capsules``."""
    from .._checks import MAX_LENGTH

    V = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
    if len(V) == 0 or not np.all(np.isfinite(V)):
        raise CollisionError(f"fit_capsules: expected finite vertices (n > 0, 3), got shape {V.shape}")
    if float(np.max(np.abs(V))) > MAX_LENGTH:  # squared distances would overflow to inf
        raise CollisionError(f"fit_capsules: a vertex lies {float(np.max(np.abs(V))):g} m from the origin; "
                             f"expected coordinates within ±{MAX_LENGTH:g} m")
    one, vol1 = _fit_one(V)
    best, best_score = one[None], vol1
    if edges is None or max_capsules < 2 or len(V) < 8:
        return best
    E = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    X = V - V.mean(axis=0)
    u = np.linalg.eigh(X.T @ X)[1][:, -1]
    t = X @ u
    lo, hi = float(t.min()), float(t.max())
    for k in range(2, max_capsules + 1):
        cuts = lo + (hi - lo) * np.arange(1, k) / k
        bounds = np.r_[-np.inf, cuts, np.inf]
        caps, vol = [], 0.0
        for j in range(k):
            inside = V[(t >= bounds[j]) & (t <= bounds[j + 1])]
            parts = [inside] + [_crossings(V, E, t, tau) for tau in (bounds[j], bounds[j + 1])
                                if np.isfinite(tau)]
            P = np.vstack(parts)
            if len(P) == 0:
                continue
            c, v = _fit_one(P)
            caps.append(c)
            vol += v
        if vol * (1.0 + 0.1 * (len(caps) - 1)) < best_score:
            best, best_score = np.array(caps), vol * (1.0 + 0.1 * (len(caps) - 1))
    return best


# ------------------------------------------------------------------ meshes

def _trimesh():
    try:
        import trimesh  # noqa: PLC0415 - optional dependency of the [collision] extra
    except ImportError as exc:
        raise CollisionError(f"collision meshes need trimesh, which is not installed ({exc}); install it "
                             f"with pip install \"invkin[collision]\"") from None
    return trimesh


def cache_folder() -> str:
    """Where fitted mesh capsules are cached: ``collision/`` in the user cache folder of the viewer's
    meshes (``$INVKIN_CACHE_DIR``, else ``$XDG_CACHE_HOME/invkin``, else ``~/.cache/invkin``). The rule
    is spelled here again because invkin.cache and invkin.viewer import the model, which imports this
    module (robot.collision): importing them back would make a cycle."""
    root = os.environ.get("INVKIN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "invkin")
    return os.path.join(root, "collision")


def mesh_capsules(path: str, scale=(1.0, 1.0, 1.0), max_capsules: int = MAX_SLABS) -> np.ndarray:
    """Capsules (k, 7) in the mesh frame enclosing the mesh file ``path`` scaled by ``scale``, cached
    (see the module docstring). Raises CollisionError for a file that cannot be read."""
    try:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except OSError as exc:
        raise CollisionError(f"cannot read mesh {path}: {exc.strerror or exc}") from None
    scale = np.asarray(scale, dtype=np.float64).reshape(3)
    fn, caps = _cached_capsules(f"{digest}{scale.tolist()}{max_capsules}")
    if caps is not None:
        return caps
    V, E = _mesh_vertices_edges(path)
    caps = fit_capsules(V * scale, E, max_capsules)
    save_cached(fn, caps)
    return caps


def _cached_capsules(what: str):
    """(the cache file of the capsules fitted to ``what`` (a digest of the shape and the fit's
    settings), those capsules or None when the file is missing, truncated or foreign)."""
    key = hashlib.sha256(f"{what}v{_FIT_VERSION}".encode()).hexdigest()[:32]
    fn = os.path.join(cache_folder(), f"{key}.npy")
    if os.path.isfile(fn):
        try:
            caps = np.load(fn)
            if caps.ndim == 2 and caps.shape[1] == 7 and np.all(np.isfinite(caps)):
                return fn, caps
        except (OSError, ValueError):
            pass  # a truncated or foreign file: fit again
    return fn, None


def vertex_capsules(V, F=None, max_capsules: int = MAX_SLABS) -> np.ndarray:
    """Capsules (k, 7) enclosing a mesh given by its vertices ``V`` (n, 3) [m] and triangles ``F``
    (f, 3) (an MJCF mesh geom, compiled by MuJoCo), cached like :func:`mesh_capsules` under the
    SHA-256 of the arrays."""
    V = np.ascontiguousarray(V, dtype=np.float64).reshape(-1, 3)
    F = np.zeros((0, 3), dtype=np.int64) if F is None else np.ascontiguousarray(F, dtype=np.int64).reshape(-1, 3)
    h = hashlib.sha256(V.tobytes())
    h.update(F.tobytes())
    fn, caps = _cached_capsules(f"{h.hexdigest()}{max_capsules}")
    if caps is not None:
        return caps
    E = (np.unique(np.sort(np.concatenate([F[:, [0, 1]], F[:, [1, 2]], F[:, [2, 0]]]), axis=1), axis=0)
         if len(F) else None)  # without triangles: one capsule around the points (no slab can be clipped)
    caps = fit_capsules(V, E, max_capsules)
    save_cached(fn, caps)
    return caps


def save_cached(fn: str, array: np.ndarray) -> None:
    """Store ``array`` as the .npy cache file ``fn`` (atomically, through invkin._io); a cache that
    cannot be written is skipped (the work is only done again next time)."""
    try:
        os.makedirs(os.path.dirname(fn), exist_ok=True)
        with atomic_path(fn, suffix=".npy") as tmp:  # the suffix keeps np.save from appending one
            np.save(tmp, array)
    except (OSError, InvkinError):
        pass


def _mesh_vertices_edges(path):
    trimesh = _trimesh()
    try:
        mesh = trimesh.load(path, force="mesh")
    except Exception as exc:  # trimesh raises many kinds: a missing loader, a corrupt file
        raise CollisionError(f"cannot read mesh {path}: {type(exc).__name__}: {exc}") from None
    V = np.asarray(getattr(mesh, "vertices", np.zeros((0, 3))), dtype=np.float64)
    if len(V) == 0:
        raise CollisionError(f"mesh {path} holds no vertices")
    return V, np.asarray(mesh.edges_unique, dtype=np.int64)


# ------------------------------------------------------------------ shapes → capsules

def _box_corners(half):
    return np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * half


def _apply(T, caps):
    """Capsules (k, 7) moved by the transform T (4, 4)."""
    out = caps.copy()
    out[:, 0:3] = caps[:, 0:3] @ T[:3, :3].T + T[:3, 3]
    out[:, 3:6] = caps[:, 3:6] @ T[:3, :3].T + T[:3, 3]
    return out


def _axis_capsule(radius, half_length):
    return np.array([[0.0, 0.0, -half_length, 0.0, 0.0, half_length, radius]])


def _check_size(link, kind, size):
    if len(size) == 0 or not np.all(np.isfinite(size)) or np.any(np.asarray(size) <= 0):
        warn_caller(f"link {link!r}: {kind} collision shape with size {list(size)} (expected sizes > 0 [m]) "
                      f"is left out", CollisionWarning)
        return False
    return True


def _geometry_capsules(g):
    """(caps (k, 7) in the link frame, exact) of a URDF Geometry, or None (warned) when left out."""
    kind, size = g.kind, tuple(g.size)
    if kind == "mesh":
        if g.path is None:
            warn_caller(f"link {g.link!r}: collision mesh {g.filename!r} was not found; the link keeps its "
                          f"other shapes", CollisionWarning)
            return None
        _trimesh()  # a missing extra is an error, not a warning per mesh
        try:
            caps = mesh_capsules(g.path, size if len(size) == 3 else (1.0, 1.0, 1.0))
        except CollisionError as exc:
            warn_caller(f"link {g.link!r}: {exc}; the link keeps its other shapes", CollisionWarning)
            return None
        return _apply(g.T_link_geom, caps), False
    if not _check_size(g.link, kind, size):
        return None
    if kind == "sphere":
        caps, exact = np.array([[0.0] * 6 + [size[0]]]), True
    elif kind == "capsule":
        caps, exact = _axis_capsule(size[0], size[1] / 2), True
    elif kind == "cylinder":
        caps, exact = _axis_capsule(size[0], size[1] / 2), False
    elif kind == "box":
        caps, exact = fit_capsules(_box_corners(np.asarray(size) / 2)), False
    else:
        warn_caller(f"link {g.link!r}: collision shape kind {kind!r} is not supported; left out",
                      CollisionWarning)
        return None
    return _apply(g.T_link_geom, caps), exact


def _geom_capsules(link, g):
    """The same for an MJCF Geom (MuJoCo sizes: radius, half-length; box half extents)."""
    s = np.asarray(g.size, dtype=np.float64)
    t = g.type
    if t == "sphere" and _check_size(link, t, s[:1]):
        caps, exact = np.array([[0.0] * 6 + [s[0]]]), True
    elif t == "capsule" and _check_size(link, t, s[:2]):
        caps, exact = _axis_capsule(s[0], s[1]), True
    elif t == "cylinder" and _check_size(link, t, s[:2]):
        caps, exact = _axis_capsule(s[0], s[1]), False
    elif t in ("box", "ellipsoid") and _check_size(link, t, s[:3]):
        caps, exact = fit_capsules(_box_corners(s[:3])), False
    elif t == "mesh" and getattr(g, "vertices", None) is not None and len(g.vertices):
        caps, exact = vertex_capsules(g.vertices, g.faces), False
    elif t in ("sphere", "capsule", "cylinder", "box", "ellipsoid"):
        return None  # warned by _check_size
    else:
        warn_caller(f"link {link!r}: MJCF geom {g.name!r} of type {t!r} is not used for collision "
                      f"(supported: sphere, capsule, cylinder, box, ellipsoid, mesh)", CollisionWarning)
        return None
    return _apply(np.asarray(g.T_link_geom), caps), exact


def _build(robot) -> CollisionModel:
    per_link: dict = {}
    for g in tuple(getattr(robot, "collisions", ()) or ()):
        got = _geometry_capsules(g)
        if got is not None:
            name = os.path.basename(g.filename) if g.filename else g.kind
            per_link.setdefault(g.link, []).append((got[0], got[1], f"{g.link}: {g.kind} {name}"))
    for link, geoms in getattr(robot, "geoms", {}).items():
        for g in geoms:
            if g.contype == 0 and g.conaffinity == 0:
                continue  # a visual-only geom
            got = _geom_capsules(link, g)
            if got is not None:
                per_link.setdefault(link, []).append((got[0], got[1], f"{link}: geom {g.name} ({g.type})"))
    order = sorted(per_link, key=robot.frame_index)
    caps, exact, sources, offsets, bounds = [], [], [], [0], []
    for link in order:
        cl = []
        for c, ex, src in per_link[link]:
            cl.append(c)
            exact.extend([ex] * len(c))
            sources.extend([src] * len(c))
        cl = np.vstack(cl)
        caps.append(cl)
        offsets.append(offsets[-1] + len(cl))
        ends = np.vstack([cl[:, 0:3], cl[:, 3:6]])
        centre = (ends.max(axis=0) + ends.min(axis=0)) / 2
        radius = float(np.max(np.linalg.norm(ends - centre, axis=1) + np.r_[cl[:, 6], cl[:, 6]]))
        bounds.append(np.r_[centre, radius])

    def ro(a, dtype):
        a = np.array(a, dtype=dtype)
        a.setflags(write=False)
        return a

    return CollisionModel(
        link_names=tuple(order), links=ro([robot.frame_index(n) for n in order], np.int64),
        link_caps=ro(offsets, np.int64), caps=ro(np.vstack(caps) if caps else np.zeros((0, 7)), np.float64),
        exact=ro(exact, bool), sources=tuple(sources), bounds=ro(np.array(bounds).reshape(-1, 4), np.float64))


def collision_model(robot) -> CollisionModel:
    """The robot's :class:`CollisionModel` (built once per Robot, see the module docstring)."""
    return robot.memo("collision_model", lambda: _build(robot))
