#!/bin/sh
# The full honesty check (docs/STATISTICS.md, "Are the intervals honest?"):
# test_honesty on every tensor of the digits MLP (6 tensors x 32 bits, 551232
# faults: the exhaustive truth), RUNS seeded campaigns of TRIALS trials per
# design. Prints one line per rate: truth, the estimates' mean and sd, the
# mean's distance from the truth in standard errors, coverage of the 95%
# intervals, and their mean half-width.
#   bench/honesty.sh [BUILD_DIR] [RUNS] [TRIALS]
set -eu
build=${1:-build}
BF_HONESTY_RUNS=${2:-200} BF_HONESTY_TRIALS=${3:-3000} BF_HONESTY_TENSORS=all \
    "$build/tests/test_honesty"
