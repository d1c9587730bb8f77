"""``eval_output_file`` of ``task = "eval"``: RETURNN's ``eval_model`` writes the scores of each
evaluated dataset there, ``better_repr({dataset: {"score": {"cost:<layer>": v}, "error": {"error:<layer>":
v}}})`` (its multi-line form: sorted keys, a dict whose items are 40 characters or more one item a line)."""
from __future__ import annotations

import math
from typing import Any, Dict, List


def returnn_better_repr(obj: Any) -> str:
    """RETURNN's ``util.basic.better_repr`` (deterministic ``repr``; big dicts and lists one item a line)."""
    if isinstance(obj, list):
        return "[\n%s]" % "".join(returnn_better_repr(v) + ",\n" for v in obj)
    if isinstance(obj, tuple):
        if len(obj) == 1:
            return "(%s,)" % obj[0]
        return "(%s)" % ", ".join(returnn_better_repr(v) for v in obj)
    if isinstance(obj, dict):
        items = [returnn_better_repr(k) + ": " + returnn_better_repr(v) for k, v in sorted(obj.items())]
        if sum(len(v) for v in items) >= 40:
            return "{\n%s}" % "".join(v + ",\n" for v in items)
        return "{%s}" % ", ".join(items)
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return "float('%s')" % repr(obj)
    return repr(obj)


def runner_scores(scores: Dict[str, float], labels: List[str]) -> Dict[str, Dict[str, float]]:
    """This engine's scores of a dataset (``score``/``error``, or ``score_<label>`` per loss) as RETURNN's
    Runner keeps them: ``{"score": {"cost:<label>": v}, "error": {"error:<label>": v}}``."""
    out: Dict[str, Dict[str, float]] = {"score": {}, "error": {}}
    for label in labels:
        for kind, prefix in (("score", "cost:"), ("error", "error:")):
            key = kind if len(labels) == 1 else "%s_%s" % (kind, label)
            if key in scores:
                out[kind][prefix + label] = float(scores[key])
    return out


def write_eval_output(path: str, results: Dict[str, Dict[str, Dict[str, float]]]) -> None:
    """The file RETURNN's eval_model writes (replacing an existing one)."""
    from returnn.interrupts import raise_if_stop_pending
    raise_if_stop_pending()  # a stop signal that C code cleared on the way: nothing is written
    with open(path, "w") as f:
        f.write(returnn_better_repr(results) + "\n")
