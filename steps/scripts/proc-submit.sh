# shellcheck shell=sh
# proc-submit: launches a host-process job, or adopts the job of that id
# if its directory exists (a retry or a resume never launches twice).
# Parameters: tf_jobs (the jobs directory under $HOME), tf_job (the job
# id), tf_run (the run id), tf_instance (the plan's instance), tf_cmd
# (the command, written to cmd.sh), tf_workdir ("" is $HOME; may start
# with ~/), tf_workdir_msg (the error when it does not exist),
# tf_supervisor (the text of proc-supervisor), tf_exit_jobdir,
# tf_exit_workdir, tf_exit_setsid (exit codes), tf_now (the launch time,
# Unix seconds, by taoflow's clock: proc-status reads ages by the same
# clock, so the instance's own never matters and no date runs).
# Needs procfuncs and home. Prints "launched PID" or "adopted PID".
#
# Processes: mkdir (the job directory), setsid and the
# supervisor's sh, and sh cmd.sh; mkdir -p only for the first job.
tf_dir=$HOME/$tf_jobs
d=$tf_dir/$tf_job
[ -d "$tf_dir" ] || mkdir -p "$tf_dir" || { echo "cannot create $tf_dir" >&2; exit "$tf_exit_jobdir"; }
if ! mkdir "$d" 2>/dev/null; then
	[ -d "$d" ] || { echo "cannot create the job directory $d" >&2; exit "$tf_exit_jobdir"; }
	i=0
	while ! tf_pid "$d" && [ ! -f "$d/rc" ] && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	if tf_pid "$d" || [ -f "$d/rc" ]; then echo "adopted $tf_p"; exit 0; fi
	rm -f "$d/log" "$d/started" "$d/canceled"
fi
printf %s "$tf_run" > "$d/run" || exit "$tf_exit_jobdir"
# The plan instance it runs for: two plan instances can be one machine
# (two ssh aliases of one box), and cleanup stops only its own.
printf %s "$tf_instance" > "$d/instance" || exit "$tf_exit_jobdir"
printf '%s\n' "$tf_cmd" > "$d/cmd.sh" || exit "$tf_exit_jobdir"
if [ -n "$tf_workdir" ]; then tf_home "$tf_workdir"; else tf_h=$HOME; fi
cd "$tf_h" 2>/dev/null || { printf '%s\n' "$tf_workdir_msg" >&2; rm -rf "$d"; exit "$tf_exit_workdir"; }
command -v setsid >/dev/null 2>&1 || { echo 'setsid is not installed on the instance (util-linux)' >&2; rm -rf "$d"; exit "$tf_exit_setsid"; }
printf '' > "$d/log" || exit "$tf_exit_jobdir"
echo "$tf_now" > "$d/started" || exit "$tf_exit_jobdir"
# Without job control (set +m) a background child is never a process
# group leader, so setsid needs no fork of its own and execs the
# supervisor in the child: $! is the supervisor's pid and its group.
set +m
setsid sh -c "$tf_supervisor" taoflow-job "$d" < /dev/null > /dev/null 2>&1 &
tf_p=$!
echo "$tf_p" > "$d/pid" || exit "$tf_exit_jobdir"
echo "launched $tf_p"
