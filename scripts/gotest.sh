#!/usr/bin/env bash
# Runs `go test` with the arguments given, its whole output kept in the file
# named by TEST_LOG, and, when it fails, ends with a short summary: the failed
# tests and the first line of each message they logged. The end-to-end tests
# print the nodes' last log lines when they fail; without the summary the
# failures' own messages scroll far above the end of the output.
set -uo pipefail

log=${TEST_LOG:?TEST_LOG names the file the whole output goes to}
mkdir -p "$(dirname "$log")"

"${GO:-go}" test "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

if [ "$rc" -ne 0 ]; then
	echo
	echo "=== go test failed (exit $rc); the failures, from the whole output in $log:"
	grep -E -e '^[[:space:]]*--- FAIL' -e '^[[:space:]]+[[:alnum:]_]+_test\.go:[0-9]+: ' -e '^(FAIL|panic:|fatal error:)' "$log" |
		cut -c1-400 | tail -n 60
fi

exit "$rc"
