# The chaos load, kills and census shared by t/integration/chaos-kill.t and
# bench/chaos (bash; sourced after lib.sh, whose stack variables, psql_q,
# worker_pid and sb_* listings it uses). Issue 8: kill -9, under a bounded
# load, an API child, the provisioner, the node agent, Postgres and RabbitMQ
# in turn; count the requests that got no HTTP answer, and what is left stuck
# or orphaned once the reaper had its chance.
#
# Everything is bounded: every request has --max-time CH_MAXT, every client
# loop a time and an iteration limit, every wait a deadline.

CH_MAXT=${CH_MAXT:-60}      # seconds: a request with no answer by then is lost
CH_DIR=$T_TMP/chaos
CH_RUN=${CH_RUN:-$(od -An -tx1 -N3 /dev/urandom | tr -d ' \n')}
CH_LOG=$CH_DIR/requests     # one line per request, see ch_req
CH_IDS=$CH_DIR/ids          # every sandbox id a create answered with
CH_PIDS=()
mkdir -p "$CH_DIR"
: > "$CH_LOG"
: > "$CH_IDS"

# ch_setup PREFIX: an organisation and key of its own (so the census can
# tell our records from anyone else's), with room for the load.
ch_setup() {
	CH_ORG=$(new_org "$1")
	[ -n "$CH_ORG" ] || return 1
	CH_KEY=$(new_key "$CH_ORG")
	[[ $CH_KEY =~ ^sbx_[0-9a-f]{64}$ ]] || return 1
	admin org limits "$CH_ORG" --max-sandboxes 50 > /dev/null 2>&1
	CH_AUTH="Authorization: Bearer $CH_KEY"
}

# ---- the load ---------------------------------------------------------

# ch_req PHASE LOOP ITER STEP METHOD PATH [CURL_ARGS...]: one request
# through nginx. Appends to CH_LOG:
#   PHASE LOOP ITER STEP CODE CURL_RC START_EPOCH SECONDS REQUEST_ID
# CODE is 000 when no HTTP answer came at all (lost); a code with a non-zero
# curl exit is an answer cut short. The body is in $CH_BODY, CH_CODE the
# code, CH_RC curl's exit status.
ch_req() {
	local tag="$1 $2 $3 $4" rid="ch-$CH_RUN-$1-$2-$3-$4" m=$5 p=$6 out rc t0
	shift 6
	t0=$EPOCHREALTIME
	out=$(curl -sS --cacert "$SBX_CACERT" --max-time "$CH_MAXT" -H "$CH_AUTH" -H "X-Request-Id: $rid" \
		-X "$m" -o "$CH_BODY" -w '%{http_code} %{time_total}' "$@" "$SBX_URL$p" 2> "$CH_BODY.err")
	rc=$?
	CH_RC=$rc
	CH_CODE=${out%% *}
	[[ $CH_CODE =~ ^[0-9]{3}$ ]] || CH_CODE=000
	echo "$tag $CH_CODE $rc $t0 ${out#* } $rid" >> "$CH_LOG"
}

# ch_bad PHASE LOOP ITER STEP: a whole 2xx answer whose body is not what
# was asked for (another sandbox's file or output would show here).
ch_bad() { echo "$1 $2 $3 $4" >> "$CH_DIR/wrong"; }

