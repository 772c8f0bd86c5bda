#!/bin/bash
# sbx-snapshot — the registry side of a sandbox snapshot, run by the node
# agent's snapshot process (workers/snapshot.c) as root. Same tools and
# registry calls as templates/build and templates/unpack (plain HTTP, loopback
# registry only).
#
#   sbx-snapshot push --registry HOST:PORT --dir DIR --work WORK \
#       --base REPO@DIGEST --repo REPO --label K=V...
#     DIR: a private copy of the sandbox's overlay upper directory (it is
#     changed: overlay whiteouts, 0/0 character devices and opaque
#     directories, become the OCI layer's .wh. files). Packs it as one
#     tar+gzip layer on top of the base image's layers (mounted from the base
#     repository, stored once), pushes layer, config and manifest as
#     REPO:latest. Prints "DIGEST LAYERBYTES" (the manifest's digest, the
#     new layer's compressed size). WORK holds the intermediate files; the
#     caller removes it.
#
#   sbx-snapshot delete --registry HOST:PORT --image REPO@DIGEST
#     Deletes the image's manifest (automatic snapshots past the number kept).
#
#   sbx-snapshot pull --registry HOST:PORT --image REPO@DIGEST --dest DIR \
#       --templates STATE/templates
#     Pulls the snapshot's own layer (checked against its digest) into
#     DIR/layer in overlay form and writes DIR/image.json: {digest, env,
#     lowers}, the overlay lower directories a sandbox from it stands on (this
#     layer, then its base's: the template unpacked on this node, or the
#     snapshot below, pulled the same way). A template version no longer
#     unpacked on the node (rebuilt since) is no obstacle: its layers, by the
#     digests the snapshot's manifest records, are unpacked into DIR/base/N.
#     DIR appears complete or not at all (rename). "present" when it is there
#     already.
#
#   Layers carry user.* extended attributes and file capabilities
#   (security.capability) in pax headers, both ways.
set -euo pipefail

prog=sbx-snapshot
die() { echo "$prog: $*" >&2; exit 1; }

cmd=${1:-}
[ -n "$cmd" ] && shift
registry="" dir="" work="" base="" repo="" image="" dest="" templates=""
labels=()
while [ $# -gt 0 ]; do
	case "$1" in
	--registry) registry=${2:?}; shift 2 ;;
	--dir) dir=${2:?}; shift 2 ;;
	--work) work=${2:?}; shift 2 ;;
	--base) base=${2:?}; shift 2 ;;
	--repo) repo=${2:?}; shift 2 ;;
	--image) image=${2:?}; shift 2 ;;
	--dest) dest=${2:?}; shift 2 ;;
	--templates) templates=${2:?}; shift 2 ;;
	--label) labels+=("${2:?}"); shift 2 ;;
	*) die "unknown argument: $1" ;;
	esac
done
# Loopback only, host:port and nothing else (no path, no user, no other host).
[[ "$registry" =~ ^(127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}|localhost|\[::1\]):[0-9]{1,5}$ ]] ||
	die "registry must be on loopback as HOST:PORT: '$registry'"
reg_url="http://$registry"
accept='application/vnd.oci.image.manifest.v1+json'
repo_re='^sbx/(templates|snapshots)/[a-z0-9][a-z0-9._-]{0,63}$'
digest_re='^sha256:[0-9a-f]{64}$'

# the extended attributes a layer carries, packed and unpacked alike
xattr_opts=(--xattrs --xattrs-include='user.*' --xattrs-include='security.capability')

