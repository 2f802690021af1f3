// Package testrig starts the real components that taoflow's end-to-end tests
// run against, on this machine and without the internet: a TAO-like trainer
// image built from source (./trainer), a Docker registry v2 with htpasswd
// auth, an S3 server (versitygw) and the AWS CLI, and a single-node Slurm
// cluster (slurm.go). It also checks that a test
// leaves no labelled container or volume behind.
//
// It exists so that tests of steps and cmd/taoflow exercise the same tools a
// user's instance has, instead of mocks, while staying hermetic: every
// server listens on 127.0.0.1, keeps its data in the test's temp directory
// and is stopped by t.Cleanup. All credentials here are fake fixture values.
//
// A missing tool fails the test with "install X (make deps)"; it never
// skips — but for Slurm (slurm-wlm, munge, and root to run its daemons),
// whose tests are skipped with "install slurm-wlm munge (make deps)". The tools are docker (client and a running engine), docker-registry
// and htpasswd (Debian packages docker-registry and apache2-utils), aws
// (Debian awscli) and versitygw (go install).
//
// Test-support code only: nothing outside _test.go files may import it.
package testrig
