#!/bin/bash
# test: parallel, slow, templates
# Templates (issue 13): every catalog template the stack built runs its
# runtime inside a sandbox, and the version it reports is the one in its
# name; GET /sandbox/templates lists exactly what this node can run, the
# default first, and each declared alias as "alias of X"; a create with an
# alias gets the template it names (the answer says which); an unknown name
# is a 400 that lists the available names. Children share their parent's
# layers in the registry.
#
# scripts/stack-up builds SBX_TEMPLATES (default: debian-12 node-22
# python-3.13 claude-code codex docker, with debian-13 as python-3.13's
# parent); templates the stack did not build are skipped here, those it
# must build are required. The coding agents are tested in
# templates-agents.t, the docker template in template-docker.t.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq
rt_begin
rt_setup it-tmpl

REQUIRED="debian-12 debian-13 node-22 python-3.13"
STATE=$(conf_get state_dir)
DEFAULT=$(conf_get default_template)
DEFAULT=${DEFAULT:-debian-12}

# ---- the list ----------------------------------------------------------

for mode in nginx fcgi; do
	req $mode GET /sandbox/templates
	is "$STATUS" 200 "$mode: GET /sandbox/templates: 200"
	is "$(j '.data.templates[0].name')" "$DEFAULT" "$mode: the default template ($DEFAULT) comes first"
done
LIST=$BODY
real=$(printf '%s' "$LIST" | jq -r '.data.templates[] | select(.description | startswith("alias of ") | not) | .name' | sort)
for t in $REQUIRED; do
	is "$(grep -cx "$t" <<<"$real")" 1 "$t is listed"
