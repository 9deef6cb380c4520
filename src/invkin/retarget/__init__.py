"""Motion retargeting: human motion capture (BVH) onto humanoid robots.

:func:`retarget` maps a clip's joints onto a robot's links (a :class:`Mapping`, from a TOML/JSON
file or bundled), scales the motion per limb segment, detects the feet's contacts on the source
and solves every frame warm-started from the previous one in one kernel call: feet in contact held
as hard goals, joint limits and velocity bounds hard, self-collision and the floor kept out as
inequality rows. The result is a :class:`RobotMotion` (``.npz``/``.csv``) with a
:class:`RetargetReport` measured on the output.
"""
from __future__ import annotations

from ..lazy import lazy_exports

_LAZY = {
    "retarget": ".core", "RobotMotion": ".motion", "read_motion": ".motion", "RetargetReport": ".report",
    "Mapping": ".mapping", "Body": ".mapping", "MappingError": ".mapping", "load_mapping": ".mapping",
    "bundled_mapping": ".mapping", "bundled_mappings": ".mapping", "propose_mapping": ".mapping",
}
__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
