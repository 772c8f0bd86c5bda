#!/bin/bash
# test: parallel
# The official SDKs against sbx (issue 9): each request below is the one the
# TypeScript, Python and Go clients send (key in x-brimble-key, the region id
# they take from the regions list, teamId/environmentId in the create body,
# content_base64 in a batch, a chunked file body written slowly in pieces),
# and each answer is checked field by field against what they read:
#   - GET /sandbox/templates answers data.templates (the Go SDK reads only it);
#   - region ids are 24 hex, and the Sandbox's region is the region object;
#   - POST /sandboxes takes teamId (the caller's organisation; another one is
#     404) and environmentId (echoed as project_environment), snapshotMode
#     manual (shown on the Sandbox), destroyTimeout without autoDestroy
#     (ignored); unknown fields stay refused, naming the field;
#   - PUT .../files/{path} without Content-Length: a chunked body sent in
#     pieces over more than a second is written byte-exact; one over the cap
#     is cut off with 413, one whose client goes away is dropped, and neither
#     leaves a file or a partial one behind;
#   - POST .../files/batch with content_base64 answers {uploaded, failed,
#     results[].{path, bytes, success, error}}.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq python3 sha256sum base64
rt_begin
T=$T_TMP

rt_setup it-clients
# What the SDKs send: the key in x-brimble-key.
export REQ_AUTH="x-brimble-key: $RT_KEY"
ORG=$RT_ORG
MAX=$(conf_get file_max_bytes)
: "${MAX:=52428800}"
[[ $MAX =~ ^[0-9]+$ ]] || bail "file_max_bytes is '$MAX': this test needs it in bytes"

# --- discovery: the shapes the SDKs read
for M in $MODES; do
	T_SECTION=$M
	req $M GET /sandbox/templates
	is "$STATUS|$(j '.data | type')|$(j '.data.templates | type')" "200|object|array" \
		"templates: data is {templates: [...]} (the Go SDK reads data.templates)"
	is "$(j '[.data.templates[] | select(.name == "debian-12") | (keys | join(","))] | join(";")')" \
		"description,display_name,name" "templates: debian-12 with name, display_name, description"
	req $M GET /sandboxes/regions
	is "$STATUS|$(j '.data.regions | length')" "200|1" "regions: one region"
	like "$(j -r '.data.regions[0].id')" '^[0-9a-f]{24}$' "regions: the id is 24 lowercase hex, like every id"
	is "$(j -c '.data.regions[0] | [(keys | join(",")), .type, .enabled]')" \
		'["continent,country,enabled,id,name,type","sandbox",true]' "regions: {id, name, country, continent, enabled, type: sandbox}"
done
T_SECTION=""
# compared with sorted keys: a JSON object's key order means nothing
REGION=$(j -cS '.data.regions[0]')
REGION_ID=$(j -r '.data.regions[0].id')

# --- create: what CreateSandboxInput carries
count() { psql_q "SELECT count(*) FROM sandboxes WHERE org_id = '$ORG'"; }
ENV_ID=$(random_id)
for M in $MODES; do
	T_SECTION=$M
	before=$(count)
	req $M POST /sandboxes "{\"name\":\"it-cc-other\",\"teamId\":\"$(random_id)\",\"region\":\"$REGION_ID\"}"
	is "$STATUS|$(j -r .message)" "404|Team not found" "teamId of another team (organisation): 404, as an unknown id"
	is "$(count)" "$before" "... and nothing was created"
	req $M POST /sandboxes '{"teamId":"not-an-id"}'
	is "$STATUS" 400 "teamId that is not an id: 400"
	error_shape 'teamId' "malformed teamId"
	req $M POST /sandboxes '{"environmentId":"XYZ"}'
	is "$STATUS" 400 "environmentId that is not an id: 400"
	error_shape 'environmentId' "malformed environmentId"
	req $M POST /sandboxes '{"snapshotMode":"automatic","snapshotFrequency":"*/5 * * * * *"}'
	is "$STATUS" 400 "snapshotMode automatic with a 6-field snapshotFrequency: 400"
	error_shape 'snapshotFrequency' "automatic with a bad cron"
	req $M POST /sandboxes '{"snapshotMode":"manual","snapshotFrequency":"*/5 * * * *"}'
	is "$STATUS" 400 "snapshotFrequency with manual: 400"
	error_shape 'snapshotFrequency' "snapshotFrequency"
	req $M POST /sandboxes '{"snapshotMode":"sometimes"}'
	is "$STATUS" 400 "an unknown snapshotMode: 400"
	req $M POST /sandboxes '{"region":"local"}'
	is "$STATUS" 400 "region 'local' (not this server's region id): 400"
	req $M POST /sandboxes '{"teamId":null,"environmentId":null,"bogusField":1}'
	is "$STATUS|$(j -r .message)" "400|Unknown field: bogusField" "an unknown field is still refused, naming it"
	is "$(count)" "$before" "none of these created a record"
