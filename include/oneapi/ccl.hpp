/*
 * oneCCL's host C++ API (`#include <oneapi/ccl.hpp>`) over ccl's C ABI, header-only: every
 * function is inline and calls the ccl_* functions of ccl/ccl.h; every failure is a
 * ccl::exception carrying ccl_last_error()'s message, or saying why ccl refuses the call. Names,
 * signatures and enum values follow oneCCL 2021.14's headers, so that programs written for oneCCL
 * build unmodified against ccl (-I<ccl>/include -lccl). docs/oneccl.md says what is here, what is
 * absent (SYCL, custom reductions, ...) and why.
 *
 * C++11 and later: oneCCL's examples build as C++11, torch 1.13's extensions as C++14.
 *
 * Operations are nonblocking, as oneCCL's host operations are: each starts a ccl request and
 * returns a ccl::event; wait() or test() complete it, and an event destroyed before it completed
 * waits for it (oneCCL's do too). The attribute `synchronous` completes the operation before the
 * call returns. Operations issued between ccl::group_start() and ccl::group_end() run at
 * group_end (ccl_group_start / ccl_group_end), and their events are waited on after it.
 */
#ifndef ONEAPI_CCL_HPP
#define ONEAPI_CCL_HPP

#include <stdint.h>
#include <stdlib.h>

#include <array>
#include <bitset>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../ccl/ccl.h"
#include "ccl/config.h"

namespace ccl {

/* ---- Aliases (oneCCL's aliases.hpp) ---- */

namespace v1 {
// oneCCL has a string class of its own, to keep its binary interface apart from the standard
// library's; a header-only layer has no such boundary, so ccl's is std::string.
using string = std::string;
}  // namespace v1
using v1::string;

template <class T, class Alloc = std::allocator<T>>
using vector_class = std::vector<T, Alloc>;
template <class T, std::size_t N>
using array_class = std::array<T, N>;
using string_class = ccl::string;
template <class R, class... ArgTypes>
using function_class = std::function<R(ArgTypes...)>;
template <class T, class Allocator = std::allocator<T>>
using list_class = std::list<T, Allocator>;
template <class Key, class T, class Compare = std::less<Key>,
          class Allocator = std::allocator<std::pair<const Key, T>>>
using map_class = std::map<Key, T, Compare, Allocator>;
using mutex_class = std::mutex;
template <class T1, class T2>
using pair_class = std::pair<T1, T2>;
template <class T>
using reference_wrapper_class = std::reference_wrapper<T>;
template <class... Types>
using tuple_class = std::tuple<Types...>;
template <class T>
using shared_ptr_class = std::shared_ptr<T>;
template <class T>
using unique_ptr_class = std::unique_ptr<T>;

/* ---- Exceptions ---- */

namespace detail {
// A message already in its final form, for the exceptions ccl throws (their public constructors
// compose oneCCL's "domain/function: info" form for programs that throw them).
struct full_message {
    std::string text;
};
}  // namespace detail

namespace v1 {

class exception : public std::exception {
public:
    exception(const string& domain, const string& function, const string& info = "")
        : msg_("ccl: " + domain + (!domain.empty() && !function.empty() ? "/" : "") + function +
               (info.empty() ? std::string()
                             : (domain.size() + function.size() != 0 ? ": " : "") + info)) {}
    exception(const string& info = "") : msg_("ccl: " + info) {}
    exception(const char* info) : msg_(std::string("ccl: ") + info) {}
    explicit exception(detail::full_message m) : msg_(std::move(m.text)) {}

    const char* what() const noexcept override { return msg_.c_str(); }

private:
    std::string msg_;
};

class invalid_argument : public exception {
public:
    invalid_argument(const string& domain, const string& function, const string& info = "")
        : exception(domain, function, "invalid argument " + info) {}
    explicit invalid_argument(detail::full_message m) : exception(std::move(m)) {}
};

class host_bad_alloc : public exception {
public:
    host_bad_alloc(const string& domain, const string& function)
        : exception(domain, function, "cannot allocate memory on host") {}
    explicit host_bad_alloc(detail::full_message m) : exception(std::move(m)) {}
};

class unimplemented : public exception {
public:
    unimplemented(const string& domain, const string& function, const string& info = "")
        : exception(domain, function, "function is not implemented " + info) {}
    explicit unimplemented(detail::full_message m) : exception(std::move(m)) {}
};

class unsupported : public exception {
public:
    unsupported(const string& domain, const string& function, const string& info = "")
        : exception(domain, function, "function is not supported " + info) {}
    explicit unsupported(detail::full_message m) : exception(std::move(m)) {}
};

}  // namespace v1

using v1::exception;
using v1::host_bad_alloc;
using v1::invalid_argument;
using v1::unimplemented;
using v1::unsupported;

namespace detail {

// Throws the exception for a failed C call: ccl's result picks the class, `message` (the C ABI's,
// which names the C function) the text.
[[noreturn]] inline void throw_result(ccl_result_t r, const std::string& message) {
    full_message m{"ccl: " + message};
    switch (r) {
        case CCL_ERROR_INVALID_ARGUMENT: throw invalid_argument(std::move(m));
        case CCL_ERROR_UNSUPPORTED: throw unsupported(std::move(m));
        case CCL_ERROR_OUT_OF_MEMORY: throw host_bad_alloc(std::move(m));
        default: throw exception(std::move(m));
    }
}

// This thread's message for a failed C call; read at once, as the next ccl call replaces it.
inline std::string last_error(ccl_result_t r) {
    const char* e = ccl_last_error();
    return (e && *e) ? std::string(e) : std::string(ccl_strerror(r));
}

inline void check(ccl_result_t r) {
    if (r != CCL_SUCCESS) throw_result(r, last_error(r));
}

// What ccl refuses (oneCCL's SYCL side, custom reductions, ...), and bad arguments it catches
// before the C ABI would read past them.
[[noreturn]] inline void refuse(const char* function, const std::string& why) {
    throw unsupported(full_message{std::string("ccl: ") + function + ": " + why});
}
[[noreturn]] inline void bad_argument(const char* function, const std::string& why) {
    throw invalid_argument(full_message{std::string("ccl: ") + function + ": " + why});
}

// std::make_unique is C++14.
template <class T, class... Args>
std::unique_ptr<T> make_unique(Args&&... args) {
    return std::unique_ptr<T>(new T(std::forward<Args>(args)...));
}

}  // namespace detail

/* ---- Types (oneCCL's types.hpp, lp_types.hpp, type_traits.hpp) ---- */

namespace v1 {

enum class reduction : int {
    sum = 0,
    prod,
    min,
    max,
    custom,  // refused: ccl has no user-defined reductions
};

enum class datatype : int {
    int8 = 0,
    uint8,
    int16,
    uint16,
    int32,
    uint32,
    int64,
    uint64,

    float16,  // IEEE 754 binary16
    float32,
    float64,

    bfloat16,

