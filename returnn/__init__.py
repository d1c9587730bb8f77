"""RETURNN-style TensorFlow training engine."""
