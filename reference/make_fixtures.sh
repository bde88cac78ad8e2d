#!/usr/bin/env bash
# Regenerates the NumPy reference fixtures of the policy crate, one file per argpartition
# path (see decode_reference.py). Creates reference/.venv with the pinned NumPy first.
# The x86-avx2 file can only be made on an x86-64 CPU with AVX2.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
fixtures="$here/../crates/policy/tests/fixtures"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -c 'import numpy' 2>/dev/null || "$venv/bin/pip" install -q -r "$here/requirements.txt"
targets() { "$venv/bin/python" -c "from numpy._core._multiarray_umath import __cpu_dispatch__ as d; print(' '.join(t for t in d if $1))"; }
NPY_DISABLE_CPU_FEATURES="$(targets True)" \
  "$venv/bin/python" "$here/decode_reference.py" portable "$fixtures/decode_py_portable.json"
NPY_DISABLE_CPU_FEATURES="$(targets "t != 'X86_V3'")" \
  "$venv/bin/python" "$here/decode_reference.py" x86-avx2 "$fixtures/decode_py_x86_avx2.json"
