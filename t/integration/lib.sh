# Shared helpers of the integration tests (bash; sourced, never run).
#
# - the stack's environment (scripts/stack-env, or the contract's defaults);
# - TAP: plan, ok, is, isnt, like, unlike, diag, skip, finish;
# - req MODE METHOD PATH [BODY] [-H 'Name: value']...: one request either
#   through nginx over HTTPS (MODE=nginx) or straight to sbx-api's FastCGI
#   socket with t/fcgi/fcgi-req (MODE=fcgi), so nginx's normalisation cannot
#   hide a bug. Sets STATUS, BODY and HDRS; `hdr NAME` reads one header.
# - keys and organisations through sbx-admin; psql_q for independent checks.
#
# Tests do not use `set -e`: a failing check must be reported and the test
# must go on to the next one.

SBX_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

if [ -f "$SBX_REPO/scripts/stack-env" ]; then
	# shellcheck source=/dev/null
	. "$SBX_REPO/scripts/stack-env"
fi
# The contract's values, for whatever stack-env did not set.
: "${SBX_STACK_DIR:=$SBX_REPO/.stack}"
: "${SBX_BUILD:=$SBX_REPO/build}"
: "${SBX_CONF:=$SBX_STACK_DIR/sbx.conf}"
: "${SBX_URL:=https://127.0.0.1:8443}"
: "${SBX_CACERT:=$SBX_STACK_DIR/tls/ca.pem}"
: "${SBX_API_SOCKET:=$SBX_STACK_DIR/run/api.sock}"
: "${SBX_ADMIN:=$SBX_BUILD/src/cli/sbx-admin}"
: "${SBX_API_BIN:=$SBX_BUILD/src/api/sbx-api}"
: "${SBX_WORKER_BIN:=$SBX_BUILD/workers/sbx-worker}"
if [ -z "${SBX_KEY:-}" ] && [ -r "$SBX_STACK_DIR/api-key" ]; then
	SBX_KEY=$(tr -d ' \n' < "$SBX_STACK_DIR/api-key")
fi
export SBX_STACK_DIR SBX_BUILD SBX_CONF SBX_URL SBX_CACERT SBX_API_SOCKET SBX_KEY

MODES=${SBX_TEST_MODES:-nginx fcgi}
FCGI_EXTRA=()
T_TMP=$(mktemp -d "${TMPDIR:-/tmp}/sbx-it.XXXXXX")
# t_nap SECS: sleeps SECS (fractions too) without a process: a read with a
# timeout on a FIFO nobody writes, open in this shell (its subshells and
# jobs share it). A `sleep` is a process start and end, which costs a
# 2-core machine under a paravirtualised hypervisor ~10 ms of CPU (fork,
# exec and the teardown of its address space), and the polls of a run sleep
# thousands of times.
T_NAP_FD=""
mkfifo "$T_TMP/nap.fifo" && exec {T_NAP_FD}<> "$T_TMP/nap.fifo"
t_nap() {
	[ -n "$T_NAP_FD" ] || { sleep "$1"; return 0; }
	read -r -t "$1" -u "$T_NAP_FD" _
	return 0
}
T_PLANNED=""
T_N=0
T_FAILED=0
T_SECTION=""

# ---- TAP ----------------------------------------------------------------

plan() { T_PLANNED=$1; echo "1..$1"; }

diag() {
	local l
	while IFS= read -r l; do printf '# %s\n' "$l"; done <<< "$*"
}

# Shows the last response after a failed check: what the server really did.
t_show_last() {
	[ -n "${STATUS:-}" ] || return 0
	diag "last request: ${REQ_LINE:0:200} -> $STATUS"
	diag "headers: $(printf '%s' "${HDRS:-}" | tr '\n' '|' | cut -c1-400)"
	diag "body: $(printf '%s' "${BODY:-}" | head -c 600)"
}

t_result() {
	local pass=$1 msg=$2
	T_N=$((T_N + 1))
	# SBX_TEST_TIMES=1 (scripts/test sets it): each point ends with the
	# second since the file began, as a comment, so the logs show where a
	# file's time goes
	local at=
	[ "${SBX_TEST_TIMES:-0}" != 1 ] || at=" # at ${SECONDS}s"
	if [ "$pass" = 1 ]; then
		echo "ok $T_N - ${T_SECTION:+[$T_SECTION] }$msg$at"
		return 0
	fi
	echo "not ok $T_N - ${T_SECTION:+[$T_SECTION] }$msg$at"
	T_FAILED=$((T_FAILED + 1))
	return 1
}

