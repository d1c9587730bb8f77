"""Reading the text files text datasets use: corpora (plain or gzipped), symbol lists and maps
(vocabularies), sequence lists.

No data file is ever executed or unpickled: a vocabulary is a text file (one symbol per line, or
``<symbol> <index>`` per line) or a Python dict literal (``{"a": 0, "b": 1}``, parsed with
``ast.literal_eval``). A pickle file (RETURNN's ``*.vocab.pkl``, ``*.pkl`` sequence lists) is
refused with one line that says how to convert it once.
"""
from __future__ import annotations

import ast
import gzip
import os
from typing import Dict, Iterator, List, Tuple, Union

from returnn.errors import DataError

PICKLE_HINT = ("this engine never unpickles data files; convert it once to a text file, e.g. "
               "python3 -c \"import pickle,sys; print(repr(pickle.load(open(sys.argv[1], 'rb'))))\" %s > %s")


def _open_binary(path: str, what: str):
    if not os.path.exists(path):
        raise DataError("%s: file not found: %s" % (what, path))
    if os.path.isdir(path):
        raise DataError("%s: %s is a directory, expected a text file" % (what, path))
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise DataError("%s: cannot read %s: %s" % (what, path, exc.strerror or exc))
    if path.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    return raw


def _check_not_pickle(path: str, head: bytes, what: str) -> None:
    if head[:1] == b"\x80" or head.startswith((b"(dp", b"(lp", b"}q", b"]q")):
        txt = path[:-4] + ".txt" if path.endswith(".pkl") else path + ".txt"
        raise DataError("%s: %s is a pickle file; %s" % (what, path, PICKLE_HINT % (path, txt)))


def _raw_lines(path: str, what: str) -> Iterator[bytes]:
    """The lines of a text file (``.gz`` decompressed) as bytes, without their newline; a read error is one
    DataError naming the file."""
    f = _open_binary(path, what)
    try:
        for raw in f:
            yield raw[:-1] if raw.endswith(b"\n") else raw
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise DataError("%s: cannot read %s: %s" % (what, path, str(exc).splitlines()[0] if str(exc) else exc))
    finally:
        f.close()


def _decoded(raw: bytes) -> str:
    """UTF-8, else Latin-1."""
    try:
        return raw.decode("utf8")
    except UnicodeDecodeError:
        return raw.decode("latin_1")


def read_lines(path: str, what: str, skip_empty: bool = False) -> Iterator[str]:
    """Lines of a text file (``.gz`` is decompressed), stripped; UTF-8, else Latin-1 per line."""
    for raw in _raw_lines(path, what):
        line = _decoded(raw).strip()
        if not (skip_empty and not line):
            yield line


def read_corpus_lines(path: str, what: str, skip_empty: bool) -> Iterator[Tuple[str, int]]:
    """RETURNN's LmDataset lines of a text file, each stripped, with the size its orderings sort by: a plain
    file's line as it is in bytes (so a line of blanks is not empty: it is kept with ``skip_empty``), a gzipped
    file's line stripped (skipped when empty)."""
    gz = path.endswith(".gz")
    for raw in _raw_lines(path, what):
        size = len(raw.strip()) if gz else len(raw)
        if not (skip_empty and not size):
            yield _decoded(raw).strip(), size


def is_bliss(path: str, what: str) -> bool:
    """Whether ``path`` (maybe ``.gz``) is an XML file (a Bliss corpus) rather than plain text."""
    f = _open_binary(path, what)
    try:
        head = f.read(256).lstrip()
    except (OSError, EOFError, gzip.BadGzipFile):
        return False
    finally:
        f.close()
    return head.startswith((b"<?xml", b"<corpus"))


def read_bliss_orths(path: str, what: str) -> Iterator[str]:
    """The ``<orth>`` text of each ``<segment>`` of a Bliss XML corpus (white space collapsed), as
    RETURNN's LmDataset reads it. Parsed with the standard library's XML parser; nothing is run."""
    from xml.etree import ElementTree
    f = _open_binary(path, what)
    try:
        context = ElementTree.iterparse(f, events=("start", "end"))
        _, root = next(context)
        if root.tag != "corpus":
            raise DataError("%s: %s: XML root is <%s>, expected a Bliss <corpus>" % (what, path, root.tag))
        for event, elem in context:
            if event == "end" and elem.tag == "segment":
                orth = elem.find("orth")
                yield " ".join(((orth.text or "") if orth is not None else "").split())
                root.clear()
    except (ElementTree.ParseError, OSError, EOFError, gzip.BadGzipFile, StopIteration) as exc:
        raise DataError("%s: %s: bad Bliss XML: %s" % (what, path, str(exc).splitlines()[0] if str(exc) else exc))
    finally:
        f.close()


