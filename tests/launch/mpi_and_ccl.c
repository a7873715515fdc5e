/* An MPI program that also uses ccl, both bootstrapped by the same launcher (MPICH's Hydra over
 * one PMI-1 connection, or Open MPI's PMIx): MPI_Init before or after ccl_comm_create_from_env
 * ("before" / "after" as argument), then one allreduce through each. */
#include <ccl/ccl.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
    int mpi_first = argc > 1 && strcmp(argv[1], "before") == 0;
    ccl_comm_t comm;
    int rank = -1, size = 0, ccl_rank = -1;
    if (mpi_first) MPI_Init(&argc, &argv);
    ccl_result_t r = ccl_comm_create_from_env(&comm);
    if (r != CCL_SUCCESS) {
        fprintf(stderr, "ccl_comm_create_from_env: %s\n", ccl_last_error());
        return 1;
    }
    if (!mpi_first) MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ccl_comm_rank(comm, &ccl_rank);
    int x = rank + 1, y = rank + 1;
    r = ccl_allreduce(&x, &x, 1, CCL_INT32, CCL_SUM, comm, NULL, NULL);
    MPI_Allreduce(MPI_IN_PLACE, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int want = size * (size + 1) / 2;
    int good = r == CCL_SUCCESS && ccl_rank == rank && x == want && y == want;
    printf("rank %d of %d: %s (ccl rank %d, ccl sum %d, MPI sum %d)\n", rank, size,
           good ? "ok" : "WRONG", ccl_rank, x, y);
    ccl_comm_destroy(comm);
    MPI_Finalize();
    return good ? 0 : 1;
}
