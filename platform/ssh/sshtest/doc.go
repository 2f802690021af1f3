// Package sshtest starts a real OpenSSH server for tests.
//
// Tests of anything that talks ssh — the ssh platform, the brev platform's
// ssh transport, steps that copy files with scp — need a server that behaves
// like the machines taoflow reaches: real key exchange, real MaxSessions,
// real exit codes and signals. A mock would hide exactly the behaviour those
// tests exist to check, so Start runs /usr/sbin/sshd on 127.0.0.1 with a
// fresh host key and a fresh client key in a temporary directory, and writes
// an ssh_config that reaches it as the alias "tf-test". Every accepted
// public-key login is logged, so a test can count real handshakes.
//
// The server logs in as the user running the test (root in CI, hence
// PermitRootLogin prohibit-password). sshd must be installed: a machine
// without it fails the test with the command that installs it, never skips.
package sshtest
