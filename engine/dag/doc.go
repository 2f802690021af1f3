// Package dag is a small directed graph of string-keyed nodes: dependencies,
// cycle detection and a deterministic topological order.
//
// It owns graph algorithms only, so that the plan checker (cycles among
// steps) and the engine (order among expanded nodes) share one tested
// implementation. It imports only the standard library.
//
// An edge is written Connect(dependent, dependency): dependent needs
// dependency, so dependency comes first in TopoOrder. Every result is
// deterministic and follows the order in which nodes were added (which is
// the plan's file order for its callers), and every algorithm is iterative,
// so a chain of 100,000 nodes cannot exhaust the stack.
package dag
