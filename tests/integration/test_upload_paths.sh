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
refused=0 sent=0
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  name=$(basename "$f")
  sha=$(sha256sum "$f" | cut -c1-64)
  case $name in
    *.onnx) kinds="models datasets" ;;
    *.bfmap) kinds="error-maps datasets" ;;
    *.safetensors|*.bin) kinds="datasets" ;;
    *.json) continue ;;   # bomb.json: a spec naming files, not an upload
    *) kinds="models datasets error-maps" ;;
  esac
  for kind in $kinds; do
    sent=$((sent+1))
    code=$(curl -sS -o "$tmp/body" -w '%{http_code}' "${OCT[@]}" --data-binary @"$f" \
      "$URL/v1/$kind?name=$name" 2>"$tmp/curl_err")
    if grep -qF -- "$DATA" "$tmp/body" || grep -qF -- "$tmp" "$tmp/body" || grep -qF -- "/blobs/" "$tmp/body"; then
      bad "$kind $name: the reply shows the server's disk"; head -c 600 "$tmp/body"; echo
    else ok; fi
    case $code in
      200|201) ok ;;
      422) refused=$((refused+1))
           if grep -qF -- "upload $sha (uploaded as \\\"$name\\\"): " "$tmp/body"; then ok; else
             bad "$kind $name: the 422 does not name the upload $sha as \"$name\""; head -c 600 "$tmp/body"; echo; fi ;;
      *) bad "$kind $name: HTTP $code"; head -c 600 "$tmp/body"; echo; cat "$tmp/curl_err" ;;
    esac
  done
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
