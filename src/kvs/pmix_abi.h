// The few PMIx types and constants ccl uses, as the PMIx standard defines them (pmix_common.h;
// the ABI of libpmix.so.2, PMIx 2 to 5). ccl loads libpmix at run time, so that libccl.so loads
// where PMIx is absent, and builds without PMIx's headers (Debian keeps them off the include
// path); tests/launch/test_pmix_abi.cpp checks every line here against the real headers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ccl::kvs::pmix_abi {

inline constexpr size_t kMaxNsLen = 255;   // PMIX_MAX_NSLEN
inline constexpr size_t kMaxKeyLen = 511;  // PMIX_MAX_KEYLEN

using status_t = int;                // pmix_status_t
using rank_t = uint32_t;             // pmix_rank_t
using data_type_t = uint16_t;        // pmix_data_type_t
using scope_t = uint8_t;             // pmix_scope_t
using info_directives_t = uint32_t;  // pmix_info_directives_t

struct proc_t {  // pmix_proc_t
    char nspace[kMaxNsLen + 1];
    rank_t rank;
};

struct value_t {  // pmix_value_t: only the members ccl reads or writes are named
    data_type_t type;
    union {
        bool flag;
        char* string;
        int integer;
        unsigned char largest[24];  // the real union's largest member (pmix_envar_t) is 24 bytes
        void* align;
    } data;
};

struct info_t {  // pmix_info_t
    char key[kMaxKeyLen + 1];
    info_directives_t flags;
    value_t value;
};

inline constexpr status_t kSuccess = 0;                      // PMIX_SUCCESS
inline constexpr status_t kErrTimeout = -24;                 // PMIX_ERR_TIMEOUT
inline constexpr data_type_t kBool = 1;                      // PMIX_BOOL
inline constexpr data_type_t kString = 3;                    // PMIX_STRING
inline constexpr data_type_t kInt = 6;                       // PMIX_INT
inline constexpr scope_t kGlobal = 3;                        // PMIX_GLOBAL
inline constexpr rank_t kRankWildcard = UINT32_MAX - 1;      // PMIX_RANK_WILDCARD
inline constexpr const char* kCollectData = "pmix.collect";  // PMIX_COLLECT_DATA
inline constexpr const char* kTimeout = "pmix.timeout";      // PMIX_TIMEOUT

}  // namespace ccl::kvs::pmix_abi
