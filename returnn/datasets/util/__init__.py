"""RETURNN's ``returnn.datasets.util`` package path, as configs import from it (``.vocabulary``)."""