# ch_loop PHASE LOOP SECS MAXITER: create -> exec -> file put -> file get ->
# delete, again and again, until SECS have passed or MAXITER rounds ran. A
# round whose create got no sandbox sleeps a little and starts over.
ch_loop() {
	local ph=$1 n=$2 end=$((SECONDS + $3)) max=$4 i=0 id want
	CH_BODY=$CH_DIR/body.$ph.$n
	while [ $SECONDS -lt $end ] && [ $i -lt "$max" ]; do
		i=$((i + 1))
		ch_req "$ph" "$n" "$i" create POST /sandboxes -H 'Content-Type: application/json' \
			-d "{\"name\":\"ch-$ph-$n-$i\",\"specs\":{\"memory\":256,\"disk\":1}}"
		id=""
		[ "$CH_CODE" = 201 ] && id=$(${T_JGET:-jq} -r '.data.id // empty' 2> /dev/null < "$CH_BODY")
		if [ -z "$id" ]; then
			sleep 0.5
			continue
		fi
		echo "$id $ph" >> "$CH_IDS"
		want="chaos $CH_RUN $ph $n $i"
		ch_req "$ph" "$n" "$i" exec POST "/sandboxes/$id/exec" -H 'Content-Type: application/json' \
			-d "{\"cmd\":\"echo $want\",\"timeout_seconds\":10}"
		[ "$CH_CODE$CH_RC" = 2000 ] && [ "$(${T_JGET:-jq} -r '.data.stdout' 2> /dev/null < "$CH_BODY")" != "$want" ] &&
			ch_bad "$ph" "$n" "$i" exec
		ch_req "$ph" "$n" "$i" put PUT "/sandboxes/$id/files/tmp/chaos.txt" \
			-H 'Content-Type: application/octet-stream' --data-binary "$want"
		ch_req "$ph" "$n" "$i" get GET "/sandboxes/$id/files/tmp/chaos.txt"
		[ "$CH_CODE$CH_RC" = 2000 ] && [ "$(cat "$CH_BODY")" != "$want" ] && ch_bad "$ph" "$n" "$i" get
		ch_req "$ph" "$n" "$i" delete DELETE "/sandboxes/$id"
	done
}

# ch_load PHASE LOOPS SECS MAXITER: LOOPS client loops in the background.
ch_load() {
	local n
	CH_PIDS=()
	for ((n = 1; n <= $2; n++)); do
		ch_loop "$1" "$n" "$3" "$4" &
		CH_PIDS+=($!)
	done
}

# ch_wait_load: waits for the loops (each is bounded on its own).
ch_wait_load() {
	local p
	for p in "${CH_PIDS[@]}"; do wait "$p" 2> /dev/null; done
	CH_PIDS=()
}

# ch_stop_load: ends loops still running (clean-up after an early exit).
ch_stop_load() {
	local p c
	for p in "${CH_PIDS[@]}"; do
		for c in $(ps -o pid= --ppid "$p" 2> /dev/null); do kill "$c" 2> /dev/null; done
		kill "$p" 2> /dev/null
	done
	CH_PIDS=()
}

# ---- the kills ----------------------------------------------------------

