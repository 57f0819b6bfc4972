#!/usr/bin/env bash
# The collection's docs site: the plugin and role docs rendered by antsibull-docs
# with the guides of docs/ (docs/docsite/extra-docs.yml), built by Sphinx.
#
#     bash hack/docs.sh rst     # after editing docs/*.md: regenerate docs/docsite/rst/
#     bash hack/docs.sh build   # build the site into docs-site/ (open docs-site/html/index.html)
#     bash hack/docs.sh check   # what hack/test.sh docs runs: rst up to date, antsibull-docs
#                               # lint-collection-docs --plugin-docs, a site build without warnings
#
# docs/*.md are the source (GitHub and Galaxy show them); docs/docsite/rst/*.rst
# are generated from them with pandoc (hack/md_to_rst.lua) for antsibull-docs,
# which reads only RST. Everything runs offline.
set -euo pipefail

mode=${1:-check}
# shellcheck source=hack/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" docs

rst_dir=docs/docsite/rst

# write_rst DIR: docs/*.md as RST into DIR.
write_rst() {
    local out=$1 pandoc source page
    pandoc=$(python -c 'import pypandoc; print(pypandoc.get_pandoc_path())')
    mkdir -p "$out"
    for source in docs/*.md; do
        page=$(basename "$source" .md)
        {
            echo "..  Generated from docs/$page.md by hack/docs.sh rst: edit that file, not this one."
            echo
            echo ".. _ansible_collections.awa.operations.docsite.$page:"
            echo
            # Without auto_identifiers: antsibull-docs allows only labels with the collection's prefix.
            "$pandoc" --from gfm-gfm_auto_identifiers --to rst --wrap=preserve --lua-filter hack/md_to_rst.lua "$source"
        } > "$out/$page.rst"
    done
}

check_rst_current() {
    write_rst "$work/rst"
    if ! diff -ru "$rst_dir" "$work/rst"; then
        echo "docs/docsite/rst/ is not generated from the current docs/*.md: run bash hack/docs.sh rst"
        return 1
    fi
}

# build_site DEST [sphinx-build options]: sphinx-init's template, with no
# intersphinx (no network here), then antsibull-docs and Sphinx.
build_site() {
    local dest=$1; shift
    rm -rf "$dest"
    antsibull-docs sphinx-init --use-current --squash-hierarchy --fail-on-error \
        --title "awa.operations" --dest-dir "$dest" awa.operations >/dev/null
    # The template's intersphinx inventories live on the internet; this build is offline.
    sed -i '/^intersphinx_mapping/,/^}/d' "$dest/conf.py"
    echo "intersphinx_mapping = {}" >> "$dest/conf.py"
    antsibull-docs collection --use-current --squash-hierarchy --fail-on-error \
        --dest-dir "$dest/rst" awa.operations
    sphinx-build -M html "$dest/rst" "$dest/build" -c "$dest" "$@"
}

case "$mode" in
    rst)
        rm -rf "$rst_dir"
        write_rst "$rst_dir"
        echo "wrote $rst_dir from docs/*.md"
        ;;
    build)
        build_site "$root/docs-site"
        echo "open $root/docs-site/build/html/index.html"
        ;;
    check)
        check_rst_current
        antsibull-docs lint-collection-docs --plugin-docs "$root"
        build_site "$work/docs-site" -W --keep-going -q
        echo "docs site built without warnings"
        ;;
    *) echo "usage: bash hack/docs.sh rst|build|check" >&2; exit 2 ;;
esac
