#!/usr/bin/env bash
# The web page's routes under hostile requests (docs/UI.md): the page and its
# assets carry the Content-Security-Policy and friends, only their exact paths
# are served (traversal, case, suffixes and near misses are 404 problems), the
# assets hold no inline script and no markup sinks, the schema served is the
# repository's byte for byte, and a campaign's figures are tenant-scoped like
# its results (401, 404 for another tenant's, 409 before success) and carry
# no script even when the user's names are markup.
# A trial's picture (GET /v1/campaigns/{id}/picture) is checked here too:
# tenant-scoped, refused for a classification campaign and for indices out of
# range, and its golden boxes are PyTorch's.
# usage: test_ui_routes.sh BITFLIPD BITFLIP FIXTURES_DIR
set -u
BFD=$1 BF=$2 FIX=$3
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
M=$FIX/conformance/demo_digits.onnx
D=$FIX/conformance/demo_digits.eval.safetensors
OCT=(-H 'Content-Type: application/octet-stream')
JSON=(-H 'Content-Type: application/json')
CSP="Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

# --- the assets themselves: no inline script or style, no markup sinks ---------
UI=$SRC/server/ui
if grep -nE '<script(\s[^>]*)?>[^<]|<script>|<style|\sstyle=|\son[a-z]+=|javascript:' "$UI/index.html"; then
  bad "index.html has inline script or style (the CSP would block it)"; else ok; fi
for f in app.js validate.js sse.js; do
  # (comment lines aside: they say why these are not used)
  if grep -nE 'innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function|setTimeout\(["'"'"']' "$UI/$f" |
       grep -vE '^[0-9]+:\s*(/\*|\*|//)'; then
    bad "$f uses a markup or code sink (text goes in with textContent; CSP forbids eval)"; else ok; fi
done

A_TOK=bft_$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
B_TOK=bft_$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf 'alice:%s\nbob:%s\n' "$A_TOK" "$B_TOK" >"$tmp/tokens"
start_daemon "$tmp/data" --tokens-file "$tmp/tokens" || exit 1
A=(-H "Authorization: Bearer $A_TOK")
B=(-H "Authorization: Bearer $B_TOK")

# --- the page and its assets: open, with their headers ---------------------------
for p in "/:text/html" "/ui/app.js:text/javascript" "/ui/validate.js:text/javascript" "/ui/sse.js:text/javascript" \
         "/ui/app.css:text/css"; do
  path=${p%%:*} ct=${p#*:}
  req "get $path" 200 "$URL$path"
  header_has "$path content type" "Content-Type: $ct; charset=utf-8"
  header_has "$path csp" "$CSP"
  header_has "$path nosniff" "X-Content-Type-Options: nosniff"
  header_has "$path referrer" "Referrer-Policy: no-referrer"
  cmp -s "$tmp/body" "$UI/${path#/ui/}" 2>/dev/null || [ "$path" = / ] || bad "$path is not server/ui/${path#/ui/}"
done
cmp -s <(curl -sS "$URL/") "$UI/index.html" && ok || bad "/ is not server/ui/index.html"
req page_with_a_token 200 "${A[@]}" "$URL/"
req page_with_a_bad_token 200 -H "Authorization: Bearer nope" "$URL/"   # the page itself is not secret
req head_page 200 -I "$URL/"
header_has head_page_csp "$CSP"
req page_trailing_query 200 "$URL/?token=x"

# only those paths: near misses are 404 problems, never the page. (The router
# forgives one trailing slash on every route; an empty segment, an encoded
# slash or a NUL, which libmicrohttpd's decoding would turn into another
# path, is a 400 before any route is looked at.)
for p in /index.html /ui /ui/ /ui/APP.JS /ui/app.js.map /ui/app.jsx /ui/./app.js /ui/%2e%2e/v1 /ui/../v1/models \
         /ui/app.js/x /ui/app.css~ /favicon.ico /static/app.js /v1/ui/app.js; do
  req "miss $p" 404 --path-as-is "$URL$p"
  is_problem "miss $p" 404
  if grep -q "Content-Security-Policy" "$tmp/headers"; then bad "miss $p: a 404 with the page's headers"; else ok; fi
done
for p in /ui//app.js /ui/app.js%00 /ui%2Fapp.js //; do
  req "refused $p" 400 --path-as-is "$URL$p"
  is_problem "refused $p" 400
  if grep -q "Content-Security-Policy" "$tmp/headers"; then bad "refused $p: a 400 with the page's headers"; else ok; fi
done
req post_page 405 -X POST "${JSON[@]}" --data '{}' "$URL/"
header_has post_page_allow "Allow: GET"
req delete_asset 405 -X DELETE "$URL/ui/app.js"
req long_path 404 "$URL/ui/$(head -c 5000 /dev/zero | tr '\0' a)"

# --- the schema: the repository's, byte for byte --------------------------------
req schema 200 "$URL/v1/campaign.schema.json"
header_has schema_type "Content-Type: application/schema+json"
cmp -s "$tmp/body" "$SRC/api/campaign.schema.json" && ok || bad "the schema served is not api/campaign.schema.json"

# --- figures: tenant-scoped like results -----------------------------------------
req upload_model 201 "${A[@]}" "${OCT[@]}" --data-binary @"$M" "$URL/v1/models?name=%3Cscript%3Ealert(1)%3C%2Fscript%3E.onnx"
MID=$(jget "j['id']")
req upload_data 201 "${A[@]}" "${OCT[@]}" --data-binary @"$D" "$URL/v1/datasets?name=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E"
DID=$(jget "j['id']")
spec() { $PY -c "import json,sys; print(json.dumps({'model': sys.argv[1], 'dataset': sys.argv[2], 'seed': 3, 'trials': int(sys.argv[3]),
  'faults': {'tensors': ['*'], 'bits': 1}, 'sampling': 'per_bit'}))" "$MID" "$DID" "$1"; }
