// The objects behind ccl_stream_t (Level Zero streams, docs/xpu.md).
#pragma once

#include <memory>

#include "api.h"
#include "core/device.h"

namespace ccl::capi {

HandleTable<ze::Stream, 4>& stream_table();

// The stream a call's attributes carry, or nullptr (none, or attributes from before the field).
std::shared_ptr<ze::Stream> stream_of(const ccl_coll_attr_t* attr);

}  // namespace ccl::capi