done
T_SECTION=""

# The TypeScript SDK's create: its input plus the region id it resolved from
# the regions list. destroyTimeout without autoDestroy is ignored.
body=$(jq -nc --arg org "$ORG" --arg env "$ENV_ID" --arg region "$REGION_ID" \
	'{name:"it-cc", template:"debian-12", teamId:$org, environmentId:$env, region:$region,
	  specs:{memory:256, disk:1}, snapshotMode:"manual", destroyTimeout:"1h"}')
for try in 1 2 3; do
	sb_create nginx "$body"
	[ "$STATUS" = 503 ] || break
	diag "create (try $try): $STATUS $(printf '%s' "$BODY" | head -c 300)"
	sleep 2
done
is "$STATUS|$(j -r .data.status)" "201|ready" "create with teamId, environmentId, region id, snapshotMode manual, destroyTimeout: 201 ready"
[ "$STATUS" = 201 ] && [ -n "$SB_ID" ] || bail "cannot create the sandbox: $STATUS $BODY"
A=$SB_ID
# check_sandbox JQ_PATH WHAT: the Sandbox object at JQ_PATH of the last body.
check_sandbox() {
	is "$(j -r "$1 | .project_environment")" "$ENV_ID" "$2: environmentId is echoed as project_environment"
	is "$(j -r "$1 | .team")" "$ORG" "$2: team is the organisation"
	is "$(j -cS "$1 | .region")" "$REGION" "$2: region is the region object of the regions list"
	is "$(j -r "$1 | .snapshot_mode")" manual "$2: snapshot_mode manual"
	is "$(j -c "$1 | [.auto_destroy, .destroy_timeout]")" '[false,null]' "$2: destroyTimeout without autoDestroy was ignored"
}
check_sandbox .data "the 201 answer"
for M in $MODES; do
	T_SECTION=$M
	req $M GET "/sandboxes/$A"
	check_sandbox .data "GET"
	req $M GET "/sandboxes?limit=100"
	check_sandbox ".data.data[] | select(.id == \"$A\")" "the list"
	req $M GET "/sandboxes/$A/wait?timeout=1"
	is "$(j -cS '.data.region')" "$REGION" "wait: region object"
done
T_SECTION=""
is "$(psql_q "SELECT project_environment || ' ' || snapshot_mode || ' ' || coalesce(destroy_timeout, '-') FROM sandboxes WHERE id = '$A'")" \
	"$ENV_ID manual -" "the record stores project_environment and snapshot_mode, and no destroy_timeout"

F=/sandboxes/$A/files
rt_sh "$A" "mkdir -p /tmp/cc-up" > /dev/null

