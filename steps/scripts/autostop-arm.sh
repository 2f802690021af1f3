# shellcheck shell=sh
# autostop-arm: installs and starts this instance's watchdog (a run's
# autostop, docs/design.md §8.8), replacing one armed before (a resumed
# run): writes the lease (now, by this machine's clock), the watchdog's
# text and its pid under tf_dir, and starts it in a session of its own
# (setsid), detached from this session: it outlives it and taoflow.
# Parameters: tf_dir (the watchdog's directory under $HOME), tf_watchdog
# (the text of autostop-watchdog with its parameters), tf_exit_setsid.
# Needs procfuncs. Prints "armed PID", after "@decision EPOCH WHY AGE"
# when the watchdog armed before had fired (read before it is removed).
d=$HOME/$tf_dir
if ! mkdir -p "$d" || ! chmod 700 "$d"; then echo "cannot create $d" >&2; exit 1; fi
command -v setsid > /dev/null 2>&1 || { echo 'setsid is not installed on the instance (util-linux)' >&2; exit "$tf_exit_setsid"; }
if tf_pid "$d" && tf_group "$tf_p"; then
	kill -TERM -"$tf_p" 2> /dev/null
fi
if [ -f "$d/decision" ]; then
	tf_v=
	read -r tf_v < "$d/decision"
	echo "@decision $tf_v"
fi
rm -f "$d/decision" "$d/pid"
date +%s > "$d/lease" || exit 1
printf '%s\n' "$tf_watchdog" > "$d/watchdog.sh" || exit 1
set +m
setsid sh "$d/watchdog.sh" < /dev/null >> "$d/log" 2>&1 &
tf_p=$!
echo "$tf_p" > "$d/pid" || exit 1
echo "armed $tf_p"
