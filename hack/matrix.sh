# The tested matrix, sourced by hack/bootstrap.sh and hack/env.sh (the README's
# "Supported versions" table says the same; change both together).
# shellcheck shell=bash disable=SC2034

# ansible-core releases, newest first. The newest is the project venv's
# (.venv: the demo, molecule, the functional tests and every tool); the others
# live in .venvs/core-X.Y.
matrix_cores=(2.21 2.20 2.19 2.18 2.17 2.16)

# The next ansible-core, on its newest pre-release: ansible-test (sanity,
# units, integration) runs on it beside the cores above, so a release can say
# it is tested on it the day it ships. Its venv is .venvs/core-X.Y; the
# project venv, the demo, molecule and the functional tests stay on released
# cores. Empty between a release and the next one's first candidate; when it
# is released, it moves to the front of matrix_cores.
matrix_prerelease_cores=(2.22)

# The cores ansible-test runs on, newest first.
matrix_test_cores=("${matrix_prerelease_cores[@]}" "${matrix_cores[@]}")

# The cores ansible-test integration runs on (hack/integration.sh): the ends of the range - the
# pre-release, the newest and the floor (the oldest, meta/runtime.yml's requires_ansible). Between
# them sanity and units run on every core; the functional step runs the modules and the role
# through Ansible on the floor too (its tests marked floor, on PostgreSQL 17).
matrix_integration_cores=("${matrix_prerelease_cores[@]}" "${matrix_cores[0]}" "${matrix_cores[-1]}")

# The Python each core runs on here and the requirements of its venv (exact
# versions are pinned in the requirements files).
declare -A matrix_core_python=([2.22]=3.13 [2.21]=3.13 [2.20]=3.12 [2.19]=3.11 [2.18]=3.13 [2.17]=3.12
    [2.16]=3.11)
declare -A matrix_core_requirements=(
    [2.22]=requirements/core-2.22.txt
    [2.21]=requirements/test.txt
    [2.20]=requirements/core-2.20.txt
    [2.19]=requirements/core-2.19.txt
    [2.18]=requirements/core-2.18.txt
    [2.17]=requirements/core-2.17.txt
    [2.16]=requirements/core-2.16.txt
)

# The oldest Python each of those releases runs on (its Requires-Python). The
# demo runs the newest released core that the Python it finds runs (hack/demo.sh;
# tests/functional/test_demo_choice.py holds this table against the releases).
declare -A matrix_core_min_python=([2.22]=3.13 [2.21]=3.12 [2.20]=3.12 [2.19]=3.11 [2.18]=3.11 [2.17]=3.10
    [2.16]=3.10)

# The oldest Python the test bed installs on (requirements/testbed.txt, the demo's venv):
# hypothesis 6.170 needs 3.11 (awa-pg 0.6.9 3.10). The demo runs on no older Python,
# whichever core would (test_demo_choice.py holds it against the packages).
matrix_testbed_min_python=3.11

# matrix_core_for_python X.Y: the newest released core of the matrix that runs on Python
# X.Y, for the demo; fails (printing nothing) when none does, or the test bed does not.
matrix_core_for_python() {
    local core
    if [ "$(printf '%s\n' "$matrix_testbed_min_python" "$1" | sort -V | head -n 1)" != "$matrix_testbed_min_python" ]; then
        return 1
    fi
    for core in "${matrix_cores[@]}"; do
        if [ "$(printf '%s\n' "${matrix_core_min_python[$core]}" "$1" | sort -V | head -n 1)" = \
                "${matrix_core_min_python[$core]}" ]; then
            echo "$core"
            return 0
        fi
    done
    return 1
}

# The Pythons the demo can run on, newest first: those of the matrix's cores.
matrix_demo_pythons() {
    printf '%s\n' "${matrix_core_python[@]}" | sort -rV -u
}

# Molecule runs every scenario (extensions/molecule: the rollout over SSH to
# real systemd hosts, fleet on PostgreSQL 18, fleet_pg17 on 17) on the newest core;
# the role's Python runs in the units of every core.
matrix_molecule_cores=(2.21)

# The Pythons older than the producer module's floor (3.8) that a core of the matrix still runs
# modules on: 2.7 and 3.6 (ansible-core 2.16), 3.7 (2.16 and 2.17). awa_producer_services refuses
# them with what to install; tests/functional/test_producer_python.py runs it on each of them and on
# every Python of matrix_sanity_pythons.
matrix_refused_target_pythons=(2.7 3.6 3.7)

# ansible-test sanity runs compile and import on every interpreter it finds:
# these are put on its PATH (tests/config.yml: the modules load on Python 3.8 or newer).
matrix_sanity_pythons=(3.8 3.9 3.10 3.11 3.12 3.13)

# PostgreSQL majors every integration and molecule run covers.
matrix_postgresql=(17 18)

# Where the venvs live (the sourcing script sets $root).
venv=${AWA_OPS_VENV:-$root/.venv}
venvs=${AWA_OPS_VENVS:-$root/.venvs}

# The venv of an ansible-core release of the matrix.
matrix_venv() {
    if [ "$1" = "${matrix_cores[0]}" ]; then echo "$venv"; else echo "$venvs/core-$1"; fi
}

# The folder of ansible-test's pinned sanity requirements (sanity.TEST.txt) in a core's venv.
matrix_sanity_requirements() {
    "$(matrix_venv "$1")/bin/python" -c \
        'import ansible_test, pathlib; print(pathlib.Path(ansible_test.__file__).parent / "_data" / "requirements")'
}
