// Package e2e holds the end-to-end tests: real processes on loopback
// addresses, a real NTP server, and the Talos machinery client as the client.
// They are skipped with -short.
package e2e
