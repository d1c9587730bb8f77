"""The environment a Python config runs in: RETURNN's old module names and TF1 names.

Two mechanisms, both installed by :class:`returnn.config.Config` before it runs a Python config:

- **Old module names.** Configs import ``Util``, ``TFUtil``, ``Pretrain``, ``returnn.TFUtil``, ...
  (RETURNN's flat layout before 2020). A finder at the *end* of ``sys.meta_path`` maps those names
  to the modules of this package (:data:`OLD_MODULE_NAMES`); it is asked only after the normal
  import found nothing, so a user's own ``Util.py`` next to the config still wins. ``import TFUtil``
  gives the very module ``returnn.tf.util.basic``, not a copy. The finder stays installed, since
  functions a config defines may import later (at network construction).
- **TF1 names.** The config's namespace gets builtins whose ``__import__`` hands out
  :func:`returnn.tf.compat.tf_with_v1_names` for ``import tensorflow``: TF2 plus the names only
  ``tf.compat.v1`` has. Functions defined in the config keep these builtins, so code they run
  later (eval layers, ``get_network``, pretrain construction algorithms) sees the same names.
  Python modules the config imports from elsewhere see plain TensorFlow.
- **os.getlogin without a terminal.** Configs build paths from ``os.getlogin()``, which fails
  with ``OSError`` when the process has no controlling terminal (batch jobs, ``nohup``, pipes).
  :func:`install_getlogin_fallback` makes it fall back to the user name of the process (as
  ``getpass.getuser()``: ``LOGNAME``/``USER``/... or the password database), process-wide.
"""
from __future__ import annotations

import builtins
import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any, Dict, Optional

# old (RETURNN < 2020) module name -> module here
OLD_MODULE_NAMES: Dict[str, str] = {
    "Config": "returnn.config",
    "Dataset": "returnn.datasets.base",
    "GeneratingDataset": "returnn.datasets.generating",
    "HDFDataset": "returnn.datasets.hdf",
    "HyperParamTuning": "returnn.tf.hyper_param_tuning",  # not here: its task is refused (RETURNN fails on its demo)
    "LearningRateControl": "returnn.learning_rate_control",
    "LmDataset": "returnn.datasets.lm",
    "Log": "returnn.log",
    "MetaDataset": "returnn.datasets.meta",
    "Pretrain": "returnn.pretrain",
    "TFCompat": "returnn.tf.compat",
    "TFEngine": "returnn.tf.engine",
    "TFHorovod": "returnn.tf.horovod",
    "TFNetwork": "returnn.tf.network",
    "TFNetworkLayer": "returnn.tf.layers.basic",
    "TFNetworkRecLayer": "returnn.tf.layers.rec",
    "TFUtil": "returnn.tf.util.basic",
    "Util": "returnn.util.basic",
}


# old (RETURNN < 2020: its root on sys.path) package -> package here, with its submodules
# (``from extern.HawkAaronWarpTransducer import rnnt_loss`` in the 2020 transducer configs)
OLD_PACKAGE_NAMES: Dict[str, str] = {"extern": "returnn.extern"}


def _target_of(fullname: str) -> Optional[str]:
    """The module an old name stands for: ``TFUtil`` and ``returnn.TFUtil`` -> returnn.tf.util.basic;
    ``extern.X`` -> returnn.extern.X."""
    for old, new in OLD_PACKAGE_NAMES.items():
        if fullname == old or fullname.startswith(old + "."):
            return new + fullname[len(old):]
    if fullname.startswith("returnn."):
        fullname = fullname[len("returnn."):]
    return OLD_MODULE_NAMES.get(fullname)


class _AliasLoader(importlib.abc.Loader):
    """Loads an old name as the existing new module object."""

    def __init__(self, old: str, target: str):
        self.old, self.target = old, target

    def create_module(self, spec):
        try:
            return importlib.import_module(self.target)
        except ModuleNotFoundError as exc:
            if exc.name != self.target:
                raise
            raise ModuleNotFoundError("No module named %r (RETURNN's old name for %s, which this engine does not "
                                      "have)" % (self.old, self.target), name=self.old) from None

    def exec_module(self, module) -> None:
        pass  # already executed under its new name


class OldModuleFinder(importlib.abc.MetaPathFinder):
    """Finds RETURNN's old module names (see :data:`OLD_MODULE_NAMES`)."""

    def find_spec(self, fullname: str, path=None, target=None):
        new = _target_of(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(fullname, new))


_finder = OldModuleFinder()


def install_old_module_names() -> None:
    """Appends the old-name finder to ``sys.meta_path`` (once)."""
    if _finder not in sys.meta_path:
        sys.meta_path.append(_finder)


def _getlogin_with_fallback() -> str:
    """``os.getlogin()``, or the process's user name when there is no controlling terminal."""
    try:
        return _real_getlogin()
    except OSError:
        import getpass
        return getpass.getuser()


_real_getlogin = None


def install_getlogin_fallback() -> None:
    """Makes ``os.getlogin`` fall back to the process's user name (once)."""
    global _real_getlogin
    import os
    if _real_getlogin is None:
        _real_getlogin = os.getlogin
        os.getlogin = _getlogin_with_fallback


def _config_import(name: str, globals=None, locals=None, fromlist=(), level: int = 0) -> Any:
    """``__import__`` of config code: ``tensorflow`` comes with its TF1 names."""
    module = builtins.__import__(name, globals, locals, fromlist, level)
    if level == 0 and name.split(".", 1)[0] == "tensorflow" and module is sys.modules.get("tensorflow"):
        from returnn.tf.compat import tf_with_v1_names
        return tf_with_v1_names()
    return module


def config_builtins() -> Dict[str, Any]:
    """Builtins for a config namespace (``namespace["__builtins__"]``)."""
    names = dict(builtins.__dict__)
    names["__import__"] = _config_import
    return names
