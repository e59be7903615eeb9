"""`pip install .`: eplb built with CMake against the running interpreter, installed the way a
Python environment holds things: the `eplb` package (its extension module beside its Python
files) in site-packages, the `eplb` command and, when Qt was found, `eplb-viewer` in the
environment's bin/, the command's parts (eplb-sim, ...) in its libexec/eplb/, where `eplb` looks
for them.

The build is CMake's (the project's CMakeLists.txt, tests and benchmarks off), in
build-python/cmake, unless EPLB_BUILD_DIR names a build folder already configured with
EPLB_WITH_PYTHON=ON for this interpreter: it is then brought up to date and installed from, as
tests/pip_install.sh does with the test build. What an optional part needs and does not find
(SimGrid, Qt, CUDA) is skipped, as CMake says.

With no network, `pip install --no-build-isolation .` builds with the setuptools already
installed.
"""

import os
import re
import shutil
import atexit
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# The CMake build, when no EPLB_BUILD_DIR is given: kept, so that a second install is quick.
BUILD_ROOT = ROOT / "build-python"
# What one install stages: its own, so that two installs at once never share it.
SCRATCH = Path(tempfile.mkdtemp(prefix="eplb-pip-"))
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    match = re.search(r"project\(eplb VERSION ([0-9.]+)", text)
    if not match:
        raise RuntimeError("CMakeLists.txt: no `project(eplb VERSION x.y.z)` line")
    return match.group(1)


def run(command):
    print("eplb setup:", " ".join(str(c) for c in command), flush=True)
    subprocess.run([str(c) for c in command], check=True)


def cmake_build_dir():
    """An up-to-date CMake build folder whose Python module fits this interpreter."""
    given = os.environ.get("EPLB_BUILD_DIR")
    if given:
        build = Path(given).resolve()
        if not (build / "CMakeCache.txt").exists():
            raise RuntimeError(f"EPLB_BUILD_DIR={given}: no CMakeCache.txt there; configure it first")
    else:
        build = BUILD_ROOT / "cmake"
        if not (build / "CMakeCache.txt").exists():
            run(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                 "-DEPLB_BUILD_TESTS=OFF", "-DEPLB_BUILD_BENCH=OFF", "-DEPLB_WITH_PYTHON=ON",
                 f"-DPython3_EXECUTABLE={sys.executable}"])
    run(["cmake", "--build", build, "-j", str(os.cpu_count() or 2)])
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    if not (build / "python" / "eplb" / f"_eplb{suffix}").exists():
        raise RuntimeError(
            f"{build}: no python/eplb/_eplb{suffix}, the module this interpreter "
            f"({sys.executable}) imports; the folder was configured for another Python, or "
            "without EPLB_WITH_PYTHON=ON")
    return build


def tree(root, under):
    """setuptools' data_files for every file below `root`, placed below `under`."""
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            place = Path(under) / path.parent.relative_to(root)
            files.setdefault(str(place), []).append(str(path))
    return list(files.items())


class BuildWithCMake(build_py):
    """Builds and installs eplb with CMake into a staging prefix, then hands setuptools the
    package and the programs from there."""

    def run(self):
        build = cmake_build_dir()
        staging = SCRATCH / "staging"
        run(["cmake", "--install", build, "--prefix", staging])
        packages = list(staging.glob("lib/python*/dist-packages/eplb"))
        if len(packages) != 1:
            raise RuntimeError(f"{staging}: cmake --install left no one eplb package")
        target = Path(self.build_lib) / "eplb"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(packages[0], target)
        # The command pip installed beside the package: PREFIX/bin for PREFIX/lib/pythonX.Y/
        # site-packages/eplb, whichever prefix (a venv, --user, --prefix); else the
        # environment's, else the PATH's.
        (target / "_build_info.py").write_text(
            "# Written by pip install: the eplb command installed with this package.\n"
            "import os as _os\nimport shutil as _shutil\nimport sys as _sys\n\n\n"
            "def _installed():\n"
            "    here = _os.path.dirname(_os.path.abspath(__file__))\n"
            "    for place in (_os.path.join(here, '..', '..', '..', '..', 'bin', 'eplb'),\n"
            "                  _os.path.join(_sys.prefix, 'bin', 'eplb')):\n"
            "        if _os.path.exists(place):\n"
            "            return _os.path.normpath(place)\n"
            "    return _shutil.which('eplb')\n\n\n"
            "CLI = _installed()\n"
            f"VERSION = {project_version()!r}\n")
        data = tree(staging / "bin", "bin") + tree(staging / "libexec", "libexec")
        data += tree(staging / "share" / "eplb", "share/eplb")
        self.distribution.data_files = data
        # install_data copies what build_py names here; its file modes are kept in the wheel.
        self.distribution.get_command_obj("install_data").data_files = data


class BinaryDistribution(Distribution):
    """A wheel for one platform and Python: the package holds a compiled module."""

    def has_ext_modules(self):
        return True


setup(
    name="eplb",
    version=project_version(),
    description="Expert-parallel load balancing for Mixture-of-Experts models: policies, "
    "migration planning, a SimGrid cluster model and real-GPU runs",
    python_requires=">=3.9",
    install_requires=["numpy"],
    # The package is the one cmake --install stages (BuildWithCMake); naming it here has
    # setuptools build and install it.
    packages=["eplb"],
    package_dir={"eplb": "python/eplb"},
    cmdclass={"build_py": BuildWithCMake},
    distclass=BinaryDistribution,
    options={"build": {"build_base": str(SCRATCH / "setuptools")},
             "egg_info": {"egg_base": str(SCRATCH)}},
    zip_safe=False,
)
