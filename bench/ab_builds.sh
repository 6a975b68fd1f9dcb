#!/usr/bin/env bash
# Two builds of bitflip on the same campaigns, run alternately, user CPU
# seconds per run (a kernel change against the build before it, in one run:
# docs/BENCHMARKS.md).
#   bench/ab_builds.sh OLD_BITFLIP NEW_BITFLIP [REPEATS]
# e.g. git worktree add /tmp/old <commit> && cmake -S /tmp/old -B /tmp/old/build
#      -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/old/build --target bitflip
#      && bench/ab_builds.sh /tmp/old/build/bitflip build/bitflip
# AB_CAMPAIGNS="digits dlrm" runs a subset. A build's flag (the new build's
# --near-exact) goes in a wrapper script passed as the binary.
set -euo pipefail
old=${1:?usage: ab_builds.sh OLD_BITFLIP NEW_BITFLIP [REPEATS]}
new=${2:?usage: ab_builds.sh OLD_BITFLIP NEW_BITFLIP [REPEATS]}
reps=${3:-6}
fx=$(cd "$(dirname "$0")/../tests/fixtures" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
spec() {  # NAME MODEL DATA FAULTS EXTRA
  printf '{"model": "%s", "dataset": "%s", "seed": 5, %s "faults": %s}\n' "$2" "$3" "$5" "$4" > "$work/$1.json"
}
w='{"target": "weights", "model": "bitflip", "bits": 1}'
spec digits "$fx/conformance/demo_digits.onnx" "$fx/conformance/demo_digits.eval.safetensors" "$w" '"trials": 64000, "sampling": "per_bit",'
spec digits_mlp "$fx/conformance/digits_mlp.onnx" "$fx/conformance/digits_mlp.eval.safetensors" "$w" '"trials": 20000,'
spec dlrm "$fx/conformance/dlrm_ops_op13.onnx" "$fx/conformance/dlrm_ops_op13.eval.safetensors" "$w" '"trials": 20000,'
spec mobilenet "$fx/real/mobilenet_v2.onnx" "$fx/real/mobilenet_v2.eval.safetensors" "$w" '"trials": 400,'
spec resnet_acts "$fx/real/resnet_basic.onnx" "$fx/real/resnet_basic.eval.safetensors" \
  '{"target": "activations", "model": "bitflip", "bits": 1}' '"trials": 400,'
printf '%-12s %-28s %s\n' campaign "old: best / median (s)" "new: best / median (s)"
for name in ${AB_CAMPAIGNS:-digits digits_mlp dlrm mobilenet resnet_acts}; do
  for i in $(seq "$reps"); do
    for b in old new; do
      bin=$old; [ $b = new ] && bin=$new
      /usr/bin/time -f "%U" -o "$work/t" "$bin" run --local "$work/$name.json" --threads 1 > /dev/null 2>&1
      cat "$work/t" >> "$work/$name.$b"
    done
  done
  stat() { sort -n "$1" | awk '{a[NR]=$1} END {printf "%.2f / %.2f", a[1], a[int((NR+1)/2)]}'; }
  printf '%-12s %-28s %s\n' "$name" "$(stat "$work/$name.old")" "$(stat "$work/$name.new")"
done