spec 640 >"$tmp/small.json"
spec 5000000 >"$tmp/big.json"
req small 202 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/small.json" "$URL/v1/campaigns";  SMALL=$(jget "j['id']")
req big 202 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/big.json" "$URL/v1/campaigns";  BIG=$(jget "j['id']")

req figures_no_token 401 "$URL/v1/campaigns/$SMALL/figures";  is_problem figures_no_token 401
req figures_wrong_token 401 -H "Authorization: Bearer bft_nope_nope_nope_nope" "$URL/v1/campaigns/$SMALL/figures"
req figures_other_tenant 404 "${B[@]}" "$URL/v1/campaigns/$SMALL/figures";  is_problem figures_other_tenant 404
req figures_not_an_id 404 "${A[@]}" "$URL/v1/campaigns/..%2e..%2eetc/figures";  is_problem figures_not_an_id 404
req figures_encoded_slash 400 "${A[@]}" "$URL/v1/campaigns/..%2F..%2Fetc/figures";  is_problem figures_encoded_slash 400
req figures_unknown 404 "${A[@]}" "$URL/v1/campaigns/c0000000000000000/figures"
req figures_long_id 404 "${A[@]}" "$URL/v1/campaigns/c$(head -c 300 /dev/zero | tr '\0' 0)/figures"
req figures_post 405 "${A[@]}" -X POST "$URL/v1/campaigns/$SMALL/figures"
req figures_while_running 409 "${A[@]}" "$URL/v1/campaigns/$BIG/figures";  is_problem figures_while_running 409
body_has figures_while_running_says "figures exist once it has succeeded"
req cancel_big 202 "${A[@]}" -X POST "$URL/v1/campaigns/$BIG/cancel"
AUTH=("${A[@]}")
wait_state "$BIG" canceled 60 && ok || bad "the big campaign was not canceled"
req figures_canceled 409 "${A[@]}" "$URL/v1/campaigns/$BIG/figures"
wait_state "$SMALL" succeeded 120 && ok || bad "the small campaign did not succeed"
req figures_nul_arg 400 "${A[@]}" "$URL/v1/campaigns/$SMALL/figures?format=junk&x=%00"
req figures 200 "${A[@]}" "$URL/v1/campaigns/$SMALL/figures?format=junk&x=%25"
header_has figures_type "Content-Type: application/json"
chk=$($PY - "$tmp/body" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert isinstance(j["headline"], str), "no headline"
figs = j["figures"]
assert isinstance(figs, list) and figs, "no figures"
for f in figs:
    for k in ("name", "title", "alt", "svg"):
        assert isinstance(f.get(k), str), "figure without %s" % k
    svg = f["svg"].lower()
    assert svg.lstrip().startswith("<svg") or svg.lstrip().startswith("<?xml"), "not an SVG document: %r" % svg[:40]
    for bad in ("<script", "onerror", "onload", "javascript:", "<foreignobject", "href=\"http"):
        assert bad not in svg, "figure %s holds %s" % (f["name"], bad)
print("ok")
PYEOF
)
eq figures_shape "$chk" ok
req bob_still_404 404 "${B[@]}" "$URL/v1/campaigns/$SMALL/figures"

