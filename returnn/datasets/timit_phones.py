"""TIMIT's phone sets as RETURNN's ``TimitDataset`` has them (class-level tables and functions that
configs use without reading audio, e.g. ``TimitDataset.get_label_map()`` for an edit-distance
``label_map`` mapping 61 phones to the 39 scored ones). The dataset itself needs audio decoding
and is refused (returnn/datasets/not_here.py)."""
from __future__ import annotations

from typing import Dict, List, Optional


class TimitPhones:
    """RETURNN's TIMIT phone maps: 61-phone set -> 48 / 39 phones (None: dropped)."""

    PhoneMapTo39 = {
        "aa": "aa",
        "ae": "ae",
        "ah": "ah",
        "ao": "aa",
        "aw": "aw",
        "ax": "ah",
        "ax-h": "ah",
        "axr": "er",
        "ay": "ay",
        "b": "b",
        "bcl": "sil",
        "ch": "ch",
        "d": "d",
        "dcl": "sil",
        "dh": "dh",
        "dx": "dx",
        "eh": "eh",
        "el": "l",
        "em": "m",
        "en": "n",
        "eng": "ng",
        "epi": "sil",
        "er": "er",
        "ey": "ey",
        "f": "f",
        "g": "g",
        "gcl": "sil",
        "h#": "sil",
        "hh": "hh",
        "hv": "hh",
        "ih": "ih",
        "ix": "ih",
        "iy": "iy",
        "jh": "jh",
        "k": "k",
        "kcl": "sil",
        "l": "l",
        "m": "m",
        "n": "n",
        "ng": "ng",
        "nx": "n",
        "ow": "ow",
        "oy": "oy",
        "p": "p",
        "pau": "sil",
        "pcl": "sil",
        "q": None,
        "r": "r",
        "s": "s",
        "sh": "sh",
        "t": "t",
        "tcl": "sil",
        "th": "th",
        "uh": "uh",
        "uw": "uw",
        "ux": "uw",
        "v": "v",
        "w": "w",
        "y": "y",
        "z": "z",
        "zh": "sh",
    }
    PhoneMapTo48 = {
        "aa": "aa",
        "ae": "ae",
        "ah": "ah",
        "ao": "ao",
        "aw": "aw",
        "ax": "ax",
        "ax-h": "ax",
        "axr": "er",
        "ay": "ay",
        "b": "b",
        "bcl": "vcl",
        "ch": "ch",
        "d": "d",
        "dcl": "vcl",
        "dh": "dh",
        "dx": "dx",
        "eh": "eh",
        "el": "el",
        "em": "m",
        "en": "en",
        "eng": "ng",
        "epi": "epi",
        "er": "er",
        "ey": "ey",
        "f": "f",
        "g": "g",
        "gcl": "vcl",
        "h#": "sil",
        "hh": "hh",
        "hv": "hh",
        "ih": "ih",
        "ix": "ix",
        "iy": "iy",
        "jh": "jh",
        "k": "k",
        "kcl": "cl",
        "l": "l",
        "m": "m",
        "n": "n",
        "ng": "ng",
        "nx": "n",
        "ow": "ow",
        "oy": "oy",
        "p": "p",
        "pau": "sil",
        "pcl": "cl",
        "q": None,
        "r": "r",
        "s": "s",
        "sh": "sh",
        "t": "t",
        "tcl": "cl",
        "th": "th",
        "uh": "uh",
        "uw": "uw",
        "ux": "uw",
        "v": "v",
        "w": "w",
        "y": "y",
        "z": "z",
        "zh": "zh",
    }
    Phones61 = PhoneMapTo39.keys()
    PhoneMapTo61 = {p: p for p in Phones61}

    @classmethod
    def _get_phone_map(cls, num_phones: int = 61) -> Dict[str, Optional[str]]:
        return {61: cls.PhoneMapTo61, 48: cls.PhoneMapTo48, 39: cls.PhoneMapTo39}[num_phones]

    @classmethod
    def _get_labels_by_phone_map(cls, phone_map: Dict[str, Optional[str]]) -> List[str]:
        labels = sorted(set(filter(None, phone_map.values())))
        first = "pau" if "pau" in labels else "sil"  # silence is label 0
        labels.remove(first)
        labels.insert(0, first)
        return labels

    @classmethod
    def get_labels(cls, num_phones: int = 61) -> List[str]:
        return cls._get_labels_by_phone_map(cls._get_phone_map(num_phones))

    @classmethod
    def get_label_map(cls, source_num_phones: int = 61, target_num_phones: int = 39) -> Dict[int, Optional[int]]:
        """Label index in the source phone set -> index in the target set (None: dropped)."""
        src_map = cls._get_phone_map(source_num_phones)
        src_labels = cls._get_labels_by_phone_map(src_map)
        tgt_map = cls._get_phone_map(target_num_phones)
        tgt_labels = cls._get_labels_by_phone_map(tgt_map)
        d = {i: src_labels[i] for i in range(source_num_phones)}
        if source_num_phones != 61:
            rev = {v: k for (k, v) in sorted(src_map.items())}
            d = {i: rev[v] for (i, v) in d.items()}
        d = {i: tgt_map[v] for (i, v) in d.items()}
        return {i: tgt_labels.index(v) if v else None for (i, v) in d.items()}
