#!/bin/bash
# test: parallel
# `sbx shell` (issue 15): an interactive terminal in a sandbox, driven the way
# a person uses it, through tmux (a real terminal for sbx): a login shell on a
# pseudo-terminal of tmux's size, what is typed reaches it, a resize of the
# window reaches the programs inside (stty size), a curses program (top)
# draws and quits, Ctrl-C interrupts a command and the shell goes on, `exit 5`
# ends sbx with exit code 5, and the local terminal's settings are exactly
# what they were before. Plus the API under it: exec with `pty` gives a
# terminal (tty, TERM) and resize of a process without one is a 400.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq tmux
rt_begin
T=$T_TMP
SBX=$SBX_BUILD/src/cli/sbx
[ -x "$SBX" ] || bail "no sbx binary at $SBX"

rt_setup it-cli-shell
rt_new it-cli-shell
ID=$RT_ID
TM=(tmux -L "sbx-test-$$" -f /dev/null)
tm_end() { "${TM[@]}" kill-server 2> /dev/null; }
T_ON_EXIT=(tm_end "${T_ON_EXIT[@]}")

plan 15

# --- the API under it
req nginx POST "/sandboxes/$ID/exec" '{"cmd":"tty; echo $TERM; stty size","pty":{"cols":91,"rows":17}}'
is "$STATUS|$(j '.data.exit_code')" "200|0" "exec with pty: 200, exit 0"
like "$(j '.data.stdout')" $'^/dev/pts/[0-9]+\r\nxterm-256color\r\n17 91\r$' \
	"...on a terminal (/dev/pts/N, CRLF line ends), TERM=xterm-256color, of the size asked for"
req nginx POST "/sandboxes/$ID/exec" '{"cmd":"sleep 30","background":true}'
P=$(j '.data.pid')
req nginx POST "/sandboxes/$ID/processes/$P/resize" '{"cols":80,"rows":24}'
is "$STATUS|$(j '.code')" "400|no_terminal" "resize of a process started without a pty: 400 no_terminal"
req nginx POST "/sandboxes/$ID/exec" '{"cmd":"true","pty":{"cols":0,"rows":24}}'
is "$STATUS" 400 "a pty of 0 columns: 400"

# --- sbx shell under tmux
cat > "$T/run" <<EOS
#!/bin/bash
export SBX_URL='$SBX_URL' SBX_KEY='$RT_KEY' SBX_CACERT='$SBX_CACERT'
stty -g > '$T/stty-before'
'$SBX' shell '$ID'
echo \$? > '$T/rc'
stty -g > '$T/stty-after'
sleep 600
EOS
chmod 755 "$T/run"
"${TM[@]}" new-session -d -s sh -x 100 -y 30 "$T/run"
pane() { "${TM[@]}" capture-pane -p -t sh 2> /dev/null; }
pane_has() { pane | grep -qE -- "$1"; }
keys() { "${TM[@]}" send-keys -t sh "$@"; }

wait_until 60 pane_has 'root@[^ ]*:.*# *$'
ok "pane_has 'root@'" "a login shell's prompt appears in the terminal"
keys 'echo "got-$((6*7))-$TERM"; stty size' Enter
wait_until 30 pane_has '^got-42-xterm-256color'
ok "pane_has '^got-42-xterm-256color'" "what is typed reaches the shell; TERM is set"
ok "pane_has '^30 100$'" "the pty has tmux's size (30 rows, 100 columns)"

"${TM[@]}" resize-window -t sh -x 120 -y 40
wait_until 10 bash -c "[ \"\$(${TM[*]} display -p -t sh '#{window_width}')\" = 120 ]"
keys 'clear; stty size' Enter
wait_until 30 pane_has '^40 120$'
ok "pane_has '^40 120$'" "a resize of the window reaches the sandbox's terminal (40 rows, 120 columns)"

keys 'top -d 1' Enter
wait_until 30 pane_has 'load average'
ok "pane_has 'load average'" "a curses program (top) draws in the terminal"
keys q
# what is typed before top has quit is top's, or flushed by it as it puts
# the terminal back (TCSAFLUSH): the shell's line only once top is gone
wait_until 30 eval '! pane_has "load average"'
keys 'echo after-$((1+1))-top' Enter
wait_until 30 pane_has '^after-2-top'
ok "pane_has '^after-2-top'" "...quits with q and the shell goes on"

keys 'sleep 300' Enter
sleep 1
keys C-c
keys 'echo "interrupted-$?"' Enter
wait_until 30 pane_has '^interrupted-130'
ok "pane_has '^interrupted-130'" "Ctrl-C interrupts the running command (status 130) and the shell goes on"

keys 'exit 5' Enter
wait_until 30 test -s "$T/rc"
is "$(cat "$T/rc" 2> /dev/null)" 5 "exit 5 in the shell: sbx shell exits 5"
wait_until 10 test -s "$T/stty-after"
ok '[ -s "$T/stty-before" ] && cmp -s "$T/stty-before" "$T/stty-after"' \
	"the local terminal's settings are put back exactly as they were"

out=$(SBX_KEY=$RT_KEY "$SBX" shell "$ID" < /dev/null 2>&1)
rc=$?
is "$rc" 2 "sbx shell without a terminal: exit 2"
like "$out" "needs a terminal" "...saying it needs a terminal (and pointing to exec)"
