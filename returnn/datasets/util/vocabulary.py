"""RETURNN's module path of the vocabularies (``from returnn.datasets.util.vocabulary import Vocabulary``):
the classes of :mod:`returnn.datasets.vocabulary`."""
from returnn.datasets.vocabulary import BytePairEncoding, CharacterTargets, Vocabulary

__all__ = ["BytePairEncoding", "CharacterTargets", "Vocabulary"]
