#!/usr/bin/env bash
# Run the suite on a GPU node with no internet, from a local wheelhouse.
#   bash .ci/gpu-node-run.sh WHEELHOUSE MACHINE [OUTDIR]
# The node's python3 must already have NumPy/SciPy/Numba/pandas/seaborn/CuPy (as HPC
# GPU images do); the wheelhouse brings asv and what it needs (see the README).
# Steps: install, the tests (GPU ones included), verify, the launch sweep, the asv run.
set -euo pipefail
wheels=${1:?wheelhouse directory}; machine=${2:?machine name}; out=${3:-gpu-node-out}
export PYTHONUNBUFFERED=1
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile "$wheels"/*.whl
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e .
git config user.email >/dev/null || git config user.email gpu-node@portabench.invalid
git config user.name >/dev/null || git config user.name "portabench GPU node"
nvidia-smi --query-gpu=name,memory.total,clocks.mem,clocks.sm --format=csv || true
python3 -m pytest -q tests 2>&1 | tee "$out/pytest.log" | tail -n 15
( time portabench verify --kernel stream --quiet ) 2>&1 | tee "$out/verify.log"
python3 -m portabench.implementations.stream.sweep 2>&1 | tee "$out/sweep.log"
portabench peaks --measure | tee "$out/peaks.log"
portabench run --machine "$machine" --report-dir "$out/report" 2>&1 | tail -n 60 | tee "$out/run.log"
