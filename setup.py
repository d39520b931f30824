"""Builds the Python package with CMake: the extension lumen._lumen (and liblumen, which is copied
next to it and found through the extension's $ORIGIN rpath) plus the modules in python/lumen.

    /usr/bin/python3 -m pip install --no-build-isolation .

CMake builds in build-pip/ (kept between installs, so a second install is incremental; one folder
below the source root, like build/, so ccache finds the objects build/ compiled)."""
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    """Configures and builds the _lumen target, then puts it and liblumen into the package."""

    def build_extension(self, ext):
        build_dir = os.path.join(ROOT, "build-pip")
        configure = ["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja",
                     "-DCMAKE_BUILD_TYPE=Release", "-DLUMEN_TESTS=OFF", "-DLUMEN_PYTHON=ON",
                     f"-DPython_EXECUTABLE={sys.executable}"]
        if shutil.which("ccache"):
            configure.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
        subprocess.run(configure, check=True)
        # Everything the build makes: the extension, liblumen and the CUDA plugin where nvcc is.
        subprocess.run(["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 1)], check=True)
        target = os.path.abspath(self.get_ext_fullpath(ext.name))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        built = os.path.join(build_dir, "python", "lumen", os.path.basename(target))
        shutil.copyfile(built, target)
        # liblumen and its backend plugins (liblumen_cuda) under their SONAMEs, next to the extension
        # ($ORIGIN is first in its rpath; liblumen loads the plugins from its own folder).
        for name in os.listdir(build_dir):
            if name.startswith("liblumen") and name.endswith(".so.0") and name.count(".") == 2:
                shutil.copyfile(os.path.realpath(os.path.join(build_dir, name)),
                                os.path.join(os.path.dirname(target), name))


# setuptools' own output (build/, *.egg-info) goes under build-pip too, not into the source tree.
os.makedirs(os.path.join(ROOT, "build-pip"), exist_ok=True)
setup(
    packages=["lumen"],
    package_dir={"lumen": "python/lumen"},
    ext_modules=[CMakeExtension("lumen._lumen")],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build-pip/setuptools"},
             "egg_info": {"egg_base": "build-pip"}},
    zip_safe=False,
)
