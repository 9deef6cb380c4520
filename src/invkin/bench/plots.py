"""Plots of the benchmarks (matplotlib, headless Agg backend), written as PNG and SVG.

* ``bench_accuracy``: median time per solve (top row) and median iterations (bottom row) against
  the requested accuracy, log-log, one line per method, one column per goal set — the layout of
  Welman's figures 4.4/4.5 (tighter accuracy to the right). Hollow markers: not every goal of
  the cell was solved within ``max_iterations`` (the time is then the time spent).
* ``bench_distal``: the share of the joint motion on the distal third of the chain, per method
  and goal set, at the reference accuracy; the dashed line is an even spread.
* ``bench_suite``: the TRAC-IK protocol, success rate and median time as two heat maps
  (solver × robot), invkin's methods above the line, the peers below.
"""
from __future__ import annotations

import os

from .._io import atomic_open
from ..errors import InvkinError

__all__ = ["plot_accuracy", "plot_distal", "plot_suite"]

_MARKERS = "osD^v<>PXh*"


def _plt():
    try:
        import matplotlib
    except ImportError:
        raise InvkinError("plots need matplotlib: pip install 'invkin[bench]'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, out_dir, stem) -> list:
    """Write fig as out_dir/stem.png and .svg, close it; the two paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for ext in ("png", "svg"):
        p = os.path.join(out_dir, f"{stem}.{ext}")
        with atomic_open(p, "wb") as f:
            fig.savefig(f, format=ext, dpi=110 if ext == "png" else None, bbox_inches="tight",
                        metadata={"Date": None} if ext == "svg" else None)
        paths.append(p)
    plt.close(fig)
    return paths


def _sets_and_methods(res):
    """The goal sets of an accuracy run, and the methods supported on at least one of them."""
    sets = list(res["sets"])
    return sets, [m for m in res["settings"]["methods"] if any(m in res["sets"][n]["methods"] for n in sets)]


#: fixed colours, so that a method keeps its colour across figures (transpose red, ccd blue: Welman's pair)
_FIXED = {"transpose": "tab:red", "ccd": "tab:blue", "lm": "tab:purple", "pinv": "tab:brown", "dls": "tab:orange",
          "gauss-seidel": "tab:green", "fabrik": "tab:gray", "analytic": "tab:olive"}


def _colors(names):
    plt = _plt()
    cmap = plt.get_cmap("tab10")
    return {n: _FIXED.get(n, cmap(i % 10)) for i, n in enumerate(names)}


def plot_accuracy(res, out_dir) -> list:
    plt = _plt()
    sets, methods = _sets_and_methods(res)
    colors = _colors(methods)
    fig, axes = plt.subplots(2, len(sets), figsize=(4.6 * len(sets), 7.4), squeeze=False, sharex=True)
    for j, sname in enumerate(sets):
        s = res["sets"][sname]
        for k, m in enumerate(methods):
            rows = s["methods"].get(m)
            if not rows:  # unsupported on this set
                continue
            x = [r["accuracy"] for r in rows]
            for i, (key, scale) in enumerate((("time_ms_median", 1.0), ("iterations_median", 1.0))):
                ax = axes[i][j]
                y = [max(r[key] * scale, 1e-3 if i == 0 else 0.5) for r in rows]
                ax.plot(x, y, "-", color=colors[m], lw=1.6, label=m if (i == 0 and j == 0) else None)
                full = [r["success"] == 1.0 for r in rows]
                mk = _MARKERS[k % len(_MARKERS)]
                ax.plot([a for a, f in zip(x, full) if f], [b for b, f in zip(y, full) if f], mk,
                        color=colors[m], ms=5)
                ax.plot([a for a, f in zip(x, full) if not f], [b for b, f in zip(y, full) if not f], mk,
                        color=colors[m], ms=6, mfc="white")
        for i in range(2):
            ax = axes[i][j]
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.invert_xaxis() if not ax.xaxis_inverted() else None
            ax.grid(True, which="major", alpha=0.3)
            ax.grid(True, which="minor", alpha=0.1)
        axes[0][j].set_title(f"{sname}: {s.get('short', '')}", fontsize=10)
        axes[1][j].set_xlabel("requested accuracy [m] (tighter →)")
    axes[0][0].set_ylabel("median time per solve [ms]")
    axes[1][0].set_ylabel("median iterations")
    handles, labels = axes[0][0].get_legend_handles_labels()
    from matplotlib.lines import Line2D

    handles.append(Line2D([], [], marker="o", mfc="white", color="0.3", ls=""))
    labels.append("not all goals solved")
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 8), fontsize=9, frameon=False,
               bbox_to_anchor=(0.5, -0.02))
    st = res["settings"]
    fig.suptitle(f"invkin bench accuracy: {st['goals_per_set']} goals per set, timeout=None, "
                 f"max_iterations={st['max_iterations']}, best of {st['repeats']} per solve", fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return _save(plt, fig, out_dir, "bench_accuracy")


def plot_distal(res, out_dir) -> list:
    plt = _plt()
    import numpy as np

    sets, methods = _sets_and_methods(res)
    ref = res["settings"]["reference_accuracy"]
    fig, ax = plt.subplots(figsize=(1.2 * len(methods) + 2.5, 4.0))
    width = 0.8 / max(len(sets), 1)
    xs = np.arange(len(methods))
    cmap = plt.get_cmap("Set2")
    for j, sname in enumerate(sets):
        vals = []
        for m in methods:
            row = next((r for r in res["sets"][sname]["methods"].get(m, ()) if r["accuracy"] == ref), None)
            v = None if row is None else row["distal_share_median"]
            vals.append(np.nan if v is None else v)
        pos = xs + (j - (len(sets) - 1) / 2) * width
        ax.bar(pos, vals, width * 0.95, color=cmap(j), label=sname)
        u = res["sets"][sname]["uniform_distal_share"]
        ax.hlines(u, pos[0] - width / 2, pos[-1] + width / 2, colors=cmap(j), linestyles="dashed", lw=1)
    ax.set_xticks(xs)
    ax.set_xticklabels(methods)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of Σ|Δq| on the distal third")
    ax.set_title(f"Where the joint motion goes (median over converged solves at {ref:.0e} m; "
                 "dashed: even spread)", fontsize=10)
    ax.legend(fontsize=9, frameon=False, ncol=len(sets))
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return _save(plt, fig, out_dir, "bench_distal")


def plot_suite(res, out_dir) -> list:
    """Two heat maps (solver × robot): success rate and median time, annotated; peers below a line."""
    plt = _plt()
    import numpy as np
    from matplotlib.colors import LogNorm

    robots = list(res["robots"])
    names = []
    for info in res["robots"].values():
        for s in info["solvers"]:
            if s not in names:
                names.append(s)
    # solvers without a single result (unsupported everywhere) are left out of the figure
    names = [s for s in names if any("success_strict" in res["robots"][r]["solvers"].get(s, {}) for r in robots)]
    names = [s for s in names if not s.startswith("peer:")] + [s for s in names if s.startswith("peer:")]
    S = np.full((len(names), len(robots)), np.nan)
    Tm = np.full_like(S, np.nan)
    for i, s in enumerate(names):
        for j, r in enumerate(robots):
            e = res["robots"][r]["solvers"].get(s, {})
            if e.get("success_strict") is not None:
                S[i, j] = 100 * e["success_strict"]
                Tm[i, j] = e["time_ms_median"]
    h = 1.2 + 0.36 * len(names)
    fig, axes = plt.subplots(1, 2, figsize=(2.4 + 2.2 * len(robots), h), sharey=True)
    cm1 = plt.get_cmap("RdYlGn").copy()
    cm1.set_bad("0.92")
    cm2 = plt.get_cmap("viridis_r").copy()
    cm2.set_bad("0.92")
    finite = Tm[np.isfinite(Tm)]
    tn = LogNorm(vmin=max(float(finite.min()), 1e-3), vmax=max(float(finite.max()), 1e-2)) if finite.size else None
    im1 = axes[0].imshow(np.ma.masked_invalid(S), cmap=cm1, vmin=0, vmax=100, aspect="auto")
    im2 = axes[1].imshow(np.ma.masked_invalid(Tm), cmap=cm2, norm=tn, aspect="auto")
    for i in range(len(names)):
        for j in range(len(robots)):
            for ax, M, fmt in ((axes[0], S, "{:.1f}"), (axes[1], Tm, "{:.3g}")):
                v = M[i, j]
                ax.text(j, i, "n/a" if not np.isfinite(v) else fmt.format(v), ha="center", va="center",
                        fontsize=8, color="0.25" if not np.isfinite(v) else "black")
    n_inv = sum(not s.startswith("peer:") for s in names)
    for ax in axes:
        ax.set_xticks(range(len(robots)))
        ax.set_xticklabels(robots, rotation=20, ha="right", fontsize=9)
        if 0 < n_inv < len(names):
            ax.axhline(n_inv - 0.5, color="black", lw=1.5)
    axes[0].set_yticks(range(len(names)))
    axes[0].set_yticklabels([f"invkin {s}" if not s.startswith("peer:") else s for s in names], fontsize=9)
    axes[0].set_title("success [%]: 1e-5 m, 1e-5 rad, inside the limits", fontsize=10)
    axes[1].set_title("median time per solve [ms]", fontsize=10)
    fig.colorbar(im1, ax=axes[0], fraction=0.04, pad=0.02)
    fig.colorbar(im2, ax=axes[1], fraction=0.04, pad=0.02)
    st = res["settings"]
    fig.suptitle(f"invkin bench suite: TRAC-IK protocol, N = {st['n']} targets per robot, budget "
                 f"{st['budget_ms']:g} ms, seed {st['seed']}"
                 + ("; below the line: peers (bench_peers.py, same targets, separate process)"
                    if n_inv < len(names) else ""), fontsize=10)
    fig.tight_layout()
    return _save(plt, fig, out_dir, "bench_suite")
