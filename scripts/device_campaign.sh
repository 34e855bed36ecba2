#!/usr/bin/env bash
# One device call of the learned-task campaign (issue 8), from the repo root on the
# device machine:
#
#   ASSOCMEM_COMMIT=<hash> bash scripts/device_campaign.sh [campaign options...]
#
# Installs the wheels carried in .whl/ (fla; Dask and the dependencies the machine lacks,
# which the campaign runs on: docs/tasks.md, "Sweeps on Dask") and this package (not
# editable, run from /tmp so the checkout's top-level folders are not imported by
# accident), starts
# from the committed results/ plus, when present, the checkpoints and partial
# curves of the previous call (.resume/results.tgz, carried), runs
# `python -m assocmem.gpu.tasks.campaign --out $OUT/results ...`, and packs the
# results (JSONs, per-run logs, campaign log) into $OUT/results.tgz and the
# checkpoints that fit beside it into $OUT/ckpts.tgz.part-aa, -ab, ... (15 MiB pieces: a call returns at
# most 8 files of at most 16 MiB, 64 MiB together).  Unpack results.tgz beside the checkout and copy
# the new JSONs into results/; put results.tgz and the ckpts pieces in .resume/ for
# the next call (checkpoints stay out of git; see .gitignore).
#
# Before the campaign, optionally (each writes its JSON under $OUT/bench/):
#   --probe "TASK:MODEL[:K=V,...] ..."  training steps/s of each spec (scripts/probe_steps.py)
#   --bench-sweep                       the sweep engine's overhead (benchmarks/bench_sweep_engine.py,
#                                       12 runs at a time), and the removed pool's when a copy of it
#                                       is carried as .resume/pool_85a96cb.py
#   --gpu-bench "ARGS"                  the kernel benchmark, `assocmem gpu bench ARGS` (one process, beside fla),
#                                       into $OUT/bench/gpu_bench.json, then the fp32 precision of the
#                                       parallel-in-time op compiled (benchmarks/cpu_scan_precision.py --device
#                                       cuda) into $OUT/bench/scan_precision_cuda.json
#   --gpu-bench-limit-s N               wall limit of that benchmark (default 240 s; the precision run gets half):
#                                       a slow op cannot take the call, and the JSON keeps every step done.
#                                       --gpu-bench may be given again: the second and later run after the first,
#                                       each under the same limit, into gpu_bench_2.json, ... (no precision run)
#   --no-scan-precision                 skip the precision run after the first benchmark
#   --chunk-ab "ROUNDS SHAPE"           the chunked forward at SHAPE of each older commit carried installed as
#                                       .resume/site_<commit>/ (pip install --no-deps --target), then this checkout's
#                                       with its defaults and with segments=1, ROUNDS times alternating, one process
#                                       each (benchmarks/chunk_ab.py), into $OUT/bench/chunk_ab.jsonl: whether a
#                                       slowdown is the code's or the machine's
#   --pytest "ARGS"                     run pytest ARGS from the checkout on the GPU (e.g. the CUDA-only
#                                       tests), its report in $OUT/bench/pytest.log
#   --bg "CMD"                          a command (e.g. a CUDA test or diagnostic) started from /tmp in the
#                                       background when the campaign starts, its output in $OUT/bench/bg.log,
#                                       waited for (at most --bg-limit-s, default 300 s) before packing
#   --call-limit-s N                    the call's wall limit (default 560): the campaign's --budget-s is
#                                       cut to what is left after the steps above
#   --skip-campaign                     stop after those
set -uo pipefail
: "${OUT:?run this on the device machine, where OUT is set}"
t_start=$SECONDS call_limit=560
chunk_ab="" probe="" gpu_bench="" gpu_bench_more=() scan_precision=1 gpu_bench_limit=240 bench_sweep=0 skip_campaign=0 pytest_args="" bg="" bg_limit=300 rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    --probe) probe="$2"; shift 2 ;;
    --bench-sweep) bench_sweep=1; shift ;;
    --skip-campaign) skip_campaign=1; shift ;;
    --pytest) pytest_args="$2"; shift 2 ;;
    --bg) bg="$2"; shift 2 ;;
    --bg-limit-s) bg_limit="$2"; shift 2 ;;
    --gpu-bench) if [ -z "$gpu_bench" ]; then gpu_bench="$2"; else gpu_bench_more+=("$2"); fi; shift 2 ;;
    --no-scan-precision) scan_precision=0; shift ;;
    --chunk-ab) chunk_ab="$2"; shift 2 ;;
    --gpu-bench-limit-s) gpu_bench_limit="$2"; shift 2 ;;
    --call-limit-s) call_limit="$2"; shift 2 ;;
    *) rest+=("$1"); shift ;;
  esac
