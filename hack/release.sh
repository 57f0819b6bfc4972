#!/usr/bin/env bash
# Make a release (CONTRIBUTING.md: Make a release):
#
#     bash hack/release.sh 0.4.0
#
# Needs `version: VERSION` in galaxy.yml (main names the next version once a
# release is out), changelogs/fragments/VERSION.yml with a release_summary,
# the releases before it recorded as they should be (hack/release_record.py),
# and nothing else changed in the working tree (the release commit holds
# exactly what was tested). antsibull-changelog moves every fragment into
# changelogs/changelog.yaml with today's date (UTC) and writes CHANGELOG.md;
# the README and the install guides name VERSION (hack/release_docs.py: the
# range to install, the image tags, the list of releases); this commits
# galaxy.yml, changelogs/, CHANGELOG.md and those docs as "Release VERSION" -
# the line every clone finds the release by - and tags that commit vVERSION
# (annotated, for the push). Then it commits galaxy.yml naming the next minor
# version, and the README saying so, so an artifact built from main never
# calls itself a release. Nothing
# is pushed: review with `git log -2 -p`, then push the commits and the tag. To
# undo before pushing: git tag -d vVERSION && git reset --hard HEAD~2.
set -euo pipefail

version=${1:?"usage: bash hack/release.sh VERSION"}
# shellcheck source=hack/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" release

tag="v$version"
release_paths=(galaxy.yml CHANGELOG.md changelogs)
refuse() { echo "hack/release.sh: $*; nothing was changed" >&2; exit 1; }

grep -qx "version: $version" galaxy.yml || refuse "galaxy.yml does not say 'version: $version': set it first"
grep -qs '^release_summary:' "changelogs/fragments/$version.yml" \
    || refuse "changelogs/fragments/$version.yml needs a release_summary: add it first"
git rev-parse -q --verify "refs/tags/$tag" >/dev/null && refuse "the tag $tag exists already"
python hack/release_record.py >/dev/null || refuse "the releases before $version are not recorded as they should be (above)"
others=$(git status --porcelain --untracked-files=all -- . "${release_paths[@]/#/:!}")
[ -z "$others" ] || refuse "the working tree has changes outside ${release_paths[*]} (commit or stash them, so the release
commit holds what was tested):
$others"

antsibull-changelog lint
date=$(date -u +%Y-%m-%d)
antsibull-changelog release --version "$version" --date "$date"
mapfile -t docs < <(python hack/release_docs.py released "$version")
git add -A -- "${release_paths[@]}" "${docs[@]}"
git commit -q -m "Release $version" -- "${release_paths[@]}" "${docs[@]}"
# The release date is the release commit's date (UTC), as changelogs/changelog.yaml says.
committed=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%d)
if [ "$committed" != "$date" ]; then
    echo "hack/release.sh: the release commit is dated $committed, the changelog $date (midnight UTC passed): no tag" \
         "was made; undo with git reset --hard HEAD~1 and run it again" >&2
    exit 1
fi
python hack/release_record.py >/dev/null   # the release as every clone will see it, before the tag
git tag -a "$tag" -m "awa.operations $version"

# main names the next version from now on (a patch release instead: set it by hand before releasing).
IFS=. read -r major minor _ <<<"$version"
next="$major.$((minor + 1)).0"
sed -i "s/^version: $version\$/version: $next/" galaxy.yml
mapfile -t docs < <(python hack/release_docs.py next "$next")
git commit -q -m "galaxy.yml names the next version, $next ($version is released)" -- galaxy.yml "${docs[@]}"
echo "Released $version: commit $(git rev-parse --short "$tag^{commit}") 'Release $version', tag $tag; then galaxy.yml" \
     "says $next. Review (git log -2 -p), push the commits and the tag (git push origin HEAD $tag), and publish" \
     "the artifact of the tag (CONTRIBUTING.md: Make a release)."