# --- a trial's picture: detection campaigns only, drawn in a child -------------
req picture_no_token 401 "$URL/v1/campaigns/$SMALL/picture?trial=0&image=0"
req picture_other_tenant 404 "${B[@]}" "$URL/v1/campaigns/$SMALL/picture?trial=0&image=0"
req picture_classification 422 "${A[@]}" "$URL/v1/campaigns/$SMALL/picture?trial=0&image=0"
body_has picture_classification_says "is a classification campaign"
req picture_canceled 409 "${A[@]}" "$URL/v1/campaigns/$BIG/picture?trial=0&image=0"
OS=$FIX/onesample
req upload_det_model 201 "${A[@]}" "${OCT[@]}" --data-binary @"$OS/onesample_dyn.onnx" "$URL/v1/models?name=det.onnx"
DMID=$(jget "j['id']")
req upload_det_data 201 "${A[@]}" "${OCT[@]}" --data-binary @"$OS/onesample_det.eval.safetensors" "$URL/v1/datasets?name=det"
DDID=$(jget "j['id']")
$PY -c "import json,sys; print(json.dumps({'model': sys.argv[1], 'dataset': sys.argv[2], 'seed': 5, 'trials': 20,
  'faults': {'target': 'weights', 'model': 'bitflip'}}))" "$DMID" "$DDID" >"$tmp/det.json"
req det 202 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/det.json" "$URL/v1/campaigns";  DET=$(jget "j['id']")
wait_state "$DET" succeeded 120 && ok || bad "the detection campaign did not succeed"
req picture_no_trial 400 "${A[@]}" "$URL/v1/campaigns/$DET/picture?image=0";  is_problem picture_no_trial 400
req picture_bad_trial 400 "${A[@]}" "$URL/v1/campaigns/$DET/picture?trial=-1&image=0"
req picture_nul 400 "${A[@]}" "$URL/v1/campaigns/$DET/picture?trial=0%00&image=0"
req picture_trial_range 400 "${A[@]}" "$URL/v1/campaigns/$DET/picture?trial=20&image=0"
body_has picture_trial_range_says "trial 20 is out of range: the campaign has 20 trials (0 to 19)"
req picture_image_range 400 "${A[@]}" "$URL/v1/campaigns/$DET/picture?trial=0&image=10"
body_has picture_image_range_says "image 10 is out of range: the eval set has 10 images (0 to 9)"
req picture 200 "${A[@]}" "$URL/v1/campaigns/$DET/picture?trial=3&image=1"
chk=$($PY - "$tmp/body" "$OS/onesample_det.ref.json" <<'PYEOF'
import json, re, sys
f, ref = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert f["name"] == "trial", f["name"]
svg = f["svg"].lower()
for bad in ("<script", "onerror", "onload", "javascript:", "<foreignobject", "href=\"http"):
    assert bad not in svg, bad
assert all(h.startswith("data:image/png;base64,") for h in re.findall(r'href="([^"]*)"', f["svg"])), "an href not a PNG"
# golden: PyTorch's detections of image 1 over the default score threshold (0.5)
want = sorted(round(s, 4) for s in ref["golden"][1]["scores"] if s > 0.5)
got = sorted(round(float(x), 4) for x in re.findall(r'<g class="bfr-box-golden" data-label="\d+" data-score="([^"]+)"', f["svg"]))
assert got == want, (got, want)
print("ok")
PYEOF
)
eq picture_shape "$chk" ok
req ready_after 200 "$URL/v2/health/ready"
stop_daemon
finish
