#!/bin/sh
# Tests Aegis's version-skew policy (internal/version/skew.go) with two real
# builds: the node binaries of SKEW_FROM, the previous release, built once
# into _out/skew/<commit>/bin, and this tree's `make build` in NEW_BIN. Then
# runs the end-to-end test TestSkew (e2e/skew_test.go, build tag skew) on a
# mixed cluster of the two. `make skew` calls it with NEW_BIN and
# NEW_VERSION set; it fails, never skips, when SKEW_FROM cannot be built.
#
#   SKEW_FROM    the git ref of the previous release; empty: the newest
#                tag v* reachable from HEAD (not one on HEAD itself), else
#                HEAD^1, the previous commit on the first-parent line
#   NEW_BIN      the current build (`make build`'s bin: the node binaries,
#                aegisctl and images/), stamped NEW_VERSION
#   NEW_VERSION  the current build's version (scripts/version.sh)
#   GO           the go command; SKEW_TIMEOUT bounds the test (20m)
#   SKEW_KEEP    how many builds of previous releases _out/skew keeps, the
#                one just used and those used last (2; each about 150 MB)
set -eu

GO=${GO:-go}
top=$(pwd)
OUT=_out/skew
SKEW_TIMEOUT=${SKEW_TIMEOUT:-20m}
SKEW_KEEP=${SKEW_KEEP:-2}
: "${NEW_BIN:?make skew: NEW_BIN, the current build, is not set}"
: "${NEW_VERSION:?make skew: NEW_VERSION, the current build version, is not set}"

fail() {
	echo "make skew: $*" >&2
	exit 1
}

# The previous release: SKEW_FROM, the newest v* tag before HEAD, or HEAD^1.
ref=${SKEW_FROM:-}
why="SKEW_FROM=$ref, as given"
if [ -z "$ref" ]; then
	exclude=
	for t in $(git tag --points-at HEAD 'v*'); do
		exclude="$exclude --exclude $t"
	done
	# shellcheck disable=SC2086 # exclude is a list of flags
	if ref=$(git describe --tags --abbrev=0 --match 'v*' $exclude HEAD 2>/dev/null); then
		why="the newest v* tag reachable from HEAD"
	else
		ref=HEAD^1
		why="no v* tag is reachable from HEAD: the previous commit on the first-parent line"
	fi
fi

commit=$(git rev-parse --verify --quiet "$ref^{commit}") ||
	fail "SKEW_FROM: $ref is not a commit of this clone (a shallow clone, or no history?);" \
		"fetch the history (git fetch --unshallow --tags) or set SKEW_FROM to a commit it has"
short=$(printf '%s' "$commit" | cut -c1-12)

# A release tag is stamped as itself; any other commit as the minor before
# the current build's, patch = the commit's depth, the commit as build
# metadata, so that version.CheckUpgrade takes it to NEW_VERSION.
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$'
stamp=
for t in $(git tag --points-at "$commit" 'v*'); do
	if printf '%s\n' "$t" | grep -Eq "$semver"; then
		stamp=$t
		break
	fi
done
if [ -z "$stamp" ]; then
	major=$(printf '%s' "$NEW_VERSION" | sed -E 's/^v([0-9]+)\.([0-9]+)\..*/\1/')
	minor=$(printf '%s' "$NEW_VERSION" | sed -E 's/^v([0-9]+)\.([0-9]+)\..*/\2/')
	case "$minor" in
	'' | *[!0-9]*) fail "NEW_VERSION $NEW_VERSION is not vMAJOR.MINOR.PATCH" ;;
	0) fail "the current build is $NEW_VERSION, minor 0: there is no previous minor to stamp $short with; set SKEW_FROM to the previous release's tag" ;;
	esac
	stamp="v$major.$((minor - 1)).$(git rev-list --count "$commit")+g$short"
fi

echo "make skew: previous release $ref = $short ($why), stamped $stamp; current build $NEW_VERSION in $NEW_BIN"

old=$OUT/$commit/bin
if [ -x "$old/machined" ] && [ "$(cat "$old/.stamp" 2>/dev/null)" = "$stamp" ]; then
	echo "make skew: $short already built in $old"
else
	began=$(date +%s)
	src=$OUT/src-$short
	# A run that was cut short may have left its worktree behind.
	git worktree remove --force "$src" 2>/dev/null || true
	rm -rf "$old.tmp" "$src"
	mkdir -p "$old.tmp"
	git worktree add --quiet --force --detach "$src" "$commit"
	trap 'git worktree remove --force "$src" 2>/dev/null || true' EXIT
	for name in machined apid trustd etcd; do
		(cd "$src" && CGO_ENABLED=0 "$GO" build -ldflags \
			"-X github.com/aegis-os/aegis/internal/version.Tag=$stamp -X github.com/aegis-os/aegis/internal/version.Commit=$commit" \
			-o "$top/$old.tmp/$name" "./cmd/$name") || fail "building $name of $short ($ref) failed"
	done
	printf '%s\n' "$stamp" >"$old.tmp/.stamp"
	git worktree remove --force "$src"
	trap - EXIT
	rm -rf "$old"
	mv "$old.tmp" "$old"
	echo "make skew: built $short into $old in $(($(date +%s) - began)) s"
fi

# The build used now is the newest; those beyond SKEW_KEEP, by last use, go.
touch "$OUT/$commit"
case "$SKEW_KEEP" in
'' | *[!0-9]* | 0) fail "SKEW_KEEP=$SKEW_KEEP: give how many builds to keep, 1 or more" ;;
esac
# shellcheck disable=SC2012 # the names are commit hashes: no odd characters
ls -1t "$OUT" | grep -E '^[0-9a-f]{40}$' | tail -n +"$((SKEW_KEEP + 1))" | while read -r gone; do
	echo "make skew: removing the build of ${gone%"${gone#????????????}"} (SKEW_KEEP=$SKEW_KEEP)"
	rm -rf "${OUT:?}/$gone"
done

AEGIS_SKEW_OLD_BIN=$(cd "$old" && pwd) AEGIS_SKEW_OLD_VERSION=$stamp \
	AEGIS_SKEW_NEW_BIN=$(cd "$NEW_BIN" && pwd) AEGIS_SKEW_NEW_VERSION=$NEW_VERSION \
	"$GO" test -tags skew -count=1 -run '^TestSkew$' -v -timeout "$SKEW_TIMEOUT" ./e2e
