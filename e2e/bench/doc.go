// Package bench is Aegis's benchmark harness. It runs the real binaries on
// loopback addresses of 127.7.0.0/16 (a stand-alone trustd and cfssl's own
// signing server per CA key type, then local clusters of machined nodes),
// loads them, and reports latencies (median and p99), rates, ratios to
// references measured in the same run, boot times and memory, measured
// against Aegis's goals.
//
// The report's parts (statistics, tables, JSON, Markdown, goals and their
// SVG chart, drawn with gonum.org/v1/plot) are pure and tested with the
// package; the loads run only from cmd/aegisbench, by `make bench`, never in
// `make test`.
package bench
