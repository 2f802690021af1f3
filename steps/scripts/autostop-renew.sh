# shellcheck shell=sh
# autostop-renew: renews this instance's autostop lease (now, by this
# machine's clock), unless the watchdog is disarmed (its directory gone).
# Prints the watchdog's decision, "@decision EPOCH WHY AGE", when it has
# fired, and "@gone" when it is not there.
# Parameters: tf_dir (the watchdog's directory under $HOME).
d=$HOME/$tf_dir
[ -d "$d" ] || { echo @gone; exit 0; }
if [ -f "$d/decision" ]; then
	tf_v=
	read -r tf_v < "$d/decision"
	echo "@decision $tf_v"
	exit 0
fi
date +%s > "$d/lease"
