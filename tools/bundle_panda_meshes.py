"""Write the bundled Panda visual meshes: example-robot-data's DAE files, decimated, as GLB.

    python tools/bundle_panda_meshes.py /path/to/example-robot-data/robots/panda_description

Each link's DAE is read through the viewer's loader (parts grouped by material colour, quadric
decimation to MAX_FACES triangles per file) and written as one binary glTF with one PBR material
per colour, to src/invkin/data/robots/panda_description/meshes/visual/. Run once; the output is
committed (see src/invkin/data/robots/SOURCES.md).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import trimesh

from invkin.viewer.meshes import _read_file

MAX_FACES = 1500
LINKS = ["link0", "link1", "link2", "link3", "link4", "link5", "link6", "link7", "hand"]
OUT = Path(__file__).resolve().parents[1] / "src/invkin/data/robots/panda_description/meshes/visual"


def main(src: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in LINKS:
        scene = trimesh.Scene()
        for k, (V, F, c) in enumerate(_read_file(str(Path(src) / "meshes/visual" / f"{name}.dae"), MAX_FACES)):
            rgba = np.asarray(c if c is not None else (0.8, 0.8, 0.8, 1.0), dtype=float)
            mat = trimesh.visual.material.PBRMaterial(baseColorFactor=(rgba * 255).astype(np.uint8),
                                                      metallicFactor=0.0, roughnessFactor=0.6)
            m = trimesh.Trimesh(V, F, process=False, visual=trimesh.visual.TextureVisuals(material=mat))
            scene.add_geometry(m, geom_name=f"{name}_{k}")
        data = scene.export(file_type="glb")
        (OUT / f"{name}.glb").write_bytes(data)
        print(f"{name}.glb: {sum(len(g.faces) for g in scene.geometry.values())} faces, {len(data)} bytes")


if __name__ == "__main__":
    main(sys.argv[1])
