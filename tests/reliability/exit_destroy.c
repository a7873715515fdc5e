/* ccl_comm_destroy at process exit, from atexit handlers (C). argv[1] says when the handler that
 * destroys is registered: "before" the communicators are created (it runs after every handler
 * and static destructor ccl registered itself), "after" (it runs before them) or "both" (one
 * communicator each). A nonblocking allreduce is left unwaited for the destroy to finish, and a
 * failing call at exit checks the last-error message. Run under cclrun; exits 0 only if every
 * destroy at exit succeeded. */
#include <ccl/ccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ccl_comm_t early_comm, late_comm; /* destroyed by the "before" and "after" handlers */
static float pending[1024];

static void die(const char* what, ccl_result_t r) {
    fprintf(stderr, "exit_destroy: %s: %s: %s\n", what, ccl_strerror(r), ccl_last_error());
    _exit(1); /* exit() again from an exit handler would be undefined */
}

static void destroy_at_exit(ccl_comm_t* c, const char* which) {
    if (!*c) return;
    ccl_result_t r = ccl_comm_destroy(*c);
    if (r != CCL_SUCCESS) die(which, r);
    *c = NULL;
    /* A failing call at exit reports its message like any other. */
    int rank = -1;
    r = ccl_comm_rank(NULL, &rank);
    if (r != CCL_ERROR_INVALID_ARGUMENT || !strstr(ccl_last_error(), "NULL"))
        die("ccl_comm_rank(NULL) at exit", r);
}

static void destroy_early(void) {
    destroy_at_exit(&early_comm, "destroy from a handler registered before");
}
static void destroy_late(void) {
    destroy_at_exit(&late_comm, "destroy from a handler registered after");
}

static ccl_comm_t make(void) {
    ccl_comm_t c = NULL;
    ccl_result_t r = ccl_comm_create_from_env(&c);
    if (r != CCL_SUCCESS) die("ccl_comm_create_from_env", r);
    float x[4] = {1, 2, 3, 4};
    r = ccl_allreduce(x, x, 4, CCL_FLOAT32, CCL_SUM, c, NULL, NULL);
    if (r != CCL_SUCCESS) die("ccl_allreduce", r);
    return c;
}

int main(int argc, char** argv) {
    const char* when = argc > 1 ? argv[1] : "both";
    const int before = !strcmp(when, "before") || !strcmp(when, "both");
    const int after = !strcmp(when, "after") || !strcmp(when, "both");
    if (!before && !after) {
        fprintf(stderr, "usage: exit_destroy before|after|both\n");
        return 2;
    }
    if (before) atexit(destroy_early);
    early_comm = make();
    if (after) {
        late_comm = make();
        atexit(destroy_late);
    }
    if (!before) { /* the handler registered after destroys both */
        late_comm = late_comm ? late_comm : early_comm;
        if (late_comm != early_comm) {
            ccl_result_t r = ccl_comm_destroy(early_comm);
            if (r != CCL_SUCCESS) die("ccl_comm_destroy", r);
        }
        early_comm = NULL;
    }
    /* Work left for the destroy at exit to wait for. */
    ccl_comm_t c = early_comm ? early_comm : late_comm;
    ccl_request_t req = NULL;
    ccl_result_t r = ccl_allreduce(pending, pending, 1024, CCL_FLOAT32, CCL_SUM, c, NULL, &req);
    if (r != CCL_SUCCESS) die("nonblocking ccl_allreduce", r);
    ccl_request_free(req);
    printf("exit_destroy %s: exiting with communicators open\n", when);
    return 0;
}
