"""RETURNN's ``OpCodeCompiler`` (``from TFUtil import OpCodeCompiler``): a config's own C++ TensorFlow
op, compiled with the system's C++ compiler against the installed TensorFlow's headers and loaded
with ``tf.load_op_library``.

Configs are trusted code, so their C++ is too; what is guarded is the cache. The built library lives in
``<cache>/returnn_tf_cache/ops/<base_name>/<hash>/<base_name>.so`` as in RETURNN, where ``<cache>`` is
``$RETURNN_CACHE_DIR``, else ``$TMPDIR/<user>`` (``/var/tmp/<user>`` without TMPDIR). The hash covers
the code, ``code_version``, the compiler, its flags (``tf.sysconfig.get_compile_flags()`` /
``get_link_flags()``), macros and the TensorFlow version, so a new TensorFlow builds anew. A library
is only ever loaded from directories owned by this user that nobody else can write to (a shared
``/var/tmp`` must not let another user plant a library the engine loads); otherwise the compiler
refuses with one line naming the directory. Builds run in a private temporary directory and are
renamed into place, under a lock file, so ranks of one job compile once and never load half a file.

TensorFlow's C++ API changed under older configs' code; two changes that make old ops fail to compile
are bridged, each logged when applied: ``Status::OK()`` (gone since TF 2.13, where ``Status`` is
absl's) becomes ``Status()`` (the same OK status), and ``tensor<string, N>()``-style access to string
tensors uses ``tstring`` (TF >= 2.2 stores ``tstring``). Compiling is CPU-only: ``use_cuda_if_available``
builds no CUDA kernels here (nvcc is not driven), a GPU kernel the code registers is simply absent.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from returnn.errors import ConfigError
from returnn.util.basic import get_login_username
from returnn.util.safe_files import atomic_write_bytes, open_nofollow

# old TF C++ spellings -> ones that compile on newer TF (pattern, replacement, since TF version, what)
_TF_API_BRIDGES: Tuple[Tuple[str, str, Tuple[int, int], str], ...] = (
    (r"\b(?:::)?(?:tensorflow::)?Status::OK\(\)", "::tensorflow::Status()", (2, 13),
     "Status::OK() -> Status() (absl::Status since TF 2.13)"),
    (r"\b(tensor|flat|vec|matrix|scalar|flat_inner_dims|flat_outer_dims|shaped|unaligned_flat)"
     r"<\s*(?:(?:::)?(?:tensorflow|std)::)?string\s*([,>])", r"\1<tstring\2", (2, 2),
     "string tensor access -> tstring (TF >= 2.2)"),
)


def get_cache_dir() -> str:
    """RETURNN's cache directory: ``$RETURNN_CACHE_DIR``, else ``$TMPDIR/<user>`` (also TEMP, TMP),
    else ``/var/tmp/<user>``."""
    if os.environ.get("RETURNN_CACHE_DIR"):
        return os.environ["RETURNN_CACHE_DIR"]
    for env in ("TMPDIR", "TEMP", "TMP"):
        if os.environ.get(env):
            return os.path.join(os.environ[env], get_login_username())
    return os.path.join("/var/tmp" if os.path.isdir("/var/tmp") else "/tmp", get_login_username())


def _tf_version() -> Tuple[int, int]:
    import tensorflow as tf
    major, minor = re.match(r"(\d+)\.(\d+)", tf.__version__).groups()
    return int(major), int(minor)


def bridge_tf_api(code: str, tf_version: Tuple[int, int]) -> Tuple[str, List[str]]:
    """``code`` with the old TF C++ spellings of :data:`_TF_API_BRIDGES` replaced where ``tf_version``
    needs it; and what was replaced."""
    applied = []
    for pattern, repl, since, what in _TF_API_BRIDGES:
        if tf_version >= since:
            code, n = re.subn(pattern, repl, code)
            if n:
                applied.append("%s (%i)" % (what, n))
    return code, applied


def _private_dirs(base: str, path: str) -> None:
    """Creates ``path`` (below ``base``, which is created too) with mode 0700 where missing, and checks
    that each of them is a directory (no link) owned by this user that nobody else can write to."""
    parts = [base] + [p for p in os.path.relpath(path, base).split(os.sep) if p not in (".", "")]
    cur = ""
    for i, part in enumerate(parts):
        cur = part if i == 0 else os.path.join(cur, part)
        try:
            os.mkdir(cur, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(cur)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise ConfigError("OpCodeCompiler: cache directory %s must be a directory (no link) of this user that no "
                              "one else can write to (set RETURNN_CACHE_DIR to a private directory)" % cur)


class NativeCodeCompiler:
    """RETURNN's compiler of native C/C++ code into a shared library (see the module docstring);
    :class:`OpCodeCompiler` adds TensorFlow's flags and loading as an op library."""

    CacheDirName = "returnn_native"

    def __init__(self, base_name: str, code_version: Union[int, Tuple[int, ...]] = 1, code: str = "",
                 is_cpp: bool = True, c_macro_defines: Optional[Dict[str, Any]] = None,
                 ld_flags: Optional[Sequence[str]] = None, include_paths: Sequence[str] = (),
                 include_deps: Optional[Sequence[str]] = None, static_version_name: Optional[str] = None,
                 should_cleanup_old_all: bool = True, should_cleanup_old_mydir: bool = False,
                 use_cxx11_abi: bool = False, log_stream: Any = None, verbose: Optional[bool] = None):
        if not re.match(r"^[A-Za-z0-9_.-]+$", base_name or ""):
            raise ConfigError("OpCodeCompiler: base_name %r must be a plain file name" % (base_name,))
        self.base_name = base_name
        self.code_version = code_version
        self.code = code
        self.is_cpp = is_cpp
        self.c_macro_defines = {k: v for k, v in (c_macro_defines or {}).items() if v is not None}
        self.ld_flags = list(ld_flags or [])
        self.include_paths = list(include_paths)
        self.include_deps = list(include_deps or [])
        self.static_version_name = static_version_name
        self.use_cxx11_abi = use_cxx11_abi
        self.verbose = os.environ.get("RETURNN_NATIVE_CODE_COMPILER_VERBOSE") == "1" if verbose is None else verbose
        self._log_stream = log_stream
        self.cache_root = get_cache_dir()
        self.cache_dir = os.path.join(self.cache_root, self.CacheDirName)

    # ---- what is built
    def _compiler_bin(self) -> str:
        env = os.environ.get("CXX" if self.is_cpp else "CC", "")
        found = shutil.which(env) if env else None
        for cand in ([found] if found else []) + (["g++", "c++", "clang++"] if self.is_cpp else ["gcc", "cc", "clang"]):
            path = shutil.which(cand) if cand else None
            if path:
                return path
        raise ConfigError("OpCodeCompiler: no %s compiler found (install g++, or set %s)"
                          % ("C++" if self.is_cpp else "C", "CXX" if self.is_cpp else "CC"))

    def _code(self) -> str:
        return self.code

    def _compile_flags(self) -> List[str]:
        flags = ["-shared", "-O2", "-fPIC", "-std=c++17" if self.is_cpp else "-std=c11"]
        flags += ["-I%s" % p for p in self.include_paths]
        flags += ["-D_GLIBCXX_USE_CXX11_ABI=%i" % (1 if self.use_cxx11_abi else 0)]
        return flags + ["-D%s=%s" % kv for kv in sorted(self.c_macro_defines.items())]

    def _link_flags(self) -> List[str]:
        return list(self.ld_flags)

    def _info(self) -> Dict[str, Any]:
        return {"base_name": self.base_name, "code_version": repr(self.code_version),
                "code_hash": hashlib.sha256(self._code().encode("utf8")).hexdigest(),
                "compiler": self._compiler_bin(), "compile_flags": self._compile_flags(),
                "link_flags": self._link_flags(), "platform": platform.platform()}

    @property
    def _info_dict(self) -> Dict[str, Any]:
        if getattr(self, "_info_memo", None) is None:
            self._info_memo = self._info()
        return self._info_memo

    @property
    def _mod_path(self) -> str:
        digest = hashlib.sha256(json.dumps(self._info_dict, sort_keys=True).encode("utf8")).hexdigest()
        return os.path.join(self.cache_dir, self.base_name, self.static_version_name or digest[:10])

    @property
    def _so_filename(self) -> str:
        return os.path.join(self._mod_path, self.base_name + ".so")

    def _log(self, msg: str) -> None:
        print("%s: %s" % (self.__class__.__name__, msg), file=self._log_stream or sys.stdout)

    def __repr__(self) -> str:
        return "<%s %r in %r>" % (self.__class__.__name__, self.base_name, self._mod_path)

    # ---- building
    def _up_to_date(self, so: str) -> bool:
        if not os.path.isfile(so) or os.path.islink(so):
            return False
        mtime = os.path.getmtime(so)
        return not any(os.path.getmtime(dep) > mtime for dep in self.include_deps)

    def _maybe_compile(self) -> str:
        """The path of the built library (compiled now if missing or older than an ``include_deps`` file)."""
        mod_path, so = self._mod_path, self._so_filename
        _private_dirs(self.cache_root, mod_path)
        if self._up_to_date(so):
            if self.verbose:
                self._log("no need to recompile %s" % so)
            return so
        fd = open_nofollow(os.path.join(mod_path, "lock"), os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # other ranks of the job wait here, then find the library built
            if not self._up_to_date(so):
                self._compile(mod_path, so)
        finally:
            os.close(fd)
        return so

    def _compile(self, mod_path: str, so: str) -> None:
        work = tempfile.mkdtemp(prefix="build-", dir=mod_path)
        try:
            src = os.path.join(work, self.base_name + (".cc" if self.is_cpp else ".c"))
            with open(src, "w") as f:
                f.write(self._code())
            out = os.path.join(work, self.base_name + ".so")
            cmd = [self._compiler_bin()] + self._compile_flags() + [src, "-o", out] + self._link_flags()
            self._log("compiling %s: %s" % (self.base_name, " ".join(cmd)))
            res = subprocess.run(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            text = res.stdout.decode("utf8", "replace")
            if res.returncode != 0:
                errors = [line for line in text.splitlines() if "error" in line] or text.splitlines()[-5:]
                print(text, file=self._log_stream or sys.stderr)
                raise ConfigError("OpCodeCompiler: compiling %r failed (%s exit %i): %s" % (
                    self.base_name, os.path.basename(cmd[0]), res.returncode, errors[0].strip() if errors else "?"))
            with open(os.path.join(work, "compile.log"), "w") as f:
                f.write("+ %s\n%s" % (" ".join(cmd), text))
            os.replace(os.path.join(work, "compile.log"), os.path.join(mod_path, "compile.log"))
            atomic_write_bytes(os.path.join(mod_path, "info.json"),
                               json.dumps(self._info_dict, indent=1, sort_keys=True).encode("utf8"))
            os.replace(out, so)  # last: its presence marks a finished build
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def get_lib_filename(self) -> str:
        """The built library's path (RETURNN's name)."""
        return self._maybe_compile()

    def load_lib_ctypes(self) -> Any:
        """The library loaded with ctypes."""
        import ctypes
        return ctypes.cdll.LoadLibrary(self._maybe_compile())


class OpCodeCompiler(NativeCodeCompiler):
    """RETURNN's ``OpCodeCompiler``: ``load_tf_module()`` returns the op library's module (ops as
    snake_case functions, e.g. ``get_filtered_score`` for ``REGISTER_OP("GetFilteredScore")``)."""

    CacheDirName = os.path.join("returnn_tf_cache", "ops")

    def __init__(self, base_name: str, use_cuda_if_available: bool = True, cuda_auto_min_compute_capability: bool = True,
                 include_paths: Sequence[str] = (), ld_flags: Sequence[str] = (),
                 c_macro_defines: Optional[Dict[str, Any]] = None, **kwargs: Any):
        import tensorflow as tf
        macros = dict(c_macro_defines or {})
        macros.setdefault("NDEBUG", 1)  # as RETURNN (TF headers' debug checks would need symbols TF does not export)
        version = tf.__version__.split("-")[0].split(".")
        if _tf_version() >= (2, 20):  # version.h no longer defines them (RETURNN does the same)
            macros.update(TF_MAJOR_VERSION=version[0], TF_MINOR_VERSION=version[1],
                          TF_PATCH_VERSION=re.sub(r"\D.*", "", version[2]) or "0", TF_VERSION_SUFFIX="")
        super().__init__(base_name, include_paths=include_paths, ld_flags=ld_flags, c_macro_defines=macros,
                         use_cxx11_abi=bool(getattr(tf.sysconfig, "CXX11_ABI_FLAG", 0)), **kwargs)
        self.use_cuda_if_available = use_cuda_if_available
        self._bridged = bridge_tf_api(self.code, _tf_version()) if self.is_cpp else (self.code, [])
        self._tf_mod = None

    def _code(self) -> str:
        return self._bridged[0]

    def _compile_flags(self) -> List[str]:
        import tensorflow as tf
        tf_flags = list(tf.sysconfig.get_compile_flags())  # includes, C++ standard, ABI, Eigen alignment
        base = [f for f in super()._compile_flags() if not f.startswith(("-std=", "-D_GLIBCXX_USE_CXX11_ABI="))]
        if not any(f.lstrip("-").startswith("std=") for f in tf_flags):
            base.append("-std=c++17")
        return base + tf_flags

    def _link_flags(self) -> List[str]:
        import tensorflow as tf
        return list(self.ld_flags) + list(tf.sysconfig.get_link_flags())

    def _info(self) -> Dict[str, Any]:
        import tensorflow as tf
        return dict(super()._info(), tf_version=tf.__version__, with_cuda=False)

    def _compile(self, mod_path: str, so: str) -> None:
        if self._bridged[1]:
            self._log("%s: adapted to TensorFlow %s: %s" % (self.base_name, ".".join(map(str, _tf_version())),
                                                            "; ".join(self._bridged[1])))
        super()._compile(mod_path, so)

    def load_tf_module(self) -> Any:
        """The op library (compiled first if needed), loaded once per compiler object."""
        if self._tf_mod is None:
            import tensorflow as tf
            self._tf_mod = tf.load_op_library(self._maybe_compile())
        return self._tf_mod
