// ccl_stream_create_ze / ccl_stream_destroy.
#include "streams.h"

#include <cstddef>

namespace ccl::capi {

namespace {
constinit HandleTable<ze::Stream, 4> g_stream_table;  // never destroyed (api.h)
}

HandleTable<ze::Stream, 4>& stream_table() { return g_stream_table; }

std::shared_ptr<ze::Stream> stream_of(const ccl_coll_attr_t* attr) {
    if (!has_stream(attr)) return nullptr;
    return stream_table().get(attr->stream, "stream");
}

}  // namespace ccl::capi

using namespace ccl;
using namespace ccl::capi;

extern "C" {

ccl_result_t ccl_stream_create_ze(ccl_stream_type_t type, void* context, void* device, void* handle,
                                  ccl_stream_t* stream) {
    return guarded(__func__, [&] {
        require_out(stream, "stream");
        if (type != CCL_STREAM_ZE_IMMEDIATE_COMMAND_LIST && type != CCL_STREAM_ZE_COMMAND_QUEUE)
            throw Error(CCL_ERROR_INVALID_ARGUMENT,
                        "type " + std::to_string(int(type)) + " is not a ccl_stream_type_t");
        if (!context || !device || !handle)
            throw Error(CCL_ERROR_INVALID_ARGUMENT, "context, device and handle must not be NULL");
        ze::require_enabled("ccl_stream_create_ze");
        auto kind = type == CCL_STREAM_ZE_COMMAND_QUEUE ? ze::Stream::Kind::command_queue
                                                        : ze::Stream::Kind::command_list;
        *stream = stream_table().add<ccl_stream_t>(
            std::make_shared<ze::Stream>(kind, context, device, handle));
    });
}

ccl_result_t ccl_stream_destroy(ccl_stream_t stream) {
    return guarded(__func__, [&] { stream_table().remove(stream, "stream"); });
}

}  // extern "C"
