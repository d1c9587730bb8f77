#!/usr/bin/env python3
"""Differential check of the text datasets against the real RETURNN (issue 27: the model sees the same
inputs): ``TranslationDataset`` (source and target lines, vocabularies, postfixes, unknown labels, source only,
seq lists) and ``LmDataset`` over a random corpus, its symbols given as ``orth_symbols_file`` (characters or words),
``orth_symbols_map_file`` ("symbol index" lines or a dict literal), or ``orth_vocab`` (a ``Vocabulary`` from
a dict-literal or line-based vocab file, a ``BytePairEncoding`` with random merges, ``CharacterTargets``),
with ``word_based``, ``word_end_symbol``, ``seq_end_symbol``, ``unknown_symbol``,
``auto_replace_unknown_symbol``, ``add_delayed_seq_data``, ``skip_empty_lines``, ``orth_replace_map_file``,
``seq_ordering`` and ``partition_epoch``. Lines have extra spaces, empty lines, unknown words and symbols,
non-ASCII letters. Both engines give, for epochs 1 and 2, every sequence's tag and its values per data key
(and the labels of ``data``); they must be equal.

Verdicts: AGREE, BOTH-FAIL, DIFFER, LAX (runs here, RETURNN fails), GAP (RETURNN runs, refused here).

Usage: .venv/bin/python benchmarks/returnn_fuzz_text_datasets.py [--seed S] [--n N] [--show DIFFER LAX GAP]
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sys
import tempfile
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import returnn_fuzz_pyside as pyside  # noqa: E402
WORDS = ["hello", "world", "the", "cat", "a", "dog", "sat", "übung", "[NOISE]", "mat"]
SPECIALS = ["[END]", "[UNKNOWN]", "[START]"]


def _corpus(rng: random.Random) -> List[str]:
    lines = []
    for _ in range(rng.randint(1, 8)):
        if rng.random() < 0.1:
            lines.append("")
            continue
        words = [rng.choice(WORDS + ["zebra", "qq"]) for _ in range(rng.randint(1, 6))]
        sep = rng.choice([" ", " ", "  "])
        lines.append((" " if rng.random() < 0.1 else "") + sep.join(words) + (" " if rng.random() < 0.1 else ""))
    return lines


def _bpe(rng: random.Random, known: List[str]):
    """Random merges over the letters of the known words, and a vocab of the pieces they make."""
    merges, pieces = [], set()
    for w in known:
        if w.startswith("["):
            continue
        letters = list(w)
        for i in range(len(letters) - 1):
            if rng.random() < 0.5:
                merges.append("%s %s" % (letters[i], letters[i + 1]))
    merges = list(dict.fromkeys(merges))
    letters = sorted({c for w in known if not w.startswith("[") for c in w})
    pieces = ["<s>", "</s>", "<unk>"] + [c for c in letters] + [c + "@@" for c in letters]
    for m in merges:
        joined = m.replace(" ", "")
        pieces += [joined, joined + "@@"]
    return ["#version: 0.2"] + merges, list(dict.fromkeys(pieces))


def _translation_case(rng: random.Random) -> Dict[str, Any]:
    """A ``TranslationDataset``: source and target lines (as many), vocabularies as RETURNN's pickles and as the
    text files this engine reads (the same dicts)."""
    n = rng.randint(1, 6)
    files: Dict[str, Any] = {}
    opts: Dict[str, Any] = {"class": "TranslationDataset", "path": ".", "file_postfix": "train"}
    for prefix in ("source", "target"):
        known = rng.sample(WORDS, rng.randint(3, len(WORDS)))
        vocab = {w: i for i, w in enumerate(["<S>", "</S>", "<UNK>"] + known)}
        if rng.random() < 0.2:
            vocab["<s>"] = 0  # two labels of one index: RETURNN's labels take the last in sorted order
        files["%s.vocab.txt" % prefix] = repr(vocab)
        files["__pickle__%s.vocab.pkl" % prefix] = vocab
        files["%s.train" % prefix] = "\n".join(" ".join(rng.choice(known + ["qq"] * (rng.random() < 0.3))
                                                        for _ in range(rng.randint(0, 5))) for _ in range(n)) + "\n"
    extra = {
        "source_postfix": lambda: rng.choice(["", " </S>"]),
        "target_postfix": lambda: rng.choice(["", " </S>"]),
        "unknown_label": lambda: rng.choice([None, "<UNK>", {"data": "<UNK>", "classes": None}]),
        "source_only": lambda: rng.choice([True, False]),
        "seq_ordering": lambda: rng.choice(["default", "sorted", "sorted_reverse", "random", "laplace:2"]),
        "partition_epoch": lambda: rng.choice([1, 2]),
    }
    for key in rng.sample(sorted(extra), rng.randint(0, 4)):
        opts[key] = extra[key]()
    if rng.random() < 0.15:
        files["seqs.txt"] = "\n".join(str(rng.randrange(n)) for _ in range(rng.randint(1, 4))) + "\n"
        opts["seq_list_file"] = "seqs.txt"
    return {"files": files, "dataset": opts}


def draw_case(seed: int, index: int) -> Dict[str, Any]:
    rng = random.Random(seed * 100003 + index)
    if rng.random() < 0.25:
        return dict(_translation_case(rng), name="text_%i_%i" % (seed, index))
    files: Dict[str, str] = {"corpus.txt": "\n".join(_corpus(rng)) + "\n"}
    opts: Dict[str, Any] = {"class": "LmDataset", "corpus_file": "corpus.txt"}
    kind = rng.choice(["chars", "words_list", "words_map", "words_map_dict", "vocab", "vocab_lines", "bpe", "chars_vocab"])
    known = rng.sample(WORDS, rng.randint(3, len(WORDS)))
    if kind == "chars":
        chars = sorted({c for w in known for c in w}) + [" "]
        symbols = SPECIALS + chars if rng.random() < 0.8 else chars
        files["symbols.txt"] = "\n".join(symbols) + "\n"
        opts["orth_symbols_file"] = "symbols.txt"
    elif kind == "words_list":
        files["symbols.txt"] = "\n".join(SPECIALS + known) + "\n"
        opts.update(orth_symbols_file="symbols.txt", word_based=True)
    elif kind in ("words_map", "words_map_dict"):
        symbols = SPECIALS + known
        if kind == "words_map":
            files["map.txt"] = "\n".join("%s %i" % (s, i) for i, s in enumerate(symbols)) + "\n"
        else:
            files["map.txt"] = repr({s: i for i, s in enumerate(symbols)})
        opts.update(orth_symbols_map_file="map.txt", word_based=True)
    else:
        vocab: Dict[str, Any]
        if kind == "bpe":
            codes, pieces = _bpe(rng, known)
            files["codes.txt"] = "\n".join(codes) + "\n"
            files["vocab.txt"] = repr({p: i for i, p in enumerate(pieces)})
            vocab = {"class": "BytePairEncoding", "bpe_file": "codes.txt", "vocab_file": "vocab.txt",
                     "unknown_label": "<unk>"}
        elif kind == "chars_vocab":
            chars = ["<unk>", "</s>"] + sorted({c for w in known for c in w}) + [" "]
            files["vocab.txt"] = repr({c: i for i, c in enumerate(chars)})
            vocab = {"class": "CharacterTargets", "vocab_file": "vocab.txt", "unknown_label": "<unk>"}
        else:
            labels = ["<s>", "</s>", "<unk>"] + known
            files["vocab.txt"] = repr({w: i for i, w in enumerate(labels)}) if kind == "vocab" else "\n".join(labels)
            vocab = {"vocab_file": "vocab.txt", "unknown_label": rng.choice(["<unk>", "<unk>", None])}
        if rng.random() < 0.4:
            vocab["seq_postfix"] = [1]
        opts["orth_vocab"] = vocab
    symbol_opts = {
        "seq_end_symbol": lambda: rng.choice(["[END]", None]),
        "unknown_symbol": lambda: rng.choice(["[UNKNOWN]", None]),
        "auto_replace_unknown_symbol": lambda: rng.choice([True, False]),
        "word_end_symbol": lambda: rng.choice([None, " "]) if kind == "chars" else None,
        "add_delayed_seq_data": lambda: rng.choice([True, False]),
        "skip_empty_lines": lambda: rng.choice([True, False]),
        "error_on_invalid_seq": lambda: rng.choice([True, False]),
        "seq_ordering": lambda: rng.choice(["default", "sorted", "sorted_reverse", "random", "laplace:2"]),
        "partition_epoch": lambda: rng.choice([1, 2]),
    }
    for key in rng.sample(sorted(symbol_opts), rng.randint(0, 5)):
        value = symbol_opts[key]()
        if value is not None or key in ("seq_end_symbol", "unknown_symbol"):
            opts[key] = value
    if rng.random() < 0.1 and kind in ("words_list", "words_map"):
        files["replace.json"] = json.dumps({"cat": "dog", "zebra": "mat"})
        opts["orth_replace_map_file"] = "replace.json"
    return {"name": "text_%i_%i" % (seed, index), "files": files, "dataset": opts}


def _paths(value: Any, base: str) -> Any:
    """File names of the options (``*_file``, ``path``) as paths in ``base``."""
    if isinstance(value, dict):
        return {k: _paths(v, base) if k.endswith("_file") or k == "path" or isinstance(v, dict) else v
                for k, v in value.items()}
    return os.path.normpath(os.path.join(base, value)) if isinstance(value, str) else value


def run_cases(cases_file: str, out_file: str, work: str) -> None:
    """Runs in either engine's Python (``returnn`` on the path)."""
    import numpy as np
    from returnn.datasets import init_dataset

    def timeout(*_args):
        raise TimeoutError("no result within 20 s")
    signal.signal(signal.SIGALRM, timeout)
    with open(cases_file) as f:
        cases = json.load(f)
    results = {}
    for case in cases:
        base = os.path.join(work, case["name"])
        os.makedirs(base, exist_ok=True)
        for name, text in case["files"].items():
            if name.startswith("__pickle__"):  # RETURNN's TranslationDataset vocabulary (this engine reads the .txt)
                import pickle
                with open(os.path.join(base, name[len("__pickle__"):]), "wb") as f:
                    pickle.dump(text, f)
                continue
            with open(os.path.join(base, name), "w", encoding="utf8") as f:
                f.write(text)
        epochs = []
        signal.alarm(20)  # RETURNN loops forever on some (an unknown symbol replaced by an unknown one)
        try:
            ds = init_dataset(_paths(case["dataset"], base))
            for epoch in (1, 2):
                ds.init_seq_order(epoch=epoch)
                seqs, i = [], 0
                while ds.is_less_than_num_seqs(i) and i < 100:
                    ds.load_seqs(i, i + 1)
                    seqs.append([ds.get_tag(i)] + [[k, np.asarray(ds.get_data(i, k)).tolist()]
                                                   for k in sorted(ds.get_data_keys())])
                    i += 1
                epochs.append(seqs)
            labels = getattr(ds, "labels", {}) or {}
            results[case["name"]] = {"epochs": epochs, "labels": list(labels.get("data") or [])}
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 -- a refusal is a verdict (RETURNN's loader
            # thread interrupts the main thread on its errors)
            results[case["name"]] = {"epochs": epochs, "error": ("%s: %s" % (type(exc).__name__, exc)).splitlines()[0][:200]}
        signal.alarm(0)
        shutil.rmtree(base, ignore_errors=True)
    with open(out_file, "w") as f:
        json.dump(results, f)


def verdict(ours: Dict[str, Any], theirs: Dict[str, Any]) -> str:
    failed = pyside.error_verdict(ours, theirs)
    if failed == "BOTH-FAIL" and ours["epochs"] != theirs["epochs"]:
        return "DIFFER"  # both stopped, after other sequences
    if failed:
        return failed
    same = ours["epochs"] == theirs["epochs"] and (not theirs["labels"] or ours["labels"] == theirs["labels"])
    return "AGREE" if same else "DIFFER"


def _describe(case: Dict[str, Any], ours: Dict[str, Any], theirs: Dict[str, Any]) -> str:
    return "%s\n          files   %s\n          here    %s\n          RETURNN %s" % (
        json.dumps(case["dataset"]), pyside.short(case["files"]), pyside.short(ours), pyside.short(theirs))


def main(argv: Optional[List[str]] = None) -> int:
    args = pyside.start(__doc__, 200, run_cases, argv)
    if args is None:
        return 0 if "--run" in (argv or sys.argv) else 2
    cases = [draw_case(args.seed, i) for i in range(args.n)]
    with tempfile.TemporaryDirectory(prefix="fuzz_text_") as tmp:
        theirs, ours = pyside.both_engines(__file__, args.returnn_python, cases, tmp,
                                           extra=lambda name: [os.path.join(tmp, name + "_work")])
    pyside.report("text datasets", args.seed, cases, ours, theirs, verdict, args.show, _describe)
    return 0


if __name__ == "__main__":
    sys.exit(main())
