"""BVH (Biovision Hierarchy) motion files ⇄ a skeleton :class:`Robot` plus a motion :class:`Clip`.

Mapping of a BVH joint ``J`` with parent ``P``, ``OFFSET o`` and ``CHANNELS n c1 … cn``:

* each channel is one degree of freedom, in file order (``q`` columns ``J.Xposition``,
  ``J.Zrotation``, …): a position channel is a prismatic joint along the parent's x/y/z axis [file
  length units], a rotation channel a continuous revolute joint about x/y/z [rad; the file holds
  degrees];
* the channel joints form a chain of nodes ``P → J.c1 → … → J``: every intermediate node is internal
  (not in ``frame_names``) and the last one carries the name ``J``, so ``robot.fk(q, "J")`` is the
  joint's full pose. With ``T_P`` the parent's world pose::

      T_J = T_P · Trans(o') · Trans(p) · R_c1 · R_c2 · …      (rotations in CHANNELS order)

  e.g. ``Zrotation Xrotation Yrotation`` gives ``R = Rz · Rx · Ry``. Position channels always act
  along the parent's axes (they are placed before the rotations even if the file lists them after).
* ``o'`` is the OFFSET with every component that has a position channel set to zero: position
  channels *replace* the offset rather than add to it. This matters for files with position channels
  on every joint (mocapdata.com), whose channel values repeat the offset in each frame; adding them
  would double every bone. The ROOT follows the same rule (its channels are its absolute position).
* ``End Site`` becomes a fixed frame named ``<parent>_End`` (a number is appended if that name is
  taken); a joint with ``CHANNELS 0`` is a fixed frame.
* the tree hangs below an internal world node (named ``world`` unless the file uses that name);
  several ROOTs are allowed.

:class:`Clip` holds the motion as configurations (``frames[i]`` is a ``q`` for the robot) and the
hierarchy exactly as read (names, offsets, channel orders), so that :func:`write_bvh` can write the
file back.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

import numpy as np

from .._io import atomic_open, open_regular, path_str
from ..errors import ModelError
from ..kinematics import kernels as K
from .robot import Robot

__all__ = ["Clip", "read_bvh", "write_bvh", "CHANNEL_NAMES", "MAX_BVH_BYTES"]

#: The six legal channel names, in canonical spelling.
CHANNEL_NAMES = ("Xposition", "Yposition", "Zposition", "Xrotation", "Yrotation", "Zrotation")
_CHANNEL_CANON = {c.lower(): c for c in CHANNEL_NAMES}
_AXES = {"X": (1.0, 0.0, 0.0), "Y": (0.0, 1.0, 0.0), "Z": (0.0, 0.0, 1.0)}

#: Files larger than this are refused [bytes].
MAX_BVH_BYTES = 256 * 2**20

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_FRAMES = re.compile(r"\s*Frames\s*:\s*(\S*)\s*\Z", re.IGNORECASE)
_FRAME_TIME = re.compile(r"\s*Frame\s+Time\s*:\s*(\S*)\s*\Z", re.IGNORECASE)


def _readonly(a, dtype=np.float64) -> np.ndarray:
    if type(a) is _Fresh and a.dtype == dtype:
        a = a.view(np.ndarray)  # the reader's own new array: no copy
    else:
        a = np.array(a, dtype=dtype, copy=True)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Clip:
    """A BVH motion and the hierarchy it was read with.

    Attributes:
        frames: (F, dof) float64, read-only: one configuration ``q`` per frame, columns in channel
            order (see :attr:`channel_names`); rotations [rad], positions [file length units].
        frame_time: seconds per frame.
        names: BVH nodes in file order (depth first), joints and End Sites alike; End Sites carry
            the generated frame name (``<parent>_End``).
        parents: index into ``names`` of each node's parent, -1 for a ROOT.
        offsets: (N, 3) float64, read-only: each node's OFFSET [file length units].
        channels: per node, its CHANNELS in file order (canonical spelling; ``()`` for End Sites).
        end_site: per node, True for an End Site.

    Replace the motion with ``dataclasses.replace(clip, frames=new_q)``; the fields are checked.
    """

    frames: np.ndarray
    frame_time: float
    names: tuple
    parents: tuple
    offsets: np.ndarray
    channels: tuple
    end_site: tuple

    def __post_init__(self):
        names = tuple(str(n) for n in self.names)
        n = len(names)
        parents = tuple(int(p) for p in self.parents)
        channels = tuple(tuple(_CHANNEL_CANON.get(str(c).lower(), str(c)) for c in ch) for ch in self.channels)
        end_site = tuple(bool(e) for e in self.end_site)
        offsets = _readonly(self.offsets)
        if len(parents) != n or len(channels) != n or len(end_site) != n or offsets.shape != (n, 3):
            raise ModelError(f"Clip: names, parents, channels, end_site and offsets (N, 3) must describe "
                             f"the same {n} nodes; got {len(parents)}, {len(channels)}, {len(end_site)}, "
                             f"{offsets.shape}")
        for i, p in enumerate(parents):
            if not -1 <= p < i:
                raise ModelError(f"Clip: node {names[i]!r} has parent index {p}; parents must come first")
            if p >= 0 and end_site[p]:
                raise ModelError(f"Clip: node {names[i]!r} is below End Site {names[p]!r}")
            if end_site[i] and (p < 0 or channels[i]):
                raise ModelError(f"Clip: End Site {names[i]!r} needs a parent joint and no channels")
            for c in channels[i]:
                if c not in CHANNEL_NAMES:
                    raise ModelError(f"Clip: node {names[i]!r}: unknown channel {c!r}; expected one of "
                                     f"{', '.join(CHANNEL_NAMES)}")
        dof = sum(len(c) for c in channels)
        frames = _readonly(self.frames)
        if frames.ndim != 2 or frames.shape[1] != dof:
            raise ModelError(f"Clip: frames must have shape (F, {dof}) for {dof} channels, got {frames.shape}")
        if not np.all(np.isfinite(frames)) or not np.all(np.isfinite(offsets)):
            raise ModelError("Clip: frames and offsets must be finite")
        ft = float(self.frame_time)
        if not (math.isfinite(ft) and ft >= 0.0):
            raise ModelError(f"Clip: frame_time must be a finite number >= 0 [s], got {self.frame_time!r}")
        for nm, v in (("names", names), ("parents", parents), ("channels", channels), ("end_site", end_site),
                      ("offsets", offsets), ("frames", frames), ("frame_time", ft)):
            object.__setattr__(self, nm, v)

    @property
    def n_frames(self) -> int:
        return int(self.frames.shape[0])

    @property
    def dof(self) -> int:
        return int(self.frames.shape[1])

    @property
    def fps(self) -> float:
        return 1.0 / self.frame_time if self.frame_time > 0 else math.inf

    @property
    def duration(self) -> float:
        """n_frames * frame_time [s]."""
        return self.n_frames * self.frame_time

    @property
    def joint_names(self) -> tuple:
        """The BVH joints (ROOT/JOINT, without End Sites) in file order."""
        return tuple(n for n, e in zip(self.names, self.end_site) if not e)

    @property
    def channel_names(self) -> tuple:
        """Name of every column of ``frames``: ``Joint.Channel`` (the robot's ``joint_names``)."""
        return tuple(f"{n}.{c}" for n, ch in zip(self.names, self.channels) for c in ch)

    @property
    def rotation_mask(self) -> np.ndarray:
        """(dof,) bool: True for the rotation columns (radians in ``frames``, degrees in the file)."""
        return np.array([c.endswith("rotation") for ch in self.channels for c in ch], dtype=bool)

    def file_values(self) -> np.ndarray:
        """The motion as the file holds it: (F, dof) with rotations in degrees."""
        out = np.array(self.frames)
        m = self.rotation_mask
        out[:, m] = np.rad2deg(out[:, m])
        return out

    def __repr__(self) -> str:
        return (f"Clip(frames={self.n_frames}, dof={self.dof}, frame_time={self.frame_time:g} s, "
                f"joints={len(self.joint_names)}, end_sites={sum(self.end_site)})")


def need_frames(clip: Clip, what: str) -> None:
    """ModelError ``"<what>: the clip has no frames"`` for a clip of zero frames (a BVH with
    ``Frames: 0`` reads; most uses of a clip need at least one frame)."""
    if clip.n_frames < 1:
        raise ModelError(f"{what}: the clip has no frames")


def check_skeleton(robot, clip: Clip, what: str, hint: str = "") -> None:
    """ModelError when ``robot`` is not the clip's skeleton (its ``joint_names`` are not
    ``clip.channel_names``), naming both counts and the first entry that differs."""
    a, b = tuple(robot.joint_names), clip.channel_names
    if a == b:
        return
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))

    def at(names):
        return repr(names[i]) if i < len(names) else "nothing (it ends before)"

    raise ModelError(f"{what}robot {robot.name!r} does not match the clip's skeleton: its {len(a)} joints and the clip's "
                     f"{len(b)} channels first differ at index {i}: {at(a)} in the robot, {at(b)} in the clip"
                     f"{hint}")