# chunked_put PATH DATAFILE SIZES DELAY [abandon]: PUT PATH with the bytes of
# DATAFILE as a chunked body (no Content-Length), one chunk per size in
# SIZES (comma-separated), DELAY seconds apart, over TLS to nginx with the
# SDKs' headers. Prints {status, elapsed, body}. With "abandon", the client
# goes away after the chunks, without the last (empty) one.
chunked_put() {
	python3 - "$SBX_URL" "$SBX_CACERT" "$(rt_auth)" "$@" << 'PY'
import http.client, json, socket, ssl, sys, time, urllib.parse
url, ca, auth, path, datafile, sizes, delay = sys.argv[1:8]
abandon = len(sys.argv) > 8 and sys.argv[8] == 'abandon'
data = open(datafile, 'rb').read()
sizes = [int(x) for x in sizes.split(',')]
assert sum(sizes) == len(data), 'sizes do not add up'
u = urllib.parse.urlsplit(url)
ctx = ssl.create_default_context(cafile=ca)
name, _, value = auth.partition(':')
headers = {name.strip(): value.strip(), 'Content-Type': 'application/octet-stream'}

def pieces():
    off = 0
    for i, n in enumerate(sizes):
        if i:
            time.sleep(float(delay))
        yield data[off:off + n]
        off += n

t0 = time.monotonic()
if abandon:
    s = ctx.wrap_socket(socket.create_connection((u.hostname, u.port), timeout=60), server_hostname=u.hostname)
    s.sendall(('PUT %s HTTP/1.1\r\nHost: %s\r\n%s: %s\r\nContent-Type: application/octet-stream\r\n'
               'Transfer-Encoding: chunked\r\n\r\n' % (path, u.hostname, name, value.strip())).encode())
    for p in pieces():
        s.sendall(b'%x\r\n' % len(p) + p + b'\r\n')
    s.close()
    print(json.dumps({'status': 0, 'elapsed': time.monotonic() - t0, 'body': ''}))
    sys.exit(0)
c = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=300)
# an iterable body and no Content-Length: http.client sends it chunked, as
# fetch and httpx do for a stream
c.request('PUT', path, body=pieces(), headers=headers, encode_chunked=True)
r = c.getresponse()
body = r.read().decode('utf-8', 'replace')
print(json.dumps({'status': r.status, 'elapsed': time.monotonic() - t0, 'body': body,
                  'te': r.getheader('Transfer-Encoding') or ''}))
PY
}
sha() { sha256sum < "$1" | cut -d' ' -f1; }

# --- PUT with a chunked body, slowly, in pieces (nginx)
head -c 170021 /dev/urandom > "$T/slow"
out=$(chunked_put "$F/tmp/cc-up/slow.bin" "$T/slow" 1,70000,3,100000,17 0.35)
is "$(jq -r .status <<< "$out")" 204 "chunked PUT, 5 pieces 0.35 s apart: 204"
elapsed=$(jq -r .elapsed <<< "$out")
is "$(awk -v e="$elapsed" 'BEGIN { print (e > 1.2) ? "slow" : "fast" }')" slow \
	"the body really took more than a second to arrive (${elapsed:0:5} s)"
is "$(rt_sh "$A" "sha256sum < /tmp/cc-up/slow.bin | cut -d' ' -f1")" "$(sha "$T/slow")" "inside, the file is byte-exact (170021 random bytes)"
code=$(curl -sS --cacert "$SBX_CACERT" -H "$(rt_auth)" -o "$T/slow.back" -w '%{http_code}' "$SBX_URL$F/tmp/cc-up/slow.bin")
is "$code|$(sha "$T/slow.back")" "200|$(sha "$T/slow")" "GET gives it back byte-exact"

# one chunk, an empty file, a missing directory (refused while the body comes)
printf 'x' > "$T/one"
out=$(chunked_put "$F/tmp/cc-up/one" "$T/one" 1 0)
is "$(jq -r .status <<< "$out")|$(rt_sh "$A" "cat /tmp/cc-up/one")" "204|x" "chunked PUT of one byte"
: > "$T/empty"
out=$(chunked_put "$F/tmp/cc-up/empty" "$T/empty" 0 0)
is "$(jq -r .status <<< "$out")|$(rt_sh "$A" "stat -c %s /tmp/cc-up/empty")" "204|0" "chunked PUT with no bytes: an empty file"
head -c 3000000 /dev/urandom > "$T/3m"
out=$(chunked_put "$F/nodir-cc/x" "$T/3m" 1000000,1000000,1000000 0.2)
is "$(jq -r .status <<< "$out")" 400 "chunked PUT of 3 MB into a missing directory: 400"
is "$(jq -r '.body | fromjson | .message' <<< "$out")" "Destination directory does not exist: /nodir-cc" \
	"... with its message (the answer survives the body still coming)"

# --- the FastCGI program, straight: no CONTENT_LENGTH at all
FCGI_EXTRA=(-p CONTENT_LENGTH)
req fcgi PUT "$F/tmp/cc-up/fcgi.txt" "no length here" -H 'Content-Type: application/octet-stream'
FCGI_EXTRA=()
is "$STATUS|$(rt_sh "$A" "cat /tmp/cc-up/fcgi.txt")" "204|no length here" "FastCGI without CONTENT_LENGTH: 204, the body written"