done
set -- "${rest[@]}"
export PYTHONUNBUFFERED=1
export ASSOCMEM_COMMIT="${ASSOCMEM_COMMIT:-unknown}"
root=$(pwd)
if ls .whl/*.whl >/dev/null 2>&1; then   # wheels are optional: the learned tasks need none
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} || { echo "wheels: install failed"; exit 3; }
elif [ -d /tmp/site/distributed ]; then
  # a machine held warm since an earlier call keeps what that call installed: a call that carries
  # only .resume/ (the wheels and two 29 MB checkpoints are over the 64 MiB a call carries) reuses it
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}; echo "wheels: reusing /tmp/site from an earlier call"
fi
python3 -m pip install -q --no-deps --no-build-isolation . || { echo "assocmem: install failed"; exit 3; }
# the campaign runs on Dask; a call with --skip-campaign (benchmarks only) needs none of it
[ "$skip_campaign" = 1 ] || python3 -c "import distributed" 2>/dev/null || {
  echo "dask: not importable; carry its wheels in .whl/ (docs/tasks.md, 'Sweeps on Dask')"; exit 3; }
mkdir -p "$OUT/results"
cp -r results/. "$OUT/results/"
if [ -f .resume/results.tgz ]; then
  tar xzf .resume/results.tgz -C "$OUT" && echo "resumed from .resume/results.tgz"
fi
# the results and the checkpoints of the last call on this machine, when it was held warm since (kept
# in /tmp by pack below).  The results go over the carried ones: they are the last call's own, also
# when its return was cut short (2 December: a finished run's JSON did not come back, and the next
# call, resuming from the call before, ran it again from step 0).  A call then need not carry the
# checkpoints back either (two or three 30 MB checkpoints are over what a call carries).  The carried
# pieces, unpacked next, add only what the stash lacks: a warm machine's copy of a run is never older than
# a carried one (the pieces come from this or an earlier call's return, and ingest_device_return.py keeps
# older checkpoints there for runs a call left behind), so a carried checkpoint never rewinds a run
stash="${ASSOCMEM_CKPT_STASH:-/tmp/assocmem-ckpt-stash}"
if [ -f "$stash/results.tgz" ]; then
  tar xzf "$stash/results.tgz" -C "$OUT" && echo "results from this machine's stash (the last call's)"
fi
if [ -d "$stash/results" ]; then
  (cd "$stash" && find results -name '*.ckpt.pt') | while read -r ck; do
    [ -f "$OUT/${ck%.ckpt.pt}.json" ] || { mkdir -p "$(dirname "$OUT/$ck")"; cp "$stash/$ck" "$OUT/$ck"; echo "checkpoint from this machine's stash: $ck"; }
  done
fi
if ls .resume/ckpts.tgz.part-* >/dev/null 2>&1; then
  cat .resume/ckpts.tgz.part-* | tar xzf - --skip-old-files -C "$OUT" && echo "checkpoints from .resume/ckpts.tgz.part-* (those the stash lacks)"
fi
if [ -f .resume/ckpts.tar.xz ]; then     # the same, recompressed here when the pieces would not fit what a call carries
  tar xJf .resume/ckpts.tar.xz --skip-old-files -C "$OUT" && echo "checkpoints from .resume/ckpts.tar.xz (those the stash lacks)"
fi
# Triton's cache, carried between calls (.resume/triton-cache.tgz, from the last call's
# $OUT/triton-cache.tgz): on a fresh machine fla's GDN kernels compile and autotune for about three
# minutes at every run's start (2 December); with the autotuning results on disk
# (TRITON_CACHE_AUTOTUNING) a kernel compiles only its chosen configuration, or nothing at all
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-/tmp/triton-cache}" TRITON_CACHE_AUTOTUNING=1
mkdir -p "$TRITON_CACHE_DIR"
if [ -f .resume/triton-cache.tgz ]; then
  tar xzf .resume/triton-cache.tgz -C "$TRITON_CACHE_DIR" && echo "triton cache from .resume/triton-cache.tgz:" \
    "$(find "$TRITON_CACHE_DIR" -name '*.autotune.json' | wc -l) autotuning results"
fi
nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
mkdir -p "$OUT/bench"
if [ -n "$pytest_args" ]; then
  # from tests/ (paths relative to it), so that the installed package is imported, not the checkout's folders
  (cd "$root/tests" && python3 -m pytest -p no:cacheprovider -c ../pyproject.toml --rootdir .. $pytest_args) 2>&1 \
    | tail -40 | tee "$OUT/bench/pytest.log"
fi
if [ -n "$gpu_bench" ]; then
  # before any training, so that nothing else runs on the GPU while it times
  (cd /tmp && timeout "$gpu_bench_limit" python3 -m assocmem gpu bench $gpu_bench --out "$OUT/bench/gpu_bench.json" \
     || echo "gpu bench: stopped (rc $?; at the ${gpu_bench_limit} s limit if 124); the JSON has what it measured") 2>&1 \
    | tail -60 | tee "$OUT/bench/gpu_bench.log"
  i=2
  for more in "${gpu_bench_more[@]}"; do
    (cd /tmp && timeout "$gpu_bench_limit" python3 -m assocmem gpu bench $more --out "$OUT/bench/gpu_bench_$i.json" \
       || echo "gpu bench $i: stopped (rc $?; at the ${gpu_bench_limit} s limit if 124)") 2>&1 \
      | tail -60 | tee "$OUT/bench/gpu_bench_$i.log"
    i=$(( i + 1 ))
  done
  if [ "$scan_precision" = 1 ]; then
    (cd /tmp && timeout "$(( gpu_bench_limit / 2 ))" python3 "$root/benchmarks/cpu_scan_precision.py" --device cuda \
       --out "$OUT/bench/scan_precision_cuda.json" || echo "precision: stopped (rc $?)") \
      2>&1 | tail -30 | tee -a "$OUT/bench/gpu_bench.log"
  fi
fi
if [ -n "$chunk_ab" ]; then
  # before any training too; each older commit from its own install, this checkout's from the one above
  read -r ab_rounds ab_shape <<< "$chunk_ab"
  # the first round also writes what Triton compiled for each kernel (keys, registers, PTX) under bench/kernels/
  for r in $(seq 1 "${ab_rounds:-2}"); do
    dump() { [ "$r" = 1 ] && echo "--dump $OUT/bench/kernels/$1"; }
    for site in "$root"/.resume/site_*; do
      [ -d "$site" ] || continue
      (cd /tmp && PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" timeout 300 python3 "$root/benchmarks/chunk_ab.py" \
         --shape "${ab_shape:-S2}" --tag "${site##*/site_}" $(dump "${site##*/site_}") \
         --out "$OUT/bench/chunk_ab.jsonl") 2>&1 | tail -3
    done
    (cd /tmp && timeout 300 python3 "$root/benchmarks/chunk_ab.py" --shape "${ab_shape:-S2}" --tag "$ASSOCMEM_COMMIT" \
       $(dump head) --out "$OUT/bench/chunk_ab.jsonl") 2>&1 | tail -3
    (cd /tmp && timeout 300 python3 "$root/benchmarks/chunk_ab.py" --shape "${ab_shape:-S2}" --tag "$ASSOCMEM_COMMIT" \
       --config segments=1 $(dump head-segments1) --out "$OUT/bench/chunk_ab.jsonl") 2>&1 | tail -3
  done | tee "$OUT/bench/chunk_ab.log"
