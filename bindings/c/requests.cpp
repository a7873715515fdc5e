// Requests of nonblocking collectives.
#include "core/group.h"
#include "handles.h"

namespace ccl::capi {

constinit RequestTable g_request_table;

namespace {

// The collective's own result, as this call's result (with its message as the last error).
void report(const Request& r) {
    if (r.result() != CCL_SUCCESS) throw Error(r.result(), r.message());
}

}  // namespace

}  // namespace ccl::capi

using namespace ccl;
using namespace ccl::capi;

extern "C" {

ccl_result_t ccl_wait(ccl_request_t req) {
    return guarded(__func__, [&] {
        Request& r = request_table().use(req, "request");  // one thread at a time (ccl.h)
        if (group_holds(r))
            throw Error(CCL_ERROR_INVALID_USAGE,
                        "the request's call is in this thread's open group, which issues it at "
                        "ccl_group_end: wait for it after that");
        r.wait();
        report(r);
    });
}

ccl_result_t ccl_test(ccl_request_t req, int* done) {
    return guarded(__func__, [&] {
        Request& r = request_table().use(req, "request");
        require_out(done, "done");
        *done = r.test() ? 1 : 0;
        if (*done) report(r);
    });
}

ccl_result_t ccl_request_free(ccl_request_t req) {
    return guarded(__func__, [&] { request_table().remove(req, "request"); });
}

}  // extern "C"
