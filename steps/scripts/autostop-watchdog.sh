# shellcheck shell=sh
# autostop-watchdog: the watchdog of one instance of a run (docs/design.md
# §8.8), a shell in a session of its own (autostop-arm starts it with
# setsid) that outlives the session that started it and taoflow itself.
# Every tf_every seconds it reads the lease (Unix seconds, by this
# machine's clock, written by autostop-arm and each renewal by taoflow):
# when the lease is older than tf_after (in whole seconds: date +%s) and no job of the run runs on this
# instance, or older than tf_max_after (when not 0) whatever runs, it stops
# the run's jobs, writes its decision ("EPOCH idle AGE" or "EPOCH
# max_after AGE") to the decision file, runs tf_command and exits. It
# exits without doing anything once its directory is gone (disarmed) or
# holds another watchdog's pid (armed again).
# Parameters: tf_jobs (the jobs directory under $HOME), tf_prefix (the
# run's job prefix), tf_run, tf_instance, tf_dir (its directory under
# $HOME), tf_after and tf_max_after (whole seconds), tf_every (seconds
# between checks, such as 0.5 or 30), tf_command (sh -c), tf_docker (1:
# the run's containers count too), tf_run_label and tf_instance_label
# (KEY=VALUE), tf_grace (docker stop -t).
# Needs procfuncs.
d=$HOME/$tf_dir
trap '' HUP INT
# tf_mine DIR: DIR is a job of this run on this instance.
tf_mine() {
	if [ -f "$1/run" ]; then
		tf_v=
		IFS= read -r tf_v 2>/dev/null < "$1/run"
		[ "$tf_v" = "$tf_run" ] || return 1
	fi
	if [ -f "$1/instance" ]; then
		tf_v=
		IFS= read -r tf_v 2>/dev/null < "$1/instance"
		[ "$tf_v" = "$tf_instance" ] || return 1
	fi
	return 0
}
# tf_busy: a job of the run still runs on this instance.
tf_busy() {
	for j in "$HOME/$tf_jobs/$tf_prefix"*; do
		if [ -d "$j" ] && [ ! -f "$j/rc" ] && tf_mine "$j" && tf_pid "$j" && tf_group "$tf_p"; then
			return 0
		fi
	done
	if [ "$tf_docker" = 1 ] && command -v docker > /dev/null 2>&1; then
		[ -n "$(docker ps -q --filter "label=$tf_run_label" --filter "label=$tf_instance_label" 2> /dev/null)" ] && return 0
	fi
	return 1
}
# tf_stop_jobs: stops the run's jobs here, marked canceled.
tf_stop_jobs() {
	for j in "$HOME/$tf_jobs/$tf_prefix"*; do
		[ -d "$j" ] && tf_mine "$j" && tf_term "$j"
	done
	tf_reap
	if [ "$tf_docker" = 1 ] && command -v docker > /dev/null 2>&1; then
		for n in $(docker ps --format '{{.Names}}' --filter "label=$tf_run_label" --filter "label=$tf_instance_label" 2> /dev/null); do
			case $n in ''|*[!a-zA-Z0-9_.-]*) continue;; esac
			mkdir -p "$HOME/$tf_jobs/$n" && : > "$HOME/$tf_jobs/$n/canceled"
			echo "stopping container $n"
			docker stop -t "$tf_grace" "$n" > /dev/null
		done
	fi
}
while :; do
	[ -d "$d" ] || exit 0
	tf_w=
	read -r tf_w 2> /dev/null < "$d/pid"
	[ -z "$tf_w" ] || [ "$tf_w" = "$$" ] || exit 0
	now=$(date +%s)
	lease=
	read -r lease 2> /dev/null < "$d/lease"
	# A lease being written (empty) or unreadable counts as just renewed.
	case $lease in ''|*[!0-9]*) lease=$now;; esac
	age=$((now - lease))
	why=
	if [ "$tf_max_after" -gt 0 ] && [ "$age" -gt "$tf_max_after" ]; then
		why=max_after
	elif [ "$age" -gt "$tf_after" ] && ! tf_busy; then
		why=idle
	fi
	if [ -n "$why" ]; then
		echo "$(date +%s): lease not renewed for ${age}s ($why): stopping the run's jobs, then: $tf_command"
		tf_stop_jobs
		echo "$now $why $age" > "$d/decision"
		sh -c "$tf_command" < /dev/null
		echo "$(date +%s): the command exited with code $?"
		exit 0
	fi
	sleep "$tf_every"
done