ch_alive() { [ -d "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2> /dev/null; }

# ch_wait_dead SECONDS PID...: true when every PID has exited in time.
ch_wait_dead() {
	local secs=$1 p deadline
	shift
	deadline=$((SECONDS + secs))
	for p in "$@"; do
		while ch_alive "$p"; do
			[ $SECONDS -lt $deadline ] || return 1
			t_nap 0.1
		done
	done
}

# ch_wait_gone SECONDS PID: true when PID has no /proc entry any more
# (exited and reaped).
ch_wait_gone() {
	local deadline=$((SECONDS + $1))
	while [ -d "/proc/$2" ]; do
		[ $SECONDS -lt $deadline ] || return 1
		t_nap 0.1
	done
}

# ch_api_children: the API master's children (never the master itself).
ch_api_children() {
	local m
	m=$(cat "$SBX_API_PIDFILE" 2> /dev/null) || return 1
	ps -o pid= --ppid "$m" | tr -d ' '
}

# ch_api_busy: API children holding an accepted FastCGI connection now,
# i.e. serving a request (the server side of a connection on the socket).
ch_api_busy() {
	local kids
	kids=$(ch_api_children) || return 1
	ss -xpH state established 2> /dev/null | grep -F " $SBX_API_SOCKET " |
		grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u | grep -Fxf <(echo "$kids")
}

# ch_kill TARGET: kill -9 one part of the stack; CH_KILLED says what, and
# for Postgres and RabbitMQ CH_DOWN how long it was gone (s) before the
# stack's own start function had it back (CH_RESTART_RC its status,
# CH_BACK the time it returned, epoch seconds).
#   api: an sbx-api child, one serving a request if one does within 3 s
#   provisioner | node: the worker's role #0 (the master restarts it)
#   postgres: the postmaster; its backends end by themselves (bounded, then
#     SIGKILL, as a supervisor's cgroup kill would), then sbx_pg_start
#   rabbitmq: the beam; its wrapper script exits with it, then sbx_mq_start
ch_kill() {
	local what=$1 pid="" kids t0 deadline left
	CH_KILLED="" CH_DOWN="" CH_RESTART_RC=0 CH_BACK=""
	case $what in
	api)
		deadline=$((SECONDS + 3))
		until pid=$(ch_api_busy | shuf -n1) && [ -n "$pid" ]; do
			[ $SECONDS -lt $deadline ] || break
			t_nap 0.05
		done
		if [ -n "$pid" ]; then
			CH_KILLED="sbx-api child $pid (serving a request)"
		else
			pid=$(ch_api_children | shuf -n1)
			CH_KILLED="sbx-api child $pid (idle: none was serving)"
		fi
		[ -n "$pid" ] && kill -KILL "$pid" || return 1
		;;
	provisioner | node)
		pid=$(worker_pid "$what") || return 1
		kill -KILL "$pid" || return 1
		CH_KILLED="sbx-worker $what $pid"
		;;
	postgres)
		pid=$(head -n1 "$SBX_STACK_DIR/pg/data/postmaster.pid" 2> /dev/null | tr -dc 0-9)
		[ -n "$pid" ] && ch_alive "$pid" || return 1
		kids=$(ps -o pid= --ppid "$pid" | tr -d ' ')
		t0=$EPOCHREALTIME
		kill -KILL "$pid" || return 1
		CH_KILLED="postgres postmaster $pid"
		# Gone, not only dead: a new postmaster takes a zombie's pid in
		# postmaster.pid for a live server (kill(pid, 0) succeeds) and
		# refuses to start; pid 1 reaps it (a supervisor would at once).
		ch_wait_gone 30 "$pid" || CH_KILLED+=" (still not reaped after 30 s)"
		# Backends notice the postmaster's death and exit; a new postmaster
		# refuses to start while any of them still holds the shared memory.
		if ! ch_wait_dead 20 $kids; then
			left=$(for p in $kids; do ch_alive "$p" && echo "$p"; done)
			CH_KILLED+=" (backends left after 20 s, SIGKILLed: $(echo $left))"
			kill -KILL $left 2> /dev/null
			ch_wait_dead 10 $left
		fi
		sbx_pg_start > "$CH_DIR/pg-start.log" 2>&1
		CH_RESTART_RC=$?
		CH_BACK=$EPOCHREALTIME
		CH_DOWN=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
		;;
	rabbitmq)
		pid=$(head -n1 "$SBX_STACK_DIR/run/rabbitmq-beam.pid" 2> /dev/null | tr -dc 0-9)
		[ -n "$pid" ] && ch_alive "$pid" || return 1
		t0=$EPOCHREALTIME
		kill -KILL "$pid" || return 1
		CH_KILLED="rabbitmq beam $pid"
		ch_wait_dead 10 "$pid"
		# the wrapper (rabbitmq-server) waits on the beam and exits with it
		local w
		w=$(head -n1 "$SBX_STACK_DIR/run/rabbitmq.pid" 2> /dev/null | tr -dc 0-9)
		[ -n "$w" ] && ch_wait_dead 10 "$w"
		sbx_mq_start > "$CH_DIR/mq-start.log" 2>&1
		CH_RESTART_RC=$?
		CH_BACK=$EPOCHREALTIME
		CH_DOWN=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
		;;
	*) return 2 ;;
	esac
	return 0
}

# ch_probe: one create -> exec -> delete with the chaos key; true when all
# three worked (201, 200 with the right output, 204). CH_PROBE says how far.
ch_probe() {
	local id out b=$CH_DIR/probe
	CH_PROBE=""
	out=$(curl -sS --cacert "$SBX_CACERT" --max-time 30 -H "$CH_AUTH" -H 'Content-Type: application/json' \
		-d '{"name":"ch-probe","specs":{"memory":256,"disk":1}}' -o "$b" -w '%{http_code}' "$SBX_URL/sandboxes" 2> /dev/null)
	CH_PROBE="create $out"
	[ "$out" = 201 ] || return 1
	id=$(${T_JGET:-jq} -r '.data.id // empty' 2> /dev/null < "$b")
	echo "$id probe" >> "$CH_IDS"
	out=$(curl -sS --cacert "$SBX_CACERT" --max-time 30 -H "$CH_AUTH" -H 'Content-Type: application/json' \
		-d '{"cmd":"echo probe","timeout_seconds":10}' -o "$b" -w '%{http_code}' "$SBX_URL/sandboxes/$id/exec" 2> /dev/null)
	CH_PROBE+=", exec $out"
	local exec_ok=0
	if [ "$out" != 200 ] || [ "$(${T_JGET:-jq} -r .data.stdout < "$b" 2> /dev/null)" != probe ]; then
		exec_ok=1
		CH_PROBE+=" ($(head -c 200 "$b"))"
	fi
	out=$(curl -sS --cacert "$SBX_CACERT" --max-time 30 -H "$CH_AUTH" -X DELETE -o "$b" -w '%{http_code}' \
		"$SBX_URL/sandboxes/$id" 2> /dev/null)
	CH_PROBE+=", delete $out"
	[ $exec_ok = 0 ] && [ "$out" = 204 ]
}

