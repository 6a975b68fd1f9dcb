#!/bin/sh
# The shell of `make test STEP_TIMES=1`'s steps (Makefile): runs a step's
# recipe as /bin/sh would, then prints its wall time and the CPU time of
# everything it waited for (user + system), for adding up where a run goes.
#   step_time.sh NAME -c RECIPE
name=$1
shift
if [ ! -x /usr/bin/time ]; then   # Debian's package `time`, not on a fresh machine
  echo "step $name: no /usr/bin/time (apt-get install time): not timed" >&2
  exec /bin/sh "$@"
fi
exec /usr/bin/time -f "step $name: %e s wall, %U user + %S system CPU-s" /bin/sh "$@"
