#!/usr/bin/env bash
# Connections: 1,100 idle TCP connections do not starve other clients, idle
# ones are dropped after --idle-timeout, one address's flood is capped by
# --max-connections-per-ip while another address is served, and past
# --max-connections a request gets a 503 that says why. Loopback only
# (127.0.0.1 and 127.0.0.2).
# usage: test_connections.sh BITFLIPD BITFLIP FIXTURES_DIR
set -u
BFD=$1 BF=$2 FIX=$3
. "$(dirname "$0")/lib.sh"
CHECK="$PY $(dirname "$0")/connections_check.py"
ulimit -n "$(ulimit -Hn)" 2>/dev/null   # the flood's sockets and the daemon's share of them

# defaults: 256 per address; a flood from 127.0.0.1 leaves 127.0.0.2 served
start_daemon "$tmp/data" || exit 1
grep -q "descriptor limit" "$tmp/daemon.log" && ok || bad "no descriptor limit logged at start"
$CHECK per-ip "$PORT" 1100 256 && ok || bad "per-address limit (see above)"
stop_daemon

# no per-address cap: all 1,100 are held, the loop still answers at once,
# and a 2-second idle timeout closes every one of them
start_daemon "$tmp/data" --max-connections-per-ip 0 --idle-timeout=2 || exit 1
$CHECK idle "$PORT" 1100 2 && ok || bad "idle connections (see above)"
stop_daemon

# past --max-connections: 503 problem+json with Retry-After, then served again
start_daemon "$tmp/data" --max-connections 20 --max-connections-per-ip 0 || exit 1
$CHECK limit "$PORT" 20 && ok || bad "connection limit (see above)"
stop_daemon

# a limit that cannot fit under the descriptor limit is lowered, and says so
(ulimit -n 512; "$BFD" --listen 127.0.0.1:0 --data-dir "$tmp/data" --workers 1 --max-connections 5000 \
   --port-file "$tmp/port2" >"$tmp/fit.log" 2>&1 & p=$!; for _ in $(seq 1 100); do [ -s "$tmp/port2" ] && break; sleep 0.05; done
 kill $p; wait $p)
grep -q "does not fit under the descriptor limit" "$tmp/fit.log" && ok || bad "no warning for a limit over the descriptors: $(cat "$tmp/fit.log")"

finish
