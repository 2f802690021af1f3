# shellcheck shell=sh
# proc-cleanup: stops every job of a run on this instance: those whose
# directory name starts with tf_prefix, whose run file (where there is
# one) names tf_run, and whose instance file (where there is one) names
# tf_instance (two plan instances can be one machine). With tf_remove=1
# it then removes their job directories (their logs hold whatever the
# jobs printed, secrets included).
# Parameters: tf_jobs (the jobs directory under $HOME), tf_prefix, tf_run,
# tf_instance, tf_remove (1 or 0).
# Needs procfuncs.
set --
for d in "$HOME/$tf_jobs/$tf_prefix"*; do
	[ -d "$d" ] || continue
	if [ -f "$d/run" ]; then
		tf_v=
		IFS= read -r tf_v 2>/dev/null < "$d/run"
		[ "$tf_v" = "$tf_run" ] || continue
	fi
	if [ -f "$d/instance" ]; then
		tf_v=
		IFS= read -r tf_v 2>/dev/null < "$d/instance"
		[ "$tf_v" = "$tf_instance" ] || continue
	fi
	tf_term "$d"
	set -- "$@" "$d"
done
tf_reap
if [ "$tf_remove" = 1 ] && [ "$#" -gt 0 ]; then rm -rf -- "$@"; fi