# ---------------------------------------------------------------------------------------- reading
class _Tokens:
    """The header as a stream of (token, line number) pairs."""

    def __init__(self, lines, stop: int, src: str):
        self.src = src
        self.toks = [(t, ln + 1) for ln in range(stop) for t in lines[ln].split()]
        self.i = 0
        self.last_line = stop + 1  # reported when the header ends early: the MOTION line

    def err(self, msg: str, line: int | None = None) -> ModelError:
        return ModelError(f"{self.src}: line {line if line is not None else self.line()}: {msg}")

    def line(self) -> int:
        if self.i < len(self.toks):
            return self.toks[self.i][1]
        return self.last_line

    def peek(self):
        return self.toks[self.i][0] if self.i < len(self.toks) else None

    def next(self, what: str):
        if self.i >= len(self.toks):
            raise self.err(f"unexpected end of the hierarchy: expected {what}")
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, word: str):
        t, ln = self.next(repr(word))
        if t != word:
            raise self.err(f"expected {word!r}, got {t!r}", ln)
        return ln

    def number(self, what: str) -> float:
        t, ln = self.next(what)
        if not _NUMBER.match(t):
            raise self.err(f"{what}: expected a number, got {t!r}", ln)
        return float(t)

    def rest_of_line(self, ln: int) -> list:
        out = []
        while self.i < len(self.toks) and self.toks[self.i][1] == ln and self.toks[self.i][0] != "{":
            out.append(self.toks[self.i][0])
            self.i += 1
        return out


