#!/usr/bin/env bash
# The collection's docs site: the plugin and role docs rendered by antsibull-docs
# with the guides of docs/ (docs/docsite/extra-docs.yml), built by Sphinx.
#
#     bash hack/docs.sh build   # build the site into docs-site/ (open docs-site/build/html/index.html)
#     bash hack/docs.sh check   # what hack/test.sh docs runs: antsibull-docs lint-collection-docs
#                               # --plugin-docs, and a site build without warnings
#     bash hack/docs.sh rst     # only write docs/docsite/rst/ (build, check and hack/build.sh do it first)
#
# docs/*.md are the one source of each guide (GitHub and Galaxy show them).
# antsibull-docs reads only RST, from docs/docsite/rst/ of the collection
# (docs/docsite/extra-docs.yml names the pages), so that folder is generated
# from them with pandoc (hack/md_to_rst.lua) whenever the site or the artifact
# is built, and is not committed (.gitignore). Everything runs offline.
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
            echo "..  Generated from docs/$page.md by hack/docs.sh: edit that file, not this one."
            echo
            echo ".. _ansible_collections.awa.operations.docsite.$page:"
            echo
            # Without auto_identifiers: antsibull-docs allows only labels with the collection's prefix.
            "$pandoc" --from gfm-gfm_auto_identifiers --to rst --wrap=preserve --lua-filter hack/md_to_rst.lua "$source"
        } > "$out/$page.rst"
    done
}

# The guides as the collection carries them: docs/docsite/rst/ written afresh.
generate_rst() {
    rm -rf "$rst_dir"
    write_rst "$rst_dir"
}

# ansible_inventory FILE: an intersphinx inventory of the Ansible docs pages the
# generated docs link to (the docsite pages antsibull-docs' templates name and
# every ansible.builtin module), so their links resolve without the network.
ansible_inventory() {
    python - "$1" <<'PYTHON'
import json, subprocess, sys, zlib
labels = {
    "action_plugins": ("plugins/action.html", "Action plugins"),
    "ansible_configuration_settings": ("reference_appendices/config.html", "Ansible Configuration Settings"),
    "common_return_values": ("reference_appendices/common_return_values.html", "Return Values"),
}
listed = subprocess.run(["ansible-doc", "--list", "--json", "-t", "module", "ansible.builtin"],
                        check=True, capture_output=True, text=True).stdout
for fqcn in json.loads(listed):
    labels[f"ansible_collections.{fqcn}_module"] = (
        f"collections/ansible/builtin/{fqcn.rsplit('.', 1)[1]}_module.html", f"{fqcn} module")
entries = "".join(f"{label} std:label -1 {uri} {title}\n" for label, (uri, title) in sorted(labels.items()))
header = "# Sphinx inventory version 2\n# Project: Ansible\n# Version: devel\n# The remainder of this file is compressed using zlib.\n"
with open(sys.argv[1], "wb") as inventory:
    inventory.write(header.encode() + zlib.compress(entries.encode()))
PYTHON
}

# build_site DEST: the site template antsibull-docs sphinx-init writes, built by
# its build.sh (antsibull-docs, then sphinx-build -W: a warning fails). The
# template's intersphinx inventories are on the internet; this build is
# offline, so the Ansible docs links resolve through ansible_inventory.
build_site() {
    local dest=$1
    rm -rf "$dest"
    mkdir -m 0755 "$dest"  # sphinx-init wants a folder only its owner may write to
    antsibull-docs sphinx-init --use-current --squash-hierarchy --fail-on-error \
        --title "awa.operations" --dest-dir "$dest" awa.operations >/dev/null
    ansible_inventory "$dest/ansible_devel.inv"
    sed -i '/^intersphinx_mapping = {/,/^}/d' "$dest/conf.py"
    cat >> "$dest/conf.py" <<PYTHON
intersphinx_mapping = {
    'ansible_devel': ('https://docs.ansible.com/projects/ansible/devel/', '$dest/ansible_devel.inv'),
}
PYTHON
    bash "$dest/build.sh"
}

case "$mode" in
    rst)
        generate_rst
        echo "wrote $rst_dir from docs/*.md"
        ;;
    build)
        generate_rst
        build_site "$root/docs-site"
        echo "open $root/docs-site/build/html/index.html"
        ;;
    check)
        generate_rst
        antsibull-docs lint-collection-docs --plugin-docs "$root"
        build_site "$work/docs-site" > "$work/docs-site.log" 2>&1 || { cat "$work/docs-site.log"; exit 1; }
        echo "docs site built without warnings ($(find "$work/docs-site/build/html" -name '*.html' | wc -l) pages)"
        ;;
    *) echo "usage: bash hack/docs.sh rst|build|check" >&2; exit 2 ;;
esac
