# shellcheck shell=sh
# procfuncs: shell functions the process scripts share.
# Parameters: tf_limit (tenths of a second between TERM and KILL).
#
# Builtins only where the answer allows (read, kill, parameter expansion):
# a poll over many jobs must not start processes per job.
#
# tf_alive PID: PID is a live process (not a zombie: an instance whose init
# does not reap orphans keeps them).
# tf_group PGID: the process group has a live member.
# tf_pid DIR: reads DIR/pid into tf_p; fails unless it holds a pid > 1.
# tf_term DIR: marks the job canceled and sends TERM to its group, adding
# the group to $tf_pids; nothing for a job that has ended.
# tf_reap: waits up to $tf_limit tenths of a second for the groups in
# $tf_pids to end, then KILLs what is left.
tf_alive() {
	kill -0 "$1" 2>/dev/null || return 1
	[ -r "/proc/$1/stat" ] || return 0
	# The state is the first field after the command name's last ") ".
	tf_s=
	read -r tf_s 2>/dev/null < "/proc/$1/stat"
	tf_s=${tf_s##*) }
	tf_s=${tf_s%% *}
	[ -n "$tf_s" ] && [ "$tf_s" != Z ]
}
tf_group() {
	# No member at all, zombies included: no process to start.
	kill -0 -"$1" 2>/dev/null || return 1
	[ -r /proc/self/stat ] || return 0
	cat /proc/[0-9]*/stat 2>/dev/null | awk -v g="$1" '{ sub(/.*\) /, "") } $3 == g && $1 != "Z" { f = 1 } END { exit !f }'
}
tf_pid() {
	tf_p=
	read -r tf_p 2>/dev/null < "$1/pid"
	case $tf_p in ''|*[!0-9]*) return 1;; esac
	[ "$tf_p" -gt 1 ]
}
tf_pids=
tf_term() {
	tf_pid "$1" || return 0
	[ -f "$1/rc" ] && return 0
	: > "$1/canceled"
	if tf_group "$tf_p"; then
		kill -TERM -"$tf_p" 2>/dev/null
		tf_pids="$tf_pids $tf_p"
		echo "stopping job ${1##*/} (process group $tf_p)"
	fi
}
tf_reap() {
	tf_i=0
	while :; do
		tf_left=
		for tf_g in $tf_pids; do tf_group "$tf_g" && tf_left="$tf_left $tf_g"; done
		[ -z "$tf_left" ] && return 0
		[ "$tf_i" -ge "$tf_limit" ] && break
		sleep 0.1
		tf_i=$((tf_i + 1))
	done
	for tf_g in $tf_left; do
		kill -KILL -"$tf_g" 2>/dev/null
		echo "process group $tf_g did not stop within $((tf_limit / 10))s of TERM; killed it"
	done
}
