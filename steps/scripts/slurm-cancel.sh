# shellcheck shell=sh
# slurm-cancel: cancels Slurm jobs of a run with one scancel, and marks
# their directories canceled.
# Parameters: tf_base (the run's directory; may start with ~/), tf_ids (a
# list of shell words: the job ids whose directories name their Slurm
# ids, read with eval set --), tf_run (the run id), tf_pool (the pool; ""
# with tf_ids), tf_remove (1: remove the secrets file of each job
# directory of the pool: teardown).
# Needs home.
#
# With tf_pool, every job of this user that squeue lists whose name
# starts with tf-RUN- and whose comment names the run and the pool is
# cancelled too: a job queued by an apply killed before it recorded its
# Slurm id is found by its name. Prints "canceled JOB (slurm job ID)" for
# each. A job whose directory holds its exit code (rc) is left alone: its
# batch script has ended, and Slurm only has to record it COMPLETED.
tf_home "$tf_base"
b=$tf_h
tf_c=
tf_said=
tf_nl='
'
eval "set -- $tf_ids"
for j in "$@"; do
	[ -s "$b/$j/id" ] || continue
	[ -s "$b/$j/rc" ] && continue
	read -r jid < "$b/$j/id"
	tf_c="$tf_c $jid"
	: > "$b/$j/canceled"
	tf_said="$tf_said
canceled $j (slurm job $jid)"
done
if [ -n "$tf_pool" ]; then
	tf_q=$(squeue --me -h -o '%i|%j|%k' 2>&1) || { printf '%s\n' "$tf_q" >&2; exit 1; }
	tf_want="taoflow run=$tf_run pool=$tf_pool"
	while IFS='|' read -r jid name comment; do
		case $name in "tf-$tf_run-"*) ;; *) continue;; esac
		[ "$comment" = "$tf_want" ] || continue
		case " $tf_c " in *" $jid "*) continue;; esac
		[ -s "$b/$name/rc" ] && continue
		tf_c="$tf_c $jid"
		[ -d "$b/$name" ] && : > "$b/$name/canceled"
		tf_said="$tf_said${tf_nl}canceled $name (slurm job $jid)"
	done <<EOQ
$tf_q
EOQ
fi
if [ -n "$tf_c" ]; then
	# shellcheck disable=SC2086 # ids are digits, split on purpose
	scancel $tf_c || exit 1
	# Wait (20 s at most) until squeue lists none of them: a running job
	# shows as COMPLETING while Slurm kills its processes, and the caller
	# says "removed" once this returns.
	tf_n=0
	while [ "$tf_n" -lt 100 ]; do
		tf_q=$(squeue --me -h -o '%i' 2>/dev/null) || break
		tf_left=
		for jid in $tf_c; do
			case "$tf_nl$tf_q$tf_nl" in *"$tf_nl$jid$tf_nl"*) tf_left=1 ;; esac
		done
		[ -z "$tf_left" ] && break
		sleep 0.2
		tf_n=$((tf_n + 1))
	done
fi
if [ "$tf_remove" = 1 ] && [ -d "$b" ]; then
	for p in "$b"/*/pool; do
		[ -f "$p" ] || continue
		read -r pool < "$p"
		[ "$pool" = "$tf_pool" ] && rm -f "${p%/pool}/env"
	done
fi
[ -z "$tf_said" ] || printf '%s\n' "$tf_said" | while IFS= read -r l; do [ -n "$l" ] && printf '%s\n' "$l"; done
exit 0
