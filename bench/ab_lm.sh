#!/usr/bin/env bash
# Two builds of bitflip on one campaign spec (the LM benchmark's, by default),
# run alternately, one thread: user and system CPU seconds, wall seconds, peak
# RSS (KiB), and what --stats says the trials re-ran and the golden pass cost;
# the trial records of each pair are compared (docs/BENCHMARKS.md, "Language
# models").
#   bench/ab_lm.sh OLD_BITFLIP NEW_BITFLIP [REPEATS] [SPEC]
# (bench/ab_builds.sh's header says how to build the old commit beside.)
set -euo pipefail
old=${1:?usage: ab_lm.sh OLD_BITFLIP NEW_BITFLIP [REPEATS] [SPEC]}
new=${2:?usage: ab_lm.sh OLD_BITFLIP NEW_BITFLIP [REPEATS] [SPEC]}
reps=${3:-2}
spec=${4:-$(cd "$(dirname "$0")" && pwd)/models/lm/camp.json}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "build run load1 user_s sys_s wall_s rss_kib | stats"
for i in $(seq "$reps"); do
  for b in old new; do
    bin=$old; [ $b = new ] && bin=$new
    la=$(cut -d' ' -f1 /proc/loadavg)
    /usr/bin/time -f "%U %S %e %M" -o "$work/t" "$bin" run --local "$spec" --threads 1 --stats --progress none \
      --format json --trials-out "$work/$b.jsonl" > /dev/null 2> "$work/err"
    echo "$b $i $la $(cat "$work/t") | $(grep -o 're-ran [0-9.]*%' "$work/err") $(grep -o 'golden pass filling the cache [0-9.]* s ([0-9.]* s of CPU)' "$work/err")"
  done
  cmp -s "$work/old.jsonl" "$work/new.jsonl" && echo "run $i: same trial records" || echo "run $i: trial records DIFFER"
done
