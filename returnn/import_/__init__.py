"""RETURNN's ``import_``: configs import Python code of other Git repositories at a fixed version.

``import_("github.com/rwth-i6/returnn-experiments", "common", "20210324-75f7809")`` makes sure a
working tree of that repository at that commit exists under the package directory
(:func:`returnn.import_.common.package_path`: ``RETURNN_PKG_PATH``, default ``~/returnn/pkg``; a
missing repository is cloned with ``git clone https://HOST/PATH``, a missing commit fetched), links
it into ``returnn_import`` (under ``RETURNN_PKG_IMPORT_PATH``, default ``~/returnn/_pkg_import``, put
on ``sys.path``) and returns the module; afterwards ``from returnn_import.github_com.rwth_i6.
returnn_experiments.v20210324123103_75f78096518b.common... import ...`` works (the version in module
names is the commit's full date and 12 hex digits, as RETURNN names its working trees). Without a
version, the repository's development working tree (the clone itself) is used, module part ``dev``.
The layout on disk is RETURNN's, so package directories RETURNN filled can be shared.
"""
from returnn.import_.import_ import import_

__all__ = ["import_"]
