// Package secret keeps secret values out of everything taoflow shows or
// stores: it resolves the plan's secret names from taoflow's environment,
// redacts their values (and the encoded forms a tool may print) from any
// output, and lints literals that look like keys before they reach a plan
// or a command line.
//
// It owns these three jobs together because they share one notion of what
// a secret looks like. It imports only the standard library, so any
// package that writes output can depend on it.
//
// Redaction is substring replacement, as in CI log masking: it catches the
// exact value and its common encodings (base64 in four alphabets and at
// any alignment inside a longer base64 string, hex, JSON and URL escaping,
// each line of a multi-line value), not transformations such as base32 or
// hashing. Values shorter than MinRedactLen bytes are not redacted at all:
// masking every "abc" in a log would both ruin the log and reveal where the
// secret occurs.
package secret