fi
if [ -n "$probe" ]; then
  (cd /tmp && python3 "$root/scripts/probe_steps.py" --device cuda --out "$OUT/bench/probe_steps.json" $probe) \
    2>&1 | tee "$OUT/bench/probe_steps.log"
fi
if [ "$bench_sweep" = 1 ]; then
  (cd /tmp && python3 "$root/benchmarks/bench_sweep_engine.py" --device cuda --workers 12 --runs 24 --repeat 2 \
     --out "$OUT/bench/sweep_engine_dask.json") 2>&1 | tee "$OUT/bench/sweep_engine.log"
  if [ -f "$root/.resume/pool_85a96cb.py" ]; then
    (cd /tmp && python3 "$root/benchmarks/bench_sweep_engine.py" --device cuda --workers 12 --runs 24 --repeat 2 \
       --engine "$root/.resume/pool_85a96cb.py" --out "$OUT/bench/sweep_engine_pool.json") 2>&1 \
       | tee -a "$OUT/bench/sweep_engine.log"
  fi
fi
if [ "$skip_campaign" = 1 ]; then
  cd "$OUT" && tar czf results.tgz bench && rm -rf bench results; exit 0
fi
# the campaign's budget is clamped to what the call has left (--call-limit-s, default 560 s of the
# device's 600), so that packing always happens; a TERM (the call's own limit) still packs
left=$(( call_limit - (SECONDS - t_start) - 45 ))
args=() next_is_budget=0 budget_seen=0
for a in "$@"; do
  if [ "$next_is_budget" = 1 ]; then
    [ "$a" -gt "$left" ] 2>/dev/null && { echo "budget: $a s clamped to the call's $left s left"; a=$left; }
    next_is_budget=0 budget_seen=1
  elif [ "$a" = "--budget-s" ]; then next_is_budget=1
  fi
  args+=("$a")
