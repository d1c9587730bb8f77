"""TensorFlow backend: layers, activations, losses."""
