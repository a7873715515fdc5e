// A PMI-1 client over the descriptor that a launcher opened for this process (PMI_FD): the wire
// protocol that MPICH's Hydra and Slurm's pmi2 plugin both speak. Each request is one line
// "cmd=NAME key=value ...\n" and is answered by one line. ccl uses it once per process, to share
// the address of rank 0's KVS; every wait has a deadline.
#pragma once

#include <map>
#include <string>

namespace ccl::kvs {

class PmiClient {
public:
    // Sends init (PMI 1.1) and asks for the job's KVS name and size limits. The descriptor stays
    // the launcher's: it is never closed here (an MPI library in the process may use it too).
    // Throws CCL_ERROR_TIMEOUT when no answer comes within `timeout_s`, CCL_ERROR_PEER_FAILURE
    // when the descriptor is closed or answers something else.
    PmiClient(int fd, double timeout_s);
    // Finalizes if finalize() was not called: Hydra takes a rank that exits without it for a
    // failed one and kills the others. Errors are ignored here.
    ~PmiClient();
    PmiClient(const PmiClient&) = delete;
    PmiClient& operator=(const PmiClient&) = delete;

    // Keys and values: no spaces, '=' or newlines, within the launcher's limits (else
    // CCL_ERROR_INVALID_ARGUMENT).
    void put(const std::string& key, const std::string& value);
    // Returns once every rank of the job entered the barrier; publishes earlier puts.
    void barrier();
    // A key put before the last barrier; one that no rank put is CCL_ERROR_INVALID_USAGE.
    std::string get(const std::string& key);
    void finalize();

    const std::string& kvsname() const { return kvsname_; }

private:
    using Reply = std::map<std::string, std::string>;
    // Sends `request` (without the newline), waits for a reply whose cmd is `expected`, checks
    // its rc and returns its fields.
    Reply call(const std::string& request, const std::string& expected);
    void send_line(const std::string& line);
    std::string read_line();

    int fd_;
    double timeout_s_;
    std::string kvsname_;
    size_t key_max_ = 64, value_max_ = 256;  // until get_maxes says otherwise
    std::string pending_;                    // bytes read past the last reply line
    bool finalized_ = false;
};

}  // namespace ccl::kvs
