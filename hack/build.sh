#!/usr/bin/env bash
# The collection artifact Galaxy receives, built from this checkout:
#
#     bash hack/build.sh [DIR]    # writes DIR/awa-operations-VERSION.tar.gz (default DIR: the checkout); prints its path
#
# The guides' RST, which docs/docsite/extra-docs.yml names and antsibull-docs
# reads from an installed collection, is generated from docs/*.md first
# (hack/docs.sh rst; the Markdown is the one source, the RST is not
# committed); then `ansible-galaxy collection build`, and a check that the
# artifact holds every page extra-docs.yml names.
set -euo pipefail

out=$(realpath -m "${1:-.}")
# shellcheck source=hack/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" build

bash hack/docs.sh rst >/dev/null
mkdir -p "$out"
ansible-galaxy collection build --output-path "$out" --force >/dev/null
artifact="$out/awa-operations-$(python -c 'import yaml; print(yaml.safe_load(open("galaxy.yml"))["version"])').tar.gz"
python - "$artifact" <<'PYTHON'
import sys, tarfile, yaml
with tarfile.open(sys.argv[1]) as artifact:
    held = set(artifact.getnames())
extra_docs = yaml.safe_load(open("docs/docsite/extra-docs.yml", encoding="utf-8"))
pages = [entry["ref"] for section in extra_docs["sections"] for entry in section["toctree"]]
missing = [page for page in pages if f"docs/docsite/rst/{page}.rst" not in held]
if missing:
    sys.exit(f"hack/build.sh: {sys.argv[1]} lacks the guides {', '.join(missing)} that docs/docsite/extra-docs.yml names")
PYTHON
echo "$artifact"
