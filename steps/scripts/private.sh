# shellcheck shell=sh
# private: starts every script but the readiness probe (steps.exec). What
# a script creates on the instance (job directories, logs that hold what a
# job printed, copies of container logs, temporary files) is the user's
# alone, and so is ~/.taoflow when an older taoflow made it 0755: it is
# made 0700 once, and a marker file .private says so, so that later
# scripts pay no chmod process.
# Parameters: none.
umask 077
if [ -d "$HOME/.taoflow" ] && [ ! -f "$HOME/.taoflow/.private" ]; then
	chmod go= "$HOME/.taoflow" 2>/dev/null && printf '' > "$HOME/.taoflow/.private"
fi