done
# exactly what the node has unpacked, no more, no less
have=$(for d in "$STATE"/templates/*/current; do [ -e "$d/rootfs" ] && basename "$(dirname "$d")"; done | sort)
is "$(echo $real)" "$(echo $have)" "the listed templates are exactly the node's unpacked ones"
alias_of() { printf '%s' "$LIST" | jq -r --arg n "$1" '.data.templates[] | select(.name == $n) | .description'; }
is "$(alias_of python-3.12)" "alias of python-3.13" "python-3.12 is listed as an alias of python-3.13"
is "$(alias_of ubuntu-24)" "alias of debian-13" "ubuntu-24 is listed as an alias of debian-13"
is "$(printf '%s' "$LIST" | jq '[.data.templates[].name] | length == (unique | length)')" true \
	"no name is listed twice"

# ---- unknown names -------------------------------------------------------

for mode in nginx fcgi; do
	req $mode POST /sandboxes '{"template":"node-99"}'
	is "$STATUS" 400 "$mode: unknown template node-99: 400"
	msg=$(j '.message')
	like "$msg" "Unknown template 'node-99'" "$mode: the message names it"
	like "$msg" "Available: $DEFAULT, .*node-22.*python-3.12" "$mode: and lists the available names, aliases too"
done

# ---- each template runs its runtime --------------------------------------

# runtime NAME -> the command that prints what the name promises, and the
# regex its output must match
declare -A CMD=(
	[debian-12]='cat /etc/debian_version'
	[debian-13]='cat /etc/debian_version'
	[node-22]='node --version'
	[node-24]='node --version'
	[python-3.13]='python3 --version'
	[bun-1]='bun --version'
)
declare -A WANT=(
	[debian-12]='^12\.[0-9]+$'
	[debian-13]='^13\.[0-9]+$'
	[node-22]='^v22\.[0-9]+\.[0-9]+$'
	[node-24]='^v24\.[0-9]+\.[0-9]+$'
	[python-3.13]='^Python 3\.13\.[0-9]+$'
	[bun-1]='^1\.[0-9]+\.[0-9]+$'
)

# npm works offline: a project with a local dependency, and npm runs it
NPM_CHECK='set -e; mkdir -p /tmp/w/dep /tmp/w/app; cd /tmp/w/dep
echo "{\"name\":\"dep\",\"version\":\"1.0.0\",\"main\":\"i.js\"}" > package.json
echo "module.exports = () => 6 * 7" > i.js
cd /tmp/w/app; npm init -y > /dev/null
npm install --offline --no-audit --no-fund ../dep > /dev/null 2>&1
echo "console.log(require(\"dep\")())" > go.js
npm pkg set scripts.go="node go.js" > /dev/null
npm run -s go'

# pip installs a wheel system-wide (no "externally managed" refusal), venv
# makes an environment with its own pip; numpy and pandas import
PY_CHECK='cd /tmp && python3 - <<EOF
import base64, hashlib, zipfile
files = {"sbxhello/__init__.py": "def hi():\n    return 42\n",
         "sbxhello-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: sbxhello\nVersion: 1.0\n",
         "sbxhello-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
rec = []
with zipfile.ZipFile("sbxhello-1.0-py3-none-any.whl", "w") as z:
    for n, d in files.items():
        b = d.encode()
        z.writestr(n, b)
        h = base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
        rec.append(f"{n},sha256={h},{len(b)}")
    rec.append("sbxhello-1.0.dist-info/RECORD,,")
    z.writestr("sbxhello-1.0.dist-info/RECORD", "\n".join(rec) + "\n")
EOF
pip install --no-index /tmp/sbxhello-1.0-py3-none-any.whl > /tmp/pip.out 2>&1 || cat /tmp/pip.out
python3 -c "import sbxhello; print(\"pip\", sbxhello.hi())"
python3 -m venv /tmp/venv && /tmp/venv/bin/pip --version > /dev/null && echo venv
python3 -c "import numpy, pandas; print(\"np\", int(numpy.arange(10).sum()), \"pd\", int(pandas.Series([1, 2, 3]).sum()))"'

# Privileged tooling: a local .deb whose maintainer script adds a system
# user, chowns and setuids its file, installs and configures
DEB_CHECK=$(cat <<'SH'
set -e
mkdir -p /tmp/d/pkg/DEBIAN /tmp/d/pkg/usr/local/bin
printf '#!/bin/sh\necho hello-from-deb\n' > /tmp/d/pkg/usr/local/bin/sbx-hello
chmod 755 /tmp/d/pkg/usr/local/bin/sbx-hello
printf 'Package: sbx-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.invalid>\nDescription: test\n' > /tmp/d/pkg/DEBIAN/control
printf '#!/bin/sh\nset -e\nadduser --system --group --no-create-home sbxsvc >/dev/null 2>&1 || useradd -r sbxsvc\nchown sbxsvc:sbxsvc /usr/local/bin/sbx-hello\nchmod 4755 /usr/local/bin/sbx-hello\n' > /tmp/d/pkg/DEBIAN/postinst
chmod 755 /tmp/d/pkg/DEBIAN/postinst
dpkg-deb --build /tmp/d/pkg /tmp/d/sbx-hello.deb >/dev/null
dpkg -i /tmp/d/sbx-hello.deb >/tmp/d/dpkg.out 2>&1 || cat /tmp/d/dpkg.out
stat -c '%U %A' /usr/local/bin/sbx-hello
sbx-hello
dpkg-query -W -f '${Status}\n' sbx-hello
SH
)
# pip installs from a package index the test serves inside the sandbox
PIP_INDEX_CHECK=$(cat <<'SH'
cd /tmp && python3 - <<PYEOF
import base64, hashlib, os, zipfile
files = {"sbxidx/__init__.py": "def hi():\n    return 7\n",
         "sbxidx-2.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: sbxidx\nVersion: 2.0\n",
         "sbxidx-2.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
rec = []
os.makedirs("idx/simple/sbxidx", exist_ok=True)
with zipfile.ZipFile("idx/sbxidx-2.0-py3-none-any.whl", "w") as z:
    for n, d in files.items():
        b = d.encode()
        z.writestr(n, b)
        h = base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
        rec.append(f"{n},sha256={h},{len(b)}")
    rec.append("sbxidx-2.0.dist-info/RECORD,,")
    z.writestr("sbxidx-2.0.dist-info/RECORD", "\n".join(rec) + "\n")
open("idx/simple/index.html", "w").write('<a href="sbxidx/">sbxidx</a>')
open("idx/simple/sbxidx/index.html", "w").write('<a href="../../sbxidx-2.0-py3-none-any.whl">sbxidx-2.0-py3-none-any.whl</a>')
PYEOF
(cd idx && python3 -m http.server 8999 --bind 127.0.0.1 > /tmp/idx.log 2>&1 &)
for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:8999/simple/ && break; sleep 0.1; done
pip install --index-url http://127.0.0.1:8999/simple/ sbxidx > /tmp/pipidx.out 2>&1 || cat /tmp/pipidx.out
python3 -c "import sbxidx; print(\"index\", sbxidx.hi())"
SH
)

for t in debian-12 debian-13 node-22 node-24 python-3.13 bun-1; do
	case $t in debian-13) more=0 ;; python-3.13) more=2 ;; *) more=1 ;; esac
	if ! grep -qx "$t" <<<"$real"; then
		skip $((2 + more)) "$t was not built by this stack (SBX_TEMPLATES)"
		continue
	fi
	sb_create nginx "{\"name\":\"it-tmpl-$t\",\"template\":\"$t\",\"specs\":{\"memory\":512,\"disk\":2}}"
	if [ "$STATUS" != 201 ]; then
		is "$STATUS" 201 "$t: create"
		skip $((1 + more)) "$t: no sandbox"
		continue
	fi
	is "$(j '.data.template')" "$t" "$t: created, template $t"
	id=$SB_ID
	out=$(rt_sh "$id" "${CMD[$t]}" 60)
	like "$out" "${WANT[$t]}" "$t: '${CMD[$t]}' says the version in its name"
	case $t in
	debian-12)
		out=$(rt_sh "$id" "$DEB_CHECK" 120)
		is "$(echo $out)" "sbxsvc -rwsr-xr-x hello-from-deb install ok installed" \
			"$t: dpkg -i of a local .deb whose postinst adds a user, chowns and setuids"
		;;
	node-22 | node-24)
		out=$(rt_sh "$id" "$NPM_CHECK" 120)
		is "$out" 42 "$t: npm installs a local dependency and runs a script"
		;;
	python-3.13)
		out=$(rt_sh "$id" "$PY_CHECK" 120)
		is "$(echo $out)" "pip 42 venv np 45 pd 6" "$t: pip installs system-wide, venv works, numpy and pandas import"
		out=$(rt_sh "$id" "$PIP_INDEX_CHECK" 120)
		is "$out" "index 7" "$t: pip installs from a package index served inside the sandbox"
		;;
	bun-1)
		out=$(rt_sh "$id" "bun -e 'console.log(6 * 7)'" 60)
		is "$out" 42 "$t: bun runs code"
		;;
	esac
	sb_delete_quiet "$id" "$(rt_auth)"
done

# ---- aliases -------------------------------------------------------------

sb_create nginx '{"name":"it-tmpl-alias","template":"python-3.12","specs":{"memory":512,"disk":2}}'
is "$STATUS" 201 "create with the alias python-3.12: 201"
is "$(j '.data.template')" python-3.13 "the answer says it is python-3.13"
if [ -n "$SB_ID" ]; then
	like "$(rt_sh "$SB_ID" 'python3 --version' 60)" '^Python 3\.13\.' "and python3 is 3.13 inside"
	req nginx GET "/sandboxes/$SB_ID"
	is "$(j '.data.template')" python-3.13 "GET says python-3.13 too"
else
	skip 2 "no sandbox"
fi

# ---- layers are shared ---------------------------------------------------

layers() {
	curl -sf --noproxy '*' -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
		"http://$SBX_REGISTRY/v2/sbx/templates/$1/manifests/latest" | jq -r '.layers[].digest'
}
base=$(layers debian-12)
child=$(layers node-22)
is "$(head -n 1 <<<"$child"):$(grep -c . <<<"$child")" "$base:2" \
	"node-22 is debian-12's layer plus one of its own"
child=$(layers python-3.13)
is "$(head -n 1 <<<"$child"):$(grep -c . <<<"$child")" "$(layers debian-13):2" \
	"python-3.13 is debian-13's layer plus one of its own"
like "$(jq -r '.version' "$STATE/templates/node-22/current/image.json")" '^22\.[0-9]+\.[0-9]+$' \
	"node-22's image records the version it got"

finish
