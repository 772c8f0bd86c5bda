#!/bin/bash
# test: parallel
# The spare shell (setting exec_spare_shell, on by default; src/init/spare.c,
# issue 10): after an exec of `cmd`, sbx-init starts `/bin/sh -s` for the
# next one with the same cwd and environment, and that exec runs in it
# instead of starting a shell. What the user sees must not change but for
# the shell's command line (`ps`): which shell ran is read from inside with
# `ps -o args= -p $$`. Checked through nginx:
#  - the first exec starts its shell (/bin/sh -c CMD), the next with the
#    same cwd and env runs in the spare (/bin/sh -s), JSON and streamed;
#  - nothing of one exec reaches the next (variables, cwd, traps);
#  - stdin reads as empty (cat, read), exit codes, a killed shell, $0, the
#    messages of a syntax error and of a missing command are those of sh -c;
#  - another env or cwd never gets a spare made for other ones (cold, with
#    its own values), and the one after it gets its own spare;
#  - a command over 4096 bytes starts its shell and runs whole;
#  - a timeout kills the spare's command (124, timed_out);
#  - a spare the user killed is not used: the exec still answers right;
#  - a sandbox with nothing but a spare is idle (frozen).
. "$(dirname "$0")/lib.sh"

t_require --root "runsc, the host's cgroups" runsc jq
rt_begin

rt_setup it-spare
rt_new it-spare-a '"env":{"SBENV":"base"}'
A=$RT_ID

plan 33

SHELL_OF='ps -o args= -p $$'
# run BODY-EXTRA CMD: a JSON exec of A (STATUS, BODY, OUT, ERR, CODE)
run() {
	exec_post "$A" "$2" "\"timeout_seconds\":30${1:+,$1}"
	OUT=$(j .data.stdout)
	ERR=$(j .data.stderr)
	CODE=$(j .data.exit_code)
}

T_SECTION=used
run "" "$SHELL_OF"
is "$STATUS|$OUT" "200|/bin/sh -c $SHELL_OF" "the first exec of a sandbox starts its shell: /bin/sh -c CMD"
run "" "$SHELL_OF"
is "$STATUS|$OUT" "200|/bin/sh -s" "the next, same cwd and env, runs in the spare started after the first: /bin/sh -s"
exec_post "$A" "$SHELL_OF" '"timeout_seconds":30,"stream":true'
is "$STATUS" 200 "a streamed exec: 200"
rt_body nginx
rt_frames "$T_TMP/body" sse > "$T_TMP/frames" 2> /dev/null
is "$(rt_collect "$T_TMP/frames" stdout)" "/bin/sh -s" "... and it runs in a spare too"

T_SECTION=apart
run "" 'X=leak; export Y=leak; cd /tmp; trap "echo trapped" EXIT; echo set'
is "$OUT" $'set\ntrapped' "a command sets a variable, an export, a cwd and an EXIT trap (which runs at its end)"
run "" 'echo "${X-unset}|${Y-unset}|$(pwd)"; '"$SHELL_OF"
is "$OUT" $'unset|unset|/\n/bin/sh -s' "... none of them reaches the next exec, which ran in a spare"

T_SECTION=same
run "" 'cat; echo "cat=$?"; read x; echo "read=$?"'
is "$OUT|$CODE" $'cat=0\nread=1|0' "stdin reads as empty: cat ends at once, read says end of file"
run "" 'exit 7'
is "$CODE" 7 "exit 7: exit code 7"
run "" 'kill -9 $$'
is "$CODE" 137 "the shell killed by SIGKILL: 137"
run "" 'echo "$0|$#|${SBENV-}"'
is "$OUT" "/bin/sh|0|base" "\$0 is /bin/sh, no arguments, the sandbox's env is there"
# cold and then in a spare: an env of their own, given twice
cold_warm() {
	run '"env":{"IT_SPARE_CW":"1"}' "$1"
	cold="$CODE|$ERR"
	run '"env":{"IT_SPARE_CW":"1"}' "$1"
}
cold_warm 'if'
is "$CODE|$ERR" '2|/bin/sh: 1: Syntax error: end of file unexpected (expecting "then")' \
	"a syntax error in a spare: exit 2 and sh -c's message (no line or file of a spare's own)"