# ch_recover SECONDS: probes until one works; CH_RECOVERED is how long it
# took (s), empty when it never did within SECONDS.
ch_recover() {
	local t0=$EPOCHREALTIME deadline=$((SECONDS + $1))
	CH_RECOVERED=""
	while :; do
		if ch_probe; then
			CH_RECOVERED=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
			return 0
		fi
		[ $SECONDS -lt $deadline ] || return 1
		sleep 1
	done
}

# ch_consuming_after MARK EPOCH [node|provisioner]: seconds from EPOCH (when
# RabbitMQ was back) to the role's first "consuming" line logged after MARK
# (log_mark); empty when there is none. Read from the line's own time stamp.
ch_consuming_after() {
	local line ts re='sbx-worker-node\[[0-9]+\] info: node agent consuming'
	[ "${3:-node}" = provisioner ] && re='sbx-worker-provisioner\[[0-9]+\] info: consuming'
	line=$(log_since "$1" | grep -m1 -E "$re") || return 0
	ts=$(date -d "${line%% *}" +%s.%N 2> /dev/null) || return 0
	awk -v a="$2" -v b="$ts" 'BEGIN { printf "%.1f", b - a }'
}

# ---- counting -----------------------------------------------------------

# ch_count PHASE: "sent 2xx 4xx 5xx lost cut wrong" of that phase's requests.
ch_count() {
	local wrong=0
	[ -f "$CH_DIR/wrong" ] && wrong=$(awk -v p="$1" '$1 == p' "$CH_DIR/wrong" | wc -l)
	awk -v p="$1" -v w="$wrong" '$1 == p {
		n++
		if ($5 == "000") lost++
		else {
			c = substr($5, 1, 1)
			if (c == "2") s2++; else if (c == "4") s4++; else if (c == "5") s5++
			if ($6 != 0) cut++
		}
	} END { printf "%d %d %d %d %d %d %d\n", n, s2, s4, s5, lost, cut, w }' "$CH_LOG"
}

# ch_lost PHASE: the lost requests (and those cut short) of a phase, one a line.
ch_lost() {
	awk -v p="$1" '$1 == p && ($5 == "000" || $6 != 0) {
		printf "%s #%s.%s %s: code %s, curl exit %s after %ss (request id %s)\n", $1, $2, $3, $4, $5, $6, $8, $9 }' "$CH_LOG"
}

# ch_codes PHASE: how many of each status, e.g. "201x12 502x1 204x20".
ch_codes() {
	awk -v p="$1" '$1 == p { c[$4 ":" $5]++ } END { for (k in c) printf "%s=%d\n", k, c[k] }' "$CH_LOG" |
		sort | tr '\n' ' '
}

