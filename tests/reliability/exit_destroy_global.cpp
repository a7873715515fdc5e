// ccl_comm_destroy at process exit from C++ static destructors: a global object constructed
// before main (so destroyed after every static ccl made), a static std::vector of communicators
// destroyed by a global's destructor (DeepSpeed keeps its communicators so), and a function-local
// static made after the communicators (destroyed before ccl's statics). Run under cclrun; exits 0
// only if every destroy succeeded.
#include <ccl/ccl.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

namespace {

void die(const char* what, ccl_result_t r) {
    std::fprintf(stderr, "exit_destroy_global: %s: %s: %s\n", what, ccl_strerror(r),
                 ccl_last_error());
    _exit(1);
}

ccl_comm_t make() {
    ccl_comm_t c = nullptr;
    if (ccl_result_t r = ccl_comm_create_from_env(&c); r != CCL_SUCCESS) die("create", r);
    float x[4] = {1, 2, 3, 4};
    if (ccl_result_t r = ccl_allreduce(x, x, 4, CCL_FLOAT32, CCL_SUM, c, nullptr, nullptr);
        r != CCL_SUCCESS)
        die("allreduce", r);
    return c;
}

struct Owner {
    const char* name;
    std::vector<ccl_comm_t> comms;
    ~Owner() {
        for (ccl_comm_t c : comms)
            if (ccl_result_t r = ccl_comm_destroy(c); r != CCL_SUCCESS) die(name, r);
    }
};

Owner g_early{"a global's destructor", {}};  // constructed before main
std::vector<ccl_comm_t> g_vector;            // DeepSpeed style
struct VectorOwner {
    ~VectorOwner() {
        for (ccl_comm_t c : g_vector)
            if (ccl_result_t r = ccl_comm_destroy(c); r != CCL_SUCCESS)
                die("the vector's owner", r);
    }
} g_vector_owner;

}  // namespace

int main() {
    g_early.comms.push_back(make());
    g_vector.push_back(make());
    g_vector.push_back(make());
    static Owner late{"a function-local static's destructor", {make()}};
    // A nonblocking call left for the destroy at exit.
    static float pending[4096];
    ccl_request_t req = nullptr;
    if (ccl_result_t r =
            ccl_allreduce(pending, pending, 4096, CCL_FLOAT32, CCL_SUM, g_vector[1], nullptr, &req);
        r != CCL_SUCCESS)
        die("nonblocking allreduce", r);
    ccl_request_free(req);
    std::printf("exit_destroy_global: exiting with %zu communicators open\n",
                g_early.comms.size() + g_vector.size() + late.comms.size());
    return 0;
}
