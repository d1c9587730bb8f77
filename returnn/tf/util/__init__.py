"""TensorFlow helpers under RETURNN's module names (``returnn.tf.util.basic`` = old ``TFUtil``)."""
