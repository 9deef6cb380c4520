"""Forward kinematics and Jacobian kernels (Numba). The Robot methods are the public entry points."""
from .kernels import BALL, FIXED, PRISMATIC, REVOLUTE

__all__ = ["FIXED", "REVOLUTE", "PRISMATIC", "BALL"]