def _parse_hierarchy(tk: _Tokens):
    """Nodes as lists: names, parents, offsets, channels, end_site, line numbers.

    Iterative (an explicit stack of open nodes), so any nesting depth parses: a recursive
    descent would hit Python's recursion limit near 1,000 nested joints."""
    names, parents, offsets, channels, end_site, lines = [], [], [], [], [], []
    t, ln = tk.next("'HIERARCHY'")
    if t.upper() != "HIERARCHY":
        raise tk.err(f"expected 'HIERARCHY' at the start of the file, got {t!r}", ln)
    if tk.peek() is None:
        raise tk.err("no ROOT in the hierarchy")

    def open_node(kind: str, name: str, parent: int, ln: int) -> int:
        names.append(name)
        parents.append(parent)
        offsets.append(None)
        channels.append(())
        end_site.append(kind == "End")
        lines.append(ln)
        tk.expect("{")
        return len(names) - 1

    def close_node(idx: int):
        if offsets[idx] is None:
            raise tk.err(f"{'End Site' if end_site[idx] else repr(names[idx])} has no OFFSET", lines[idx])

    stack = []  # open nodes, innermost last
    with_kids = set()  # nodes whose children have begun
    while tk.peek() is not None:
        t, ln = tk.next("ROOT")
        if t.upper() != "ROOT":
            if t == "}":
                raise tk.err("unbalanced braces: '}' without a matching '{'", ln)
            raise tk.err(f"expected ROOT or MOTION, got {t!r}", ln)
        nm = tk.rest_of_line(ln)
        if not nm:
            raise tk.err("ROOT without a name", ln)
        stack.append(open_node("ROOT", " ".join(nm), -1, ln))
        while stack:
            idx = stack[-1]
            name, is_end = names[idx], end_site[idx]
            t, l2 = tk.next(f"'}}' closing {name or 'End Site'!r} (opened on line {lines[idx]})")
            u = t.upper()
            if t == "}":
                close_node(stack.pop())
            elif u == "OFFSET":
                if offsets[idx] is not None:
                    raise tk.err(f"second OFFSET in {name!r}", l2)
                offsets[idx] = [tk.number("OFFSET") for _ in range(3)]
            elif u == "CHANNELS":
                if is_end:
                    raise tk.err(f"End Site of {names[parents[idx]]!r} cannot have CHANNELS", l2)
                if channels[idx]:
                    raise tk.err(f"second CHANNELS line in {name!r}", l2)
                if idx in with_kids:  # the motion columns follow the CHANNELS lines' order in the file
                    raise tk.err(f"CHANNELS of {name!r} after its children; expected them before its first JOINT "
                                 f"(the motion columns follow the order of the CHANNELS lines)", l2)
                c, l3 = tk.next("the number of channels")
                if not (c.isascii() and c.isdigit()):
                    raise tk.err(f"CHANNELS: expected a channel count, got {c!r}", l3)
                chs = []
                for _ in range(int(c)):
                    ch, l4 = tk.next(f"{c} channel names")
                    canon = _CHANNEL_CANON.get(ch.lower())
                    if canon is None and l4 != l2:  # the line ended before the count did
                        raise tk.err(f"CHANNELS {c} in {name!r} but the line lists {len(chs)} channel names "
                                     f"({' '.join(chs) or 'none'}); the count and the names disagree", l2)
                    if canon is None:
                        raise tk.err(f"unknown channel name {ch!r} in {name!r}; expected one of "
                                     f"{', '.join(CHANNEL_NAMES)}", l4)
                    if canon in chs:
                        raise tk.err(f"channel {canon} repeated in {name!r}", l4)
                    chs.append(canon)
                extra = tk.rest_of_line(l2)
                if extra and all(x.lower() in _CHANNEL_CANON for x in extra):
                    raise tk.err(f"CHANNELS {c} in {name!r} but the line lists {len(chs) + len(extra)} channel "
                                 f"names ({' '.join(chs + extra)}); the count and the names disagree", l2)
                tk.i -= len(extra)  # anything else is reported where it stands
                channels[idx] = tuple(chs)
            elif u == "JOINT" or (u == "END" and tk.peek() is not None and tk.peek().upper() == "SITE"):
                if is_end:
                    raise tk.err(f"End Site of {names[parents[idx]]!r} cannot have children", l2)
                if offsets[idx] is None:
                    raise tk.err(f"{name!r} has no OFFSET before its children", l2)
                with_kids.add(idx)
                if u == "END":
                    tk.next("'Site'")
                    tk.rest_of_line(l2)  # a name after 'End Site' is ignored, as Blender does
                    stack.append(open_node("End", "", idx, l2))
                else:
                    nm = tk.rest_of_line(l2)
                    if not nm:
                        raise tk.err("JOINT without a name", l2)
                    stack.append(open_node("JOINT", " ".join(nm), idx, l2))
            elif u in ("ROOT", "MOTION", "HIERARCHY"):
                raise tk.err(f"unbalanced braces: {t!r} inside {name or 'End Site'!r} (opened on line "
                             f"{lines[idx]}); a '}}' is missing", l2)
            else:
                raise tk.err(f"unexpected {t!r} in {name or 'End Site'!r}; expected OFFSET, CHANNELS, JOINT, "
                             f"End Site or '}}'", l2)
    return names, parents, offsets, channels, end_site, lines


