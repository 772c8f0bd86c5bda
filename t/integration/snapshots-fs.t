#!/bin/bash
# test: templates
# Snapshots hold the whole filesystem a sandbox sees (API.md "Snapshots",
# issue 12), beyond the overlay's upper directory that snapshots.t covers:
#  - /tmp (on the sandbox's disk, bind-mounted over the image's /tmp): its
#    files, directories and modes are in the snapshot and come back on
#    fromSnapshot; the layer's /tmp is opaque (the registry's layer holds the
#    OCI marker), so a file deleted from /tmp stays deleted in a snapshot of a
#    restored sandbox (chained: S2 on S1);
#  - extended attributes: a user.* attribute and a file capability
#    (security.capability) come back, seen inside the restored sandbox and by
#    the host's getcap. gVisor's gofer refuses setxattr from inside a sandbox
#    (EOPNOTSUPP, runsc 20240729, measured), so a sandbox's files get them
#    from its image (overlay's copy-up keeps them); the test puts them in the
#    upper directory from the host, where a copy-up would;
#  - the template version a snapshot stands on is no longer unpacked on the
#    node (a rebuilt template, simulated: node-22's unpacked version renamed
#    to a new digest, `current` pointing there): fromSnapshot still works,
#    the node unpacks the base layers the snapshot's manifest records (from
#    the snapshot's own repository) beside its layer, and the files of every
#    layer are right (the template's two layers and the snapshot's).
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, the state directory, setcap on the upper directory" runsc jq curl setcap getcap python3
require_stack

: "${SBX_REGISTRY:=$(conf_get registry_url | sed 's|^http://||; s|/$||')}"
REG="http://$SBX_REGISTRY"
SNAPIMG=$SB_STATE/snapshots/images
TDIR=$SB_STATE/templates/node-22
MOVED=""

# tmpl_move FROM TO: node-22's version FROM renamed TO as the node sees it:
# a copy of hard links under TO first, `current` swapped to it in one
# rename, FROM removed. Never a moment when `current` names nothing: the
# node's heartbeat registers only the templates whose current/image.json it
# reads, and one that fell between a rename of FROM and the swap left
# node-22 out for a reaper interval, in which a create got "Unknown
# template 'node-22'" (a CI run of 2026-12-05).
tmpl_move() {
	cp -al "$TDIR/$1" "$TDIR/$2" &&
		ln -sfn "$2" "$TDIR/.current.test" && mv -T "$TDIR/.current.test" "$TDIR/current" &&
		rm -rf --one-file-system "${TDIR:?}/$1"
}

SNAPS=()
fs_cleanup() {
	local s
	# the "rebuilt" template back as it was
	if [ -n "$MOVED" ] && [ -d "$TDIR/$MOVED" ]; then
		tmpl_move "$MOVED" "$OLDHEX"
	fi
	for s in "${SNAPS[@]}"; do
		curl -sS -o /dev/null --cacert "$SBX_CACERT" --max-time 40 -X DELETE -H "$REQ_AUTH" \
			"$SBX_URL/sandboxes/snapshots/$s" 2> /dev/null
	done
}
t_on_exit sb_cleanup fs_cleanup

fresh_org it-snapshots-fs

# snapshot SANDBOX NAME: SNAP is its id once ready (or failed)
snapshot() {
	req nginx POST "/sandboxes/$1/snapshots" "{\"name\":\"$2\"}"
	SNAP=$(j '.data.id // empty')
	[ -n "$SNAP" ] && SNAPS+=("$SNAP")
	wait_until 180 snap_settled "$1" "$SNAP"
	SNAP_ST=$(snap_status "$1" "$SNAP")
}
TMPFP='cd /tmp && for p in keep.txt dir dir/inner gone.txt new.txt; do
	if [ -d "$p" ]; then echo "$p D $(stat -c %a "$p")";
	elif [ -f "$p" ]; then echo "$p F $(stat -c %a "$p") $(cat "$p")";
	else echo "$p -"; fi; done; echo "tmp $(stat -c %a /tmp)"'
