#!/usr/bin/env bash
# The wheels a device call carries in .whl/ (the GPU machine has no package index), fetched here in
# one step: Dask and what the machine's image lacks for the campaign's engine, and fla for the MQAR
# baselines (docs/tasks.md, "Wheels for the GPU machine").  From the repo root:
#
#   bash scripts/fetch_wheels.sh          # then carry ".whl" in the device call
#
# Python 3.12 / manylinux x86_64 builds (the device's), one pinned version of each; idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=(dask==2026.8.0 distributed==2026.8.0 tornado==6.6.1 zict==3.0.0 tblib==3.2.2 locket==1.0.0 partd==1.4.2
        cloudpickle==3.1.3 flash-linear-attention==0.6.0 fla-core==0.6.0 einops==0.8.2)
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "${WHEELS[@]}"
echo "fetch_wheels: $(ls .whl/*.whl | wc -l) wheels in .whl/ ($(du -sh .whl | cut -f1)); carry \".whl\" in the device call"
