"""The PEP 517 build backend of the `stave` Python package: plain Python (standard library
only), so `pip install .` needs nothing from the network. It configures the CMake project, builds
the one target `stave_python` (the pybind11 module) and writes the wheel by the wheel spec
(https://packaging.python.org/en/latest/specifications/binary-distribution-format/).

Settings (pip: --config-settings KEY=VALUE, or the environment):
  build-dir   CMake build folder (default: build-pip in the source tree). An existing build
              folder is reused as it is configured (only the module target is built).
  cmake-args  extra CMake arguments, space-separated (also $CMAKE_ARGS), e.g.
              -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
  jobs        parallel build jobs (also $CMAKE_BUILD_PARALLEL_LEVEL; default: CPU count)
"""

import base64
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = "stave"
SUMMARY = "Cloudflare's Clef decision models (SystemOne) on stave's native C++ engine"


def _version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(stave\s+VERSION\s+([0-9.]+)", f.read())
    if not m:
        raise RuntimeError("CMakeLists.txt: no `project(stave VERSION x.y.z)`")
    return m.group(1)


def _setting(config_settings, key, env=None, default=None):
    value = (config_settings or {}).get(key)
    if value is None and env:
        value = os.environ.get(env)
    return default if value in (None, "") else value


def _tag():
    impl = "cp%d%d" % sys.version_info[:2]
    abi = impl  # a CPython extension is built for this interpreter's ABI
    plat = re.sub(r"[^A-Za-z0-9_]", "_", sysconfig.get_platform())
    return "%s-%s-%s" % (impl, abi, plat)


def _metadata():
    readme_path = os.path.join(ROOT, "docs", "python.md")
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + NAME,
        "Version: " + _version(),
        "Summary: " + SUMMARY,
        "License: see the project's repository",
        "Requires-Python: >=3.8",
    ]
    text = "\n".join(lines) + "\n"
    if os.path.exists(readme_path):
        with open(readme_path, encoding="utf-8") as f:
            text += "Description-Content-Type: text/markdown\n\n" + f.read()
    return text


def _run(cmd, cwd=None):
    print("stave build backend: " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, cwd=cwd, check=True)


def _build_module(config_settings):
    build_dir = os.path.abspath(_setting(config_settings, "build-dir", default=os.path.join(ROOT, "build-pip")))
    if not shutil.which("cmake"):
        raise RuntimeError("cmake is not installed (Debian: bash scripts/install-deps.sh)")
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        cmd = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
               "-DSTAVE_PYTHON=ON", "-DSTAVE_TESTS=OFF", "-DSTAVE_BENCH=OFF",
               "-DPython3_EXECUTABLE=" + sys.executable]
        if shutil.which("ninja"):
            cmd += ["-G", "Ninja"]
        cmd += shlex.split(_setting(config_settings, "cmake-args", env="CMAKE_ARGS", default=""))
        _run(cmd)
    jobs = _setting(config_settings, "jobs", env="CMAKE_BUILD_PARALLEL_LEVEL", default=str(os.cpu_count() or 1))
    _run(["cmake", "--build", build_dir, "--target", "stave_python", "-j", str(jobs)])
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    module = os.path.join(build_dir, "python", NAME + suffix)
    if not os.path.exists(module):
        found = os.listdir(os.path.join(build_dir, "python")) if os.path.isdir(os.path.join(build_dir, "python")) else []
        raise RuntimeError("the build made no %s (found %s): was %s configured for another Python than %s?"
                           % (NAME + suffix, found, build_dir, sys.executable))
    return module


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _write_wheel(wheel_directory, files):
    """files: [(arcname, bytes)] of the package; adds the .dist-info and writes the wheel."""
    version = _version()
    tag = _tag()
    dist_info = "%s-%s.dist-info" % (NAME, version)
    wheel_meta = "Wheel-Version: 1.0\nGenerator: stave_build_backend\nRoot-Is-Purelib: false\nTag: %s\n" % tag
    files = list(files) + [
        (dist_info + "/METADATA", _metadata().encode()),
        (dist_info + "/WHEEL", wheel_meta.encode()),
        (dist_info + "/top_level.txt", (NAME + "\n").encode()),
    ]
    record = [_record_line(name, data) for name, data in files] + [dist_info + "/RECORD,,"]
    files.append((dist_info + "/RECORD", ("\n".join(record) + "\n").encode()))
    filename = "%s-%s-%s.whl" % (NAME, version, tag)
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return filename


# PEP 517 hooks -------------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []  # cmake, a compiler, pybind11-dev and python3-dev come from Debian, not PyPI


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = "%s-%s.dist-info" % (NAME, _version())
    path = os.path.join(metadata_directory, dist_info)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    module = _build_module(config_settings)
    with open(module, "rb") as f:
        data = f.read()
    return _write_wheel(wheel_directory, [(os.path.basename(module), data)])


def _sdist_files():
    """The tracked files (git ls-files), else the tree without build outputs."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
        return [f for f in out.decode().split("\0") if f and os.path.isfile(os.path.join(ROOT, f))]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(ROOT):
            rel = os.path.relpath(d, ROOT)
            dirs[:] = [x for x in dirs if not (x.startswith("build") or x.startswith(".") or x == "models")]
            files += [os.path.normpath(os.path.join(rel, n)) for n in names]
        return files


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, _version())
    filename = base + ".tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in sorted(_sdist_files()):
            tar.add(os.path.join(ROOT, rel), arcname=base + "/" + rel, recursive=False)
        with tempfile.NamedTemporaryFile("w", delete=False, encoding="utf-8") as pkg_info:
            pkg_info.write(_metadata())
        try:
            tar.add(pkg_info.name, arcname=base + "/PKG-INFO")
        finally:
            os.unlink(pkg_info.name)
    return filename
