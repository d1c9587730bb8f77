"""Packaging for the ``returnn`` engine (pip install -e .)."""
from setuptools import find_packages, setup

setup(
    name="returnn",
    version="0.1.0",
    description="Config-driven TensorFlow training engine (RETURNN style) with Horovod data parallelism",
    packages=find_packages(include=["returnn", "returnn.*"]),
    python_requires=">=3.9",
    install_requires=["numpy<2", "h5py"],
    extras_require={"tf": ["tensorflow==2.15.1"], "horovod": ["horovod==0.28.1", "mpi4py"]},
    entry_points={"console_scripts": ["returnn = returnn.__main__:main"]},
)
