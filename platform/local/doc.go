// Package local is the platform whose instances are private sandbox
// directories on this host.
//
// A local instance is a directory root/<run>/<instance> (mode 0700). It is the
// HOME of every command run on the instance and holds a tmp directory that is
// its TMPDIR, so tools that write under ~ (the Docker CLI's ~/.docker, the
// AWS CLI's ~/.aws, caches) stay inside the sandbox and disappear with it.
// Commands run under /bin/sh in the sandbox, which reads the script on its
// descriptor 3 (argv is the fixed `sh -c ". /dev/fd/3"`, whatever the script's
// size). Containers, when a plan
// has images, use the host's Docker engine (DOCKER_HOST is passed on).
//
// Commands get a clean environment, never taoflow's own: taoflow's
// environment holds the values of the plan's secrets, and a secret must reach
// a command only the way it reaches a remote one — on stdin, exported by the
// script for that one command (docs/design.md §10). Inheriting the environment would
// also make local runs behave unlike ssh and brev runs. Only HOME, TMPDIR,
// PATH, LANG, USER, LOGNAME and DOCKER_HOST are set.
//
// Each command runs in its own process group. Cancelling the context kills
// the whole group, so a background grandchild cannot outlive a cancelled
// step or hold its output pipes open; on Linux the shell also dies with
// taoflow (PR_SET_PDEATHSIG). A command that ends normally may leave detached
// background processes behind, as it could on a remote machine.
package local
