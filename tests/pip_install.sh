#!/usr/bin/env bash
# `pip install .` as a user of vLLM or SGLang runs it: into a fresh virtual environment whose
# interpreter is Debian's python3 seeing the system's numpy and torch (--system-site-packages),
# with no network (--no-build-isolation --no-index), from the test build (EPLB_BUILD_DIR, so
# that nothing is compiled twice). Then `import eplb` and the `eplb` command must be the
# environment's, and the Python tests pass against them, not against the build folder.
#   tests/pip_install.sh SOURCE_DIR BUILD_DIR HAVE_SIM
set -euo pipefail
src=$1 build=$2 have_sim=$3
if ! /usr/bin/python3 -c "import ensurepip, venv" 2>/dev/null; then
  echo "SKIP: Debian's python3 has no venv (python3-venv; tools/setup installs it)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
venv=$work/venv
EPLB_BUILD_DIR=$build "$venv/bin/python" -m pip install --no-build-isolation --no-deps \
  --no-index -q "$src"
cd "$work"
unset PYTHONPATH EPLB_CLI
"$venv/bin/eplb" --version
"$venv/bin/python" - "$venv" <<'PY'
import os, sys
import eplb
from eplb.scenario import _cli
venv = os.path.realpath(sys.argv[1])
for what, path in (("import eplb", eplb.__file__), ("the eplb command", _cli())):
    if not os.path.realpath(path).startswith(venv + os.sep):
        sys.exit(f"{what} is {path}, not the virtual environment's ({venv})")
print("eplb", eplb.__version__, "from", os.path.dirname(eplb.__file__))
PY
if [ "$have_sim" = 1 ]; then
  # The command finds its parts where pip put them (libexec/eplb beside bin/).
  "$venv/bin/eplb" run "$src/scenarios/tiny.yaml" --no-trace --out "$work/tiny" >/dev/null
fi
PATH="$venv/bin:$PATH" EPLB_TEST_DATA="$src/tests/data" EPLB_SCENARIOS="$src/scenarios" \
  EPLB_HAVE_SIM="$have_sim" "$venv/bin/python" -m unittest discover -s "$src/python/tests"
