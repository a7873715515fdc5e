#include "kvs/rendezvous.h"

#include <arpa/inet.h>

#include <optional>

#include "base/error.h"
#include "base/log.h"
#include "kvs/net.h"

namespace ccl::kvs {
namespace {

// The launcher's key for the address: within Hydra's 64-character keys, no spaces or '='.
constexpr const char* kAddressKey = "ccl-kvs-address";
// What rank 0 publishes when it could not start the server (an address never looks like this).
constexpr const char* kFailed = "failed";

}  // namespace

Rendezvous::Rendezvous(const Launch& launch, const std::string& iface, double timeout_s) {
    log().info("launcher {}: rank {} of {}, local rank {} of {}; {}",
               launcher_name(launch.launcher), launch.rank, launch.size, launch.local_rank,
               launch.local_size, launch.why);
    switch (launch.via) {
        case AddressVia::given:
            client_ = std::make_unique<Client>(launch.address, timeout_s);
            break;
        case AddressVia::master:
            if (launch.rank == 0) {
                try {
                    server_ = std::make_unique<Server>(iface, launch.port, launch.secret,
                                                       ServerLimits::for_job(launch.size));
                } catch (const Error& e) {
                    throw Error(e.code(), std::string(e.what()) +
                                              ": rank 0 serves the KVS at MASTER_PORT + 1, or "
                                              "CCL_KVS_PORT when set; set CCL_KVS_PORT to a free "
                                              "port");
                }
                if (launch.secret_weak)
                    log().warn(
                        "the KVS at MASTER_ADDR, port {} has no job secret: any process that "
                        "reaches that port during start-up may join this job. Set "
                        "CCL_KVS_SECRET (32 hex digits, the same on every rank), or start "
                        "with torchrun --standalone or --rdzv-id (docs/reliability.md)",
                        launch.port);
                client_ = std::make_unique<Client>(server_->address(), timeout_s);
            } else {
                sockaddr_in addr{};
                addr.sin_family = AF_INET;
                addr.sin_addr = net::resolve_ipv4(launch.address, "MASTER_ADDR");
                addr.sin_port = htons(static_cast<uint16_t>(launch.port));
                std::string address = format_kvs_address(addr, launch.secret);
                try {
                    client_ = std::make_unique<Client>(address, timeout_s);
                } catch (const Error& e) {
                    if (e.code() == CCL_ERROR_INVALID_USAGE)  // refused our secret
                        throw Error(e.code(), std::string(e.what()) +
                                                  " (every rank must have the same "
                                                  "CCL_KVS_SECRET, or the same "
                                                  "TORCHELASTIC_RUN_ID when it is unset)");
                    throw Error(e.code(), std::string(e.what()) +
                                              " (rank 0 serves it there once it calls "
                                              "ccl_comm_create_from_env; is MASTER_ADDR rank 0's "
                                              "host?)");
                }
            }
            break;
        case AddressVia::pmi:
            pmi_ = std::make_unique<PmiClient>(launch.pmi_fd, timeout_s);
            exchange(
                launch, iface, timeout_s, [&](const std::string& v) { pmi_->put(kAddressKey, v); },
                [&] { pmi_->barrier(); }, [&] { return pmi_->get(kAddressKey); });
            break;
        case AddressVia::pmix:
            pmix_ = std::make_unique<Pmix>(timeout_s);
            if (pmix_->rank() != uint32_t(launch.rank))
                throw Error(CCL_ERROR_INVALID_USAGE,
                            "PMIx says this is rank " + std::to_string(pmix_->rank()) +
                                " of namespace " + pmix_->nspace() + ", but " + launch.why);
            exchange(
                launch, iface, timeout_s, [&](const std::string& v) { pmix_->put(kAddressKey, v); },
                [&] { pmix_->fence(); }, [&] { return pmix_->get(0, kAddressKey); });
            break;
        case AddressVia::alone:  // no one else to tell: the server is this rank's alone
            server_ = std::make_unique<Server>(iface.empty() ? "lo" : iface, 0, std::nullopt,
                                               ServerLimits::for_job(1));
            client_ = std::make_unique<Client>(server_->address(), timeout_s);
            break;
        case AddressVia::none:
            throw Error(CCL_ERROR_INVALID_USAGE, "no launcher says where the KVS is");
    }
}

Rendezvous::~Rendezvous() = default;

void Rendezvous::exchange(const Launch& launch, const std::string& iface, double timeout_s,
                          const std::function<void(const std::string&)>& put,
                          const std::function<void()>& sync,
                          const std::function<std::string()>& get) {
    std::string address;
    std::optional<Error> failed;
    if (launch.rank == 0) {
        try {
            server_ = std::make_unique<Server>(iface, 0, std::nullopt,
                                               ServerLimits::for_job(launch.size));
            address = server_->address();
        } catch (const Error& e) {
            failed = e;
            address = kFailed;
        }
        put(address);
    }
    sync();
    if (failed) throw *failed;
    if (launch.rank != 0) {
        address = get();
        if (address == kFailed)
            throw Error(CCL_ERROR_PEER_FAILURE,
                        "rank 0 could not start the KVS server (its own error says why)");
    }
    client_ = std::make_unique<Client>(address, timeout_s);
}

}  // namespace ccl::kvs