done
[ "$budget_seen" = 1 ] || args+=(--budget-s "$left")
pack() {
  cd "$OUT" || exit 3
  # what a call returns (the device's limits): at most 8 files, 16 MiB each, 64 MiB together.
  # results.tgz comes first, then Triton's cache, then as many unfinished runs' checkpoints as fit
  # what is left (a run whose checkpoint stays behind restarts, unless the machine is still warm)
  local max_files=8 max_total=$(( 64 * 1024 * 1024 - 512 * 1024 )) piece=$(( 15 * 1024 * 1024 ))
  # only the checkpoints of runs without a result come back (the finished ones' are not needed to
  # resume); the benchmarks ride in results.tgz
  : > /tmp/ckpts.txt
  find results -name '*.ckpt.pt' | while read -r ck; do
    [ -f "${ck%.ckpt.pt}.json" ] || echo "$ck" >> /tmp/ckpts.txt
  done
  # kept on this machine too, for the next call if it finds the machine still warm (see above)
  rm -rf "$stash" && mkdir -p "$stash"
  while read -r ck; do mkdir -p "$stash/$(dirname "$ck")" && cp "$ck" "$stash/$ck"; done < /tmp/ckpts.txt
  # merged, not moved: results/bench may already exist (resumed from the previous call's results)
  [ -d bench ] && mkdir -p results/bench && cp -r bench/. results/bench/ && rm -rf bench
  tar czf results.tgz --exclude='*.ckpt.pt' results
  cp results.tgz "$stash/results.tgz"
  [ "$(stat -c %s results.tgz)" -gt $(( 16 * 1024 * 1024 )) ] && \
    echo "results.tgz: over 16 MiB, more than one returned file holds; it stays in $stash on this machine"
  # the Triton cache whole when it fits one returned file (15 MiB), else its autotuning results only
  # (each kernel then compiles its chosen configuration again, without benchmarking the others)
  if [ -d "$TRITON_CACHE_DIR" ] && [ -n "$(ls -A "$TRITON_CACHE_DIR")" ]; then
    (cd "$TRITON_CACHE_DIR" && tar czf "$OUT/triton-cache.tgz" .)
    if [ "$(stat -c %s "$OUT/triton-cache.tgz")" -gt $(( 15 * 1024 * 1024 )) ]; then
      (cd "$TRITON_CACHE_DIR" && find . -name '*.autotune.json' | tar czf "$OUT/triton-cache.tgz" -T -)
      echo "triton cache: over 15 MiB; only its $(tar tzf "$OUT/triton-cache.tgz" | grep -c autotune.json) autotuning results come back"
    fi
  fi
  if [ -s /tmp/ckpts.txt ]; then
    # the room left beside results.tgz and the cache, in bytes and in files
    local used=0 nfiles=0 f
    for f in "$OUT"/*; do [ -f "$f" ] && used=$(( used + $(stat -c %s "$f") )) && nfiles=$(( nfiles + 1 )); done
    local room=$(( max_total - used )) room_files=$(( max_files - nfiles ))
    [ $(( room_files * piece )) -lt "$room" ] && room=$(( room_files * piece ))
    # which come back: the ones holding the most training first (the wall time in the run's .partial.json,
    # which the campaign writes for every run it stopped: what a restart would cost again), then the plan's
    # priority order (the campaign's --order-file; 4 December: of two 29 MB GDN checkpoints the one at
    # chance came back, the learning one stayed); each is added if the pieces, measured after compression,
    # still fit (6 December: a 55 s BL checkpoint came back, being 2 MB smaller, and a GDN run's 200 s stayed)
    while read -r ck; do
      name=${ck#results/}; rank=$(grep -nxF "${name%.ckpt.pt}" /tmp/campaign_order.txt 2>/dev/null | head -1 | cut -d: -f1)
      wall=$(grep -o '"wall_s": *[0-9.]*' "${ck%.ckpt.pt}.partial.json" 2>/dev/null | head -1 | grep -o '[0-9.]*$')
      echo "${wall%.*} ${rank:-999999} $ck" | sed 's/^ /0 /'
    done < /tmp/ckpts.txt | sort -k1,1nr -k2,2n -k3,3 > /tmp/ckpts_ranked.txt
    : > /tmp/ckpts_kept.txt
    local total
    while read -r wall rank ck; do
      { cat /tmp/ckpts_kept.txt; echo "$ck"; } > /tmp/ckpts_try.txt
      rm -f ckpts.tgz.part-*
      tar czf - -T /tmp/ckpts_try.txt | split -b "$piece" - ckpts.tgz.part-
      total=$(cat ckpts.tgz.part-* | wc -c)
      if [ "$total" -le "$room" ]; then cp /tmp/ckpts_try.txt /tmp/ckpts_kept.txt
      else echo "checkpoint left behind (over what a call returns beside results.tgz; the run restarts unless the machine is still warm): $ck ($([ "$wall" -gt 0 ] && echo "$wall s of training" || echo "its training time not recorded"))"
      fi
    done < /tmp/ckpts_ranked.txt
    rm -f ckpts.tgz.part-*
    [ -s /tmp/ckpts_kept.txt ] && tar czf - -T /tmp/ckpts_kept.txt | split -b "$piece" - ckpts.tgz.part-
    [ -s /tmp/ckpts_kept.txt ] || rm -f ckpts.tgz.part-*
  fi
  rm -rf results
  ls -la "$OUT"
}
trap 'echo "terminated: packing what there is"; pack; exit 124' TERM INT
bg_pid=""
if [ -n "$bg" ]; then
  (cd /tmp && ROOT="$root" timeout "$bg_limit" bash -c "$bg") > "$OUT/bench/bg.log" 2>&1 &
  bg_pid=$!
fi
rm -f /tmp/campaign_order.txt
cd /tmp && python3 -m assocmem.gpu.tasks.campaign --out "$OUT/results" --order-file /tmp/campaign_order.txt "${args[@]}" 2>&1 \
  | tee "$OUT/results/campaign.log"
rc=${PIPESTATUS[0]}
[ -n "$bg_pid" ] && { wait "$bg_pid"; echo "background command: rc $?"; tail -20 "$OUT/bench/bg.log"; }
trap - TERM INT
pack
exit "$rc"