# (gVisor pads the value it answers with NULs up to the caller's buffer:
# both sides compare without trailing NULs)
XATTRS='python3 -c "import os
print(os.getxattr(\"/root/work/attr.txt\", \"user.sbx.note\").rstrip(b\"\\0\").decode())
print(os.getxattr(\"/root/work/capbin\", \"security.capability\").rstrip(b\"\\0\").hex())"'

# ---- /tmp and extended attributes -------------------------------------------------
T_SECTION=tmp-xattrs
sb_create nginx '{"name":"it-snapfs-a","specs":{"memory":256,"disk":1}}'
A=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "sandbox A is ready"
sexec "$A" 'set -e; echo kept > /tmp/keep.txt; chmod 640 /tmp/keep.txt; mkdir -m 750 /tmp/dir
	echo in > /tmp/dir/inner; echo bye > /tmp/gone.txt
	mkdir -p /root/work; echo note > /root/work/attr.txt; cp /bin/true /root/work/capbin; sync'
is "$CODE" 0 "A writes files in /tmp and two files for attributes"
PA=$(sb_place "$A")
UP=$SB_STATE/sandboxes/$PA/disk/upper/root/work
wait_until 10 test -f "$UP/capbin"
python3 -c "import os; os.setxattr('$UP/attr.txt', 'user.sbx.note', b'hello-xattr')" 2> "$T_TMP/xattr.err"
setcap cap_net_bind_service+ep "$UP/capbin" 2>> "$T_TMP/xattr.err"
is "$(getcap "$UP/capbin" 2> /dev/null | awk '{print $2}')" cap_net_bind_service=ep \
	"a file capability and a user.* attribute on A's files (host side, as copy-up would put them)"
CAPHEX=$(python3 -c "import os; print(os.getxattr('$UP/capbin', 'security.capability').rstrip(b'\\0').hex())" 2> /dev/null)
sexec "$A" "$TMPFP"
FP_A=$OUT
like "$FP_A" 'keep.txt F 640 kept' "A sees its /tmp"
snapshot "$A" it-snapfs-1
S1=$SNAP
is "$SNAP_ST" ready "snapshot S1 of A is ready"

# independent look: the layer in the registry (its last) holds /tmp, opaque
MAN=$(curl -sS --noproxy '*' -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
	"$REG/v2/sbx/snapshots/$S1/manifests/latest")
LAYER=$(jq -r '.layers[-1].digest' <<< "$MAN")
curl -sS --noproxy '*' -o "$T_TMP/layer.tgz" "$REG/v2/sbx/snapshots/$S1/blobs/$LAYER"
LIST=$(tar -tzf "$T_TMP/layer.tgz" 2> /dev/null)
like "$LIST" $'(^|\n)\\./tmp/keep\\.txt(\n|$)' "the layer holds /tmp's files"
like "$LIST" $'(^|\n)\\./tmp/\\.wh\\.\\.wh\\.\\.opq(\n|$)' "and /tmp as an opaque directory (the OCI marker)"
like "$(tar --xattrs -tvvzf "$T_TMP/layer.tgz" 2> /dev/null | grep -A3 'root/work/attr.txt')" 'user\.sbx\.note' \
	"the layer carries the user.* attribute (pax header)"

sb_create nginx "{\"name\":\"it-snapfs-b\",\"fromSnapshot\":\"$S1\",\"specs\":{\"memory\":256,\"disk\":1}}"
B=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "B from S1 is ready"
sexec "$B" "$TMPFP"
is "$OUT" "$FP_A" "B's /tmp is A's at the snapshot: files, directory, contents, modes"
sexec "$B" "$XATTRS"
is "$CODE $OUT" "0 hello-xattr
$CAPHEX" "inside B: the user.* attribute and the file capability are back"
PB=$(sb_place "$B")
is "$(getcap "$SB_STATE/sandboxes/$PB/rootfs/root/work/capbin" 2> /dev/null | awk '{print $2}')" \
	cap_net_bind_service=ep "getcap on B's root (host side): cap_net_bind_service=ep"
sexec "$B" 'rm /tmp/gone.txt && echo fresh > /tmp/new.txt && echo more >> /tmp/keep.txt && echo tmp-ok'
is "$OUT" tmp-ok "B deletes, adds and changes files in /tmp"
sexec "$B" "$TMPFP"
FP_B=$OUT
snapshot "$B" it-snapfs-2
S2=$SNAP
is "$SNAP_ST" ready "snapshot S2 of B (on S1) is ready"
sb_create nginx "{\"name\":\"it-snapfs-c\",\"fromSnapshot\":\"$S2\",\"specs\":{\"memory\":256,\"disk\":1}}"
C=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "C from S2 is ready"
sexec "$C" "$TMPFP"
is "$OUT" "$FP_B" "C's /tmp is B's at its snapshot"
like "$OUT" 'gone.txt -' "a file deleted from /tmp stays deleted (though S1 below has it)"
sexec "$C" "$XATTRS"
is "$CODE $OUT" "0 hello-xattr
$CAPHEX" "the attributes pass through a chain of snapshots"
for x in "$B" "$C"; do req nginx DELETE "/sandboxes/$x" > /dev/null; done

# ---- the template rebuilt since the snapshot ------------------------------------------
T_SECTION=rebuilt-template
OLDHEX=$(readlink "$TDIR/current" 2> /dev/null)
sb_create nginx '{"name":"it-snapfs-n","template":"node-22","specs":{"memory":256,"disk":1}}'
N=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "a node-22 sandbox is ready"
sexec "$N" 'set -e; mkdir -p /root/app; echo app > /root/app/main.js; rm /etc/debian_version; echo ok'
is "$OUT" ok "it adds a file and deletes one of the template's"
snapshot "$N" it-snapfs-node
S3=$SNAP
is "$SNAP_ST" ready "snapshot S3 of it is ready"
like "$(psql_q "SELECT coalesce(source_template, '') FROM snapshots WHERE id = '$S3'")" node-22 "on node-22"
is "$(curl -sS --noproxy '*' -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
	"$REG/v2/sbx/snapshots/$S3/manifests/latest" | jq '.layers | length')" 3 \
	"its image: node-22's two layers and its own"
# "rebuilt": the version S3 stands on is no longer unpacked; current names another
NEWHEX=$(head -c 32 /dev/urandom | sha256sum | cut -c1-64)
if [[ $OLDHEX =~ ^[0-9a-f]{64}$ ]] && tmpl_move "$OLDHEX" "$NEWHEX"; then
	MOVED=$NEWHEX
fi
ok "[ -n '$MOVED' ] && [ ! -e '$TDIR/$OLDHEX' ] && [ -d '$TDIR/current/rootfs' ]" \
	"node-22 'rebuilt' on the node: ${OLDHEX:0:12} gone, current -> ${NEWHEX:0:12}"
ok "[ ! -e '$SNAPIMG/$S3' ]" "the node has no copy of S3's image yet"
sb_create nginx "{\"name\":\"it-snapfs-r\",\"fromSnapshot\":\"$S3\",\"specs\":{\"memory\":256,\"disk\":1}}"
R=$SB_ID
is "$STATUS $(j .data.status)" "201 ready" "fromSnapshot S3 still works: 201 ready ($(j .message))"
is "$(jq -c '.lowers | map(sub(".*/images/[0-9a-f]+/"; ""))' "$SNAPIMG/$S3/image.json" 2> /dev/null)" \
	'["layer","base/1","base/0"]' "the node unpacked the base layers S3's manifest records, beside its layer"
sexec "$R" 'cat /root/app/main.js; test -e /etc/debian_version && echo debian-version || echo no-debian-version
	test -f /etc/os-release && echo os-release; node --version | cut -c1-3'
is "$CODE $OUT" "0 app
no-debian-version
os-release
v22" "R's files: the snapshot's (added, deleted) over node-22's layers (node, Debian)"
req nginx DELETE "/sandboxes/$R" > /dev/null
req nginx DELETE "/sandboxes/$N" > /dev/null

finish
