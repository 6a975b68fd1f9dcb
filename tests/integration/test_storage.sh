#!/usr/bin/env bash
# Storage: a full disk is a 507 that loses nothing (the daemon under an
# LD_PRELOAD shim that fails writes with ENOSPC); a blob with one bit flipped
# on disk fails its campaign with "model blob ... is corrupt (sha256
# mismatch)" and shows "corrupt": true, and uploading the bytes again repairs
# it; `bitflipd --check` is clean on a whole data dir and names what is wrong
# otherwise (corrupt, missing and orphan blobs, a damaged database).
# usage: test_storage.sh BITFLIPD BITFLIP FIXTURES_DIR   (BFD_ENOSPC_SHIM: the shim, from CMake)
set -u
BFD=$1 BF=$2 FIX=$3
. "$(dirname "$0")/lib.sh"
M=$FIX/conformance/demo_digits.onnx
M2=$FIX/conformance/digits_mlp.onnx   # 68 KiB: larger than the disk has left below
D=$FIX/conformance/demo_digits.eval.safetensors
OCT=(-H 'Content-Type: application/octet-stream')
JSON=(-H 'Content-Type: application/json')
SHIM=${BFD_ENOSPC_SHIM:-$(dirname "$BFD")/tests/libenospc_shim.so}
[ -f "$SHIM" ] || { echo "no ENOSPC shim at $SHIM (build target enospc_shim)"; exit 1; }
spec() {  # spec MODEL_ID DATASET_ID > spec.json
  $PY -c "import json,sys; s=json.load(open(sys.argv[1])); s['model']=sys.argv[2]; s['dataset']=sys.argv[3]; s['trials']=20; print(json.dumps(s))" \
    "$FIX/specs/digits_weights.json" "$1" "$2"
}
check_dir() {  # check_dir DIR: runs --check, output in $tmp/check, sets CHECK_RC
  "$BFD" --check --data-dir "$1" >"$tmp/check" 2>&1; CHECK_RC=$?
}

# --- a full disk ---------------------------------------------------------------------
# the budget counts only once $tmp/full exists: the daemon starts normally
export BFD_ENOSPC_ARM=$tmp/full BFD_ENOSPC_BUDGET=32768
LD_PRELOAD=$SHIM ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 start_daemon "$tmp/data" || exit 1
req upload_model 201 "${OCT[@]}" --data-binary @"$M" "$URL/v1/models?name=digits"
MID=$(jget "j['id']")
req upload_dataset 201 "${OCT[@]}" --data-binary @"$D" "$URL/v1/datasets"
DID=$(jget "j['id']")
touch "$tmp/full"
req full_upload 507 "${OCT[@]}" --data-binary @"$M2" "$URL/v1/models?name=big"
is_problem full_upload 507
body_has full_upload_says "disk is full"
header_has full_upload_retry "Retry-After"
[ -z "$(ls -A "$tmp/data/tmp")" ] && ok || bad "the failed upload left temp files: $(ls "$tmp/data/tmp")"
spec "$MID" "$DID" >"$tmp/spec.json"
req full_submit 507 "${JSON[@]}" --data-binary @"$tmp/spec.json" "$URL/v1/campaigns"   # SQLite cannot write either
is_problem full_submit 507
req full_still_ready 200 "$URL/v2/health/ready"
req full_still_lists 200 "$URL/v1/models";  eq full_lists_one "$(jget "[i['id'] for i in j['items']]")" "['$MID']"
req full_still_reads 200 "$URL/v1/models/$MID"
rm -f "$tmp/full"   # space again: the same requests now work
req freed_upload 201 "${OCT[@]}" --data-binary @"$M2" "$URL/v1/models?name=big"
req freed_submit 202 "${JSON[@]}" --data-binary @"$tmp/spec.json" "$URL/v1/campaigns"
CID=$(jget "j['id']")
wait_state "$CID" succeeded 120 && ok || bad "campaign after a full disk"
stop_daemon
unset BFD_ENOSPC_ARM BFD_ENOSPC_BUDGET
check_dir "$tmp/data"
eq check_after_full_disk "$CHECK_RC" 0
grep -q "clean: database ok, 3 blobs verified" "$tmp/check" && ok || bad "--check after the full disk: $(cat "$tmp/check")"

# --- one bit flipped in a model blob ---------------------------------------------------
BLOB=$tmp/data/blobs/${MID:0:2}/$MID
$PY -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[len(b)//2]^=0x10; open(p,'wb').write(b)" "$BLOB"
check_dir "$tmp/data"
eq check_corrupt_rc "$CHECK_RC" 1
grep -q "corrupt   model blob $MID is corrupt (sha256 mismatch)" "$tmp/check" && ok || bad "--check does not name the blob: $(cat "$tmp/check")"
start_daemon "$tmp/data" || exit 1
req corrupt_submit 202 "${JSON[@]}" --data-binary @"$tmp/spec.json" "$URL/v1/campaigns"
CID=$(jget "j['id']")
wait_state "$CID" failed 60 && ok || bad "a campaign on a corrupt model did not fail"
req corrupt_campaign 200 "$URL/v1/campaigns/$CID"
body_has corrupt_campaign_error "model blob $MID is corrupt (sha256 mismatch)"
req corrupt_item 200 "$URL/v1/models/$MID";  eq corrupt_flag "$(jget "j['corrupt']")" True
req corrupt_list 200 "$URL/v1/models"
eq corrupt_in_list "$(jget "sorted((i['id'] == '$MID', i['corrupt']) for i in j['items'])")" "[(False, False), (True, True)]"
req repair_upload 200 "${OCT[@]}" --data-binary @"$M" "$URL/v1/models?name=digits"   # the same bytes again
eq repaired_flag "$(jget "j['corrupt']")" False
req repaired_submit 202 "${JSON[@]}" --data-binary @"$tmp/spec.json" "$URL/v1/campaigns"
CID=$(jget "j['id']")
wait_state "$CID" succeeded 120 && ok || bad "campaign after the repair"
stop_daemon
check_dir "$tmp/data"
eq check_repaired "$CHECK_RC" 0

# --- missing and orphan blobs, a damaged database ---------------------------------------
cp -a "$tmp/data" "$tmp/broken"
rm "$tmp/broken/blobs/${DID:0:2}/$DID"
mkdir -p "$tmp/broken/blobs/ff"; echo stray >"$tmp/broken/blobs/ff/ff00"
check_dir "$tmp/broken"
eq check_broken_rc "$CHECK_RC" 1
grep -q "missing   dataset blob $DID" "$tmp/check" && ok || bad "--check: missing blob not named: $(cat "$tmp/check")"
grep -q "orphan .*blobs/ff/ff00" "$tmp/check" && ok || bad "--check: orphan not named: $(cat "$tmp/check")"
grep -q "^2 problems" "$tmp/check" && ok || bad "--check: wrong count: $(cat "$tmp/check")"
cp -a "$tmp/data" "$tmp/baddb"
rm -f "$tmp/baddb/bitflip.db-wal" "$tmp/baddb/bitflip.db-shm"
$PY -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(0); f.write(b'not a database, not at all')" "$tmp/baddb/bitflip.db"
check_dir "$tmp/baddb"
eq check_baddb_rc "$CHECK_RC" 1
grep -q "database .*bitflip.db" "$tmp/check" && ok || bad "--check: a damaged database not named: $(cat "$tmp/check")"
check_dir "$tmp/nothing-here"
eq check_no_dir "$CHECK_RC" 1
[ ! -e "$tmp/nothing-here" ] && ok || bad "--check created the data dir it checked"

finish
