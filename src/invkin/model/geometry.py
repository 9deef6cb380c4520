"""Link geometry as written in a robot file: the ``<visual>`` / ``<collision>`` shapes of a link.

A :class:`Geometry` is one shape attached to one link: a primitive (box, cylinder, sphere, capsule)
or a mesh file, placed by ``T_link_geom`` (the element's ``<origin>``), with an optional colour.
The URDF reader stores a link's visual shapes in ``robot.visuals`` and its collision shapes in
``robot.collisions`` (tuples of :class:`Geometry`, file order; empty tuples for robots built in
code or read from BVH, see :func:`visuals_of`). Nothing here reads a mesh: the viewer does
(``invkin.viewer.meshes``, the ``[viewer]`` extra).

Mesh file names
---------------
``filename`` keeps what the file wrote; ``path`` is where it was found, or None:

* ``package://pkg/rest`` is looked up from the robot file's own folder upwards (a folder named
  ``pkg``, or a folder holding ``pkg/``), then in each entry of ``ROS_PACKAGE_PATH`` (the entry
  itself when it is named ``pkg``, else ``entry/pkg``);
* ``file:///abs/path`` and absolute paths are taken as they are; relative paths are relative to
  the robot file's folder.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Geometry", "GEOMETRY_KINDS", "resolve_mesh_path", "visuals_of", "collisions_of", "from_mjcf_geoms"]

#: Shape kinds and the meaning of :attr:`Geometry.size` for each [m].
GEOMETRY_KINDS = {
    "box": "size (x, y, z): edge lengths",
    "cylinder": "size (radius, length), axis along z, centred",
    "sphere": "size (radius,)",
    "capsule": "size (radius, length): a cylinder of that length along z with hemispherical caps",
    "mesh": "size (sx, sy, sz): the <mesh scale>",
}


@dataclass(frozen=True, eq=False)
class Geometry:
    """One visual or collision shape of a link.

    Attributes:
        link: the link (frame) it is attached to.
        kind: one of :data:`GEOMETRY_KINDS`.
        size: the kind's parameters [m] (see :data:`GEOMETRY_KINDS`).
        T_link_geom: (4, 4) pose of the shape in the link frame (the element's ``<origin>``).
        filename: a mesh's file name as written (None for primitives).
        path: the mesh file found on disk (None when not found, or for primitives).
        rgba: colour (r, g, b, a) in [0, 1] when the file gives one (inline or a named material).
        material: the material's name, when given.
        name: the element's ``name`` attribute, when given.
        vertices, faces: a mesh given by its arrays instead of a file (an MJCF mesh geom as MuJoCo
            compiled it: vertices (n, 3) [m] in the shape frame, scale applied; triangles (f, 3)).
    """

    link: str
    kind: str
    size: tuple
    T_link_geom: np.ndarray = field(repr=False)
    filename: str | None = None
    path: str | None = None
    rgba: tuple | None = None
    material: str | None = None
    name: str | None = None
    vertices: np.ndarray | None = field(default=None, repr=False)  # an MJCF mesh: (n, 3) [m], shape frame
    faces: np.ndarray | None = field(default=None, repr=False)     # and its (f, 3) triangles

    def __post_init__(self):
        T = np.array(self.T_link_geom, dtype=np.float64).reshape(4, 4)
        T.setflags(write=False)
        object.__setattr__(self, "T_link_geom", T)
        object.__setattr__(self, "size", tuple(float(x) for x in self.size))


def visuals_of(robot) -> tuple:
    """``robot.visuals`` (URDF), else the visual geoms of an MJCF model (:func:`from_mjcf_geoms`),
    else () (built in code, BVH)."""
    v = tuple(getattr(robot, "visuals", ()) or ())
    return v if v else from_mjcf_geoms(robot, visual=True)


def collisions_of(robot) -> tuple:
    """``robot.collisions`` (URDF), else the colliding geoms of an MJCF model, else ()."""
    c = tuple(getattr(robot, "collisions", ()) or ())
    return c if c else from_mjcf_geoms(robot, visual=False)


def from_mjcf_geoms(robot, visual: bool) -> tuple:
    """An MJCF model's primitive geoms (``robot.geoms``, MuJoCo sizes: half-lengths) as Geometry.

    ``visual``: the geoms MuJoCo's viewer shows by default, those of groups 0-2 (colliding ones
    too; MuJoCo Menagerie keeps its collision geoms in group 3), every geom if none is; else the
    colliding ones (``contype`` or ``conaffinity`` not 0). A mesh geom comes with its compiled vertices and
    triangles (:attr:`Geometry.vertices`); plane, height-field and SDF geoms are skipped; an
    ellipsoid is drawn as its bounding box. MJCF colours are not kept: the viewer's grey.
    """
    geoms = getattr(robot, "geoms", None)
    if not callable(geoms) and not isinstance(geoms, dict):
        return ()
    by_link = geoms() if callable(geoms) else geoms
    every = [(link, g) for link, gs in by_link.items() for g in gs]
    if visual:  # what MuJoCo's viewer shows by default: geom groups 0-2 (Menagerie: visual meshes in
        chosen = [(link, g) for link, g in every if getattr(g, "group", 0) <= 2] or every  # 2, collision in 3)
    else:
        chosen = [(link, g) for link, g in every if g.contype != 0 or g.conaffinity != 0]
    out = []
    for link, g in chosen:
        s = np.asarray(g.size, dtype=float)
        if g.type == "sphere":
            kind, size = "sphere", (s[0],)
        elif g.type in ("capsule", "cylinder"):
            kind, size = g.type, (s[0], 2.0 * s[1])
        elif g.type in ("box", "ellipsoid"):
            kind, size = "box", tuple(2.0 * s[:3])
        elif g.type == "mesh" and getattr(g, "vertices", None) is not None and len(g.vertices):
            out.append(Geometry(link, "mesh", (1.0, 1.0, 1.0), g.T_link_geom, name=g.name or None,
                                vertices=g.vertices, faces=g.faces))
            continue
        else:
            continue
        out.append(Geometry(link, kind, size, g.T_link_geom, name=g.name or None))
    return tuple(out)


def _package_roots(pkg: str, start: str | None):
    """Folders that may hold package ``pkg``: the robot file's ancestors, then ROS_PACKAGE_PATH."""
    if start:
        d = os.path.abspath(start)
        while True:
            if os.path.basename(d) == pkg:
                yield d
            yield os.path.join(d, pkg)
            up = os.path.dirname(d)
            if up == d:
                break
            d = up
    for entry in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep):
        if entry:
            if os.path.basename(os.path.normpath(entry)) == pkg:
                yield entry
            yield os.path.join(entry, pkg)


def resolve_mesh_path(filename: str, base_dir: str | None) -> str | None:
    """Where the mesh ``filename`` (as written in a robot file in ``base_dir``) is, or None.

    See the module docstring for the search order of ``package://`` names.
    """
    name = filename.strip()
    if name.startswith("package://"):
        rest = name[len("package://"):].lstrip("/")  # some files write package:///pkg/...
        pkg, _, inner = rest.partition("/")
        if not pkg or not inner:
            return None
        for root in _package_roots(pkg, base_dir):
            p = os.path.join(root, *inner.split("/"))
            if os.path.isfile(p):
                return os.path.abspath(p)
        return None
    if name.startswith("file://"):
        name = name[len("file://"):]
    if not os.path.isabs(name):
        name = os.path.join(base_dir or os.getcwd(), name)
    return os.path.abspath(name) if os.path.isfile(name) else None
