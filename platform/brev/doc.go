// Package brev is the platform whose instances are NVIDIA Brev GPU
// instances, driven through the brev CLI.
//
// The CLI is the only interface: every lifecycle step is one run of it —
// `brev create --type T --detached`, `brev ls --json`, `brev refresh`,
// `brev delete`, `brev stop` — and the package copes with its habits
// (docs/design.md §6.1):
//
//   - brev reads instance names from stdin whenever stdin is not a terminal
//     or /dev/null, and waits for EOF. Every run gets /dev/null, and every
//     name follows "--", so none is read as a flag.
//   - brev exits 1 on every error, so failures are told apart by their text
//     ("not found", "duplicate workspace", "Connection failed"). Its
//     spinner writes "\r" frames to stderr even without a terminal, so
//     stderr is split on "\r" as on "\n".
//   - brev starts bash, ssh and ssh masters of its own. Every run has its
//     own process group, which is killed on cancel and on Config.CallTimeout.
//   - `brev create` can fail after the instance was made (an orphan), and
//     can report success for an instance that never becomes ready. So after
//     any failure Create looks the name up and deletes what it finds, and
//     readiness is decided by taoflow: status RUNNING in `ls --json` (build
//     and shell status are advisory and can stick), then `brev refresh`
//     (one at a time: concurrent runs rewrite the same file), then
//     `echo ok` through the transport.
//   - `brev delete` of a name that is gone fails with "not found", which
//     counts as deleted; a delete returns before the instance is gone, so
//     Delete waits until `ls` shows it DELETING or no more.
//
// The instances a run creates are named InstanceName(run, instance),
// "tf-<run>-<instance>", so that leftovers can be found by name even
// without taoflow's state. Instances given as existing are used and never
// created, started, stopped or deleted.
//
// Commands reach an instance in one of two ways. The default, transport
// ssh, runs OpenSSH (package platform/ssh) against the alias that `brev
// refresh` writes, with brev's ssh config file: real exit codes, stdin for
// secrets, one multiplexed connection per instance. Transport exec uses
// `brev exec`, which cannot pass stdin, reports only 0 or 1, prints the
// instance name after the output, and runs a command a second time when it
// exits non-zero; the script is wrapped so that the remote side always
// exits 0 and reports the script's exit code in-band after a per-call
// nonce, which Exec takes back off the output.
package brev
