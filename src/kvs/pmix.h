// The PMIx client calls ccl needs to share rank 0's KVS address under Open MPI's mpirun and
// srun --mpi=pmix: init, put + commit, fence, get, finalize. libpmix.so.2 is loaded on first use,
// so that libccl.so does not depend on it.
#pragma once

#include <cstdint>
#include <string>

namespace ccl::kvs {

struct PmixApi;  // libpmix's functions, loaded once

class Pmix {
public:
    // Loads libpmix and calls PMIx_Init. Throws CCL_ERROR_UNSUPPORTED when libpmix cannot be
    // loaded (naming the Debian package), CCL_ERROR_PEER_FAILURE when PMIx_Init fails.
    explicit Pmix(double timeout_s);
    // PMIx_Finalize: Open MPI's mpirun takes a process that called PMIx_Init and exits without
    // it for a failed one.
    ~Pmix();
    Pmix(const Pmix&) = delete;
    Pmix& operator=(const Pmix&) = delete;

    uint32_t rank() const { return rank_; }
    const std::string& nspace() const { return nspace_; }
    void put(const std::string& key, const std::string& value);  // put, then commit
    // Every process of the namespace, collecting what they put. CCL_ERROR_TIMEOUT after the
    // timeout given to the constructor.
    void fence();
    std::string get(uint32_t rank, const std::string& key);

private:
    const PmixApi* api_;
    double timeout_s_;
    std::string nspace_;
    uint32_t rank_ = 0;
};

}  // namespace ccl::kvs
