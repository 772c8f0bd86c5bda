#!/bin/bash
# test: parallel
# The README's first command ends with scripts/demo: it must really create a
# sandbox, stream a command's output, write and read a file and destroy it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(timeout 300 "$here/../../scripts/demo" 2>&1)
rc=$?
n=0 fails=0
check() { n=$((n + 1)); if eval "$1"; then echo "ok $n - $2"; else fails=$((fails + 1)); echo "not ok $n - $2"; fi; }
echo "1..6"
check '[ $rc = 0 ]' "scripts/demo exits 0"
check 'grep -q "\"status\":\"ready\"" <<<"$out"' "the sandbox was created ready"
check 'grep -q "data: {\"type\":\"stdout\",\"data\":\"tick 3\\\\n\"}" <<<"$out"' "the command's output came as SSE frames"
check 'grep -q "\"type\":\"done\",\"exit_code\":0" <<<"$out"' "the stream ended with done, exit code 0"
check 'grep -q "^hello from " <<<"$out"' "the file written was read back"
check 'grep -q "\"status\":\"destroyed\",\"destroy_reason\":\"user\"" <<<"$out"' "the sandbox was destroyed"
[ $fails = 0 ] || { echo "# demo output:"; sed 's/^/#   /' <<<"$out"; }
exit $((fails > 0))
