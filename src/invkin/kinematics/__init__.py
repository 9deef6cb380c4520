"""Forward kinematics and Jacobian kernels (Numba). The Robot methods are the public entry points."""
from .kernels import BALL, FIXED, FREE, PLANAR, PRISMATIC, REVOLUTE

__all__ = ["FIXED", "REVOLUTE", "PRISMATIC", "BALL", "FREE", "PLANAR"]
