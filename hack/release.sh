#!/usr/bin/env bash
# Write a release's changelog (README: Versioning and releases):
#
#     bash hack/release.sh 0.2.0
#
# Needs `version: VERSION` in galaxy.yml and changelogs/fragments/VERSION.yml
# with a release_summary. antsibull-changelog then moves every fragment into
# changelogs/changelog.yaml and writes CHANGELOG.md. Review, commit and tag.
set -euo pipefail

version=${1:?"usage: bash hack/release.sh VERSION"}
# shellcheck source=hack/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" release

grep -qx "version: $version" galaxy.yml \
    || { echo "galaxy.yml does not say 'version: $version': set it first" >&2; exit 1; }
grep -qs '^release_summary:' "changelogs/fragments/$version.yml" \
    || { echo "changelogs/fragments/$version.yml needs a release_summary: add it first" >&2; exit 1; }
antsibull-changelog lint
antsibull-changelog release --version "$version"
echo "CHANGELOG.md and changelogs/changelog.yaml now hold $version: review them, commit, and tag $version."
