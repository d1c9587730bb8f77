#!/usr/bin/env python3
"""Rewrites the generated parts of the docs from the registries: the blocks of
returnn/util/doc_blocks.py (README's table of what is supported, docs/compat.md's layer and unit
tables) and docs/config-keys.md. --check: print what is outdated and exit 1 (nothing written)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from returnn.util.environment import ensure_packages  # noqa: E402

ensure_packages(("tensorflow", "numpy"), "tools/gen-docs.py")


def main() -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from returnn.config_keys.docs import DOC_PATH, markdown
    from returnn.util.doc_blocks import BLOCKS, FILES, replace_block
    check = "--check" in sys.argv[1:]
    wanted = {DOC_PATH: markdown() + "\n"}
    for name, producer in BLOCKS.items():
        path = FILES[name]
        with open(os.path.join(ROOT, path), encoding="utf8") as f:
            text = wanted.get(path, f.read())
        wanted[path] = replace_block(text, name, producer())
    outdated = []
    for path, text in wanted.items():
        full = os.path.join(ROOT, path)
        with open(full, encoding="utf8") as f:
            if f.read() == text:
                continue
        outdated.append(path)
        if not check:
            with open(full, "w", encoding="utf8") as f:
                f.write(text)
    if check and outdated:
        print("out of date: %s (run tools/gen-docs.py)" % ", ".join(outdated), file=sys.stderr)
        return 1
    for path in outdated:
        print("wrote %s" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
