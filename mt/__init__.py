"""mt: a readable, fast neural machine translation toolkit built around the Transformer."""

__version__ = "0.1.0"
