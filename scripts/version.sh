#!/bin/sh
# Prints the version `make build` stamps into Aegis's binaries, always a
# valid semantic version (internal/version.Semver would mend any other):
#
#   on a commit tagged vX.Y.Z[-PRE]       vX.Y.Z[-PRE]
#   N commits after the nearest such tag  vX.Y.Z[-PRE]+N.g<commit>
#   no such tag                           v0.1.0-dev+g<commit>
#   no git, or not a git work tree        v0.1.0-dev
#
# Changes to tracked files add "dirty" to the build metadata
# (v0.2.0+g<commit>.dirty on a tagged commit). Semver ignores build
# metadata when it compares, so a build after a tag compares equal to it.
# <commit> is the commit's first 12 hex digits.
set -u

dev=v0.1.0-dev
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$'

commit=$(git rev-parse --short=12 HEAD 2>/dev/null) || { echo "$dev"; exit 0; }

dirty=
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	dirty=.dirty
fi

# The nearest semver tag: tags that only start like one (v1.2,
# v1.2.3+meta) are passed over.
tag=
exclude=
while t=$(git describe --tags --abbrev=0 --match 'v[0-9]*' $exclude 2>/dev/null); do
	if printf '%s\n' "$t" | grep -Eq "$semver"; then
		tag=$t
		break
	fi
	exclude="$exclude --exclude $t"
done

if [ -z "$tag" ]; then
	echo "$dev+g$commit$dirty"
	exit 0
fi

n=$(git rev-list --count "$tag..HEAD")
case "$n$dirty" in
0) echo "$tag" ;;
0.dirty) echo "$tag+g$commit$dirty" ;;
*) echo "$tag+$n.g$commit$dirty" ;;
esac
