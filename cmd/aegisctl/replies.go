package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"google.golang.org/protobuf/proto"

	"github.com/aegis-os/aegis/internal/replies"
)

// Every reply of the Talos API and of Aegis's own services is
//
//	message XResponse { repeated X messages = 1; }
//	message X { common.Metadata metadata = 1; ... }
//
// and in a fan-out each X names its node in its metadata, with the node's
// error when it failed. A node that failed is an error row of its own;
// the others are printed as usual.

// nodeFailure is one node that answered with an error.
type nodeFailure struct {
	node string
	text string
}

// failureOf returns the failure recorded in md, or nil.
func failureOf(md *common.Metadata) *nodeFailure {
	text, failed := replies.Failure(md)
	if !failed {
		return nil
	}

	return &nodeFailure{node: md.GetHostname(), text: text}
}

// failuresOf lists the failed nodes of a reply that follows the messages
// convention; any other message has none.
func failuresOf(resp proto.Message) []nodeFailure {
	var out []nodeFailure

	for _, m := range replies.Messages(resp) {
		if f := failureOf(replies.Metadata(m)); f != nil {
			out = append(out, *f)
		}
	}

	return out
}

// partialError is the error of a command some of whose nodes failed; the
// output already shows each of them.
type partialError struct {
	failed []nodeFailure
	total  int
}

// Error names the failed nodes; the one node of a command that named none
// is the endpoint's, and its error is the command's.
func (e *partialError) Error() string {
	if len(e.failed) == 1 && e.failed[0].node == "" {
		return e.failed[0].text
	}

	names := make([]string, len(e.failed))
	for i, f := range e.failed {
		names[i] = f.node
	}

	return fmt.Sprintf("%d of %d %s failed: %s", len(e.failed), e.total, plural(e.total, "node", "nodes"), strings.Join(names, ", "))
}

// failedNodes returns a *partialError when some node of resp failed, nil
// otherwise.
func failedNodes(resp proto.Message) error {
	failed := failuresOf(resp)
	if len(failed) == 0 {
		return nil
	}

	return &partialError{failed: failed, total: countNodes(resp)}
}

// countNodes counts the distinct nodes that answered in resp, at least one.
func countNodes(resp proto.Message) int {
	seen := map[string]bool{}
	for _, m := range replies.Messages(resp) {
		seen[replies.Metadata(m).GetHostname()] = true
	}

	return max(len(seen), 1)
}

// nodeLabel is the name of the node a message came from: its metadata's,
// else the endpoint that answered.
func nodeLabel(md *common.Metadata, fallback string) string {
	if h := md.GetHostname(); h != "" {
		return h
	}

	return fallback
}

// errorRow prints a failed node's row of a table: its name, then the error
// in the next column, unaligned, so a long message widens nothing.
func errorRow(w io.Writer, f *nodeFailure) {
	fmt.Fprintf(w, "%s\terror: %s\n", f.node, f.text)
}

// eachNode calls row with the reply of each node in msgs that succeeded;
// a node that failed is an error row of its own.
func eachNode[M metadataReply](w io.Writer, msgs []M, row func(M)) {
	for _, m := range msgs {
		if f := failureOf(m.GetMetadata()); f != nil {
			errorRow(w, f)

			continue
		}

		row(m)
	}
}
