#!/bin/bash
# test: parallel
# Files of a sandbox through the public API (issue 4): PUT/GET byte-exact
# (random binary), 50 MB through nginx with the API children's memory
# bounded while it flows, an over-cap Content-Length refused (413) before
# the body is sent, a missing parent (400 naming it), ?mkdir=1, 404 on a
# missing file, ?list=1, DELETE, the batch upload, and paths that try to
# escape the sandbox (`..` raw, `%2F`, `%00`, `%2e%2e`, symlinks to `/` and
# `/proc` made inside): each through nginx and straight to the FastCGI
# program. A symlink to / reads the SANDBOX's files, never the host's, and
# writing through it never touches the host.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq python3 sha256sum
rt_begin
T=$T_TMP

rt_setup it-rt-files
rt_new it-rt-files
A=$RT_ID
F=/sandboxes/$A/files

sha() { sha256sum < "$1" | cut -d' ' -f1; }
OCT=(-H 'Content-Type: application/octet-stream')

# --- byte-exact, both ways, both front ends
head -c 5000000 /dev/urandom > "$T/r5"
R5=$(sha "$T/r5")
for M in $MODES; do
	T_SECTION=$M
	req $M PUT "$F/tmp/r5-$M.bin" "@$T/r5" "${OCT[@]}"
	is "$STATUS" 204 "PUT of 5 MB of random bytes: 204"
	is "$(rt_sh "$A" "sha256sum < /tmp/r5-$M.bin | cut -d' ' -f1")" "$R5" "inside, the file is byte-exact"
	req $M GET "$F/tmp/r5-$M.bin"
	rt_body $M
	is "$STATUS|$(hdr content-type)" "200|application/octet-stream" "GET: 200 application/octet-stream"
	is "$(sha "$T/body")" "$R5" "GET gives back the same 5 MB, byte-exact"
	req $M PUT "$F/tmp/empty-$M" "@/dev/null" "${OCT[@]}"
	req $M GET "$F/tmp/empty-$M"
	is "$STATUS|${#BODY}" "200|0" "an empty file round-trips"
done
T_SECTION=""

# --- 50 MB through nginx; the API children's memory stays bounded
head -c 50000000 /dev/urandom > "$T/r50"
R50=$(sha "$T/r50")
api0=$(rt_api_rss_max)
( while :; do rt_api_rss_max; sleep 0.1; done > "$T/rss" ) &
sampler=$!
RT_BG+=("$sampler")
t0=$(date +%s.%N)
code=$(curl -sS --cacert "$SBX_CACERT" --max-time 300 -H "$(rt_auth)" -H 'Content-Type: application/octet-stream' \
	-X PUT --data-binary "@$T/r50" -o /dev/null -w '%{http_code}' "$SBX_URL$F/tmp/r50.bin")
t1=$(date +%s.%N)
code2=$(curl -sS --cacert "$SBX_CACERT" --max-time 300 -H "$(rt_auth)" -o "$T/r50.back" -w '%{http_code}' "$SBX_URL$F/tmp/r50.bin")
t2=$(date +%s.%N)
kill "$sampler" 2> /dev/null
wait "$sampler" 2> /dev/null
is "$code" 204 "PUT of 50 MB (50000000 bytes) through nginx: 204"
is "$(rt_sh "$A" "sha256sum < /tmp/r50.bin | cut -d' ' -f1")" "$R50" "the 50 MB arrived byte-exact"
is "$code2|$(sha "$T/r50.back")" "200|$R50" "GET of 50 MB gives it back byte-exact"
peak=$(sort -n "$T/rss" | tail -n1)
diag "50 MB: PUT $(awk "BEGIN{print $t1 - $t0}") s, GET $(awk "BEGIN{print $t2 - $t1}") s; largest API child VmRSS $api0 kB before, $peak kB at most during"
ok "[ $((${peak:-0} - api0)) -lt 25600 ]" "no API child grew by 25 MB while 50 MB went through (+$(((${peak:-0} - api0) / 1024)) MB): the file was never whole in it"

