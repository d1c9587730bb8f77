#!/usr/bin/env python3
"""Writes docs/config-keys.md from the key registry (returnn/config_keys/). --check: exit 1 if outdated."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from returnn.config_keys.docs import DOC_PATH, markdown  # noqa: E402


def main() -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, DOC_PATH)
    text = markdown() + "\n"
    if "--check" in sys.argv[1:]:
        with open(path, encoding="utf8") as f:
            if f.read() != text:
                print("%s is out of date: run tools/gen-config-keys-doc.py" % DOC_PATH, file=sys.stderr)
                return 1
        return 0
    with open(path, "w", encoding="utf8") as f:
        f.write(text)
    print("wrote %s" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