is "$cold" "$CODE|$ERR" "... the same as with its own shell"
cold_warm 'no-such-command-it-spare'
is "$CODE|$ERR" "127|/bin/sh: 1: no-such-command-it-spare: not found" "a missing command in a spare: 127 and sh -c's message"
is "$cold" "$CODE|$ERR" "... the same as with its own shell"
run "" 'printf "a\000b" | od -An -c | tr -s " "; echo err >&2'
is "$OUT|$ERR" " a \\0 b|err" "bytes and stderr come through as they were written"

T_SECTION="env"
run '"env":{"IT_SPARE":"one"}' 'echo "$IT_SPARE"; '"$SHELL_OF"
is "$OUT" "one
/bin/sh -c echo \"\$IT_SPARE\"; $SHELL_OF" "an exec with its own env starts its shell, with its value"
run '"env":{"IT_SPARE":"two"}' 'echo "$IT_SPARE"; '"$SHELL_OF"
is "$OUT" "two
/bin/sh -c echo \"\$IT_SPARE\"; $SHELL_OF" "another value: never the spare made for the first (its own shell, its own value)"
run '"env":{"IT_SPARE":"two"}' 'echo "$IT_SPARE"; '"$SHELL_OF"
is "$OUT" $'two\n/bin/sh -s' "the same value again: a spare, with that value"
run "" 'echo "${IT_SPARE-unset}"; '"$SHELL_OF"
is "$OUT" $'unset\n/bin/sh -c echo "${IT_SPARE-unset}"; '"$SHELL_OF" "without it again: not that spare, and no IT_SPARE"

T_SECTION=cwd
run '"cwd":"/tmp"' "pwd; $SHELL_OF"
is "$OUT" $'/tmp\n/bin/sh -c pwd; '"$SHELL_OF" "another cwd starts its shell, in that cwd"
run '"cwd":"/tmp"' "pwd; $SHELL_OF"
is "$OUT" $'/tmp\n/bin/sh -s' "the same cwd again: a spare, in that cwd"
run '"cwd":"/tmp/it-spare-none"' "pwd"
is "$STATUS" 400 "a cwd that does not exist is refused as before, spare or not ($(j .message))"

T_SECTION=long
pad=$(head -c 5000 /dev/zero | tr '\0' x)
run "" ": $pad; echo \${#0}; $SHELL_OF | cut -c1-11"
is "$CODE|$OUT" "0|7
/bin/sh -c " "a command of 5,000 bytes (over one atomic pipe write) starts its shell and runs whole"

T_SECTION=timeout
# the long one planned no spare (it could not use one), the one before
# was for /tmp: one exec, then a spare
run "" true
run "" "$SHELL_OF"
is "$OUT" "/bin/sh -s" "(a spare again)"
exec_post "$A" 'echo started; sleep 30' '"timeout_seconds":1'
is "$(j .data.exit_code)|$(j .data.timed_out)|$(j .data.stdout)" "124|true|started" \
	"a command in a spare past its timeout: 124, timed_out, its output kept"

T_SECTION=killed
# a background exec neither uses nor replaces the spare: it kills it; its
# end is read through the files API, which starts no process
exec_post "$A" "pkill -x -f '/bin/sh -s'; echo \$? > /tmp/it-spare-kill" '"background":true'
is "$STATUS" 200 "a background exec that kills the spare: 200"
kill_done() {
	req nginx GET "/sandboxes/$A/files/tmp/it-spare-kill" > /dev/null
	[ "$STATUS" = 200 ] && [ -n "$BODY" ]
}
wait_until 30 kill_done
is "$BODY" 0 "pkill found the spare and killed it"
run "" 'echo after-kill; exit 3'
is "$STATUS|$OUT|$CODE" "200|after-kill|3" "the next exec still answers right (its own shell)"
run "" "$SHELL_OF"
is "$OUT" "/bin/sh -s" "... and the one after it has a spare again"

T_SECTION=idle
frozen() { [ "$(sb_freezer "$A")" = FROZEN ]; }
run "" true
is "$CODE" 0 "an exec, after which only sbx-init and a spare are left"
wait_until 60 frozen
ok $? "the sandbox is frozen when idle: a spare is not something running ($(sb_freezer "$A"))"
run "" "$SHELL_OF; echo thawed"
is "$OUT" $'/bin/sh -s\nthawed' "an exec of the frozen sandbox runs in its spare"
run "" "ps -e -o args= | grep -c '^/bin/sh -s\$'"
is "$OUT" 1 "one shell at a time: the command's own (the next spare starts after it)"
