# shellcheck shell=bash
# bench/lib/conf.sh — the stack's settings as a bench reads them (sourced
# after scripts/stack-env: bench/density, bench/idle-cycle).

# conf_get NAME: NAME's value in $SBX_CONF (the last line that sets it), or
# nothing when the file leaves it to the default
conf_get() { sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*//p" "$SBX_CONF" | tail -n1 | sed 's/[[:space:]]*$//'; }

# conf_value NAME: what the worker uses for NAME: $SBX_CONF's value, else the
# default of the worker's own table (`sbx-worker --help-config`)
conf_value() {
	local v
	v=$(conf_get "$1")
	if [ -z "$v" ]; then
		v=$("${SBX_BUILD:-build}/workers/sbx-worker" --help-config 2> /dev/null |
			awk -v n="$1" '$1 == n { for (i = 2; i < NF; i++) if ($i == "default:") { sub(/,$/, "", $(i + 1)); print $(i + 1) } }')
	fi
	echo "$v"
}