def _name_end_sites(src, names, parents, end_site, lines):
    taken = {n for n, e in zip(names, end_site) if not e}
    seen = set()
    for i, n in enumerate(names):
        if not end_site[i]:
            if n in seen:
                raise ModelError(f"{src}: line {lines[i]}: duplicate joint name {n!r}")
            seen.add(n)
    for i, e in enumerate(end_site):
        if e:
            base = f"{names[parents[i]]}_End"
            nm, k = base, 1
            while nm in taken:
                k += 1
                nm = f"{base}{k}"
            names[i] = nm
            taken.add(nm)


class _Lines:
    """The lines of a binary file, read in blocks: (1-based line number, bytes without its line
    end) for CR, LF and CRLF endings alike. The last line is yielded even if empty, so a file
    ending in a newline has one more (empty) line than terminators, as ``str.split`` counts."""

    BLOCK = 1 << 18

    def __init__(self, f, src: str, limit: int):
        self.f, self.src, self.limit = f, src, limit
        self.read = 0
        self.n = 0  # line number of the last line handed out

    def __iter__(self):
        buf = b""
        while True:
            blk = self.f.read(self.BLOCK)
            self.read += len(blk)
            if self.read > self.limit:
                raise ModelError(f"{self.src}: line {self.n + 1}: file is over the {self.limit}-byte limit")
            if not blk:
                break
            buf += blk
            if buf.endswith(b"\r"):  # perhaps the first half of a CRLF: wait for the next block
                continue
            parts = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
            buf = parts.pop()
            for line in parts:
                self.n += 1
                yield line
        for line in buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"):
            self.n += 1
            yield line


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


