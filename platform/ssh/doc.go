// Package ssh is the platform whose instances are machines reached with the
// OpenSSH client.
//
// An instance's Ref is an ssh destination: "user@host:port", "user@host",
// "host", "[v6addr]:port" or an alias from the ssh config file. Each command
// is one run of the ssh binary; everything OpenSSH users rely on (ssh_config,
// agents, ProxyJump, known_hosts) keeps working, and nothing here speaks the
// protocol itself.
//
// One handshake per instance. A fresh ssh connection costs a TCP handshake,
// key exchange and authentication — hundreds of milliseconds to seconds — so
// commands share one master connection per instance (ControlMaster,
// ControlPath in a private 0700 directory, ControlPersist). The first command
// on an instance starts the master while the others wait for it, so a burst
// of commands makes one handshake, not one each. sshd refuses more than
// MaxSessions (default 10) sessions on one connection with "administratively
// prohibited", so Exec runs at most Config.MaxSessions (default 8) commands
// per instance at once and queues the rest. Close asks every master to exit
// and removes the directory.
//
// Scripts travel on stdin, not on a command line (where the kernel caps
// one argument at 128 KiB). The remote command is a fixed wrapper told the
// script's length; ssh's stdin is the script and then the job's stdin. The
// wrapper copies exactly that many bytes into a private file (O_EXCL, 0600,
// under $TMPDIR), with one read(2) at a time of at most the bytes still
// missing, so not one byte of the job's stdin is taken; it opens the file,
// removes it, and has /bin/sh source it (platform.ScriptCommand). If stdin
// ends before the script has come whole, nothing runs and Exec returns a
// transient ExecError wrapping platform.ErrScriptShort.
//
// Exit codes are the remote ones. The script runs under /bin/sh in
// a small remote wrapper that reports, on stderr, a line when it starts and a
// line with the script's exit status when it ends; Exec removes both lines
// from Stderr. They let Exec tell ssh's own failure (exit 255 before the
// wrapper started: the connection or the login failed, and trying again is
// safe) from a script that exited 255, from a script killed by a signal
// (128+N, as a shell reports it; ssh itself would say 255) and from a
// connection lost while the script ran (which is not safe to retry blindly).
//
// Cancelling kills the remote command too. Without a terminal, sshd does not
// signal a command whose client went away: it runs on. So the wrapper records
// its process id — which is its session id, because sshd starts every session
// with setsid — in a file named after a random nonce under the remote
// $TMPDIR, created with O_EXCL. On cancel, Exec kills the local ssh and then,
// over the master connection, runs a second short command that creates the
// same file with O_EXCL: if that fails, the file holds the wrapper's session
// id and the whole session is killed (pkill -s, and kill of the process
// group); if it succeeds, the wrapper had not started yet, and a wrapper that
// starts later finds the file, removes it and exits without running the
// script. So a command cancelled at any moment is either killed or never
// runs. Processes that leave the session on purpose (setsid, nohup with
// setsid, docker containers) survive, as they would a local cancel.
//
// Secrets reach the remote command only on stdin. Exec never puts anything
// but the fixed wrapper and the script's length on an argv, and the ssh client gets a clean environment
// (HOME, USER, LOGNAME, PATH, SSH_AUTH_SOCK, KRB5CCNAME), not taoflow's,
// which holds the values of the plan's secrets (docs/design.md §10). The remote login
// shell must be a POSIX shell (sh, bash, dash, ksh, zsh).
package ssh
