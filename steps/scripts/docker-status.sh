# shellcheck shell=sh
# docker-status: observes container jobs in one round trip and one docker
# inspect.
# Parameters: tf_jobs (the jobs directory under $HOME), tf_probes (a list
# of shell words, three per job: ID OFFSET RESULTS, RESULTS "" for none,
# read with eval set --), tf_chunk (the most log bytes per job),
# tf_format (docker inspect's format: one "@inspect /NAME STATUS ..."
# line per container), tf_follow and tf_whole (the names of the log
# copies in a job's directory).
# Needs docker-check and home.
#
# Prints "@now UNIX-SECONDS", the @inspect lines, then per job
# "@job INDEX CANCELED SIZE N", N log bytes (docker logs, stdout and
# stderr merged, from OFFSET) and "@status MTIME LINE" (the last line of
# RESULTS/status.json, MTIME its age mark). An inspect that fails for
# another reason than a missing container (the daemon is down) fails the
# poll (exit 3) instead of reading as "gone".
#
# The log is not read whole at every poll: the first poll of a running
# container starts a follower, docker logs -f copying the log into the
# job's directory, detached (setsid) and alone (it holds a flock while it
# runs: lock busy, exit 75, means followed), and later polls read the
# copy from their offset. The follower writes its exit status when the
# container has stopped and it has copied everything; a poll that sees
# the container stopped waits for that (a few seconds at most) and then
# reads the copy to its end. Without a follower's finished copy (no setsid
# or flock, flock failing for another reason than a busy lock, the
# follower gone) the stopped container's log is read whole once and kept,
# and a running one's at every poll (and a created or removing one's, not
# kept).
# tf_nl, tf_sttail and tf_stlines: scripts/stlines.sh.
t=$(mktemp "${TMPDIR:-/tmp}/taoflow-poll.XXXXXX") || exit 1
trap 'rm -f "$t" "$t.e" "$t.i"' EXIT
echo "@now $(date +%s)"
eval "set -- $tf_probes"
# The containers' names: job ids are [A-Za-z0-9_.-] words, so the list
# splits as it was built.
tf_ids=
tf_i=1
while [ "$tf_i" -le "$#" ]; do
	eval "tf_ids=\"\$tf_ids \${$tf_i}\""
	tf_i=$((tf_i + 3))
done
set -f
# shellcheck disable=SC2086 # split on purpose (see above)
docker inspect --type container --format "$tf_format" $tf_ids > "$t.i" 2> "$t.e"
set +f
tf_insp=
while IFS= read -r l; do
	printf '%s\n' "$l"
	tf_insp="$tf_insp$tf_nl$l"
done < "$t.i"
tf_insp="$tf_insp$tf_nl"
tf_bad=0
while IFS= read -r l; do
	case $l in *"No such"*) continue;; esac
	case $l in *[![:space:]]*) printf '%s\n' "$l" >&2; tf_bad=1;; esac
done < "$t.e"
[ "$tf_bad" = 0 ] || exit 3
follow=0
command -v setsid >/dev/null 2>&1 && command -v flock >/dev/null 2>&1 && follow=1
# tf_inspected NAME: sets tf_st to the container's status, "" if not found.
tf_inspected() {
	tf_st=
	case $tf_insp in
	*"$tf_nl@inspect /$1 "*)
		tf_st=${tf_insp#*"$tf_nl@inspect /$1 "}
		tf_st=${tf_st%%"$tf_nl"*}
		tf_st=${tf_st%% *};;
	esac
}
# tf_log NAME: sets f to the file holding the container's log.
tf_log() {
	d=$HOME/$tf_jobs/$1
	f=$d/$tf_follow
	tf_inspected "$1"
	case $tf_st in
	running|paused|restarting)
		rm -f "$d/$tf_whole.whole"
		if [ "$follow" = 1 ] && mkdir -p "$d" 2>/dev/null; then
			flock -n -E 75 "$f.lock" true 2>/dev/null
			# The follower's script reads its own variables (SC2016).
			# shellcheck disable=SC2016
			case $? in
			75) return 0;;
			0) setsid flock -n "$f.lock" sh -c 'rm -f "$2.end"; docker logs -f "$1" > "$2" 2>&1; echo $? > "$2.end"' taoflow-log "$1" "$f" < /dev/null > /dev/null 2>&1 &;;
			esac
		fi;;
	'') f=$t; : > "$t"; return 0;;
	exited|dead)
		if [ "$follow" = 1 ] && [ -f "$f" ]; then
			i=0
			while [ "$i" -lt 5 ] && [ ! -f "$f.end" ]; do
				flock -n -E 75 "$f.lock" true 2>/dev/null
				[ $? -eq 75 ] || break
				sleep 1
				i=$((i + 1))
			done
			e=
			read -r e 2>/dev/null < "$f.end"
			[ "$e" = 0 ] && return 0
		fi
		f=$d/$tf_whole
		[ -f "$f.whole" ] && return 0
		if mkdir -p "$d" 2>/dev/null && docker logs "$1" > "$f.tmp" 2>&1 && mv -f "$f.tmp" "$f"; then
			: > "$f.whole"
			return 0
		fi
		rm -f "$f.tmp";;
	esac
	f=$t
	docker logs "$1" > "$t" 2>&1 || : > "$t"
}
tf_poll() {
	c=0
	[ -f "$HOME/$tf_jobs/$2/canceled" ] && c=1
	tf_log "$2"
	size=$(wc -c < "$f" 2>/dev/null)
	size=${size##* }
	case $size in ''|*[!0-9]*) size=0;; esac
	n=$((size - $3))
	[ "$n" -lt 0 ] && n=0
	[ "$n" -gt "$tf_chunk" ] && n=$tf_chunk
	printf '@job %s %s %s %s\n' "$1" "$c" "$size" "$n"
	[ "$n" -gt 0 ] && tail -c +$(($3 + 1)) "$f" | head -c "$n"
	st=''
	mt=0
	if [ -n "$4" ]; then
		tf_home "$4"
		if [ -f "$tf_h/status.json" ]; then
			mt=$(date -r "$tf_h/status.json" +%s 2>/dev/null || echo 0)
			# The last line: the end of the file (4 KiB and its newline),
			# after its last newline.
			tf_sttail "$tf_h/status.json"
		fi
	fi
	tf_stlines
	printf '@status %s %s\n' "$mt" "$st"
}
tf_i=0
while [ "$#" -ge 3 ]; do
	tf_poll "$tf_i" "$1" "$2" "$3"
	shift 3
	tf_i=$((tf_i + 1))
done
