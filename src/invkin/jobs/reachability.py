"""Reachability maps: a voxel grid of a frame's workspace, the fraction of sampled orientations
that solve at each voxel centre, and the mean manipulability of the solutions.

The grid is aligned on the frame's *anchor* (the origin of the first moving joint on its path
from the root: it never moves), with voxel centres at ``anchor + resolution·k``. Its extent is
the bounding box of sampled forward kinematics (``n_samples`` uniform configurations, padded by
half a voxel), cut to the reach sphere's box; voxels whose centre lies beyond the reach radius
are provably unreachable and are not solved (fraction 0, ``evaluated`` False).

At every other voxel the same ``K`` orientations (uniform random rotations drawn from ``seed``)
are solved as pose targets (``K = 0``: one position-only target per voxel) with
:func:`invkin.solve_many`, chunked and run locally or on Dask exactly as
:func:`invkin.jobs.solve_dataset` does (target ``t = voxel·K + k`` uses seed ``seed + t``).
Manipulability is Yoshikawa's ``sqrt(det(J Jᵀ))`` of the geometric Jacobian at each converged
solution (6 rows for poses, 3 linear rows for positions; ``sqrt(det(Jᵀ J))`` when the robot has
fewer joints than rows), averaged per voxel.
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import os
import time
from dataclasses import dataclass, field

import numpy as np

from .chunks import client_for, robot_and_frame, run_chunks
from .dataset import _check_settings, _progress
from .._io import read_npz
from .errors import JobError, _arrow, _require
from .parts import atomic_write
from .targets import _quat_to_matrices

__all__ = ["ReachabilityMap", "reachability_map"]

_MAX_TARGETS = 50_000_000


@dataclass
class ReachabilityMap:
    """A voxel grid over the workspace of ``frame``. Arrays are indexed ``[ix, iy, iz]``.

    x, y, z: voxel centres [m] along each axis. fraction: share of the orientations that solved
    (0 where not evaluated). manipulability: mean sqrt(det(J Jᵀ)) over the solved ones (NaN where
    none solved). n_solved: solved orientations. evaluated: the voxel was solved at all (False
    beyond the reach radius). orientations (K, 3, 3). anchor: the grid's fixed point [m].
    """

    robot: str
    frame: str
    resolution: float
    n_orientations: int
    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    fraction: np.ndarray
    manipulability: np.ndarray
    n_solved: np.ndarray
    evaluated: np.ndarray
    orientations: np.ndarray
    anchor: np.ndarray
    reach_radius: float
    n_solves: int = 0
    elapsed: float = 0.0
    settings: dict = field(default_factory=dict)

    @property
    def shape(self) -> tuple:
        return tuple(self.fraction.shape)

    def summary(self) -> dict:
        """Summary numbers: voxel counts, reachable volume [m³], fractions, manipulability."""
        v = self.resolution ** 3
        reach = self.fraction > 0
        n_reach = int(np.count_nonzero(reach))
        man = self.manipulability[reach & np.isfinite(self.manipulability)]
        k = max(self.n_orientations, 1)
        return {
            "robot": self.robot, "frame": self.frame, "resolution_m": self.resolution,
            "orientations": self.n_orientations, "grid_shape": list(self.shape),
            "voxels": int(self.fraction.size), "voxels_evaluated": int(np.count_nonzero(self.evaluated)),
            "voxels_reachable": n_reach, "voxels_fully_reachable": int(np.count_nonzero(self.fraction >= 1.0)),
            "reachable_volume_m3": n_reach * v,
            "weighted_volume_m3": float(self.fraction.sum()) * v,
            "mean_fraction_reachable": float(self.fraction[reach].mean()) if n_reach else 0.0,
            "solves": int(self.n_solves),
            "solve_success_rate": float(self.n_solved.sum()) / max(int(np.count_nonzero(self.evaluated)) * k, 1),
            "manipulability_mean": float(man.mean()) if man.size else 0.0,
            "manipulability_max": float(man.max()) if man.size else 0.0,
            "elapsed_s": self.elapsed,
            "poses_per_second": self.n_solves / self.elapsed if self.elapsed > 0 else 0.0,
        }

    def format_summary(self) -> str:
        s = self.summary()
        per = (f"{s['orientations']} orientation(s) per voxel" if s["orientations"]
               else "position only (one target per voxel)")
        return "\n".join([
            f"reachability of {s['robot']!r} frame {s['frame']!r}: grid {'x'.join(map(str, s['grid_shape']))} "
            f"at {s['resolution_m']:g} m, {per}",
            f"  voxels: {s['voxels']} in the grid, {s['voxels_evaluated']} within reach, "
            f"{s['voxels_reachable']} reachable, {s['voxels_fully_reachable']} reachable in every orientation",
            f"  reachable volume: {s['reachable_volume_m3']:.4f} m^3 "
            f"(weighted by fraction: {s['weighted_volume_m3']:.4f} m^3)",
            f"  mean fraction over reachable voxels: {s['mean_fraction_reachable']:.3f}; "
            f"solve success rate: {s['solve_success_rate']:.3f}",
            f"  manipulability: mean {s['manipulability_mean']:.4g}, max {s['manipulability_max']:.4g}",
            f"  {s['solves']} solves in {s['elapsed_s']:.2f} s ({s['poses_per_second']:,.0f} poses/s)",
        ])

    # -------------------------------------------------------------- files

    def save_npz(self, path) -> str:
        """Write the grid (axes, arrays, settings, summary) to a compressed .npz (atomically)."""
        path = os.fspath(path)
        buf = io.BytesIO()
        np.savez_compressed(
            buf, x=self.x, y=self.y, z=self.z, fraction=self.fraction, manipulability=self.manipulability,
            n_solved=self.n_solved, evaluated=self.evaluated, orientations=self.orientations, anchor=self.anchor,
            resolution=np.float64(self.resolution), n_orientations=np.int64(self.n_orientations),
            reach_radius=np.float64(self.reach_radius), n_solves=np.int64(self.n_solves),
            elapsed=np.float64(self.elapsed), robot=np.str_(self.robot), frame=np.str_(self.frame),
            settings_json=np.str_(json.dumps(self.settings)), summary_json=np.str_(json.dumps(self.summary())))
        atomic_write(path, buf.getvalue())
        return path

    @classmethod
    def load(cls, path) -> "ReachabilityMap":
        """Read a map written by :meth:`save_npz`."""
        path = os.fspath(path)
        d = read_npz(path, "reachability map", JobError)
        try:
            return cls(robot=str(d["robot"]), frame=str(d["frame"]), resolution=float(d["resolution"]),
                       n_orientations=int(d["n_orientations"]), x=d["x"], y=d["y"], z=d["z"],
                       fraction=d["fraction"], manipulability=d["manipulability"], n_solved=d["n_solved"],
                       evaluated=d["evaluated"], orientations=d["orientations"], anchor=d["anchor"],
                       reach_radius=float(d["reach_radius"]), n_solves=int(d["n_solves"]),
                       elapsed=float(d["elapsed"]), settings=json.loads(str(d["settings_json"])))
        except KeyError as e:
            raise JobError(f"{path}: not a reachability map (missing {e})") from None

    def save_parquet(self, path) -> str:
        """One row per voxel: ix, iy, iz, x, y, z, evaluated, fraction, n_solved, manipulability."""
        pa, pq = _arrow()
        path = os.fspath(path)
        ix, iy, iz = np.meshgrid(np.arange(len(self.x)), np.arange(len(self.y)), np.arange(len(self.z)),
                                 indexing="ij")
        table = pa.table({
            "ix": ix.ravel().astype(np.int32), "iy": iy.ravel().astype(np.int32), "iz": iz.ravel().astype(np.int32),
            "x": self.x[ix.ravel()], "y": self.y[iy.ravel()], "z": self.z[iz.ravel()],
            "evaluated": self.evaluated.ravel(), "fraction": self.fraction.ravel(),
            "n_solved": self.n_solved.ravel().astype(np.int32), "manipulability": self.manipulability.ravel(),
        }, metadata={b"invkin.reachability": json.dumps({"robot": self.robot, "frame": self.frame,
                                                         "resolution": self.resolution,
                                                         "n_orientations": self.n_orientations}).encode()})
        sink = io.BytesIO()
        pq.write_table(table, sink)
        atomic_write(path, sink.getvalue())
        return path

    def slice_indices(self, through=None) -> tuple:
        if through is None:
            p = self.anchor
        else:
            from .._checks import MAX_LENGTH, real_array

            p = real_array("through", through, JobError, bound=MAX_LENGTH, unit=" [m]")
            if p.shape != (3,):
                raise JobError(f"through: expected a point (3,) [m], got {through!r:.100}")
        return tuple(int(np.argmin(np.abs(ax - v))) for ax, v in zip((self.x, self.y, self.z), p))

    def plot_slices(self, path, through=None) -> str:
        """PNG of the XY, XZ and YZ slices through ``through`` (default: the anchor, i.e. the
        base joint): fraction on top, mean manipulability below. Uses the Agg canvas only."""
        _require("matplotlib", "plot")
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        path = os.fspath(path)
        ix, iy, iz = self.slice_indices(through)
        h = self.resolution / 2
        ext = {"x": (self.x[0] - h, self.x[-1] + h), "y": (self.y[0] - h, self.y[-1] + h),
               "z": (self.z[0] - h, self.z[-1] + h)}
        views = [("XY", "x", "y", f"z = {self.z[iz]:.3f} m", lambda a: a[:, :, iz]),
                 ("XZ", "x", "z", f"y = {self.y[iy]:.3f} m", lambda a: a[:, iy, :]),
                 ("YZ", "y", "z", f"x = {self.x[ix]:.3f} m", lambda a: a[ix, :, :])]
        fig = Figure(figsize=(15, 9.5), dpi=100)
        FigureCanvasAgg(fig)
        man = np.ma.masked_invalid(self.manipulability)
        mmax = float(man.max()) if man.count() else 1.0
        for col, (name, u, v, where, cut) in enumerate(views):
            for row, (arr, label, vmax, cmap) in enumerate(((self.fraction, "fraction solved", 1.0, "viridis"),
                                                            (man, "mean manipulability", mmax, "magma"))):
                ax = fig.add_subplot(2, 3, 1 + col + 3 * row)
                im = ax.imshow(np.ma.asarray(cut(arr)).T, origin="lower", extent=(*ext[u], *ext[v]), vmin=0.0,
                               vmax=vmax or 1.0, cmap=cmap, interpolation="nearest", aspect="equal")
                ax.set_title(f"{name} slice, {where}: {label}", fontsize=9)
                ax.set_xlabel(f"{u} [m]")
                ax.set_ylabel(f"{v} [m]")
                fig.colorbar(im, ax=ax, shrink=0.8)
        per = f"{self.n_orientations} orientation(s) per voxel" if self.n_orientations else "position only"
        fig.suptitle(f"{self.robot} / {self.frame}: reachability at {self.resolution:g} m, {per}", fontsize=11)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        atomic_write(path, buf.getvalue())
        return path


def _random_rotations(k: int, seed: int) -> np.ndarray:
    if k == 0:
        return np.zeros((0, 3, 3))
    rng = np.random.default_rng([seed, 0x5EAC4])
    q = rng.normal(size=(k, 4))
    return _quat_to_matrices(q[:, 0], q[:, 1], q[:, 2], q[:, 3], what="orientations")


def _axis_centres(lo: float, hi: float, anchor: float, res: float) -> np.ndarray:
    k0 = math.floor((lo - anchor) / res + 0.5 + 1e-9)
    k1 = math.floor((hi - anchor) / res + 0.5 - 1e-9)
    k1 = max(k0, k1)
    return anchor + res * np.arange(k0, k1 + 1, dtype=np.float64)


def reachability_map(robot, frame: str | None = None, resolution: float = 0.05, n_orientations: int = 8, *,
                     bounds=None, client=None, scheduler: str | None = None, seed: int = 0, max_restarts: int = 20,
                     position_tolerance: float = 1e-6, rotation_tolerance: float = 1e-6, chunk_size: int = 2000,
                     n_samples: int = 20000, progress: bool = True, connect_timeout: float = 5.0,
                     max_in_flight: int | None = None) -> ReachabilityMap:
    """A :class:`ReachabilityMap` of ``frame`` (see the module docstring).

    Args:
        robot: a bundled name, a ``.urdf``/``.bvh`` path or a :class:`Robot`.
        frame: the frame (default: the last one).
        resolution: voxel edge [m].
        n_orientations: K orientations per voxel (0: position-only reachability).
        bounds: None (sampled FK box), ``"reach"`` (the reach sphere's box) or ((xmin, xmax),
            (ymin, ymax), (zmin, zmax)) [m].
        client / scheduler / connect_timeout / max_in_flight / chunk_size: as
            :func:`invkin.jobs.solve_dataset` (Dask when given, else all local cores).
        seed: orientations and restarts; max_restarts, tolerances: as :func:`invkin.solve_many`.
        n_samples: FK samples for the bounding box.
    """
    from .._parallel import call as parallel_call
    from ..kinematics.kernels import fk_frame_batch

    t0 = time.perf_counter()
    model, spec, node, frame = robot_and_frame(robot, frame)
    if isinstance(resolution, bool) or not isinstance(resolution, (int, float, np.floating, np.integer)) \
            or not (0 < resolution < math.inf):
        raise JobError(f"resolution: expected a voxel size > 0 [m], got {resolution!r}")
    resolution = float(resolution)
    if isinstance(n_orientations, bool) or not isinstance(n_orientations, (int, np.integer)) or n_orientations < 0:
        raise JobError(f"n_orientations: expected an integer >= 0, got {n_orientations!r}")
    K = int(n_orientations)
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise JobError(f"n_samples: expected an integer >= 1, got {n_samples!r}")
    settings, chunk_size, seed = _check_settings(chunk_size, max_restarts, seed, position_tolerance,
                                                 rotation_tolerance, "lm", "xyz")
    if client is not None and scheduler is not None:
        raise JobError("give either client or scheduler, not both")
    anchor_node, radius = model.reach_bound(node)
    if anchor_node is None:
        raise JobError(f"frame {frame!r} has no moving joint above it: its workspace is a single point")
    anchor = model.fk(model.neutral(), anchor_node)[:3, 3].copy()
    rbox = np.stack([anchor - radius, anchor + radius], axis=1)
    if bounds is None:
        qs = np.ascontiguousarray(model.sample(int(n_samples), rng=np.random.default_rng([seed, 0xB0C5])))
        P = parallel_call(fk_frame_batch, model.node_table, model.node_params, model.origin, qs, node)[:, :3, 3]
        box = np.stack([P.min(axis=0) - resolution / 2, P.max(axis=0) + resolution / 2], axis=1)
        box = np.stack([np.maximum(box[:, 0], rbox[:, 0]), np.minimum(box[:, 1], rbox[:, 1])], axis=1)
    elif isinstance(bounds, str) and bounds == "reach":
        box = rbox
    else:
        try:
            box = np.asarray(bounds, dtype=np.float64).reshape(3, 2)
        except (TypeError, ValueError):
            raise JobError(f"bounds: expected None, 'reach' or ((xmin, xmax), (ymin, ymax), (zmin, zmax)), "
                           f"got {bounds!r:.200}") from None
        if not np.isfinite(box).all() or np.any(box[:, 0] > box[:, 1]):
            raise JobError(f"bounds: expected finite (min, max) pairs with min <= max, got {box.tolist()}")
    axes = [_axis_centres(box[d, 0], box[d, 1], anchor[d], resolution) for d in range(3)]
    shape = tuple(len(a) for a in axes)
    n_vox = int(np.prod(shape))
    if n_vox * max(K, 1) > _MAX_TARGETS:
        raise JobError(f"the grid {shape} x {max(K, 1)} orientation(s) = {n_vox * max(K, 1):,} solves is too "
                       f"large (limit {_MAX_TARGETS:,}); use a coarser resolution or fewer orientations")
    X3, Y3, Z3 = np.meshgrid(*axes, indexing="ij")
    centres = np.stack([X3.ravel(), Y3.ravel(), Z3.ravel()], axis=1)
    within = np.linalg.norm(centres - anchor, axis=1) <= radius + settings["position_tolerance"]
    vidx = np.nonzero(within)[0]
    V = vidx.size
    rots = _random_rotations(K, seed)
    if K == 0:
        X = np.ascontiguousarray(centres[vidx])
    else:
        X = np.zeros((V * K, 4, 4))
        X[:, :3, :3] = np.tile(rots, (V, 1, 1))
        X[:, :3, 3] = np.repeat(centres[vidx], K, axis=0)
        X[:, 3, 3] = 1.0
    n_t = X.shape[0]
    succ = np.zeros(n_t, dtype=bool)
    man = np.zeros(n_t)

    def on_result(c, res):
        a = c * chunk_size
        n = res["success"].shape[0]
        succ[a:a + n] = res["success"]
        man[a:a + n] = res["manipulability"]

    chunks = [(c, c * chunk_size, min(n_t, (c + 1) * chunk_size)) for c in range(-(-n_t // chunk_size))]
    with contextlib.ExitStack() as stack:
        client = client_for(stack, client, scheduler, connect_timeout)
        bar = _progress(n_t, 0, progress, "invkin reachability")
        if bar is not None:
            stack.callback(bar.close)
        t_run = time.perf_counter()
        run_chunks(model, spec, frame, X, None, settings, chunks, client, on_result, seed=seed,
                   with_manipulability=True, max_in_flight=max_in_flight, progress=bar)
    run_s = time.perf_counter() - t_run
    Kc = max(K, 1)
    s2 = succ.reshape(V, Kc)
    cnt = s2.sum(axis=1)
    msum = np.where(s2, man.reshape(V, Kc), 0.0).sum(axis=1)
    fraction = np.zeros(n_vox)
    manip = np.full(n_vox, np.nan)
    n_solved = np.zeros(n_vox, dtype=np.int64)
    evaluated = np.zeros(n_vox, dtype=bool)
    fraction[vidx] = cnt / Kc
    n_solved[vidx] = cnt
    evaluated[vidx] = True
    with np.errstate(invalid="ignore", divide="ignore"):
        manip[vidx] = np.where(cnt > 0, msum / np.maximum(cnt, 1), np.nan)
    return ReachabilityMap(
        robot=model.name, frame=frame, resolution=resolution, n_orientations=K, x=axes[0], y=axes[1], z=axes[2],
        fraction=fraction.reshape(shape), manipulability=manip.reshape(shape), n_solved=n_solved.reshape(shape),
        evaluated=evaluated.reshape(shape), orientations=rots, anchor=anchor, reach_radius=float(radius),
        n_solves=int(n_t), elapsed=run_s if n_t else time.perf_counter() - t0,
        settings={**settings, "seed": seed, "chunk_size": chunk_size, "bounds": box.tolist(),
                  "n_samples": int(n_samples)})
