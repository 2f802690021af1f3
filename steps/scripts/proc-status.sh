# shellcheck shell=sh
# proc-status: observes host-process jobs in one round trip.
# Parameters: tf_jobs (the jobs directory under $HOME), tf_probes (a list
# of shell words, three per job: ID OFFSET RESULTS, RESULTS "" for none,
# read with eval set --), tf_chunk (the most log bytes per job), tf_now
# (Unix seconds by taoflow's clock, which also wrote each job's started).
# Needs procfuncs and home.
#
# Prints, per job, a header
#
#	@job INDEX STATE CODE CANCELED AGE SIZE N
#
# then N log bytes from OFFSET, then "@status LINE" (the last line of
# RESULTS/status.json, unless it is older than the job's launch).
#
# Processes per poll: wc (every log's size, once); per job only tail and
# head for new log bytes and tail for status.json. Everything else is
# builtins.
tf_dir=$HOME/$tf_jobs
# tf_nl, tf_sttail and tf_stlines: scripts/stlines.sh.
eval "set -- $tf_probes"
# tf_state INDEX ID: the job's state, exit code, cancel mark and age, kept
# in tf_<field>_INDEX for the second pass. Every state is read before any
# log size: a job seen ended has its whole log counted.
tf_state() {
	d=$tf_dir/$2
	state=missing code=0 canceled=0 age=0
	if [ -d "$d" ]; then
		code=
		[ -f "$d/rc" ] && read -r code 2>/dev/null < "$d/rc"
		case $code in
		''|*[!0-9]*)
			code=-1
			if tf_pid "$d"; then
				if tf_alive "$tf_p"; then
					state=running
				elif [ -f "$d/rc" ]; then
					read -r code 2>/dev/null < "$d/rc"
					case $code in ''|*[!0-9]*) code=-1;; esac
					state=exited
				else
					state=vanished
					# What is left of it goes, and is gone (tf_reap, below)
					# before the poll answers.
					if tf_group "$tf_p"; then
						kill -KILL -"$tf_p" 2>/dev/null
						tf_pids="$tf_pids $tf_p"
					fi
				fi
			elif [ -f "$d/rc" ]; then
				state=exited
			fi;;
		*) state=exited;;
		esac
		[ "$state" = exited ] || code=0
		[ -f "$d/canceled" ] && canceled=1
		s=
		read -r s 2>/dev/null < "$d/started"
		case $s in ''|*[!0-9]*) ;; *) age=$((tf_now - s));; esac
		# Job ids are [A-Za-z0-9_.-] words: the list splits as it was built.
		[ -f "$d/log" ] && tf_logs="$tf_logs $2/log"
	fi
	eval "tf_state_$1=\$state tf_code_$1=\$code tf_canceled_$1=\$canceled tf_age_$1=\$age"
}
tf_logs=
tf_i=0
while [ "$tf_i" -lt "$(($# / 3))" ]; do
	eval "tf_state $tf_i \"\${$((tf_i * 3 + 1))}\""
	tf_i=$((tf_i + 1))
done
[ -z "$tf_pids" ] || tf_reap > /dev/null
# Every log's size in one wc, names relative to the jobs directory.
tf_sizes=
if [ -n "$tf_logs" ]; then
	# shellcheck disable=SC2086 # the list is split on purpose, globbing off
	tf_sizes=$(set -f; cd "$tf_dir" && wc -c $tf_logs 2>/dev/null)
fi
tf_sizes="$tf_nl$tf_sizes$tf_nl"
# tf_size ID: sets size to the bytes wc counted in ID's log (0: none).
tf_size() {
	case $tf_sizes in
	*" $1/log$tf_nl"*)
		size=${tf_sizes%%" $1/log$tf_nl"*}
		size=${size##*"$tf_nl"}
		size=${size##* }
		case $size in ''|*[!0-9]*) size=0;; esac;;
	*) size=0;;
	esac
}
# tf_poll INDEX ID OFFSET RESULTS prints what was seen of one job.
tf_poll() {
	d=$tf_dir/$2
	eval "state=\$tf_state_$1 code=\$tf_code_$1 canceled=\$tf_canceled_$1 age=\$tf_age_$1"
	n=0
	tf_size "$2"
	if [ "$state" != missing ]; then
		n=$((size - $3))
		[ "$n" -lt 0 ] && n=0
		[ "$n" -gt "$tf_chunk" ] && n=$tf_chunk
	fi
	printf '@job %s %s %s %s %s %s %s\n' "$1" "$state" "$code" "$canceled" "$age" "$size" "$n"
	[ "$n" -gt 0 ] && tail -c +$(($3 + 1)) "$d/log" | head -c "$n"
	st=
	if [ -n "$4" ]; then
		tf_home "$4"
		# -nt is not POSIX, but dash, bash, busybox sh and ksh have it.
		# shellcheck disable=SC3013
		if [ -f "$tf_h/status.json" ] && ! [ "$d/pid" -nt "$tf_h/status.json" ]; then
			# The last line: the end of the file (4 KiB and its newline),
			# after its last newline.
			tf_sttail "$tf_h/status.json"
		fi
	fi
	tf_stlines
	printf '@status %s\n' "$st"
}
tf_i=0
while [ "$#" -ge 3 ]; do
	tf_poll "$tf_i" "$1" "$2" "$3"
	shift 3
	tf_i=$((tf_i + 1))
done