class _Fresh(np.ndarray):
    """An array the reader has just filled and nobody else holds: :class:`Clip` takes it
    without the defensive copy (the frames of a large file are its largest allocation)."""


_MOTION_BYTES = re.compile(rb"[0-9eE+\-.\s]*\Z")
_CHUNK_VALUES = 1 << 14  # motion values converted per NumPy call (bounded temporaries, ~1 MB)


def _parse_motion(src, it, dof: int, size: int, rot: np.ndarray):
    """Frames (F, dof) as q (rotation columns converted to radians) and the frame time, read
    from the line iterator ``it`` positioned after the MOTION line. ``size`` [bytes] of the file
    bounds the frames it can hold, so a lying ``Frames:`` count cannot allocate more.

    A ``Frames:`` count one above the lines present is read as the lines present with an
    :class:`~invkin.errors.InvkinWarning` (Blender reads such files); any other mismatch is an
    error naming the line."""
    def header(rx, what):
        for line in it:
            text = _decode(line)
            if not text.strip():
                continue
            m = rx.match(text)
            if not m:
                raise ModelError(f"{src}: line {it.n}: expected '{what} <value>', got {text.strip()[:60]!r}")
            return m.group(1), it.n
        raise ModelError(f"{src}: line {it.n}: truncated file: expected '{what}' after MOTION")

    v, kf = header(_FRAMES, "Frames:")
    if not (v.isascii() and v.isdigit()) or len(v) > 12:
        raise ModelError(f"{src}: line {kf}: Frames: expected a frame count (an integer below 1e12), got {v!r}")
    n_frames = int(v)
    v, kt = header(_FRAME_TIME, "Frame Time:")
    if not _NUMBER.match(v) or not 0.0 <= float(v) < math.inf:
        raise ModelError(f"{src}: line {kt}: Frame Time: expected a number of seconds >= 0, got {v!r}")
    frame_time = float(v)
    if dof == 0:  # a skeleton without channels: nothing to read per frame
        return np.zeros((n_frames, 0)), frame_time

    cap = min(n_frames, size // (2 * dof) + 1)  # a frame line takes at least 2 bytes per value
    out = np.empty((cap, dof))
    toks, rows = [], []  # the pending chunk: tokens and line numbers
    filled = 0
    last_line = kt

    def flush():
        nonlocal filled
        if not rows:
            return
        k = len(rows)
        try:
            if not _MOTION_BYTES.match(b" ".join(toks)):  # NumPy would accept 'nan', 'inf', '1_0'
                raise ValueError
            vals = np.array(toks, dtype=np.float64).reshape(k, dof)
        except ValueError:
            for r in range(k):
                for x in toks[r * dof:(r + 1) * dof]:
                    if not _NUMBER.match(x.decode("latin-1")):
                        raise ModelError(f"{src}: line {rows[r]}: motion value {_decode(x)[:40]!r} is not a "
                                         f"number") from None
            raise ModelError(f"{src}: line {rows[0]}: unreadable motion block") from None  # pragma: no cover
        if not np.all(np.isfinite(vals)):
            bad = int(np.argmin(np.all(np.isfinite(vals), axis=1)))
            raise ModelError(f"{src}: line {rows[bad]}: motion value out of range "
                             f"({vals[bad][~np.isfinite(vals[bad])][0]})")
        vals[:, rot] = np.deg2rad(vals[:, rot])
        out[filled:filled + k] = vals
        filled += k
        toks.clear()
        rows.clear()

    for line in it:
        t = line.split()
        if not t:
            continue
        if len(t) != dof:
            raise ModelError(f"{src}: line {it.n}: motion line has {len(t)} numbers, the hierarchy has {dof} "
                             f"channels")
        if filled + len(rows) >= n_frames:
            extra = 1 + sum(1 for rest in it if rest.strip())
            raise ModelError(f"{src}: line {kf}: Frames: {n_frames}, but the file has {n_frames + extra} motion "
                             f"lines (line {it.n})")
        toks.extend(t)
        rows.append(it.n)
        last_line = it.n
        if len(toks) >= _CHUNK_VALUES:
            flush()
    flush()
    if filled != n_frames:
        if filled != n_frames - 1:
            raise ModelError(f"{src}: line {kf}: Frames: {n_frames}, but the file has {filled} motion lines "
                             f"(line {last_line}); truncated file?")
        from ..errors import InvkinWarning, warn_caller

        warn_caller(f"{src}: line {kf}: Frames: {n_frames}, but the file has {filled} motion lines; "
                    f"read as {filled} frames (as Blender does)", InvkinWarning)
    if filled != out.shape[0]:
        out.resize((filled, dof), refcheck=False)  # in place: no second copy of the frames
    return out.view(_Fresh), frame_time


def read_bvh(path, *, scale: float = 1.0, up=None, file_up="y") -> tuple[Robot, Clip]:
    """Read a BVH file: the skeleton as a :class:`Robot` and the motion as a :class:`Clip`.

    ``robot.fk(clip.frames[i], "LeftFoot")`` is the pose of ``LeftFoot`` in frame ``i``, in the
    file's length units (see the module docstring for the exact mapping). Line endings (CR, LF,
    CRLF, mixed), tabs, indentation and exponent styles are all accepted; so are a name after
    ``End Site`` (ignored, as Blender does) and a ``Frames:`` count one above the motion lines
    present (read as those lines, with an :class:`~invkin.errors.InvkinWarning`). Malformed files
    raise :class:`~invkin.ModelError` naming the file and the line; a path that is not a regular
    file (a FIFO, a folder) is refused before it is read.

    The file is streamed: the hierarchy is parsed iteratively (any depth) and the motion is
    converted in chunks straight into the frames array, so memory stays near the size of the
    frames (about 0.8x the file for typical 6-decimal text) plus the file's header.

    ``scale`` multiplies lengths (e.g. 0.01 for a centimetre file read in metres); ``up`` turns the
    file's up axis ``file_up`` (BVH is Y-up by convention) onto ``up`` ("z" for a Z-up world). Both
    are exact (:func:`invkin.model.axes.convert_clip`: channels relabelled, columns scaled).
    """
    from .axes import check_conversion
    scale = check_conversion("read_bvh", scale, up=up, file_up=file_up)
    robot, clip = _read_bvh(path)
    if scale == 1.0 and up is None:
        return robot, clip
    from .axes import convert_clip
    clip = convert_clip(clip, scale=scale, up_from=file_up, up_to=file_up if up is None else up)
    return skeleton_robot(clip, name=robot.name), clip


def _read_bvh(path) -> tuple[Robot, Clip]:
    src = path_str(path, ModelError, "a file path (read_bvh)")
    with open_regular(src, "BVH file", ModelError, max_bytes=MAX_BVH_BYTES) as f:
        size = os.fstat(f.fileno()).st_size
        it = _Lines(f, src, MAX_BVH_BYTES)
        lines = iter(it)
        header = []
        for line in lines:
            if line.strip().upper() == b"MOTION":
                break
            header.append(line)
        else:
            raise ModelError(f"{src}: line {it.n}: no MOTION section (truncated or not a BVH file?)")
        text_lines = _decode(b"\n".join(header)).split("\n")
        tk = _Tokens(text_lines, len(text_lines), src)
        del header, text_lines
        names, parents, offsets, channels, end_site, nlines = _parse_hierarchy(tk)
        _name_end_sites(src, names, parents, end_site, nlines)
        dof = sum(len(c) for c in channels)
        rot = np.array([c.endswith("rotation") for ch in channels for c in ch], dtype=bool)
        frames, frame_time = _parse_motion(src, _Iter(it, lines), dof, size, rot)
    clip = Clip(frames=frames, frame_time=frame_time, names=tuple(names),
                parents=tuple(parents), offsets=np.array(offsets), channels=tuple(channels),
                end_site=tuple(end_site))
    try:
        robot = skeleton_robot(clip, name=os.path.splitext(os.path.basename(src))[0])
    except ModelError as e:
        raise ModelError(f"{src}: {e}") from None
    return robot, clip


class _Iter:
    """The rest of a :class:`_Lines` iteration, with the current line number as ``n``."""

    def __init__(self, lines: _Lines, gen):
        self._lines, self._gen = lines, gen

    @property
    def n(self) -> int:
        return self._lines.n

    def __iter__(self):
        return self._gen


def skeleton_robot(clip: Clip, name: str = "bvh") -> Robot:
    """The :class:`Robot` of a clip's hierarchy (what :func:`read_bvh` returns with the clip)."""
    world = "world"
    while world in clip.names:
        world = "_" + world
    node_names, node_joint, parent, jtype, axis, origin, qidx, is_frame = \
        [world], [""], [-1], [K.FIXED], [(0.0, 0.0, 0.0)], [np.eye(4)], [-1], [False]
    top = {}  # clip node index -> robot node index of its last (named) node
    col = 0
    for i, nm in enumerate(clip.names):
        p = 0 if clip.parents[i] < 0 else top[clip.parents[i]]
        T = np.eye(4)
        T[:3, 3] = clip.offsets[i]
        chs = clip.channels[i]
        # q columns follow file order; nodes put the position channels first (parent's axes)
        cols = {c: col + k for k, c in enumerate(chs)}
        col += len(chs)
        ordered = [c for c in chs if c.endswith("position")] + [c for c in chs if c.endswith("rotation")]
        for c in ordered:
            if c.endswith("position"):
                T[ord(c[0]) - ord("X"), 3] = 0.0  # position channels replace the offset
        if not ordered:
            node_names.append(nm)
            node_joint.append(f"{nm}.offset" if not clip.end_site[i] else f"{nm}.joint")
            parent.append(p)
            jtype.append(K.FIXED)
            axis.append((0.0, 0.0, 0.0))
            origin.append(T)
            qidx.append(-1)
            is_frame.append(True)
        for k, c in enumerate(ordered):
            last = k == len(ordered) - 1
            node_names.append(nm if last else f"{nm}.{c}")
            node_joint.append(f"{nm}.{c}")
            parent.append(p)
            jtype.append(K.PRISMATIC if c.endswith("position") else K.REVOLUTE)
            axis.append(_AXES[c[0]])
            origin.append(T if k == 0 else np.eye(4))
            qidx.append(cols[c])
            is_frame.append(last)
            p = len(node_names) - 1
        top[i] = len(node_names) - 1
    n = len(node_names)
    dof = col
    return Robot(name=name, parent=np.array(parent), joint_type=np.array(jtype), axis=np.array(axis),
                 origin=np.array(origin), qidx=np.array(qidx), multiplier=np.ones(n), offset=np.zeros(n),
                 node_names=tuple(node_names), node_joint_names=tuple(node_joint),
                 is_frame=np.array(is_frame), joint_names=clip.channel_names,
                 lower=np.full(dof, -math.inf), upper=np.full(dof, math.inf))


# ---------------------------------------------------------------------------------------- writing
def _fmt(x: float) -> str:
    s = repr(float(x))
    return s[:-2] if s.endswith(".0") else s


def _check_names_writable(clip: Clip) -> None:
    """ModelError for a joint name that a BVH file cannot hold as it is (the reader splits the
    ``JOINT`` line into words, so a line break, a tab, a run of spaces, a brace word or an empty
    name would be written as another name or as a file that does not read), or a name used twice."""
    seen = set()
    for nm, end in zip(clip.names, clip.end_site):
        if end:
            continue  # End Sites are written without their (generated) names
        words = nm.split()
        if not words or " ".join(words) != nm or any(w in ("{", "}") for w in words):
            raise ModelError(f"write_bvh: joint name {nm!r} cannot be written to a BVH file as it is: expected "
                             f"words separated by single spaces (no line breaks, tabs, leading or trailing "
                             f"spaces, no '{{' or '}}' word); rename it (dataclasses.replace(clip, names=...))")
        if nm in seen:
            raise ModelError(f"write_bvh: joint name {nm!r} is used twice; BVH joint names must be unique")
        seen.add(nm)


def write_bvh(path, robot: Robot | None, clip: Clip, *, scale: float = 1.0, up=None, file_up="y") -> None:
    """Write ``clip`` as a BVH file atomically (:func:`invkin._io.atomic_open`: only a regular
    file is replaced, a symlink is written through, the file's mode is kept, 0644 for a new one).

    The hierarchy (names, offsets, channel orders) comes from the clip; ``robot``, if given, must be
    the clip's skeleton (its ``joint_names`` equal ``clip.channel_names``). Rotations are written in
    degrees with 15 significant digits, so read → write → read reproduces the frames to ~1e-13 deg.

    ``scale`` multiplies lengths on the way out; ``up`` names the clip's up axis, turned onto
    ``file_up`` in the file (the inverse of :func:`read_bvh`'s options).
    """
    if not isinstance(clip, Clip):
        raise ModelError(f"write_bvh: expected a Clip, got {type(clip).__name__}")
    if robot is not None:
        check_skeleton(robot, clip, "write_bvh: ")
    from .axes import check_conversion
    scale = check_conversion("write_bvh", scale, up=up, file_up=file_up)
    _check_names_writable(clip)
    if scale != 1.0 or up is not None:
        from .axes import convert_clip
        clip = convert_clip(clip, scale=scale, up_from=file_up if up is None else up, up_to=file_up)
    out = ["HIERARCHY"]
    kids = [[] for _ in clip.names]
    for i, p in enumerate(clip.parents):
        if p >= 0:
            kids[p].append(i)

    # depth first with an explicit stack (no recursion limit on deep hierarchies)
    stack = [(i, 0, False) for i, p in reversed(list(enumerate(clip.parents))) if p < 0]
    while stack:
        i, depth, closing = stack.pop()
        ind = "\t" * depth
        if closing:
            out.append(f"{ind}}}")
            continue
        if clip.end_site[i]:
            out.append(f"{ind}End Site")
        else:
            out.append(f"{ind}{'ROOT' if clip.parents[i] < 0 else 'JOINT'} {clip.names[i]}")
        out.append(f"{ind}{{")
        out.append(f"{ind}\tOFFSET " + " ".join(_fmt(v) for v in clip.offsets[i]))
        if not clip.end_site[i]:
            out.append(f"{ind}\tCHANNELS {len(clip.channels[i])}" +
                       "".join(" " + c for c in clip.channels[i]))
        stack.append((i, depth, True))
        stack.extend((j, depth + 1, False) for j in reversed(kids[i]))
    out += ["MOTION", f"Frames: {clip.n_frames}", f"Frame Time: {_fmt(clip.frame_time)}"]
    row = " ".join(["%.15g"] * clip.dof)
    with atomic_open(path, "w", newline="\n") as f:
        f.write("\n".join(out) + "\n")
        for a in range(0, clip.n_frames, 4096):  # streamed in chunks: no second copy of the whole clip
            values = np.asarray(clip.frames[a:a + 4096], dtype=np.float64).copy()
            values[:, clip.rotation_mask] = np.rad2deg(values[:, clip.rotation_mask])
            f.write("".join(row % tuple(r) + "\n" for r in values.tolist()))