# ch_unclaimed PHASE: sandboxes alive although their create got no 201 (the
# client never learned their id): "id:status:name", one a line.
ch_unclaimed() {
	local rids
	rids=$(awk -v p="$1" '$1 == p && $4 == "create" && $5 != "201" { printf "%s'\''%s'\''", s, $9; s = "," }' "$CH_LOG")
	[ -n "$rids" ] || return 0
	psql_q "SELECT id || ':' || status || ':' || name FROM sandboxes WHERE org_id = '$CH_ORG'
		AND request_id IN ($rids) AND status NOT IN ('failed', 'destroyed')" 2> /dev/null
}

# ch_node_ids: every sandbox id something on this node still shows, from
# listings independent of the product: runsc's list, the state directory,
# mounts and loop devices under it, and the netns names.
ch_node_ids() {
	local d=$SB_STATE/sandboxes/ f b n
	{
		sb_runsc list -quiet 2> /dev/null
		for f in "$d"*; do [ -e "$f" ] && echo "${f#"$d"}"; done
		awk -v p="$d" 'index($5, p) == 1 { s = substr($5, length(p) + 1); sub(/\/.*/, "", s); print s }' /proc/self/mountinfo
		while read -r _ b; do
			[[ $b == "$d"* ]] && { b=${b#"$d"}; echo "${b%%/*}"; }
		done < <(sb_loops)
		# not another stack's, nor the net-*.t files' own (t/net/net-lib.sh
		# tid: 7e57..., made by netctl while a second stack runs chaos:
		# CI at 4e2fbaa counted one as an orphan); zz-leftovers, which runs
		# after them, still looks at those
		for n in /run/netns/sbx-*; do
			[ -e "$n" ] && [[ ${n#/run/netns/sbx-} != 7e57* ]] && ! sb_foreign "${n#/run/netns/sbx-}" &&
				echo "${n#/run/netns/sbx-}"
		done
	} | grep -E '^[0-9a-f]{24}$' | sort -u
}

# ch_census [ORG [GRACE]]: what is wrong now, as lists (one "id: detail" a
# line):
#   CH_TRANS   records stuck in a transitional state: starting, pausing,
#              resuming, or a destroy asked for and not done;
#   CH_ORPHANS anything on the node no live record owns (no record, or one
#              that is starting, failed or destroyed), with what is left;
#   CH_DEAD    records 'ready' on this node whose container is not running.
# With ORG, records are only that organisation's (and node leftovers whose
# record is another organisation's are not counted). With GRACE (seconds),
# a 'starting' record younger than that is not stuck yet (the reaper fails
# it only then): it goes to CH_YOUNG instead, and what is on the node for
# it is not an orphan yet either.
ch_census() {
	local org=${1:-} grace=${2:-0} cond="true" id st rec yq isyoung
	[ -n "$org" ] && cond="org_id = '$org'"
	yq="status = 'starting' AND created_at > now() - make_interval(secs => $grace)"
	CH_TRANS=$(psql_q "SELECT id || ': ' || status || CASE WHEN destroy_requested_at IS NOT NULL
		THEN ' (destroy asked ' || to_char(destroy_requested_at, 'HH24:MI:SS') || ')' ELSE '' END
		|| ' ' || name FROM sandboxes WHERE $cond AND NOT ($yq) AND (status IN ('starting', 'pausing', 'resuming')
		OR (destroy_requested_at IS NOT NULL AND status <> 'destroyed')) ORDER BY created_at" 2>&1) ||
		CH_TRANS="census: the records cannot be read: $CH_TRANS"
	CH_YOUNG=$(psql_q "SELECT id || ': starting since ' || to_char(created_at, 'HH24:MI:SS') || ' ' || name
		FROM sandboxes WHERE $cond AND $yq ORDER BY created_at" 2> /dev/null)
	CH_ORPHANS=""
	# node objects are named by placement; a warm pool member has no
	# record (one still starting is listed within seconds, or is gone)
	ch_pooled() { [ -n "$(psql_q "SELECT 1 FROM warm_pool WHERE placement_id = '$1'" 2> /dev/null)" ]; }
	# what the records say of every id the node shows, in one query (two
	# psql an id before: the census runs a dozen times a file, polled)
	local ids q="" p pool r
	local -A recs=()
	ids=$(ch_node_ids)
	for id in $ids; do q+="${q:+,}'$id'"; done
	if [ -n "$q" ]; then
		while IFS='|' read -r p pool r; do
			[ -n "$p" ] && recs[$p]="$pool $r"
		done < <(psql_q "SELECT p, EXISTS (SELECT 1 FROM warm_pool w WHERE w.placement_id = p),
			coalesce((SELECT status || ' ' || org_id || ' ' || ($yq)::text FROM sandboxes WHERE placement_id = p), '')
			FROM unnest(ARRAY[$q]::text[]) p" 2> /dev/null)
	fi
	for id in $ids; do
		read -r pool st rec isyoung <<< "${recs[$id]:-f}"
		[ "$pool" = t ] && continue
		[ -n "$st" ] || st=none
		[ "$st" = none ] && wait_until 5 eval 'ch_pooled "$id" || sb_gone "$id"' && continue
		[ -n "$org" ] && [ -n "$rec" ] && [ "$rec" != "$org" ] && continue
		[[ $st =~ ^(ready|paused|pausing|resuming)$ ]] && continue
		[ "$isyoung" = true ] && continue
		CH_ORPHANS+="$id: record $st; left: $(sb_leftovers "$id")"$'\n'
	done
	CH_ORPHANS=${CH_ORPHANS%$'\n'}
	CH_DEAD=""
	for id in $(psql_q "SELECT id FROM sandboxes WHERE $cond AND status = 'ready'" 2> /dev/null); do
		st=$(sb_runsc_state "$id")
		[ "$st" = running ] || CH_DEAD+="$id: runsc says '${st:-nothing}'; missing: $(sb_missing "$id")"$'\n'
	done
	CH_DEAD=${CH_DEAD%$'\n'}
}

# ch_n LIST: how many lines.
ch_n() { [ -n "$1" ] && printf '%s\n' "$1" | wc -l || echo 0; }

# ch_clean_census [ORG [GRACE]]: true when the census finds nothing (for
# wait_until).
ch_clean_census() {
	ch_census "$@"
	[ -z "$CH_TRANS" ] && [ -z "$CH_ORPHANS" ] && [ -z "$CH_DEAD" ]
}

# ch_delete_all: DELETE every sandbox of the chaos organisation that is
# still alive; waits (bounded) until the node has nothing of them left.
ch_delete_all() {
	local id ids
	ids=$(psql_q "SELECT id FROM sandboxes WHERE org_id = '$CH_ORG' AND status NOT IN ('destroyed')" 2> /dev/null)
	for id in $ids; do
		curl -sS -o /dev/null --cacert "$SBX_CACERT" --max-time 40 -X DELETE -H "$CH_AUTH" \
			"$SBX_URL/sandboxes/$id" 2> /dev/null
	done
	[ -n "$ids" ] && wait_until 30 sb_gone $ids
	return 0
}

# ch_last_create_age: seconds since the newest record of the chaos
# organisation was made (a create in flight when something died may leave
# it 'starting' until the reaper's grace has passed).
ch_last_create_age() {
	local a
	a=$(psql_q "SELECT coalesce(extract(epoch FROM now() - max(created_at))::int, 100000) FROM sandboxes
		WHERE org_id = '$CH_ORG'" 2> /dev/null)
	[[ $a =~ ^[0-9]+$ ]] && echo "$a" || echo 0
}

# ch_reaper_grace: how old a 'starting' record must be before the reaper
# fails it (workers/reaper.c: rpc_timeout + start_timeout + 30 s).
ch_reaper_grace() { echo $(($(ch_conf_secs rpc_timeout 60) + $(ch_conf_secs start_timeout 45) + 30)); }

# ch_conf_secs NAME DEFAULT: a duration setting of sbx.conf in seconds
# (30, 30s, 5m, 1h, 1d as src/lib/settings.c reads them).
ch_conf_secs() {
	local v
	v=$(conf_get "$1")
	case $v in
	'') echo "$2" ;;
	*[0-9]s) echo "${v%s}" ;;
	*[0-9]m) echo $((${v%m} * 60)) ;;
	*[0-9]h) echo $((${v%h} * 3600)) ;;
	*[0-9]d) echo $((${v%d} * 86400)) ;;
	*) [[ $v =~ ^[0-9]+$ ]] && echo "$v" || echo "$2" ;;
	esac
}

# ch_restore: whatever happened, Postgres and RabbitMQ run again (the
# stack's own start functions; they do nothing when the part is up).
ch_restore() {
	local pid
	pid=$(head -n1 "$SBX_STACK_DIR/pg/data/postmaster.pid" 2> /dev/null | tr -dc 0-9)
	[ -n "$pid" ] && ch_alive "$pid" || sbx_pg_start > "$CH_DIR/pg-restore.log" 2>&1
	pid=$(head -n1 "$SBX_STACK_DIR/run/rabbitmq-beam.pid" 2> /dev/null | tr -dc 0-9)
	[ -n "$pid" ] && ch_alive "$pid" || sbx_mq_start > "$CH_DIR/mq-restore.log" 2>&1
	return 0
}
