// The KVS part of the C ABI.
#include <cstring>

#include "base/config.h"
#include "handles.h"

namespace ccl::capi {

constinit KvsTable g_kvs_table;

}  // namespace ccl::capi

using namespace ccl;
using namespace ccl::capi;

extern "C" {

ccl_result_t ccl_kvs_create_main(ccl_kvs_t* kvs) {
    return guarded(__func__, [&] {
        require_out(kvs, "kvs");
        auto k = std::make_shared<Kvs>();
        k->server = std::make_unique<kvs::Server>(config().kvs_iface);
        k->client = std::make_unique<kvs::Client>(k->server->address(), config().kvs_timeout_s);
        *kvs = kvs_table().add<ccl_kvs_t>(std::move(k));
    });
}

ccl_result_t ccl_kvs_get_address(ccl_kvs_t kvs, char* buf, size_t len) {
    return guarded(__func__, [&] {
        auto k = kvs_table().get(kvs, "kvs");
        require_out(buf, "buf");
        const std::string& address = k->client->address();
        if (len < address.size() + 1)
            throw Error(CCL_ERROR_INVALID_ARGUMENT, "buf holds " + std::to_string(len) +
                                                        " bytes, the address needs " +
                                                        std::to_string(address.size() + 1) +
                                                        " (CCL_KVS_ADDRESS_MAX is always enough)");
        std::memcpy(buf, address.c_str(), address.size() + 1);
    });
}

ccl_result_t ccl_kvs_connect(const char* address, ccl_kvs_t* kvs) {
    return guarded(__func__, [&] {
        require_out(address, "address");
        require_out(kvs, "kvs");
        if (std::strlen(address) >= CCL_KVS_ADDRESS_MAX)
            throw Error(CCL_ERROR_INVALID_ARGUMENT, "address is longer than CCL_KVS_ADDRESS_MAX");
        auto k = std::make_shared<Kvs>();
        k->client = std::make_unique<kvs::Client>(address, config().kvs_timeout_s);
        *kvs = kvs_table().add<ccl_kvs_t>(std::move(k));
    });
}

ccl_result_t ccl_kvs_destroy(ccl_kvs_t kvs) {
    return guarded(__func__, [&] { kvs_table().remove(kvs, "kvs"); });
}

}  // extern "C"
