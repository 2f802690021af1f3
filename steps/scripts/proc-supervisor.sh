# shellcheck shell=sh
# proc-supervisor: the detached shell that runs a host-process job, in a
# session of its own (proc-submit starts it with setsid; its pid is the
# job's process group). It outlives TERM, runs cmd.sh, and writes rc.
# Parameters: none; $1 is the job directory.
#
# rc is written in one write (no temporary file and mv: no process); a
# reader that finds rc empty while this shell lives reads the job as
# running (proc-status). Then "@end JOB" is appended to ~/.taoflow/events
# in one short O_APPEND write, for a watcher (scripts/watch.sh) to report
# the end at once.
trap : TERM INT HUP
sh "$1/cmd.sh" > "$1/log" 2>&1 < /dev/null
echo "$?" > "$1/rc"
printf '@end %s\n' "${1##*/}" >> "${1%/*/*}/events"