# --- over the cap: 413 before the body is sent
# early_413 LENGTH: sends only the head of a PUT declaring LENGTH bytes (no
# Expect), waits up to 15 s for an answer; prints the status ("none" if the
# server waited for the body).
early_413() {
	python3 - "$1" "$SBX_URL$F/tmp/big.bin" "$SBX_CACERT" "$(rt_auth)" << 'PY'
import socket, ssl, sys, urllib.parse
n, url, ca, auth = sys.argv[1:5]
u = urllib.parse.urlsplit(url)
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection((u.hostname, u.port), timeout=15), server_hostname=u.hostname)
s.sendall(('PUT %s HTTP/1.1\r\nHost: %s\r\n%s\r\nContent-Type: application/octet-stream\r\n'
           'Content-Length: %s\r\n\r\n' % (u.path, u.hostname, auth, n)).encode())
s.sendall(b'x' * 1000)
try:
    d = s.recv(4096)
    print(d.split(b' ')[1].decode() if d.startswith(b'HTTP/') else 'garbage')
except socket.timeout:
    print('none')
PY
}
is "$(early_413 52428801)" 413 "Content-Length one byte over 50 MB: 413 at once, before the body (the API's cap)"
is "$(early_413 60000000)" 413 "Content-Length of 60 MB: 413 at once, before the body"
FCGI_EXTRA=(-p CONTENT_LENGTH=52428801)
req fcgi PUT "$F/tmp/big.bin" "tiny" "${OCT[@]}"
FCGI_EXTRA=()
is "$STATUS" 413 "FastCGI: CONTENT_LENGTH over the cap with no body: 413"
error_shape 'large|limit' "413"
is "$(rt_sh "$A" "test -e /tmp/big.bin && echo exists")" "" "nothing was written"

# --- parents, mkdir, missing, list, delete
for M in $MODES; do
	T_SECTION=$M
	d=/x$M$RANDOM
	req $M PUT "$F$d/f.txt" "hello" "${OCT[@]}"
	is "$STATUS" 400 "PUT with a missing parent: 400"
	is "$(j .message)" "Destination directory does not exist: $d" "the message names the missing directory"
	req $M PUT "$F$d/sub/f.txt?mkdir=1" "hello" "${OCT[@]}"
	is "$STATUS" 204 "PUT ?mkdir=1 creates the parents: 204"
	req $M GET "$F$d/sub/f.txt"
	is "$STATUS|$BODY" "200|hello" "and the file reads back"
	req $M GET "$F$d/sub/missing.txt"
	is "$STATUS" 404 "GET of a missing file: 404"
	error_shape '.' "404"
	rt_sh "$A" "mkdir $d/sub/dir; chmod 640 $d/sub/f.txt; ln -s f.txt $d/sub/link" > /dev/null
	req $M GET "$F$d/sub?list=1"
	is "$STATUS" 200 "?list=1: 200"
	is "$(j '[.data.entries[] | {name, type}] | sort_by(.name) | map(.name + ":" + .type) | join(",")')" \
		"dir:dir,f.txt:file,link:symlink" "?list=1 lists every entry with its type"
	is "$(j '.data.entries[] | select(.name == "f.txt") | [.size, .mode, (.mtime|type)] | map(tostring) | join(",")')" \
		"5,416,number" "an entry has size, mode (0640 = 416) and mtime"
	req $M DELETE "$F$d/sub/f.txt"
	is "$STATUS" 204 "DELETE a file: 204"
	req $M GET "$F$d/sub/f.txt"
	is "$STATUS" 404 "and it is gone (404)"
	req $M DELETE "$F$d/sub/f.txt"
	is "$STATUS" 404 "DELETE of a missing file: 404"
done
T_SECTION=""

# --- batch
for M in $MODES; do
	T_SECTION=$M
	b=/tmp/batch-$M
	rt_sh "$A" "mkdir -p $b" > /dev/null
	req $M POST "$F/batch" "$(jq -nc --arg b $b '{files:[{path:($b+"/one"), content:"one\n"},
		{path:($b+"/two"), content:"AAEC/w==", encoding:"base64"}, {path:"/nodir-batch/x", content:"z"},
		{path:($b+"/../escape"), content:"z"}]}')"
	is "$STATUS" 200 "batch: 200"
	is "$(j .data.failed)" 2 "batch: failed counts the two bad files"
	is "$(j '[.data.results[] | .success] | map(tostring) | join(",")')" "true,true,false,false" "batch: one result per file, in order"
	is "$(j '.data.results[2].error')" "Destination directory does not exist: /nodir-batch" "batch: a missing parent's error"
	like "$(j '.data.results[3].error')" '\.\.' "batch: a path with .. is refused with an error"
	is "$(rt_sh "$A" "cat $b/one; od -An -tx1 $b/two | tr -d ' '; test -e /tmp/escape && echo escaped")" $'one\n000102ff' \
		"batch: the good files are written byte-exact, nothing escaped"
