#!/bin/bash
# test: parallel
# t/integration/template-unpack.t — TAP: templates/unpack applies an image's
# layers itself (no umoci): whiteouts, opaque directories, a directory
# replaced by a file and the other way round, a symbolic link by a file,
# a hard link of the layer, gzip, zstd and plain tar
# layers; a child starts from its parent's tree as hard links, and the
# parent's tree is left as it was; a layer that would write through a
# symbolic link or outside the tree, or of a media type it does not know,
# is refused and leaves nothing behind.
#
#   bash t/integration/template-unpack.t
#
# Its own registry (docker-registry) on 127.0.0.1:25061 (+ SBX_PORT_SHIFT),
# its own node state; every image is made here from small trees. Everything
# it starts it stops by pid; everything it makes lives under one directory.
set -uo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/t/integration/lib.sh"
. "$top/t/integration/reglib.sh"
# check MSG CMD...: one point, CMD's status
check() { local what=$1; shift; "$@"; ok $? "$what"; }

plan 21
tmp=$T_TMP
t_on_exit reg_stop

registry=127.0.0.1:$((25061 + ${SBX_PORT_SHIFT:-0}))
reg="http://$registry"
reg_start "$registry" "$tmp/registry" || bail "the test's registry did not answer on $registry"

c() { curl -sS --noproxy '*' --connect-timeout 5 --max-time 60 "$@"; }
# push_blob REPO FILE: prints its digest
push_blob() {
	local d loc
	d="sha256:$(sha256sum "$2" | cut -d' ' -f1)"
	loc=$(c -f -X POST -D - -o /dev/null "$reg/v2/$1/blobs/uploads/" |
		awk 'tolower($1) == "location:" { print $2 }' | tr -d '\r')
	case "$loc" in /*) loc="$reg$loc" ;; esac
	case "$loc" in *\?*) loc="$loc&" ;; *) loc="$loc?" ;; esac
	c -f -o /dev/null -X PUT -H 'Content-Type: application/octet-stream' \
		--data-binary "@$2" "${loc}digest=$d" || return 1
	echo "$d"
}
# push_image NAME FILE:MEDIATYPE...: an image sbx/templates/NAME:latest with
# those layers, bottom first
push_image() {
	local name=$1 repo=sbx/templates/$1 l f mt d layers="[]" cfg cd
	shift
	for l in "$@"; do
		f=${l%%:*} mt=${l#*:}
		d=$(push_blob "$repo" "$f") || return 1
		layers=$(jq -c --arg d "$d" --arg mt "$mt" --argjson s "$(stat -c %s "$f")" \
			'. + [{mediaType: $mt, digest: $d, size: $s}]' <<<"$layers")
	done
	cfg=$tmp/cfg-$name.json
	jq -cn --arg n "$name" '{architecture: "amd64", os: "linux", config: {Labels: {"org.sbx.template.name": $n}}, rootfs: {type: "layers", diff_ids: []}}' >"$cfg"
	cd=$(push_blob "$repo" "$cfg") || return 1
	jq -cn --arg cd "$cd" --argjson cs "$(stat -c %s "$cfg")" --argjson l "$layers" '{schemaVersion: 2,
		mediaType: "application/vnd.oci.image.manifest.v1+json",
		config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $cd, size: $cs},
		layers: $l}' >"$tmp/man-$name.json"
	c -f -o /dev/null -X PUT -H 'Content-Type: application/vnd.oci.image.manifest.v1+json' \
		--data-binary "@$tmp/man-$name.json" "$reg/v2/$repo/manifests/latest"
}
unpack() { "$top/templates/unpack" --registry "$registry" --state "$1" "${@:2}"; }
root_of() { echo "$1/templates/$2/current/rootfs"; }

# The layers. L1, gzip: the base.
mkdir -p "$tmp/outside" "$tmp/L1/a/opq" "$tmp/L1/d2f" "$tmp/L2/a/opq" "$tmp/L2/f2d" "$tmp/L3"
cd "$tmp/L1" || exit 1
echo k1 >a/keep && echo g >a/gone && echo x >a/opq/x && echo y >a/opq/y && echo i >d2f/inner &&
	echo file >f2d && echo same >shared && echo v1 >changed && ln -s "$tmp/outside" out && ln -s a rel
tar -C "$tmp/L1" --numeric-owner -cf - . | gzip -n >"$tmp/l1.tgz"
# L2, zstd: whiteouts, an opaque directory, replacements, a changed file
cd "$tmp/L2" || exit 1
: >a/.wh.gone && : >a/opq/.wh..wh..opq && echo z >a/opq/z && echo "now a file" >d2f &&
	echo c >f2d/c && echo v2 >changed && echo n >new && ln new new2 && echo r >rel
tar -C "$tmp/L2" --numeric-owner -cf - . | zstd -q >"$tmp/l2.tzst"
# L3, plain tar
echo 3 >"$tmp/L3/added3"
tar -C "$tmp/L3" --numeric-owner -cf "$tmp/l3.tar" .
cd "$tmp" || exit 1
# Layers that must be refused: through the tree's absolute symbolic link
# "out" (to $tmp/outside), a path with "..", through a symbolic link of the
# layer itself.
python3 - "$tmp" <<'EOF'
import io, sys, tarfile
tmp = sys.argv[1]
def mk(path, entries):
    with tarfile.open(path, "w") as tf:
        for name, kind, arg in entries:
            ti = tarfile.TarInfo(name)
            if kind == "file":
                data = arg.encode()
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
            elif kind == "sym":
                ti.type, ti.linkname = tarfile.SYMTYPE, arg
                tf.addfile(ti)
mk(tmp + "/e1.tar", [("./out/pwned", "file", "pwned\n")])
mk(tmp + "/e2.tar", [("./../escaped", "file", "escaped\n")])
mk(tmp + "/e3.tar", [("./l", "sym", tmp + "/outside"), ("./l/pwned3", "file", "pwned\n")])
EOF

gz=application/vnd.oci.image.layer.v1.tar+gzip
zs=application/vnd.oci.image.layer.v1.tar+zstd
pt=application/vnd.oci.image.layer.v1.tar
push_image base "$tmp/l1.tgz:$gz" &&
	push_image child "$tmp/l1.tgz:$gz" "$tmp/l2.tzst:$zs" "$tmp/l3.tar:$pt" &&
	push_image evil1 "$tmp/l1.tgz:$gz" "$tmp/e1.tar:$pt" &&
	push_image evil2 "$tmp/e2.tar:$pt" &&
	push_image evil3 "$tmp/e3.tar:$pt" &&
	push_image oddtype "$tmp/l3.tar:application/vnd.oci.image.layer.v1.tar+bzip2"
check "images pushed to a registry of the test's own" [ $? -eq 0 ]

# 2-9: the base, then the child over it
st=$tmp/state
unpack "$st" base >"$tmp/u1" 2>"$tmp/u1.err"
check "the base unpacks" [ $? -eq 0 -a -f "$(root_of "$st" base)/a/gone" ]
unpack "$st" child >"$tmp/u2" 2>"$tmp/u2.err"
check "the child unpacks" [ $? -eq 0 ]
check "the child starts from the base's tree (its first layer as hard links)" \
	grep -q 'child: the first 1 of its 3 layers from' "$tmp/u2.err"
B=$(root_of "$st" base) C=$(root_of "$st" child)
check "child: a whiteout removes the file below (.wh.gone), the rest stays" \
	[ ! -e "$C/a/gone" -a "$(cat "$C/a/keep" 2>/dev/null)" = k1 ]
check "child: an opaque directory holds only the layer's entries" \
	[ "$(ls -A "$C/a/opq" 2>/dev/null | tr '\n' ' ')" = "z " ]
check "child: a file replaces a directory, a directory a file, a file a file" \
	[ -f "$C/d2f" -a "$(cat "$C/d2f" 2>/dev/null)" = "now a file" -a -d "$C/f2d" -a \
	"$(cat "$C/f2d/c" 2>/dev/null)" = c -a "$(cat "$C/changed" 2>/dev/null)" = v2 ]
check "child: a file replaces a symbolic link (rel -> a) without following it; a hard link of the layer" \
	[ -f "$C/rel" -a ! -L "$C/rel" -a "$(cat "$C/rel" 2>/dev/null)" = r -a -L "$B/rel" -a \
	"$(cat "$B/a/keep" 2>/dev/null)" = k1 -a "$(stat -c %i "$C/new" 2>/dev/null)" = "$(stat -c %i "$C/new2" 2>/dev/null)" ]
check "child: the zstd and the plain tar layer's files are there, no .wh. file is" \
	[ "$(cat "$C/new" "$C/added3" 2>/dev/null | tr '\n' ' ')" = "n 3 " -a \
	-z "$(find "$C" -name '.wh.*')" ]

# 10-11: the base's tree is as it was; what neither layer changed is shared
check "the base's tree is untouched (changed, gone, the opaque dir, d2f, f2d)" \
	[ "$(cat "$B/changed")" = v1 -a -f "$B/a/gone" -a -f "$B/a/opq/x" -a -d "$B/d2f" -a -f "$B/f2d" ]
check "a file no layer above changed is one inode in both trees" \
	[ "$(stat -c %i "$B/shared")" = "$(stat -c %i "$C/shared")" -a "$(stat -c %h "$B/shared")" -ge 2 ]

# 12: the same child unpacked alone (every layer) is the same tree
listing() { (cd "$1" && find . -printf '%p %y %m %U %G %s %l\n' | sort); }
unpack "$tmp/alone" child >/dev/null 2>"$tmp/u3.err"
check "the child unpacked alone (3 layers) is the same tree as over its base" \
	[ $? -eq 0 -a "$(listing "$(root_of "$tmp/alone" child)")" = "$(listing "$C")" -a \
	-z "$(grep 'hard links' "$tmp/u3.err")" ]

# 13-20: refused, and nothing left behind
unpack "$st" evil1 >/dev/null 2>"$tmp/e1.err"
check "a layer writing through the tree's symbolic link (out -> a host directory) is refused" \
	[ $? -ne 0 -a ! -e "$tmp/outside/pwned" ]
check "... and says why" grep -q 'symbolic link' "$tmp/e1.err"
unpack "$st" evil2 >/dev/null 2>"$tmp/e2.err"
check "a layer with a '..' path is refused" [ $? -ne 0 -a ! -e "$tmp/escaped" -a ! -e "$st/templates/escaped" ]
unpack "$st" evil3 >/dev/null 2>"$tmp/e3.err"
check "a layer writing through its own symbolic link is refused" [ $? -ne 0 -a ! -e "$tmp/outside/pwned3" ]
unpack "$st" oddtype >/dev/null 2>"$tmp/e5.err"
check "a layer of a media type it does not know is refused, by name" \
	[ $? -ne 0 -a -n "$(grep -o 'tar+bzip2' "$tmp/e5.err")" ]
check "a refused image has no tree and no current" \
	[ ! -e "$st/templates/evil1/current" -a ! -e "$st/templates/evil3/current" -a \
	-z "$(find "$st/templates/evil1" "$st/templates/evil2" "$st/templates/evil3" -mindepth 1 2>/dev/null)" ]
check "no half-unpacked directory is left (.unpack.*)" \
	[ -z "$(find "$st/templates" -maxdepth 2 -name '.unpack.*')" ]
check "the outside directory is still empty" [ -z "$(ls -A "$tmp/outside")" ]

# 21: a second unpack of the child is a no-op
unpack "$st" child >/dev/null 2>"$tmp/u4.err"
check "a second unpack finds the child present" [ $? -eq 0 -a -n "$(grep -o present "$tmp/u4.err")" ]
finish
