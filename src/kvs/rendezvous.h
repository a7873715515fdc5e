// The KVS of a job that a launcher started (kvs/launcher.h): rank 0 serves it, and every rank
// learns its address the way the launcher allows. One per process, kept until the process exits:
// later communicators created from the environment reuse it, and PMI-1 and PMIx want their
// finalize only when the process ends.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "kvs/kvs.h"
#include "kvs/launcher.h"
#include "kvs/pmi.h"
#include "kvs/pmix.h"

namespace ccl::kvs {

class Rendezvous {
public:
    // Collective: every rank of the job constructs one. `iface` is CCL_KVS_IFACE; each wait lasts
    // at most `timeout_s` (CCL_KVS_TIMEOUT). Throws ccl::Error saying what failed and where.
    Rendezvous(const Launch& launch, const std::string& iface, double timeout_s);
    ~Rendezvous();
    Rendezvous(const Rendezvous&) = delete;
    Rendezvous& operator=(const Rendezvous&) = delete;

    Client& client() { return *client_; }

private:
    // Rank 0 starts the server and publishes its address (or, having failed, says so, so that the
    // others fail at once rather than at their timeout); the others read it.
    void exchange(const Launch& launch, const std::string& iface, double timeout_s,
                  const std::function<void(const std::string&)>& put,
                  const std::function<void()>& sync, const std::function<std::string()>& get);

    // Destroyed in reverse: the client, the server, then PMIx / PMI-1 finalize.
    std::unique_ptr<PmiClient> pmi_;
    std::unique_ptr<Pmix> pmix_;
    std::unique_ptr<Server> server_;
    std::unique_ptr<Client> client_;
};

}  // namespace ccl::kvs
