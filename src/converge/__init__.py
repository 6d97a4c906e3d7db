"""converge: a convergence orchestration engine for Heat (HOT) templates."""

__version__ = "0.1.0"
