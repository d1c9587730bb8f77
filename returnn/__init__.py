"""RETURNN-style TensorFlow training engine."""

__version__ = "0.1.0"
