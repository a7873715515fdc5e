#include "kvs/pmix.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/error.h"
#include "base/log.h"
#include "kvs/pmix_abi.h"

namespace ccl::kvs {

using namespace pmix_abi;

struct PmixApi {
    status_t (*init)(proc_t*, info_t*, size_t);
    status_t (*finalize)(const info_t*, size_t);
    status_t (*put)(scope_t, const char*, value_t*);
    status_t (*commit)();
    status_t (*fence)(const proc_t*, size_t, const info_t*, size_t);
    status_t (*get)(const proc_t*, const char*, const info_t*, size_t, value_t**);
    const char* (*error_string)(status_t);
    void (*value_destruct)(value_t*);  // PMIx 4 and later; older ones leave it to the caller
};

namespace {

// Loaded once and kept: PMIx keeps threads and state that must not be unloaded under them.
const PmixApi* load_api() {
    static std::mutex mu;
    static PmixApi api;
    static bool loaded = false;
    std::lock_guard lock(mu);
    if (loaded) return &api;
    void* lib = dlopen("libpmix.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (!lib)
        throw Error(CCL_ERROR_UNSUPPORTED,
                    std::string("this launcher shares the KVS address through PMIx, but libpmix "
                                "could not be loaded (") +
                        dlerror() +
                        "): install the Debian package libpmix2, or start the program another "
                        "way (docs/launching.md)");
    auto sym = [&](const char* name, bool required = true) {
        void* p = dlsym(lib, name);
        if (!p && required)
            throw Error(CCL_ERROR_UNSUPPORTED,
                        std::string("libpmix.so.2 has no ") + name + ": PMIx 2 or later is needed");
        return p;
    };
    api.init = reinterpret_cast<decltype(api.init)>(sym("PMIx_Init"));
    api.finalize = reinterpret_cast<decltype(api.finalize)>(sym("PMIx_Finalize"));
    api.put = reinterpret_cast<decltype(api.put)>(sym("PMIx_Put"));
    api.commit = reinterpret_cast<decltype(api.commit)>(sym("PMIx_Commit"));
    api.fence = reinterpret_cast<decltype(api.fence)>(sym("PMIx_Fence"));
    api.get = reinterpret_cast<decltype(api.get)>(sym("PMIx_Get"));
    api.error_string = reinterpret_cast<decltype(api.error_string)>(sym("PMIx_Error_string"));
    api.value_destruct =
        reinterpret_cast<decltype(api.value_destruct)>(sym("PMIx_Value_destruct", false));
    loaded = true;
    return &api;
}

void set_key(char* dst, size_t cap, const std::string& key) {
    if (key.empty() || key.size() >= cap)
        throw Error(CCL_ERROR_INVALID_ARGUMENT, "PMIx key '" + key + "' is empty or too long");
    std::memset(dst, 0, cap);
    std::memcpy(dst, key.data(), key.size());
}

}  // namespace

Pmix::Pmix(double timeout_s) : api_(load_api()), timeout_s_(timeout_s) {
    proc_t me{};
    status_t rc = api_->init(&me, nullptr, 0);
    if (rc != kSuccess)
        throw Error(CCL_ERROR_PEER_FAILURE,
                    std::string("PMIx_Init failed: ") + api_->error_string(rc) +
                        " (is this process a rank of a PMIx-enabled launcher?)");
    nspace_.assign(me.nspace, strnlen(me.nspace, sizeof(me.nspace)));
    rank_ = me.rank;
}

Pmix::~Pmix() {
    status_t rc = api_->finalize(nullptr, 0);
    if (rc != kSuccess) log().debug("PMIx_Finalize: {}", api_->error_string(rc));
}

void Pmix::put(const std::string& key, const std::string& value) {
    char k[kMaxKeyLen + 1];
    set_key(k, sizeof(k), key);
    value_t v{};
    v.type = kString;
    std::string copy = value;  // PMIx_Put copies it, but takes a non-const pointer
    v.data.string = copy.data();
    status_t rc = api_->put(kGlobal, k, &v);
    if (rc == kSuccess) rc = api_->commit();
    if (rc != kSuccess)
        throw Error(CCL_ERROR_PEER_FAILURE,
                    "PMIx put of '" + key + "' failed: " + api_->error_string(rc));
}

void Pmix::fence() {
    info_t info[2] = {};
    set_key(info[0].key, sizeof(info[0].key), kCollectData);
    info[0].value.type = kBool;
    info[0].value.data.flag = true;
    set_key(info[1].key, sizeof(info[1].key), kTimeout);
    info[1].value.type = kInt;
    info[1].value.data.integer = int(std::min(std::ceil(timeout_s_), double(INT_MAX)));
    proc_t all{};
    std::memcpy(all.nspace, nspace_.data(), std::min(nspace_.size(), kMaxNsLen));
    all.rank = kRankWildcard;  // every process of the namespace
    status_t rc = api_->fence(&all, 1, info, 2);
    if (rc == kErrTimeout)
        throw Error(CCL_ERROR_TIMEOUT,
                    "PMIx fence: not every rank arrived within " +
                        std::to_string(info[1].value.data.integer) +
                        " s (CCL_KVS_TIMEOUT): did every rank call ccl_comm_create_from_env?");
    if (rc != kSuccess)
        throw Error(CCL_ERROR_PEER_FAILURE,
                    std::string("PMIx fence failed: ") + api_->error_string(rc));
}

std::string Pmix::get(uint32_t rank, const std::string& key) {
    char k[kMaxKeyLen + 1];
    set_key(k, sizeof(k), key);
    proc_t from{};
    std::memcpy(from.nspace, nspace_.data(), std::min(nspace_.size(), kMaxNsLen));
    from.rank = rank;
    info_t timeout{};
    set_key(timeout.key, sizeof(timeout.key), kTimeout);
    timeout.value.type = kInt;
    timeout.value.data.integer = int(std::min(std::ceil(timeout_s_), double(INT_MAX)));
    value_t* v = nullptr;
    status_t rc = api_->get(&from, k, &timeout, 1, &v);
    if (rc != kSuccess || !v)
        throw Error(rc == kErrTimeout ? CCL_ERROR_TIMEOUT : CCL_ERROR_PEER_FAILURE,
                    "PMIx get of '" + key + "' from rank " + std::to_string(rank) +
                        " failed: " + api_->error_string(rc));
    std::string out;
    data_type_t type = v->type;
    bool is_string = type == kString && v->data.string;
    if (is_string) out = v->data.string;
    // PMIX_VALUE_RELEASE: destruct (frees what it points to), then free the value itself.
    if (api_->value_destruct)
        api_->value_destruct(v);
    else if (type == kString)
        std::free(v->data.string);
    std::free(v);
    if (!is_string)
        throw Error(CCL_ERROR_PEER_FAILURE, "PMIx get of '" + key + "' returned a value of type " +
                                                std::to_string(type) + ", not a string");
    return out;
}

}  // namespace ccl::kvs
