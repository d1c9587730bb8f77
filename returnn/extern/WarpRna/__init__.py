"""RETURNN's wrapper of warp-rna (``from returnn.extern.WarpRna import rna_loss``): the RNA loss, as TF
ops (returnn/tf/transducer_losses.py) instead of the compiled kernel."""
from returnn.tf.transducer_losses import rna_loss  # noqa: F401


def init_warprna(verbose: bool = False) -> None:
    """RETURNN compiles the kernel here; nothing to compile for the TF ops."""
