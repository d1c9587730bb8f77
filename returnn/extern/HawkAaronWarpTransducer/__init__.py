"""RETURNN's wrapper of warp-transducer (``from returnn.extern.HawkAaronWarpTransducer import rnnt_loss``):
the RNN-T loss, as TF ops (returnn/tf/transducer_losses.py) instead of the compiled kernel."""
from returnn.tf.transducer_losses import rnnt_loss  # noqa: F401


def init_warprnnt(verbose: bool = False) -> None:
    """RETURNN compiles the kernel here; nothing to compile for the TF ops."""