# --- over the cap: 413 at the cap, no file, nothing partial
head -c $((MAX + 65536)) /dev/urandom > "$T/big"
sizes=$(python3 -c "import sys; n=$MAX + 65536; print(','.join([str(1 << 20)] * (n >> 20) + ([str(n % (1 << 20))] if n % (1 << 20) else [])))")
out=$(chunked_put "$F/tmp/cc-up/big.bin" "$T/big" "$sizes" 0)
is "$(jq -r .status <<< "$out")" 413 "a chunked body 64 KiB over the cap ($MAX bytes): 413"
like "$(jq -r '.body | fromjson | .message' <<< "$out" 2> /dev/null)" "limit $MAX bytes" "... the API's JSON answer names the limit"
rm -f "$T/big"

# --- a client that goes away half-way
head -c 200000 /dev/urandom > "$T/gone"
chunked_put "$F/tmp/cc-up/gone.bin" "$T/gone" 100000,100000 0.2 abandon > /dev/null
sleep 2
is "$(rt_sh "$A" "ls -A /tmp/cc-up | sort | tr '\n' ' '")" "empty fcgi.txt one slow.bin " \
	"neither the over-cap upload nor the abandoned one left a file or a partial one (.sbx-upload-*) behind"

# --- batch: what putFiles / put_batch send
rt_sh "$A" "mkdir -p /tmp/cc-b" > /dev/null
b1=$(printf 'hello\n' | base64)
b2=$(printf '\x00\x01\x02\xff' | base64)
for M in $MODES; do
	T_SECTION=$M
	body=$(jq -nc --arg b1 "$b1" --arg b2 "$b2" --arg m "$M" '{files:[
		{path:("/tmp/cc-b/a-" + $m + ".txt"), content_base64:$b1},
		{path:("tmp/cc-b/bin-" + $m), content_base64:$b2},
		{path:"/nodir-cc-b/x", content_base64:"aGk="},
		{path:"/tmp/cc-b/bad", content_base64:"!!not base64!!"}]}')
	req $M POST "$F/batch" "$body"
	is "$STATUS" 200 "batch with content_base64: 200"
	is "$(j -c '.data | [(keys | join(",")), .uploaded, .failed, (.results | length)]')" '["failed,results,uploaded",2,2,4]' \
		"data is {uploaded: 2, failed: 2, results: 4 entries}"
	is "$(j -c '.data.results[0]')" "{\"path\":\"/tmp/cc-b/a-$M.txt\",\"bytes\":6,\"success\":true}" \
		"results[0]: {path, bytes 6, success true}, no error"
	is "$(j -c '.data.results[1]')" "{\"path\":\"/tmp/cc-b/bin-$M\",\"bytes\":4,\"success\":true}" \
		"results[1]: a relative path, written at /, 4 binary bytes"
	is "$(j -c '.data.results[2]')" '{"path":"/nodir-cc-b/x","bytes":2,"success":false,"error":"Destination directory does not exist: /nodir-cc-b"}' \
		"results[2]: a missing directory fails alone, with its error"
	is "$(j -c '.data.results[3] | [.path, .success, (.error | test("base64"))]')" '["/tmp/cc-b/bad",false,true]' \
		"results[3]: bad base64 fails alone, naming base64"
	is "$(rt_sh "$A" "cat /tmp/cc-b/a-$M.txt; od -An -tx1 /tmp/cc-b/bin-$M | tr -d ' '; ls /tmp/cc-b | grep -c bad")" \
		$'hello\n000102ff\n0' "the files are byte-exact inside; the bad one was not written"
	req $M POST "$F/batch" '{"files":[{"path":"/tmp/cc-b/x","content_base64":"aGk=","bogus":1}]}'
	is "$STATUS|$(j -r .message)" "400|Unknown field: files[0].bogus" "an unknown field in a file: 400 naming it"
	req $M POST "$F/batch" '{"files":[{"path":"/tmp/cc-b/x","content_base64":"aGk=","content":"hi"}]}'
	is "$STATUS" 400 "content_base64 and content together: 400"
	req $M POST "$F/batch" '{"files":[{"path":"/tmp/cc-b/ext","content":"AAEC","encoding":"base64","mkdir":true}]}'
	is "$STATUS|$(j -c '.data.results[0] | [.bytes, .success]')" '200|[3,true]' "the extension still works: content + encoding base64"
done
T_SECTION=""

rt_note_restarts "$RT_MARK"
finish