def read_text(path: str, what: str, lossless: bool = False) -> str:
    """The whole file as text (UTF-8); pickles are refused. ``lossless``: bytes that are not UTF-8
    become surrogate escapes (as sequence tags read from HDF files), instead of an error."""
    f = _open_binary(path, what)
    try:
        data = f.read()
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise DataError("%s: cannot read %s: %s" % (what, path, exc))
    finally:
        f.close()
    _check_not_pickle(path, data[:64], what)
    if lossless:
        return data.decode("utf8", "surrogateescape")
    try:
        return data.decode("utf8")
    except UnicodeDecodeError as exc:
        raise DataError("%s: %s is not UTF-8 text (byte %i)" % (what, path, exc.start))


def parse_literal(text: str, path: str, what: str, keys: str = "key"):
    """The Python literal ``text`` of file ``path`` (``ast.literal_eval``: nothing is run). A dict
    display with one key twice (``{'utt-1': 5, 'utt-1': 7}``), which Python silently reads as its
    last value, is a DataError naming the file, the line and the key (``keys`` says what the keys
    are, e.g. "sequence tag"): the file says two things about one key."""
    try:
        tree = ast.parse(text, mode="eval")
        _refuse_duplicate_keys(tree, path, what, keys)
        return ast.literal_eval(tree)
    except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise DataError("%s: %s is not a Python literal: %s" % (what, path, str(exc).splitlines()[0]))


def _refuse_duplicate_keys(tree: ast.AST, path: str, what: str, keys: str) -> None:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        seen: Dict[object, int] = {}
        for key in node.keys:
            if not isinstance(key, ast.Constant):
                continue  # ``**x`` or a non-literal: literal_eval refuses it
            ident = key.value  # equal as dict keys (1, 1.0 and True too)
            if ident in seen:
                raise DataError("%s: %s:%i: %s %r occurs twice (also at line %i); a dict keeps only one of the two "
                                "values, so the file is ambiguous" % (what, path, key.lineno, keys, key.value,
                                                                      seen[ident]))
            seen[ident] = key.lineno


def load_symbol_list(path: str, what: str) -> List[str]:
    """One symbol per line; the index is the line number (RETURNN's ``orth_symbols_file``)."""
    text = read_text(path, what)
    return text.splitlines()


def load_symbol_map(path: str, what: str) -> Dict[str, int]:
    """A symbol -> index map: a dict literal ``{"a": 0, ...}``, or lines ``<symbol> <index>``, or
    (no index column) one symbol per line numbered by line."""
    text = read_text(path, what)
    if text.lstrip().startswith("{"):
        value = parse_literal(text, path, what)
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                                                  for k, v in value.items()):
            raise DataError("%s: %s must be a dict of symbol -> int index" % (what, path))
        result = dict(value)
    else:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        pairs = [ln.rsplit(None, 1) for ln in lines]
        if pairs and all(len(p) == 2 and p[1].lstrip("-").isdigit() for p in pairs):
            result = {p[0]: int(p[1]) for p in pairs}
        else:
            result = {ln.strip(): i for i, ln in enumerate(lines)}
    if not result:
        raise DataError("%s: %s holds no symbols" % (what, path))
    if min(result.values()) < 0:
        raise DataError("%s: %s has a negative index" % (what, path))
    return result


def labels_of_map(symbols: Dict[str, int]) -> List[str]:
    """Label list by index (dim = max index + 1); when several symbols share an index, the
    lexically last wins (as RETURNN); gaps get ``<unused-i>``."""
    labels = ["<unused-%i>" % i for i in range(max(symbols.values()) + 1)]
    for sym, idx in sorted(symbols.items()):
        labels[idx] = sym
    return labels


def load_seq_list(path: Union[str, List[str]], what: str) -> Union[List[str], Dict[str, List[str]]]:
    """Sequence tags: a list, a text file with one tag per line (``.gz`` too), or a literal list
    or dict (dataset key -> list of tags, as in RETURNN's MetaDataset)."""
    if isinstance(path, (list, tuple)):
        return [str(t) for t in path]
    text = read_text(path, what, lossless=True)  # tags are compared with tags of data files, byte for byte
    if text.lstrip().startswith(("[", "{")):
        value = parse_literal(text, path, what, keys="dataset key")
        if isinstance(value, (list, tuple)):
            return [str(t) for t in value]
        if isinstance(value, dict) and all(isinstance(v, (list, tuple)) for v in value.values()):
            return {str(k): [str(t) for t in v] for k, v in value.items()}
        raise DataError("%s: %s must hold a list of sequence tags (or a dict of such lists)" % (what, path))
    return [ln.strip() for ln in text.split("\n") if ln.strip()]  # lines end at "\n" only (not at \x85 & co.)
