#!/bin/bash
# test: parallel
# Concurrent execs per sandbox (issue 15; src/api/limits.c): crossed.
# Organisation A may run 2 execs at once in one sandbox (sbx-admin org limits
# --max-sandbox-execs 2; its stream limit is raised to 4 so that the
# organisation's limit is not the one met). With two streamed execs held
# open in sandbox X:
#  - a third exec in X, streamed or not, over nginx and FastCGI, is 429
#    sandbox_exec_limit with Retry-After and a message naming the limit;
#  - an exec in A's other sandbox Y runs (the limit is per sandbox);
#  - another organisation naming X gets 404, as for any id it does not own
#    (its slots are not X's: nothing to learn from a 429);
#  - once the two end, an exec in X runs again.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq python3 curl
rt_begin
T=$T_TMP

rt_setup it-exec-lim
admin org limits "$RT_ORG" --max-concurrent-requests 8 --max-concurrent-streams 4 --max-sandbox-execs 2
ok $? "sbx-admin org limits --max-sandbox-execs 2 (streams 4)"
like "$(admin org list 2> /dev/null | grep "^$RT_ORG")" 'sandbox_execs=2' "org list shows it"
admin org limits "$RT_ORG" --max-sandbox-execs 0 2> /dev/null
isnt $? 0 "a limit of 0 is refused"
rt_new it-exec-lim-x
X=$RT_ID
rt_new it-exec-lim-y
Y=$RT_ID

tag=go$RANDOM
for i in 1 2; do
	rt_stream_start "$T/held$i" "/sandboxes/$X/exec" \
		"$(rt_json "echo held-$i; while [ ! -e /tmp/$tag ]; do sleep 0.2; done; echo end-$i" 120 true)"
done
both_held() { rt_has "$T/held1" held-1 && rt_has "$T/held2" held-2; }
wait_until 30 both_held
ok $? "two streamed execs are held open in X (both printed their first line)"

for mode in nginx fcgi; do
	T_SECTION=$mode
	for stream in true false; do
		req $mode POST "/sandboxes/$X/exec" "$(rt_json "echo third" 30 $stream)"
		is "$STATUS $(j .code)" "429 sandbox_exec_limit" "a third exec in X (stream $stream): 429 sandbox_exec_limit"
		error_shape 'in this sandbox.*at most 2' "... naming the limit"
		like "$(hdr Retry-After)" '^[1-9][0-9]*$' "... with Retry-After"
	done
done
T_SECTION=""

req nginx POST "/sandboxes/$Y/exec" "$(rt_json "echo in-y" 30 false)"
is "$STATUS $(j .data.stdout)" "200 in-y" "an exec in A's other sandbox Y runs meanwhile"
REQ_AUTH="Authorization: Bearer $SBX_KEY" req nginx POST "/sandboxes/$X/exec" "$(rt_json "echo other" 30 false)"
is "$STATUS" 404 "another organisation naming X: 404, as for any id it does not own"

# end the two (a file written through the API: no exec needed)
req nginx PUT "/sandboxes/$X/files/tmp/$tag" "x" -H 'Content-Type: application/octet-stream'
ok '[ "${STATUS:0:1}" = 2 ]' "the file that ends the held execs is written ($STATUS)"
both_ended() { rt_has "$T/held1" end-1 && rt_has "$T/held2" end-2; }
wait_until 30 both_ended
ok $? "the two held execs ended"
ran_again() {
	req nginx POST "/sandboxes/$X/exec" "$(rt_json "echo again" 30 false)"
	[ "$STATUS $(j .data.stdout)" = "200 again" ]
}
wait_until 10 ran_again
ok $? "then an exec in X runs again (200)"

finish
