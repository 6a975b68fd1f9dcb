#!/usr/bin/env bash
# Hostile uploads never show the server's disk: every hostile-input file the
# tests have (make_hostile.py's, make_hostile_uploads.py's, the fuzz seed and
# crash corpora of the upload parsers) is sent as what it is (its extension)
# and as an eval set (the safetensors loader is the one that leaked: issue
# 34), a file of no known kind as all three, to a daemon whose data dir has
# a recognisable path. No reply may
# name that dir or a blob path; a refusal (422) names the upload by its id
# and the name it was uploaded as; nothing is a 500.
# usage: test_upload_paths.sh BITFLIPD BITFLIP FIXTURES_DIR
set -u
BFD=$1 BF=$2 FIX=$3
# The daemon's data dir (and the test's files) on tmpfs where there is one:
# each upload fsyncs its blob and then the directory (server/store/blob.c),
# and 169 uploads waited 4.5 s for the disk in each build (tests/README.md,
# "The twelfth round"); what the test checks, the replies, is the same.
[ -d /dev/shm ] && [ -w /dev/shm ] && export TMPDIR=/dev/shm
. "$(dirname "$0")/lib.sh"
OCT=(-H 'Content-Type: application/octet-stream')
CORPUS=$(dirname "$0")/../fuzz/corpus
mkdir -p "$tmp/in"
$PY "$FIX/make_hostile.py" "$tmp/in" >/dev/null || { echo "FAIL making the hostile files"; exit 1; }
$PY "$FIX/make_hostile_uploads.py" "$tmp/in" || { echo "FAIL making the hostile uploads"; exit 1; }
DATA=$tmp/srv-data-dir-x
start_daemon "$DATA" || exit 1

# the corpora's seeds and crashes, not the inputs merged in from fuzz runs (named by their SHA-1)
shopt -s nullglob
files=("$tmp"/in/*)
for t in fuzz_onnx fuzz_safetensors fuzz_errmap fuzz_evalset; do files+=("$CORPUS/$t"/seed_* "$CORPUS/$t"/crash_*); done
# Every upload is sent by one curl (a transfer each, `next` between them in its
# config) and its reply checked here in bash, none of it a process per upload:
# 169 uploads were ~1,400 processes (curl, sha256sum, cut, basename, the greps),
# most of the test's CPU time in either build (tests/README.md, "The sixteenth
# round"). Each upload is still its own request with its own reply, status and
# checks; the daemon still spawns a deep check for each, as it does in use.
declare -A sha
while read -r h p; do sha[$p]=$h; done < <(sha256sum "${files[@]}")
ups=() cfg=$tmp/uploads.curl
: > "$cfg"
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  name=${f##*/}
  case $name in
    *.onnx) kinds="models datasets" ;;
    *.bfmap) kinds="error-maps datasets" ;;
    *.safetensors|*.bin) kinds="datasets" ;;
    *.json) continue ;;   # bomb.json: a spec naming files, not an upload
    *) kinds="models datasets error-maps" ;;
  esac
  # Under the sanitizers (BF_SANITIZED) a corpus file goes in as its own corpus's
  # kind only, not as all three: its parse under ASan is that fuzz target's replay
  # test's (fuzz_*_replay: the same loader on the same bytes), and the daemon's
  # side of a refusal (the store, the check's spawn, the scrubbed reply) is the
  # same code for each: the corpora are 66 uploads so, not 114, each a sanitized bitflipd started
  # and leak-checked (tests/README.md, "The sixteenth round"). The release build
  # sends every file as every kind.
  if [ -n "${BF_SANITIZED:-}" ]; then
    case $f in
      "$CORPUS"/fuzz_onnx/*) kinds=models ;;
      "$CORPUS"/fuzz_errmap/*) kinds=error-maps ;;
      "$CORPUS"/fuzz_safetensors/*|"$CORPUS"/fuzz_evalset/*) kinds=datasets ;;
    esac
  fi
  for kind in $kinds; do
    i=${#ups[@]}
    ups+=("$kind $f")
    # curl's config quotes: a backslash or a double quote escaped (the names have neither)
    printf 'url = "%s/v1/%s?name=%s"\ndata-binary = "@%s"\nheader = "Content-Type: application/octet-stream"\n' \
      "$URL" "$kind" "$name" "$f" >> "$cfg"
    printf 'output = "%s/body.%d"\nwrite-out = "%%{http_code}\\n"\nnext\n' "$tmp" "$i" >> "$cfg"
  done
done
curl -sS -K "$cfg" > "$tmp/codes" 2>"$tmp/curl_err"
mapfile -t codes < "$tmp/codes"
[ "${#codes[@]}" -eq "${#ups[@]}" ] && ok || { bad "curl answered ${#codes[@]} of ${#ups[@]} uploads"; cat "$tmp/curl_err"; }
refused=0 sent=${#ups[@]}
for i in "${!ups[@]}"; do
  kind=${ups[$i]%% *} f=${ups[$i]#* }
  name=${f##*/} code=${codes[$i]:-none} body=
  IFS= read -r -d '' body < "$tmp/body.$i"
  if [[ $body == *"$DATA"* || $body == *"$tmp"* || $body == */blobs/* ]]; then
    bad "$kind $name: the reply shows the server's disk"; echo "${body:0:600}"
  else ok; fi
  case $code in
    200|201) ok ;;
    422) refused=$((refused+1))
         if [[ $body == *"upload ${sha[$f]} (uploaded as \\\"$name\\\"): "* ]]; then ok; else
           bad "$kind $name: the 422 does not name the upload ${sha[$f]} as \"$name\""; echo "${body:0:600}"; fi ;;
    *) bad "$kind $name: HTTP $code"; echo "${body:0:600}"; cat "$tmp/curl_err" ;;
  esac
done
# the issue's example: a header length of 2^63, refused with the offset it lies at
req len_2p63 422 "${OCT[@]}" --data-binary @"$tmp/in/len_2p63.safetensors" "$URL/v1/datasets?name=x.safetensors"
body_has len_2p63_why "header declares 9223372036854775808 bytes"
body_has len_2p63_upload "upload $(sha256sum "$tmp/in/len_2p63.safetensors" | cut -c1-64) (uploaded as \\\"x.safetensors\\\")"
# without a name, the id alone
req unnamed 422 "${OCT[@]}" --data-binary @"$tmp/in/not_json.safetensors" "$URL/v1/datasets"
body_has unnamed_id "upload $(sha256sum "$tmp/in/not_json.safetensors" | cut -c1-64): "
body_has unnamed_offset "(at header byte"
# a name that is not UTF-8 (JSON strings must be): said as '?', and the request still answered
req name_not_utf8 422 "${OCT[@]}" --data-binary @"$tmp/in/not_json.safetensors" "$URL/v1/datasets?name=chip%E9.bin"
body_has name_not_utf8 "(uploaded as \\\"chip?.bin\\\")"
[ "$refused" -gt $((sent / 2)) ] && ok || bad "only $refused of $sent hostile uploads were refused"
stop_daemon
echo "$sent uploads, $refused refused"
finish
