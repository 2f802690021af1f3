# shellcheck shell=sh
# autostop-disarm: stops this instance's watchdog, if it has one, and
# removes its directory (lease, decision, log); proc-cleanup runs it first,
# before the run's jobs are stopped and the instance is deleted or let go.
# Prints the watchdog's decision, "@decision EPOCH WHY AGE", when it had
# fired.
# Parameters: tf_autostop (the watchdog's directory under $HOME).
# Needs procfuncs.
tf_d=$HOME/$tf_autostop
if [ -d "$tf_d" ]; then
	if tf_pid "$tf_d" && tf_group "$tf_p"; then
		kill -TERM -"$tf_p" 2> /dev/null
	fi
	if [ -f "$tf_d/decision" ]; then
		tf_v=
		read -r tf_v < "$tf_d/decision"
		echo "@decision $tf_v"
	fi
	rm -rf "$tf_d"
fi
