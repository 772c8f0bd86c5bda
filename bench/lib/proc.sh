# bench/lib/proc.sh — the host's CPU as /proc tells it, for benches that
# measure what their work costs (sourced: bench/density, bench/lifecycle-cpu).

# busy_jiffies: ticks the machine was busy since boot, all CPUs (/proc/stat:
# user, nice, system, irq, softirq, steal)
busy_jiffies() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }

# all_jiffies: every process's utime + stime, "pid ticks comm" a line
# (blanks in comm as _; one cat: a process may end between the glob and
# its read, and cat then exits 1, which pipefail must not take for ours)
all_jiffies() {
	{ cat /proc/[0-9]*/stat 2>/dev/null || :; } | awk '{ l = $0; p = match(l, /\) [A-Za-z] /); o = index(l, "(")
		comm = substr(l, o + 1, p - o - 1); gsub(/[ \t]/, "_", comm)
		split(substr(l, p + 2), f, " ")
		print substr(l, 1, o - 2), f[12] + f[13], comm }'
}
