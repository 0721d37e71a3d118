package main

import "time"

// Limits and timings of the node commands, in one place.
const (
	// renewTimeout bounds a renewal of the client certificate: a signature
	// on a control plane takes milliseconds, so a renewal that takes longer
	// is failing, and the command it runs before should not wait on it.
	renewTimeout = 30 * time.Second

	// completionTimeout bounds the call a shell completion makes (the
	// service IDs of the nodes): a person is waiting at the prompt, and a
	// node that does not answer at once gets the static list instead.
	completionTimeout = 2 * time.Second

	// tableBuffer is the buffer between a table and its output: a row of
	// a table is about a hundred bytes, so 64 KiB writes some 600 rows in
	// one system call.
	tableBuffer = 64 << 10
)