c() { curl -sS --noproxy '*' --connect-timeout 5 --max-time 600 "$@"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
# igzip (isal) reads and writes the same gzip ~4x (reading) to 13x (writing)
# faster than gzip; gzip when it is not installed. igzip -3 makes a layer
# ~10 % larger than gzip -6's (444 MB of tar: 186 against 169 MB, 1.5
# against 20 CPU-s).
if command -v igzip >/dev/null; then
	gunzip=igzip pack_gz=(igzip -n -3 -c)
else
	gunzip=gzip pack_gz=(gzip -n -6)
fi

upload_location() {
	local hdrs loc code
	hdrs=$(c -X POST -D - -o /dev/null -w '%{http_code}' "$reg_url/v2/$1/blobs/uploads/${2:-}") ||
		die "blob upload POST for $1 failed"
	code=${hdrs##*$'\n'}
	[ "$code" = 201 ] && return 0
	[ "$code" = 202 ] || die "blob upload POST for $1: HTTP $code"
	loc=$(awk 'tolower($1) == "location:" { print $2 }' <<<"$hdrs" | tr -d '\r')
	[ -n "$loc" ] || die "blob upload POST for $1 gave no Location"
	case "$loc" in
	http://*) ;;
	/*) loc="$reg_url$loc" ;;
	*) die "unexpected upload Location: $loc" ;;
	esac
	case "$loc" in "$reg_url"/*) ;; *) die "upload Location off registry: $loc" ;; esac
	echo "$loc"
}
has_blob() { c -f -I -o /dev/null "$reg_url/v2/$1/blobs/$2" 2>/dev/null; }
push_blob() {
	local repo=$1 file=$2 digest=$3 loc sep
	has_blob "$repo" "$digest" && return 0
	loc=$(upload_location "$repo")
	case "$loc" in *\?*) sep='&' ;; *) sep='?' ;; esac
	c -f -o /dev/null -X PUT -H 'Content-Type: application/octet-stream' \
		--data-binary "@$file" "$loc${sep}digest=$digest" || die "blob PUT $digest failed"
}
mount_blob() {
	local loc
	has_blob "$1" "$2" && return 0
	loc=$(upload_location "$1" "?mount=$2&from=$3")
	[ -z "$loc" ] || { c -o /dev/null -X DELETE "$loc" || true; die "registry did not mount $2 from $3 into $1"; }
	has_blob "$1" "$2" || die "blob $2 missing in $1 after the mount"
}

# overlay whiteouts -> OCI .wh. files (as templates/build does for its
# layers). The tree is what a sandbox wrote, so hostile: a name the marker
# file is to have may already be taken (by a symlink to a host path, say),
# and is removed first; markers are made with O_EXCL|O_NOFOLLOW, never
# through a link.
whiteouts() {
	python3 - "$1" <<'EOF'
import os, shutil, stat, sys
top = sys.argv[1]
def marker(path):
    if os.path.lexists(path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
for d, dirs, files in os.walk(top):
    for n in list(dirs) + files:
        p = os.path.join(d, n)
        if not os.path.lexists(p):
            continue
        st = os.lstat(p)
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
            os.unlink(p)
            marker(os.path.join(d, ".wh." + n))
            if n in dirs:
                dirs.remove(n)
        elif stat.S_ISDIR(st.st_mode):
            try:
                if os.getxattr(p, "trusted.overlay.opaque", follow_symlinks=False) == b"y":
                    marker(os.path.join(p, ".wh..wh..opq"))
            except OSError:
                pass
EOF
}

push() {
	[ -d "$dir" ] && [ -d "$work" ] || die "push: --dir and --work must be directories"
	[[ "$repo" =~ $repo_re ]] || die "bad repository: $repo"
	local brepo=${base%@*} bdigest=${base#*@}
	[[ "$brepo" =~ $repo_re ]] && [[ "$bdigest" =~ $digest_re ]] || die "bad base image: $base"

	whiteouts "$dir"
	local layer="$work/layer.tar.gz" diffid ldigest lsize
	# the sandbox's mount points (made by the node at each start) are not its work
	# pax, for the extended attributes: user.* and file capabilities
	# (security.capability) are the sandbox's; trusted.overlay.* are
	# overlay's bookkeeping (whiteouts() turned the opaque ones into files)
	tar -C "$dir" --sort=name --numeric-owner --format=posix --pax-option=delete=atime,delete=ctime \
		"${xattr_opts[@]}" --exclude='./run/sbx' --exclude='./.sbx' -cf "$work/layer.tar" .
	diffid="sha256:$(sha "$work/layer.tar")"
	"${pack_gz[@]}" <"$work/layer.tar" >"$layer"
	rm -f "$work/layer.tar"
	ldigest="sha256:$(sha "$layer")"
	lsize=$(stat -c %s "$layer")

	local bman="$work/base-manifest.json" bcfg="$work/base-config.json"
	c -f -H "Accept: $accept" -o "$bman" "$reg_url/v2/$brepo/manifests/$bdigest" ||
		die "cannot read the base image's manifest ($base)"
	[ "sha256:$(sha "$bman")" = "$bdigest" ] || die "the base manifest does not match $bdigest"
	c -f -o "$bcfg" "$reg_url/v2/$brepo/blobs/$(jq -r .config.digest "$bman")" ||
		die "cannot read the base image's config"

	local lj cfg="$work/config.json" cdigest csize man="$work/manifest.json" created
	created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	lj=$(printf '%s\n' "${labels[@]}" | jq -R 'select(length > 0) | capture("^(?<k>[^=]+)=(?<v>.*)$")' |
		jq -s 'map({(.k): .v}) | add // {}')
	jq -cS --arg created "$created" --arg diffid "$diffid" --argjson labels "$lj" --arg base "$base" '
		.created = $created
		| .config.Labels = ((.config.Labels // {}) + $labels + {"org.sbx.snapshot.base": $base})
		| .rootfs.diff_ids += [$diffid]
		| .history = ((.history // []) + [{created: $created, created_by: "sbx snapshot"}])' "$bcfg" >"$cfg"
	cdigest="sha256:$(sha "$cfg")"
	csize=$(stat -c %s "$cfg")
	jq -cS --arg cd "$cdigest" --argjson cs "$csize" --arg ld "$ldigest" --argjson ls "$lsize" '{
		schemaVersion: 2,
		mediaType: "application/vnd.oci.image.manifest.v1+json",
		config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: $cd, size: $cs },
		layers: (.layers + [{ mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $ld, size: $ls }])
	}' "$bman" >"$man"

	local d
	for d in $(jq -r '.layers[].digest' "$bman"); do
		[[ "$d" =~ $digest_re ]] || die "bad layer digest in the base manifest: $d"
		mount_blob "$repo" "$d" "$brepo"
	done
	push_blob "$repo" "$layer" "$ldigest"
	push_blob "$repo" "$cfg" "$cdigest"
	c -f -o /dev/null -X PUT -H "Content-Type: $accept" --data-binary "@$man" "$reg_url/v2/$repo/manifests/latest" ||
		die "manifest PUT $repo:latest failed"
	echo "sha256:$(sha "$man") $lsize"
}

# overlay form of an OCI layer, in place: .wh.NAME -> a 0/0 character device
# NAME (overlay's whiteout), .wh..wh..opq -> the directory's opaque xattr
to_overlay() {
	python3 - "$1" <<'EOF'
import os, stat, sys
top = sys.argv[1]
for d, dirs, files in os.walk(top):
    for n in files:
        if not n.startswith(".wh."):
            continue
        os.unlink(os.path.join(d, n))
        if n == ".wh..wh..opq":
            os.setxattr(d, "trusted.overlay.opaque", b"y", follow_symlinks=False)
        elif not os.path.lexists(os.path.join(d, n[4:])):
            # (a file of the same name in the same layer wins: OCI
            # whiteouts hide only lower layers)
            os.mknod(os.path.join(d, n[4:]), stat.S_IFCHR | 0o600, os.makedev(0, 0))
EOF
}

# base_layers TMP REPO BASE: the layers of TMP/manifest.json below its last
# (the base image's), each checked against its digest and unpacked into
# TMP/base/N in overlay form, 0 the lowest; sets nbase.
base_layers() {
	local t=$1 r=$2 d i=0
	nbase=0
	mkdir "$t/base"
	for d in $(jq -r '.layers[:-1][].digest' "$t/manifest.json"); do
		[[ "$d" =~ $digest_re ]] || die "bad layer digest in the manifest: $d"
		c -f -o "$t/base/blob" "$reg_url/v2/$r/blobs/$d" ||
			die "$3 is not unpacked on this node and its layer $d cannot be read from the registry"
		[ "sha256:$(sha "$t/base/blob")" = "$d" ] || die "the base layer does not match $d"
		mkdir "$t/base/$i"
		# (tar finds the compression itself)
		tar -C "$t/base/$i" --numeric-owner "${xattr_opts[@]}" -xpf "$t/base/blob" ||
			die "cannot unpack the base layer $d"
		rm -f "$t/base/blob"
		to_overlay "$t/base/$i"
		i=$((i + 1))
	done
	[ "$i" -gt 0 ] || die "$3 is not unpacked on this node and the snapshot's manifest records no base layer"
	nbase=$i
}

# pull: the snapshot's own layer (the last of its image) unpacked into
# DEST/layer in overlay form, and DEST/image.json: {digest, env, lowers}, the
# overlay lower directories top first: this layer, then its base's (a
# template unpacked on this node, or another snapshot, pulled the same way).
pull() {
	local irepo=${image%@*} idigest=${image#*@} tmp base brepo bdigest ldigest
	[[ "$irepo" =~ ^sbx/snapshots/[0-9a-f]{24}$ ]] && [[ "$idigest" =~ $digest_re ]] || die "bad image: $image"
	[ -n "$dest" ] && [ -n "$templates" ] || die "pull: --dest and --templates are needed"
	if [ -d "$dest/layer" ] && [ -f "$dest/image.json" ] && [ "$(jq -r .digest "$dest/image.json")" = "$idigest" ]; then
		echo present
		return 0
	fi
	mkdir -p "$(dirname "$dest")"
	tmp=$(mktemp -d "$(dirname "$dest")/.pull.XXXXXX")
	trap 'rm -rf --one-file-system "$tmp"' EXIT
	c -f -H "Accept: $accept" -o "$tmp/manifest.json" "$reg_url/v2/$irepo/manifests/$idigest" ||
		die "cannot read the manifest of $image"
	[ "sha256:$(sha "$tmp/manifest.json")" = "$idigest" ] || die "the manifest does not match $idigest"
	c -f -o "$tmp/config.json" "$reg_url/v2/$irepo/blobs/$(jq -r .config.digest "$tmp/manifest.json")" ||
		die "cannot read the config of $image"
	[ "sha256:$(sha "$tmp/config.json")" = "$(jq -r .config.digest "$tmp/manifest.json")" ] ||
		die "the config does not match its digest"
	base=$(jq -r '.config.Labels["org.sbx.snapshot.base"] // ""' "$tmp/config.json")
	brepo=${base%@*} bdigest=${base#*@}
	[[ "$brepo" =~ $repo_re ]] && [[ "$bdigest" =~ $digest_re ]] || die "$image names no base image"
	ldigest=$(jq -r '.layers[-1].digest' "$tmp/manifest.json")
	[[ "$ldigest" =~ $digest_re ]] || die "bad layer digest: $ldigest"
	c -f -o "$tmp/layer.tar.gz" "$reg_url/v2/$irepo/blobs/$ldigest" || die "cannot read the layer of $image"
	[ "sha256:$(sha "$tmp/layer.tar.gz")" = "$ldigest" ] || die "the layer does not match its digest"
	mkdir "$tmp/layer"
	tar -C "$tmp/layer" --numeric-owner "${xattr_opts[@]}" -I "$gunzip" -xpf "$tmp/layer.tar.gz" ||
		die "cannot unpack the layer of $image"
	rm -f "$tmp/layer.tar.gz"
	to_overlay "$tmp/layer"

	local lowers
	case "$brepo" in
	sbx/templates/*)
		local troot="$templates/${brepo#sbx/templates/}/${bdigest#sha256:}/rootfs"
		if [ -d "$troot" ]; then
			lowers=$(jq -cn --arg t "$troot" '[$t]')
		else
			# that version of the template is no longer unpacked here
			# (rebuilt since): its layers, which the manifest records
			# and the snapshot's repository holds (mounted at the push),
			# are unpacked beside ours
			base_layers "$tmp" "$irepo" "$base"
			lowers=$(jq -cn --arg d "$dest/base" --argjson n "$nbase" '[range($n - 1; -1; -1) | "\($d)/\(.)"]')
		fi
		;;
	*)
		# another snapshot below this one: its layers come after ours
		local bdir
		bdir="$(dirname "$dest")/${brepo#sbx/snapshots/}"
		"$0" pull --registry "$registry" --image "$base" --dest "$bdir" --templates "$templates" >/dev/null
		lowers=$(jq -c .lowers "$bdir/image.json")
		;;
	esac
	jq -S --arg digest "$idigest" --arg me "$dest/layer" --argjson lowers "$lowers" \
		'{digest: $digest, env: (.config.Env // []), lowers: ([$me] + $lowers)}' "$tmp/config.json" >"$tmp/image.json"
	rm -f "$tmp/manifest.json" "$tmp/config.json"
	# a pull that won a race is as good as ours (never replaced: sandboxes
	# may stand on it already)
	if ! mv -T "$tmp" "$dest" 2>/dev/null; then
		[ -d "$dest/layer" ] || die "could not move into $dest"
		return 0
	fi
	trap - EXIT
	echo pulled
}

# delete: the image's manifest goes from the registry (already gone: fine)
delete() {
	local irepo=${image%@*} idigest=${image#*@} code
	[[ "$irepo" =~ ^sbx/snapshots/[0-9a-f]{24}$ ]] && [[ "$idigest" =~ $digest_re ]] || die "bad image: $image"
	code=$(c -o /dev/null -w '%{http_code}' -X DELETE "$reg_url/v2/$irepo/manifests/$idigest") ||
		die "the registry did not answer"
	case "$code" in 200|202|404) ;; *) die "the registry refused to delete $image (HTTP $code)" ;; esac
}

case "$cmd" in
push) push ;;
pull) pull ;;
delete) delete ;;
*) die "usage: $prog push|pull|delete ..." ;;
esac
