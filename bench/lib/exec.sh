# shellcheck shell=bash
# bench/lib/exec.sh — one exec as a bench times it (sourced: bench/density,
# bench/idle-cycle). The caller defines api (curl with its key) and $tmp.

# exec_true ID: one JSON exec of true through nginx; prints curl's
# time_total in ms, nothing (and fails) unless it answered 200 with exit 0
# shellcheck disable=SC2154 # tmp is the caller's
exec_true() {
	local out
	out=$(api -o "$tmp/exec.out" -w '%{http_code} %{time_total}' -X POST -H 'Content-Type: application/json' \
		-d '{"cmd":"true"}' "$SBX_URL/sandboxes/$1/exec") || return 1
	[ "${out%% *}" = 200 ] && [ "$(jq -r .data.exit_code "$tmp/exec.out" 2>/dev/null)" = 0 ] || return 1
	awk -v t="${out#* }" 'BEGIN { printf "%.3f\n", t * 1000 }'
}
