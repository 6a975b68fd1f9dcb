#!/usr/bin/env bash
# TLS: --tls-cert/--tls-key serve HTTPS (a self-signed certificate made here
# with the openssl CLI); plain HTTP to that port gets no answer; a bearer
# token works over it. The bind rules: a non-loopback address without TLS is
# refused unless --insecure-http, which says at start that tokens cross the
# network in clear text; without tokens it stays refused. Only loopback is
# ever connected to (0.0.0.0 is bound, 127.0.0.1 is dialled).
# usage: test_tls.sh BITFLIPD BITFLIP FIXTURES_DIR
set -u
BFD=$1 BF=$2 FIX=$3
. "$(dirname "$0")/lib.sh"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=127.0.0.1" \
  -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>"$tmp/openssl.log" \
  || { echo "openssl cannot make a certificate:"; cat "$tmp/openssl.log"; exit 1; }
chmod 600 "$tmp/key.pem"
TLS=(--tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem")

# start_tls DATA_DIR LISTEN [flags...]: like lib.sh's start_daemon, over https
start_tls() {
  local dir=$1 listen=$2; shift 2
  rm -f "$tmp/port"
  "$BFD" --listen "$listen" --port-file "$tmp/port" --data-dir "$dir" --workers 1 "$@" >>"$tmp/daemon.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 200); do
    [ -s "$tmp/port" ] && break
    kill -0 "$PID" 2>/dev/null || { echo "bitflipd exited at start:"; tail -20 "$tmp/daemon.log"; return 1; }
    sleep 0.05
  done
  PORT=$(cat "$tmp/port"); URL="https://127.0.0.1:$PORT"
  for _ in $(seq 1 100); do
    curl -fsS --cacert "$tmp/cert.pem" "$URL/v2/health/ready" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "bitflipd never became ready over https"; tail -20 "$tmp/daemon.log"; return 1
}

# --- HTTPS on loopback -----------------------------------------------------------
start_tls "$tmp/data" 127.0.0.1:0 "${TLS[@]}" || exit 1
grep -q "listening on https://" "$tmp/daemon.log" && ok || bad "the start line does not say https"
req https_ready 200 --cacert "$tmp/cert.pem" "$URL/v2/health/ready"
req https_models 200 --cacert "$tmp/cert.pem" "$URL/v1/models"
code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$PORT/v2/health/ready" 2>/dev/null)
[ "$code" != 200 ] && ok || bad "plain http to the TLS port was answered ($code)"
curl -sS -o /dev/null --max-time 5 "$URL/v2/health/ready" 2>/dev/null && bad "an unknown CA was accepted" || ok
req https_after_plain 200 --cacert "$tmp/cert.pem" "$URL/v2/health/ready"   # the bad client cost nothing
stop_daemon

# --- start-up refusals -------------------------------------------------------------
"$BFD" --listen 127.0.0.1:0 --data-dir "$tmp/data" --tls-cert "$tmp/cert.pem" >"$tmp/out" 2>&1
eq cert_without_key "$?" 2
grep -q "needs --tls-key" "$tmp/out" && ok || bad "cert without key: $(cat "$tmp/out")"
"$BFD" --listen 127.0.0.1:0 --data-dir "$tmp/data" --tls-cert "$tmp/nope.pem" --tls-key "$tmp/key.pem" >"$tmp/out" 2>&1
[ $? -ne 0 ] && grep -q "nope.pem" "$tmp/out" && ok || bad "a missing certificate is not named: $(cat "$tmp/out")"
"$BFD" --listen 127.0.0.1:0 --data-dir "$tmp/data" --tls-cert "$tmp/cert.pem" --tls-key "$tmp/cert.pem" >"$tmp/out" 2>&1
[ $? -ne 0 ] && grep -q "cannot start HTTPS" "$tmp/out" && ok || bad "a certificate as key started: $(cat "$tmp/out")"

# non-loopback without tokens: refused whatever else is given
"$BFD" --listen 0.0.0.0:0 --data-dir "$tmp/open" --insecure-http >"$tmp/out" 2>&1
eq public_no_tokens "$?" 2
grep -q "without tokens" "$tmp/out" && ok || bad "no reason for refusing without tokens: $(cat "$tmp/out")"

TOK=bft_$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf 'lab:%s\n' "$TOK" >"$tmp/tokens"
# tokens, no TLS, no --insecure-http: refused, saying why
"$BFD" --listen 0.0.0.0:0 --data-dir "$tmp/data" --tokens-file "$tmp/tokens" >"$tmp/out" 2>&1
eq public_plain_refused "$?" 2
grep -q "refusing to serve 0.0.0.0 over plain HTTP" "$tmp/out" && ok || bad "no reason for refusing plain HTTP: $(cat "$tmp/out")"

# tokens + --insecure-http: starts, and warns about clear text
: >"$tmp/daemon.log"
start_daemon "$tmp/data" --listen 0.0.0.0:0 --tokens-file "$tmp/tokens" --insecure-http || exit 1
grep -q "clear text" "$tmp/daemon.log" && ok || bad "no clear-text warning at start: $(cat "$tmp/daemon.log")"
req insecure_with_token 200 -H "Authorization: Bearer $TOK" "$URL/v1/models"
stop_daemon

# tokens + TLS on 0.0.0.0: starts without the warning; the token works over https
: >"$tmp/daemon.log"
start_tls "$tmp/data" 0.0.0.0:0 --tokens-file "$tmp/tokens" "${TLS[@]}" || exit 1
grep -q "clear text" "$tmp/daemon.log" && bad "clear-text warning with TLS on" || ok
req tls_token 200 --cacert "$tmp/cert.pem" -H "Authorization: Bearer $TOK" "$URL/v1/models"
req tls_no_token 401 --cacert "$tmp/cert.pem" "$URL/v1/models"
stop_daemon

finish