# ok COND MSG: COND is either a number (an exit status: 0 passes, so
# `cmd; ok $? msg` works) or a shell expression evaluated now (`ok '[ -s f ]' msg`).
# Exactly two arguments: `ok pane_has 'x' "msg"` evaluated `pane_has` alone
# (an empty pattern: true whatever the pane showed) and passed every time.
ok() {
	if [ $# != 2 ]; then
		t_result 0 "ok takes COND MSG, not $# arguments: ${*:0:200}"
		return 1
	fi
	local cond=$1 msg=$2 pass=0
	if [[ $cond =~ ^[0-9]+$ ]]; then
		[ "$cond" = 0 ] && pass=1
	elif eval "$cond"; then
		pass=1
	fi
	t_result $pass "$msg" && return 0
	diag "condition: $cond"
	t_show_last
	return 1
}

# t_compare PASS MSG GOT WANTED: one test point; a failure shows what was
# got (the first 600 bytes), the WANTED line and the last response.
t_compare() {
	t_result "$1" "$2" && return 0
	diag "     got: '$(printf '%s' "$3" | head -c 600)'"
	diag "$4"
	t_show_last
	return 1
}

# is GOT WANT MSG; isnt GOT NOTWANT MSG
is() { local p=0; [ "$1" = "$2" ] && p=1; t_compare $p "$3" "$1" "expected: '$2'"; }
isnt() { local p=0; [ "$1" != "$2" ] && p=1; t_compare $p "$3" "$1" "expected anything but that"; }

# like GOT REGEX MSG (bash extended regular expression); unlike GOT REGEX MSG
like() { local p=0; [[ $1 =~ $2 ]] && p=1; t_compare $p "$3" "$1" "expected to match: /$2/"; }
unlike() { local p=0; [[ $1 =~ $2 ]] || p=1; t_compare $p "$3" "$1" "expected NOT to match: /$2/"; }

skip() {
	local n=$1 why=$2 i
	for ((i = 0; i < n; i++)); do
		T_N=$((T_N + 1))
		echo "ok $T_N # SKIP $why"
	done
}

bail() {
	echo "Bail out! $*"
	exit 255
}

# t_end [STATUS]: the EXIT trap. A test that sets its own trap runs its
# clean-up first and passes the status it saw: trap 'rc=$?; ...; t_end $rc' EXIT
t_end() {
	local rc=$?
	[ $# -gt 0 ] && rc=$1
	pq_stop
	hs_stop
	rm -rf "$T_TMP"
	if [ -n "$T_PLANNED" ] && [ "$T_N" != "$T_PLANNED" ]; then
		diag "planned $T_PLANNED tests but ran $T_N"
		[ $rc = 0 ] && rc=255
	fi
	exit $rc
}
trap t_end EXIT

# finish: prints the plan when `plan` was not called (a test that dies
# before this has no plan, which TAP reports as an error); the exit status
# says whether everything passed.
finish() {
	if [ -z "$T_PLANNED" ]; then
		T_PLANNED=$T_N
		echo "1..$T_N"
	fi
	if [ "$T_FAILED" -gt 0 ]; then
		diag "failed $T_FAILED of $T_N"
		exit 1
	fi
	exit 0
}

# ---- what a test needs, and its clean-up ---------------------------------

# t_require [--root WHY] CMD...: skips the whole file (the TAP plan
# "1..0 # SKIP ...") unless it runs as root (with --root; WHY says what
# for) and every CMD is on PATH.
t_require() {
	if [ "${1:-}" = --root ]; then
		[ "$(id -u)" = 0 ] || { echo "1..0 # SKIP needs root ($2)"; exit 0; }
		shift 2
	fi
	local p
	for p in "$@"; do
		command -v "$p" > /dev/null || { echo "1..0 # SKIP $p is missing"; exit 0; }
	done
}

# t_on_exit FUNC...: the EXIT trap runs each FUNC (clean-ups, in this
# order), then t_end with the status the test exited with.
T_ON_EXIT=()
t_on_exit() {
	T_ON_EXIT=("$@")
	trap t_exit_cleanup EXIT
}
t_exit_cleanup() {
	local rc=$? f
	for f in "${T_ON_EXIT[@]}"; do "$f"; done
	t_end $rc
}

# ---- the stack ----------------------------------------------------------

# conf_get NAME: a setting of the stack's sbx.conf (last one wins). Shell
# builtins only: it is in predicates wait_until polls (api_log, log_since),
# where its sed | tail | sed cost three processes a look.
conf_get() {
	local line v="" re="^[[:space:]]*$1[[:space:]]*=[[:space:]]*(.*)\$"
	[ -r "$SBX_CONF" ] || { echo "conf_get: cannot read $SBX_CONF" >&2; return 1; }
	while IFS= read -r line || [ -n "$line" ]; do
		if [[ $line =~ $re ]]; then v=${BASH_REMATCH[1]}; fi
	done < "$SBX_CONF"
	v=${v%"${v##*[![:space:]]}"}
	printf '%s\n' "$v"
}

api_log() {
	local f
	f=$(conf_get log_file)
	[ -n "$f" ] || f=${SBX_LOG:-$SBX_STACK_DIR/logs/sbx.log}
	echo "$f"
}

worker_log() {
	local f="" c
	# The worker may have a config of its own; otherwise it shares sbx.conf.
	for c in "$SBX_STACK_DIR/worker.conf" "$SBX_CONF"; do
		if [ -f "$c" ]; then
			f=$(sed -n 's/^[[:space:]]*log_file[[:space:]]*=[[:space:]]*//p' "$c" | tail -n1)
			[ -n "$f" ] && break
		fi
	done
	echo "$f"
}

# t_tool DIR/NAME [LIBS...]: the build's t/DIR/NAME, else compiled here
# from t/DIR/NAME.c (so the tests work before its local.mk is part of the
# build).
t_tool() {
	local b=$SBX_BUILD/t/$1 src=$SBX_REPO/t/$1.c own=$SBX_STACK_DIR/bin/${1##*/}
	shift
	if [ -x "$b" ] && [ "$b" -nt "$src" ]; then
		echo "$b"
		return 0
	fi
	if [ ! -x "$own" ] || [ "$src" -nt "$own" ]; then
		mkdir -p "$SBX_STACK_DIR/bin" &&
		cc -O1 -g -Wall -Wextra -D_GNU_SOURCE -I"$SBX_REPO/src/lib" -o "$own.tmp" "$src" "$@" >&2 &&
		mv "$own.tmp" "$own" || return 1
	fi
	echo "$own"
}

# The FastCGI client (t/fcgi/fcgi-req.c).
fcgi_client() { t_tool fcgi/fcgi-req; }

# require_stack: stop the test (it cannot pass) when the stack is not up.
require_stack() {
	FCGI_REQ=$(fcgi_client) || bail "cannot build t/fcgi/fcgi-req"
	# j's jq for plain paths (jq itself when it cannot be built)
	T_JGET=$(t_tool json/jget -ljansson 2> /dev/null) || T_JGET=""
	# req's HTTPS session (curl for every request when it cannot be built)
	T_HSESS=$(t_tool http/hsess -lcurl 2> /dev/null) || T_HSESS=""
	[ -S "$SBX_API_SOCKET" ] || bail "no API socket at $SBX_API_SOCKET: is the stack up (scripts/stack-up)?"
	[ -n "$SBX_KEY" ] || bail "no API key (SBX_KEY or $SBX_STACK_DIR/api-key)"
	[ -f "$SBX_CONF" ] || bail "no config at $SBX_CONF"
	command -v curl > /dev/null || bail "curl is missing"
	command -v jq > /dev/null || bail "jq is missing"
	# the psql session now, in the main shell: most psql_q run in a $(...)
	# subshell, which cannot start it (one CI run: 335 queries through it,
	# 901 psql of their own)
	pq_start 2> /dev/null || true
}

# amqp_up URL: something answers on URL's host:port.
amqp_up() {
	local hp=${1#*@}
	hp=${hp%%/*}
	(exec 3<> "/dev/tcp/${hp%:*}/${hp##*:}") 2> /dev/null
}

# require_amqp: SBX_TEST_AMQP_URL, else the stack's RabbitMQ (bringing the
# stack up when it is down), for tests that run workers of their own
# (worker-master.t, init-sysvinit.t); bails when RabbitMQ cannot be reached.
require_amqp() {
	if [ -z "${SBX_TEST_AMQP_URL:-}" ]; then
		if ! amqp_up "$(conf_get amqp_url 2> /dev/null)"; then
			[ -x "$SBX_REPO/scripts/stack-up" ] || bail "no stack: scripts/stack-up is missing"
			"$SBX_REPO/scripts/stack-up" >&2 || bail "scripts/stack-up failed"
			. "$SBX_REPO/scripts/stack-env"
		fi
		SBX_TEST_AMQP_URL=$(conf_get amqp_url 2> /dev/null)
	fi
	amqp_up "$SBX_TEST_AMQP_URL" || bail "RabbitMQ is not reachable"
}

# Processes a test starts itself (worker masters and their children).
# alive PID: running and not a zombie; dead PID: not alive.
# in_netns NAME CMD...: CMD in network namespace NAME and nothing else.
# Not `ip netns exec`: that also gives CMD a mount namespace of its own, a
# copy of every mount of the moment (this machine's / is private, so later
# unmounts never reach the copy); a long-lived server started that way
# keeps a sandbox's disk mounted, and its loop device attached, until it
# exits, and the sandbox's destroy fails meanwhile. In the background,
# call nsenter itself (as this does), so that $! is the server's pid.
in_netns() { local ns=$1; shift; nsenter --net="/run/netns/$ns" -- "$@"; }

alive() { kill -0 "$1" 2> /dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2> /dev/null; }
dead() { ! alive "$1"; }
# children PID: its children's pids, sorted; nchildren_is PID N: it has N.
children() { ps -o pid= --ppid "$1" | tr -d ' ' | sort; }
nchildren_is() { [ "$(children "$1" | grep -c .)" -eq "$2" ]; }
# BGPIDS: background helpers the test started; kill_bgpids ends them.
BGPIDS=()
kill_bgpids() {
	local p
	for p in "${BGPIDS[@]}"; do kill "$p" 2> /dev/null; done
}
# kill_tree PID...: SIGKILL to each PID's children, then to PID.
kill_tree() {
	local p c
	for p in "$@"; do
		for c in $(ps -o pid= --ppid "$p" 2> /dev/null); do kill -KILL "$c" 2> /dev/null; done
		kill -KILL "$p" 2> /dev/null
	done
}

# ---- requests -----------------------------------------------------------

# req MODE METHOD PATH [BODY] [-H 'Name: value']...
#   MODE: nginx (curl over HTTPS, --path-as-is) or fcgi (fcgi-req on the
#   socket). BODY "@FILE" sends a file. Unless REQ_AUTH is set (possibly to
#   the empty string: no key at all), the stack's key goes in
#   "Authorization: Bearer". A JSON Content-Type goes with every body unless
#   a -H gives one. Sets STATUS (000 when no response came), BODY, HDRS.
#   FCGI_EXTRA (an array) adds fcgi-req arguments, e.g. (-p CONTENT_LENGTH=9).
req() {
	local mode=$1 method=$2 path=$3 body="" has_body=0 h ctype=0 auth
	shift 3
	if [ $# -gt 0 ] && [ "$1" != -H ]; then
		body=$1
		has_body=1
		shift
	fi
	local -a hs=()
	while [ $# -gt 0 ]; do
		[ "$1" = -H ] && [ $# -ge 2 ] || { echo "req: bad arguments: $*" >&2; return 2; }
		hs+=("$2")
		[[ ${2,,} == content-type:* ]] && ctype=1
		shift 2
	done
	auth=${REQ_AUTH-"Authorization: Bearer $SBX_KEY"}
	[ -n "$auth" ] && hs+=("$auth")
	[ $has_body = 1 ] && [ $ctype = 0 ] && hs+=("Content-Type: application/json")
	REQ_LINE="$mode $method $path"
	STATUS=000 BODY="" HDRS=""
	local out=$T_TMP/out hfile=$T_TMP/hdrs rc
	: > "$out"
	: > "$hfile"
	local -a args=()
	if [ "$mode" = nginx ]; then
		# an inline body goes through a file the shell writes itself (a
		# `printf | curl` pipeline forked a shell for printf)
		if [ $has_body = 1 ] && [[ $body != @* ]]; then
			printf '%s' "$body" > "$T_TMP/body.$BASHPID"
			body=@$T_TMP/body.$BASHPID
		fi
		# --path-as-is: `..` and `//` reach nginx raw, as an attacker sends them.
		# Through the test's HTTPS session (hs_req) in its main shell,
		# the same request by the same libcurl on a kept connection;
		# else a curl of its own.
		if hs_req 60 "$method" "$SBX_URL$path" "$hfile" "$out" "${body#@}" "${hs[@]}"; then
			rc=$HS_RC
			[ $rc = 0 ] || REQ_ERR="hsess: $HS_ERR"
		else
			for h in "${hs[@]}"; do args+=(-H "$h"); done
			[ $has_body = 1 ] && args+=(--data-binary "$body")
			curl -sS --path-as-is --cacert "$SBX_CACERT" --max-time 60 -X "$method" -D "$hfile" -o "$out" \
				"${args[@]}" "$SBX_URL$path" 2> "$T_TMP/err" < /dev/null
			rc=$?
			[ $rc = 0 ] || REQ_ERR="curl exit $rc: $(< "$T_TMP/err")"
		fi
		[ -s "$hfile" ] && req_head "$hfile"
		[ -s "$out" ] && BODY=$(< "$out")
	elif [ "$mode" = fcgi ]; then
		for h in "${hs[@]}"; do args+=(-H "$h"); done
		if [ $has_body = 1 ]; then
			if [[ $body == @* ]]; then args+=(-f "${body#@}"); else args+=(-d "$body"); fi
		fi
		"$FCGI_REQ" -t 60 -s "$SBX_API_SOCKET" -m "$method" -u "$path" "${args[@]}" "${FCGI_EXTRA[@]}" \
			> "$out" 2> "$T_TMP/err"
		rc=$?
		if [ $rc = 0 ]; then
			# `curl -i`'s shape: the status line, the headers, a blank line,
			# the body (the characters the head took are cut off the whole)
			local line all used=0 _w
			all=$(< "$out")
			{
				IFS= read -r line
				used=$((${#line} + 1))
				read -r _w STATUS _w <<< "${line%$'\r'}"
				while IFS= read -r line; do
					used=$((used + ${#line} + 1))
					line=${line%$'\r'}
					[ -z "$line" ] && break
					HDRS+="$line"$'\n'
				done
			} < "$out"
			BODY=${all:used}
			HDRS=${HDRS%$'\n'}
		else
			REQ_ERR="fcgi-req exit $rc: $(< "$T_TMP/err")"
		fi
	else
		echo "req: unknown mode $mode" >&2
		return 2
	fi
	[ "$STATUS" = 000 ] && diag "${REQ_LINE:0:200}: no response: ${REQ_ERR:0:300}"
	return 0
}

# req_head FILE: STATUS and HDRS from curl's -D file: its last block (after
# any "100 Continue"), the status line's code and the header lines. Shell
# builtins only: the pipeline of tr, awk, head and sed it replaces took
# ~190 ms a request on a machine whose page faults are slow.
req_head() {
	local hl _w
	local -a blk=()
	while IFS= read -r hl || [ -n "$hl" ]; do
		hl=${hl%$'\r'}
		[[ $hl == HTTP/* ]] && blk=()
		[ -n "$hl" ] && blk+=("$hl")
	done < "$1"
	[ ${#blk[@]} -gt 0 ] || return 0
	read -r _w STATUS _w <<< "${blk[0]}"
	printf -v HDRS '%s\n' "${blk[@]:1}"
	HDRS=${HDRS%$'\n'}
}

# hdr NAME: the value of response header NAME (case-insensitive; the first).
hdr() {
	local n=${1,,} line
	while IFS= read -r line; do
		if [[ ${line,,} == "$n":* ]]; then
			line=${line#*:}
			line=${line#"${line%%[![:space:]]*}"}
			printf '%s' "$line"
			return 0
		fi
	done <<< "$HDRS"
	return 1
}

# j FILTER: jq on the last body ("" when the body is not JSON). A here
# string, not `printf | jq`: a pipeline forks a shell for printf, a third
# process for every call besides the substitution's and jq. Through jget
# (t/json/jget.c), which answers a plain path itself and hands every other
# filter to jq: the same output without jq's ~30 ms start.
T_JGET=""
j() { ${T_JGET:-jq} -r "$@" <<< "$BODY" 2> /dev/null; }

# json_str_v VAR STRING: VAR is STRING as a JSON string (quotes included),
# made by the shell itself: exec bodies (rt_json, sexec, rt_sh) are built
# for most requests a run sends, and jq -n took ~30 ms of CPU each. A string
# with a byte outside ASCII still goes through jq (invalid UTF-8 is mapped
# as it always was); the output is jq -c's, byte for byte.
T_JSON_CC=() T_JSON_CE=()
for _i in {1..31}; do
	printf -v _h '%02x' "$_i"
	printf -v 'T_JSON_CC[_i]' '%b' "\\x$_h"
	T_JSON_CE[_i]="\\u00$_h"
done
T_JSON_CE[8]='\b' T_JSON_CE[9]='\t' T_JSON_CE[10]='\n' T_JSON_CE[12]='\f' T_JSON_CE[13]='\r'
unset _i _h
json_str_v() {
	# (locals named so that no caller's VAR is one of them)
	local -n _js_out=$1
	local _js_s=$2 LC_ALL=C _js_i
	if [[ $_js_s == *[$'\x7f'-$'\xff']* ]]; then
		_js_out=$(jq -nc --arg s "$_js_s" '$s')
		return
	fi
	_js_s=${_js_s//\\/\\\\}
	_js_s=${_js_s//\"/\\\"}
	if [[ $_js_s == *[$'\x01'-$'\x1f']* ]]; then
		for _js_i in "${!T_JSON_CC[@]}"; do
			_js_s=${_js_s//"${T_JSON_CC[_js_i]}"/"${T_JSON_CE[_js_i]}"}
		done
	fi
	_js_out="\"$_js_s\""
}

# is_json: the last body is one JSON value.
is_json() { jq -e . <<< "$BODY" > /dev/null 2>&1; }

# error_shape MSG_REGEX DESC: the body is the error envelope {"message": ...}
# with a message matching MSG_REGEX, and the response is JSON.
error_shape() {
	local re=$1 desc=$2 m
	# A string message, the common case, is jget's own answer to
	# `.message | strings` (a line, even for ""); anything else gets jq's
	# answer to the whole question.
	m=$(j '.message | strings' && echo .)
	if [[ $m == *$'\n.' ]]; then
		m=${m%$'\n.'}
	else
		m=$(j 'if type=="object" and (.message|type)=="string" then .message else "<not an error envelope>" end')
	fi
	like "$m" "$re" "$desc: message /$re/"
}

# ---- database, organisations, keys --------------------------------------

# T_PSQL: psql itself, not Debian's /usr/bin/psql (pg_wrapper, a Perl
# script that picks a cluster): the wrapper cost ~50 ms of CPU a call before
# psql started, half of a psql_q on a slow machine, and the suite makes
# about two thousand of them.
for T_PSQL in /usr/lib/postgresql/*/bin/psql; do :; done
[ -x "$T_PSQL" ] || T_PSQL=psql

# psql_q SQL: one query in the stack's database; unaligned tuples only.
# Through the test's own psql session (pq_query) when it answers; else (no
# session, or it failed the query: an SQL error, a lost connection) a psql
# of its own, as before, whose output and status are the caller's.
psql_q() {
	pq_query "$1" && return 0
	local url=${SBX_DB_URL:-}
	[ -n "$url" ] || url=$(conf_get db_url)
	PGCONNECT_TIMEOUT=10 "$T_PSQL" -X -q -A -t -v ON_ERROR_STOP=1 "$url" -c "$1"
}

# A session: one process the test's main shell talks to through two FIFOs
# under T_TMP (psql for pq_query, t/http/hsess for hs_req). ses_start KIND
# CMD... starts CMD reading KIND's "in" and writing its "out" (stopping
# the last one); its pid, the shell's two fds and the directory go in
# T_<KIND>_PID, _W, _R and _DIR. The process is not a job of the test's
# shell (a bare `wait` would wait for it), but still its child, reaped
# when it ends (an orphan would stay a zombie that kill -0 finds alive
# where PID 1 reaps nothing). ses_alive KIND: it runs (not gone, not a
# zombie). ses_stop KIND. t_end stops both.
ses_start() {
	local k=$1 d
	shift
	local -n pid=T_${k}_PID w=T_${k}_W r=T_${k}_R dir=T_${k}_DIR gen=T_${k}_GEN
	ses_stop "$k"
	gen=$((gen + 1))
	d=$T_TMP/${k,,}.$gen
	mkdir -p "$d" && mkfifo "$d/in" "$d/out" || return 1
	"$@" < "$d/in" > "$d/out" 2>> "$d/err" &
	pid=$!
	disown "$pid"
	exec {w}> "$d/in" {r}< "$d/out"
	dir=$d
}
ses_alive() {
	local -n pid=T_${1}_PID
	local _p _c st
	[ -n "$pid" ] && { read -r _p _c st _ < "/proc/$pid/stat"; } 2> /dev/null && [ "$st" != Z ]
}
ses_stop() {
	local -n pid=T_${1}_PID w=T_${1}_W r=T_${1}_R dir=T_${1}_DIR
	[ -n "$dir" ] || return 0
	[ -n "$pid" ] && kill "$pid" 2> /dev/null
	exec {w}>&- {r}<&-
	dir="" pid="" w="" r=""
}

# The test's psql session: one psql reading queries from a FIFO (T_PQ_DIR),
# started by the test's main shell at its first psql_q (pq_start), used by
# it and by its subshells one query at a time (flock on T_PQ_DIR/lock). A
# psql process and a Postgres backend a query cost ~70 ms of CPU on a slow
# 2-core machine, and a CI run made about two thousand; a query through the
# session costs a few ms. Each query runs in a transaction of its own, as
# psql -c runs its string (a failed one leaves nothing), between two lines
# of a marker no output can hold; psql stops at an error (ON_ERROR_STOP),
# which ends the session: the query is then run again by a psql of its own
# (nothing of it was committed), and the main shell starts a new session
# at its next query (ses_start above).
T_PQ_DIR="" T_PQ_PID="" T_PQ_W="" T_PQ_R="" T_PQ_GEN=0
pq_start() {
	local url=${SBX_DB_URL:-}
	[ "$BASHPID" = "$$" ] || return 1
	[ -n "$url" ] || url=$(conf_get db_url)
	[ -n "$url" ] || return 1
	PGCONNECT_TIMEOUT=10 ses_start PQ "$T_PSQL" -X -q -A -t -v ON_ERROR_STOP=1 "$url"
}
pq_alive() { ses_alive PQ; }
pq_stop() { ses_stop PQ; }
# pq_query SQL: SQL through the session; fails, printing nothing, when there
# is none or it did not answer the query.
pq_query() {
	local lk m line out="" st=1
	if [ -z "$T_PQ_DIR" ] || ! pq_alive; then
		pq_start || return 1
	fi
	m="__sbx_pq_${BASHPID}_${RANDOM}${RANDOM}__"
	exec {lk}> "$T_PQ_DIR/lock" || return 1
	if ! flock -w 60 "$lk"; then exec {lk}>&-; return 1; fi
	# (SIGPIPE ignored while it writes: a psql that ended since the look
	# would kill the shell writing to it)
	trap '' PIPE
	pq_alive && printf '\\echo %sB\nBEGIN;\n%s\n;\nCOMMIT;\n\\echo %sE\n' "$m" "$1" "$m" >&"$T_PQ_W" 2> /dev/null
	st=$?
	trap - PIPE
	[ $st = 0 ] && st=1 &&
		while IFS= read -r -t 60 -u "$T_PQ_R" line; do
			if [ "$line" = "${m}B" ]; then
				out="" st=2
			elif [ "$line" = "${m}E" ]; then
				[ $st = 2 ] && st=0
				break
			elif [ $st = 2 ]; then
				out+=$line$'\n'
			fi
		done
	if [ $st = 0 ]; then
		# what psql said on stderr meanwhile (notices, warnings), the
		# caller's (its stderr is appended to the file: emptied here)
		if [ -s "$T_PQ_DIR/err" ]; then
			cat "$T_PQ_DIR/err" >&2
			: > "$T_PQ_DIR/err"
		fi
	else
		# dead, or it did not answer in time: nobody else may use it
		kill "$T_PQ_PID" 2> /dev/null
	fi
	exec {lk}>&-
	[ $st = 0 ] || return 1
	printf '%s' "$out"
}

# The test's HTTPS session: one t/http/hsess (libcurl) reading requests
# from a FIFO, started by the test's main shell at its first `req nginx`
# and used by that shell only (a subshell's request, e.g. one sent in the
# background beside another, still gets a curl of its own, so requests
# that a test sends at the same time still travel at the same time). It
# makes the request `curl` made, on a connection it keeps: a curl process
# a request cost ~30-45 ms of CPU on a slow 2-core machine, and a CI run
# made about two thousand. T_HS_OFF=1: curl for every request (doc/testing.md).
T_HSESS="" T_HS_DIR="" T_HS_PID="" T_HS_W="" T_HS_R="" T_HS_GEN=0
hs_start() { ses_start HS "$T_HSESS"; }
hs_alive() { ses_alive HS; }
hs_stop() { ses_stop HS; }
# hs_req MAX_TIME METHOD URL HFILE OUT BODYFILE [HEADER...]: the request
# through the session, bounded as curl's --max-time MAX_TIME: its result in
# HS_RC (curl's exit code: 0, a response came; 28, no answer in time; 52,
# none at all...) and HS_ERR. Fails, having sent
# nothing, when the session cannot take it (not the main shell, no hsess,
# T_HS_OFF=1): the caller runs curl. A session that does not answer is
# stopped (the next request starts another), and the request counts as
# one that got no answer, as curl's would.
hs_req() {
	local rec m line st
	[ "$BASHPID" = "$$" ] && [ -n "$T_HSESS" ] && [ "${T_HS_OFF:-0}" != 1 ] || return 1
	m="hs${RANDOM}${RANDOM}"
	printf -v rec '%s\x1f' "$m" "$2" "$3" "$SBX_CACERT" "$1" "$4" "$5" "$6" "${@:7}"
	rec=${rec%$'\x1f'}
	[[ $rec != *$'\n'* ]] || return 1
	if [ -z "$T_HS_DIR" ] || ! hs_alive; then
		hs_start || return 1
	fi
	trap '' PIPE # (hs_alive's look and the write race with its end)
	printf '%s\n' "$rec" >&"$T_HS_W" 2> /dev/null
	st=$?
	trap - PIPE
	HS_RC=52 HS_ERR="the session did not answer"
	if [ $st != 0 ]; then
		hs_stop
		return 1 # nothing was sent: curl takes it
	fi
	while IFS= read -r -t $(($1 + 15)) -u "$T_HS_R" line; do
		if [ "${line%% *}" = "$m" ]; then
			line=${line#* }
			HS_RC=${line%% *}
			HS_ERR=${line#* }
			return 0
		fi
	done
	hs_stop
	return 0
}

admin() { "$SBX_ADMIN" -c "$SBX_CONF" "$@"; }

# uniq_name PREFIX: an organisation name no other run used.
uniq_name() { echo "$1-$(date +%s)-$$-$RANDOM"; }

# new_org PREFIX: creates an organisation; prints its id.
new_org() { admin org create "$(uniq_name "$1")" 2> "$T_TMP/admin.err" | tr -d ' \n'; }

# new_key ORG: issues a key; prints the token.
new_key() { admin key issue "$1" 2> "$T_TMP/admin.err" | tr -d ' \n'; }

# fresh_org PREFIX [HEADER]: a new organisation (ORG) and key (KEY), one
# test point saying they were made; the requests that follow authenticate
# with "HEADER: KEY" (REQ_AUTH; default "Authorization: Bearer").
fresh_org() {
	ORG=$(new_org "$1")
	KEY=$(new_key "$ORG")
	like "$KEY" '^sbx_[0-9a-f]{64}$' "fresh organisation and key"
	if [ -n "${2:-}" ]; then
		REQ_AUTH="$2: $KEY"
	else
		REQ_AUTH="Authorization: Bearer $KEY"
	fi
	export REQ_AUTH
}

# key_id_of_token ORG TOKEN: the id of a key from `key list` (matched by prefix).
key_id_of_token() {
	local org=$1 tok=$2
	admin key list "$org" 2> /dev/null | awk -v t="$tok" 'NR > 1 && index(t, $2) == 1 {print $1}' | tail -n1
}

# A well-formed id that does not exist.
random_id() { od -An -tx1 -N12 /dev/urandom | tr -d ' \n'; }

# chan_key_env: a channel key and sandbox id for an sbx-init the test starts
# itself, exported as sbx-init and initctl read them (src/lib/chanauth.h).
chan_key_env() {
	SBX_CHANNEL_KEY=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
	SBX_SANDBOX_ID=$(random_id)
	export SBX_CHANNEL_KEY SBX_SANDBOX_ID
}

# sbxinit_bins: INIT and CTL, the build's sbx-init and t/init/initctl (or
# SBX_INIT_BIN, SBX_INITCTL_BIN) for the sbxinit-*.t; bails when one is
# not built.
sbxinit_bins() {
	INIT=${SBX_INIT_BIN:-$SBX_BUILD/src/init/sbx-init}
	CTL=${SBX_INITCTL_BIN:-$SBX_BUILD/t/init/initctl}
	[ -x "$INIT" ] || bail "no $INIT (make)"
	[ -x "$CTL" ] || bail "no $CTL (make check builds it)"
}

# sbxinit_start: $INIT on the host, with a channel key of its own
# (chan_key_env), its channel at SOCK=$T_TMP/channel.sock, its processes'
# output in $T_TMP/procs and its stderr in $T_TMP/init.log; INITPID is its
# pid. At exit, the background clients the test adds to BGPIDS and
# sbx-init are killed. Returns once the channel is there.
sbxinit_start() {
	SOCK=$T_TMP/channel.sock
	chan_key_env
	# its own environment, as a bundle gives it (oci.c): commands get this
	# with the request's env over it; the sanitizers' options pass through
	local v envv=(PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root SBX_TEST_BASE=from-init
		SBX_CHANNEL_KEY="$SBX_CHANNEL_KEY" SBX_SANDBOX_ID="$SBX_SANDBOX_ID")
	for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do [ -n "${!v:-}" ] && envv+=("$v=${!v}"); done
	env -i "${envv[@]}" "$INIT" --channel "$SOCK" --procs-dir "$T_TMP/procs" 2> "$T_TMP/init.log" &
	INITPID=$!
	t_on_exit sbxinit_stop
	wait_until 30 test -S "$SOCK" || bail "sbx-init did not create $SOCK: $(cat "$T_TMP/init.log")"
}
sbxinit_stop() {
	kill_bgpids
	kill "$INITPID" 2> /dev/null
	wait "$INITPID" 2> /dev/null
}

# wait_until SECONDS CMD...: polls CMD every 0.2 s, or as long as its last
# look took when that was longer (at most 0.5 s): a look that costs
# processes (psql, runsc, ps) then takes at most half a core while it polls,
# where back to back it took a whole one from the files beside it on a
# loaded machine. Fails after SECONDS.
# SBX_TEST_WAITLOG=FILE (scripts/test passes it on): each wait appends
# "FILE:LINE FUNCTION LOOKS MS ok|timeout CMD" there, to find the waits a
# run spends its time in (doc/testing.md).
wait_until() {
	local secs=$1 deadline t0 d frac looks=0 w0=${EPOCHREALTIME//[!0-9]/} rc
	shift
	deadline=$((SECONDS + secs))
	while :; do
		looks=$((looks + 1))
		t0=${EPOCHREALTIME//[!0-9]/}
		rc=
		"$@" && rc=ok
		[ -n "$rc" ] || [ $SECONDS -lt $deadline ] || rc=timeout
		if [ -n "$rc" ]; then
			[ -z "${SBX_TEST_WAITLOG:-}" ] || printf '%s:%s %s %d %d %s %s\n' "${BASH_SOURCE[1]##*/}" \
				"${BASH_LINENO[0]}" "${FUNCNAME[1]}" $looks $(((${EPOCHREALTIME//[!0-9]/} - w0) / 1000)) \
				$rc "$1" >> "$SBX_TEST_WAITLOG"
			[ $rc = ok ]
			return
		fi
		d=$((${EPOCHREALTIME//[!0-9]/} - t0))
		((d < 200000)) && d=200000
		((d > 500000)) && d=500000
		printf -v frac '%06d' $((d % 1000000))
		t_nap "$((d / 1000000)).$frac"
	done
}

# ---- sandboxes on the stack's node (sandbox-*.t, zz-leftovers.t) --------
# Independent views of what a sandbox is made of on this machine (DESIGN.md
# "Tests and network safety"): runsc's own list, /proc/self/mountinfo, the
# loop devices' backing files, /run/netns, the nft table, the state
# directory, cgroups and processes. Never the product's own bookkeeping.

SB_STATE=$(conf_get state_dir 2> /dev/null)
: "${SB_STATE:=$SBX_STACK_DIR/worker}"
SB_RUNSC_ROOT=$SB_STATE/runsc
SB_IDS_FILE=$T_TMP/sb-ids

# A frozen sandbox (idle.c) answers no `runsc state` or `kill`: every id
# named is kept thawed while runsc runs (sb_thawing), and no call waits
# forever.
sb_runsc() {
	local a p=()
	for a in "$@"; do [[ $a =~ ^[0-9a-f]{24}$ ]] && p+=("$(sb_place "$a")"); done
	sb_thawing "${p[*]}" timeout -k 5 60 runsc --root "$SB_RUNSC_ROOT" "$@"
}

# sb_place ID: what names sandbox ID on the node (runsc, state dir, netns, veth,
# nft, cgroups): its record's placement_id; an id without a record: itself.
sb_place() {
	local p=""
	[[ $1 =~ ^[0-9a-f]{24}$ ]] && p=$(psql_q "SELECT placement_id FROM sandboxes WHERE id = '$1'" 2> /dev/null)
	echo "${p:-$1}"; }

# dir_kb DIR: what DIR holds on the host, in KiB, all of it but what is
# mounted under it (du -x: a sandbox's disk image once, not again through
# its mount); "" when it is gone. A check of what a sandbox costs the host
# reads its own directory, never the filesystem's free space (df), which
# other files, stacks and background builds change at the same time.
dir_kb() { du -skx "$1" 2> /dev/null | cut -f1; }

# sb_runsc_state ID: runsc's status of ID ("" when it does not know it).
sb_runsc_state() { sb_runsc state "$(sb_place "$1")" 2> /dev/null | ${T_JGET:-jq} -r '.status // empty' 2> /dev/null; }

# sb_freezer ID: the freezer state of the sandbox's cgroup (FROZEN, FREEZING,
# THAWED; "" without one): the node agent freezes idle sandboxes (doc/idle.md).
sb_freezer() {
	local p f
	p=$(sb_place "$1")
	f=/sys/fs/cgroup/freezer/sbx/$p/freezer.state
	if [ -r "$f" ]; then cat "$f"; return 0; fi
	f=/sys/fs/cgroup/sbx/$p/cgroup.freeze
	[ -r "$f" ] || return 0
	if [ "$(cat "$f")" = 0 ]; then echo THAWED
	elif grep -q '^frozen 1' "/sys/fs/cgroup/sbx/$p/cgroup.events"; then echo FROZEN
	else echo FREEZING; fi
}
# sb_thaw_place PLACE: thaws it from the host, for runsc commands that talk
# to its sentry (a frozen one would never answer); the node agent notices.
sb_thaw_place() {
	local f=/sys/fs/cgroup/freezer/sbx/$1/freezer.state
	[ -w "$f" ] && echo THAWED > "$f"
	f=/sys/fs/cgroup/sbx/$1/cgroup.freeze
	[ -w "$f" ] && echo 0 > "$f"
	return 0
}

# sb_thawing "PLACE..." CMD...: runs CMD while a watcher thaws those
# sandboxes every half second. runsc goes around the node agent, which may
# freeze an idle sandbox at any moment (sbx-init had just told it nothing
# ran), and a frozen sentry never answers runsc's RPCs: `runsc state` of a
# frozen sandbox hangs to its bound (measured: 10 s of 10; sandbox-api.t's
# "the sandbox still runs" failed so once), and so did egress-dns.t's
# getent under runsc exec (90 s). A thaw just before is not enough: the
# agent can freeze again in between. Seeing it thawed behind its back, the
# agent asks sbx-init again and finds the command.
sb_thawing() {
	local places=$1 p w rc
	shift
	for p in $places; do sb_thaw_place "$p"; done
	(while t_nap 0.5; do for p in $places; do sb_thaw_place "$p"; done; done) > /dev/null 2>&1 &
	w=$!
	"$@"
	rc=$?
	kill "$w" 2> /dev/null
	wait "$w" 2> /dev/null
	return "$rc"
}

# sb_exec ID SCRIPT: runs `sh -c SCRIPT` inside with runsc exec (bounded),
# thawing it while it runs (sb_thawing); prints its output (through a pipe:
# runsc exec overwrites a file stdout).
sb_exec() {
	local p
	p=$(sb_place "$1")
	sb_thawing "$p" timeout -k 5 "${SB_EXEC_TIMEOUT:-90}" runsc --root "$SB_RUNSC_ROOT" exec "$p" sh -c "$2" 2>&1 | cat
	return "${PIPESTATUS[0]}"
}

# sb_loops: every loop device in use, "DEVICE BACKING_FILE" a line (shell
# builtins only: sb_leftovers reads it at each look wait_until makes).
sb_loops() {
	local f b
	for f in /sys/block/loop*/loop/backing_file; do
		[ -r "$f" ] && { read -r b < "$f"; } 2> /dev/null || continue
		f=${f#/sys/block/}
		echo "${f%%/*} $b"
	done
}

# sb_loops_of PATH: loop devices whose backing file is under PATH.
sb_loops_of() {
	local l b
	while read -r l b; do [[ $b == "$1"* ]] && echo "$l"; done < <(sb_loops)
}

# sb_mounts_of PATH: mount points under PATH (mountinfo's 5th field).
sb_mounts_of() { awk -v p="$1" 'index($5, p) == 1 {print $5}' /proc/self/mountinfo; }

# sb_procs_of ID: runsc processes (sentry, gofer, runsc itself) of ID.
sb_procs_of() { sb_procs_in "$(sb_place "$1")" "$(ps -eo pid=,args=)"; }
# sb_procs_in PLACE LISTING: the pids of PLACE's runsc processes in LISTING
# (`ps -eo pid=,args=`), for a caller that reads ps once for many ids.
sb_procs_in() {
	local line
	while IFS= read -r line; do
		[[ $line == *runsc* ]] || continue
		[[ $line == *"$SB_STATE/sandboxes/$1"* || $line == *" $1" ]] && echo "${line%% runsc*}"
	done <<< "$2"
}

# sb_up CMD...: CMD where the stack's node keeps its sandboxes' network (the
# bridge, the host veths, the sbx nft table): the host's network namespace,
# or the stack's own (SBX_NET_UPLINK: a second stack beside the first,
# scripts/lib-stack.sh).
sb_up() {
	if [ -n "${SBX_NET_UPLINK:-}" ]; then in_netns "$SBX_NET_UPLINK" "$@"; else "$@"; fi
}

# t_node_state: a new state directory (printed) for a test's private node
# (sandbox-node.t), under T_NODE_STATES, where sb_foreign looks for its
# sandboxes. A test that runs a node of its own makes its state here.
T_NODE_STATES=/tmp/sbx-sbnode
t_node_state() { mktemp -d "$T_NODE_STATES.XXXXXX"; }

# sb_foreign ID: ID (a placement id) is a sandbox of another stack on this
# machine: its directory (or its Nomad notes) is in one of
# SBX_TEST_OTHER_STATES (state dirs, space-separated; scripts/test runs a
# second stack beside this one). What is named machine-wide (netns in
# /run/netns, cgroups) must not count as this stack's leftover. Its
# directory is made before the rest of a sandbox and removed after it
# (workers/sandbox.c), so one of its leftovers is never taken for ours;
# our own are never under another state dir. The same holds for a test's
# private node (t_node_state): its sandboxes' cgroups are under /sbx too,
# and with --repeat the first stack's next parallel group, where it runs,
# met another stack's zz-leftovers.t (2026-12-05: "no sbx cgroup of a
# sandbox without a live record" named six of its sandboxes).
sb_foreign() {
	local d
	for d in ${SBX_TEST_OTHER_STATES:-} "$T_NODE_STATES".*; do
		# its own sandboxes, and those Nomad runs there (adopt.c,
		# nomad_net.c: a Nomad allocation's netns is named sbx-<id> too)
		[ -e "$d/sandboxes/$1" ] || [ -e "$d/nomad/$1" ] || [ -e "$d/nomad-net/$1" ] && return 0
	done
	return 1
}

# sb_leftovers ID...: what an independent listing still finds of these ids
# (empty = nothing). Each listing is read once for all the ids (one psql for
# their placements, one runsc list, ip link, nft and ps), not once an id:
# wait_until polls it, and per id it ran a dozen processes a look (chaos-kill.t
# waited 110 s on 16 ids on a loaded 2-core machine).
sb_leftovers() {
	[ $# -gt 0 ] || return 0
	local id p out="" nft runl mnts loops links procs q=""
	local -A place=()
	for id in "$@"; do [[ $id =~ ^[0-9a-f]{24}$ ]] && q+="${q:+,}'$id'"; done
	if [ -n "$q" ]; then
		while IFS='|' read -r id p; do
			[ -n "$p" ] && place[$id]=$p
		done < <(psql_q "SELECT id, placement_id FROM sandboxes WHERE id IN ($q)" 2> /dev/null)
	fi
	nft=$(sb_up nft list table inet sbx 2> /dev/null)
	runl=$'\n'$(sb_runsc list -quiet 2> /dev/null)$'\n'
	mnts=$'\n'$(sb_mounts_of "$SB_STATE/sandboxes/")
	loops=$(sb_loops)
	links=$'\n'$(sb_up ip -o link show 2> /dev/null)
	procs=$(ps -eo pid=,args=)
	for id in "$@"; do
		p=${place[$id]:-$id}
		[[ $runl == *$'\n'"$p"$'\n'* ]] && out+=" runsc:$id"
		[[ $mnts == *$'\n'"$SB_STATE/sandboxes/$p"* ]] && out+=" mount:$id"
		[[ $loops == *" $SB_STATE/sandboxes/$p/"* ]] && out+=" loop:$id"
		[ -e "/run/netns/sbx-$p" ] && out+=" netns:$id"
		[[ $links =~ $'\n'[0-9]+:\ sbxh${p:0:9}[@:] ]] && out+=" veth:$id"
		[[ $nft == *"$p"* || $nft == *"sbxh${p:0:9}"* ]] && out+=" nft:$id"
		[ -e "$SB_STATE/sandboxes/$p" ] && out+=" dir:$id"
		compgen -G "/sys/fs/cgroup/*/sbx/$p" > /dev/null && out+=" cgroup:$id"
		[ -n "$(sb_procs_in "$p" "$procs")" ] && out+=" procs:$id"
	done
	echo "${out# }"
}

# sb_missing ID: what of a running sandbox is NOT there (empty = complete):
# runsc says running, its directory, a loop device backing disk.img, the
# overlay root mounted, its netns, its nft chain.
sb_missing() {
	local id=$(sb_place "$1") out="" d
	d=$SB_STATE/sandboxes/$id
	[ "$(sb_runsc_state "$id")" = running ] || out+=" runsc-running"
	[ -d "$d" ] || out+=" dir"
	[ -n "$(sb_loops_of "$d/disk.img")" ] || out+=" loop"
	sb_mounts_of "$d/" | grep -qx "$d/rootfs" || out+=" rootfs-mount"
	[ -e "/run/netns/sbx-$id" ] || out+=" netns"
	sb_up nft list chain inet sbx "allow_$id" > /dev/null 2>&1 || out+=" nft-chain"
	echo "${out# }"
}

# sb_gone ID...: true when nothing of the ids is left (for wait_until).
sb_gone() { [ -z "$(sb_leftovers "$@")" ]; }

# sb_db ID COLUMN: one column of a record ("" when there is none).
sb_db() { psql_q "SELECT $2 FROM sandboxes WHERE id = '$1'" 2> /dev/null; }

# sb_status_is ID REGEX: the record's status matches (for wait_until).
sb_status_is() { [[ $(sb_db "$1" status) =~ ^($2)$ ]]; }

# sb_track ID: deleted (with the key REQ_AUTH holds now) by sb_cleanup.
sb_track() {
	[ -n "$1" ] || return 0
	printf '%s\t%s\n' "$1" "${REQ_AUTH-"Authorization: Bearer $SBX_KEY"}" >> "$SB_IDS_FILE"
}

# sb_create MODE BODY: POST /sandboxes; SB_ID is the new id (also from a
# failed create's error data), tracked for clean-up.
sb_create() {
	req "$1" POST /sandboxes "$2"
	SB_ID=$(j '.data.id // empty')
	sb_track "$SB_ID"
}

# sb_delete_quiet ID HEADER: one DELETE over HTTPS, whatever it answers.
sb_delete_quiet() { api_delete "/sandboxes/$1" "$2"; }

# sb_cleanup: DELETE every tracked sandbox; waits (bounded) until nothing
# of them is left on the node, so the next test starts clean.
sb_cleanup() {
	local id h ids=()
	[ -f "$SB_IDS_FILE" ] || return 0
	while IFS=$'\t' read -r id h; do
		[ -n "$id" ] || continue
		sb_delete_quiet "$id" "$h"
		ids+=("$id")
	done < "$SB_IDS_FILE"
	[ ${#ids[@]} -gt 0 ] && wait_until 30 sb_gone "${ids[@]}"
	rm -f "$SB_IDS_FILE"
	return 0
}

# worker_master: the worker master's pid.
worker_master() { cat "${SBX_WORKER_PIDFILE:-$(conf_get worker_pidfile)}" 2> /dev/null; }

# worker_pid ROLE: the live pid of the worker's ROLE #0 (provisioner, node,
# reaper), from the master's "started ROLE #0 (pid N)" log lines.
worker_pid() {
	local m pid
	m=$(worker_master) || return 1
	pid=$(grep -F "sbx-worker[$m] info: started $1 #0 (pid " "$(api_log)" | tail -n1 | sed 's/.*(pid \([0-9]*\)).*/\1/')
	[ -n "$pid" ] && [ -d "/proc/$pid" ] && [ "$(awk '{print $4}' "/proc/$pid/stat" 2> /dev/null)" = "$m" ] || return 1
	echo "$pid"
}

# log_mark: the log's current size; log_since MARK: what was logged after.
log_mark() { stat -c %s "$(api_log)"; }
log_since() { tail -c +"$(($1 + 1))" "$(api_log)"; }

# node_consuming_since MARK: a node agent started after MARK consumes its queue.
node_consuming_since() { log_since "$1" | grep -q 'sbx-worker-node\[[0-9]*\] info: node agent consuming'; }

# ---- runtime-*.t helpers (issue 4; owned by the runtime tests) ----------
# Exec, streaming, files and background processes through the public API.

RT_BG=()

# rt_begin: the start of a test through the public API after its
# t_require: the stack is up, RT_MARK marks the log (rt_note_restarts), and
# at exit the background readers end and the sandboxes made are deleted.
rt_begin() {
	require_stack
	RT_MARK=$(log_mark)
	t_on_exit rt_kill_bg sb_cleanup
}

# sexec ID CMD [SECS]: runs CMD through the API (nginx), bounded by SECS
# (timeout_seconds, 120 unless given); OUT and CODE.
# snap_status ID SNAP: the status of snapshot SNAP in sandbox ID's list;
# snap_settled ID SNAP: it is ready or failed.
sexec() {
	exec_post "$1" "$2" "\"timeout_seconds\":${3:-120}"
	OUT=$(j .data.stdout)
	CODE=$(j .data.exit_code)
}
snap_status() {
	req nginx GET "/sandboxes/$1/snapshots?limit=100" > /dev/null
	j -r --arg id "$2" '.data.data[] | select(.id == $id) | .status'
}
snap_settled() { [[ $(snap_status "$1" "$2") =~ ^(ready|failed)$ ]]; }

# api_delete PATH [AUTH]: a quiet DELETE through nginx, for clean-ups (the
# key: AUTH, else REQ_AUTH).
api_delete() {
	hs_req 40 DELETE "$SBX_URL$1" "$T_TMP/del.hdrs" "$T_TMP/del.out" "" "${2:-$REQ_AUTH}" ||
		curl -sS -o /dev/null --cacert "$SBX_CACERT" --max-time 40 -X DELETE -H "${2:-$REQ_AUTH}" "$SBX_URL$1" 2> /dev/null
}

# snap_cleanup: deletes the snapshots whose ids a test put in SNAPS.
SNAPS=()
snap_cleanup() {
	local s
	for s in "${SNAPS[@]}"; do api_delete "/sandboxes/snapshots/$s"; done
}

# vol_cleanup: deletes the volumes whose ids a test put in VOLS, each with
# VOL_AUTHS[i] when the test keeps a key per volume.
VOLS=()
VOL_AUTHS=()
vol_cleanup() {
	local i
	for i in "${!VOLS[@]}"; do api_delete "/volumes/${VOLS[$i]}" "${VOL_AUTHS[$i]:-}"; done
}

# node_agent_ready_since MARK: a node agent the master started after MARK
# consumes its queue.
node_agent_ready_since() {
	local m p
	m=$(worker_master)
	p=$(log_since "$1" | grep -F "sbx-worker[$m] info: started node #0 (pid " | tail -n1 | sed 's/.*(pid \([0-9]*\)).*/\1/')
	[ -n "$p" ] && log_since "$1" | grep -qF "sbx-worker-node[$p] info: node agent consuming"
}

# conf_unmark MARK: sbx.conf without each MARK line and the line after it
# (what a test appended), rewritten in place (same inode, owner and mode).
conf_unmark() {
	awk -v m="$1" 'skip {skip = 0; next} $0 == m {skip = 1; next} {print}' "$SBX_CONF" > "$T_TMP/conf.new" &&
		cat "$T_TMP/conf.new" > "$SBX_CONF"
}

# conf_override NAME VALUE: sets NAME for the test's length (no reload):
# the stack's own NAME lines are commented out (a setting given twice is
# refused) and "NAME = VALUE" is added after CONF_MARK; restore_conf undoes
# both. CONF_TOUCHED is 1 from then on.
CONF_OFF="#test-off# "
conf_override() {
	sed -i "s/^\([[:space:]]*$1[[:space:]]*=\)/$CONF_OFF\1/" "$SBX_CONF"
	printf '%s\n%s = %s\n' "$CONF_MARK" "$1" "$2" >> "$SBX_CONF"
	CONF_TOUCHED=1
}

# restore_conf: when CONF_TOUCHED is 1, the config without the test's
# CONF_MARK lines and with the lines conf_override commented out back, and
# a reload that waits for the new node agent.
restore_conf() {
	[ "${CONF_TOUCHED:-0}" = 1 ] || return 0
	local mark
	mark=$(log_mark)
	conf_unmark "$CONF_MARK"
	sed -i "s/^$CONF_OFF//" "$SBX_CONF"
	kill -HUP "$(worker_master)" 2> /dev/null
	wait_until 30 node_agent_ready_since "$mark"
	CONF_TOUCHED=0
}

# rt_setup PREFIX: a fresh organisation and key for this test (REQ_AUTH),
# with room for the sandboxes it makes.
rt_setup() {
	RT_ORG=$(new_org "$1")
	[ -n "$RT_ORG" ] || bail "cannot create an organisation: $(cat "$T_TMP/admin.err")"
	RT_KEY=$(new_key "$RT_ORG")
	[[ $RT_KEY =~ ^sbx_[0-9a-f]{64}$ ]] || bail "cannot issue a key: $(cat "$T_TMP/admin.err")"
	admin org limits "$RT_ORG" --max-sandboxes 20 > /dev/null 2>&1
	export REQ_AUTH="Authorization: Bearer $RT_KEY"
}

# rt_new NAME [EXTRA_JSON_MEMBERS]: creates a sandbox through nginx; RT_ID is
# its id (tracked for sb_cleanup). Bails when it cannot.
# A 503 (no capacity, the node agent restarting under another test) is
# retried twice: creating is not what these tests are about.
rt_new() {
	local try
	for try in 1 2 3; do
		sb_create nginx "{\"name\":\"$1\",\"specs\":{\"memory\":256,\"disk\":1}${2:+,$2}}"
		[ "$STATUS" = 201 ] && [ -n "$SB_ID" ] && break
		diag "create $1 (try $try): $STATUS $(printf '%s' "$BODY" | head -c 300)"
		[ "$STATUS" = 503 ] || break
		sleep 2
	done
	[ "$STATUS" = 201 ] && [ -n "$SB_ID" ] || bail "cannot create sandbox $1: $STATUS $BODY"
	RT_ID=$SB_ID
}

# rt_jhex stdout|stderr: the bytes of the last JSON exec answer's field, in
# hex, decoded as its *_encoding says (text: UTF-8 of the string).
rt_jhex() {
	printf '%s' "$BODY" | python3 -c '
import base64, json, sys
d = json.load(sys.stdin)["data"]; f = sys.argv[1]
b = base64.b64decode(d[f]) if d.get(f + "_encoding") == "base64" else d[f].encode("utf-8")
print(b.hex())' "$1" 2> /dev/null
}

rt_auth() { echo "${REQ_AUTH-"Authorization: Bearer $SBX_KEY"}"; }

# rt_body MODE: the last req's body, byte-exact, into $T_TMP/body (fcgi:
# what follows the CGI head; req keeps the raw answer in $T_TMP/out).
rt_body() {
	if [ "$1" = nginx ]; then
		cp "$T_TMP/out" "$T_TMP/body"
	else
		python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); i=d.find(b"\r\n\r\n"); sys.stdout.buffer.write(d[i+4:] if i>=0 else b"")' \
			"$T_TMP/out" > "$T_TMP/body"
	fi
}

# exec_body_v VAR CMD [MEMBERS]: VAR is the exec body {"cmd":CMD,MEMBERS}
# (MEMBERS: more members as JSON, e.g. '"timeout_seconds":60'), made
# without a process.
exec_body_v() {
	local _eb_cmd
	json_str_v _eb_cmd "$2"
	printf -v "$1" '{"cmd":%s%s}' "$_eb_cmd" "${3:+,$3}"
}

# exec_post ID CMD [MEMBERS]: POST /sandboxes/ID/exec through nginx with
# that body (STATUS, BODY).
exec_post() {
	local b
	exec_body_v b "$2" "${3:-}"
	req nginx POST "/sandboxes/$1/exec" "$b"
}

# rt_json CMD [TIMEOUT] [STREAM]: an exec body; rt_json_v VAR CMD...: into
# VAR (no subshell). TIMEOUT and STREAM are JSON as they are (a number; true
# or false).
rt_json_v() {
	exec_body_v "$1" "$2" "\"timeout_seconds\":${3:-30},\"stream\":${4:-false}"
}
rt_json() {
	local b
	rt_json_v b "$@"
	printf '%s\n' "$b"
}

# rt_sh ID CMD [TIMEOUT]: runs CMD in the sandbox through the API (JSON exec,
# its own curl: the last req's STATUS/BODY stay); prints its stdout.
rt_sh() {
	local b
	rt_json_v b "$2" "${3:-30}"
	curl -sS --cacert "$SBX_CACERT" --max-time $((${3:-30} + 30)) -H "${REQ_AUTH-"Authorization: Bearer $SBX_KEY"}" \
		-H 'Content-Type: application/json' -d "$b" \
		"$SBX_URL/sandboxes/$1/exec" 2> /dev/null | ${T_JGET:-jq} -r '.data.stdout // empty' 2> /dev/null
}

# rt_stream_start OUT PATH BODY [CURL_ARGS...]: a POST through nginx read by
# curl -N in the background, its body appended to OUT as it arrives
# (headers in OUT.hdr). RT_PID is curl's pid.
rt_stream_start() {
	local out=$1 path=$2 body=$3
	shift 3
	: > "$out"
	curl -sS -N --cacert "$SBX_CACERT" --max-time "${RT_STREAM_MAX:-600}" -H "$(rt_auth)" \
		-H 'Content-Type: application/json' -D "$out.hdr" "$@" -d "$body" \
		"$SBX_URL$path" >> "$out" 2> "$out.err" &
	RT_PID=$!
	RT_BG+=("$RT_PID")
}

# rt_get_start OUT PATH [CURL_ARGS...]: the same for a GET.
rt_get_start() {
	local out=$1 path=$2
	shift 2
	: > "$out"
	curl -sS -N --cacert "$SBX_CACERT" --max-time "${RT_STREAM_MAX:-600}" -H "$(rt_auth)" \
		-D "$out.hdr" "$@" "$SBX_URL$path" >> "$out" 2> "$out.err" &
	RT_PID=$!
	RT_BG+=("$RT_PID")
}

# rt_kill_bg: ends the background readers this test started (by pid).
rt_kill_bg() {
	local p
	for p in "${RT_BG[@]}"; do
		kill -CONT "$p" 2> /dev/null
		kill "$p" 2> /dev/null
	done
	RT_BG=()
}

# rt_has FILE REGEX: FILE's text matches (grep -E), for wait_until.
rt_has() { grep -qE -- "$2" "$1" 2> /dev/null; }

# rt_frames FILE sse|ndjson: checks the framing of a streamed answer and
# prints its frames, one compact JSON object a line. Fails (with the reason
# on stderr) when a frame is not `data: JSON` + blank line (SSE) or one JSON
# object a line (NDJSON), or when the body is not UTF-8.
# RT_FRAMES_PY: python defining frames(PATH, 'sse'|'ndjson'), the frames of
# a streamed answer as dicts, or ValueError naming what is wrong (also used
# by runtime-stream.t, which checks 63 answers in one process).
RT_FRAMES_PY='
import json
def frames(path, kind):
    raw = open(path, "rb").read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError("body is not UTF-8: %s" % e)
    if kind == "sse":
        if not text.endswith("\n\n"):
            raise ValueError("SSE body does not end with a blank line")
        items = text[:-2].split("\n\n")
        for i in items:
            if "\n" in i or not i.startswith("data: "):
                raise ValueError("not one data: line per event: %r" % i[:200])
        items = [i[6:] for i in items]
    else:
        if not text.endswith("\n"):
            raise ValueError("NDJSON body does not end with a newline")
        items = text[:-1].split("\n")
    out = []
    for i in items:
        try:
            o = json.loads(i)
        except ValueError:
            raise ValueError("not JSON: %r" % i[:200])
        if not isinstance(o, dict) or not isinstance(o.get("type"), str):
            raise ValueError("not a frame: %r" % i[:200])
        out.append(o)
    return out
'
rt_frames() {
	python3 -c "$RT_FRAMES_PY
import sys
try:
    fs = frames(sys.argv[1], sys.argv[2])
except ValueError as e:
    sys.exit(str(e))
for o in fs:
    print(json.dumps(o, separators=(',', ':')))" "$1" "$2"
}

# rt_frames_ok FRAMES_FILE: exactly one final frame (done or error), last.
rt_frames_ok() {
	local n last
	n=$(jq -s '[.[] | select(.type == "done" or .type == "error")] | length' "$1" 2> /dev/null)
	last=$(tail -n1 "$1" | ${T_JGET:-jq} -r .type 2> /dev/null)
	[ "$n" = 1 ] && [[ $last == done || $last == error ]]
}

# rt_collect FRAMES_FILE stdout|stderr: the bytes of that stream's frames
# (base64 frames decoded), raw on stdout.
rt_collect() {
	python3 - "$1" "$2" << 'PY'
import base64, json, sys
out = sys.stdout.buffer
for line in open(sys.argv[1]):
    f = json.loads(line)
    if f.get('type') != sys.argv[2]:
        continue
    if f.get('encoding') == 'base64':
        out.write(base64.b64decode(f['data']))
    else:
        out.write(f['data'].encode('utf-8'))
PY
}

# rt_vmrss PID: resident memory in kB (0 when the process is gone). Shell
# builtins only, like the two below (one awk for all the children): a
# sampler calls them ten times a second while 50 MB go through, and an awk
# for each of 80 API children was a core's worth of processes.
rt_vmrss() {
	local k v _
	{ while read -r k v _; do
		[ "$k" = VmRSS: ] && { echo "$v"; return 0; }
	done < "/proc/$1/status"; } 2> /dev/null
	echo 0
}

# rt_api_status: the status files of the API's children ("" when none).
rt_api_status() {
	local m p
	read -r m < "$(conf_get api_pidfile)" 2> /dev/null || return 0
	for p in $(ps -o pid= --ppid "$m"); do [ -r "/proc/$p/status" ] && echo "/proc/$p/status"; done
}

# rt_api_rss: the sum of VmRSS (kB) of the API's children.
# shellcheck disable=SC2046 # one status file a word
rt_api_rss() { rt_rss_awk 's += v' 's' $(rt_api_status); }

# rt_api_rss_max: the largest VmRSS (kB) of one API child.
# shellcheck disable=SC2046
rt_api_rss_max() { rt_rss_awk 'if (v > x) x = v' 'x' $(rt_api_status); }

# rt_rss_awk STATEMENT RESULT FILE...: one awk over the status files, v the
# VmRSS of each (no file: 0); a file gone since the listing (a child that
# exited) is skipped (getline), where naming it to awk would end awk.
rt_rss_awk() {
	local st=$1 res=$2
	shift 2
	awk "BEGIN { for (i = 1; i < ARGC; i++) { f = ARGV[i]; while ((getline l < f) > 0)
		if (l ~ /^VmRSS:/) { split(l, a, /[ \t]+/); v = a[2] + 0; $st } close(f) } print $res + 0 }" "$@"
}

# rt_fcgi_stream URI BODY [HEADER...]: one POST straight to sbx-api's
# FastCGI socket, printing the CGI answer (headers, blank line, body) as
# each FCGI_STDOUT record arrives (t/fcgi/fcgi-req prints only at the end,
# so it cannot show streaming). Ends at FCGI_END_REQUEST.
rt_fcgi_stream() {
	python3 -u - "$SBX_API_SOCKET" "$@" << 'PY'
import socket, struct, sys
sock, uri, body = sys.argv[1], sys.argv[2], sys.argv[3].encode()
hdrs = sys.argv[4:]
def rec(t, c):
    out = b''
    while True:
        ch = c[:65535]; c = c[65535:]
        pad = (8 - len(ch) % 8) % 8
        out += struct.pack('>BBHHBx', 1, t, 1, len(ch), pad) + ch + b'\0' * pad
        if not c:
            return out
def nv(n, v):
    def l(x):
        return bytes([len(x)]) if len(x) < 128 else struct.pack('>I', len(x) | 0x80000000)
    return l(n) + l(v) + n + v
p = {'REQUEST_METHOD': 'POST', 'REQUEST_URI': uri, 'SCRIPT_NAME': '', 'QUERY_STRING': '',
     'SERVER_PROTOCOL': 'HTTP/1.1', 'GATEWAY_INTERFACE': 'CGI/1.1', 'HTTPS': 'on',
     'REMOTE_ADDR': '127.0.0.1', 'REMOTE_PORT': '40000', 'SERVER_NAME': '127.0.0.1',
     'SERVER_PORT': '443', 'CONTENT_TYPE': 'application/json', 'CONTENT_LENGTH': str(len(body))}
for h in hdrs:
    n, v = h.split(':', 1)
    p['HTTP_' + n.strip().upper().replace('-', '_')] = v.strip()
params = b''.join(nv(k.encode(), v.encode()) for k, v in p.items())
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sock)
s.sendall(rec(1, struct.pack('>HB5x', 1, 0)) + rec(4, params) + rec(4, b'') +
          (rec(5, body) if body else b'') + rec(5, b''))
buf = b''
out = sys.stdout.buffer
while True:
    d = s.recv(65536)
    if not d:
        break
    buf += d
    while len(buf) >= 8:
        v, t, rid, cl, pl = struct.unpack('>BBHHBx', buf[:8])
        if len(buf) < 8 + cl + pl:
            break
        c = buf[8:8 + cl]
        buf = buf[8 + cl + pl:]
        if t == 6 and c:
            out.write(c)
            out.flush()
        elif t == 3:
            sys.exit(0)
sys.exit(2)
PY
}

# rt_note_restarts MARK: a diagnostic line for each worker child that died
# after MARK (another test killing the node agent loses in-flight ops, which
# explains a failure here that is not this test's).
rt_note_restarts() {
	local l
	log_since "$1" | grep -E 'sbx-worker\[[0-9]+\] warn: .* died' | while IFS= read -r l; do
		diag "during this test: $l"
	done
}

# sb_new_of_org BEFORE ORG: containers runsc lists now that were not in
# BEFORE (a `sb_runsc list -quiet` output) and whose record belongs to ORG
# (other tests may create sandboxes at the same time); their placements.
sb_new_of_org() {
	local x
	for x in $(sb_runsc list -quiet 2> /dev/null); do
		[[ $'\n'$1$'\n' == *$'\n'$x$'\n'* ]] && continue
		[ "$(psql_q "SELECT org_id FROM sandboxes WHERE placement_id = '$x'")" = "$2" ] && echo "$x"
	done
}
