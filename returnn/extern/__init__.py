"""RETURNN's ``returnn.extern`` modules that configs import (the transducer losses, as TF ops here:
returnn/tf/transducer_losses.py)."""
