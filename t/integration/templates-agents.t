#!/bin/bash
# test: templates
# The coding-agent templates (issue 13): claude-code and codex, unattended
# as root under gVisor, do real tool work (write a file, run a shell command
# that checksums it) against t/integration/agent-stub.py, a stub model server
# that runs on a test host of this test's own: the network namespace
# egresslib.sh builds, at 198.51.100.20 (a "public" address routed there),
# never on this machine's loopback. The node agent runs its network in the
# test's uplink for the length of the test, and each agent's sandbox has
# restricted egress that allows exactly its stub (DESIGN.md, Tests and
# network safety).
#
# scripts/stack-up builds claude-code and codex by default (SBX_TEMPLATES);
# the ones a stack did not build are skipped.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/egresslib.sh"
t_require --root "runsc" runsc

STUB_HOST=198.51.100.20
STATE=$(conf_get state_dir)

req nginx GET /sandbox/templates
real=$(j '.data.templates[] | select(.description | startswith("alias of ") | not) | .name')
if ! grep -qx -e claude-code -e codex <<<"$real"; then
	skip 1 "neither claude-code nor codex was built by this stack (SBX_TEMPLATES)"
	finish
	exit 0
fi

eg_world || bail "cannot build the test namespaces"
eg_use_world; r=$?; ok $r "the node agent runs its network in the test uplink $EUP"; [ $r = 0 ] || bail "the node agent did not come up in the test uplink"
eg_org it-tmpl-agents

# stub NAME PORT: the stub model server on the test host; its log of
# requests is $T_TMP/stub-NAME.log (on this machine, outside the sandbox)
stub() {
	: > "$T_TMP/stub-$1.log"
	nsenter --net="/run/netns/$EPUB" -- python3 "$(dirname "$0")/agent-stub.py" "$STUB_HOST:$2" "$T_TMP/stub-$1.log" \
		/root/work/hello.txt 'made by the agent' > "$T_TMP/stub-$1.err" 2>&1 &
	EG_PIDS+=($!)
	wait_until 10 in_epub curl -sf --noproxy '*' -o /dev/null --max-time 2 "http://$STUB_HOST:$2/"
}

agent_run() { # AGENT_COMMAND -> its exit code, the file, its checksum check
	printf '%s\n' "mkdir -p /root/work && cd /root/work" \
		"$1 < /dev/null > /tmp/agent.out 2>&1; echo \"rc=\$?\"" \
		"cat /root/work/hello.txt; echo" \
		"cd /root/work && sha256sum -c hello.txt.sha256 2>&1"
}
declare -A PORT=([claude-code]=8765 [codex]=8766)
declare -A AGENT=(
	[claude-code]="ANTHROPIC_BASE_URL=http://$STUB_HOST:8765 ANTHROPIC_API_KEY=sk-stub timeout 120 claude -p 'Write hello.txt and checksum it' --dangerously-skip-permissions --output-format json"
	[codex]="OPENAI_API_KEY=sk-stub timeout 120 codex exec --skip-git-repo-check -m gpt-5-codex -c model_provider=stub -c 'model_providers.stub={name=\"stub\",base_url=\"http://$STUB_HOST:8766/v1\",wire_api=\"responses\",env_key=\"OPENAI_API_KEY\"}' 'Write hello.txt and checksum it'"
)
declare -A AGENT_VERSION=([claude-code]='claude --version' [codex]='codex --version')
for t in claude-code codex; do
	if ! grep -qx "$t" <<<"$real"; then
		skip $([ $t = claude-code ] && echo 5 || echo 3) "$t was not built by this stack (SBX_TEMPLATES)"
		continue
	fi
	stub "$t" "${PORT[$t]}"; r=$?
	ok $r "$t: the stub model server listens on the test host at $STUB_HOST:${PORT[$t]}"
	sb_create nginx "{\"name\":\"it-tmpl-$t\",\"template\":\"$t\",\"specs\":{\"memory\":1024,\"disk\":2},\"egress\":{\"mode\":\"restricted\",\"allow\":[\"$STUB_HOST:${PORT[$t]}\"]}}"
	if [ "$STATUS" != 201 ]; then
		is "$STATUS" 201 "$t: create"
		skip $([ $t = claude-code ] && echo 3 || echo 1) "$t: no sandbox"
		continue
	fi
	id=$SB_ID
	v=$(jq -r '.version' "$STATE/templates/$t/current/image.json")
	like "$(rt_sh "$id" "${AGENT_VERSION[$t]}" 60)" "$v" "$t: ${AGENT_VERSION[$t]} says $v (the recorded version)"
	if [ "$t" = claude-code ]; then
		# its template's env: IS_SANDBOX=1 (templates/claude-code/template.json)
		is "$(rt_sh "$id" 'echo "${IS_SANDBOX:-unset} $PATH"' 30)" "1 /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
			"$t: commands get the image's Env (IS_SANDBOX=1) and PATH"
		body=$(jq -nc '{cmd: "echo ${IS_SANDBOX:-unset}", env: {IS_SANDBOX: "0"}}')
		is "$(curl -sS --cacert "$SBX_CACERT" --max-time 60 -H "$(rt_auth)" -H 'Content-Type: application/json' \
			-d "$body" "$SBX_URL/sandboxes/$id/exec" 2> /dev/null | jq -r '.data.stdout // empty')" 0 \
			"$t: a call's env replaces the image's"
	fi
	out=$(rt_sh "$id" "$(agent_run "${AGENT[$t]}")" 200)
	got="$(echo $out) requests=$(grep -c . "$T_TMP/stub-$t.log")"
	is "$got" "rc=0 made by the agent /root/work/hello.txt: OK requests=3" \
		"$t: unattended as root, the agent wrote a file and checksummed it with a shell command (3 model turns to the stub on the test host)"
	[ "$got" = "rc=0 made by the agent /root/work/hello.txt: OK requests=3" ] ||
		diag "$(rt_sh "$id" 'tail -c 1500 /tmp/agent.out' 30; cat "$T_TMP/stub-$t.err" "$T_TMP/stub-$t.log")"
	sb_delete_quiet "$id" "$(rt_auth)"
done

finish
