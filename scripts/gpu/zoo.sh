#!/usr/bin/env bash
# The model zoo (issue 28, item 6) in one device call: builds sabre (16 jobs) while bench/zoo.py exports
# the models, then `zoo.py all` until the call's deadline and `zoo.py report`. Each call starts on a fresh
# machine (no exported models, artifacts or kernel cache survive), so give each call a part of the zoo that
# fits (MODELS: names or families; untuned compiles of unseen models took 56-300 s) and the rows of the
# calls before it: zoo.py skips every row already there.
#   MODELS    zoo.py --models (default all; e.g. encoder,decoder / vision-transformer,speech / cnn)
#   VARIANTS  untuned (default), tuned or untuned,tuned
#   ROWS      the rows so far (default: the newest bench/results/zoo_*.jsonl, if any), copied to $OUT/zoo.jsonl
#   ZOO_COMMIT the commit the rows name (the tree arrives without .git)
# Writes $OUT/zoo.jsonl (all rows: save it as bench/results/zoo_<gpu>_<date>.jsonl for the next call),
# $OUT/zoo_<gpu>_<date>.md and .svg (the report over all rows), $OUT/logs.tgz (step and compile logs),
# $OUT/main.log. Usage on the GPU host (device tool, carry [".carry"]):
#   MODELS=cnn ZOO_COMMIT=<the tree's commit hash, written out> bash scripts/gpu/zoo.sh
set -u
OUT=${OUT:-/tmp/sabre-zoo} LOGS=/tmp/zoologs DEADLINE=${DEADLINE:-570}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
W=/tmp/zoo
ROWS=${ROWS:-$(ls bench/results/zoo_*.jsonl 2>/dev/null | sort | tail -1)}
ZOO="python3 bench/zoo.py all --models ${MODELS:-all} --variants ${VARIANTS:-untuned} --work $W --results $OUT/zoo.jsonl --sabre $b/sabre --cache-dir $W/kernels"
{
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv,noheader; date -u
echo "models ${MODELS:-all}, variants ${VARIANTS:-untuned}, rows from ${ROWS:-nowhere}, commit ${ZOO_COMMIT:-unknown}"
[ -n "$ROWS" ] && [ -f "$ROWS" ] && cp "$ROWS" $OUT/zoo.jsonl
carried_kernel_cache $W/kernels  # kernels compiled ahead on the workstation, where .carry has them
# Exporting needs only the CPU and PyTorch: it overlaps the build.
$ZOO --export-only > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF
LIMIT=240 step build ninja -C $b -j16 sabre
wait $exp; echo "== export"; tail -5 $LOGS/export.log
left=$((DEADLINE - SECONDS - 40))
LIMIT=$((left + 20)) TAIL=60 step zoo $ZOO --deadline $left
cp $W/logs/*.log $LOGS/ 2>/dev/null
LIMIT=30 TAIL=3 step report python3 bench/zoo.py report --results $OUT/zoo.jsonl --out-dir $OUT
cat $OUT/zoo_*.md 2>/dev/null
date -u
} > $OUT/main.log 2>&1
finish
exit 0
