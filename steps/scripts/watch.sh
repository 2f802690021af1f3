# shellcheck shell=sh
# watch: reports the ends of this instance's jobs as lines, as they come,
# until its stdin closes (taoflow stops watching, or the connection drops
# and sshd closes the session's input). One per instance for all of a
# run's waits (steps/watch.go).
# Parameters: tf_events (the events file that proc-supervisor, or on
# Slurm the batch script slurm-job, appends "@end JOB" to when a job ends;
# may start with ~/), tf_run (the run
# id: its containers carry the label taoflow.run=RUN), tf_docker (1: also
# follow the run's containers with docker events).
# Needs home.
#
# Prints "@ready" once it follows (every end after that line is
# reported; taoflow polls once on it for the ends before), then
# "@end JOB" per host-process job and "@die JOB" per container that ends.
#
# Processes: wc (the file's size, once), tail -f, cat (stdin), and
# docker events (and date) when tf_docker is 1 and docker is installed.
tf_home "$tf_events"
tf_f=$tf_h
mkdir -p "${tf_f%/*}" && : >> "$tf_f" || exit 1
# From the size read now: a line appended after it is in what tail
# prints, however late tail opens the file.
tf_n=$(wc -c < "$tf_f") || exit 1
tail -c +$((tf_n + 1)) -f "$tf_f" &
tf_pids=$!
if [ "$tf_docker" = 1 ] && command -v docker > /dev/null 2>&1; then
	# --since a second back: a container that dies before docker events
	# has subscribed is reported all the same.
	docker events --since "$(($(date +%s) - 1))" --filter "label=taoflow.run=$tf_run" \
		--filter event=die --format '@die {{index .Actor.Attributes "tao-job"}}' 2> /dev/null &
	tf_pids="$tf_pids $!"
fi
echo @ready
cat > /dev/null
# shellcheck disable=SC2086 # a list of pids
kill $tf_pids 2> /dev/null
