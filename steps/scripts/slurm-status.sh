# shellcheck shell=sh
# slurm-status: observes a run's Slurm jobs in one round trip: one squeue
# for all of them (their state, reason, elapsed time and exit code, ended
# ones included while Slurm keeps them), then each job's directory.
# Parameters: tf_base (the run's directory; may start with ~/), tf_names
# (the job names, comma-separated), tf_probes (a list of shell words,
# three per job: ID OFFSET RESULTS, RESULTS "" for none, read with eval
# set --), tf_chunk (the most log bytes per job), tf_exit_squeue (the exit
# code when squeue fails).
# Needs home.
#
# Prints "@q JOBID|NAME|STATE|REASON|ELAPSED|EXITCODE|" per squeue line,
# then per job a header
#
#	@job INDEX SLURMID RC CANCELED SIZE N
#
# (SLURMID and RC "-" when the directory has none), then N log bytes from
# OFFSET, then "@status LINE" (the last line of RESULTS/status.json).
tf_home "$tf_base"
b=$tf_h
tf_q=$(squeue --me -t all -h -O 'JobID:|,Name:|,State:|,Reason:|,TimeUsed:|,exit_code:|' --name="$tf_names" 2>&1) || {
	printf '%s\n' "$tf_q" >&2
	exit "$tf_exit_squeue"
}
if [ -n "$tf_q" ]; then
	printf '%s\n' "$tf_q" | while IFS= read -r tf_l; do printf '@q %s\n' "$tf_l"; done
fi
eval "set -- $tf_probes"
tf_i=0
while [ $# -ge 3 ]; do
	d=$b/$1 off=$2 res=$3
	shift 3
	jid=- rc=- c=0 size=0 n=0
	[ -s "$d/id" ] && read -r jid < "$d/id"
	[ -s "$d/rc" ] && read -r rc < "$d/rc"
	[ -f "$d/canceled" ] && c=1
	if [ -f "$d/log" ]; then
		size=$(wc -c < "$d/log")
		size=${size##* }
		n=$((size - off))
		[ "$n" -gt "$tf_chunk" ] && n=$tf_chunk
		[ "$n" -lt 0 ] && n=0
	fi
	printf '@job %s %s %s %s %s %s\n' "$tf_i" "$jid" "$rc" "$c" "$size" "$n"
	[ "$n" -gt 0 ] && tail -c +"$((off + 1))" "$d/log" | head -c "$n"
	st=
	if [ -n "$res" ]; then
		tf_home "$res"
		[ -f "$tf_h/status.json" ] && st=$(tail -n 1 "$tf_h/status.json" 2>/dev/null)
	fi
	printf '@status %s\n' "$st"
	tf_i=$((tf_i + 1))
done
