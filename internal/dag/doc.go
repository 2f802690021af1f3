// Package dag is a small directed graph of string-keyed nodes and the
// dependency cycles in it.
//
// The plan checker uses it to report cycles among steps. It imports only
// the standard library.
//
// An edge is written Connect(dependent, dependency): dependent needs
// dependency. Every result is deterministic and follows the order in which
// nodes were added (the plan's file order for its caller), and every
// algorithm is iterative, so a chain of 100,000 nodes cannot exhaust the
// stack.
package dag
