// The objects behind ccl_stream_t (Level Zero streams, docs/xpu.md).
#pragma once

#include <cstddef>
#include <memory>

#include "api.h"
#include "core/device.h"

namespace ccl::capi {

HandleTable<ze::Stream, 4>& stream_table();

// Whether a call's attributes carry a stream (not attributes from before the field).
inline bool has_stream(const ccl_coll_attr_t* attr) {
    return attr && attr->size >= offsetof(ccl_coll_attr_t, stream) + sizeof(ccl_stream_t) &&
           attr->stream;
}

// The stream a call's attributes carry, or nullptr.
std::shared_ptr<ze::Stream> stream_of(const ccl_coll_attr_t* attr);

}  // namespace ccl::capi
