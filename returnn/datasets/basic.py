"""RETURNN's module path of the dataset base class and ``init_dataset`` (``returnn.datasets.basic``)."""
from returnn.datasets import DataInfo, Dataset, init_dataset, register_dataset  # noqa: F401

__all__ = ["DataInfo", "Dataset", "init_dataset", "register_dataset"]