    last_predefined CCL_DEPRECATED_ENUM_FIELD = bfloat16
};

enum class cl_backend_type : int {
    empty_backend = 0x0,  // host only: ccl's is always this one
    dpcpp_sycl_l0 = 0x3,
};

// Element types of the typed overloads for float16 and bfloat16: their bits, no arithmetic.
struct float16 {
    constexpr float16() : data(0) {}
    constexpr float16(uint16_t v) : data(v) {}
    friend bool operator==(const float16& a, const float16& b) { return a.data == b.data; }
    friend bool operator!=(const float16& a, const float16& b) { return !(a == b); }
    uint16_t get_data() const { return data; }

private:
    uint16_t data;
} __attribute__((packed));

struct bfloat16 {
    constexpr bfloat16() : data(0) {}
    constexpr bfloat16(uint16_t v) : data(v) {}
    friend bool operator==(const bfloat16& a, const bfloat16& b) { return a.data == b.data; }
    friend bool operator!=(const bfloat16& a, const bfloat16& b) { return !(a == b); }
    uint16_t get_data() const { return data; }

private:
    uint16_t data;
} __attribute__((packed));

typedef struct {
    unsigned int major;
    unsigned int minor;
    unsigned int update;
    const char* product_status;
    const char* build_date;
    const char* full;
    string_class cl_backend_name;
} library_version;

typedef struct {
    const char* match_id;
    const size_t offset;
} fn_context;

/* in_buf, in_count, inout_buf, out_count, dtype, context */
typedef void (*reduction_fn)(const void*, size_t, void*, size_t*, datatype,
                             const ccl::v1::fn_context*);

}  // namespace v1

using v1::bfloat16;
using v1::cl_backend_type;
using v1::datatype;
using v1::float16;
using v1::fn_context;
using v1::library_version;
using v1::reduction;
using v1::reduction_fn;

template <class ntype_t, size_t size_of_type, ccl::datatype ccl_type_v, bool iclass = false,
          bool supported = false>
struct ccl_type_info_export {
    using native_type = ntype_t;
    using ccl_type = std::integral_constant<ccl::datatype, ccl_type_v>;
    static constexpr size_t size = size_of_type;
    static constexpr datatype dtype = static_cast<enum datatype>(ccl_type::value);
    static constexpr bool is_class = iclass;
    static constexpr bool is_supported = supported;
};

template <ccl::datatype type>
struct type_info {
    static constexpr bool is_supported = false;
    static constexpr bool is_class = false;
};

template <class type>
struct native_type_info {
    static constexpr bool is_supported = false;
    static constexpr bool is_class = false;
};

#define CCL_TYPE_TRAITS(ccl_type, cpp_type, bytes, str)                         \
    template <>                                                                 \
    struct type_info<ccl_type>                                                  \
        : public ccl_type_info_export<cpp_type, bytes, ccl_type, false, true> { \
        static constexpr const char* name() { return #str; }                    \
    };                                                                          \
    template <>                                                                 \
    struct native_type_info<cpp_type> : public type_info<ccl_type> {};

CCL_TYPE_TRAITS(ccl::datatype::int8, int8_t, sizeof(int8_t), int8)
CCL_TYPE_TRAITS(ccl::datatype::uint8, uint8_t, sizeof(uint8_t), uint8)
CCL_TYPE_TRAITS(ccl::datatype::int16, int16_t, sizeof(int16_t), int16)
CCL_TYPE_TRAITS(ccl::datatype::uint16, uint16_t, sizeof(uint16_t), uint16)
CCL_TYPE_TRAITS(ccl::datatype::int32, int32_t, sizeof(int32_t), int32)
CCL_TYPE_TRAITS(ccl::datatype::uint32, uint32_t, sizeof(uint32_t), uint32)
CCL_TYPE_TRAITS(ccl::datatype::int64, int64_t, sizeof(int64_t), int64)
CCL_TYPE_TRAITS(ccl::datatype::uint64, uint64_t, sizeof(uint64_t), uint64)
CCL_TYPE_TRAITS(ccl::datatype::float16, float16, sizeof(float16), float16)
CCL_TYPE_TRAITS(ccl::datatype::float32, float, sizeof(float), float32)
CCL_TYPE_TRAITS(ccl::datatype::float64, double, sizeof(double), float64)
CCL_TYPE_TRAITS(ccl::datatype::bfloat16, bfloat16, sizeof(bfloat16), bfloat16)

template <class type>
constexpr bool is_supported() {
    return native_type_info<typename std::remove_pointer<type>::type>::is_supported;
}

// Buffer objects (oneCCL's sycl::buffer overloads) are SYCL's: no type is one here.
template <class type>
constexpr bool is_class() {
    return native_type_info<typename std::remove_pointer<type>::type>::is_class;
}

template <class type>
constexpr bool is_native_type_supported() {
    return !is_class<type>() && is_supported<type>();
}

template <class type>
constexpr bool is_class_supported() {
    return is_class<type>() && is_supported<type>();
}

/* ---- Attribute identifiers and their value types (oneCCL's *_attr_ids*.hpp) ---- */

namespace v1 {

enum class operation_attr_id : int {
    version,

    priority,
    to_cache,
    synchronous,
    match_id,

    last_value CCL_DEPRECATED_ENUM_FIELD
};

enum class allgather_attr_id : int {
    op_id_offset = 5,
};
enum class allgatherv_attr_id : int {
    op_id_offset = 5,
};
enum class allreduce_attr_id : int {
    op_id_offset = 5,
    reduction_fn = op_id_offset,
};
enum class alltoall_attr_id : int {
    op_id_offset = 5,
};
enum class alltoallv_attr_id : int {
    op_id_offset = 5,
};
enum class barrier_attr_id : int {
    op_id_offset = 5,
};
enum class broadcast_attr_id : int {
    op_id_offset = 5,
};
enum class reduce_attr_id : int {
    op_id_offset = 5,
    reduction_fn = op_id_offset,
};
enum class reduce_scatter_attr_id : int {
    op_id_offset = 5,
    reduction_fn = op_id_offset,
};
enum class pt2pt_attr_id : int {
    op_id_offset = 5,
    group_id = op_id_offset,
};

enum class comm_split_attr_id : int {
    version,
    color,
    group,
};
enum class split_group : int {
    cluster,
};
enum class comm_attr_id : int {
    version,
};
enum class init_attr_id : int {
    version,
};
enum class kvs_attr_id : int {
    version,
    ip_port,
};
enum class datatype_attr_id : int {
    version,
    size,
};
enum class device_attr_id : int {
    version,
    cl_backend,
    native_handle,
};
enum class context_attr_id : int {
    version,
    cl_backend,
    native_handle,
};
enum class stream_attr_id : int {
    version,
    native_handle,
};

}  // namespace v1

using v1::allgather_attr_id;
using v1::allgatherv_attr_id;
using v1::allreduce_attr_id;
using v1::alltoall_attr_id;
using v1::alltoallv_attr_id;
using v1::barrier_attr_id;
using v1::broadcast_attr_id;
using v1::comm_attr_id;
using v1::comm_split_attr_id;
using v1::context_attr_id;
using v1::datatype_attr_id;
using v1::device_attr_id;
using v1::init_attr_id;
using v1::kvs_attr_id;
using v1::operation_attr_id;
using v1::pt2pt_attr_id;
using v1::reduce_attr_id;
using v1::reduce_scatter_attr_id;
using v1::split_group;
using v1::stream_attr_id;

namespace detail {

template <class attr, attr id>
struct ccl_api_type_attr_traits {};

// What ccl::attr_val<id>(value) makes: an attribute and its value, for the create_*_attr calls.
template <class attr_id_type, attr_id_type attr_id, class value_type>
struct attr_value_triple {
    using type_t = attr_id_type;
    using value_t = value_type;
    static constexpr attr_id_type idx() { return attr_id; }
    constexpr explicit attr_value_triple(value_t val) : m_val(val) {}
    const value_type& val() const { return m_val; }

private:
    value_t m_val;
};

template <class T>
class function_holder {
public:
    constexpr function_holder(T in = nullptr) : val(in) {}
    T get() const { return val; }

private:
    T val;
};

template <class E, E v>
using tag = std::integral_constant<E, v>;

#define CCL_ATTR_TRAITS(id_type, id, value_type, return_type_) \
    template <>                                                \
    struct ccl_api_type_attr_traits<id_type, id_type::id> {    \
        using type = value_type;                               \
        using return_type = return_type_;                      \
    };

CCL_ATTR_TRAITS(operation_attr_id, version, ccl::library_version, ccl::library_version)
CCL_ATTR_TRAITS(operation_attr_id, priority, size_t, size_t)
CCL_ATTR_TRAITS(operation_attr_id, synchronous, bool, bool)
CCL_ATTR_TRAITS(operation_attr_id, to_cache, bool, bool)
CCL_ATTR_TRAITS(operation_attr_id, match_id, string_class, string_class)
CCL_ATTR_TRAITS(allreduce_attr_id, reduction_fn, ccl::reduction_fn,
                function_holder<ccl::reduction_fn>)
CCL_ATTR_TRAITS(reduce_attr_id, reduction_fn, ccl::reduction_fn, function_holder<ccl::reduction_fn>)
CCL_ATTR_TRAITS(reduce_scatter_attr_id, reduction_fn, ccl::reduction_fn,
                function_holder<ccl::reduction_fn>)
CCL_ATTR_TRAITS(pt2pt_attr_id, group_id, int, int)
CCL_ATTR_TRAITS(comm_split_attr_id, version, ccl::library_version, ccl::library_version)
CCL_ATTR_TRAITS(comm_split_attr_id, color, int, int)
CCL_ATTR_TRAITS(comm_split_attr_id, group, split_group, split_group)
CCL_ATTR_TRAITS(comm_attr_id, version, ccl::library_version, ccl::library_version)
CCL_ATTR_TRAITS(init_attr_id, version, ccl::library_version, ccl::library_version)
CCL_ATTR_TRAITS(kvs_attr_id, version, ccl::library_version, ccl::library_version)
CCL_ATTR_TRAITS(kvs_attr_id, ip_port, string_class, string_class)
CCL_ATTR_TRAITS(datatype_attr_id, version, ccl::library_version, ccl::library_version)
CCL_ATTR_TRAITS(datatype_attr_id, size, size_t, size_t)
CCL_ATTR_TRAITS(device_attr_id, version, ccl::library_version, ccl::library_version)
CCL_ATTR_TRAITS(device_attr_id, cl_backend, cl_backend_type, cl_backend_type)
CCL_ATTR_TRAITS(context_attr_id, version, ccl::library_version, ccl::library_version)
CCL_ATTR_TRAITS(context_attr_id, cl_backend, cl_backend_type, cl_backend_type)
CCL_ATTR_TRAITS(stream_attr_id, version, ccl::library_version, ccl::library_version)

#undef CCL_ATTR_TRAITS

template <class Id, Id id>
using attr_type = typename ccl_api_type_attr_traits<Id, id>::type;
template <class Id, Id id>
using attr_return = typename ccl_api_type_attr_traits<Id, id>::return_type;

inline const library_version& version_value();

[[noreturn]] inline void read_only_version() {
    throw ccl::exception(full_message{"ccl: the version attribute is read-only"});
}

inline const string_class& empty_string() {
    static const string_class s;
    return s;
}

// The fields of every operation's attribute object. No member needs a dynamic initializer, so
// that the default_*_attr objects are ready before any static initializer of the program runs.
struct op_values {
    size_t priority = 0;
    bool to_cache = false;
    bool synchronous = false;
    std::shared_ptr<const string_class> match_id;  // null: none; shared by copies
    function_holder<ccl::reduction_fn> fn;         // allreduce, reduce, reduce_scatter: refused
    int group_id = 0;  // pt2pt: kept, without effect (oneCCL reads it nowhere either)
};

// set<id>(value) and get<id>() of the operations' attributes, one overload per attribute.
template <class V>
library_version exchange(op_values&, tag<operation_attr_id, operation_attr_id::version>, const V&) {
    read_only_version();
}
template <class V>
size_t exchange(op_values& a, tag<operation_attr_id, operation_attr_id::priority>, const V& v) {
    size_t old = a.priority;
    a.priority = static_cast<size_t>(v);
    return old;
}
template <class V>
bool exchange(op_values& a, tag<operation_attr_id, operation_attr_id::to_cache>, const V& v) {
    bool old = a.to_cache;
    a.to_cache = static_cast<bool>(v);
    return old;
}
template <class V>
bool exchange(op_values& a, tag<operation_attr_id, operation_attr_id::synchronous>, const V& v) {
    bool old = a.synchronous;
    a.synchronous = static_cast<bool>(v);
    return old;
}
template <class V>
string_class exchange(op_values& a, tag<operation_attr_id, operation_attr_id::match_id>,
                      const V& v) {
    string_class old = a.match_id ? *a.match_id : string_class();
    a.match_id = std::make_shared<const string_class>(v);
    return old;
}
template <class Id, Id id, class V>
function_holder<ccl::reduction_fn> exchange_fn(op_values& a, const V& v) {
    function_holder<ccl::reduction_fn> old = a.fn;
    a.fn = function_holder<ccl::reduction_fn>(v);
    return old;
}
template <class V>
function_holder<ccl::reduction_fn> exchange(op_values& a,
                                            tag<allreduce_attr_id, allreduce_attr_id::reduction_fn>,
                                            const V& v) {
    return exchange_fn<allreduce_attr_id, allreduce_attr_id::reduction_fn>(a, v);
}
template <class V>
function_holder<ccl::reduction_fn> exchange(op_values& a,
                                            tag<reduce_attr_id, reduce_attr_id::reduction_fn>,
                                            const V& v) {
    return exchange_fn<reduce_attr_id, reduce_attr_id::reduction_fn>(a, v);
}
template <class V>
function_holder<ccl::reduction_fn> exchange(
    op_values& a, tag<reduce_scatter_attr_id, reduce_scatter_attr_id::reduction_fn>, const V& v) {
    return exchange_fn<reduce_scatter_attr_id, reduce_scatter_attr_id::reduction_fn>(a, v);
}
template <class V>
int exchange(op_values& a, tag<pt2pt_attr_id, pt2pt_attr_id::group_id>, const V& v) {
    int old = a.group_id;
    a.group_id = static_cast<int>(v);
    return old;
}

inline const library_version& value(const op_values&,
                                    tag<operation_attr_id, operation_attr_id::version>) {
    return version_value();
}
inline const size_t& value(const op_values& a,
                           tag<operation_attr_id, operation_attr_id::priority>) {
    return a.priority;
}
inline const bool& value(const op_values& a, tag<operation_attr_id, operation_attr_id::to_cache>) {
    return a.to_cache;
}
inline const bool& value(const op_values& a,
                         tag<operation_attr_id, operation_attr_id::synchronous>) {
    return a.synchronous;
}
inline const string_class& value(const op_values& a,
                                 tag<operation_attr_id, operation_attr_id::match_id>) {
    return a.match_id ? *a.match_id : empty_string();
}
inline const function_holder<ccl::reduction_fn>& value(
    const op_values& a, tag<allreduce_attr_id, allreduce_attr_id::reduction_fn>) {
    return a.fn;
}
inline const function_holder<ccl::reduction_fn>& value(
    const op_values& a, tag<reduce_attr_id, reduce_attr_id::reduction_fn>) {
    return a.fn;
}
inline const function_holder<ccl::reduction_fn>& value(
    const op_values& a, tag<reduce_scatter_attr_id, reduce_scatter_attr_id::reduction_fn>) {
    return a.fn;
}
inline const int& value(const op_values& a, tag<pt2pt_attr_id, pt2pt_attr_id::group_id>) {
    return a.group_id;
}

// An operation's attribute object: operation_attr_id's attributes and those of its own Id.
template <class Id>
class op_attr {
public:
    template <Id attrId, class Value>
    attr_return<Id, attrId> set(const Value& v) {
        return exchange(values_, tag<Id, attrId>(), v);
    }
    template <operation_attr_id attrId, class Value>
    attr_return<operation_attr_id, attrId> set(const Value& v) {
        return exchange(values_, tag<operation_attr_id, attrId>(), v);
    }
    template <Id attrId>
    const attr_return<Id, attrId>& get() const {
        return value(values_, tag<Id, attrId>());
    }
    template <operation_attr_id attrId>
    const attr_return<operation_attr_id, attrId>& get() const {
        return value(values_, tag<operation_attr_id, attrId>());
    }

    const op_values& values() const { return values_; }

private:
    op_values values_;
};

}  // namespace detail

/* ---- Attribute objects (oneCCL's coll_attr.hpp, comm_attr.hpp, comm_split_attr.hpp, ...) ---- */

namespace v1 {

class allgather_attr : public detail::op_attr<allgather_attr_id> {};
class allgatherv_attr : public detail::op_attr<allgatherv_attr_id> {};
class allreduce_attr : public detail::op_attr<allreduce_attr_id> {};
class alltoall_attr : public detail::op_attr<alltoall_attr_id> {};
class alltoallv_attr : public detail::op_attr<alltoallv_attr_id> {};
class barrier_attr : public detail::op_attr<barrier_attr_id> {};
class broadcast_attr : public detail::op_attr<broadcast_attr_id> {};
class pt2pt_attr : public detail::op_attr<pt2pt_attr_id> {};
class reduce_attr : public detail::op_attr<reduce_attr_id> {};
class reduce_scatter_attr : public detail::op_attr<reduce_scatter_attr_id> {};

// Attribute objects that hold nothing but the (read-only) version.
template <class Id>
class version_only_attr {
public:
    template <Id attrId, class Value>
    Value set(const Value&) {
        static_assert(attrId == Id::version, "this attribute object has only the version");
        detail::read_only_version();
    }
    template <Id attrId>
    const detail::attr_type<Id, attrId>& get() const {
        static_assert(attrId == Id::version, "this attribute object has only the version");
        return detail::version_value();
    }
    template <Id attrId>
    bool is_valid() const noexcept {
        return attrId == Id::version;
    }
};

class comm_attr : public version_only_attr<comm_attr_id> {};
class init_attr : public version_only_attr<init_attr_id> {};

class comm_split_attr {
public:
    template <comm_split_attr_id attrId, class Value>
    Value set(const Value& v) {
        return exchange(detail::tag<comm_split_attr_id, attrId>(), v);
    }
    template <comm_split_attr_id attrId>
    const detail::attr_type<comm_split_attr_id, attrId>& get() const {
        return value(detail::tag<comm_split_attr_id, attrId>());
    }
    template <comm_split_attr_id attrId>
    bool is_valid() const noexcept {
        return attrId == comm_split_attr_id::version ||
               (attrId == comm_split_attr_id::color && color_set_) ||
               (attrId == comm_split_attr_id::group && group_set_);
    }

private:
    template <class V>
    V exchange(detail::tag<comm_split_attr_id, comm_split_attr_id::version>, const V&) {
        detail::read_only_version();
    }
    template <class V>
    V exchange(detail::tag<comm_split_attr_id, comm_split_attr_id::color>, const V& v) {
        V old = static_cast<V>(color_);
        color_ = static_cast<int>(v);
        color_set_ = true;
        return old;
    }
    template <class V>
    V exchange(detail::tag<comm_split_attr_id, comm_split_attr_id::group>, const V& v) {
        V old = static_cast<V>(group_);
        group_ = static_cast<split_group>(v);
        group_set_ = true;
        return old;
    }
    const library_version& value(
        detail::tag<comm_split_attr_id, comm_split_attr_id::version>) const {
        return detail::version_value();
    }
    const int& value(detail::tag<comm_split_attr_id, comm_split_attr_id::color>) const {
        return color_;
    }
    const split_group& value(detail::tag<comm_split_attr_id, comm_split_attr_id::group>) const {
        return group_;
    }

    int color_ = 0;
    bool color_set_ = false;
    split_group group_ = split_group::cluster;  // oneCCL's only group; no effect on the split
    bool group_set_ = false;
};

class kvs_attr {
public:
    template <kvs_attr_id attrId, class Value>
    Value set(const Value& v) {
        return exchange(detail::tag<kvs_attr_id, attrId>(), v);
    }
    template <kvs_attr_id attrId>
    const detail::attr_type<kvs_attr_id, attrId>& get() const {
        return value(detail::tag<kvs_attr_id, attrId>());
    }
    template <kvs_attr_id attrId>
    bool is_valid() const noexcept {
        return attrId == kvs_attr_id::version || (attrId == kvs_attr_id::ip_port && ip_port_);
    }

private:
    template <class V>
    V exchange(detail::tag<kvs_attr_id, kvs_attr_id::version>, const V&) {
        detail::read_only_version();
    }
    template <class V>
    V exchange(detail::tag<kvs_attr_id, kvs_attr_id::ip_port>, const V& v) {
        V old = V(value(detail::tag<kvs_attr_id, kvs_attr_id::ip_port>()));
        ip_port_ = std::make_shared<const string_class>(v);
        return old;
    }
    const library_version& value(detail::tag<kvs_attr_id, kvs_attr_id::version>) const {
        return detail::version_value();
    }
    const string_class& value(detail::tag<kvs_attr_id, kvs_attr_id::ip_port>) const {
        return ip_port_ ? *ip_port_ : detail::empty_string();
    }

    std::shared_ptr<const string_class> ip_port_;  // refused when set: see create_main_kvs
};

class datatype_attr {
public:
    template <datatype_attr_id attrId, class Value>
    Value set(const Value& v) {
        return exchange(detail::tag<datatype_attr_id, attrId>(), v);
    }
    template <datatype_attr_id attrId>
    const detail::attr_type<datatype_attr_id, attrId>& get() const {
        return value(detail::tag<datatype_attr_id, attrId>());
    }

private:
    template <class V>
    V exchange(detail::tag<datatype_attr_id, datatype_attr_id::version>, const V&) {
        detail::read_only_version();
    }
    template <class V>
    V exchange(detail::tag<datatype_attr_id, datatype_attr_id::size>, const V& v) {
        V old = static_cast<V>(size_);
        size_ = static_cast<size_t>(v);
        return old;
    }
    const library_version& value(detail::tag<datatype_attr_id, datatype_attr_id::version>) const {
        return detail::version_value();
    }
    const size_t& value(detail::tag<datatype_attr_id, datatype_attr_id::size>) const {
        return size_;
    }

    size_t size_ = 0;
};

// ccl::attr_val<id>(value): an argument of the create_*_attr calls.
#define CCL_ATTR_VAL(id_type)                                                            \
    template <id_type t, class value_type>                                               \
    constexpr detail::attr_value_triple<id_type, t, value_type> attr_val(value_type v) { \
        return detail::attr_value_triple<id_type, t, value_type>(v);                     \
    }
CCL_ATTR_VAL(operation_attr_id)
CCL_ATTR_VAL(allgather_attr_id)
CCL_ATTR_VAL(allgatherv_attr_id)
CCL_ATTR_VAL(allreduce_attr_id)
CCL_ATTR_VAL(alltoall_attr_id)
CCL_ATTR_VAL(alltoallv_attr_id)
CCL_ATTR_VAL(barrier_attr_id)
CCL_ATTR_VAL(broadcast_attr_id)
CCL_ATTR_VAL(pt2pt_attr_id)
CCL_ATTR_VAL(reduce_attr_id)
CCL_ATTR_VAL(reduce_scatter_attr_id)
CCL_ATTR_VAL(comm_split_attr_id)
CCL_ATTR_VAL(comm_attr_id)
CCL_ATTR_VAL(init_attr_id)
CCL_ATTR_VAL(kvs_attr_id)
CCL_ATTR_VAL(datatype_attr_id)
#undef CCL_ATTR_VAL

/* ---- Host devices, contexts and streams ---- */

// oneCCL's device, context and stream wrap SYCL objects; ccl has none, so these are the host's
// (ccl::create_device(), ccl::create_context(), ccl::create_stream()), accepted wherever oneCCL
// takes them, and all equal. Their SYCL constructors and get_native() are absent.
class device {
public:
    bool operator==(const device&) const noexcept { return true; }
    bool operator!=(const device&) const noexcept { return false; }
    bool operator<(const device&) const noexcept { return false; }
    template <device_attr_id attrId>
    const detail::attr_type<device_attr_id, attrId>& get() const {
        return value(detail::tag<device_attr_id, attrId>());
    }

private:
    const library_version& value(detail::tag<device_attr_id, device_attr_id::version>) const {
        return detail::version_value();
    }
    const cl_backend_type& value(detail::tag<device_attr_id, device_attr_id::cl_backend>) const {
        static const cl_backend_type host = cl_backend_type::empty_backend;
        return host;
    }
};

class context {
public:
    bool operator==(const context&) const noexcept { return true; }
    bool operator!=(const context&) const noexcept { return false; }
    bool operator<(const context&) const noexcept { return false; }
    template <context_attr_id attrId>
    const detail::attr_type<context_attr_id, attrId>& get() const {
        return value(detail::tag<context_attr_id, attrId>());
    }

private:
    const library_version& value(detail::tag<context_attr_id, context_attr_id::version>) const {
        return detail::version_value();
    }
    const cl_backend_type& value(detail::tag<context_attr_id, context_attr_id::cl_backend>) const {
        static const cl_backend_type host = cl_backend_type::empty_backend;
        return host;
    }
};

class stream {
public:
    template <stream_attr_id attrId>
    const detail::attr_type<stream_attr_id, attrId>& get() const {
        static_assert(attrId == stream_attr_id::version,
                      "a host stream has no native handle: SYCL queues are absent");
        return detail::version_value();
    }
};

}  // namespace v1

using v1::allgather_attr;
using v1::allgatherv_attr;
using v1::allreduce_attr;
using v1::alltoall_attr;
using v1::alltoallv_attr;
using v1::attr_val;
using v1::barrier_attr;
using v1::broadcast_attr;
using v1::comm_attr;
using v1::comm_split_attr;
using v1::context;
using v1::datatype_attr;
using v1::device;
using v1::init_attr;
using v1::kvs_attr;
using v1::pt2pt_attr;
using v1::reduce_attr;
using v1::reduce_scatter_attr;
using v1::stream;

namespace detail {

// The objects behind ccl::default_*_attr and ccl::default_stream: static members of a class
// template, so that every translation unit names the same ones without a library to define them.
template <class = void>
struct defaults {
    static allgather_attr allgather;
    static allgatherv_attr allgatherv;
    static allreduce_attr allreduce;
    static alltoall_attr alltoall;
    static alltoallv_attr alltoallv;
    static barrier_attr barrier;
    static broadcast_attr broadcast;
    static pt2pt_attr pt2pt;
    static reduce_attr reduce;
    static reduce_scatter_attr reduce_scatter;
    static comm_attr comm;
    static comm_split_attr comm_split;
    static init_attr init;
    static kvs_attr kvs;
    static stream host_stream;
};
template <class T>
allgather_attr defaults<T>::allgather;
template <class T>
allgatherv_attr defaults<T>::allgatherv;
template <class T>
allreduce_attr defaults<T>::allreduce;
template <class T>
alltoall_attr defaults<T>::alltoall;
template <class T>
alltoallv_attr defaults<T>::alltoallv;
template <class T>
barrier_attr defaults<T>::barrier;
template <class T>
broadcast_attr defaults<T>::broadcast;
template <class T>
pt2pt_attr defaults<T>::pt2pt;
template <class T>
reduce_attr defaults<T>::reduce;
template <class T>
reduce_scatter_attr defaults<T>::reduce_scatter;
template <class T>
comm_attr defaults<T>::comm;
template <class T>
comm_split_attr defaults<T>::comm_split;
template <class T>
init_attr defaults<T>::init;
template <class T>
kvs_attr defaults<T>::kvs;
template <class T>
stream defaults<T>::host_stream;

}  // namespace detail

namespace v1 {
// oneCCL's are global objects its library defines; these refer to detail::defaults' (a constexpr
// reference: C++11 has no inline variables).
constexpr allgather_attr& default_allgather_attr = detail::defaults<>::allgather;
constexpr allgatherv_attr& default_allgatherv_attr = detail::defaults<>::allgatherv;
constexpr allreduce_attr& default_allreduce_attr = detail::defaults<>::allreduce;
constexpr alltoall_attr& default_alltoall_attr = detail::defaults<>::alltoall;
constexpr alltoallv_attr& default_alltoallv_attr = detail::defaults<>::alltoallv;
constexpr barrier_attr& default_barrier_attr = detail::defaults<>::barrier;
constexpr broadcast_attr& default_broadcast_attr = detail::defaults<>::broadcast;
constexpr pt2pt_attr& default_pt2pt_attr = detail::defaults<>::pt2pt;
constexpr reduce_attr& default_reduce_attr = detail::defaults<>::reduce;
constexpr reduce_scatter_attr& default_reduce_scatter_attr = detail::defaults<>::reduce_scatter;
constexpr comm_attr& default_comm_attr = detail::defaults<>::comm;
constexpr comm_split_attr& default_comm_split_attr = detail::defaults<>::comm_split;
constexpr init_attr& default_init_attr = detail::defaults<>::init;
constexpr kvs_attr& default_kvs_attr = detail::defaults<>::kvs;
constexpr stream& default_stream = detail::defaults<>::host_stream;
}  // namespace v1

using v1::default_allgather_attr;
using v1::default_allgatherv_attr;
using v1::default_allreduce_attr;
using v1::default_alltoall_attr;
using v1::default_alltoallv_attr;
using v1::default_barrier_attr;
using v1::default_broadcast_attr;
using v1::default_comm_attr;
using v1::default_comm_split_attr;
using v1::default_init_attr;
using v1::default_kvs_attr;
using v1::default_pt2pt_attr;
using v1::default_reduce_attr;
using v1::default_reduce_scatter_attr;
using v1::default_stream;

/* ---- Events ---- */

namespace v1 {
class event;
class communicator;
class kvs;
}  // namespace v1

namespace detail {

// This thread's groups (ccl_group_start / ccl_group_end belong to the calling thread): their
// depth, how many outermost groups ended (an operation's group is open while this has not
// moved), and the unfinished operations whose events went while their group was open.
struct pending;
struct group_state {
    int depth = 0;
    unsigned long ended = 0;
    std::vector<std::unique_ptr<pending>> orphans;
};
inline group_state& this_thread_group();

// One started operation: its ccl request, and what must live until it completes.
struct pending {
    ccl_request_t req = nullptr;
    // A host copy for forms ccl takes as one buffer (allgatherv into a vector of buffers, an
    // alltoallv in place); `unstage` copies it out once the request succeeded.
    std::vector<char> staging;
    std::function<void(const pending&)> unstage;
    bool grouped = false;
    unsigned long group = 0;

    pending() = default;
    pending(const pending&) = delete;
    pending& operator=(const pending&) = delete;
    ~pending() {
        if (req) ccl_request_free(req);
    }

    // Issued inside a group that has not ended on this thread: ccl runs it at ccl_group_end.
    bool group_open() const {
        if (!grouped) return false;  // (then this thread's group state is not touched)
        const group_state& g = this_thread_group();
        return g.depth > 0 && g.ended == group;
    }
    void finish() const {
        if (unstage) unstage(*this);
    }
};

inline group_state& this_thread_group() {
    static thread_local group_state g;
    return g;
}

struct access;

}  // namespace detail

namespace v1 {

class event {
public:
    using impl_value_t = std::unique_ptr<detail::pending>;

    event() noexcept = default;  // complete
    explicit event(impl_value_t&& impl) noexcept : p_(std::move(impl)) {}
    event(event&& src) noexcept
        : p_(std::move(src.p_)),
          failure_(std::move(src.failure_)),
          failure_code_(src.failure_code_) {}
    event& operator=(event&& src) noexcept {
        if (this != &src) {
            finish_quietly();
            p_ = std::move(src.p_);
            failure_ = std::move(src.failure_);
            failure_code_ = src.failure_code_;
        }
        return *this;
    }
    event(const event&) = delete;
    event& operator=(const event&) = delete;
    ~event() noexcept { finish_quietly(); }

    bool operator==(const event& rhs) const noexcept {
        return this == &rhs || (p_ && p_ == rhs.p_);
    }
    bool operator!=(const event& rhs) const noexcept { return !(*this == rhs); }

    explicit operator bool() { return test(); }

    // Blocks until the operation completes; throws ccl::exception if it failed (again at every
    // later wait or test).
    void wait() { wait_const(); }

    // true once the operation completed (throws if it failed); never blocks.
    bool test() {
        rethrow();
        if (!p_) return true;
        if (p_->group_open()) return false;
        int done = 0;
        const ccl_result_t r = ccl_test(p_->req, &done);
        if (r != CCL_SUCCESS) fail(r);
        if (!done) return false;
        complete();
        return true;
    }

    // oneCCL's host events cannot be cancelled either.
    bool cancel() {
        detail::refuse("ccl::event::cancel", "an operation cannot be cancelled once started");
    }

private:
    friend struct detail::access;

    void wait_const() const {
        rethrow();
        if (!p_) return;
        if (p_->group_open())
            detail::refuse("ccl::event::wait",
                           "the operation belongs to a group that has not ended on this thread: "
                           "call ccl::group_end() first");
        const ccl_result_t r = ccl_wait(p_->req);
        if (r != CCL_SUCCESS) fail(r);
        complete();
    }
    void complete() const {
        p_->finish();
        p_.reset();
    }
    [[noreturn]] void fail(ccl_result_t r) const {
        failure_code_ = r;
        failure_ = detail::last_error(r);
        p_.reset();
        detail::throw_result(r, failure_);
    }
    void rethrow() const {
        if (!failure_.empty()) detail::throw_result(failure_code_, failure_);
    }
    // An event that goes before its operation completed waits for it, as oneCCL's host events
    // do; a destructor cannot throw, so a failure is reported on stderr. An operation whose group
    // is still open cannot be waited on yet: ccl::group_end finishes it.
    void finish_quietly() noexcept {
        if (!p_) return;
        if (p_->group_open()) {
            try {
                detail::this_thread_group().orphans.push_back(std::move(p_));
            } catch (...) {
                p_.release();  // out of memory: leak it rather than free what ccl will write
            }
            return;
        }
        const ccl_result_t r = ccl_wait(p_->req);
        if (r == CCL_SUCCESS) {
            p_->finish();
        } else {
            std::fprintf(stderr, "ccl: an operation whose event was destroyed failed: %s\n",
                         detail::last_error(r).c_str());
        }
        p_.reset();
    }

    mutable impl_value_t p_;  // null: complete
    mutable std::string failure_;
    mutable ccl_result_t failure_code_ = CCL_SUCCESS;
};

}  // namespace v1

using v1::event;

/* ---- Key-value store ---- */

namespace v1 {

class kvs_interface {
public:
    virtual ~kvs_interface() = default;
    virtual vector_class<char> get(const string_class& key) = 0;
    virtual void set(const string_class& key, const vector_class<char>& data) = 0;

    // ccl's own store (ccl::kvs) answers its C handle. A store of the application's answers
    // null, and ccl refuses it: ccl's communicators bootstrap through ccl's KVS only.
    virtual ccl_kvs_t ccl_handle() const noexcept { return nullptr; }
};

// The main KVS (ccl::create_main_kvs: this process serves it) or a connection to one
// (ccl::create_kvs(address)). Destroying the main one stops its server: keep it until every rank
// has created its communicators.
class kvs final : public kvs_interface {
public:
    static constexpr size_t address_max_size = 256;
    using address_type = array_class<char, address_max_size>;
    static_assert(address_max_size >= CCL_KVS_ADDRESS_MAX,
                  "ccl's KVS address must fit oneCCL's address_type");

    // Made by ccl::create_main_kvs and ccl::create_kvs, which own `handle` until then.
    explicit kvs(ccl_kvs_t handle) noexcept : h_(handle) {}
    kvs(const kvs&) = delete;
    kvs& operator=(const kvs&) = delete;
    ~kvs() override {
        if (h_) ccl_kvs_destroy(h_);
    }

    // NUL-terminated, zero-padded to address_max_size bytes.
    address_type get_address() const {
        address_type a;
        a.fill('\0');
        detail::check(ccl_kvs_get_address(h_, a.data(), a.size()));
        return a;
    }

    // ccl's C ABI has no calls to store or read the application's own keys.
    vector_class<char> get(const string_class&) override {
        detail::refuse("ccl::kvs::get",
                       "ccl's KVS holds only what ccl's communicators need to start: its C ABI "
                       "has no get or set for the application's keys");
    }
    void set(const string_class&, const vector_class<char>&) override {
        detail::refuse("ccl::kvs::set",
                       "ccl's KVS holds only what ccl's communicators need to start: its C ABI "
                       "has no get or set for the application's keys");
    }

    ccl_kvs_t ccl_handle() const noexcept override { return h_; }

private:
    ccl_kvs_t h_;
};

}  // namespace v1

using v1::kvs;
using v1::kvs_interface;

/* ---- Communicators ---- */

namespace detail {

// Owns a ccl communicator; rank and size are fixed at creation and read once.
struct comm_handle {
    ccl_comm_t comm = nullptr;
    int rank = 0;
    int size = 0;

    explicit comm_handle(ccl_comm_t c) : comm(c) {}
    comm_handle(const comm_handle&) = delete;
    comm_handle& operator=(const comm_handle&) = delete;
    ~comm_handle() {
        if (comm) ccl_comm_destroy(comm);
    }
};

}  // namespace detail

namespace v1 {

class communicator final {
public:
    communicator(communicator&& src) noexcept = default;
    communicator& operator=(communicator&& src) noexcept = default;
    communicator(const communicator&) = delete;
    communicator& operator=(const communicator&) = delete;
    ~communicator() = default;

    int rank() const { return handle("ccl::communicator::rank").rank; }
    int size() const { return handle("ccl::communicator::size").size; }
    device get_device() const { return device(); }
    context get_context() const { return context(); }

    // Collective over this communicator (ccl_comm_split): ranks passing the same color form a
    // new communicator, ranked as they are in this one. (The group attribute has no effect, as
    // in oneCCL.)
    communicator split(const comm_split_attr& attr) { return split_const(attr); }

private:
    friend struct detail::access;

    communicator() noexcept = default;

    // Takes `c` (NULL, which ccl's split gives a rank passing CCL_UNDEFINED: an empty one).
    static communicator adopt(ccl_comm_t c) {
        communicator made;
        if (!c) return made;
        try {
            made.h_ = detail::make_unique<detail::comm_handle>(c);
        } catch (...) {
            ccl_comm_destroy(c);
            throw;
        }
        detail::check(ccl_comm_rank(c, &made.h_->rank));
        detail::check(ccl_comm_size(c, &made.h_->size));
        return made;
    }

    communicator split_const(const comm_split_attr& attr) const {
        const detail::comm_handle& h = handle("ccl::communicator::split");
        if (!attr.is_valid<comm_split_attr_id::color>())
            detail::bad_argument("ccl::communicator::split",
                                 "the comm_split_attr has no color (comm_split_attr_id::color)");
        ccl_comm_t sub = nullptr;
        detail::check(ccl_comm_split(h.comm, attr.get<comm_split_attr_id::color>(), h.rank, &sub));
        return adopt(sub);
    }

    const detail::comm_handle& handle(const char* function) const {
        if (!h_)
            detail::bad_argument(function,
                                 "the communicator is empty (moved from, or split off with "
                                 "color CCL_UNDEFINED)");
        return *h_;
    }

    std::unique_ptr<detail::comm_handle> h_;
};

}  // namespace v1

using v1::communicator;

/* ---- Datatypes, reductions and attributes, translated for the C ABI ---- */

namespace detail {

struct access {
    static const comm_handle& handle(const communicator& c, const char* function) {
        return c.handle(function);
    }
    static communicator make(ccl_comm_t c) { return communicator::adopt(c); }
    static communicator split(const communicator& c, const comm_split_attr& attr) {
        return c.split_const(attr);
    }
    static void wait_all(const vector_class<event>& deps) {
        for (const event& e : deps) e.wait_const();
    }
};

// Datatypes the program registered (ccl::register_datatype): they move as bytes.
struct datatype_registry {
    std::mutex lock;
    std::map<int, size_t> sizes;
    int next = static_cast<int>(datatype::bfloat16) + 1;
};
inline datatype_registry& registry() {
    static datatype_registry r;
    return r;
}

inline size_t predefined_size(datatype d) {
    switch (d) {
        case datatype::int8:
        case datatype::uint8: return 1;
        case datatype::int16:
        case datatype::uint16:
        case datatype::float16:
        case datatype::bfloat16: return 2;
        case datatype::int32:
        case datatype::uint32:
        case datatype::float32: return 4;
        case datatype::int64:
        case datatype::uint64:
        case datatype::float64: return 8;
        default: return 0;
    }
}

inline size_t registered_size(datatype d) {
    datatype_registry& r = registry();
    std::lock_guard<std::mutex> hold(r.lock);
    std::map<int, size_t>::const_iterator it = r.sizes.find(static_cast<int>(d));
    return it == r.sizes.end() ? 0 : it->second;
}

// A datatype as the C ABI takes it: ccl's own, or a registered one as `scale` bytes an element.
struct c_type {
    ccl_datatype_t dtype;
    size_t scale;  // C elements per element of the caller's datatype
    size_t bytes;  // bytes per element of the caller's datatype
};

inline c_type to_c(datatype d, const char* function, bool reduced) {
    switch (d) {
        case datatype::int8: return {CCL_INT8, 1, 1};
        case datatype::uint8: return {CCL_UINT8, 1, 1};
        case datatype::int16: return {CCL_INT16, 1, 2};
        case datatype::uint16: return {CCL_UINT16, 1, 2};
        case datatype::int32: return {CCL_INT32, 1, 4};
        case datatype::uint32: return {CCL_UINT32, 1, 4};
        case datatype::int64: return {CCL_INT64, 1, 8};
        case datatype::uint64: return {CCL_UINT64, 1, 8};
        case datatype::float16: return {CCL_FLOAT16, 1, 2};
        case datatype::float32: return {CCL_FLOAT32, 1, 4};
        case datatype::float64: return {CCL_FLOAT64, 1, 8};
        case datatype::bfloat16: return {CCL_BFLOAT16, 1, 2};
        default: break;
    }
    const size_t bytes = registered_size(d);
    if (!bytes)
        bad_argument(function, "datatype " + std::to_string(static_cast<int>(d)) +
                                   " is neither predefined nor registered");
    if (reduced)
        refuse(function, "registered datatype " + std::to_string(static_cast<int>(d)) +
                             " cannot be reduced: that takes a custom reduction, which ccl does "
                             "not have");
    return {CCL_UINT8, bytes, bytes};
}

inline ccl_reduction_t to_c(reduction r, const function_holder<reduction_fn>& fn,
                            const char* function) {
    if (fn.get() || r == reduction::custom)
        refuse(function,
               "custom reductions (reduction::custom, reduction_fn) are not supported: ccl "
               "reduces with sum, prod, min and max");
    switch (r) {
        case reduction::sum: return CCL_SUM;
        case reduction::prod: return CCL_PROD;
        case reduction::min: return CCL_MIN;
        case reduction::max: return CCL_MAX;
        default:
            bad_argument(function,
                         "reduction " + std::to_string(static_cast<int>(r)) + " is not one");
    }
}

// count elements of the caller's datatype, in the C ABI's elements.
inline size_t scaled(size_t count, const c_type& t, const char* function) {
    if (t.scale > 1 && count > SIZE_MAX / t.scale)
        bad_argument(function, "count " + std::to_string(count) +
                                   " of a registered datatype overflows the address space");
    return count * t.scale;
}

// One count per rank of the communicator, as the C ABI reads them.
inline vector_class<size_t> per_rank(const vector_class<size_t>& counts, const c_type& t,
                                     const comm_handle& h, const char* what, const char* function) {
    if (counts.size() != static_cast<size_t>(h.size))
        bad_argument(function, std::string(what) + " has " + std::to_string(counts.size()) +
                                   " entries for a communicator of " + std::to_string(h.size) +
                                   " ranks");
    vector_class<size_t> c(counts.size());
    for (size_t i = 0; i < counts.size(); ++i) c[i] = scaled(counts[i], t, function);
    return c;
}

inline size_t sum_bytes(const vector_class<size_t>& c_counts, const c_type& t,
                        const char* function) {
    const size_t unit = t.bytes / t.scale;  // bytes of one C element
    size_t total = 0;
    for (size_t n : c_counts) {
        if (n > (SIZE_MAX - total) / unit)
            bad_argument(function, "the counts add up past the address space");
        total += n * unit;
    }
    return total;
}

// ccl_coll_attr_t from an operation's attributes. to_cache without a match_id caches nothing
// (ccl caches only under a name).
inline ccl_coll_attr_t to_c(const op_values& a) {
    ccl_coll_attr_t c = CCL_COLL_ATTR_INIT;
    if (a.to_cache && a.match_id && !a.match_id->empty()) {
        c.to_cache = 1;
        c.match_id = a.match_id->c_str();
    }
    c.synchronous = a.synchronous ? 1 : 0;
    c.priority = a.priority > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(a.priority);
    return c;
}

inline std::unique_ptr<pending> make_pending() { return make_unique<pending>(); }

inline void stage(pending& p, size_t bytes, const char* function) {
    try {
        p.staging.resize(bytes);
    } catch (const std::bad_alloc&) {
        throw host_bad_alloc(full_message{std::string("ccl: ") + function + ": no memory for " +
                                          std::to_string(bytes) + " bytes of staging"});
    }
}

// Starts one C call after `deps` completed and returns its event. `call` gets where to store the
// request. `wait_now`: complete before returning (`synchronous` for the C calls that take no
// attributes), unless a group records the call.
template <class Call>
event start(const vector_class<event>& deps, Call call, std::unique_ptr<pending> p = nullptr,
            bool wait_now = false) {
    access::wait_all(deps);
    if (!p) p = make_pending();
    ccl_request_t req = nullptr;
    const ccl_result_t r = call(&req);
    if (r != CCL_SUCCESS) {
        const std::string why = last_error(r);
        if (req) ccl_request_free(req);
        throw_result(r, why);
    }
    p->req = req;
    const group_state& g = this_thread_group();
    if (g.depth > 0) {
        p->grouped = true;
        p->group = g.ended;
    }
    event e(std::move(p));
    if (wait_now && g.depth == 0) e.wait();
    return e;
}

template <class T>
vector_class<void*> as_void(const vector_class<T*>& bufs) {
    return vector_class<void*>(bufs.begin(), bufs.end());
}

}  // namespace detail

/* ---- Library, datatypes, KVS, communicators, groups (oneCCL's api_functions.hpp) ---- */

namespace detail {
inline const library_version& version_value() {
    static const library_version v = [] {
        int major = 0, minor = 0, patch = 0;
        ccl_get_version(&major, &minor, &patch);
        static const std::string full = "ccl " + std::to_string(major) + "." +
                                        std::to_string(minor) + "." + std::to_string(patch) +
                                        " (oneCCL 2021.14 host API)";
        library_version l = {CCL_MAJOR_VERSION,    CCL_MINOR_VERSION,      CCL_UPDATE_VERSION,
                             CCL_PRODUCT_STATUS,   CCL_PRODUCT_BUILD_DATE, full.c_str(),
                             string_class("EMPTY")};
        return l;
    }();
    return v;
}
}  // namespace detail

namespace v1 {

template <class... attr_val_type>
init_attr create_init_attr(attr_val_type&&... avs) {
    init_attr a;
    int expander[]{0, (a.template set<std::decay<attr_val_type>::type::idx()>(avs.val()), 0)...};
    (void)expander;
    return a;
}

// ccl sets itself up at its first call: nothing to do here.
inline void init(const init_attr& attr = default_init_attr) { (void)attr; }

// major, minor and update are the oneCCL API level of these headers (CCL_MAJOR_VERSION...);
// `full` names ccl and its own version, as the library reports it (ccl_get_version).
inline library_version get_library_version() { return detail::version_value(); }

template <class... attr_val_type>
datatype_attr create_datatype_attr(attr_val_type&&... avs) {
    static_assert(sizeof...(avs) > 0, "At least one argument must be specified");
    datatype_attr a;
    int expander[]{0, (a.template set<std::decay<attr_val_type>::type::idx()>(avs.val()), 0)...};
    (void)expander;
    return a;
}

// A datatype of `size` bytes (datatype_attr_id::size) for the operations that move data without
// reducing it (ccl moves it as bytes); reducing one is refused, as oneCCL refuses it without a
// custom reduction.
inline datatype register_datatype(const datatype_attr& attr) {
    const size_t size = attr.get<datatype_attr_id::size>();
    if (size == 0)
        detail::bad_argument("ccl::register_datatype",
                             "the datatype_attr has no size (datatype_attr_id::size)");
    detail::datatype_registry& r = detail::registry();
    std::lock_guard<std::mutex> hold(r.lock);
    if (r.next == INT_MAX)
        detail::bad_argument("ccl::register_datatype", "no datatype ids are left");
    const int id = r.next++;
    r.sizes[id] = size;
    return static_cast<datatype>(id);
}

inline void deregister_datatype(datatype dtype) {
    detail::datatype_registry& r = detail::registry();
    std::lock_guard<std::mutex> hold(r.lock);
    if (!r.sizes.erase(static_cast<int>(dtype)))
        detail::bad_argument("ccl::deregister_datatype",
                             "datatype " + std::to_string(static_cast<int>(dtype)) +
                                 " was not registered (predefined ones cannot be deregistered)");
}

inline size_t get_datatype_size(datatype dtype) {
    const size_t n = detail::predefined_size(dtype);
    if (n) return n;
    return detail::to_c(dtype, "ccl::get_datatype_size", false).bytes;
}

template <class... attr_val_type>
kvs_attr create_kvs_attr(attr_val_type&&... avs) {
    kvs_attr a;
    int expander[]{0, (a.template set<std::decay<attr_val_type>::type::idx()>(avs.val()), 0)...};
    (void)expander;
    return a;
}

inline void check_kvs_attr(const kvs_attr& attr, const char* function) {
    if (attr.is_valid<kvs_attr_id::ip_port>())
        detail::refuse(function,
                       "kvs_attr_id::ip_port is not supported: ccl's KVS serves on the interface "
                       "CCL_KVS_IFACE names (docs/env.md)");
}

inline shared_ptr_class<kvs> create_main_kvs(const kvs_attr& attr = default_kvs_attr) {
    check_kvs_attr(attr, "ccl::create_main_kvs");
    ccl_kvs_t h = nullptr;
    detail::check(ccl_kvs_create_main(&h));
    try {
        return std::make_shared<kvs>(h);
    } catch (...) {
        ccl_kvs_destroy(h);
        throw;
    }
}

inline shared_ptr_class<kvs> create_kvs(const kvs::address_type& addr,
                                        const kvs_attr& attr = default_kvs_attr) {
    check_kvs_attr(attr, "ccl::create_kvs");
    if (!std::memchr(addr.data(), '\0', addr.size()))
        detail::bad_argument("ccl::create_kvs", "the address has no NUL within its " +
                                                    std::to_string(addr.size()) + " bytes");
    ccl_kvs_t h = nullptr;
    detail::check(ccl_kvs_connect(addr.data(), &h));
    try {
        return std::make_shared<kvs>(h);
    } catch (...) {
        ccl_kvs_destroy(h);
        throw;
    }
}

inline device create_device() { return device(); }
inline context create_context() { return context(); }
inline stream create_stream() { return stream(); }

template <class... attr_val_type>
comm_attr create_comm_attr(attr_val_type&&... avs) {
    comm_attr a;
    int expander[]{0, (a.template set<std::decay<attr_val_type>::type::idx()>(avs.val()), 0)...};
    (void)expander;
    return a;
}

// Collective: every rank of the new communicator calls it, with the same size and its own rank.
inline communicator create_communicator(int size, int rank, shared_ptr_class<kvs_interface> kvs,
                                        const comm_attr& attr = default_comm_attr) {
    (void)attr;
    static const char fn[] = "ccl::create_communicator";
    if (!kvs) detail::bad_argument(fn, "the kvs is null");
    const ccl_kvs_t k = kvs->ccl_handle();
    if (!k)
        detail::refuse(fn,
                       "the kvs is the application's own kvs_interface: ccl's communicators "
                       "bootstrap through ccl's KVS only (ccl::create_main_kvs, ccl::create_kvs)");
    ccl_comm_t c = nullptr;
    detail::check(ccl_comm_create(size, rank, k, &c));
    return detail::access::make(c);
}

}  // namespace v1

namespace detail {
template <class DeviceType, class ContextType>
void check_host(const char* function) {
    static_assert(std::is_same<typename std::decay<DeviceType>::type, device>::value,
                  "ccl: only host devices (ccl::create_device()) are supported: SYCL devices are "
                  "absent (docs/oneccl.md)");
    static_assert(std::is_same<typename std::decay<ContextType>::type, context>::value,
                  "ccl: only host contexts (ccl::create_context()) are supported: SYCL contexts "
                  "are absent (docs/oneccl.md)");
    (void)function;
}

// oneCCL's create_communicators make several ranks of one process at once; ccl makes one per
// process (its creation is collective and one at a time within a process).
template <class Map>
communicator one_rank(int size, const Map& ranks, shared_ptr_class<kvs_interface> kvs,
                      const comm_attr& attr, const char* function) {
    if (ranks.size() != 1)
        refuse(function, std::to_string(ranks.size()) +
                             " ranks in one process: ccl makes one rank of a communicator per "
                             "process");
    return v1::create_communicator(size, static_cast<int>(ranks.begin()->first), kvs, attr);
}
}  // namespace detail

namespace v1 {

template <class DeviceType, class ContextType>
communicator create_communicator(int size, int rank, DeviceType& device, const ContextType& context,
                                 shared_ptr_class<kvs_interface> kvs,
                                 const comm_attr& attr = default_comm_attr) {
    detail::check_host<DeviceType, ContextType>("ccl::create_communicator");
    (void)device;
    (void)context;
    return create_communicator(size, rank, kvs, attr);
}

template <class DeviceType, class ContextType>
vector_class<communicator> create_communicators(
    int size, const vector_class<pair_class<int, DeviceType>>& devices, const ContextType& context,
    shared_ptr_class<kvs_interface> kvs, const comm_attr& attr = default_comm_attr) {
    detail::check_host<DeviceType, ContextType>("ccl::create_communicators");
    (void)context;
    vector_class<communicator> comms;
    comms.push_back(detail::one_rank(size, devices, kvs, attr, "ccl::create_communicators"));
    return comms;
}

template <class DeviceType, class ContextType>
vector_class<communicator> create_communicators(int size, const map_class<int, DeviceType>& devices,
                                                const ContextType& context,
                                                shared_ptr_class<kvs_interface> kvs,
                                                const comm_attr& attr = default_comm_attr) {
    detail::check_host<DeviceType, ContextType>("ccl::create_communicators");
    (void)context;
    vector_class<communicator> comms;
    comms.push_back(detail::one_rank(size, devices, kvs, attr, "ccl::create_communicators"));
    return comms;
}

// Groups (ccl_group_start / ccl_group_end, NCCL's semantics): the operations this thread issues
// in between run at the outermost group_end.
inline void group_start() {
    detail::check(ccl_group_start());
    ++detail::this_thread_group().depth;
}

inline void group_end() {
    detail::group_state& g = detail::this_thread_group();
    const ccl_result_t r = ccl_group_end();
    std::string why = r == CCL_SUCCESS ? std::string() : detail::last_error(r);
    if (g.depth == 0) {  // no ccl::group_start: ccl says so (or the C ABI's group was opened)
        if (r != CCL_SUCCESS) detail::throw_result(r, why);
        return;
    }
    if (--g.depth > 0) {
        if (r != CCL_SUCCESS) detail::throw_result(r, why);
        return;
    }
    ++g.ended;
    // The group's operations whose events went while it was open: finished now.
    std::vector<std::unique_ptr<detail::pending>> orphans;
    orphans.swap(g.orphans);
    ccl_result_t first = r;
    for (std::unique_ptr<detail::pending>& p : orphans) {
        const ccl_result_t w = ccl_wait(p->req);
        if (w == CCL_SUCCESS) {
            p->finish();
        } else if (first == CCL_SUCCESS) {
            first = w;
            why = detail::last_error(w);
        }
    }
    if (first != CCL_SUCCESS) detail::throw_result(first, why);
}

template <class coll_attribute_type, class... attr_val_type>
coll_attribute_type create_operation_attr(attr_val_type&&... avs) {
    coll_attribute_type a;
    int expander[]{0, (a.template set<std::decay<attr_val_type>::type::idx()>(avs.val()), 0)...};
    (void)expander;
    return a;
}

}  // namespace v1

namespace preview {

template <class... attr_val_type>
comm_split_attr create_comm_split_attr(attr_val_type&&... avs) {
    comm_split_attr a;
    int expander[]{0, (a.template set<std::decay<attr_val_type>::type::idx()>(avs.val()), 0)...};
    (void)expander;
    return a;
}

// Without a rank, oneCCL's KVS numbers the ranks; ccl's takes each rank's number.
template <class DeviceType, class ContextType>
vector_class<communicator> create_communicators(int size, const vector_class<DeviceType>& devices,
                                                const ContextType& context,
                                                shared_ptr_class<kvs_interface> kvs,
                                                const comm_attr& attr = default_comm_attr) {
    detail::check_host<DeviceType, ContextType>("ccl::preview::create_communicators");
    (void)size, (void)devices, (void)context, (void)kvs, (void)attr;
    detail::refuse("ccl::preview::create_communicators",
                   "a communicator without ranks is not supported: ccl takes each rank's number "
                   "(ccl::create_communicators with pairs of rank and device)");
}

inline communicator create_communicator(int size, shared_ptr_class<kvs_interface> kvs,
                                        const comm_attr& attr = default_comm_attr) {
    (void)size, (void)kvs, (void)attr;
    detail::refuse("ccl::preview::create_communicator",
                   "a communicator without a rank is not supported: ccl takes each rank's "
                   "number (ccl::create_communicator(size, rank, kvs))");
}

// The job's communicator, from the launcher that started the process (ccl_comm_create_from_env:
// cclrun, mpiexec, torchrun, srun; one rank without any; docs/launching.md).
inline communicator create_communicator(const comm_attr& attr = default_comm_attr) {
    (void)attr;
    ccl_comm_t c = nullptr;
    detail::check(ccl_comm_create_from_env(&c));
    return detail::access::make(c);
}

inline vector_class<communicator> split_communicators(
    const vector_class<pair_class<communicator, comm_split_attr>>& attrs) {
    if (attrs.size() != 1)
        detail::refuse("ccl::preview::split_communicators",
                       std::to_string(attrs.size()) +
                           " communicators in one process: ccl has one rank per process");
    vector_class<communicator> comms;
    comms.push_back(detail::access::split(attrs[0].first, attrs[0].second));
    return comms;
}

}  // namespace preview

/* ---- Collective and point-to-point operations ---- */

namespace v1 {

// Every operation takes a host stream (ccl::create_stream(), ccl::default_stream) where oneCCL
// takes a stream; ccl has no other kind, so the overloads with one do what those without do.

/* allgather: recv (size * send_count elements) gets every rank's send_count elements. */

inline event allgather(const void* send_buf, void* recv_buf, size_t send_count, datatype dtype,
                       const communicator& comm,
                       const allgather_attr& attr = default_allgather_attr,
                       const vector_class<event>& deps = {}) {
    static const char fn[] = "ccl::allgather";
    const detail::c_type t = detail::to_c(dtype, fn, false);
    const ccl_comm_t c = detail::access::handle(comm, fn).comm;
    const size_t n = detail::scaled(send_count, t, fn);
    const ccl_coll_attr_t a = detail::to_c(attr.values());
    return detail::start(deps, [&](ccl_request_t* req) {
        return ccl_allgather(send_buf, recv_buf, n, t.dtype, c, &a, req);
    });
}

inline event allgather(const void* send_buf, void* recv_buf, size_t send_count, datatype dtype,
                       const communicator& comm, const stream& stream,
                       const allgather_attr& attr = default_allgather_attr,
                       const vector_class<event>& deps = {}) {
    (void)stream;
    return allgather(send_buf, recv_buf, send_count, dtype, comm, attr, deps);
}

// oneCCL takes a vector of receive buffers for allgatherv only, and refuses it here.
inline event allgather(const void*, const vector_class<void*>&, size_t, datatype,
                       const communicator&, const allgather_attr& = default_allgather_attr,
                       const vector_class<event>& = {}) {
    detail::refuse("ccl::allgather",
                   "a vector of receive buffers is taken by allgatherv only (as in oneCCL)");
}

inline event allgather(const void* send_buf, const vector_class<void*>& recv_bufs,
                       size_t send_count, datatype dtype, const communicator& comm,
                       const stream& stream, const allgather_attr& attr = default_allgather_attr,
                       const vector_class<event>& deps = {}) {
    (void)stream;
    return allgather(send_buf, recv_bufs, send_count, dtype, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event allgather(const BufferType* send_buf, BufferType* recv_buf, size_t send_count,
                const communicator& comm, const allgather_attr& attr = default_allgather_attr,
                const vector_class<event>& deps = {}) {
    return allgather(send_buf, recv_buf, send_count, native_type_info<BufferType>::dtype, comm,
                     attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event allgather(const BufferType* send_buf, BufferType* recv_buf, size_t send_count,
                const communicator& comm, const stream& stream,
                const allgather_attr& attr = default_allgather_attr,
                const vector_class<event>& deps = {}) {
    (void)stream;
    return allgather(send_buf, recv_buf, send_count, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event allgather(const BufferType* send_buf, vector_class<BufferType*>& recv_bufs, size_t send_count,
                const communicator& comm, const allgather_attr& attr = default_allgather_attr,
                const vector_class<event>& deps = {}) {
    return allgather(send_buf, detail::as_void(recv_bufs), send_count,
                     native_type_info<BufferType>::dtype, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event allgather(const BufferType* send_buf, vector_class<BufferType*>& recv_bufs, size_t send_count,
                const communicator& comm, const stream& stream,
                const allgather_attr& attr = default_allgather_attr,
                const vector_class<event>& deps = {}) {
    (void)stream;
    return allgather(send_buf, recv_bufs, send_count, comm, attr, deps);
}

/* allgatherv: recv gets rank r's recv_counts[r] elements for every r, packed in rank order. */

inline event allgatherv(const void* send_buf, size_t send_count, void* recv_buf,
                        const vector_class<size_t>& recv_counts, datatype dtype,
                        const communicator& comm,
                        const allgatherv_attr& attr = default_allgatherv_attr,
                        const vector_class<event>& deps = {}) {
    static const char fn[] = "ccl::allgatherv";
    const detail::c_type t = detail::to_c(dtype, fn, false);
    const detail::comm_handle& h = detail::access::handle(comm, fn);
    const vector_class<size_t> counts = detail::per_rank(recv_counts, t, h, "recv_counts", fn);
    const size_t n = detail::scaled(send_count, t, fn);
    const ccl_coll_attr_t a = detail::to_c(attr.values());
    return detail::start(deps, [&](ccl_request_t* req) {
        return ccl_allgatherv(send_buf, n, recv_buf, counts.data(), t.dtype, h.comm, &a, req);
    });
}

inline event allgatherv(const void* send_buf, size_t send_count, void* recv_buf,
                        const vector_class<size_t>& recv_counts, datatype dtype,
                        const communicator& comm, const stream& stream,
                        const allgatherv_attr& attr = default_allgatherv_attr,
                        const vector_class<event>& deps = {}) {
    (void)stream;
    return allgatherv(send_buf, send_count, recv_buf, recv_counts, dtype, comm, attr, deps);
}

// Rank r's block lands in recv_bufs[r]. Buffers that follow one another in rank order are one
// buffer to ccl; others get the blocks through a host copy, made when the operation completes
// (so these must be host memory).
inline event allgatherv(const void* send_buf, size_t send_count,
                        const vector_class<void*>& recv_bufs,
                        const vector_class<size_t>& recv_counts, datatype dtype,
                        const communicator& comm,
                        const allgatherv_attr& attr = default_allgatherv_attr,
                        const vector_class<event>& deps = {}) {
    static const char fn[] = "ccl::allgatherv";
    const detail::c_type t = detail::to_c(dtype, fn, false);
    const detail::comm_handle& h = detail::access::handle(comm, fn);
    const vector_class<size_t> counts = detail::per_rank(recv_counts, t, h, "recv_counts", fn);
    if (recv_bufs.size() != counts.size())
        detail::bad_argument(fn, "recv_bufs has " + std::to_string(recv_bufs.size()) +
                                     " buffers for a communicator of " + std::to_string(h.size) +
                                     " ranks");
    const size_t unit = t.bytes / t.scale;
    bool contiguous = true;
    size_t offset = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
        if (counts[r] &&
            static_cast<char*>(recv_bufs[r]) != static_cast<char*>(recv_bufs[0]) + offset)
            contiguous = false;
        offset += counts[r] * unit;
    }
    const size_t n = detail::scaled(send_count, t, fn);
    const ccl_coll_attr_t a = detail::to_c(attr.values());
    if (contiguous) {
        void* recv = recv_bufs.empty() ? nullptr : recv_bufs[0];
        return detail::start(deps, [&](ccl_request_t* req) {
            return ccl_allgatherv(send_buf, n, recv, counts.data(), t.dtype, h.comm, &a, req);
        });
    }
    std::unique_ptr<detail::pending> p = detail::make_pending();
    detail::stage(*p, detail::sum_bytes(counts, t, fn), fn);
    vector_class<size_t> block(counts.size());
    for (size_t r = 0; r < counts.size(); ++r) block[r] = counts[r] * unit;
    const vector_class<void*> bufs = recv_bufs;
    p->unstage = [bufs, block](const detail::pending& q) {
        size_t at = 0;
        for (size_t r = 0; r < bufs.size(); ++r) {
            if (block[r]) std::memcpy(bufs[r], q.staging.data() + at, block[r]);
            at += block[r];
        }
    };
    char* staging = p->staging.data();
    return detail::start(
        deps,
        [&](ccl_request_t* req) {
            return ccl_allgatherv(send_buf, n, staging, counts.data(), t.dtype, h.comm, &a, req);
        },
        std::move(p));
}

inline event allgatherv(const void* send_buf, size_t send_count,
                        const vector_class<void*>& recv_bufs,
                        const vector_class<size_t>& recv_counts, datatype dtype,
                        const communicator& comm, const stream& stream,
                        const allgatherv_attr& attr = default_allgatherv_attr,
                        const vector_class<event>& deps = {}) {
    (void)stream;
    return allgatherv(send_buf, send_count, recv_bufs, recv_counts, dtype, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event allgatherv(const BufferType* send_buf, size_t send_count, BufferType* recv_buf,
                 const vector_class<size_t>& recv_counts, const communicator& comm,
                 const allgatherv_attr& attr = default_allgatherv_attr,
                 const vector_class<event>& deps = {}) {
    return allgatherv(static_cast<const void*>(send_buf), send_count, static_cast<void*>(recv_buf),
                      recv_counts, native_type_info<BufferType>::dtype, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event allgatherv(const BufferType* send_buf, size_t send_count, BufferType* recv_buf,
                 const vector_class<size_t>& recv_counts, const communicator& comm,
                 const stream& stream, const allgatherv_attr& attr = default_allgatherv_attr,
                 const vector_class<event>& deps = {}) {
    (void)stream;
    return allgatherv(send_buf, send_count, recv_buf, recv_counts, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event allgatherv(const BufferType* send_buf, size_t send_count,
                 vector_class<BufferType*>& recv_bufs, const vector_class<size_t>& recv_counts,
                 const communicator& comm, const allgatherv_attr& attr = default_allgatherv_attr,
                 const vector_class<event>& deps = {}) {
    return allgatherv(static_cast<const void*>(send_buf), send_count, detail::as_void(recv_bufs),
                      recv_counts, native_type_info<BufferType>::dtype, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event allgatherv(const BufferType* send_buf, size_t send_count,
                 vector_class<BufferType*>& recv_bufs, const vector_class<size_t>& recv_counts,
                 const communicator& comm, const stream& stream,
                 const allgatherv_attr& attr = default_allgatherv_attr,
                 const vector_class<event>& deps = {}) {
    (void)stream;
    return allgatherv(send_buf, send_count, recv_bufs, recv_counts, comm, attr, deps);
}

/* allreduce: in place when send_buf == recv_buf. */

inline event allreduce(const void* send_buf, void* recv_buf, size_t count, datatype dtype,
                       reduction rtype, const communicator& comm,
                       const allreduce_attr& attr = default_allreduce_attr,
                       const vector_class<event>& deps = {}) {
    static const char fn[] = "ccl::allreduce";
    const detail::c_type t = detail::to_c(dtype, fn, true);
    const ccl_reduction_t op = detail::to_c(rtype, attr.values().fn, fn);
    const ccl_comm_t c = detail::access::handle(comm, fn).comm;
    const ccl_coll_attr_t a = detail::to_c(attr.values());
    return detail::start(deps, [&](ccl_request_t* req) {
        return ccl_allreduce(send_buf, recv_buf, count, t.dtype, op, c, &a, req);
    });
}

inline event allreduce(const void* send_buf, void* recv_buf, size_t count, datatype dtype,
                       reduction rtype, const communicator& comm, const stream& stream,
                       const allreduce_attr& attr = default_allreduce_attr,
                       const vector_class<event>& deps = {}) {
    (void)stream;
    return allreduce(send_buf, recv_buf, count, dtype, rtype, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event allreduce(const BufferType* send_buf, BufferType* recv_buf, size_t count, reduction rtype,
                const communicator& comm, const allreduce_attr& attr = default_allreduce_attr,
                const vector_class<event>& deps = {}) {
    return allreduce(static_cast<const void*>(send_buf), static_cast<void*>(recv_buf), count,
                     native_type_info<BufferType>::dtype, rtype, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event allreduce(const BufferType* send_buf, BufferType* recv_buf, size_t count, reduction rtype,
                const communicator& comm, const stream& stream,
                const allreduce_attr& attr = default_allreduce_attr,
                const vector_class<event>& deps = {}) {
    (void)stream;
    return allreduce(send_buf, recv_buf, count, rtype, comm, attr, deps);
}

/* alltoall: block j of send_buf (count elements) goes to rank j; in place when send == recv. */

inline event alltoall(const void* send_buf, void* recv_buf, size_t count, datatype dtype,
                      const communicator& comm, const alltoall_attr& attr = default_alltoall_attr,
                      const vector_class<event>& deps = {}) {
    static const char fn[] = "ccl::alltoall";
    const detail::c_type t = detail::to_c(dtype, fn, false);
    const ccl_comm_t c = detail::access::handle(comm, fn).comm;
    const size_t n = detail::scaled(count, t, fn);
    const ccl_coll_attr_t a = detail::to_c(attr.values());
    return detail::start(deps, [&](ccl_request_t* req) {
        return ccl_alltoall(send_buf, recv_buf, n, t.dtype, c, &a, req);
    });
}

inline event alltoall(const void* send_buf, void* recv_buf, size_t count, datatype dtype,
                      const communicator& comm, const stream& stream,
                      const alltoall_attr& attr = default_alltoall_attr,
                      const vector_class<event>& deps = {}) {
    (void)stream;
    return alltoall(send_buf, recv_buf, count, dtype, comm, attr, deps);
}

inline event alltoall(const vector_class<void*>&, const vector_class<void*>&, size_t, datatype,
                      const communicator&, const alltoall_attr& = default_alltoall_attr,
                      const vector_class<event>& = {}) {
    detail::refuse("ccl::alltoall",
                   "vectors of buffers are taken by allgatherv only (as in oneCCL)");
}

inline event alltoall(const vector_class<void*>& send_bufs, const vector_class<void*>& recv_bufs,
                      size_t count, datatype dtype, const communicator& comm, const stream& stream,
                      const alltoall_attr& attr = default_alltoall_attr,
                      const vector_class<event>& deps = {}) {
    (void)stream;
    return alltoall(send_bufs, recv_bufs, count, dtype, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event alltoall(const BufferType* send_buf, BufferType* recv_buf, size_t count,
               const communicator& comm, const alltoall_attr& attr = default_alltoall_attr,
               const vector_class<event>& deps = {}) {
    return alltoall(static_cast<const void*>(send_buf), static_cast<void*>(recv_buf), count,
                    native_type_info<BufferType>::dtype, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event alltoall(const BufferType* send_buf, BufferType* recv_buf, size_t count,
               const communicator& comm, const stream& stream,
               const alltoall_attr& attr = default_alltoall_attr,
               const vector_class<event>& deps = {}) {
    (void)stream;
    return alltoall(send_buf, recv_buf, count, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event alltoall(const vector_class<BufferType*>& send_bufs,
               const vector_class<BufferType*>& recv_bufs, size_t count, const communicator& comm,
               const alltoall_attr& attr = default_alltoall_attr,
               const vector_class<event>& deps = {}) {
    return alltoall(detail::as_void(send_bufs), detail::as_void(recv_bufs), count,
                    native_type_info<BufferType>::dtype, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event alltoall(const vector_class<BufferType*>& send_bufs,
               const vector_class<BufferType*>& recv_bufs, size_t count, const communicator& comm,
               const stream& stream, const alltoall_attr& attr = default_alltoall_attr,
               const vector_class<event>& deps = {}) {
    (void)stream;
    return alltoall(send_bufs, recv_bufs, count, comm, attr, deps);
}

/* alltoallv: block j of send_buf (send_counts[j] elements) goes to rank j; recv_counts[j] must
 * be rank j's send_counts[this rank]. In place (send_buf == recv_buf) through a host copy of
 * send_buf: ccl's alltoallv is never in place. */

inline event alltoallv(const void* send_buf, const vector_class<size_t>& send_counts,
                       void* recv_buf, const vector_class<size_t>& recv_counts, datatype dtype,
                       const communicator& comm,
                       const alltoallv_attr& attr = default_alltoallv_attr,
                       const vector_class<event>& deps = {}) {
    static const char fn[] = "ccl::alltoallv";
    const detail::c_type t = detail::to_c(dtype, fn, false);
    const detail::comm_handle& h = detail::access::handle(comm, fn);
    const vector_class<size_t> sc = detail::per_rank(send_counts, t, h, "send_counts", fn);
    const vector_class<size_t> rc = detail::per_rank(recv_counts, t, h, "recv_counts", fn);
    const ccl_coll_attr_t a = detail::to_c(attr.values());
    std::unique_ptr<detail::pending> p = detail::make_pending();
    const void* send = send_buf;
    const vector_class<event> none;
    const vector_class<event>* after = &deps;
    if (send_buf && send_buf == recv_buf) {
        detail::stage(*p, detail::sum_bytes(sc, t, fn), fn);
        detail::access::wait_all(deps);  // before the copy, as before the operation
        after = &none;
        if (!p->staging.empty()) std::memcpy(p->staging.data(), send_buf, p->staging.size());
        send = p->staging.data();
    }
    return detail::start(
        *after,
        [&](ccl_request_t* req) {
            return ccl_alltoallv(send, sc.data(), recv_buf, rc.data(), t.dtype, h.comm, &a, req);
        },
        std::move(p));
}

inline event alltoallv(const void* send_buf, const vector_class<size_t>& send_counts,
                       void* recv_buf, const vector_class<size_t>& recv_counts, datatype dtype,
                       const communicator& comm, const stream& stream,
                       const alltoallv_attr& attr = default_alltoallv_attr,
                       const vector_class<event>& deps = {}) {
    (void)stream;
    return alltoallv(send_buf, send_counts, recv_buf, recv_counts, dtype, comm, attr, deps);
}

inline event alltoallv(const vector_class<void*>&, const vector_class<size_t>&,
                       const vector_class<void*>&, const vector_class<size_t>&, datatype,
                       const communicator&, const alltoallv_attr& = default_alltoallv_attr,
                       const vector_class<event>& = {}) {
    detail::refuse("ccl::alltoallv",
                   "vectors of buffers are taken by allgatherv only (as in oneCCL)");
}

inline event alltoallv(const vector_class<void*>& send_bufs,
                       const vector_class<size_t>& send_counts,
                       const vector_class<void*>& recv_bufs,
                       const vector_class<size_t>& recv_counts, datatype dtype,
                       const communicator& comm, const stream& stream,
                       const alltoallv_attr& attr = default_alltoallv_attr,
                       const vector_class<event>& deps = {}) {
    (void)stream;
    return alltoallv(send_bufs, send_counts, recv_bufs, recv_counts, dtype, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event alltoallv(const BufferType* send_buf, const vector_class<size_t>& send_counts,
                BufferType* recv_buf, const vector_class<size_t>& recv_counts,
                const communicator& comm, const alltoallv_attr& attr = default_alltoallv_attr,
                const vector_class<event>& deps = {}) {
    return alltoallv(static_cast<const void*>(send_buf), send_counts, static_cast<void*>(recv_buf),
                     recv_counts, native_type_info<BufferType>::dtype, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event alltoallv(const BufferType* send_buf, const vector_class<size_t>& send_counts,
                BufferType* recv_buf, const vector_class<size_t>& recv_counts,
                const communicator& comm, const stream& stream,
                const alltoallv_attr& attr = default_alltoallv_attr,
                const vector_class<event>& deps = {}) {
    (void)stream;
    return alltoallv(send_buf, send_counts, recv_buf, recv_counts, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event alltoallv(const vector_class<BufferType*>& send_bufs, const vector_class<size_t>& send_counts,
                const vector_class<BufferType*>& recv_bufs, const vector_class<size_t>& recv_counts,
                const communicator& comm, const alltoallv_attr& attr = default_alltoallv_attr,
                const vector_class<event>& deps = {}) {
    return alltoallv(detail::as_void(send_bufs), send_counts, detail::as_void(recv_bufs),
                     recv_counts, native_type_info<BufferType>::dtype, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event alltoallv(const vector_class<BufferType*>& send_bufs, const vector_class<size_t>& send_counts,
                const vector_class<BufferType*>& recv_bufs, const vector_class<size_t>& recv_counts,
                const communicator& comm, const stream& stream,
                const alltoallv_attr& attr = default_alltoallv_attr,
                const vector_class<event>& deps = {}) {
    (void)stream;
    return alltoallv(send_bufs, send_counts, recv_bufs, recv_counts, comm, attr, deps);
}

/* barrier */

inline event barrier(const communicator& comm, const barrier_attr& attr = default_barrier_attr,
                     const vector_class<event>& deps = {}) {
    const ccl_comm_t c = detail::access::handle(comm, "ccl::barrier").comm;
    return detail::start(
        deps, [&](ccl_request_t* req) { return ccl_barrier(c, req); }, nullptr,
        attr.values().synchronous);
}

inline event barrier(const communicator& comm, const stream& stream,
                     const barrier_attr& attr = default_barrier_attr,
                     const vector_class<event>& deps = {}) {
    (void)stream;
    return barrier(comm, attr, deps);
}

/* broadcast: in place (buf), or from the root's send_buf into every rank's recv_buf (the root
 * copies send_buf to its recv_buf first, on the host, when the call is made). */

inline event broadcast(void* buf, size_t count, datatype dtype, int root, const communicator& comm,
                       const broadcast_attr& attr = default_broadcast_attr,
                       const vector_class<event>& deps = {}) {
    static const char fn[] = "ccl::broadcast";
    const detail::c_type t = detail::to_c(dtype, fn, false);
    const ccl_comm_t c = detail::access::handle(comm, fn).comm;
    const size_t n = detail::scaled(count, t, fn);
    const ccl_coll_attr_t a = detail::to_c(attr.values());
    return detail::start(
        deps, [&](ccl_request_t* req) { return ccl_broadcast(buf, n, t.dtype, root, c, &a, req); });
}

inline event broadcast(void* buf, size_t count, datatype dtype, int root, const communicator& comm,
                       const stream& stream, const broadcast_attr& attr = default_broadcast_attr,
                       const vector_class<event>& deps = {}) {
    (void)stream;
    return broadcast(buf, count, dtype, root, comm, attr, deps);
}

inline event broadcast(void* send_buf, void* recv_buf, size_t count, datatype dtype, int root,
                       const communicator& comm,
                       const broadcast_attr& attr = default_broadcast_attr,
                       const vector_class<event>& deps = {}) {
    static const char fn[] = "ccl::broadcast";
    const detail::c_type t = detail::to_c(dtype, fn, false);
    const detail::comm_handle& h = detail::access::handle(comm, fn);
    const size_t n = detail::scaled(count, t, fn);
    if (h.rank == root && send_buf != recv_buf && n) {
        if (!send_buf || !recv_buf) detail::bad_argument(fn, "send_buf or recv_buf is NULL");
        // The copy waits for `deps`, as the broadcast would.
        detail::access::wait_all(deps);
        std::memmove(recv_buf, send_buf, n * (t.bytes / t.scale));
    }
    return broadcast(recv_buf, count, dtype, root, comm, attr, deps);
}

inline event broadcast(void* send_buf, void* recv_buf, size_t count, datatype dtype, int root,
                       const communicator& comm, const stream& stream,
                       const broadcast_attr& attr = default_broadcast_attr,
                       const vector_class<event>& deps = {}) {
    (void)stream;
    return broadcast(send_buf, recv_buf, count, dtype, root, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event broadcast(BufferType* buf, size_t count, int root, const communicator& comm,
                const broadcast_attr& attr = default_broadcast_attr,
                const vector_class<event>& deps = {}) {
    return broadcast(static_cast<void*>(buf), count, native_type_info<BufferType>::dtype, root,
                     comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event broadcast(BufferType* buf, size_t count, int root, const communicator& comm,
                const stream& stream, const broadcast_attr& attr = default_broadcast_attr,
                const vector_class<event>& deps = {}) {
    (void)stream;
    return broadcast(buf, count, root, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event broadcast(BufferType* send_buf, BufferType* recv_buf, size_t count, int root,
                const communicator& comm, const broadcast_attr& attr = default_broadcast_attr,
                const vector_class<event>& deps = {}) {
    return broadcast(static_cast<void*>(send_buf), static_cast<void*>(recv_buf), count,
                     native_type_info<BufferType>::dtype, root, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event broadcast(BufferType* send_buf, BufferType* recv_buf, size_t count, int root,
                const communicator& comm, const stream& stream,
                const broadcast_attr& attr = default_broadcast_attr,
                const vector_class<event>& deps = {}) {
    (void)stream;
    return broadcast(send_buf, recv_buf, count, root, comm, attr, deps);
}

/* recv and send: messages from one rank to another match in the order they were sent. */

}  // namespace v1

namespace detail {
// A send or a receive: `call(elements, c_datatype, comm, req)` is the C call.
template <class Call>
event pt2pt(const char* fn, size_t count, datatype dtype, const communicator& comm,
            const pt2pt_attr& attr, const vector_class<event>& deps, Call call) {
    const c_type t = to_c(dtype, fn, false);
    const ccl_comm_t c = access::handle(comm, fn).comm;
    const size_t n = scaled(count, t, fn);
    return start(
        deps, [&](ccl_request_t* req) { return call(n, t.dtype, c, req); }, nullptr,
        attr.values().synchronous);
}
}  // namespace detail

namespace v1 {

inline event recv(void* buf, size_t count, datatype dtype, int peer, const communicator& comm,
                  const pt2pt_attr& attr = default_pt2pt_attr,
                  const vector_class<event>& deps = {}) {
    return detail::pt2pt("ccl::recv", count, dtype, comm, attr, deps,
                         [&](size_t n, ccl_datatype_t t, ccl_comm_t c, ccl_request_t* req) {
                             return ccl_recv(buf, n, t, peer, c, req);
                         });
}

inline event recv(void* buf, size_t count, datatype dtype, int peer, const communicator& comm,
                  const stream& stream, const pt2pt_attr& attr = default_pt2pt_attr,
                  const vector_class<event>& deps = {}) {
    (void)stream;
    return recv(buf, count, dtype, peer, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event recv(BufferType* buf, size_t count, int peer, const communicator& comm,
           const pt2pt_attr& attr = default_pt2pt_attr, const vector_class<event>& deps = {}) {
    return recv(static_cast<void*>(buf), count, native_type_info<BufferType>::dtype, peer, comm,
                attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event recv(BufferType* buf, size_t count, int peer, const communicator& comm, const stream& stream,
           const pt2pt_attr& attr = default_pt2pt_attr, const vector_class<event>& deps = {}) {
    (void)stream;
    return recv(buf, count, peer, comm, attr, deps);
}

inline event send(void* buf, size_t count, datatype dtype, int peer, const communicator& comm,
                  const pt2pt_attr& attr = default_pt2pt_attr,
                  const vector_class<event>& deps = {}) {
    return detail::pt2pt("ccl::send", count, dtype, comm, attr, deps,
                         [&](size_t n, ccl_datatype_t t, ccl_comm_t c, ccl_request_t* req) {
                             return ccl_send(buf, n, t, peer, c, req);
                         });
}

inline event send(void* buf, size_t count, datatype dtype, int peer, const communicator& comm,
                  const stream& stream, const pt2pt_attr& attr = default_pt2pt_attr,
                  const vector_class<event>& deps = {}) {
    (void)stream;
    return send(buf, count, dtype, peer, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event send(BufferType* buf, size_t count, int peer, const communicator& comm,
           const pt2pt_attr& attr = default_pt2pt_attr, const vector_class<event>& deps = {}) {
    return send(static_cast<void*>(buf), count, native_type_info<BufferType>::dtype, peer, comm,
                attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event send(BufferType* buf, size_t count, int peer, const communicator& comm, const stream& stream,
           const pt2pt_attr& attr = default_pt2pt_attr, const vector_class<event>& deps = {}) {
    (void)stream;
    return send(buf, count, peer, comm, attr, deps);
}

/* reduce: the reduction lands in recv_buf at root only. */

inline event reduce(const void* send_buf, void* recv_buf, size_t count, datatype dtype,
                    reduction rtype, int root, const communicator& comm,
                    const reduce_attr& attr = default_reduce_attr,
                    const vector_class<event>& deps = {}) {
    static const char fn[] = "ccl::reduce";
    const detail::c_type t = detail::to_c(dtype, fn, true);
    const ccl_reduction_t op = detail::to_c(rtype, attr.values().fn, fn);
    const ccl_comm_t c = detail::access::handle(comm, fn).comm;
    const ccl_coll_attr_t a = detail::to_c(attr.values());
    return detail::start(deps, [&](ccl_request_t* req) {
        return ccl_reduce(send_buf, recv_buf, count, t.dtype, op, root, c, &a, req);
    });
}

inline event reduce(const void* send_buf, void* recv_buf, size_t count, datatype dtype,
                    reduction rtype, int root, const communicator& comm, const stream& stream,
                    const reduce_attr& attr = default_reduce_attr,
                    const vector_class<event>& deps = {}) {
    (void)stream;
    return reduce(send_buf, recv_buf, count, dtype, rtype, root, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event reduce(const BufferType* send_buf, BufferType* recv_buf, size_t count, reduction rtype,
             int root, const communicator& comm, const reduce_attr& attr = default_reduce_attr,
             const vector_class<event>& deps = {}) {
    return reduce(static_cast<const void*>(send_buf), static_cast<void*>(recv_buf), count,
                  native_type_info<BufferType>::dtype, rtype, root, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event reduce(const BufferType* send_buf, BufferType* recv_buf, size_t count, reduction rtype,
             int root, const communicator& comm, const stream& stream,
             const reduce_attr& attr = default_reduce_attr, const vector_class<event>& deps = {}) {
    (void)stream;
    return reduce(send_buf, recv_buf, count, rtype, root, comm, attr, deps);
}

/* reduce_scatter: send_buf holds size * recv_count elements; recv_buf gets the reduction of
 * block `rank` of every rank's. */

inline event reduce_scatter(const void* send_buf, void* recv_buf, size_t recv_count, datatype dtype,
                            reduction rtype, const communicator& comm,
                            const reduce_scatter_attr& attr = default_reduce_scatter_attr,
                            const vector_class<event>& deps = {}) {
    static const char fn[] = "ccl::reduce_scatter";
    const detail::c_type t = detail::to_c(dtype, fn, true);
    const ccl_reduction_t op = detail::to_c(rtype, attr.values().fn, fn);
    const ccl_comm_t c = detail::access::handle(comm, fn).comm;
    const ccl_coll_attr_t a = detail::to_c(attr.values());
    return detail::start(deps, [&](ccl_request_t* req) {
        return ccl_reduce_scatter(send_buf, recv_buf, recv_count, t.dtype, op, c, &a, req);
    });
}

inline event reduce_scatter(const void* send_buf, void* recv_buf, size_t recv_count, datatype dtype,
                            reduction rtype, const communicator& comm, const stream& stream,
                            const reduce_scatter_attr& attr = default_reduce_scatter_attr,
                            const vector_class<event>& deps = {}) {
    (void)stream;
    return reduce_scatter(send_buf, recv_buf, recv_count, dtype, rtype, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event reduce_scatter(const BufferType* send_buf, BufferType* recv_buf, size_t recv_count,
                     reduction rtype, const communicator& comm,
                     const reduce_scatter_attr& attr = default_reduce_scatter_attr,
                     const vector_class<event>& deps = {}) {
    return reduce_scatter(static_cast<const void*>(send_buf), static_cast<void*>(recv_buf),
                          recv_count, native_type_info<BufferType>::dtype, rtype, comm, attr, deps);
}

template <class BufferType,
          class = typename std::enable_if<is_native_type_supported<BufferType>(), event>::type>
event reduce_scatter(const BufferType* send_buf, BufferType* recv_buf, size_t recv_count,
                     reduction rtype, const communicator& comm, const stream& stream,
                     const reduce_scatter_attr& attr = default_reduce_scatter_attr,
                     const vector_class<event>& deps = {}) {
    (void)stream;
    return reduce_scatter(send_buf, recv_buf, recv_count, rtype, comm, attr, deps);
}

}  // namespace v1

using namespace v1;

}  // namespace ccl

namespace oneapi {
namespace ccl = ::ccl;
}

#endif  // ONEAPI_CCL_HPP
