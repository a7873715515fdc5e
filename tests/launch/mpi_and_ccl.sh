#!/usr/bin/env bash
# An MPI program that uses ccl too, built with an MPI's compiler wrapper and run by its launcher,
# with MPI_Init before and after ccl_comm_create_from_env: both libraries share the launcher.
# Usage: mpi_and_ccl.sh SOURCE INCLUDE_DIR LIB_DIR MPICC LAUNCHER [launcher options...]
set -u
src=$1 include=$2 libdir=$3 mpicc=$4
shift 4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$mpicc" -std=c11 -Wall -Wextra -Werror -I"$include" "$src" -L"$libdir" -lccl -Wl,-rpath,"$libdir" \
    -o "$work/mpi_and_ccl" || exit 1
failed=0
for order in before after; do
    out=$("$@" "$work/mpi_and_ccl" "$order" 2>&1)
    rc=$?
    if [[ $rc == 0 && $(echo "$out" | grep -c ': ok (') == 4 ]]; then
        echo "ok   MPI_Init $order ccl_comm_create_from_env"
    else
        failed=1
        echo "FAIL MPI_Init $order ccl_comm_create_from_env: exit $rc"
        echo "$out" | sed 's/^/     /'
    fi
done
exit $failed
