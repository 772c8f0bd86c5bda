#!/bin/bash
# test: parallel
# The operator guide (doc/operator-guide.md) says what the code does:
#  - its settings table is exactly what `sbx-worker --help-config-md` prints
#    from the settings table every daemon reads (src/lib/settings.c), so a
#    new or changed setting fails here until the guide has it
#    (scripts/doc-settings rewrites it);
#  - every document and file it points to exists;
#  - the README points operators to it.
. "$(dirname "$0")/lib.sh"

WORKER=${SBX_WORKER_BIN:-$SBX_BUILD/workers/sbx-worker}
[ -x "$WORKER" ] || bail "sbx-worker is not built ($WORKER)"
GUIDE=$SBX_REPO/doc/operator-guide.md

plan 6
out=$("$SBX_REPO/scripts/doc-settings" --check "$WORKER" 2>&1)
ok $? "the guide's settings table is sbx-worker --help-config-md$([ -n "$out" ] && echo " (diff: $(head -c 300 <<< "$out"))")"
n_doc=$(sed -n '/^<!-- settings:begin/,/^<!-- settings:end/p' "$GUIDE" | grep -c '^| `')
n_api=$("$SBX_API_BIN" --help-config 2> /dev/null | grep -c '^[a-z]')
n_wrk=$("$WORKER" --help-config | grep -c '^[a-z]')
ok "[ $n_doc -ge $n_wrk ] && [ $n_doc -ge ${n_api:-0} ] && [ $n_wrk -gt 20 ]" \
	"it lists at least every setting sbx-worker ($n_wrk) and sbx-api (${n_api:-?}) read: $n_doc"
missing=""
for link in $(grep -oE '\]\([^)#]+\)' "$GUIDE" | sed 's/^](//; s/)$//' | grep -v '^https\?:' | sort -u); do
	[ -e "$SBX_REPO/doc/$link" ] || missing+=" $link"
done
is "$missing" "" "every document it links to exists"
missing=""
for f in $(grep -oE '`(scripts|templates|init|nginx|t/integration)/[A-Za-z0-9_./-]+`' "$GUIDE" | tr -d '`' | sort -u); do
	[ -e "$SBX_REPO/$f" ] || missing+=" $f"
done
is "$missing" "" "every file of the repository it names exists"
like "$("$WORKER" --help 2>&1)" "help-config-md" "sbx-worker --help names --help-config-md"
grep -q 'doc/operator-guide.md' "$SBX_REPO/README.md"
ok $? "the README points to the operator guide"
finish
