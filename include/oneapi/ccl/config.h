/*
 * oneCCL's configuration macros, for programs that test them (torch-ccl includes this file for
 * the version). CCL_MAJOR_VERSION, CCL_MINOR_VERSION and CCL_UPDATE_VERSION give the oneCCL API
 * level that oneapi/ccl.hpp implements over ccl's C ABI, not ccl's own version
 * (CCL_VERSION_MAJOR... in ccl/ccl.h, named in CCL_PRODUCT_FULL). docs/oneccl.md.
 */
#ifndef ONEAPI_CCL_CONFIG_H
#define ONEAPI_CCL_CONFIG_H

#include "../../ccl/ccl.h" /* CCL_API, ccl's version */

#if defined(__GNUC__) || defined(__clang__)
#define CCL_FORCEINLINE inline __attribute__((always_inline))
#define CCL_FORCENOINLINE __attribute__((noinline))
#define CCL_DEPRECATED_ENUM_FIELD __attribute__((deprecated))
#define CCL_DEPRECATED __attribute__((deprecated))
#define CCL_HELPER_DLL_EXPORT __attribute__((visibility("default")))
#else
#define CCL_FORCEINLINE inline
#define CCL_FORCENOINLINE
#define CCL_DEPRECATED_ENUM_FIELD
#define CCL_DEPRECATED
#define CCL_HELPER_DLL_EXPORT
#endif

#define ONECCL_SPEC_VERSION "1.0"

#define CCL_MAJOR_VERSION 2021
#define CCL_MINOR_VERSION 14
#define CCL_UPDATE_VERSION 0

#define CCL_CONFIG_STR_(x) #x
#define CCL_CONFIG_STR(x) CCL_CONFIG_STR_(x)
#define CCL_PRODUCT_STATUS "ccl"
#define CCL_PRODUCT_BUILD_DATE ""
#define CCL_PRODUCT_FULL                                         \
    "ccl " CCL_CONFIG_STR(CCL_VERSION_MAJOR) "." CCL_CONFIG_STR( \
        CCL_VERSION_MINOR) "." CCL_CONFIG_STR(CCL_VERSION_PATCH) " (oneCCL 2021.14 host API)"

/* ccl has no SYCL: a program built for oneCCL's SYCL configuration cannot build against it. */
#if defined(CCL_ENABLE_SYCL) || defined(CCL_ENABLE_ZE)
#error \
    "ccl's oneapi/ccl.hpp is oneCCL's host API only: SYCL (CCL_ENABLE_SYCL) is absent (docs/oneccl.md)"
#endif

#endif /* ONEAPI_CCL_CONFIG_H */
