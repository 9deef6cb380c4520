"""Browser viewer: drag targets, pick a method, watch it solve (viser, the ``[viewer]`` extra).

>>> from invkin.viewer import ViewerApp
>>> app = ViewerApp("panda", port=0).start()     # doctest: +SKIP
>>> app.set_target([0.4, 0.1, 0.5])              # doctest: +SKIP
>>> app.current_q, app.url                        # doctest: +SKIP
>>> app.stop()                                    # doctest: +SKIP

viser is imported only when a viewer starts, so ``import invkin.viewer`` works without it;
:meth:`ViewerApp.start` raises :class:`ViewerError` with the install command when it is missing.
"""
from __future__ import annotations

from ..lazy import lazy_exports

DEMOS = ("panda", "tentacle", "two-bone", "reach")  # `invkin demo NAME`, demo_app; here, the parser stays light

__getattr__, __dir__ = lazy_exports(__name__, {
    name: ".app" for name in ("SCENES", "PortInUseError", "ViewerApp", "ViewerError", "demo_app")})

__all__ = ["ViewerApp", "ViewerError", "PortInUseError", "demo_app", "DEMOS", "SCENES"]