done
T_SECTION=""

# --- paths that try to escape
HOST_HOSTNAME=$(cat /etc/hostname)
# The sandbox's own /etc/hostname (a file of its image), read inside; and
# its hostname(1), for the report.
SB_HOSTNAME=$(rt_sh "$A" "cat /etc/hostname")
like "$SB_HOSTNAME" '.' "the sandbox's /etc/hostname: '$SB_HOSTNAME' (hostname inside: $(rt_sh "$A" hostname); the host's: $HOST_HOSTNAME)"
isnt "$SB_HOSTNAME" "$HOST_HOSTNAME" "they differ, so a leak would show"
rt_sh "$A" "ln -sfn / /tmp/root; ln -sfn /proc /tmp/proc; cat /proc/1/cmdline | tr '\\0' ' '" > "$T/sb-init-cmdline"
HOST_INIT=$(tr '\0' ' ' < /proc/1/cmdline)
for M in $MODES; do
	T_SECTION=$M
	for p in "tmp/../etc/hostname" "tmp/../../../../etc/hostname" "../../../etc/hostname" "tmp/%2e%2e/etc/hostname" \
		"etc%2Fhostname" "etc%2fhostname" "tmp/x%00y" "etc/hostname%00.txt"; do
		req $M GET "$F/$p"
		like "$STATUS" '^4' "GET files/$p is refused (4xx)"
		isnt "$BODY" "$HOST_HOSTNAME" "GET files/$p never gives the host's file"
	done
	req $M PUT "$F/tmp/../tmp/dotdot-$M" "z" "${OCT[@]}"
	is "$STATUS" 400 "PUT with .. in the path: 400"
	req $M PUT "$F/tmp%2Fslash-$M" "z" "${OCT[@]}"
	is "$STATUS" 400 "PUT with %2F in the path: 400"
	error_shape '%2F|slash' "%2F"
	req $M PUT "$F/tmp/nul-$M%00x" "z" "${OCT[@]}"
	is "$STATUS" 400 "PUT with %00 in the path: 400"

	req $M GET "$F/tmp/root/etc/hostname"
	is "$STATUS|$BODY" "200|$SB_HOSTNAME" "a symlink to / reads the sandbox's /etc/hostname, not the host's"
	req $M GET "$F/tmp/proc/1/cmdline"
	rt_body $M
	got=$(tr '\0' ' ' < "$T/body")
	isnt "$got" "$HOST_INIT" "a symlink to /proc never shows the host's pid 1 ($STATUS: '${got:0:60}')"
	ok "[ \"$STATUS\" != 200 ] || [ \"\$got\" = \"\$(cat \"\$T/sb-init-cmdline\")\" ]" "through /proc: the sandbox's own pid 1, or refused"
	req $M GET "$F/tmp/proc/self/root/etc/hostname"
	ok "[ \"$STATUS\" != 200 ] || [ \"\$BODY\" = \"\$SB_HOSTNAME\" ]" "/proc/self/root stays in the sandbox ($STATUS)"
	tag=esc-$M-$RANDOM
	req $M PUT "$F/tmp/root/tmp/$tag" "written-through-link" "${OCT[@]}"
	is "$STATUS" 204 "PUT through the symlink to / (lands in the sandbox's /tmp)"
	ok "[ ! -e /tmp/$tag ]" "the host has no /tmp/$tag"
	is "$(rt_sh "$A" "cat /tmp/$tag")" "written-through-link" "the sandbox has it"
	req $M PUT "$F/tmp/proc/self/root/tmp/$tag-p" "via-proc" "${OCT[@]}"
	ok "[ ! -e /tmp/$tag-p ]" "writing through /proc/self/root does not reach the host ($STATUS)"
	ok "[ -z \"\$(find / -xdev -maxdepth 3 -name '$tag*' 2> /dev/null)\" ]" "no file named $tag* anywhere near the host's root"
done
T_SECTION=""

rt_note_restarts "$RT_MARK"
finish
